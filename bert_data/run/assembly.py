"""Shards from piece files: the assembler that joins segments (see ``pieces``) in unit order.

An encode task writes, for each output shard it serves, one *segment* of a piece file (see
``tasks.encode_shards``); the runner hands each unit's segments to :class:`ShardAssembler`, unit
after unit, which appends them to the shards in progress and completes them when all units
are in (``run_files.finalize`` publishes them).  Compressed shards stay valid files however
many segments they are made of:

* gzip: each segment is a gzip member, and concatenated members are one gzip file;
* zlib: each segment is raw deflate data ending on a byte boundary; the assembler writes the
  zlib header before the first segment, then the final block and the Adler-32 of everything,
  combined from the segments' own checksums, after the last.

(How the bytes join is TFRecord's: ``format.tfrecord.splicing``.)
"""

from __future__ import annotations

import errno
import functools
import os
import tempfile
from collections import OrderedDict
from typing import Dict, Iterable, List, Optional

from .. import storage
from ..format.columns import iter_batches
from ..format.dataset_layout import SPLIT_CODES, TRAIN, body_path
from ..format.tfrecord.splicing import ZLIB_HEADER, adler32_combine, zlib_trailer
from .pieces import Segment
from .run_files import GenerationError, shard_in_progress, shard_path
from .scratch import fetch_piece
from .shard_shuffle import shuffled_batches
from .specs import OutputSpec
from .work_checks import crc32c, crc32c_combine, file_crc32c, sync_directory, sync_file, Writeback


def copy_range(source, offset: int, length: int, target, name: str) -> None:
    """Append ``length`` bytes of ``source`` from ``offset`` to ``target``; in the kernel where
    the system allows (no trip through Python for hundreds of MB)."""
    target.flush()
    copied = 0
    if hasattr(os, "copy_file_range"):
        try:
            while copied < length:
                step = os.copy_file_range(source.fileno(), target.fileno(), length - copied, offset + copied)
                if step == 0:
                    break
                copied += step
            target.seek(0, os.SEEK_END)  # the kernel moved the file offset; keep Python's in step
        except OSError as error:
            if error.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
    source.seek(offset + copied)
    while copied < length:
        block = source.read(min(length - copied, 1 << 22))
        if not block:
            raise GenerationError(f"{name}: piece file is shorter than recorded")
        view = memoryview(block)
        while view:  # (a file opened unbuffered may take part of a write)
            view = view[target.write(view):]
        copied += len(block)


# Shards a run keeps open between units (``ShardAssembler._shard``): each holds a file descriptor,
# so no more than a quarter of what the process may open either.
OPEN_SHARDS = 64


