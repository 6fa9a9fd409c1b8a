import random

import numpy as np
import pytest

from bert_data.instances import add_pairs_from_document, create_pairs, to_arrays, truncation_counts, PairBatch

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


def split_pair(tokens):
    assert tokens[0] == CLS and tokens[-1] == SEP
    first_sep = tokens.index(SEP)
    return tokens[1:first_sep], tokens[first_sep + 1 : -1]


def test_pairs_are_well_formed_and_continuations_are_contiguous():
    rng = random.Random(1)
    documents = make_documents(rng, 20)
    # Every id is unique across the corpus, so we can find where each token came from.
    where = {}
    for d, document in enumerate(documents):
        flat = [t for sentence in document for t in sentence]
        for position, token in enumerate(flat):
            where[token] = (d, position)
    pairs = create_pairs(documents, 3, 61, 0.1, 2, CLS, SEP, random.Random(7))
    offset = 0
    assert len(pairs) > 50
    for length, a_length, is_random in zip(pairs.lengths, pairs.a_lengths, pairs.is_random_next):
        tokens = pairs.tokens[offset : offset + length]
        offset += length
        a, b = split_pair(tokens)
        assert len(a) == a_length and len(a) >= 1 and len(b) >= 1
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
    assert offset == len(pairs.tokens)


def test_every_sentence_is_used_and_random_next_puts_sentences_back():
    rng = random.Random(3)
    documents = make_documents(rng, 10, min_sentences=5, max_len=8)
    pairs = PairBatch()
    add_pairs_from_document(documents, 0, 1000, 0.0, 2, CLS, SEP, random.Random(5), pairs)
    seen = set()
    offset = 0
    for length, is_random in zip(pairs.lengths, pairs.is_random_next):
        a, b = split_pair(pairs.tokens[offset : offset + length])
        offset += length
        seen.update(a)
        if not is_random:
            seen.update(b)
    # With no truncation (room for everything), A and real-next B cover the whole document.
    assert seen == {t for sentence in documents[0] for t in sentence}


def test_single_document_single_sentence_pool_does_not_crash():
    documents = [[[5, 6, 7]]]
    pairs = create_pairs(documents, 2, 5, 0.5, 2, CLS, SEP, random.Random(0))
    assert len(pairs) == 2 and all(pairs.is_random_next)
    arrays = to_arrays(pairs, 8)
    assert arrays.input_ids.shape == (2, 8)


def test_sentence_longer_than_max_seq_length_is_truncated():
    documents = [[list(range(1000, 1300))], [list(range(2000, 2400)), [7, 8]]]
    pairs = create_pairs(documents, 5, 125, 0.1, 2, CLS, SEP, random.Random(0))
    assert max(pairs.lengths) <= 128
    arrays = to_arrays(pairs, 128)
    assert (arrays.lengths <= 128).all()


def test_statistics_follow_the_reference():
    """About half the pairs are random-next (never when a chunk must be split), about 10% short."""
    rng = random.Random(11)
    documents = make_documents(rng, 200, min_sentences=10, max_sentences=40, max_len=30)
    pairs = create_pairs(documents, 2, 125, 0.1, 2, CLS, SEP, random.Random(3))
    arrays = to_arrays(pairs, 128)
    # Half of the multi-sentence chunks, plus every one-sentence chunk (a document's last
    # sentence alone, or one sentence long enough to fill the target), as in the reference.
    random_share = arrays.is_random_next.mean()
    assert 0.5 < random_share < 0.6


def test_about_one_document_in_ten_gets_a_short_target():
    """As in the reference, the target length is drawn once per document (per pass)."""
    rng = random.Random(4)
    documents = [[[1000 + rng.randint(0, 9)] * rng.randint(1, 5) for _ in range(200)] for _ in range(20)]
    pairing_rng = random.Random(6)
    short = 0
    trials = 4000
    for trial in range(trials):
        pairs = PairBatch()
        add_pairs_from_document(documents, trial % 20, 125, 0.1, 2, CLS, SEP, pairing_rng, pairs)
        # A full target (125) fills every real-next pair away from the document's end;
        # sentences are at most 5 tokens, so such a pair under 120 tokens means a short target
        # below 116 was drawn.  (Random-next pairs can end early with their random document.)
        # A tiny target makes every chunk one sentence, hence every pair random-next.
        real = [length for length, is_random in zip(pairs.lengths, pairs.is_random_next) if not is_random]
        short += not real or real[0] - 3 < 120
    expected = 0.1 * (115 - 2 + 1) / (125 - 2 + 1)
    assert abs(short / trials - expected) < 0.015


def test_segment_ids_and_mask():
    pairs = PairBatch(tokens=[CLS, 5, 6, SEP, 7, SEP], lengths=[6], a_lengths=[2], is_random_next=[0])
    arrays = to_arrays(pairs, 8)
    assert arrays.input_ids.tolist() == [[CLS, 5, 6, SEP, 7, SEP, 0, 0]]
    assert arrays.segment_ids.tolist() == [[0, 0, 0, 0, 1, 1, 0, 0]]
    assert arrays.input_mask.tolist() == [[1, 1, 1, 1, 1, 1, 0, 0]]


def test_same_seed_same_pairs():
    documents = make_documents(random.Random(2), 15)
    first = create_pairs(documents, 2, 61, 0.1, 2, CLS, SEP, random.Random(9))
    second = create_pairs(documents, 2, 61, 0.1, 2, CLS, SEP, random.Random(9))
    assert first == second
    np.testing.assert_array_equal(to_arrays(first, 64).input_ids, to_arrays(second, 64).input_ids)
