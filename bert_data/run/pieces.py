"""The piece format: what an encode task writes and the assembler appends to the shards.

An encode task writes, for each output shard it serves, one *segment* of a piece file (see
``tasks.encode_shards``); a :class:`Segment` says where it lies.  Segments are compressed so that
segments appended in unit order form one valid file (see :class:`SegmentCompressor` and
``assembly``).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Optional


@dataclass
class Segment:
    """Where one output shard's records from one unit lie in a piece file."""

    split: str
    shard: int
    path: str
    offset: int
    length: int
    n_records: int
    # With --compression zlib: the segment is raw deflate data; the assembler needs the checksum
    # and length of what it holds to close the shard's single zlib stream.
    adler32: int = 1
    raw_length: int = 0


class SegmentCompressor:
    """Compresses one shard segment so that segments appended in unit order form a valid file.

    gzip: each segment is a gzip member (fixed header, no timestamp: same bytes every run), and
    concatenated members are one gzip file.  zlib: each segment is raw deflate data ending on a
    byte boundary (a sync flush, never a final block); the assembler writes the zlib header
    before the first and the final block and combined Adler-32 after the last.
    """

    def __init__(self, compression: Optional[str]):
        self.compression = compression
        self.adler32, self.raw_length = 1, 0
        if compression == "gzip":
            self._engine = zlib.compressobj(6, zlib.DEFLATED, 31)
        elif compression == "zlib":
            self._engine = zlib.compressobj(6, zlib.DEFLATED, -15)
        else:
            self._engine = None

    def compress(self, data: bytes) -> bytes:
        if self._engine is None:
            return data
        self.adler32 = zlib.adler32(data, self.adler32)
        self.raw_length += len(data)
        return self._engine.compress(data)

    def flush(self) -> bytes:
        if self._engine is None or not self.raw_length:
            return b""
        if self.compression == "gzip":  # (zlib's gzip header has no name and mtime 0)
            return self._engine.flush(zlib.Z_FINISH)
        return self._engine.flush(zlib.Z_SYNC_FLUSH)
