"""SpanBERT span masking (bert_data.pipeline.span_masking) and the settings around it: word
starts from marks or stored, whole words only, within the budget, the span lengths, and the
options that cannot go together."""

from __future__ import annotations

import numpy as np
import pytest

from bert_data.config import ConfigError
from bert_data.pipeline.masking import MaskingSpec, mask_tokens
from bert_data.pipeline.span_masking import choose_spans, span_length_probabilities, word_starts, words_of
from bert_data.tokenizers.vocab import vocab_from_tokens

from tests.helpers.corpus import corpus_config, make_corpus


def rows_of_words(n=400, width=128, continuation_rate=0.4, seed=0):
    """Candidates (all but the first and last token, a shorter real length per row) and stored word starts."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(width // 2, width + 1, size=n)
    real = np.arange(width)[None, :] < lengths[:, None]
    candidates = real.copy()
    candidates[:, 0] = False
    candidates[np.arange(n), lengths - 1] = False
    stored = rng.random((n, width)) >= continuation_rate
    return candidates, stored, lengths


def test_span_lengths_are_truncated_geometric():
    probabilities = span_length_probabilities()
    assert len(probabilities) == 10 and probabilities.sum() == pytest.approx(1)
    assert probabilities[1] / probabilities[0] == pytest.approx(0.8)
    assert (probabilities * np.arange(1, 11)).sum() == pytest.approx(3.8, abs=0.01)  # SpanBERT's mean


def test_spans_are_whole_words_within_the_budget():
    candidates, stored, lengths = rows_of_words()
    starts = word_starts(None, candidates, stored=stored)
    budget = np.maximum(1, np.rint(lengths * 0.3)).astype(np.int64)
    chosen = choose_spans(candidates, starts, budget, np.random.default_rng(1))
    assert not (chosen & ~candidates).any()
    count = chosen.sum(axis=1)
    assert (count <= budget).all() and (count >= budget - 6).all() and (count == budget).mean() > 0.5
    word_of, n_words, _ = words_of(candidates, starts)
    for row in range(len(chosen)):
        for word in range(n_words[row]):
            tokens = chosen[row][candidates[row] & (word_of[row] == word)]
            assert tokens.all() or not tokens.any()
    again = choose_spans(candidates, starts, budget, np.random.default_rng(1))
    np.testing.assert_array_equal(chosen, again)


def test_longer_spans_than_single_words():
    candidates, stored, lengths = rows_of_words(continuation_rate=0.0)  # every token a word
    starts = word_starts(None, candidates, stored=stored)
    budget = np.full(len(lengths), 12)

    def mean_run(chosen):
        edges = np.diff(np.pad(chosen.astype(int), ((0, 0), (1, 1))), axis=1)
        return chosen.sum() / (edges == 1).sum()  # chosen tokens per run of them

    spans = mean_run(choose_spans(candidates, starts, budget, np.random.default_rng(2)))
    single = mean_run(choose_spans(candidates, starts, budget, np.random.default_rng(2), p=1.0, max_words=1))
    assert single < 1.3 and spans > 2.5


def test_a_word_never_crosses_a_special_token():
    candidates = np.array([[False, True, True, False, True, True, False]])
    continuation = np.array([[False, False, True, False, True, True, False]])
    starts = word_starts(None, candidates, stored=~continuation)
    # The piece after the separator (position 4) starts a word whatever its mark.
    np.testing.assert_array_equal(starts, [[False, True, False, False, True, False, False]])
    ids = np.array([[0, 5, 6, 1, 6, 6, 1]])
    is_continuation = np.array([False] * 6 + [True])
    np.testing.assert_array_equal(word_starts(ids, candidates, is_continuation), starts)


def vocab():
    return vocab_from_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(40)]
                             + [f"##s{i}" for i in range(10)])


def test_mask_tokens_span_and_shares():
    v = vocab()
    rng = np.random.default_rng(0)
    n, width = 300, 64
    ids = rng.integers(5, len(v), size=(n, width))
    ids[:, 0], ids[:, -1] = v.cls_id, v.sep_id
    lengths = np.full(n, width)
    spec = MaskingSpec.for_vocab(v, masked_lm_prob=0.3, max_predictions_per_seq=20, span=True,
                                 mask_token_share=0.5, random_token_share=0.5)
    assert spec.strategy == "span"
    out = mask_tokens(ids, lengths, spec, v, np.random.default_rng(3))
    used = out.masked_lm_weights > 0
    assert (used.sum(axis=1) <= 20).all()
    shown = out.input_ids[np.nonzero(used)[0], out.masked_lm_positions[used]]
    share = (shown == v.mask_id).mean()
    assert abs(share - 0.5) < 5 * np.sqrt(0.25 / used.sum())
    assert (shown == out.masked_lm_ids[used]).mean() < 0.05  # none kept on purpose (1 in 50 by chance)


def test_masking_spec_refuses_what_does_not_fit():
    with pytest.raises(ValueError, match="choose one"):
        MaskingSpec(0.15, 20, span=True, max_ngram_size=3)
    with pytest.raises(ValueError, match="at most 1"):
        MaskingSpec(0.15, 20, mask_token_share=0.9, random_token_share=0.2)
    with pytest.raises(ValueError, match="mask_token_share must be in"):
        MaskingSpec(0.15, 20, mask_token_share=-0.1)
    unmarked = vocab_from_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"], word_boundary=None)
    with pytest.raises(ValueError, match="span masking need word boundaries"):
        MaskingSpec.for_vocab(unmarked, masked_lm_prob=0.15, max_predictions_per_seq=20, span=True)


def test_span_masking_option_conflicts(tmp_path):
    corpus = make_corpus(tmp_path / "c", n_docs=2, min_sentences=3, max_sentences=4)
    with pytest.raises(ConfigError, match="--span_masking and --max_ngram_size"):
        corpus_config(corpus, tmp_path / "o", span_masking=True, max_ngram_size=3).validate()
    with pytest.raises(ConfigError, match="--span_masking choose masks"):
        corpus_config(corpus, tmp_path / "o", span_masking=True, mlm_only=True, disable_masking=True,
                      dupe_factor=1).validate()


def test_a_word_level_tokenizer_json_loads_and_masks_whole_words(tmp_path):
    """A WordLevel tokenizer.json: every piece a whole word (it was refused as an unknown rule)."""
    tokenizers = pytest.importorskip("tokenizers")
    from bert_data.tokenizers import HUGGINGFACE, TokenizerSource, load_vocabulary

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(30)]
    tokenizer = tokenizers.Tokenizer(tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "words.json"))
    v = load_vocabulary(TokenizerSource(HUGGINGFACE, str(tmp_path / "words.json")))
    assert v.word_boundary == "words:" and not v.is_continuation.any()
    spec = MaskingSpec.for_vocab(v, masked_lm_prob=0.3, max_predictions_per_seq=10, span=True)
    ids = np.random.default_rng(0).integers(5, len(v), size=(50, 32))
    ids[:, 0], ids[:, -1] = v.cls_id, v.sep_id
    out = mask_tokens(ids, np.full(50, 32), spec, v, np.random.default_rng(1))
    np.testing.assert_array_equal(out.masked_lm_weights.sum(axis=1), 10)  # round(0.3 * 32): one token a word


def test_span_masking_on_the_command_line(tmp_path, capsys):
    from bert_data.cli.create_tfrecords import main as create_main

    corpus = make_corpus(tmp_path / "c", n_docs=3, min_sentences=4, max_sentences=6)
    argv = ["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root), "--vocab_file",
            str(corpus.vocab), "--do_lower_case", "--max_seq_length", "32", "--max_predictions_per_seq", "5",
            "--quiet", "--span_masking"]
    assert create_main(argv + ["--output_dir", str(tmp_path / "bad"), "--max_ngram_size", "3"]) == 2
    error = capsys.readouterr().err
    assert "--span_masking and --max_ngram_size" in error and error.count("\n") == 1
    assert create_main(argv + ["--output_dir", str(tmp_path / "out")]) == 0
    from bert_data.format.manifest import Manifest

    assert Manifest.read(str(tmp_path / "out")).option("span_masking") is True
