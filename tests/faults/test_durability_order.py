"""Work files are durable before a record vouches for them, with fewer fsyncs (group commit):
the shards' appended bytes before the journal that counts their unit, a tokenized slice's
arrays before the summary that names them.  The order is recorded in one in-process run (one
worker runs its tasks inline), from the calls that write, sync and journal."""

from __future__ import annotations

import os
import threading

import pytest

from bert_data.cli.create_tfrecords import main
from bert_data.run import assembly, final_shuffle, kept_pieces, runner, scratch, tasks, work_checks

from tests.helpers.corpus import file_hashes, make_corpus
from tests.helpers.interruptions import group_commits_every_other_unit


def run(corpus, output, *extra):
    return main(["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root),
                 "--vocab_file", str(corpus.vocab), "--do_lower_case", "--output_dir", str(output),
                 "--max_seq_length", "64", "--max_predictions_per_seq", "10", "--num_output_files", "3",
                 "--split_num", "4", "--dupe_factor", "2", "--num_workers", "1", "--quiet", *extra])


def test_nothing_is_vouched_for_before_its_bytes_are_synced(tmp_path, monkeypatch):
    """Pieces kept for the final shuffle (the default): a unit's pieces synced before its journal."""
    vouched_after_synced(tmp_path, monkeypatch)


def test_nothing_is_vouched_for_before_its_bytes_are_synced_shards_assembled(tmp_path, monkeypatch):
    """The same order when shards are assembled (not shuffled at the end: no piece is kept)."""
    vouched_after_synced(tmp_path, monkeypatch, "--keep_corpus_order")


@pytest.mark.parametrize("extra", [(), ("--keep_corpus_order",)], ids=["pieces kept", "shards assembled"])
def test_units_appended_while_a_commit_runs_are_journaled_together_by_the_next(tmp_path, monkeypatch, extra):
    """Group commit: while a unit's commit runs, the units appended meanwhile are not waited for
    but journaled together by the next commit.  Made to happen at every other unit (a commit is
    "running" at every other chance), the journal still never vouches for a byte not synced, and
    the bytes are those of a run that journals every unit."""
    group_commits_every_other_unit(monkeypatch)
    journaled = vouched_after_synced(tmp_path, monkeypatch, *extra)
    assert set(range(journaled[-1] + 1)) - set(journaled)  # (some unit count never journaled alone)


