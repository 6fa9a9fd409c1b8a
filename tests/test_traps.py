"""Wrong arguments named at their cause, in one line, before any work; documents given as paths
or globs (--input_files); what the end of a run and its progress bar say (issue 12)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bert_data.cli.build_vocab import main as build_vocab_main
from bert_data.cli.create_tfrecords import main
from bert_data.generator import runner

from conftest import file_hashes, make_corpus

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("traps"), n_docs=12, min_sentences=5, max_sentences=12)


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def base(corpus, output):
    return ["--vocab_file", corpus.vocab, "--do_lower_case", "--output_dir", output, "--dupe_factor", "1", "--quiet",
            "--num_workers", "1", "--max_seq_length", "64", "--max_predictions_per_seq", "10"]


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("create_tfrecords: error: "), err
    return lines[0]


def test_missing_prefix_directory_is_named_before_any_work(capsys, corpus, tmp_path):
    for extra in ([], ["--skip_missing"]):
        code, err = cli(capsys, "--metadata_files", corpus.metadata, "--input_files_prefix", tmp_path / "nowhere",
                        *base(corpus, tmp_path / "out"), *extra)
        assert code == 2
        assert one_error_line(err) == (f"create_tfrecords: error: --input_files_prefix {tmp_path / 'nowhere'} does not "
                                       "exist (the document paths are relative to it)")
    assert not (tmp_path / "out").exists()


def test_wrong_prefix_that_exists_is_named_not_the_first_missing_file(capsys, corpus, tmp_path):
    for extra in ([], ["--skip_missing"]):
        code, err = cli(capsys, "--metadata_files", corpus.metadata, "--input_files_prefix", tmp_path,
                        *base(corpus, tmp_path / "out"), *extra)
        assert code == 2
        line = one_error_line(err)
        assert f"{corpus.metadata}: none of its 12 lines names an existing file under --input_files_prefix {tmp_path}" \
            in line and "is --input_files_prefix right?" in line
        assert "skipped" not in err  # no warning per missing file


def test_a_text_file_given_as_metadata_is_named(capsys, corpus, tmp_path):
    prose = tmp_path / "speech.txt"
    prose.write_text("Fellow-Citizens of the Senate and of the House of Representatives:\n\n"
                     "Among the vicissitudes incident to life no event could have filled me with greater anxieties.\n")
    for extra in ([], ["--skip_missing"]):
        code, err = cli(capsys, "--metadata_files", prose, *base(corpus, tmp_path / "out"), *extra)
        assert code == 2
        assert one_error_line(err) == (
            f"create_tfrecords: error: {prose} does not look like a metadata file: line 1 is prose, not a path; none of "
            "its 2 lines names an existing file (a metadata file lists document paths, one a line; to read text files "
            "directly use --input_files)")
    jsonl = tmp_path / "data.jsonl"
    jsonl.write_text('{"text": "a"}\n{"text": "b"}\n')
    code, err = cli(capsys, "--metadata_files", jsonl, *base(corpus, tmp_path / "out"))
    assert code == 2 and "line 1 is JSON, not a path" in err


def test_a_metadata_file_with_some_missing_files_still_names_the_first_missing(capsys, corpus, tmp_path):
    metadata = tmp_path / "m.txt"
    metadata.write_text(corpus.metadata.read_text() + "docs/nope.txt\n")
    code, err = cli(capsys, "--metadata_files", metadata, "--input_files_prefix", corpus.root,
                    *base(corpus, tmp_path / "out"))
    assert code == 2 and f"{metadata}:13: file not found" in err and "--skip_missing" in err


@pytest.mark.parametrize("content, problem", [
    ("The quick brown fox jumps over the lazy dog.\nIt was not amused.\n",
     "line 1 holds several words ('The quick brown fox jumps over the lazy ...'); it also lacks [PAD] [UNK] [CLS] "
     "[SEP] [MASK]"),
    ("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\n\nworld\n\nagain\n", "2 lines are blank (lines 7 and 9 first)"),
])
def test_a_file_that_is_not_a_vocabulary_is_named(capsys, corpus, tmp_path, content, problem):
    vocab = tmp_path / "notes.txt"
    vocab.write_text(content)
    code, err = cli(capsys, "--metadata_files", corpus.metadata, "--input_files_prefix", corpus.root,
                    *base(corpus, tmp_path / "out"), "--vocab_file", vocab)
    assert code == 2
    assert one_error_line(err) == (f"create_tfrecords: error: {vocab} does not look like a BERT vocabulary (one token "
                                   f"a line): {problem}")


def test_input_files_paths_and_globs_give_the_bytes_of_a_metadata_file(capsys, corpus, tmp_path):
    assert cli(capsys, "--metadata_files", corpus.metadata, "--input_files_prefix", corpus.root,
               *base(corpus, tmp_path / "listed"))[0] == 0
    code, err = cli(capsys, "--input_files", "docs/doc00*.txt", "docs/doc01[01].txt", "--input_files_prefix",
                    corpus.root, *base(corpus, tmp_path / "globbed"))
    assert code == 0, err
    assert file_hashes(tmp_path / "globbed") == file_hashes(tmp_path / "listed")
    manifest = json.loads((tmp_path / "globbed" / "data_params.json").read_text())
    assert manifest["n_docs"] == 12 and manifest["input_files"] == ["docs/doc00*.txt", "docs/doc01[01].txt"]
    # Comma-separated, without a prefix, and after a metadata file.
    first = ",".join(str(corpus.root / f"docs/doc00{i}.txt") for i in range(3))
    code, err = cli(capsys, "--input_files", first, *base(corpus, tmp_path / "plain"))
    assert code == 0 and json.loads((tmp_path / "plain" / "data_params.json").read_text())["n_docs"] == 3
    code, err = cli(capsys, "--input_files", tmp_path / "none*.txt", *base(corpus, tmp_path / "x"))
    assert code == 2 and f"input pattern {tmp_path / 'none*.txt'} matches no file" in err
    code, err = cli(capsys, "--input_files", tmp_path / "gone.txt", *base(corpus, tmp_path / "x"))
    assert code == 2 and f"--input_files:1: file not found: {tmp_path / 'gone.txt'}" in err


def test_build_vocab_reads_input_files(tmp_path, capsys):
    corpus = make_corpus(tmp_path / "c", n_docs=4, min_sentences=5, max_sentences=8)
    code = build_vocab_main(["--input_files", str(corpus.root / "docs" / "*.txt"), "--vocab_size", "200",
                             "--min_frequency", "1", "--do_lower_case=true", "--quiet", "--out", str(tmp_path / "v.txt")])
    assert code == 0
    assert "from 4 documents" in capsys.readouterr().err
    assert (tmp_path / "v.txt").read_text().startswith("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")


@pytest.mark.parametrize("msl, mpp, warned, advice", [
    (128, 20, False, None),  # Google's defaults: 125 tokens * 0.15 = 19 predictions fit in 20
    (512, 20, True, "caps masking at 3.9% of a full 512-token instance, well below --masked_lm_prob 0.15; use "
                    "--max_predictions_per_seq 77"),
    (1024, 20, True, "caps masking at 2.0% of a full 1,024-token instance"),
    (512, 77, False, None),
])
def test_a_prediction_cap_well_below_masked_lm_prob_is_warned(capsys, corpus, tmp_path, msl, mpp, warned, advice):
    argv = ["--metadata_files", corpus.metadata, "--input_files_prefix", corpus.root, *base(corpus, tmp_path / "o"),
            "--max_seq_length", msl, "--max_predictions_per_seq", mpp]
    code, err = cli(capsys, *argv)
    assert code == 0, err
    assert ("create_tfrecords: warning: --max_predictions_per_seq" in err) == warned
    if advice:
        assert advice in err



def test_library_warnings_name_no_command_unless_one_runs(monkeypatch, capsys):
    from bert_data import notices
    from bert_data.config import GeneratorConfig
    from bert_data.generator.settings import check_masking_budget

    monkeypatch.setattr(notices, "_program", "bert_data")  # as a fresh interpreter has it
    config = GeneratorConfig(metadata_files=["m.txt"], vocab_file="v.txt", max_seq_length=1024)
    check_masking_budget(config)
    assert capsys.readouterr().err.startswith("bert_data: warning: --max_predictions_per_seq 20 caps masking")
    notices.use_program_name("create_tfrecords")
    check_masking_budget(config)
    assert capsys.readouterr().err.startswith("create_tfrecords: warning: --max_predictions_per_seq 20")

def test_the_summary_names_each_split_directory_with_thousands_separators(capsys, tmp_path):
    corpus = make_corpus(tmp_path / "c", n_docs=30, min_sentences=20, max_sentences=40)
    code, err = cli(capsys, "--metadata_files", corpus.metadata, "--input_files_prefix", corpus.root,
                    *base(corpus, tmp_path / "out"), "--val_fraction", "0.3", "--dupe_factor", "10")
    assert code == 0
    train = json.loads((tmp_path / "out" / "train" / "data_params.json").read_text())
    val = json.loads((tmp_path / "out" / "val" / "data_params.json").read_text())
    assert train["n_examples"] >= 1000
    assert f"train: {train['n_examples']:,} examples from {train['n_docs']} documents in 10 files under " \
           f"{tmp_path / 'out' / 'train'}" in err
    assert f"val: {val['n_examples']:,} examples from {val['n_docs']} documents in 10 files under " \
           f"{tmp_path / 'out' / 'val'}" in err


class _RecordingBar:
    """Stands for tqdm: records the instance counts the run shows."""

    def __init__(self, total, enabled, description, unit, initial=0, position=0):
        self.description, self.n, self.instances = description, initial, []

    def update(self, k):
        self.n += k

    def set_postfix(self, instances, **_):
        self.instances.append(int(instances.replace(",", "")))

    def close(self):
        pass


def test_the_progress_bar_counts_instances_as_each_encode_task_finishes(corpus, tmp_path, monkeypatch):
    """One unit, written by six encode tasks (one a shard) of which the scheduler keeps four in
    flight: the count moves when the first four finish, before the unit is complete."""
    from bert_data.config import GeneratorConfig
    from bert_data.generator import tasks

    bars = []
    monkeypatch.setattr(runner, "_progress", lambda *args, **kwargs: bars.append(_RecordingBar(*args, **kwargs))
                        or bars[-1])
    monkeypatch.setattr(tasks, "shard_groups", lambda n_records, n_shards: [[shard] for shard in range(n_shards)])
    config = GeneratorConfig(metadata_files=[str(corpus.metadata)], input_files_prefix=str(corpus.root),
                             vocab_file=str(corpus.vocab), do_lower_case=True, max_seq_length=64,
                             max_predictions_per_seq=10, dupe_factor=3, split_num=100, num_output_files=6,
                             output_dir=str(tmp_path / "out"), num_workers=1)
    summary = runner.generate(config, progress=True)
    total = summary.manifests["train"]["n_examples"]
    shown = [count for bar in bars for count in bar.instances]
    assert shown[-1] == total
    assert any(0 < count < total for count in shown), shown  # part of the unit's records, before it is merged


def test_progress_bars_only_on_a_terminal(capsys, tmp_path, monkeypatch):
    """build-vocab shows a bar per pass and create_tfrecords its bars when stderr is a terminal;
    none in a log or pipe, none with --quiet."""
    corpus = make_corpus(tmp_path / "c", n_docs=4, min_sentences=5, max_sentences=8)
    vocab_args = ["--input_files", str(corpus.root / "docs" / "*.txt"), "--vocab_size", "200", "--min_frequency", "1",
                  "--do_lower_case", "--out", str(tmp_path / "v.txt")]
    generator_args = ["--metadata_files", corpus.metadata, "--input_files_prefix", corpus.root, "--vocab_file",
                      corpus.vocab, "--do_lower_case", "--dupe_factor", "1", "--num_workers", "1"]
    assert build_vocab_main(vocab_args) == 0
    assert cli(capsys, *generator_args, "--output_dir", tmp_path / "o1")[0] == 0
    err = capsys.readouterr().err
    assert "pass 1/2" not in err and "tokenized" not in err  # capsys is not a terminal
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    assert build_vocab_main(vocab_args) == 0
    code, err = cli(capsys, *generator_args, "--output_dir", tmp_path / "o2")
    assert code == 0
    assert "pass 1/2: counting characters" in err and "pass 2/2: training" in err and "tokenized" in err
    assert build_vocab_main(vocab_args + ["--quiet"]) == 0
    code, err = cli(capsys, *generator_args, "--output_dir", tmp_path / "o3", "--quiet")
    assert "pass 1/2" not in err and "tokenized" not in err
