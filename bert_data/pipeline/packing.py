"""Packed sequences: several instances in one row of ``max_seq_length``, none attending to another.

Graphcore's packed BERT (Krell et al. 2021, "Efficient Sequence Packing without
Cross-contamination") and the MLPerf BERT submissions that followed it store a packed row as:

* ``input_ids``, ``segment_ids``: the instances one after the other, then padding;
* ``input_mask``: the index (1..k) of the instance each token belongs to, 0 on padding (so an
  attention mask is ``input_mask[i] == input_mask[j] != 0``: block-diagonal);
* ``positions``: position ids restarting at 0 for each instance (0 on padding);
* ``masked_lm_positions``/``masked_lm_ids``: the predictions of every instance of the row, in
  row order (positions in the row), ``max_predictions_per_seq + max_sequences_per_pack`` slots;
  ``masked_lm_weights``: the index of the instance a prediction belongs to, 0 on unused slots
  (``weights > 0`` is the usual 1.0/0.0 weight);
* ``next_sentence_positions``/``next_sentence_labels``/``next_sentence_weights``: per instance,
  the position of its [CLS], its label, and 1 (0 on unused slots), ``max_sequences_per_pack``
  of each.

This module is that layout's one implementation, pure numpy: :func:`pack_instances` decides
which instances share a row (Graphcore's shortest-pack-first histogram packing, :func:`plan_rows`:
best-fit decreasing decided on the histogram of lengths, deterministic),
:func:`pack_columns` lays out masked instances as packed rows, and :func:`unpack_rows` splits
rows into instances again (``inspect``, tests); ``format.packed_rows`` writes and reads them in
transformers' row model (Parquet, MDS).  The readers build the model inputs of packed rows with
:func:`block_diagonal_mask` and :func:`cu_seqlens`.

Masks are drawn per instance before packing, by the same function as for unpacked data, so a
packed instance is an unpacked instance moved in a row.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..format.layout import DEFAULT_SEQUENCES_PER_PACK, packed_predictions  # noqa: F401 (re-exported)
from .masking import num_to_predict

__all__ = ["PackingSpec", "DEFAULT_SEQUENCES_PER_PACK", "packed_predictions", "pack_instances", "plan_rows",
           "pack_split", "PackedBlock", "budgets_of",
           "pack_columns", "unpack_rows", "instance_lengths", "block_diagonal_mask", "cu_seqlens", "fill_rate",
           "row_members"]


@dataclass
class _Packs:
    """Open or closed packs of one kind: ``count`` rows each holding instances of the
    ``kinds`` (indices into the distinct (length, budget) kinds), ``room`` tokens and
    ``predictions_room`` predictions left."""

    kinds: Tuple[int, ...]
    count: int
    room: int
    predictions_room: int


def plan_rows(kind_lengths, kind_budgets, kind_counts, capacity: int, prediction_capacity: int,
              max_per_pack: int) -> List[Tuple[Tuple[int, ...], int]]:
    """Graphcore's shortest-pack-first histogram packing (SPFHP): which kinds of instance share
    a row, decided on the histogram alone, never on the instances themselves.

    ``kind_lengths``/``kind_budgets``: the distinct (tokens, masking budget) of the instances,
    ``kind_counts``: how many instances of each.  Kinds are taken longest first (then the
    larger budget); each kind's instances go, as many as fit, into the open packs with the least
    room left that still take one (tokens, predictions, fewer than ``max_per_pack`` instances),
    splitting a group of equal packs when only some of them are needed, and the rest open new
    packs.  This is best-fit decreasing with multiplicities: its cost grows with the number of
    distinct packs (a few thousand), not with the instances, so a whole split's histogram
    (kilobytes) is packed in milliseconds.  Returns ``[(kinds of a row, number of such rows)]``
    in the order the packs were made; a pure function of its arguments."""
    lengths = np.asarray(kind_lengths, dtype=np.int64)
    budgets = np.asarray(kind_budgets, dtype=np.int64)
    counts = np.asarray(kind_counts, dtype=np.int64)
    packs: List[_Packs] = []  # every pack group, in the order made (the plan's order)
    open_by_room: Dict[int, List[int]] = {}  # room left -> open pack groups with that room, oldest first
    rooms: List[int] = []  # the rooms of open_by_room, ascending
    for kind in np.lexsort((-budgets, -lengths)).tolist():
        length, budget, left = int(lengths[kind]), int(budgets[kind]), int(counts[kind])
        at = bisect.bisect_left(rooms, length)
        while left > 0:
            target = None
            while at < len(rooms) and target is None:  # the least room that takes it
                for group in open_by_room[rooms[at]]:
                    if packs[group].predictions_room >= budget:
                        target = group
                        break
                else:
                    at += 1
            if target is None:  # new packs, each taking as many as it can (as best fit would)
                each = min(capacity // length, max_per_pack,
                           prediction_capacity // budget if budget else max_per_pack)
                for per_pack, count in ((each, left // each), (left % each, 1)):
                    if per_pack and count:
                        packs.append(_Packs((kind,) * per_pack, count, capacity - per_pack * length,
                                            prediction_capacity - per_pack * budget))
                        _open(packs, len(packs) - 1, open_by_room, rooms, max_per_pack)
                break
            source = packs[target]
            # Instance by instance, best fit would put the next ones into the same pack while
            # it has room for them (its room is now the least that fits): ``each`` a pack.
            each = min(source.room // length, max_per_pack - len(source.kinds),
                       source.predictions_room // budget if budget else max_per_pack)
            taken = min(left // each, source.count)
            if not taken:  # fewer left than a pack takes: one pack takes them all
                each, taken = left, 1
            source.count -= taken
            if not source.count:
                _close(source.room, target, open_by_room, rooms)
            packs.append(_Packs(source.kinds + (kind,) * each, taken, source.room - each * length,
                                source.predictions_room - each * budget))
            _open(packs, len(packs) - 1, open_by_room, rooms, max_per_pack)
            left -= each * taken
            at = bisect.bisect_left(rooms, length)
    return [(group.kinds, group.count) for group in packs if group.count]


def _open(packs: List[_Packs], group: int, open_by_room: Dict[int, List[int]], rooms: List[int],
          max_per_pack: int) -> None:
    """A new pack group takes more instances if it has room for a token and an instance."""
    pack = packs[group]
    if pack.room <= 0 or len(pack.kinds) >= max_per_pack:
        return
    if pack.room not in open_by_room:
        open_by_room[pack.room] = []
        bisect.insort(rooms, pack.room)
    open_by_room[pack.room].append(group)


def _close(room: int, group: int, open_by_room: Dict[int, List[int]], rooms: List[int]) -> None:
    groups = open_by_room.get(room)
    if groups is None or group not in groups:
        return  # (a full pack was never open)
    groups.remove(group)
    if not groups:
        del open_by_room[room]
        rooms.pop(bisect.bisect_left(rooms, room))


@dataclass(frozen=True)
class PackingSpec:
    """How instances are packed into rows (``--pack_sequences``): rows of ``max_seq_length``
    tokens holding at most ``max_sequences_per_pack`` instances and ``prediction_slots``
    predictions (``packed_predictions``); an instance's masking budget is drawn as the masks
    are (``masked_lm_prob``, at most ``max_predictions_per_seq``), so that load-time masks of
    unmasked rows fit the row's slots too."""

    max_seq_length: int
    max_sequences_per_pack: int
    masked_lm_prob: float
    max_predictions_per_seq: int

    @property
    def prediction_slots(self) -> int:
        return packed_predictions(self.max_predictions_per_seq, self.max_sequences_per_pack)


