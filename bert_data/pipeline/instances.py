"""Stage 4: tokenized documents -> next-sentence-prediction (or ALBERT sentence-order) pairs.

This follows ``create_instances_from_document`` of Google's ``create_pretraining_data.py``
step for step (target length drawn once per document, chunk accumulation, random split point,
random-next with unused sentences put back, truncation of the longer side from a random end).

It never touches a token.  A and B are always contiguous runs of one document's tokens (whole
sentences, then trimmed at the ends), so a pair is four numbers: where A and B start in the
pool's token array and how long they are.  The pairing loop works on sentence boundaries
only, and the next stage gathers the ids of a batch of pairs with one numpy indexing step.

One implementation choice keeps the distribution of Google's algorithm while saving time:
truncation removes the same *number* of tokens from each side as Google's one-at-a-time loop
(that number depends on the lengths only), and splits each side's removals between front and
back with one Binomial(n, 1/2) draw -- the distribution of Google's n coin flips.
"""

from __future__ import annotations

import random
from bisect import bisect_left
from collections import abc
from dataclasses import dataclass, field
from itertools import chain
from typing import List, Optional, Sequence, Tuple

import numpy as np

from . import instance_kernels
from .python_random import restore, state_of


@dataclass(frozen=True)
class InstanceSpec:
    """How a unit's token pool becomes instances: Google's next-sentence pairs, ALBERT's
    sentence-order pairs, or MLM-only windows (Cerebras).  Resolved once from the options
    (``run/resolve.py``), with the values the options leave to defaults made explicit.

    ``short_min``: the shortest target length (``--min_short_seq_length``, or its default);
    ``window_overlap``: tokens an MLM-only window shares with the one before;
    ``separator_id``: the token between documents of MLM-only windows that cross documents
    (``--document_separator_token``), None otherwise."""

    max_seq_length: int
    mlm_only: bool
    dupe_factor: int
    short_seq_prob: float
    short_min: int
    window_overlap: int
    per_chunk: bool  # --short_seq_draw chunk: a target length drawn per chunk, not per document
    sentence_order: bool
    separator_id: Optional[int]

    @property
    def max_num_tokens(self) -> int:
        """Room for tokens in an instance: ``[CLS] A [SEP] B [SEP]`` takes three special tokens;
        an MLM-only ``[CLS] tokens [SEP]`` two."""
        return self.max_seq_length - (2 if self.mlm_only else 3)

    def lengths(self, pairs: "PairArrays") -> np.ndarray:
        """Tokens of each instance, with its [CLS] and [SEP]s."""
        if self.mlm_only:
            return pairs.a_length.astype(np.int64) + 2
        return pairs.a_length.astype(np.int64) + pairs.b_length + 3


def create_instances(pool: "TokenPool", passes: int, spec: InstanceSpec, rng: random.Random) -> "PairArrays":
    """A pool's instances as token ranges: ``passes`` passes of windows (MLM-only) or pairs."""
    if spec.mlm_only:
        return create_windows(pool, passes, spec.max_num_tokens, spec.window_overlap, spec.short_seq_prob,
                              spec.short_min, spec.separator_id is not None, rng)
    return create_pairs(pool, passes, spec.max_num_tokens, spec.short_seq_prob, spec.short_min, rng,
                        per_chunk=spec.per_chunk, sentence_order=spec.sentence_order)


@dataclass
class TokenPool:
    """The documents that can pair with each other (one split of one unit), end to end.

    ``bounds[d]`` lists where each sentence of document ``d`` starts in ``tokens``, followed by
    where its last sentence ends.
    """

    tokens: np.ndarray
    bounds: List[List[int]]
    _flat: Optional[Tuple[np.ndarray, np.ndarray]] = field(default=None, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.bounds)

    @classmethod
    def from_flat(cls, tokens: np.ndarray, flat: np.ndarray, offsets: np.ndarray) -> "TokenPool":
        """A pool from its bounds in the kernels' form (``flat_bounds``); ``bounds`` made as lists
        only if asked for (the kernels never do: a unit of short documents has thousands)."""
        pool = cls(tokens, _FlatBounds(flat, offsets))
        pool._flat = (flat, offsets)
        return pool

    def flat_bounds(self) -> Tuple[np.ndarray, np.ndarray]:
        """``bounds`` end to end as one int64 array, and where each document's begin in it (one
        offset a document, then the end): the kernels' form, built once per pool."""
        if self._flat is None:
            sizes = np.fromiter(map(len, self.bounds), np.int64, len(self.bounds))
            offsets = np.zeros(len(sizes) + 1, np.int64)
            np.cumsum(sizes, out=offsets[1:])
            flat = np.fromiter(chain.from_iterable(self.bounds), np.int64, int(offsets[-1]))
            self._flat = (flat, offsets)
        return self._flat

    @classmethod
    def from_documents(cls, documents: Sequence[Sequence[Sequence[int]]], dtype=np.int32) -> "TokenPool":
        """From lists of sentences of ids (tests and small inputs)."""
        flat, bounds, position = [], [], 0
        for document in documents:
            starts = [position]
            for sentence in document:
                flat.extend(sentence)
                position += len(sentence)
                starts.append(position)
            bounds.append(starts)
        return cls(np.asarray(flat, dtype=dtype), bounds)


