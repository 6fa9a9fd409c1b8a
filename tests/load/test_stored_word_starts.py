"""Word starts stored with the records (``--store_word_starts``) for a tokenizer whose pieces show
none: a BPE ``tokenizer.json`` on a Whitespace pre-tokenizer, no ``##``/``▁``/``Ġ`` mark, trained
here.  At generation the tokenizer's own words (its pre-tokenizer's) ride with the ids through
pairing and truncation; whole-word and span masks never split one, at generation and at load
time, in every instance format (TFRecord, HDF5, Parquet, MDS), packed or not; each format's own
library reads the ``word_starts`` column, and Google's feature spec still parses the TFRecords."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from bert_data.config import ConfigError, GeneratorConfig
from bert_data.format.manifest import Manifest
from bert_data.load import read_batches
from bert_data.pipeline.masking import MaskingSpec
from bert_data.run.resolve import generate, resolve
from bert_data.tokenizers import HUGGINGFACE, TokenizerSource, load_vocabulary, make_tokenizer
from bert_data.tools.verify import verify

from tests.helpers.corpus import corpus_config, make_corpus

tokenizers = pytest.importorskip("tokenizers")

FORMATS = ("tfrecord", "hdf5", "parquet", "mds")
MSL, MPP = 64, 20


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("starts_corpus"), n_docs=10, min_sentences=6, max_sentences=16)


@pytest.fixture(scope="module")
def tokenizer_file(corpus, tmp_path_factory):
    """A BPE tokenizer.json whose pieces carry no word mark: a small vocabulary, so that most
    words are several pieces."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tokenizer.train(sorted(str(path) for path in (corpus.root / "docs").iterdir()), trainer)
    path = tmp_path_factory.mktemp("starts_tokenizer") / "bpe.json"
    tokenizer.save(str(path))
    return path


def source_of(path) -> TokenizerSource:
    return TokenizerSource(HUGGINGFACE, str(path))


def test_the_tokenizer_shows_no_marks_and_says_its_words(tokenizer_file, corpus):
    """The test tokenizer is one the marks cannot serve, and ``encode_flat_words`` gives its
    pre-tokenizer's words: the pieces between two starts spell one word."""
    tokenizer = make_tokenizer(source_of(tokenizer_file))
    assert tokenizer.vocab.word_boundary is None
    lines = (corpus.root / sorted(corpus.documents)[0]).read_text(encoding="utf-8").split("\n")
    texts = [lines[0], "", lines[1] + " " + lines[2]]
    ids, lengths, starts = tokenizer.encode_flat_words(texts)
    assert np.array_equal(ids, np.concatenate([tokenizer.encode_one(text) for text in texts]))
    assert lengths.tolist() == [len(tokenizer.encode_one(text)) for text in texts]
    pieces = [piece for text in texts for piece in tokenizer.tokenize(text)]
    words = ["".join(pieces[a:b]) for a, b in zip(np.flatnonzero(starts), [*np.flatnonzero(starts)[1:], len(pieces)])]
    expected = [word for text in texts for word, _ in tokenizer._tk.pre_tokenizer.pre_tokenize_str(text.lower())]
    assert words == expected
    assert len(pieces) > len(words)  # words of several pieces: something to split


def test_whole_words_without_marks_or_stored_starts_are_refused(tokenizer_file, corpus, tmp_path):
    vocab = load_vocabulary(source_of(tokenizer_file))
    with pytest.raises(ValueError, match="--store_word_starts"):
        MaskingSpec.for_vocab(vocab, masked_lm_prob=0.15, max_predictions_per_seq=20, whole_word=True)
    MaskingSpec.for_vocab(vocab, stored_word_starts=True, masked_lm_prob=0.15, max_predictions_per_seq=20, span=True)
    # At generation the run stores them by itself (and says so in its options)...
    spec = resolve(config_of(corpus, tokenizer_file, tmp_path / "a", "tfrecord", mask_whole_word=True))
    assert spec.word_starts and spec.options["store_word_starts"] is True
    assert spec.output.features[-1].name == "word_starts"
    # ... not for token masks, nor for a tokenizer with marks.
    assert not resolve(config_of(corpus, tokenizer_file, tmp_path / "b", "tfrecord")).word_starts
    assert not resolve(corpus_config(corpus, tmp_path / "c", mask_whole_word=True)).word_starts
    with pytest.raises(ConfigError, match="--store_word_starts"):
        GeneratorConfig(**{**config_of(corpus, tokenizer_file, tmp_path / "d", "megatron").as_dict(),
                           "store_word_starts": True, "mlm_only": True, "disable_masking": True}).validate()


