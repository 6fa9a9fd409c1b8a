"""TFRecord framing: byte compatibility with TensorFlow, streaming reads, corruption reports."""

import gzip
import io
import os
import pickle
import random
import struct
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest
import tensorflow as tf

from bert_data.format.tfrecord import (
    CompressionError,
    CorruptRecordError,
    count_records,
    detect_compression,
    file_format,
    frame_records,
    iter_records,
    masked_crc32c,
    normalize_compression,
    open_records,
)


def _records(seed=0, n=200):
    rng = random.Random(seed)
    recs = [b"", b"x", bytes(range(256)) * 40]  # empty, tiny, 10 KB
    recs += [rng.randbytes(rng.randint(0, 3000)) for _ in range(n)]
    return recs


def _tf_read(path):
    return [r.numpy() for r in tf.data.TFRecordDataset(str(path))]


def _tf_write(path, records):
    with tf.io.TFRecordWriter(str(path)) as w:
        for r in records:
            w.write(r)


def test_masked_crc_known_values():
    # Masked CRC32C values as written by TensorFlow's record writer.
    assert masked_crc32c(b"") == ((0 >> 15 | 0 << 17) + 0xA282EAD8) & 0xFFFFFFFF
    assert masked_crc32c(b"123456789") == (
        (((0xE3069283 >> 15) | (0xE3069283 << 17)) & 0xFFFFFFFF) + 0xA282EAD8
    ) & 0xFFFFFFFF


def test_frame_records_byte_identical_to_tf_writer(tmp_path):
    recs = _records()
    _tf_write(tmp_path / "tf.tfrecords", recs)
    assert frame_records(recs) == (tmp_path / "tf.tfrecords").read_bytes()
    assert frame_records([]) == b""


def test_framed_records_read_by_tf(tmp_path):
    recs = _records(1)
    path = tmp_path / "ours.tfrecords"
    path.write_bytes(frame_records(recs[:50]) + frame_records(recs[50:]))  # framing concatenates
    assert os.path.getsize(path) == sum(len(r) + 16 for r in recs)
    assert _tf_read(path) == recs  # TFRecordDataset checks both CRCs


def test_iter_records_reads_tf_written_file(tmp_path):
    recs = _records(3)
    path = tmp_path / "tf.tfrecords"
    _tf_write(path, recs)
    assert list(iter_records(path)) == recs
    assert list(iter_records(str(path), verify_crc=False)) == recs
    with open(path, "rb") as f:
        assert list(iter_records(f)) == recs
    assert list(iter_records(io.BytesIO(path.read_bytes()))) == recs
    assert count_records(path) == len(recs)
    with open(path, "rb") as f:
        assert count_records(f) == len(recs)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.tfrecords"
    path.write_bytes(b"")
    assert list(iter_records(path)) == []
    assert count_records(path) == 0


def test_iter_records_is_lazy(tmp_path):
    recs = _records(4, 10)
    data = bytearray(frame_records(recs))
    data[-1] ^= 0xFF  # last record's data CRC
    path = tmp_path / "bad.tfrecords"
    path.write_bytes(bytes(data))
    it = iter_records(path)
    got = [next(it) for _ in range(len(recs) - 1)]
    assert got == recs[:-1]
    with pytest.raises(CorruptRecordError):
        next(it)


# --- corruption ---------------------------------------------------------------------------


def _offsets(recs):
    offs, o = [], 0
    for r in recs:
        offs.append(o)
        o += len(r) + 16
    return offs


@pytest.fixture
def shard(tmp_path):
    recs = [bytes([i]) * (100 + i) for i in range(20)]
    return tmp_path / "shard.tfrecords", recs, frame_records(recs), _offsets(recs)


def test_flipped_data_byte(shard):
    path, recs, data, offs = shard
    k = 12
    bad = bytearray(data)
    bad[offs[k] + 12 + 5] ^= 0x01
    path.write_bytes(bytes(bad))
    with pytest.raises(CorruptRecordError) as ei:
        list(iter_records(path))
    e = ei.value
    assert (e.record_index, e.offset, e.reason) == (k, offs[k], "data CRC mismatch")
    assert str(e) == f"{path}: record {k} at byte {offs[k]}: data CRC mismatch"
    assert isinstance(e, ValueError)
    # TensorFlow agrees the file is corrupt.
    with pytest.raises(tf.errors.DataLossError):
        _tf_read(path)
    # Without data-CRC checks the (corrupted) records are all returned.
    got = list(iter_records(path, verify_crc=False))
    assert len(got) == len(recs) and got[k] != recs[k] and got[:k] == recs[:k]
    assert count_records(path) == len(recs)


