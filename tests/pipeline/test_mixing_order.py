"""bert_data.pipeline.mixing: the seeded corpus order that units are cut from."""

import numpy as np
import pytest

from bert_data.pipeline.mixing import CorpusOrder


@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 17, 64, 1000, 4097])
def test_the_order_is_a_permutation(n):
    order = CorpusOrder(n, seed=7)
    documents = order.documents_at(np.arange(n))
    assert sorted(documents.tolist()) == list(range(n))


def test_units_partition_the_corpus_in_places_order():
    order = CorpusOrder(1003, seed=1)
    units = [order.unit_documents(u, 100) for u in range(order.n_units(100))]
    assert order.n_units(100) == 11 and [len(u) for u in units] == [100] * 10 + [3]
    assert np.array_equal(np.concatenate(units), order.documents_at(np.arange(1003)))


def test_the_order_depends_on_the_seed_only():
    a, b, c = (CorpusOrder(500, seed).documents_at(np.arange(500)) for seed in (3, 3, 4))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_listed_order_is_kept_without_shuffling():
    assert CorpusOrder(9, seed=3, shuffle=False).documents_at(np.arange(9)).tolist() == list(range(9))


def test_units_are_uniform_samples_of_the_corpus():
    """Each unit of 200 from 20,000 documents listed as 4 sources of 5,000: the count of every
    source in every unit lies within 5 standard deviations of its expectation (hypergeometric
    sd ~6.1; deterministic for the seed), and the first unit's documents are not clustered."""
    n, split_num = 20_000, 200
    order = CorpusOrder(n, seed=0)
    expected, sd = split_num / 4, np.sqrt(split_num * 0.25 * 0.75 * (n - split_num) / (n - 1))
    for unit in range(order.n_units(split_num)):
        sources = order.unit_documents(unit, split_num) // 5000
        counts = np.bincount(sources, minlength=4)
        assert np.all(np.abs(counts - expected) <= 5 * sd), (unit, counts)
    first = np.sort(order.unit_documents(0, split_num))
    assert np.diff(first).max() < 1000  # spread over the whole corpus, no long gap


def test_places_out_of_range_are_refused():
    with pytest.raises(IndexError):
        CorpusOrder(10, 0).documents_at([10])


@pytest.mark.parametrize("n,region_size", [(0, 3), (2, 3), (17, 3), (1000, 63), (4097, 7)])
def test_the_order_of_regions_is_a_permutation(n, region_size):
    documents = CorpusOrder(n, seed=7, region_size=region_size).documents_at(np.arange(n))
    assert sorted(documents.tolist()) == list(range(n))


def test_regions_are_runs_of_neighbours_and_the_rest_keeps_its_place():
    order = CorpusOrder(1003, seed=2, region_size=10)
    documents = order.documents_at(np.arange(1003))
    for region in range(100):
        run = documents[region * 10:(region + 1) * 10]
        assert run[0] % 10 == 0 and np.array_equal(run, np.arange(run[0], run[0] + 10))
    assert documents[1000:].tolist() == [1000, 1001, 1002]
    assert not np.array_equal(documents[:1000], np.arange(1000))


def test_a_unit_is_a_few_regions_from_all_over_the_corpus():
    """Units of 1,000 of 20,000 documents listed as 4 sources: each is about REGIONS_PER_UNIT
    runs of neighbours (read as that many ranges, whatever the documents' sizes), drawn from
    the whole corpus; together the units still partition it."""
    from bert_data.pipeline.mixing import REGIONS_PER_UNIT, region_size

    n, split_num = 20_000, 1000
    order = CorpusOrder(n, seed=0, region_size=region_size(split_num))
    units = [order.unit_documents(unit, split_num) for unit in range(order.n_units(split_num))]
    assert sorted(np.concatenate(units).tolist()) == list(range(n))
    sources_seen = []
    for documents in units:
        runs = 1 + int((np.diff(documents) != 1).sum())
        assert REGIONS_PER_UNIT <= runs <= REGIONS_PER_UNIT + 2, runs
        sources_seen.append(len(set((documents // 5000).tolist())))
    assert np.mean(sources_seen) > 3.5  # 16 regions of 4 sources: nearly every unit sees them all


@pytest.mark.parametrize("n, region_size, seed", [(1, 1, 0), (2, 1, 3), (17, 4, 1), (5, 10, 2), (1000, 7, [5, 1]),
                                                  (65_537, 1, [1, 2, 1, 0]), (200_000, 63, [9, 0])])
def test_the_compiled_order_is_the_reference_order(monkeypatch, n, region_size, seed):
    """The compiled walk (``_feistel_documents``, used once numba runs) gives the numpy
    reference's documents, place for place, for whole regions and the rest, in any order and
    shape of places asked for."""
    from bert_data import compiled

    order = CorpusOrder(n, seed, region_size=region_size)
    places = np.random.default_rng(n).permutation(n)
    asked = [places, places[::-1], places[: n - n // 2].reshape(-1, 1) if n > 1 else places,
             np.asfortranarray(np.resize(places, (3, 4)))]
    monkeypatch.setenv(compiled.DISABLE_VARIABLE, "0")
    reference = [order.documents_at(p) for p in asked]
    monkeypatch.setenv(compiled.DISABLE_VARIABLE, "1")
    from bert_data.pipeline import mixing

    assert mixing._feistel_documents() is not None  # (numba is a dev dependency: the kernel must run)
    assert compiled.started()  # (the order uses the kernel once numba runs)
    for p, expected in zip(asked, reference):
        got = order.documents_at(p)
        assert got.dtype == expected.dtype == np.int64 and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)
