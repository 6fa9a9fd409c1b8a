"""TFRecord files made of pieces, as bytes: the framing and compression knowledge the generator
needs to join segments into a shard and to reorder a shard's records, kept with the format.

* Segments written apart (one a unit) and appended in unit order stay one valid file however
  many there are (:class:`SegmentCompressor`): with gzip each segment is a gzip member, and
  concatenated members are one gzip file; with zlib each segment is raw deflate data ending on
  a byte boundary, and the assembler writes :data:`ZLIB_HEADER` before the first and
  :func:`zlib_trailer` (a final block and the Adler-32 of everything, combined from the
  segments' own checksums by :func:`adler32_combine`) after the last.
* :func:`record_offsets` reads where each record's frame begins, so that records can be moved
  whole (the final shuffle; compiled in ``record_kernels``, with the record copies); :class:`StreamCompressor` compresses a file written in one go.

gzip headers here have no name and mtime 0, so the same records give the same bytes every run.
"""

from __future__ import annotations

import struct
import zlib
from array import array
from typing import Optional

import numpy as np

from .record_kernels import HEADER_CUT, PAST_THE_END, frame_starts

ZLIB_HEADER = b"\x78\x9c"  # deflate, 32 KB window, default level
DEFLATE_FINAL_BLOCK = b"\x03\x00"  # an empty final block
_WBITS = {"gzip": 31, "zlib": 15}  # zlib's window bits for a gzip member, a zlib stream
_LENGTH = struct.Struct("<Q")  # a frame's length header
_HEADER_CUT = "a record header is cut at byte {}"
_PAST_THE_END = "the last record runs past the end ({} > {} bytes)"


def adler32_combine(first: int, second: int, second_length: int) -> int:
    """Adler-32 of A + B from those of A and B (zlib's adler32_combine)."""
    base = 65521
    remainder = second_length % base
    sum1 = first & 0xFFFF
    sum2 = (remainder * sum1) % base
    sum1 += (second & 0xFFFF) + base - 1
    sum2 += (first >> 16) + (second >> 16) + base - remainder
    sum1 %= base
    sum2 %= base
    return sum1 | (sum2 << 16)


def zlib_trailer(adler32: int) -> bytes:
    """What closes a zlib stream whose raw deflate data ended on a sync flush: an empty final
    block and the Adler-32 of all the data (big-endian)."""
    return DEFLATE_FINAL_BLOCK + adler32.to_bytes(4, "big")


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


class StreamCompressor:
    """A whole file compressed as one stream (``None``: as it is)."""

    def __init__(self, compression: Optional[str]):
        wbits = _WBITS.get(compression)
        self._engine = zlib.compressobj(6, zlib.DEFLATED, wbits) if wbits else None

    def compress(self, data: bytes) -> bytes:
        return self._engine.compress(data) if self._engine else data

    def flush(self) -> bytes:
        return self._engine.flush(zlib.Z_FINISH) if self._engine else b""


def record_offsets(data) -> np.ndarray:
    """Where the TFRecord frames of ``data`` (bytes-like, uncompressed: a shard's map) begin,
    and its end: ``n + 1`` int64.  Only the length headers are read (the CRCs are the reader's
    business): a frame is a uint64 length, its CRC, the data and the data's CRC.  Compiled
    (``record_kernels.frame_starts``) when kernels are on, else :func:`record_offsets_reference`;
    framing that does not end at the end of ``data`` is a ValueError either way, the same words."""
    walk = frame_starts()
    if walk is None:
        return record_offsets_reference(data)
    array = np.frombuffer(data, dtype=np.uint8)
    try:
        offsets, status, at = walk(array)
    finally:
        del array  # (no view of a map may outlive the call: a map with views cannot close)
    if status == HEADER_CUT:
        raise ValueError(_HEADER_CUT.format(at))
    if status == PAST_THE_END:
        raise ValueError(_PAST_THE_END.format(at + 16 + _LENGTH.unpack_from(data, at)[0], len(data)))
    return offsets


def record_offsets_reference(data) -> np.ndarray:
    """:func:`record_offsets` in Python: the fallback without kernels, and the tests' oracle."""
    offsets = array("q")
    append = offsets.append
    length_at = _LENGTH.unpack_from  # reads in place: no slice of ``data`` a record
    position, size = 0, len(data)
    while position < size:
        append(position)
        if position + 12 > size:
            raise ValueError(_HEADER_CUT.format(position))
        position += 16 + length_at(data, position)[0]
    if position != size:
        raise ValueError(_PAST_THE_END.format(position, size))
    append(size)
    return np.frombuffer(offsets, dtype=np.int64)
