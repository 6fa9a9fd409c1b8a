"""tf.train.Example codec: compatibility with TensorFlow's parser and protobuf, error handling."""

import os
import random

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest
import tensorflow as tf
from google.protobuf.message import DecodeError

from bert_data.format.tfrecord import example_codec, example_encoding
from bert_data.format.tfrecord.example_codec import decode_example, decode_examples, encode_examples
from bert_data.format.layout import FLOAT32, INT64, FeatureSpec, feature_specs, tf_feature_description

SPECIAL_IDS = [0, 1, 127, 128, 16383, 16384, 30521, 2**20, 2**21 - 1, 2**28, 2**35, 2**40,
               2**56, 2**62, 2**63 - 1]


def _columns(msl, mpp, n, seed=0, big=True):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 30522, (n, msl))
    if big:  # sprinkle values needing 1..9 varint bytes
        ids.flat[rng.integers(0, ids.size, min(ids.size, 40))] = rng.choice(SPECIAL_IDS, min(ids.size, 40))
        ids[0, : min(msl, len(SPECIAL_IDS))] = SPECIAL_IDS[:msl]
    cols = {
        "input_ids": ids,
        "input_mask": rng.integers(0, 2, (n, msl)).astype(np.int32),
        "segment_ids": np.zeros((n, msl), dtype=np.uint8),
        "masked_lm_positions": rng.integers(0, msl, (n, mpp)).astype(np.int16),
        "masked_lm_ids": rng.integers(0, 2**40 if big else 30522, (n, mpp)),
        "masked_lm_weights": rng.choice([1.0, 0.0, 0.5], (n, mpp)),  # float64 input
        "next_sentence_labels": rng.integers(0, 2, (n, 1)).astype(np.uint64),
    }
    cols["segment_ids"][:, msl // 2:] = 1
    return cols


def _expected(cols, specs):
    return {s.name: np.asarray(cols[s.name]).reshape(-1, s.length).astype(
        np.float32 if s.dtype == FLOAT32 else np.int64) for s in specs}


@pytest.mark.parametrize("msl,mpp,n", [(8, 1, 7), (128, 20, 64), (512, 80, 16)])
def test_encode_parses_with_tensorflow(msl, mpp, n):
    specs = feature_specs(msl, mpp)
    cols = _columns(msl, mpp, n, seed=msl)
    recs = encode_examples(cols, specs)
    assert len(recs) == n and all(isinstance(r, bytes) for r in recs)
    exp = _expected(cols, specs)
    desc = tf_feature_description(msl, mpp)

    batch = tf.io.parse_example(tf.constant(recs), desc)
    for s in specs:
        got = batch[s.name].numpy()
        assert got.dtype == exp[s.name].dtype
        np.testing.assert_array_equal(got, exp[s.name], err_msg=s.name)

    for i in (0, n - 1):
        single = tf.io.parse_single_example(recs[i], desc)
        ex = tf.train.Example.FromString(recs[i])
        assert set(ex.features.feature) == {s.name for s in specs}
        for s in specs:
            np.testing.assert_array_equal(single[s.name].numpy(), exp[s.name][i])
            f = ex.features.feature[s.name]
            if s.dtype == INT64:
                assert f.WhichOneof("kind") == "int64_list"
                assert list(f.int64_list.value) == exp[s.name][i].tolist()
            else:
                assert f.WhichOneof("kind") == "float_list"
                assert list(f.float_list.value) == exp[s.name][i].tolist()

    # Our own decoders agree too.
    dec = decode_examples(recs, specs)
    for s in specs:
        np.testing.assert_array_equal(dec[s.name], exp[s.name])
        assert dec[s.name].dtype == exp[s.name].dtype
    one = decode_example(recs[n // 2])
    assert list(one) == [s.name for s in specs]  # written in specs order
    for s in specs:
        np.testing.assert_array_equal(one[s.name], exp[s.name][n // 2])


def _split_entries(example_bytes):
    """Map-entry byte strings of a canonical Example (tiny independent parser)."""
    def varint(b, p):
        v = s = 0
        while True:
            v |= (b[p] & 0x7F) << s
            p += 1
            if b[p - 1] < 0x80:
                return v, p
            s += 7
    assert example_bytes[0] == 0x0A
    ln, p = varint(example_bytes, 1)
    assert p + ln == len(example_bytes)
    entries = []
    while p < len(example_bytes):
        assert example_bytes[p] == 0x0A
        ln, q = varint(example_bytes, p + 1)
        entries.append(example_bytes[p:q + ln])
        p = q + ln
    return entries


def test_entries_byte_identical_to_protobuf():
    """Each feature's bytes equal protobuf's own serialization (protobuf's map order differs)."""
    specs = feature_specs(128, 20)
    cols = _columns(128, 20, 10, seed=5)
    recs = encode_examples(cols, specs)
    exp = _expected(cols, specs)
    for i, rec in enumerate(recs):
        feats = {}
        for s in specs:
            if s.dtype == INT64:
                feats[s.name] = tf.train.Feature(int64_list=tf.train.Int64List(value=exp[s.name][i]))
            else:
                feats[s.name] = tf.train.Feature(float_list=tf.train.FloatList(value=exp[s.name][i]))
        ref = tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString()
        assert len(ref) == len(rec)
        assert sorted(_split_entries(ref)) == sorted(_split_entries(rec))


def test_special_values_and_dtypes():
    specs = feature_specs(len(SPECIAL_IDS), 3)
    n = 3
    ids = np.array([SPECIAL_IDS, SPECIAL_IDS[::-1], [0] * len(SPECIAL_IDS)], dtype=np.int64)
    cols = {
        "input_ids": ids,
        "input_mask": np.ones((n, len(SPECIAL_IDS)), dtype=bool),
        "segment_ids": np.zeros((n, len(SPECIAL_IDS)), dtype=np.int8),
        "masked_lm_positions": np.array([[1, 2, 3]] * n, dtype=np.uint16),
        "masked_lm_ids": np.array([[30521, 2**20, 2**40]] * n, dtype=np.uint64),
        "masked_lm_weights": np.array([[1.0, 0.0, 0.5]] * n, dtype=np.float16),
        "next_sentence_labels": np.array([0, 1, 1]),  # 1-D accepted for length 1
    }
    recs = encode_examples(cols, specs)
    parsed = tf.io.parse_example(tf.constant(recs), tf_feature_description(len(SPECIAL_IDS), 3))
    np.testing.assert_array_equal(parsed["input_ids"].numpy(), ids)
    np.testing.assert_array_equal(parsed["input_mask"].numpy(), 1)
    np.testing.assert_array_equal(parsed["masked_lm_ids"].numpy()[0], [30521, 2**20, 2**40])
    np.testing.assert_array_equal(parsed["masked_lm_weights"].numpy()[0], [1.0, 0.0, 0.5])
    np.testing.assert_array_equal(parsed["next_sentence_labels"].numpy()[:, 0], [0, 1, 1])
    np.testing.assert_array_equal(decode_examples(recs, specs)["input_ids"], ids)


def test_ten_byte_varints():
    """uint64 >= 2**63 is written as the 10-byte varint TF reads as the same int64 bits."""
    specs = [FeatureSpec("v", INT64, 4)]
    vals = np.array([[2**63, 2**64 - 1, 2**63 + 12345, 5]], dtype=np.uint64)
    (rec,) = encode_examples({"v": vals}, specs)
    parsed = tf.io.parse_single_example(rec, {"v": tf.io.FixedLenFeature([4], tf.int64)})
    np.testing.assert_array_equal(parsed["v"].numpy(), vals.view(np.int64)[0])
    np.testing.assert_array_equal(decode_example(rec)["v"], vals.view(np.int64)[0])
    np.testing.assert_array_equal(decode_examples([rec], specs)["v"], vals.view(np.int64))


def test_chunked_encoding_matches_single_chunk(monkeypatch):
    specs = feature_specs(16, 3)
    cols = _columns(16, 3, 300, seed=9)
    whole = encode_examples(cols, specs)
    monkeypatch.setattr(example_encoding, "_CHUNK_BYTES", 1000)  # 64-row chunks
    assert encode_examples(cols, specs) == whole
    np.testing.assert_array_equal(decode_examples(whole, specs)["input_ids"], cols["input_ids"])


def test_zero_records_and_zero_length_features():
    specs = feature_specs(8, 2)
    cols = {s.name: np.zeros((0, s.length), dtype=np.int64) for s in specs}
    assert encode_examples(cols, specs) == []
    assert all(v.shape == (0, s.length) for s, v in zip(specs, decode_examples([], specs).values()))
    specs0 = [FeatureSpec("a", INT64, 0), FeatureSpec("b", FLOAT32, 0), FeatureSpec("c", INT64, 1)]
    recs = encode_examples({"a": np.zeros((2, 0), int), "b": np.zeros((2, 0)),
                            "c": np.array([[1], [2]])}, specs0)
    ex = tf.train.Example.FromString(recs[0])
    assert ex.features.feature["a"].WhichOneof("kind") == "int64_list"
    assert ex.features.feature["b"].WhichOneof("kind") == "float_list"
    dec = decode_examples(recs, specs0)
    assert dec["a"].shape == (2, 0) and dec["b"].shape == (2, 0)
    np.testing.assert_array_equal(dec["c"], [[1], [2]])


def test_encode_rejects_bad_input():
    specs = feature_specs(4, 2)
    good = {s.name: np.zeros((3, s.length), dtype=np.int64) for s in specs}
    good["masked_lm_weights"] = np.zeros((3, 2), dtype=np.float32)

    def bad(**changes):
        cols = dict(good)
        for k, v in changes.items():
            if v is None:
                del cols[k]
            else:
                cols[k] = v
        return cols

    with pytest.raises(ValueError, match="input_ids.*negative"):
        encode_examples(bad(input_ids=-np.ones((3, 4), dtype=np.int64)), specs)
    with pytest.raises(ValueError, match="input_mask.*shape"):
        encode_examples(bad(input_mask=np.zeros((3, 5), dtype=np.int64)), specs)
    with pytest.raises(ValueError, match="segment_ids.*rows"):
        encode_examples(bad(segment_ids=np.zeros((4, 4), dtype=np.int64)), specs)
    with pytest.raises(ValueError, match="masked_lm_ids.*dtype"):
        encode_examples(bad(masked_lm_ids=np.zeros((3, 2), dtype=np.float32)), specs)
    with pytest.raises(ValueError, match="missing.*next_sentence_labels"):
        encode_examples(bad(next_sentence_labels=None), specs)
    with pytest.raises(ValueError, match="not in the feature specs.*extra"):
        encode_examples(bad(extra=np.zeros((3, 1), dtype=np.int64)), specs)


# --- decode_example: general parser -----------------------------------------------------


def _varint(v):
    # Deliberately written again, not imported: the test builds protobuf bytes independently of
    # the codec it checks.
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _ld(field, payload):  # length-delimited field
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _example(entries):
    """Example bytes from (name, Feature bytes) pairs, optionally with extra raw bytes."""
    feats = b"".join(_ld(1, _ld(1, name.encode()) + _ld(2, feat)) for name, feat in entries)
    return _ld(1, feats)


def test_decode_tf_serialized_example():
    ex = tf.train.Example(features=tf.train.Features(feature={
        "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=[0, 1, 300, 2**40, -1, -(2**63)])),
        "w": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0, 0.0, 0.5, -3.25])),
        "txt": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"hello", b"", bytes(range(256))])),
        "empty_i": tf.train.Feature(int64_list=tf.train.Int64List(value=[])),
        "empty_f": tf.train.Feature(float_list=tf.train.FloatList(value=[])),
        "unset": tf.train.Feature(),
    }))
    d = decode_example(ex.SerializeToString())
    assert set(d) == {"ids", "w", "txt", "empty_i", "empty_f", "unset"}
    assert d["ids"].dtype == np.int64
    assert d["ids"].tolist() == [0, 1, 300, 2**40, -1, -(2**63)]
    assert d["w"].dtype == np.float32 and d["w"].tolist() == [1.0, 0.0, 0.5, -3.25]
    assert d["txt"] == [b"hello", b"", bytes(range(256))]
    assert d["empty_i"].dtype == np.int64 and d["empty_i"].size == 0
    assert d["empty_f"].dtype == np.float32 and d["empty_f"].size == 0
    assert d["unset"] == []
    assert decode_example(b"") == {}
    assert decode_example(tf.train.Example().SerializeToString()) == {}


