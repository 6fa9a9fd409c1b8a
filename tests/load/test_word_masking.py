"""Whole-word and span masks for every tokenizer (WordPiece ``##``, SentencePiece ``▁``,
byte-level BPE ``Ġ``, the last two trained here by build-vocab with the sentencepiece and
tokenizers libraries), at generation (``--mask_whole_word``, ``--span_masking``) and at load time
(``mask={"strategy": ...}``), in every instance format (TFRecord, HDF5, Parquet, MDS, read by
our readers), packed or not: never a word split; the rate and the 80/10/10 split as asked."""

from __future__ import annotations

import math
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from bert_data.cli.build_vocab import main as build_vocab_main
from bert_data.format.manifest import Manifest
from bert_data.load import read_batches
from bert_data.pipeline.packing import unpack_rows
from bert_data.run.resolve import generate
from bert_data.tokenizers import TokenizerSource, load_vocabulary
from bert_data.tools.verify import verify

from tests.helpers.corpus import corpus_config, make_corpus

pytest.importorskip("sentencepiece")
pytest.importorskip("tokenizers")

FORMATS = {"tfrecord": None, "hdf5": None, "parquet": None, "mds": None}
TOKENIZERS = ("wordpiece", "sentencepiece", "bpe")
MSL = 64


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("word_corpus"), n_docs=10, min_sentences=6, max_sentences=16)


