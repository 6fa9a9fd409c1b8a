"""Global mixing, part two: every shard written once more, in a seeded random order.

Units are appended to the shards one after another (in unit order: the bytes do not depend on
timing), so a shard is first the units' records one unit after another, each unit's records
shuffled among themselves.  A unit is a coarse sample of the corpus (a few regions of it: see ``mixing``), and
units differ (a unit that holds a large book is mostly that book).  When every unit is in, each
shard is read back and written out once more with its records in a seeded random order, as
Google's tool does with all its instances in memory: every stretch of the shard is then a
sample of the whole split, not of one unit.

The pass is sequential where it matters: the output is written front to back, and the records
are read at random from the shard just written (the page cache holds it).  Memory: the offset
of every record of the shard, 8 bytes a record (found by a compiled walk over the mapped shard:
``format.tfrecord.record_kernels``), and the permutation is computed on demand (the Feistel
network of ``mixing.CorpusOrder``), 65,536 places at a time.  Records are copied whole into one
of a few buffers of about ``BATCH_BYTES`` (compiled copies) while one thread compresses and
hashes the batch before and another writes the one before that: the three overlap on two
cores.  Shards are shuffled uncompressed; compression (``--compression``) is applied here, as
one stream a shard.  The order is keyed on (seed, split, shard) alone, so the bytes are the
same for any number of workers; each shard is a task of its own, and the journal records the
shards done, so ``--resume`` goes on with the others.

With Google's ``--output_file`` the files are shuffled *together*: record ``i`` of the run, in
the order units are written (file ``i mod N``, place ``i div N``), is moved to place ``k`` of
a seeded permutation of the whole run, keyed on the seed and split only, and written to file
``k mod N``.  So, as with Google's tool, record ``k`` of the run lands in file ``k mod N``
whatever ``N`` is: one file holds the records of three files interleaved.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import queue
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import numpy as np

from ..pipeline.mixing import CorpusOrder
from ..format.tfrecord.record_kernels import copy_ranges, copy_ranges_at
from ..format.tfrecord.word_access import address
from ..format.tfrecord.splicing import StreamCompressor, record_offsets  # (TFRecord: the one format of framed records)
from .run_files import remove_shards_being_shuffled, shard_being_shuffled
from ..format.checksums import ALGORITHM
from .specs import OutputSpec
from .work_checks import start_writeback, sync_file

# Records of a column batch (``shuffled_batches``: the other formats' shards are written in
# batches of this many; it shapes their files, so it stays as it is).
BATCH_RECORDS = 4096
# The final shuffle: places of the order looked up at a time (the permutation's numpy pays per
# call: 0.5 MB of int64 each), and bytes of records gathered and written at a time (the memory
# of a task, flat whatever the shard's size: ``_Writer.BUFFERS`` of them).  A batch is small
# enough that the buffers stay in the CPU's cache between the copies that fill it, the hash and
# the write that read it: with 4 MB batches the kernel's copy into the page cache read from
# memory and cost twice the CPU (0.25-0.34 s against 0.13-0.16 s for 342 MB; 1 and 2 MB alike).
ORDER_PLACES = 1 << 16
BATCH_BYTES = 1 << 20
_WRITEBACK_STEP = 8 << 20  # bytes of a shuffled shard handed to the disk at a time
_SHARD_KEY, _RUN_KEY = 1, 2  # what the order is keyed on: one shard, or a whole run's files


def shuffled_batches(output: OutputSpec, split_code: int,
                     bodies: List[List[Dict[str, np.ndarray]]]) -> List[List[Dict[str, np.ndarray]]]:
    """The column batches of a split's shards (``bodies[shard]``, as appended unit after unit)
    in the order the final shuffle gives TFRecord shards of the same run: per shard keyed on
    (seed, split, shard), or with ``--output_file`` the files together (record k of the run to
    file k mod N).  With the listed order kept, as they are.  One shard's columns are held in
    memory at a time (a whole split's with ``--output_file``)."""
    seed = output.shuffle_seed
    if seed is None:
        return bodies
    columns = [{name: np.concatenate([batch[name] for batch in batches]) for name in batches[0]} if batches else {}
               for batches in bodies]
    counts = [len(next(iter(c.values()))) if c else 0 for c in columns]
    out: List[List[Dict[str, np.ndarray]]] = []
    if output.files:
        n, total = len(columns), sum(counts)
        places = np.arange(total)
        runs = CorpusOrder(total, [seed, split_code, _RUN_KEY]).documents_at(places) if total else places
        files, rows = runs % n, runs // n
        for target in range(n):  # place k goes to file k mod n
            chosen = places % n == target
            picked = [(f, r) for f, r in zip(files[chosen].tolist(), rows[chosen].tolist())]
            out.append(_batched({name: np.stack([columns[f][name][r] for f, r in picked]) if picked else
                                 columns[target][name] for name in (columns[target] or columns[0])}))
        return out
    for shard, shard_columns in enumerate(columns):
        if not counts[shard]:
            out.append([])
            continue
        order = CorpusOrder(counts[shard], [seed, split_code, _SHARD_KEY, shard]).documents_at(
            np.arange(counts[shard]))
        out.append(_batched({name: column[order] for name, column in shard_columns.items()}))
    return out


def _batched(columns: Dict[str, np.ndarray]) -> List[Dict[str, np.ndarray]]:
    n = len(next(iter(columns.values())))
    return [{name: column[first:first + BATCH_RECORDS] for name, column in columns.items()}
            for first in range(0, n, BATCH_RECORDS)]


@dataclass
class ShuffleTask:
    """One task of the final shuffle: shards shuffled together: their keys (``split/shard``), the ``*.tmp`` files the units were
    appended to, where the shuffled shards go (a staged shard that will be uploaded stays at
    its ``*.tmp`` name), and the order's key."""

    keys: List[str]
    sources: List[str]
    targets: List[str]
    seed: List[int]
    compression: Optional[str] = None
    # Pieces kept instead of shards (``kept_pieces``): each source is its segments, rows of
    # (piece, offset, length, records) in unit order, ``piece`` a place in ``pieces``.
    segments: Optional[List[np.ndarray]] = None
    pieces: Optional[List[str]] = None


def shuffle_tasks(output: OutputSpec, split_code: int, split: str, sources: List[str],
                  targets: List[str]) -> List[ShuffleTask]:
    """A split's shards as shuffle tasks: one a shard, or with ``--output_file`` all together."""
    keys = [f"{split}/{shard}" for shard in range(len(sources))]
    seed, compression = output.shuffle_seed, output.compression
    if output.files:
        return [ShuffleTask(keys, sources, targets, [seed, split_code, _RUN_KEY], compression)]
    return [ShuffleTask([key], [source], [target], [seed, split_code, _SHARD_KEY, shard], compression)
            for shard, (key, source, target) in enumerate(zip(keys, sources, targets))]


class _Mapped:
    """A file memory-mapped: ``view`` and ``array`` (what the compiled copies read) of it."""

    def __init__(self, path: str):
        self.path = path
        self.handle = open(path, "rb")
        size = os.fstat(self.handle.fileno()).st_size
        self.data = mmap.mmap(self.handle.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        self.view = memoryview(self.data)
        self.array: Optional[np.ndarray] = None

    def close(self) -> None:
        self.array = None  # (the map's views go first: a map with views cannot close)
        try:
            self.view.release()
            if isinstance(self.data, mmap.mmap):
                self.data.close()
        except BufferError:  # a record's view still held (by an error's traceback): unmapped when it goes
            pass
        self.handle.close()


class _Source(_Mapped):
    """One ``*.tmp`` shard, memory-mapped, and where its records begin."""

    def __init__(self, path: str):
        super().__init__(path)
        try:
            self.offsets = record_offsets(self.data)
        except ValueError as error:
            self.close()
            raise ValueError(f"{path}: {error}") from None
        self.array = np.frombuffer(self.data, dtype=np.uint8)

    @property
    def n_records(self) -> int:
        return len(self.offsets) - 1


# Kept pieces (``kept_pieces``) a process keeps mapped between its shuffle tasks, at least all a task
# read (a unit of short documents has segments of every shard: each shard reads every piece, in the
# same order): a piece is mapped once a process, not once a shard.
MAPPED_PIECES = 128
_mapped_pieces: "OrderedDict[str, _Mapped]" = OrderedDict()


def _piece(path: str) -> _Mapped:
    mapped = _mapped_pieces.pop(path, None)
    if mapped is None:
        mapped = _Mapped(path)
        mapped.handle.close()  # (the map keeps a descriptor of its own)
        mapped.array = np.frombuffer(mapped.data, dtype=np.uint8)
    _mapped_pieces[path] = mapped  # (the most recently used last)
    return mapped


def forget_pieces(keep: int = 0, directory: Optional[str] = None) -> None:
    """The pieces mapped by this process unmapped, but the ``keep`` used last (0: at the end of
    a run, before its work directory goes) of ``directory`` (a process that outlives a run, a
    cluster's worker, keeps no piece of another run's mapped: its disk space would stay in use)."""
    for path in [path for path in _mapped_pieces if directory is not None and os.path.dirname(path) != directory]:
        _mapped_pieces.pop(path).close()
    while len(_mapped_pieces) > keep:
        _mapped_pieces.popitem(last=False)[1].close()


def _descriptors_for(n_maps: int) -> None:
    """Room for ``n_maps`` more maps (each holds a file descriptor): a task that reads the pieces
    of many units (``--output_file``: every piece of the run) raises the process's soft limit on
    open files as far as its hard limit allows."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = n_maps + MAPPED_PIECES + 256  # (and the files the process has open besides)
        if soft != resource.RLIM_INFINITY and soft < wanted:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard),
                                                        hard))
    except (ImportError, OSError, ValueError):
        pass


class _Segments:
    """A shard that is its segments of kept pieces (``ShuffleTask.segments``): where its records
    begin, in a space of its own from ``base`` (its segments end to end, as the assembled shard
    would hold them), and each segment's start in that space, piece and offset in the piece."""

    def __init__(self, rows: np.ndarray, pieces: List[_Mapped], base: int):
        rows = rows[rows[:, 2] > 0]
        starts = base + np.concatenate([[0], np.cumsum(rows[:, 2])]).astype(np.int64)
        found = []
        for (piece, offset, length, records), start in zip(rows.tolist(), starts.tolist()):
            mapped = pieces[piece]
            try:
                offsets = record_offsets(mapped.array[offset:offset + length])
            except ValueError as error:
                raise ValueError(f"{mapped.path} at {offset:,}: {error}") from None
            if len(offsets) - 1 != records:
                raise ValueError(f"{mapped.path} at {offset:,}: {len(offsets) - 1:,} records where {records:,} "
                                 "were written")
            found.append(offsets[:-1] + start)
        found.append(starts[-1:])
        self.offsets = np.concatenate(found)
        self.starts, self.pieces, self.piece_offsets = starts[:-1], rows[:, 0], rows[:, 1]

    @property
    def n_records(self) -> int:
        return len(self.offsets) - 1

    def close(self) -> None:
        pass


def _let_go(maps: List[_Mapped]) -> None:
    """The pages of the pieces a task read let go of by this process (they stay in the page
    cache): the pieces stay mapped for the next shards, and every page a process read (and those
    the kernel maps around each, of other shards' segments) would count in its memory till the end."""
    for mapped in maps:
        if isinstance(mapped.data, mmap.mmap) and not mapped.data.closed and hasattr(mmap, "MADV_DONTNEED"):
            mapped.data.madvise(mmap.MADV_DONTNEED)


def _pieces_layout(sources: List[_Segments]):
    """Every segment of the sources (spaces that follow each other): its start, piece, and what
    moves a place of the sources' spaces to the piece's."""
    starts = np.concatenate([source.starts for source in sources])
    return (starts, np.concatenate([source.pieces for source in sources]),
            np.concatenate([source.piece_offsets for source in sources]) - starts)


def _in_pieces(layout, begins: np.ndarray, ends: np.ndarray):
    """Records given in the sources' spaces (``_Segments``) as (piece, begin, end) in the pieces."""
    starts, pieces, moves = layout
    segment = np.searchsorted(starts, begins, side="right") - 1
    moved = moves[segment]
    return pieces[segment], begins + moved, ends + moved


class _Target:
    """A shuffled shard being written (``run_files.shard_being_shuffled``), compressed as one
    stream: :meth:`take` compresses and hashes a batch (``_Writer``'s hash stage), :meth:`write`
    writes what it gave (its write stage), :meth:`close` ends the stream."""

    def __init__(self, path: str, compression: Optional[str]):
        self.path, self.temporary = path, shard_being_shuffled(path)
        self.handle = open(self.temporary, "wb", buffering=0)  # (batches are MBs: no buffer's copy)
        # (gzip with mtime 0: the same bytes every run; none at all without compression)
        self.engine = StreamCompressor(compression) if compression else None
        self.written = self.started = 0  # bytes written, and handed to the disk (see ``write``)
        self.digest = hashlib.new(ALGORITHM)  # the manifest's, of the bytes as written

    def take(self, data):
        """``data`` as it is written (compressed, if so), hashed."""
        if self.engine is not None:
            data = self.engine.compress(data)
        self.digest.update(data)
        return data

    def write(self, data) -> None:
        """``data`` (from :meth:`take`, in its order) to the file."""
        with memoryview(data) as view:
            done, size = 0, view.nbytes
            while done < size:  # (a regular file takes it whole, but a write may stop short)
                done += self.handle.write(view[done:])
        self.written += size
        if self.written - self.started >= _WRITEBACK_STEP:
            # The disk writes what is written while the next records are gathered, instead of
            # all of it in ``close``'s fsync (the shard's durability is still that fsync's).
            start_writeback(self.handle.fileno(), self.started, self.written - self.started)
            self.started = self.written

    def close(self) -> None:
        """Written whole; durable only by ``sync_shuffled`` (the run's, before its journal)."""
        if self.engine is not None:
            data = self.engine.flush()  # (the stream's end: hashed and written as it is)
            self.digest.update(data)
            self.write(data)
        start_writeback(self.handle.fileno(), self.started, self.written - self.started)
        self.handle.close()


class _Writer:
    """Batches hashed and written to their targets by two threads of their own, while the next
    batch is gathered: one compresses (if so) and hashes a batch (``_Target.take``), then hands
    it to the other, which writes it (``_Target.write``).  hashlib, zlib and a file's write let
    go of the GIL on large buffers, as the compiled copies do, so the three stages overlap: on
    two cores, the gathering of a batch, the hashing of the one before and the writing of the
    one before that.  Buffers take turns; a buffer is free again once its batch is written, so
    memory stays ``BUFFERS`` batches.  A target's batches are hashed and written in the order
    handed over (each stage one thread, first in first out).  An error in either thread is
    raised in the task's at the next batch, or at :meth:`finish`; after one, the batches
    handed over are dropped (their buffers still freed)."""

    BUFFERS = 3

    def __init__(self):
        self._hashing: "queue.SimpleQueue" = queue.SimpleQueue()
        self._writing: "queue.SimpleQueue" = queue.SimpleQueue()
        self._free: "queue.SimpleQueue" = queue.SimpleQueue()
        for _ in range(self.BUFFERS):
            self._free.put(np.empty(0, dtype=np.uint8))
        self.error: Optional[BaseException] = None
        self._cancelled = False
        self._threads = [threading.Thread(target=self._hash, name="bert_data-shuffle-hash", daemon=True),
                         threading.Thread(target=self._write, name="bert_data-shuffle-writer", daemon=True)]
        for thread in self._threads:
            thread.start()

    def buffer(self, size: int) -> np.ndarray:
        """A free buffer of at least ``size`` bytes (waits for one being written)."""
        buffer = self._free.get()
        if self.error is not None:
            self._free.put(buffer)
            raise self.error
        return buffer if buffer.size >= size else np.empty(max(size, BATCH_BYTES), dtype=np.uint8)

    def write(self, target: "_Target", data, buffer: np.ndarray) -> None:
        """Hand ``data`` (bytes, or a view of ``buffer``) over to be hashed and written to
        ``target``; ``buffer`` is free again once it is."""
        self._hashing.put((target, data, buffer))

    def _going(self) -> bool:
        return self.error is None and not self._cancelled

    def _hash(self) -> None:
        while True:
            item = self._hashing.get()
            if item is None:
                self._writing.put(None)
                return
            target, data, buffer = item
            try:
                if self._going():
                    data = target.take(data)
            except BaseException as error:  # (raised in the task's thread)
                self.error = error
            self._writing.put((target, data, buffer))
            del item, data  # (no view of a buffer held while it is refilled)

    def _write(self) -> None:
        while True:
            item = self._writing.get()
            if item is None:
                return
            target, data, buffer = item
            try:
                if self._going():
                    target.write(data)
            except BaseException as error:  # (raised in the task's thread)
                self.error = self.error or error
            del item, data  # (no view of a buffer held while it is refilled)
            self._free.put(buffer)

    def finish(self) -> None:
        """Every batch hashed and written; the threads' error raised."""
        self._end()
        if self.error is not None:
            raise self.error

    def cancel(self) -> None:
        """The batches not yet written are dropped; the threads end (the task is failing)."""
        self._cancelled = True
        self._end()

    def _end(self) -> None:
        self._hashing.put(None)
        for thread in self._threads:
            thread.join()


class _Gather:
    """Records of the sources copied whole, in the order asked, into buffers reused batch after
    batch (compiled: ``record_kernels.copy_ranges``), written ``BATCH_BYTES`` or so at a time
    (by ``_Writer``'s thread).  Without kernels, the reference: a ``b"".join`` of views of the maps."""

    def __init__(self, sources: List[_Source], writer: _Writer):
        self.sources, self.writer = sources, writer
        self.copy = copy_ranges()
        self.copy_at = copy_ranges_at() if self.copy is not None and len(sources) > 1 else None  # (by address)
        self.addresses = np.array([address(source.array) if source.array is not None and source.array.size else 0
                                   for source in sources], dtype=np.int64) if self.copy_at is not None else None

    def write(self, target: _Target, files: np.ndarray, begins: np.ndarray, ends: np.ndarray) -> None:
        """Records ``begins[i]:ends[i]`` of source ``files[i]``, in that order, to ``target``."""
        lengths = ends - begins
        ends_out = np.cumsum(lengths)  # where each record ends in the target's stretch
        start, done = 0, 0
        while start < len(lengths):
            stop = max(start + 1, int(np.searchsorted(ends_out, done + BATCH_BYTES, side="right")))
            size = int(ends_out[stop - 1]) - done
            # (a batch is BATCH_BYTES, or one record longer than that; the reference's joins make their own)
            buffer = self.writer.buffer(size if self.copy is not None else 0)
            data = self._gathered(buffer, files[start:stop], begins[start:stop], ends[start:stop],
                                  ends_out[start:stop] - lengths[start:stop] - done, size)
            self.writer.write(target, data, buffer)
            start, done = stop, done + size

    def _gathered(self, buffer: np.ndarray, files, begins, ends, destinations, size: int):
        if self.copy is None:
            # One copy a record, by join (no view may outlive the expression: see ``_Source.close``).
            views = [source.view for source in self.sources]
            return b"".join([views[f][a:b] for f, a, b in zip(files.tolist(), begins.tolist(), ends.tolist())])
        if self.copy_at is None:
            self.copy(self.sources[0].array, begins, ends, buffer, destinations)
        else:  # (records of many sources in one call, by their addresses)
            self.copy_at(self.addresses, files, begins, ends, buffer, destinations)
        return buffer[:size]


def run_shuffle_task(task: ShuffleTask) -> Dict[str, str]:
    """Write ``task``'s records in their seeded order beside its targets
    (``run_files.shard_being_shuffled``; ``sync_shuffled`` makes them durable and
    ``publish_shuffled`` puts them in place once the journal says so, so an interruption leaves
    the sources whole); returns its keys, each with the SHA-256 of the shard written (the
    manifest's: hashed here, in a worker, as the bytes go by, and not read again by the parent
    at the end)."""
    maps: List[_Mapped] = []
    if task.segments is None:
        sources = [_Source(path) for path in task.sources]
    else:  # each source its segments of the kept pieces, each piece mapped once
        forget_pieces(max(MAPPED_PIECES, len(task.pieces)), os.path.dirname(task.pieces[0]) if task.pieces else None)
        _descriptors_for(len(task.pieces))
        maps = [_piece(path) for path in task.pieces]
        sources, base = [], 0
        for rows in task.segments:
            sources.append(_Segments(rows, maps, base))
            base = int(sources[-1].offsets[-1])
    targets: List[_Target] = []
    writer: Optional[_Writer] = None
    try:
        n = len(sources)
        counts = [source.n_records for source in sources]
        total = sum(counts)
        if counts != [len(range(j, total, n)) for j in range(n)]:  # file i mod N holds record i
            raise ValueError(f"{task.sources[0]}: records per file {counts} are not dealt in turn")
        targets = [_Target(path, task.compression) for path in task.targets]
        writer = _Writer()
        order, gather = CorpusOrder(total, task.seed), _Gather(maps or sources, writer)
        # Every source's offsets end to end (each source's now a view of them): a record's begin
        # and end looked up at once, whatever the number of sources.
        firsts = np.cumsum([0] + [len(source.offsets) for source in sources])
        table = np.concatenate([source.offsets for source in sources])
        for source, a, b in zip(sources, firsts.tolist(), firsts[1:].tolist()):
            source.offsets = table[a:b]
        layout = _pieces_layout(sources) if maps else None
        for first in range(0, total, ORDER_PLACES):
            runs = order.documents_at(np.arange(first, min(first + ORDER_PLACES, total)))  # the record of the run each place takes
            files, rows = np.divmod(runs, n)[::-1]  # record i of the run: file i mod n, place i div n
            at = firsts[files] + rows
            begins, ends = table[at], table[at + 1]
            if maps:  # (each source's space to the pieces')
                files, begins, ends = _in_pieces(layout, begins, ends)
            for t, target in enumerate(targets):  # place k goes to file k mod n
                pick = slice((t - first) % n, None, n)
                gather.write(target, files[pick], begins[pick], ends[pick])
        writer.finish()
        for target in targets:
            target.close()
    except BaseException:
        if writer is not None:
            writer.cancel()
        for target in targets:
            target.handle.close()
            if os.path.exists(target.temporary):
                os.remove(target.temporary)
        raise
    finally:
        for source in sources:
            source.close()
        _let_go(maps)
    return {key: target.digest.hexdigest() for key, target in zip(task.keys, targets)}


def sync_shuffled(task: ShuffleTask) -> None:
    """The shuffled shards of ``task`` durable, before a journal vouches for them."""
    for target in task.targets:
        sync_file(shard_being_shuffled(target))


class ShuffleCommits:
    """Shuffle tasks done, kept in the order they are added by a thread of their own: each
    task's shards made durable (``sync_shuffled``), journaled (``add``'s ``journal``: the
    runner's record, taken when the task was added and counting the tasks before it; the tasks
    added while a commit runs are committed together, by the last one's record), then put in
    place (``publish_shuffled``).
    The run goes on meanwhile: the next shards are gathered while the disk writes these, and no
    task waits for the one before it to be on disk.  A commit's error is raised in the run's
    thread at the next ``add`` or at ``finish``; after one, nothing more is journaled, and the
    shards written but not journaled are removed (the sources are whole: ``--resume`` shuffles
    them again)."""

    def __init__(self):
        self._work: "queue.SimpleQueue" = queue.SimpleQueue()
        self.error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, name="bert_data-shuffle-commit", daemon=True)
        self._thread.start()

    def add(self, task: ShuffleTask, journal: Callable[[], None]) -> None:
        if self.error is not None:
            _remove_quietly(task)
            raise self.error
        self._work.put((task, journal))

    def _run(self) -> None:
        ended = False
        while not ended:
            # The tasks added meanwhile, committed together (group commit: each synced, then one
            # journal record, the last one's, which counts them all, then each renamed).
            batch = [self._work.get()]
            while batch[-1] is not None and not self._work.empty():
                batch.append(self._work.get())
            if batch[-1] is None:
                batch.pop()
                ended = True
            synced = journaled = 0
            if self.error is None:
                try:
                    for task, _ in batch:
                        sync_shuffled(task)
                        synced += 1
                except BaseException as error:  # noqa: BLE001 - raised in the run's thread
                    self.error = error
                try:
                    if synced:  # (those synced before a failure kept all the same)
                        batch[synced - 1][1]()
                        journaled = synced
                        for task, _ in batch[:synced]:
                            publish_shuffled(task)
                except BaseException as error:  # noqa: BLE001 - raised in the run's thread
                    self.error = self.error or error
            for task, _ in batch[journaled:]:
                _remove_quietly(task)

    def finish(self, quietly: bool = False) -> None:
        """Every task added kept, or the first error met raised (not ``quietly``: the run is
        failing already, with an error of its own)."""
        self._work.put(None)
        try:
            self._thread.join()
        except BaseException:  # (Ctrl-C while waiting: the commit under way ends first, then it goes on)
            self._thread.join()
            raise
        if self.error is not None and not quietly:
            raise self.error


def _remove_quietly(task: ShuffleTask) -> None:
    """A task's shuffled shards, written whole but vouched for by no journal, removed (the run is
    failing: ``--resume`` writes them again from the sources)."""
    try:
        remove_shards_being_shuffled(task.targets)
    except OSError:
        pass


def publish_shuffled(task: ShuffleTask) -> None:
    """The shuffled shards of ``task`` to their targets (done already after an interruption
    between the two)."""
    for target in task.targets:
        if os.path.exists(shard_being_shuffled(target)):
            os.replace(shard_being_shuffled(target), target)


def shuffled_size(target: str) -> int:
    return os.path.getsize(shard_being_shuffled(target))
