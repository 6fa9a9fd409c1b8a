"""Interruptions and --resume: whatever stops a run (Ctrl-C, SIGTERM, SIGKILL, a failure before
anything was finished), nothing that looks complete is left, the message says what is kept, and
--resume goes on to the bytes of an uninterrupted run."""

from __future__ import annotations

import json
import signal
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from bert_data.cli.create_tfrecords import main
from bert_data.run import runner, scheduler

from tests.helpers.cli_runs import small_run as cli
from tests.helpers.corpus import file_hashes, make_corpus
from tests.helpers.interruptions import interrupted_at_append

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def corpus(tmp_path):
    return make_corpus(tmp_path / "corpus", n_docs=8, min_sentences=5, max_sentences=12)


@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    """A corpus whose generation takes a few seconds, and its uninterrupted output."""
    root = tmp_path_factory.mktemp("long")
    corpus = make_corpus(root / "corpus", n_docs=240, min_sentences=20, max_sentences=40, words_per_doc=20)
    reference = root / "reference"
    assert main(generator_command(corpus, reference)[3:]) == 0  # (the bytes do not depend on the process)
    return corpus, file_hashes(reference)


def generator_command(corpus, output, *extra):
    return [sys.executable, "-m", "bert_data.cli.create_tfrecords", "--metadata_files", str(corpus.metadata),
            "--input_files_prefix", str(corpus.root), "--vocab_file", str(corpus.vocab), "--do_lower_case",
            "--output_dir", str(output), "--dupe_factor", "30", "--split_num", "8", "--num_output_files", "4",
            "--num_workers", "2", "--quiet", *extra]


def in_this_process(capsys, corpus, output, *extra):
    """The command run by ``main`` in this process, where the signal is not the point (a
    --resume, a refusal): its exit status and stderr."""
    code = main(generator_command(corpus, output, *extra)[3:])
    return code, capsys.readouterr().err


def units_done(journal):
    try:
        return json.loads(journal.read_text())["totals"]["units_done"]
    except (OSError, ValueError, KeyError):
        return 0


