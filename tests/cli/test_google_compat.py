"""Google's and ALBERT's create_pretraining_data.py command lines run as they are (issue 12):
--input_file, --output_file, their aliases and defaults, absl booleans, and clear refusals of
what is not built."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bert_data.cli import build_vocab, create_tfrecords
from bert_data.cli.bert_data_cli import build_parser as tools_parser
from bert_data.cli.create_tfrecords import build_parser, main
from bert_data.cli.flags import BoolFlag, parse_args
from bert_data.format.dataset import find_manifest
from bert_data.run.run_files import OutputLock

from tests.helpers.corpus import make_corpus

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "google" / "sample_text.txt"
VOCAB = REPO / "vocab" / "vocab.txt"


def google_text(corpus) -> str:
    """The synthetic corpus in Google's format: a sentence a line, a blank line between documents."""
    lines = []
    for sentences in corpus.documents.values():
        lines += [" ".join(s[:-1]).replace(" ##", "") + " ." for s in sentences] + [""]
    return "\n".join(lines)


def read_with_tf(paths, msl, mpp):
    import tensorflow as tf

    from bert_data.format.layout import tf_feature_description

    spec = tf_feature_description(msl, mpp)
    records = [record.numpy() for path in paths for record in tf.data.TFRecordDataset(str(path))]
    return [{k: v.numpy() for k, v in tf.io.parse_single_example(r, spec).items()} for r in records]


def options(argv):
    """What create_tfrecords makes of a command line: the resolved namespace."""
    from bert_data.cli.compat import resolve

    warnings = []
    return resolve(parse_args(build_parser(), argv), argv, warnings.append), warnings


