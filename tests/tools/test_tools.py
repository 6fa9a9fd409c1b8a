"""``bert-data inspect / verify / stats`` on generated shards, and their library code.

One small dataset with a validation split is generated per module; corrupted copies of it are
made per test (flipped bytes, truncation, records re-encoded with wrong contents).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bert_data.config import GeneratorConfig
from bert_data.format.tfrecord.example_codec import encode_examples
from bert_data.format.layout import FEATURE_NAMES, FLOAT32, FeatureSpec, feature_specs
from bert_data.load import read_batches
from bert_data.run.resolve import generate
from bert_data.format.tfrecord import frame_records, iter_records
from bert_data.tokenizers.vocab import load_vocab
from bert_data.tools.verify import verify

from tests.helpers.cli_runs import run_tools as run
from tests.helpers.corpus import corpus_config, make_corpus

MSL, MPP = 64, 10


@pytest.fixture(scope="module")
def dataset(synthetic_corpus, tmp_path_factory):
    """OUT with train/ (3 shards) and val/ (3 shards), whole-word masking."""
    out = tmp_path_factory.mktemp("tools_out")
    generate(corpus_config(synthetic_corpus, out, max_seq_length=MSL, max_predictions_per_seq=MPP,
                           val_fraction=0.2, mask_whole_word=True), progress=False)
    return out


@pytest.fixture
def train_copy(dataset, tmp_path):
    """A private copy of OUT/train to corrupt."""
    copy = tmp_path / "train"
    shutil.copytree(dataset / "train", copy)
    return copy


def columns(path):
    """All records of ``path`` as one dict of 2-D arrays (numpy reader)."""
    parts = list(read_batches(path, batch_size=1 << 20))
    return {name: np.concatenate([p[name] for p in parts]) for name in FEATURE_NAMES}


def record_offsets(path):
    """Byte offset of each record's length header."""
    offsets, offset = [], 0
    for record in iter_records(path):
        offsets.append(offset)
        offset += 12 + len(record) + 4
    return offsets


def manifest(directory):
    return json.loads((Path(directory) / "data_params.json").read_text())


def write_manifest(directory, data):
    (Path(directory) / "data_params.json").write_text(json.dumps(data, indent=2))


def rewrite_shard(directory, name, cols, specs=None, fix_size=True):
    """Replace a shard by the re-encoded ``cols``; keep the manifest's byte count and hash in
    step (a dataset made with these records, not one damaged after it was made)."""
    path = Path(directory) / name
    path.write_bytes(frame_records(encode_examples(cols, specs or feature_specs(MSL, MPP))))
    if fix_size:
        data = manifest(directory)
        data["bytes_per_file"][name] = path.stat().st_size
        data["sha256_per_file"][name] = hashlib.sha256(path.read_bytes()).hexdigest()
        write_manifest(directory, data)
    return path


# ------------------------------------------------------------------------------------ inspect


