"""TFRecord shards through the output-format interface (see ``format/output_formats.py``):
segments are framed ``tf.train.Example`` records, appended in unit order as the file itself
(``appendable``: the generator's assembler splices them, see ``splicing``), read back with the
framing reader and the example codec."""

from __future__ import annotations

from typing import Dict, Iterable, Iterator, Sequence

import numpy as np

from ..layout import canonical_name
from ..output_formats import Reader, Writer
from .example_encoding import encode_framed_array, encode_framed_ranges
from .records import iter_records
from .splicing import StreamCompressor


class TFRecordWriter(Writer):
    def encode_segment(self, columns: Dict[str, np.ndarray]) -> memoryview:
        """The layout names the features (v2 names or not); the columns are its canonical ones.
        The framed records as the encoder wrote them, bytes-like (no copy into a bytes object)."""
        specs = list(self.options.specs)
        return memoryview(encode_framed_array({spec.name: columns[canonical_name(spec.name)] for spec in specs}, specs))

    def encode_segments(self, columns: Dict[str, np.ndarray], bounds: Sequence[int]) -> list:
        """Records are framed row by row: the ranges' rows encoded in one call, then cut."""
        specs = list(self.options.specs)
        return [memoryview(part) for part in
                encode_framed_ranges({spec.name: columns[canonical_name(spec.name)] for spec in specs}, specs, bounds)]

    def write_shard(self, batches: Iterable[Dict[str, np.ndarray]], path: str, name: str) -> dict:
        """A whole shard at once, compressed as one stream (the generator never needs this: its
        segments are the shard; it is here so that every format writes a shard the same way)."""
        n = 0
        with open(path, "wb") as out:
            compressor = StreamCompressor(self.options.compression)
            for batch in batches:
                out.write(compressor.compress(self.encode_segment(batch)))
                n += len(batch["input_ids"])
            out.write(compressor.flush())
        return {"path": name, "samples": n}


class TFRecordReader(Reader):
    def read_columns(self, path: str, batch_size: int = 1024) -> Iterator[Dict[str, np.ndarray]]:
        """The layout comes from the first record (the options are not needed)."""
        from ..checksums import check_shard
        from ..dataset import decode_records, infer_specs

        check_shard(path, self.verify_checksums)  # besides each record's CRCs: the whole file as published
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
