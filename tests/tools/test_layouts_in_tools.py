"""``bert-data verify``, ``stats`` and ``inspect`` on every record layout and compression: each
accepted as written, and broken records of each rejected with the record named.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from bert_data.format.tfrecord.example_codec import encode_examples
from bert_data.format.layout import canonical_name
from bert_data.load import read_batches
from bert_data.tools.stats import compute_stats
from bert_data.format.tfrecord import CorruptRecordError, frame_records
from bert_data.tokenizers.vocab import load_vocab

from tests.helpers.cli_runs import run_tools as run

# The datasets and their fixtures (datasets, vocab_path: pytest finds them imported here).
from tests.helpers.layout_datasets import (
    ALL, LAYOUTS, MSL, N_RECORDS, compress, datasets, layout_specs, make_columns, vocab_path,
    write_dataset,
)


@pytest.mark.parametrize("layout,compression", ALL)
def test_verify_stats_inspect_accept_every_layout(datasets, vocab_path, layout, compression, capsys):
    directory, written = datasets[layout, compression]
    mlm_only, masked, v2, cross = LAYOUTS[layout]
    code, out, _ = run(["verify", directory], capsys)
    assert code == 0, out
    assert out.splitlines()[-1].startswith(f"OK: {sum(N_RECORDS)} records in 2 file(s)")

    st, = compute_stats(directory)
    d = st.to_dict()
    assert d["records"] == sum(N_RECORDS) and d["layout"]["compression"] == compression
    np.testing.assert_array_equal(np.flatnonzero(d["tokens_per_instance"]["histogram"]),
                                  np.unique(written["input_mask"].sum(axis=1)))
    assert (d["segment_a_mean"] is None) == mlm_only and (d["nsp_random_next"] is None) == mlm_only
    assert (d["predictions_per_instance"] is None) == (not masked)
    if masked:
        assert d["predictions_per_instance"]["mean"] == pytest.approx(written["masked_lm_weights"].sum(axis=1).mean())
    if mlm_only:
        ids, lengths = written["input_ids"], written["input_mask"].sum(axis=1)
        position = np.arange(MSL)
        inner = (ids == load_vocab(vocab_path).sep_id) & (position > 0) & (position < lengths[:, None] - 1)
        assert d["document_separators"]["per_instance"] == pytest.approx(inner.sum() / len(ids))
        assert (d["document_separators"]["per_instance"] > 0) == cross
    code, out, _ = run(["stats", directory], capsys)
    assert code == 0 and "layout" in out

    code, out, _ = run(["inspect", directory, "-n", "2"], capsys)
    assert code == 0
    heads = [line for line in out.splitlines() if " record " in line]
    assert len(heads) == 2
    assert ("next_sentence_label=" in out) != mlm_only
    assert ("  tokens: [CLS] " in out) == mlm_only and ("  A: [CLS] " in out) != mlm_only
    assert ("unmasked (masks are drawn at load time)" in out) == (not masked)
    code, out, _ = run(["inspect", directory, "-n", "3", "--json"], capsys)
    objs = [json.loads(line) for line in out.splitlines()]
    first = {name: written[name][0].tolist() for name in written}
    assert objs[0]["features"] == first
    assert ("segment_a" in objs[0]) != mlm_only


def test_inspect_previews_load_time_masks(datasets, capsys):
    directory, _ = datasets["unmasked", None]
    code, out, _ = run(["inspect", directory, "-n", "2", "--mask_seed", "5"], capsys)
    assert code == 0 and "load-time masks previewed" in out and "[MASK]{" in out
    again = run(["inspect", directory, "-n", "2", "--mask_seed", "5"], capsys)[1]
    assert again == out


def broken(vocab, layout, kind):
    """One record of ``layout`` broken in a way only that layout's checks catch, and the message."""
    cols = make_columns(vocab, layout, 1, 99)
    length = int(cols["input_mask"][0].sum())
    if kind == "last_not_sep":
        cols["input_ids"][0, length - 1] = vocab.cls_id
        return cols, "(last token) is"
    if kind == "mask_gap":
        cols["input_mask"][0, 2] = 0
        return cols, "input_mask is not 1s then 0s"
    if kind == "too_short":
        cols["input_ids"][0] = 0
        cols["input_mask"][0] = 0
        cols["input_ids"][0, :2] = [vocab.cls_id, vocab.sep_id]
        cols["input_mask"][0, :2] = 1
        if "masked_lm_positions" in cols:
            for name in ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
                cols[name][0] = 0
        return cols, "sequence has 2 tokens; [CLS] tokens [SEP] needs at least 3"
    if kind == "target_is_separator":  # MLM-only: a separator inside chosen as a target
        ids = cols["input_ids"][0]
        cols["masked_lm_ids"][0, 0] = vocab.sep_id
        ids[cols["masked_lm_positions"][0, 0]] = vocab.mask_id
        return cols, "masked_lm_ids[0] is"
    if kind == "position_at_last":
        k = int(cols["masked_lm_weights"][0].sum())
        cols["masked_lm_positions"][0, k - 1] = length - 1
        cols["masked_lm_ids"][0, k - 1] = vocab.sep_id
        return cols, f"masked_lm_positions[{k - 1}] = {length - 1} points at [CLS] or [SEP]"
    if kind == "stray_mask":  # unmasked data holds no [MASK]
        cols["input_ids"][0, 3] = vocab.mask_id
        return cols, "input_ids[3] is [MASK] in unmasked data"
    if kind == "segments":
        cols["segment_ids"][0, 1] = 1
        return cols, "segment_ids are not 0s, then 1s, then padding 0s"
    raise AssertionError(kind)


