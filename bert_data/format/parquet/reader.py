"""Reads a Parquet shard back to padded canonical columns: the mirror of ``writer`` (masked
positions are where ``labels`` is not -100, ascending, as the writer's masks are).  Packed rows
(a ``position_ids`` column) come back as the packed layout's columns (``packed_rows.packed_from_rows``)."""

from __future__ import annotations

from typing import Dict, Iterator, Optional

import numpy as np

from ..checksums import check_shard
from ..columns import from_rows
from ..output_formats import UnpaddedRowsReader
from ..packed_rows import packed_from_rows
from .writer import INSTANCE_COLUMNS, LIST_COLUMNS


class ParquetReader(UnpaddedRowsReader):
    def read_rows(self, path: str, max_seq_length: int, max_predictions_per_seq: Optional[int], batch_size: int,
                  max_sequences_per_pack: Optional[int]) -> Iterator[Dict[str, np.ndarray]]:
        check_shard(path, self.verify_checksums)
        return _read(path, max_seq_length, max_predictions_per_seq, batch_size, max_sequences_per_pack)


def _read(path: str, max_seq_length: int, max_predictions_per_seq: Optional[int], batch_size: int,
          max_sequences_per_pack: Optional[int]) -> Iterator[Dict[str, np.ndarray]]:
    import pyarrow.parquet as pq

    source = pq.ParquetFile(path, page_checksum_verification=True)  # pages written without a CRC pass
    for batch in source.iter_batches(batch_size=batch_size):
        lists = {}
        for name in batch.schema.names:
            column = batch.column(name)
            if name in LIST_COLUMNS or name in INSTANCE_COLUMNS and column.type.num_fields:
                offsets = np.asarray(column.offsets)
                values = np.asarray(column.values, dtype=np.int64)
                lists[name] = [values[offsets[i]:offsets[i + 1]] for i in range(len(column))]
            else:
                lists[name] = np.asarray(column, dtype=np.int64)
        if "position_ids" in lists:
            yield packed_from_rows(lists, max_seq_length, max_predictions_per_seq, max_sequences_per_pack)
        else:
            yield from_rows(lists, max_seq_length, max_predictions_per_seq)
