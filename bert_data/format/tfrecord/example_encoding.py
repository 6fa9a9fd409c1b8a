"""``tf.train.Example`` bytes from numpy columns, a whole batch at a time, without TensorFlow
(the writer's hot path; :mod:`.example_codec` decodes, and re-exports :func:`encode_examples`).

Messages involved::

    Example   { Features features = 1; }
    Features  { map<string, Feature> feature = 1; }   // entry: key = 1 (string), value = 2
    Feature   { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
    Int64List { repeated int64 value = 1 [packed]; }
    FloatList { repeated float value = 1 [packed]; }

A record is a fixed sequence of *blocks*: constant bytes (tags, feature names), the varints of
the lengths of its nested messages, and each feature's packed payload.  A batch is one uint8
matrix, a row a record, its blocks side by side, and a boolean matrix of the bytes each row
uses; one selection keeps them (numpy copies runs of used bytes, so blocks every row uses in
full cost a copy).  The varint bytes of a value below 2**21 (token ids) and which of its 4
columns it uses come from two 1-D table lookups (``np.take``), not from arithmetic per byte.

:func:`encode_framed` also frames the records for a TFRecord file (length, CRCs) in the same
matrix: a segment of a shard in one call.

That matrix encoder is the reference.  With compiled kernels (``bert_data.compiled``, numba),
the same bytes come from :mod:`.example_kernels` several times faster: one call a segment, which
reads every column's bytes where they are, measures every record, writes each feature's bytes
into all of them and frames them, in one output buffer of the exact size (no matrix, no
selection, no CRC call a record), and that buffer is what the writer hands on
(:func:`encode_framed_array`: no bytes object, no join).
"""

from __future__ import annotations

from functools import lru_cache
from typing import List, Mapping, Sequence, Tuple

import numpy as np

from ..layout import FLOAT32, INT64, FeatureSpec
from . import example_kernels
from .records import frame_header, masked_crc32c_batch

__all__ = ["encode_examples", "encode_framed", "encode_framed_array"]

# Upper bound on the bytes per chunk of the batch matrix.
_CHUNK_BYTES = 8 << 20
_TABLE_LIMIT = 1 << 21  # values below this (3-byte varints) are encoded by table lookup
_FRAME_HEADER, _FRAME_FOOTER = 12, 4  # uint64 length + its CRC; the data's CRC