def test_inspect_text(dataset, synthetic_corpus, capsys):
    code, out, _ = run(["inspect", dataset / "train" / "examples-1.tfrecords", "-n", "3"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("legend:")
    heads = [line for line in lines if " record " in line]
    assert [h.split(":")[0] for h in heads] == [f"examples-1.tfrecords record {i}" for i in range(3)]
    a_lines = [line for line in lines if line.startswith("  A: ")]
    b_lines = [line for line in lines if line.startswith("  B: ")]
    assert len(a_lines) == len(b_lines) == 3
    assert all(line.startswith("  A: [CLS] ") and line.endswith(" [SEP]") for line in a_lines)
    assert all(line.endswith(" [SEP]") for line in b_lines)
    assert "[MASK]{" in out and "next_sentence_label=" in out


def test_inspect_json_matches_records(dataset, synthetic_corpus, capsys):
    shard = dataset / "train" / "examples-2.tfrecords"
    code, out, _ = run(["inspect", shard, "-n", "4", "--start", "2", "--json"], capsys)
    assert code == 0
    objs = [json.loads(line) for line in out.splitlines()]
    assert [o["record"] for o in objs] == [2, 3, 4, 5]
    vocab = load_vocab(synthetic_corpus.vocab)
    cols = columns(shard)
    for o in objs:
        i = o["record"]
        length = int(cols["input_mask"][i].sum())
        assert o["length"] == length
        assert o["tokens"] == vocab.convert_ids_to_tokens(cols["input_ids"][i][:length])
        assert o["segment_a"] + o["segment_b"] == o["tokens"]
        assert len(o["segment_b"]) == int(cols["segment_ids"][i].sum())
        assert o["next_sentence_label"] == int(cols["next_sentence_labels"][i][0])
        k = int(cols["masked_lm_weights"][i].sum())
        assert [m["position"] for m in o["masked"]] == cols["masked_lm_positions"][i][:k].tolist()
        assert [m["original"] for m in o["masked"]] == vocab.convert_ids_to_tokens(cols["masked_lm_ids"][i][:k])
        for m in o["masked"]:
            assert m["shown"] == o["tokens"][m["position"]]
            assert m["kind"] == ("mask" if m["shown"] == "[MASK]" else "kept" if m["shown"] == m["original"]
                                 else "random")
        assert o["features"]["input_ids"] == cols["input_ids"][i].tolist()


def test_inspect_without_vocabulary_shows_ids(dataset, tmp_path, capsys):
    lone = tmp_path / "lone.tfrecords"
    shutil.copy(dataset / "val" / "examples-1.tfrecords", lone)
    code, out, err = run(["inspect", lone, "-n", "1"], capsys)
    assert code == 0
    assert "no vocabulary" in err
    vocab_ids = load_vocab(manifest(dataset / "val")["vocab_file"])
    assert f"A: {vocab_ids.cls_id} " in out


def test_inspect_errors(dataset, tmp_path, capsys):
    code, _, err = run(["inspect", tmp_path / "nope.tfrecords"], capsys)
    assert code == 2 and "nope.tfrecords" in err
    # --start past the shard's end says how many it holds (it was "no records from N", exit 0).
    shard = dataset / "val" / "examples-1.tfrecords"
    held = sum(1 for _ in iter_records(shard))
    code, out, err = run(["inspect", shard, "--start", held], capsys)
    assert code == 2 and not out
    assert err.strip() == (f"bert-data inspect: error: {shard}: no record at or after --start {held:,}; it holds "
                           f"{held:,} (inspect reads one shard)")
    code, out, _ = run(["inspect", shard, "--start", held - 1, "-n", "1"], capsys)
    assert code == 0 and f"record {held - 1}:" in out


def test_inspect_from_another_directory_finds_the_vocabulary_by_its_absolute_path(tmp_path, capsys, monkeypatch):
    corpus = make_corpus(tmp_path / "c", n_docs=6, min_sentences=5, max_sentences=10)
    monkeypatch.chdir(corpus.root)  # the vocabulary given relative to here, as users type it
    generate(GeneratorConfig(metadata_files=["metadata.txt"], input_files_prefix=".", vocab_file="vocab.txt",
                             do_lower_case=True, max_seq_length=MSL, max_predictions_per_seq=MPP, dupe_factor=1,
                             output_dir=str(tmp_path / "out"), num_workers=1, num_output_files=1), progress=False)
    assert manifest(tmp_path / "out")["vocab_path"] == str(corpus.vocab)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, err = run(["inspect", tmp_path / "out" / "examples-1.tfrecords", "-n", "3"], capsys)
    assert code == 0 and "no vocabulary" not in err
    assert "[MASK]{" in out and " [MASK], " in out


def test_inspect_without_a_vocabulary_does_not_guess_the_masks(dataset, tmp_path, capsys):
    lone = tmp_path / "lone.tfrecords"  # a shard without its manifest: no vocabulary to be found
    shutil.copy(dataset / "train" / "examples-1.tfrecords", lone)
    code, out, err = run(["inspect", lone, "-n", "5"], capsys)
    assert code == 0 and "no vocabulary found" in err and "not guessed" in err
    assert "[MASK] or random: no vocabulary to tell them apart" in out
    assert " random)" not in out and " [MASK], " not in out  # never labelled without the [MASK] id
    lines = [line for line in out.splitlines() if " record " in line]
    kept_changed = [re.search(r"(\d+) predictions \((\d+) kept, (\d+) \[MASK\] or random", line) for line in lines]
    assert all(m and int(m.group(1)) == int(m.group(2)) + int(m.group(3)) for m in kept_changed)
    code, out, _ = run(["inspect", lone, "-n", "5", "--json"], capsys)
    kinds = {m["kind"] for line in out.splitlines() for m in json.loads(line)["masked"]}
    assert kinds <= {"kept", "mask_or_random"} and "mask_or_random" in kinds


# ------------------------------------------------------------------------------------ verify


def test_verify_ok_both_splits(dataset, capsys):
    code, out, err = run(["verify", dataset, "-v"], capsys)
    assert code == 0, out
    total = manifest(dataset / "train")["n_examples"] + manifest(dataset / "val")["n_examples"]
    last = out.splitlines()[-1]
    assert last.startswith(f"OK: {total:,} records in 6 file(s)")
    assert "problem" not in out and "warning" not in out
    assert err.count(": OK") == 6  # the -v lines name each file


def test_verify_library_report(dataset):
    report = verify([str(dataset / "train")])
    assert report.ok and not report.problems and not report.warnings
    assert report.n_records == manifest(dataset / "train")["n_examples"]
    assert [f.records for f in report.files] == list(manifest(dataset / "train")["examples_per_file"].values())


def test_verify_flipped_byte_in_data(train_copy, capsys):
    shard = train_copy / "examples-2.tfrecords"
    offsets = record_offsets(shard)
    data = bytearray(shard.read_bytes())
    data[offsets[7] + 12 + 30] ^= 0x01
    shard.write_bytes(bytes(data))
    code, out, _ = run(["verify", train_copy], capsys)
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == f"{shard}: record 7: data CRC mismatch, record at byte {offsets[7]}; record skipped"
    # Reading went on: counts still match; the file's bytes are not the manifest's (issue 28).
    assert lines[1].startswith(f"{shard}: damaged: its sha256 is ")
    assert lines[-1].startswith("FAILED: 2 problem(s)")


def test_verify_flipped_byte_in_length_header(train_copy, capsys):
    shard = train_copy / "examples-1.tfrecords"
    offsets = record_offsets(shard)
    data = bytearray(shard.read_bytes())
    data[offsets[3] + 2] ^= 0x40
    shard.write_bytes(bytes(data))
    code, out, _ = run(["verify", train_copy], capsys)
    assert code == 1
    assert (f"{shard}: record 3: length CRC mismatch, record at byte {offsets[3]}; "
            "the rest of the file is unreadable") in out.splitlines()


def test_verify_truncated_file(train_copy, capsys):
    shard = train_copy / "examples-3.tfrecords"
    offsets = record_offsets(shard)
    size = shard.stat().st_size
    with open(shard, "r+b") as handle:
        handle.truncate(size - 100)
    last = len(offsets) - 1
    code, out, _ = run(["verify", train_copy], capsys)
    assert code == 1
    problems = [line for line in out.splitlines() if line.startswith(str(shard))]
    # No count/size complaints on top of the truncation, but the verdict on the file's bytes (issue 28).
    assert len(problems) == 2
    assert problems[0].startswith(f"{shard}: record {last}: truncated record data")
    assert problems[0].endswith("the rest of the file is unreadable")
    assert problems[1] == (f"{shard}: damaged: {size - 100:,} bytes where {train_copy / 'data_params.json'} records "
                           f"{size:,} (cut short or added to); regenerate the dataset or restore this file from a copy")


def test_verify_checks_record_contents(train_copy, synthetic_corpus, capsys):
    """Records with valid framing but wrong contents, one defect per record."""
    vocab = load_vocab(synthetic_corpus.vocab)
    name = "examples-1.tfrecords"
    cols = columns(train_copy / name)
    lengths = cols["input_mask"].sum(axis=1)
    padded = np.flatnonzero(lengths < MSL)
    padded = padded[padded > 12]  # rows 0..12 get other defects
    assert len(padded) >= 2 and len(cols["input_ids"]) > 20
    expected = {}

    def defect(row, message):
        expected[row] = message

    cols["input_ids"][1, 0] = vocab.sep_id
    defect(1, f"input_ids[0] is {vocab.sep_id} ([SEP]), expected [CLS] = {vocab.cls_id} ([CLS])")
    cols["input_ids"][2, 3] = vocab.size + 5
    defect(2, f"input_ids[3] = {vocab.size + 5} is outside the vocabulary [0, {vocab.size})")
    r = int(padded[0])
    cols["masked_lm_positions"][r, 0] = lengths[r]
    defect(r, f"masked_lm_positions[0] = {lengths[r]} is outside the sequence of {lengths[r]} tokens")
    cols["masked_lm_weights"][4, 0] = 0.0
    defect(4, "masked_lm_weights are not 1.0s then 0.0s")
    cols["segment_ids"][5, 1] = 1
    defect(5, "segment_ids are not 0s, then 1s, then padding 0s")
    cols["input_mask"][6, 2] = 0
    defect(6, "input_mask is not 1s then 0s")
    cols["next_sentence_labels"][7, 0] = 2
    defect(7, "next_sentence_labels is 2, expected 0 or 1")
    r = int(padded[1])
    cols["input_ids"][r, MSL - 1] = 9
    defect(r, f"input_ids[{MSL - 1}] = 9 in the padding (must be 0)")
    cols["masked_lm_positions"][9, 0] = 0
    defect(9, "masked_lm_positions[0] = 0 points at [CLS] or [SEP]")
    cols["masked_lm_ids"][10, 0] = vocab.mask_id
    defect(10, f"masked_lm_ids[0] is {vocab.mask_id} ([MASK]): a special token cannot be a masked-LM target")
    k = int(cols["masked_lm_weights"][11].sum())
    if k >= 2:
        cols["masked_lm_positions"][11, 1] = cols["masked_lm_positions"][11, 0]
        defect(11, "masked_lm_positions are not strictly increasing")
    rewrite_shard(train_copy, name, cols)

    code, out, _ = run(["verify", train_copy, "--max_problems", "50"], capsys)
    assert code == 1
    problems = [line for line in out.splitlines() if line.startswith(str(train_copy / name))]
    found = {}
    for line in problems:
        row = int(line.split(": record ")[1].split(":")[0])
        found.setdefault(row, []).append(line.split(": ", 2)[2])
    for row, message in expected.items():
        assert row in found, (row, message, out)
        assert any(text.startswith(message) for text in found[row]), (found[row], message)
    assert sorted(found) == sorted(expected)  # nothing else flagged
    # A moved position also leaves a stray [MASK] behind: a second problem in that record.
    assert out.splitlines()[-1].startswith(f"FAILED: {len(problems)} problem(s) in 3 file(s), "
                                           f"{len(expected)} bad record(s)")


@pytest.mark.parametrize("kind", ["missing", "length", "type"])
def test_verify_rejects_wrong_feature_layout(train_copy, capsys, kind):
    name = "examples-2.tfrecords"
    cols = columns(train_copy / name)
    specs = feature_specs(MSL, MPP)
    good = encode_examples(cols, specs)
    if kind == "missing":
        bad_specs = [s for s in specs if s.name != "masked_lm_weights"]
        message = "feature 'masked_lm_weights' is missing"
    elif kind == "length":
        bad_specs = [FeatureSpec("input_ids", "int64", MSL - 1)] + specs[1:]
        cols = dict(cols, input_ids=cols["input_ids"][:, :-1])
        message = f"feature 'input_ids' has {MSL - 1} values, expected {MSL}"
    else:
        bad_specs = specs[:-1] + [FeatureSpec("next_sentence_labels", FLOAT32, 1)]
        message = "feature 'next_sentence_labels' is float_list, expected int64_list"
    names = {spec.name for spec in bad_specs}
    bad = encode_examples({k: v[5:6] for k, v in cols.items() if k in names}, bad_specs)[0]
    path = train_copy / name
    path.write_bytes(frame_records(good[:5] + [bad] + good[6:]))
    data = manifest(train_copy)
    data["bytes_per_file"][name] = path.stat().st_size
    data["sha256_per_file"][name] = hashlib.sha256(path.read_bytes()).hexdigest()  # made so, not damaged
    write_manifest(train_copy, data)
    code, out, _ = run(["verify", train_copy], capsys)
    assert code == 1
    assert out.splitlines()[0] == f"{path}: record 5: {message}"
    assert "1 bad record(s)" in out.splitlines()[-1]


def test_verify_manifest_mismatches(train_copy, capsys):
    data = manifest(train_copy)
    data["examples_per_file"]["examples-1.tfrecords"] += 1
    data["n_examples"] += 1
    data["bytes_per_file"]["examples-2.tfrecords"] += 10
    write_manifest(train_copy, data)
    (train_copy / "examples-3.tfrecords").unlink()
    code, out, _ = run(["verify", train_copy], capsys)
    assert code == 1
    real = data["examples_per_file"]["examples-1.tfrecords"] - 1
    lines = out.splitlines()
    assert f"{train_copy / 'examples-1.tfrecords'}: {real} records, the manifest says {real + 1}" in lines
    size = (train_copy / "examples-2.tfrecords").stat().st_size
    assert f"{train_copy / 'examples-2.tfrecords'}: {size} bytes, the manifest says {size + 10}" in lines
    assert f"{train_copy / 'examples-3.tfrecords'}: listed in the manifest but missing" in lines


def test_verify_file_without_manifest(dataset, tmp_path, capsys):
    lone = tmp_path / "lone.tfrecords"
    shutil.copy(dataset / "train" / "examples-1.tfrecords", lone)
    code, out, _ = run(["verify", lone], capsys)
    assert code == 0, out
    assert "manifest checks (counts, sizes, vocabulary hash) skipped" in out
    assert f"max_seq_length={MSL}, max_predictions_per_seq={MPP}" in out
    assert "no vocabulary: [CLS] = " in out  # ids taken from the data
    # With a vocabulary, every check runs; a corrupted copy still fails.
    vocab = manifest(dataset / "train")["vocab_file"]
    code, out, _ = run(["verify", lone, "--vocab_file", vocab], capsys)
    assert code == 0 and "no vocabulary" not in out
    data = bytearray(lone.read_bytes())
    data[-3] ^= 0xFF
    lone.write_bytes(bytes(data))
    code, out, _ = run(["verify", lone], capsys)
    assert code == 1 and "data CRC mismatch" in out


def test_verify_vocabulary_mismatch_warns(dataset, tmp_path, capsys):
    other = tmp_path / "other_vocab.txt"
    other.write_text(Path(manifest(dataset / "train")["vocab_file"]).read_text() + "extra\n")
    code, out, _ = run(["verify", dataset / "train", "--vocab_file", other], capsys)
    assert code == 0
    assert "is not the one the data was made with" in out and out.count("warning:") == 1


def test_verify_missing_manifest_vocabulary(train_copy, capsys):
    data = manifest(train_copy)
    data["vocab_file"] = data["vocab_path"] = str(train_copy / "gone.txt")
    write_manifest(train_copy, data)
    code, out, _ = run(["verify", train_copy], capsys)
    assert code == 0, out
    assert "gone.txt does not exist" in out
    assert f"ids checked against vocab_size {data['vocab_size']} from the manifest" in out


def test_verify_bad_paths(tmp_path, capsys):
    code, _, err = run(["verify", tmp_path / "missing_dir"], capsys)
    assert code == 2 and "no such file or directory" in err
    (tmp_path / "empty").mkdir()
    code, _, err = run(["verify", tmp_path / "empty"], capsys)
    assert code == 2 and "no *.tfrecords" in err


def test_verify_reports_the_unk_rate_and_fails_above_the_threshold(dataset, tmp_path, capsys):
    code, out, _ = run(["verify", dataset], capsys)
    assert code == 0 and re.search(r"\[UNK\] 0\.00% of [\d,]+ text tokens", out)
    # Cased text through an uncased vocabulary without lower-casing: many [UNK] (the run is
    # refused by default; --allow_case_mismatch lets it through, as a user who means it would).
    corpus = make_corpus(tmp_path / "c", n_docs=6, min_sentences=5, max_sentences=10)
    config = corpus_config(corpus, tmp_path / "cased", do_lower_case=False, dupe_factor=1)
    generate(config, progress=False, allow_case_mismatch=True)
    code, out, _ = run(["verify", tmp_path / "cased"], capsys)
    rate = re.search(r"\[UNK\] rate (\d+\.\d\d)% \(([\d,]+) of ([\d,]+) text tokens\) is above --max_unk_rate 1\.00%", out)
    assert code == 1 and rate and float(rate.group(1)) > 1, out
    assert "FAILED: 1 problem(s)" in out
    code, out, _ = run(["verify", tmp_path / "cased", "--max_unk_rate", "0.5"], capsys)
    assert code == 0 and f"[UNK] {rate.group(1)}% of {rate.group(3)} text tokens" in out
    code, _, err = run(["verify", tmp_path / "cased", "--max_unk_rate", "2"], capsys)
    assert code == 2 and "--max_unk_rate must be in [0, 1]" in err


def test_verify_without_vocabulary_says_the_unk_rate_is_not_measured(dataset, tmp_path, capsys):
    lone = tmp_path / "lone.tfrecords"
    shutil.copy(dataset / "train" / "examples-1.tfrecords", lone)
    code, out, _ = run(["verify", lone], capsys)
    assert code == 0 and "[UNK] rate not measured (no vocabulary; pass --vocab_file)" in out
    assert "[UNK] 0" not in out


def test_verify_default_unk_threshold_is_the_documented_one():
    from bert_data.cli.bert_data_cli import DEFAULT_MAX_UNK_RATE as shown
    from bert_data.tools.verify import DEFAULT_MAX_UNK_RATE

    assert shown == DEFAULT_MAX_UNK_RATE == 0.01


# ------------------------------------------------------------------------------------ stats


def test_stats_json(dataset, capsys):
    code, out, _ = run(["stats", dataset / "train", "--json"], capsys)
    assert code == 0
    st = json.loads(out)
    cols = columns(dataset / "train")
    n = len(cols["input_ids"])
    assert st["records"] == n == manifest(dataset / "train")["n_examples"]
    lengths = cols["input_mask"].sum(axis=1)
    assert st["tokens_per_instance"]["histogram"] == np.bincount(lengths, minlength=MSL + 1).tolist()
    assert st["tokens_per_instance"]["mean"] == pytest.approx(lengths.mean())
    assert st["fraction_full"] == pytest.approx((lengths == MSL).mean())
    assert st["fraction_short"] == pytest.approx((lengths <= MSL // 2).mean())
    k = cols["masked_lm_weights"].sum(axis=1).astype(int)
    assert st["predictions_per_instance"]["histogram"] == np.bincount(k, minlength=MPP + 1).tolist()
    assert st["nsp_random_next"] == pytest.approx(cols["next_sentence_labels"].mean())
    masking = st["masking"]
    assert sum(masking.values()) == pytest.approx(1.0)
    assert masking["mask"] == pytest.approx(0.8, abs=0.04)
    assert masking["kept"] == pytest.approx(0.1, abs=0.03) and masking["random"] == pytest.approx(0.1, abs=0.03)
    assert st["unk_rate"] == 0.0  # every word of the synthetic corpus is in its vocabulary
    assert st["top_tokens"][0]["token"] == "."
    # text tokens = real tokens minus [CLS] and two [SEP]s
    assert st["text_tokens"] == int(lengths.sum()) - 3 * n


def test_stats_text_and_splits(dataset, capsys):
    code, out, _ = run(["stats", dataset, "--top", "5"], capsys)
    assert code == 0
    assert out.count("records in 3 file(s)") == 2  # train and val
    for label in ("tokens per instance", "predictions/instance", "[MASK]", "next sentence", "[UNK] rate",
                  "top 5 tokens", "length histogram"):
        assert label in out


def test_stats_plot(dataset, tmp_path, capsys):
    import matplotlib  # noqa: F401  (an optional extra, bert_data[plot]; in the dev extra)
    png = tmp_path / "stats.png"
    code, _, err = run(["stats", dataset / "train", "--plot", png, "--limit", "100"], capsys)
    assert code == 0 and f"wrote {png}" in err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_stats_plot_without_matplotlib_fails_before_scanning(dataset, tmp_path, capsys, monkeypatch):
    import bert_data.tools.stats as stats_module

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed

    def scan(*args, **kwargs):
        raise AssertionError("the records were scanned before the missing matplotlib was reported")

    monkeypatch.setattr(stats_module, "compute_stats", scan)
    code, _, err = run(["stats", dataset, "--plot", tmp_path / "s.png"], capsys)
    assert code == 2 and "--plot needs matplotlib: pip install 'bert_data[plot]'" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "s.png").exists()


# ------------------------------------------------------------------------------------ CLI


def test_help_is_light():
    code = (
        "import sys\n"
        "from bert_data.cli.bert_data_cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "import bert_data\n"
        "heavy = [m for m in ('numpy', 'tensorflow', 'torch', 'matplotlib') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "inspect" in result.stdout and "build-vocab" in result.stdout
    assert "HEAVY []" in result.stdout


def test_no_command_prints_help(capsys):
    code, _, err = run([], capsys)
    assert code == 2 and "verify" in err


def test_the_manifest_given_for_a_shard_names_its_directory(dataset, capsys):
    manifest_file = dataset / "val" / "data_params.json"
    for command in ("verify", "stats", "inspect"):
        code, _, err = run([command, manifest_file], capsys)
        assert code == 2
        assert err.strip() == (f"bert-data {command}: error: {manifest_file} is the dataset's manifest, not a shard: "
                               f"give its directory, {dataset / 'val'}")
