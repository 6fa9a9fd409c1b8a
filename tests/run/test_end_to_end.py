"""The whole generator, checked with TensorFlow's own reader and parser.

The synthetic corpus (tests/helpers/corpus.py) tells which tokens each document holds without our
tokenizer, so the records can be traced back to their documents.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from bert_data.config import GeneratorConfig
from bert_data.pipeline.documents.planner import is_validation_document
from bert_data.format.layout import FEATURE_NAMES, tf_feature_description
from bert_data.run.resolve import generate

from tests.helpers.corpus import file_hashes
from tests.helpers.run_imports import modules_a_run_imports

MSL, MPP = 64, 10
REPO = Path(__file__).resolve().parents[2]


def make_config(corpus, output_dir, **overrides) -> GeneratorConfig:
    options = dict(
        metadata_files=[str(corpus.metadata)], input_files_prefix=str(corpus.root), vocab_file=str(corpus.vocab),
        do_lower_case=True, max_seq_length=MSL, max_predictions_per_seq=MPP, dupe_factor=5, split_num=16,
        num_output_files=3, output_dir=str(output_dir), num_workers=1, seed=12345,
    )
    options.update(overrides)
    return GeneratorConfig(**options)


def read_with_tensorflow(paths, msl=MSL, mpp=MPP):
    """Every record through tf.data (which checks CRCs) and Google's run_pretraining.py spec."""
    spec = tf_feature_description(msl, mpp)
    dataset = tf.data.TFRecordDataset([str(p) for p in paths]).batch(4096).map(
        lambda records: tf.io.parse_example(records, spec)
    )
    columns = {name: [] for name in FEATURE_NAMES}
    for batch in dataset:
        for name in FEATURE_NAMES:
            columns[name].append(batch[name].numpy())
    return {name: np.concatenate(parts) for name, parts in columns.items()}