def test_decode_non_packed_and_unknown_fields():
    vals = [5, 0, 2**35, 300, 2**63 - 1]
    unpacked = b"".join(b"\x08" + _varint(v) for v in vals)  # Int64List, non-packed
    mixed = _ld(1, b"".join(_varint(v) for v in vals[:2])) + b"".join(
        b"\x08" + _varint(v) for v in vals[2:])  # packed chunk then unpacked values
    floats = np.array([1.0, 0.5, -2.0], dtype="<f4")
    float_unpacked = b"".join(b"\x0d" + f.tobytes() for f in floats)  # fixed32 values
    unknown = b"\x78\x96\x01" + _ld(7, b"junk") + b"\x3d\x00\x00\x00\x00" + b"\x31" + b"\x00" * 8
    rec = _example([
        ("a", _ld(3, unpacked)),
        ("b", _ld(3, mixed + unknown)),
        ("c", unknown + _ld(2, float_unpacked)),
        ("d", _ld(2, _ld(1, floats[:1].tobytes()) + float_unpacked[5:])),
    ]) + unknown  # unknown top-level fields too
    d = decode_example(rec)
    assert d["a"].tolist() == vals and d["b"].tolist() == vals
    assert d["c"].tolist() == floats.tolist() and d["d"].tolist() == floats.tolist()
    # tensorflow reads non-packed lists the same way (its fast parser rejects unknown fields)
    plain = _example([("a", _ld(3, unpacked)), ("c", _ld(2, float_unpacked))])
    assert decode_example(plain)["a"].tolist() == vals
    p = tf.io.parse_single_example(plain, {"a": tf.io.FixedLenFeature([5], tf.int64),
                                         "c": tf.io.FixedLenFeature([3], tf.float32)})
    assert p["a"].numpy().tolist() == vals and p["c"].numpy().tolist() == floats.tolist()
    # the batch decoder takes the general path for such records
    specs = [FeatureSpec("a", INT64, 5), FeatureSpec("b", INT64, 5),
             FeatureSpec("c", FLOAT32, 3), FeatureSpec("d", FLOAT32, 3)]
    canon = encode_examples({"a": np.array([vals]), "b": np.array([vals]),
                             "c": floats[None], "d": floats[None]}, specs)[0]
    out = decode_examples([canon, rec, canon], specs)
    np.testing.assert_array_equal(out["b"], [vals] * 3)
    np.testing.assert_array_equal(out["d"], [floats] * 3)


