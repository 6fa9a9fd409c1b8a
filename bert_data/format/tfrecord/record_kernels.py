"""Compiled loops over framed TFRecord bytes, for the final shuffle (``run.shard_shuffle``):
where each record's frame begins (:func:`frame_starts`, the compiled walk behind
``splicing.record_offsets``), and records copied whole, in a new order, into one buffer
(:func:`copy_ranges`; from many files at once, by address: :func:`copy_ranges_at`).  They read
a file as a uint8 array (``np.frombuffer`` on its map).

The Python walk in ``splicing`` and the ``b"".join`` of record views in ``shard_shuffle``
are the references: they run when kernels are off (``bert_data.compiled``), and the tests
require the same offsets, the same errors and the same bytes.

Both loops wait on memory (a shard is tens of MB, read once, just written: mostly not in the
CPU's cache), so each asks for the bytes it will read next before it needs them
(:func:`prefetch`, a hint that changes no byte): the walk, whose every step waits for the
length read by the step before, 2.7x faster (0.071 -> 0.026 s of CPU on a 342 MB run); the
copies about 12% (0.108 -> 0.095 s).
"""

from __future__ import annotations

import functools

import numpy as np

from ...compiled import kernel

__all__ = ["frame_starts", "copy_ranges", "copy_ranges_at", "copy_bytes", "copy_from", "prefetch", "prefetch_at",
           "FRAMING_OK", "HEADER_CUT", "PAST_THE_END"]

# What :func:`frame_starts` found: the frames end at the end of the data, a frame's length and
# its CRC are cut (fewer than 12 bytes left), a frame's length runs past the end.
FRAMING_OK, HEADER_CUT, PAST_THE_END = 0, 1, 2


# Bytes ahead of the walk asked for (:func:`frame_starts`: 2 KB and 8 KB alike), and records
# ahead of the copies (:func:`copy_ranges`: 4 to 16 alike).
_WALK_AHEAD = 4096
_COPY_AHEAD = 8
_LINE = 64  # bytes of a cache line


@kernel
def _frame_starts(data):
    """Where the frames of ``data`` (uint8, uncompressed TFRecord) begin, then its end: ``(n + 1,)``
    int64; a frame is a little-endian uint64 length, its CRC (4 bytes), the data and its CRC (4).
    Returns ``(offsets, status, at)``: ``status`` one of ``FRAMING_OK``, ``HEADER_CUT`` or
    ``PAST_THE_END``, ``at`` the start of the frame at fault (the caller words the error: a
    length past the end can exceed int64).  One walk over the headers (each a cache miss: a
    second walk to count them first costs as much again), into an array grown by doubling;
    the bytes ``_WALK_AHEAD`` ahead asked for as it goes (the headers are somewhere in them:
    the memory fetches them while the walk waits for the one it reads)."""
    size = data.shape[0]
    offsets = np.empty(size // 512 + 16, dtype=np.int64)
    count = 0
    position = 0
    asked = 0  # bytes asked for so far (:func:`prefetch`), a line at a time
    while position < size:
        while asked < position + _WALK_AHEAD and asked < size:
            prefetch(data, asked)
            asked += _LINE
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


def frame_starts():
    """The compiled walk (``frame_starts(data)``, see :func:`_frame_starts`), or None when
    kernels are off."""
    compiled = _frame_starts()
    if compiled is not None:
        _register_prefetch()
    return compiled


def prefetch(data, at):
    """A hint: the cache line of ``data[at]`` fetched from memory now, for a read soon after.
    Nothing in Python; in a kernel, LLVM's ``prefetch`` intrinsic on a contiguous array (see
    :func:`_register_prefetch`), which reads nothing into the program and never faults (``at``
    may lie past the end)."""


@functools.lru_cache(maxsize=None)
def _register_prefetch() -> None:
    """:func:`prefetch` compiled as ``llvm.prefetch`` (a read, kept in every cache level, of
    data), registered before the first kernel that calls it compiles (as :func:`_register_memcpy`)."""
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic, overload

    @intrinsic
    def prefetch_line(typingctx, data, at):
        def codegen(context, builder, signature, args):
            data_value, at_value = args
            array = context.make_array(signature.args[0])(context, builder, data_value)
            pointer = builder.gep(array.data, [at_value])
            byte_pointer = ir.IntType(8).as_pointer()
            if getattr(pointer.type, "is_opaque", False):
                name = "llvm.prefetch.p0"
            else:  # (LLVM with typed pointers: numba before 0.63's llvmlite)
                name, pointer = "llvm.prefetch.p0i8", builder.bitcast(pointer, byte_pointer)
            i32 = ir.IntType(32)
            function = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [pointer.type, i32, i32, i32]), name)
            builder.call(function, [pointer, i32(0), i32(3), i32(1)])  # read, keep everywhere, data
            return context.get_dummy_value()

        return types.void(data, types.intp), codegen

    @overload(prefetch)
    def prefetch_compiled(data, at):
        if data.layout == "C":
            return lambda data, at: prefetch_line(data, at)
        return lambda data, at: None  # (arrays with strides: not the shuffle's)


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
    n = begins.shape[0]
    for i in range(n + _COPY_AHEAD):
        if i < n:  # record i asked for, ``_COPY_AHEAD`` records before it is copied
            for at in range(begins[i], ends[i], _LINE):
                prefetch(source, at)
        k = i - _COPY_AHEAD
        if k >= 0:
            copy_bytes(out, destinations[k], source, begins[k], ends[k] - begins[k])


