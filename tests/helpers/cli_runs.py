"""create_tfrecords and bert-data run in this process, as the command-line tests run them: the
exit status and what they wrote."""

from __future__ import annotations

from bert_data.cli.bert_data_cli import main as tools_main
from bert_data.cli.create_tfrecords import main


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def base_options(corpus, output):
    """Every option of a quick run but the input."""
    return ["--vocab_file", corpus.vocab, "--do_lower_case", "--output_dir", output, "--dupe_factor", "1", "--quiet",
            "--num_workers", "1", "--max_seq_length", "64", "--max_predictions_per_seq", "10"]


def small_run(capsys, corpus, output, *extra, metadata=None):
    """A quick run of ``corpus`` (its metadata file, or ``metadata``) into two shards."""
    return run_cli(capsys, "--metadata_files", metadata or corpus.metadata, "--input_files_prefix", corpus.root,
                   *base_options(corpus, output), "--num_output_files", "2", *extra)


def run_tools(argv, capsys):
    """``bert-data`` (verify, inspect, stats, ...): the exit status, stdout and stderr."""
    code = tools_main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err