class _FlatBounds(abc.Sequence):
    """``TokenPool.bounds`` of a pool made from flat bounds: its length at once, its lists made
    (all of them, once) when a document's are first asked for."""

    def __init__(self, flat: np.ndarray, offsets: np.ndarray):
        self._flat, self._offsets, self._lists = flat, offsets, None

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def _made(self) -> List[List[int]]:
        if self._lists is None:
            values, at = self._flat.tolist(), self._offsets.tolist()
            self._lists = [values[a:b] for a, b in zip(at, at[1:])]
        return self._lists

    def __getitem__(self, index):
        return self._made()[index]

    def __iter__(self):
        return iter(self._made())

    def __eq__(self, other) -> bool:
        return list(self) == list(other) if isinstance(other, abc.Sequence) else NotImplemented

    __hash__ = None


@dataclass
class PairBatch:
    """Pairs as token ranges into a TokenPool."""

    a_start: List[int] = field(default_factory=list)
    a_length: List[int] = field(default_factory=list)
    b_start: List[int] = field(default_factory=list)
    b_length: List[int] = field(default_factory=list)
    is_random_next: List[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.a_start)

    def arrays(self) -> "PairArrays":
        # int32: a unit's pool never nears 2**31 tokens, and pairs travel between processes.
        return PairArrays(*(np.asarray(column, dtype=np.int32) for column in (
            self.a_start, self.a_length, self.b_start, self.b_length, self.is_random_next)))


@dataclass
class PairArrays:
    a_start: np.ndarray
    a_length: np.ndarray
    b_start: np.ndarray
    b_length: np.ndarray
    is_random_next: np.ndarray
    # Each instance's document's origin, (source index, place in its source's listing), when the
    # run keeps it (sources, --record_provenance): the document segment A comes from.
    origin: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return len(self.a_start)

    def take(self, rows) -> "PairArrays":
        return PairArrays(self.a_start[rows], self.a_length[rows], self.b_start[rows], self.b_length[rows],
                          self.is_random_next[rows], None if self.origin is None else self.origin[rows])

    def with_origins(self, pool: "TokenPool", doc_origins: np.ndarray) -> "PairArrays":
        """The pairs with each one's origin: that of the pool document segment A starts in
        (``doc_origins``: a row a document of the pool, in the pool's order)."""
        starts = np.asarray([bounds[0] for bounds in pool.bounds], dtype=np.int64)
        documents = np.searchsorted(starts, self.a_start, side="right") - 1
        return PairArrays(self.a_start, self.a_length, self.b_start, self.b_length, self.is_random_next,
                          np.asarray(doc_origins, dtype=np.int64)[documents])


def truncation_counts(len_a: int, len_b: int, max_num_tokens: int):
    """How many tokens Google's truncate_seq_pair removes from A and from B.

    Its loop removes one token at a time from the longer side (from B when they are equal);
    the counts depend on the lengths only.
    """
    excess = len_a + len_b - max_num_tokens
    if excess <= 0:
        return 0, 0
    remove_a = remove_b = 0
    if len_a > len_b:
        step = min(excess, len_a - len_b)
        remove_a, excess = step, excess - step
    elif len_b > len_a:
        step = min(excess, len_b - len_a)
        remove_b, excess = step, excess - step
    # Equal lengths from here: B loses first, then A, alternately.
    remove_b += (excess + 1) // 2
    remove_a += excess // 2
    return remove_a, remove_b


# The number of 1 bits of an int (int.bit_count from Python 3.10, which this package does not require).
_ones = getattr(int, "bit_count", None) or (lambda value: bin(value).count("1"))


