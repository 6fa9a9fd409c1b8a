"""``~`` in every path option of every command (issue 33): no shell expands it after ``=``
(``--output_dir=~/x``), and ``./~/x`` is never what was meant."""

from __future__ import annotations

import os

from bert_data.cli import build_vocab, bert_data_cli, create_tfrecords
from bert_data.cli.flags import PATH_OPTIONS, expand_home, parse_args

from tests.helpers.cli_runs import run_cli
from tests.helpers.corpus import make_corpus

# Options that name something other than a file: their values are never expanded.
NOT_PATHS = {"help", "multiple_docs_separator", "text_field", "name", "cls_token", "sep_token", "mask_token",
             "pad_token", "unk_token", "document_separator_token", "scheduler", "mixing", "command",
             "input_encoding"}


def dests(parser) -> set:
    found = set()
    for action in parser._actions:
        if isinstance(getattr(action, "choices", None), dict):  # subcommands
            for sub in action.choices.values():
                found |= dests(sub)
        elif action.type is None and action.nargs != 0 and action.choices is None and action.default is not False:
            found.add(action.dest)
    return found


def test_every_string_option_of_every_command_is_a_path_or_named_as_not_one():
    parsers = (create_tfrecords.build_parser(), bert_data_cli.build_parser(), build_vocab.build_parser())
    strings = set().union(*(dests(parser) for parser in parsers))
    assert strings - NOT_PATHS - set(PATH_OPTIONS) == set()


def test_a_leading_tilde_is_the_home_directory_in_each_comma_separated_part():
    home = os.path.expanduser("~")
    args = parse_args(create_tfrecords.build_parser(),
                      ["--output_dir=~/x", "--input_file=~/a.txt, ~/b.txt,c~.txt", "--vocab_file=~/v.txt",
                       "--name=~n", "--metadata_files", "~/m1", "m2"])
    assert args.output_dir == f"{home}/x"
    assert args.input_file == [f"{home}/a.txt,{home}/b.txt,c~.txt"]
    assert args.vocab_file == f"{home}/v.txt"
    assert args.metadata_files == [f"{home}/m1", "m2"]
    assert args.name == "~n"  # not a path
    tools = expand_home(bert_data_cli.build_parser().parse_args(["verify", "~/out", "--vocab_file=~/v.txt"]))
    assert tools.paths == [f"{home}/out"] and tools.vocab_file == f"{home}/v.txt"


def test_output_dir_with_tilde_after_equals_writes_under_home_not_a_folder_named_tilde(capsys, tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path / "corpus", n_docs=4)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    code, err = run_cli(capsys, "--metadata_files", corpus.metadata, "--input_files_prefix", corpus.root,
                        "--vocab_file", corpus.vocab, "--do_lower_case", "--output_dir=~/x", "--dupe_factor", "1",
                        "--quiet", "--num_workers", "1", "--max_seq_length", "64", "--max_predictions_per_seq", "10",
                        "--num_output_files", "1")
    assert code == 0, err
    assert (home / "x" / "data_params.json").exists()
    assert not (tmp_path / "~").exists()
    assert f"under {home / 'x'}" in err