@pytest.fixture(scope="module")
def tokenizer_options(corpus, tmp_path_factory):
    directory = tmp_path_factory.mktemp("word_tokenizers")
    common = ["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root), "--do_lower_case"]
    assert build_vocab_main(common + ["--model", "bpe", "--vocab_size", "400", "--out", str(directory / "bpe.json")]) == 0
    assert build_vocab_main(common + ["--model", "sentencepiece", "--vocab_size", "300",
                                      "--out", str(directory / "spm" / "m.model")]) == 0
    return {"wordpiece": dict(vocab_file=str(corpus.vocab), do_lower_case=True),
            "sentencepiece": dict(vocab_file=None, spm_model_file=str(directory / "spm" / "m.model"),
                                  do_lower_case=True),
            "bpe": dict(vocab_file=None, tokenizer_file=str(directory / "bpe.json"), do_lower_case=False)}


def make_run(corpus, tokenizer_options, root, tokenizer, fmt, **options):
    out = root / f"{tokenizer}-{fmt}"
    generate(corpus_config(corpus, out, output_format=fmt, compression=FORMATS[fmt], max_seq_length=MSL,
                           max_predictions_per_seq=20, num_output_files=1, seed=5,
                           **tokenizer_options[tokenizer], **options), progress=False)
    return out


@pytest.fixture(scope="module")
def masked_runs(corpus, tokenizer_options, tmp_path_factory):
    """(strategy, tokenizer, format) -> a run masked at generation."""
    runs = {}
    for strategy, option in (("whole_word", {"mask_whole_word": True}), ("ngram", {"max_ngram_size": 3}),
                             ("span", {"span_masking": True})):
        root = tmp_path_factory.mktemp(f"generated-{strategy}")
        for tokenizer in TOKENIZERS:
            for fmt in FORMATS:
                runs[strategy, tokenizer, fmt] = make_run(corpus, tokenizer_options, root, tokenizer, fmt, **option)
    return runs


@pytest.fixture(scope="module")
def unmasked_runs(corpus, tokenizer_options, tmp_path_factory):
    """(packed, tokenizer, format) -> unmasked MLM-only data, for load-time masks."""
    runs = {}
    for packed in (False, True):
        root = tmp_path_factory.mktemp(f"unmasked-{'packed' if packed else 'plain'}")
        extra = dict(pack_sequences=True, max_sequences_per_pack=3, short_seq_prob=0.5,
                     min_short_seq_length=20) if packed else {}
        for tokenizer in TOKENIZERS:
            for fmt in FORMATS:
                runs[packed, tokenizer, fmt] = make_run(corpus, tokenizer_options, root, tokenizer, fmt, mlm_only=True,
                                                        disable_masking=True, dupe_factor=1, **extra)
    return runs


def vocabulary_of(directory):
    return load_vocabulary(TokenizerSource.from_manifest(Manifest.read(str(directory)), str(directory))[0])


def read_all(directory, **options):
    return next(read_batches(str(directory), batch_size=100_000, canonical_names=True, **options))


def chosen_and_original(batch):
    """(chosen positions as a bool matrix, the token ids before masking)."""
    ids = batch["input_ids"]
    used = batch["masked_lm_weights"] > 0
    rows = np.broadcast_to(np.arange(len(ids))[:, None], used.shape)
    chosen = np.zeros(ids.shape, dtype=bool)
    chosen[rows[used], batch["masked_lm_positions"][used]] = True
    original = ids.copy()
    original[rows[used], batch["masked_lm_positions"][used]] = batch["masked_lm_ids"][used]
    return chosen, original


def check_whole_words(batch, vocab, special_ids=()):
    """No word is split: a piece that continues a word (by the vocabulary's marks) is chosen
    exactly when the token before it is, unless that token cannot be masked ([CLS], [SEP], an
    instance boundary).  Returns how many chosen pieces continue a word (so that the check has
    something to bite on) and the lengths, in words, of the runs of chosen words."""
    chosen, original = chosen_and_original(batch)
    real = np.asarray(batch["input_mask"]) > 0
    candidate = real & ~np.isin(original, [vocab.cls_id, vocab.sep_id, *special_ids])
    continues = vocab.is_continuation[original] & candidate
    joined = continues[:, 1:] & candidate[:, :-1]  # pairs (p - 1, p) of one word
    rows, cols = np.nonzero(joined)
    split = chosen[rows, cols + 1] != chosen[rows, cols]
    assert not split.any(), f"{split.sum()} words split, e.g. row {rows[split][0]} at {cols[split][0] + 1}"
    assert not (chosen & ~candidate).any()  # never [CLS], [SEP] or padding
    starts = candidate & ~(continues & np.concatenate([np.zeros((len(real), 1), bool), candidate[:, :-1]], axis=1))
    runs = []
    for row in range(len(chosen)):
        words = chosen[row][starts[row]]
        gaps = np.flatnonzero(np.diff(np.concatenate([[0], words.astype(int), [0]])))
        runs += list(gaps[1::2] - gaps[0::2])
    return int((chosen & continues).sum()), np.array(runs)


# ------------------------------------------------------------------ at generation


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("tokenizer", TOKENIZERS)
def test_generated_whole_word_and_span_masks_never_split_a_word(masked_runs, tokenizer, fmt):
    lengths = {}
    for strategy in ("whole_word", "ngram", "span"):
        directory = masked_runs[strategy, tokenizer, fmt]
        report = verify([str(directory)])
        assert report.ok, report.problems
        vocab = vocabulary_of(directory)
        batch = read_all(directory)
        continued, runs = check_whole_words(batch, vocab)
        assert continued > 10, (strategy, continued)
        lengths[strategy] = runs.mean()
        # Within the budget: round(15% of the tokens), at least 1, at most 20.
        k = batch["masked_lm_weights"].sum(axis=1)
        assert (k <= np.minimum(20, np.maximum(1, np.rint(batch["input_mask"].sum(axis=1) * 0.15)))).all()
        assert (k > 0).all()
    # Spans of several words (mean 3.8 before the budget clips them) against single words.
    # Runs of adjacent chosen words: about 1 / (1 - rate) for single words chosen at random.
    assert lengths["span"] > max(2.0, 1.5 * lengths["whole_word"]), lengths


def test_span_masking_at_generation_is_deterministic_and_recorded(masked_runs, corpus, tokenizer_options,
                                                                  tmp_path):
    again = make_run(corpus, tokenizer_options, tmp_path, "bpe", "tfrecord", span_masking=True)
    first = masked_runs["span", "bpe", "tfrecord"]
    assert (first / "examples-1.tfrecords").read_bytes() == (again / "examples-1.tfrecords").read_bytes()
    assert Manifest.read(str(first)).option("span_masking") is True


# ------------------------------------------------------------------ at load time


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "packed"])
@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("tokenizer", TOKENIZERS)
def test_load_time_whole_word_and_span_masks_never_split_a_word(unmasked_runs, tokenizer, fmt, packed):
    directory = unmasked_runs[packed, tokenizer, fmt]
    vocab = vocabulary_of(directory)
    stored = read_all(directory)
    assert "masked_lm_positions" not in stored
    assert (stored["input_mask"].max() > 1) == packed
    lengths = {}
    for strategy in ("whole_word", "ngram", "span"):
        batch = read_all(directory, mask={"seed": 1, "strategy": strategy, "rate": 0.3})
        _, original = chosen_and_original(batch)
        np.testing.assert_array_equal(original, stored["input_ids"])
        continued, runs = check_whole_words(batch, vocab)
        assert continued > 5, (strategy, continued)
        lengths[strategy] = runs.mean()
        instances = [instance for row in unpack_rows(batch) for instance in row] if packed else None
        if packed:  # masked instance by instance: each within its own budget, never its [CLS]
            for instance in instances:
                budget = max(1, round(len(instance["input_ids"]) * 0.3))
                assert 0 < len(instance["masked_lm_positions"]) <= budget
                assert 0 not in instance["masked_lm_positions"]
        else:
            k = batch["masked_lm_weights"].sum(axis=1)
            assert (k <= np.maximum(1, np.rint(stored["input_mask"].sum(axis=1) * 0.3))).all()
    # Runs of adjacent chosen words: about 1 / (1 - rate) for single words chosen at random.
    assert lengths["span"] > max(2.0, 1.5 * lengths["whole_word"]), lengths
    again = read_all(directory, mask={"seed": 1, "strategy": "span", "rate": 0.3})
    np.testing.assert_array_equal(again["input_ids"], batch["input_ids"])  # seeded
    other = read_all(directory, mask={"seed": 2, "strategy": "span", "rate": 0.3})
    assert not np.array_equal(other["masked_lm_positions"], batch["masked_lm_positions"])


