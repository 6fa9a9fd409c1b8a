"""Content checksums in every output format (issue 28): the manifest records the SHA-256 of each
file of a split; HDF5 chunks carry Fletcher-32 and Parquet pages their CRC, which h5py and
pyarrow check; MDS's index.json records each shard's hash, which MosaicML streaming checks as it
fetches a shard; the format readers refuse a shard whose bytes are not the manifest's."""

from __future__ import annotations

import hashlib
import json

import h5py
import pyarrow.parquet as pq
import pytest

from bert_data.format.checksums import ChecksumError
from bert_data.format.dataset import dataset_info
from bert_data.format.manifest import Manifest
from bert_data.format.output_formats import ShardOptions, format_of_path

from tests.helpers.damage import DATASETS, damaged_copy, make_datasets, shard
from tests.helpers.streaming import fetch_with_streaming


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    return make_datasets(tmp_path_factory.mktemp("checksums"))


@pytest.mark.parametrize("name", list(DATASETS))
def test_the_manifest_records_the_sha256_of_every_file(datasets, name):
    directory = datasets[name]
    manifest = Manifest.read(directory)
    files = sorted(path.name for path in directory.iterdir() if path.name != "data_params.json")
    assert sorted(manifest.sha256_per_file) == files  # shards, Megatron's .idx, MDS's index.json
    for file in files:
        assert manifest.sha256_per_file[file] == hashlib.sha256((directory / file).read_bytes()).hexdigest()


def reader_of(directory, path):
    info = dataset_info(str(directory))
    return format_of_path(str(path)), ShardOptions(tuple(info.specs))


@pytest.mark.parametrize("name", [name for name in DATASETS if name != "megatron"])
def test_a_format_reader_refuses_a_damaged_shard_unless_asked_not_to_check(datasets, tmp_path, name):
    intact = shard(datasets[name], name)
    copy = damaged_copy(datasets[name], tmp_path, intact.name, flip_at=-1)  # the last byte: a record's
    path = shard(copy, name)
    fmt, options = reader_of(copy, path)
    assert sum(len(b["input_ids"]) for b in fmt.make_reader(options).read_columns(str(intact)))
    with pytest.raises(ChecksumError, match=rf"^{path}: damaged: .* regenerate the dataset or restore this file"):
        next(iter(fmt.make_reader(options).read_columns(str(path))))
    unchecked = fmt.make_reader(options, verify_checksums=False)
    try:
        read = sum(len(b["input_ids"]) for b in unchecked.read_columns(str(path)))
    except ChecksumError:
        raise
    except Exception:  # noqa: BLE001 -- the format's own check (TFRecord's CRC, Fletcher-32, Parquet's footer)
        assert name in ("tfrecord", "hdf5", "parquet", "mds-zstd")
    else:  # an MDS sample's last byte: nothing but the manifest's hash sees it
        assert name == "mds" and read == Manifest.read(copy).examples_per_file[path.name]


@pytest.mark.parametrize("file", ["examples-2.bin", "examples-2.idx"])
def test_the_megatron_reader_refuses_a_damaged_bin_or_idx(datasets, tmp_path, file):
    copy = damaged_copy(datasets["megatron"], tmp_path, file, flip_at=-1)
    reader = format_of_path(str(copy / "examples-2.bin")).make_reader()
    with pytest.raises(ChecksumError, match=rf"^{copy / file}: damaged"):
        next(iter(reader.read_columns(str(copy / "examples-2.bin"))))
    assert sum(len(b["document_sentences"]) for b in reader.read_columns(str(copy / "examples-1.bin")))


def test_hdf5_chunks_carry_fletcher32_which_h5py_checks(datasets, tmp_path):
    path = shard(datasets["hdf5"], "hdf5")
    with h5py.File(path, "r") as source:
        assert all(source[name].fletcher32 for name in source)
        chunk = source["input_ids"].id.get_chunk_info(0)
    copy = damaged_copy(datasets["hdf5"], tmp_path, path.name, flip_at=chunk.byte_offset + chunk.size // 2)
    with h5py.File(shard(copy, "hdf5"), "r") as source:  # NVIDIA's reader reads with h5py, as this
        with pytest.raises(OSError):
            source["input_ids"][:]


def test_parquet_pages_carry_crcs_which_pyarrow_checks(datasets, tmp_path):
    path = shard(datasets["parquet"], "parquet")
    column = pq.ParquetFile(path).metadata.row_group(0).column(0)
    end = column.data_page_offset + column.total_compressed_size
    copy = damaged_copy(datasets["parquet"], tmp_path, path.name, flip_at=end - 2)  # inside the page's data
    with pytest.raises(OSError, match="CRC"):
        pq.ParquetFile(shard(copy, "parquet"), page_checksum_verification=True).read()
    assert pq.ParquetFile(path, page_checksum_verification=True).read().num_rows


def test_streaming_checks_the_hashes_index_json_records(datasets, tmp_path):
    """StreamingDataset(remote=..., validate_hash="sha256") fetches every intact shard and refuses
    a shard with a flipped bit, compressed or not, and one cut by 100 bytes."""
    for name in ("mds", "mds-zstd"):
        index = json.loads((datasets[name] / "index.json").read_text())
        entry = index["shards"][1]
        assert entry["hashes"] == ["sha256"]
        data = entry["zip_data"] or entry["raw_data"]
        assert data["hashes"] == {"sha256": hashlib.sha256((datasets[name] / data["basename"]).read_bytes()).hexdigest()}
    flipped = damaged_copy(datasets["mds"], tmp_path / "a", "examples-2.mds", flip_at=-1)
    cut = damaged_copy(datasets["mds"], tmp_path / "b", "examples-2.mds", cut=100)
    packed = damaged_copy(datasets["mds-zstd"], tmp_path / "c", "examples-2.mds.zstd")
    fetched = fetch_with_streaming([datasets["mds"], datasets["mds-zstd"], flipped, cut, packed], tmp_path)
    manifest = Manifest.read(datasets["mds"])
    assert fetched[datasets["mds"]] == {"samples": manifest.n_examples} == fetched[datasets["mds-zstd"]]
    for damaged in (flipped, cut, packed):
        assert "Checksum failure" in fetched[damaged].get("error", ""), fetched[damaged]
        assert fetched[damaged]["samples"] == manifest.examples_per_file["examples-1.mds"]  # none of shard 2
