"""The numpy readers, without TensorFlow: :func:`read_batches` and :func:`read_examples`."""

from __future__ import annotations

from typing import Dict, Iterator, Optional

from ..format.dataset import Paths, dataset_info
from .dynamic_masks import masker_for
from .stages import DEFAULT_CHUNK, check_format, decoded_chunks, formatted, masked, rebatched, unbatched

__all__ = ["read_batches", "read_examples", "ResumableBatches"]

PACKED_BATCH = 64


def read_batches(paths: Paths, batch_size: int = DEFAULT_CHUNK, max_seq_length: Optional[int] = None,
                 max_predictions_per_seq: Optional[int] = None, drop_remainder: bool = False,
                 verify_crc: bool = True, int32: bool = False,
                 invert_input_mask: bool = False, compression="auto", mask=None,
                 canonical_names: bool = False, format: str = "google",
                 packed_attention: str = "block_diagonal", verify_checksums: bool = True,
                 resumable: bool = False, rank: int = 0, world_size: int = 1, shuffle_buffer: int = 0,
                 seed: int = 0, epoch: int = 0, state: Optional[dict] = None) -> Iterator[Dict[str, "np.ndarray"]]:
    """Yield ``{feature: (batch, length) array}`` over the shards in order, without TensorFlow.

    The features are the dataset's (its manifest's ``"features"``, else the first record's):
    e.g. no ``segment_ids``/``next_sentence_labels`` for MLM-only data, ``input_word_ids`` with
    v2 names (``canonical_names=True`` renames them ``input_ids``/``segment_ids``).  int64
    features come back as ``int64`` (``int32=True`` casts them, as the tf.data loader does),
    ``masked_lm_weights`` as ``float32``.  ``invert_input_mask`` gives 1 for padding and 0 for
    tokens (Cerebras style).  ``compression``: "auto" (the manifest's, else sniffed per file),
    None, "gzip" or "zlib".

    ``mask``: load-time masking of unmasked (``--disable_masking``) data: True (options from the
    manifest, random seed), a dict of :func:`dynamic_masking` options (e.g. ``{"seed": 0}``) or a
    :class:`DynamicMasking`; batch number ``k`` (from 0) is masked with ``key=(k,)``.  Truncated
    or corrupt files raise :class:`bert_data.format.tfrecord.CorruptRecordError`.

    ``verify_checksums`` (default True): before the first record of a shard, its bytes are checked
    against the SHA-256 its manifest records; a damaged shard raises
    :class:`bert_data.format.checksums.ChecksumError` naming it, and none of its records is
    returned.  Each file is hashed once per process (again if it changes on disk); False skips it.

    ``format="transformers"``: the inputs of Hugging Face transformers' models instead
    (``input_ids``, ``attention_mask``, ``token_type_ids``, ``labels`` with -100 where nothing
    is predicted, ``next_sentence_label`` of shape ``(batch,)`` or ``sentence_order_label`` for
    sentence-order data; MLM-only data: the first, second and fourth only), all int64;
    ``int32`` and ``invert_input_mask`` do not apply, ``canonical_names`` changes nothing.
    Unmasked data needs ``mask=``.  Packed rows (``--pack_sequences``) also give ``position_ids``,
    a block-diagonal ``attention_mask`` (or, ``packed_attention="cu_seqlens"``, flash attention's
    ``cu_seq_lens_q``/``_k`` and ``max_length_q``/``_k``) and per-instance pair labels beside
    ``next_sentence_positions`` (see :func:`bert_data.load.stages.to_transformers`).

    ``resumable=True``: a :class:`ResumableBatches` iterator instead, with ``state_dict()`` /
    ``load_state_dict()``: rank ``rank`` of ``world_size``'s batches of one record order per
    ``(seed, epoch)`` (``shuffle_buffer > 0`` shuffles: shards in a seeded order, then a seeded
    permutation within each window of ``shuffle_buffer`` positions), load-time masks drawn per
    record, keyed by ``(epoch, record)``; ``state`` (a ``state_dict()``, under any world size or
    batch size) resumes: the records of the epoch not yet consumed, each once, with the same
    masks (see ``docs/loading.md``, "Resuming mid-epoch").
    """
    if resumable:
        return ResumableBatches(paths, batch_size, max_seq_length, max_predictions_per_seq, drop_remainder,
                                verify_crc, int32, invert_input_mask, compression, mask, canonical_names, format,
                                packed_attention, rank, world_size, shuffle_buffer, seed, epoch, state,
                                verify_checksums)
    if state is not None:
        raise ValueError("state= resumes a resumable reader: add resumable=True")
    return _batches(paths, batch_size, max_seq_length, max_predictions_per_seq, drop_remainder, verify_crc, int32,
                    invert_input_mask, compression, mask, canonical_names, format, packed_attention, verify_checksums)


