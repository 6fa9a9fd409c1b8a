"""Every record layout and compression the generator writes, through every reader and tool.

Layouts (``bert_data.format.layout.feature_specs``): Google's NSP layout, the same with TF Model
Garden's v2 names, MLM-only, MLM-only across documents (separators inside the sequence), and
MLM-only unmasked (masks drawn at load time); each uncompressed, gzip (two concatenated members)
and zlib (one stream).  The fixture datasets are written here, record by record, with
``encode_examples`` + ``frame_records`` and a hand-made ``data_params.json``, so these tests do
not depend on the generator; the end-to-end tests at the bottom run the generator's options.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import zlib
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from bert_data.cli.bert_data_cli import main
from bert_data.format.tfrecord.example_codec import encode_examples
from bert_data.format.dataset import dataset_info
from bert_data.format.layout import canonical_name, feature_specs, tf_feature_description
from bert_data.format.manifest import Manifest
from bert_data.load import DynamicMasking, dynamic_masking, load_dataset, read_batches, read_examples
from bert_data.masking import MaskingSpec, mask_tokens
from bert_data.tools.stats import compute_stats
from bert_data.format.tfrecord import CorruptRecordError, count_records, frame_records, iter_records
from bert_data.tokenizers.vocab import load_vocab

from conftest import make_corpus, write_vocab, all_stems

MSL, MPP = 32, 5
N_RECORDS = (23, 17)  # per shard
LAYOUTS = {
    # name: (mlm_only, masked, v2_feature_names, cross_document)
    "nsp": (False, True, False, False),
    "nsp_v2": (False, True, True, False),
    "mlm": (True, True, False, False),
    "mlm_cross": (True, True, False, True),
    "unmasked": (True, False, False, True),
}
COMPRESSIONS = [None, "gzip", "zlib"]
TF_TYPE = {None: "", "gzip": "GZIP", "zlib": "ZLIB"}


# ------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def vocab_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("layouts_vocab") / "vocab.txt"
    write_vocab(path, all_stems()[:300])
    return path


def word_rows(vocab, rng, n, lengths):
    """Token rows of real words (stems, some followed by a ## piece), without specials."""
    stems = [i for i, t in enumerate(vocab.tokens) if t.isalpha() and t.islower()]
    pieces = np.flatnonzero(vocab.is_continuation)
    rows = []
    for length in lengths:
        row = []
        while len(row) < length:
            row.append(int(rng.choice(stems)))
            if rng.random() < 0.3 and len(row) < length:
                row.append(int(rng.choice(pieces)))
        rows.append(row[:length])
    return rows


def make_columns(vocab, layout, n, seed):
    """Valid records of ``layout`` as columns (canonical names)."""
    mlm_only, masked, _, cross = LAYOUTS[layout]
    rng = np.random.default_rng(seed)
    ids = np.zeros((n, MSL), np.int64)
    mask = np.zeros((n, MSL), np.int64)
    seg = np.zeros((n, MSL), np.int64)
    for r in range(n):
        total = int(rng.integers(8 if mlm_only else 9, MSL + 1))
        if mlm_only:
            body = word_rows(vocab, rng, 1, [total - 2])[0]
            if cross and r % 3 == 0:  # a document boundary inside the window
                cut = int(rng.integers(2, len(body) - 2))
                body[cut] = vocab.sep_id
            tokens = [vocab.cls_id] + body + [vocab.sep_id]
        else:
            a_len = int(rng.integers(2, total - 4))
            a, b = word_rows(vocab, rng, 2, [a_len, total - 3 - a_len])
            tokens = [vocab.cls_id] + a + [vocab.sep_id] + b + [vocab.sep_id]
            seg[r, a_len + 2:total] = 1
        ids[r, :total] = tokens
        mask[r, :total] = 1
    cols = {"input_ids": ids, "input_mask": mask}
    if not mlm_only:
        cols["segment_ids"] = seg
    if masked:
        out = mask_tokens(ids, mask.sum(axis=1), MaskingSpec.for_vocab(vocab, max_predictions_per_seq=MPP), vocab,
                          rng)
        cols.update(input_ids=out.input_ids.astype(np.int64), masked_lm_positions=out.masked_lm_positions,
                    masked_lm_ids=out.masked_lm_ids, masked_lm_weights=out.masked_lm_weights)
    if not mlm_only:
        cols["next_sentence_labels"] = rng.integers(0, 2, (n, 1))
    return cols


def compress(data: bytes, compression) -> bytes:
    if compression == "gzip":  # two members, split inside a record: TF reads them as one stream
        cut = len(data) // 3
        return gzip.compress(data[:cut], mtime=0) + gzip.compress(data[cut:], mtime=0)
    if compression == "zlib":
        return zlib.compress(data)
    return data


def layout_specs(layout):
    mlm_only, masked, v2, _ = LAYOUTS[layout]
    return feature_specs(MSL, MPP, mlm_only=mlm_only, masked=masked, v2_feature_names=v2)


def write_dataset(directory: Path, vocab_path, layout, compression, seed=0, **manifest_extra):
    """Two shards and a data_params.json; returns the columns written (stored names), per shard."""
    vocab = load_vocab(vocab_path)
    mlm_only, masked, v2, cross = LAYOUTS[layout]
    specs = layout_specs(layout)
    directory.mkdir(parents=True, exist_ok=True)
    written, counts, sizes = [], {}, {}
    for shard, n in enumerate(N_RECORDS):
        cols = make_columns(vocab, layout, n, seed * 10 + shard)
        cols = {spec.name: cols[canonical_name(spec.name)] for spec in specs}
        name = f"examples-{shard + 1}.tfrecords"
        data = compress(frame_records(encode_examples(cols, specs)), compression)
        (directory / name).write_bytes(data)
        written.append(cols)
        counts[name], sizes[name] = n, len(data)
    manifest = {
        "vocab_file": str(vocab_path), "vocab_sha256": vocab.sha256, "vocab_size": vocab.size,
        "max_seq_length": MSL, "max_predictions_per_seq": MPP, "masked_lm_prob": 0.15,
        "mask_whole_word": False, "max_ngram_size": 1, "mlm_only": mlm_only,
        "allow_cross_document_examples": cross, "document_separator_token": "[SEP]",
        "disable_masking": not masked, "v2_feature_names": v2, "compression": compression,
        "n_examples": sum(N_RECORDS), "examples_per_file": counts, "bytes_per_file": sizes,
        "features": {s.name: {"dtype": s.dtype, "length": s.length} for s in specs},
    }
    manifest.update(manifest_extra)
    (directory / "data_params.json").write_text(json.dumps(manifest, indent=2))
    return written


def joined(parts):
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory, vocab_path):
    """(layout, compression) -> (directory, columns as written)."""
    root = tmp_path_factory.mktemp("layouts")
    out = {}
    for layout in LAYOUTS:
        for compression in COMPRESSIONS:
            directory = root / f"{layout}-{compression}"
            out[layout, compression] = directory, joined(write_dataset(directory, vocab_path, layout, compression))
    return out


