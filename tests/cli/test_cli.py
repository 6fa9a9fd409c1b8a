"""The command line: options validated before any work, each failure a one-line error naming the
problem; what the end of a run and its progress bars say."""

from __future__ import annotations

import json

import pytest

from bert_data.cli.build_vocab import main as build_vocab_main
from bert_data.cli.create_tfrecords import main
from bert_data.run import runner
from bert_data.run.resolve import generate

from tests.helpers.cli_runs import base_options as base, run_cli as cli
from tests.helpers.corpus import make_corpus


def run(capsys, corpus, output_dir, *extra):
    argv = [
        "--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root),
        "--vocab_file", str(corpus.vocab), "--do_lower_case", "--output_dir", str(output_dir),
        "--dupe_factor", "1", "--quiet", "--num_workers", "1", *extra,
    ]
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.err


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--max_seq_length", "5"], "--max_seq_length must be at least 6"),
        (["--max_predictions_per_seq", "200"], "--max_predictions_per_seq must be at least 1 and at most 128"),
        (["--max_predictions_per_seq", "0"], "--max_predictions_per_seq must be at least 1"),
        (["--masked_lm_prob", "0"], "--masked_lm_prob must be in (0, 1]"),
        (["--masked_lm_prob", "1.5"], "--masked_lm_prob must be in (0, 1]"),
        (["--short_seq_prob", "-0.1"], "--short_seq_prob must be in [0, 1]"),
        (["--min_short_seq_length", "1"], "--min_short_seq_length must be at least 2"),
        (["--min_short_seq_length", "125"], "allowed range is [2, max_seq_length - 3) = [2, 125)"),
        (["--dupe_factor", "0"], "--dupe_factor must be at least 1"),
        (["--num_output_files", "0"], "--num_output_files must be at least 1"),
        (["--split_num", "0"], "--split_num must be at least 1"),
        (["--num_workers", "0"], "--num_workers must be at least 1"),
        (["--val_fraction", "1"], "--val_fraction must be in [0, 1)"),
        (["--seed", "-1"], "--seed must be at least 0"),
        (["--name", "a/b"], "--name must be a plain file name prefix"),
        (["--val_fraction", "0.1", "--val_metadata_files", "x.txt"], "contradict each other"),
        (["--multiple_docs_separator", ""], "--multiple_docs_separator must not be empty"),
        (["--val_seed", "-1"], "--val_seed must be at least 0"),
        (["--records_per_file", "0"], "--records_per_file must be at least 1"),
        (["--megabytes_per_file", "0"], "--megabytes_per_file must be a positive number"),
    ],
)
def test_bad_options_are_rejected_before_any_work(capsys, synthetic_corpus, tmp_path, extra, message):
    output = tmp_path / "out"
    code, err = run(capsys, synthetic_corpus, output, *extra)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("create_tfrecords: error: ")
    assert not output.exists()  # nothing was written


def test_missing_vocabulary_and_metadata(capsys, synthetic_corpus, tmp_path):
    code, err = main(["--metadata_files", str(synthetic_corpus.metadata), "--vocab_file", str(tmp_path / "nope.txt"),
                      "--output_dir", str(tmp_path / "o"), "--quiet"]), capsys.readouterr().err
    assert code == 2 and "nope.txt" in err
    code, err = main(["--metadata_files", str(tmp_path / "none.txt"), "--vocab_file", str(synthetic_corpus.vocab),
                      "--output_dir", str(tmp_path / "o"), "--quiet"]), capsys.readouterr().err
    assert code == 2 and "none.txt: cannot read metadata file" in err


def test_existing_output_is_refused_without_overwrite(capsys, synthetic_corpus, tmp_path):
    output = tmp_path / "out"
    assert run(capsys, synthetic_corpus, output)[0] == 0
    (output / "notes.txt").write_text("mine")
    code, err = run(capsys, synthetic_corpus, output)
    assert code == 2 and "already holds output" in err and "--overwrite" in err
    assert run(capsys, synthetic_corpus, output, "--overwrite")[0] == 0
    assert (output / "notes.txt").read_text() == "mine"  # only our own files are replaced


def test_literal_backslash_n_separator_reads_google_format(capsys, tmp_path):
    from tests.helpers.corpus import make_corpus

    corpus = make_corpus(tmp_path / "c", n_docs=6)
    # Google's format: a sentence a line, a blank line between documents, all in one file.
    lines = []
    for sentences in corpus.documents.values():
        lines += [" ".join(s[:-1]).replace(" ##", "") + " ." for s in sentences] + [""]
    (corpus.root / "all.txt").write_text("\n".join(lines), encoding="utf-8")
    (corpus.root / "all_meta.txt").write_text("all.txt\n")
    corpus.metadata = corpus.root / "all_meta.txt"
    code, err = run(capsys, corpus, tmp_path / "out", "--multiple_docs_in_single_file", "--single_sentence_per_line",
                    "--multiple_docs_separator", "\\n")
    assert code == 0, err
    import json

    manifest = json.loads((tmp_path / "out" / "data_params.json").read_text())
    assert manifest["n_docs"] == 6
    assert manifest["n_sentences"] == sum(len(s) for s in corpus.documents.values())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("cli"), n_docs=12, min_sentences=5, max_sentences=12)


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
    from bert_data.run import units

    bars = []
    monkeypatch.setattr(runner, "_progress", lambda *args, **kwargs: bars.append(_RecordingBar(*args, **kwargs))
                        or bars[-1])
    monkeypatch.setattr(units, "shards_per_encode_task", lambda n_records, n_shards: [[shard] for shard in range(n_shards)])
    config = GeneratorConfig(metadata_files=[str(corpus.metadata)], input_files_prefix=str(corpus.root),
                             vocab_file=str(corpus.vocab), do_lower_case=True, max_seq_length=64,
                             max_predictions_per_seq=10, dupe_factor=3, split_num=100, num_output_files=6,
                             output_dir=str(tmp_path / "out"), num_workers=1)
    summary = generate(config, progress=True)
    total = summary.manifests["train"]["n_examples"]
    shown = [count for bar in bars for count in bar.instances]
    assert shown[-1] == total
    assert any(0 < count < total for count in shown), shown  # part of the unit's records, before it is merged


def test_a_run_without_bars_does_not_import_tqdm(synthetic_corpus, tmp_path):
    """No bar to show (--quiet; stderr a log or a pipe): tqdm is not even imported (7 ms of the
    run's serial start), in the parent of a pool or inline."""
    from tests.helpers.run_imports import modules_a_run_imports

    for workers in ("1", "2"):
        assert modules_a_run_imports(synthetic_corpus, tmp_path / workers, ["tqdm"], "--num_workers", workers,
                                     "--split_num", "20") == []


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
