"""Stage 4: tokenized documents -> next-sentence-prediction pairs.

This follows ``create_instances_from_document`` of Google's ``create_pretraining_data.py``
step for step (target length, chunk accumulation, random split point, random-next with unused
sentences put back, truncation of the longer side from a random end); see the README's
"Faithful to the reference" section.  It works on lists of token ids, never on strings, and
writes every pair straight into one flat list, which the next stage turns into arrays.

Two implementation choices keep the distribution of Google's algorithm while saving time:

* truncation removes the same *number* of tokens from each side as Google's one-at-a-time
  loop (that number depends on lengths only), and splits each side's removals between front
  and back with one Binomial(n, 1/2) draw -- the distribution of Google's n coin flips;
* documents are lists of sentences, each a list of ids, so joining sentences is list
  concatenation in C.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import List, Sequence

import numpy as np

Sentence = List[int]
Document = List[Sentence]


@dataclass
class PairBatch:
    """Pairs laid end to end: ``tokens`` holds ``[CLS] A [SEP] B [SEP]`` of every pair."""

    tokens: List[int] = field(default_factory=list)
    lengths: List[int] = field(default_factory=list)  # len of [CLS] A [SEP] B [SEP]
    a_lengths: List[int] = field(default_factory=list)  # len of A
    is_random_next: List[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.lengths)


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


def _trim(tokens: List[int], count: int, rng: random.Random) -> List[int]:
    if count == 0:
        return tokens
    from_front = bin(rng.getrandbits(count)).count("1")  # Binomial(count, 1/2)
    return tokens[from_front : len(tokens) - (count - from_front)]


def add_pairs_from_document(
    documents: Sequence[Document],
    document_index: int,
    max_num_tokens: int,
    short_seq_prob: float,
    min_short_seq_length: int,
    cls_id: int,
    sep_id: int,
    rng: random.Random,
    out: PairBatch,
) -> None:
    """Append the pairs of one document to ``out`` (Google's create_instances_from_document)."""
    document = documents[document_index]
    n_sentences = len(document)

    # Usually fill the whole sequence; sometimes a shorter one, to narrow the gap between
    # pre-training and fine-tuning on short inputs.
    target_length = max_num_tokens
    if rng.random() < short_seq_prob:
        target_length = rng.randint(min_short_seq_length, max_num_tokens)

    chunk: List[Sentence] = []
    chunk_length = 0
    i = 0
    tokens, lengths, a_lengths, random_next = out.tokens, out.lengths, out.a_lengths, out.is_random_next
    while i < n_sentences:
        sentence = document[i]
        chunk.append(sentence)
        chunk_length += len(sentence)
        if i == n_sentences - 1 or chunk_length >= target_length:
            # A ends after a random number of the chunk's sentences.
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a: List[int] = []
            for part in chunk[:a_end]:
                tokens_a += part

            tokens_b: List[int] = []
            if len(chunk) == 1 or rng.random() < 0.5:
                is_random = 1
                target_b_length = target_length - len(tokens_a)
                # Ten tries to find another document (a one-document pool falls back to itself).
                for _ in range(10):
                    random_index = rng.randint(0, len(documents) - 1)
                    if random_index != document_index:
                        break
                random_document = documents[random_index]
                for j in range(rng.randint(0, len(random_document) - 1), len(random_document)):
                    tokens_b += random_document[j]
                    if len(tokens_b) >= target_b_length:
                        break
                # The chunk's sentences after A were not used: put them back.
                i -= len(chunk) - a_end
            else:
                is_random = 0
                for part in chunk[a_end:]:
                    tokens_b += part

            remove_a, remove_b = truncation_counts(len(tokens_a), len(tokens_b), max_num_tokens)
            tokens_a = _trim(tokens_a, remove_a, rng)
            tokens_b = _trim(tokens_b, remove_b, rng)

            tokens.append(cls_id)
            tokens += tokens_a
            tokens.append(sep_id)
            tokens += tokens_b
            tokens.append(sep_id)
            lengths.append(len(tokens_a) + len(tokens_b) + 3)
            a_lengths.append(len(tokens_a))
            random_next.append(is_random)
            chunk = []
            chunk_length = 0
        i += 1


def create_pairs(
    documents: Sequence[Document],
    dupe_factor: int,
    max_num_tokens: int,
    short_seq_prob: float,
    min_short_seq_length: int,
    cls_id: int,
    sep_id: int,
    rng: random.Random,
) -> PairBatch:
    """All pairs of a pool of documents: ``dupe_factor`` passes over every document."""
    out = PairBatch()
    for _ in range(dupe_factor):
        for document_index in range(len(documents)):
            add_pairs_from_document(
                documents, document_index, max_num_tokens, short_seq_prob, min_short_seq_length,
                cls_id, sep_id, rng, out,
            )
    return out


@dataclass
class InstanceArrays:
    """Pairs as padded arrays, one row per instance (before masking)."""

    input_ids: np.ndarray  # (n, max_seq_length) int32, 0-padded
    lengths: np.ndarray  # (n,) int32
    a_lengths: np.ndarray  # (n,) int32
    is_random_next: np.ndarray  # (n,) int8

    def __len__(self) -> int:
        return len(self.lengths)

    def take(self, rows: np.ndarray) -> "InstanceArrays":
        return InstanceArrays(self.input_ids[rows], self.lengths[rows], self.a_lengths[rows],
                              self.is_random_next[rows])

    @property
    def input_mask(self) -> np.ndarray:
        return (np.arange(self.input_ids.shape[1]) < self.lengths[:, None]).astype(np.int32)

    @property
    def segment_ids(self) -> np.ndarray:
        positions = np.arange(self.input_ids.shape[1])
        b_start = self.a_lengths[:, None] + 2  # [CLS] A [SEP] precede B
        return ((positions >= b_start) & (positions < self.lengths[:, None])).astype(np.int32)


def to_arrays(pairs: PairBatch, max_seq_length: int) -> InstanceArrays:
    n = len(pairs)
    lengths = np.asarray(pairs.lengths, dtype=np.int32).reshape(n)
    input_ids = np.zeros((n, max_seq_length), dtype=np.int32)
    if n:
        input_ids[np.arange(max_seq_length) < lengths[:, None]] = np.asarray(pairs.tokens, dtype=np.int32)
    return InstanceArrays(
        input_ids,
        lengths,
        np.asarray(pairs.a_lengths, dtype=np.int32).reshape(n),
        np.asarray(pairs.is_random_next, dtype=np.int8).reshape(n),
    )
