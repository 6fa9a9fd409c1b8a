"""--output_format hdf5 / parquet: the instances the TFRecord output holds for the same options and
seed, shard by shard and in order, read with the peers' own libraries (h5py as NVIDIA's
``pretraining_dataset`` reads it, pyarrow and Hugging Face ``datasets``); our readers give every
format back as TFRecord's columns; same bytes for any number of workers, after --resume, and
the format's options checked before any work."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from bert_data.config import ConfigError
from bert_data.format.manifest import Manifest
from bert_data.format.layout import feature_specs
from bert_data.format.output_formats import ShardOptions, get_format
from bert_data.run.run_files import Interrupted
from bert_data.run.resolve import generate

from tests.helpers.format_runs import (FORMAT_RUNS, LAYOUTS, MPP, MSL, expected_rows, make_runs, run_config, shard_files,
                         tfrecord_columns)
from tests.helpers.interruptions import interrupted_at_append

NVIDIA_KEYS = ["input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
               "next_sentence_labels"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return make_runs(tmp_path_factory.mktemp("formats"))


def hashes(directory: Path):
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(directory.iterdir())
            if path.is_file() and path.name != "data_params.json"}


# ------------------------------------------------------------------------------ HDF5 (NVIDIA)

class NvidiaPretrainingDataset:
    """NVIDIA DeepLearningExamples' ``pretraining_dataset`` (PyTorch/LanguageModeling/BERT,
    run_pretraining.py) as it reads a file: every dataset loaded whole by its key, one instance
    an index, masked-LM labels -1 but at the positions before the first 0 position."""

    def __init__(self, input_file, max_pred_length):
        import h5py

        self.max_pred_length = max_pred_length
        f = h5py.File(input_file, "r")
        self.inputs = [np.asarray(f[key][:]) for key in NVIDIA_KEYS]
        f.close()

    def __len__(self):
        return len(self.inputs[0])

    def __getitem__(self, index):
        import torch

        [input_ids, input_mask, segment_ids, masked_lm_positions, masked_lm_ids, next_sentence_labels] = [
            torch.from_numpy(input[index].astype(np.int64)) if indice < 5 else
            torch.from_numpy(np.asarray(input[index].astype(np.int64))) for indice, input in enumerate(self.inputs)]
        masked_lm_labels = torch.ones(input_ids.shape, dtype=torch.long) * -1
        index = self.max_pred_length
        padded_mask_indices = (masked_lm_positions == 0).nonzero()
        if len(padded_mask_indices) != 0:
            index = padded_mask_indices[0].item()
        masked_lm_labels[masked_lm_positions[:index]] = masked_lm_ids[:index]
        return [input_ids, segment_ids, input_mask, masked_lm_labels, next_sentence_labels]


@pytest.mark.parametrize("layout", ["nsp", "sop"])
def test_hdf5_feeds_nvidias_reader_the_tfrecord_instances(runs, layout):
    for path, columns in zip(shard_files(runs[layout]["hdf5"], "hdf5"), tfrecord_columns(runs[layout]["tfrecord"])):
        dataset = NvidiaPretrainingDataset(str(path), MPP)
        assert len(dataset) == len(columns["input_ids"]) > 0
        for i in range(len(dataset)):
            input_ids, segment_ids, input_mask, masked_lm_labels, next_sentence_labels = dataset[i]
            assert input_ids.tolist() == columns["input_ids"][i].tolist()
            assert segment_ids.tolist() == columns["segment_ids"][i].tolist()
            assert input_mask.tolist() == columns["input_mask"][i].tolist()
            assert next_sentence_labels.item() == columns["next_sentence_labels"][i, 0]
            labels = [-1] * MSL
            for position, token, weight in zip(columns["masked_lm_positions"][i], columns["masked_lm_ids"][i],
                                               columns["masked_lm_weights"][i]):
                if weight:
                    labels[position] = int(token)
            assert masked_lm_labels.tolist() == labels


def test_hdf5_datasets_have_nvidias_types_and_compression(runs):
    import h5py

    with h5py.File(shard_files(runs["nsp"]["hdf5"], "hdf5")[0], "r") as f:
        assert sorted(f) == sorted(NVIDIA_KEYS)  # masked_lm_weights is the reader's to derive
        assert {key: f[key].dtype.str for key in f} == {
            "input_ids": "<i4", "input_mask": "|i1", "segment_ids": "|i1", "masked_lm_positions": "<i4",
            "masked_lm_ids": "<i4", "next_sentence_labels": "|i1"}
        assert f["input_ids"].shape[1] == MSL and f["masked_lm_ids"].shape[1] == MPP
        assert f["next_sentence_labels"].ndim == 1
        assert all(f[key].compression == "gzip" for key in f)


@pytest.mark.parametrize("layout, keys", [("mlm", ["input_ids", "input_mask", "masked_lm_ids", "masked_lm_positions"]),
                                          ("unmasked", ["input_ids", "input_mask"])])
def test_hdf5_of_mlm_only_and_unmasked_data_holds_the_layouts_features(runs, layout, keys):
    import h5py

    for path, columns in zip(shard_files(runs[layout]["hdf5"], "hdf5"), tfrecord_columns(runs[layout]["tfrecord"])):
        with h5py.File(path, "r") as f:
            assert sorted(f) == keys
            for key in keys:
                assert np.array_equal(f[key][:], columns[key])


# ------------------------------------------------------------------------------ Parquet (Hugging Face)

@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_parquet_rows_are_the_tfrecord_instances_in_transformers_names(runs, layout):
    import pyarrow.parquet as pq

    sentence_order = layout == "sop"
    for path, columns in zip(shard_files(runs[layout]["parquet"], "parquet"),
                             tfrecord_columns(runs[layout]["tfrecord"])):
        rows = pq.read_table(path).to_pylist()
        assert rows == expected_rows(columns, sentence_order)
        chunk = pq.ParquetFile(path).metadata.row_group(0).column(0)
        assert chunk.compression == "ZSTD"


def test_parquet_names_per_task(runs):
    import pyarrow.parquet as pq

    names = {layout: pq.read_schema(shard_files(runs[layout]["parquet"], "parquet")[0]).names for layout in LAYOUTS}
    assert names == {
        "nsp": ["input_ids", "token_type_ids", "attention_mask", "labels", "next_sentence_label"],
        "sop": ["input_ids", "token_type_ids", "attention_mask", "labels", "sentence_order_label"],
        "mlm": ["input_ids", "attention_mask", "labels"],
        "unmasked": ["input_ids", "attention_mask"],
    }


def test_parquet_through_datasets_load_dataset(runs, tmp_path):
    datasets = pytest.importorskip("datasets")
    files = [str(path) for path in shard_files(runs["nsp"]["parquet"], "parquet")]
    loaded = datasets.load_dataset("parquet", data_files=files, split="train", cache_dir=str(tmp_path / "hf"))
    expected = [row for columns in tfrecord_columns(runs["nsp"]["tfrecord"]) for row in expected_rows(columns, False)]
    assert loaded.num_rows == len(expected)
    assert loaded.to_list() == expected


# ------------------------------------------------------------------------------ every instance format

@pytest.mark.parametrize("fmt", [name for name in FORMAT_RUNS if name != "tfrecord"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_our_readers_give_every_format_back_as_tfrecords_columns(runs, fmt, layout):
    reader = get_format(fmt).make_reader(ShardOptions(tuple(feature_specs(MSL, MPP))))
    for path, columns in zip(shard_files(runs[layout][fmt], fmt), tfrecord_columns(runs[layout]["tfrecord"])):
        batches = list(reader.read_columns(str(path), batch_size=50))
        assert sorted(batches[0]) == sorted(columns)
        for name, expected in columns.items():
            assert np.array_equal(np.concatenate([batch[name] for batch in batches]), expected), (fmt, layout, name)


@pytest.mark.parametrize("fmt", ["hdf5", "parquet", "mds"])
def test_manifest_records_the_format_and_the_shards(runs, fmt):
    manifest = Manifest.read(str(runs["nsp"][fmt]))
    reference = Manifest.read(str(runs["nsp"]["tfrecord"]))
    assert manifest.options["output_format"] == fmt
    assert list(manifest.examples_per_file.values()) == list(reference.examples_per_file.values())
    assert list(manifest.examples_per_file) == [path.name for path in shard_files(runs["nsp"][fmt], fmt)]
    assert manifest.bytes_per_file == {name: (runs["nsp"][fmt] / name).stat().st_size
                                       for name in manifest.examples_per_file}


@pytest.mark.parametrize("fmt", ["hdf5", "parquet", "mds"])
def test_same_bytes_with_two_workers(runs, fmt, tmp_path):
    corpus = runs["corpus"]
    generate(run_config(corpus, tmp_path / "two", fmt, FORMAT_RUNS[fmt], num_workers=2), progress=False)
    assert hashes(tmp_path / "two") == hashes(runs["nsp"][fmt])


def test_an_interrupted_run_resumes_to_the_same_bytes(runs, tmp_path):
    corpus = runs["corpus"]
    generate(run_config(corpus, tmp_path / "reference", "hdf5", "gzip", split_num=2), progress=False)
    with interrupted_at_append(2):  # Ctrl-C as the second unit is appended
        with pytest.raises(Interrupted) as stopped:
            generate(run_config(corpus, tmp_path / "out", "hdf5", "gzip", split_num=2), progress=False)
    assert stopped.value.kept.units == 1
    assert not list((tmp_path / "out").glob("*.hdf5"))  # no shard before the run is complete
    generate(run_config(corpus, tmp_path / "out", "hdf5", "gzip", split_num=2, resume=True), progress=False)
    assert hashes(tmp_path / "out") == hashes(tmp_path / "reference")


def test_a_second_run_refuses_to_mix_with_an_earlier_format_run(runs, tmp_path):
    corpus = runs["corpus"]
    generate(run_config(corpus, tmp_path / "out", "parquet"), progress=False)
    with pytest.raises(ConfigError, match="already holds output"):
        generate(run_config(corpus, tmp_path / "out", "hdf5"), progress=False)
    generate(run_config(corpus, tmp_path / "out", "hdf5", overwrite=True), progress=False)
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [
        "data_params.json", "examples-1.hdf5", "examples-2.hdf5", "examples-3.hdf5"]


@pytest.mark.parametrize("options, message", [
    (dict(output_format="csv"), "--output_format must be one of tfrecord, hdf5, parquet, mds"),
    (dict(output_format="hdf5", compression="zlib"), "--compression must be gzip for --output_format hdf5, got 'zlib'"),
    (dict(output_format="parquet", compression="zlib"), "--compression must be snappy, zstd or gzip for --output_format"),
    (dict(output_format="tfrecord", compression="zstd"), "--compression must be gzip or zlib for --output_format"),
    (dict(output_format="megatron", compression="gzip"), "--output_format megatron has no --compression"),
    (dict(output_format="parquet", v2_feature_names=True), "--v2_feature_names names TFRecord features"),
    (dict(output_format="mds", output_files=["a.mds"]), "--output_format mds writes a directory"),
])
def test_format_options_are_checked_before_any_work(runs, tmp_path, options, message):
    corpus = runs["corpus"]
    config = run_config(corpus, tmp_path / "out", **{"fmt": options.pop("output_format"), **options})
    with pytest.raises(ConfigError) as error:
        config.validate()
    assert message in str(error.value)
    assert not (tmp_path / "out").exists()


def test_command_line_writes_the_format(runs, tmp_path):
    import subprocess
    import sys

    corpus = runs["corpus"]
    out = tmp_path / "out"
    command = [sys.executable, "-m", "bert_data.cli.create_tfrecords", "--metadata_files", str(corpus.metadata),
               "--input_files_prefix", str(corpus.root), "--vocab_file", str(corpus.vocab), "--do_lower_case",
               "--max_seq_length", str(MSL), "--max_predictions_per_seq", str(MPP), "--dupe_factor", "2",
               "--num_output_files", "3", "--seed", "7", "--num_workers", "1", "--output_dir", str(out),
               "--output_format", "parquet", "--compression", "zstd", "--quiet"]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert hashes(out) == hashes(runs["nsp"]["parquet"])
    bad = subprocess.run(command[:-5] + ["--output_format", "hdf5", "--compression", "zstd"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "--compression must be gzip for --output_format hdf5, got 'zstd'" in bad.stderr


@pytest.mark.parametrize("fmt", ["parquet", "mds"])  # (HDF5's fixed per-file overhead swamps tiny shards)
def test_megabytes_per_file_sizes_the_formats_own_files(runs, fmt, tmp_path):
    """The count of shards comes from a sample shard written as the format writes it
    (compressed as it compresses), not from TFRecord's size: a target of a quarter of the
    format's own output gives about four shards."""
    total = sum(path.stat().st_size for path in shard_files(runs["nsp"][fmt], fmt))
    summary = generate(run_config(runs["corpus"], tmp_path / "out", fmt, FORMAT_RUNS[fmt],
                                  megabytes_per_file=total / 4 / 1e6), progress=False)
    sizes = list(summary.manifests["train"]["bytes_per_file"].values())
    assert 3 <= len(sizes) <= 5, (total, sizes)


def test_packed_rows_in_hdf5_are_the_packed_tfrecord_rows(runs, tmp_path):
    """--pack_sequences in HDF5: every column of the packed layout (positions, the pair task's
    positions and weights) as its own dataset, the TFRecord rows of the same run."""
    import h5py

    for fmt in ("tfrecord", "hdf5"):
        generate(run_config(runs["corpus"], tmp_path / fmt, fmt, pack_sequences=True), progress=False)
    for path, columns in zip(shard_files(tmp_path / "hdf5", "hdf5"), tfrecord_columns(tmp_path / "tfrecord")):
        with h5py.File(path, "r") as f:
            assert set(f) == set(columns)  # weights kept: they say which instance each prediction is of
            assert "positions" in f and f["next_sentence_labels"].ndim == 2
        batches = list(get_format("hdf5").make_reader().read_columns(str(path)))
        for name, expected in columns.items():
            assert np.array_equal(np.concatenate([batch[name] for batch in batches]), expected), name
    with pytest.raises(ConfigError, match="--pack_sequences packs instances"):
        run_config(runs["corpus"], tmp_path / "megatron", "megatron", pack_sequences=True).validate()
