"""Compiled loops over framed TFRecord bytes, for the final shuffle (``run.shard_shuffle``):
where each record's frame begins (:func:`frame_starts`, the compiled walk behind
``splicing.record_offsets``), and records copied whole, in a new order, into one buffer
(:func:`copy_ranges`).  Both read a file as a uint8 array (``np.frombuffer`` on its map).

The Python walk in ``splicing`` and the ``b"".join`` of record views in ``shard_shuffle``
are the references: they run when kernels are off (``bert_data.compiled``), and the tests
require the same offsets, the same errors and the same bytes.
"""

from __future__ import annotations

import functools

import numpy as np

from ...compiled import kernel

__all__ = ["frame_starts", "copy_ranges", "copy_bytes", "FRAMING_OK", "HEADER_CUT", "PAST_THE_END"]

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


def copy_bytes(out, at, source, begin, count):
    """``out[at:at + count] = source[begin:begin + count]``; in a kernel, one ``memcpy`` (see
    :func:`_register_memcpy`: numba's slice assignment copies a byte at a time, 4x slower on a
    shard's records than glibc's ``memcpy``, which ``b"".join`` uses)."""
    out[at:at + count] = source[begin:begin + count]


@functools.lru_cache(maxsize=None)
def _register_memcpy() -> None:
    """:func:`copy_bytes` compiled as LLVM's ``memcpy`` intrinsic on contiguous arrays (byte
    for byte what the slice assignment writes: the ranges never overlap, the callers say so).
    Registered on first use, before the first kernel that calls it compiles (importing numba
    at import is what ``bert_data.compiled`` avoids)."""
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic, overload

    @intrinsic
    def memcpy(typingctx, out, at, source, begin, count):
        def codegen(context, builder, signature, args):
            out_value, at_value, source_value, begin_value, count_value = args
            target = context.make_array(signature.args[0])(context, builder, out_value)
            origin = context.make_array(signature.args[2])(context, builder, source_value)
            cgutils.raw_memcpy(builder, builder.gep(target.data, [at_value]),
                               builder.gep(origin.data, [begin_value]), count_value, 1)
            return context.get_dummy_value()

        return types.void(out, types.intp, source, types.intp, types.intp), codegen

    @overload(copy_bytes)
    def copy_bytes_compiled(out, at, source, begin, count):
        if out.layout == "C" and source.layout == "C" and out.dtype == source.dtype == types.uint8:
            return lambda out, at, source, begin, count: memcpy(out, at, source, begin, count)

        def byte_by_byte(out, at, source, begin, count):  # (arrays with strides: not the shuffle's)
            for k in range(count):
                out[at + k] = source[begin + k]

        return byte_by_byte


@kernel
def _copy_ranges(source, begins, ends, out, destinations):
    for i in range(begins.shape[0]):
        copy_bytes(out, destinations[i], source, begins[i], ends[i] - begins[i])


def copy_ranges():
    """The compiled ``copy_ranges(source, begins, ends, out, destinations)``, or None when kernels
    are off: copies ``source[begins[i]:ends[i]]`` to ``out`` at ``destinations[i]``, for each
    ``i`` (uint8 arrays; int64 positions, already checked to lie inside both, ranges of ``out``
    that do not overlap)."""
    compiled = _copy_ranges()
    if compiled is not None:
        _register_memcpy()
    return compiled
