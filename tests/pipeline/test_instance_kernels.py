"""The compiled pairing kernels (pipeline/instance_kernels.py) against the Python reference
(instances.py with BERT_DATA_COMPILED=0): the same PairArrays, column for column and dtype for
dtype, and the caller's random.Random left in the same state (later draws depend on it), on many
random pools and the corner cases: one document, one-sentence documents, documents without
sentences, short targets always or never, targets per chunk, sentence order, tiny budgets that
truncate by hundreds of tokens (getrandbits over several words), MLM-only windows.

Each case runs the kernel compiled by numba and, uncompiled, as plain Python (so that the
kernel's logic is tested where numba is missing too)."""

import random

import numpy as np
import pytest

from bert_data import compiled
from bert_data.pipeline import instance_kernels
from bert_data.pipeline.instances import PairArrays, TokenPool, create_pairs, create_windows

COLUMNS = ("a_start", "a_length", "b_start", "b_length", "is_random_next")


@pytest.fixture(params=["compiled", "plain"])
def kernel_mode(request, monkeypatch):
    """Runs the kernels compiled, or their Python functions; returns ``reference``, which runs a
    function with the kernels off (the Python reference)."""
    kernels_on = [True]
    monkeypatch.setenv(compiled.DISABLE_VARIABLE, "1")
    if request.param == "compiled":
        pytest.importorskip("numba")
        assert instance_kernels.pair_ranges() is not None
    else:
        for name in ("pair_ranges", "window_ranges"):
            function = getattr(instance_kernels, name).python_function
            monkeypatch.setattr(instance_kernels, name, lambda function=function: function if kernels_on[0] else None)

    def reference(run):
        monkeypatch.setenv(compiled.DISABLE_VARIABLE, "0")
        kernels_on[0] = False
        try:
            assert instance_kernels.pair_ranges() is None and instance_kernels.window_ranges() is None
            return run()
        finally:
            monkeypatch.setenv(compiled.DISABLE_VARIABLE, "1")
            kernels_on[0] = True

    return reference


def make_documents(rng, n_docs, max_sentences=30, max_len=40, empty_share=0.0):
    return [[] if rng.random() < empty_share else
            [[rng.randint(1000, 9999) for _ in range(rng.randint(1, max_len))] for _ in range(rng.randint(1, max_sentences))]
            for _ in range(n_docs)]


def outcome(run, seed):
    """(pairs or the exception's type, the generator's state after)."""
    rng = random.Random(seed)
    try:
        result = run(rng)
    except IndexError as error:
        result = type(error)
    return result, rng.getstate()


def assert_same(kernel_outcome, reference_outcome):
    (kernel, kernel_state), (reference, reference_state) = kernel_outcome, reference_outcome
    assert kernel_state == reference_state
    if not isinstance(reference, PairArrays):
        assert kernel == reference
        return
    assert isinstance(kernel, PairArrays) and kernel.origin is None
    for column in COLUMNS:
        ours, theirs = getattr(kernel, column), getattr(reference, column)
        assert ours.dtype == theirs.dtype == np.int32, column
        np.testing.assert_array_equal(ours, theirs, err_msg=column)


def compare_pairs(reference, documents, seed, dupe_factor, max_num_tokens, short_seq_prob, short_min=2, **options):
    pool = TokenPool.from_documents(documents)
    run = lambda rng: create_pairs(pool, dupe_factor, max_num_tokens, short_seq_prob, short_min, rng, **options)  # noqa: E731
    expected = reference(lambda: outcome(run, seed))
    assert_same(outcome(run, seed), expected)
    return expected[0]


@pytest.mark.parametrize("case", range(40))
def test_random_pools_give_the_reference_pairs_and_state(kernel_mode, case):
    rng = random.Random(case)
    documents = make_documents(rng, rng.choice([1, 2, 3, 8, 25]), max_sentences=rng.choice([1, 3, 30]),
                               max_len=rng.choice([3, 40, 200]))
    pairs = compare_pairs(kernel_mode, documents, seed=case, dupe_factor=rng.randint(1, 3),
                          max_num_tokens=rng.choice([1, 2, 5, 29, 125, 509]),
                          short_seq_prob=rng.choice([0.0, 0.1, 0.5, 1.0]), short_min=rng.choice([1, 2, 5]),
                          per_chunk=rng.random() < 0.5, sentence_order=rng.random() < 0.5)
    assert len(pairs) > 0


