"""The units' plan (``planning.plan_units``), their places mapped a batch of units at a time, is
exactly the plan made a unit at a time (``plan_units_one_by_one``): documents, sizes and the
slices each unit needs, mixed or in corpus order, for unit sizes that do and do not divide the
splits, over slices that begin with a later part of a document.  And each split's documents
(``planning.SplitDocuments``: a count, the other split's list, or its own) are the positions
``np.flatnonzero`` finds, whatever the share of validation documents."""

from __future__ import annotations

import numpy as np
import pytest

from bert_data.format.dataset_layout import TRAIN, VAL
from bert_data.pipeline.documents.types import CorpusPlan, Slice, Source
from bert_data.pipeline.mixing import CorpusOrder, region_size
from bert_data.run import planning


def _corpus(rng, n_docs):
    slices, doc = [], 0
    while doc < n_docs:
        part = bool(slices) and rng.random() < 0.2  # begins with a later part of the document before
        first = doc - 1 if part else doc
        sources = [Source("a.txt", "a.txt", 0, 1, continues=part)]
        slices.append(Slice(len(slices), first, sources))
        doc += int(rng.integers(1, 40))
    return CorpusPlan(slices, np.zeros(n_docs, np.uint8))


@pytest.mark.parametrize("split_num", [1, 7, 100, 1000])
@pytest.mark.parametrize("shuffle", [True, False])
def test_units_planned_in_batches_are_the_units_planned_one_by_one(monkeypatch, split_num, shuffle):
    rng = np.random.default_rng(split_num)
    n_docs = 2345
    corpus = _corpus(rng, n_docs)
    validation = np.sort(rng.choice(n_docs, 300, replace=False))
    codes = np.zeros(n_docs, np.uint8)
    codes[validation] = 1
    split_docs = {TRAIN: planning.SplitDocuments.of(codes, 0), VAL: planning.SplitDocuments.of(codes, 1)}
    assert split_docs[TRAIN].listed is None and split_docs[TRAIN].members_before_others is not None  # by rank
    orders = {split: CorpusOrder(len(docs), [5, index], shuffle=shuffle, region_size=region_size(split_num))
              for index, (split, docs) in enumerate(split_docs.items())}
    expected = planning.plan_units_one_by_one(corpus, split_docs, orders, split_num)
    assert planning.plan_units(corpus, split_docs, orders, split_num) == expected
    monkeypatch.setattr(planning, "UNIT_BATCH_PLACES", 3 * split_num)  # batches of three units
    assert planning.plan_units(corpus, split_docs, orders, split_num) == expected


@pytest.mark.parametrize("share", [0.0, 0.001, 0.3, 0.5, 0.7, 0.999, 1.0])
def test_each_split_is_the_documents_of_its_code(share):
    rng = np.random.default_rng(int(share * 1000))
    n_docs = 5000
    codes = (rng.random(n_docs) < share).astype(np.uint8)
    codes[:3] = [1, 1, 0]  # (runs of a split at the start)
    if share in (0.0, 1.0):
        codes[:] = share
    for code in (0, 1):
        expected = np.flatnonzero(codes == code)
        split = planning.SplitDocuments.of(codes, code)
        assert len(split) == len(expected)
        assert np.array_equal(split[np.arange(len(split))], expected)
        places = rng.integers(0, len(expected), 777) if len(expected) else np.zeros(0, np.int64)
        got = split[places]
        assert got.dtype == np.int64 and np.array_equal(got, expected[places])
        if len(expected) == n_docs:
            assert split.listed is None and split.members_before_others is None  # a count, no list
        elif 2 * len(expected) > n_docs:
            assert split.listed is None and len(split.members_before_others) == n_docs - len(expected)
        with pytest.raises(IndexError):
            split[np.asarray([len(expected)])]


def test_a_listed_split_keeps_its_order_and_repeats():
    """``--sources`` lists training documents once a copy (a pass per copy): not ascending."""
    listed = np.asarray([4, 9, 2, 4, 9], dtype=np.int32)
    split = planning.SplitDocuments.listing(listed)
    assert len(split) == 5 and split[np.asarray([0, 3, 2])].tolist() == [4, 4, 2]
    assert split[np.asarray([1])].dtype == np.int64
