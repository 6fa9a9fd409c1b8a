"""--pack_sequences in Parquet and MDS: a packed run's rows, read by Hugging Face ``datasets``
(Parquet) and MosaicML ``streaming.StreamingDataset`` (MDS), are exactly the packed TFRecord
rows of the same options and seed (same instances, order and labels) in transformers' packed
row model (``position_ids`` from 0 at each instance, per-instance pair labels with their
positions); our own readers give the TFRecord columns back; and a tiny transformers BERT runs on
a batch of packed Parquet rows, each instance's logits those of the instance alone."""

from __future__ import annotations

import numpy as np
import pytest

from bert_data.config import ConfigError
from bert_data.format.dataset import infer_specs, read_instance_columns
from bert_data.run.resolve import generate

from tests.helpers.corpus import make_corpus
from tests.helpers.format_runs import MSL, run_config, shard_files, tfrecord_columns
from tests.helpers.streaming import read_with_streaming

LAYOUTS = {"nsp": dict(), "sop": dict(sentence_order_prediction=True), "mlm": dict(mlm_only=True)}
FORMATS = {"tfrecord": None, "parquet": "zstd", "mds": "zstd"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("packed_formats")
    corpus = make_corpus(root / "corpus", n_docs=12, seed=5, min_sentences=4, max_sentences=14)
    runs = {"corpus": corpus}
    for layout, options in LAYOUTS.items():
        for fmt, compression in FORMATS.items():
            out = root / layout / fmt
            generate(run_config(corpus, out, fmt, compression, pack_sequences=True, short_seq_prob=0.3, **options),
                     progress=False)
            runs[(layout, fmt)] = out
    runs["streamed"] = read_with_streaming([runs[(layout, "mds")] for layout in LAYOUTS],
                                           tmp_path_factory.mktemp("packed_streaming"))
    return runs


def expected_packed_rows(columns, pair_label):
    """By hand from packed TFRecord columns: each row's tokens without padding, its position
    ids, labels -100 but at its predictions, and per instance its pair label and [CLS] position."""
    rows = []
    for r in range(len(columns["input_ids"])):
        real = columns["input_mask"][r] > 0
        row = {"input_ids": columns["input_ids"][r][real].tolist(),
               "position_ids": columns["positions"][r][real].tolist()}
        if "segment_ids" in columns:
            row["token_type_ids"] = columns["segment_ids"][r][real].tolist()
        labels = np.full(columns["input_ids"].shape[1], -100)
        used = columns["masked_lm_weights"][r] > 0
        labels[columns["masked_lm_positions"][r][used]] = columns["masked_lm_ids"][r][used]
        row["labels"] = labels[real].tolist()
        if "next_sentence_labels" in columns:
            instances = columns["next_sentence_weights"][r] > 0
            assert instances.sum() == columns["input_mask"][r].max()
            row[pair_label] = columns["next_sentence_labels"][r][instances].tolist()
            row["next_sentence_positions"] = columns["next_sentence_positions"][r][instances].tolist()
        rows.append(row)
    return rows


def tfrecord_rows(runs, layout):
    label = "sentence_order_label" if layout == "sop" else "next_sentence_label"
    shards = tfrecord_columns(runs[(layout, "tfrecord")])
    rows = [row for columns in shards for row in expected_packed_rows(columns, label)]
    assert len(rows) > 10 and any(row["position_ids"].count(0) > 1 for row in rows)  # rows hold several instances
    return rows


@pytest.mark.parametrize("layout", LAYOUTS)
def test_parquet_rows_read_by_datasets_are_the_packed_tfrecord_rows(runs, layout):
    datasets = pytest.importorskip("datasets")
    files = [str(path) for path in shard_files(runs[(layout, "parquet")], "parquet")]
    loaded = datasets.load_dataset("parquet", data_files=files, split="train")
    expected = tfrecord_rows(runs, layout)
    assert set(loaded.column_names) == set(expected[0])  # no attention_mask: position_ids tell instances apart
    assert [dict(row) for row in loaded] == expected


@pytest.mark.parametrize("layout", LAYOUTS)
def test_mds_samples_read_by_streaming_are_the_packed_tfrecord_rows(runs, layout):
    read = runs["streamed"][runs[(layout, "mds")]]
    expected = tfrecord_rows(runs, layout)
    assert read["length"] == len(expected)
    assert read["samples"] == expected
    assert read["last"] == expected[-1]


@pytest.mark.parametrize("fmt", ["parquet", "mds"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_our_readers_give_the_packed_tfrecord_columns_back(runs, layout, fmt):
    for tfrecord, path, columns in zip(shard_files(runs[(layout, "tfrecord")], "tfrecord"),
                                       shard_files(runs[(layout, fmt)], fmt), tfrecord_columns(runs[(layout, "tfrecord")])):
        batches = list(read_instance_columns(str(path), infer_specs(str(tfrecord)), batch_size=7))
        assert set(batches[0]) == set(columns)
        for name, expected in columns.items():
            assert np.array_equal(np.concatenate([batch[name] for batch in batches]), expected), name


def test_megatron_still_refuses_packing(runs, tmp_path):
    with pytest.raises(ConfigError, match="--pack_sequences packs instances .* holds the tokenized corpus"):
        run_config(runs["corpus"], tmp_path / "megatron", "megatron", pack_sequences=True).validate()


def test_a_tiny_bert_runs_on_packed_parquet_rows_with_position_ids(runs):
    datasets = pytest.importorskip("datasets")
    transformers = pytest.importorskip("transformers")
    import torch

    files = [str(path) for path in shard_files(runs[("nsp", "parquet")], "parquet")]
    rows = datasets.load_dataset("parquet", data_files=files, split="train").select(range(6))
    padded = {name: np.zeros((len(rows), MSL), dtype=np.int64) for name in ("input_ids", "token_type_ids", "position_ids")}
    for i, row in enumerate(rows):
        for name in padded:
            padded[name][i, :len(row[name])] = row[name]
    lengths = np.array([len(row["input_ids"]) for row in rows])
    real = np.arange(MSL)[None, :] < lengths[:, None]
    instance = np.where(real, np.cumsum(real & (padded["position_ids"] == 0), axis=1), 0)  # 1..k, 0 on padding
    attention = (instance[:, :, None] == instance[:, None, :]) & (instance[:, None, :] != 0)
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=int(max(max(row["input_ids"]) for row in rows)) + 1, hidden_size=32,
                                     num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                     max_position_embeddings=MSL)
    model = transformers.BertForPreTraining(config).eval()
    tensor = torch.as_tensor
    labels = np.full((len(rows), MSL), -100)
    for i, row in enumerate(rows):
        labels[i, :len(row["labels"])] = row["labels"]
    with torch.no_grad():
        out = model(input_ids=tensor(padded["input_ids"]), token_type_ids=tensor(padded["token_type_ids"]),
                    position_ids=tensor(padded["position_ids"]), attention_mask=tensor(attention[:, None]),
                    labels=tensor(labels))
        assert torch.isfinite(out.prediction_logits).all()
        for i, row in enumerate(rows):
            starts = list(row["next_sentence_positions"]) + [len(row["input_ids"])]
            assert len(starts) - 1 == len(row["next_sentence_label"]) == instance[i].max()
            for start, end in zip(starts[:-1], starts[1:]):
                alone = model(input_ids=tensor(padded["input_ids"][i:i + 1, start:end]),
                              token_type_ids=tensor(padded["token_type_ids"][i:i + 1, start:end])).prediction_logits[0]
                torch.testing.assert_close(out.prediction_logits[i, start:end], alone, atol=1e-5, rtol=1e-4)