def vouched_after_synced(tmp_path, monkeypatch, *extra):
    corpus = make_corpus(tmp_path / "corpus", n_docs=20, min_sentences=8, max_sentences=16, words_per_doc=20)
    events = []  # ("write" | "sync" | "journal" | "summary", path or units done)

    real_copy, real_sync, real_journal = assembly.copy_range, work_checks.sync_file, runner.write_journal
    real_save_array, real_replace = tasks.save_array, work_checks.replace_durably
    real_piece_done = scratch.PieceWriter.__exit__

    def piece_done(self, kind, error, traceback):
        # A kept piece (``kept_pieces``: the final shuffle reads them, no shard is assembled)
        # belongs to its unit as a shard's write does.
        real_piece_done(self, kind, error, traceback)
        events.append(("write", (os.path.realpath(self.path), int(os.path.basename(self.path).split("-")[1]))))

    def copy_range(source, offset, length, target, name):
        real_copy(source, offset, length, target, name)
        # A shard write belongs to the unit of the piece it copies (``unit-N-...piece``, N from 1;
        # a unit's pieces are appended as its tasks end, the next unit's after its last).
        unit = int(os.path.basename(name).split("-")[1])
        events.append(("write", (os.path.realpath(target.name), unit)))

    def sync_file(path):
        # Logged as it starts: a unit's commit runs in a thread while the next unit is appended,
        # and a sync covers only the writes done before it began.
        events.append(("sync", os.path.realpath(path)))
        real_sync(path)

    def write_journal(work_dir, fingerprint, sizes, checksums, totals, **kwargs):
        events.append(("journal", totals["units_done"]))
        real_journal(work_dir, fingerprint, sizes, checksums, totals, **kwargs)

    def save_array(array, path):
        crc = real_save_array(array, path)
        events.append(("write", (os.path.realpath(path), 0)))
        return crc

    def replace_durably(temporary, path, handle=None):
        if path.endswith(".json") and os.path.basename(path).startswith("slice-"):
            events.append(("summary", os.path.realpath(path)))
        real_replace(temporary, path, handle)

    with monkeypatch.context() as patch:
        patch.setattr(assembly, "copy_range", copy_range)
        patch.setattr(work_checks, "sync_file", sync_file)
        patch.setattr(assembly, "sync_file", sync_file)
        patch.setattr(scratch.work_checks, "sync_file", sync_file)
        patch.setattr(kept_pieces, "sync_file", sync_file)
        patch.setattr(scratch.PieceWriter, "__exit__", piece_done)
        patch.setattr(runner, "write_journal", write_journal)
        patch.setattr(tasks, "save_array", save_array)
        patch.setattr(work_checks, "replace_durably", replace_durably)
        assert run(corpus, tmp_path / "out", *extra) == 0

    # What a unit's journal vouches for: the shards appended to, or the pieces kept (by default:
    # shards shuffled at the end are never assembled).
    vouched = (".tfrecords.tmp",) if extra else (".piece",)
    unsynced = set()  # (file, unit appending) written since the file's last sync began
    journaled_units, summaries = [], 0
    for kind, what in events:
        if kind == "write":
            unsynced.add(what)
        elif kind == "sync":
            unsynced = {(path, unit) for path, unit in unsynced if path != what}
        elif kind == "journal":  # the shards' (or kept pieces') bytes of its units (not those of later ones)
            shards = {path for path, unit in unsynced if path.endswith(vouched) and unit <= what}
            assert not shards, f"the journal of {what} units vouches for bytes not synced: {sorted(shards)}"
            journaled_units.append(what)
        else:  # a slice's summary: its arrays (same name up to the suffix) synced before it is durable
            stem = what[:-len(".json")]
            assert not {path for path, _ in unsynced if path.startswith(stem + ".")}, what
            summaries += 1
    assert summaries >= 1
    n_units = journaled_units[-1]
    # The units journaled in order, all of them in the end (a unit's journal may wait for the next
    # unit's, or for those appended while a commit ran: group commit).
    assert n_units >= 3 and journaled_units == sorted(journaled_units) and journaled_units[0] == 0

    # And the group commit changes nothing of the bytes.
    assert run(corpus, tmp_path / "again", *extra) == 0
    assert file_hashes(tmp_path / "out") == file_hashes(tmp_path / "again")
    assert any(what[0].endswith(vouched) for kind, what in events if kind == "write")
    return journaled_units


