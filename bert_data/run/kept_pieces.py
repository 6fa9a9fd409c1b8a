"""Pieces kept for the final shuffle: TFRecord shards shuffled at the end are never assembled.

When the final shuffle rewrites every shard (``OutputSpec.shuffles_shards``) and the pieces are
local files, a shard made of its units' segments end to end would be written only to be read
back once: :class:`PieceKeeper` stands in for the ``ShardAssembler`` then.  Each unit's piece
files stay in the work directory; at the unit's commit they are made durable (with a table of
what each of their segments holds, ``run_files.unit_table_path``, and their directory), not
shards; the final shuffle reads each shard's records straight from its segments, in unit order
(``shard_shuffle``: the same records in the same order as the assembled shard, so the same
shuffled bytes).

The journal grows with units, not segments: per unit the size and CRC-32C of its table
(``kept_units``); the table holds, per piece, its size and CRC-32C (combined from its segments'),
and per segment where it lies.  ``--resume`` checks each table and each piece against them
before any is read (one line naming a damaged or missing file and the fix); the pieces of units
not journaled are removed (``run_files.discard_unjournaled``) and made again.

The journal's ``shard_sizes`` and ``shard_checksums`` mean, for a shard not yet shuffled, what
they mean for an assembled one: the bytes of its segments end to end (their count, their CRC-32C
combined), which is the shard the shuffle reads; for a shard shuffled (``totals.shuffled``), the
shuffled file's size.  A piece is removed once every shard it holds segments of is shuffled and
journaled (``final_shuffle``), by the run's removals thread.
"""

from __future__ import annotations

import os
from typing import Dict, Iterable, List, Optional

import numpy as np

from .. import storage
from ..format.dataset_layout import TRAIN
from .assembly import ShardAssembler
from .pieces import Segment
from .run_files import GenerationError, unit_table_path
from .specs import OutputSpec
from .work_checks import (Damaged, crc32c, crc32c_combine, dumps_checked, file_crc32c, loads_checked,
                          sync_directory, sync_file)

# A unit's segments, in the table and in memory: (split, shard, piece, offset, length, records,
# crc32c), ``piece`` numbering the run's kept pieces (``PieceKeeper.pieces``), ``crc32c`` the
# segment's own (-1 in memory for a table written before segments had theirs: such a segment is
# checked with its whole piece on --resume, so its blocks are never given back).
SEGMENT_FIELDS = ("shard", "piece", "offset", "length", "records", "crc32c")
NO_CRC = -1

_FIX = "run without --resume, with --overwrite, to start again"


def keeps_pieces(output: OutputSpec, scratch: str) -> bool:
    """Whether the run's pieces are kept for the final shuffle instead of assembled: TFRecord
    shuffled at the end, pieces on a local disk (at a URL they are fetched to be assembled)."""
    return output.shuffles_shards and output.kind.appendable and not storage.is_url(scratch)


