"""The PyTorch reader: :class:`TorchDataset`, an ``IterableDataset`` over the numpy stages that
splits the records across DataLoader workers and distributed ranks.  The class is built on first
access, so importing this module never imports torch."""

from __future__ import annotations

from typing import Optional

from ..format.dataset import Paths

__all__ = ["TorchDataset"]

_TORCH_CLASS = None


def _torch_dataset_class():
    """Build (once) the IterableDataset subclass; importing torch only now."""
    global _TORCH_CLASS
    if _TORCH_CLASS is not None:
        return _TORCH_CLASS
    import numpy as np

    try:
        import torch
    except ImportError as error:
        raise ImportError(f"bert_data TorchDataset needs PyTorch, which is not installed ({error}): "
                          "pip install 'bert_data[torch]' (or torch)") from error
    from torch.utils.data import IterableDataset, get_worker_info

    from ..format.dataset import dataset_info
    from .dynamic_masks import masker_for
    from .stages import check_format, decoded_chunks, formatted, masked, reader_share, rebatched, shuffled, unbatched

    def tensor(value):
        # A record's sentence-pair label in format="transformers" is a numpy scalar: a 0-d
        # tensor, so that default collation stacks them to (batch,), the shape the models take
        # (np.ascontiguousarray would make it (1,)).
        if np.ndim(value) == 0:
            return torch.tensor(value)
        return torch.from_numpy(np.ascontiguousarray(value))

    # Records formatted together when items are single records.
    RECORD_BATCH = 64

    def tensors(batch):
        return {name: tensor(value) for name, value in batch.items()}

    class TorchDataset(IterableDataset):
        """Records as dicts of ``torch`` tensors, split across DataLoader workers and ranks.

        ``TorchDataset(paths, batch_size=None, ...)``: with ``batch_size=None`` each item is one
        record (``{name: tensor[length]}``; DataLoader's default collation stacks them); with a
        ``batch_size`` each item is already a batch (``{name: tensor[batch, length]}``; use
        ``DataLoader(ds, batch_size=None)``), which is much faster.

        Splitting is deterministic.  Reader number ``g = rank * num_workers + worker_id`` of
        ``G = world_size * num_workers`` gets, with ``split_by="file"``, the shards ``g, g+G, ...``
        (in shuffled order when shuffling: all readers use the same permutation), and with
        ``split_by="record"`` the records whose running index ``i`` (over the shards in order)
        has ``i % G == g``: equal counts to within one per shard, at the cost of every reader
        reading (not decoding) every shard.  ``"auto"``: by file when there are at least ``G``
        shards, else by record.

        ``shuffle_buffer > 0`` shuffles records within each reader through a buffer, seeded by
        ``(seed, epoch, g)``; call :meth:`set_epoch` between epochs.  int64 features become
        ``torch.long`` (``int32=True``: ``torch.int32``), weights ``torch.float32``.

        The features are the dataset's layout (see ``bert_data.read_batches``; ``canonical_names``);
        ``compression`` as there.  ``mask`` (as in ``read_batches``) masks unmasked data at
        load time, per decoded chunk of records before shuffling, keyed by ``(epoch, g, chunk)``:
        new masks every epoch, different ones in every reader, reproducible for a seed.

        ``format="transformers"``: items are the inputs of Hugging Face transformers' models
        (``input_ids``, ``attention_mask``, ``token_type_ids``, ``labels``, ``next_sentence_label``
        or ``sentence_order_label``; see ``bert_data.read_batches``), all ``torch.long``, so
        ``model(**batch)`` gives the loss.  Packed rows (``--pack_sequences``) also give
        ``position_ids``, a block-diagonal ``attention_mask`` ``(1, L, L)`` a record and
        per-instance pair labels with ``next_sentence_positions`` (see ``bert_data.read_batches``).

        ``verify_checksums`` (default True): each reader checks a shard's bytes against its
        manifest's SHA-256 before returning any of its records, as ``bert_data.read_batches``
        does; a damaged shard raises ``ChecksumError`` naming it.  False skips the check.
        """

        def __init__(self, paths: Paths, batch_size: Optional[int] = None,
                     max_seq_length: Optional[int] = None, max_predictions_per_seq: Optional[int] = None,
                     split_by: str = "auto", shuffle_buffer: int = 0, seed: int = 0,
                     drop_remainder: bool = False, int32: bool = False, invert_input_mask: bool = False,
                     rank: Optional[int] = None, world_size: Optional[int] = None, verify_crc: bool = True,
                     compression="auto", mask=None, canonical_names: bool = False, format: str = "google",
                     verify_checksums: bool = True):
            super().__init__()
            if split_by not in ("auto", "file", "record"):
                raise ValueError(f"split_by must be 'auto', 'file' or 'record', got {split_by!r}")
            info = dataset_info(paths, max_seq_length, max_predictions_per_seq, compression)
            self.masker = masker_for(mask, info)
            check_format(format, info, self.masker is not None, int32, invert_input_mask)
            self.format = format
            self.canonical_names = canonical_names
            self.info = info
            self.files = list(info.files)
            self.batch_size = batch_size
            self.split_by = split_by
            self.shuffle_buffer = int(shuffle_buffer)
            self.seed = int(seed)
            self.epoch = 0
            self.drop_remainder = drop_remainder
            self.int32 = int32
            self.invert_input_mask = invert_input_mask
            self.verify_crc = verify_crc
            self.verify_checksums = verify_checksums
            if rank is None or world_size is None:
                dist = torch.distributed
                if dist.is_available() and dist.is_initialized():
                    rank = dist.get_rank() if rank is None else rank
                    world_size = dist.get_world_size() if world_size is None else world_size
            self.rank = int(rank or 0)
            self.world_size = int(world_size or 1)
            if not 0 <= self.rank < self.world_size:
                raise ValueError(f"rank {self.rank} is not in [0, world_size={self.world_size})")

        def set_epoch(self, epoch: int) -> None:
            self.epoch = int(epoch)

        def reader(self):
            """``(g, G)`` for the calling worker."""
            worker = get_worker_info()
            worker_id, num_workers = (worker.id, worker.num_workers) if worker else (0, 1)
            return self.rank * num_workers + worker_id, self.world_size * num_workers

        def assignment(self, g: int, total: int):
            """``(files, keep)`` for reader ``g`` of ``total``: its shards and record filter."""
            order = None
            if self.shuffle_buffer > 0:
                order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.files))
            return reader_share(self.files, g, total, self.split_by, order)

        def _chunks(self):
            """This reader's records, decoded, masked, post-processed and shuffled, in chunks."""
            g, total = self.reader()
            files, keep = self.assignment(g, total)
            if not files:
                return iter(())
            chunks = decoded_chunks(files, self.info.specs, verify_crc=self.verify_crc,
                                    compressions=self.info.compressions, keep=keep,
                                    verify_checksums=self.verify_checksums)
            chunks = masked(chunks, self.masker, (self.epoch, g))
            if self.shuffle_buffer > 0:
                chunks = shuffled(chunks, self.shuffle_buffer, np.random.default_rng([self.seed, self.epoch, g]))
            return chunks

        def _formatted(self, batches):
            # After shuffling and batching: row-wise either way, and a packed row's
            # block-diagonal attention mask (L x L) is built for a batch at a time, never a chunk.
            return formatted(batches, self.format, self.info, self.int32, self.invert_input_mask,
                             self.canonical_names)

        def __iter__(self):
            if self.batch_size is None:
                rows = rebatched(self._chunks(), RECORD_BATCH)
                return (tensors(row) for row in unbatched(self._formatted(rows)))
            batches = rebatched(self._chunks(), int(self.batch_size), self.drop_remainder)
            return (tensors(batch) for batch in self._formatted(batches))

    TorchDataset.__module__ = __name__
    TorchDataset.__qualname__ = "TorchDataset"
    _TORCH_CLASS = TorchDataset
    return TorchDataset


def __getattr__(name):
    # ``bert_data.load.torch_data.TorchDataset`` is a real class (usable with isinstance), built on
    # first access so that importing this module never imports torch.
    if name == "TorchDataset":
        return _torch_dataset_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
