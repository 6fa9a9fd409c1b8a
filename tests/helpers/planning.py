"""The planner's view of a list of input entries, for the input tests."""

from __future__ import annotations

from bert_data.pipeline.documents.planner import plan_corpus
from bert_data.format.dataset_layout import TRAIN_CODE


def plan(entries, **options):
    """The corpus of ``entries``, all train."""
    return plan_corpus(entries, lambda label, position: TRAIN_CODE, **options)


def sources(corpus):
    """Every source of every slice of the planned ``corpus``, in order."""
    return [source for slice_ in corpus.slices for source in slice_.sources]