def tf_reference(directory):
    """TensorFlow's own reader and parser, with the manifest's spec and compression."""
    import tensorflow as tf

    manifest = Manifest.read(directory)
    description = tf_feature_description(MSL, MPP, specs=manifest.specs)
    files = [str(directory / name) for name in manifest.examples_per_file]
    d = tf.data.TFRecordDataset(files, compression_type=TF_TYPE[manifest.compression])
    raw = [r.numpy() for r in d]
    parsed = tf.io.parse_example(tf.constant(raw), description)
    return raw, {name: value.numpy() for name, value in parsed.items()}


def run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


ALL = [(layout, compression) for layout in LAYOUTS for compression in COMPRESSIONS]


# ------------------------------------------------------------------------------------ readers


@pytest.mark.parametrize("layout,compression", ALL)
def test_readers_agree_with_tensorflow(datasets, layout, compression):
    from bert_data.load.torch_data import TorchDataset

    directory, written = datasets[layout, compression]
    names = [spec.name for spec in layout_specs(layout)]
    raw, reference = tf_reference(directory)
    assert set(reference) == set(names)
    for name in names:
        np.testing.assert_array_equal(reference[name], written[name], err_msg=name)

    # Framing: our reader yields exactly TF's records, from the compressed files.
    files = [str(directory / f"examples-{i}.tfrecords") for i in (1, 2)]
    ours = [r for f in files for r in iter_records(f, compression=compression)]
    assert ours == raw
    assert [count_records(f, compression) for f in files] == list(N_RECORDS)

    info = dataset_info(directory)
    assert info.names == names and info.layout_source == "manifest"
    assert all(info.compression(f) == compression for f in info.files)

    rows = list(read_examples(directory))
    assert len(rows) == sum(N_RECORDS) and all(list(row) == names for row in rows)
    batches = list(read_batches(directory, batch_size=7))
    assert [len(b["input_mask"]) for b in batches] == [7] * 5 + [5]
    got = joined(batches)
    torch_rows = list(TorchDataset(directory, split_by="record"))
    d = load_dataset(directory, batch_size=9, is_training=False)
    tf_got = joined([{k: np.asarray(v) for k, v in b.items()} for b in d.as_numpy_iterator()])
    for name in names:
        np.testing.assert_array_equal(np.stack([r[name] for r in rows]), reference[name], err_msg=name)
        np.testing.assert_array_equal(got[name], reference[name], err_msg=name)
        np.testing.assert_array_equal(np.stack([r[name].numpy() for r in torch_rows]), reference[name],
                                      err_msg=name)
        np.testing.assert_array_equal(tf_got[name], reference[name], err_msg=name)
    assert set(tf_got) == set(names) and tf_got[names[0]].dtype == np.int32

    # Canonical names for code that reads any layout.
    canonical = next(read_batches(directory, batch_size=3, canonical_names=True))
    assert list(canonical) == [canonical_name(n) for n in names]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_files_without_manifest(datasets, tmp_path, compression):
    """Layout from the first record, compression from the first bytes (whatever the file name)."""
    directory, written = datasets["mlm_cross", compression]
    suffix = {None: ".tfrecords", "gzip": ".tfrecords.gz", "zlib": ".tfrecords"}[compression]
    lone = tmp_path / f"lone{suffix}"
    shutil.copy(directory / "examples-1.tfrecords", lone)
    info = dataset_info(lone)
    assert info.layout_source == "first record" and info.names == [s.name for s in layout_specs("mlm_cross")]
    assert info.compression(str(lone)) == compression
    got = joined(list(read_batches(lone, batch_size=100)))
    np.testing.assert_array_equal(got["input_ids"], written["input_ids"][:N_RECORDS[0]])
    # The directory form finds .tfrecords.gz files too.
    assert dataset_info(tmp_path).files == [str(lone)]
    if compression is not None:
        forced = list(read_batches(lone, batch_size=100, compression=compression))
        assert len(forced[0]["input_ids"]) == N_RECORDS[0]
        with pytest.raises(CorruptRecordError):
            list(read_batches(lone, batch_size=100, compression=None, max_seq_length=MSL,
                              max_predictions_per_seq=MPP))
    # Forcing a compression against the manifest is an error.
    other = "zlib" if compression != "zlib" else "gzip"
    with pytest.raises(ValueError, match="does not match the data"):
        dataset_info(directory, compression=other)