def interrupt_after_first_units(corpus, output, send, unit=2):
    """Start a run that stops after journaling ``unit`` units (the runner's test seam
    ``BERT_DATA_TEST_PAUSE_AFTER_UNIT``: chosen by work done, never by time), interrupt it there;
    returns (code, stderr, units done when the signal was sent)."""
    env = {**os.environ, "BERT_DATA_TEST_PAUSE_AFTER_UNIT": str(unit)}
    # SIGINT as a terminal delivers it: a suite started in the background inherits SIGINT ignored
    # (POSIX shells do that to background jobs), and Python keeps an ignored SIGINT ignored.
    process = subprocess.Popen(generator_command(corpus, output), cwd=REPO, stderr=subprocess.PIPE, text=True, env=env,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    before = []
    for line in process.stderr:  # blocks until the run says it paused (or ends: then the assert fails)
        if line.startswith(f"bert_data: test: paused after unit {unit}"):
            break
        before.append(line)
    else:
        raise AssertionError(f"the run ended before unit {unit}: {''.join(before)}")
    done_at_signal = units_done(output / ".bert_data_work" / "journal.json")
    send(process)
    _, err = process.communicate(timeout=600)
    return process.returncode, "".join(before) + err, done_at_signal


def looks_complete(output):
    return sorted(p.name for p in output.rglob("*") if p.name.endswith(".tfrecords") or p.name == "data_params.json")


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_interrupted_run_leaves_nothing_complete_looking_and_resumes_to_the_same_bytes(long_run, tmp_path, how,
                                                                                       capsys):
    corpus, reference = long_run
    output = tmp_path / "out"
    code, err, done_at_signal = interrupt_after_first_units(corpus, output,
                                                           lambda p: p.send_signal(getattr(signal, how)))
    assert looks_complete(output) == []
    done_at_exit = units_done(output / ".bert_data_work" / "journal.json")
    if how != "SIGKILL":
        assert code == {"SIGINT": 130, "SIGTERM": 143}[how]
        # It stops at once: the units in flight are dropped, not finished, however long the rest
        # of the run would take; what the journal vouched for at the signal is kept, and the unit
        # appended whole while that journal was written (group commit, runner._UnitCommits).
        assert (done_at_signal, done_at_exit) == (2, 3)
        # What is kept and where --resume goes on, numbered from 1 as the work files are.
        assert f"units 1-{done_at_exit} of 30 kept (" in err and " MB of shards)" in err, err
        assert f"with --resume to continue with unit {done_at_exit + 1}" in err
        assert len(err.strip().splitlines()) == 1
    # A killed parent's workers notice and exit (the kernel signals them); psutil waits for their
    # exit, with a generous bound only so that a leak fails the test instead of hanging it.
    survivors = [p for p in psutil.process_iter(["cmdline"]) if str(output) in " ".join(p.info["cmdline"] or [])]
    _, alive = psutil.wait_procs(survivors, timeout=60)
    assert not alive

    code, err = in_this_process(capsys, corpus, output, "--resume")
    assert code == 0, err
    assert f"resumed: units 1-{done_at_exit} kept from the interrupted run, units {done_at_exit + 1}-30 done now" \
        in err
    assert file_hashes(output) == reference
    assert not (output / ".bert_data_work").exists()


def test_resume_refuses_other_options_and_finished_runs(long_run, tmp_path, capsys):
    corpus, _ = long_run
    output = tmp_path / "out"
    code, _, _ = interrupt_after_first_units(corpus, output, lambda p: p.send_signal(signal.SIGINT))
    assert code == 130
    code, err = in_this_process(capsys, corpus, output, "--resume", "--masked_lm_prob", "0.2")
    assert code == 2 and "started with other options" in err
    code, err = in_this_process(capsys, corpus, output)
    assert code == 2 and "--resume" in err
    assert in_this_process(capsys, corpus, output, "--resume")[0] == 0
    code, err = in_this_process(capsys, corpus, output, "--resume")
    assert code == 2 and "nothing to resume" in err


def test_interrupted_before_anything_was_finished_keeps_nothing_and_a_plain_rerun_works(capsys, corpus, tmp_path,
                                                                                         monkeypatch):
    output = tmp_path / "out"
    with monkeypatch.context() as patch:
        def tokenize_slice(*args):
            raise KeyboardInterrupt

        patch.setattr(scheduler, "tokenize_slice", tokenize_slice)
        code, err = cli(capsys, corpus, output, "--split_num", "2")
    assert code == 130
    assert err.strip() == ("create_tfrecords: interrupted; nothing was finished, so nothing is kept; run the same "
                           "command again to start over")
    assert list(output.iterdir()) == []  # as if the run had never started
    code, err = cli(capsys, corpus, output, "--split_num", "2", "--resume")
    assert code == 2 and "holds no interrupted run, so there is nothing to resume; run without --resume" in err
    assert cli(capsys, corpus, output, "--split_num", "2")[0] == 0  # no --overwrite needed


def test_interrupted_before_the_first_unit_keeps_the_tokenized_slices(capsys, corpus, tmp_path):
    assert cli(capsys, corpus, tmp_path / "reference", "--split_num", "2")[0] == 0
    output = tmp_path / "out"
    with interrupted_at_append(1):
        code, err = cli(capsys, corpus, output, "--split_num", "2")
    assert code == 130
    assert err.strip() == ("create_tfrecords: interrupted; no unit was written yet; 1 of 1 tokenized slices kept; run "
                           "the same command with --resume to continue with unit 1")
    code, err = cli(capsys, corpus, output, "--split_num", "2", "--resume")
    assert code == 0 and "resumed: no unit had been written; the interrupted run's tokenized slices were reused" in err
    assert file_hashes(output) == file_hashes(tmp_path / "reference")


def test_interrupted_after_one_unit_says_what_is_kept_and_resume_goes_on_from_there(capsys, corpus, tmp_path):
    assert cli(capsys, corpus, tmp_path / "reference", "--split_num", "2")[0] == 0
    output = tmp_path / "out"
    pieces = []
    with interrupted_at_append(2, pieces=pieces):
        code, err = cli(capsys, corpus, output, "--split_num", "2")
    assert code == 130
    kept = sum(p.stat().st_size for p in output.glob("*.tfrecords.tmp"))
    assert f"interrupted; unit 1 of 4 kept ({kept / 1e6:,.1f} MB of shards); run the same command with --resume " \
           "to continue with unit 2" in err
    # Work files number units from 1, as the messages do: the first unit's pieces are unit 1's.
    assert pieces and all(name.startswith(("unit-0000001-", "unit-0000002-")) for name in pieces), pieces
    assert pieces[0].startswith("unit-0000001-")
    code, err = cli(capsys, corpus, output, "--split_num", "2", "--resume")
    assert code == 0 and "resumed: unit 1 kept from the interrupted run, units 2-4 done now" in err
    assert file_hashes(output) == file_hashes(tmp_path / "reference")


def test_resume_with_a_run_that_kept_nothing_is_refused(capsys, corpus, tmp_path):
    output = tmp_path / "out"
    (output / ".bert_data_work").mkdir(parents=True)  # as a run killed (SIGKILL) before its journal leaves
    code, err = cli(capsys, corpus, output, "--resume")
    assert code == 2 and "stopped before it kept anything, so there is nothing to resume" in err
    assert "with --overwrite" in err
    assert cli(capsys, corpus, output, "--overwrite")[0] == 0


def test_resume_with_changes_names_each_of_them(capsys, corpus, tmp_path):
    """A refused --resume names the options that differ with both values, a vocabulary whose
    content changed and a list of documents that did (the fingerprint decides; the journal's
    record of the run explains)."""
    import shutil

    vocab, metadata = tmp_path / "vocab.txt", tmp_path / "metadata.txt"
    shutil.copy(corpus.vocab, vocab)
    shutil.copy(corpus.metadata, metadata)
    output = tmp_path / "out"

    def run(*extra):
        return cli(capsys, corpus, output, "--split_num", "2", "--vocab_file", vocab, *extra, metadata=metadata)

    with interrupted_at_append(2):
        assert run()[0] == 130
    refused = (f"create_tfrecords: error: --resume: {output} was started with other options: {{}}; resume with the "
               "same ones, or use --overwrite to start again")
    code, err = run("--resume", "--masked_lm_prob", "0.1", "--seed", "7")
    assert code == 2 and err.strip() == refused.format("--masked_lm_prob was 0.15, now 0.1; --seed was 0, now 7")
    original = vocab.read_bytes()
    vocab.write_bytes(original + b"zzzz\n")
    code, err = run("--resume")
    assert code == 2 and f"was started with other options: the content of {vocab} changed (SHA-256 " in err
    vocab.write_bytes(original)
    lines = corpus.metadata.read_text().splitlines()
    metadata.write_text("\n".join(lines[:-1]) + "\n")
    code, err = run("--resume")
    assert code == 2 and err.strip() == refused.format(f"{len(lines)} document files were listed, now {len(lines) - 1}")
    metadata.write_text("\n".join(lines[:-2] + [lines[-1], lines[-2]]) + "\n")
    code, err = run("--resume")
    assert code == 2 and err.strip() == refused.format(f"the list of document files changed (as many, {len(lines)}, "
                                                       "other paths)")
    metadata.write_text("\n".join(lines) + "\n")
    code, err = run("--resume")
    assert code == 0, err