def add_pairs_from_document(
    pool: TokenPool,
    document_index: int,
    max_num_tokens: int,
    short_seq_prob: float,
    min_short_seq_length: int,
    rng: random.Random,
    out: PairBatch,
    per_chunk: bool = False,
    sentence_order: bool = False,
) -> None:
    """Append the pairs of one document to ``out`` (Google's create_instances_from_document).

    ``per_chunk``: draw the target length anew for every chunk instead of once per document,
    so that about ``short_seq_prob`` of the instances are short whatever the document sizes
    (with Google's draw a long document that draws a short target becomes many short pairs).

    The hot loop of the generator: uniform integers are drawn as ``int(random() * n)``
    (``randint`` costs four Python calls per draw; the bias of the float draw is below 2**-32).

    ``sentence_order``: ALBERT's sentence-order prediction (its ``create_instances_from_document``
    without ``--random_next_sentence``): B is the rest of the chunk, and with probability 1/2 A
    and B are swapped (``is_random_next`` 1), before truncation, as ALBERT does.  One corner case
    is ALBERT's too: a chunk of one sentence cannot be split into A and B, and ALBERT then still
    takes a random B from another document with label 1, as BERT does; so does this, so that the
    data is ALBERT's (labels 1 are then "not in order": swapped, or rarely a random B).  The
    random draws are ALBERT's: one per chunk of two sentences or more, none for the
    one-sentence chunk's choice.
    """
    uniform = rng.random
    getrandbits = rng.getrandbits
    all_bounds = pool.bounds
    bounds = all_bounds[document_index]
    n_sentences = len(bounds) - 1
    n_documents = len(all_bounds)
    a_starts, a_lengths, b_starts, b_lengths, labels = (out.a_start, out.a_length, out.b_start, out.b_length,
                                                        out.is_random_next)
    short_range = max_num_tokens - min_short_seq_length + 1

    # Usually fill the whole sequence; sometimes a shorter one, to narrow the gap between
    # pre-training and fine-tuning on short inputs.  Drawn once per document, as Google does.
    target_length = max_num_tokens
    if uniform() < short_seq_prob:
        target_length = min_short_seq_length + int(uniform() * short_range)

    # Google's loop visits every sentence and closes the chunk at the first one that reaches the
    # target (or the document's last); bounds ascend, so a bisection finds that sentence at once
    # (the loop draws nothing between chunks: the stream is the same).
    chunk_first = 0  # the chunk is sentences chunk_first..i
    while chunk_first < n_sentences:
        i = bisect_left(bounds, bounds[chunk_first] + target_length, chunk_first + 1, n_sentences) - 1
        chunk_size = i - chunk_first + 1
        # A ends after a random number (1 .. chunk_size - 1) of the chunk's sentences.
        a_end = chunk_first + (1 + int(uniform() * (chunk_size - 1)) if chunk_size >= 2 else 1)
        a_start = bounds[chunk_first]
        len_a = bounds[a_end] - a_start

        if chunk_size == 1 or (not sentence_order and uniform() < 0.5):
            is_random = 1
            # Ten tries to find another document (a one-document pool falls back to itself).
            for _ in range(10):
                random_index = int(uniform() * n_documents)
                if random_index != document_index:
                    break
            random_bounds = all_bounds[random_index]
            last_sentence = len(random_bounds) - 2
            first = int(uniform() * (last_sentence + 1))
            b_start = random_bounds[first]
            # Whole sentences until B reaches its target (target_length - len_a), or the document
            # ends: the first sentence whose end reaches it, by bisection as above.
            last = bisect_left(random_bounds, b_start + target_length - len_a, first + 1, last_sentence + 1) - 1
            len_b = random_bounds[last + 1] - b_start
            # The chunk's sentences after A were not used: put them back.
            i = a_end - 1
        else:
            is_random = 0
            b_start = bounds[a_end]
            len_b = bounds[i + 1] - b_start
            if sentence_order and uniform() < 0.5:  # ALBERT's sentence order: swapped, label 1
                is_random = 1
                a_start, len_a, b_start, len_b = b_start, len_b, a_start, len_a

        excess = len_a + len_b - max_num_tokens
        if excess > 0:  # truncation_counts, inline (this runs for most pairs)
            remove_a = remove_b = 0
            if len_a > len_b:
                remove_a = min(excess, len_a - len_b)
                excess -= remove_a
            elif len_b > len_a:
                remove_b = min(excess, len_b - len_a)
                excess -= remove_b
            remove_b += (excess + 1) >> 1
            remove_a += excess >> 1
            if remove_a:
                a_start += _ones(getrandbits(remove_a))  # Binomial(remove_a, 1/2) from the front
                len_a -= remove_a
            if remove_b:
                b_start += _ones(getrandbits(remove_b))
                len_b -= remove_b

        a_starts.append(a_start)
        a_lengths.append(len_a)
        b_starts.append(b_start)
        b_lengths.append(len_b)
        labels.append(is_random)
        chunk_first = i + 1
        if per_chunk:
            target_length = max_num_tokens
            if uniform() < short_seq_prob:
                target_length = min_short_seq_length + int(uniform() * short_range)


