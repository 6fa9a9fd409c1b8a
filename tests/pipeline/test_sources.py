"""Sources realized at document grain (``pipeline/sources.py``): repeat factors as whole repeats
plus a seeded subset, budgets and shares within one document of the request, the training list
a pass per copy."""

from __future__ import annotations

import numpy as np
import pytest

from bert_data.pipeline.documents.types import InputSpec, ReadingSpec
from bert_data.pipeline.sources import (SHARE, TOKENS, WEIGHT, SourceSpec, SourcesSpec, budget_copies, realize,
                                        training_list, weight_copies)
from bert_data.pipeline.streams import source_rng


def spec_of(*requests, total_tokens=None, seed=0) -> SourcesSpec:
    inputs = InputSpec((), (), "", (), 0.0, 0, ReadingSpec(False, None, None, "utf-8"))
    return SourcesSpec(tuple(SourceSpec(f"s{i}", inputs, kind, amount) for i, (kind, amount) in enumerate(requests)),
                       total_tokens, seed)


@pytest.mark.parametrize("weight, n, expected", [(2.0, 10, 20), (0.2, 10, 2), (1.5, 7, 7 + 4), (0.0, 5, 0),
                                                 (3.25, 8, 26)])
def test_a_weight_is_whole_repeats_and_a_seeded_subset(weight, n, expected):
    copies = weight_copies(n, weight, source_rng(0, 0))
    assert copies.sum() == expected
    assert set(copies.tolist()) <= {int(weight), int(weight) + 1}
    assert np.array_equal(copies, weight_copies(n, weight, source_rng(0, 0)))  # deterministic
    if 0 < weight % 1 and n > 4:
        assert not np.array_equal(copies, weight_copies(n, weight, source_rng(1, 0)))  # seeded


@pytest.mark.parametrize("budget", [1, 50, 999, 1000, 1001, 2500, 10_000])
def test_a_budget_is_realized_within_one_document(budget):
    rng = np.random.default_rng(7)
    tokens = rng.integers(1, 60, size=40)
    copies = budget_copies(tokens, budget, source_rng(3, 1))
    realized = int((copies * tokens).sum())
    assert abs(realized - budget) <= tokens.max()
    # Nearest: neither one more nor one less of the chosen documents would come closer by much.
    assert abs(realized - budget) <= max(tokens.max() // 2 + 1, 1) or realized == 0


def test_documents_without_tokens_are_never_counted():
    copies = budget_copies(np.array([0, 0, 10, 0]), 25, source_rng(0, 0))
    assert int((copies * np.array([0, 0, 10, 0])).sum()) in (20, 30)


def test_shares_against_the_sources_given_by_weight_and_budget():
    tokens = [np.full(20, 10), np.full(30, 10), np.full(50, 10)]  # 200, 300, 500 tokens
    spec = spec_of((WEIGHT, 1.0), (TOKENS, 600), (SHARE, 0.2))
    copies, requested = realize(spec, [np.arange(20), np.arange(30), np.arange(50)], tokens)
    fixed = 200 + 600
    assert requested[2] == pytest.approx(0.2 * fixed / 0.8)
    assert abs(int((copies[2] * tokens[2]).sum()) - requested[2]) <= 10
    assert int((copies[1] * tokens[1]).sum()) == 600


def test_shares_alone_make_the_largest_run_in_which_no_source_repeats():
    tokens = [np.full(10, 10), np.full(100, 10)]  # 100 and 1,000 tokens
    copies, requested = realize(spec_of((SHARE, 0.5), (SHARE, 0.5)), [np.arange(10), np.arange(100)], tokens)
    assert requested == [100.0, 100.0]  # the smaller source, once, sets the run
    assert int((copies[0] * tokens[0]).sum()) == 100 and int((copies[1] * tokens[1]).sum()) == 100


def test_shares_of_a_total():
    tokens = [np.full(10, 10), np.full(100, 10)]
    copies, requested = realize(spec_of((SHARE, 0.5), (SHARE, 0.25), total_tokens=400),
                                [np.arange(10), np.arange(100)], tokens)
    assert requested == [200.0, 100.0]
    assert int((copies[0] * tokens[0]).sum()) == 200  # two whole repeats


def test_the_training_list_holds_a_pass_per_copy():
    listed = training_list([np.array([3, 4, 5, 6])], [np.array([1, 3, 0, 2])])
    assert listed.tolist() == [3, 4, 6, 4, 6, 4]
    assert training_list([np.arange(5)], [np.ones(5, np.int64)]).tolist() == list(range(5))