def budgets_of(lengths: np.ndarray, spec: PackingSpec) -> np.ndarray:
    """Each instance's masking budget, drawn as its masks are."""
    return num_to_predict(np.asarray(lengths, dtype=np.int64), spec.masked_lm_prob, spec.max_predictions_per_seq)


def pack(lengths: np.ndarray, spec: PackingSpec) -> Tuple[np.ndarray, np.ndarray]:
    """Which instances share a row (see :func:`pack_instances`), each instance's masking budget
    drawn as its masks are."""
    return pack_instances(lengths, budgets_of(lengths, spec), spec.max_seq_length, spec.prediction_slots,
                          spec.max_sequences_per_pack)


def pack_instances(lengths, budgets, max_seq_length: int, prediction_capacity: int,
                   max_sequences_per_pack: int) -> Tuple[np.ndarray, np.ndarray]:
    """Which instances share a row: returns ``(order, sizes)``, the instance indices row after
    row and the number of instances of each row (``sizes.sum() == len(lengths)``).

    ``lengths``: tokens of each instance (with its [CLS] and [SEP]s), at most
    ``max_seq_length``; ``budgets``: the most predictions each may get (its masking budget).
    The rows are planned on the histogram of all the instances (:func:`plan_rows`, see
    :func:`pack_split`, of which this is the case of one unit).  Within a row instances keep
    their given order, and rows come in the order of their first instance.  A pure function of
    its arguments.
    """
    blocks = pack_split([lengths], [budgets], max_seq_length, prediction_capacity, max_sequences_per_pack)
    return blocks[0].members, blocks[0].sizes


