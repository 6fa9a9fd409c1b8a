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
