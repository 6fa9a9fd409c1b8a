"""Compiled loops of the TFRecord encoder (:mod:`.example_encoding`): a chunk's framed records
written straight into one output buffer, each byte once, then framed with CRC-32C.

A chunk is planned from each row's payload length per feature (:func:`plan_records`: every
nested message's length, and where each record starts: cumulative offsets); then these loops
fill the bytes: per row,
constant bytes and varints of the plan's lengths (:func:`write_fields`, which also writes the
feature values: varints, or bytes as they are: a float32 list's, or values below 128), then each record's frame
(:func:`frame_records`: the length, the masked CRC-32C of its 8 bytes, the masked CRC-32C of the
data, slicing-by-8 tables).  The matrix encoder in :mod:`.example_encoding` is the reference: it
runs when kernels are off (``bert_data.compiled``), and the tests require the same bytes.
"""

from __future__ import annotations

import numpy as np

from ...compiled import kernel

__all__ = ["payload_lengths", "plan_records", "write_fields", "frame_records", "crc32c_tables", "MASK_DELTA"]

MASK_DELTA = 0xA282EAD8
_CRC32C_POLYNOMIAL = 0x82F63B78  # reflected Castagnoli polynomial


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


@kernel
def payload_lengths(values):
    """Bytes of each row's packed varints: ``(n, L)`` non-negative integers -> ``(n,)`` int64."""
    n, length = values.shape
    out = np.zeros(n, dtype=np.int64)
    for i in range(n):
        total = length
        for j in range(length):  # a byte more past each 7 bits: comparisons, no branch (vectorised)
            v = np.uint64(values[i, j])
            total += ((v >= np.uint64(1 << 7)) + (v >= np.uint64(1 << 14)) + (v >= np.uint64(1 << 21))
                      + (v >= np.uint64(1 << 28)) + (v >= np.uint64(1 << 35)) + (v >= np.uint64(1 << 42))
                      + (v >= np.uint64(1 << 49)) + (v >= np.uint64(1 << 56)) + (v >= np.uint64(1 << 63)))
        out[i] = total
    return out


@kernel
def plan_records(payloads, has_list, prefix_lengths, header, footer):
    """The plan of a chunk of records from each feature's payload bytes per row (``payloads``,
    ``(F, n)``): ``heads`` ``(F, 4, n)``, the lengths written before each feature's values
    (its map entry, its ``Feature``, its list message, its payload; a feature without
    ``has_list`` -- zero length -- has an empty list message and no payload field); each
    record's ``Features`` length, its size, where its frame (``header`` and ``footer`` bytes
    around it) starts; and the bytes of them all."""
    features, n = payloads.shape

    def varint_length(x):
        return (1 + (x >= 1 << 7) + (x >= 1 << 14) + (x >= 1 << 21) + (x >= 1 << 28) + (x >= 1 << 35)
                + (x >= 1 << 42) + (x >= 1 << 49) + (x >= 1 << 56))

    heads = np.zeros((features, 4, n), dtype=np.int64)
    totals = np.empty(n, dtype=np.int64)
    sizes = np.empty(n, dtype=np.int64)
    starts = np.empty(n, dtype=np.int64)
    at = 0
    for i in range(n):
        total = 0
        for f in range(features):
            p = payloads[f, i]
            il = 1 + varint_length(p) + p if has_list[f] else 0
            fl = 1 + varint_length(il) + il
            me = prefix_lengths[f] + varint_length(fl) + fl
            heads[f, 0, i] = me
            heads[f, 1, i] = fl
            heads[f, 2, i] = il
            heads[f, 3, i] = p
            total += 1 + varint_length(me) + me
        totals[i] = total
        sizes[i] = 1 + varint_length(total) + total
        starts[i] = at
        at += header + sizes[i] + footer
    return heads, totals, sizes, starts, at


@kernel
def write_fields(out, pos, consts, const_ends, heads, values, raw):
    """Append to each row ``i`` of ``out`` (from ``pos[i]``, advanced past what is written) a
    sequence of fields: for each ``k``, the constant bytes ``consts[const_ends[k - 1]:
    const_ends[k]]`` then the varint of ``heads[k, i]``; then the row's values: with ``raw``,
    one byte each (values below 256: a float list's bytes, or varints below 128), else the
    varint of each of ``values[i]``."""
    n = pos.shape[0]
    for i in range(n):
        q = pos[i]
        first = 0
        for k in range(heads.shape[0]):
            for c in range(first, const_ends[k]):
                out[q] = consts[c]
                q += 1
            first = const_ends[k]
            v = np.uint64(heads[k, i])
            while v >= np.uint64(0x80):
                out[q] = np.uint8((v & np.uint64(0x7F)) | np.uint64(0x80))
                v >>= np.uint64(7)
                q += 1
            out[q] = np.uint8(v)
            q += 1
        if raw:
            for j in range(values.shape[1]):
                out[q] = np.uint8(values[i, j])
                q += 1
        else:
            for j in range(values.shape[1]):
                v = np.uint64(values[i, j])
                while v >= np.uint64(0x80):
                    out[q] = np.uint8((v & np.uint64(0x7F)) | np.uint64(0x80))
                    v >>= np.uint64(7)
                    q += 1
                out[q] = np.uint8(v)
                q += 1
        pos[i] = q


@kernel
def frame_records(out, starts, sizes, tables):
    """Frame each record ``i`` in place: its data (``sizes[i]`` bytes) sits at ``starts[i] + 12``;
    write the little-endian uint64 length at ``starts[i]``, the masked CRC-32C of those 8 bytes
    after it, and the masked CRC-32C of the data after the data."""
    for i in range(starts.shape[0]):
        s = starts[i]
        size = np.uint64(sizes[i])
        for b in range(8):
            out[s + b] = np.uint8((size >> np.uint64(8 * b)) & np.uint64(0xFF))
        for part in range(2):
            first = s if part == 0 else s + 12
            end = s + 8 if part == 0 else s + 12 + sizes[i]
            crc = np.uint32(0xFFFFFFFF)
            q = first
            while q + 8 <= end:  # slicing-by-8: eight bytes a step
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
            masked = (((crc >> np.uint32(15)) | (crc << np.uint32(17))) + np.uint32(MASK_DELTA))
            for b in range(4):
                out[end + b] = np.uint8((masked >> np.uint32(8 * b)) & np.uint32(0xFF))