def config_of(corpus, tokenizer_file, out, fmt, **options):
    return corpus_config(corpus, out, vocab_file=None, tokenizer_file=str(tokenizer_file), do_lower_case=False,
                         output_format=fmt, max_seq_length=MSL, max_predictions_per_seq=MPP, num_output_files=1,
                         seed=3, **options)


@pytest.fixture(scope="module")
def masked_runs(corpus, tokenizer_file, tmp_path_factory):
    """(strategy, format, packed) -> pair data masked at generation, word starts stored by itself."""
    runs = {}
    for strategy, option in (("whole_word", {"mask_whole_word": True}), ("span", {"span_masking": True})):
        for packed in (False, True):
            root = tmp_path_factory.mktemp(f"masked-{strategy}-{packed}")
            extra = dict(pack_sequences=True, max_sequences_per_pack=3, short_seq_prob=0.5,
                         min_short_seq_length=20) if packed else {}
            for fmt in FORMATS:
                runs[strategy, fmt, packed] = out = root / fmt
                generate(config_of(corpus, tokenizer_file, out, fmt, **option, **extra), progress=False)
    return runs


@pytest.fixture(scope="module")
def unmasked_runs(corpus, tokenizer_file, tmp_path_factory):
    """(format, packed) -> unmasked MLM-only data with stored word starts, for load-time masks."""
    runs = {}
    for packed in (False, True):
        root = tmp_path_factory.mktemp(f"unmasked-{packed}")
        extra = dict(pack_sequences=True, max_sequences_per_pack=3, short_seq_prob=0.5,
                     min_short_seq_length=20) if packed else {}
        for fmt in FORMATS:
            runs[fmt, packed] = out = root / fmt
            generate(config_of(corpus, tokenizer_file, out, fmt, mlm_only=True, disable_masking=True, dupe_factor=1,
                               store_word_starts=True, **extra), progress=False)
    return runs


