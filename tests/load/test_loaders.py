"""Loaders: the tf.data pipeline, the numpy reader and the PyTorch adapter agree record by record."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bert_data
from bert_data.format.layout import FEATURE_NAMES, feature_specs
from bert_data.format.dataset import dataset_info, infer_specs, layout_flags, resolve_shards, shard_sets
from bert_data.format.manifest import Manifest
from bert_data.load import read_batches, read_examples
from bert_data.run.resolve import generate
from bert_data.format.tfrecord import CorruptRecordError

from tests.helpers.corpus import corpus_config

MSL, MPP = 64, 10


@pytest.fixture(scope="module")
def out(synthetic_corpus, tmp_path_factory):
    directory = tmp_path_factory.mktemp("loaders_out")
    generate(corpus_config(synthetic_corpus, directory, max_seq_length=MSL, max_predictions_per_seq=MPP),
             progress=False)
    return directory


@pytest.fixture(scope="module")
def reference(out):
    """Every record, through TensorFlow's own reader and Google's parse spec (independent of our codec)."""
    import tensorflow as tf
    from bert_data.format.layout import tf_feature_description

    files = [str(out / f"examples-{i}.tfrecords") for i in (1, 2, 3)]
    spec = tf_feature_description(MSL, MPP)
    parts = {name: [] for name in FEATURE_NAMES}
    for batch in tf.data.TFRecordDataset(files).batch(10_000).map(lambda r: tf.io.parse_example(r, spec)):
        for name in FEATURE_NAMES:
            parts[name].append(batch[name].numpy())
    return {name: np.concatenate(p) for name, p in parts.items()}


def stack(batches):
    batches = list(batches)
    return {name: np.concatenate([np.asarray(b[name]) for b in batches]) for name in FEATURE_NAMES}


def stack_rows(rows):
    rows = list(rows)
    return {name: np.stack([np.asarray(r[name]) for r in rows]) for name in FEATURE_NAMES}


def manifest(out):
    return json.loads((out / "data_params.json").read_text())


# ------------------------------------------------------------------------------- numpy reader


def test_read_examples_matches_tensorflow(out, reference):
    rows = list(read_examples(out))
    assert len(rows) == manifest(out)["n_examples"] == len(reference["input_ids"])
    for i, row in enumerate(rows):
        assert set(row) == set(FEATURE_NAMES)
        for name in FEATURE_NAMES:
            np.testing.assert_array_equal(row[name], reference[name][i], err_msg=f"record {i} {name}")
    assert rows[0]["input_ids"].dtype == np.int64 and rows[0]["input_ids"].shape == (MSL,)
    assert rows[0]["masked_lm_weights"].dtype == np.float32 and rows[0]["masked_lm_positions"].shape == (MPP,)
    assert rows[0]["next_sentence_labels"].shape == (1,)


def test_read_batches_sizes_and_options(out, reference):
    n = len(reference["input_ids"])
    batches = list(read_batches(out, batch_size=100))
    assert [len(b["input_ids"]) for b in batches] == [100] * (n // 100) + ([n % 100] if n % 100 else [])
    np.testing.assert_array_equal(stack(batches)["segment_ids"], reference["segment_ids"])
    dropped = list(read_batches(out, batch_size=100, drop_remainder=True))
    assert len(dropped) == n // 100
    cast = next(read_batches(out, batch_size=10, int32=True, invert_input_mask=True))
    assert cast["input_ids"].dtype == np.int32 and cast["masked_lm_weights"].dtype == np.float32
    np.testing.assert_array_equal(cast["input_mask"], 1 - reference["input_mask"][:10])


def test_paths_patterns_and_layout(out, tmp_path):
    files = [str(out / f"examples-{i}.tfrecords") for i in (1, 2, 3)]
    assert resolve_shards(out) == files
    assert resolve_shards(str(out / "examples-*.tfrecords")) == files
    assert resolve_shards(",".join(files[::-1])) == files[::-1]
    assert resolve_shards([Path(f) for f in files[:2]]) == files[:2]
    info = dataset_info(out)
    assert (info.max_seq_length, info.max_predictions_per_seq, info.layout_source) == (MSL, MPP, "manifest")
    with pytest.raises(ValueError, match="do not match the data"):
        dataset_info(out, 128, 20)
    with pytest.raises(ValueError, match="matches no file"):
        resolve_shards(str(out / "nothing-*.tfrecords"))
    assert info.names == list(FEATURE_NAMES) and info.masked and not info.mlm_only
    assert isinstance(info.manifest, Manifest) and info.manifest.n_examples == manifest(out)["n_examples"]
    assert info.manifest_path == str(out / "data_params.json") and info.vocab_file() == manifest(out)["vocab_file"]
    group, = shard_sets(out)
    assert isinstance(group.manifest, Manifest) and group.files == files and group.unlisted == []
    assert all(info.compression(f) is None for f in files)
    # A lone file, without manifest: the layout comes from its first record.
    lone = tmp_path / "lone.tfrecords"
    shutil.copy(files[1], lone)
    info = dataset_info(lone)
    assert (info.max_seq_length, info.max_predictions_per_seq, info.layout_source) == (MSL, MPP, "first record")
    assert sum(1 for _ in read_examples(lone)) == manifest(out)["examples_per_file"]["examples-2.tfrecords"]
    flags = layout_flags(infer_specs(lone))
    assert (flags["max_seq_length"], flags["max_predictions_per_seq"]) == (MSL, MPP)
    assert infer_specs(lone) == feature_specs(MSL, MPP)
    # An output directory with a validation split names its splits.
    split = tmp_path / "split"
    (split / "train").mkdir(parents=True)
    (split / "val").mkdir()
    for sub in ("train", "val"):
        shutil.copy(out / "data_params.json", split / sub / "data_params.json")
    with pytest.raises(ValueError, match="train/val split"):
        resolve_shards(split)


def test_reader_reports_corruption(out, tmp_path):
    shard = tmp_path / "examples-1.tfrecords"
    data = bytearray((out / "examples-1.tfrecords").read_bytes())
    data[len(data) // 2] ^= 0x10
    shard.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError, match="examples-1.tfrecords: record"):
        list(read_examples(shard, MSL, MPP))


def test_numpy_reader_does_not_import_tensorflow(out):
    code = (
        "import sys, bert_data\n"
        f"n = sum(1 for _ in bert_data.read_examples({str(out)!r}))\n"
        "print(n, 'tensorflow' in sys.modules, 'torch' in sys.modules, 'google.protobuf' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == [str(manifest(out)["n_examples"]), "False", "False", "False"]


def test_stages_rebatch_shuffle_and_share():
    from bert_data.load.stages import reader_share, rebatched, shuffled, unbatched

    chunks = [{"x": np.arange(a, b), "y": np.arange(a, b) * 2} for a, b in ((0, 5), (5, 6), (6, 17))]
    sizes = [len(b["x"]) for b in rebatched(iter(chunks), 4)]
    assert sizes == [4, 4, 4, 4, 1] and [len(b["x"]) for b in rebatched(iter(chunks), 4, True)] == [4] * 4
    assert np.concatenate([b["x"] for b in rebatched(iter(chunks), 3)]).tolist() == list(range(17))
    assert [int(row["y"]) for row in unbatched(iter(chunks))] == [2 * i for i in range(17)]
    mixed = list(shuffled(iter(chunks), 6, np.random.default_rng(0)))
    got = np.concatenate([b["x"] for b in mixed])
    assert sorted(got.tolist()) == list(range(17)) and got.tolist() != list(range(17))
    assert all((b["y"] == 2 * b["x"]).all() for b in mixed)  # rows move whole
    files = ["a", "b", "c"]
    assert reader_share(files, 1, 2, "file") == (["b"], None)
    shared, keep = reader_share(files, 1, 2, "record", order=[2, 0, 1])
    assert shared == ["c", "a", "b"] and [i for i in range(6) if keep(i)] == [1, 3, 5]
    assert reader_share(files, 0, 4)[0] == files  # auto: fewer shards than readers, by record
    assert reader_share(files, 0, 1) == (files, None)


def test_package_exports():
    import bert_data.load as load
    from bert_data.load.dynamic_masks import dynamic_masking
    from bert_data.tokenizers.wordpiece import WordPieceTokenizer

    assert load.dynamic_masking is bert_data.dynamic_masking is dynamic_masking
    assert load.read_batches is bert_data.read_batches and load.load_dataset is bert_data.load_dataset
    assert bert_data.WordPieceTokenizer is WordPieceTokenizer and "WordPieceTokenizer" in bert_data.__all__


# ------------------------------------------------------------------------------- tf.data


def test_load_dataset_eval_matches_numpy_reader(out, reference):
    d = bert_data.load_dataset(out, MSL, MPP, batch_size=7, is_training=False)
    batches = list(d.as_numpy_iterator())
    got = stack(batches)
    numpy_rows = stack(read_batches(out, batch_size=1000, int32=True))
    assert len(got["input_ids"]) == len(reference["input_ids"])  # every record once, last batch short
    assert len(batches[-1]["input_ids"]) == (len(reference["input_ids"]) % 7 or 7)
    for name in FEATURE_NAMES:
        assert got[name].dtype == numpy_rows[name].dtype, name
        np.testing.assert_array_equal(got[name], numpy_rows[name], err_msg=name)
    assert got["input_ids"].dtype == np.int32 and got["masked_lm_weights"].dtype == np.float32


def test_load_dataset_training(out, reference):
    import tensorflow as tf
    d = bert_data.load_dataset(str(out / "*.tfrecords"), batch_size=16, is_training=True, seed=7)
    spec = d.element_spec
    assert spec["input_ids"].shape == (16, MSL) and spec["masked_lm_positions"].shape == (16, MPP)
    assert spec["input_ids"].dtype == tf.int32 and spec["masked_lm_weights"].dtype == tf.float32
    n = len(reference["input_ids"])
    steps = n // 16 + 5  # repeats past one epoch
    first = [b["input_ids"] for b in d.take(steps).as_numpy_iterator()]
    rebuilt = bert_data.load_dataset(str(out / "*.tfrecords"), batch_size=16, is_training=True, seed=7)
    again = [b["input_ids"] for b in rebuilt.take(steps).as_numpy_iterator()]
    assert len(first) == steps
    known = {row.tobytes() for row in reference["input_ids"].astype(np.int32)}
    assert all(row.tobytes() in known for batch in first for row in batch)
    # Shuffled: not file order; seeded: a dataset built again gives the same stream.
    assert not np.array_equal(np.concatenate(first)[:64], reference["input_ids"][:64])
    np.testing.assert_array_equal(np.concatenate(first), np.concatenate(again))


def test_load_dataset_options(out, reference):
    import tensorflow as tf
    d = bert_data.load_dataset(out, batch_size=32, is_training=False, invert_input_mask=True, int32=False)
    batch = next(iter(d))
    assert batch["input_ids"].dtype == tf.int64
    np.testing.assert_array_equal(batch["input_mask"].numpy(), 1 - reference["input_mask"][:32])
    # One input pipeline of three gets the second shard.
    context = tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=1)
    d = bert_data.load_dataset(out, batch_size=1000, is_training=False, input_context=context)
    got = stack(d.as_numpy_iterator())
    second = stack(read_batches(out / "examples-2.tfrecords", batch_size=1000))
    np.testing.assert_array_equal(got["input_ids"], second["input_ids"])
    d = bert_data.load_dataset(out, batch_size=1000, is_training=False, drop_remainder=True)
    assert sum(1 for _ in d) == len(reference["input_ids"]) // 1000
    with pytest.raises(ValueError, match="do not match"):
        bert_data.load_dataset(out, 128, 20, batch_size=8)


# ------------------------------------------------------------------------------- PyTorch


def test_torch_dataset_import_is_lazy():
    code = ("import sys, bert_data, bert_data.load, bert_data.load.torch_data, bert_data.load.arrays\n"
            "print('torch' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_torch_dataset_without_torch(out, monkeypatch):
    from bert_data.load import torch_data

    monkeypatch.setattr(torch_data, "_TORCH_CLASS", None)
    monkeypatch.setitem(sys.modules, "torch", None)  # as if torch were not installed
    with pytest.raises(ImportError, match="needs PyTorch"):
        bert_data.TorchDataset(out)


def test_torch_dataset(out, reference):
    import torch
    from torch.utils.data import DataLoader, IterableDataset

    from bert_data.load.torch_data import TorchDataset

    assert bert_data.TorchDataset is TorchDataset and issubclass(TorchDataset, IterableDataset)
    n = len(reference["input_ids"])
    all_rows = sorted(row.tobytes() for row in reference["input_ids"])

    # One process: file order, records identical to the reference.
    rows = stack_rows(TorchDataset(out))
    for name in FEATURE_NAMES:
        np.testing.assert_array_equal(rows[name], reference[name], err_msg=name)

    # DataLoader workers: by file (3 shards, 2 workers) and by record; every record exactly once.
    for split_by in ("file", "record"):
        loader = DataLoader(TorchDataset(out, split_by=split_by), batch_size=50, num_workers=2)
        batches = list(loader)
        assert batches[0]["input_ids"].dtype == torch.int64 and batches[0]["masked_lm_weights"].dtype == torch.float32
        got = torch.cat([b["input_ids"] for b in batches]).numpy()
        assert sorted(row.tobytes() for row in got) == all_rows, split_by

    # The split is deterministic: reader g of G gets shards g, g+G, ... or records i % G == g.
    ds = TorchDataset(out, split_by="record")
    counts = []
    for g in range(2):
        files, keep = ds.assignment(g, 2)
        assert len(files) == 3 and keep(g) and not keep(g + 1)
        counts.append(sum(1 for i in range(n) if keep(i)))
    assert abs(counts[0] - counts[1]) <= 1
    assert TorchDataset(out).assignment(1, 2)[0] == [str(out / "examples-2.tfrecords")]

    # Ranks (as with DistributedDataParallel): rank 1 of 2, by record.
    rank1 = stack_rows(TorchDataset(out, split_by="record", rank=1, world_size=2))
    np.testing.assert_array_equal(rank1["input_ids"], reference["input_ids"][1::2])

    # Pre-batched, shuffled, int32, inverted mask; set_epoch changes the order, seed fixes it.
    ds = TorchDataset(out, batch_size=64, shuffle_buffer=300, seed=3, int32=True, invert_input_mask=True,
                      drop_remainder=True)
    epoch0 = list(DataLoader(ds, batch_size=None))
    assert all(b["input_ids"].shape == (64, MSL) for b in epoch0) and len(epoch0) == n // 64
    assert epoch0[0]["input_ids"].dtype == torch.int32
    again = list(DataLoader(ds, batch_size=None))
    ds.set_epoch(1)
    epoch1 = list(DataLoader(ds, batch_size=None))
    first = torch.cat([b["input_ids"] for b in epoch0]).numpy()
    assert np.array_equal(first, torch.cat([b["input_ids"] for b in again]).numpy())
    assert not np.array_equal(first, torch.cat([b["input_ids"] for b in epoch1]).numpy())
    assert not np.array_equal(first, reference["input_ids"][: len(first)])
    assert {row.tobytes() for row in first} <= {row.tobytes() for row in reference["input_ids"].astype(np.int32)}
    mask = torch.cat([b["input_mask"] for b in epoch0]).numpy()
    lengths = (1 - mask).sum(axis=1)
    assert set(lengths) <= set(reference["input_mask"].sum(axis=1))


def test_load_dataset_without_tensorflow_names_the_extra(out, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # as if TensorFlow were not installed
    with pytest.raises(ImportError, match=r"load_dataset needs TensorFlow, which is not installed .*"
                                          r"pip install 'bert_data\[tf\]'"):
        bert_data.load_dataset(out)


def test_load_dataset_prints_no_buffer_size_notice(out):
    """TensorFlow logs a notice for every file read with a non-default buffer_size."""
    code = ("import sys\nfrom bert_data import load_dataset\n"
            "for batch in load_dataset(sys.argv[1], batch_size=4, seed=1).take(3): pass\n"
            "for batch in load_dataset(sys.argv[1], batch_size=4, is_training=False).take(3): pass\n")
    result = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "buffer size" not in result.stderr and "buffer_size" not in result.stderr
