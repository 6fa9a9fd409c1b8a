"""Packed rows (``--pack_sequences``, the layout of :mod:`bert_data.pipeline.packing`) in the
row model of Hugging Face ``transformers``, both ways: what the Parquet and MDS formats store a
pack as (:func:`packed_to_rows`) and read it back from (:func:`packed_from_rows`).

It lives in ``format/`` beside :mod:`bert_data.format.columns` (the same conversion for
unpacked instances) because the formats' writers and readers use it, and ``format/`` imports
no stage; ``pipeline.packing`` re-exports it.
"""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np

from .columns import IGNORE_INDEX, pad_rows
from .layout import WORD_STARTS

__all__ = ["packed_to_rows", "packed_from_rows"]


def packed_to_rows(columns: Dict[str, np.ndarray], pair_label: str = "next_sentence_label") -> Dict[str, np.ndarray]:
    """Packed rows -> ``transformers``' row model, unpadded (Parquet and MDS rows): flat
    ``input_ids``, ``token_type_ids`` (pairs), ``position_ids`` (from 0 in each instance) and
    ``labels`` (-100 but at predictions; masked rows), cut by ``offsets`` (n + 1); per instance,
    flat ``pair_label`` and ``next_sentence_positions`` (pairs), cut by ``instance_offsets``.  No
    ``attention_mask``: a padding collator's mask of 1s would let instances attend to each
    other; ``position_ids`` tell the instances apart (:func:`packed_from_rows`)."""
    mask = np.asarray(columns["input_mask"])
    real = mask != 0
    lengths = real.sum(axis=1)
    rows = {"offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
            "input_ids": np.asarray(columns["input_ids"])[real].astype(np.int64)}
    if "segment_ids" in columns:
        rows["token_type_ids"] = np.asarray(columns["segment_ids"])[real].astype(np.int64)
    rows["position_ids"] = np.asarray(columns["positions"])[real].astype(np.int64)
    if "masked_lm_positions" in columns:
        labels = np.full(mask.shape, IGNORE_INDEX, dtype=np.int64)
        used = np.asarray(columns["masked_lm_weights"]) > 0
        which = np.nonzero(used)[0]
        labels[which, np.asarray(columns["masked_lm_positions"])[used]] = np.asarray(columns["masked_lm_ids"])[used]
        rows["labels"] = labels[real]
    if "next_sentence_labels" in columns:
        used = np.asarray(columns["next_sentence_weights"]) > 0
        rows["instance_offsets"] = np.concatenate([[0], np.cumsum(used.sum(axis=1))]).astype(np.int64)
        rows[pair_label] = np.asarray(columns["next_sentence_labels"])[used].astype(np.int64)
        rows["next_sentence_positions"] = np.asarray(columns["next_sentence_positions"])[used].astype(np.int64)
    if WORD_STARTS in columns:  # --store_word_starts: a list like input_ids
        rows[WORD_STARTS] = np.asarray(columns[WORD_STARTS])[real].astype(np.int64)
    return rows


def packed_from_rows(lists: Dict[str, List[np.ndarray]], max_seq_length: int, prediction_slots: Optional[int],
                     max_sequences_per_pack: Optional[int]) -> Dict[str, np.ndarray]:
    """The inverse of :func:`packed_to_rows`, from per-row arrays (``lists[name][i]``, a pair
    label list ``lists["next_sentence_label"]`` or ``["sentence_order_label"]``): packed columns
    as the generator writes them.  An instance starts where ``position_ids`` is 0."""
    n = len(lists["input_ids"])
    out: Dict[str, np.ndarray] = {}

    def padded(name: str) -> np.ndarray:
        return pad_rows(lists[name], max_seq_length)

    out["input_ids"] = padded("input_ids")
    positions = padded("position_ids")
    real = np.arange(max_seq_length)[None, :] < np.array([len(row) for row in lists["input_ids"]])[:, None]
    out["input_mask"] = np.where(real, np.cumsum(real & (positions == 0), axis=1), 0)
    if "token_type_ids" in lists:
        out["segment_ids"] = padded("token_type_ids")
    out["positions"] = positions
    if "labels" in lists and prediction_slots:
        labels = np.where(real, padded("labels"), IGNORE_INDEX)
        chosen = labels != IGNORE_INDEX
        order = np.argsort(~chosen, axis=1, kind="stable")[:, :prediction_slots]
        if order.shape[1] < prediction_slots:
            order = np.pad(order, ((0, 0), (0, prediction_slots - order.shape[1])))
        weights = np.take_along_axis(chosen, order, axis=1)
        out["masked_lm_positions"] = np.where(weights, order, 0)
        out["masked_lm_ids"] = np.where(weights, np.take_along_axis(labels, order, axis=1), 0)
        out["masked_lm_weights"] = np.where(weights, np.take_along_axis(out["input_mask"], order, axis=1),
                                            0).astype(np.float32)
    pair = next((name for name in ("next_sentence_label", "sentence_order_label") if name in lists), None)
    if pair is not None:
        k = max_sequences_per_pack
        out["next_sentence_positions"] = np.zeros((n, k), dtype=np.int64)
        out["next_sentence_labels"] = np.zeros((n, k), dtype=np.int64)
        out["next_sentence_weights"] = np.zeros((n, k), dtype=np.float32)
        for i in range(n):
            count = len(lists[pair][i])
            out["next_sentence_labels"][i, :count] = lists[pair][i]
            out["next_sentence_positions"][i, :count] = lists["next_sentence_positions"][i]
            out["next_sentence_weights"][i, :count] = 1.0
    if WORD_STARTS in lists:
        out[WORD_STARTS] = padded(WORD_STARTS)
    return out
