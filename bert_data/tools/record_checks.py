"""The per-record checks of ``bert-data verify``, vectorised over a batch of decoded records
(canonical feature names): :func:`check_batch` and the token ids it needs (:class:`VocabIds`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

__all__ = ["VocabIds", "Check", "check_batch"]


@dataclass
class VocabIds:
    """The ids the checks need; None when unknown (the check is then skipped)."""

    size: Optional[int]
    cls_id: int
    sep_id: int
    pad_id: Optional[int] = None
    mask_id: Optional[int] = None
    tokens: Optional[Sequence[str]] = None
    separator_id: Optional[int] = None  # MLM-only data: the document separator (never a target)

    def name(self, token_id: int) -> str:
        if self.tokens is not None and 0 <= token_id < len(self.tokens):
            return f"{token_id} ({self.tokens[token_id]})"
        return str(token_id)


Check = tuple  # (bad: (n,) bool, describe: row -> str)


def check_batch(cols: Dict[str, np.ndarray], ids: VocabIds) -> List[Check]:
    """Checks on one batch of decoded records: a list of ``(bad_rows, describe(row))``.

    ``cols`` holds the features of one layout under their canonical names (``input_ids``,
    ``segment_ids``); checks about features it lacks are skipped.  Checks that depend on a
    well-formed ``input_mask`` or ``segment_ids`` only look at the rows where those are well
    formed, so one broken record gives one or two messages, not twenty.
    """
    input_ids = cols["input_ids"]
    mask = cols["input_mask"]
    has_segments = "segment_ids" in cols
    masked = "masked_lm_positions" in cols
    n, msl = input_ids.shape
    rows = np.arange(n)
    col = np.arange(msl)
    checks: List[Check] = []

    def add(bad, describe):
        if bad.any():
            checks.append((bad, describe))

    def first_col(matrix_bad, row):
        return int(np.flatnonzero(matrix_bad[row])[0])

    # ---- input_mask: 1s then 0s, at least [CLS] a [SEP] b [SEP] (MLM-only: [CLS] a [SEP])
    length = mask.sum(axis=1)
    mask_ok = (mask == (col < length[:, None])).all(axis=1)
    add(~mask_ok, lambda r: f"input_mask is not 1s then 0s: {_short(mask[r])}")
    shortest, form = (5, "[CLS] A [SEP] B [SEP]") if has_segments else (3, "[CLS] tokens [SEP]")
    too_short = mask_ok & (length < shortest)
    add(too_short, lambda r: f"sequence has {int(length[r])} tokens; {form} needs at least {shortest}")
    ok = mask_ok & ~too_short
    length_c = np.clip(length, 1, msl)  # safe indices for the rows that are not ok

    # ---- input_ids: vocabulary range, padding
    if ids.size is not None:
        out = (input_ids < 0) | (input_ids >= ids.size)
    else:
        out = input_ids < 0
    out_rows = out.any(axis=1)
    limit = f"[0, {ids.size})" if ids.size is not None else "[0, ...)"
    add(out_rows, lambda r: f"input_ids[{first_col(out, r)}] = {int(input_ids[r, first_col(out, r)])} "
                            f"is outside the vocabulary {limit}")
    pad_bad = mask_ok[:, None] & (col >= length[:, None]) & (input_ids != 0)
    add(pad_bad.any(axis=1), lambda r: f"input_ids[{first_col(pad_bad, r)}] = "
                                       f"{int(input_ids[r, first_col(pad_bad, r)])} in the padding (must be 0)")

    # ---- [CLS] first, [SEP] last
    add(ok & (input_ids[:, 0] != ids.cls_id),
        lambda r: f"input_ids[0] is {ids.name(int(input_ids[r, 0]))}, expected [CLS] = {ids.name(ids.cls_id)}")
    last = input_ids[rows, length_c - 1]
    add(ok & (last != ids.sep_id),
        lambda r: f"input_ids[{int(length[r]) - 1}] (last token) is {ids.name(int(last[r]))}, "
                  f"expected [SEP] = {ids.name(ids.sep_id)}")

    # ---- segment_ids: 0s then 1s then padding 0s; both segments non-empty
    if has_segments:
        seg = cols["segment_ids"]
        n_b = np.where(mask == 1, seg, 0).sum(axis=1)
        b_start = length - n_b
        expected_seg = (col >= b_start[:, None]) & (col < length[:, None])
        seg_ok = mask_ok & (seg == expected_seg).all(axis=1)
        add(mask_ok & ~seg_ok, lambda r: f"segment_ids are not 0s, then 1s, then padding 0s: {_short(seg[r])}")
        seg_ok &= ok
        empty_b = seg_ok & (n_b < 2)
        add(empty_b, lambda r: "segment B is empty (segment_ids has no 1 before the final [SEP])")
        empty_a = seg_ok & (b_start < 3)
        add(empty_a, lambda r: "segment A is empty ([CLS] [SEP] with nothing between)")
        seg_ok &= ~empty_a & ~empty_b
        sep_a = np.clip(b_start - 1, 0, msl - 1)
        first_sep = input_ids[rows, sep_a]
        add(seg_ok & (first_sep != ids.sep_id),
            lambda r: f"input_ids[{int(sep_a[r])}] (end of segment A) is {ids.name(int(first_sep[r]))}, "
                      f"expected [SEP] = {ids.name(ids.sep_id)}")
    else:
        seg_ok = np.zeros(n, dtype=bool)
        sep_a = np.zeros(n, dtype=np.int64)

    if masked:
        _check_masked_lm(cols, ids, add, first_col, ok, length, seg_ok, sep_a, limit)
    elif ids.mask_id is not None:
        stray = input_ids == ids.mask_id
        add(stray.any(axis=1),
            lambda r: f"input_ids[{first_col(stray, r)}] is [MASK] in unmasked data (no masked_lm features)")

    # ---- next sentence label
    if "next_sentence_labels" in cols:
        nsp = cols["next_sentence_labels"][:, 0]
        add((nsp != 0) & (nsp != 1), lambda r: f"next_sentence_labels is {int(nsp[r])}, expected 0 or 1")
    return checks


def _check_masked_lm(cols, ids: VocabIds, add, first_col, ok, length, seg_ok, sep_a, limit) -> None:
    input_ids = cols["input_ids"]
    pos = cols["masked_lm_positions"]
    lab = cols["masked_lm_ids"]
    w = cols["masked_lm_weights"]
    n, msl = input_ids.shape
    mpp = pos.shape[1]
    rows = np.arange(n)

    # ---- masked_lm_weights: 1s then 0s
    k = (w == 1).sum(axis=1)
    kcol = np.arange(mpp)
    active = kcol < k[:, None]
    w_ok = (w == active).all(axis=1)
    add(~w_ok, lambda r: f"masked_lm_weights are not 1.0s then 0.0s: {_short(w[r])}")

    # ---- masked_lm_positions / ids
    pw = w_ok & ok
    at_pad = active & (pos >= length[:, None])
    below = active & (pos < 0)
    bad_pos = pw[:, None] & (at_pad | below)
    add(bad_pos.any(axis=1),
        lambda r: f"masked_lm_positions[{first_col(bad_pos, r)}] = {int(pos[r, first_col(bad_pos, r)])} "
                  f"is outside the sequence of {int(length[r])} tokens (points at padding)")
    special = active & ((pos == 0) | (pos == (length - 1)[:, None]) | (seg_ok[:, None] & (pos == sep_a[:, None])))
    special &= pw[:, None] & ~bad_pos
    add(special.any(axis=1),
        lambda r: f"masked_lm_positions[{first_col(special, r)}] = {int(pos[r, first_col(special, r)])} "
                  f"points at [CLS] or [SEP]")
    if mpp > 1:
        not_inc = pw[:, None] & active[:, 1:] & (pos[:, 1:] <= pos[:, :-1])
        add(not_inc.any(axis=1),
            lambda r: f"masked_lm_positions are not strictly increasing: {_short(pos[r, :int(k[r])])}")
    tail = w_ok[:, None] & ~active & ((pos != 0) | (lab != 0))
    add(tail.any(axis=1),
        lambda r: f"unused masked_lm slot {first_col(tail, r)} (weight 0) has position "
                  f"{int(pos[r, first_col(tail, r)])} and id {int(lab[r, first_col(tail, r)])}, expected 0 and 0")
    if ids.size is not None:
        lab_out = active & ((lab < 0) | (lab >= ids.size))
    else:
        lab_out = active & (lab < 0)
    add(lab_out.any(axis=1),
        lambda r: f"masked_lm_ids[{first_col(lab_out, r)}] = {int(lab[r, first_col(lab_out, r)])} "
                  f"is outside the vocabulary {limit}")
    specials = [ids.cls_id, ids.sep_id] + [x for x in (ids.pad_id, ids.mask_id) if x is not None]
    if "segment_ids" not in cols and ids.separator_id is not None:
        specials.append(ids.separator_id)
    lab_special = active & ~lab_out & np.isin(lab, specials)
    add(lab_special.any(axis=1),
        lambda r: f"masked_lm_ids[{first_col(lab_special, r)}] is {ids.name(int(lab[r, first_col(lab_special, r)]))}: "
                  f"a special token cannot be a masked-LM target")
    if ids.mask_id is not None:
        masked_here = np.zeros((n, msl), dtype=bool)
        r_idx = np.broadcast_to(rows[:, None], pos.shape)
        inside = active & (pos >= 0) & (pos < msl)
        masked_here[r_idx[inside], pos[inside]] = True
        stray = (input_ids == ids.mask_id) & ~masked_here & w_ok[:, None]
        add(stray.any(axis=1),
            lambda r: f"input_ids[{first_col(stray, r)}] is [MASK] but is not a masked_lm position")


def _short(values: np.ndarray, limit: int = 24) -> str:
    shown = [str(int(v)) if float(v).is_integer() else f"{float(v):g}" for v in values[:limit]]
    return "[" + " ".join(shown) + (" ...]" if len(values) > limit else "]")
