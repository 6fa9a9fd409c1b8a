"""TFRecord framing: byte compatibility with TensorFlow, streaming reads, corruption reports."""

import io
import os
import pickle
import random
import struct

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest
import tensorflow as tf

from bert_data.tfrecord import (
    CorruptRecordError,
    TFRecordWriter,
    count_records,
    frame_records,
    iter_records,
    masked_crc32c,
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


def test_writer_output_read_by_tf(tmp_path):
    recs = _records(1)
    path = tmp_path / "ours.tfrecords"
    with TFRecordWriter(path) as w:
        w.write(recs[0])
        w.write_many(recs[1:50])
        w.write_many(iter(recs[50:]))  # any iterable
        w.write_many([])
    assert w.closed
    assert w.records_written == len(recs)
    assert w.bytes_written == os.path.getsize(path) == sum(len(r) + 16 for r in recs)
    assert _tf_read(path) == recs  # TFRecordDataset checks both CRCs


def test_writer_on_open_file_object(tmp_path):
    recs = _records(2, 20)
    buf = io.BytesIO()
    buf.write(b"")
    with TFRecordWriter(buf) as w:
        w.write_many(recs)
    assert not buf.closed  # caller's file stays open
    assert buf.getvalue() == frame_records(recs)
    (tmp_path / "f.tfrecords").write_bytes(buf.getvalue())
    assert _tf_read(tmp_path / "f.tfrecords") == recs
    with pytest.raises(ValueError):
        w.write(b"late")


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
