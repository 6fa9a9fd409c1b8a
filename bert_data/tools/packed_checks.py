"""``bert-data verify`` on packed rows (``--pack_sequences``): the packing itself is checked here
(instance indices, positions, the pair fields, which instance each prediction belongs to), then
every instance is laid out as an unpacked record and goes through the ordinary checks of
:func:`bert_data.tools.record_checks.check_batch`, its problems reported on its row."""

from __future__ import annotations

from typing import Dict, List

import numpy as np

from .record_checks import Check, VocabIds, check_batch, _short

__all__ = ["check_packed_batch", "instance_rows"]


def _instance_starts(mask: np.ndarray) -> np.ndarray:
    """For every token of well-formed rows: the column where its instance starts."""
    n, width = mask.shape
    col = np.arange(width)[None, :]
    previous = np.concatenate([np.zeros((n, 1), dtype=mask.dtype), mask[:, :-1]], axis=1)
    is_start = (mask > 0) & (mask != previous)
    return np.maximum.accumulate(np.where(is_start, col, 0), axis=1)


def instance_rows(cols: Dict[str, np.ndarray], rows: np.ndarray):
    """The instances of the given (well-formed) packed rows as unpacked records: ``(columns,
    row of each instance, index of each instance in its row)``, each instance from column 0,
    padded to the row's width, with the row's prediction slots."""
    mask = cols["input_mask"][rows]
    n, width = mask.shape
    count = mask.max(axis=1, initial=0)
    row_of = np.repeat(np.arange(n), count)
    index = np.concatenate([np.arange(1, c + 1) for c in count]) if n else np.zeros(0, dtype=np.int64)
    index = index.astype(np.int64)
    member = mask[row_of] == index[:, None]
    length = member.sum(axis=1)
    offset = np.argmax(member, axis=1)
    col = np.arange(width)[None, :]
    inside = col < length[:, None]
    source = np.where(inside, offset[:, None] + col, 0)
    take = lambda name: np.where(inside, cols[name][rows][row_of[:, None], source], 0)  # noqa: E731
    out = {"input_ids": take("input_ids"), "input_mask": inside.astype(np.int64)}
    if "segment_ids" in cols:
        out["segment_ids"] = take("segment_ids")
    if "masked_lm_positions" in cols:
        weights = cols["masked_lm_weights"][rows][row_of]
        mine = weights == index[:, None]
        # This instance's predictions, moved to the front of the slots, positions from its start.
        order = np.argsort(~mine, axis=1, kind="stable")
        kept = np.take_along_axis(mine, order, axis=1)
        positions = np.take_along_axis(cols["masked_lm_positions"][rows][row_of], order, axis=1) - offset[:, None]
        out["masked_lm_positions"] = np.where(kept, positions, 0)
        out["masked_lm_ids"] = np.where(kept, np.take_along_axis(cols["masked_lm_ids"][rows][row_of], order, axis=1),
                                        0)
        out["masked_lm_weights"] = kept.astype(np.float32)
    if "next_sentence_labels" in cols:
        out["next_sentence_labels"] = cols["next_sentence_labels"][rows][row_of, index - 1][:, None]
    return out, rows[row_of], index


def check_packed_batch(cols: Dict[str, np.ndarray], ids: VocabIds) -> List[Check]:
    """Checks on one batch of packed rows (canonical names): a list of ``(bad_rows,
    describe(row))`` as :func:`~bert_data.tools.record_checks.check_batch` gives them."""
    mask = cols["input_mask"]
    n, width = mask.shape
    col = np.arange(width)[None, :]
    checks: List[Check] = []

    def add(bad, describe):
        if bad.any():
            checks.append((bad, describe))

    real = mask > 0
    length = real.sum(axis=1)
    steps = np.diff(mask, axis=1)
    inner = real[:, 1:]
    ok = (real == (col < length[:, None])).all(axis=1) & (mask[:, 0] == 1) & \
        ((~inner) | ((steps >= 0) & (steps <= 1))).all(axis=1)
    add(~ok, lambda r: f"input_mask is not instance indices 1, 2, ... then 0s: {_short(mask[r])}")
    count = mask.max(axis=1, initial=0)
    if "next_sentence_positions" in cols:
        k = cols["next_sentence_positions"].shape[1]
        too_many = ok & (count > k)
        add(too_many, lambda r: f"row holds {int(count[r])} instances, more than its {k} pair slots")
        ok &= ~too_many
    starts = _instance_starts(mask)
    expected = np.where(real, col - starts, 0)
    positions = cols["positions"]
    bad_positions = ok & (positions != expected).any(axis=1)
    add(bad_positions, lambda r: f"positions do not restart at 0 in each instance (0 on padding): "
                                 f"{_short(positions[r])}")
    if "next_sentence_positions" in cols:
        slots = np.arange(k)[None, :]
        used = slots < count[:, None]
        first = np.zeros((n, k), dtype=np.int64)
        rows, columns = np.nonzero(real & (starts == col))
        first[rows, mask[rows, columns] - 1] = columns
        weights = cols["next_sentence_weights"]
        bad_weights = ok & (weights != used).any(axis=1)
        add(bad_weights, lambda r: f"next_sentence_weights are not 1.0 for each of the row's {int(count[r])} "
                                   f"instances then 0.0: {_short(weights[r])}")
        nsp_positions = cols["next_sentence_positions"]
        bad_nsp = ok & (np.where(used, nsp_positions != first, nsp_positions != 0)).any(axis=1)
        add(bad_nsp, lambda r: f"next_sentence_positions {_short(nsp_positions[r])} are not where the instances "
                               f"start ({_short(first[r][:int(count[r])])}), then 0s")
        labels = cols["next_sentence_labels"]
        bad_unused = ok & (~used & (labels != 0)).any(axis=1)
        add(bad_unused, lambda r: f"unused next_sentence_labels slots are not 0: {_short(labels[r])}")
    if "masked_lm_weights" in cols:
        weights = cols["masked_lm_weights"]
        predictions = cols["masked_lm_positions"]
        active = weights > 0
        inside = np.clip(predictions, 0, width - 1)
        owner = np.take_along_axis(mask, inside, axis=1)
        wrong = ok[:, None] & active & ((predictions < 0) | (predictions >= width) | (owner != weights))
        add(wrong.any(axis=1), lambda r: f"masked_lm_weights {_short(weights[r])} do not name the instance of "
                                         f"each masked_lm_position {_short(predictions[r])}")
        ok &= ~wrong.any(axis=1)
    good = np.flatnonzero(ok)
    if not len(good):
        return checks
    instances, row_of, index = instance_rows(cols, good)
    for bad, describe in check_batch(instances, ids):
        first_bad = {}
        for t in np.flatnonzero(bad)[::-1]:
            first_bad[int(row_of[t])] = int(t)
        rows_bad = np.zeros(n, dtype=bool)
        rows_bad[list(first_bad)] = True
        checks.append((rows_bad, lambda r, describe=describe, first_bad=first_bad:
                       f"instance {int(index[first_bad[r]])}: {describe(first_bad[r])}"))
    return checks