def test_decode_roundtrips_own_and_tf_output():
    specs = feature_specs(32, 5)
    cols = _columns(32, 5, 20, seed=3)
    exp = _expected(cols, specs)
    ours = encode_examples(cols, specs)
    theirs = []
    for i in range(20):
        feats = {}
        for s in specs:
            feats[s.name] = (tf.train.Feature(int64_list=tf.train.Int64List(value=exp[s.name][i]))
                             if s.dtype == INT64 else
                             tf.train.Feature(float_list=tf.train.FloatList(value=exp[s.name][i])))
        theirs.append(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
    for recs in (ours, theirs, ours[:10] + theirs[10:]):
        dec = decode_examples(recs, specs)
        for s in specs:
            np.testing.assert_array_equal(dec[s.name], exp[s.name])
        for i in (0, 19):
            one = decode_example(recs[i])
            for s in specs:
                np.testing.assert_array_equal(one[s.name], exp[s.name][i])


def test_decode_examples_layout_errors():
    specs = feature_specs(8, 2)
    cols = _columns(8, 2, 4, seed=1, big=False)
    recs = encode_examples(cols, specs)

    def with_(spec_list, **over):
        c = {s.name: over[s.name] if s.name in over else cols[s.name] for s in spec_list}
        return encode_examples(c, spec_list)

    short = [FeatureSpec(s.name, s.dtype, 7 if s.name == "input_ids" else s.length) for s in specs]
    bad = with_(short, input_ids=cols["input_ids"][:, :7])
    with pytest.raises(ValueError, match=r"record 2: feature 'input_ids' has 7 values, expected 8"):
        decode_examples(recs[:2] + bad[2:], specs)
    with pytest.raises(ValueError, match=r"record 1: feature 'next_sentence_labels' is missing"):
        decode_examples(recs[:1] + with_(specs[:-1])[1:], specs)
    extra = specs + [FeatureSpec("extra", INT64, 1)]
    with pytest.raises(ValueError, match=r"record 0: unexpected feature 'extra'"):
        decode_examples(with_(extra, extra=np.zeros((4, 1), int)), specs)
    as_float = [FeatureSpec(s.name, FLOAT32 if s.name == "segment_ids" else s.dtype, s.length)
                for s in specs]
    with pytest.raises(ValueError, match=r"record 0: feature 'segment_ids' is float_list, expected int64_list"):
        decode_examples(with_(as_float), specs)
    shortw = [FeatureSpec(s.name, s.dtype, 1 if s.name == "masked_lm_weights" else s.length)
              for s in specs]
    with pytest.raises(ValueError, match=r"record 0: feature 'masked_lm_weights' has 1 values, expected 2"):
        decode_examples(with_(shortw, masked_lm_weights=cols["masked_lm_weights"][:, :1]), specs)
    with pytest.raises(ValueError, match=r"record 3: malformed Example"):
        decode_examples(recs[:3] + [recs[3][:-1]], specs)


def test_decode_malformed_bytes():
    specs = feature_specs(8, 2)
    rec = encode_examples(_columns(8, 2, 1, big=True), specs)[0]
    # Every proper prefix of an Example is malformed (its one top-level field spans it all).
    for cut in range(1, len(rec)):
        with pytest.raises(ValueError, match="malformed Example"):
            decode_example(rec[:cut])
    malformed = [
        b"\x0a",  # truncated varint
        b"\x0a\xff\xff",  # truncated varint
        b"\x0a\x05\x0a\x02",  # a length that runs past the end
        _example([("a", b"\x1a\x02\x0a\x81")]),  # packed varint cut short
        _example([("a", b"\x1a\x03\x0d\x00\x00")]),  # Int64List.value as a truncated fixed32
        _example([("a", b"\x12\x03\x0a\x01\x00")]),  # packed floats, not a multiple of 4 bytes
        b"\x10" + b"\xff" * 10 + b"\x01",  # varint longer than 10 bytes
        b"\x13\x00",  # a group that never ends
        _example([("@", b"")]).replace(b"@", b"\xff"),  # a feature name that is not UTF-8
    ]
    for data in malformed:
        with pytest.raises(ValueError, match=r"malformed Example \(protobuf: "):
            decode_example(data)
        with pytest.raises(DecodeError):
            tf.train.Example.FromString(data)  # protobuf itself refuses them
    with pytest.raises(ValueError, match=r"longer than 10 bytes"):  # the fast path's own check
        decode_example(_example([("a", _ld(3, _ld(1, b"\xff" * 10 + b"\x01")))]))
    # A known field with another wire type is an unknown field to protobuf (and TensorFlow): skipped.
    skipped = {
        b"\x08\x01": {},  # Example.features as a varint
        _example([("a", b"\x0a\x02\x08\x01")]): {"a": []},  # bytes value as a varint: an empty bytes_list
        _example([("a", b"\x18\x01")]): {"a": []},  # Feature.int64_list as a varint: no list set
    }
    for data, expected in skipped.items():
        assert decode_example(data) == expected
        assert set(tf.train.Example.FromString(data).features.feature) == set(expected)


def test_canonical_records_need_no_protobuf(monkeypatch):
    """protobuf is optional: canonical records are read without it, others fail with one line."""
    import sys

    from bert_data.format.tfrecord import example_proto

    specs = feature_specs(8, 2)
    cols = _columns(8, 2, 3, big=True)
    recs = encode_examples(cols, specs)
    other = _example([("a", _ld(3, b"\x08\x05"))])  # a non-packed int64 list
    expected = decode_example(other)
    monkeypatch.setitem(sys.modules, "google.protobuf", None)  # as if protobuf were not installed
    example_proto.example_class.cache_clear()
    try:
        decoded = decode_examples(recs, specs)
        for s in specs:
            np.testing.assert_array_equal(decoded[s.name], _expected(cols, specs)[s.name])
        assert list(decode_example(recs[0])) == [s.name for s in specs]
        for call in (lambda: decode_example(other), lambda: decode_examples([recs[0], other], specs)):
            with pytest.raises(ImportError) as caught:
                call()
            message = str(caught.value)
            assert "\n" not in message and "protobuf" in message and "bert_data[proto]" in message
            assert "canonical records" in message and "without it" in message
    finally:
        monkeypatch.undo()
        example_proto.example_class.cache_clear()
    assert decode_example(other)["a"].tolist() == expected["a"].tolist() == [5]


def test_decode_fuzz_only_raises_value_error():
    specs = feature_specs(8, 2)
    recs = encode_examples(_columns(8, 2, 4, big=True), specs)
    rng = random.Random(0)
    for _ in range(1500):
        b = bytearray(rng.choice(recs))
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        try:
            decode_example(bytes(b))
        except ValueError:
            pass
        try:
            decode_examples([bytes(b)], specs)
        except ValueError:
            pass
