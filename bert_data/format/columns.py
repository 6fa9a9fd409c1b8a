"""Instance columns: what every instance format is written from and read back to.

The generator hands every output format the same thing: a batch of instances as *padded
canonical columns*, by the names of :mod:`bert_data.format.layout` (``input_ids``,
``input_mask``, ``segment_ids``, ``masked_lm_positions``, ``masked_lm_ids``,
``masked_lm_weights``, ``next_sentence_labels``; the ones a run's layout has).  The readers of
every format give the same columns back, so ``verify``, ``inspect``, ``stats`` and the loaders
see one thing whatever the file.

Formats that cannot be appended to byte by byte (HDF5, Parquet, MDS) are written in two steps:
an encode task writes its shard's rows as *column batches* (:func:`encode_batch`, appendable:
a shard's *body* is the batches of its segments one after the other), and the shard writer turns
the body into the format's file when the shard is complete (:func:`iter_batches` reads it back).

The row model of Hugging Face ``transformers`` (Parquet and MDS rows: unpadded token lists,
``labels`` -100 except at masked positions) is derived here, both ways: :func:`to_rows` and
:func:`from_rows`.
"""

from __future__ import annotations

import json
import struct
from typing import BinaryIO, Dict, Iterator, List, Optional

import numpy as np

from .layout import PROVENANCE_FEATURE_NAMES, WORD_STARTS

# transformers' ignore index: CrossEntropyLoss skips these labels.
IGNORE_INDEX = -100
_HEADER = struct.Struct("<I")


def encode_batch(columns: Dict[str, np.ndarray]) -> bytes:
    """One batch of instances: a little-endian uint32 length, a JSON header naming each column's dtype and
    shape, then each column's bytes (C order), in the header's order."""
    arrays = {name: np.ascontiguousarray(array) for name, array in columns.items()}
    header = json.dumps([[name, array.dtype.str, list(array.shape)] for name, array in arrays.items()]).encode()
    return b"".join([_HEADER.pack(len(header)), header] + [array.tobytes() for array in arrays.values()])


def iter_batches(handle: BinaryIO) -> Iterator[Dict[str, np.ndarray]]:
    """The batches of a shard's body, in order, each as its columns."""
    while True:
        head = handle.read(_HEADER.size)
        if not head:
            return
        if len(head) < _HEADER.size:
            raise ValueError("truncated column batch")
        header = json.loads(handle.read(_HEADER.unpack(head)[0]))
        batch = {}
        for name, dtype, shape in header:
            dtype = np.dtype(dtype)
            size = int(np.prod(shape)) * dtype.itemsize
            data = handle.read(size)
            if len(data) != size:
                raise ValueError(f"truncated column batch ({name})")
            batch[name] = np.frombuffer(data, dtype).reshape(shape)
        yield batch


def pair_label_name(sentence_order: bool) -> str:
    """transformers' name of the pair label: ALBERT's sentence order or BERT's next sentence."""
    return "sentence_order_label" if sentence_order else "next_sentence_label"


def lengths_of(columns: Dict[str, np.ndarray]) -> np.ndarray:
    """Tokens of each instance (the padding is where ``input_mask`` is 0)."""
    return columns["input_mask"].sum(axis=1).astype(np.int64)


def labels_of(columns: Dict[str, np.ndarray]) -> np.ndarray:
    """transformers' ``labels``, padded: the original token at each masked position, -100
    elsewhere (a prediction slot of weight 0 is padding, not a position)."""
    input_ids = columns["input_ids"]
    labels = np.full(input_ids.shape, IGNORE_INDEX, dtype=np.int64)
    weights = columns["masked_lm_weights"] > 0
    rows = np.broadcast_to(np.arange(len(input_ids))[:, None], weights.shape)
    labels[rows[weights], columns["masked_lm_positions"][weights]] = columns["masked_lm_ids"][weights]
    return labels