@pytest.mark.parametrize("sentence_order", [False, True])
@pytest.mark.parametrize("per_chunk", [False, True])
@pytest.mark.parametrize("short_seq_prob", [0.0, 1.0])
def test_the_options_on_one_larger_pool(kernel_mode, sentence_order, per_chunk, short_seq_prob):
    documents = make_documents(random.Random(4), 60)
    pairs = compare_pairs(kernel_mode, documents, 17, 2, 125, short_seq_prob, per_chunk=per_chunk,
                          sentence_order=sentence_order)
    assert len(pairs) > 300 and pairs.is_random_next.any() and not pairs.is_random_next.all()


def test_one_document_pools_and_one_sentence_documents(kernel_mode):
    for seed, documents in enumerate([[[[5, 6, 7]]], [[[5] * 300]], [[[1, 2], [3], [4, 5, 6]]],
                                      [[[1]], [[2]], [[3, 4]]], make_documents(random.Random(8), 1, 50)]):
        for max_num_tokens in (1, 2, 4, 125):
            pairs = compare_pairs(kernel_mode, documents, seed, 3, max_num_tokens, 0.3)
            assert len(pairs) >= 3


def test_truncation_over_many_words_of_random_bits(kernel_mode):
    """Sentences of hundreds of tokens into a budget of a few: getrandbits(k) with k up to ~600."""
    documents = [[[7] * 640, [8] * 333], [[9] * 500], [[1] * 65, [2] * 31, [3] * 32, [4] * 33]]
    pairs = compare_pairs(kernel_mode, documents, 3, 4, 3, 0.0)
    assert (pairs.a_length + pairs.b_length <= 3).all()


def test_documents_without_sentences_give_the_same_pairs_or_the_same_error(kernel_mode):
    """The reference fails (IndexError) when a random next sentence is to come from a document
    without sentences; the kernel path then fails the same way, after the same draws."""
    outcomes = set()
    for seed in range(30):
        documents = make_documents(random.Random(seed), random.Random(seed).randint(1, 6), max_sentences=4,
                                   empty_share=0.4)
        pairs = compare_pairs(kernel_mode, documents, seed, 2, 20, 0.2)
        outcomes.add(isinstance(pairs, PairArrays))
    assert compare_pairs(kernel_mode, [[]], 1, 3, 20, 0.5) is not IndexError  # alone: no pairs, no error
    assert outcomes == {True, False}  # both kinds of pool were met


def test_an_empty_pool(kernel_mode):
    assert len(compare_pairs(kernel_mode, [], 0, 2, 20, 0.1)) == 0


@pytest.mark.parametrize("case", range(24))
def test_mlm_only_windows(kernel_mode, case):
    rng = random.Random(case)
    pool = TokenPool.from_documents(make_documents(rng, rng.choice([1, 4, 20]), max_sentences=rng.choice([1, 3, 30]),
                                                   max_len=rng.choice([2, 5, 60]), empty_share=0.2))
    arguments = (rng.randint(1, 3), rng.choice([8, 61, 125]), rng.choice([0, 3]), rng.choice([0.0, 0.1, 1.0]),
                 rng.choice([4, 6]), rng.random() < 0.5)
    run = lambda generator: create_windows(pool, *arguments, generator)  # noqa: E731
    assert_same(outcome(run, case), kernel_mode(lambda: outcome(run, case)))


def test_the_comparison_sees_a_difference(kernel_mode):
    """A kernel one draw off is caught (a comparison that cannot fail protects nothing)."""
    pool = TokenPool.from_documents(make_documents(random.Random(1), 10))
    run = lambda rng: create_pairs(pool, 1, 61, 0.1, 2, rng)  # noqa: E731
    expected = kernel_mode(lambda: outcome(run, 5))
    shifted = random.Random(5)
    shifted.random()
    with pytest.raises(AssertionError):
        assert_same((run(shifted), shifted.getstate()), expected)