def test_unmasked_first_record_layout(datasets, tmp_path):
    directory, _ = datasets["unmasked", "gzip"]
    lone = tmp_path / "u.tfrecords"
    shutil.copy(directory / "examples-2.tfrecords", lone)
    info = dataset_info(lone)
    assert info.names == ["input_ids", "input_mask"] and not info.masked and info.mlm_only


# ------------------------------------------------------------------------------------ tools


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


# ------------------------------------------------------------------------------------ load-time masking


def unmasked_batch(vocab, n=3000, seed=1):
    cols = make_columns(vocab, "unmasked", n, seed)
    return {"input_ids": cols["input_ids"], "input_mask": cols["input_mask"]}


def test_dynamic_masking_statistics(vocab_path):
    vocab = load_vocab(vocab_path)
    batch = unmasked_batch(vocab)
    ids, lengths = batch["input_ids"], batch["input_mask"].sum(axis=1)
    masker = dynamic_masking(vocab_file=str(vocab_path), max_predictions_per_seq=MPP, seed=0)
    out = masker(batch)
    assert set(out) == {"input_ids", "input_mask", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights"}
    assert out["input_ids"].dtype == np.int32 and out["masked_lm_positions"].dtype == np.int32
    assert out["masked_lm_ids"].dtype == np.int32 and out["masked_lm_weights"].dtype == np.float32
    assert out["masked_lm_positions"].shape == (len(ids), MPP)
    k = out["masked_lm_weights"].sum(axis=1).astype(int)
    # Exactly round(15%) of the tokens, at least 1, capped by max_predictions_per_seq.
    np.testing.assert_array_equal(k, np.minimum(MPP, np.maximum(1, np.rint(lengths * 0.15))))
    assert (k == MPP).any() and (k < MPP).any()
    rows = np.repeat(np.arange(len(ids)), MPP).reshape(len(ids), MPP)
    active = out["masked_lm_weights"] > 0
    pos, lab = out["masked_lm_positions"], out["masked_lm_ids"]
    np.testing.assert_array_equal(lab[active], ids[rows[active], pos[active]])  # labels: the original tokens
    assert (pos[~active] == 0).all() and (lab[~active] == 0).all()
    assert (np.diff(pos, axis=1)[active[:, 1:]] > 0).all()  # ascending (weights are 1s then 0s)
    special = {vocab.cls_id, vocab.sep_id, vocab.pad_id}
    assert not np.isin(lab[active], list(special)).any()  # never [CLS], [SEP] (= the separator here)
    assert (pos[active] > 0).all() and (pos[active] < lengths[rows[active]] - 1).all()
    shown = out["input_ids"][rows[active], pos[active]]
    n_pred = active.sum()
    assert abs((shown == vocab.mask_id).sum() / n_pred - 0.8) < 0.02
    kept = (shown == lab[active]).sum() / n_pred
    assert abs(kept - 0.1) < 0.015
    randoms = shown[(shown != vocab.mask_id) & (shown != lab[active])]
    assert abs(len(randoms) / n_pred - 0.1) < 0.015 and np.isin(randoms, vocab.ordinary_ids).all()
    untouched = np.ones_like(ids, dtype=bool)
    untouched[rows[active], pos[active]] = False
    np.testing.assert_array_equal(out["input_ids"][untouched], ids[untouched])
    np.testing.assert_array_equal(out["input_mask"], batch["input_mask"])


@pytest.mark.parametrize("options", [{"whole_word": True}, {"max_ngram_size": 3}])
def test_dynamic_masking_never_splits_a_word(vocab_path, options):
    vocab = load_vocab(vocab_path)
    batch = unmasked_batch(vocab, n=600, seed=2)
    ids = batch["input_ids"]
    out = dynamic_masking(vocab_file=str(vocab_path), max_predictions_per_seq=8, seed=4, **options)(batch)
    chosen = np.zeros(ids.shape, dtype=bool)
    active = out["masked_lm_weights"] > 0
    rows = np.broadcast_to(np.arange(len(ids))[:, None], active.shape)
    chosen[rows[active], out["masked_lm_positions"][active]] = True
    cont = vocab.is_continuation[ids] & (batch["input_mask"] == 1)
    # A ## piece is chosen exactly when the token before it is (they are one word).  (A piece
    # right after a document separator joins the word before the separator, as in Google's code.)
    cont[:, 1:] &= ids[:, :-1] != vocab.sep_id
    pieces = np.argwhere(cont)
    assert len(pieces) > 100
    assert (chosen[pieces[:, 0], pieces[:, 1]] == chosen[pieces[:, 0], pieces[:, 1] - 1]).all()
    assert (active.sum(axis=1) <= 8).all() and chosen[cont].any()
    assert not np.isin(out["masked_lm_ids"][active], [vocab.cls_id, vocab.sep_id]).any()


def test_dynamic_masking_separator_token(vocab_path):
    vocab = load_vocab(vocab_path)
    batch = unmasked_batch(vocab, n=400, seed=3)
    separator = vocab.token_to_id["[unused0]"]
    batch["input_ids"][:, 3] = separator
    out = dynamic_masking(vocab_file=str(vocab_path), seed=1, masked_lm_prob=0.5, max_predictions_per_seq=MSL,
                          document_separator_token="[unused0]")(batch)
    active = out["masked_lm_weights"] > 0
    assert not (out["masked_lm_positions"][active] == 3).any()
    np.testing.assert_array_equal(out["input_ids"][:, 3], separator)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        dynamic_masking(vocab_file=str(vocab_path), document_separator_token="[NOPE]")


def test_dynamic_masking_is_deterministic(vocab_path):
    vocab = load_vocab(vocab_path)
    batch = unmasked_batch(vocab, n=50)
    a = dynamic_masking(vocab_file=str(vocab_path), seed=7)
    b = dynamic_masking(vocab_file=str(vocab_path), seed=7)
    first, second = a(batch), a(batch)  # calls numbered 0, 1
    assert not np.array_equal(first["input_ids"], second["input_ids"])
    for name in first:
        np.testing.assert_array_equal(first[name], b(batch, key=(0,))[name])
        np.testing.assert_array_equal(second[name], b(batch, key=(1,))[name])
    other = dynamic_masking(vocab_file=str(vocab_path), seed=8)(batch, key=(0,))
    assert not np.array_equal(other["masked_lm_positions"], first["masked_lm_positions"])
    assert isinstance(a, DynamicMasking) and "seed=7" in repr(a)
    assert dynamic_masking(vocab_file=str(vocab_path)).seed >= 0  # a seed is drawn and kept
    with pytest.raises(ValueError, match="already masked"):
        a(first)


def test_masking_options_from_the_manifest(tmp_path, vocab_path, datasets):
    directory = tmp_path / "data"
    write_dataset(directory, vocab_path, "unmasked", None, masked_lm_prob=0.3, max_predictions_per_seq=7,
                  mask_whole_word=True, document_separator_token="[unused1]")
    masker = dynamic_masking(dataset=directory, seed=0)
    assert (masker.masked_lm_prob, masker.max_predictions_per_seq, masker.whole_word) == (0.3, 7, True)
    assert masker.document_separator_token == "[unused1]"
    assert load_vocab(vocab_path).token_to_id["[unused1]"] in masker.special_ids
    assert dynamic_masking(dataset=directory, masked_lm_prob=0.2).masked_lm_prob == 0.2  # arguments win
    batch = next(read_batches(directory, batch_size=10, mask={"seed": 0}))
    assert batch["masked_lm_positions"].shape == (10, 7) and batch["masked_lm_ids"].dtype == np.int64
    # A vocabulary that is not the data's is refused; masking masked data is refused.
    other = tmp_path / "other.txt"
    other.write_text(Path(vocab_path).read_text() + "extra\n")
    with pytest.raises(ValueError, match="not the one the data was made with"):
        dynamic_masking(vocab_file=str(other), dataset=directory)
    with pytest.raises(ValueError, match="already masked"):
        next(read_batches(datasets["mlm", None][0], mask=True))
    manifest = json.loads((directory / "data_params.json").read_text())
    manifest["vocab_file"] = str(tmp_path / "gone.txt")
    (directory / "data_params.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="does not exist, pass vocab_file="):
        dynamic_masking(dataset=directory)


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_load_time_masks_identical_in_tf_data_and_numpy(datasets, compression):
    directory, written = datasets["unmasked", compression]
    numpy_batches = list(read_batches(directory, batch_size=6, int32=True, mask={"seed": 11}))
    d = load_dataset(directory, batch_size=6, is_training=False, mask={"seed": 11})
    tf_batches = list(d.as_numpy_iterator())
    assert len(tf_batches) == len(numpy_batches) == 7
    spec = d.element_spec
    assert spec["input_ids"].shape.as_list() == [None, MSL]
    assert spec["masked_lm_positions"].shape.as_list() == [None, MPP]
    assert spec["masked_lm_weights"].dtype.name == "float32" and spec["masked_lm_ids"].dtype.name == "int32"
    for mine, theirs in zip(numpy_batches, tf_batches):
        assert set(mine) == set(theirs)
        for name in mine:
            assert mine[name].dtype == theirs[name].dtype, name
            np.testing.assert_array_equal(mine[name], theirs[name], err_msg=name)
    got = joined(numpy_batches)
    restored = got["input_ids"].copy()
    active = got["masked_lm_weights"] > 0
    rows = np.broadcast_to(np.arange(len(restored))[:, None], active.shape)
    restored[rows[active], got["masked_lm_positions"][active]] = got["masked_lm_ids"][active]
    np.testing.assert_array_equal(restored, written["input_ids"])  # the masks hide the original tokens
    assert active.any(axis=1).all()
    # Training pipelines: static shapes (full batches), masks keyed by batch number.
    d = load_dataset(directory, batch_size=4, is_training=True, seed=1, mask={"seed": 2})
    assert d.element_spec["masked_lm_positions"].shape.as_list() == [4, MPP]
    assert d.element_spec["input_ids"].shape.as_list() == [4, MSL]
    batch = next(iter(d))
    assert int(batch["masked_lm_weights"].numpy().sum()) > 0


def test_load_time_masks_in_readers_and_torch(datasets):
    from bert_data.load.torch_data import TorchDataset

    directory, written = datasets["unmasked", "zlib"]
    rows = list(read_examples(directory, mask={"seed": 3}))
    whole = next(read_batches(directory, batch_size=4096, mask={"seed": 3}))
    np.testing.assert_array_equal(np.stack([r["input_ids"] for r in rows]), whole["input_ids"])
    assert rows[0]["masked_lm_positions"].shape == (MPP,)
    ds = TorchDataset(directory, batch_size=8, mask={"seed": 3})
    first = [b["input_ids"].numpy() for b in ds]
    again = [b["input_ids"].numpy() for b in ds]
    ds.set_epoch(1)
    epoch1 = [b["input_ids"].numpy() for b in ds]
    assert all(np.array_equal(x, y) for x, y in zip(first, again))
    assert not all(np.array_equal(x, y) for x, y in zip(first, epoch1))
    assert sum(len(b) for b in first) == sum(N_RECORDS)
    batch = next(iter(TorchDataset(directory, batch_size=8, mask={"seed": 3}, int32=True)))
    assert str(batch["masked_lm_ids"].dtype) == "torch.int32" and str(batch["masked_lm_weights"].dtype) == "torch.float32"


# ------------------------------------------------------------------------------------ end to end


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """Small datasets made by the generator with its layout and compression options."""
    from bert_data.config import GeneratorConfig
    from bert_data.generator.runner import generate

    root = tmp_path_factory.mktemp("layouts_e2e")
    corpus = make_corpus(root / "corpus", n_docs=8, min_sentences=6, max_sentences=15)
    options = {
        "unmasked_gzip": dict(mlm_only=True, disable_masking=True, dupe_factor=1, compression="gzip",
                              allow_cross_document_examples=True),
        "mlm_zlib_v2": dict(mlm_only=True, compression="zlib", v2_feature_names=True, mask_whole_word=True),
        "nsp_v2_gzip": dict(v2_feature_names=True, compression="gzip"),
    }
    out = {}
    for name, extra in options.items():
        directory = root / name
        generate(GeneratorConfig(
            metadata_files=[str(corpus.metadata)], input_files_prefix=str(corpus.root), vocab_file=str(corpus.vocab),
            do_lower_case=True, max_seq_length=48, max_predictions_per_seq=7, output_dir=str(directory),
            num_workers=1, num_output_files=2, **{"dupe_factor": 2, **extra}), progress=False)
        out[name] = directory
    return out


@pytest.mark.parametrize("name", ["unmasked_gzip", "mlm_zlib_v2", "nsp_v2_gzip"])
def test_generated_datasets_through_every_tool(generated, name, capsys):
    directory = generated[name]
    manifest = json.loads((directory / "data_params.json").read_text())
    code, out, _ = run(["verify", directory], capsys)
    assert code == 0, out
    raw, reference = tf_reference(directory)
    assert len(raw) == manifest["n_examples"] > 0
    got = joined(list(read_batches(directory, batch_size=50)))
    assert list(got) == list(manifest["features"])
    for feature in got:
        np.testing.assert_array_equal(got[feature], reference[feature], err_msg=feature)
    tf_got = joined(list(load_dataset(directory, batch_size=50, is_training=False, int32=False).as_numpy_iterator()))
    for feature in got:
        np.testing.assert_array_equal(tf_got[feature], reference[feature], err_msg=feature)
    st, = compute_stats(directory)
    assert st.n_records == manifest["n_examples"] and st.compression == manifest["compression"]
    assert run(["stats", directory], capsys)[0] == 0
    code, out, _ = run(["inspect", directory, "-n", "2"], capsys)
    assert code == 0 and len([line for line in out.splitlines() if " record " in line]) == 2
    if manifest["disable_masking"]:
        numpy_masked = list(read_batches(directory, batch_size=16, int32=True, mask={"seed": 0}))
        tf_masked = list(load_dataset(directory, batch_size=16, is_training=False, mask={"seed": 0})
                         .as_numpy_iterator())
        for mine, theirs in zip(numpy_masked, tf_masked):
            for feature in mine:
                np.testing.assert_array_equal(mine[feature], theirs[feature], err_msg=feature)
        assert st.to_dict()["document_separators"]["per_instance"] > 0  # cross-document windows
