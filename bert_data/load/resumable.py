"""Readers that resume mid-epoch: the order of an epoch, who reads which records, and the state
a trainer checkpoints (PyTorch's ``state_dict()`` / ``load_state_dict()`` protocol, which
torchdata's ``StatefulDataLoader`` calls).

One global record order per ``(seed, epoch)``, independent of how many readers there are
(:class:`EpochOrder`): the shards (in a seeded order when shuffling), their records in order,
then a seeded permutation within each window of ``shuffle_buffer`` consecutive positions.
Readers take positions by *step*: with per-rank batch ``B`` and world size ``R``, rank ``r``'s
batch of step ``s`` is positions ``[origin + (s*R + r)*B, +B)``, and DataLoader worker ``w`` of
``W`` takes its rank's steps ``s = w (mod W)``, so the DataLoader's round robin hands them out
in step order.  After step ``s`` every step before it has been handed out, so the state
``steps = s + 1`` says exactly what was consumed; resuming under another layout (world size,
workers, batch size) continues from ``origin + steps*R*B`` records, each remaining one once.

Load-time masks are drawn per record, keyed by ``(epoch, record index in the dataset)``, so a
record gets the same mask whatever the layout or the point of resumption.
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from .stages import Batch, DEFAULT_CHUNK

__all__ = ["STATE_VERSION", "EpochOrder", "ReaderPosition", "shard_counts", "resumable_batches", "merged_state"]

STATE_VERSION = 1
# Salts of the random streams, so that they never meet another reader's keys.
_WINDOW_STREAM = 0x5752  # "WR": the permutation of a window
_RECORD_MASK_STREAM = 0x524D  # "RM": a record's load-time mask


def shard_counts(info) -> List[int]:
    """Records per shard of ``info`` (a :class:`~bert_data.format.dataset.DatasetInfo`), from the
    manifests (no file opened), else by counting the shard's records (reading, not decoding)."""
    import os

    listed: Dict[str, int] = {}
    for path, manifest in info.manifests.items():
        directory = os.path.dirname(os.path.abspath(path))
        for name, count in manifest.examples_per_file.items():
            listed[os.path.join(directory, name)] = int(count)
    return [listed[os.path.abspath(f)] if os.path.abspath(f) in listed else _count_records(info, f)
            for f in info.files]


def _count_records(info, path: str) -> int:
    from ..format.dataset import read_instance_columns
    from ..format.output_formats import format_of_path
    from ..format.tfrecord import iter_records

    if format_of_path(path).framed_records:
        return sum(1 for _ in iter_records(path, verify_crc=False, compression=info.compressions.get(path)))
    return sum(len(next(iter(batch.values()))) for batch in read_instance_columns(path, info.specs, DEFAULT_CHUNK))


class EpochOrder:
    """The global order of one epoch: position ``p`` (0 <= p < total) -> the record there."""

    def __init__(self, counts: Sequence[int], seed: int, epoch: int, shuffle_buffer: int = 0):
        self.counts = np.asarray(counts, dtype=np.int64)
        self.seed, self.epoch = int(seed), int(epoch)
        if shuffle_buffer > 0:
            # The shard order of the per-reader shuffle (TorchDataset.assignment): the same key.
            self.shard_order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.counts))
        else:
            self.shard_order = np.arange(len(self.counts))
        self.starts = np.concatenate([[0], np.cumsum(self.counts[self.shard_order])])  # by slot in shard order
        self.file_bases = np.concatenate([[0], np.cumsum(self.counts)])  # record index of each file's first
        self.total = int(self.starts[-1])
        self.shuffled = shuffle_buffer > 1
        # Without shuffling, windows only bound how many records a reader decodes at once.
        self.window = int(shuffle_buffer) if self.shuffled else DEFAULT_CHUNK
        self._cached: Tuple[int, Optional[np.ndarray]] = (-1, None)

    def permutation(self, window: int) -> np.ndarray:
        if self._cached[0] != window:
            size = min(self.window, self.total - window * self.window)
            rng = np.random.default_rng([self.seed, self.epoch, _WINDOW_STREAM, window])
            self._cached = (window, rng.permutation(size))
        return self._cached[1]

    def sources(self, positions: np.ndarray, window: int) -> np.ndarray:
        """Index in shard order (shards concatenated) of the records at ``positions`` (all in ``window``)."""
        if not self.shuffled:
            return positions
        base = window * self.window
        return base + self.permutation(window)[positions - base]

    def locate(self, sources: np.ndarray):
        """``(file number, row in file, record index in the dataset)`` arrays of shard-order indices."""
        slots = np.searchsorted(self.starts, sources, side="right") - 1
        files = self.shard_order[slots]
        rows = sources - self.starts[slots]
        return files, rows, self.file_bases[files] + rows