@pytest.fixture(scope="module")
def oracle(corpus, tokenizer_file):
    """Every document tokenized whole by the tokenizer itself: its ids and word starts end to end
    (-1 between documents), and where each run of 6 ids occurs."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    ids, starts = [], []
    for label in sorted(corpus.documents):
        encoding = tokenizer.encode((corpus.root / label).read_text(encoding="utf-8"), add_special_tokens=False)
        words = np.asarray(encoding.word_ids)
        ids += encoding.ids + [-1]
        starts += [1] + (words[1:] != words[:-1]).astype(int).tolist() + [0]
    ids, starts = np.asarray(ids), np.asarray(starts)
    index = {}
    for at in range(len(ids) - 5):
        index.setdefault(tuple(ids[at:at + 6]), []).append(at)
    return ids, starts, index


def read_all(directory, **options):
    return next(read_batches(str(directory), batch_size=100_000, canonical_names=True, **options))


def chosen_and_original(batch):
    ids = batch["input_ids"]
    used = batch["masked_lm_weights"] > 0
    rows = np.broadcast_to(np.arange(len(ids))[:, None], used.shape)
    chosen = np.zeros(ids.shape, dtype=bool)
    chosen[rows[used], batch["masked_lm_positions"][used]] = True
    original = ids.copy()
    original[rows[used], batch["masked_lm_positions"][used]] = batch["masked_lm_ids"][used]
    return chosen, original


def check_starts_are_the_tokenizers(original, word_starts, input_mask, vocab, oracle) -> int:
    """Each run of text tokens (between [CLS]/[SEP]s) is found in the documents tokenized whole,
    and its stored starts are the tokenizer's there (but for its first token, which truncation
    may have cut from its word).  Returns how many runs were checked."""
    ids, starts, index = oracle
    checked = 0
    text = (np.asarray(input_mask) > 0) & ~np.isin(original, [vocab.cls_id, vocab.sep_id])
    for row in range(len(original)):
        edges = np.flatnonzero(np.diff(np.concatenate([[0], text[row].astype(int), [0]])))
        for a, b in zip(edges[0::2], edges[1::2]):
            run = original[row, a:b]
            if len(run) < 6:
                continue
            found = [at for at in index.get(tuple(run[:6]), []) if np.array_equal(ids[at:at + len(run)], run)]
            assert found, f"row {row}: tokens {run.tolist()} are in no document"
            assert any(np.array_equal(starts[at + 1:at + len(run)], word_starts[row, a + 1:b]) for at in found), \
                (row, word_starts[row, a:b].tolist(), starts[found[0]:found[0] + len(run)].tolist())
            checked += 1
    return checked


def check_whole_words(chosen, original, word_starts, input_mask, vocab) -> int:
    """No word split: a continuation (stored start 0) is chosen exactly when the token before it
    is, where both can be masked.  Returns the chosen continuations."""
    candidate = (np.asarray(input_mask) > 0) & ~np.isin(original, [vocab.cls_id, vocab.sep_id])
    continues = candidate & (np.asarray(word_starts) == 0)
    joined = continues[:, 1:] & candidate[:, :-1]
    rows, cols = np.nonzero(joined)
    split = chosen[rows, cols + 1] != chosen[rows, cols]
    assert not split.any(), f"{split.sum()} words split, e.g. row {rows[split][0]} at {cols[split][0] + 1}"
    assert not (chosen & ~candidate).any()
    return int((chosen & continues).sum())


def vocabulary_of(directory):
    return load_vocabulary(TokenizerSource.from_manifest(Manifest.read(str(directory)), str(directory))[0])


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "packed"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_generated_masks_follow_the_stored_word_starts(masked_runs, oracle, fmt, packed):
    for strategy in ("whole_word", "span"):
        directory = masked_runs[strategy, fmt, packed]
        report = verify([str(directory)])
        assert report.ok, report.problems
        assert Manifest.read(str(directory)).option("store_word_starts") is True
        vocab = vocabulary_of(directory)
        batch = read_all(directory)
        chosen, original = chosen_and_original(batch)
        assert set(np.unique(batch["word_starts"])) == {0, 1}
        assert not batch["word_starts"][batch["input_mask"] == 0].any()  # padding: 0
        assert check_starts_are_the_tokenizers(original, batch["word_starts"], batch["input_mask"], vocab, oracle) > 20
        assert check_whole_words(chosen, original, batch["word_starts"], batch["input_mask"], vocab) > 10, strategy


def test_the_same_bytes_for_any_number_of_workers(corpus, tokenizer_file, masked_runs, tmp_path):
    again = tmp_path / "again"
    generate(config_of(corpus, tokenizer_file, again, "tfrecord", span_masking=True, num_workers=2), progress=False)
    first = masked_runs["span", "tfrecord", False]
    assert (first / "examples-1.tfrecords").read_bytes() == (again / "examples-1.tfrecords").read_bytes()


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "packed"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_load_time_masks_follow_the_stored_word_starts(unmasked_runs, oracle, fmt, packed):
    directory = unmasked_runs[fmt, packed]
    vocab = vocabulary_of(directory)
    stored = read_all(directory)
    assert "masked_lm_positions" not in stored
    assert (stored["input_mask"].max() > 1) == packed
    assert check_starts_are_the_tokenizers(stored["input_ids"], stored["word_starts"], stored["input_mask"], vocab,
                                           oracle) > 20
    runs = {}
    for strategy in ("whole_word", "ngram", "span"):
        batch = read_all(directory, mask={"seed": 1, "strategy": strategy, "rate": 0.3})
        chosen, original = chosen_and_original(batch)
        np.testing.assert_array_equal(original, stored["input_ids"])
        np.testing.assert_array_equal(batch["word_starts"], stored["word_starts"])
        assert check_whole_words(chosen, original, stored["word_starts"], stored["input_mask"], vocab) > 5, strategy
        runs[strategy] = chosen.sum()
    assert all(count > 0 for count in runs.values())


def test_load_time_whole_words_need_stored_starts_without_marks(corpus, tokenizer_file, tmp_path):
    out = tmp_path / "no-starts"
    generate(config_of(corpus, tokenizer_file, out, "tfrecord", mlm_only=True, disable_masking=True, dupe_factor=1),
             progress=False)
    assert "word_starts" not in read_all(out)
    read_all(out, mask={"seed": 1})  # single tokens need no words
    with pytest.raises(ValueError, match="--store_word_starts"):
        read_all(out, mask={"seed": 1, "strategy": "span"})


def test_tf_data_masks_with_the_stored_word_starts(unmasked_runs):
    tf = pytest.importorskip("tensorflow")
    from bert_data.load import load_dataset

    directory = unmasked_runs["tfrecord", False]
    mask = {"seed": 4, "strategy": "whole_word", "rate": 0.3}
    ours = next(read_batches(str(directory), batch_size=16, canonical_names=True, mask=mask))
    theirs = next(iter(load_dataset(str(directory), batch_size=16, is_training=False, mask=mask,
                                    canonical_names=True)))
    assert "word_starts" in theirs
    for name in ("input_ids", "masked_lm_positions", "masked_lm_ids", "word_starts"):
        np.testing.assert_array_equal(theirs[name].numpy(), ours[name])
    del tf


def test_each_format_s_own_library_reads_the_word_starts(masked_runs, tmp_path):
    tf = pytest.importorskip("tensorflow")
    import h5py
    import pyarrow.parquet as pq

    from tests.helpers.streaming import read_with_streaming

    ours = {fmt: read_all(masked_runs["whole_word", fmt, False]) for fmt in FORMATS}
    google = {"input_ids": tf.io.FixedLenFeature([MSL], tf.int64),
              "input_mask": tf.io.FixedLenFeature([MSL], tf.int64),
              "segment_ids": tf.io.FixedLenFeature([MSL], tf.int64),
              "masked_lm_positions": tf.io.FixedLenFeature([MPP], tf.int64),
              "masked_lm_ids": tf.io.FixedLenFeature([MPP], tf.int64),
              "masked_lm_weights": tf.io.FixedLenFeature([MPP], tf.float32),
              "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64)}
    files = [str(path) for path in sorted(masked_runs["whole_word", "tfrecord", False].glob("*.tfrecord*"))]
    starts = []
    for record in tf.data.TFRecordDataset(files):
        assert set(tf.io.parse_single_example(record, google)) == set(google)  # run_pretraining.py's spec
        extended = dict(google, word_starts=tf.io.FixedLenFeature([MSL], tf.int64))
        starts.append(tf.io.parse_single_example(record, extended)["word_starts"].numpy())
    np.testing.assert_array_equal(np.stack(starts), ours["tfrecord"]["word_starts"])
    with h5py.File(sorted(masked_runs["whole_word", "hdf5", False].glob("*.hdf5"))[0], "r") as shard:
        assert shard["word_starts"].dtype == np.int8
        np.testing.assert_array_equal(shard["word_starts"][:], ours["hdf5"]["word_starts"])
    table = pq.read_table(sorted(masked_runs["whole_word", "parquet", False].glob("*.parquet"))[0])
    lists = table.column("word_starts").to_pylist()
    assert [len(row) for row in lists] == [len(row) for row in table.column("input_ids").to_pylist()]
    np.testing.assert_array_equal(np.concatenate(lists), ours["parquet"]["word_starts"][ours["parquet"]["input_mask"] > 0])
    split = masked_runs["whole_word", "mds", False]
    read = read_with_streaming([str(split)], tmp_path)[str(split)]
    flat = np.concatenate([sample["word_starts"] for sample in read["samples"]])
    np.testing.assert_array_equal(flat, ours["mds"]["word_starts"][ours["mds"]["input_mask"] > 0])


@pytest.mark.parametrize("option", [{"mask_whole_word": True}, {"max_ngram_size": 3}, {"span_masking": True}])
def test_stored_starts_of_a_tokenizer_with_marks_give_the_masks_of_its_marks(corpus, tmp_path, option):
    """WordPiece with --store_word_starts: the starts are its ``##`` marks', and the records
    those of the run without the option, but for the added column."""
    plain, stored = tmp_path / "plain", tmp_path / "stored"
    generate(corpus_config(corpus, plain, num_output_files=1, **option), progress=False)
    generate(corpus_config(corpus, stored, num_output_files=1, store_word_starts=True, **option), progress=False)
    without, with_starts = read_all(plain), read_all(stored)
    assert sorted(with_starts) == sorted([*without, "word_starts"])
    for name in without:
        np.testing.assert_array_equal(with_starts[name], without[name], err_msg=name)
    vocab = vocabulary_of(stored)
    _, original = chosen_and_original(with_starts)
    text = (with_starts["input_mask"] > 0) & ~np.isin(original, [vocab.cls_id, vocab.sep_id])
    np.testing.assert_array_equal(with_starts["word_starts"] == 1, text & ~vocab.is_continuation[original])


@pytest.mark.parametrize("fmt", ["tfrecord", "parquet"])
def test_torch_and_resumable_readers_mask_with_the_stored_word_starts(unmasked_runs, fmt):
    pytest.importorskip("torch")
    from bert_data.load.torch_data import TorchDataset

    directory = unmasked_runs[fmt, True]
    vocab = vocabulary_of(directory)
    mask = {"seed": 6, "strategy": "span", "rate": 0.3}
    batches = [{name: value.numpy() for name, value in batch.items()}
               for batch in TorchDataset(str(directory), batch_size=32, mask=mask, canonical_names=True)]
    batches += list(read_batches(str(directory), batch_size=32, mask=mask, canonical_names=True, resumable=True,
                                 shuffle_buffer=16, seed=1))
    continued = 0
    for batch in batches:
        chosen, original = chosen_and_original(batch)
        continued += check_whole_words(chosen, original, batch["word_starts"], batch["input_mask"], vocab)
    assert continued > 5