@functools.lru_cache(maxsize=1)
def _open_shards_allowed() -> int:
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 1
    return OPEN_SHARDS if limit == resource.RLIM_INFINITY else max(1, min(OPEN_SHARDS, limit // 4))


def sync_paths(paths: List[str]) -> None:
    """``ShardAssembler.take_unsynced``'s shards, durable."""
    for path in paths:
        sync_file(path)


class ShardAssembler:
    """Appends piece segments to the shards in progress, in unit order, and completes them.

    Shards stay open between units, unbuffered, up to ``OPEN_SHARDS`` of them (the least
    recently appended to closed first): a unit of short documents appends a segment to every
    shard, and opening each shard for each unit was most of an append's own cost; a run with
    more shards than the process may hold open files needs no more descriptors than that.  With
    ``--compression zlib`` a shard is one zlib stream: a header, the segments' raw deflate data,
    then a final block and the Adler-32 of everything (combined from the segments')."""

    def __init__(self, output: OutputSpec, sizes: Optional[Dict[str, int]] = None,
                 checksums: Optional[Dict[str, list]] = None, shard_counts: Optional[Dict[str, int]] = None,
                 fetch_dir: Optional[str] = None, rewritten: Iterable[str] = ()):
        self.output = output  # (staged, for an output at a URL)
        self.format, self.options = output.kind, output.shard_options
        self.fetch_dir = fetch_dir  # where pieces at a URL are downloaded to, to be appended
        self.dirs = output.split_dirs()
        self._paths: Dict[str, str] = {}  # key -> ``path``
        # Shards shuffled at the end are kept uncompressed until then (see ``shard_shuffle``).
        self.zlib = output.segment_compression == "zlib"
        # key -> [Adler-32 and length of the raw bytes (zlib's trailer), CRC-32C of the bytes
        # written (``--resume`` checks the kept ones; not for shards the final shuffle ``rewritten``)]
        self.checksums: Dict[str, list] = dict(checksums or {})
        self.rewritten = set(rewritten)
        self.lengths: Dict[str, int] = {}  # key ("split/shard") -> bytes written
        self.unsynced = set()  # keys of shards appended to and not yet made durable (see ``sync``)
        self.writeback = Writeback()  # (its thread starts at the first append)
        self._open: "OrderedDict[str, object]" = OrderedDict()  # key -> the shard, open (``_shard``)
        self.piece_removals = None  # a ``storage.BackgroundRemovals`` for appended pieces (None: removed here)
        self.shard_counts: Dict[str, int] = {}  # per split, once known (see open_split)
        for split, count in (shard_counts or {}).items():
            self.open_split(split, count, sizes)

    def _shard(self, key: str):
        """The shard ``key`` open for appending (unbuffered: nothing waits in this process for
        a sync that opens the file anew), kept open for the next units."""
        shard = self._open.get(key)
        if shard is not None:
            self._open.move_to_end(key)
            return shard
        while self._open and len(self._open) >= _open_shards_allowed():
            self._open.popitem(last=False)[1].close()
        try:
            shard = open(self.path(key), "r+b", buffering=0)
        except OSError as error:
            if error.errno not in (errno.EMFILE, errno.ENFILE) or not self._open:
                raise
            self._close_shards()  # (the process's other files took the descriptors left)
            shard = open(self.path(key), "r+b", buffering=0)
        self._open[key] = shard
        return shard

    def _close_shards(self) -> None:
        while self._open:
            self._open.popitem(last=False)[1].close()

    def path(self, key: str) -> str:
        """Where a shard's units are appended: the shard in progress for TFRecord, else its body
        (worked out once a shard: every unit appends to every shard)."""
        path = self._paths.get(key)
        if path is None:
            split, shard = key.split("/")
            path = self._paths[key] = body_path(shard_path(self.dirs[split], self.output, int(shard)),
                                                self.format.appendable)
        return path

    def open_split(self, split: str, count: int, sizes: Optional[Dict[str, int]] = None) -> None:
        """Create the ``count`` shards of a split (its count may be decided during the run, when
        shards are sized by records or megabytes), or, resuming, cut those the journal lists
        (``sizes``) to the sizes it vouches for."""
        self.shard_counts[split] = count
        if not self.format.instances:  # Megatron's shards are written from the corpus (corpus_output)
            return
        for shard in range(count):
            key = f"{split}/{shard}"
            path = self.path(key)
            if sizes is None or key not in sizes:
                self.lengths[key] = 0  # (recorded first: a failure to create it still removes it)
                with open(path, "wb") as handle:
                    if self.zlib:
                        handle.write(ZLIB_HEADER)
                self.lengths[key] = len(ZLIB_HEADER) if self.zlib else 0
                self.checksums[key] = [1, 0, crc32c(ZLIB_HEADER) if self.zlib else 0]
            else:  # resume: drop whatever came after the last unit the journal vouches for
                if not os.path.exists(path) or os.path.getsize(path) < sizes[key]:
                    raise GenerationError(f"--resume: {path} is missing or shorter than the journal says; "
                                          "run without --resume, with --overwrite, to start again")
                self._check_kept(key, path, sizes[key])
                os.truncate(path, sizes[key])
                self.lengths[key] = sizes[key]
        for directory in {os.path.dirname(self.path(f"{split}/{shard}")) for shard in range(count)}:
            sync_directory(directory)  # the shards' names, before a journal vouches for them

    def _check_kept(self, key: str, path: str, size: int) -> None:
        """The bytes of a shard the journal vouches for are those it was written with (a journal
        of an earlier version keeps no CRC-32C: taken as is).  Every unit appends to every
        shard, so a damaged one cannot be rebuilt short of redoing the run."""
        kept = self.checksums.get(key) or []
        if len(kept) < 3 or key in self.rewritten:
            return
        found = file_crc32c(path, size)
        if found != kept[2]:
            raise GenerationError(
                f"--resume: {path} is damaged: its {size:,} journaled bytes have CRC-32C {found:08x}, they were written "
                f"as {kept[2]:08x}; its units cannot be recovered from it: run without --resume, with --overwrite, "
                "to start again")

    def append(self, segments: List[Segment]) -> None:
        """One unit's segments, in (split, shard) order; their piece files are removed after
        (by ``piece_removals`` when the runner gives it one: unlinking a piece frees its pages,
        a few hundred microseconds a MB, which the parent's loop need not wait for).
        Each piece is opened once, whatever the segments it holds; what was written is handed to the
        disk by a thread (``work_checks.Writeback``: the hint can block, and this runs in the
        parent's loop, which workers wait on); :meth:`sync` makes them durable, before a journal
        vouches for them."""
        pieces = {}
        fetched = {}  # piece URL -> local copy
        written = []  # (path, offset, length) for the disk
        try:
            for segment in sorted(segments, key=lambda s: (s.split != TRAIN, s.shard)):
                if segment.path not in pieces and storage.is_url(segment.path):
                    fetched[segment.path] = fetch_piece(segment.path, self.fetch_dir or tempfile.gettempdir())[0]
                piece = pieces.get(segment.path) or pieces.setdefault(
                    segment.path, open(fetched.get(segment.path, segment.path), "rb", buffering=0))
                key = f"{segment.split}/{segment.shard}"
                shard = self._shard(key)
                shard.seek(self.lengths[key])
                self.unsynced.add(key)  # (first: a failure below still leaves it to sync)
                copy_range(piece, segment.offset, segment.length, shard, segment.path)
                end = shard.tell()
                written.append((self.path(key), self.lengths[key], end - self.lengths[key]))
                self.lengths[key] = end
                adler, length, crc = (self.checksums[key] + [0])[:3]
                self.checksums[key] = [adler32_combine(adler, segment.adler32, segment.raw_length),
                                       length + segment.raw_length, crc32c_combine(crc, segment.crc32c, segment.length)]
        finally:
            self.writeback.start(written)
            for piece in pieces.values():
                piece.close()
            for local in fetched.values():
                os.remove(local)
        if self.piece_removals is not None:
            self.piece_removals.remove(list(pieces))
            return
        storage.remove_many([path for path in pieces if storage.is_url(path)])
        for path in pieces:
            if not storage.is_url(path):
                os.remove(path)

    def sync(self) -> None:
        """Every shard appended to since the last call, durable (one fsync each, done together:
        the group commit before a journal record)."""
        self.make_durable(self.take_unsynced())

    def end_unit(self) -> None:
        """A unit appended whole (``kept_pieces.PieceKeeper`` closes its table here)."""

    def kept(self, units: Optional[int] = None) -> Optional[list]:
        """What the journal keeps of the first ``units`` units' kept pieces (all: None;
        ``kept_pieces``): nothing, for shards assembled."""
        return None

    def make_durable(self, paths: List[str]) -> None:
        """``take_unsynced``'s files durable, before the journal vouches for them."""
        sync_paths(paths)

    def take_unsynced(self) -> List[str]:
        """The shards appended to since the last call, for ``sync_paths`` (in a thread, while
        the next unit is appended: its shards are the next call's)."""
        paths = [self.path(key) for key in sorted(self.unsynced)]
        self.unsynced.clear()
        return paths

    def sizes(self) -> Dict[str, int]:
        return dict(self.lengths)

    def finish(self, sync: bool = True) -> Dict[str, int]:
        """Complete every shard, durably (``sync``; not needed for a shard the final shuffle
        writes again), under its name in progress (``run_files.finalize`` publishes it); returns
        the shards' sizes, for the journal.  A format whose segments are not the file itself
        (HDF5, Parquet, MDS) writes each shard from its body, then the files it keeps beside a
        split's shards (MDS's index.json)."""
        self.writeback.close(wait=False)  # (every unit is in: the hints given stand)
        self._close_shards()
        for key in self.lengths:
            with open(self.path(key), "r+b") as shard:
                shard.seek(self.lengths[key])
                if self.zlib:
                    trailer = zlib_trailer(self.checksums[key][0])
                    shard.write(trailer)
                    self.checksums[key][2:] = [crc32c(trailer, (self.checksums[key] + [0])[2])]
                shard.flush()
                if sync:
                    os.fsync(shard.fileno())
                self.lengths[key] = shard.tell()
        if self.format.appendable:
            return self.sizes()
        writer = self.format.make_writer(self.options)
        entries: Dict[str, list] = {}
        for split, directory in self.dirs.items():
            shards = sorted(int(key.split("/")[1]) for key in self.lengths if key.split("/")[0] == split)
            bodies = []
            for shard in shards:
                with open(self.path(f"{split}/{shard}"), "rb") as body:
                    bodies.append(list(iter_batches(body)))
            # The final shuffle's order, as TFRecord shards of the same run get it (``shard_shuffle``).
            for shard, batches in zip(shards, shuffled_batches(self.output, SPLIT_CODES[split], bodies)):
                written = shard_in_progress(directory, self.output, shard)
                entries.setdefault(split, []).append(writer.write_shard(
                    batches, written, os.path.basename(shard_path(directory, self.output, shard))))
                with open(written, "rb+") as handle:
                    os.fsync(handle.fileno())
        for split, shards in entries.items():
            writer.write_split_files(self.dirs[split], shards)
        # The bodies stay until the manifests are written (``run_files.finalize`` removes them): a
        # run killed before the journal says finished writes the shards from them again.
        return {key: os.path.getsize(shard_in_progress(self.dirs[key.split("/")[0]], self.output,
                                                       int(key.split("/")[1]))) for key in self.lengths}

    def close(self) -> None:
        """The shards kept open closed, the writeback thread told to end."""
        self._close_shards()
        self.writeback.close(wait=False)

    def remove(self) -> None:
        self._close_shards()
        for key in self.lengths:
            split, shard = key.split("/")
            for path in {self.path(key), shard_in_progress(self.dirs[split], self.output, int(shard))}:
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass
