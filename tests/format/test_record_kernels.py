"""The compiled walk over TFRecord framing and the compiled record copies
(``format/tfrecord/record_kernels.py``) against their references (what runs with
``BERT_DATA_COMPILED=0``): the same offsets and the same ValueError, word for word, on random
framed data, cut anywhere and with lengths corrupted; the same bytes copied."""

import struct

import numpy as np
import pytest

from bert_data.compiled import DISABLE_VARIABLE
from bert_data.format.tfrecord import record_kernels
from bert_data.format.tfrecord.records import frame_records
from bert_data.format.tfrecord.splicing import record_offsets, record_offsets_reference


@pytest.fixture
def kernels_on(monkeypatch):
    monkeypatch.setenv(DISABLE_VARIABLE, "1")
    assert record_kernels.frame_starts() is not None, "numba is a dev dependency: the kernels must run here"


def framed(rng, n):
    """``n`` random records of 0 to 300 bytes (a few empty), framed."""
    return frame_records([rng.bytes(int(length)) for length in rng.integers(0, 300, n) * (rng.random(n) > 0.05)])


def outcome(walk, data):
    """The offsets, or the error's words."""
    try:
        return walk(data).tolist()
    except ValueError as error:
        return str(error)


def test_the_walk_finds_every_frame_as_the_reference_does(kernels_on):
    rng = np.random.default_rng(0)
    for n in (0, 1, 2, 17, 500):
        data = framed(rng, n)
        offsets = record_offsets(data)
        assert offsets.dtype == np.int64 and len(offsets) == n + 1 and offsets[-1] == len(data)
        assert offsets.tolist() == record_offsets_reference(data).tolist()
        assert record_offsets(memoryview(data)).tolist() == offsets.tolist()


def test_cut_framing_gives_the_references_error(kernels_on):
    """Cut at every byte of the last few frames (a header cut, or a frame running past the end)."""
    rng = np.random.default_rng(1)
    data = framed(rng, 6)
    errors = set()
    for end in range(len(data) + 1):
        cut = data[:end]
        expected = outcome(record_offsets_reference, cut)
        assert outcome(record_offsets, cut) == expected, end
        errors.add(expected.split(" ")[1] if isinstance(expected, str) else "ok")
    assert errors == {"ok", "record", "last"}  # every kind of outcome was met


def test_corrupt_lengths_give_the_references_error(kernels_on):
    """A length header overwritten: past the end (up to 2**64 - 1, beyond int64), short (the
    next frame starts inside a record: its length is then whatever bytes lie there)."""
    rng = np.random.default_rng(2)
    data = framed(rng, 40)
    starts = record_offsets_reference(data)[:-1].tolist()
    true_length = struct.unpack_from("<Q", data, starts[0])[0]  # (unchanged: the frames found)
    lengths = [true_length, 0, 1, 11, 12, 15, 16, 1000, len(data), 2**31, 2**63 - 1, 2**63, 2**64 - 1]
    for _ in range(300):
        lengths.append(int(rng.integers(0, 2**63)) >> int(rng.integers(0, 63)))
    seen = set()
    for k, length in enumerate(lengths):
        at = starts[k % len(starts)]
        corrupt = bytearray(data)
        struct.pack_into("<Q", corrupt, at, length)
        corrupt = bytes(corrupt)
        expected = outcome(record_offsets_reference, corrupt)
        assert outcome(record_offsets, corrupt) == expected, (at, length)
        seen.add(type(expected))
    assert seen == {list, str}


def test_without_kernels_the_reference_runs(monkeypatch):
    monkeypatch.setenv(DISABLE_VARIABLE, "0")
    assert record_kernels.frame_starts() is None and record_kernels.copy_ranges() is None
    data = framed(np.random.default_rng(3), 30)
    assert record_offsets(data).tolist() == record_offsets_reference(data).tolist()
    assert outcome(record_offsets, data[:-1]) == outcome(record_offsets_reference, data[:-1])


