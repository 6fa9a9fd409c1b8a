"""Output never destroys what the run did not write, and many shards need few descriptors."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from bert_data.cli.create_tfrecords import main
from bert_data.run.run_files import OutputLock

from tests.helpers.corpus import make_corpus

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("safety") / "corpus", n_docs=12, min_sentences=6, max_sentences=10,
                       words_per_doc=15)


def options(corpus, *extra):
    return ["--input_files_prefix", str(corpus.root), "--vocab_file", str(corpus.vocab), "--do_lower_case",
            "--max_seq_length", "64", "--max_predictions_per_seq", "10", "--num_workers", "1", "--quiet", *extra]


def test_an_output_file_that_is_an_input_file_is_refused_before_anything_is_deleted(capsys, corpus, tmp_path):
    document = corpus.root / "docs" / "doc000.txt"
    before = document.read_bytes()
    code = main(options(corpus, "--input_files", "docs/doc000.txt", "--output_file", str(document)))
    err = capsys.readouterr().err
    assert code == 2 and f"{document} is read by this run and --output_file would overwrite it" in err, err
    assert document.read_bytes() == before
    # The same file through another path (a symbolic link) is the same file.
    link = tmp_path / "link.txt"
    link.symlink_to(document)
    code = main(options(corpus, "--input_files", "docs/doc000.txt", "--output_file", str(link)))
    assert code == 2 and "--output_file would overwrite it" in capsys.readouterr().err
    assert document.read_bytes() == before


def test_overwrite_removes_only_what_this_tool_wrote(capsys, corpus, tmp_path):
    output = tmp_path / "out"
    argv = options(corpus, "--metadata_files", str(corpus.metadata), "--output_dir", str(output),
                   "--num_output_files", "2")
    assert main(argv) == 0
    stray = output / "mine.tfrecords"  # a user's file, of the same kind, that no run of ours wrote
    stray.write_bytes(b"keep me")
    notes = output / "notes.txt"
    notes.write_text("keep me too")
    assert main(argv + ["--overwrite"]) == 0
    assert stray.read_bytes() == b"keep me" and notes.read_text() == "keep me too"
    assert sorted(p.name for p in output.iterdir()) == ["data_params.json", "examples-1.tfrecords",
                                                        "examples-2.tfrecords", "mine.tfrecords", "notes.txt"]
    # A file named as this run names its shards, that no record of ours lists, is not replaced.
    (output / "examples-1.tfrecords").unlink()
    (output / "data_params.json").unlink()
    (output / "examples-1.tfrecords").write_bytes(b"the user's")
    capsys.readouterr()
    assert main(argv + ["--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "examples-1.tfrecords was not written by this tool" in err and "move it away" in err, err
    assert (output / "examples-1.tfrecords").read_bytes() == b"the user's"


def test_runs_of_a_directory_and_runs_of_named_files_share_one_lock(capsys, corpus, tmp_path):
    """While a Google-style --output_file run writes D/a.tfrecords, a --output_dir D run is kept
    out (it could meet the other's files in progress); other --output_file runs are not.  After
    it (killed: its files in progress stay), the --output_dir D --overwrite run leaves them alone."""
    output = tmp_path / "out"
    output.mkdir()
    theirs = [output / "a.tfrecords.tmp", output / ".a.tfrecords.bert_data_work" / "journal.json"]
    theirs[1].parent.mkdir()
    for path in theirs:
        path.write_text("another run's")
    of_the_directory = options(corpus, "--metadata_files", str(corpus.metadata), "--output_dir", str(output),
                               "--overwrite")
    named = options(corpus, "--metadata_files", str(corpus.metadata), "--output_file", str(output / "b.tfrecords"))
    running = OutputLock(str(output), shared=True)  # as the --output_file run holds it
    running.acquire()
    try:
        assert main(of_the_directory) == 2
        assert "is in use by another run (runs writing --output_file files there)" in capsys.readouterr().err
        assert main(named) == 0  # runs of named files share the directory
    finally:
        running.release()
    assert main(of_the_directory) == 0
    assert all(path.read_text() == "another run's" for path in theirs)
    assert (output / "b.tfrecords").exists() and (output / "data_params.json").exists()
    assert not (output / ".bert_data.lock").exists()  # the last run to hold the lock removed it


def test_more_output_files_than_the_process_may_open(corpus, tmp_path):
    """300 shards with at most 64 open descriptors (a real limit, set for the run's process)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    output = tmp_path / "out"
    command = [sys.executable, "-m", "bert_data.cli.create_tfrecords", "--metadata_files", str(corpus.metadata),
               *options(corpus, "--output_dir", str(output), "--num_output_files", "300")]
    result = subprocess.run(command, cwd=REPO, preexec_fn=limit, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert len(list(output.glob("*.tfrecords"))) == 300 and not list(output.glob("*.tmp"))


def _shard_bytes(output: Path) -> dict:
    return {path.name: path.read_bytes() for path in sorted(output.glob("*.tfrecords"))}


def test_shards_kept_open_between_units_are_bounded_and_give_the_same_bytes(corpus, tmp_path, monkeypatch):
    """The assembler keeps shards open between units, never more than its bound (the least
    recently appended to closed first), and a shard it cannot open for want of descriptors
    (EMFILE) is opened again once the others are closed: the same shards either way.  (Shards
    not shuffled at the end: shuffled ones are not assembled, their pieces are kept.)"""
    import builtins
    import errno

    from bert_data.run import assembly

    argv = options(corpus, "--metadata_files", str(corpus.metadata), "--num_output_files", "7", "--split_num", "4",
                   "--dupe_factor", "2", "--keep_corpus_order")
    assert main(argv + ["--output_dir", str(tmp_path / "reference")]) == 0
    reference = _shard_bytes(tmp_path / "reference")
    assert len(reference) == 7

    most_open, real_shard = [], assembly.ShardAssembler._shard

    def shard(self, key):
        handle = real_shard(self, key)
        most_open.append(len(self._open))
        return handle

    assembly._open_shards_allowed.cache_clear()
    with monkeypatch.context() as patch:
        patch.setattr(assembly, "OPEN_SHARDS", 3)
        patch.setattr(assembly.ShardAssembler, "_shard", shard)
        assert main(argv + ["--output_dir", str(tmp_path / "bounded")]) == 0
    assembly._open_shards_allowed.cache_clear()
    assert max(most_open) == 3 and len(most_open) > 7  # shards opened again once closed for others
    assert _shard_bytes(tmp_path / "bounded") == reference

    refused = []
    real_open = builtins.open

    def open_without_descriptors(path, mode="r", *args, **kwargs):
        if mode == "r+b" and str(path).endswith(".tfrecords.tmp") and len(refused) < 2 and most_open \
                and path not in refused:  # (refused once: the open after the others are closed succeeds)
            refused.append(path)
            raise OSError(errno.EMFILE, "Too many open files", path)
        return real_open(path, mode, *args, **kwargs)

    most_open.clear()
    with monkeypatch.context() as patch:
        patch.setattr(assembly.ShardAssembler, "_shard", shard)
        patch.setattr(assembly, "open", open_without_descriptors, raising=False)
        assert main(argv + ["--output_dir", str(tmp_path / "emfile")]) == 0
    assert len(refused) == 2
    assert _shard_bytes(tmp_path / "emfile") == reference
