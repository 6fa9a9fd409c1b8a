"""The compiled gather of ``[CLS] A [SEP] B [SEP]`` rows (``pipeline/gathering.py``) against the
numpy gather it replaces (``gather_instances`` with ``BERT_DATA_COMPILED=0``): the same rows."""

import numpy as np
import pytest

from bert_data.compiled import DISABLE_VARIABLE
from bert_data.pipeline.gathering import gather_rows
from bert_data.pipeline.instances import PairArrays, gather_instances

CLS, SEP = 101, 102


def _pairs(rng, n, pool_size, max_seq_length, single_segment):
    """Random pairs that fit the row, some filling it exactly, some with empty sides."""
    room = max_seq_length - (2 if single_segment else 3)
    a_length = rng.integers(0, room + 1, n)
    b_length = np.zeros(n, dtype=np.int64) if single_segment else rng.integers(0, room - a_length + 1)
    if not single_segment:
        b_length[: n // 4] = room - a_length[: n // 4]  # rows filled to the last column
    a_start = rng.integers(0, pool_size - a_length + 1)
    b_start = rng.integers(0, pool_size - b_length + 1)
    return PairArrays(a_start, a_length, b_start, b_length, rng.integers(0, 2, n))


@pytest.mark.parametrize("single_segment", [False, True])
@pytest.mark.parametrize("max_seq_length,dtype", [(3, np.int32), (8, np.uint16), (128, np.int32), (512, np.int64)])
def test_compiled_gather_gives_the_reference_rows(monkeypatch, tmp_path, single_segment, max_seq_length, dtype):
    rng = np.random.default_rng(max_seq_length + single_segment)
    pool = np.lib.format.open_memmap(tmp_path / "tokens.npy", mode="w+", dtype=dtype, shape=(3000,))
    pool[:] = rng.integers(0, 30522, pool.shape)
    pairs = _pairs(rng, 300, len(pool), max(max_seq_length, 3), single_segment)
    monkeypatch.setenv(DISABLE_VARIABLE, "1")
    assert gather_rows() is not None, "numba is a dev dependency: the kernel must run here"
    compiled = gather_instances(pool, pairs, max_seq_length, CLS, SEP, single_segment=single_segment)
    # The kernel's own masks and segment ids (not the properties' numpy) are what is compared below.
    assert compiled.gathered_mask is not None and (compiled.gathered_segment_ids is None) == single_segment
    monkeypatch.setenv(DISABLE_VARIABLE, "0")
    assert gather_rows() is None
    reference = gather_instances(pool, pairs, max_seq_length, CLS, SEP, single_segment=single_segment)
    assert reference.gathered_mask is None and reference.gathered_segment_ids is None
    assert compiled.input_ids.dtype == reference.input_ids.dtype == compiled.input_mask.dtype == np.int32
    assert compiled.segment_ids.dtype == np.int32
    np.testing.assert_array_equal(compiled.input_ids, reference.input_ids)
    np.testing.assert_array_equal(compiled.lengths, reference.lengths)
    np.testing.assert_array_equal(compiled.input_mask, reference.input_mask)
    np.testing.assert_array_equal(compiled.segment_ids, reference.segment_ids)
    del pool


def test_no_pairs_and_an_empty_pool(monkeypatch):
    monkeypatch.setenv(DISABLE_VARIABLE, "1")
    none = PairArrays(*(np.zeros(0, dtype=np.int64) for _ in range(5)))
    assert gather_instances(np.zeros(0, dtype=np.int32), none, 8, CLS, SEP).input_ids.shape == (0, 8)
    empty_sides = PairArrays(*(np.zeros(2, dtype=np.int64) for _ in range(5)))
    rows = gather_instances(np.zeros(0, dtype=np.int32), empty_sides, 4, CLS, SEP).input_ids
    np.testing.assert_array_equal(rows, [[CLS, SEP, SEP, 0]] * 2)