def binomial_tolerance(p: float, n: int, sigmas: float = 5.0) -> float:
    """``sigmas`` standard deviations of a share estimated from ``n`` draws of probability ``p``
    (the seed is fixed, so the draw is the same every run: the bound only has to be honest)."""
    return sigmas * math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
def test_the_rate_and_the_replacement_shares(unmasked_runs, tokenizer):
    directory = unmasked_runs[False, tokenizer, "tfrecord"]
    vocab = vocabulary_of(directory)
    stored = read_all(directory)
    lengths = stored["input_mask"].sum(axis=1)
    for rate in (0.15, 0.3, 0.5):
        # Token masking: exactly round(rate * tokens) a row, never capped: the budget follows the rate.
        batch = read_all(directory, mask={"seed": 3, "rate": rate})
        assert batch["masked_lm_positions"].shape[1] == math.ceil(rate * MSL - 1e-9)
        np.testing.assert_array_equal(batch["masked_lm_weights"].sum(axis=1), np.maximum(1, np.rint(lengths * rate)))
        # Whole words and spans: the budget is spent to within a word, so the share of masked
        # tokens is the rate, a little under (a word that would overflow is not taken).
        for strategy in ("whole_word", "span"):
            batch = read_all(directory, mask={"seed": 3, "rate": rate, "strategy": strategy})
            share = batch["masked_lm_weights"].sum() / lengths.sum()
            assert rate - 0.03 < share <= rate + 0.5 / lengths.mean(), (rate, strategy, share)
    # The replacement shares: 80/10/10 by default, or as set; binomial bounds on a fixed seed.
    for shares in ({}, {"mask_token_share": 0.5, "random_token_share": 0.3}, {"mask_token_share": 1.0,
                                                                             "random_token_share": 0.0}):
        shown, before = [], []
        for seed in range(4):  # every token but [CLS] and [SEP], four times over
            batch = read_all(directory, mask={"seed": seed, "rate": 1.0, **shares})
            chosen, original = chosen_and_original(batch)
            shown.append(batch["input_ids"][chosen])
            before.append(original[chosen])
        shown, before = np.concatenate(shown), np.concatenate(before)
        n = len(shown)
        assert n > 6000
        mask_share = shares.get("mask_token_share", 0.8)
        random_share = shares.get("random_token_share", 0.1)
        masked = shown == vocab.mask_id
        kept = ~masked & (shown == before)
        replaced = ~masked & ~kept
        # (A random token equal to the original counts as kept: 1 in the vocabulary's size.)
        random_kept = random_share / len(vocab.ordinary_ids)
        for observed, expected in ((masked.mean(), mask_share), (kept.mean(), 1 - mask_share - random_share
                                                                 + random_kept),
                                   (replaced.mean(), random_share - random_kept)):
            assert abs(observed - expected) <= binomial_tolerance(max(expected, 1 / n), n) + 1e-12, \
                (shares, observed, expected)
        assert np.isin(shown[replaced], vocab.ordinary_ids).all()


