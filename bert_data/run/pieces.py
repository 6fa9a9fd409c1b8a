"""The piece format: what an encode task writes and the assembler appends to the shards.

An encode task writes, for each output shard it serves, one *segment* of a piece file (see
``tasks.encode_shards``); a :class:`Segment` says where it lies.  Segments are compressed so that
segments appended in unit order form one valid file (see
``format.tfrecord.splicing.SegmentCompressor`` and ``assembly``).
"""

from __future__ import annotations

from dataclasses import dataclass


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
    # The CRC-32C of the segment's bytes (``length`` of them) as written: the assembler combines
    # them into each shard's, which the journal keeps and ``--resume`` checks.
    crc32c: int = 0
