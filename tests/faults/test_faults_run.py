"""Faults of a real run, injected by work done (at a unit, at a byte, at a slice), never by
time: a full disk in the parent or in a worker, and a worker killed as the out-of-memory killer
kills.  Each ends in one line naming the cause and what was kept; what the journal vouches for
stays, and ``--resume`` continues to the bytes of an uninterrupted run."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import signal

import pytest

from bert_data.cli.create_tfrecords import main
from bert_data.run import assembly, runner, scheduler, tasks

from tests.helpers.corpus import file_hashes, make_corpus
from tests.helpers.interruptions import interrupted_at_append


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("faults") / "corpus", n_docs=40, min_sentences=8, max_sentences=16,
                       words_per_doc=20)


def cli(capsys, corpus, output, *extra, workers=1):
    code = main(["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root),
                 "--vocab_file", str(corpus.vocab), "--do_lower_case", "--output_dir", str(output),
                 "--max_seq_length", "64", "--max_predictions_per_seq", "10", "--num_output_files", "3",
                 "--split_num", "4", "--dupe_factor", "2", "--num_workers", str(workers), "--quiet", *extra])
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("reference") / "out"
    assert main(["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root),
                 "--vocab_file", str(corpus.vocab), "--do_lower_case", "--output_dir", str(output),
                 "--max_seq_length", "64", "--max_predictions_per_seq", "10", "--num_output_files", "3",
                 "--split_num", "4", "--dupe_factor", "2", "--num_workers", "1", "--quiet"]) == 0
    return file_hashes(output)


def journal_of(output):
    return json.loads((output / ".bert_data_work" / "journal.json").read_text())


def kept_as_journaled(output):
    """The shards in progress hold exactly what the journal vouches for, or more (a resumed run
    truncates them to it); with the pieces kept for the final shuffle (``kept_pieces``), each
    journaled unit's table and pieces are there, as written."""
    journal = journal_of(output)
    if "kept_units" in journal:
        work = output / ".bert_data_work"
        assert len(journal["kept_units"]) == journal["totals"]["units_done"]
        for unit, (size, _) in enumerate(journal["kept_units"]):
            table = work / f"unit-{unit + 1:07d}.segments.json"
            assert table.stat().st_size == size
            for name, piece_size, _ in json.loads(table.read_text())["pieces"]:
                assert (work / name).stat().st_size == piece_size
        return journal["totals"]["units_done"]
    for key, size in journal["shard_sizes"].items():
        shard = output / f"examples-{int(key.split('/')[1]) + 1}.tfrecords.tmp"
        assert shard.stat().st_size >= size
    return journal["totals"]["units_done"]


def one_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def full_disk_in_the_final_shuffle_then_resumed(capsys, corpus, output, err, reference):
    """Every unit kept, one line naming the full disk, no shuffled shard left half kept, and
    --resume gives the bytes of an uninterrupted run."""
    line = one_line(err)
    assert line.startswith(f"create_tfrecords: error: no space left on {output}: units 1-10 of 10 kept ("), line
    assert line.endswith("MB of shards); free space and run the same command with --resume to finish"), line
    assert not list(output.glob("*.shuffling"))
    code, err = cli(capsys, corpus, output, "--resume")
    assert code == 0, err
    assert file_hashes(output) == reference


@pytest.mark.parametrize("compression", [None, "zlib"])
def test_disk_full_in_the_middle_of_a_unit_s_append(capsys, corpus, reference, tmp_path, monkeypatch, compression):
    """The third unit's append stops after 100 bytes (a short write, as a full disk makes), then
    ENOSPC: units 1-2 stay, the third's bytes are dropped by --resume.  (Shards are assembled
    when they are not shuffled at the end: with the shuffle, pieces are kept instead.)"""
    extra = ("--keep_corpus_order",) + (("--compression", compression) if compression else ())
    expected_output = tmp_path / "expected"
    assert cli(capsys, corpus, expected_output, *extra)[0] == 0
    expected = file_hashes(expected_output)
    real_copy = assembly.copy_range
    calls = []

    def copy_range_to_a_full_disk(source, offset, length, target, name):
        calls.append(name)
        if len({os.path.basename(n).split("-")[1] for n in calls}) == 3:  # the third unit's pieces
            real_copy(source, offset, min(length, 100), target, name)
            target.flush()
            raise OSError(errno.ENOSPC, "No space left on device")
        real_copy(source, offset, length, target, name)

    output = tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(assembly, "copy_range", copy_range_to_a_full_disk)
        code, err = cli(capsys, corpus, output, *extra)
    assert code == 2
    assert kept_as_journaled(output) == 2
    kept_bytes = sum(journal_of(output)["shard_sizes"].values())
    assert one_line(err) == (f"create_tfrecords: error: no space left on {output}: units 1-2 of 10 kept "
                             f"({kept_bytes / 1e6:,.1f} MB of shards); free space and run the same command with "
                             "--resume to continue with unit 3")
    code, err = cli(capsys, corpus, output, *extra, "--resume")
    assert code == 0, err
    assert file_hashes(output) == expected