class ReaderPosition:
    """Where one reader (a rank, or one DataLoader worker of it) stands in an epoch, and the
    state a checkpoint keeps."""

    def __init__(self, seed: int, shuffle_buffer: int, total: int, world_size: int, batch_size: int):
        self.seed, self.shuffle_buffer, self.total = int(seed), int(shuffle_buffer), int(total)
        self.world_size, self.batch_size = int(world_size), int(batch_size)
        self.epoch = 0
        self.origin = 0  # records consumed before step 0
        self.steps = 0  # steps (of every rank) consumed since the origin
        # Worker w of W takes the steps s with s - phase = w (mod W): phase is the first step of
        # the pass, which a DataLoader's round robin gives to worker 0.
        self.phase = 0
        self.worker: Optional[int] = None  # the DataLoader worker reading (None: the main process)
        self.workers = 1

    @property
    def consumed(self) -> int:
        return min(self.total, self.origin + self.steps * self.world_size * self.batch_size)

    def restart(self, epoch: Optional[int] = None) -> None:
        if epoch is not None:
            self.epoch = int(epoch)
        self.origin = self.steps = self.phase = 0

    def begin(self, worker: Optional[int], workers: int) -> None:
        """A pass starts in DataLoader worker ``worker`` of ``workers``.  Unless this worker saved
        the state it resumes from (StatefulDataLoader gives each worker its own, and restores whose
        turn it is), the next step goes to worker 0, as a new DataLoader's round robin starts."""
        if (self.worker, self.workers) != (worker, workers):
            self.phase = self.steps
            self.worker, self.workers = worker, int(workers)

    def state_dict(self) -> dict:
        return {"version": STATE_VERSION, "epoch": self.epoch, "seed": self.seed,
                "shuffle_buffer": self.shuffle_buffer, "records": self.total, "consumed": self.consumed,
                "origin": self.origin, "steps": self.steps, "world_size": self.world_size,
                "batch_size": self.batch_size, "phase": self.phase, "worker": self.worker, "workers": self.workers}

    def load_state_dict(self, state: dict) -> None:
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"reader state version {state.get('version')!r} is not {STATE_VERSION}: "
                             "a checkpoint of another bert_data version")
        for name in ("seed", "shuffle_buffer", "records"):
            mine = getattr(self, "total" if name == "records" else name)
            if int(state[name]) != mine:
                raise ValueError(f"the reader state was saved with {name}={state[name]}, this reader has "
                                 f"{mine}: resuming needs the same {'dataset' if name == 'records' else name}")
        self.epoch = int(state["epoch"])
        if (int(state["world_size"]), int(state["batch_size"])) == (self.world_size, self.batch_size):
            # Same step size: keep the numbering, so that each DataLoader worker's own state (as
            # StatefulDataLoader keeps them) resumes right after that worker's last batch.
            self.origin, self.steps, self.phase = int(state["origin"]), int(state["steps"]), int(state["phase"])
        else:
            self.origin, self.steps, self.phase = int(state["consumed"]), 0, 0
        self.worker, self.workers = state["worker"], int(state["workers"])

    def step_range(self, step: int, rank: int) -> Tuple[int, int]:
        lo = self.origin + (step * self.world_size + rank) * self.batch_size
        return min(lo, self.total), min(lo + self.batch_size, self.total)


def merged_state(states) -> dict:
    """One reader state from the states of a rank's DataLoader workers: a list of them, or a
    ``StatefulDataLoader.state_dict()`` (which keeps one per worker).  The furthest: the round
    robin hands out steps in order, so every step before it was consumed.  Load it into a reader
    with another number of workers (or world size, or batch size)."""
    found = list(_reader_states(states))
    if not found:
        raise ValueError("no bert_data reader state in the states given")
    # No worker's own any more: whichever reads it hands out the next step first.
    return dict(max(found, key=lambda state: (state["consumed"], state["steps"])), worker=None)


