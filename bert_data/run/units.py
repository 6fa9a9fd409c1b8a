"""A unit's work, as the run hands it from task to task: where its documents lie among the
tokenized slices (:class:`SliceTable`), its documents (:class:`UnitWork`), its token *pool*
gathered from the slices into one file of the work directory (:func:`unit_pool`), what pairing
it gave (:class:`UnitPairs`), and how its records are dealt to the output shards and to encode
tasks (:func:`shard_rows`, :func:`make_encode_tasks`).  The grouping of shards into tasks
changes only how work is spread, never the bytes: each shard has its own random stream.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from itertools import accumulate
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import storage
from ..pipeline.documents.types import Slice
from ..pipeline.gathering import copy_runs
from ..pipeline.instances import PairArrays, TokenPool
from ..pipeline.packing import row_members
from ..pipeline.tokens import DOC_POSITION, DOC_REPLACED, SENTENCE_END, SENTENCE_START, TOKEN_END, TOKEN_START
from .run_files import slice_paths
from .scratch import (load_array, mapped_slices, new_array_file, private_temporary, save_array, slice_rows,
                      write_plain_array)
from .split_packing import PackedRows, PairSources


@dataclass
class SliceTable:
    """Where the documents are: the corpus position of each slice's first document, and whether
    the slice begins with a later part of a document (so a unit's task finds its documents
    among the tokenized slices without asking anyone)."""

    first_docs: np.ndarray  # int64, ascending
    starts_with_a_part: np.ndarray  # bool
    # This run's, made afresh for each: a worker's slice files mapped in it are used unchecked
    # until another run's come (``scratch._mapped_array``).  None: checked at every unit.
    generation: Optional[str] = None

    @classmethod
    def of(cls, slices: Sequence[Slice]) -> "SliceTable":
        return cls(np.asarray([slice_.first_doc for slice_ in slices], dtype=np.int64),
                   np.asarray([slice_.starts_with_a_part for slice_ in slices], dtype=bool), uuid.uuid4().hex)

    def __post_init__(self):
        self.any_in_parts = bool(np.any(self.starts_with_a_part))  # (else every document is in one slice)

    def slices_of(self, positions: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """For each document position: the first and the last slice that hold some of it."""
        positions = np.asarray(positions, dtype=np.int64)
        last = np.searchsorted(self.first_docs, positions, side="right") - 1
        first = last.copy()
        if not self.any_in_parts:
            return first, last
        while True:  # back over the slices holding later parts of the document
            back = (first > 0) & (self.first_docs[np.maximum(first, 0)] == positions) & \
                self.starts_with_a_part[np.maximum(first, 0)]
            if not back.any():
                return first, last
            first[back] -= 1


@dataclass
class UnitWork:
    """One unit: its documents (corpus positions, in the unit's order) and their split."""

    index: int
    split: str
    docs: np.ndarray
    origins: Optional[np.ndarray] = None  # (source index, place in its listing) a document (sources, provenance)


@dataclass
class SplitPairs:
    """One unit, paired and shuffled: what the encode tasks need."""

    tokens_path: str  # the unit's token pool (.npy in the work directory)
    pairs: PairArrays  # token ranges into the pool, in output order
    # Packed records (--pack_sequences): instances of each record, the pairs being row after row.
    pack_sizes: Optional[np.ndarray] = None

    @property
    def n_records(self) -> int:
        return len(self.pairs) if self.pack_sizes is None else len(self.pack_sizes)

    def first_records(self, n: int):
        """The pool's tokens, the pairs of the first ``n`` records and their instances a record."""
        rows, pack_sizes = next(record_slices(self.pack_sizes, 0, n, n))
        return load_array(self.tokens_path), self.pairs.take(rows), pack_sizes


@dataclass
class UnitPairs:
    unit_index: int
    split: str
    pairs: Optional[SplitPairs] = None
    n_docs: int = 0  # documents with text
    n_instances: int = 0
    n_records: int = 0  # records written: instances, or packed rows
    n_record_tokens: int = 0  # tokens of the records that are not padding ([CLS] and [SEP]s included)
    n_sentences: int = 0
    n_tokens: int = 0
    n_replaced: int = 0
    source_instances: Optional[List[int]] = None  # instances made from each source's documents (sources)
    lengths: Optional[np.ndarray] = None  # packed: each instance's tokens, for the split's packing (split_packing)


def _plain(array):
    return np.asarray(array) if isinstance(array, np.memmap) else array


def unit_pool(unit: UnitWork, table: SliceTable, work_dir: str, path: str,
              separator_id: Optional[int] = None, kept: Optional[List[int]] = None) -> Tuple[TokenPool, int]:
    """The unit's documents, gathered from the tokenized slices in the unit's order, as one token
    pool written to ``path`` and memory-mapped from there.  A document read in parts is joined
    again; a skipped document has no rows and is left out.  With ``separator_id`` (MLM-only
    windows that cross documents) that token stands between documents.  Also returns the count
    of characters of the documents that replaced invalid UTF-8.  ``kept``, when given, receives
    the place in ``unit.docs`` of each document of the pool."""
    first, last = table.slices_of(unit.docs)
    numbers = _sorted_unique(_ranges(first, last - first + 1))
    remote = storage.is_url(path) or storage.is_url(work_dir)
    layout = NotImplemented
    if not remote and SEARCH_SLICES_AT_ONCE:
        mapped = mapped_slices(work_dir, numbers.tolist(), DOC_POSITION, table.generation)
        layout = _pool_layout_at_once(unit.docs, numbers, [entry for entry, _, _ in mapped], separator_id is not None)
        arrays = {number: (tokens, sentences) for number, (_, tokens, sentences) in zip(numbers.tolist(), mapped)}
    if layout is NotImplemented:  # a table not in order, or fetched ranges
        found = slice_rows([slice_paths(work_dir, number) for number in numbers.tolist()],
                           _sorted_unique(np.asarray(unit.docs)), DOC_POSITION,
                           lambda row: ((row[TOKEN_START], row[TOKEN_END]), (row[SENTENCE_START], row[SENTENCE_END])),
                           table.generation)
        hits = [(number, hit) for number, hit in zip(numbers.tolist(), found) if hit is not None]
        if remote:  # fetched ranges (``scratch._Ranges``): a row at a time
            return _pool_by_rows(unit, hits, path, separator_id, kept)
        layout = _pool_layout(unit.docs, [(number, hit[0]) for number, hit in hits], separator_id is not None)
        arrays = {number: (_plain(hit[1]), _plain(hit[2])) for number, hit in hits}
    if layout is None:
        return TokenPool(np.zeros(0, np.int32), []), 0
    if kept is not None:
        kept.extend(layout.places.tolist())
    dtype = arrays[int(layout.numbers.min())][0].dtype  # (the first slice with rows')
    temporary = private_temporary(path)
    # A small pool (a unit of short documents) is gathered in memory and written at once: a memory
    # map of a file reserved first costs more than the copy.  A large one is gathered in its file.
    in_memory = layout.size * dtype.itemsize <= POOL_IN_MEMORY
    pool = np.empty(layout.size, dtype) if in_memory else new_array_file(temporary, dtype, layout.size)
    sentence_lengths = np.empty(layout.n_sentences, np.int64)
    # A gather a slice, no Python a document: the rows grouped by slice once (index arrays a
    # slice at a time: a unit of one huge document has tens of millions of tokens).
    by_slice = np.argsort(layout.numbers, kind="stable")
    in_order = layout.numbers[by_slice]
    firsts = np.flatnonzero(np.concatenate(([True], in_order[1:] != in_order[:-1])))
    numbers = in_order[firsts]
    copy = copy_runs()  # (compiled: runs copied in place; else, and for a run out of bounds, index arrays)
    pool_array = np.asarray(pool)
    # Each row's runs, the rows grouped by slice once (a slice's are then views, not index arrays).
    row_starts, token_froms, token_counts, sentence_offsets, sentence_froms, sentence_counts = (
        column[by_slice] for column in (layout.row_starts, layout.token_froms, layout.token_counts,
                                        layout.sentence_offsets, layout.sentence_froms, layout.sentence_counts))
    for number, a, b in zip(numbers.tolist(), firsts.tolist(), np.append(firsts[1:], len(by_slice)).tolist()):
        tokens, sentences = arrays[number]
        if copy is None or not copy(pool_array, row_starts[a:b], tokens, token_froms[a:b], token_counts[a:b]):
            pool[_ranges(row_starts[a:b], token_counts[a:b])] = tokens[_ranges(token_froms[a:b], token_counts[a:b])]
        if copy is None or not copy(sentence_lengths, sentence_offsets[a:b], sentences, sentence_froms[a:b],
                                    sentence_counts[a:b]):
            sentence_lengths[_ranges(sentence_offsets[a:b], sentence_counts[a:b])] = \
                sentences[_ranges(sentence_froms[a:b], sentence_counts[a:b])]
    if separator_id is not None:
        pool[layout.doc_starts[1:] - 1] = separator_id
    if in_memory:
        with open(temporary, "wb") as handle:  # (the header ``new_array_file`` writes)
            write_plain_array(handle, pool)
        tokens = pool  # (pairing reads no token: the pool read from its file is the encode tasks')
    else:
        del pool  # (unmapped, not flushed: the tasks that read it map the same pages; an msync a unit waited on the disk)
    os.replace(temporary, path)
    return TokenPool.from_flat(tokens if in_memory else load_array(path), *layout.bounds(sentence_lengths)), \
        layout.replaced


# Bytes of a unit's pool gathered in memory, not in a memory map of its file (``unit_pool``).
POOL_IN_MEMORY = 8 << 20
# Local slices' rows found by one search of all a unit's slices (``_pool_layout_at_once``); off:
# a search a slice (``scratch.slice_rows``, then ``_pool_layout``), the way for fetched ranges.
SEARCH_SLICES_AT_ONCE = True


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """``np.unique`` of a small 1-D array: sorted, each value once (without its hashing's cost a call)."""
    ordered = np.sort(values)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))] if len(ordered) else ordered