def test_disk_full_while_the_journal_is_written(capsys, corpus, reference, tmp_path, monkeypatch):
    real_write = runner.write_journal
    writes = []

    def write_journal(*args, **kwargs):
        writes.append(1)
        if len(writes) == 3:  # the first is written before any unit: this one would vouch for unit 2
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out" / "journal.json.tmp"))
        real_write(*args, **kwargs)

    output = tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(runner, "write_journal", write_journal)
        code, err = cli(capsys, corpus, output)
    assert code == 2 and one_line(err).startswith(f"create_tfrecords: error: no space left on {tmp_path / 'out'}: "
                                                  "unit 1 of 10 kept")
    assert kept_as_journaled(output) == 1
    assert cli(capsys, corpus, output, "--resume")[0] == 0
    assert file_hashes(output) == reference


def counted(counter) -> int:
    """One more in the count kept in the file ``counter``, whichever process counts: the new count."""
    with open(counter, "ab") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(b"x")
        handle.flush()
        return os.fstat(handle.fileno()).st_size


def test_disk_full_in_a_worker_writing_a_piece(capsys, corpus, reference, tmp_path, monkeypatch):
    """Two worker processes encode the pieces; the eighth piece (counted across the processes)
    gets 50 bytes, then ENOSPC."""
    real_writer = tasks.PieceWriter
    counter = tmp_path / "pieces-written"

    class PieceWriterOnAFullDisk(real_writer):
        def __enter__(self):
            handle = super().__enter__()
            if counted(counter) == 8:
                def write(data, real_write=handle.write):
                    real_write(data[:50])
                    raise OSError(errno.ENOSPC, "No space left on device")
                handle.write = write
            return handle

    output = tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(tasks, "PieceWriter", PieceWriterOnAFullDisk)
        code, err = cli(capsys, corpus, output, workers=2)
    assert code == 2
    line = one_line(err)
    kept = journal_of(output)["totals"]["units_done"]
    assert kept >= 1  # pieces are written a unit or two ahead of the appends, never more
    assert re.fullmatch(rf"create_tfrecords: error: no space left on {re.escape(str(output))}: (unit 1|units 1-{kept}) "
                        rf"of 10 kept \(.* MB of shards\); free space and run the same command with --resume to "
                        rf"continue with unit {kept + 1}", line), line
    kept_as_journaled(output)
    code, err = cli(capsys, corpus, output, "--resume", workers=2)
    assert code == 0, err
    assert file_hashes(output) == reference


def test_disk_full_before_anything_was_kept_a_short_write_of_numpy(capsys, corpus, reference, tmp_path, monkeypatch):
    """numpy's own message for a short write (no errno) while a worker saves the tokenized slice."""
    real_save = tasks.save_array

    def save_array(array, path):
        if path.endswith(".sentences.npy"):
            raise OSError(f"Failed to write array data: {array.nbytes} requested and 1200 written")
        real_save(array, path)

    output = tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(tasks, "save_array", save_array)
        code, err = cli(capsys, corpus, output, workers=2)
    assert code == 2
    assert one_line(err) == (f"create_tfrecords: error: no space left on {output}: nothing was finished, so nothing is "
                             "kept; free space and run the same command again")
    assert [p.name for p in output.iterdir()] == []  # as if the run had never started
    assert cli(capsys, corpus, output, workers=2)[0] == 0
    assert file_hashes(output) == reference


REAL_PAIR_UNIT = scheduler.pair_unit


def pair_unit_killed_at_unit_4(unit, *args):
    """A task sent to a worker process (by reference, so at module level)."""
    if unit.index == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return REAL_PAIR_UNIT(unit, *args)


