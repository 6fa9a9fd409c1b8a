"""--output_format mds: MosaicML ``streaming.StreamingDataset`` reads every split directory (its
``index.json`` and shards, compressed or not) and gives the TFRecord instances of the same
options and seed, in order, in transformers' names; with --disable_masking the plain tokens for
load-time masking.  ``streaming`` runs in its own environment (.ci/peer_envs: it pins numpy and
transformers below ours), through tests/helpers/peers/read_mds.py."""

from __future__ import annotations

import json

import pytest

from bert_data.run.resolve import generate

from tests.helpers.format_runs import LAYOUTS, SHARDS, expected_rows, make_runs, run_config, tfrecord_columns
from tests.helpers.streaming import read_with_streaming


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every layout in MDS and TFRecord, an MDS run with a validation split, all read by one
    streaming interpreter."""
    root = tmp_path_factory.mktemp("mds")
    runs = make_runs(root, formats={"tfrecord": None, "mds": "zstd"})
    for fmt in ("mds", "tfrecord"):
        generate(run_config(runs["corpus"], root / "val" / fmt, fmt, None, val_fraction=0.25), progress=False)
    dirs = [runs[layout]["mds"] for layout in LAYOUTS] + [root / "val" / "mds" / split for split in ("train", "val")]
    runs["read"] = read_with_streaming(dirs, tmp_path_factory.mktemp("streaming"))
    runs["val"] = root / "val"
    return runs


def without_attention_mask(rows):
    return [{key: value for key, value in row.items() if key != "attention_mask"} for row in rows]


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_streaming_dataset_reads_the_tfrecord_instances(runs, layout):
    read = runs["read"][runs[layout]["mds"]]
    expected = [row for columns in tfrecord_columns(runs[layout]["tfrecord"])
                for row in without_attention_mask(expected_rows(columns, layout == "sop"))]
    assert read["length"] == len(expected)
    assert read["samples"] == expected  # shard by shard, in order
    assert read["last"] == expected[-1]
    if layout == "unmasked":  # plain tokens, nothing masked: for load-time masking
        assert set(read["types"]) == {"input_ids"}


def test_index_lists_the_shards_as_mdswriter_does(runs):
    index = json.loads((runs["nsp"]["mds"] / "index.json").read_text())
    assert index["version"] == 2 and len(index["shards"]) == SHARDS
    first = index["shards"][0]
    assert first["format"] == "mds" and first["compression"] == "zstd"
    assert first["column_names"] == ["input_ids", "labels", "next_sentence_label", "token_type_ids"]
    assert first["column_encodings"] == ["ndarray:int32", "ndarray:int32", "int32", "ndarray:uint8"]
    assert first["zip_data"]["basename"] == "examples-1.mds.zstd"
    assert first["zip_data"]["bytes"] == (runs["nsp"]["mds"] / "examples-1.mds.zstd").stat().st_size
    assert first["raw_data"]["basename"] == "examples-1.mds"
    counts = [shard["samples"] for shard in index["shards"]]
    assert counts == [len(columns["input_ids"]) for columns in tfrecord_columns(runs["nsp"]["tfrecord"])]


def test_uncompressed_shards_and_a_validation_split(runs):
    """Each split directory is a dataset of its own, with its own index.json."""
    for split in ("train", "val"):
        directory = runs["val"] / "mds" / split
        assert sorted(path.name for path in directory.iterdir()) == [
            "data_params.json", "examples-1.mds", "examples-2.mds", "examples-3.mds", "index.json"]
        expected = [row for columns in tfrecord_columns(runs["val"] / "tfrecord" / split)
                    for row in without_attention_mask(expected_rows(columns, False))]
        assert expected and runs["read"][directory]["samples"] == expected
