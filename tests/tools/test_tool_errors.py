"""``bert-data inspect / verify / stats`` given what they cannot read, and datasets whose splits
are empty (issue 33): one line naming what the file is and what to give instead; each split
reported on its own, an empty one a problem."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.helpers.cli_runs import run_tools as run

TEXT = "The quick brown fox jumps over the lazy dog.\nIt was not amused.\n"
WHAT_TO_DO = "give the shards create_tfrecords wrote, or their output directory"


@pytest.mark.parametrize("command", ["inspect", "verify", "stats"])
def test_a_text_file_is_not_a_tfrecord_file(tmp_path, capsys, command):
    for name, content, first in (
            ("notes.txt", TEXT.encode(), "its first bytes are text: 'The quick brown fox jumps over the lazy ...'"),
            ("notes.txt.gz", gzip.compress(TEXT.encode()), "its first bytes, decompressed, are text: 'The quick "
                                                           "brown fox jumps over the lazy ...'"),
            ("data.parquet.tfrecords", b"PAR1" + bytes(100), "its first bytes are a Parquet file's"),
            ("short.txt", b"hello", "its first bytes are text: 'hello'")):
        path = tmp_path / name
        path.write_bytes(content)
        code, out, err = run([command, path], capsys)
        assert code == 2 and not out
        assert err.strip() == f"bert-data {command}: error: {path} is not a TFRecord file ({first}); {WHAT_TO_DO}"


def test_a_shard_zeroed_from_its_start_is_not_read_as_records(tmp_path, capsys):
    path = tmp_path / "examples-1.tfrecords"
    path.write_bytes(bytes(64))
    code, out, err = run(["inspect", path], capsys)
    assert code == 2
    assert err.strip() == (f"bert-data inspect: error: {path} is not a TFRecord file (its first bytes "
                           f"{' '.join(['00'] * 12)} are no record header: another kind of file, or a shard corrupt "
                           f"from its start); {WHAT_TO_DO}")


def test_verify_reports_each_split_and_an_empty_one_is_a_problem(synthetic_corpus, tmp_path, capsys):
    from bert_data.run.resolve import generate

    from tests.helpers.corpus import corpus_config

    out = tmp_path / "out"
    generate(corpus_config(synthetic_corpus, out, max_seq_length=64, max_predictions_per_seq=10, val_fraction=0.001,
                           num_output_files=2), progress=False)
    n_train = json.loads((out / "train" / "data_params.json").read_text())["n_examples"]
    code, out_text, _ = run(["verify", out], capsys)
    assert code == 1
    lines = out_text.splitlines()
    assert f"{out / 'val'}: empty: no record in its 2 file(s); regenerate with a larger --val_fraction, or without one" \
        in lines
    assert [line.split(", ")[0] for line in lines[-3:-1]] == [
        f"{out / 'train'}: OK: {n_train:,} records in 2 file(s)",
        f"{out / 'val'}: FAILED (1 problem(s)): 0 records in 2 file(s)"]
    assert lines[-1].startswith("FAILED: 1 problem(s) in 4 file(s)")
    code, out_text, _ = run(["verify", out / "train"], capsys)  # one split: one summary
    assert code == 0 and out_text.splitlines()[-1].startswith(f"OK: {n_train:,} records in 2 file(s)")
