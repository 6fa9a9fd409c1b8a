"""The compiled TFRecord encoder (:mod:`.example_encoding`): a segment's records written straight
into one output buffer, each byte once, and framed, in ONE call.

:func:`encode_records` takes every feature of the segment at once: each column as a zero-copy
``uint8`` view of its rows (``(n, length * itemsize)``; ``features`` is a tuple of them, padded
to a multiple of ``SLOTS``, one type whatever the columns' dtypes, so one compiled kernel serves
every layout), with how to read it (``itemsizes``: the bytes of an integer, little-endian; 0 for
a float list, whose bytes are written as they are).  First, a feature at a time, each column read
through one typed view, each row's packed payload (the varint lengths of its values: the row's
values OR-ed say how many lengths to count); then the plan (each record's length and where it
ends: the buffer's exact size); then a record at a time, while its rows are in the cache, all its
bytes: each feature's constant bytes and lengths (kept and copied while its payload's length
repeats), its values (a row below 128 copied or narrowed a word at a time, else varints, one
word stored for each value below 2**21: no branch on its length), and the frame (the length, the
masked CRC-32C of its 8 bytes, the masked CRC-32C of the data: see :func:`frame_crc_tables` for
how).  Columns, constants and the output are read and written at addresses
(:mod:`.word_access`: no reference counting in the loops).  The matrix encoder in
:mod:`.example_encoding` is the reference: it runs when kernels are off (``bert_data.compiled``),
and the tests require the same bytes.
"""

from __future__ import annotations

import functools
import sys
import threading
from typing import Optional

import numpy as np

from ...compiled import helper, kernel
from .word_access import address, load1, load2, load4, load8, register_word_access, store1, store4, store8

__all__ = ["encode_records", "crc32c_tables", "crc32c_zeros", "frame_crc_tables", "hardware_crc", "crc_instructions",
           "MASK_DELTA", "SLOTS", "CRC_STREAM"]

MASK_DELTA = 0xA282EAD8
_CRC32C_POLYNOMIAL = 0x82F63B78  # reflected Castagnoli polynomial
_FLOAT = 0  # itemsizes[f] of a float list: its bytes as they are
# ``features`` is padded with empty columns to a multiple of this many: the kernel's type is its
# number of slots, so that one compilation serves every layout of up to 16 features.
SLOTS = 8
_REGISTERING = threading.Lock()  # the CRC overload registered once, whichever thread asks first (Dask)


def crc32c_tables() -> np.ndarray:
    """The ``(8, 256)`` uint32 tables of slicing-by-8 CRC-32C: row 0 the byte-at-a-time table,
    row k the CRC of a byte followed by k zero bytes."""
    table = np.zeros((8, 256), dtype=np.uint32)
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (_CRC32C_POLYNOMIAL if crc & 1 else 0)
        table[0, byte] = crc
    for k in range(1, 8):
        previous = table[k - 1]
        table[k] = (previous >> 8) ^ table[0, previous & 0xFF]
    return table


# The CRC instruction's loop runs three streams of this many bytes at once (its latency is 3 cycles,
# one can start each cycle), joined by shifting a stream's CRC past the next (crc32c_zeros).
CRC_STREAM = 128


def crc32c_zeros(length: int) -> np.ndarray:
    """The ``(4, 256)`` uint32 tables that move a CRC-32C register (not inverted) past
    ``length`` zero bytes: row k, byte b gives the register of ``b << 8k`` after them, and a
    register's is the XOR of its four bytes' (the CRC is linear).  So the CRC of A then B is
    that of A moved past ``len(B)`` zeros, XOR that of B begun at 0."""
    step = crc32c_tables()[0]
    registers = (np.arange(256, dtype=np.uint32)[None, :] << (8 * np.arange(4, dtype=np.uint32))[:, None])
    for _ in range(length):
        registers = step[registers & 0xFF] ^ (registers >> 8)
    return registers