def _varint_bytes(value: int) -> bytes:
    """Protobuf varint of a non-negative Python int."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _max_varint_len(vmax: int) -> int:
    n = 1
    while vmax >= 0x80:
        vmax >>= 7
        n += 1
    return n


def _varint_lengths(x: np.ndarray) -> np.ndarray:
    """Varint byte length of each element of a non-negative integer array (int64 result)."""
    x = x.astype(np.uint64, copy=False)
    nb = np.ones(x.shape, dtype=np.int64)
    vmax = int(x.max()) if x.size else 0
    for k in range(1, _max_varint_len(vmax)):  # a byte more from each 7 bits, as far as the largest needs
        nb += x >= np.uint64(1 << (7 * k))
    return nb


@lru_cache(maxsize=4)
def _varint_table(size: int) -> Tuple[np.ndarray, np.ndarray]:
    """Varint bytes of 0 .. size - 1 (at most 3, little-endian in a uint32; unused bytes 0) and
    which of those 4 bytes are used (a uint32 of 0xFF bytes, read as 4 booleans): 1-D tables,
    which ``np.take`` reads fastest."""
    values = np.arange(size, dtype=np.uint32)
    lengths = 1 + (values >= 1 << 7) + (values >= 1 << 14)
    codes = np.zeros(size, dtype="<u4")
    for k in range(3):
        codes |= (((values >> (7 * k)) & 0x7F) | ((lengths > k + 1).astype(np.uint32) << 7)) << (8 * k)
    used = np.array([0, 0x01, 0x0101, 0x010101], dtype="<u4")[lengths]
    return codes, used


def _varints(col: np.ndarray):
    """The varints of an ``(n, L)`` column as ``(data, used)``: ``(n, L * w)`` uint8 and bool,
    each value's bytes in ``w`` columns of its own, ``used`` marking those of its varint."""
    n, length = col.shape
    vmax = int(col.max())
    if vmax < _TABLE_LIMIT:
        codes, used = _varint_table(1 << max(7, vmax.bit_length()))
        index = col if col.dtype.kind in "iu" else col.astype(np.int64)
        return (np.take(codes, index).view(np.uint8).reshape(n, 4 * length),
                np.take(used, index).view(np.bool_).reshape(n, 4 * length))
    v = col.astype(np.uint64, copy=False)
    width = _max_varint_len(vmax)
    lengths = _varint_lengths(v)
    data = np.empty((n, length, width), dtype=np.uint8)
    for k in range(width):
        data[:, :, k] = ((v >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8) | (
            (lengths > k + 1).view(np.uint8) << 7)
    used = np.arange(width) < lengths[:, :, None]
    return data.reshape(n, length * width), used.reshape(n, length * width)


class _Blocks:
    """The blocks of a batch's records, left to right: ``(data (n, w) uint8, used)``, ``used``
    an ``(n, w)`` bool matrix of the bytes a row uses, or None when it uses all ``w``; constant
    bytes are merged into one block."""

    def __init__(self, n: int):
        self.n = n
        self.blocks: List[Tuple[np.ndarray, object]] = []
        self._const = bytearray()

    def const(self, b: bytes) -> None:
        self._const += b

    def _flush_const(self) -> None:
        if self._const:
            row = np.frombuffer(bytes(self._const), dtype=np.uint8)
            self.blocks.append((np.broadcast_to(row, (self.n, row.size)), None))
            self._const = bytearray()

    def block(self, data: np.ndarray, used=None) -> None:
        self._flush_const()
        self.blocks.append((data, used))

    def varint(self, x: np.ndarray) -> None:
        """Per-row varint of the (n,) non-negative int64 array ``x``."""
        lo, hi = int(x.min()), int(x.max())
        if lo == hi:
            self.const(_varint_bytes(lo))
            return
        data, used = _varints(x.reshape(self.n, 1))
        width = _max_varint_len(hi)
        if _max_varint_len(lo) == width:  # the same length in every row: all its bytes
            self.block(np.ascontiguousarray(data[:, :width]))
        else:
            self.block(data, used)

    def selected(self) -> np.ndarray:
        """The used bytes of every row, rows one after another (1-D uint8)."""
        self._flush_const()
        data = np.concatenate([d for d, _ in self.blocks], axis=1)
        if all(u is None for _, u in self.blocks):
            return data.reshape(-1)
        keep = np.ones(data.shape, dtype=bool)
        first = 0
        for block, used in self.blocks:
            width = block.shape[1]
            if used is not None:
                keep[:, first:first + width] = used
            first += width
        return data[keep]


def _prepare_columns(columns: Mapping[str, np.ndarray], specs: Sequence[FeatureSpec], check_signs: bool = True):
    """The columns in ``specs`` order, checked and in the dtypes the encoders read, and their rows
    (``check_signs`` False: negative values are left to the compiled encoder to find, in the pass
    it makes anyway)."""
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate feature names in specs: {names}")
    missing = [nm for nm in names if nm not in columns]
    if missing:
        raise ValueError(f"missing column(s) for feature(s): {', '.join(missing)}")
    extra = [nm for nm in columns if nm not in set(names)]
    if extra:
        raise ValueError(f"column(s) not in the feature specs: {', '.join(map(str, extra))}")
    prepared = []
    n = None
    for spec in specs:
        col = np.asarray(columns[spec.name])
        if col.ndim == 1 and spec.length == 1:
            col = col.reshape(-1, 1)
        if col.ndim != 2 or col.shape[1] != spec.length:
            raise ValueError(f"feature {spec.name!r}: expected shape (n, {spec.length}), got {col.shape}")
        if n is None:
            n = col.shape[0]
        elif col.shape[0] != n:
            raise ValueError(f"feature {spec.name!r}: {col.shape[0]} rows, but earlier features have {n}")
        if spec.dtype == INT64:
            if col.dtype.kind not in "iub":
                raise ValueError(f"feature {spec.name!r} is int64 but the column has dtype {col.dtype}")
            if check_signs:
                _check_not_negative(spec, col)
            if col.dtype.kind == "b":
                col = col.view(np.uint8)
        elif spec.dtype == FLOAT32:
            if col.dtype.kind not in "fiub":
                raise ValueError(f"feature {spec.name!r} is float32 but the column has dtype {col.dtype}")
            col = np.ascontiguousarray(col, dtype="<f4")
        else:
            raise ValueError(f"feature {spec.name!r}: unknown dtype {spec.dtype!r}")
        prepared.append((spec, col))
    return prepared, (n or 0)


def _check_not_negative(spec: FeatureSpec, col: np.ndarray) -> None:
    if col.dtype.kind == "i" and col.size and int(col.min()) < 0:
        raise ValueError(f"feature {spec.name!r}: negative values are not supported (min {int(col.min())})")


def _feature_prefix(name: str) -> bytes:
    """The map entry bytes before varint(len Feature): 0x0A varint(len key) key 0x12."""
    key = name.encode("utf-8")
    return b"\x0a" + _varint_bytes(len(key)) + key + b"\x12"


def _nested_lengths(p: np.ndarray, length: int, prefix: bytes):
    """Per row, from a feature's payload bytes ``p``: the lengths of its list message, its
    ``Feature`` message and its map entry."""
    if length == 0:
        il = np.zeros(len(p), dtype=np.int64)  # empty list message: the packed field is omitted
    else:
        il = 1 + _varint_lengths(p) + p
    fl = 1 + _varint_lengths(il) + il
    me = len(prefix) + _varint_lengths(fl) + fl
    return il, fl, me


def _encode_chunk(prepared, n: int, framed: bool, encode=None) -> Tuple[np.ndarray, np.ndarray]:
    """``(flat, sizes)``: the records of a chunk end to end (with ``framed``, each in its TFRecord
    frame) as 1-D uint8, and each record's size without its frame (``encode``: the compiled
    kernel, None for the reference)."""
    if encode is not None:
        return _encode_chunk_compiled(prepared, n, framed, encode)
    return _encode_chunk_reference(prepared, n, framed)


def _encode_chunk_reference(prepared, n: int, framed: bool) -> Tuple[np.ndarray, np.ndarray]:
    """:func:`_encode_chunk` without compiled kernels: the records' blocks side by side in a
    matrix, the bytes each row uses selected (the compiled path's oracle in the tests)."""
    # Per feature: the payload block, and the per-row lengths of each nested message.
    feats = []
    total = np.zeros(n, dtype=np.int64)  # length of the Features message per row
    for spec, col in prepared:
        prefix = _feature_prefix(spec.name)
        payload, payload_used = None, None
        if spec.dtype == INT64:
            kind_tag = b"\x1a"
            if spec.length == 0:
                p = np.zeros(n, dtype=np.int64)
            elif int(col.max()) < 0x80:  # one byte a value: the values are the bytes
                payload, p = col.astype(np.uint8), np.full(n, spec.length, dtype=np.int64)
            else:
                payload, payload_used = _varints(col)
                p = payload_used.sum(axis=1, dtype=np.int64)
        else:
            kind_tag = b"\x12"
            if spec.length:
                payload = col.view(np.uint8).reshape(n, 4 * spec.length)
            p = np.full(n, 4 * spec.length, dtype=np.int64)
        il, fl, me = _nested_lengths(p, spec.length, prefix)
        total += 1 + _varint_lengths(me) + me
        feats.append((prefix, kind_tag, payload, payload_used, p, il, fl, me))

    sizes = 1 + _varint_lengths(total) + total
    blocks = _Blocks(n)
    if framed:
        blocks.block(frame_header(sizes))
    blocks.const(b"\x0a")
    blocks.varint(total)
    for prefix, kind_tag, payload, payload_used, p, il, fl, me in feats:
        blocks.const(b"\x0a")
        blocks.varint(me)
        blocks.const(prefix)
        blocks.varint(fl)
        blocks.const(kind_tag)
        blocks.varint(il)
        if payload is not None:
            blocks.const(b"\x0a")
            blocks.varint(p)
            blocks.block(payload, payload_used)
    if framed:
        blocks.const(bytes(_FRAME_FOOTER))  # the data's CRC, written below
    flat = blocks.selected()

    ends = np.cumsum(sizes + (_FRAME_HEADER + _FRAME_FOOTER if framed else 0))
    if int(ends[-1]) != len(flat):  # internal consistency check, cheap
        raise AssertionError(f"encoder length mismatch: {int(ends[-1])} != {len(flat)}")
    if framed:
        data_ends = ends - _FRAME_FOOTER
        crcs = masked_crc32c_batch(flat, data_ends - sizes, data_ends)
        flat[data_ends[:, None] + np.arange(_FRAME_FOOTER)] = crcs.astype("<u4").view(np.uint8).reshape(n, 4)
    return flat, sizes


def _encode_chunk_compiled(prepared, n: int, framed: bool, encode) -> Tuple[np.ndarray, np.ndarray]:
    """:func:`_encode_chunk` with the compiled kernel: every feature's rows as bytes (zero-copy
    views), one call writing and framing all the records (the reference's bytes), the result a
    view of its buffer (no copy)."""
    specs = tuple(spec for spec, _ in prepared)
    consts, const_ends, lengths = _layout_constants(tuple((s.name, s.dtype, s.length) for s in specs))
    features, signed = [], np.zeros(len(prepared), dtype=np.bool_)
    itemsizes = np.zeros(len(prepared), dtype=np.int64)  # a float list: 0
    for f, (spec, col) in enumerate(prepared):
        if spec.dtype == INT64:
            col = col.astype(col.dtype.newbyteorder("<"), copy=False)  # (the kernel reads little-endian)
            itemsizes[f], signed[f] = col.dtype.itemsize, col.dtype.kind == "i"
        features.append(np.ascontiguousarray(col).reshape(-1).view(np.uint8).reshape(n, -1))
    features += [np.zeros((n, 0), dtype=np.uint8)] * (-len(features) % example_kernels.SLOTS)
    ends = np.empty(n, dtype=np.int64)
    flat, signs_ok = encode(tuple(features), itemsizes, signed, lengths, consts, const_ends, framed,
                            example_kernels.frame_crc_tables(), ends)
    if not signs_ok:
        for spec, col in prepared:
            _check_not_negative(spec, col)
        raise AssertionError("the encoder found a negative value that no column holds")  # (never: not silent)
    sizes = np.diff(ends, prepend=0) - (_FRAME_HEADER + _FRAME_FOOTER if framed else 0)
    return flat, sizes


@lru_cache(maxsize=64)
def _layout_constants(layout: Tuple[Tuple[str, str, int], ...]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The constant bytes of a layout's features (``(name, dtype, length)`` each) end to end,
    where each feature's four parts end (``encode_records``' ``consts`` and ``const_ends``), and
    each feature's values a row (read-only: cached)."""
    parts, ends, at = [], np.zeros((len(layout), 5), dtype=np.int64), 0
    for f, (name, dtype, length) in enumerate(layout):
        feature = [b"\x0a", _feature_prefix(name), b"\x1a" if dtype == INT64 else b"\x12", b"\x0a" if length else b""]
        ends[f, 0] = at
        for k, part in enumerate(feature):
            at += len(part)
            ends[f, k + 1] = at
        parts += feature
    lengths = np.array([length for _, _, length in layout], dtype=np.int64)
    for array in (ends, lengths):
        array.flags.writeable = False
    return np.frombuffer(b"".join(parts), dtype=np.uint8), ends, lengths


def _chunks(columns: Mapping[str, np.ndarray], specs: Sequence[FeatureSpec], framed: bool):
    encode = example_kernels.encode_records()
    prepared, n = _prepare_columns(columns, specs, check_signs=encode is None)
    if n == 0:
        return
    # Rough bytes per row of the batch matrix (ids take ~3 varint bytes): only sizes chunks (the
    # generator's segments are one chunk).
    width = 16 + sum(len(spec.name) + 24 + 4 * spec.length for spec, _ in prepared)
    rows = max(64, _CHUNK_BYTES // max(1, width))
    for start in range(0, n, rows):
        sub = [(spec, col[start:start + rows]) for spec, col in prepared] if n > rows else prepared
        yield _encode_chunk(sub, min(rows, n - start), framed, encode)


def encode_examples(
    columns: Mapping[str, np.ndarray], specs: Sequence[FeatureSpec]
) -> List[bytes]:
    """Serialize a batch of records as ``tf.train.Example`` bytes, one per row.

    ``columns[spec.name]`` is a 2-D array ``(n_records, spec.length)`` (a 1-D array is accepted
    for ``length == 1``): any integer dtype for int64 features (values must be non-negative;
    uint64 values >= 2**63 are written as the 10-byte varint of the equivalent int64), any float
    dtype for float32 features.  Features are written in ``specs`` order, int64 and float lists
    packed, exactly as protobuf serializes them.
    """
    out: List[bytes] = []
    for flat, sizes in _chunks(columns, specs, framed=False):
        data = flat.tobytes()
        ends = np.cumsum(sizes).tolist()
        out.extend(data[a:b] for a, b in zip([0] + ends[:-1], ends))
    return out


def encode_framed_array(columns: Mapping[str, np.ndarray], specs: Sequence[FeatureSpec]) -> np.ndarray:
    """The records of :func:`encode_examples`, framed as a TFRecord file holds them (what
    ``records.frame_records`` makes of them), end to end, as one uint8 array: a segment of a
    shard, written where it is made (no copy: a file, a compressor or a checksum reads it as
    bytes)."""
    flats = [flat for flat, _ in _chunks(columns, specs, framed=True)]
    if len(flats) == 1:
        return flats[0]
    return np.concatenate(flats) if flats else np.zeros(0, dtype=np.uint8)


def encode_framed_ranges(columns: Mapping[str, np.ndarray], specs: Sequence[FeatureSpec],
                         bounds: Sequence[int]) -> List[np.ndarray]:
    """:func:`encode_framed_array` of each range of rows ``bounds[k]:bounds[k + 1]``: the rows
    encoded as one batch, cut where the ranges' records meet (a framed record's bytes are its
    row's alone)."""
    flats, sizes = [], []
    for flat, chunk_sizes in _chunks(columns, specs, framed=True):
        flats.append(flat)
        sizes.append(chunk_sizes)
    if not flats:
        return [np.zeros(0, dtype=np.uint8) for _ in bounds[1:]]
    flat = flats[0] if len(flats) == 1 else np.concatenate(flats)
    ends = np.zeros(sum(map(len, sizes)) + 1, dtype=np.int64)
    np.cumsum(np.concatenate(sizes) + (_FRAME_HEADER + _FRAME_FOOTER), out=ends[1:])
    cuts = ends[np.asarray(bounds, dtype=np.int64)].tolist()
    return [flat[a:b] for a, b in zip(cuts[:-1], cuts[1:])]


def encode_framed(columns: Mapping[str, np.ndarray], specs: Sequence[FeatureSpec]) -> bytes:
    """:func:`encode_framed_array` as bytes."""
    return encode_framed_array(columns, specs).tobytes()