def test_googles_readme_command_runs_unchanged(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    output = tmp_path / "tf_examples.tfrecord"
    argv = ["--input_file=./examples/google/sample_text.txt", f"--output_file={output}",
            "--vocab_file=vocab/vocab.txt", "--do_lower_case=True", "--max_seq_length=128",
            "--max_predictions_per_seq=20", "--masked_lm_prob=0.15", "--random_seed=12345", "--dupe_factor=5"]
    assert main(argv + ["--quiet"]) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    manifest_path = tmp_path / "tf_examples.tfrecord.data_params.json"
    manifest = json.loads(manifest_path.read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tf_examples.tfrecord", "tf_examples.tfrecord.data_params.json"]
    records = read_with_tf([output], 128, 20)
    assert len(records) == manifest["n_examples"] > 0 and manifest["n_docs"] == 6
    assert manifest["seed"] == 12345 and manifest["do_lower_case"] and manifest["dupe_factor"] == 5
    assert manifest["n_sentences"] == sum(1 for line in SAMPLE.read_text().splitlines() if line.strip())
    assert manifest["vocab_path"] == str(VOCAB)
    assert f"{len(records)} examples from 6 documents in {output}" in err
    assert find_manifest(str(output)) == str(manifest_path)
    # Run again: the named file is replaced, as Google's tool does (no --overwrite needed).
    first = output.read_bytes()
    assert main(argv + ["--quiet"]) == 0 and output.read_bytes() == first


def test_googles_defaults_apply_with_input_file_only():
    args, _ = options(["--input_file", "x.txt", "--vocab_file", "v"])
    assert (args.do_lower_case, args.seed, args.single_sentence_per_line, args.multiple_docs_in_single_file) == \
        (True, 12345, True, True)
    assert (args.max_seq_length, args.dupe_factor, args.max_predictions_per_seq) == (128, 10, 20)
    assert args.input_files == ["x.txt"]
    args, _ = options(["--metadata_files", "m.txt", "--vocab_file", "v"])
    assert (args.do_lower_case, args.seed, args.single_sentence_per_line) == (False, 0, False)
    args, _ = options(["--input_file=a.txt,b/*.txt", "--vocab_file", "v", "--do_lower_case=false", "--random_seed=7",
                       "--do_whole_word_mask", "--ngram=3"])
    assert args.input_files == ["a.txt", "b/*.txt"]
    assert (args.do_lower_case, args.seed, args.mask_whole_word, args.max_ngram_size) == (False, 7, True, 3)



def test_every_default_is_generator_configs():
    """One place for defaults: a command line naming only the documents and the vocabulary gives
    GeneratorConfig's defaults, and a changed field default reaches the parser and the defaults
    the compatibility layer fills in (no copy of it anywhere)."""
    import dataclasses

    from bert_data.config import GeneratorConfig

    argv = ["--metadata_files", "m.txt", "--vocab_file", "v"]
    assert create_tfrecords.config_from_args(options(argv)[0]) == GeneratorConfig(metadata_files=["m.txt"],
                                                                                vocab_file="v")
    fields = {f.name: f for f in dataclasses.fields(GeneratorConfig)}
    saved = {name: fields[name].default for name in ("max_predictions_per_seq", "max_seq_length", "masked_lm_prob")}
    try:
        fields["max_predictions_per_seq"].default, fields["max_seq_length"].default = 77, 512
        fields["masked_lm_prob"].default = 0.2
        args, _ = options(argv)
        assert (args.max_predictions_per_seq, args.max_seq_length, args.masked_lm_prob) == (77, 512, 0.2)
        assert "(default 77;" in " ".join(build_parser().format_help().split())
    finally:
        for name, value in saved.items():
            fields[name].default = value

@pytest.mark.parametrize("form, value", [
    ("--do_lower_case", True), ("--do_lower_case=true", True), ("--do_lower_case=True", True),
    ("--do_lower_case=1", True), ("--do_lower_case=yes", True), ("--nodo_lower_case", False),
    ("--do_lower_case=false", False), ("--do_lower_case=False", False), ("--do_lower_case=0", False),
    ("--do_lower_case=no", False),
])
def test_absl_boolean_forms(form, value):
    args, _ = options(["--metadata_files", "m", "--vocab_file", "v", form])
    assert args.do_lower_case is value


def bool_actions(parser):
    return [action for action in parser._actions if isinstance(action, BoolFlag)]


@pytest.mark.parametrize("parser_of", [create_tfrecords.build_parser, build_vocab.build_parser])
def test_every_boolean_flag_takes_absl_forms(parser_of):
    parser = parser_of()
    actions = bool_actions(parser)
    assert len(actions) >= (18 if parser_of is create_tfrecords.build_parser else 3)
    for action in actions:
        name = action.option_strings[0]
        negative = action.negatives[0]
        base = ["--out", "x"] if parser_of is build_vocab.build_parser else []
        for argv, expected in (([name], True), ([f"{name}=True"], True), ([f"{name}=false"], False),
                               ([f"{name}=0"], False), ([negative], False)):
            assert getattr(parse_args(parser, base + argv), action.dest) is expected, (argv, action.dest)
        # A separate word, as many tools take it (absl would read the flag as true and ignore the word).
        for argv, expected in (([name, "false"], False), ([name, "True"], True), ([name, "0"], False)):
            assert getattr(parse_args(parser, base + argv), action.dest) is expected, (argv, action.dest)


def test_bad_boolean_values_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as stop:
        parse_args(build_parser(), ["--do_lower_case=maybe"])
    assert stop.value.code == 2 and "--do_lower_case expects true or false, got 'maybe'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(build_parser(), ["--nodo_lower_case=true"])
    assert "--nodo_lower_case takes no value" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["--metadata", "m.txt"],  # an abbreviation of --metadata_files
    ["--input_files_pre", "x"],
    ["--max_seq", "64"],
])
def test_no_abbreviations_are_accepted(argv, capsys):
    with pytest.raises(SystemExit):
        parse_args(build_parser(), argv)
    assert f"create_tfrecords: error: unknown option {argv[0]}; did you mean" in capsys.readouterr().err


def test_no_abbreviations_in_build_vocab_and_bert_data_subcommands(capsys):
    with pytest.raises(SystemExit):
        parse_args(build_vocab.build_parser(), ["--metadata", "m.txt", "--out", "v.txt"])
    for argv in (["verify", "out", "--max_prob", "3"], ["stats", "out", "--pl", "x.png"], ["inspect", "x", "--vocab", "v"]):
        with pytest.raises(SystemExit):
            tools_parser().parse_args(argv)
        assert f"bert-data {argv[0]}: error: unknown option {argv[2]}; did you mean" in capsys.readouterr().err


