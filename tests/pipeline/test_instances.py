"""Instance creation as Google's ``create_instances_from_document`` (pipeline/instances.py): pairs
well formed, every sentence used, truncation and short targets with the reference's statistics,
the same pairs for the same seed."""

import random

import numpy as np
import pytest

from bert_data.pipeline.instances import (PairBatch, TokenPool, add_pairs_from_document, create_pairs, gather_instances,
                                 truncation_counts)

CLS, SEP = 101, 102


def literal_truncation(len_a, len_b, max_num_tokens):
    """Google's truncate_seq_pair loop, on lengths."""
    removed_a = removed_b = 0
    while len_a + len_b > max_num_tokens:
        if len_a > len_b:
            len_a -= 1
            removed_a += 1
        else:
            len_b -= 1
            removed_b += 1
    return removed_a, removed_b


@pytest.mark.parametrize("max_num_tokens", [2, 3, 10, 125])
def test_truncation_counts_match_the_reference_loop(max_num_tokens):
    for len_a in range(1, 60):
        for len_b in range(1, 60):
            assert truncation_counts(len_a, len_b, max_num_tokens) == literal_truncation(len_a, len_b, max_num_tokens)


def make_documents(rng, n_docs, min_sentences=1, max_sentences=30, max_len=40):
    next_id = iter(range(1000, 10**9))
    return [
        [[next(next_id) for _ in range(rng.randint(1, max_len))] for _ in range(rng.randint(min_sentences, max_sentences))]
        for _ in range(n_docs)
    ]


def pairs_of(documents, *args, dupe_factor=1):
    pool = TokenPool.from_documents(documents)
    pairs = create_pairs(pool, dupe_factor, *args)
    return pool, pairs


def pair_tokens(pool, pairs):
    """(A, B, is_random) of every pair, as lists of ids."""
    for row in range(len(pairs)):
        a = pool.tokens[pairs.a_start[row] : pairs.a_start[row] + pairs.a_length[row]].tolist()
        b = pool.tokens[pairs.b_start[row] : pairs.b_start[row] + pairs.b_length[row]].tolist()
        yield a, b, int(pairs.is_random_next[row])


def test_pairs_are_well_formed_and_continuations_are_contiguous():
    rng = random.Random(1)
    documents = make_documents(rng, 20)
    # Every id is unique across the corpus, so we can find where each token came from.
    where = {}
    for d, document in enumerate(documents):
        flat = [t for sentence in document for t in sentence]
        for position, token in enumerate(flat):
            where[token] = (d, position)
    pool, pairs = pairs_of(documents, 61, 0.1, 2, random.Random(7), dupe_factor=3)
    assert len(pairs) > 50
    for a, b, is_random in pair_tokens(pool, pairs):
        assert len(a) >= 1 and len(b) >= 1
        assert len(a) + len(b) <= 61
        # Each side is one contiguous run of one document (truncation only trims the ends).
        for side in (a, b):
            docs = {where[t][0] for t in side}
            assert len(docs) == 1
            positions = [where[t][1] for t in side]
            assert positions == list(range(positions[0], positions[0] + len(side)))
        if not is_random:
            # B continues A in the same document (possibly after trimming A's end / B's front).
            assert where[a[0]][0] == where[b[0]][0]
            assert where[b[0]][1] > where[a[-1]][1]


def test_every_sentence_is_used_and_random_next_puts_sentences_back():
    rng = random.Random(3)
    documents = make_documents(rng, 10, min_sentences=5, max_len=8)
    pool = TokenPool.from_documents(documents)
    batch = PairBatch()
    add_pairs_from_document(pool, 0, 1000, 0.0, 2, random.Random(5), batch)
    seen = set()
    for a, b, is_random in pair_tokens(pool, batch.arrays()):
        seen.update(a)
        if not is_random:
            seen.update(b)
    # With no truncation (room for everything), A and real-next B cover the whole document.
    assert seen == {t for sentence in documents[0] for t in sentence}


