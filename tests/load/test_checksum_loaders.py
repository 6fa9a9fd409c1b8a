"""The loaders check each shard's SHA-256 against its manifest before returning any of its
records (issue 28): a shard with one flipped bit (HDF5, Parquet, MDS, TFRecord) or an MDS shard
cut by 100 bytes is refused with one error naming it, after every record of the intact shards
before it and none of its own; ``verify_checksums=False`` skips the check."""

from __future__ import annotations

import numpy as np
import pytest

from bert_data.format.checksums import ChecksumError
from bert_data.format.manifest import Manifest
from bert_data.load import read_batches

from tests.helpers.damage import damaged_copy, make_datasets, shard

NAMES = ("tfrecord", "hdf5", "parquet", "mds", "mds-zstd")


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    return make_datasets(tmp_path_factory.mktemp("checksum_loaders"), NAMES)


DAMAGES = [("hdf5", None), ("parquet", None), ("mds", None), ("mds-zstd", None), ("tfrecord", None), ("mds", 100)]


def read_until_refused(batches):
    """The records read before the error, and the error."""
    read = 0
    with pytest.raises(ChecksumError) as refused:
        for batch in batches:
            read += len(batch["input_ids"])
    return read, refused.value


@pytest.mark.parametrize("name,cut", DAMAGES)
def test_read_batches_refuses_a_damaged_shard(datasets, tmp_path, name, cut):
    path = shard(datasets[name], name)
    copy = damaged_copy(datasets[name], tmp_path, path.name, cut=cut)
    read, error = read_until_refused(read_batches(str(copy), batch_size=1))
    assert read == Manifest.read(copy).examples_per_file[f"examples-1{path.name[len('examples-2'):]}"]
    assert str(error).startswith(f"{copy / path.name}: damaged: ") and error.path == str(copy / path.name)
    assert "regenerate the dataset or restore this file from a copy" in str(error)


@pytest.mark.parametrize("name", NAMES)
def test_an_intact_dataset_loads(datasets, name):
    manifest = Manifest.read(datasets[name])
    assert sum(len(batch["input_ids"]) for batch in read_batches(str(datasets[name]), 64)) == manifest.n_examples


def test_verify_checksums_false_reads_the_damaged_shard(datasets, tmp_path):
    """The last byte of an MDS shard is its last sample's last token_type_id: nothing else sees
    it change; unchecked, the altered record comes back."""
    copy = damaged_copy(datasets["mds"], tmp_path, "examples-2.mds", flip_at=-1)
    with pytest.raises(ChecksumError):
        list(read_batches(str(copy), 64))
    intact = list(read_batches(str(datasets["mds"]), 1 << 20))[0]
    altered = list(read_batches(str(copy), 1 << 20, verify_checksums=False))[0]
    assert len(altered["input_ids"]) == len(intact["input_ids"])
    differ = [name for name in intact if not np.array_equal(intact[name], altered[name])]
    assert differ == ["segment_ids"]


def test_torch_dataset_refuses_a_damaged_shard(datasets, tmp_path):
    from bert_data.load.torch_data import TorchDataset

    copy = damaged_copy(datasets["parquet"], tmp_path, "examples-2.parquet")
    read, error = read_until_refused(TorchDataset(str(copy), batch_size=1))
    assert read == Manifest.read(copy).examples_per_file["examples-1.parquet"]
    assert error.path == str(copy / "examples-2.parquet")
    unchecked = TorchDataset(str(datasets["parquet"]), batch_size=16, verify_checksums=False)
    assert sum(len(batch["input_ids"]) for batch in unchecked) == Manifest.read(copy).n_examples


def test_load_dataset_refuses_a_damaged_tfrecord_shard_before_building(datasets, tmp_path):
    from bert_data.load.tf_data import load_dataset

    copy = damaged_copy(datasets["tfrecord"], tmp_path, "examples-2.tfrecords")
    with pytest.raises(ChecksumError, match=rf"^{copy / 'examples-2.tfrecords'}: damaged"):
        load_dataset(str(copy), is_training=False)
    assert load_dataset(str(copy), is_training=False, verify_checksums=False) is not None
