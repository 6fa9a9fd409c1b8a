"""The compiled TFRecord encoder (``format/tfrecord/example_kernels.py``) against the matrix
encoder it replaces (the reference, what runs with ``BERT_DATA_COMPILED=0``): the same bytes, byte
for byte, on random batches of every feature layout, and framed as ``records.frame_records``
frames the reference's records (the ``crc32c`` package's CRCs)."""

import numpy as np
import pytest

from bert_data.compiled import DISABLE_VARIABLE
from bert_data.format.layout import FLOAT32, INT64, FeatureSpec, feature_specs
from bert_data.format.tfrecord import example_encoding, example_kernels
from bert_data.format.tfrecord.records import frame_records, masked_crc32c

LAYOUTS = {
    "nsp": dict(max_seq_length=128, max_predictions_per_seq=20),
    "mlm_only": dict(max_seq_length=64, max_predictions_per_seq=10, mlm_only=True),
    "packed": dict(max_seq_length=96, max_predictions_per_seq=18, max_sequences_per_pack=3),
    "packed_mlm_only": dict(max_seq_length=32, max_predictions_per_seq=6, mlm_only=True, max_sequences_per_pack=2),
    "provenance_v2": dict(max_seq_length=48, max_predictions_per_seq=7, provenance=True, v2_feature_names=True),
    "unmasked": dict(max_seq_length=40, max_predictions_per_seq=5, masked=False),
    "zero_predictions": dict(max_seq_length=16, max_predictions_per_seq=0),
    "one_token": dict(max_seq_length=1, max_predictions_per_seq=1),
}
# The largest id of each kind of vocabulary, and values at each varint length's edges.
VALUE_RANGES = {"vocab": 30522, "large_vocab": 250_002, "int32": 2**31 - 1}
EDGES = [0, 1, 127, 128, 16383, 16384, 2**21 - 1, 2**21, 2**28 - 1, 2**28, 2**31 - 1]


@pytest.fixture
def kernels_on(monkeypatch):
    monkeypatch.setenv(DISABLE_VARIABLE, "1")
    assert example_kernels.encode_records() is not None, "numba is a dev dependency: the kernels must run here"


def _column(spec, n, rng, value_range):
    """Rows of random lengths 0..length, zero past each row's length (as the generator pads)."""
    lengths = rng.integers(0, spec.length + 1, n)
    present = np.arange(spec.length) < lengths[:, None]
    if spec.dtype == FLOAT32:
        weights = rng.choice(np.array([1.0, 0.0, 0.5, -2.75, 1e-30], dtype=np.float32), (n, spec.length))
        return (weights * present).astype((np.float32, np.float64)[rng.integers(2)])
    if spec.name.endswith(("mask", "segment_ids", "input_type_ids", "labels", "weights")):
        values = rng.integers(0, 2, (n, spec.length))
    elif spec.name.endswith(("positions", "index")):
        values = rng.integers(0, max(2, spec.length * 4), (n, spec.length))
    else:
        values = rng.integers(0, value_range, (n, spec.length), dtype=np.int64)
        if values.size:
            values.flat[rng.integers(0, values.size, 8)] = rng.choice(EDGES, 8)
    values = values * present
    dtype = np.int64 if int(values.max(initial=0)) >= 2**31 else (np.int32, np.int64, np.uint32)[rng.integers(3)]
    return values.astype(dtype)


def _batch(layout, n, seed, value_range):
    rng = np.random.default_rng(seed)
    specs = feature_specs(**LAYOUTS[layout])
    return {spec.name: _column(spec, n, rng, value_range) for spec in specs}, specs


def _both(monkeypatch, encode, columns, specs):
    """``encode`` with the kernels, then with the reference."""
    monkeypatch.setenv(DISABLE_VARIABLE, "1")
    compiled = encode(columns, specs)
    monkeypatch.setenv(DISABLE_VARIABLE, "0")
    assert example_kernels.encode_records() is None
    reference = encode(columns, specs)
    monkeypatch.setenv(DISABLE_VARIABLE, "1")
    return compiled, reference


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("value_range", sorted(VALUE_RANGES))
def test_compiled_records_are_the_reference_bytes(monkeypatch, kernels_on, layout, value_range):
    columns, specs = _batch(layout, 57, seed=len(layout) * 31 + len(value_range), value_range=VALUE_RANGES[value_range])
    compiled, reference = _both(monkeypatch, example_encoding.encode_examples, columns, specs)
    assert len(compiled) == 57 and compiled == reference
    framed, framed_reference = _both(monkeypatch, example_encoding.encode_framed, columns, specs)
    assert framed == framed_reference == frame_records(reference)