@pytest.fixture(scope="module")
def generated(synthetic_corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("out")
    config = make_config(synthetic_corpus, output)
    summary = generate(config, progress=False)
    shards = sorted(output.glob("*.tfrecords"))
    return config, summary.manifests["train"], read_with_tensorflow(shards), output


def vocab_tokens(corpus):
    return corpus.vocab.read_text(encoding="utf-8").split("\n")[:-1]


def test_layout_and_manifest(generated):
    config, manifest, columns, output = generated
    assert sorted(p.name for p in output.iterdir()) == sorted(
        [f"examples-{i}.tfrecords" for i in range(1, 4)] + ["data_params.json"]
    )
    on_disk = json.loads((output / "data_params.json").read_text())
    assert on_disk == manifest
    assert manifest["n_examples"] == len(columns["input_ids"]) > 2000
    assert manifest["n_docs"] == 60 and manifest["documents_skipped"]["count"] == 0
    for option in ("max_seq_length", "dupe_factor", "vocab_file", "masked_lm_prob", "seed"):
        assert manifest[option] == getattr(config, option)
    counts = list(manifest["examples_per_file"].values())
    assert max(counts) - min(counts) <= 4  # balanced shards
    for name, count in manifest["examples_per_file"].items():
        assert sum(1 for _ in tf.data.TFRecordDataset(str(output / name))) == count


def test_records_are_well_formed(generated):
    _, _, c, _ = generated
    ids, mask, segments = c["input_ids"], c["input_mask"], c["segment_ids"]
    lengths = mask.sum(axis=1)
    assert (ids[:, 0] == 4).all()  # [CLS]
    for row in range(len(ids)):
        n = lengths[row]
        assert (mask[row, :n] == 1).all() and (mask[row, n:] == 0).all() and (ids[row, n:] == 0).all()
        seps = np.nonzero(ids[row, :n] == 5)[0]
        assert len(seps) == 2 and seps[1] == n - 1
        assert (segments[row, : seps[0] + 1] == 0).all() and (segments[row, seps[0] + 1 : n] == 1).all()
        assert (segments[row, n:] == 0).all()
        k = int(c["masked_lm_weights"][row].sum())
        assert (c["masked_lm_weights"][row, :k] == 1).all() and (c["masked_lm_weights"][row, k:] == 0).all()
        positions = c["masked_lm_positions"][row, :k]
        assert (positions > 0).all() and (positions < n).all() and not np.isin(positions, seps).any()
        assert (np.diff(positions) > 0).all()
    assert set(np.unique(c["next_sentence_labels"])) == {0, 1}


def restored_segments(columns, row, tokens):
    ids = columns["input_ids"][row].copy()
    k = int(columns["masked_lm_weights"][row].sum())
    ids[columns["masked_lm_positions"][row, :k]] = columns["masked_lm_ids"][row, :k]
    n = int(columns["input_mask"][row].sum())
    words = [tokens[i] for i in ids[:n]]
    first_sep = words.index("[SEP]")
    return words[1:first_sep], words[first_sep + 1 : n - 1]


def find_run(haystack, needle):
    for start in range(len(haystack) - len(needle) + 1):
        if haystack[start : start + len(needle)] == needle:
            return start
    return -1


def test_decoded_tokens_reconstruct_the_input(generated, synthetic_corpus):
    _, _, columns, _ = generated
    tokens = vocab_tokens(synthetic_corpus)
    flat = {label: [t for s in sentences for t in s] for label, sentences in synthetic_corpus.documents.items()}
    for row in range(0, len(columns["input_ids"]), 7):
        a, b = restored_segments(columns, row, tokens)
        (doc_a,) = synthetic_corpus.document_of(a) or {None}
        start_a = find_run(flat[doc_a], a)
        assert start_a >= 0, (row, a)
        (doc_b,) = synthetic_corpus.document_of(b) or {None}
        start_b = find_run(flat[doc_b], b)
        assert start_b >= 0, (row, b)
        if columns["next_sentence_labels"][row, 0] == 0:
            assert doc_a == doc_b and start_b >= start_a + len(a)


def test_masking_and_nsp_statistics(generated, synthetic_corpus):
    _, _, c, _ = generated
    tokens = vocab_tokens(synthetic_corpus)
    mask_id = tokens.index("[MASK]")
    weights = c["masked_lm_weights"].astype(bool)
    lengths = c["input_mask"].sum(axis=1)
    expected = np.minimum(MPP, np.maximum(1, np.rint(lengths * 0.15)))
    assert (weights.sum(axis=1) <= expected).all()
    assert abs(weights.sum() / lengths.sum() - 0.15) < 0.01
    rows = np.broadcast_to(np.arange(len(weights))[:, None], weights.shape)[weights]
    now = c["input_ids"][rows, c["masked_lm_positions"][weights]]
    original = c["masked_lm_ids"][weights]
    masked, kept = (now == mask_id).mean(), (now == original).mean()
    assert abs(masked - 0.8) < 0.02 and abs(kept - 0.1) < 0.015 and abs(1 - masked - kept - 0.1) < 0.015
    special = {tokens.index(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "[unused1]")}
    replaced = now[(now != mask_id) & (now != original)]
    assert not special & set(replaced.tolist())
    assert abs(c["next_sentence_labels"].mean() - 0.5) < 0.07
    # Short targets: about one document pass in ten picks one, and such passes make more,
    # shorter instances; long documents otherwise fill the sequence.
    short = (lengths < MSL - 8).mean()
    assert 0.05 < short < 0.35


def test_same_bytes_for_one_and_two_workers(synthetic_corpus, tmp_path, generated):
    _, _, _, first = generated
    second = tmp_path / "two"
    generate(make_config(synthetic_corpus, second, num_workers=2), progress=False)
    assert file_hashes(first) == file_hashes(second)
    assert len(file_hashes(first)) == 3
    # The manifest too (but where it is), its files' SHA-256 included (issue 28): they depend on the bytes alone.
    manifests = [dict(json.loads((run / "data_params.json").read_text()), output_dir=None) for run in (first, second)]
    assert manifests[0] == manifests[1] and len(manifests[0]["sha256_per_file"]) == 3
    third = tmp_path / "other-seed"
    generate(make_config(synthetic_corpus, third, seed=1), progress=False)
    assert file_hashes(third) != file_hashes(first)


def test_whole_word_masking_never_splits_a_word(synthetic_corpus, tmp_path):
    generate(make_config(synthetic_corpus, tmp_path, mask_whole_word=True, dupe_factor=2), progress=False)
    columns = read_with_tensorflow(sorted(tmp_path.glob("*.tfrecords")))
    tokens = vocab_tokens(synthetic_corpus)
    is_piece = np.array([t.startswith("##") for t in tokens])
    pieces_masked = 0
    for row in range(len(columns["input_ids"])):
        k = int(columns["masked_lm_weights"][row].sum())
        chosen = set(columns["masked_lm_positions"][row, :k].tolist())
        ids = columns["input_ids"][row].copy()
        ids[columns["masked_lm_positions"][row, :k]] = columns["masked_lm_ids"][row, :k]
        n = int(columns["input_mask"][row].sum())
        for position in range(2, n - 1):
            if is_piece[ids[position]] and tokens[ids[position - 1]] != "[SEP]":
                # A piece and the token before it are one word: both masked or neither.
                assert (position in chosen) == (position - 1 in chosen), row
                pieces_masked += position in chosen
    assert pieces_masked > 100


def test_train_and_validation_are_disjoint_by_document(synthetic_corpus, tmp_path):
    config = make_config(synthetic_corpus, tmp_path, val_fraction=0.25, dupe_factor=2)
    summary = generate(config, progress=False)
    tokens = vocab_tokens(synthetic_corpus)
    seen = {}
    for split in ("train", "val"):
        directory = tmp_path / split
        assert (directory / "data_params.json").exists()
        assert len(list(directory.glob("examples-*.tfrecords"))) == 3
        columns = read_with_tensorflow(sorted(directory.glob("*.tfrecords")))
        assert len(columns["input_ids"]) == summary.manifests[split]["n_examples"] > 0
        docs = set()
        for row in range(len(columns["input_ids"])):
            a, b = restored_segments(columns, row, tokens)
            docs |= synthetic_corpus.document_of(a) | synthetic_corpus.document_of(b)
        seen[split] = docs
    assert not seen["train"] & seen["val"]
    expected_val = {label for label in synthetic_corpus.documents
                    if is_validation_document(label, config.val_seed, 0.25)}
    assert seen["val"] == expected_val
    assert summary.manifests["val"]["n_docs"] == len(expected_val)
    # Validation has one mask per instance (dupe 1), train has dupe_factor passes.
    ratio = summary.manifests["train"]["n_examples"] / summary.manifests["val"]["n_examples"]
    docs_ratio = (60 - len(expected_val)) / len(expected_val)
    assert 1.2 * docs_ratio < ratio < 3 * docs_ratio


def test_generation_never_imports_tensorflow(synthetic_corpus, tmp_path):
    assert modules_a_run_imports(synthetic_corpus, tmp_path, ["tensorflow"], "--num_workers", "2",
                                 "--split_num", "20") == []
    assert len(list(tmp_path.glob("*.tfrecords"))) == 10


def test_help_is_fast_and_imports_nothing_heavy():
    script = (
        "import sys, contextlib, io\n"
        "from bert_data.cli.create_tfrecords import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n"
        "        main(['--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "assert '--metadata_files' in out.getvalue() and '--num_workers' in out.getvalue()\n"
        "print(sorted(m for m in ('tensorflow', 'spacy', 'numpy', 'tokenizers') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_documents_split_into_parts_give_the_same_bytes(synthetic_corpus, tmp_path, monkeypatch, generated):
    """Large documents are tokenized in parallel parts; cut at paragraph breaks, the parts
    change nothing in the output."""
    import bert_data.pipeline.documents.planner as planner

    _, _, _, whole = generated
    planned = []
    original = planner.plan_corpus

    def plan_in_small_parts(*args, **kwargs):
        corpus = original(*args, part_bytes=1500, **kwargs)
        planned.extend(corpus.slices)
        return corpus

    monkeypatch.setattr(planner, "plan_corpus", plan_in_small_parts)
    generate(make_config(synthetic_corpus, tmp_path), progress=False)
    assert sum(source.continues for slice_ in planned for source in slice_.sources) > 20
    assert file_hashes(tmp_path) == file_hashes(whole)


def test_a_blank_part_of_a_large_document_is_not_a_skipped_document(tmp_path, monkeypatch):
    import bert_data.pipeline.documents.planner as planner
    from tests.helpers.corpus import make_corpus

    corpus = make_corpus(tmp_path / "c", n_docs=3, min_sentences=30, max_sentences=40)
    first = corpus.root / "docs" / "doc000.txt"
    text = first.read_text()
    first.write_text(text + " " * 5000 + "\n\n" + text)  # a run of white space longer than a part
    original = planner.plan_corpus
    monkeypatch.setattr(planner, "plan_corpus", lambda *a, **k: original(*a, part_bytes=1500, **k))
    manifest = generate(make_config(corpus, tmp_path / "out"), progress=False).manifests["train"]
    assert manifest["documents_skipped"]["count"] == 0 and manifest["n_docs"] == 3
