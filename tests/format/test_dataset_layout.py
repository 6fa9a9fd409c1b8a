"""The dataset's layout on disk has one owner (``format.dataset_layout``): the writer's names
are the ones the readers take, for every output format."""

from __future__ import annotations

import pytest

from bert_data.config import GeneratorConfig
from bert_data.format import dataset_layout
from bert_data.format.dataset import resolve_shards
from bert_data.run import run_files
from bert_data.run.resolve import output_spec


def test_the_writer_names_shards_as_the_layout_says_and_readers_take_them(tmp_path):
    output = output_spec(GeneratorConfig(vocab_file="v.txt", output_dir=str(tmp_path), name="part"))
    paths = [run_files.shard_path(str(tmp_path), output, shard) for shard in range(3)]
    assert [p.rsplit("/", 1)[1] for p in paths] == ["part-1.tfrecords", "part-2.tfrecords", "part-3.tfrecords"]
    for path in paths:
        open(path, "wb").close()
    # A directory without manifest: the shards, in natural order ...
    assert resolve_shards(str(tmp_path)) == paths
    # ... unless a run is still writing there (a shard in progress is a run's trace).
    in_progress = run_files.shard_in_progress(str(tmp_path), output, 0)
    assert in_progress == paths[0] + dataset_layout.IN_PROGRESS_SUFFIX
    open(in_progress, "wb").close()
    with pytest.raises(ValueError, match="unfinished run"):
        resolve_shards(str(tmp_path))


def test_split_directories():
    assert dataset_layout.split_dirs("out", False) == {"train": "out"}
    assert dataset_layout.split_dirs("out", True) == {"train": "out/train", "val": "out/val"}
    assert dataset_layout.split_dirs("s3://b/out", True, lambda a, b: f"{a}/{b}")["val"] == "s3://b/out/val"


def test_each_format_has_its_suffix_and_unknown_formats_are_named():
    assert dataset_layout.shard_name("examples", 0) == "examples-1.tfrecords"
    assert dataset_layout.shard_name("examples", 9, "parquet") == "examples-10.parquet"
    assert dataset_layout.is_shard_name("x.tfrecords.gz") and dataset_layout.is_shard_name("x.parquet")
    assert not dataset_layout.is_shard_name("x.parquet", kinds=["tfrecord"])
    assert dataset_layout.shard_name("examples", 0, "mds", "zstd") == "examples-1.mds.zstd"
    with pytest.raises(ValueError, match="unknown output format 'hdf9'.*tfrecord, hdf5, parquet"):
        dataset_layout.shard_name("examples", 0, "hdf9")


@pytest.mark.parametrize("name, ours", [
    ("examples-1.tfrecords", True), ("examples-1.tfrecords.tmp", True), ("data_params.json", True),
    ("data_params.json.tmp", True), ("notes.txt", False), ("examples-1.tfrecords.gz", False), ("vocab.txt", False),
])
def test_what_counts_as_a_run_s_output(name, ours):
    assert dataset_layout.is_run_output_name(name) is ours