def test_readers_agree_on_load_time_span_masks(unmasked_runs):
    from bert_data.load import load_dataset
    from bert_data.load.torch_data import TorchDataset

    directory = unmasked_runs[False, "sentencepiece", "tfrecord"]
    vocab = vocabulary_of(directory)
    mask = {"seed": 9, "strategy": "span", "rate": 0.3}
    numpy_batches = list(read_batches(str(directory), batch_size=16, mask=mask))
    tf_batches = list(load_dataset(str(directory), batch_size=16, is_training=False, int32=False,
                                   mask=mask).as_numpy_iterator())
    assert len(numpy_batches) == len(tf_batches) > 1
    for mine, theirs in zip(numpy_batches, tf_batches):
        for name in mine:
            np.testing.assert_array_equal(mine[name], theirs[name], err_msg=name)
    torch_batches = [{name: value.numpy() for name, value in batch.items()}
                     for batch in TorchDataset(str(directory), batch_size=16, mask=mask)]
    merged = {name: np.concatenate([b[name] for b in torch_batches]) for name in torch_batches[0]}
    assert check_whole_words(merged, vocab)[0] > 5
    # transformers' inputs: labels where the span masks are, -100 elsewhere.
    batch = next(read_batches(str(directory), batch_size=16, mask=mask, format="transformers"))
    np.testing.assert_array_equal(batch["labels"] != -100, chosen_and_original(numpy_batches[0])[0])


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_masked_data_is_masked_anew_from_its_original_tokens(masked_runs, fmt):
    directory = masked_runs["whole_word", "bpe", fmt]
    vocab = vocabulary_of(directory)
    static = read_all(directory)
    again = read_all(directory, mask={"seed": 0, "strategy": "span", "rate": 0.3})
    assert again["masked_lm_positions"].shape[1] == math.ceil(0.3 * MSL)
    np.testing.assert_array_equal(chosen_and_original(again)[1], chosen_and_original(static)[1])
    assert check_whole_words(again, vocab)[0] > 5
    assert again["masked_lm_weights"].sum() > 1.5 * static["masked_lm_weights"].sum()


def test_mask_options_that_do_not_fit_are_refused(unmasked_runs):
    from bert_data.load import dynamic_masking

    directory = str(unmasked_runs[False, "wordpiece", "tfrecord"])
    for options, message in (({"strategy": "words"}, "strategy must be one of"),
                             ({"strategy": "span", "max_ngram_size": 3}, "does not go with strategy='span'"),
                             ({"strategy": "token", "whole_word": True}, "does not go with strategy='token'"),
                             ({"rate": 0.2, "masked_lm_prob": 0.3}, "are the same option"),
                             ({"mask_token_share": 0.8, "random_token_share": 0.3}, "must be at most 1"),
                             ({"rate": 1.5}, r"rate must be in \(0, 1\]")):
        with pytest.raises(ValueError, match=message):
            next(read_batches(directory, mask={"seed": 0, **options}))
    vocab_file = str(Manifest.read(directory).option("vocab_file"))
    with pytest.raises(ValueError, match="pass max_predictions="):
        dynamic_masking(vocab_file=vocab_file, rate=0.3)
    masker = dynamic_masking(vocab_file=vocab_file, rate=0.3, max_predictions=7, strategy="span")
    assert masker.max_predictions_per_seq == 7 and masker.spec.strategy == "span"


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_packed_rows_masked_at_generation_and_again_at_load_time(corpus, tokenizer_options, tmp_path, fmt):
    """Span masks drawn at generation in packed rows stay inside their instance and never split a
    word; masked anew at load time, the same holds, instance by instance."""
    directory = make_run(corpus, tokenizer_options, tmp_path, "sentencepiece", fmt, span_masking=True,
                         pack_sequences=True, short_seq_prob=0.5)
    vocab = vocabulary_of(directory)
    static = read_all(directory)
    assert static["input_mask"].max() > 1
    for batch, rate, budget_cap in ((static, 0.15, 20), (read_all(directory, mask={"seed": 2, "strategy": "span",
                                                                                     "rate": 0.3}), 0.3, None)):
        assert check_whole_words(batch, vocab)[0] > 5
        for row in unpack_rows(batch):
            for instance in row:
                budget = max(1, round(len(instance["input_ids"]) * rate))
                assert 0 < len(instance["masked_lm_positions"]) <= min(budget, budget_cap or budget)
                positions = instance["masked_lm_positions"]
                assert 0 not in positions and (positions < len(instance["input_ids"]) - 1).all()
    np.testing.assert_array_equal(chosen_and_original(batch)[1], chosen_and_original(static)[1])


def test_tf_data_masks_masked_records_anew_as_the_numpy_reader_does(masked_runs):
    from bert_data.load import load_dataset

    directory = str(masked_runs["span", "bpe", "tfrecord"])
    mask = {"seed": 6, "strategy": "whole_word", "rate": 0.2}
    numpy_batches = list(read_batches(directory, batch_size=16, mask=mask, int32=True))
    tf_batches = list(load_dataset(directory, batch_size=16, is_training=False, mask=mask).as_numpy_iterator())
    assert len(numpy_batches) == len(tf_batches) > 1
    for mine, theirs in zip(numpy_batches, tf_batches):
        assert set(mine) == set(theirs)
        for name in mine:
            np.testing.assert_array_equal(mine[name], theirs[name], err_msg=name)
    static = read_all(directory)
    merged = {name: np.concatenate([b[name] for b in numpy_batches]) for name in numpy_batches[0]}
    np.testing.assert_array_equal(chosen_and_original(merged)[1], chosen_and_original(static)[1])
    assert merged["masked_lm_positions"].shape[1] == math.ceil(0.2 * MSL)