@dataclass
class _PoolLayout:
    """Where each table row of a unit's documents goes in its pool, the rows in pool order
    (a document's rows in slice order; a document listed twice, twice)."""

    places: np.ndarray  # the place in the unit's documents of each document in the pool
    numbers: np.ndarray  # per row: its slice
    token_froms: np.ndarray  # per row: its first token in its slice's tokens
    token_counts: np.ndarray
    row_starts: np.ndarray  # per row: where its tokens go in the pool
    sentence_froms: np.ndarray  # per row: its first sentence in its slice's sentence lengths
    sentence_counts: np.ndarray
    sentence_offsets: np.ndarray  # per row: where its sentences' lengths go, all rows end to end
    doc_rows: np.ndarray  # per document: its first row, then the end
    doc_starts: np.ndarray  # per document: where it starts in the pool
    size: int
    replaced: int

    @property
    def n_sentences(self) -> int:
        return int(self.sentence_counts.sum())

    def bounds(self, sentence_lengths: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """``TokenPool``'s flat bounds: each document's start, then where each of its sentences
        ends (a row's sentences end to end from where the row starts), and each document's offset
        in them."""
        before = np.zeros(len(sentence_lengths) + 1, np.int64)  # sentence lengths summed, all rows end to end
        np.cumsum(sentence_lengths, out=before[1:])
        ends = before[1:] + np.repeat(self.row_starts - before[self.sentence_offsets], self.sentence_counts)
        counted = np.zeros(len(self.sentence_counts) + 1, np.int64)
        np.cumsum(self.sentence_counts, out=counted[1:])
        doc_sentences = counted[self.doc_rows[1:]] - counted[self.doc_rows[:-1]]
        offsets = np.zeros(len(self.doc_starts) + 1, np.int64)
        np.cumsum(doc_sentences + 1, out=offsets[1:])
        flat = np.empty(int(offsets[-1]), np.int64)
        is_start = np.zeros(len(flat), bool)
        is_start[offsets[:-1]] = True
        flat[is_start] = self.doc_starts
        flat[~is_start] = ends
        return flat, offsets


def _ranges(firsts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``firsts[i] .. firsts[i] + counts[i] - 1`` for every i, end to end."""
    counts = counts.astype(np.int64, copy=False)
    total = int(counts.sum())
    if not total:
        return np.zeros(0, np.int64)
    ends = np.cumsum(counts)
    return np.arange(total, dtype=np.int64) + np.repeat(firsts.astype(np.int64, copy=False) - (ends - counts), counts)


def _pool_layout(docs: np.ndarray, tables: List[Tuple[int, np.ndarray]], separated: bool) -> Optional[_PoolLayout]:
    """The layout of a pool of ``docs`` (corpus positions, in the unit's order) from each slice's
    table rows of them (``(slice, rows)`` in slice order); None when no document has a row."""
    if not tables:
        return None
    rows = np.concatenate([np.asarray(table, dtype=np.int64).reshape(-1, np.asarray(table).shape[-1])
                           for _, table in tables])
    numbers = np.concatenate([np.full(len(table), number, np.int64) for number, table in tables])
    order = np.argsort(rows[:, DOC_POSITION], kind="stable")  # by document, then slice (its parts in order)
    rows, numbers = rows[order], numbers[order]
    positions = rows[:, DOC_POSITION]
    docs = np.asarray(docs, dtype=np.int64)
    lows, highs = np.searchsorted(positions, docs, "left"), np.searchsorted(positions, docs, "right")
    places = np.flatnonzero(highs > lows)
    if not len(places):
        return None
    per_doc = (highs - lows)[places]
    taken = _ranges(lows[places], per_doc)
    return _layout_of_rows(rows[taken], numbers[taken], places, per_doc, separated)


def _pool_layout_at_once(docs: np.ndarray, numbers: np.ndarray, tables: list, separated: bool):
    """``_pool_layout`` from the mapped tables (``scratch._Mapped``) of all the slices ``numbers``
    (ascending) a unit reads, searched as one: a slice's positions are in order, and each slice's
    come after the one's before (a document in parts ends one slice and begins the next), so
    their columns end to end are a sorted column where one bisection finds every document's
    rows, its parts in slice order.  A unit of short documents reads ~14 slices: a search a
    slice cost ~12 numpy calls each.  Of each column only the part between the unit's first and
    last document in it is joined (a unit takes a few runs of neighbouring documents: its
    slices' whole columns were ~0.5 MB to copy a unit).  NotImplemented when a table is not in
    order."""
    columns = [table.column for table in tables]
    previous = None
    bounds_of = []  # each column's first and last position (an empty one: none)
    for table, column in zip(tables, columns):
        if not table.sorted_column:
            return NotImplemented
        if len(column):
            first = int(column[0])
            if previous is not None and first < previous:
                return NotImplemented
            previous = int(column[-1])
            bounds_of.append((first, previous))
        else:
            bounds_of.append(None)
    if previous is None:
        return None
    docs = np.asarray(docs, dtype=np.int64)
    wanted = np.sort(docs)
    present = [bounds for bounds in bounds_of if bounds is not None]
    lowest = iter(wanted.searchsorted([first for first, _ in present], "left").tolist())
    highest = iter(wanted.searchsorted([last for _, last in present], "right").tolist())
    parts, froms = [], []
    for column, bounds in zip(columns, bounds_of):
        a = b = 0
        if bounds is not None:
            low, high = next(lowest), next(highest)
            if high > low:  # the column's rows from the unit's first document in it to its last
                a, b = int(column.searchsorted(wanted[low], "left")), int(column.searchsorted(wanted[high - 1], "right"))
        parts.append(column[a:b])
        froms.append(a)
    sizes = np.fromiter((len(part) for part in parts), np.int64, len(parts))
    ends = np.cumsum(sizes)
    positions = np.concatenate(parts)
    lows, highs = positions.searchsorted(docs, "left"), positions.searchsorted(docs, "right")
    places = np.flatnonzero(highs > lows)
    if not len(places):
        return None
    per_doc = (highs - lows)[places]
    taken = _ranges(lows[places], per_doc)  # rows of the parts end to end, in pool order
    which = ends.searchsorted(taken, "right")  # each one's slice (its place in ``tables``)
    local = taken - (ends - sizes - np.asarray(froms, np.int64))[which]
    width = tables[int(which[0])].array.shape[-1]
    rows = np.empty((len(taken), width), np.int64)
    order = np.argsort(which, kind="stable")
    bounds = np.zeros(len(tables) + 1, np.int64)
    np.cumsum(np.bincount(which, minlength=len(tables)), out=bounds[1:])
    for k in np.flatnonzero(bounds[1:] > bounds[:-1]).tolist():
        at = order[bounds[k]:bounds[k + 1]]
        rows[at] = tables[k].array[local[at]]
    return _layout_of_rows(rows, numbers[which], places, per_doc, separated)


def _layout_of_rows(rows: np.ndarray, numbers: np.ndarray, places: np.ndarray, per_doc: np.ndarray,
                    separated: bool) -> _PoolLayout:
    """The layout of the table ``rows`` of a pool's documents in pool order (their slices
    ``numbers``), ``per_doc`` rows for each document kept (its place in the unit: ``places``)."""
    doc_rows = np.zeros(len(places) + 1, np.int64)
    np.cumsum(per_doc, out=doc_rows[1:])
    token_counts = rows[:, TOKEN_END] - rows[:, TOKEN_START]
    row_starts = np.zeros(len(rows), np.int64)
    np.cumsum(token_counts[:-1], out=row_starts[1:])
    if separated:  # one token before every document but the first
        row_starts += np.repeat(np.arange(len(places), dtype=np.int64), per_doc)
    sentence_counts = rows[:, SENTENCE_END] - rows[:, SENTENCE_START]
    sentence_offsets = np.zeros(len(rows), np.int64)
    np.cumsum(sentence_counts[:-1], out=sentence_offsets[1:])
    return _PoolLayout(places, numbers, rows[:, TOKEN_START], token_counts, row_starts, rows[:, SENTENCE_START],
                       sentence_counts, sentence_offsets, doc_rows, row_starts[doc_rows[:-1]],
                       int(row_starts[-1] + token_counts[-1]), int(rows[:, DOC_REPLACED].sum()))


def _pool_by_rows(unit: UnitWork, hits: list, path: str, separator_id: Optional[int],
                  kept: Optional[List[int]]) -> Tuple[TokenPool, int]:
    """``unit_pool`` a table row at a time (the reference, and the way for fetched ranges)."""
    rows: Dict[int, List[Tuple[int, np.ndarray]]] = {}  # position -> [(slice, row)] in slice order
    sentences: Dict[int, np.ndarray] = {}
    tokens: Dict[int, np.ndarray] = {}
    for number, hit in hits:
        table_hits, tokens[number], sentences[number] = hit[0], _plain(hit[1]), _plain(hit[2])
        for row in table_hits:
            rows.setdefault(int(row[DOC_POSITION]), []).append((number, row))

    size, bounds, copies, replaced = 0, [], [], 0
    for place, position in enumerate(unit.docs.tolist()):
        if position not in rows:
            continue
        if kept is not None:
            kept.append(place)
        if separator_id is not None and bounds:
            copies.append((-1, 0, 1))  # the separator, between two documents
            size += 1
        starts = [size]
        for number, row in rows[position]:
            # Each sentence's end: a running sum in Python (a document has a few sentences).
            ends = accumulate(sentences[number][row[SENTENCE_START]:row[SENTENCE_END]].tolist(), initial=size)
            next(ends)
            starts.extend(ends)
            copies.append((number, int(row[TOKEN_START]), int(row[TOKEN_END])))
            size += int(row[TOKEN_END] - row[TOKEN_START])
            replaced += int(row[DOC_REPLACED])
        bounds.append(starts)
    dtype = next(iter(tokens.values())).dtype if tokens else np.int32
    if not bounds:
        return TokenPool(np.zeros(0, dtype), []), 0
    remote = storage.is_url(path)  # built in memory and uploaded whole; else built in place
    temporary = None if remote else private_temporary(path)
    pool = np.empty(size, dtype) if remote else new_array_file(temporary, dtype, size)
    at = 0
    for number, start, end in copies:
        pool[at : at + end - start] = tokens[number][start:end] if number >= 0 else separator_id
        at += end - start
    if remote:
        save_array(pool, path)
        return TokenPool(pool, bounds), replaced
    pool.flush()
    del pool
    os.replace(temporary, path)
    return TokenPool(load_array(path), bounds), replaced


# ---------------------------------------------------------------------------- records to shards

def shard_rows(n_records: int, rotation: int, shard: int, n_shards: int) -> np.ndarray:
    """Record j of a unit goes to shard (rotation + j) mod N.  The rotation is the unit's index
    (balanced shards: it spreads each unit's remainder over different shards), or with Google's
    --output_file the number of records before the unit (record i of the run to file i mod N)."""
    return np.arange((shard - rotation) % n_shards, n_records, n_shards)


@dataclass
class EncodeTask:
    """The records of one unit and split bound for some output shards: the pool's tokens, and
    the pairs of each shard one after the other (only what the task needs travels)."""

    unit_index: int
    split: str
    tokens_path: str
    pairs: PairArrays
    shards: List[int]
    shard_sizes: List[int]  # records
    pack_sizes: Optional[np.ndarray] = None  # packed: instances of each record, the pairs row after row
    sources: Optional[PairSources] = None  # packed with the split: the rows' instances, from several units


def make_encode_tasks(unit_index: int, split: str, data, n_shards: int,
                      rotation: Optional[int] = None) -> List[EncodeTask]:
    """A unit's records (``SplitPairs``, or packed with its split ``PackedRows``) dealt to the
    shards, in encode tasks."""
    rotation = unit_index if rotation is None else rotation
    tasks = []
    n_records = data.n_records
    for shards in shards_per_encode_task(n_records, n_shards):
        rows = np.concatenate([shard_rows(n_records, rotation, shard, n_shards) for shard in shards])
        sizes = [len(shard_rows(n_records, rotation, shard, n_shards)) for shard in shards]
        if isinstance(data, PackedRows):
            sources, pack_sizes = data.take_rows(rows)
            tasks.append(EncodeTask(unit_index, split, "", None, shards, sizes, pack_sizes, sources))
        elif data.pack_sizes is None:
            tasks.append(EncodeTask(unit_index, split, data.tokens_path, data.pairs.take(rows), shards, sizes))
        else:
            tasks.append(EncodeTask(unit_index, split, data.tokens_path,
                                    data.pairs.take(row_members(data.pack_sizes, rows)), shards, sizes,
                                    data.pack_sizes[rows]))
    return tasks


def record_slices(pack_sizes: Optional[np.ndarray], first: int, end: int, step: int):
    """Records ``first`` to ``end`` of a task in groups of ``step``: for each group, the pairs
    it takes (a slice) and the instances of each of its records (None: one each)."""
    if pack_sizes is None:
        for start in range(first, end, step):
            yield slice(start, min(start + step, end)), None
        return
    bounds = np.concatenate([[0], np.cumsum(pack_sizes)])
    for start in range(first, end, step):
        stop = min(start + step, end)
        yield slice(int(bounds[start]), int(bounds[stop])), pack_sizes[start:stop]


def shards_per_encode_task(n_records: int, n_shards: int, records_per_task: int = 8192) -> List[List[int]]:
    """A unit's output shards grouped into encode tasks of about ``records_per_task`` records.  The
    grouping changes only how work is spread, never the bytes: each shard has its own stream."""
    n_tasks = max(1, min(n_shards, round(n_records / records_per_task)))
    return [list(range(n_shards))[task::n_tasks] for task in range(n_tasks)]
