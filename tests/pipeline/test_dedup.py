"""Deduplication's and decontamination's pure cores: normalization, signatures, the global step
in listed order, evaluation n-grams and the removal of overlapping lines."""

from __future__ import annotations

import random
import re

import numpy as np

from bert_data.pipeline.decontamination import (EvalNgrams, build_eval_ngrams, document_matches, remove_lines,
                                                text_ngrams)
from bert_data.pipeline.dedup import (NUM_PERM, REMOVED_CONTAMINATED, REMOVED_EXACT, REMOVED_NEAR, DedupSpec,
                                      decide_removals, lsh_bands, minhash, normalized_text, normalized_words, span_hashes,
                                      shingle_hashes,
                                      signature_row)


def words(n: int, seed: int):
    rng = random.Random(seed)
    return [f"w{rng.randrange(100000)}" for _ in range(n)]


PINNED = [1156500099, 2464920999]


def test_normalization_folds_width_case_and_punctuation():
    assert normalized_words("Ｆｕｌｌ-width  CAFÉ, Don't!\n\tstop ﬁne.") == ["fullwidth", "café", "dont", "stop", "fine"]
    # ASCII text takes a faster path to the same words.
    text = "".join(chr(code) for code in range(128)) + " Hello, World_1!\x1f(x)"
    assert normalized_text(text) == " ".join(re.sub(r"[^\w\s]+", "", text.casefold()).split())
    assert normalized_text(text) == "0123456789abcdefghijklmnopqrstuvwxyz_abcdefghijklmnopqrstuvwxyz hello world_1 x"


def test_minhash_estimates_jaccard_and_is_the_same_in_every_process():
    a = words(400, 1)
    b = list(a)
    for at in range(0, 400, 40):  # 10 words changed: about 50 of ~400 shingles differ
        b[at] = "changed"
    sa, sb = span_hashes(" ".join(a), 5), span_hashes(" ".join(b), 5)
    true = len(set(sa.tolist()) & set(sb.tolist())) / len(set(sa.tolist()) | set(sb.tolist()))
    estimate = np.mean(minhash(sa) == minhash(sb))
    assert abs(estimate - true) < 0.12
    # Fixed keys: the same values in every process and run (never Python's salted hash()).
    assert minhash(shingle_hashes(normalized_text("A b. c d E!"), 5))[:2].tolist() == PINNED


def test_lsh_bands_fit_the_threshold():
    bands, rows = lsh_bands(0.8)
    assert bands * rows <= NUM_PERM
    # The S-curve's midpoint (1/b)^(1/r) lies near the threshold.
    assert abs((1 / bands) ** (1 / rows) - 0.8) < 0.1


def table_of(texts, spec, contamination=None):
    return np.stack([signature_row(position, " ".join(text), spec,
                                   (contamination or {}).get(position, 0))
                     for position, text in enumerate(texts)])


def test_the_first_in_listed_order_is_kept_and_distinct_documents_stay():
    base, other, half = words(300, 1), words(300, 2), words(150, 1) + words(150, 3)
    near = list(base)
    near[100] = near[200] = "x"
    texts = [other, base, near, list(base), half, words(300, 4)]
    removals = decide_removals(table_of(texts, DedupSpec("near")), DedupSpec("near"), False)
    assert removals.positions.tolist() == [2, 3]
    assert removals.reasons.tolist() == [REMOVED_NEAR, REMOVED_EXACT]
    assert removals.kept_as.tolist() == [1, 1]
    exact = decide_removals(table_of(texts, DedupSpec("exact")), DedupSpec("exact"), False)
    assert exact.positions.tolist() == [3] and exact.reasons.tolist() == [REMOVED_EXACT]


def test_a_contaminated_document_goes_and_does_not_keep_its_duplicates_out():
    base = words(50, 1)
    spec = DedupSpec("exact")
    removals = decide_removals(table_of([base, list(base), words(50, 2)], spec, {0: 0b10}), spec, True)
    # The first copy is contaminated (set 2): removed; the second is then the first occurrence.
    assert removals.positions.tolist() == [0]
    assert removals.reasons.tolist() == [REMOVED_CONTAMINATED] and removals.eval_sets.tolist() == [2]


def test_parts_of_a_document_are_merged_before_deciding():
    spec = DedupSpec("near")
    a, b = words(200, 1), words(200, 2)
    table = np.stack([signature_row(0, " ".join(a), spec), signature_row(0, " ".join(b), spec),
                      signature_row(1, " ".join(a + b), spec)])
    removals = decide_removals(table, spec, False)
    # Document 0 read in two parts is near document 1 (the shingles across the cut differ).
    assert removals.positions.tolist() == [1] and removals.reasons.tolist() == [REMOVED_NEAR]


def test_an_evaluation_13_gram_matches_and_a_12_gram_does_not(tmp_path):
    document = words(200, 5)
    thirteen, twelve = tmp_path / "a.txt", tmp_path / "b.txt"
    thirteen.write_text(" ".join(document[50:63]).upper() + "\nunrelated words\n")
    twelve.write_text(" ".join(document[50:62]) + "\n")
    evaluation = build_eval_ngrams((str(thirteen), str(twelve)), 13)
    assert document_matches(" ".join(document), 13, evaluation) == 0b01
    assert document_matches(" ".join(words(200, 6)), 13, evaluation) == 0
    # Lines are taken on their own: no n-gram joins two evaluation lines.
    split = tmp_path / "c.txt"
    split.write_text(" ".join(document[50:57]) + "\n" + " ".join(document[57:63]) + "\n")
    assert document_matches(" ".join(document), 13, build_eval_ngrams((str(split),), 13)) == 0


def test_lines_mode_removes_only_the_lines_of_the_match():
    lines = [" ".join(words(10, seed)) for seed in range(6)]
    text = "\n".join(lines)
    all_words = " ".join(lines).split()
    evaluation = EvalNgrams(np.unique(text_ngrams(" ".join(all_words[25:38]), 13)), None)
    evaluation.sets = np.ones(len(evaluation.hashes), dtype=np.uint64)
    kept, sets, count = remove_lines(text, 13, evaluation)
    # Words 25..37 lie in lines 2 and 3: those go, the others stay as they were.
    assert (sets, count) == (1, 2)
    assert kept == "\n".join(lines[:2] + lines[4:])
    assert remove_lines("nothing to see here", 13, evaluation) == (None, 0, 0)


def test_runs_of_words_hash_the_same_in_chunks_and_anywhere_in_a_text():
    text = " ".join(words(5000, 9))
    for n in (1, 5, 13):
        assert np.array_equal(span_hashes(text, n, chunk=333), span_hashes(text, n))
        assert len(span_hashes(text, n)) == 5000 - n + 1
    assert np.array_equal(minhash(shingle_hashes(text, 5)), minhash(span_hashes(text, 5)))
    # A run's hash is its words' alone: the same wherever it stands.
    assert span_hashes(text, 13)[100] == span_hashes(" ".join(text.split()[100:113]), 13)[0]


def test_a_large_text_is_normalized_in_pieces_to_the_same_words():
    text = "Ünïcode, Text! " * 20000 + "ﬁnal."
    assert normalized_text(text) == " ".join(re.sub(r"[^\w\s]+", "", unicodedata_nfkc(text).casefold()).split())


def unicodedata_nfkc(text: str) -> str:
    import unicodedata

    return unicodedata.normalize("NFKC", text)