def test_single_document_single_sentence_pool_does_not_crash():
    pool, pairs = pairs_of([[[5, 6, 7]]], 5, 0.5, 2, random.Random(0), dupe_factor=2)
    assert len(pairs) == 2 and all(pairs.is_random_next)
    arrays = gather_instances(pool.tokens, pairs, 8, CLS, SEP)
    assert arrays.input_ids.shape == (2, 8)
    # The only document is its own random next: A is the sentence, B the same sentence cut to the
    # one token over budget (5 = 3 + 2), from its front or its back.
    assert arrays.lengths.tolist() == [8, 8]
    for row, segments in zip(arrays.input_ids.tolist(), arrays.segment_ids.tolist()):
        assert row[:5] == [CLS, 5, 6, 7, SEP] and row[7] == SEP
        assert row[5:7] in ([5, 6], [6, 7])
        assert segments == [0] * 5 + [1] * 3


def test_sentence_longer_than_max_seq_length_is_truncated():
    documents = [[list(range(1000, 1300))], [list(range(2000, 2400)), [7, 8]]]
    pool, pairs = pairs_of(documents, 125, 0.1, 2, random.Random(0), dupe_factor=5)
    arrays = gather_instances(pool.tokens, pairs, 128, CLS, SEP)
    assert (arrays.lengths <= 128).all() and (arrays.lengths == 128).any()
    for a, b, _ in pair_tokens(pool, pairs):
        assert len(a) + len(b) <= 125


def test_statistics_follow_the_reference():
    """About half the pairs are random-next (never when a chunk must be split), about 10% short."""
    rng = random.Random(11)
    documents = make_documents(rng, 200, min_sentences=10, max_sentences=40, max_len=30)
    pool, pairs = pairs_of(documents, 125, 0.1, 2, random.Random(3), dupe_factor=2)
    arrays = gather_instances(pool.tokens, pairs, 128, CLS, SEP)
    # Half of the multi-sentence chunks, plus every one-sentence chunk (a document's last
    # sentence alone, or one sentence long enough to fill the target), as in the reference.
    random_share = arrays.is_random_next.mean()
    assert 0.5 < random_share < 0.6


def test_about_one_document_in_ten_gets_a_short_target():
    """As in the reference, the target length is drawn once per document (per pass)."""
    rng = random.Random(4)
    documents = [[[1000 + rng.randint(0, 9)] * rng.randint(1, 5) for _ in range(200)] for _ in range(20)]
    pool = TokenPool.from_documents(documents)
    pairing_rng = random.Random(6)
    short = 0
    trials = 4000
    for trial in range(trials):
        batch = PairBatch()
        add_pairs_from_document(pool, trial % 20, 125, 0.1, 2, pairing_rng, batch)
        pairs = batch.arrays()
        lengths = (pairs.a_length + pairs.b_length + 3).tolist()
        # A full target (125) fills every real-next pair away from the document's end;
        # sentences are at most 5 tokens, so such a pair under 120 tokens means a short target
        # below 116 was drawn.  (Random-next pairs can end early with their random document.)
        # A tiny target makes every chunk one sentence, hence every pair random-next.
        real = [length for length, is_random in zip(lengths, pairs.is_random_next) if not is_random]
        short += not real or real[0] - 3 < 120
    expected = 0.1 * (115 - 2 + 1) / (125 - 2 + 1)
    assert abs(short / trials - expected) < 0.015


def test_segment_ids_and_mask():
    pool = TokenPool.from_documents([[[5, 6], [7]]])
    pairs = PairBatch(a_start=[0], a_length=[2], b_start=[2], b_length=[1], is_random_next=[0]).arrays()
    arrays = gather_instances(pool.tokens, pairs, 8, CLS, SEP)
    assert arrays.input_ids.tolist() == [[CLS, 5, 6, SEP, 7, SEP, 0, 0]]
    assert arrays.segment_ids.tolist() == [[0, 0, 0, 0, 1, 1, 0, 0]]
    assert arrays.input_mask.tolist() == [[1, 1, 1, 1, 1, 1, 0, 0]]


def test_same_seed_same_pairs():
    documents = make_documents(random.Random(2), 15)
    pool, first = pairs_of(documents, 61, 0.1, 2, random.Random(9), dupe_factor=2)
    _, second = pairs_of(documents, 61, 0.1, 2, random.Random(9), dupe_factor=2)
    np.testing.assert_array_equal(gather_instances(pool.tokens, first, 64, CLS, SEP).input_ids,
                                  gather_instances(pool.tokens, second, 64, CLS, SEP).input_ids)