def _reader_states(value):
    if isinstance(value, dict) and "version" in value and "consumed" in value:
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _reader_states(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _reader_states(item)


class _Cursor:
    """Reads chosen rows of the shards, moving forward only (a file is opened once per pass)."""

    def __init__(self, info, verify_crc: bool, verify_checksums: bool = True):
        self.info, self.verify_crc, self.verify_checksums = info, verify_crc, verify_checksums
        self.path: Optional[str] = None

    def take(self, path: str, rows: np.ndarray) -> Batch:
        from ..format.checksums import check_shard
        from ..format.dataset import decode_records, read_instance_columns
        from ..format.output_formats import format_of_path
        from ..format.tfrecord import iter_records

        if self.path != path or (len(rows) and rows[0] < self.position):
            if self.path != path:  # a shard's bytes checked before its first record, as every reader does
                check_shard(path, self.verify_checksums)
            self.path, self.position, self.batch = path, 0, None
            if format_of_path(path).framed_records:
                self.records = iter_records(path, verify_crc=self.verify_crc,
                                            compression=self.info.compressions.get(path))
                self.batches = None
            else:
                self.batches = read_instance_columns(path, self.info.specs, DEFAULT_CHUNK, verify_checksums=False)
        if self.batches is None:
            kept = []
            for row in rows:
                while self.position < row:  # skipped records are read, never decoded
                    next(self.records)
                    self.position += 1
                kept.append(next(self.records))
                self.position += 1
            return decode_records(kept, self.info.specs, path, None)
        parts = []
        for row in rows:
            while self.batch is None or row >= self.position + len(next(iter(self.batch.values()))):
                if self.batch is not None:
                    self.position += len(next(iter(self.batch.values())))
                self.batch = next(self.batches)
            parts.append({name: value[row - self.position][None] for name, value in self.batch.items()})
        return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}


def _record_masked(batch: Batch, masker, epoch: int, indices: np.ndarray) -> Batch:
    """The records masked, each from ``(epoch, record index)`` alone (:class:`RecordKeys`): the
    same mask whatever the batch, the reader or the point of resumption holds it."""
    from .dynamic_masks import RecordKeys

    return masker(batch, key=RecordKeys((_RECORD_MASK_STREAM, epoch, int(index)) for index in indices))


def resumable_batches(info, order: EpochOrder, position: ReaderPosition, rank: int, worker: int = 0,
                      workers: int = 1, drop_remainder: bool = False, masker=None,
                      verify_crc: bool = True, verify_checksums: bool = True) -> Iterator[Batch]:
    """The batches of ``rank``'s steps ``s = worker (mod workers)`` from ``position.steps`` on, in
    canonical names, masked with ``masker`` per record; ``position.steps`` advances as each batch
    is handed out (so that ``state_dict()`` after a batch resumes after it)."""
    cursor = _Cursor(info, verify_crc, verify_checksums)
    position.begin(worker if workers > 1 else None, workers)
    step = position.steps + (position.phase + worker - position.steps) % workers
    size = order.window
    loaded: Dict[int, Tuple[np.ndarray, Batch]] = {}  # window -> (its positions this reader takes, rows)
    while True:
        lo, hi = position.step_range(step, rank)
        if hi <= lo or (drop_remainder and hi - lo < position.batch_size):
            return
        for window in range(lo // size, (hi - 1) // size + 1):
            if window not in loaded:
                loaded[window] = _read_window(window, step, rank, workers, order, position, cursor, masker)
        for window in [w for w in loaded if w < lo // size]:
            del loaded[window]
        parts = []
        for window in range(lo // size, (hi - 1) // size + 1):
            taken, rows = loaded[window]
            a, b = np.searchsorted(taken, [max(lo, window * size), min(hi, (window + 1) * size)])
            parts.append({name: value[a:b] for name, value in rows.items()})
        batch = parts[0] if len(parts) == 1 else {n: np.concatenate([p[n] for p in parts]) for n in parts[0]}
        position.steps = step + 1
        yield batch
        step += workers


def _read_window(window: int, step: int, rank: int, workers: int, order: EpochOrder, position: ReaderPosition,
                 cursor: _Cursor, masker):
    """This reader's records in ``window`` (from step ``step`` on), decoded and masked, in position order."""
    start, end = window * order.window, min((window + 1) * order.window, order.total)
    taken = []
    while True:
        lo, hi = position.step_range(step, rank)
        if lo >= end or hi <= lo:
            break
        if hi > start:
            taken.append(np.arange(max(lo, start), min(hi, end)))
        step += workers
    taken = np.concatenate(taken) if taken else np.zeros(0, dtype=np.int64)
    sources = order.sources(taken, window)
    by_source = np.argsort(sources, kind="stable")
    files, rows, indices = order.locate(sources[by_source])
    parts = []
    # The sorted sources visit the files in shard order, each once.
    for group in np.split(np.arange(len(files)), np.flatnonzero(np.diff(files)) + 1):
        if len(group):
            parts.append(cursor.take(cursor.info.files[files[group[0]]], rows[group]))
    if not parts:
        return taken, {}
    batch = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    if masker is not None:
        batch = _record_masked(batch, masker, order.epoch, indices)
    back = np.empty_like(by_source)
    back[by_source] = np.arange(len(by_source))
    return taken, {name: value[back] for name, value in batch.items()}