def test_copy_ranges_moves_each_range_whole_to_its_place(kernels_on):
    rng = np.random.default_rng(4)
    source = np.frombuffer(rng.bytes(5000), dtype=np.uint8)
    cuts = np.sort(rng.choice(np.arange(1, 5000), 199, replace=False))
    begins, ends = np.concatenate([[0], cuts]), np.concatenate([cuts, [5000]])
    order = rng.permutation(200)
    lengths = ends[order] - begins[order]
    destinations = np.cumsum(lengths) - lengths + 7  # (at an offset into ``out``)
    out = np.zeros(5010, dtype=np.uint8)
    record_kernels.copy_ranges()(source, begins[order], ends[order], out, destinations)
    expected = b"".join(source[b:e].tobytes() for b, e in zip(begins[order], ends[order]))
    assert out[7:5007].tobytes() == expected and not out[:7].any() and not out[5007:].any()
    # Arrays with strides (not the shuffle's) are copied byte by byte, to the same bytes.
    strided = np.zeros(10020, dtype=np.uint8)
    record_kernels.copy_ranges()(source, begins[order], ends[order], strided[::2], destinations)
    assert strided[::2].tobytes() == out.tobytes() and not strided[1::2].any()


@pytest.mark.parametrize("n", [0, 1, 3, 8, 9, 200])
def test_copy_ranges_asks_ahead_and_still_copies_every_range(kernels_on, n):
    """The copies ask for each record ``_COPY_AHEAD`` records before copying it: fewer records
    than that, exactly that many, empty ranges and a source with strides (where asking does
    nothing) all give the bytes of a plain join."""
    rng = np.random.default_rng(n)
    wide = np.frombuffer(rng.bytes(8000), dtype=np.uint8)
    for source in (wide[:4000], wide[::2]):
        cuts = np.sort(rng.integers(0, 4000, 2 * n))  # (pairs of cuts: some ranges empty)
        begins, ends = cuts[0::2], cuts[1::2]
        lengths = ends - begins
        destinations = np.cumsum(lengths) - lengths
        out = np.zeros(int(lengths.sum()) + 1, dtype=np.uint8)
        record_kernels.copy_ranges()(source, begins, ends, out, destinations)
        expected = b"".join(source[b:e].tobytes() for b, e in zip(begins.tolist(), ends.tolist()))
        assert out[:-1].tobytes() == expected and out[-1] == 0


def test_the_walk_asks_ahead_past_short_data_and_to_the_last_frame(kernels_on):
    """The walk asks for the bytes ``_WALK_AHEAD`` ahead of it: data shorter than that, and
    longer, framed to the end or cut in the last frame, give the reference's offsets or error."""
    rng = np.random.default_rng(9)
    for n in (1, 5, 40, 3000):
        data = framed(rng, n)
        assert outcome(record_offsets, data) == outcome(record_offsets_reference, data)
        for cut in (1, 13, 17):
            assert outcome(record_offsets, data[:-cut]) == outcome(record_offsets_reference, data[:-cut])


@pytest.mark.parametrize("n", [0, 1, 8, 9, 300])
def test_copy_ranges_at_takes_each_record_from_its_own_source(kernels_on, n):
    """Records of many sources, by address, in one call (the shuffle of kept pieces): the bytes
    of a join of each record from its own source, empty records and empty sources included,
    compiled and as the loop runs uncompiled (``copy_from`` in Python)."""
    rng = np.random.default_rng(100 + n)
    sources = [np.frombuffer(rng.bytes(size), dtype=np.uint8) for size in (3000, 0, 1, 4000, 2500)]
    files = rng.choice([0, 2, 3, 4], n) if n else np.zeros(0, np.int64)
    begins, ends = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for i, f in enumerate(files.tolist()):
        a, b = np.sort(rng.integers(0, len(sources[f]) + 1, 2))
        begins[i], ends[i] = a, b
    lengths = ends - begins
    destinations = np.cumsum(lengths) - lengths + 5
    addresses = np.array([s.ctypes.data if s.size else 0 for s in sources], dtype=np.int64)
    expected = b"".join(sources[f][b:e].tobytes() for f, b, e in zip(files.tolist(), begins.tolist(), ends.tolist()))
    for copy in (record_kernels.copy_ranges_at(), record_kernels._copy_ranges_at.python_function):
        out = np.zeros(int(lengths.sum()) + 10, dtype=np.uint8)
        copy(addresses, files.astype(np.int64), begins, ends, out, destinations)
        assert out[5:-5].tobytes() == expected and not out[:5].any() and not out[-5:].any()
