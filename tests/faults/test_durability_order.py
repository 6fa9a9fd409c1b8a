"""Work files are durable before a record vouches for them, with fewer fsyncs (group commit):
the shards' appended bytes before the journal that counts their unit, a tokenized slice's
arrays before the summary that names them.  The order is recorded in one in-process run (one
worker runs its tasks inline), from the calls that write, sync and journal."""

from __future__ import annotations

import os
import threading

from bert_data.cli.create_tfrecords import main
from bert_data.run import assembly, runner, scratch, tasks, work_checks

from tests.helpers.corpus import file_hashes, make_corpus


def run(corpus, output, *extra):
    return main(["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root),
                 "--vocab_file", str(corpus.vocab), "--do_lower_case", "--output_dir", str(output),
                 "--max_seq_length", "64", "--max_predictions_per_seq", "10", "--num_output_files", "3",
                 "--split_num", "4", "--dupe_factor", "2", "--num_workers", "1", "--quiet", *extra])


def test_nothing_is_vouched_for_before_its_bytes_are_synced(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path / "corpus", n_docs=20, min_sentences=8, max_sentences=16, words_per_doc=20)
    events = []  # ("write" | "sync" | "journal" | "summary", path or units done)

    real_copy, real_sync, real_journal = assembly.copy_range, work_checks.sync_file, runner.write_journal
    real_save_array, real_replace = tasks.save_array, work_checks.replace_durably

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
        patch.setattr(runner, "write_journal", write_journal)
        patch.setattr(tasks, "save_array", save_array)
        patch.setattr(work_checks, "replace_durably", replace_durably)
        assert run(corpus, tmp_path / "out") == 0

    unsynced = set()  # (file, unit appending) written since the file's last sync began
    journaled_units, summaries = [], 0
    for kind, what in events:
        if kind == "write":
            unsynced.add(what)
        elif kind == "sync":
            unsynced = {(path, unit) for path, unit in unsynced if path != what}
        elif kind == "journal":  # the shards' bytes of its units (those appended later are not its)
            shards = {path for path, unit in unsynced if ".tfrecords" in path and unit <= what}
            assert not shards, f"the journal of {what} units vouches for bytes not synced: {sorted(shards)}"
            journaled_units.append(what)
        else:  # a slice's summary: its arrays (same name up to the suffix) synced before it is durable
            stem = what[:-len(".json")]
            assert not {path for path, _ in unsynced if path.startswith(stem + ".")}, what
            summaries += 1
    assert summaries >= 1
    n_units = journaled_units[-1]
    # Every unit was journaled, in order (a unit's journal may wait for the next unit: group commit).
    assert n_units >= 3 and sorted(set(journaled_units)) == list(range(n_units + 1))

    # And the group commit changes nothing of the bytes.
    assert run(corpus, tmp_path / "again") == 0
    assert file_hashes(tmp_path / "out") == file_hashes(tmp_path / "again")


def test_a_shuffled_shard_is_synced_before_the_journal_counts_it_and_put_in_place_after(tmp_path, monkeypatch):
    """The final shuffle keeps its tasks in a thread (``shard_shuffle.ShuffleCommits``): each
    shard written, then synced, then journaled as shuffled, then renamed into place."""
    from bert_data.run import shard_shuffle
    from bert_data.run.run_files import shard_being_shuffled

    corpus = make_corpus(tmp_path / "corpus", n_docs=20, min_sentences=8, max_sentences=16, words_per_doc=20)
    events = []  # ("written" | "sync", path) | ("journal", shuffled keys) | ("publish", {key: path})
    real_close, real_sync = shard_shuffle._Target.close, shard_shuffle.sync_file
    real_publish, real_journal = shard_shuffle.publish_shuffled, runner.write_journal

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
        else:
            assert set(what) <= journaled, f"{sorted(what)} put in place before the journal counts them"
    assert journaled == set(paths)


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
        assert run(corpus, tmp_path / "out") == 0
    assert [record for record in journals if record] == [["train/0"], ["train/0", "train/1", "train/2"]]
    assert run(corpus, tmp_path / "again") == 0
    assert file_hashes(tmp_path / "out") == file_hashes(tmp_path / "again")