@helper(inline=True)
def _length_varint_bytes(x):
    """Bytes of the varint of a non-negative int64 (a message's length)."""
    return (1 + (x >= 1 << 7) + (x >= 1 << 14) + (x >= 1 << 21) + (x >= 1 << 28) + (x >= 1 << 35)
            + (x >= 1 << 42) + (x >= 1 << 49) + (x >= 1 << 56))


@helper(inline=True)
def _varint_size(x):
    """:func:`_length_varint_bytes` with two comparisons below 2**21 (every length but a
    record's of over 2 MB)."""
    if x < 1 << 21:
        return 1 + (x >= 1 << 7) + (x >= 1 << 14)
    return _length_varint_bytes(x)


@helper
def _put_varint(out, q, v):
    """The varint of ``v`` (uint64) at the address ``out`` plus ``q``; returns where it ends."""
    while v >= np.uint64(0x80):
        store1(out + q, (v & np.uint64(0x7F)) | np.uint64(0x80))
        v >>= np.uint64(7)
        q += 1
    store1(out + q, v)
    return q + 1


@helper
def _payloads(values, payload):
    """Bytes of each row's packed varints (``values``: ``(n, L)`` unsigned integers) into
    ``payload``; returns every value's bits OR-ed (the sign bit of any negative one read as
    unsigned).  A row's values OR-ed first (a vectorized loop), which says how many varint
    lengths its values can have: none past one byte (masks, segment ids, positions: the row's
    length), at most 3 (token ids: two comparisons a value), or more (all nine)."""
    bits = np.uint64(0)
    width = values.shape[1]
    for i in range(values.shape[0]):
        row_bits = np.uint64(0)
        for j in range(width):
            row_bits |= np.uint64(values[i, j])
        bits |= row_bits
        p = width
        if row_bits >= np.uint64(1 << 21):
            for j in range(width):  # a byte more past each 7 bits (comparisons: no branch)
                v = np.uint64(values[i, j])
                p += ((v >= np.uint64(1 << 7)) + (v >= np.uint64(1 << 14)) + (v >= np.uint64(1 << 21))
                      + (v >= np.uint64(1 << 28)) + (v >= np.uint64(1 << 35)) + (v >= np.uint64(1 << 42))
                      + (v >= np.uint64(1 << 49)) + (v >= np.uint64(1 << 56)) + (v >= np.uint64(1 << 63)))
        elif row_bits >= np.uint64(1 << 7):
            for j in range(width):
                v = np.uint64(values[i, j])
                p += (v >= np.uint64(1 << 7)) + (v >= np.uint64(1 << 14))
        payload[i] = p
    return bits


# The bytes ``out`` has past the records: a varint is stored as a whole word before its length
# is known (:func:`_put_value`), up to 3 bytes past its end, and constants a word at a time, up to
# 7 (:func:`_put_const`), which what follows overwrites; past the last record, these.
_SLACK = 8
_HEAD_ROOM = 48  # bytes kept of a feature's bytes before its values (a name of up to ~30 bytes)


# The writers below are plain helpers, not inlined by numba (LLVM inlines them all the same:
# the same speed), which kept the kernel's first compilation at 19 s instead of 33 s.
@helper
def _put_value(out, at, v):
    """The varint of ``v`` (uint64) at ``out[at]`` (``out``: an address); returns where it ends.  Below 2**21 (token
    ids, every length), without a branch on its length: its 3 possible bytes are stored as one
    4-byte word and ``at`` advances by its length (comparisons: the 1-3 bytes of random ids
    would mispredict a loop's every exit); the 4th byte, and the 3rd and 2nd past its length,
    are overwritten by what follows (``_SLACK`` at the buffer's end)."""
    if v < np.uint64(1 << 21):
        more = np.uint64(v >= np.uint64(1 << 7))
        most = np.uint64(v >= np.uint64(1 << 14))
        store4(out + at, (v & np.uint64(0x7F)) | (more << np.uint64(7)) | ((v << np.uint64(1)) & np.uint64(0x7F00))
                | (most << np.uint64(15)) | ((v << np.uint64(2)) & np.uint64(0x7F0000)))
        return at + 1 + np.int64(more) + np.int64(most)
    return _put_varint(out, at, v)


