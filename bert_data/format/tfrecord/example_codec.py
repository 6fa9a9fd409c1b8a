"""``tf.train.Example`` bytes from and to numpy columns, fast, without TensorFlow.

Messages involved::

    Example   { Features features = 1; }
    Features  { map<string, Feature> feature = 1; }   // entry: key = 1 (string), value = 2
    Feature   { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
    Int64List { repeated int64 value = 1 [packed]; }
    FloatList { repeated float value = 1 [packed]; }
    BytesList { repeated bytes value = 1; }

:func:`encode_examples` is the writer's hot path: it builds the bytes of a whole batch with numpy
(one uint8 matrix + validity mask, flattened once) and only slices the result per record.
Decoding reads the canonical bytes (what protobuf, TensorFlow and :func:`encode_examples` write:
one packed list per feature) with a scanner of its own, the per-record cost of every reader and
of ``bert-data verify``; any other record (non-packed lists, unknown fields, bytes lists,
malformed data) is parsed by protobuf (:mod:`bert_data.format.tfrecord.example_proto`, optional).
:func:`decode_example` returns whatever features a record has; :func:`decode_examples` decodes
a batch into a fixed layout (:mod:`bert_data.format.layout`).
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .example_proto import BYTES_LIST as _BYTES_LIST
from .example_proto import FLOAT_LIST as _FLOAT_LIST
from .example_proto import INT64_LIST as _INT64_LIST
from .example_proto import KIND_NAMES as _KIND_NAMES
from .example_proto import parse_example
from ..layout import FLOAT32, INT64, FeatureSpec

__all__ = ["encode_examples", "decode_example", "decode_examples"]

_SPEC_KIND = {INT64: _INT64_LIST, FLOAT32: _FLOAT_LIST}

# Upper bound on the bytes per chunk of the batch matrix built by encode_examples.
_CHUNK_BYTES = 8 << 20

_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)


# --------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------


def _varint_bytes(value: int) -> bytes:
    """Protobuf varint of a non-negative Python int."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varint_lens(v: np.ndarray, max_bytes: int) -> np.ndarray:
    """Varint byte-length of each element of the uint64 array ``v`` (all need <= max_bytes)."""
    nb = np.ones(v.shape, dtype=np.uint8)
    for k in range(max_bytes - 1):
        nb += v >= _VARINT_LIMITS[k]
    return nb


def _max_varint_len(vmax: int) -> int:
    n = 1
    while vmax >= 0x80:
        vmax >>= 7
        n += 1
    return n


