"""Stage 5: instances -> masked instances (the masked-LM objective), vectorised over a batch.

Google's ``create_masked_lm_predictions`` works on one instance at a time: it shuffles the
candidate words (every token but [CLS] and [SEP]; with whole-word masking a ``##`` piece joins
the word before it), then takes words in that order while they fit in
``num_to_predict = min(max_predictions_per_seq, max(1, round(len * masked_lm_prob)))``, skipping
a word that would overflow; each chosen token becomes [MASK] 80% of the time, stays itself
10%, and becomes a random token 10%.

Here the same choice is made for a whole batch of instances with numpy:

* a uniformly random shuffle of the words is an argsort of independent uniform keys, one per
  word (for single tokens, only the smallest ``max_predictions_per_seq`` keys matter, so an
  argpartition does);
* the greedy "take while it fits, skip what overflows" runs as one vectorised step per rank
  across all rows;
* the 80/10/10 choice is one uniform draw per chosen token (Google's two draws give the same
  probabilities).

With numba installed (``bert_data.compiled``), the choices and the replacement run as compiled
loops, one pass per row (:mod:`bert_data.pipeline.masking_kernels`),
on the same draws; the numpy code here stays the reference they are tested against.  The
default choice's ranges of rows, each with its own generator (``mask_token_ranges``), are
chosen and drawn in one compiled call (``masking_kernels.token_ranges_masked``).

SpanBERT's span masking (``MaskingSpec.span``) is :mod:`bert_data.pipeline.span_masking`'s, and
the 80/10/10 shares are ``MaskingSpec``'s (BERT's by default, settable for load-time masks).

Deliberate improvement over the reference: the random replacement token is drawn from the
ordinary vocabulary (``Vocab.ordinary_ids``), never [PAD], [CLS], [SEP], [MASK], [UNK] or
[unused*].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from .masking_kernels import (LARGEST_32, TIE, apply_masks, ngram_positions, single_token_positions,
                              single_token_positions_drawn_compiled, span_positions, token_ranges_masked_compiled,
                              whole_word_positions)
from .pcg64_states import advance_to, pcg64_state, pcg64_state_dict, pcg64_states, set_pcg64_states
from .span_masking import (MAX_SPAN_WORDS, choose_spans, span_draws, span_length_thresholds, span_lengths, spans_by_draws,
                           word_starts as starts_of_words)


@dataclass(frozen=True)
class MaskingSpec:
    """How masks are drawn: the one definition the writer (static masks) and the loaders
    (load-time masks) both build, the writer's from the options (``run/resolve.py``), a
    loader's from a dataset's manifest (``load/dynamic_masks.py``), and the one place these
    settings are checked.  Its values are always given: the defaults are the options' own
    (``config.default_of``), written nowhere else.

    ``special_ids``: token ids never chosen ([CLS], [SEP], and for MLM-only data the document
    separator).  ``span``: SpanBERT's span masking (:mod:`bert_data.pipeline.span_masking`).
    ``mask_token_share`` / ``random_token_share``: the shares of the chosen tokens that become
    [MASK] and a random ordinary token (the rest keep their token): BERT's 80/10/10.
    """

    masked_lm_prob: float
    max_predictions_per_seq: int
    whole_word: bool = False
    max_ngram_size: int = 1
    special_ids: Tuple[int, ...] = ()
    span: bool = False
    mask_token_share: float = 0.8
    random_token_share: float = 0.1

    def __post_init__(self):
        if isinstance(self.masked_lm_prob, bool) or not 0 < self.masked_lm_prob <= 1:
            raise ValueError(f"masked_lm_prob must be in (0, 1], got {self.masked_lm_prob}")
        if isinstance(self.max_predictions_per_seq, bool) or int(self.max_predictions_per_seq) < 1:
            raise ValueError(f"max_predictions_per_seq must be at least 1, got {self.max_predictions_per_seq}")
        if isinstance(self.max_ngram_size, bool) or not 1 <= int(self.max_ngram_size) <= 10:
            raise ValueError(f"max_ngram_size must be in [1, 10], got {self.max_ngram_size}")
        if self.span and int(self.max_ngram_size) > 1:
            raise ValueError("span masking and n-gram masking (max_ngram_size > 1) are two ways of choosing "
                             "spans: choose one")
        for name in ("mask_token_share", "random_token_share"):
            share = getattr(self, name)
            if isinstance(share, bool) or not 0 <= share <= 1:
                raise ValueError(f"{name} must be in [0, 1], got {share}")
        if self.mask_token_share + self.random_token_share > 1 + 1e-9:
            raise ValueError(f"mask_token_share + random_token_share must be at most 1 (the rest keep their "
                             f"token), got {self.mask_token_share} + {self.random_token_share}")
        object.__setattr__(self, "masked_lm_prob", float(self.masked_lm_prob))
        object.__setattr__(self, "max_predictions_per_seq", int(self.max_predictions_per_seq))
        object.__setattr__(self, "whole_word", bool(self.whole_word))
        object.__setattr__(self, "max_ngram_size", int(self.max_ngram_size))
        object.__setattr__(self, "special_ids", tuple(sorted({int(i) for i in self.special_ids})))
        object.__setattr__(self, "span", bool(self.span))
        object.__setattr__(self, "mask_token_share", float(self.mask_token_share))
        object.__setattr__(self, "random_token_share", float(self.random_token_share))

    @property
    def strategy(self) -> str:
        """How positions are chosen: "token", "whole_word", "ngram" or "span"."""
        if self.span:
            return "span"
        if self.max_ngram_size > 1:
            return "ngram"
        return "whole_word" if self.whole_word else "token"

    @classmethod
    def for_vocab(cls, vocab, document_separator_token: Optional[str] = None, *, stored_word_starts: bool = False,
                  **options) -> "MaskingSpec":
        """[CLS] and [SEP] of ``vocab`` are never masked, nor ``document_separator_token`` when
        given (it must be in the vocabulary).  ``options``: the fields (``masked_lm_prob``,
        ``max_predictions_per_seq``, ``whole_word``, ``max_ngram_size``, ``span``, the shares).
        ``stored_word_starts``: the rows come with their word starts (``mask_tokens``'
        ``word_starts``), so whole words need no marks in the pieces."""
        if uses_words(options) and getattr(vocab, "word_boundary", True) is None and not stored_word_starts:
            raise ValueError("whole-word, n-gram and span masking need word boundaries, and this tokenizer's pieces do "
                             "not show where a word starts (no ##, \u2581 or \u0120 mark): make the data with "
                             "--store_word_starts")
        special = {vocab.cls_id, vocab.sep_id}
        if document_separator_token is not None:
            separator = vocab.token_to_id.get(document_separator_token)
            if separator is None:
                raise ValueError(f"document_separator_token {document_separator_token!r} is not in the "
                                 f"vocabulary {vocab.path}")
            special.add(separator)
        return cls(special_ids=tuple(special), **options)


def uses_words(options) -> bool:
    """Whether masking options (``MaskingSpec``'s fields) choose whole words: whole-word, n-gram
    or span masking."""
    return bool(options.get("whole_word") or int(options.get("max_ngram_size") or 1) > 1 or options.get("span"))


def separator_token(mlm_only: bool, token: str) -> Optional[str]:
    """The document separator, never masked, in the layout that can hold one (MLM-only windows
    that cross documents; kept special for any MLM-only data so that one rule serves both)."""
    return token if mlm_only else None



def num_to_predict(lengths: np.ndarray, masked_lm_prob: float, max_predictions_per_seq: int) -> np.ndarray:
    # np.rint rounds half to even, exactly like Python's round() in the reference.
    wanted = np.rint(lengths.astype(np.float64) * masked_lm_prob).astype(np.int64)
    return np.minimum(max_predictions_per_seq, np.maximum(1, wanted))


def candidate_mask(input_ids: np.ndarray, lengths: np.ndarray, special_ids) -> np.ndarray:
    """Every real token except the special ones ([CLS], [SEP], a document separator): the
    reference's candidates.  Text never tokenizes to a special id, so for ``[CLS] A [SEP] B
    [SEP]`` this is every position but 0, len(A) + 1 and the last."""
    real = np.arange(input_ids.shape[1]) < np.asarray(lengths)[:, None]
    return real & ~np.isin(input_ids, np.asarray(list(special_ids)))


def _choose_single_tokens(candidates, budget, max_predictions, rng):
    """Chosen positions as a boolean matrix, when every candidate is a one-token word."""
    return _single_tokens_by_keys(candidates, budget, max_predictions, rng.random(candidates.shape))


def _single_tokens_by_keys(candidates, budget, max_predictions, keys):
    n, width = candidates.shape
    keys = np.array(keys, dtype=np.float64)  # (a copy: the caller's keys stay as drawn)
    keys[~candidates] = np.inf
    take = np.minimum(budget, candidates.sum(axis=1))  # (at most max_predictions: the budget is)
    # A row takes its ``take`` smallest keys: those up to the take-th smallest, found among the
    # max_predictions smallest (a partition, then a sort of those few).
    smallest = np.sort(np.partition(keys, max_predictions - 1, axis=1)[:, :max_predictions]
                       if max_predictions < width else keys, axis=1)
    threshold = np.where(take > 0, smallest[np.arange(n), np.maximum(take, 1) - 1], -np.inf)
    chosen = keys <= threshold[:, None]
    if (chosen.sum(axis=1) != take).any():  # equal keys at a threshold (about 2**-40 a row): rank them
        return _choose_single_tokens_ranked(keys, candidates, take, max_predictions)
    return chosen


def _choose_single_tokens_ranked(keys, candidates, take, max_predictions):
    n, width = candidates.shape
    if max_predictions < width:
        smallest = np.argpartition(keys, max_predictions - 1, axis=1)[:, :max_predictions]
    else:
        smallest = np.broadcast_to(np.arange(width), (n, width)).copy()
    order = np.argsort(np.take_along_axis(keys, smallest, axis=1), axis=1)
    ranked = np.take_along_axis(smallest, order, axis=1)
    taken = np.arange(ranked.shape[1]) < take[:, None]
    chosen = np.zeros((n, width), dtype=bool)
    rows = np.broadcast_to(np.arange(n)[:, None], ranked.shape)
    chosen[rows[taken], ranked[taken]] = True
    return chosen


def _choose_whole_words(candidates, input_ids, is_continuation, budget, rng):
    """Chosen positions when continuation pieces (``##`` pieces for WordPiece; see
    ``Vocab.word_boundary``) belong to the word before them."""
    return _whole_words_by_keys(candidates, input_ids, is_continuation, budget, rng.random(candidates.shape))


def _whole_words_by_keys(candidates, input_ids, is_continuation, budget, keys):
    n, width = candidates.shape
    word_of, n_words, word_length = _words(candidates, input_ids, is_continuation)
    rows, cols = np.nonzero(candidates)

    keys = np.array(keys, dtype=np.float64)  # (a copy: the caller's keys stay as drawn)
    keys[np.arange(width) >= n_words[:, None]] = np.inf
    order = np.argsort(keys, axis=1)
    ranked_length = np.take_along_axis(word_length, order, axis=1)

    taken = np.zeros((n, width), dtype=bool)
    count = np.zeros(n, dtype=np.int64)
    all_rows = np.arange(n)
    for rank in range(int(n_words.max(initial=0))):
        length = ranked_length[:, rank]
        fits = (length > 0) & (count + length <= budget)
        count += np.where(fits, length, 0)
        taken[all_rows, order[:, rank]] |= fits
    chosen = np.zeros((n, width), dtype=bool)
    chosen[rows, cols] = taken[rows, word_of[rows, cols]]
    return chosen


def _words(candidates, input_ids, is_continuation):
    """Whole words among the candidates: a ``##`` piece belongs to the candidate word before it.
    Returns (word index of each position, words per row, tokens per word)."""
    n, width = candidates.shape
    earlier_candidates = np.cumsum(candidates, axis=1) - candidates
    starts = candidates & ~(is_continuation[input_ids] & (earlier_candidates > 0))
    word_of = np.cumsum(starts, axis=1) - 1
    word_length = np.zeros((n, width), dtype=np.int64)
    rows, cols = np.nonzero(candidates)
    np.add.at(word_length, (rows, word_of[rows, cols]), 1)
    return word_of, starts.sum(axis=1), word_length


def _choose_ngrams(candidates, input_ids, is_continuation, budget, max_ngram_size, rng):
    """TF Model Garden's n-gram (span) masking, vectorised over rows: span starts (words) in
    random order; each span is n whole words, n drawn with weight 1/n among the sizes that fit
    before the row's last word; a span that would overflow the budget shrinks to the longest
    size that fits, one that still does not, or that touches a chosen word, is skipped."""
    keys = rng.random(candidates.shape)
    size_draws = rng.random(candidates.shape)
    return _ngrams_by_draws(candidates, input_ids, is_continuation, budget, max_ngram_size, keys, size_draws)


def _ngram_thresholds(largest: int) -> np.ndarray:
    """thresholds[m - 1, k]: P(size <= k + 1) when sizes 1..m are possible (1.0 past m)."""
    weights = 1.0 / np.arange(1, largest + 1)
    thresholds = np.ones((largest, largest))
    for m in range(1, largest + 1):
        thresholds[m - 1, :m] = np.cumsum(weights[:m]) / weights[:m].sum()
    return thresholds


def _ngrams_by_draws(candidates, input_ids, is_continuation, budget, max_ngram_size, keys, size_draws):
    n, width = candidates.shape
    word_of, n_words, word_length = _words(candidates, input_ids, is_continuation)
    ends = np.concatenate([np.zeros((n, 1), dtype=np.int64), np.cumsum(word_length, axis=1)], axis=1)
    largest = max_ngram_size
    thresholds = _ngram_thresholds(largest)

    keys = np.array(keys, dtype=np.float64)  # (a copy: the caller's keys stay as drawn)
    keys[np.arange(width) >= n_words[:, None]] = np.inf
    order = np.argsort(keys, axis=1)

    covered = np.zeros((n, width + largest), dtype=bool)  # by word; padded so spans never index out
    taken = np.zeros(n, dtype=np.int64)
    all_rows = np.arange(n)
    sizes = np.arange(1, largest + 1)
    for rank in range(int(n_words.max(initial=0))):
        start = order[:, rank]
        valid = rank < n_words
        possible = np.clip(n_words - start, 1, largest)
        drawn = 1 + (size_draws[:, rank][:, None] >= thresholds[possible - 1]).sum(axis=1)
        drawn = np.minimum(drawn, possible)
        # Tokens in spans of 1..N words from this start.
        span_end = np.minimum(start[:, None] + sizes[None, :], n_words[:, None])
        span_tokens = np.take_along_axis(ends, span_end, axis=1) - ends[all_rows, start][:, None]
        fits = (sizes[None, :] <= drawn[:, None]) & (taken[:, None] + span_tokens <= budget[:, None])
        size = np.where(fits.any(axis=1), largest - np.argmax(fits[:, ::-1], axis=1), 0)
        touching = np.zeros(n, dtype=bool)
        for k in range(largest):
            touching |= (k < size) & covered[all_rows, start + k]
        accept = valid & (size > 0) & ~touching & (taken < budget)
        for k in range(largest):
            mark = accept & (k < size)
            covered[all_rows[mark], start[mark] + k] = True
        taken += np.where(accept, span_tokens[all_rows, np.maximum(size, 1) - 1], 0)
    rows, cols = np.nonzero(candidates)
    chosen = np.zeros((n, width), dtype=bool)
    chosen[rows, cols] = covered[rows, word_of[rows, cols]]
    return chosen


# Stored word starts as marks: index 0 starts a word, index 1 continues one.
_STORED_MARKS = np.array([False, True])


@dataclass
class MaskedTokens:
    input_ids: np.ndarray  # (n, width) int32, with masks applied
    masked_lm_positions: np.ndarray  # (n, max_predictions_per_seq) int32, ascending, 0-padded
    masked_lm_ids: np.ndarray  # (n, max_predictions_per_seq) int32, original ids, 0-padded
    masked_lm_weights: np.ndarray  # (n, max_predictions_per_seq) float32, 1.0 then 0.0


def mask_tokens(input_ids: np.ndarray, lengths: np.ndarray, spec: MaskingSpec, vocab,
                rng: np.random.Generator, word_starts: Optional[np.ndarray] = None) -> MaskedTokens:
    """Mask a batch of token rows (the real tokens are the first ``lengths`` of each row) as
    ``spec`` says; ``vocab`` gives the [MASK] id, the ordinary tokens random replacements come
    from, and which tokens continue a word (``##`` pieces).  ``word_starts`` (``(n, L)``,
    nonzero where a token starts a word), when given, says it instead of the marks: the word
    starts the tokenizer recorded (``--store_word_starts``).

    The writer calls it for static masks, and the loaders for masks drawn at load time
    (``--disable_masking``): the same rules either way.
    """
    input_ids = np.asarray(input_ids)
    lengths = np.asarray(lengths)
    drawn = _token_ranges_compiled(input_ids, lengths, spec, vocab, [rng], [0, len(input_ids)]) \
        if input_ids.ndim == 2 else None  # (the replacement draws too in the choice's kernel)
    if drawn is not None:
        return _applied(input_ids, *drawn, spec, vocab)
    positions, n_chosen = _choice(input_ids, lengths, spec, vocab, rng, word_starts)
    return _replaced(input_ids, positions, n_chosen, spec, vocab, rng)


def mask_token_ranges(input_ids: np.ndarray, lengths: np.ndarray, spec: MaskingSpec, vocab,
                      rngs: Sequence[np.random.Generator], bounds: Sequence[int],
                      word_starts: Optional[np.ndarray] = None) -> MaskedTokens:
    """:func:`mask_tokens` of each range of rows ``bounds[k]:bounds[k + 1]`` with its own
    ``rngs[k]``, as one batch: each range's choice and replacement draws exactly as
    ``mask_tokens`` of those rows draws them from its generator (the same rows, the same
    bytes), the replacements applied to all rows at once (many small ranges pay the
    per-call costs once: an encode task's output shards, a few hundred rows each)."""
    input_ids = np.asarray(input_ids)
    lengths = np.asarray(lengths)
    drawn = _token_ranges_compiled(input_ids, lengths, spec, vocab, rngs, bounds)
    if drawn is not None:
        return _applied(input_ids, *drawn, spec, vocab)
    n, slots = input_ids.shape[0], spec.max_predictions_per_seq
    positions = np.zeros((n, slots), dtype=np.int32)
    n_chosen = np.zeros(n, dtype=np.int64)
    draw = np.empty((n, slots), dtype=np.float64)
    random_index = np.empty((n, slots), dtype=np.int64)
    for rng, a, b in zip(rngs, bounds[:-1], bounds[1:]):
        positions[a:b], n_chosen[a:b] = _choice(input_ids[a:b], lengths[a:b], spec, vocab, rng,
                                                None if word_starts is None else word_starts[a:b])
        draw[a:b], random_index[a:b] = _replacement_draws(b - a, slots, vocab, rng)
    return _applied(input_ids, positions, n_chosen, draw, random_index, spec, vocab)


def _token_ranges_compiled(input_ids, lengths, spec: MaskingSpec, vocab, rngs, bounds):
    """``mask_token_ranges``' loop of choices and replacement draws as one compiled call
    (``masking_kernels.token_ranges_masked``): (positions, counts, draws, random indices), the
    same as the loop's, each generator left where the loop leaves it; or None where the loop
    runs: kernels off, another strategy, a generator not PCG64 or given two ranges (the loop
    draws the second after the first), bounds past the rows or decreasing, an empty width, or
    more ordinary ids than 2**32 (numpy draws 64-bit integers then)."""
    masked = token_ranges_masked_compiled() if spec.strategy == "token" else None
    count = min(len(rngs), len(bounds) - 1)
    if masked is None or input_ids.ndim != 2 or input_ids.shape[1] == 0 or lengths.shape != input_ids.shape[:1]:
        return None
    n, width = input_ids.shape
    row_bounds = np.asarray(bounds[:count + 1], dtype=np.int64)
    if not (1 <= len(vocab.ordinary_ids) <= LARGEST_32 + 1 and count >= 1 and row_bounds[0] >= 0
            and row_bounds[-1] <= n and (np.diff(row_bounds) >= 0).all()
            and len({id(rng) for rng in rngs[:count]}) == count):
        return None
    generators = list(rngs[:count])
    states = pcg64_states(generators)
    if states is None:
        return None
    started = states.copy()  # (the keys of rows with equal keys are drawn again from here)
    slots = spec.max_predictions_per_seq
    is_special = np.zeros(max(spec.special_ids, default=-1) + 1, dtype=np.bool_)
    is_special[list(spec.special_ids)] = True
    budget = num_to_predict(lengths, spec.masked_lm_prob, slots)
    positions = np.zeros((n, slots), dtype=np.int32)
    n_chosen = np.zeros(n, dtype=np.int64)
    draw = np.zeros((n, slots), dtype=np.float64)
    random_index = np.zeros((n, slots), dtype=np.int64)
    masked(np.ascontiguousarray(input_ids, dtype=np.int32), np.ascontiguousarray(lengths, dtype=np.int64),
           is_special, row_bounds, states, budget, np.uint64(len(vocab.ordinary_ids) - 1), positions, n_chosen, draw,
           random_index)
    set_pcg64_states(generators, states)
    tied = np.flatnonzero(n_chosen == TIE)
    range_of = np.searchsorted(row_bounds, tied, side="right") - 1
    for k in np.unique(range_of) if len(tied) else ():
        rows = tied[range_of == k]
        first = row_bounds[k]
        keys = _ReplayedKeys(pcg64_state_dict(started[k]), (row_bounds[k + 1] - first, width))[rows - first]
        positions[rows], n_chosen[rows] = _packed(
            _single_tokens_by_keys(candidate_mask(input_ids[rows], lengths[rows], spec.special_ids), budget[rows],
                                   slots, keys), slots)
    return positions, n_chosen, draw, random_index


def _choice(input_ids, lengths, spec: MaskingSpec, vocab, rng, word_starts):
    """The positions chosen in each row (``(n, max_predictions_per_seq)``, ascending, 0-padded)
    and how many (the first draws of ``mask_tokens``)."""
    budget = num_to_predict(lengths, spec.masked_lm_prob, spec.max_predictions_per_seq)
    # The word choosers look up each id's mark; stored starts become a two-entry table of marks
    # looked up by "does not start a word".
    marked_ids, is_continuation = input_ids, vocab.is_continuation
    if word_starts is not None:
        marked_ids, is_continuation = (np.asarray(word_starts) == 0).astype(np.intp), _STORED_MARKS
    kernel = _CHOICE_KERNELS.get(spec.strategy, lambda: None)()
    if kernel is not None and input_ids.size:
        return _chosen_compiled(kernel, input_ids, marked_ids, is_continuation, lengths, spec, budget, rng)
    return _packed(_chosen(input_ids, marked_ids, is_continuation, lengths, spec, budget, rng),
                   spec.max_predictions_per_seq)


def _chosen(input_ids, marked_ids, is_continuation, lengths, spec: MaskingSpec, budget, rng) -> np.ndarray:
    """The reference's choice of positions, ``(n, width)`` bool (``is_continuation[marked_ids]``:
    the tokens that continue a word)."""
    candidates = candidate_mask(input_ids, lengths, spec.special_ids)
    if spec.span:
        return choose_spans(candidates, starts_of_words(marked_ids, candidates, is_continuation), budget, rng)
    if spec.max_ngram_size > 1:
        return _choose_ngrams(candidates, marked_ids, is_continuation, budget, spec.max_ngram_size, rng)
    if spec.whole_word:
        return _choose_whole_words(candidates, marked_ids, is_continuation, budget, rng)
    return _choose_single_tokens(candidates, budget, spec.max_predictions_per_seq, rng)


# The compiled choice of each strategy (getters: None when kernels are off).
_CHOICE_KERNELS = {"token": single_token_positions, "whole_word": whole_word_positions, "ngram": ngram_positions,
                   "span": span_positions}


def _chosen_compiled(kernel, input_ids, marked_ids, is_continuation, lengths, spec: MaskingSpec, budget, rng):
    """The choice of positions by a compiled kernel, one pass per row, from the reference's
    draws (the same draws, the same positions); the rows whose keys tie (the reference's
    unstable sorts order those) are chosen by the reference."""
    n, width = input_ids.shape
    positions = np.zeros((n, spec.max_predictions_per_seq), dtype=np.int32)
    n_chosen = np.zeros(n, dtype=np.int64)
    if spec.span:
        candidates = candidate_mask(input_ids, lengths, spec.special_ids)
        starts = starts_of_words(marked_ids, candidates, is_continuation)
        keys, length_draws = (np.ascontiguousarray(draws, dtype=np.float64) for draws in span_draws(candidates.shape, rng))
        kernel(candidates, starts, keys, length_draws, span_length_thresholds(), budget, MAX_SPAN_WORDS,
               positions, n_chosen)

        def reference(rows):
            return spans_by_draws(candidates[rows], starts[rows], budget[rows], keys[rows],
                                  span_lengths(length_draws[rows]))
    else:
        ids = np.ascontiguousarray(input_ids, dtype=np.int32)
        row_lengths = np.ascontiguousarray(lengths, dtype=np.int64).reshape(n)
        is_special = np.zeros(max(spec.special_ids, default=-1) + 1, dtype=np.bool_)
        is_special[list(spec.special_ids)] = True
        drawn = single_token_positions_drawn_compiled() if spec.strategy == "token" else None
        state = pcg64_state(rng) if drawn is not None else None
        if state is not None:  # the keys drawn in the kernel, as rng.random((n, width)) draws them
            keys = _ReplayedKeys(rng.bit_generator.state, (n, width))  # (rows with equal keys need them)
            drawn(ids, row_lengths, is_special, state, budget, positions, n_chosen)
            advance_to(rng, state)
        else:
            keys = np.ascontiguousarray(rng.random((n, width)), dtype=np.float64)
        if spec.strategy == "token":
            if state is None:
                kernel(ids, row_lengths, is_special, keys, budget, positions, n_chosen)

            def reference(rows):
                return _single_tokens_by_keys(candidate_mask(input_ids[rows], lengths[rows], spec.special_ids),
                                              budget[rows], spec.max_predictions_per_seq, keys[rows])
        else:
            marks = ids if marked_ids is input_ids else np.ascontiguousarray(marked_ids)
            continuation = np.ascontiguousarray(is_continuation, dtype=np.bool_)
            if spec.strategy == "whole_word":
                kernel(ids, marks, row_lengths, is_special, continuation, keys, budget, positions, n_chosen)

                def reference(rows):
                    return _whole_words_by_keys(candidate_mask(input_ids[rows], lengths[rows], spec.special_ids),
                                                marked_ids[rows], is_continuation, budget[rows], keys[rows])
            else:
                size_draws = np.ascontiguousarray(rng.random((n, width)), dtype=np.float64)
                kernel(ids, marks, row_lengths, is_special, continuation, keys, size_draws,
                       _ngram_thresholds(spec.max_ngram_size), budget, positions, n_chosen)

                def reference(rows):
                    return _ngrams_by_draws(candidate_mask(input_ids[rows], lengths[rows], spec.special_ids),
                                            marked_ids[rows], is_continuation, budget[rows], spec.max_ngram_size,
                                            keys[rows], size_draws[rows])
    tied = np.flatnonzero(n_chosen == TIE)
    if len(tied):
        positions[tied], n_chosen[tied] = _packed(reference(tied), spec.max_predictions_per_seq)
    return positions, n_chosen


class _ReplayedKeys:
    """The keys ``rng.random(shape)`` drew from a PCG64 ``state`` (its ``bit_generator.state``),
    drawn again when rows of them are asked for: only rows with equal keys are, which the
    reference chooses (about 2**-40 of the rows)."""

    def __init__(self, state: dict, shape: Tuple[int, int]):
        self.state, self.shape = state, shape

    def __getitem__(self, rows) -> np.ndarray:
        generator = np.random.Generator(np.random.PCG64())
        generator.bit_generator.state = self.state
        return generator.random(self.shape)[rows]


def _packed(chosen: np.ndarray, max_predictions_per_seq: int):
    """Chosen positions, ascending, packed to the left (nonzero lists them row by row, ascending;
    the budget keeps them within max_predictions_per_seq, and the first ones would be kept), and
    how many each row has."""
    n = chosen.shape[0]
    rows, columns = np.nonzero(chosen)
    n_chosen = np.bincount(rows, minlength=n)
    rank = np.arange(len(rows)) - np.repeat(np.cumsum(n_chosen) - n_chosen, n_chosen)
    slotted = rank < max_predictions_per_seq
    positions = np.zeros((n, max_predictions_per_seq), dtype=np.int32)
    positions[rows[slotted], rank[slotted]] = columns[slotted]
    return positions, n_chosen


def _replaced(input_ids, positions, n_chosen, spec: MaskingSpec, vocab, rng) -> MaskedTokens:
    """The chosen tokens replaced 80/10/10 (the draws after the choice's: one uniform per slot,
    then one random-token index per slot, as the reference draws them)."""
    n, max_predictions_per_seq = positions.shape
    draw, random_index = _replacement_draws(n, max_predictions_per_seq, vocab, rng)
    return _applied(input_ids, positions, n_chosen, draw, random_index, spec, vocab)


def _replacement_draws(n: int, max_predictions_per_seq: int, vocab, rng):
    """One uniform a slot, then one random-token index a slot (the reference's order)."""
    draw = rng.random((n, max_predictions_per_seq))
    return draw, rng.integers(0, len(vocab.ordinary_ids), size=(n, max_predictions_per_seq))


def _applied(input_ids, positions, n_chosen, draw, random_index, spec: MaskingSpec, vocab) -> MaskedTokens:
    """The chosen tokens replaced by their draws (``_replaced``)."""
    n, max_predictions_per_seq = positions.shape
    ordinary_ids = vocab.ordinary_ids
    apply = apply_masks()
    if apply is not None and input_ids.size:
        masked, labels, weights = apply(np.ascontiguousarray(input_ids), positions, n_chosen,
                                        np.ascontiguousarray(draw, dtype=np.float64),
                                        np.ascontiguousarray(random_index, dtype=np.int64),
                                        np.ascontiguousarray(ordinary_ids), int(vocab.mask_id), spec.mask_token_share,
                                        1.0 - spec.random_token_share)
        return MaskedTokens(masked, positions, labels, weights)

    weights = np.arange(max_predictions_per_seq) < n_chosen[:, None]
    original = np.take_along_axis(input_ids, positions, axis=1)
    labels = np.where(weights, original, 0).astype(np.int32)
    random_tokens = ordinary_ids[random_index]
    # [MASK] below mask_token_share, a random token from 1 - random_token_share (0.8 and 0.9 for
    # 80/10/10, exactly Google's thresholds), else the token itself.
    replacement = np.where(draw < spec.mask_token_share, vocab.mask_id,
                           np.where(draw < 1.0 - spec.random_token_share, original, random_tokens))

    masked = input_ids.astype(np.int32, copy=True)
    rows = np.broadcast_to(np.arange(n)[:, None], positions.shape)
    masked[rows[weights], positions[weights]] = replacement[weights]
    return MaskedTokens(masked, positions, labels, weights.astype(np.float32))
