"""Finalizing is one recoverable step, and the manifest is its commit point: a run killed at
any step of it (a real SIGKILL of the parent, chosen by step, never by time) is finished by
``--resume`` with the bytes of an uninterrupted run, and until then no reader takes the
directory for a dataset."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bert_data.cli.bert_data_cli import main as bert_data_main
from bert_data.cli.create_tfrecords import main as create_tfrecords_main
from bert_data.format.dataset import dataset_info, shard_sets
from bert_data.format.dataset_layout import WORK_DIR
from bert_data.run.fault_injection import KILL_AT_FINALIZE_STEP

from tests.helpers.corpus import file_hashes, make_corpus

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("finalize")
    return make_corpus(root / "corpus", n_docs=24, min_sentences=8, max_sentences=16, words_per_doc=20)


def command(corpus, output, *extra):
    return [sys.executable, "-m", "bert_data.cli.create_tfrecords", "--metadata_files", str(corpus.metadata),
            "--input_files_prefix", str(corpus.root), "--vocab_file", str(corpus.vocab), "--do_lower_case",
            "--output_dir", str(output), "--max_seq_length", "64", "--max_predictions_per_seq", "10",
            "--num_output_files", "3", "--num_workers", "1", "--quiet", *map(str, extra)]


def run_here(capsys, corpus, output, *extra):
    """The same command in this process (where no process is killed): its exit status and stderr."""
    code = create_tfrecords_main(command(corpus, output, *extra)[3:])
    return code, capsys.readouterr().err


def run(corpus, output, *extra, kill_at=None):
    env = dict(os.environ)
    if kill_at is not None:
        env[KILL_AT_FINALIZE_STEP] = str(kill_at)
    return subprocess.run(command(corpus, output, *extra), cwd=REPO, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def reference(small, tmp_path_factory):
    """The bytes of uninterrupted runs, made in this process (a command's bytes do not depend on
    the process that runs it)."""
    outputs = {}
    for name, extra in (("plain", ()), ("split", ("--val_fraction", "0.2"))):
        output = tmp_path_factory.mktemp("reference") / name
        assert create_tfrecords_main(command(small, output, *extra)[3:]) == 0
        outputs[name] = (file_hashes(output), sorted(p.relative_to(output).as_posix() for p in output.rglob("*")))
    return outputs


# Steps: each of the 3 shards renamed (per split), then each manifest (train's last: the commit
# point), then the clean-up of the work files.
COMMIT_STEP = {"plain": 3 + 1, "split": 2 * 3 + 2}


@pytest.mark.parametrize("layout, step", [("plain", step) for step in range(1, COMMIT_STEP["plain"] + 1)]
                         + [("split", step) for step in (4, 7, 8)])
def test_a_parent_killed_at_each_step_of_finalizing_is_finished_by_resume(small, reference, tmp_path, capsys,
                                                                          layout, step):
    extra = ("--val_fraction", "0.2") if layout == "split" else ()
    output = tmp_path / "out"
    killed = run(small, output, *extra, kill_at=step)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    if step < COMMIT_STEP[layout]:
        # Not a dataset yet, for every reader: the loaders, verify and stats say so and how to finish.
        with pytest.raises(ValueError, match="unfinished run.*--resume"):
            dataset_info(str(output))
        with pytest.raises(ValueError, match="unfinished run"):
            shard_sets([str(output)])
        for tool in ("verify", "stats"):
            code = bert_data_main([tool, str(output)])
            err = capsys.readouterr().err
            assert code != 0 and "unfinished run" in err and "--resume" in err, (tool, err)
        # Shard files named one by one are refused too, unless a manifest lists them.
        finished_shard = next(iter(sorted((output / "train" if layout == "split" else output).glob("*.tfrecords"))),
                              None)
        if finished_shard is not None:
            with pytest.raises(ValueError, match="unfinished run"):
                dataset_info(str(finished_shard))
    resumed = run(small, output, *extra, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    hashes, names = reference[layout]
    assert file_hashes(output) == hashes
    assert sorted(p.relative_to(output).as_posix() for p in output.rglob("*")) == names  # no work file left
    assert not any(name.endswith(WORK_DIR) for name in names)


def test_a_finished_run_is_not_resumed(small, reference, tmp_path, capsys):
    output = tmp_path / "out"
    assert run_here(capsys, small, output)[0] == 0
    code, err = run_here(capsys, small, output, "--resume")
    assert code == 2 and "holds a finished run; nothing to resume" in err
    assert file_hashes(output) == reference["plain"][0]


def test_resume_says_what_was_left(small, reference, tmp_path):
    output = tmp_path / "out"
    assert run(small, output, kill_at=1).returncode == -signal.SIGKILL
    resumed = run(small, output, "--resume")
    assert resumed.returncode == 0 and "kept from the interrupted run, nothing was left but to finish)" in \
        resumed.stderr, resumed.stderr


def test_ctrl_c_while_finishing_says_only_finishing_is_left(small, reference, tmp_path, capsys, monkeypatch):
    from bert_data.cli.create_tfrecords import main
    from bert_data.run import run_files

    class CtrlCAtTheSecondStep:
        def __init__(self):
            self.done = 0

        def __call__(self):
            self.done += 1
            if self.done == 2:
                raise KeyboardInterrupt

    output = tmp_path / "out"
    argv = command(small, output)[3:]
    with monkeypatch.context() as patch:
        patch.setattr(run_files, "_Steps", CtrlCAtTheSecondStep)
        assert main(argv) == 130
    err = capsys.readouterr().err
    assert "interrupted; unit 1 of 1 kept (" in err and "run the same command with --resume to finish" in err, err
    assert main(argv + ["--resume"]) == 0
    assert file_hashes(output) == reference["plain"][0]


@pytest.mark.parametrize("output_format", ["hdf5", "parquet"])
def test_a_run_stopped_after_its_shards_are_written_from_their_bodies_resumes(small, tmp_path, capsys, monkeypatch,
                                                                              output_format):
    """HDF5 and Parquet shards are written from their bodies when every unit is in, before the
    journal says so: stopped in that window, the bodies are still there for --resume, and once
    the manifest is written they go."""
    from bert_data.cli.create_tfrecords import main
    from bert_data.run.assembly import ShardAssembler

    argv = command(small, tmp_path / "ref", "--output_format", output_format)[3:]
    assert main(argv) == 0
    reference = file_hashes(tmp_path / "ref")
    written = ShardAssembler.finish

    def finish_then_ctrl_c(self):
        written(self)
        raise KeyboardInterrupt

    argv = command(small, tmp_path / "out", "--output_format", output_format)[3:]
    with monkeypatch.context() as patch:
        patch.setattr(ShardAssembler, "finish", finish_then_ctrl_c)
        assert main(argv) == 130
    capsys.readouterr()
    assert main(argv + ["--resume"]) == 0, capsys.readouterr().err
    assert file_hashes(tmp_path / "out") == reference
    assert not list((tmp_path / "out").rglob("*.body"))


def test_a_clean_up_cut_short_is_finished_by_resume(small, reference, tmp_path, capsys, monkeypatch):
    """The clean-up after the manifest removes the journal first (a finished run is never resumed
    from half its work files); one killed after that leaves work files and no journal, which
    ``--resume`` removes, saying so (kept pieces are hundreds of MB), the dataset untouched."""
    from bert_data.run import run_files

    removed = []
    real_rmtree = run_files.shutil.rmtree

    def rmtree_after_the_journal(path, *args, **kwargs):
        removed.append((path, os.path.exists(os.path.join(path, run_files.JOURNAL))))
        return real_rmtree(path, *args, **kwargs)

    output = tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(run_files.shutil, "rmtree", rmtree_after_the_journal)
        assert run_here(capsys, small, output)[0] == 0
    assert (str(output / WORK_DIR), False) in removed, removed
    work = output / WORK_DIR
    work.mkdir()  # what a kill in the middle of the clean-up leaves
    (work / "slice-0000001.tokens.npy").write_bytes(b"x" * 100)
    (work / "unit-0000001-train-00000.piece").write_bytes(b"y" * 100)
    code, err = run_here(capsys, small, output, "--resume")
    assert code == 2 and "holds a finished run; nothing to resume (removed" in err and str(work) in err, err
    assert not work.exists()
    assert file_hashes(output) == reference["plain"][0]