def test_chunks_of_a_few_rows_give_the_same_bytes(monkeypatch, kernels_on):
    columns, specs = _batch("nsp", 300, seed=3, value_range=VALUE_RANGES["vocab"])
    whole = example_encoding.encode_framed(columns, specs)
    monkeypatch.setattr(example_encoding, "_CHUNK_BYTES", 1000)  # 64-row chunks
    assert example_encoding.encode_framed(columns, specs) == whole
    assert _both(monkeypatch, example_encoding.encode_framed, columns, specs) == (whole, whole)


def test_every_dtype_and_varint_length(monkeypatch, kernels_on):
    """Bools, small and unsigned integers, uint64 values of 10-byte varints, float16 weights,
    zero-length features, and a column whose values all fit in one byte next to one that needs 9."""
    rng = np.random.default_rng(11)
    n = 40
    wide = rng.integers(0, 2**63, (n, 5), dtype=np.uint64)
    wide[0] = [2**63, 2**64 - 1, 2**56, 2**49 - 1, 0]
    columns = {"flags": rng.integers(0, 2, (n, 7)).astype(bool), "small": rng.integers(0, 256, (n, 3)).astype(np.uint8),
               "short": rng.integers(0, 2**16, (n, 4)).astype(np.uint16), "wide": wide,
               "half": rng.random((n, 3)).astype(np.float16), "none": np.zeros((n, 0), dtype=np.int64),
               "no_weights": np.zeros((n, 0), dtype=np.float32), "label": rng.integers(0, 2, n)}
    specs = [FeatureSpec("flags", INT64, 7), FeatureSpec("small", INT64, 3), FeatureSpec("short", INT64, 4),
             FeatureSpec("wide", INT64, 5), FeatureSpec("half", FLOAT32, 3), FeatureSpec("none", INT64, 0),
             FeatureSpec("no_weights", FLOAT32, 0), FeatureSpec("a feature name of more than 127 bytes " * 4, INT64, 1)]
    columns[specs[-1].name] = columns.pop("label")
    compiled, reference = _both(monkeypatch, example_encoding.encode_examples, columns, specs)
    assert compiled == reference
    assert _both(monkeypatch, example_encoding.encode_framed, columns, specs) == (frame_records(reference),) * 2


def test_records_longer_than_two_byte_lengths(monkeypatch, kernels_on):
    """A record of over 2**14 bytes (3-byte lengths in every nested message) and one of a single
    feature of a few bytes, side by side."""
    rng = np.random.default_rng(5)
    columns = {"ids": rng.integers(0, 2**31 - 1, (3, 5000)), "weights": rng.random((3, 2000)).astype(np.float32)}
    columns["ids"][1] = 0
    columns["weights"][1] = 0
    specs = [FeatureSpec("ids", INT64, 5000), FeatureSpec("weights", FLOAT32, 2000)]
    compiled, reference = _both(monkeypatch, example_encoding.encode_framed, columns, specs)
    assert compiled == reference


def test_crc_kernel_is_crc32c(kernels_on):
    """The slicing-by-8 CRC-32C of the frames against the ``crc32c`` package, for records of every
    length up to a few words (the 8-byte steps and the byte-by-byte tail): float lists of 0..17
    values, whose bytes are random."""
    rng = np.random.default_rng(2)
    for length in range(18):
        columns = {"x": rng.integers(0, 2**32, (3, length), dtype=np.uint32).view(np.float32)}
        specs = [FeatureSpec("x", FLOAT32, length)]
        framed = example_encoding.encode_framed(columns, specs)
        assert framed == frame_records(example_encoding.encode_examples(columns, specs))
        for record in example_encoding.encode_examples(columns, specs):
            header = len(record).to_bytes(8, "little")
            at = framed.index(header + masked_crc32c(header).to_bytes(4, "little") + record)
            assert framed[at + 12 + len(record):at + 16 + len(record)] == masked_crc32c(record).to_bytes(4, "little")


def test_negative_values_are_refused_by_both_encoders(monkeypatch, kernels_on):
    """The compiled encoder finds a negative value in the pass it makes anyway (no ``min`` of
    each column first) and refuses it with the reference's message, whatever its dtype."""
    for dtype in (np.int8, np.int16, np.int32, np.int64):
        ids = np.zeros((4, 3), dtype=dtype)
        ids[2, 1] = -1
        columns = {"ok": np.ones((4, 2), dtype=np.int64), "ids": ids}
        specs = [FeatureSpec("ok", INT64, 2), FeatureSpec("ids", INT64, 3)]
        for setting in ("1", "0"):
            monkeypatch.setenv(DISABLE_VARIABLE, setting)
            with pytest.raises(ValueError, match=r"feature 'ids': negative values are not supported \(min -1\)"):
                example_encoding.encode_framed(columns, specs)