@dataclass
class PackedBlock:
    """The rows a unit writes when a whole split is packed together (:func:`pack_split`): its
    rows' members, row after row, as (unit, index among that unit's instances), and the number of
    instances of each row."""

    member_units: np.ndarray
    members: np.ndarray
    sizes: np.ndarray


def pack_split(unit_lengths: List[np.ndarray], unit_budgets: List[np.ndarray], max_seq_length: int,
               prediction_capacity: int, max_sequences_per_pack: int) -> List[PackedBlock]:
    """A whole split packed at once, across its units: returns each unit's block of rows.

    ``unit_lengths``/``unit_budgets``: each unit's instances (tokens, masking budget), in the
    unit's order.  The rows are planned on the split's histogram of (length, budget)
    (:func:`plan_rows`); then the k-th instance of a kind, counting unit after unit, takes the
    k-th place of that kind in the plan.  The plan's rows are interleaved so that the places of
    every kind are used at the same pace (a row ``i`` of ``n`` alike rows comes at ``(i + 0.5) / n``
    of the way), so a row mostly takes instances of one unit, and only rows near the end of a
    unit's instances take some from the next units.  A row is written by the unit of its first
    instance, in the order of the rows' first instances; within a row instances come in unit and
    index order.  A pure function of its arguments."""
    counts = np.asarray([len(lengths) for lengths in unit_lengths], dtype=np.int64)
    lengths = np.concatenate([np.asarray(x, dtype=np.int64) for x in unit_lengths]) if len(counts) else \
        np.zeros(0, dtype=np.int64)
    budgets = np.concatenate([np.asarray(x, dtype=np.int64) for x in unit_budgets]) if len(counts) else \
        np.zeros(0, dtype=np.int64)
    if len(lengths) and (lengths.max() > max_seq_length or lengths.min() < 1):
        raise ValueError(f"instance lengths must lie in [1, {max_seq_length}]")
    if max_sequences_per_pack < 1:
        raise ValueError("max_sequences_per_pack must be at least 1")
    if len(budgets) and (budgets.max() > prediction_capacity or budgets.min() < 0):
        raise ValueError(f"masking budgets must lie in [0, {prediction_capacity}]")
    empty = np.zeros(0, dtype=np.int64)
    if not len(lengths):
        return [PackedBlock(empty, empty, empty) for _ in counts]
    scale = int(budgets.max()) + 1
    distinct, kind_of, kind_counts = np.unique(lengths * scale + budgets, return_inverse=True, return_counts=True)
    plan = plan_rows(distinct // scale, distinct % scale, kind_counts, max_seq_length, prediction_capacity,
                     max_sequences_per_pack)
    place_rows, place_kinds = _interleaved_places(plan)
    # The k-th instance of a kind (in unit, then index order) takes the k-th place of that kind.
    row_of = np.empty(len(lengths), dtype=np.int64)
    row_of[np.argsort(kind_of.reshape(-1), kind="stable")] = place_rows[np.argsort(place_kinds, kind="stable")]
    n_rows = int(place_rows.max()) + 1
    first = np.full(n_rows, len(lengths), dtype=np.int64)
    np.minimum.at(first, row_of, np.arange(len(lengths)))
    row_order = np.argsort(first, kind="stable")
    order = np.lexsort((np.arange(len(lengths)), first[row_of]))
    sizes = np.bincount(row_of, minlength=n_rows)[row_order]
    unit_starts = np.concatenate([[0], np.cumsum(counts)])
    unit_of = np.repeat(np.arange(len(counts)), counts)
    # Rows by first instance: each unit's block is a run of rows.
    row_bounds = np.searchsorted(first[row_order], unit_starts)
    member_bounds = np.concatenate([[0], np.cumsum(sizes)])[row_bounds]
    blocks = []
    for unit in range(len(counts)):
        members = order[member_bounds[unit]:member_bounds[unit + 1]]
        blocks.append(PackedBlock(unit_of[members], members - unit_starts[unit_of[members]],
                                  sizes[row_bounds[unit]:row_bounds[unit + 1]]))
    return blocks