def test_a_shuffled_shard_is_synced_before_the_journal_counts_it_and_put_in_place_after(tmp_path, monkeypatch):
    """The final shuffle keeps its tasks in a thread (``shard_shuffle.ShuffleCommits``): each
    shard written, then synced, then journaled as shuffled, then renamed into place; its
    segments of the kept pieces given back (or the pieces removed) only once journaled."""
    from bert_data.run import shard_shuffle
    from bert_data.run.run_files import shard_being_shuffled

    corpus = make_corpus(tmp_path / "corpus", n_docs=20, min_sentences=8, max_sentences=16, words_per_doc=20)
    events = []  # ("written" | "sync", path) | ("journal", shuffled keys) | ("publish", {key: path})
    real_close, real_sync = shard_shuffle._Target.close, shard_shuffle.sync_file
    real_publish, real_journal = shard_shuffle.publish_shuffled, runner.write_journal
    real_give_back = final_shuffle._PiecesLeft._remove

    first_written = threading.Event()
    real_unit_journal = runner._UnitCommits._journal

    def close(self):
        real_close(self)
        events.append(("written", os.path.realpath(self.temporary)))
        first_written.set()

    def unit_journal(self, pending, paths):
        # The last unit's commit runs in a thread while the shuffle starts: made to end after a
        # shuffled shard is written, so that its record is taken before the shuffle counts any.
        if pending[0] == len(self.plan.units):
            assert first_written.wait(timeout=300)
        return real_unit_journal(self, pending, paths)

    def sync_file(path):
        events.append(("sync", os.path.realpath(path)))  # (as it starts: it covers what was written before)
        real_sync(path)

    def write_journal(work_dir, fingerprint, sizes, checksums, totals, **kwargs):
        events.append(("journal", set(totals.get("shuffled", []))))
        real_journal(work_dir, fingerprint, sizes, checksums, totals, **kwargs)

    def give_back(self, pieces, keys):
        events.append(("give back", set(keys)))
        real_give_back(self, pieces, keys)

    def publish_shuffled(task):
        events.append(("publish", {key: os.path.realpath(shard_being_shuffled(target))
                                   for key, target in zip(task.keys, task.targets)}))
        real_publish(task)

    with monkeypatch.context() as patch:
        patch.setattr(shard_shuffle._Target, "close", close)
        patch.setattr(runner._UnitCommits, "_journal", unit_journal)
        patch.setattr(shard_shuffle, "sync_file", sync_file)
        patch.setattr(shard_shuffle, "publish_shuffled", publish_shuffled)
        patch.setattr(runner, "write_journal", write_journal)
        patch.setattr(final_shuffle, "write_journal", write_journal)
        patch.setattr(final_shuffle, "publish_shuffled", publish_shuffled)
        patch.setattr(final_shuffle._PiecesLeft, "_remove", give_back)
        assert run(corpus, tmp_path / "out") == 0

    paths = {key: path for kind, what in events if kind == "publish" for key, path in what.items()}
    assert sorted(paths) == ["train/0", "train/1", "train/2"]
    written, synced, journaled = set(), set(), set()
    for kind, what in events:
        if kind == "written":
            written.add(what)
            synced.discard(what)
        elif kind == "sync":
            synced.add(what)
        elif kind == "journal":
            unsynced = {key for key in what if paths[key] not in synced}
            assert not unsynced, f"the journal counts {sorted(unsynced)} as shuffled before their bytes are synced"
            journaled |= what
        elif kind == "give back":
            assert what <= journaled, f"the pieces of {sorted(what)} given back before the journal counts them"
        else:
            assert set(what) <= journaled, f"{sorted(what)} put in place before the journal counts them"
    assert journaled == set(paths)
    assert set().union(*(what for kind, what in events if kind == "give back")) == set(paths)