def create_pairs(
    pool: TokenPool,
    dupe_factor: int,
    max_num_tokens: int,
    short_seq_prob: float,
    min_short_seq_length: int,
    rng: random.Random,
    per_chunk: bool = False,
    sentence_order: bool = False,
) -> PairArrays:
    """All pairs of a pool: ``dupe_factor`` passes over every document (``sentence_order``: ALBERT's
    sentence-order pairs, see :func:`add_pairs_from_document`).  With compiled kernels, the same
    pairs and the same state of ``rng`` after, from instance_kernels.pair_ranges."""
    compiled = instance_kernels.pair_ranges()
    if compiled is not None and type(rng) is random.Random:  # a subclass may draw otherwise
        bounds, offsets = pool.flat_bounds()
        # A pair takes one sentence or more of its document: at most one pair a sentence a pass.
        pairs = _run_kernel(compiled, rng, 5, dupe_factor * (len(bounds) - len(pool)), bounds, offsets,
                            int(dupe_factor), int(max_num_tokens), float(short_seq_prob), int(min_short_seq_length),
                            bool(per_chunk), bool(sentence_order))
        if pairs is not None:
            return pairs
    out = PairBatch()
    for _ in range(dupe_factor):
        for document_index in range(len(pool)):
            add_pairs_from_document(pool, document_index, max_num_tokens, short_seq_prob, min_short_seq_length,
                                    rng, out, per_chunk, sentence_order)
    return out.arrays()


def _run_kernel(compiled, rng: random.Random, n_columns: int, capacity: int, *arguments) -> Optional["PairArrays"]:
    """Run a kernel of instance_kernels on ``rng``'s state, with columns for ``capacity`` rows (more
    if they fill: from the same state again); leave ``rng`` as the reference would.  None when the
    kernel stopped where the reference raises (``rng`` untouched: the reference then runs)."""
    while True:
        words, state = state_of(rng)
        # np.empty: pages a kernel does not reach are never touched, so a generous capacity is free.
        columns = [np.empty(capacity, np.int32) for _ in range(n_columns)]
        count = compiled(*arguments, words, *columns)
        if count != instance_kernels.FULL:
            break
        capacity = 2 * capacity + 16
    if count < 0:
        return None
    restore(rng, words, state)
    columns = [column[:count].copy() for column in columns]
    zeros = np.zeros(count, np.int32)
    return PairArrays(*(columns + [zeros] * (5 - n_columns)))


def add_windows(start: int, end: int, target_length, overlap: int, rng: random.Random, out: PairBatch,
                emit_rest: bool) -> int:
    """MLM-only windows over the token stream ``[start, end)`` (Cerebras's sliding window): each
    window holds ``target_length()`` tokens and the next one starts ``overlap`` tokens before it
    ends.  Returns where the unused rest begins; with ``emit_rest`` that rest is a last, shorter
    window, unless it holds only tokens the previous window already has."""
    position = start
    length = target_length()
    while position + length <= end:
        out.a_start.append(position)
        out.a_length.append(length)
        position += length - overlap
        length = target_length()
    if emit_rest and end > position and (position == start or end - position > overlap):
        out.a_start.append(position)
        out.a_length.append(end - position)
        position = end
    return position


