"""The compiled TFRecord encoder (:mod:`.example_encoding`): a segment's records written straight
into one output buffer, each byte once, and framed, in ONE call.

:func:`encode_records` takes every feature of the segment at once: each column as a zero-copy
``uint8`` view of its rows (``(n, length * itemsize)``; ``features`` is a tuple of them, padded
to a multiple of ``SLOTS``, one type whatever the columns' dtypes, so one compiled kernel serves
every layout), with how to read it (``itemsizes``: the bytes of an integer, little-endian; 0 for
a float list, whose bytes are written as they are).  It works a feature at a time, each column
read through one typed view, row after row (a view a row and feature would cost more than the
row's bytes): each row's packed payload (the varint lengths of its values), then the plan (every
nested message's length, where each record starts, the buffer's exact size), then each
feature's constant bytes, lengths and values into every record (a plain copy for a row whose
values are all below 128, else varints), then the frames (the length, the masked CRC-32C of its
8 bytes, the masked CRC-32C of the data: see :func:`frame_crc_tables` for how).  The matrix encoder in
:mod:`.example_encoding` is the reference: it runs when kernels are off (``bert_data.compiled``),
and the tests require the same bytes.
"""

from __future__ import annotations

import functools
import threading
from typing import Optional

import numpy as np

from ...compiled import helper, kernel

__all__ = ["encode_records", "crc32c_tables", "frame_crc_tables", "hardware_crc", "crc_instructions", "MASK_DELTA",
           "SLOTS"]

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


@helper(inline=True)
def _length_varint_bytes(x):
    """Bytes of the varint of a non-negative int64 (a message's length)."""
    return (1 + (x >= 1 << 7) + (x >= 1 << 14) + (x >= 1 << 21) + (x >= 1 << 28) + (x >= 1 << 35)
            + (x >= 1 << 42) + (x >= 1 << 49) + (x >= 1 << 56))


@helper
def _put_varint(out, q, v):
    """The varint of ``v`` (uint64) at ``out[q]``; returns where it ends."""
    while v >= np.uint64(0x80):
        out[q] = np.uint8((v & np.uint64(0x7F)) | np.uint64(0x80))
        v >>= np.uint64(7)
        q += 1
    out[q] = np.uint8(v)
    return q + 1


@helper
def _payloads(values, payload):
    """Bytes of each row's packed varints (``values``: ``(n, L)`` unsigned integers) into
    ``payload``; returns every value's bits OR-ed (the sign bit of any negative one read as
    unsigned)."""
    bits = np.uint64(0)
    for i in range(values.shape[0]):
        p = values.shape[1]
        for j in range(values.shape[1]):  # a byte more past each 7 bits (comparisons: no branch)
            v = np.uint64(values[i, j])
            bits |= v
            p += ((v >= np.uint64(1 << 7)) + (v >= np.uint64(1 << 14)) + (v >= np.uint64(1 << 21))
                  + (v >= np.uint64(1 << 28)) + (v >= np.uint64(1 << 35)) + (v >= np.uint64(1 << 42))
                  + (v >= np.uint64(1 << 49)) + (v >= np.uint64(1 << 56)) + (v >= np.uint64(1 << 63)))
        payload[i] = p
    return bits