def to_rows(columns: Dict[str, np.ndarray], sentence_order: bool = False) -> Dict[str, object]:
    """Padded canonical columns -> transformers' row columns: ``offsets`` (n + 1, where each
    instance's tokens start in the flat lists), flat ``input_ids``, ``attention_mask``,
    ``token_type_ids`` (pair data), ``labels`` (masked data) and the pair label (one a row)."""
    lengths = lengths_of(columns)
    keep = np.arange(columns["input_ids"].shape[1]) < lengths[:, None]
    rows: Dict[str, object] = {"offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                               "input_ids": columns["input_ids"][keep].astype(np.int64)}
    rows["attention_mask"] = np.ones(int(lengths.sum()), dtype=np.int64)
    if "segment_ids" in columns:
        rows["token_type_ids"] = columns["segment_ids"][keep].astype(np.int64)
    if "masked_lm_positions" in columns:
        rows["labels"] = labels_of(columns)[keep]
    if WORD_STARTS in columns:  # --store_word_starts: a list like input_ids
        rows[WORD_STARTS] = columns[WORD_STARTS][keep].astype(np.int64)
    if "next_sentence_labels" in columns:
        rows[pair_label_name(sentence_order)] = columns["next_sentence_labels"].reshape(-1).astype(np.int64)
    for name in PROVENANCE_FEATURE_NAMES:  # --record_provenance: one value a row
        if name in columns:
            rows[name] = columns[name].reshape(-1).astype(np.int64)
    return rows


def pad_rows(rows: List[np.ndarray], width: int) -> np.ndarray:
    """Rows of different lengths -> an (n, width) int64 array, 0 after each row."""
    out = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


def from_rows(lists: Dict[str, List[np.ndarray]], max_seq_length: int,
              max_predictions_per_seq: Optional[int]) -> Dict[str, np.ndarray]:
    """transformers' rows (a list of per-instance arrays for each list column, one value a row
    for the pair label) -> padded canonical columns, the inverse of :func:`to_rows`.  Masked
    positions are the label positions, ascending, as the writer makes them."""
    columns: Dict[str, np.ndarray] = {}

    def padded(name: str) -> np.ndarray:
        return pad_rows(lists[name], max_seq_length)

    columns["input_ids"] = padded("input_ids")
    columns["input_mask"] = (np.arange(max_seq_length) < np.array([len(r) for r in lists["input_ids"]])[:, None]
                             ).astype(np.int64)
    if "token_type_ids" in lists:
        columns["segment_ids"] = padded("token_type_ids")
    if WORD_STARTS in lists:
        columns[WORD_STARTS] = padded(WORD_STARTS)
    if "labels" in lists:
        labels = padded("labels")
        labels[columns["input_mask"] == 0] = IGNORE_INDEX
        chosen = labels != IGNORE_INDEX
        width = max_predictions_per_seq or 0
        positions = np.argsort(~chosen, axis=1, kind="stable")[:, :width]
        if positions.shape[1] < width:
            positions = np.pad(positions, ((0, 0), (0, width - positions.shape[1])))
        weights = np.take_along_axis(chosen, positions, axis=1)
        columns["masked_lm_positions"] = np.where(weights, positions, 0)
        columns["masked_lm_ids"] = np.where(weights, np.take_along_axis(labels, positions, axis=1), 0)
        columns["masked_lm_weights"] = weights.astype(np.float32)
    for label in (pair_label_name(False), pair_label_name(True)):
        if label in lists:
            columns["next_sentence_labels"] = np.asarray(lists[label], dtype=np.int64).reshape(-1, 1)
    for name in PROVENANCE_FEATURE_NAMES:
        if name in lists:
            columns[name] = np.asarray(lists[name], dtype=np.int64).reshape(-1, 1)
    if WORD_STARTS in columns:  # the layout's order: last
        columns[WORD_STARTS] = columns.pop(WORD_STARTS)
    return columns