def _interleaved_places(plan: List[Tuple[Tuple[int, ...], int]]) -> Tuple[np.ndarray, np.ndarray]:
    """The places of a plan, row after row: each place's row and the kind of instance it takes.
    The rows of each pack group are spread evenly over the whole (row ``i`` of a group of ``n``
    at ``(i + 0.5) / n``), so that every kind's places are used at the same pace."""
    keys, widths, kinds = [], [], []
    for group_kinds, count in plan:
        keys.append((np.arange(count) + 0.5) / count)
        widths.append(np.full(count, len(group_kinds), dtype=np.int64))
        kinds.append(np.tile(np.asarray(group_kinds, dtype=np.int64), count))
    keys, widths, kinds = np.concatenate(keys), np.concatenate(widths), np.concatenate(kinds)
    rank = np.empty(len(keys), dtype=np.int64)
    rank[np.argsort(keys, kind="stable")] = np.arange(len(keys))  # each plan row's place in the interleaving
    place_rows = np.repeat(rank, widths)
    order = np.argsort(place_rows, kind="stable")
    return place_rows[order], kinds[order]


def _row_places(lengths: np.ndarray, sizes: np.ndarray):
    """For instances laid out row after row: each one's row, its slot in the row (0..k-1) and
    the row position its first token goes to."""
    n_rows = len(sizes)
    row = np.repeat(np.arange(n_rows), sizes)
    row_first = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    slot = np.arange(len(row)) - row_first[row]
    ends = np.cumsum(lengths)
    row_token_start = np.concatenate([[0], ends])[row_first][row]  # tokens before the row's first instance
    offset = np.concatenate([[0], ends[:-1]]) - row_token_start
    return row, slot, offset