@helper
def _copy_bytes(out, at, source, count):
    """The ``count`` bytes at address ``source`` at ``out[at]`` (``out``: an address), 8 a step (the last word
    overlapping the one before; a byte at a time under 8); returns where they end."""
    if count >= 8:
        k = 0
        while k + 8 < count:
            store8(out + at + k, load8(source + k))
            k += 8
        store8(out + at + count - 8, load8(source + count - 8))
    else:
        for b in range(count):
            store1(out + at + b, load1(source + b))
    return at + count


@helper
def _put_const(out, at, constants, first, last):
    """The constant bytes ``first:last`` (of the address ``constants``, readable 8 bytes past
    each) at ``out[at]`` (an address), a word at a time (up to 7 bytes more stored past them:
    what follows overwrites them); returns where they end."""
    for k in range(0, last - first, 8):
        store8(out + at + k, load8(constants + first + k))
    return at + last - first


@helper
def _put_row(out, at, row, count, size, width, small):
    """A row of a column (``row``: the address of its ``width`` bytes, ``count`` values of
    ``size`` bytes each, 0 for a float list: its bytes as they are) as packed varints at
    ``out[at]`` (``out``: an address); ``small``: every value below 128 (one byte each: copied, or narrowed); returns
    where they end."""
    if size == 0 or (small and size == 1):
        return _copy_bytes(out, at, row, width)
    if small:  # each value's low byte, 8 values a word stored (two a word read of 4-byte values)
        j = 0
        if size == 4:
            mask = np.uint64(0xFFFF)
            while j + 8 <= count:
                first = row + 4 * j
                pair0, pair1 = load8(first), load8(first + 8)
                pair2, pair3 = load8(first + 16), load8(first + 24)
                store8(out + at + j, ((pair0 | (pair0 >> np.uint64(24))) & mask)
                        | (((pair1 | (pair1 >> np.uint64(24))) & mask) << np.uint64(16))
                        | (((pair2 | (pair2 >> np.uint64(24))) & mask) << np.uint64(32))
                        | ((pair3 | (pair3 >> np.uint64(24))) << np.uint64(48)))
                j += 8
        elif size == 8:
            while j + 8 <= count:
                first = row + 8 * j
                store8(out + at + j, load8(first) | (load8(first + 8) << np.uint64(8))
                        | (load8(first + 16) << np.uint64(16)) | (load8(first + 24) << np.uint64(24))
                        | (load8(first + 32) << np.uint64(32)) | (load8(first + 40) << np.uint64(40))
                        | (load8(first + 48) << np.uint64(48)) | (load8(first + 56) << np.uint64(56)))
                j += 8
        for j in range(j, count):
            store1(out + at + j, load8(row + size * j) if size == 8 else load4(row + size * j) if size == 4
                    else load2(row + size * j))
        return at + count
    if size == 1:
        for j in range(count):
            at = _put_value(out, at, load1(row + j))
    elif size == 2:
        for j in range(count):
            at = _put_value(out, at, load2(row + 2 * j))
    elif size == 4:
        for j in range(count):
            at = _put_value(out, at, load4(row + 4 * j))
    else:
        for j in range(count):
            at = _put_value(out, at, load8(row + 8 * j))
    return at