def pieces_fit(n_units: int, n_files: int = 0) -> bool:
    """Whether a shuffle task could map every kept piece it reads: one a unit for a shard (every
    unit has a segment of every shard), a unit's pieces for ``n_files`` shuffled together
    (``--output_file``).  Each map holds a file descriptor (Python's mmap keeps a duplicate), so
    at most half the process's hard limit on open files, and 32,768 maps (the kernel's default
    limit is 65,530); past that the run assembles its shards, as before pieces were kept."""
    try:
        import resource

        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    except (ImportError, OSError, ValueError):
        return False
    allowed = 32768 if hard == resource.RLIM_INFINITY else min(32768, hard // 2)
    return n_units * max(1, n_files) <= allowed


class PieceKeeper(ShardAssembler):
    """The ``ShardAssembler`` of a run whose pieces are kept (see the module): ``append``
    records where each shard's records lie, nothing is copied; ``end_unit`` closes a unit's
    table; ``take_unsynced`` names the unit's pieces and table, which ``make_durable`` writes and
    syncs before the journal vouches for them (``kept``)."""

    def __init__(self, output: OutputSpec, work_dir: str, sizes: Optional[Dict[str, int]] = None,
                 checksums: Optional[Dict[str, list]] = None, shard_counts: Optional[Dict[str, int]] = None,
                 kept: Optional[list] = None, rewritten: Iterable[str] = ()):
        self.work_dir = work_dir
        self.pieces: List[str] = []  # every kept piece's path, numbered as the tables' rows say
        self._piece_numbers: Dict[str, int] = {}
        self.units: List[Dict[str, np.ndarray]] = []  # per unit journaled or ended: its segments, per split
        self.proofs: List[list] = []  # per unit: its table's size and CRC-32C (the journal's ``kept_units``)
        self.current: List[Segment] = []  # the unit being appended
        self.unwritten: Dict[str, bytes] = {}  # tables ended, not yet written (``make_durable``)
        self.unsynced_files: List[str] = []
        super().__init__(output, sizes, checksums, shard_counts, rewritten=rewritten)
        for unit, proof in enumerate(kept or ()):
            self._load(unit, proof)

    # ------------------------------------------------------------------ the units, as appended

    def open_split(self, split: str, count: int, sizes: Optional[Dict[str, int]] = None) -> None:
        """No file: a shard is its segments until the final shuffle writes it."""
        self.shard_counts[split] = count
        for shard in range(count):
            key = f"{split}/{shard}"
            if sizes is None or key not in sizes:
                self.lengths[key] = 0
                self.checksums[key] = [1, 0, 0]
            else:
                self.lengths[key] = sizes[key]

    def append(self, segments: List[Segment]) -> None:
        """A unit's segments (an encode task's, as it ends) recorded; their pieces handed to the
        disk by the writeback thread (as appended shards are: the commit's fsync then waits for
        little, and the disk writes while the next unit is made)."""
        spans: Dict[str, List[int]] = {}
        for segment in segments:
            key = f"{segment.split}/{segment.shard}"
            self.lengths[key] += segment.length
            adler, length, crc = (self.checksums[key] + [0])[:3]
            self.checksums[key] = [adler, length, crc32c_combine(crc, segment.crc32c, segment.length)]
            self.current.append(segment)
            span = spans.setdefault(segment.path, [segment.offset, segment.offset])
            span[:] = [min(span[0], segment.offset), max(span[1], segment.offset + segment.length)]
        self.writeback.start([(path, first, end - first) for path, (first, end) in spans.items()])

    def end_unit(self) -> None:
        """The unit appended whole: its table made (written by ``make_durable``)."""
        segments, self.current = self.current, []
        by_piece: Dict[str, List[Segment]] = {}
        for segment in segments:
            by_piece.setdefault(segment.path, []).append(segment)
        pieces = []
        for path in sorted(by_piece):
            size = crc = 0
            for segment in sorted(by_piece[path], key=lambda s: s.offset):
                if segment.offset != size:  # (a gap: not a piece of segments end to end; read it whole)
                    size, crc = os.path.getsize(path), file_crc32c(path)
                    break
                crc, size = crc32c_combine(crc, segment.crc32c, segment.length), size + segment.length
            pieces.append([os.path.basename(path), size, crc])
        local = {path: place for place, path in enumerate(sorted(by_piece))}
        rows = [[segment.split, segment.shard, local[segment.path], segment.offset, segment.length, segment.n_records,
                 segment.crc32c] for segment in sorted(segments, key=lambda s: (s.split != TRAIN, s.split, s.shard))]
        table = dumps_checked({"pieces": pieces, "segments": rows}).encode("utf-8")
        unit = len(self.proofs)
        path = unit_table_path(self.work_dir, unit)
        self.unwritten[path] = table
        self.unsynced_files += sorted(by_piece) + [path]
        self._add(pieces, rows)
        self.proofs.append([len(table), crc32c(table)])

    def _add(self, pieces: list, rows: list) -> None:
        numbers = []
        for name, _, _ in pieces:
            path = storage.join(self.work_dir, name)
            if path not in self._piece_numbers:
                self._piece_numbers[path] = len(self.pieces)
                self.pieces.append(path)
            numbers.append(self._piece_numbers[path])
        by_split: Dict[str, list] = {}
        for split, shard, piece, offset, length, records, *crc in rows:
            by_split.setdefault(split, []).append((shard, numbers[piece], offset, length, records, *(crc or [NO_CRC])))
        self.units.append({split: np.array(found, dtype=np.int64).reshape(-1, len(SEGMENT_FIELDS))
                           for split, found in by_split.items()})

    def kept(self, units: Optional[int] = None) -> Optional[list]:
        return [list(proof) for proof in self.proofs[:units]]

    def take_unsynced(self) -> List[str]:
        files, self.unsynced_files = self.unsynced_files, []
        return files

    def make_durable(self, paths: List[str]) -> None:
        """The units' pieces and tables durable, then their names (before the journal)."""
        for path in paths:
            table = self.unwritten.pop(path, None)
            if table is None:
                sync_file(path)
                continue
            with open(path, "wb") as handle:
                handle.write(table)
                handle.flush()
                os.fsync(handle.fileno())
        if paths:
            sync_directory(self.work_dir)

    def finish(self, sync: bool = True) -> Dict[str, int]:
        """Nothing to complete: the final shuffle writes every shard (its sizes as the journal's)."""
        self.writeback.close(wait=False)
        return self.sizes()

    # ------------------------------------------------------------------ the final shuffle's view

    def segments_of(self, split: str) -> List[np.ndarray]:
        """Each shard of ``split``: its segments in unit order, rows of (piece, offset, length,
        records, crc32c) (``SEGMENT_FIELDS`` after the shard)."""
        found = [unit[split] for unit in self.units if split in unit]
        rows = np.concatenate(found) if found else np.zeros((0, len(SEGMENT_FIELDS)), dtype=np.int64)
        order = np.argsort(rows[:, 0], kind="stable")  # (units stay in order within a shard)
        rows = rows[order]
        cuts = np.searchsorted(rows[:, 0], np.arange(self.shard_counts.get(split, 0) + 1))
        return [rows[a:b, 1:] for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist())]

    def spent(self, rows: np.ndarray) -> List[tuple]:
        """What of the pieces no later step reads once the shards of these segments (rows of
        ``segments_of``) are shuffled and journaled: ``(path, [(offset, length), ...])`` a piece,
        adjacent segments as one range, for ``storage.release_blocks`` (the final shuffle's:
        disk and page cache given back as the shuffle goes, not all at the end).  Only segments
        with a CRC-32C of their own: --resume checks a piece with holes segment by segment, and
        one of an earlier table, without them, whole."""
        rows = rows[rows[:, 4] != NO_CRC]
        rows = rows[np.lexsort((rows[:, 1], rows[:, 0]))]
        spent: List[tuple] = []
        for piece, offset, length in rows[:, :3].tolist():
            if not spent or spent[-1][0] != self.pieces[piece]:
                spent.append((self.pieces[piece], []))
            ranges = spent[-1][1]
            if ranges and sum(ranges[-1]) == offset:  # (adjacent: one range)
                ranges[-1] = (ranges[-1][0], ranges[-1][1] + length)
            else:
                ranges.append((offset, length))
        return spent

    # ------------------------------------------------------------------ --resume

    def _load(self, unit: int, proof: list) -> None:
        """A journaled unit's table and pieces, checked against what the journal vouches for
        (a piece whose shards are all shuffled may be gone: it is not read again)."""
        path = unit_table_path(self.work_dir, unit)
        try:
            with open(path, "rb") as handle:
                table = handle.read()
            if [len(table), crc32c(table)] != list(proof):
                raise Damaged(f"{len(table):,} bytes of CRC-32C {crc32c(table):08x} where {proof[0]:,} of "
                              f"{proof[1]:08x} were written")
            data = loads_checked(table)
        except (OSError, Damaged) as error:
            # (an empty work directory: most likely not the one the run was started with)
            moved = isinstance(error, FileNotFoundError) and not (os.path.isdir(self.work_dir) and os.listdir(self.work_dir))
            elsewhere = "if the run was started with another --work_dir, resume with that one; else " if moved else ""
            raise GenerationError(f"--resume: {path} is missing or damaged ({getattr(error, 'strerror', None) or error}): "
                                  f"the segments of unit {unit + 1:,} cannot be found; {elsewhere}{_FIX}") from None
        pieces, rows = data["pieces"], data["segments"]
        needed: Dict[int, list] = {}  # a piece's segments of shards not yet shuffled
        shuffled: Dict[int, int] = {}  # and how many of its segments are of shards shuffled
        for split, shard, place, offset, length, _, *crc in rows:
            if f"{split}/{shard}" in self.rewritten:
                shuffled[place] = shuffled.get(place, 0) + 1
            else:
                needed.setdefault(place, []).append((offset, length, crc[0] if crc else None))
        for place, (name, size, crc) in enumerate(pieces):
            path = storage.join(self.work_dir, name)
            if place not in needed:
                continue  # (its shards shuffled: it may be gone, or holes where they were)
            segments = needed[place]
            if not shuffled.get(place) or any(segment_crc is None for *_, segment_crc in segments):
                _check_piece(path, size, crc)  # (read whole: nothing of it was given back)
            else:
                for offset, length, segment_crc in segments:
                    _check_piece(path, size, segment_crc, offset, length)
        self._add(pieces, rows)
        self.proofs.append(list(proof))


def _check_piece(path: str, size: int, crc: int, offset: int = 0, length: Optional[int] = None) -> None:
    """A kept piece's bytes (``length`` of them from ``offset``: a segment; None: all ``size``)
    are those it was written with."""
    length = size if length is None else length
    try:
        found = file_crc32c(path, length, offset) if os.path.getsize(path) == size else None
    except (OSError, Damaged):
        found = None
    if found is None:
        raise GenerationError(f"--resume: {path} is missing or not the {size:,} bytes the journal vouches for; "
                              f"its records cannot be recovered: {_FIX}")
    if found != crc:
        what = f"its {size:,} bytes have" if length == size else f"its {length:,} bytes from {offset:,} have"
        raise GenerationError(f"--resume: {path} is damaged: {what} CRC-32C {found:08x}, they were "
                              f"written as {crc:08x}; its records cannot be recovered: {_FIX}")