@kernel
def _copy_ranges_at(addresses, files, begins, ends, out, destinations):
    n = begins.shape[0]
    for i in range(n + _COPY_AHEAD):
        if i < n:  # record i asked for, ``_COPY_AHEAD`` records before it is copied
            base = addresses[files[i]]
            for at in range(begins[i], ends[i], _LINE):
                prefetch_at(base + at)
        k = i - _COPY_AHEAD
        if k >= 0:
            copy_from(out, destinations[k], addresses[files[k]] + begins[k], ends[k] - begins[k])


def copy_ranges_at():
    """The compiled ``copy_ranges_at(addresses, files, begins, ends, out, destinations)``, or
    None when kernels are off: :func:`copy_ranges` from many sources in one call, record ``i``
    from the source whose bytes start at ``addresses[files[i]]`` (int64: ``word_access.address``
    of each, kept alive by the caller).  The final shuffle of kept pieces takes a batch's
    records from every piece of the run (hundreds): a call a source cost more than the copies."""
    compiled = _copy_ranges_at()
    if compiled is not None:
        _register_address_copy()
    return compiled


def copy_from(out, at, address, count):
    """``out[at:at + count]`` = the ``count`` bytes at ``address``; in a kernel, one ``memcpy``
    (see :func:`_register_address_copy`)."""
    import ctypes

    if count > 0:
        out[at:at + count] = np.frombuffer(ctypes.string_at(int(address), int(count)), dtype=np.uint8)


def prefetch_at(address):
    """:func:`prefetch` of the cache line at ``address``: nothing in Python."""


def copy_ranges():
    """The compiled ``copy_ranges(source, begins, ends, out, destinations)``, or None when kernels
    are off: copies ``source[begins[i]:ends[i]]`` to ``out`` at ``destinations[i]``, for each
    ``i`` (uint8 arrays; int64 positions, already checked to lie inside both, ranges of ``out``
    that do not overlap)."""
    compiled = _copy_ranges()
    if compiled is not None:
        _register_memcpy()
        _register_prefetch()
    return compiled


@functools.lru_cache(maxsize=None)
def _register_address_copy() -> None:
    """:func:`copy_from` as LLVM's ``memcpy`` from an address into a contiguous array, and
    :func:`prefetch_at` as ``llvm.prefetch`` of an address (see :func:`_register_memcpy` and
    :func:`_register_prefetch`, their twins on arrays)."""
    from llvmlite import ir
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic, overload

    byte_pointer = ir.IntType(8).as_pointer()

    @intrinsic
    def memcpy_from(typingctx, out, at, address, count):
        def codegen(context, builder, signature, args):
            out_value, at_value, address_value, count_value = args
            target = context.make_array(signature.args[0])(context, builder, out_value)
            cgutils.raw_memcpy(builder, builder.gep(target.data, [at_value]),
                               builder.inttoptr(address_value, byte_pointer), count_value, 1)
            return context.get_dummy_value()

        return types.void(out, types.intp, types.int64, types.intp), codegen

    @intrinsic
    def prefetch_address(typingctx, address):
        def codegen(context, builder, signature, args):
            pointer = builder.inttoptr(args[0], byte_pointer)
            i32 = ir.IntType(32)
            name = "llvm.prefetch.p0" if getattr(pointer.type, "is_opaque", False) else "llvm.prefetch.p0i8"
            function = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [pointer.type, i32, i32, i32]), name)
            builder.call(function, [pointer, i32(0), i32(3), i32(1)])  # read, keep everywhere, data
            return context.get_dummy_value()

        return types.void(types.int64), codegen

    @overload(copy_from)
    def copy_from_compiled(out, at, address, count):
        if out.layout == "C" and out.dtype == types.uint8:
            return lambda out, at, address, count: memcpy_from(out, at, address, count)

    @overload(prefetch_at)
    def prefetch_at_compiled(address):
        return lambda address: prefetch_address(address)