@helper
def _masked_crc(out, first, end, tables):
    """The masked CRC-32C (TFRecord's) of ``out[first:end]``: slicing-by-8, eight bytes a step
    (the software CRC: the fallback of :func:`_frame_crc` and the oracle of its hardware one)."""
    crc = np.uint32(0xFFFFFFFF)
    q = first
    while q + 8 <= end:
        low = crc ^ (np.uint32(out[q]) | (np.uint32(out[q + 1]) << np.uint32(8))
                     | (np.uint32(out[q + 2]) << np.uint32(16)) | (np.uint32(out[q + 3]) << np.uint32(24)))
        crc = (tables[7, low & np.uint32(0xFF)] ^ tables[6, (low >> np.uint32(8)) & np.uint32(0xFF)]
               ^ tables[5, (low >> np.uint32(16)) & np.uint32(0xFF)] ^ tables[4, low >> np.uint32(24)]
               ^ tables[3, out[q + 4]] ^ tables[2, out[q + 5]] ^ tables[1, out[q + 6]] ^ tables[0, out[q + 7]])
        q += 8
    while q < end:
        crc = tables[0, (crc ^ np.uint32(out[q])) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
        q += 1
    crc ^= np.uint32(0xFFFFFFFF)
    return ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(MASK_DELTA)


def _frame_crc(out, first, end, tables):
    """The masked CRC-32C of ``out[first:end]`` as a frame carries it: with ``tables`` (the
    slicing-by-8 tables) :func:`_masked_crc`; with None the CPU's CRC-32C instruction where the
    kernel is compiled for a CPU that has it (:func:`crc_instructions`), else :func:`_masked_crc`
    over tables compiled into the kernel.  (From Python: the software CRC; in a kernel:
    :func:`_register_frame_crc`.)"""
    return _masked_crc(out, first, end, crc32c_tables() if tables is None else tables)


def frame_crc_tables() -> None:
    """:func:`encode_records`' ``tables`` for the records a run writes: None, the CRC-32C
    instruction where this CPU has it (SSE4.2's ``crc32`` on x86-64, ``crc32c*`` on AArch64:
    5-8x slicing-by-8's speed; the CRCs were a third of the encoder's time).  The choice is made
    as the kernel compiles, from the CPU features numba compiles for (:func:`crc_instructions`),
    which are part of the key numba's on-disk cache finds a compiled kernel by (its
    ``magic_tuple``: triple, CPU name, features): a CPU without the instruction never loads a
    kernel compiled with it, and compiles its own, with slicing-by-8.  Passing the tables
    instead forces slicing-by-8 (another signature: another entry of the same cache), which is
    how the tests compare the two."""
    return None


def crc_instructions(triple: str, features: str) -> Optional[str]:
    """Which CRC-32C instructions a kernel compiled for ``triple`` with ``features`` (LLVM's
    strings, e.g. ``"+sse4.2,+crc32,..."``) uses: ``"x86"`` (SSE4.2's ``crc32``; LLVM 14 and
    later call its feature ``crc32``, implied by ``sse4.2``), ``"aarch64"`` (ARMv8's optional
    ``crc`` extension) or None (slicing-by-8: another architecture, a big-endian one, or a CPU
    without them)."""
    flags = set(features.split(","))
    architecture = triple.split("-", 1)[0]
    if architecture in ("x86_64", "amd64"):
        if "+crc32" in flags or ("+sse4.2" in flags and "-crc32" not in flags):
            return "x86"
    elif architecture in ("aarch64", "arm64"):
        if "+crc" in flags:
            return "aarch64"
    return None


def _compiled_instructions(codegen=None) -> Optional[str]:
    """:func:`crc_instructions` of what ``codegen`` (by default that of numba's CPU target, which
    compiles the kernels) compiles for: its ``magic_tuple``, part of the on-disk cache's key."""
    if codegen is None:
        from numba.core.registry import cpu_target

        codegen = cpu_target.target_context.codegen()
    triple, _, features = codegen.magic_tuple()
    return crc_instructions(triple, features)


def hardware_crc() -> bool:
    """Whether :func:`encode_records` computes the frames' CRCs with the CPU's instruction in this
    process (False when kernels are off: the reference encoder uses the ``crc32c`` package)."""
    return encode_records() is not None and _compiled_instructions() is not None


def crc_instruction_ir(builder, instructions: str, crc, data):
    """LLVM IR (``builder``: llvmlite's) of the CRC-32C ``crc`` (i32, not inverted) continued by
    ``data`` (an i64 word, little-endian, or an i8 byte) with ``instructions``
    (:func:`crc_instructions`: ``"x86"`` or ``"aarch64"``); the i32 result."""
    from llvmlite import ir

    i32, i64 = ir.IntType(32), ir.IntType(64)

    def call(name, result, arguments):
        function_type = ir.FunctionType(result, [argument.type for argument in arguments])
        return builder.call(builder.module.declare_intrinsic(name, fnty=function_type), arguments)

    word = data.type.width == 64
    if instructions == "aarch64":
        return call("llvm.aarch64.crc32cx" if word else "llvm.aarch64.crc32cb", i32,
                    [crc, data if word else builder.zext(data, i32)])
    if instructions == "x86":
        if word:
            return builder.trunc(call("llvm.x86.sse42.crc32.64.64", i64, [builder.zext(crc, i64), data]), i32)
        return call("llvm.x86.sse42.crc32.32.8", i32, [crc, data])
    raise ValueError(f"no CRC-32C instructions {instructions!r}")


@functools.lru_cache(maxsize=None)
def _register_frame_crc() -> None:
    """:func:`_frame_crc` in kernels: ``tables`` None gives the instruction's loop (three
    streams of ``CRC_STREAM`` bytes at once while they last, their CRCs joined by
    :func:`crc32c_zeros`' tables, then eight bytes a step, then a byte at a time; the data read
    as little-endian words, which both architectures are) or, on a CPU without it, slicing-by-8
    over tables frozen into the kernel; an array gives slicing-by-8 over it.  Registered on first use, before the kernel compiles (importing numba
    at import is what ``bert_data.compiled`` avoids)."""
    from llvmlite import ir
    from numba import types
    from numba.core.errors import TypingError
    from numba.extending import intrinsic, overload, register_jitable

    @intrinsic
    def crc_word(typingctx, crc, out, at):
        """The CRC-32C ``crc`` (uint32, not inverted) continued by the 8 bytes at ``out[at]``."""
        if not (isinstance(out, types.Array) and out.dtype == types.uint8 and out.layout == "C"):
            raise TypingError("crc_word reads a contiguous uint8 array")

        def codegen(context, builder, signature, args):
            crc_value, out_value, at_value = args
            data = context.make_array(signature.args[1])(context, builder, out_value).data
            word = builder.load(builder.bitcast(builder.gep(data, [at_value]), ir.IntType(64).as_pointer()), align=1)
            return crc_instruction_ir(builder, _compiled_instructions(context.codegen()), crc_value, word)

        return types.uint32(types.uint32, out, types.intp), codegen

    @intrinsic
    def crc_byte(typingctx, crc, byte):
        """The CRC-32C ``crc`` (uint32, not inverted) continued by ``byte`` (uint8)."""
        def codegen(context, builder, signature, args):
            return crc_instruction_ir(builder, _compiled_instructions(context.codegen()), *args)

        return types.uint32(types.uint32, types.uint8), codegen

    zeros = crc32c_zeros(CRC_STREAM)  # (a constant of the compiled kernel)

    @register_jitable
    def moved(crc):
        return np.uint32(zeros[0, crc & np.uint32(0xFF)] ^ zeros[1, (crc >> np.uint32(8)) & np.uint32(0xFF)]
                         ^ zeros[2, (crc >> np.uint32(16)) & np.uint32(0xFF)] ^ zeros[3, crc >> np.uint32(24)])

    @register_jitable
    def masked_crc_instruction(out, first, end):
        crc = np.uint32(0xFFFFFFFF)
        q = first
        while q + 3 * CRC_STREAM <= end:  # three streams at once, then joined
            second, third = np.uint32(0), np.uint32(0)
            for k in range(q, q + CRC_STREAM, 8):
                crc = crc_word(crc, out, k)
                second = crc_word(second, out, k + CRC_STREAM)
                third = crc_word(third, out, k + 2 * CRC_STREAM)
            crc = np.uint32(moved(np.uint32(moved(crc) ^ second)) ^ third)
            q += 3 * CRC_STREAM
        while q + 8 <= end:
            crc = crc_word(crc, out, q)
            q += 8
        while q < end:
            crc = crc_byte(crc, out[q])
            q += 1
        crc ^= np.uint32(0xFFFFFFFF)
        return ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(MASK_DELTA)

    @overload(_frame_crc)
    def frame_crc_compiled(out, first, end, tables):
        if not isinstance(tables, types.NoneType):
            return lambda out, first, end, tables: _masked_crc(out, first, end, tables)
        if _compiled_instructions() is not None and out.layout == "C" and out.dtype == types.uint8:
            return lambda out, first, end, tables: masked_crc_instruction(out, first, end)
        frozen = crc32c_tables()  # (a constant of the compiled kernel)
        return lambda out, first, end, tables: _masked_crc(out, first, end, frozen)


@kernel
def _encode_records(features, itemsizes, signed, lengths, consts, const_ends, framed, tables, ends):
    """The ``n`` records of ``features`` end to end (``framed``: each in its TFRecord frame, 12
    bytes before it, 4 after), and True; ``ends[i]``: where record ``i`` (its frame) ends.  False
    (and no bytes) when a ``signed`` column holds a negative value.

    Feature ``f`` (of ``len(itemsizes)``): ``features[f]`` its rows as bytes, ``lengths[f]`` its values a row,
    ``itemsizes[f]`` the bytes of one (0: float32, written as they are).  Its constant bytes are
    ``consts[const_ends[f, 0]:const_ends[f, 4]]`` in four parts, which its lengths follow: the
    map entry's tag, then its length; the key and the ``Feature``'s tag, then its length; the
    list's tag, then its length; the packed field's tag (none for an empty list), then the
    payload's length and the values.

    The payloads a feature at a time (each column read through one typed view, its rows one
    after another), then every record's plan (its length, where it ends), then a record at a
    time: all its bytes, written while its rows are in the cache, and its frame."""
    n_features = len(itemsizes)  # (``features`` may have more slots: see SLOTS)
    n = ends.shape[0]
    payload = np.empty((n_features, n), np.int64)
    for f in range(n_features):
        size = itemsizes[f]
        bits = np.uint64(0)
        if size == 1:
            bits = _payloads(features[f], payload[f])
        elif size == 2:
            bits = _payloads(features[f].view(np.uint16), payload[f])
        elif size == 4:
            bits = _payloads(features[f].view(np.uint32), payload[f])
        elif size == 8:
            bits = _payloads(features[f].view(np.uint64), payload[f])
        else:  # a float list: its bytes
            payload[f, :] = features[f].shape[1]
        if signed[f] and (bits >> np.uint64(8 * size - 1)) & np.uint64(1):
            return np.empty(0, np.uint8), False

    header, footer = (12, 4) if framed else (0, 0)
    # The plan: each record's Features length, and where it (its frame) ends.
    totals = np.empty(n, np.int64)
    q = 0
    for i in range(n):
        total = 0
        for f in range(n_features):
            p = payload[f, i]
            il = 1 + _varint_size(p) + p if lengths[f] else 0  # an empty list: no packed field
            fl = 1 + _varint_size(il) + il
            me = const_ends[f, 2] - const_ends[f, 1] + _varint_size(fl) + fl
            total += 1 + _varint_size(me) + me
        totals[i] = total
        q += header + 1 + _varint_size(total) + total + footer
        ends[i] = q

    rows = np.empty(n_features, np.int64)  # where each column's bytes start, and its bytes a row
    widths = np.empty(n_features, np.int64)
    for f in range(n_features):
        rows[f] = address(features[f])
        widths[f] = features[f].shape[1]
    # One buffer: the records, _SLACK, then the constants (read a word at a time: 8 bytes more)
    # and the kept bytes before each feature's values (below), which live as long as ``out``,
    # whose view the caller gets (an array of their own would be freed after its last use as
    # an array, before its address's).
    out = np.empty(q + _SLACK + consts.shape[0] + 8 + n_features * _HEAD_ROOM + 8, np.uint8)
    at_out = address(out)
    constants = at_out + q + _SLACK
    out[q + _SLACK:q + _SLACK + consts.shape[0]] = consts
    # Each feature's bytes before its values (tags, key, lengths) depend on its payload's length
    # alone, which is the same in most records for most features (masks, positions, weights):
    # the last ones written are kept, and copied while the payload's length stays the same.
    heads = constants + consts.shape[0] + 8
    head_payloads = np.full(n_features, -1, np.int64)
    head_sizes = np.zeros(n_features, np.int64)
    start = 0
    for i in range(n):
        data = start + header
        store1(at_out + data, np.uint64(0x0A))  # Example.features
        at = _put_value(at_out, data + 1, np.uint64(totals[i]))
        for f in range(n_features):
            p = payload[f, i]
            if p == head_payloads[f]:  # the bytes before its values as in an earlier record
                at = _put_const(at_out, at, heads, f * _HEAD_ROOM, f * _HEAD_ROOM + head_sizes[f])
            else:
                head_start = at
                il = 1 + _varint_size(p) + p if lengths[f] else 0  # (the plan's lengths, again)
                fl = 1 + _varint_size(il) + il
                me = const_ends[f, 2] - const_ends[f, 1] + _varint_size(fl) + fl
                at = _put_const(at_out, at, constants, const_ends[f, 0], const_ends[f, 1])
                at = _put_value(at_out, at, np.uint64(me))
                at = _put_const(at_out, at, constants, const_ends[f, 1], const_ends[f, 2])
                at = _put_value(at_out, at, np.uint64(fl))
                at = _put_const(at_out, at, constants, const_ends[f, 2], const_ends[f, 3])
                at = _put_value(at_out, at, np.uint64(il))
                if lengths[f]:
                    at = _put_const(at_out, at, constants, const_ends[f, 3], const_ends[f, 4])
                    at = _put_value(at_out, at, np.uint64(p))
                if at - head_start <= _HEAD_ROOM - 8:  # kept for the next record with this payload
                    for k in range(at - head_start):
                        store1(heads + f * _HEAD_ROOM + k, load1(at_out + head_start + k))
                    head_payloads[f], head_sizes[f] = p, at - head_start
            if lengths[f]:
                at = _put_row(at_out, at, rows[f] + i * widths[f], lengths[f], itemsizes[f], widths[f],
                              p == lengths[f])
        end = ends[i] - footer
        if at != end:  # internal consistency check, cheap
            raise AssertionError("encoder length mismatch: a record's bytes differ from its planned length")
        if framed:  # (what the words stored past ``end`` wrote is overwritten here, the next's header after)
            store8(at_out + start, np.uint64(end - data))
            store4(at_out + start + 8, np.uint64(_frame_crc(out, start, start + 8, tables)))
            store4(at_out + end, np.uint64(_frame_crc(out, data, end, tables)))
        start = ends[i]
    return out[:q], True


def encode_records():
    """The compiled ``encode_records(features, itemsizes, signed, lengths, consts, const_ends,
    framed, tables, ends)`` (:func:`_encode_records`; ``tables``: :func:`frame_crc_tables`, or
    the slicing-by-8 tables to force the software CRC), or None when kernels are off, or on a
    big-endian CPU (the kernel stores varints and lengths as little-endian words: the reference
    encoder runs there)."""
    if sys.byteorder != "little":
        return None
    compiled = _encode_records()
    if compiled is not None:
        with _REGISTERING:
            _register_frame_crc()
            register_word_access()
    return compiled