def test_flipped_data_crc_byte(shard):
    path, recs, data, offs = shard
    k = 3
    bad = bytearray(data)
    bad[offs[k + 1] - 2] ^= 0x80
    path.write_bytes(bytes(bad))
    with pytest.raises(CorruptRecordError, match="record 3 at byte .*: data CRC mismatch"):
        list(iter_records(path))
    assert len(list(iter_records(path, verify_crc=False))) == len(recs)


@pytest.mark.parametrize("where", [0, 3, 7, 8, 11])  # length bytes and length-CRC bytes
def test_flipped_length_header_byte(shard, where):
    path, recs, data, offs = shard
    k = 7
    bad = bytearray(data)
    bad[offs[k] + where] ^= 0x04
    path.write_bytes(bytes(bad))
    for verify in (True, False):
        with pytest.raises(CorruptRecordError) as ei:
            list(iter_records(path, verify_crc=verify))
        assert (ei.value.record_index, ei.value.offset) == (k, offs[k])
        assert ei.value.reason == "length CRC mismatch"
    with pytest.raises(CorruptRecordError, match="length CRC mismatch"):
        count_records(path)


def test_truncation(shard):
    path, recs, data, offs = shard
    k = 5
    n = len(recs[k])
    cases = {
        offs[k] + 1: "truncated length header",
        offs[k] + 11: "truncated length header",
        offs[k] + 12: f"truncated record data (expected {n} bytes, file ends after 0)",
        offs[k] + 12 + 40: f"truncated record data (expected {n} bytes, file ends after 40)",
        offs[k] + 12 + n: "truncated data CRC",
        offs[k] + 12 + n + 3: "truncated data CRC",
    }
    for cut, reason in cases.items():
        path.write_bytes(data[:cut])
        for source in (lambda: path, lambda: io.BytesIO(data[:cut])):
            it = iter_records(source())
            assert [next(it) for _ in range(k)] == recs[:k]
            with pytest.raises(CorruptRecordError) as ei:
                next(it)
            assert (ei.value.record_index, ei.value.offset, ei.value.reason) == (k, offs[k], reason)
        with pytest.raises(CorruptRecordError) as ei:
            count_records(path)
        assert ei.value.record_index == k
        assert ei.value.reason.split(" (")[0] == reason.split(" (")[0]
    # Cutting exactly at a record boundary is a valid, shorter file.
    path.write_bytes(data[: offs[k]])
    assert list(iter_records(path)) == recs[:k]
    assert count_records(path) == k


def test_huge_bogus_length_does_not_allocate(tmp_path):
    # A well-formed header claiming 2**40 bytes in a short file: reported, not read.
    lb = struct.pack("<Q", 1 << 40)
    path = tmp_path / "huge.tfrecords"
    path.write_bytes(lb + struct.pack("<I", masked_crc32c(lb)) + b"abc")
    with pytest.raises(CorruptRecordError, match=r"expected 1099511627776 bytes, file ends after 3"):
        list(iter_records(path))
    with pytest.raises(CorruptRecordError, match="truncated record data"):
        count_records(path)


def test_error_pickles():
    e = CorruptRecordError("a.tfrecords", 3, 99, "data CRC mismatch")
    e2 = pickle.loads(pickle.dumps(e))
    assert (e2.path, e2.record_index, e2.offset, e2.reason, str(e2)) == (
        e.path, e.record_index, e.offset, e.reason, str(e))


def test_error_pickles_with_compression():
    e = CorruptRecordError("a.tfrecords", 3, 99, "gzip data is corrupt", "gzip")
    e2 = pickle.loads(pickle.dumps(e))
    assert str(e2) == str(e) == "a.tfrecords: record 3 at uncompressed byte 99: gzip data is corrupt"
    assert e2.compression == "gzip"


# --- compression ---------------------------------------------------------------------------

TF_TYPES = {"gzip": "GZIP", "zlib": "ZLIB"}


