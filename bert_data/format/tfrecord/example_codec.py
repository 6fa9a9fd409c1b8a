"""``tf.train.Example`` bytes from and to numpy columns, fast, without TensorFlow.

Messages involved::

    Example   { Features features = 1; }
    Features  { map<string, Feature> feature = 1; }   // entry: key = 1 (string), value = 2
    Feature   { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
    Int64List { repeated int64 value = 1 [packed]; }
    FloatList { repeated float value = 1 [packed]; }
    BytesList { repeated bytes value = 1; }

:func:`encode_examples` (the writer's hot path, a whole batch with numpy) lives in
:mod:`.example_encoding` and is re-exported here.  Decoding reads the canonical bytes (what protobuf, TensorFlow and :func:`encode_examples` write:
one packed list per feature) with a scanner of its own, the per-record cost of every reader and
of ``bert-data verify``; any other record (non-packed lists, unknown fields, bytes lists,
malformed data) is parsed by protobuf (:mod:`bert_data.format.tfrecord.example_proto`, optional).
:func:`decode_example` returns whatever features a record has; :func:`decode_examples` decodes
a batch into a fixed layout (:mod:`bert_data.format.layout`).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Union

import numpy as np

from .example_proto import BYTES_LIST as _BYTES_LIST
from .example_proto import FLOAT_LIST as _FLOAT_LIST
from .example_proto import INT64_LIST as _INT64_LIST
from .example_proto import KIND_NAMES as _KIND_NAMES
from .example_proto import parse_example
from .example_encoding import _varint_bytes, encode_examples
from ..layout import FLOAT32, INT64, FeatureSpec

__all__ = ["encode_examples", "decode_example", "decode_examples"]

_SPEC_KIND = {INT64: _INT64_LIST, FLOAT32: _FLOAT_LIST}

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