def test_shuffled_shards_done_during_a_commit_are_committed_together(tmp_path, monkeypatch):
    """Group commit in the final shuffle: the first shard's sync is held (by an event) until the
    other two are done; they are then synced and counted by one journal record, not two."""
    from bert_data.run import shard_shuffle

    corpus = make_corpus(tmp_path / "corpus", n_docs=20, min_sentences=8, max_sentences=16, words_per_doc=20)
    real_sync, real_add, real_journal = shard_shuffle.sync_file, shard_shuffle.ShuffleCommits.add, runner.write_journal
    all_added, journals, syncs = threading.Event(), [], []

    def add(self, task, journal):
        real_add(self, task, journal)
        if task.keys == ["train/2"]:
            all_added.set()

    def sync_file(path):
        syncs.append(path)
        if len(syncs) == 1:
            assert all_added.wait(timeout=300)
        real_sync(path)

    def write_journal(work_dir, fingerprint, sizes, checksums, totals, **kwargs):
        if not kwargs.get("finished"):
            journals.append(list(totals.get("shuffled", [])))
        real_journal(work_dir, fingerprint, sizes, checksums, totals, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(shard_shuffle, "sync_file", sync_file)
        patch.setattr(shard_shuffle.ShuffleCommits, "add", add)
        patch.setattr(runner, "write_journal", write_journal)
        patch.setattr(final_shuffle, "write_journal", write_journal)
        assert run(corpus, tmp_path / "out") == 0
    assert [record for record in journals if record] == [["train/0"], ["train/0", "train/1", "train/2"]]
    assert run(corpus, tmp_path / "again") == 0
    assert file_hashes(tmp_path / "out") == file_hashes(tmp_path / "again")



def test_appended_bytes_go_to_the_disk_by_a_thread_that_the_appends_never_wait_for(tmp_path, monkeypatch):
    """Each unit's appended bytes are handed to the disk (``sync_file_range``) as they are
    appended, every byte of every shard once, in the order written, by a thread of its own: the
    hint blocks while the disk's queue is full, and the parent's loop must not.  Here the first
    of them blocks until the run has written its manifests: the run still finishes, with the
    same bytes.  (Shards assembled: not shuffled at the end, when the pieces are kept instead.)"""
    corpus = make_corpus(tmp_path / "corpus", n_docs=20, min_sentences=8, max_sentences=16, words_per_doc=20)
    assert run(corpus, tmp_path / "reference", "--keep_corpus_order") == 0
    handed, given, release, finished = [], [], threading.Event(), {}
    real_start, real_hint, real_finalize = work_checks.Writeback.start, work_checks.start_writeback, runner.finalize

    def start(self, ranges):  # what the appends hand over (the thread may give it later, or never:
        handed.extend(ranges)  # a hint for a file renamed or removed meanwhile is dropped)
        real_start(self, ranges)

    def start_writeback(fd, offset, length):
        if threading.current_thread().name == "bert_data-writeback":
            given.append(offset)
            if len(given) == 1:
                assert release.wait(timeout=300)  # (released when the run ends, or the test fails)
        real_hint(fd, offset, length)

    def finalize(*args, **kwargs):
        finished["while the first hint waits"] = not release.is_set()
        release.set()
        return real_finalize(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(work_checks.Writeback, "start", start)
        patch.setattr(work_checks, "start_writeback", start_writeback)
        patch.setattr(runner, "finalize", finalize)
        assert run(corpus, tmp_path / "out", "--keep_corpus_order") == 0
    assert file_hashes(tmp_path / "out") == file_hashes(tmp_path / "reference")
    by_shard = {}
    for path, offset, length in handed:
        by_shard.setdefault(path, []).append((offset, length))
    assert len(by_shard) == 3  # --num_output_files 3
    for path, ranges in by_shard.items():  # from the start, contiguous: each byte once, in order
        ends = [offset + length for offset, length in ranges]
        assert [offset for offset, _ in ranges] == [0] + ends[:-1] and all(length > 0 for _, length in ranges)
        assert len(ranges) >= 3, path  # (a range a unit: hints as the run goes, not at its end)
    if work_checks._sync_file_range() is None:  # (not Linux: no hint to give, no thread)
        assert given == []
    else:
        assert finished == {"while the first hint waits": True}


def test_a_hint_for_a_file_gone_is_dropped(tmp_path, monkeypatch):
    """The writeback thread gives its hints for files by name: one removed meanwhile (a failing
    run removes its shards) is skipped, and the hints after it are still given."""
    given = []
    kept = tmp_path / "kept"
    kept.write_bytes(b"x" * 4096)
    monkeypatch.setattr(work_checks, "start_writeback", lambda fd, offset, length: given.append((offset, length)))
    writeback = work_checks.Writeback()
    writeback.start([(str(tmp_path / "gone"), 0, 10), (str(kept), 0, 4096)])
    writeback.close()
    assert given == ([(0, 4096)] if work_checks._sync_file_range() is not None else [])