def create_windows(pool: TokenPool, dupe_factor: int, max_num_tokens: int, overlap: int, short_seq_prob: float,
                   min_short_seq_length: int, cross_document: bool, rng: random.Random) -> PairArrays:
    """All MLM-only instances of a pool: ``dupe_factor`` passes of windows, within each document,
    or (``cross_document``) over the whole pool, where a separator token stands between
    documents.  With probability ``short_seq_prob`` a window's length is drawn in
    [min_short_seq_length, max_num_tokens], as in Cerebras's tool.  With compiled kernels, the
    same windows and the same state of ``rng`` after, from instance_kernels.window_ranges."""
    compiled = instance_kernels.window_ranges()
    if compiled is not None and type(rng) is random.Random:
        bounds, offsets = pool.flat_bounds()
        if cross_document:
            starts, ends = np.zeros(1, np.int64), np.full(1, len(pool.tokens), np.int64)
        else:
            starts, ends = bounds[offsets[:-1]], bounds[offsets[1:] - 1]
        shortest = min(max_num_tokens, min_short_seq_length) if short_seq_prob > 0 else max_num_tokens
        capacity = dupe_factor * int(((ends - starts) // max(1, shortest - overlap) + 1).sum())
        windows = _run_kernel(compiled, rng, 2, capacity, starts, ends, int(dupe_factor), int(max_num_tokens),
                              int(overlap), float(short_seq_prob), int(min_short_seq_length))
        if windows is not None:
            return windows
    uniform = rng.random

    def target_length():
        if uniform() < short_seq_prob:
            return min_short_seq_length + int(uniform() * (max_num_tokens - min_short_seq_length + 1))
        return max_num_tokens

    out = PairBatch()
    for _ in range(dupe_factor):
        if cross_document:
            add_windows(0, len(pool.tokens), target_length, overlap, rng, out, emit_rest=True)
        else:
            for bounds in pool.bounds:
                add_windows(bounds[0], bounds[-1], target_length, overlap, rng, out, emit_rest=True)
    n = len(out.a_start)
    out.b_start, out.b_length, out.is_random_next = [0] * n, [0] * n, [0] * n
    return out.arrays()


@dataclass
class InstanceArrays:
    """Pairs as padded ``[CLS] A [SEP] B [SEP]`` rows (before masking)."""

    input_ids: np.ndarray  # (n, max_seq_length) int32, 0-padded
    lengths: np.ndarray  # (n,) tokens including the three specials (int32, as the pairs)
    a_lengths: np.ndarray  # (n,)
    is_random_next: np.ndarray  # (n,)
    # The masks and segment ids when the gather made them (the compiled one does, in its pass);
    # else the properties compute them.
    gathered_mask: Optional[np.ndarray] = field(default=None, repr=False)
    gathered_segment_ids: Optional[np.ndarray] = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def input_mask(self) -> np.ndarray:
        if self.gathered_mask is not None:
            return self.gathered_mask
        return (np.arange(self.input_ids.shape[1]) < self.lengths[:, None]).astype(np.int32)

    @property
    def segment_ids(self) -> np.ndarray:
        if self.gathered_segment_ids is not None:
            return self.gathered_segment_ids
        positions = np.arange(self.input_ids.shape[1])
        b_start = self.a_lengths[:, None] + 2  # [CLS] A [SEP] precede B
        return ((positions >= b_start) & (positions < self.lengths[:, None])).astype(np.int32)


def gather_instances(pool_tokens: np.ndarray, pairs: PairArrays, max_seq_length: int, cls_id: int,
                     sep_id: int, single_segment: bool = False) -> InstanceArrays:
    """Lay out ``[CLS] A [SEP] B [SEP]`` (or, ``single_segment``, ``[CLS] A [SEP]``) for a batch
    of pairs with one gather (a compiled copy per row when kernels are on: ``gathering``)."""
    from .gathering import gather_rows

    n = len(pairs)
    a_length = pairs.a_length
    end = a_length + 1 if single_segment else a_length + 2 + pairs.b_length  # where the last [SEP] goes
    copy = gather_rows()
    # The copy reads no further than each pair's tokens: pairs out of the pool or the row (never
    # made by the pairing) are left to the reference's clipped gather.
    fits = n and int(end.max()) < max_seq_length and len(pool_tokens) >= int((pairs.a_start + a_length).max()) and (
        single_segment or len(pool_tokens) >= int((pairs.b_start + pairs.b_length).max()))
    if copy is not None and fits:
        input_ids, mask, segments = copy(np.asarray(pool_tokens), pairs.a_start, a_length, pairs.b_start,
                                         pairs.b_length, max_seq_length, cls_id, sep_id, single_segment)
        return InstanceArrays(input_ids, end + 1, pairs.a_length, pairs.is_random_next, mask,
                              None if single_segment else segments)
    # Every position first reads the pool as if A ran on to the row's end; B's positions are moved
    # to B's start; reads past the pool are clipped (those positions are overwritten below).
    rows = np.arange(n)
    column = np.arange(max_seq_length, dtype=np.int32)[None, :]
    source = column + (pairs.a_start - 1)[:, None]
    if single_segment:
        end = a_length + 1  # the [SEP]
    else:
        b_first = a_length + 2
        end = b_first + pairs.b_length
        source = source + (column >= b_first[:, None]) * (pairs.b_start - pairs.a_start - a_length - 1)[:, None]
    if len(pool_tokens):
        input_ids = np.take(pool_tokens, source, mode="clip").astype(np.int32, copy=False)
        input_ids *= column <= end[:, None]  # padding: 0
    else:
        input_ids = np.zeros(source.shape, dtype=np.int32)
    input_ids[:, 0] = cls_id
    input_ids[rows, a_length + 1] = sep_id
    input_ids[rows, end] = sep_id
    return InstanceArrays(input_ids, end + 1, pairs.a_length, pairs.is_random_next)
