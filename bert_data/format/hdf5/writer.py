"""Writes an HDF5 shard as NVIDIA's ``create_pretraining_data.py`` does: datasets
``input_ids`` (int32), ``input_mask`` (int8), ``segment_ids`` (int8), ``masked_lm_positions``
(int32), ``masked_lm_ids`` (int32) and ``next_sentence_labels`` (int8, one a row), with gzip
when the run compresses (NVIDIA's own files are gzip).  ``masked_lm_weights`` is not stored:
their reader derives it (a prediction slot at position 0, always ``[CLS]``, is padding).

MLM-only data has no ``segment_ids`` and no ``next_sentence_labels``, unmasked data
(``--disable_masking``) no ``masked_lm_*``, as in the TFRecord layout.  The datasets are
resizable (one row-chunked dataset grows batch by batch: a shard never sits in memory whole),
and written without timestamps, so a run's files have the same bytes every time.  Every chunk
carries a Fletcher-32 checksum (HDF5's ``fletcher32`` filter, after gzip), which the HDF5
library checks on every read, h5py's and NVIDIA's reader alike: a damaged chunk is an error,
never altered ids.
"""

from __future__ import annotations

from typing import Dict, Iterable

from ..layout import WORD_STARTS
from ..output_formats import Writer

NVIDIA_DTYPES: Dict[str, str] = {
    "input_ids": "i4",
    "input_mask": "i1",
    "segment_ids": "i1",
    "masked_lm_positions": "i4",
    "masked_lm_ids": "i4",
    "next_sentence_labels": "i1",
}
# --record_provenance's datasets (not NVIDIA's: their reader never asks for them).
PROVENANCE_DTYPES: Dict[str, str] = {"source_index": "i4", "document_index": "i8"}
WORD_STARTS_DTYPE = "i1"  # --store_word_starts: 0 or 1 a token
CHUNK_ROWS = 1024  # rows per HDF5 chunk: what a reader decompresses at a time
DERIVED = ("masked_lm_weights",)  # NVIDIA's reader derives it: a prediction slot at position 0 is padding


class HDF5Writer(Writer):
    def write_shard(self, batches: Iterable[dict], path: str, name: str) -> dict:
        """Every column of the layout (``options.widths``, in its order) but ``masked_lm_weights``
        (kept for packed rows, where it holds each prediction's instance): NVIDIA's dtype where
        NVIDIA has the dataset, int32 for any other (packed rows' positions and pair-task columns),
        float32 for weights; a column of one value a row is 1-D."""
        return _write(batches, path, name, self.options)


def _dtype(column: str) -> str:
    if column == WORD_STARTS:
        return WORD_STARTS_DTYPE
    return NVIDIA_DTYPES.get(column) or PROVENANCE_DTYPES.get(column) or ("f4" if column == "masked_lm_weights" else "i4")


def _write(batches, path: str, name: str, options) -> dict:
    import h5py

    packed = options.packed  # packed rows: weights hold each prediction's instance (1..k)
    widths = {column: width for column, width in options.widths.items() if packed or column not in DERIVED}
    n = 0
    with h5py.File(path, "w") as out:
        datasets = {}
        for column, width in widths.items():
            shape = (0,) if width == 1 else (0, width)
            datasets[column] = out.create_dataset(
                column, shape=shape, maxshape=(None,) + shape[1:], dtype=_dtype(column),
                chunks=(CHUNK_ROWS,) + shape[1:], compression="gzip" if options.compression == "gzip" else None,
                fletcher32=True, track_times=False)
        for batch in batches:
            rows = len(batch["input_ids"])
            for column, dataset in datasets.items():
                dataset.resize(n + rows, axis=0)
                dataset[n:n + rows] = batch[column].reshape((rows,) + dataset.shape[1:])
            n += rows
    return {"path": name, "samples": n}