@pytest.mark.parametrize("layout,kind", [
    ("mlm", "last_not_sep"), ("mlm", "mask_gap"), ("mlm", "too_short"), ("mlm_cross", "target_is_separator"),
    ("mlm", "position_at_last"), ("unmasked", "stray_mask"), ("unmasked", "last_not_sep"),
    ("unmasked", "mask_gap"), ("nsp_v2", "segments"), ("nsp_v2", "last_not_sep"),
])
def test_verify_rejects_broken_records_of_each_layout(tmp_path, vocab_path, capsys, layout, kind):
    compression = "gzip" if layout != "nsp_v2" else "zlib"
    directory = tmp_path / "data"
    written = write_dataset(directory, vocab_path, layout, compression)
    vocab = load_vocab(vocab_path)
    specs = layout_specs(layout)
    bad_cols, message = broken(vocab, layout, kind)
    bad = encode_examples({s.name: bad_cols[canonical_name(s.name)] for s in specs}, specs)[0]
    records = encode_examples(written[0], specs)
    records[4] = bad
    path = directory / "examples-1.tfrecords"
    path.write_bytes(compress(frame_records(records), compression))
    manifest = json.loads((directory / "data_params.json").read_text())
    manifest["bytes_per_file"]["examples-1.tfrecords"] = path.stat().st_size
    (directory / "data_params.json").write_text(json.dumps(manifest))
    code, out, _ = run(["verify", directory], capsys)
    assert code == 1, out
    first = out.splitlines()[0]
    assert first.startswith(f"{path}: record 4: ") and message in first, out
    assert "1 bad record(s)" in out.splitlines()[-1]


@pytest.mark.parametrize("compression,damage,message", [
    ("gzip", "flip", "gzip data is corrupt"),
    ("gzip", "truncate", "gzip stream is truncated (the file ends before the end of the compressed data)"),
    ("zlib", "flip", "zlib data is corrupt"),
    ("zlib", "append", "data after the end of the zlib stream"),
    ("gzip", "append", "data after the end of a gzip member is not another gzip member"),
])
def test_verify_rejects_corrupt_compressed_shard(tmp_path, vocab_path, capsys, compression, damage, message):
    directory = tmp_path / "data"
    write_dataset(directory, vocab_path, "mlm", compression)
    path = directory / "examples-2.tfrecords"
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2: len(data) // 2 + 8] = bytes(8)
    elif damage == "truncate":
        del data[-40:]
    else:
        data += b"garbage!"
    path.write_bytes(bytes(data))
    code, out, _ = run(["verify", directory, "--max_problems", "5"], capsys)
    assert code == 1, out
    lines = [line for line in out.splitlines() if line.startswith(str(path))]
    # A flipped byte is caught by the decompressor, or by a record CRC if the damage inflates.
    assert lines, out
    assert message in lines[0] or "CRC mismatch" in lines[0] or damage != "flip", lines
    if damage != "flip":
        assert message in lines[0] and "the rest of the file" in lines[0] and "unreadable" in lines[0], lines
    # The readers refuse it too, naming the file.
    with pytest.raises(CorruptRecordError, match="examples-2.tfrecords: record"):
        list(read_batches(directory))


def test_verify_compression_not_as_the_manifest_says(tmp_path, vocab_path, capsys):
    directory = tmp_path / "data"
    write_dataset(directory, vocab_path, "nsp", "gzip")
    path = directory / "examples-1.tfrecords"
    path.write_bytes(gzip.decompress(path.read_bytes()))
    manifest = json.loads((directory / "data_params.json").read_text())
    manifest["bytes_per_file"]["examples-1.tfrecords"] = path.stat().st_size
    (directory / "data_params.json").write_text(json.dumps(manifest))
    code, out, _ = run(["verify", directory], capsys)
    assert code == 1
    assert f"{path}: the manifest says gzip-compressed, but the file is uncompressed" in out.splitlines()
    assert "1 problem(s)" in out.splitlines()[-1]  # its records are still checked, and are fine


def test_verify_bare_compressed_files_and_flag(datasets, tmp_path, capsys):
    directory, _ = datasets["nsp_v2", "zlib"]
    lone = tmp_path / "z.tfrecords"
    shutil.copy(directory / "examples-1.tfrecords", lone)
    code, out, _ = run(["verify", lone], capsys)
    assert code == 0, out
    assert "NSP, v2 names" in out
    code, out, _ = run(["verify", lone, "--compression", "gzip"], capsys)
    assert code == 1 and "gzip data is corrupt" in out
    code, out, _ = run(["stats", lone, "--json"], capsys)
    assert code == 0 and json.loads(out)["layout"]["compression"] == "zlib"