def test_the_writer_hands_on_the_encoder_buffer(monkeypatch, kernels_on):
    """``encode_framed_array`` (what the TFRecord writer gives the piece file) is the bytes of
    ``encode_framed``, with no copy of the one chunk's buffer; several chunks are joined once."""
    columns, specs = _batch("nsp", 300, seed=8, value_range=VALUE_RANGES["vocab"])
    array = example_encoding.encode_framed_array(columns, specs)
    assert array.dtype == np.uint8 and array.ndim == 1
    assert array.tobytes() == example_encoding.encode_framed(columns, specs)
    monkeypatch.setattr(example_encoding, "_CHUNK_BYTES", 1000)
    assert example_encoding.encode_framed_array(columns, specs).tobytes() == array.tobytes()


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_crc_instruction_and_slicing_by_8_write_the_same_records(monkeypatch, kernels_on, layout):
    """The kernel that runs (``frame_crc_tables()``: None, the CPU's CRC-32C instruction here)
    and the one forced to slicing-by-8 (the tables passed) frame every layout's records byte for
    byte alike, and as ``records.frame_records`` (the ``crc32c`` package) frames the reference's."""
    columns, specs = _batch(layout, 61, seed=len(layout) * 7, value_range=VALUE_RANGES["large_vocab"])
    assert example_kernels.frame_crc_tables() is None
    chosen = example_encoding.encode_framed(columns, specs)
    monkeypatch.setattr(example_kernels, "frame_crc_tables", example_kernels.crc32c_tables)
    software = example_encoding.encode_framed(columns, specs)
    signatures = example_kernels.encode_records().signatures
    assert {str(signature[7]) for signature in signatures} >= {"none", "array(uint32, 2d, C)"}
    monkeypatch.setenv(DISABLE_VARIABLE, "0")
    assert chosen == software == frame_records(example_encoding.encode_examples(columns, specs))


VARINT_EDGES = [0, 1, 2**7 - 1, 2**7, 2**14 - 1, 2**14, 2**21 - 1, 2**21, 2**28 - 1, 2**28, 2**31 - 1, 2**31]


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64])
def test_each_path_of_the_row_writer_at_varint_edges(monkeypatch, kernels_on, dtype):
    """The compiled encoder's paths against the reference, for every integer width: values on
    each side of every varint length (the one-word path below 2**21 and the loop above it), rows
    all below 128 (copied or narrowed 8 values a word) of widths 1..19 (the words and the tail),
    empty rows, repeated and changing payload lengths (the kept bytes before a feature's values),
    a name too long to keep, and a record ending in an empty list (the words stored past the
    last byte: the buffer's slack), framed and not."""
    rng = np.random.default_rng(np.dtype(dtype).itemsize * 7 + "iu".index(np.dtype(dtype).kind))
    limit = np.iinfo(dtype).max
    edges = np.array([v for v in VARINT_EDGES if v <= limit], dtype=dtype)
    n = 23
    columns, specs = {}, []
    for width in (1, 2, 7, 8, 9, 16, 19):
        columns[f"edges_{width}"] = rng.choice(edges, (n, width)).astype(dtype)
        columns[f"small_{width}"] = rng.integers(0, 128, (n, width)).astype(dtype)
        specs += [FeatureSpec(f"edges_{width}", INT64, width), FeatureSpec(f"small_{width}", INT64, width)]
    columns["small_0"] = np.zeros((n, 0), dtype=dtype)
    columns["same"] = np.ones((n, 5), dtype=dtype)  # the same payload length in every record
    columns["same"][::4] = 200  # ... but every fourth
    columns["a long feature name, longer than the bytes kept before a feature's values"] = (
        rng.choice(edges, (n, 3)).astype(dtype))
    columns["zeros_last"] = np.zeros((n, 0), dtype=dtype)
    specs += [FeatureSpec("small_0", INT64, 0), FeatureSpec("same", INT64, 5),
              FeatureSpec("a long feature name, longer than the bytes kept before a feature's values", INT64, 3),
              FeatureSpec("zeros_last", INT64, 0)]
    for encode in (example_encoding.encode_examples, example_encoding.encode_framed):
        for rows in (slice(None), slice(0, 1)):
            batch = {name: column[rows] for name, column in columns.items()}
            compiled, reference = _both(monkeypatch, encode, batch, specs)
            assert compiled == reference


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_a_negative_value_next_to_large_ones_is_refused(monkeypatch, kernels_on, dtype):
    """A negative value in a row whose other values take the one-word path, or the loop: refused by
    both encoders (the kernel's sign check reads every value's bits)."""
    for other in [v for v in (5, 2**7 - 1, 2**14, 2**21, 2**31) if v <= np.iinfo(dtype).max]:
        ids = np.full((3, 4), other, dtype=dtype)
        ids[1, 3] = -7
        specs = [FeatureSpec("ids", INT64, 4)]
        for setting in ("1", "0"):
            monkeypatch.setenv(DISABLE_VARIABLE, setting)
            with pytest.raises(ValueError, match=r"feature 'ids': negative values are not supported \(min -7\)"):
                example_encoding.encode_framed({"ids": ids}, specs)
