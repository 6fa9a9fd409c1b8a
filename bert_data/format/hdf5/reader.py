"""Reads an HDF5 shard (ours or NVIDIA's) back to padded canonical columns: the mirror of
``writer``; ``masked_lm_weights`` is 1 where a prediction slot holds a position (never 0,
``[CLS]``), as NVIDIA's ``pretraining_dataset`` reads it."""

from __future__ import annotations

from typing import Dict, Iterator, Optional

import numpy as np

from ..layout import FEATURE_NAMES

ORDER = list(FEATURE_NAMES)  # the layout's order first, other datasets after


def read_columns(path: str, max_seq_length: Optional[int] = None, max_predictions_per_seq: Optional[int] = None,
                 batch_size: int = 1024, max_sequences_per_pack: Optional[int] = None
                 ) -> Iterator[Dict[str, np.ndarray]]:
    """``max_sequences_per_pack`` is not needed: packed datasets keep their padded width."""
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
