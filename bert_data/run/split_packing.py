"""``--pack_sequences`` across units: each split is packed as a whole (issue 30).

Packing within a unit leaves rows that find no partner among the unit's instances; the whole
split's histogram of lengths finds them one.  The orchestration, in two phases:

1. every unit is paired (``tasks.pair_unit``); its pairs go to the work directory
   (:func:`save_unit_pairs`, beside its token pool) and only its instances' lengths come back
   to the parent (2 bytes an instance, never a token);
2. once every unit of a split is paired, the parent packs the split
   (:func:`bert_data.pipeline.packing.pack_split`: a plan made on the split's histogram, then
   each instance put in its place) into one block of rows a unit (:class:`PackedRows`); each
   block is masked and encoded by its unit's encode tasks, which gather their rows' instances
   from the pools of the units that hold them (:func:`gather_pairs`), and appended to the
   shards in unit order, as unpacked units are.

A row is written by the unit of its first instance, and its other instances come from that
unit or later ones, so a unit's pool and pairs are spent once the unit is appended.  The rows
of a block are put in a seeded order of the unit's own (``PACKING`` stream).  Everything is a
function of the seed and the split's units, so the bytes do not depend on the number of workers,
and ``--resume`` pairs the units again (for the histogram) and gives the bytes of an
uninterrupted run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..pipeline.instances import PairArrays
from ..pipeline.packing import PackingSpec, budgets_of, pack_split, row_members
from ..pipeline.streams import PACKING, random_streams
from .run_files import pairs_path, pool_path
from .scratch import load_array, save_array

_PAIR_FIELDS = ("a_start", "a_length", "b_start", "b_length", "is_random_next")


def save_unit_pairs(pairs: PairArrays, path: str) -> None:
    """A unit's pairs as one int64 table (a row an instance: A's and B's token ranges in the
    pool, the label, and the origin when kept)."""
    columns = [np.asarray(getattr(pairs, name), dtype=np.int64).reshape(-1, 1) for name in _PAIR_FIELDS]
    if pairs.origin is not None:
        columns.append(np.asarray(pairs.origin, dtype=np.int64).reshape(len(pairs), -1))
    save_array(np.concatenate(columns, axis=1) if len(pairs) else np.zeros((0, len(_PAIR_FIELDS)), np.int64), path)


def _loaded(path: str, cache: Optional[Dict[str, np.ndarray]]) -> np.ndarray:
    """A work file's array, once a task (at a URL it is read whole)."""
    if cache is None:
        return load_array(path)
    if path not in cache:
        cache[path] = load_array(path)
    return cache[path]


def load_unit_pairs(path: str, rows: np.ndarray, cache: Optional[Dict[str, np.ndarray]] = None) -> PairArrays:
    """Some of a unit's saved pairs (``rows``: indices among its instances)."""
    table = np.asarray(_loaded(path, cache)[np.asarray(rows, dtype=np.int64)])
    origin = table[:, len(_PAIR_FIELDS):] if table.shape[1] > len(_PAIR_FIELDS) else None
    a_start, a_length, b_start, b_length, is_random_next = (table[:, i] for i in range(len(_PAIR_FIELDS)))
    return PairArrays(a_start, a_length, b_start, b_length, is_random_next.astype(bool), origin)


