"""ALBERT's sentence-order prediction (--sentence_order_prediction), checked on the records: the
masked labels are put back and A and B found in the tokenized corpus, whose runs of tokens name
their document (tests/helpers/corpus.py)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from bert_data import read_examples
from bert_data.config import ConfigError
from bert_data.pipeline.instances import TokenPool, create_pairs
from bert_data.run.resolve import generate
from bert_data.tools.inspect import format_record, inspect_records

from tests.helpers.corpus import corpus_config, file_hashes, make_corpus

MSL = 48


@pytest.fixture(scope="module")
def sop_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("sop")
    corpus = make_corpus(root / "corpus", n_docs=40, min_sentences=6, max_sentences=24)
    output = root / "out"
    generate(corpus_config(corpus, output, sentence_order_prediction=True, max_seq_length=MSL, dupe_factor=4,
                           split_num=8), progress=False)
    return corpus, output


def occurrences(haystack, needle):
    n = len(needle)
    return [i for i in range(len(haystack) - n + 1) if haystack[i:i + n] == needle]


def segments(record, tokens):
    ids = record["input_ids"].copy()
    k = int(record["masked_lm_weights"].sum())
    ids[record["masked_lm_positions"][:k]] = record["masked_lm_ids"][:k]
    words = [tokens[i] for i in ids[: int(record["input_mask"].sum())]]
    first_sep = words.index("[SEP]")
    return words[1:first_sep], words[first_sep + 1: -1]


def test_b_follows_a_or_they_are_swapped(sop_run):
    corpus, output = sop_run
    tokens = corpus.vocab.read_text().splitlines()
    flat = {label: [t for sentence in sentences for t in sentence] for label, sentences in corpus.documents.items()}
    sentences = {label: {tuple(s) for s in doc} for label, doc in corpus.documents.items()}
    counts = {"in order": 0, "swapped": 0, "random": 0}
    for record in read_examples(str(output)):
        a, b = segments(record, tokens)
        (doc_a,), (doc_b,) = corpus.document_of(a), corpus.document_of(b)
        at_a, at_b = occurrences(flat[doc_a], a), occurrences(flat[doc_b], b)
        assert at_a and at_b
        label = int(record["next_sentence_labels"][0])
        if label == 0:
            assert doc_a == doc_b and any(j >= i + len(a) for i in at_a for j in at_b), (a, b)
            counts["in order"] += 1
        elif doc_a == doc_b:
            assert any(i >= j + len(b) for i in at_a for j in at_b), (a, b)  # A follows B
            counts["swapped"] += 1
        else:
            # ALBERT's corner case: a chunk of one sentence takes a random B (label 1); unless
            # truncated, A is that one whole sentence.
            if len(a) + len(b) < MSL - 3:
                assert tuple(a) in sentences[doc_a], a
            counts["random"] += 1
    total = sum(counts.values())
    assert total > 500
    # Half the pairs that can be split are swapped (the bound holds for this seed's draws).
    assert 0.45 < counts["swapped"] / (counts["swapped"] + counts["in order"]) < 0.55
    # One-sentence chunks (the last of a document, mostly) are rarer than swaps.
    assert 0 < counts["random"] < counts["swapped"]


def test_sentence_order_is_deterministic_for_any_number_of_workers(sop_run, tmp_path):
    corpus, output = sop_run
    generate(corpus_config(corpus, tmp_path / "two", sentence_order_prediction=True, max_seq_length=MSL,
                           dupe_factor=4, split_num=8, num_workers=2), progress=False)
    assert file_hashes(tmp_path / "two") == file_hashes(output)
    generate(corpus_config(corpus, tmp_path / "nsp", max_seq_length=MSL, dupe_factor=4, split_num=8), progress=False)
    assert file_hashes(tmp_path / "nsp") != file_hashes(output)


def test_the_manifest_inspect_and_stats_say_sentence_order(sop_run):
    from bert_data.tools.stats import compute_stats, format_stats

    _, output = sop_run
    records = list(inspect_records(str(output), n=20))
    assert any("sentence order: A and B swapped" in format_record(r) for r in records)
    assert all(r.sentence_order for r in records)
    (stats,) = compute_stats([str(output)])
    assert "sentence order        swapped" in format_stats(stats)


def test_transformers_batches_name_the_label_sentence_order(sop_run):
    from bert_data import read_batches

    _, output = sop_run
    batch = next(iter(read_batches(str(output), batch_size=8, format="transformers")))
    assert "sentence_order_label" in batch and "next_sentence_label" not in batch


def test_pairs_on_token_ranges():
    """Tokens numbered by position: every pair's ranges show the order directly."""
    rng = random.Random(1)
    documents, position = [], 0
    for _ in range(30):
        document = []
        for _ in range(rng.randint(1, 12)):
            length = rng.randint(1, 20)
            document.append(list(range(position, position + length)))
            position += length
        documents.append(document)
    pool = TokenPool.from_documents(documents)
    doc_of = np.zeros(position, dtype=int)
    for index, bounds in enumerate(pool.bounds):
        doc_of[bounds[0]:bounds[-1]] = index
    pairs = create_pairs(pool, 5, 45, 0.1, 2, random.Random(7), sentence_order=True)
    a_end, b_end = pairs.a_start + pairs.a_length, pairs.b_start + pairs.b_length
    same = doc_of[pairs.a_start] == doc_of[pairs.b_start]
    ordered = pairs.is_random_next == 0
    assert (same[ordered] & (pairs.b_start[ordered] >= a_end[ordered])).all()
    swapped = ~ordered & same & (pairs.a_start >= b_end)
    assert (swapped | ~same | ordered).all() and swapped.sum() > 100
    assert ((pairs.a_length >= 1) & (pairs.b_length >= 1) & (pairs.a_length + pairs.b_length <= 45)).all()
    # Without the flag: Google's next-sentence pairs, never swapped.
    nsp = create_pairs(pool, 5, 45, 0.1, 2, random.Random(7))
    nsp_same = doc_of[nsp.a_start] == doc_of[nsp.b_start]
    assert not (nsp_same & (nsp.a_start >= nsp.b_start + nsp.b_length)).any()


def test_sentence_order_needs_pairs(tmp_path):
    config = corpus_config(make_corpus(tmp_path / "c", n_docs=2), tmp_path / "o", sentence_order_prediction=True,
                           mlm_only=True)
    with pytest.raises(ConfigError, match="--sentence_order_prediction needs sentence pairs"):
        config.validate()