@helper
def _put_values(out, pos, values, payload):
    """Each row's values as packed varints at ``out[pos[i]]`` (``pos`` advanced): a plain copy
    when every value of the row is below 128 (``payload[i]``: one byte each)."""
    for i in range(values.shape[0]):
        q = pos[i]
        if payload[i] == values.shape[1]:
            for j in range(values.shape[1]):
                out[q + j] = np.uint8(values[i, j])
            q += values.shape[1]
        else:
            for j in range(values.shape[1]):  # (_put_varint's loop, here: no call a value)
                v = np.uint64(values[i, j])
                while v >= np.uint64(0x80):
                    out[q] = np.uint8((v & np.uint64(0x7F)) | np.uint64(0x80))
                    v >>= np.uint64(7)
                    q += 1
                out[q] = np.uint8(v)
                q += 1
        pos[i] = q


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
    """:func:`_frame_crc` in kernels: ``tables`` None gives the instruction's loop (eight bytes a
    step, then a byte at a time; the data read as little-endian words, which both architectures
    are) or, on a CPU without it, slicing-by-8 over tables frozen into the kernel; an array gives
    slicing-by-8 over it.  Registered on first use, before the kernel compiles (importing numba
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

    @register_jitable
    def masked_crc_instruction(out, first, end):
        crc = np.uint32(0xFFFFFFFF)
        q = first
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

    A feature at a time (each column read through one typed view, its rows one after another):
    the payloads, then every record's plan (nested lengths, where it starts), then each
    feature's bytes into every record, then the frames."""
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
    # The plan: each feature's three lengths a row (its map entry, its Feature, its list), each
    # record's Features length, and where each record's data starts.
    heads = np.empty((n_features, 3, n), np.int64)
    totals = np.empty(n, np.int64)
    pos = np.empty(n, np.int64)
    q = 0
    for i in range(n):
        total = 0
        for f in range(n_features):
            p = payload[f, i]
            il = 1 + _length_varint_bytes(p) + p if lengths[f] else 0  # an empty list: no packed field
            fl = 1 + _length_varint_bytes(il) + il
            me = const_ends[f, 2] - const_ends[f, 1] + _length_varint_bytes(fl) + fl
            heads[f, 0, i] = me
            heads[f, 1, i] = fl
            heads[f, 2, i] = il
            total += 1 + _length_varint_bytes(me) + me
        totals[i] = total
        pos[i] = q + header
        q += header + 1 + _length_varint_bytes(total) + total + footer
        ends[i] = q

    out = np.empty(q, np.uint8)
    for i in range(n):
        at = pos[i]
        out[at] = 0x0A  # Example.features
        pos[i] = _put_varint(out, at + 1, np.uint64(totals[i]))
    for f in range(n_features):
        first, second, third, fourth, last = (const_ends[f, 0], const_ends[f, 1], const_ends[f, 2], const_ends[f, 3],
                                              const_ends[f, 4])
        for i in range(n):
            at = pos[i]
            for c in range(first, second):
                out[at] = consts[c]
                at += 1
            at = _put_varint(out, at, np.uint64(heads[f, 0, i]))
            for c in range(second, third):
                out[at] = consts[c]
                at += 1
            at = _put_varint(out, at, np.uint64(heads[f, 1, i]))
            for c in range(third, fourth):
                out[at] = consts[c]
                at += 1
            at = _put_varint(out, at, np.uint64(heads[f, 2, i]))
            if lengths[f]:
                for c in range(fourth, last):
                    out[at] = consts[c]
                    at += 1
                at = _put_varint(out, at, np.uint64(payload[f, i]))
            pos[i] = at
        size = itemsizes[f]
        if size == 1:
            _put_values(out, pos, features[f], payload[f])
        elif size == 2:
            _put_values(out, pos, features[f].view(np.uint16), payload[f])
        elif size == 4:
            _put_values(out, pos, features[f].view(np.uint32), payload[f])
        elif size == 8:
            _put_values(out, pos, features[f].view(np.uint64), payload[f])
        else:  # a float list: its bytes as they are
            values = features[f]
            for i in range(n):
                at = pos[i]
                for j in range(values.shape[1]):
                    out[at + j] = values[i, j]
                pos[i] = at + values.shape[1]

    for i in range(n):
        if pos[i] != ends[i] - footer:  # internal consistency check, cheap
            raise AssertionError("encoder length mismatch: a record's bytes differ from its planned length")
    if framed:
        start = 0
        for i in range(n):
            data = start + header
            end = ends[i] - footer
            length = np.uint64(end - data)
            for b in range(8):
                out[start + b] = np.uint8((length >> np.uint64(8 * b)) & np.uint64(0xFF))
            crc = _frame_crc(out, start, start + 8, tables)
            for b in range(4):
                out[start + 8 + b] = np.uint8((crc >> np.uint32(8 * b)) & np.uint32(0xFF))
            crc = _frame_crc(out, data, end, tables)
            for b in range(4):
                out[end + b] = np.uint8((crc >> np.uint32(8 * b)) & np.uint32(0xFF))
            start = ends[i]
    return out, True


def encode_records():
    """The compiled ``encode_records(features, itemsizes, signed, lengths, consts, const_ends,
    framed, tables, ends)`` (:func:`_encode_records`; ``tables``: :func:`frame_crc_tables`, or
    the slicing-by-8 tables to force the software CRC), or None when kernels are off."""
    compiled = _encode_records()
    if compiled is not None:
        with _REGISTERING:
            _register_frame_crc()
    return compiled
