"""Writes an HDF5 shard as NVIDIA's ``create_pretraining_data.py`` does: datasets
``input_ids`` (int32), ``input_mask`` (int8), ``segment_ids`` (int8), ``masked_lm_positions``
(int32), ``masked_lm_ids`` (int32) and ``next_sentence_labels`` (int8, one a row), with gzip
when the run compresses (NVIDIA's own files are gzip).  ``masked_lm_weights`` is not stored:
their reader derives it (a prediction slot at position 0, always ``[CLS]``, is padding).

MLM-only data has no ``segment_ids`` and no ``next_sentence_labels``, unmasked data
(``--disable_masking``) no ``masked_lm_*``, as in the TFRecord layout.  The datasets are
resizable (one row-chunked dataset grows block by block: a shard never sits in memory whole),
and written without timestamps, so a run's files have the same bytes every time.
"""

from __future__ import annotations

import os
from typing import Dict

import numpy as np

from ..columns import iter_blocks

NVIDIA_DTYPES: Dict[str, str] = {
    "input_ids": "i4",
    "input_mask": "i1",
    "segment_ids": "i1",
    "masked_lm_positions": "i4",
    "masked_lm_ids": "i4",
    "next_sentence_labels": "i1",
}
CHUNK_ROWS = 1024  # rows per HDF5 chunk: what a reader decompresses at a time


def write_shard(body_path: str, path: str, name: str, options) -> dict:
    import h5py

    widths = options.widths
    names = [name for name in NVIDIA_DTYPES if name in widths]
    n = 0
    with h5py.File(path, "w") as out, open(body_path, "rb") as body:
        datasets = {}
        for name in names:
            shape = (0,) if name == "next_sentence_labels" else (0, widths[name])
            datasets[name] = out.create_dataset(
                name, shape=shape, maxshape=(None,) + shape[1:], dtype=NVIDIA_DTYPES[name],
                chunks=(CHUNK_ROWS,) + shape[1:], compression="gzip" if options.compression == "gzip" else None,
                track_times=False)
        for block in iter_blocks(body):
            rows = len(block["input_ids"])
            for name in names:
                data = block[name].reshape(-1) if name == "next_sentence_labels" else block[name]
                datasets[name].resize(n + rows, axis=0)
                datasets[name][n:n + rows] = data
            n += rows
    return {"path": name, "samples": n}
