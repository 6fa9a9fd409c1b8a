"""Options are validated before any work, each failure a one-line error naming the problem."""

from __future__ import annotations

import pytest

from bert_data.cli.create_tfrecords import main


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
    from conftest import make_corpus

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
