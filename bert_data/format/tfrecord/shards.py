"""TFRecord shards through the output-format interface (see ``format/output_formats.py``):
segments are framed ``tf.train.Example`` records, appended in unit order as the file itself
(the generator's assembler closes a zlib stream and renames), read back with the framing
reader and the example codec."""

from __future__ import annotations

from typing import Dict, Iterator, Optional

import numpy as np

from ..layout import canonical_name
from .example_codec import encode_examples
from .records import frame_records, iter_records


def encode_segment(columns: Dict[str, np.ndarray], options) -> bytes:
    """The layout names the features (v2 names or not); the columns are its canonical ones."""
    specs = list(options.specs)
    return frame_records(encode_examples({spec.name: columns[canonical_name(spec.name)] for spec in specs}, specs))


def write_shard(batches, path: str, name: str, options) -> dict:
    raise NotImplementedError("TFRecord segments are the shard itself: the assembler completes it")


def read_columns(path: str, max_seq_length: int, max_predictions_per_seq: Optional[int],
                 batch_size: int = 1024) -> Iterator[Dict[str, np.ndarray]]:
    from ..dataset import decode_records, infer_specs

    specs = infer_specs(path)
    batch, first = [], 0
    for record in iter_records(path, compression="auto"):
        batch.append(record)
        if len(batch) == batch_size:
            yield decode_records(batch, specs, path, first)
            first += len(batch)
            batch = []
    if batch:
        yield decode_records(batch, specs, path, first)
