"""``bert-data verify`` checks every file a manifest vouches for against the SHA-256 it records
(issue 28): one flipped bit in an HDF5, Parquet, Megatron (.bin or .idx), MDS or TFRecord shard,
an MDS shard cut by 100 bytes, a changed index.json: each fails, naming the file and what to do;
an intact dataset verifies."""

from __future__ import annotations

import pytest

from bert_data.tools.verify import verify

from tests.helpers.cli_runs import run_tools as run
from tests.helpers.damage import DATASETS, damaged_copy, make_datasets


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    return make_datasets(tmp_path_factory.mktemp("verify_checksums"))


@pytest.mark.parametrize("name", list(DATASETS))
def test_an_intact_dataset_verifies(datasets, name, capsys):
    code, out, _ = run(["verify", datasets[name]], capsys)
    assert code == 0, out
    assert "damaged" not in out and "no content checksums" not in out


DAMAGES = [  # (dataset, file, flip_at, cut)
    ("hdf5", "examples-2.hdf5", None, None),
    ("parquet", "examples-2.parquet", None, None),
    ("megatron", "examples-2.bin", -1, None),  # a token id that is still a token id
    ("megatron", "examples-2.idx", -1, None),
    ("mds", "examples-2.mds", -1, None),  # a sample's last byte: the sample still decodes
    ("mds", "examples-2.mds", None, 100),
    ("mds", "index.json", None, None),
    ("mds-zstd", "examples-2.mds.zstd", None, None),
    ("tfrecord", "examples-2.tfrecords", None, None),
]


@pytest.mark.parametrize("name,file,flip_at,cut", DAMAGES)
def test_verify_names_the_damaged_file_and_what_to_do(datasets, tmp_path, capsys, name, file, flip_at, cut):
    copy = damaged_copy(datasets[name], tmp_path, file, flip_at, cut)
    code, out, _ = run(["verify", copy], capsys)
    assert code == 1, out
    lines = [line for line in out.splitlines() if line.startswith(f"{copy / file}: damaged: ")]
    assert len(lines) == 1, out
    assert lines[0].endswith("regenerate the dataset or restore this file from a copy")
    assert ("cut short" in lines[0]) == bool(cut)
    assert not [line for line in out.splitlines() if ": damaged: " in line and line not in lines]  # only that file
    assert out.splitlines()[-1].startswith("FAILED")


def test_the_report_counts_a_damaged_shard_as_a_problem_of_its_file(datasets, tmp_path):
    copy = damaged_copy(datasets["mds"], tmp_path, "examples-2.mds", flip_at=-1)
    report = verify(str(copy))
    assert not report.ok
    assert [str(problem) for problem in report.problems if "damaged" in problem.message][0].startswith(
        f"{copy / 'examples-2.mds'}: damaged: its sha256 is ")
    first, second, third = (result.problems for result in report.files)
    assert first == third == 0 and second >= 1
