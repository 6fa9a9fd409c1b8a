"""Compiled loops over framed TFRecord bytes, for the final shuffle (``run.shard_shuffle``):
where each record's frame begins (:func:`frame_starts`, the compiled walk behind
``splicing.record_offsets``), and records copied whole, in a new order, into one buffer
(:func:`copy_ranges`).  Both read a file as a uint8 array (``np.frombuffer`` on its map).

The Python walk in ``splicing`` and the ``b"".join`` of record views in ``shard_shuffle``
are the references: they run when kernels are off (``bert_data.compiled``), and the tests
require the same offsets, the same errors and the same bytes.
"""

from __future__ import annotations

import numpy as np

from ...compiled import kernel

__all__ = ["frame_starts", "copy_ranges", "FRAMING_OK", "HEADER_CUT", "PAST_THE_END"]

# What :func:`frame_starts` found: the frames end at the end of the data, a frame's length and
# its CRC are cut (fewer than 12 bytes left), a frame's length runs past the end.
FRAMING_OK, HEADER_CUT, PAST_THE_END = 0, 1, 2


@kernel
def frame_starts(data):
    """Where the frames of ``data`` (uint8, uncompressed TFRecord) begin, then its end: ``(n + 1,)``
    int64; a frame is a little-endian uint64 length, its CRC (4 bytes), the data and its CRC (4).
    Returns ``(offsets, status, at)``: ``status`` one of ``FRAMING_OK``, ``HEADER_CUT`` or
    ``PAST_THE_END``, ``at`` the start of the frame at fault (the caller words the error: a
    length past the end can exceed int64).  One walk over the headers (each a cache miss: a
    second walk to count them first costs as much again), into an array grown by doubling."""
    size = data.shape[0]
    offsets = np.empty(size // 512 + 16, dtype=np.int64)
    count = 0
    position = 0
    while position < size:
        if size - position < 12:
            return offsets[:0].copy(), HEADER_CUT, position
        length = np.uint64(0)
        for b in range(8):
            length |= np.uint64(data[position + b]) << np.uint64(8 * b)
        if size - position < 16 or length > np.uint64(size - position - 16):
            return offsets[:0].copy(), PAST_THE_END, position
        if count + 1 >= offsets.shape[0]:  # (room for this start and the end)
            grown = np.empty(2 * offsets.shape[0], dtype=np.int64)
            grown[:count] = offsets[:count]
            offsets = grown
        offsets[count] = position
        count += 1
        position += 16 + np.int64(length)
    offsets[count] = size
    return offsets[:count + 1].copy(), FRAMING_OK, 0


@kernel
def copy_ranges(source, begins, ends, out, destinations):
    """Copy ``source[begins[i]:ends[i]]`` to ``out`` at ``destinations[i]``, for each ``i``
    (uint8 arrays; int64 positions, already checked to lie inside both)."""
    for i in range(begins.shape[0]):
        d = destinations[i]
        out[d:d + ends[i] - begins[i]] = source[begins[i]:ends[i]]
