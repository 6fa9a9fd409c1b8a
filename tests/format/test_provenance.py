"""``--record_provenance``: every record's ``source_index`` and ``document_index``, in every
instance format, read by the format's own library (TensorFlow with Google's run_pretraining.py
feature spec, which ignores them; h5py; pyarrow; MosaicML streaming) and by our loaders; each
names the document the record's tokens came from.  ``bert-data inspect`` shows it and prints
the document."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bert_data.config import ConfigError
from bert_data.load import read_batches
from bert_data.run.resolve import generate
from bert_data.tokenizers.vocab import load_vocab as load_vocabulary

from tests.helpers.cli_runs import run_tools
from tests.helpers.corpus import corpus_config
from tests.helpers.sources import origin_of_tokens, sources_file, two_sources
from tests.helpers.streaming import read_with_streaming

MSL, MPP = 64, 10
FORMATS = ("tfrecord", "hdf5", "parquet", "mds")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("provenance")
    corpus, lists = two_sources(root / "corpus", n_docs=40, first=15, min_sentences=6, max_sentences=16,
                                words_per_doc=20)
    path = sources_file(root / "sources.toml", corpus, lists, {"weight": 1.0}, {"weight": 2.0})
    outputs = {}
    for fmt in FORMATS:
        outputs[fmt] = root / fmt
        generate(corpus_config(corpus, outputs[fmt], metadata_files=[], input_files_prefix="", sources=str(path),
                               record_provenance=True, output_format=fmt, split_num=8, num_output_files=2,
                               dupe_factor=1), progress=False)
    return corpus, lists, outputs


def restored_segment_a(columns, row, vocab):
    """Segment A of a record, its masked positions given back their original tokens."""
    ids = columns["input_ids"][row].copy()
    for position, original, weight in zip(columns["masked_lm_positions"][row], columns["masked_lm_ids"][row],
                                          columns["masked_lm_weights"][row]):
        if weight > 0:
            ids[position] = original
    tokens = vocab.convert_ids_to_tokens(ids[: int(columns["input_mask"][row].sum())])
    return tokens[1: tokens.index("[SEP]")]


@pytest.mark.parametrize("fmt", FORMATS)
def test_our_loaders_read_each_records_origin_and_it_names_the_document(runs, fmt):
    corpus, lists, outputs = runs
    vocab = load_vocabulary(str(corpus.vocab))
    seen = set()
    n = 0
    for columns in read_batches(str(outputs[fmt])):
        for row in range(len(columns["input_ids"])):
            origin = (int(columns["source_index"][row, 0]), int(columns["document_index"][row, 0]))
            assert origin == origin_of_tokens(corpus, lists, restored_segment_a(columns, row, vocab))
            seen.add(origin[0])
            n += 1
    manifest = json.loads((outputs[fmt] / "data_params.json").read_text())
    assert n == manifest["n_examples"] and seen == {0, 1}
    assert [entry["realized"]["instances"] for entry in manifest["per_source"]] == \
        [int(np.sum([1 for columns in read_batches(str(outputs[fmt]))
                     for value in columns["source_index"][:, 0] if value == index])) for index in (0, 1)]


def test_tfrecords_parse_with_googles_feature_spec_and_with_provenance(runs):
    tf = pytest.importorskip("tensorflow")
    _, _, outputs = runs
    files = sorted(str(path) for path in outputs["tfrecord"].glob("*.tfrecords"))
    google = {  # run_pretraining.py's input_fn_builder, as Google wrote it
        "input_ids": tf.io.FixedLenFeature([MSL], tf.int64), "input_mask": tf.io.FixedLenFeature([MSL], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([MSL], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([MPP], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([MPP], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([MPP], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64)}
    extended = dict(google, source_index=tf.io.FixedLenFeature([1], tf.int64),
                    document_index=tf.io.FixedLenFeature([1], tf.int64))
    parsed, sources = 0, set()
    for record in tf.data.TFRecordDataset(files):
        example = tf.io.parse_single_example(record, google)
        assert set(example) == set(google)
        sources.add(int(tf.io.parse_single_example(record, extended)["source_index"][0]))
        parsed += 1
    assert parsed > 0 and sources == {0, 1}


def test_hdf5_parquet_and_mds_hold_provenance_for_their_own_readers(runs, tmp_path):
    import h5py
    import pyarrow.parquet as pq

    _, _, outputs = runs
    ours = {fmt: np.concatenate([columns["document_index"][:, 0] for columns in read_batches(str(outputs[fmt]))])
            for fmt in ("hdf5", "parquet", "mds")}
    shards = sorted(outputs["hdf5"].glob("*.hdf5"))
    with h5py.File(shards[0], "r") as shard:
        assert shard["document_index"].dtype == np.int64 and shard["source_index"].ndim == 1
        first = shard["document_index"][:]
    assert np.array_equal(first, ours["hdf5"][: len(first)])
    table = pq.read_table(sorted(outputs["parquet"].glob("*.parquet"))[0])
    assert str(table.schema.field("source_index").type) == "int64"
    column = table.column("document_index").to_numpy()
    assert np.array_equal(column, ours["parquet"][: len(column)])
    read = read_with_streaming([str(outputs["mds"])], tmp_path)[str(outputs["mds"])]
    assert [sample["document_index"] for sample in read["samples"]] == ours["mds"].tolist()
    assert {sample["source_index"] for sample in read["samples"]} == {0, 1}
    assert read["types"]["source_index"] == "int"  # (streaming decodes int64 as a scalar; the peer makes it plain)


def test_inspect_shows_the_origin_and_prints_the_document(runs, capsys):
    corpus, lists, outputs = runs
    code, out, err = run_tools(["inspect", str(outputs["parquet"]), "-n", "2", "--show-document", "--json"], capsys)
    assert code == 0, err
    for line in out.strip().splitlines():
        record = json.loads(line)
        source, place = record["source_index"], record["document_index"]
        label = lists[source].read_text().split()[place]
        assert record["source"] == lists[source].stem
        assert record["document"]["label"].endswith(label)
        assert record["document"]["text"] == (corpus.root / label).read_text()
    code, out, _ = run_tools(["inspect", str(outputs["tfrecord"]), "-n", "1"], capsys)
    assert code == 0 and "from: source " in out


def test_provenance_without_sources_is_source_zero_and_the_listed_position(tmp_path):
    from tests.helpers.corpus import make_corpus

    corpus = make_corpus(tmp_path / "corpus", n_docs=12, min_sentences=6, max_sentences=12, words_per_doc=20)
    generate(corpus_config(corpus, tmp_path / "out", record_provenance=True, dupe_factor=1), progress=False)
    vocab = load_vocabulary(str(corpus.vocab))
    labels = corpus.metadata.read_text().split()
    for columns in read_batches(str(tmp_path / "out")):
        assert not columns["source_index"].any()
        for row in range(len(columns["input_ids"])):
            owner = corpus.document_of(restored_segment_a(columns, row, vocab)).pop()
            assert labels[int(columns["document_index"][row, 0])] == owner


@pytest.mark.parametrize("options, message", [
    (dict(pack_sequences=True), "--record_provenance marks each record with one document"),
    (dict(output_format="megatron"), "--record_provenance marks records; --output_format megatron"),
])
def test_provenance_refuses_what_it_cannot_mark(tmp_path, options, message):
    from tests.helpers.corpus import make_corpus

    corpus = make_corpus(tmp_path / "corpus", n_docs=4)
    with pytest.raises(ConfigError, match=message):
        generate(corpus_config(corpus, tmp_path / "out", record_provenance=True, **options), progress=False)


def test_the_torch_loader_carries_provenance(runs):
    _, _, outputs = runs
    expected = np.concatenate([columns["source_index"][:, 0] for columns in read_batches(str(outputs["hdf5"]))])
    pytest.importorskip("torch")
    from bert_data.load.torch_data import TorchDataset

    got = np.concatenate([batch["source_index"].numpy()[:, 0] for batch in TorchDataset(str(outputs["hdf5"]),
                                                                                          batch_size=16)])
    assert np.array_equal(got, expected)
