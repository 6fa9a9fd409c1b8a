"""The units' plan (``planning.plan_units``), their places mapped a batch of units at a time, is
exactly the plan made a unit at a time (``plan_units_one_by_one``): documents, sizes and the
slices each unit needs, mixed or in corpus order, for unit sizes that do and do not divide the
splits, over slices that begin with a later part of a document."""

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
    split_docs = {TRAIN: np.setdiff1d(np.arange(n_docs), validation), VAL: validation}
    orders = {split: CorpusOrder(len(docs), [5, index], shuffle=shuffle, region_size=region_size(split_num))
              for index, (split, docs) in enumerate(split_docs.items())}
    expected = planning.plan_units_one_by_one(corpus, split_docs, orders, split_num)
    assert planning.plan_units(corpus, split_docs, orders, split_num) == expected
    monkeypatch.setattr(planning, "UNIT_BATCH_PLACES", 3 * split_num)  # batches of three units
    assert planning.plan_units(corpus, split_docs, orders, split_num) == expected