def _compress(data, compression, members=1):
    if compression == "zlib":
        return zlib.compress(data)
    cuts = [len(data) * i // members for i in range(members + 1)]
    return b"".join(gzip.compress(data[a:b], mtime=0) for a, b in zip(cuts, cuts[1:]))


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_compressed_files_written_by_tensorflow(tmp_path, compression):
    recs = _records(5)
    path = tmp_path / "tf.tfrecords"
    with tf.io.TFRecordWriter(str(path), options=tf.io.TFRecordOptions(compression_type=TF_TYPES[compression])) as w:
        for r in recs:
            w.write(r)
    assert detect_compression(path) == compression
    assert list(iter_records(path, compression=compression)) == recs
    assert list(iter_records(path, compression="auto")) == recs
    assert list(iter_records(str(path), compression=compression.upper(), verify_crc=False)) == recs
    with open(path, "rb") as f:
        assert list(iter_records(f, compression=compression)) == recs
    with open(path, "rb") as f:
        assert detect_compression(f) == compression and f.tell() == 0  # peeked, not consumed
        assert list(iter_records(f, compression="auto")) == recs
    assert count_records(path, compression) == len(recs)


@pytest.mark.parametrize("compression,members", [("gzip", 1), ("gzip", 3), ("zlib", 1)])
def test_our_compressed_files_read_by_tensorflow(tmp_path, compression, members):
    recs = _records(6)
    path = tmp_path / "ours.tfrecords"
    path.write_bytes(_compress(frame_records(recs), compression, members))
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path), compression_type=TF_TYPES[compression])] == recs
    assert list(iter_records(path, compression=compression)) == recs
    # Members split inside records, files bigger than the read buffers.
    big = [bytes([i % 251]) * 5000 for i in range(400)]
    path.write_bytes(_compress(frame_records(big), compression, 7 if compression == "gzip" else 1))
    assert list(iter_records(path, compression=compression, buffer_size=4096)) == big
    assert count_records(path, compression) == len(big)
    stream, owns = open_records(path, compression)
    assert owns and stream.read(100) == frame_records(big)[:100] and stream.tell() == 100
    stream.close()