def pack_columns(columns: Dict[str, np.ndarray], lengths, sizes, max_seq_length: int, max_sequences_per_pack: int,
                 prediction_slots: Optional[int] = None) -> Dict[str, np.ndarray]:
    """Instances -> packed rows, by canonical feature name.

    ``columns``: the instances' own columns, in row order (``input_ids`` (n, L) and optionally
    ``segment_ids``, ``masked_lm_positions``/``_ids``/``_weights`` (n, P) and
    ``next_sentence_labels`` (n, 1)); ``lengths``: their tokens; ``sizes``: instances per row.
    Returns the packed layout's columns (see the module's docstring), ``prediction_slots``
    (default ``P + max_sequences_per_pack``) slots of predictions a row.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    n_rows = len(sizes)
    if sizes.size and sizes.max() > max_sequences_per_pack:
        raise ValueError(f"a row holds {sizes.max()} instances, more than {max_sequences_per_pack}")
    row, slot, offset = _row_places(lengths, sizes)
    if n_rows and (offset + lengths).max() > max_seq_length:
        raise ValueError(f"a row holds more than {max_seq_length} tokens")
    tokens = np.arange(columns["input_ids"].shape[1])[None, :] < lengths[:, None]
    instance, column = np.nonzero(tokens)
    target = (row[instance], offset[instance] + column)
    out: Dict[str, np.ndarray] = {}
    out["input_ids"] = np.zeros((n_rows, max_seq_length), dtype=np.int32)
    out["input_ids"][target] = columns["input_ids"][instance, column]
    out["input_mask"] = np.zeros((n_rows, max_seq_length), dtype=np.int32)
    out["input_mask"][target] = slot[instance] + 1
    if "segment_ids" in columns:
        out["segment_ids"] = np.zeros((n_rows, max_seq_length), dtype=np.int32)
        out["segment_ids"][target] = columns["segment_ids"][instance, column]
    if "word_starts" in columns:  # --store_word_starts: token by token, as the ids
        out["word_starts"] = np.zeros((n_rows, max_seq_length), dtype=np.int32)
        out["word_starts"][target] = columns["word_starts"][instance, column]
    out["positions"] = np.zeros((n_rows, max_seq_length), dtype=np.int32)
    out["positions"][target] = column
    if "masked_lm_positions" in columns:
        weights = columns["masked_lm_weights"]
        slots = prediction_slots or packed_predictions(weights.shape[1], max_sequences_per_pack)
        counts = (weights > 0).sum(axis=1)
        # Predictions before this instance's in its row.
        ends = np.cumsum(counts)
        before = np.concatenate([[0], ends[:-1]])
        first_of_row = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        row_prediction_start = before[first_of_row][row] if len(row) else before
        prediction_offset = before - row_prediction_start
        if len(counts) and (prediction_offset + counts).max() > slots:
            raise ValueError(f"a row holds more than {slots} predictions")
        instance, k = np.nonzero(weights > 0)
        target = (row[instance], prediction_offset[instance] + k)
        out["masked_lm_positions"] = np.zeros((n_rows, slots), dtype=np.int32)
        out["masked_lm_positions"][target] = columns["masked_lm_positions"][instance, k] + offset[instance]
        out["masked_lm_ids"] = np.zeros((n_rows, slots), dtype=np.int32)
        out["masked_lm_ids"][target] = columns["masked_lm_ids"][instance, k]
        out["masked_lm_weights"] = np.zeros((n_rows, slots), dtype=np.float32)
        out["masked_lm_weights"][target] = slot[instance] + 1
    if "next_sentence_labels" in columns:
        out["next_sentence_positions"] = np.zeros((n_rows, max_sequences_per_pack), dtype=np.int32)
        out["next_sentence_positions"][row, slot] = offset
        out["next_sentence_labels"] = np.zeros((n_rows, max_sequences_per_pack), dtype=np.int32)
        out["next_sentence_labels"][row, slot] = np.asarray(columns["next_sentence_labels"]).reshape(-1)
        out["next_sentence_weights"] = np.zeros((n_rows, max_sequences_per_pack), dtype=np.float32)
        out["next_sentence_weights"][row, slot] = 1.0
    return out


def instance_lengths(input_mask: np.ndarray, max_sequences_per_pack: Optional[int] = None) -> np.ndarray:
    """Tokens of each instance of packed rows: ``(n, k)`` from an ``input_mask`` of indices
    (``k``: the most instances a row may hold, by default the most any of these rows holds)."""
    input_mask = np.asarray(input_mask)
    k = max_sequences_per_pack or int(input_mask.max(initial=0))
    return np.stack([(input_mask == index).sum(axis=1) for index in range(1, k + 1)], axis=1) if k else \
        np.zeros((len(input_mask), 0), dtype=np.int64)


def unpack_rows(batch: Dict[str, np.ndarray]) -> List[List[Dict[str, np.ndarray]]]:
    """Packed rows -> their instances, as each would be unpacked (positions from 0, padding
    cut): for every row, a list of ``{feature: 1-D array}`` with ``input_ids``, ``segment_ids``
    (if stored), ``masked_lm_positions``/``masked_lm_ids`` (the instance's own predictions,
    positions within the instance) and ``next_sentence_label`` (if stored).  Canonical names."""
    rows = []
    input_mask = np.asarray(batch["input_mask"])
    for r in range(len(input_mask)):
        instances = []
        for index in range(1, int(input_mask[r].max(initial=0)) + 1):
            where = np.flatnonzero(input_mask[r] == index)
            if not len(where):
                continue
            start = int(where[0])
            instance = {"input_ids": np.asarray(batch["input_ids"][r][where])}
            if "segment_ids" in batch:
                instance["segment_ids"] = np.asarray(batch["segment_ids"][r][where])
            if "masked_lm_positions" in batch:
                mine = np.asarray(batch["masked_lm_weights"][r]) == index
                instance["masked_lm_positions"] = np.asarray(batch["masked_lm_positions"][r][mine]) - start
                instance["masked_lm_ids"] = np.asarray(batch["masked_lm_ids"][r][mine])
            if "next_sentence_labels" in batch:
                instance["next_sentence_label"] = int(batch["next_sentence_labels"][r][index - 1])
            instances.append(instance)
        rows.append(instances)
    return rows


def block_diagonal_mask(input_mask: np.ndarray) -> np.ndarray:
    """The attention of packed rows for models without variable-length attention: ``(n, 1, L,
    L)`` bool, True where query and key belong to the same instance (never a padding key).
    ``transformers``' BERT takes it as its 4-D ``attention_mask`` (bool, as its SDPA attention
    wants it), and then no instance attends to another."""
    input_mask = np.asarray(input_mask)
    same = (input_mask[:, :, None] == input_mask[:, None, :]) & (input_mask[:, None, :] != 0)
    return same[:, None, :, :]


def cu_seqlens(input_mask: np.ndarray) -> np.ndarray:
    """Cumulative instance lengths of a batch of packed rows laid end to end, as flash
    attention's variable-length kernels take them (``cu_seqlens``, int32, starting at 0): one
    boundary per instance, and the row's padding as a sequence of its own so that offsets stay
    those of the flattened ``(n * L)`` batch."""
    input_mask = np.asarray(input_mask)
    n, width = input_mask.shape
    lengths = instance_lengths(input_mask)
    padding = width - lengths.sum(axis=1)
    per_row = np.concatenate([lengths, padding[:, None]], axis=1).reshape(-1)
    per_row = per_row[per_row > 0]
    return np.concatenate([[0], np.cumsum(per_row)]).astype(np.int32)


def fill_rate(input_mask: np.ndarray) -> float:
    """Tokens that are not padding, over all slots of the rows (packed or not)."""
    input_mask = np.asarray(input_mask)
    return float((input_mask != 0).sum() / input_mask.size) if input_mask.size else 0.0


def row_members(sizes, rows) -> np.ndarray:
    """The instances (indices into the row-after-row order) of the given rows, in the given
    order: ``sizes`` instances per row."""
    sizes = np.asarray(sizes, dtype=np.int64)
    rows = np.asarray(rows, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)[rows]
    counts = sizes[rows]
    if not counts.sum():
        return np.zeros(0, dtype=np.int64)
    # Each member's index: its row's start plus its rank within the row.
    firsts = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    return firsts + np.arange(counts.sum())
