"""Usage errors in one line that name the fix (issue 33): a mistyped option names the closest real
one and points to --help, in create_tfrecords, bert-data, each of its subcommands and build-vocab,
instead of the usage before the line that matters; booleans take ``--flag false``."""

from __future__ import annotations

import pytest

from bert_data.cli.bert_data_cli import main as tools_main
from bert_data.cli.create_tfrecords import main

from tests.helpers.cli_runs import base_options as base, run_cli as cli
from tests.helpers.corpus import make_corpus


def one_line(capsys, run, argv) -> str:
    with pytest.raises(SystemExit) as stop:
        run(argv)
    assert stop.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and not captured.out, captured.err
    return lines[0]


@pytest.mark.parametrize("argv, expected", [
    (["--max_seq_len", "256"], "unknown option --max_seq_len; did you mean --max_seq_length?"),
    (["--do_lowercase"], "unknown option --do_lowercase; did you mean --do_lower_case?"),
    (["--out_dir", "o"], "unknown option --out_dir; did you mean --output_dir?"),
    (["--metadata_files", "m.txt", "--max_seq_len=128"], "unknown option --max_seq_len; did you mean --max_seq_length?"),
    (["-max_seq_length=128"], "unknown option -max_seq_length; did you mean --max_seq_length?"),
    (["--Vocab_File", "v.txt"], "unknown option --Vocab_File; did you mean --vocab_file?"),
    (["--zzzzzz"], "unknown option --zzzzzz"),
    (["--output_format", "tfrecords"], "argument --output_format: invalid choice: 'tfrecords' (choose from tfrecord, "
                                       "hdf5, parquet, mds, megatron); did you mean tfrecord?"),
    (["--quiet", "corpus.txt"], "unexpected argument 'corpus.txt' after --quiet (which takes no value, or true or "
                                "false): no option takes it"),
])
def test_create_tfrecords_usage_errors_are_one_line_naming_the_fix(capsys, argv, expected):
    assert one_line(capsys, main, argv) == f"create_tfrecords: error: {expected} (see create_tfrecords --help)"


@pytest.mark.parametrize("argv, expected", [
    (["verify", "out", "--max_prob", "3"], "bert-data verify: error: unknown option --max_prob; did you mean "
                                           "--max_problems? (see bert-data verify --help)"),
    (["stats", "out", "--plt", "x.png"], "bert-data stats: error: unknown option --plt; did you mean --plot? "
                                         "(see bert-data stats --help)"),
    (["inspect", "x", "--num_record", "3"], "bert-data inspect: error: unknown option --num_record; did you mean "
                                            "--num_records? (see bert-data inspect --help)"),
    (["verfy", "out"], "bert-data: error: argument COMMAND: invalid choice: 'verfy' (choose from inspect, verify, "
                       "stats, build-vocab); did you mean verify? (see bert-data --help)"),
    (["--json", "stats", "out"], "bert-data: error: --json is an option of bert-data stats: give it after the command "
                                 "(bert-data stats ... --json; see bert-data stats --help)"),
    # The mistyped option is named, not the required --out it hid.
    (["build-vocab", "--outt", "v.txt", "--input_files", "x"], "bert-data build-vocab: error: unknown option --outt; "
                                                               "did you mean --out? (see bert-data build-vocab --help)"),
    (["build-vocab", "--input_file", "x", "--out", "v.txt"], "bert-data build-vocab: error: unknown option "
                                                             "--input_file; did you mean --input_files? "
                                                             "(see bert-data build-vocab --help)"),
])
def test_bert_data_usage_errors_are_one_line_naming_the_fix(capsys, argv, expected):
    assert one_line(capsys, tools_main, argv) == expected


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("usage"), n_docs=6, min_sentences=4, max_sentences=8)


def test_a_boolean_takes_a_separate_true_or_false(capsys, corpus, tmp_path):
    options = [option for option in base(corpus, tmp_path / "out") if option != "--do_lower_case"]
    code, err = cli(capsys, "--metadata_files", corpus.metadata, "--input_files_prefix", corpus.root, *options,
                    "--do_lower_case", "False", "--allow_case_mismatch", "true")
    assert code == 0, err
    import json

    manifest = json.loads((tmp_path / "out" / "data_params.json").read_text())
    assert manifest["do_lower_case"] is False
    # A word that is not a boolean stays a stray argument: never taken as the flag's value.
    with pytest.raises(SystemExit):
        main(["--metadata_files", str(corpus.metadata), "--do_lower_case", "maybe"])
    assert "unexpected argument 'maybe' after --do_lower_case" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--nodo_lower_case", "true"])
    assert "--nodo_lower_case takes no value" in capsys.readouterr().err