def test_detect_compression(tmp_path):
    cases = {
        "plain": (frame_records([b"\x1f\x8b" + b"x" * 30]), None),  # data looking like gzip is not a header
        "gzip": (gzip.compress(frame_records([b"a"])), "gzip"),
        "zlib_fast": (zlib.compress(frame_records([b"a"]), 1), "zlib"),
        "zlib_best": (zlib.compress(frame_records([b"a"]), 9), "zlib"),
        "empty": (b"", None),
    }
    for name, (data, expected) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert detect_compression(path) == expected, name
        assert file_format(path) == (expected or ("tfrecord" if name == "plain" else None)), name
        assert list(iter_records(path, compression="auto")) == ([] if name == "empty" else [b"\x1f\x8b" + b"x" * 30]
                                                                if name == "plain" else [b"a"])
    (tmp_path / "junk").write_bytes(b"neither a record nor compressed")
    assert file_format(tmp_path / "junk") is None and detect_compression(tmp_path / "junk") is None
    assert normalize_compression("GZIP") == "gzip" and normalize_compression("") is None
    assert normalize_compression("none") is None and normalize_compression("auto") == "auto"
    with pytest.raises(ValueError, match="compression must be"):
        normalize_compression("bz2")
    with pytest.raises(ValueError, match="compression must be"):
        list(iter_records(tmp_path / "plain", compression="lz4"))


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_corrupt_compressed_files(tmp_path, compression):
    recs = [bytes([i]) * 3000 for i in range(60)]
    data = _compress(frame_records(recs), compression)
    path = tmp_path / "bad.tfrecords"
    cases = {
        "truncated": data[: len(data) * 2 // 3],
        "damaged": data[:40] + bytes(200) + data[240:],
        "empty_members": b"" if compression == "zlib" else data + gzip.compress(b""),
    }
    for name, bad in cases.items():
        path.write_bytes(bad)
        if name == "empty_members":  # an empty file and an empty gzip member hold no records: fine
            assert len(list(iter_records(path, compression=compression))) == (0 if compression == "zlib" else 60)
            continue
        with pytest.raises(CorruptRecordError) as ei:
            list(iter_records(path, compression=compression))
        e = ei.value
        assert e.compression == compression and "uncompressed byte" in str(e) and str(path) in str(e)
        if name == "truncated":
            assert e.reason.startswith(f"{compression} stream is truncated") or e.reason.startswith("truncated")
            assert 0 < e.record_index < 60
        else:
            assert "corrupt" in e.reason or "CRC mismatch" in e.reason
        with pytest.raises(CorruptRecordError):
            count_records(path, compression)
        # TensorFlow refuses these files too.
        with pytest.raises((tf.errors.DataLossError, tf.errors.OutOfRangeError, tf.errors.InvalidArgumentError)):
            [r for r in tf.data.TFRecordDataset(str(path), compression_type=TF_TYPES[compression])]
    # The stream itself raises CompressionError (a ValueError).
    path.write_bytes(cases["truncated"])
    stream, _ = open_records(path, compression)
    with pytest.raises(CompressionError, match="truncated"):
        stream.read()
    stream.close()


def test_data_after_the_stream(tmp_path):
    recs = [b"r" * 10] * 3
    path = tmp_path / "x.tfrecords"
    path.write_bytes(zlib.compress(frame_records(recs)) + zlib.compress(frame_records(recs)))
    with pytest.raises(CorruptRecordError, match="data after the end of the zlib stream"):
        list(iter_records(path, compression="zlib"))
    # TensorFlow silently stops after the first zlib stream: a reason to report it.
    assert len(list(tf.data.TFRecordDataset(str(path), compression_type="ZLIB"))) == 3
    path.write_bytes(gzip.compress(frame_records(recs)) + b"\x00junk")
    with pytest.raises(CorruptRecordError, match="not another gzip member"):
        list(iter_records(path, compression="gzip"))


def test_wrapped_file_objects_use_their_own_size(tmp_path):
    # gzip.GzipFile has the compressed file's fileno(): its size must not be taken for the data's.
    recs = _records(7, 100)
    path = tmp_path / "g.gz"
    path.write_bytes(gzip.compress(frame_records(recs)))
    with gzip.open(path, "rb") as f:
        assert list(iter_records(f)) == recs
    with gzip.open(path, "rb") as f:
        assert count_records(f) == len(recs)


def test_huge_bogus_length_in_a_stream(tmp_path):
    lb = struct.pack("<Q", 1 << 40)
    path = tmp_path / "huge.tfrecords"
    path.write_bytes(gzip.compress(lb + struct.pack("<I", masked_crc32c(lb)) + b"abc"))
    with pytest.raises(CorruptRecordError, match=r"expected 1099511627776 bytes, file ends after 3"):
        list(iter_records(path, compression="gzip"))


def test_compressed_stream_fuzz(tmp_path):
    """Random records, gzip members cut anywhere, any read buffer: always the same records."""
    rng = random.Random(11)
    path = tmp_path / "f.tfrecords"
    for trial in range(12):
        recs = [rng.randbytes(rng.choice([0, 1, 50, 3000, 20000])) for _ in range(rng.randint(1, 80))]
        data = frame_records(recs)
        if trial % 3 == 2:
            blob = zlib.compress(data, rng.randint(0, 9))
        else:
            cuts = sorted({0, len(data), *(rng.randint(0, len(data)) for _ in range(rng.randint(0, 12)))})
            blob = b"".join(gzip.compress(data[a:b], compresslevel=rng.randint(0, 9)) for a, b in zip(cuts, cuts[1:]))
        path.write_bytes(blob)
        buffer_size = rng.choice([1, 7, 4096, 1 << 20])
        assert list(iter_records(path, compression="auto", buffer_size=buffer_size)) == recs, trial


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_damage_is_reported_where_it_is(tmp_path, compression):
    """The records before the damage come out (even from the same zlib input piece); the error
    names a record near it, not the first of the piece."""
    rng = random.Random(3)
    recs = [bytes(rng.choice(b"abcdefgh") for _ in range(300)) for _ in range(200)]
    data = bytearray(_compress(frame_records(recs), compression))
    at = len(data) * 6 // 10
    data[at:at + 4] = b"\xff\xff\xff\xff"
    path = tmp_path / "d.tfrecords"
    path.write_bytes(bytes(data))
    got = []
    with pytest.raises(CorruptRecordError) as ei:
        for record in iter_records(path, compression=compression):
            got.append(record)
    assert got == recs[: len(got)] and 0.4 * len(recs) < len(got) == ei.value.record_index < len(recs)