def _batches(paths, batch_size, max_seq_length, max_predictions_per_seq, drop_remainder, verify_crc, int32,
             invert_input_mask, compression, mask, canonical_names, format, packed_attention, verify_checksums):
    # A generator: as before resumable readers, the options are checked on the first next().
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    info = dataset_info(paths, max_seq_length, max_predictions_per_seq, compression)
    masker = masker_for(mask, info)
    check_format(format, info, masker is not None, int32, invert_input_mask, packed_attention)
    chunks = decoded_chunks(info.files, info.specs, max(batch_size, DEFAULT_CHUNK), verify_crc, info.compressions,
                            verify_checksums=verify_checksums)
    batches = masked(rebatched(chunks, batch_size, drop_remainder), masker)
    yield from formatted(batches, format, info, int32, invert_input_mask, canonical_names, packed_attention)


class ResumableBatches:
    """The batches of :func:`read_batches` with ``resumable=True``: an iterator with
    ``state_dict()`` (where it stands: the records of the epoch every rank consumed, the epoch and
    seed) and ``load_state_dict(state)`` (continue from there, under this reader's rank, world
    size and batch size; the next batch is the first not consumed).  ``set_epoch(e)`` starts
    epoch ``e`` from its beginning."""

    def __init__(self, paths, batch_size, max_seq_length, max_predictions_per_seq, drop_remainder, verify_crc,
                 int32, invert_input_mask, compression, mask, canonical_names, format, packed_attention, rank,
                 world_size, shuffle_buffer, seed, epoch, state, verify_checksums=True):
        from .resumable import ReaderPosition, shard_counts

        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is not in [0, world_size={world_size})")
        self.info = dataset_info(paths, max_seq_length, max_predictions_per_seq, compression)
        self.masker = masker_for(mask, self.info)
        check_format(format, self.info, self.masker is not None, int32, invert_input_mask, packed_attention)
        self.options = (format, self.info, int32, invert_input_mask, canonical_names, packed_attention)
        self.rank, self.drop_remainder, self.verify_crc = int(rank), drop_remainder, verify_crc
        self.verify_checksums = verify_checksums
        self.counts = shard_counts(self.info)  # from the manifest: skipping never decodes
        self.position = ReaderPosition(seed, shuffle_buffer, sum(self.counts), world_size, batch_size)
        self.position.restart(epoch)
        if state is not None:
            self.position.load_state_dict(state)
        self._batches = None

    @property
    def epoch(self) -> int:
        return self.position.epoch

    def set_epoch(self, epoch: int) -> None:
        self.position.restart(epoch)
        self._batches = None

    def state_dict(self) -> dict:
        return self.position.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.position.load_state_dict(state)
        self._batches = None

    def __iter__(self):
        return self

    def __next__(self):
        from .resumable import EpochOrder, resumable_batches

        if self._batches is None:
            order = EpochOrder(self.counts, self.position.seed, self.position.epoch, self.position.shuffle_buffer)
            batches = resumable_batches(self.info, order, self.position, self.rank, 0, 1, self.drop_remainder,
                                        self.masker, self.verify_crc, self.verify_checksums)
            self._batches = formatted(batches, *self.options)
        return next(self._batches)


def read_examples(paths: Paths, max_seq_length: Optional[int] = None,
                  max_predictions_per_seq: Optional[int] = None, verify_crc: bool = True,
                  int32: bool = False, invert_input_mask: bool = False, compression="auto",
                  mask=None, canonical_names: bool = False,
                  format: str = "google", verify_checksums: bool = True) -> Iterator[Dict[str, "np.ndarray"]]:
    """Yield one ``{feature: 1-D numpy array}`` dict per record, in file order, without TensorFlow.

    The layout comes from the manifest next to the shards, else from the first record (else the
    arguments).  Records are decoded in vectorised chunks of 4,096 (and load-time masks, with
    ``mask=``, drawn per chunk: as ``read_batches(batch_size=4096, mask=...)``); the arrays yielded
    are views into a chunk (copy them to keep one record without its chunk).  Options as
    :func:`read_batches`; with ``format="transformers"`` the sentence-pair label is a numpy
    scalar (a batch of them is ``(batch,)``, as the models take it); packed rows are then
    formatted (and load-time masks drawn) 64 records at a time.
    """
    # Packed rows in format="transformers" carry an L x L attention mask each: formatted a few at a time.
    packed = format == "transformers" and dataset_info(paths, max_seq_length, max_predictions_per_seq,
                                                       compression).flags["packed"]
    batch_size = PACKED_BATCH if packed else DEFAULT_CHUNK
    yield from unbatched(read_batches(paths, batch_size, max_seq_length, max_predictions_per_seq,
                                      verify_crc=verify_crc, int32=int32, invert_input_mask=invert_input_mask,
                                      compression=compression, mask=mask, canonical_names=canonical_names,
                                      format=format, verify_checksums=verify_checksums))
