"""Recipes after BERT: MLM-only windows, load-time masking, n-gram masking, v2 names, compression.

Every layout is read back with TensorFlow's own reader and parser, using the feature spec the
manifest records.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from bert_data.config import ConfigError, GeneratorConfig
from bert_data.format.layout import tf_feature_description
from bert_data.format.manifest import Manifest
from bert_data.run.resolve import generate

from tests.helpers.corpus import file_hashes, make_corpus
from tests.helpers.interruptions import interrupted_at_append

MSL, MPP = 48, 8


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("recipes"), n_docs=30, min_sentences=8, max_sentences=25)


def run(corpus, output, **options):
    settings = dict(metadata_files=[str(corpus.metadata)], input_files_prefix=str(corpus.root),
                    vocab_file=str(corpus.vocab), do_lower_case=True, max_seq_length=MSL, max_predictions_per_seq=MPP,
                    dupe_factor=2, split_num=12, num_output_files=2, output_dir=str(output), num_workers=1, seed=3)
    settings.update(options)
    manifest = generate(GeneratorConfig(**settings), progress=False).manifests["train"]
    return manifest


def read(output, manifest, compression=None):
    """All records through tf.data with the layout and compression the manifest names."""
    spec = tf_feature_description(0, 0, specs=Manifest.from_json(manifest).specs)
    files = sorted(str(p) for p in Path(output).glob("*.tfrecords"))
    kind = {"gzip": "GZIP", "zlib": "ZLIB"}.get(compression or manifest.get("compression"), "")
    dataset = tf.data.TFRecordDataset(files, compression_type=kind).batch(1024).map(
        lambda records: tf.io.parse_example(records, spec))
    columns = {}
    for batch in dataset:
        for name, value in batch.items():
            columns.setdefault(name, []).append(value.numpy())
    return {name: np.concatenate(parts) for name, parts in columns.items()}


def vocab(corpus):
    return corpus.vocab.read_text().split("\n")[:-1]


def restore(columns, row, ids_name="input_ids"):
    ids = columns[ids_name][row].copy()
    if "masked_lm_weights" in columns:
        k = int(columns["masked_lm_weights"][row].sum())
        ids[columns["masked_lm_positions"][row, :k]] = columns["masked_lm_ids"][row, :k]
    return ids[: int(columns["input_mask"][row].sum())]


def flat_documents(corpus):
    return {label: [t for s in sentences for t in s] for label, sentences in corpus.documents.items()}


def find_run(haystack, needle):
    return any(haystack[i : i + len(needle)] == needle for i in range(len(haystack) - len(needle) + 1))


def test_mlm_only_windows(corpus, tmp_path):
    manifest = run(corpus, tmp_path, mlm_only=True, short_seq_prob=0.0)
    assert list(manifest["features"]) == ["input_ids", "input_mask", "masked_lm_positions", "masked_lm_ids",
                                          "masked_lm_weights"]
    columns = read(tmp_path, manifest)
    tokens, flat = vocab(corpus), flat_documents(corpus)
    assert len(columns["input_ids"]) == manifest["n_examples"] > 100
    lengths = columns["input_mask"].sum(axis=1)
    assert (lengths <= MSL).all() and (lengths == MSL).mean() > 0.6  # windows fill the sequence
    covered = {label: set() for label in flat}
    for row in range(len(lengths)):
        words = [tokens[i] for i in restore(columns, row)]
        assert words[0] == "[CLS]" and words[-1] == "[SEP]" and "[SEP]" not in words[1:-1]
        (label,) = corpus.document_of(words[1:-1])
        assert find_run(flat[label], words[1:-1])  # one contiguous run of one document
        covered[label].add(tuple(words[1:-1]))
    # The windows of a document cover it whole, each overlapping the next by max_seq_length / 4.
    for label, runs in covered.items():
        assert sum(len(r) for r in runs) >= len(flat[label])
    weights = columns["masked_lm_weights"]
    # Every window gets Google's budget exactly: round(15% of its tokens), at least 1, at most MPP.
    budget = np.minimum(MPP, np.maximum(1, np.rint(lengths * 0.15)))
    np.testing.assert_array_equal(weights.sum(axis=1), budget)


def test_mlm_only_across_documents_with_a_separator(corpus, tmp_path):
    # Windows run on from each document into the next of its unit; with the listed order kept,
    # "the next" is the next in the metadata file, which this test can check.
    manifest = run(corpus, tmp_path, mlm_only=True, allow_cross_document_examples=True, short_seq_prob=0.0,
                   keep_corpus_order=True)
    columns = read(tmp_path, manifest)
    tokens, flat = vocab(corpus), flat_documents(corpus)
    labels = list(corpus.documents)
    spanning = 0
    for row in range(len(columns["input_ids"])):
        words = [tokens[i] for i in restore(columns, row)]
        inner = words[1:-1]
        parts = " ".join(inner).split("[SEP]")
        runs = [part.split() for part in parts]
        spanning += len(runs) > 1
        # (A run cut at a window edge may hold only punctuation or pieces: no owner to check.)
        identified = [(run, corpus.document_of(run)) for run in runs if corpus.document_of(run)]
        owners = [owner for _, owner in identified]
        for run_tokens, owner in identified:
            (label,) = owner
            assert find_run(flat[label], run_tokens)
        # Consecutive documents of the unit, in metadata order.
        order = [labels.index(next(iter(owner))) for owner in owners]
        assert order == sorted(order) and all(b - a == 1 for a, b in zip(order, order[1:]))
        # The separator is never a prediction target.
        k = int(columns["masked_lm_weights"][row].sum())
        assert tokens.index("[SEP]") not in columns["masked_lm_ids"][row, :k].tolist()
    assert spanning > 10
    assert (columns["input_mask"].sum(axis=1) == MSL).mean() > 0.9  # few short leftovers


def test_unmasked_records_for_load_time_masking(corpus, tmp_path):
    manifest = run(corpus, tmp_path, mlm_only=True, disable_masking=True, dupe_factor=1)
    assert list(manifest["features"]) == ["input_ids", "input_mask"]
    columns = read(tmp_path, manifest)
    mask_id = vocab(corpus).index("[MASK]")
    assert not (columns["input_ids"] == mask_id).any()
    with pytest.raises(ConfigError, match="--dupe_factor 1"):
        run(corpus, tmp_path / "x", mlm_only=True, disable_masking=True)


def test_ngram_masking_takes_whole_word_spans(corpus, tmp_path):
    manifest = run(corpus, tmp_path, max_ngram_size=3)
    columns = read(tmp_path, manifest)
    tokens = vocab(corpus)
    is_piece = np.array([t.startswith("##") for t in tokens])
    multi_word_spans = 0
    for row in range(len(columns["input_ids"])):
        k = int(columns["masked_lm_weights"][row].sum())
        chosen = columns["masked_lm_positions"][row, :k].tolist()
        ids = restore(columns, row)
        special = {tokens.index("[CLS]"), tokens.index("[SEP]")}
        for position in chosen:  # whole words: a chosen piece's word (before it, [SEP] aside) is too
            earlier = [p for p in range(position) if ids[p] not in special]
            if is_piece[ids[position]] and earlier:  # (a piece first of all starts a word)
                assert earlier[-1] in chosen
        # A span is a run of adjacent chosen positions holding more than one word.
        run_words = 0
        for index, position in enumerate(chosen):
            adjacent = index and chosen[index - 1] == position - 1
            starts_word = not is_piece[ids[position]]
            run_words = (run_words + starts_word) if adjacent else 1
            multi_word_spans += run_words == 2
    assert multi_word_spans > 200
    lengths = columns["input_mask"].sum(axis=1)
    share = columns["masked_lm_weights"].sum() / lengths.sum()
    assert 0.10 < share < 0.16


def test_v2_feature_names(corpus, tmp_path):
    manifest = run(corpus, tmp_path, v2_feature_names=True)
    assert list(manifest["features"])[:3] == ["input_word_ids", "input_mask", "input_type_ids"]
    columns = read(tmp_path, manifest)
    reference = read(tmp_path / "v1", run(corpus, tmp_path / "v1"))
    np.testing.assert_array_equal(columns["input_word_ids"], reference["input_ids"])
    np.testing.assert_array_equal(columns["input_type_ids"], reference["segment_ids"])


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_compressed_shards_hold_the_same_records(corpus, tmp_path, compression):
    plain = tmp_path / "plain"
    run(corpus, plain)
    packed = tmp_path / compression
    manifest = run(corpus, packed, compression=compression, num_workers=2)
    assert manifest["compression"] == compression
    decompress = gzip.decompress if compression == "gzip" else zlib.decompress
    for name in manifest["examples_per_file"]:
        assert decompress((packed / name).read_bytes()) == (plain / name).read_bytes()
    columns = read(packed, manifest)
    assert len(columns["input_ids"]) == manifest["n_examples"]
    np.testing.assert_array_equal(columns["input_ids"], read(plain, manifest, compression="none")["input_ids"])
    assert sum(f.stat().st_size for f in packed.glob("*.tfrecords")) < 0.5 * sum(
        f.stat().st_size for f in plain.glob("*.tfrecords"))


@pytest.mark.parametrize("compression", [None, "zlib"])
def test_resume_continues_compressed_shards(corpus, tmp_path, compression):
    reference = tmp_path / "reference"
    run(corpus, reference, compression=compression)
    with interrupted_at_append(2, after=True), pytest.raises(KeyboardInterrupt):
        run(corpus, tmp_path / "out", compression=compression)
    run(corpus, tmp_path / "out", compression=compression, resume=True)
    assert file_hashes(tmp_path / "out") == file_hashes(reference)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(disable_masking=True, dupe_factor=1), "--disable_masking applies to --mlm_only data only"),
        (dict(overlap_size=4), "--overlap_size applies to --mlm_only data only"),
        (dict(allow_cross_document_examples=True), "--allow_cross_document_examples applies to --mlm_only"),
        (dict(mlm_only=True, overlap_size=46), "--overlap_size must be at least 0 and at most 45"),
        (dict(mlm_only=True, min_short_seq_length=5, overlap_size=8), "must exceed the window overlap 8"),
        (dict(max_ngram_size=0), "--max_ngram_size must be at least 1"),
        (dict(compression="bz2"), "--compression must be gzip or zlib"),
        (dict(mlm_only=True, allow_cross_document_examples=True, document_separator_token="[DOC]"),
         "--document_separator_token [DOC] is not in"),
    ],
)
def test_recipe_options_are_checked(corpus, tmp_path, options, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        run(corpus, tmp_path / "out", **options)
    assert not (tmp_path / "out").exists()  # refused before any work


def cerebras_feature_map(msl, mpp, mlm_only):
    """The map Cerebras's BertTfRecordsProcessor (modelzoo bert/input/utils.py parse_raw_tfrecord)
    parses with, written out here independently of bert_data.format.layout."""
    feature_map = {
        "input_ids": tf.io.FixedLenFeature([msl], tf.int64),
        "input_mask": tf.io.FixedLenFeature([msl], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([mpp], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([mpp], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([mpp], tf.float32),
    }
    if not mlm_only:
        feature_map["segment_ids"] = tf.io.FixedLenFeature([msl], tf.int64)
        feature_map["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
    return feature_map


@pytest.mark.parametrize("mlm_only", [False, True])
def test_cerebras_processor_feature_map_parses_every_record(corpus, tmp_path, mlm_only):
    manifest = run(corpus, tmp_path, mlm_only=mlm_only)
    files = sorted(str(p) for p in tmp_path.glob("*.tfrecords"))
    parsed = 0
    for batch in tf.data.TFRecordDataset(files).batch(512):
        example = tf.io.parse_example(batch, cerebras_feature_map(MSL, MPP, mlm_only))
        # As the processor does: int64 -> int32, input_mask inverted (1 on padding).
        inverted = tf.cast(tf.equal(tf.cast(example["input_mask"], tf.int32), 0), tf.int32).numpy()
        assert ((inverted == 0).sum(axis=1) >= 3).all()  # [CLS] ... [SEP] at least
        parsed += int(batch.shape[0])
    assert parsed == manifest["n_examples"]