def _varint_matrix(v: np.ndarray, max_bytes: int):
    """Varints of a (n, L) uint64 matrix as ((n, L*max_bytes) uint8, mask or None, (n,) row bytes)."""
    n, length = v.shape
    if max_bytes == 1:
        return v.astype(np.uint8), None, np.full(n, length, dtype=np.int64)
    nb = _varint_lens(v, max_bytes)
    out = np.empty((n, length, max_bytes), dtype=np.uint8)
    mask = np.empty((n, length, max_bytes), dtype=bool)
    for k in range(max_bytes):
        group = ((v >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        more = nb > k + 1
        out[:, :, k] = group | (more.view(np.uint8) << 7)
        if k == 0:
            mask[:, :, 0] = True
        else:
            mask[:, :, k] = nb > k
    row_bytes = nb.sum(axis=1, dtype=np.int64)
    return out.reshape(n, length * max_bytes), mask.reshape(n, length * max_bytes), row_bytes


def _vlen_col(x: np.ndarray) -> np.ndarray:
    """Varint length of each element of a 1-D non-negative int64 array."""
    nb = np.ones(x.shape, dtype=np.int64)
    for limit in _VARINT_LIMITS:
        over = x >= int(limit)
        if not over.any():
            break
        nb += over
    return nb


class _Pieces:
    """Accumulates the column blocks of the batch byte matrix, merging constant runs."""

    def __init__(self, n: int):
        self.n = n
        self.blocks: List[Tuple[np.ndarray, Optional[np.ndarray]]] = []
        self._const = bytearray()

    def const(self, b: bytes) -> None:
        self._const += b

    def _flush_const(self) -> None:
        if self._const:
            row = np.frombuffer(bytes(self._const), dtype=np.uint8)
            self.blocks.append((np.broadcast_to(row, (self.n, row.size)), None))
            self._const = bytearray()

    def varint(self, x: np.ndarray) -> None:
        """Per-row varint of the (n,) non-negative int64 array ``x``."""
        lo, hi = int(x.min()), int(x.max())
        if lo == hi:
            self.const(_varint_bytes(lo))
            return
        self._flush_const()
        mb = _max_varint_len(hi)
        data, mask, _ = _varint_matrix(x.astype(np.uint64).reshape(self.n, 1), mb)
        self.blocks.append((data, mask))

    def block(self, data: np.ndarray, mask: Optional[np.ndarray]) -> None:
        self._flush_const()
        self.blocks.append((data, mask))

    def flat(self) -> bytes:
        self._flush_const()
        datas = [d for d, _ in self.blocks]
        data = np.concatenate(datas, axis=1) if len(datas) > 1 else np.ascontiguousarray(datas[0])
        if all(m is None for _, m in self.blocks):
            return data.tobytes()
        masks = [np.ones(d.shape, dtype=bool) if m is None else m for d, m in self.blocks]
        mask = np.concatenate(masks, axis=1) if len(masks) > 1 else masks[0]
        return data[mask].tobytes()


def _prepare_columns(columns: Mapping[str, np.ndarray], specs: Sequence[FeatureSpec]):
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
            if col.dtype.kind == "i" and col.size and int(col.min()) < 0:
                raise ValueError(f"feature {spec.name!r}: negative values are not supported (min {int(col.min())})")
            col = col.astype(np.uint64, copy=False)
        elif spec.dtype == FLOAT32:
            if col.dtype.kind not in "fiub":
                raise ValueError(f"feature {spec.name!r} is float32 but the column has dtype {col.dtype}")
            col = np.ascontiguousarray(col, dtype="<f4")
        else:
            raise ValueError(f"feature {spec.name!r}: unknown dtype {spec.dtype!r}")
        prepared.append((spec, col))
    return prepared, (n or 0)


def _feature_prefix(name: str) -> bytes:
    """The map entry bytes before varint(len Feature): 0x0A varint(len key) key 0x12."""
    key = name.encode("utf-8")
    return b"\x0a" + _varint_bytes(len(key)) + key + b"\x12"


def _encode_chunk(prepared, n: int) -> List[bytes]:
    # Per feature: the per-row lengths of each nested message, and the payload block.
    feats = []
    total = np.zeros(n, dtype=np.int64)  # length of the Features message per row
    for spec, col in prepared:
        prefix = _feature_prefix(spec.name)
        if spec.dtype == INT64:
            kind_tag = b"\x1a"
            if spec.length == 0:
                payload, mask, p = None, None, np.zeros(n, dtype=np.int64)
            else:
                vmax = int(col.max())
                payload, mask, p = _varint_matrix(col, _max_varint_len(vmax))
        else:
            kind_tag = b"\x12"
            if spec.length == 0:
                payload, mask = None, None
            else:
                payload, mask = col.view(np.uint8).reshape(n, 4 * spec.length), None
            p = np.full(n, 4 * spec.length, dtype=np.int64)
        if spec.length == 0:
            il = np.zeros(n, dtype=np.int64)  # empty list message: the packed field is omitted
        else:
            il = 1 + _vlen_col(p) + p
        fl = 1 + _vlen_col(il) + il
        me = len(prefix) + _vlen_col(fl) + fl
        item = 1 + _vlen_col(me) + me
        total += item
        feats.append((prefix, kind_tag, payload, mask, p, il, fl, me))

    rec_len = 1 + _vlen_col(total) + total
    pieces = _Pieces(n)
    pieces.const(b"\x0a")
    pieces.varint(total)
    for prefix, kind_tag, payload, mask, p, il, fl, me in feats:
        pieces.const(b"\x0a")
        pieces.varint(me)
        pieces.const(prefix)
        pieces.varint(fl)
        pieces.const(kind_tag)
        pieces.varint(il)
        if payload is not None:
            pieces.const(b"\x0a")
            pieces.varint(p)
            pieces.block(payload, mask)
    flat = pieces.flat()

    ends = np.cumsum(rec_len)
    if int(ends[-1]) != len(flat):  # internal consistency check, cheap
        raise AssertionError(f"encoder length mismatch: {int(ends[-1])} != {len(flat)}")
    ends_l = ends.tolist()
    starts_l = [0] + ends_l[:-1]
    return [flat[a:b] for a, b in zip(starts_l, ends_l)]


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
    prepared, n = _prepare_columns(columns, specs)
    if n == 0:
        return []
    # Rough bytes per row of the batch matrix (ids take ~3 varint bytes): only sizes chunks.
    width = 16 + sum(len(spec.name) + 24 + 4 * spec.length for spec, _ in prepared)
    rows = max(64, _CHUNK_BYTES // max(1, width))
    if n <= rows:
        return _encode_chunk(prepared, n)
    out: List[bytes] = []
    for start in range(0, n, rows):
        sub = [(spec, col[start:start + rows]) for spec, col in prepared]
        out.extend(_encode_chunk(sub, min(rows, n - start)))
    return out


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------

_key_cache: Dict[bytes, str] = {}  # feature names the fast scanner recognises, as encoded


def _fast_scan(data: bytes) -> Optional[dict]:
    """Scan the canonical layout (what protobuf, TensorFlow and ``encode_examples`` write).

    Returns ``{name: (kind, start, stop)}`` with one packed span per feature, or ``None`` for
    anything else (other layouts, bytes lists, long varints, names not yet seen, malformed data),
    which protobuf then reads (:func:`bert_data.format.tfrecord.example_proto.parse_example`).
    """
    # Deliberately repetitive: each length varint (at most two bytes here) is decoded inline, not by a
    # helper, because this loop is the per-record cost of every reader and of verify.
    out = {}
    try:
        end = len(data)
        if data[0] != 0x0A:
            return None
        ln = data[1]
        pos = 2
        if ln >= 0x80:
            b = data[2]
            pos = 3
            if b >= 0x80:
                return None
            ln = (ln & 0x7F) | (b << 7)
        if pos + ln != end:
            return None
        keys = _key_cache
        while pos < end:
            # map entry: 0A len
            if data[pos] != 0x0A:
                return None
            ln = data[pos + 1]
            pos += 2
            if ln >= 0x80:
                b = data[pos]
                pos += 1
                if b >= 0x80:
                    return None
                ln = (ln & 0x7F) | (b << 7)
            entry_end = pos + ln
            # key: 0A len key
            if data[pos] != 0x0A:
                return None
            ln = data[pos + 1]
            if ln >= 0x80:
                return None
            pos += 2
            kb = data[pos:pos + ln]
            pos += ln
            name = keys.get(kb)
            if name is None:
                name = _new_key(kb)
                if name is None:
                    return None
            # value: 12 len Feature
            if data[pos] != 0x12:
                return None
            ln = data[pos + 1]
            pos += 2
            if ln >= 0x80:
                b = data[pos]
                pos += 1
                if b >= 0x80:
                    return None
                ln = (ln & 0x7F) | (b << 7)
            if pos + ln != entry_end:
                return None
            # Feature: kind-tag len List
            kind = data[pos] >> 3
            if data[pos] & 7 != 2 or kind == _BYTES_LIST or kind > _INT64_LIST or kind == 0:
                return None
            ln = data[pos + 1]
            pos += 2
            if ln >= 0x80:
                b = data[pos]
                pos += 1
                if b >= 0x80:
                    return None
                ln = (ln & 0x7F) | (b << 7)
            if pos + ln != entry_end:
                return None
            if ln == 0:
                out[name] = (kind, pos, pos)
                continue
            # List: 0A len payload
            if data[pos] != 0x0A:
                return None
            ln = data[pos + 1]
            pos += 2
            if ln >= 0x80:
                b = data[pos]
                pos += 1
                if b >= 0x80:
                    return None
                ln = (ln & 0x7F) | (b << 7)
            if pos + ln != entry_end:
                return None
            if ln:
                if kind == _INT64_LIST:
                    if data[entry_end - 1] >= 0x80:
                        return None
                elif ln & 3:
                    return None
            if name in out:
                return None
            out[name] = (kind, pos, entry_end)
            pos = entry_end
    except IndexError:
        return None
    return out


def _new_key(encoded: bytes) -> Optional[str]:
    """A feature name not seen before (None if it is not UTF-8: protobuf reports that)."""
    try:
        name = encoded.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(_key_cache) < 4096:
        _key_cache[encoded] = name
    return name


def _remember_keys(names) -> None:
    for nm in names:
        if len(_key_cache) < 4096:
            _key_cache[nm.encode("utf-8")] = nm


def _decode_varints(buf: np.ndarray) -> np.ndarray:
    """Decode concatenated varints (uint8 array, last byte a terminator) to int64.

    Fully vectorised: each byte's position inside its varint comes from shifted continuation
    masks, each byte contributes ``(b & 0x7f) << 7*position``, and a value is the difference of
    the running sum at consecutive terminators (exact modulo 2**64, as contributions of one
    varint never overlap).
    """
    if buf.size == 0:
        return np.zeros(0, dtype=np.int64)
    cont = buf >= 0x80
    if not cont.any():
        return buf.astype(np.int64)
    if cont[-1]:
        raise ValueError("malformed Example: truncated varint in int64 list")
    # pos[i] = number of continuation bytes immediately before byte i (its index in the varint).
    pos = np.zeros(buf.size, dtype=np.uint8)
    run = np.zeros(buf.size, dtype=bool)
    run[1:] = cont[:-1]
    k = 1
    while True:
        if not run.any():
            break
        if k >= 10:
            raise ValueError("malformed Example: varint longer than 10 bytes in int64 list")
        pos += run
        run[k + 1:] &= cont[:-(k + 1)]
        run[: k + 1] = False
        k += 1
    maxlen = k  # longest varint in bytes
    dt = np.uint32 if maxlen <= 4 else np.uint64
    contrib = (buf & 0x7F).astype(dt)
    contrib <<= (pos * 7).astype(dt)
    csum = np.cumsum(contrib, dtype=dt)
    at_end = csum[np.flatnonzero(~cont)]
    vals = np.empty(at_end.size, dtype=dt)
    vals[0] = at_end[0]
    np.subtract(at_end[1:], at_end[:-1], out=vals[1:])
    return vals.astype(np.int64) if dt is np.uint32 else vals.view(np.int64)


def _values_array(kind: int, values):
    """A list parsed by protobuf as :func:`decode_example` returns it."""
    if kind == _INT64_LIST:
        return np.array(list(values), dtype=np.int64)
    if kind == _FLOAT_LIST:
        return np.array(list(values), dtype=np.float32)
    return list(values)  # bytes values, or [] when the Feature has no list


def _packed(kind: int, values) -> bytes:
    """An int64 or float list parsed by protobuf, as the packed payload bytes of the fast path."""
    if kind == _INT64_LIST:
        return b"".join(_varint_bytes(int(v) & 0xFFFFFFFFFFFFFFFF) for v in values)
    return np.asarray(values, dtype="<f4").tobytes()


def decode_example(data: bytes) -> Dict[str, Union[np.ndarray, List[bytes]]]:
    """Parse serialized ``tf.train.Example`` bytes.

    Returns ``{name: value}`` with an int64 array for ``int64_list``, a float32 array for
    ``float_list`` and ``list[bytes]`` for ``bytes_list`` (a Feature with no list set gives
    ``[]``).  Records that are not canonical are read as protobuf reads them (packed or not,
    unknown fields skipped).  Malformed bytes raise ``ValueError``.
    """
    if not isinstance(data, bytes):
        data = bytes(data)
    fast = _fast_scan(data)
    if fast is None:
        return {name: _values_array(kind, values) for name, (kind, values) in parse_example(data).items()}
    out: Dict[str, Union[np.ndarray, List[bytes]]] = {}
    for name, (kind, start, stop) in fast.items():
        payload = np.frombuffer(data[start:stop], np.uint8)
        out[name] = _decode_varints(payload) if kind == _INT64_LIST else payload.view("<f4").astype(np.float32)
    return out


def _layout_error(i: int, kinds: Dict[str, int], specs: Sequence[FeatureSpec]) -> ValueError:
    """What is wrong with record ``i``, whose features have these ``{name: kind}``."""
    names = [s.name for s in specs]
    missing = [nm for nm in names if nm not in kinds]
    if missing:
        return ValueError(f"record {i}: feature {missing[0]!r} is missing")
    extra = [nm for nm in kinds if nm not in set(names)]
    if extra:
        return ValueError(f"record {i}: unexpected feature {extra[0]!r}")
    for spec in specs:
        kind = kinds[spec.name]
        if kind != _SPEC_KIND[spec.dtype]:
            got = _KIND_NAMES.get(kind, "no value")
            return ValueError(
                f"record {i}: feature {spec.name!r} is {got}, "
                f"expected {_KIND_NAMES[_SPEC_KIND[spec.dtype]]}"
            )
    return ValueError(f"record {i}: layout mismatch")  # not reached


def decode_examples(
    records: Sequence[bytes], specs: Sequence[FeatureSpec]
) -> Dict[str, np.ndarray]:
    """Decode a batch of Examples into ``{name: (n, spec.length) array}`` per spec.

    int64 features come back as int64, float32 features as float32.  Raises ``ValueError``
    naming the record and feature if a feature is missing, unexpected, of the wrong type or of
    the wrong length, or if a record is malformed.
    """
    n = len(records)
    names = [s.name for s in specs]
    _remember_keys(names)
    name_set = set(names)
    kinds = [_SPEC_KIND[s.dtype] for s in specs]
    n_feat = len(names)
    # Per feature: byte chunks (all records) and per-record byte counts.
    chunks: List[list] = [[] for _ in names]
    nbytes: List[list] = [[] for _ in names]
    appends = [(c.append, b.append) for c, b in zip(chunks, nbytes)]
    plan = list(zip(names, kinds, appends))
    for i, rec in enumerate(records):
        if not isinstance(rec, bytes):
            rec = bytes(rec)
        fast = _fast_scan(rec)
        if fast is not None and len(fast) == n_feat:
            try:
                for nm, kind, (add_chunk, add_n) in plan:
                    k, a, b = fast[nm]
                    if k != kind:
                        raise KeyError(nm)
                    add_chunk(rec[a:b])
                    add_n(b - a)
                continue
            except KeyError:
                # Roll back this record's partial appends, then report precisely below.
                for c, b in zip(chunks, nbytes):
                    del c[i:]
                    del b[i:]
        if fast is not None:
            raise _layout_error(i, {nm: k for nm, (k, _, _) in fast.items()}, specs)
        try:
            parsed = parse_example(rec)
        except ValueError as error:
            raise ValueError(f"record {i}: {error}") from None
        if parsed.keys() != name_set or any(parsed[nm][0] != kind for nm, kind, _ in plan):
            raise _layout_error(i, {nm: k for nm, (k, _) in parsed.items()}, specs)
        for nm, kind, (add_chunk, add_n) in plan:
            payload = _packed(kind, parsed[nm][1])
            add_chunk(payload)
            add_n(len(payload))

    out: Dict[str, np.ndarray] = {}
    for j, spec in enumerate(specs):
        nm = spec.name
        buf = np.frombuffer(b"".join(chunks[j]), dtype=np.uint8)
        counts_b = np.asarray(nbytes[j], dtype=np.int64)
        chunks[j] = None
        if spec.dtype == FLOAT32:
            bad = np.flatnonzero(counts_b != 4 * spec.length)
            if bad.size:
                i = int(bad[0])
                raise ValueError(
                    f"record {i}: feature {nm!r} has {int(counts_b[i]) // 4} values, "
                    f"expected {spec.length}"
                )
            out[nm] = buf.view("<f4").astype(np.float32).reshape(n, spec.length)
        else:
            if buf.size and int(buf.max()) >= 0x80:
                term = np.concatenate(([0], np.cumsum(buf < 0x80, dtype=np.int64)))
                ends = np.cumsum(counts_b)
                counts = term[ends] - term[ends - counts_b]
            else:
                counts = counts_b
            bad = np.flatnonzero(counts != spec.length)
            if bad.size:
                i = int(bad[0])
                raise ValueError(
                    f"record {i}: feature {nm!r} has {int(counts[i])} values, "
                    f"expected {spec.length}"
                )
            out[nm] = _decode_varints(buf).reshape(n, spec.length)
    return out