def test_a_worker_killed_like_the_oom_killer_does_keeps_the_journaled_units(capsys, corpus, reference, tmp_path,
                                                                              monkeypatch):
    """SIGKILL of the worker pairing unit 4 (a real signal: the pool breaks), after some units are
    written: they stay, one line says what happened, and --resume gives the same bytes."""
    output = tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(scheduler, "pair_unit", pair_unit_killed_at_unit_4)
        code, err = cli(capsys, corpus, output, workers=2)
    assert code == 2
    line = one_line(err)
    kept = journal_of(output)["totals"]["units_done"]
    assert kept <= 3
    assert line.startswith("create_tfrecords: error: a worker process was killed by SIGKILL (the out-of-memory killer "
                           "sends it: fewer --num_workers need less memory): "), line
    assert line.endswith(f"run the same command with --resume to continue with unit {kept + 1}"), line
    kept_as_journaled(output)
    code, err = cli(capsys, corpus, output, "--resume", workers=2)
    assert code == 0, err
    assert file_hashes(output) == reference


def test_an_unexpected_error_keeps_the_journaled_units_and_says_so(capsys, corpus, reference, tmp_path):
    output = tmp_path / "out"
    with interrupted_at_append(2, exception=RuntimeError("a bug")):
        with pytest.raises(RuntimeError, match="a bug") as raised:
            cli(capsys, corpus, output)
    assert raised.value.__notes__ == ["bert_data: unit 1 of 10 kept (0.0 MB of shards); run the same command with "
                                      "--resume to continue with unit 2"]
    assert cli(capsys, corpus, output, "--resume")[0] == 0
    assert file_hashes(output) == reference


