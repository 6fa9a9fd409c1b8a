"""Word starts and SpanBERT's span masking, vectorised over a batch of token rows.

:func:`word_starts` says which tokens start a word: from the vocabulary's marks (``##``
continuation pieces for WordPiece, ``▁`` word starts for SentencePiece, ``Ġ`` for byte-level
BPE: ``Vocab.is_continuation`` holds the rule of each), or from a stored per-token column where
the marks cannot tell.  A word never crosses a token that cannot be masked ([CLS], [SEP], the
document separator, padding): the first candidate after one starts a word whatever its mark.

:func:`choose_spans` is SpanBERT's masking (Joshi et al. 2020, section 3.1): span lengths in
whole words drawn from a geometric distribution with ``p = 0.2`` truncated to 1..10 words (as
SpanBERT's ``PairWithSpanMaskingScheme`` draws them: the probabilities of 1..10 renormalised,
mean 3.8 words, the paper's figure), each span starting at a random word, until the prediction
budget is spent.  The generator (``MaskingSpec(span=True)``, ``--span_masking``) and the loaders
(``mask={"strategy": "span"}``) both call it through :func:`bert_data.pipeline.masking.mask_tokens`:
one algorithm.

Deliberate differences from SpanBERT's loop, which draws an anchor token and may overshoot the
budget by the rest of a word: span starts are the words in random order (as Google's whole-word
and TF Model Garden's n-gram masking take them), a span stops before a word already chosen, and
one that would overflow the budget shrinks to the longest run of whole words that fits (a start
whose first word does not fit is skipped), so a row never has more predictions than its budget.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

__all__ = ["SPAN_P", "MAX_SPAN_WORDS", "span_length_probabilities", "word_starts", "words_of", "choose_spans",
           "span_draws", "span_length_thresholds", "span_lengths", "spans_by_draws"]

# SpanBERT's defaults: geometric span lengths with p = 0.2, at most 10 words.
SPAN_P = 0.2
MAX_SPAN_WORDS = 10


def span_length_probabilities(p: float = SPAN_P, max_words: int = MAX_SPAN_WORDS) -> np.ndarray:
    """P(span of k words) for k = 1..max_words: geometric with parameter ``p``, renormalised."""
    weights = p * (1 - p) ** np.arange(max_words)
    return weights / weights.sum()


def word_starts(input_ids: np.ndarray, candidates: np.ndarray, is_continuation: Optional[np.ndarray] = None,
                stored: Optional[np.ndarray] = None) -> np.ndarray:
    """``(n, L)`` bool: the candidate tokens that start a word.

    ``is_continuation`` (``Vocab.is_continuation``, indexed by token id) gives the marks;
    ``stored`` (``(n, L)``, nonzero at word starts), when given, is used instead: word starts
    recorded by the tokenizer itself, for pieces that carry no mark.  Either way the first
    candidate after a non-candidate (a special token) starts a word."""
    candidates = np.asarray(candidates, dtype=bool)
    after_gap = np.ones_like(candidates)
    after_gap[:, 1:] = ~candidates[:, :-1]
    if stored is not None:
        marked = np.asarray(stored) != 0
    elif is_continuation is not None:
        marked = ~np.asarray(is_continuation)[np.asarray(input_ids)]
    else:
        marked = np.ones_like(candidates)  # no word information: every token is a word
    return candidates & (marked | after_gap)


def words_of(candidates: np.ndarray, starts: np.ndarray):
    """``(word_of, n_words, word_length)``: the word index of each candidate position (by row,
    from 0), the words per row, and the tokens of each word (``(n, L)``, 0 past the last)."""
    n, width = candidates.shape
    word_of = np.cumsum(starts, axis=1) - 1
    word_length = np.zeros((n, width), dtype=np.int64)
    rows, cols = np.nonzero(candidates)
    np.add.at(word_length, (rows, word_of[rows, cols]), 1)
    return word_of, starts.sum(axis=1), word_length


def choose_spans(candidates: np.ndarray, starts: np.ndarray, budget: np.ndarray, rng: np.random.Generator,
                 p: float = SPAN_P, max_words: int = MAX_SPAN_WORDS) -> np.ndarray:
    """The chosen positions (``(n, L)`` bool) of SpanBERT span masking (see the module's
    docstring): whole-word spans, at most ``budget[i]`` tokens in row ``i``.

    One vectorised step per rank of the shuffled word order, across all rows; the rows that
    have spent their budget or run out of words drop out, and the loop ends when none is left."""
    candidates = np.asarray(candidates, dtype=bool)
    keys, length_draws = span_draws(candidates.shape, rng)
    return spans_by_draws(candidates, starts, budget, keys, span_lengths(length_draws, p, max_words), max_words)


def span_draws(shape, rng: np.random.Generator):
    """The draws of :func:`choose_spans`, ``(n, L)`` each: the keys that order a row's words, then
    the uniforms that give the span length at each rank (:func:`span_lengths`)."""
    return rng.random(tuple(shape)), rng.random(tuple(shape))


def span_length_thresholds(p: float = SPAN_P, max_words: int = MAX_SPAN_WORDS) -> np.ndarray:
    """A uniform draw ``u`` gives a span of ``1 + #{k: thresholds[k] <= u}`` words."""
    return np.cumsum(span_length_probabilities(p, max_words))[:-1]


