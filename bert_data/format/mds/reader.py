"""Reads an MDS shard back to padded canonical columns: the mirror of ``writer`` (no
``streaming`` needed; the tests read the same files with ``streaming.StreamingDataset``)."""

from __future__ import annotations

import gzip
import json
import mmap
import os
from typing import Dict, Iterator, Optional

import numpy as np

from ..checksums import check_shard
from ..columns import from_rows
from ..output_formats import UnpaddedRowsReader
from ..packed_rows import packed_from_rows

_VALUE_TYPES = {"ndarray:int32": np.int32, "ndarray:uint8": np.uint8, "int32": np.int32}
_SHAPE_TYPES = {0: np.uint8, 1: np.uint16, 2: np.uint32, 3: np.uint64}


def _shard_bytes(path: str):
    """The raw shard: decompressed whole (as streaming does), or memory-mapped."""
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as handle:
            return handle.read()
    with open(path, "rb") as handle:
        if path.endswith(".zstd"):
            import zstandard

            return zstandard.ZstdDecompressor().decompressobj().decompress(handle.read())
        if not os.path.getsize(path):
            return b""
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)  # pages read as samples are


def _decode(encoding: str, datum: bytes):
    dtype = _VALUE_TYPES[encoding]
    if not encoding.startswith("ndarray"):
        return int(np.frombuffer(datum, dtype)[0])
    shape_type = _SHAPE_TYPES[datum[0] & 3]
    ndim = datum[0] >> 2
    width = np.dtype(shape_type).itemsize * ndim
    return np.frombuffer(datum[1 + width:], dtype).astype(np.int64)


class MDSReader(UnpaddedRowsReader):
    def read_rows(self, path: str, max_seq_length: int, max_predictions_per_seq: Optional[int], batch_size: int,
                  max_sequences_per_pack: Optional[int]) -> Iterator[Dict[str, np.ndarray]]:
        check_shard(path, self.verify_checksums)
        return _read(path, max_seq_length, max_predictions_per_seq, batch_size, max_sequences_per_pack)


def _read(path: str, max_seq_length: int, max_predictions_per_seq: Optional[int], batch_size: int,
          max_sequences_per_pack: Optional[int]) -> Iterator[Dict[str, np.ndarray]]:
    """Packed rows (a ``position_ids`` column) come back as the packed layout's columns
    (``packed_rows.packed_from_rows``: the pair columns ``max_sequences_per_pack`` wide)."""
    data = _shard_bytes(path)
    n = int(np.frombuffer(data, np.uint32, 1)[0])
    offsets = np.frombuffer(data, np.uint32, n + 1, 4).astype(np.int64)
    config = json.loads(data[4 + 4 * (n + 1):offsets[0]])
    names, encodings, sizes = config["column_names"], config["column_encodings"], config["column_sizes"]
    n_variable = sum(size is None for size in sizes)
    for start in range(0, n, batch_size):
        lists = {name: [] for name in names}
        for i in range(start, min(n, start + batch_size)):
            at = int(offsets[i])
            variable = iter(np.frombuffer(data, np.uint32, n_variable, at).tolist())
            at += 4 * n_variable
            for name, encoding, size in zip(names, encodings, sizes):
                size = size if size is not None else next(variable)
                lists[name].append(_decode(encoding, data[at:at + size]))
                at += size
        if "position_ids" in lists:
            yield packed_from_rows(lists, max_seq_length, max_predictions_per_seq, max_sequences_per_pack)
        else:
            yield from_rows(lists, max_seq_length, max_predictions_per_seq)
