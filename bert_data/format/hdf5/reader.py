"""Reads an HDF5 shard (ours or NVIDIA's) back to padded canonical columns: the mirror of
``writer``; ``masked_lm_weights`` is 1 where a prediction slot holds a position (never 0,
``[CLS]``), as NVIDIA's ``pretraining_dataset`` reads it."""

from __future__ import annotations

from typing import Dict, Iterator

import numpy as np

from ..checksums import check_shard
from ..layout import FEATURE_NAMES
from ..output_formats import Reader

ORDER = list(FEATURE_NAMES)  # the layout's order first, other datasets after


class HDF5Reader(Reader):
    def read_columns(self, path: str, batch_size: int = 1024) -> Iterator[Dict[str, np.ndarray]]:
        """The datasets' shapes are the layout (the options are not needed: packed datasets keep
        their padded width)."""
        check_shard(path, self.verify_checksums)
        return _read(path, batch_size)


def _read(path: str, batch_size: int) -> Iterator[Dict[str, np.ndarray]]:
    import h5py

    with h5py.File(path, "r") as source:
        names = list(source)
        if "input_ids" not in names or "input_mask" not in names:
            raise ValueError(f"{path}: not a BERT HDF5 shard (no input_ids / input_mask dataset)")
        names.sort(key=lambda name: ORDER.index(name) if name in ORDER else len(ORDER))
        n = len(source["input_ids"])
        for start in range(0, n, batch_size):
            columns = {}
            for name in names:
                dtype = np.float32 if name == "masked_lm_weights" else np.int64
                data = np.asarray(source[name][start:start + batch_size], dtype=dtype)
                columns[name] = data.reshape(len(data), -1)  # a 1-D dataset is one value a row
                if name == "masked_lm_ids" and "masked_lm_weights" not in names:  # NVIDIA's: derived
                    columns["masked_lm_weights"] = (columns["masked_lm_positions"] != 0).astype(np.float32)
            yield columns