def span_lengths(length_draws: np.ndarray, p: float = SPAN_P, max_words: int = MAX_SPAN_WORDS) -> np.ndarray:
    """Span lengths in words from :func:`span_draws`' uniforms."""
    return 1 + np.searchsorted(span_length_thresholds(p, max_words), length_draws, side="right")


def spans_by_draws(candidates, starts, budget, keys, drawn, max_words: int = MAX_SPAN_WORDS) -> np.ndarray:
    """:func:`choose_spans` from its draws: the keys of :func:`span_draws` and the span lengths
    (:func:`span_lengths`)."""
    candidates = np.asarray(candidates, dtype=bool)
    n, width = candidates.shape
    budget = np.asarray(budget, dtype=np.int64)
    word_of, n_words, word_length = words_of(candidates, starts)
    # ends[i, k]: tokens in the first k words of row i.
    ends = np.concatenate([np.zeros((n, 1), dtype=np.int64), np.cumsum(word_length, axis=1)], axis=1)

    keys = np.array(keys, dtype=np.float64)  # (a copy: the caller's keys stay as drawn)
    keys[np.arange(width) >= n_words[:, None]] = np.inf
    order = np.argsort(keys, axis=1)

    covered = np.zeros((n, width + max_words + 1), dtype=bool)  # by word; padded: spans never index out
    taken = np.zeros(n, dtype=np.int64)
    sizes = np.arange(1, max_words + 1)
    live = np.arange(n)
    for rank in range(int(n_words.max(initial=0))):
        # Only the rows with budget and words left: late ranks touch few rows.
        live = live[(rank < n_words[live]) & (taken[live] < budget[live])]
        if not len(live):
            break
        start = order[live, rank]
        size = np.minimum(drawn[live, rank], n_words[live] - start)
        words = start[:, None] + sizes[None, :]  # one past each span size's last word
        span_tokens = ends[live[:, None], np.minimum(words, n_words[live][:, None])] - ends[live, start][:, None]
        free = ~np.logical_or.accumulate(covered[live[:, None], words - 1], axis=1)
        fits = (sizes[None, :] <= size[:, None]) & (taken[live][:, None] + span_tokens <= budget[live][:, None]) & free
        # fits is True for a prefix of the sizes: its length is the span taken.
        length = np.logical_and.accumulate(fits, axis=1).sum(axis=1)
        mark = sizes[None, :] <= length[:, None]
        covered[np.broadcast_to(live[:, None], mark.shape)[mark], (words - 1)[mark]] = True
        taken[live] += np.where(length > 0, span_tokens[np.arange(len(live)), np.maximum(length, 1) - 1], 0)
    rows, cols = np.nonzero(candidates)
    chosen = np.zeros((n, width), dtype=bool)
    chosen[rows, cols] = covered[rows, word_of[rows, cols]]
    return chosen
