"""The numpy readers, without TensorFlow: :func:`read_batches` and :func:`read_examples`."""

from __future__ import annotations

from typing import Dict, Iterator, Optional

from ..format.dataset import Paths, dataset_info
from .dynamic_masks import masker_for
from .stages import DEFAULT_CHUNK, check_format, decoded_chunks, formatted, masked, rebatched, unbatched

__all__ = ["read_batches", "read_examples"]

PACKED_BATCH = 64


def read_batches(paths: Paths, batch_size: int = DEFAULT_CHUNK, max_seq_length: Optional[int] = None,
                 max_predictions_per_seq: Optional[int] = None, drop_remainder: bool = False,
                 verify_crc: bool = True, int32: bool = False,
                 invert_input_mask: bool = False, compression="auto", mask=None,
                 canonical_names: bool = False, format: str = "google",
                 packed_attention: str = "block_diagonal",
                 verify_checksums: bool = True) -> Iterator[Dict[str, "np.ndarray"]]:
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
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    info = dataset_info(paths, max_seq_length, max_predictions_per_seq, compression)
    masker = masker_for(mask, info)
    check_format(format, info, masker is not None, int32, invert_input_mask, packed_attention)
    chunks = decoded_chunks(info.files, info.specs, max(batch_size, DEFAULT_CHUNK), verify_crc, info.compressions,
                            verify_checksums=verify_checksums)
    batches = masked(rebatched(chunks, batch_size, drop_remainder), masker)
    yield from formatted(batches, format, info, int32, invert_input_mask, canonical_names, packed_attention)


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