def test_a_real_short_write_of_the_kernel_a_file_size_limit(corpus, reference, tmp_path):
    """A limit on the size of any file the run's processes write (RLIMIT_FSIZE, set for the run):
    the kernel cuts a write short at the limit and then refuses with EFBIG, in the parent or in a
    worker, wherever a file first reaches it (with the pieces kept: a shuffled shard, at the end).  One line, and --resume without the limit gives
    the same bytes."""
    import resource
    import subprocess
    import sys
    from pathlib import Path

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, resource.RLIM_INFINITY))

    output = tmp_path / "out"
    command = [sys.executable, "-m", "bert_data.cli.create_tfrecords", "--metadata_files", str(corpus.metadata),
               "--input_files_prefix", str(corpus.root), "--vocab_file", str(corpus.vocab), "--do_lower_case",
               "--output_dir", str(output), "--max_seq_length", "64", "--max_predictions_per_seq", "10",
               "--num_output_files", "3", "--split_num", "4", "--dupe_factor", "2", "--num_workers", "2", "--quiet"]
    repo = Path(__file__).resolve().parents[2]
    limited = subprocess.run(command, cwd=repo, preexec_fn=limit, capture_output=True, text=True)
    assert limited.returncode == 2, limited.stderr
    line = one_line(limited.stderr)
    assert re.fullmatch(r"create_tfrecords: error: cannot write (in )?\S+: File too large: .* kept.*; fix that and run the "
                        r"same command with --resume to (continue with unit \d+|finish)", line), line
    resumed = subprocess.run(command + ["--resume"], cwd=repo, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert file_hashes(output) == reference


def pair_unit_killed_while_sending_at_unit_4(unit, *args):
    """As the out-of-memory killer can: the worker dies in the middle of sending a result, leaving
    part of a message (a header announcing 100,000 bytes, and 10 of them) in the pool's result pipe."""
    if unit.index == 3:
        import gc
        import struct
        from multiprocessing.queues import SimpleQueue

        gc.unfreeze()  # (a worker freezes what it inherited, compiled.long_lived: get_objects skips frozen objects)
        result_queue = next(item for item in gc.get_objects() if type(item) is SimpleQueue)
        os.write(result_queue._writer.fileno(), struct.pack("!i", 100_000) + b"x" * 10)
        os.kill(os.getpid(), signal.SIGKILL)
    return REAL_PAIR_UNIT(unit, *args)


def test_a_worker_killed_while_sending_a_result_is_seen_and_the_run_ends(corpus, reference, tmp_path):
    """The pool's own machinery would wait for the rest of the message forever (and Python, at
    exit, for that thread): the run must still say what happened, end, and resume to the same
    bytes.  In a child process, so that a hang fails this test instead of stopping the suite."""
    import subprocess
    import sys
    from pathlib import Path

    output = tmp_path / "out"
    script = (f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
              "from tests.faults import test_faults_run as here\n"
              "from bert_data.run import scheduler\n"
              "from bert_data.cli.create_tfrecords import main\n"
              "scheduler.pair_unit = here.pair_unit_killed_while_sending_at_unit_4\n"
              "sys.exit(main(sys.argv[1:]))\n")
    arguments = ["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root),
                 "--vocab_file", str(corpus.vocab), "--do_lower_case", "--output_dir", str(output),
                 "--max_seq_length", "64", "--max_predictions_per_seq", "10", "--num_output_files", "3",
                 "--split_num", "4", "--dupe_factor", "2", "--num_workers", "2", "--quiet"]
    repo = Path(__file__).resolve().parents[2]
    killed = subprocess.run([sys.executable, "-c", script, *arguments], cwd=repo, capture_output=True, text=True,
                            timeout=300)
    assert killed.returncode == 2, killed.stderr
    line = one_line(killed.stderr)
    kept = journal_of(output)["totals"]["units_done"]
    assert line.startswith("create_tfrecords: error: a worker process was killed by SIGKILL (the out-of-memory "
                           "killer sends it: fewer --num_workers need less memory): "), line
    assert line.endswith(f"run the same command with --resume to continue with unit {kept + 1}"), line
    resumed = subprocess.run([sys.executable, "-m", "bert_data.cli.create_tfrecords", *arguments, "--resume"],
                             cwd=repo, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert file_hashes(output) == reference


def test_disk_full_in_the_final_shuffle(capsys, corpus, reference, tmp_path, monkeypatch):
    """Every unit is in and the shards are written once more in their final order (a second copy
    of each, for a moment): the disk fills in the second shard's copy.  Every unit and the shard
    already shuffled stay; --resume shuffles the others and gives the same bytes."""
    from bert_data.run import shard_shuffle

    real_write, calls = shard_shuffle._Target.write, []

    def write_to_a_full_disk(self, data):
        calls.append(self.path)
        if len(set(calls)) == 2:
            os.write(self.handle.fileno(), data[:100])
            raise OSError(errno.ENOSPC, "No space left on device", self.temporary)
        real_write(self, data)

    output = tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(shard_shuffle._Target, "write", write_to_a_full_disk)
        code, err = cli(capsys, corpus, output)
    assert code == 2
    assert kept_as_journaled(output) == 10
    full_disk_in_the_final_shuffle_then_resumed(capsys, corpus, output, err, reference)


def test_disk_full_while_a_shuffled_shard_is_made_durable(capsys, corpus, reference, tmp_path, monkeypatch):
    """A shuffled shard is synced, journaled and put in place by a thread of its own while the
    next one is written (``shard_shuffle.ShuffleCommits``): the sync of the second fails.  The
    first stays shuffled and journaled; the second (written whole, but vouched for by no
    journal) and any written after it are removed; --resume shuffles them and gives the same bytes."""
    from bert_data.run import shard_shuffle

    real_sync, synced = shard_shuffle.sync_file, []

    def sync_on_a_full_disk(path):
        synced.append(path)
        if len(synced) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", path)
        real_sync(path)

    output = tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(shard_shuffle, "sync_file", sync_on_a_full_disk)
        code, err = cli(capsys, corpus, output)
    assert code == 2
    assert len(synced) == 2  # nothing is synced (or journaled) after the failure
    assert journal_of(output)["totals"]["shuffled"] == ["train/0"]
    full_disk_in_the_final_shuffle_then_resumed(capsys, corpus, output, err, reference)


def test_disk_full_in_the_commit_of_the_unit_before_the_last(capsys, corpus, reference, tmp_path, monkeypatch):
    """The last unit's commit does not wait for the one before it (``runner._UnitCommits``: it
    follows it in a thread while the final shuffle starts): that one fails.  Neither the last
    unit nor any shuffled shard is journaled after it; --resume writes them again.  (A commit a
    unit here: none is left for the next one, as when each is done before the next unit.)"""
    from bert_data.run import runner
    from bert_data.run.kept_pieces import PieceKeeper

    real_sync, commits = PieceKeeper.make_durable, []
    monkeypatch.setattr(runner._UnitCommits, "ready", lambda self: True)

    def sync_on_a_full_disk(self, paths):
        commits.append(paths)
        if len(commits) == 9:  # unit 9 of 10
            raise OSError(errno.ENOSPC, "No space left on device", paths[0])
        real_sync(self, paths)

    output = tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(PieceKeeper, "make_durable", sync_on_a_full_disk)
        code, err = cli(capsys, corpus, output)
    assert code == 2
    assert len(commits) == 9  # the last unit's commit, behind the failed one, is not made
    journal = journal_of(output)
    assert journal["totals"]["units_done"] == 8 and journal["totals"]["shuffled"] == []
    line = one_line(err)
    # (the pieces kept for the final shuffle are made durable in the work directory)
    assert line.startswith(f"create_tfrecords: error: no space left on {output / '.bert_data_work'}: units 1-8 of 10 "
                           "kept ("), line
    assert not list(output.glob("*.shuffling"))
    code, err = cli(capsys, corpus, output, "--resume")
    assert code == 0, err
    assert file_hashes(output) == reference


def test_disk_full_in_a_commit_of_units_appended_together_keeps_the_units_before(capsys, corpus, reference, tmp_path,
                                                                                 monkeypatch):
    """Units appended while a commit runs are journaled together by the next (made to happen
    at every other unit): the commit holding unit 5 fails.  The journal keeps the units of the
    commits before it, none of its own; --resume writes them again, to the same bytes."""
    import re

    from bert_data.run.kept_pieces import PieceKeeper
    from tests.helpers.interruptions import group_commits_every_other_unit

    real_sync, failed = PieceKeeper.make_durable, []

    def sync_on_a_full_disk(self, paths):
        units = sorted(int(match.group(1)) for match in map(re.compile(r"unit-(\d+)\.segments\.json$").search, paths)
                       if match)
        if 5 in units:
            failed.extend(units)
            raise OSError(errno.ENOSPC, "No space left on device", paths[0])
        real_sync(self, paths)

    output = tmp_path / "out"
    with monkeypatch.context() as patch:
        group_commits_every_other_unit(patch)
        patch.setattr(PieceKeeper, "make_durable", sync_on_a_full_disk)
        code, err = cli(capsys, corpus, output)
    assert code == 2 and len(failed) > 1  # (a commit of more than one unit)
    kept = failed[0] - 1
    assert journal_of(output)["totals"]["units_done"] == kept
    assert one_line(err).startswith(f"create_tfrecords: error: no space left on {output / '.bert_data_work'}: "
                                    f"units 1-{kept} of 10 kept ("), err
    code, err = cli(capsys, corpus, output, "--resume")
    assert code == 0, err
    assert file_hashes(output) == reference


def test_disk_full_in_a_group_commit_of_shuffled_shards_keeps_those_synced_before(capsys, corpus, reference, tmp_path,
                                                                                   monkeypatch):
    """Shuffled shards done while the commits' thread syncs one are committed together, by one
    journal record.  The first sync is held until the other two shards are done (an event, not a
    time), so the second commit is of both; the sync of the last fails: the one synced before
    it in the same commit is journaled and kept, the last removed; --resume gives the same bytes."""
    import threading

    from bert_data.run import shard_shuffle

    real_sync, real_add, synced = shard_shuffle.sync_file, shard_shuffle.ShuffleCommits.add, []
    all_added = threading.Event()

    def add(self, task, journal):
        real_add(self, task, journal)
        if task.keys == ["train/2"]:
            all_added.set()

    def sync_on_a_full_disk(path):
        synced.append(os.path.basename(path))
        if len(synced) == 1:
            assert all_added.wait(timeout=300)
        if len(synced) == 3:
            raise OSError(errno.ENOSPC, "No space left on device", path)
        real_sync(path)

    from bert_data.run import final_shuffle

    journals = []
    real_journal = runner.write_journal

    def write_journal(work_dir, fingerprint, sizes, checksums, totals, **kwargs):
        journals.append(list(totals.get("shuffled", [])))
        real_journal(work_dir, fingerprint, sizes, checksums, totals, **kwargs)

    output = tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(shard_shuffle, "sync_file", sync_on_a_full_disk)
        patch.setattr(shard_shuffle.ShuffleCommits, "add", add)
        patch.setattr(runner, "write_journal", write_journal)
        patch.setattr(final_shuffle, "write_journal", write_journal)
        code, err = cli(capsys, corpus, output)
    assert code == 2
    assert synced == ["examples-1.tfrecords.tmp.shuffling", "examples-2.tfrecords.tmp.shuffling",
                      "examples-3.tfrecords.tmp.shuffling"]
    # One record for the first shard, one for the second (committed with the third, which failed).
    assert [record for record in journals if record] == [["train/0"], ["train/0", "train/1"]]
    assert journal_of(output)["totals"]["shuffled"] == ["train/0", "train/1"]
    full_disk_in_the_final_shuffle_then_resumed(capsys, corpus, output, err, reference)
