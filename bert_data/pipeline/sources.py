"""A corpus of several sources (``--sources``), each asked for in one of three ways, realized at
document grain:

* a *weight* (a repeat factor such as 2.0 or 0.2): every training document of the source
  ``floor(weight)`` times, and a seeded subset of ``round(fraction * documents)`` once more;
* a *token budget*: whole repeats of the source while they fit, then a seeded subset of its
  documents whose tokens come closest to what is left (within one document of the request);
* a *share* of the run's tokens: a budget of ``share * run tokens``, where the run's tokens are
  the file's ``total_tokens``, or what the sources asked for by weight and budget divided by what
  the shares leave, or (every source a share) the largest run in which no source repeats.

What a source is realized as is a number of *copies* of each of its training documents (0, 1,
2...): a document's copies go into the training list one pass after the other (pass ``k``
holds the documents with more than ``k`` copies, in listed order), so the mixing deals copies
of one document to different units, and each copy gets its own pairs and masks, as
``--dupe_factor`` passes do.  Validation documents are made once, whatever the weight.

The subsets are drawn from a stream keyed on the run's seed and the source's place in the file
(``streams.source_rng``): the same request gives the same documents on every run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from .documents.types import InputSpec
from .streams import source_rng

WEIGHT, TOKENS, SHARE = "weight", "tokens", "share"
REQUESTS = (WEIGHT, TOKENS, SHARE)


@dataclass(frozen=True)
class SourceSpec:
    """One source: its name, its documents (``inputs``, as the command line's options would give
    them) and what is asked of it: ``request`` is ``WEIGHT``, ``TOKENS`` or ``SHARE``, ``amount``
    its value."""

    name: str
    inputs: InputSpec
    request: str
    amount: float


@dataclass(frozen=True)
class SourcesSpec:
    """The sources of a run, in the file's order (a source's index is its place there), the
    run's tokens when shares are given against a total (``total_tokens``), and the seed of the
    subsets."""

    sources: Tuple[SourceSpec, ...]
    total_tokens: Optional[int]
    seed: int

    @property
    def needs_token_counts(self) -> bool:
        """Budgets and shares are realized once every document's tokens are counted."""
        return any(source.request != WEIGHT for source in self.sources)

    @property
    def names(self) -> List[str]:
        return [source.name for source in self.sources]


def subset(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """``k`` of ``n`` documents, a seeded choice (their places in the source's list)."""
    return rng.permutation(n)[:k]


def weight_copies(n_docs: int, weight: float, rng: np.random.Generator) -> np.ndarray:
    """Copies of each of ``n_docs`` documents for a repeat factor: the whole part for all, one
    more for a seeded ``round(fraction * n_docs)`` of them."""
    whole = int(np.floor(weight))
    copies = np.full(n_docs, whole, dtype=np.int64)
    extra = int(round((weight - whole) * n_docs))
    copies[subset(n_docs, extra, rng)] += 1
    return copies


def budget_copies(doc_tokens: np.ndarray, budget: float, rng: np.random.Generator) -> np.ndarray:
    """Copies of each document so that their tokens come closest to ``budget``: whole repeats of
    all of them while they fit, then a seeded order of the documents taken up to where the
    running total is nearest the rest (so the total is within one document of the budget)."""
    doc_tokens = np.asarray(doc_tokens, dtype=np.int64)
    copies = np.zeros(len(doc_tokens), dtype=np.int64)
    total = int(doc_tokens.sum())
    if total <= 0 or budget <= 0:
        return copies
    whole = int(budget // total)
    copies += whole
    rest = budget - whole * total
    order = rng.permutation(len(doc_tokens))
    running = np.cumsum(doc_tokens[order])
    reach = int(np.searchsorted(running, rest, side="left"))  # taking reach + 1 documents reaches the rest
    if reach >= len(order):
        return copies
    below = int(running[reach - 1]) if reach else 0
    taken = reach + 1 if running[reach] - rest <= rest - below else reach
    copies[order[:taken]] += 1
    return copies


def realize(spec: SourcesSpec, train_docs: Sequence[np.ndarray], doc_tokens: Optional[Sequence[np.ndarray]]
            ) -> Tuple[List[np.ndarray], List[float]]:
    """Copies of each source's training documents (``train_docs[s]``: their places in the
    source, only their count matters here; ``doc_tokens[s]``: their tokens, needed for budgets
    and shares) and each source's requested tokens (NaN when asked by weight and tokens are not
    counted)."""
    copies: List[Optional[np.ndarray]] = [None] * len(spec.sources)
    requested = [float("nan")] * len(spec.sources)
    fixed_tokens = 0.0
    for index, source in enumerate(spec.sources):
        rng = source_rng(spec.seed, index)
        if source.request == WEIGHT:
            copies[index] = weight_copies(len(train_docs[index]), source.amount, rng)
            if doc_tokens is not None:
                requested[index] = source.amount * float(np.sum(doc_tokens[index]))
        elif source.request == TOKENS:
            copies[index] = budget_copies(doc_tokens[index], source.amount, rng)
            requested[index] = float(source.amount)
        if source.request != SHARE and doc_tokens is not None:
            fixed_tokens += float(np.sum(copies[index] * doc_tokens[index]))
    shares = [index for index, source in enumerate(spec.sources) if source.request == SHARE]
    if shares:
        run_tokens = run_tokens_for_shares(spec, doc_tokens, fixed_tokens, shares)
        for index in shares:
            requested[index] = spec.sources[index].amount * run_tokens
            copies[index] = budget_copies(doc_tokens[index], requested[index], source_rng(spec.seed, index))
    return copies, requested


def run_tokens_for_shares(spec: SourcesSpec, doc_tokens, fixed_tokens: float, shares: List[int]) -> float:
    """The run's tokens the shares are of: the file's ``total_tokens``; else, with sources asked
    by weight or budget, their tokens over what the shares leave; else the largest run in which
    no source repeats (each source's tokens over its share, the least of them)."""
    if spec.total_tokens is not None:
        return float(spec.total_tokens)
    share_sum = sum(spec.sources[index].amount for index in shares)
    if len(shares) < len(spec.sources):
        return fixed_tokens / (1.0 - share_sum)
    return min(float(np.sum(doc_tokens[index])) / spec.sources[index].amount for index in shares)


def training_list(positions: Sequence[np.ndarray], copies: Sequence[np.ndarray]) -> np.ndarray:
    """The training documents (corpus positions), a pass per copy: pass ``k`` holds, in listed
    order, every document with more than ``k`` copies."""
    positions = np.concatenate(list(positions)) if len(positions) else np.zeros(0, np.int64)
    copies = np.concatenate(list(copies)) if len(copies) else np.zeros(0, np.int64)
    most = int(copies.max()) if len(copies) else 0
    return np.concatenate([positions[copies > k] for k in range(most)] or [np.zeros(0, np.int64)]).astype(np.int64)