def _runs(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions start, start + 1, ..., start + length - 1 of every run, one after the other."""
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.repeat(starts - offsets, lengths) + np.arange(total)


@dataclass
class PairSources:
    """Instances of several units: for each, its unit and its index among the unit's instances
    (whose pool and pairs are in the work directory)."""

    work_dir: str
    member_units: np.ndarray
    members: np.ndarray

    def take(self, rows) -> "PairSources":
        return PairSources(self.work_dir, self.member_units[rows], self.members[rows])


def gather_pairs(sources: PairSources, cache: Optional[Dict[str, np.ndarray]] = None
                 ) -> Tuple[np.ndarray, PairArrays]:
    """The instances' tokens copied from their units' pools into one small pool (for each:
    a spare token, A's tokens, B's), and their pairs pointing into it: what ``instance_columns``
    takes, for instances of any units.  ``cache``: the pools and pairs a task has loaded."""
    n = len(sources.members)
    parts: List[Tuple[np.ndarray, PairArrays]] = []
    order = np.argsort(sources.member_units, kind="stable")
    units, firsts = np.unique(sources.member_units[order], return_index=True)
    bounds = list(firsts) + [n]
    for at, unit in enumerate(units.tolist()):
        chosen = order[bounds[at]:bounds[at + 1]]
        pairs = load_unit_pairs(pairs_path(sources.work_dir, unit), sources.members[chosen], cache)
        pool = _loaded(pool_path(sources.work_dir, unit), cache)
        a_length = pairs.a_length.astype(np.int64)
        b_length = pairs.b_length.astype(np.int64)
        spare = np.maximum(pairs.a_start.astype(np.int64) - 1, 0)  # read, then overwritten by [CLS]
        starts = np.stack([spare, pairs.a_start, pairs.b_start], axis=1).reshape(-1)
        lengths = np.stack([np.ones_like(a_length), a_length, b_length], axis=1).reshape(-1)
        parts.append((chosen, pairs, np.asarray(pool[_runs(starts, lengths)]) if len(pool) else
                      np.zeros(int(lengths.sum()), dtype=np.int32)))
    dtype = parts[0][2].dtype if parts else np.int32
    tokens = np.concatenate([part[2] for part in parts]).astype(dtype, copy=False) if parts else np.zeros(0, dtype)
    a_start, a_length = np.zeros(n, np.int64), np.zeros(n, np.int64)
    b_start, b_length = np.zeros(n, np.int64), np.zeros(n, np.int64)
    labels = np.zeros(n, dtype=bool)
    origin = None
    base = 0
    for chosen, pairs, unit_tokens in parts:
        size = 1 + pairs.a_length.astype(np.int64) + pairs.b_length.astype(np.int64)
        first = base + np.concatenate([[0], np.cumsum(size)[:-1]])
        a_start[chosen], a_length[chosen] = first + 1, pairs.a_length
        b_start[chosen], b_length[chosen] = first + 1 + pairs.a_length, pairs.b_length
        labels[chosen] = pairs.is_random_next
        if pairs.origin is not None:
            origin = np.zeros((n, pairs.origin.shape[1]), np.int64) if origin is None else origin
            origin[chosen] = pairs.origin
        base += len(unit_tokens)
    return tokens, PairArrays(a_start, a_length, b_start, b_length, labels, origin)


@dataclass
class PackedRows:
    """One unit's block of rows when the split is packed as a whole: what its encode tasks
    need (the rows' instances, row after row, and the instances of each row)."""

    sources: PairSources
    pack_sizes: np.ndarray

    @property
    def n_records(self) -> int:
        return len(self.pack_sizes)

    def take_rows(self, rows) -> Tuple[PairSources, np.ndarray]:
        return self.sources.take(row_members(self.pack_sizes, rows)), self.pack_sizes[rows]

    def first_records(self, n: int):
        """The tokens and pairs of the first ``n`` rows' instances, and their instances a row."""
        sources, pack_sizes = self.take_rows(np.arange(n))
        return (*gather_pairs(sources), pack_sizes)


class SplitPacker:
    """The parent's side: each unit's instance lengths as its pairing finishes; once a split's
    units are all paired, its blocks (:meth:`blocks`)."""

    def __init__(self, units_per_split: Dict[str, List[int]], spec: PackingSpec, seed: int, work_dir: str):
        self.units_per_split, self.spec, self.seed, self.work_dir = units_per_split, spec, seed, work_dir
        self.lengths: Dict[int, np.ndarray] = {}

    def add(self, unit_index: int, lengths: Optional[np.ndarray]) -> None:
        self.lengths[unit_index] = np.zeros(0, np.int64) if lengths is None else np.asarray(lengths)

    def ready(self, split: str) -> bool:
        return all(unit in self.lengths for unit in self.units_per_split.get(split, []))

    def blocks(self, split: str) -> Dict[int, Tuple[Optional[PackedRows], int]]:
        """Each unit of the split: its rows (None when it writes none) and their tokens."""
        units = self.units_per_split[split]
        lengths = [self.lengths.pop(unit) for unit in units]
        spec = self.spec
        blocks = pack_split(lengths, [budgets_of(unit_lengths, spec) for unit_lengths in lengths],
                            spec.max_seq_length, spec.prediction_slots, spec.max_sequences_per_pack)
        result: Dict[int, Tuple[Optional[PackedRows], int]] = {}
        for unit, block in zip(units, blocks):
            member_units = np.asarray(units, dtype=np.int64)[block.member_units] if len(units) else block.member_units
            tokens = int(sum(lengths[int(u)][block.members[block.member_units == u]].sum()
                             for u in np.unique(block.member_units)))
            if not len(block.sizes):
                result[unit] = (None, 0)
                continue
            # The rows in a seeded order of the unit's own (the plan gives them by first instance).
            rows = np.random.default_rng(random_streams(self.seed, unit, split, PACKING)).permutation(len(block.sizes))
            sources = PairSources(self.work_dir, member_units, block.members)
            members = row_members(block.sizes, rows)
            result[unit] = (PackedRows(sources.take(members), block.sizes[rows]), tokens)
        return result