@pytest.mark.parametrize("extra, message", [
    (["--random_next_sentence", "--sentence_order_prediction"],
     "--random_next_sentence and --sentence_order_prediction contradict each other"),
    (["--do_permutation=true"], "--do_permutation=true (ALBERT's permutation training) is not supported"),
    (["--favor_shorter_ngram=false", "--ngram=3"], "--favor_shorter_ngram=false (uniform n-gram sizes) is not supported"),
    (["--output_dir", "o"], "--output_file names the output files: it cannot be combined with --output_dir"),
    (["--num_output_files", "2"], "cannot be combined with --num_output_files"),
    (["--metadata_files", "m.txt"], "cannot be combined with --metadata_files: use --input_files"),
    (["--val_fraction", "0.1"], "--output_file writes one dataset"),
])
def test_what_is_not_built_or_contradicts_is_refused_in_one_line(tmp_path, capsys, extra, message):
    argv = [f"--input_file={SAMPLE}", f"--output_file={tmp_path / 'out.tfrecord'}", f"--vocab_file={VOCAB}",
            "--quiet", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and err.startswith("create_tfrecords: error: ")
    assert list(tmp_path.iterdir()) == []


def test_albert_command_line_runs_and_names_the_albert_defaults_not_applied(tmp_path, capsys):
    argv = [f"--input_file={SAMPLE}", f"--output_file={tmp_path / 'albert.tfrecord'}", f"--vocab_file={VOCAB}",
            "--do_lower_case=True", "--max_predictions_per_seq=20", "--ngram=3", "--favor_shorter_ngram=true",
            "--do_permutation=false", "--dupe_factor=2", "--parallel", "--input_file_mode=r", "--quiet"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "ALBERT's create_pretraining_data.py defaults are not applied: max_seq_length 512 (this run: 128), " \
           "do_whole_word_mask true (this run: false)" in err
    assert "dupe_factor 40" not in err and "ngram 3" not in err  # given explicitly
    manifest = json.loads((tmp_path / "albert.tfrecord.data_params.json").read_text())
    assert manifest["max_ngram_size"] == 3 and manifest["dupe_factor"] == 2
    assert manifest["sentence_order_prediction"] is True  # ALBERT's default task


@pytest.mark.parametrize("extra, sentence_order", [
    ([], False),  # Google's command line: next-sentence prediction
    (["--ngram=3"], True),  # ALBERT's: sentence order, its default
    (["--ngram=3", "--random_next_sentence"], False),
    (["--ngram=3", "--random_next_sentence=false"], True),
    (["--sentence_order_prediction"], True),
])
def test_albert_random_next_sentence_chooses_the_task(tmp_path, extra, sentence_order):
    args, _ = options([f"--input_file={SAMPLE}", f"--vocab_file={VOCAB}", *extra])
    assert create_tfrecords.config_from_args(args).validate().sentence_order_prediction is sentence_order


def test_no_documents_is_one_clear_message(tmp_path, capsys):
    assert main(["--vocab_file", str(VOCAB), "--output_dir", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("create_tfrecords: error: no documents: give --metadata_files (files listing them), "
                           "--input_files (paths or globs), Google's --input_file or --sources (a file of sources)")
    assert main([f"--input_file={SAMPLE}", f"--output_file={tmp_path / 'x'}"]) == 2
    assert "--vocab_file is required" in capsys.readouterr().err


def test_input_file_pattern_that_matches_nothing(tmp_path, capsys):
    assert main([f"--input_file={tmp_path}/*.txt", f"--output_file={tmp_path / 'x'}", f"--vocab_file={VOCAB}"]) == 2
    assert f"input pattern {tmp_path}/*.txt matches no file" in capsys.readouterr().err


def test_output_files_get_instance_i_in_file_i_mod_n(tmp_path, capsys):
    """Google's --output_file list: record i of the run goes to file i mod N.  One file gets the
    run's records in order; three files get the same instances dealt round-robin (masks differ,
    as each file has its own random stream: compare the instances with their masks undone)."""
    corpus = make_corpus(tmp_path / "c", n_docs=12, min_sentences=5, max_sentences=15)
    (tmp_path / "google.txt").write_text(google_text(corpus))
    common = [f"--input_file={tmp_path / 'google.txt'}", f"--vocab_file={corpus.vocab}", "--max_seq_length=32",
              "--max_predictions_per_seq=5", "--dupe_factor=2", "--split_num=4", "--quiet", "--num_workers=1"]
    (tmp_path / "three").mkdir()  # ("one" is created by the run)
    assert main(common + [f"--output_file={tmp_path / 'one' / 'all.tfrecord'}"]) == 0
    names = [tmp_path / "three" / f"part-{i}.tfrecord" for i in range(3)]
    assert main(common + ["--output_file=" + ",".join(map(str, names))]) == 0

    def unmasked(record):
        ids = record["input_ids"].copy()
        weights = record["masked_lm_weights"] > 0
        ids[record["masked_lm_positions"][weights]] = record["masked_lm_ids"][weights]
        return ids.tolist(), record["segment_ids"].tolist(), int(record["next_sentence_labels"][0])

    everything = [unmasked(r) for r in read_with_tf([tmp_path / "one" / "all.tfrecord"], 32, 5)]
    parts = [[unmasked(r) for r in read_with_tf([name], 32, 5)] for name in names]
    assert sum(map(len, parts)) == len(everything) > 30
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    for i, instance in enumerate(everything):
        assert parts[i % 3][i // 3] == instance
    manifest = json.loads((tmp_path / "three" / "part-0.tfrecord.data_params.json").read_text())
    assert list(manifest["examples_per_file"]) == [n.name for n in names]
    for name in names:
        assert find_manifest(str(name)) == str(tmp_path / "three" / "part-0.tfrecord.data_params.json")


def test_google_style_runs_share_an_output_directory(tmp_path, capsys):
    """One run per input shard, in parallel, into one directory: each run has its own lock, work
    directory and manifest, and replaces only its own files."""
    corpus = make_corpus(tmp_path / "c", n_docs=8, min_sentences=5, max_sentences=10)
    text = google_text(corpus).split("\n\n")
    (tmp_path / "in-0.txt").write_text("\n\n".join(text[:4]))
    (tmp_path / "in-1.txt").write_text("\n\n".join(text[4:]))
    out = tmp_path / "out"
    out.mkdir()

    def run(k, *extra):
        return main([f"--input_file={tmp_path / f'in-{k}.txt'}", f"--output_file={out / f'shard-{k}.tfrecord'}",
                     f"--vocab_file={corpus.vocab}", "--max_seq_length=32", "--max_predictions_per_seq=5",
                     "--dupe_factor=1", "--quiet", *extra])

    lock = OutputLock(str(out), str(out / ".shard-0.tfrecord.bert_data.lock"))
    lock.acquire()  # run 0 is under way
    try:
        assert run(1) == 0, capsys.readouterr().err
        assert run(0) == 2 and "is in use by another run" in capsys.readouterr().err
    finally:
        lock.release()
    assert run(0) == 0
    shard_1 = (out / "shard-1.tfrecord").read_bytes()
    assert run(0, "--random_seed=3") == 0  # replaces run 0's file only
    assert (out / "shard-1.tfrecord").read_bytes() == shard_1
    assert sorted(p.name for p in out.iterdir()) == [
        "shard-0.tfrecord", "shard-0.tfrecord.data_params.json", "shard-1.tfrecord", "shard-1.tfrecord.data_params.json"]
    for k in (0, 1):
        assert find_manifest(str(out / f"shard-{k}.tfrecord")) == str(out / f"shard-{k}.tfrecord.data_params.json")
    # The readers find both runs' manifests for the directory and for a glob.
    from bert_data.format.dataset import shard_sets

    groups = shard_sets(str(out))
    assert sorted(os.path.basename(g.manifest_path) for g in groups) == [
        "shard-0.tfrecord.data_params.json", "shard-1.tfrecord.data_params.json"]
    assert len(shard_sets(str(out / "*.tfrecord"))) == 2
    assert sum(len(read_with_tf([out / f"shard-{k}.tfrecord"], 32, 5)) for k in (0, 1)) == sum(
        json.loads((out / f"shard-{k}.tfrecord.data_params.json").read_text())["n_examples"] for k in (0, 1))


def test_output_files_must_share_a_directory(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert main([f"--input_file={SAMPLE}", f"--output_file={tmp_path / 'a' / 'x'},{tmp_path / 'b' / 'y'}",
                 f"--vocab_file={VOCAB}", "--quiet"]) == 2
    assert "--output_file: the files must be in one directory" in capsys.readouterr().err


def test_output_files_set_the_output_directory_and_number_of_shards(tmp_path):
    args, _ = options(["--input_file", "x", "--output_file", f"{tmp_path}/a.tfrecord,{tmp_path}/b.tfrecord",
                       "--vocab_file", "v"])
    assert not {"input_file", "output_file", "random_next_sentence"} & set(vars(args))
    config = create_tfrecords.config_from_args(args).validate()
    assert (config.output_dir, config.num_output_files) == (str(tmp_path), 2)
    assert config.output_files == [str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")]
