"""bert-data verify, inspect and stats, and the numpy and PyTorch loaders, on every output format:
HDF5, Parquet and MDS give what the TFRecord output of the same run gives; damage is found;
Megatron's tokenized corpus is checked, shown and counted as a corpus."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import bert_data
from bert_data.tools.inspect import format_record, inspect_records
from bert_data.tools.stats import compute_stats
from bert_data.tools.verify import verify

from tests.helpers.format_runs import FORMAT_RUNS, make_runs, run_config, shard_files
from bert_data.run.resolve import generate

INSTANCE_FORMATS = ("hdf5", "parquet", "mds")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("format_tools")
    runs = make_runs(root, layouts={"nsp": {}})
    runs["megatron"] = root / "megatron"
    generate(run_config(runs["corpus"], runs["megatron"], "megatron"), progress=False)
    return runs


def damaged_copy(source, target, name, cut):
    import shutil

    shutil.copytree(source, target)
    path = target / name
    data = path.read_bytes()
    path.write_bytes(data[:cut(len(data))])
    return target


@pytest.mark.parametrize("fmt", INSTANCE_FORMATS + ("megatron",))
def test_verify_passes_every_format(runs, fmt):
    directory = runs[fmt] if fmt == "megatron" else runs["nsp"][fmt]
    report = verify(str(directory))
    assert report.ok, [str(problem) for problem in report.problems]
    if fmt != "megatron":
        assert report.n_records == verify(str(runs["nsp"]["tfrecord"])).n_records


@pytest.mark.parametrize("fmt", INSTANCE_FORMATS)
def test_verify_finds_a_truncated_shard(runs, fmt, tmp_path):
    name = shard_files(runs["nsp"][fmt], fmt)[1].name
    damaged = damaged_copy(runs["nsp"][fmt], tmp_path / "damaged", name, lambda n: n * 2 // 3)
    report = verify(str(damaged))
    assert not report.ok
    assert any(problem.path.endswith(name) for problem in report.problems)


def test_verify_finds_damage_in_megatron_pairs(runs, tmp_path):
    damaged = damaged_copy(runs["megatron"], tmp_path / "short", "examples-2.bin", lambda n: n - 6)
    report = verify(str(damaged))
    assert not report.ok and any(".bin holds" in problem.message for problem in report.problems)
    import shutil

    shutil.copytree(runs["megatron"], tmp_path / "outside")
    path = tmp_path / "outside" / "examples-1.bin"
    tokens = np.fromfile(path, dtype=np.uint16)
    tokens[5] = 60000  # beyond the corpus's vocabulary
    tokens.tofile(path)
    report = verify(str(tmp_path / "outside"))
    assert any("token id 60000 outside the vocabulary" in problem.message for problem in report.problems)


@pytest.mark.parametrize("fmt", INSTANCE_FORMATS)
def test_stats_and_inspect_see_the_tfrecord_instances(runs, fmt):
    ours, reference = compute_stats(str(runs["nsp"][fmt]))[0], compute_stats(str(runs["nsp"]["tfrecord"]))[0]
    for stats in (ours, reference):
        stats.name = "dataset"
    mine, theirs = ours.to_dict(), reference.to_dict()
    assert (mine["layout"].pop("compression"), theirs["layout"].pop("compression")) == (FORMAT_RUNS[fmt], None)
    assert mine == theirs
    shard = str(shard_files(runs["nsp"][fmt], fmt)[2])
    shown = [format_record(record).split(" ", 1)[1] for record in inspect_records(shard, n=4, start=2)]
    expected = [format_record(record).split(" ", 1)[1]
                for record in inspect_records(str(shard_files(runs["nsp"]["tfrecord"], "tfrecord")[2]), n=4, start=2)]
    assert len(shown) == 4 and shown == expected


@pytest.mark.parametrize("fmt", INSTANCE_FORMATS)
def test_numpy_and_torch_loaders_read_every_instance_format(runs, fmt):
    reference = list(bert_data.read_batches(str(runs["nsp"]["tfrecord"]), batch_size=32))
    batches = list(bert_data.read_batches(str(runs["nsp"][fmt]), batch_size=32))
    assert len(batches) == len(reference)
    for batch, expected in zip(batches, reference):
        assert batch.keys() == expected.keys()
        assert all(np.array_equal(batch[name], expected[name]) for name in batch)
    transformers = next(iter(bert_data.read_batches(str(runs["nsp"][fmt]), batch_size=8, format="transformers")))
    assert {"input_ids", "labels", "next_sentence_label"} <= set(transformers)
    torch_batch = next(iter(bert_data.TorchDataset(str(runs["nsp"][fmt]), batch_size=32)))
    assert np.array_equal(torch_batch["input_ids"].numpy(), reference[0]["input_ids"])


def test_tf_data_says_it_reads_tfrecord_only(runs):
    with pytest.raises(ValueError, match="load_dataset reads TFRecord shards; these are parquet"):
        bert_data.load_dataset(str(runs["nsp"]["parquet"]), batch_size=8)


def test_inspect_and_stats_show_megatrons_corpus(runs):
    def cli(*args):
        done = subprocess.run([sys.executable, "-m", "bert_data.cli.bert_data_cli", *args], capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    stats = cli("stats", str(runs["megatron"]))
    assert "tokenized corpus (Megatron .bin/.idx) in 3 file(s): 16 documents" in stats
    assert f"Megatron --data-path: {runs['megatron'] / 'examples-1'}" in stats
    shown = cli("inspect", str(runs["megatron"]), "-n", "1")
    assert shown.startswith("examples-1.bin document 0: ") and "\n  " in shown


def test_nvidias_own_hdf5_files_without_a_manifest_are_read_and_checked(runs, tmp_path):
    """Files made elsewhere (no manifest): the layout comes from the datasets' shapes."""
    import shutil

    directory = tmp_path / "nvidia"
    directory.mkdir()
    for number, path in enumerate(shard_files(runs["nsp"]["hdf5"], "hdf5")):
        shutil.copy(path, directory / f"wikicorpus_en_training_{number}.hdf5")
    report = verify(str(directory))
    assert report.ok and report.n_records == verify(str(runs["nsp"]["tfrecord"])).n_records
    reference = list(bert_data.read_batches(str(runs["nsp"]["tfrecord"]), batch_size=64))
    batches = list(bert_data.read_batches(str(directory), batch_size=64))
    assert all(np.array_equal(a[name], b[name]) for a, b in zip(batches, reference) for name in a)
