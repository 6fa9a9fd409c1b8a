"""Pieces kept for the final shuffle (``run.kept_pieces``: TFRecord shards shuffled at the end are
never assembled): a unit's pieces and its table of segments are its commit, the journal vouches
for them by size and CRC-32C, ``--resume`` checks them before reading any (one line naming a
damaged or missing one), drops those of units not journaled, and resumes a stopped final shuffle
with the pieces its shards still need.  Stops are placed by work done: the n-th unit appended,
the pause after a unit's journal, the n-th shuffle task."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bert_data.run import final_shuffle
from bert_data.run.fault_injection import PAUSE_AFTER_UNIT
from bert_data.run.resolve import generate
from bert_data.run.run_files import GenerationError

from tests.helpers.corpus import corpus_config, file_hashes, make_corpus
from tests.helpers.interruptions import interrupted_at_append

REPO = Path(__file__).resolve().parents[2]
WORK = ".bert_data_work"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("kept") / "corpus", n_docs=30, min_sentences=6, max_sentences=14,
                       words_per_doc=15)


def config(corpus, output, **overrides):
    return corpus_config(corpus, output, **{"split_num": 6, "num_output_files": 4, **overrides})


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("reference") / "out"
    generate(config(corpus, output), progress=False)
    return file_hashes(output)


def journal_of(output):
    return json.loads((output / WORK / "journal.json").read_text())


def tables(output):
    """Each journaled unit's table (``unit-N.segments.json``), as the journal vouches for it."""
    journal = journal_of(output)
    found = []
    for unit, (size, _) in enumerate(journal["kept_units"]):
        table = output / WORK / f"unit-{unit + 1:07d}.segments.json"
        assert table.stat().st_size == size
        found.append(json.loads(table.read_text()))
    return found


def stopped_after_units(corpus, output, units=2):
    """Ctrl-C at the append of unit ``units + 1``: ``units`` units journaled."""
    with interrupted_at_append(units + 1), pytest.raises(KeyboardInterrupt):
        generate(config(corpus, output), progress=False)
    assert journal_of(output)["totals"]["units_done"] == units


def test_a_unit_s_commit_is_its_pieces_and_table_and_the_journal_grows_with_units_not_segments(corpus, reference,
                                                                                             tmp_path):
    """No shard is written before the final shuffle; units 1-2 are their pieces and tables, the
    pieces of unit 3 (written, not journaled) are removed; the journal holds a size and CRC a
    unit, each table every piece's size and every segment; --resume gives the same bytes."""
    output = tmp_path / "out"
    stopped_after_units(corpus, output)
    assert not [path for path in output.iterdir() if ".tfrecords" in path.name]
    journal = journal_of(output)
    assert len(journal["kept_units"]) == 2 and "segments" not in json.dumps(journal)
    kept = tables(output)
    pieces = {name: size for table in kept for name, size, _ in table["pieces"]}
    assert pieces and all((output / WORK / name).stat().st_size == size for name, size in pieces.items())
    assert sorted(path.name for path in (output / WORK).glob("*.piece")) == sorted(pieces)
    assert all(name.startswith(("unit-0000001-", "unit-0000002-")) for name in pieces)
    segments = [row for table in kept for row in table["segments"]]
    assert {(split, shard) for split, shard, *_ in segments} == {("train", shard) for shard in range(4)}
    # The journal's shard sizes: each shard's segments end to end (what the final shuffle reads).
    for shard in range(4):
        assert journal["shard_sizes"][f"train/{shard}"] == sum(row[4] for row in segments if row[1] == shard)
    generate(config(corpus, output, resume=True), progress=False)
    assert file_hashes(output) == reference
    assert not (output / WORK).exists()


def damage_flipped(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x04
    path.write_bytes(bytes(data))


def damage_truncated(path):
    path.write_bytes(path.read_bytes()[:-7])


def damage_deleted(path):
    path.unlink()


@pytest.mark.parametrize("damage", [damage_flipped, damage_truncated, damage_deleted],
                         ids=["flipped", "truncated", "deleted"])
@pytest.mark.parametrize("victim", ["piece", "table"])
def test_a_damaged_kept_piece_or_table_is_named_on_resume_before_anything_is_read(corpus, reference, tmp_path,
                                                                                  damage, victim):
    output = tmp_path / "out"
    stopped_after_units(corpus, output)
    if victim == "piece":
        name, size, _ = max(tables(output)[0]["pieces"], key=lambda piece: piece[1])
        path = output / WORK / name
    else:
        path, size = output / WORK / "unit-0000001.segments.json", None
    damage(path)
    with interrupted_at_append(1, exception=AssertionError("a unit was appended")):
        with pytest.raises(GenerationError) as raised:
            generate(config(corpus, output, resume=True), progress=False)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"--resume: {path} is "), message
    if victim == "piece" and damage is damage_flipped:
        assert message.startswith(f"--resume: {path} is damaged: its {size:,} bytes have CRC-32C "), message
    elif victim == "piece":
        assert f"is missing or not the {size:,} bytes the journal vouches for" in message, message
    else:
        assert "is missing or damaged (" in message and "the segments of unit 1 cannot be found" in message, message
    assert message.endswith("run without --resume, with --overwrite, to start again")
    generate(config(corpus, output, overwrite=True), progress=False)
    assert file_hashes(output) == reference


def command_line(corpus, output, workers, dupe_factor=2, split_num=6):
    """``config``'s run as a command (``long_config``'s with dupe 6, split 12)."""
    return ["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root),
            "--vocab_file", str(corpus.vocab), "--do_lower_case", "--output_dir", str(output),
            "--max_seq_length", "64", "--max_predictions_per_seq", "10", "--dupe_factor", str(dupe_factor),
            "--split_num", str(split_num), "--num_output_files", "4", "--num_workers", str(workers), "--quiet"]


def test_killed_after_a_unit_s_journal_resumes_from_its_kept_pieces(corpus, reference, tmp_path):
    """SIGKILL (nothing cleaned up) once unit 2 is journaled (the runner's pause seam): --resume
    checks the kept pieces of units 1-2, drops whatever else the run left, and goes on."""
    output = tmp_path / "out"
    arguments = command_line(corpus, output, 2)
    process = subprocess.Popen([sys.executable, "-m", "bert_data.cli.create_tfrecords", *arguments], cwd=REPO,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, PAUSE_AFTER_UNIT: "2"})
    for line in process.stderr:
        if line.startswith("bert_data: test: paused after unit 2"):
            break
    else:
        raise AssertionError("the run ended before unit 2")
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=600)
    assert journal_of(output)["totals"]["units_done"] == 2 and len(tables(output)) == 2
    resumed = subprocess.run([sys.executable, "-m", "bert_data.cli.create_tfrecords", *arguments, "--resume"],
                             cwd=REPO, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert file_hashes(output) == reference


def test_a_shuffle_stopped_keeps_the_pieces_its_shards_still_need_and_resumes(corpus, reference, tmp_path,
                                                                              monkeypatch):
    """Ctrl-C in the third shuffle task: the two shards shuffled before are journaled, every piece
    all of whose shards are among them is removed, the others stay; --resume shuffles the
    other two shards from them, to the same bytes.  (An encode task a shard, so that some
    pieces hold only shards shuffled: the grouping changes no byte.)"""
    from bert_data.run import units

    real_grouping = units.shards_per_encode_task
    monkeypatch.setattr(units, "shards_per_encode_task", lambda n_records, n_shards: real_grouping(n_records, n_shards, 1))
    output = tmp_path / "out"
    real, calls = final_shuffle.run_shuffle_task, []

    def stopped_at_the_third(task):
        calls.append(task.keys)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(task)

    with monkeypatch.context() as patch:
        patch.setattr(final_shuffle, "run_shuffle_task", stopped_at_the_third)
        with pytest.raises(KeyboardInterrupt):
            generate(config(corpus, output), progress=False)
    journal = journal_of(output)
    assert journal["totals"]["shuffled"] == ["train/0", "train/1"]
    shards_of = {}
    for table in tables(output):
        for _, shard, piece, *_ in table["segments"]:
            shards_of.setdefault(table["pieces"][piece][0], set()).add(shard)
    left = {path.name for path in (output / WORK).glob("*.piece")}
    assert left == {name for name, shards in shards_of.items() if not shards <= {0, 1}}
    # (this corpus has pieces of both kinds: the removal is seen, and what is left is needed)
    assert left and set(shards_of) - left

    calls.clear()
    monkeypatch.setattr(final_shuffle, "run_shuffle_task", lambda task: calls.append(task.keys) or real(task))
    generate(config(corpus, output, resume=True), progress=False)
    assert calls == [["train/2"], ["train/3"]]
    assert file_hashes(output) == reference


KILL_AT_SHUFFLE_TASK = 3


def shuffle_then_killed(task):
    """(In the child process of the test below: SIGKILL at its third shuffle task.)"""
    shuffle_then_killed.calls = getattr(shuffle_then_killed, "calls", 0) + 1
    if shuffle_then_killed.calls == KILL_AT_SHUFFLE_TASK:
        os.kill(os.getpid(), signal.SIGKILL)
    return REAL_SHUFFLE(task)


REAL_SHUFFLE = final_shuffle.run_shuffle_task


@pytest.mark.parametrize("segments", ["small", "given back"])
def test_killed_during_the_shuffle_resumes_it_to_the_same_bytes(segments, request, tmp_path):
    """SIGKILL in the final shuffle (one worker: the tasks run in the parent): whatever the
    commits' thread had journaled, removed and given back by then, --resume finishes the shuffle
    from the kept pieces to the bytes of an uninterrupted run.  (Segments small, or long enough
    that those of the shards journaled have holes punched: each given back at once.)"""
    output = tmp_path / "out"
    if segments == "small":
        corpus, reference = request.getfixturevalue("corpus"), request.getfixturevalue("reference")
        arguments, release_bytes = command_line(corpus, output, 1), final_shuffle.RELEASE_BYTES
    else:
        corpus, reference = request.getfixturevalue("long_corpus"), request.getfixturevalue("long_reference")
        arguments, release_bytes = command_line(corpus, output, 1, dupe_factor=6, split_num=12), 0
    script = (f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
              "from tests.faults import test_kept_pieces as here\n"
              "from bert_data.run import final_shuffle\n"
              "from bert_data.cli.create_tfrecords import main\n"
              "final_shuffle.run_shuffle_task = here.shuffle_then_killed\n"
              f"final_shuffle.RELEASE_BYTES = {release_bytes}\n"
              "sys.exit(main(sys.argv[1:]))\n")
    killed = subprocess.run([sys.executable, "-c", script, *arguments], cwd=REPO, capture_output=True, text=True,
                            timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    journal = journal_of(output)
    assert journal["totals"]["units_done"] == len(journal["kept_units"]) and not journal.get("finished")
    assert len(journal["totals"]["shuffled"]) < 4
    resumed = subprocess.run([sys.executable, "-m", "bert_data.cli.create_tfrecords", *arguments, "--resume"],
                             cwd=REPO, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert file_hashes(output) == reference


def test_resuming_with_a_work_dir_that_would_not_read_the_kept_pieces_is_refused(s3, corpus, reference, tmp_path):
    """Pieces kept in a local work directory are read from there alone: a --resume given a work
    directory at a URL (where pieces are assembled, not kept), or another local one, is refused
    in one line that names the fix, and leaves every kept file as it was; resumed as started,
    the run ends in the bytes of an uninterrupted one."""
    output = tmp_path / "out"
    stopped_after_units(corpus, output)
    kept = {path.name: path.read_bytes() for path in (output / WORK).iterdir()}
    with pytest.raises(GenerationError) as raised:
        generate(config(corpus, output, resume=True, work_dir="s3://bert-data-tests/elsewhere-work"), progress=False)
    message = str(raised.value)
    assert "\n" not in message and "the run kept its pieces in a local work directory, which this one, working in " \
        "s3://bert-data-tests/elsewhere-work" in message, message
    assert message.endswith("resume with the --work_dir it was started with"), message
    assert {path.name: path.read_bytes() for path in (output / WORK).iterdir()} == kept
    # Another local work directory would read its own (empty) one: the missing table says why.
    with pytest.raises(GenerationError) as raised:
        generate(config(corpus, output, resume=True, work_dir=str(tmp_path / "elsewhere")), progress=False)
    assert "cannot be found; if the run was started with another --work_dir, resume with that one; else run " \
        "without --resume" in str(raised.value), raised.value
    assert {path.name: path.read_bytes() for path in (output / WORK).iterdir()} == kept
    generate(config(corpus, output, resume=True), progress=False)
    assert file_hashes(output) == reference


def test_a_run_whose_shuffle_could_not_map_its_pieces_assembles_its_shards(corpus, reference, tmp_path, monkeypatch):
    """A shuffle task maps every piece it reads (one a unit for a shard), each holding a file
    descriptor: past half the hard limit on open files (or 32,768 maps), a run assembles its shards
    as before pieces were kept, to the same bytes."""
    import resource

    from bert_data.run import kept_pieces, runner

    for hard, fits, too_many in ((4096, 2048, 2049), (resource.RLIM_INFINITY, 32768, 32769)):
        with monkeypatch.context() as patch:
            patch.setattr(resource, "getrlimit", lambda kind, hard=hard: (1024, hard))
            assert kept_pieces.pieces_fit(fits) and not kept_pieces.pieces_fit(too_many)
            assert kept_pieces.pieces_fit(fits // 4, 4) and not kept_pieces.pieces_fit(fits // 4 + 1, 4)
    kept = []
    monkeypatch.setattr(runner, "pieces_fit", lambda n_units, n_files=0: False)
    monkeypatch.setattr(kept_pieces.PieceKeeper, "append", lambda self, segments: kept.append(segments))
    output = tmp_path / "out"
    generate(config(corpus, output), progress=False)
    assert not kept and file_hashes(output) == reference


# ---------------------------------------------------------------------------- segments given back


@pytest.fixture(scope="module")
def long_corpus(tmp_path_factory):
    """Segments of some 80 KB (two units, one piece each holding the 4 shards): room for holes."""
    return make_corpus(tmp_path_factory.mktemp("long") / "corpus", n_docs=24, min_sentences=30, max_sentences=40,
                       words_per_doc=15)


def long_config(corpus, output, **overrides):
    return corpus_config(corpus, output, **{"split_num": 12, "num_output_files": 4, "dupe_factor": 6, **overrides})


@pytest.fixture(scope="module")
def long_reference(long_corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("long_reference") / "out"
    generate(long_config(long_corpus, output), progress=False)
    return file_hashes(output)


def shuffle_stopped_at(corpus, output, task, monkeypatch, **overrides):
    """Ctrl-C at shuffle task ``task`` (the tasks before it journaled)."""
    real, calls = final_shuffle.run_shuffle_task, []

    def stopped(shuffle):
        calls.append(shuffle.keys)
        if len(calls) == task:
            raise KeyboardInterrupt
        return real(shuffle)

    with monkeypatch.context() as patch:
        patch.setattr(final_shuffle, "run_shuffle_task", stopped)
        with pytest.raises(KeyboardInterrupt):
            generate(long_config(corpus, output, **overrides), progress=False)


def allocated(path) -> int:
    return path.stat().st_blocks * 512


def test_the_segments_of_shards_shuffled_are_given_back_and_resume_checks_the_others_one_by_one(
        long_corpus, long_reference, tmp_path, monkeypatch):
    """Once the journal says shards 0-1 are shuffled, their segments' blocks are given back (holes
    in the pieces, which still hold shards 2-3: the work directory shrinks as the shards grow);
    the other segments are untouched.  --resume checks each segment still needed against its
    own CRC-32C: damage where a shuffled shard was is no matter, damage in a needed one is named
    in one line; resumed, the bytes of an uninterrupted run."""
    from bert_data.run.work_checks import crc32c

    output = tmp_path / "out"
    monkeypatch.setattr(final_shuffle, "RELEASE_BYTES", 0)  # (each segment given back at once: see the next test)
    shuffle_stopped_at(long_corpus, output, 3, monkeypatch)
    assert journal_of(output)["totals"]["shuffled"] == ["train/0", "train/1"]
    given_back = 0
    for table in tables(output):
        path = output / WORK / table["pieces"][0][0]
        data, size = path.read_bytes(), table["pieces"][0][1]
        assert len(data) == size and len(table["pieces"]) == 1
        for _, shard, _, offset, length, _, crc in table["segments"]:
            inner = data[-(-offset // 4096) * 4096:(offset + length) // 4096 * 4096]
            if shard < 2:
                assert len(inner) > 8192 and inner == bytes(len(inner))  # (a hole reads as zeros)
            else:
                assert crc32c(data[offset:offset + length]) == crc
        assert size - allocated(path) > 2 * 8192
        given_back += size - allocated(path)
    # Where shard 0 was, at a segment's edge (a block it shares with shard 1, not given back):
    # not read again, so not checked.
    first = tables(output)[0]
    piece = output / WORK / first["pieces"][0][0]
    data = bytearray(piece.read_bytes())
    data[1] ^= 0x20
    piece.write_bytes(bytes(data))
    # In shard 2's segment of the second unit's piece: named.
    second = tables(output)[1]
    victim = output / WORK / second["pieces"][0][0]
    _, _, _, offset, length, _, _ = second["segments"][2]
    damaged = bytearray(victim.read_bytes())
    damaged[offset + length // 2] ^= 0x04
    intact = victim.read_bytes()
    victim.write_bytes(bytes(damaged))
    with pytest.raises(GenerationError) as raised:
        generate(long_config(long_corpus, output, resume=True), progress=False)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(
        f"--resume: {victim} is damaged: its {length:,} bytes from {offset:,} have CRC-32C "), message
    victim.write_bytes(intact)  # (written whole again: its holes are allocated now, its bytes the same)
    generate(long_config(long_corpus, output, resume=True), progress=False)
    assert file_hashes(output) == long_reference
    assert given_back


def test_a_work_directory_whose_tables_have_no_segment_checksums_resumes_without_holes(
        long_corpus, long_reference, tmp_path, monkeypatch):
    """Tables written before segments had their own CRC-32C (an earlier build, same version):
    their pieces are checked whole on --resume, so no block of theirs is given back, even once a
    shard they hold is shuffled; the run still ends with the reference bytes."""
    from bert_data.run.work_checks import crc32c, dumps_checked, loads_checked

    output = tmp_path / "out"
    shuffle_stopped_at(long_corpus, output, 1, monkeypatch)
    journal_path = output / WORK / "journal.json"
    journal = loads_checked(journal_path.read_text())
    assert journal["totals"]["units_done"] == 2 and not journal["totals"]["shuffled"]
    for unit in range(2):
        table_path = output / WORK / f"unit-{unit + 1:07d}.segments.json"
        table = loads_checked(table_path.read_text())
        table["segments"] = [row[:6] for row in table["segments"]]
        text = dumps_checked(table).encode("utf-8")
        table_path.write_bytes(text)
        journal["kept_units"][unit] = [len(text), crc32c(text)]
    journal_path.write_text(dumps_checked(journal))
    shuffle_stopped_at(long_corpus, output, 2, monkeypatch, resume=True)
    assert journal_of(output)["totals"]["shuffled"] == ["train/0"]
    for path in (output / WORK).glob("*.piece"):
        assert allocated(path) >= path.stat().st_size
    generate(long_config(long_corpus, output, resume=True), progress=False)
    assert file_hashes(output) == long_reference


def test_a_piece_removed_is_given_back_first_for_the_map_a_worker_keeps_of_it(long_corpus, long_reference, tmp_path,
                                                                              monkeypatch):
    """A piece whose shards are all shuffled is removed, but a process that shuffled from it
    keeps it mapped (``shard_shuffle.forget_pieces``), which would keep its pages till the run
    ends: every segment of it is given back before its name goes; but not those removed with
    the last shards, when the run ends.  (An encode task a shard: a piece a shard and unit.)"""
    from bert_data import storage
    from bert_data.run import units

    real_grouping = units.shards_per_encode_task
    monkeypatch.setattr(units, "shards_per_encode_task", lambda n_records, n_shards: real_grouping(n_records, n_shards, 1))
    events = []
    real_release, real_remove_many = storage.release_blocks, storage.remove_many

    def release_blocks(path, ranges):
        events.append(("release", os.path.basename(path), sorted(ranges)))
        return real_release(path, ranges)

    def remove_many(paths):
        pieces = [os.path.basename(path) for path in paths if path.endswith(".piece")]
        if pieces:
            events.append(("remove", pieces, None))
        real_remove_many(paths)

    monkeypatch.setattr(storage, "release_blocks", release_blocks)
    monkeypatch.setattr(storage, "remove_many", remove_many)
    output = tmp_path / "out"
    segments = {}  # every segment of every piece, as the final shuffle is given them
    real_segments_of = final_shuffle.PieceKeeper.segments_of

    def segments_of(self, split):
        found = real_segments_of(self, split)
        for rows in found:
            for piece, offset, length, *_ in rows.tolist():
                segments.setdefault(os.path.basename(self.pieces[piece]), set()).add((offset, length))
        return found

    monkeypatch.setattr(final_shuffle.PieceKeeper, "segments_of", segments_of)
    generate(long_config(long_corpus, output), progress=False)
    assert file_hashes(output) == long_reference
    removals = [(place, names) for place, (kind, names, _) in enumerate(events) if kind == "remove"]
    assert sorted(name for _, names in removals for name in names) == sorted(segments) and len(removals) > 1
    for place, names in removals:
        for name in names:
            given = [span for kind, piece, ranges in events[:place] if piece == name for span in ranges]
            if place == removals[-1][0]:
                assert not given
            else:
                assert spans(given) == spans(segments[name])


def spans(ranges):
    """``(offset, length)`` ranges as the byte spans they cover, adjacent ones joined."""
    joined = []
    for offset, length in sorted(ranges):
        if joined and joined[-1][1] == offset:
            joined[-1][1] += length
        else:
            joined.append([offset, offset + length])
    return joined


def test_segments_are_given_back_a_few_megabytes_of_a_piece_at_a_time_adjacent_ones_as_one_range():
    """A hole costs a system call and a file system transaction: a piece's spent segments wait
    till ``RELEASE_BYTES`` of it are spent (a unit of short documents has a small segment of
    every shard), adjacent ones go as one range, and a piece removed has all its spent ones
    given back first, in the removals' order; with the last shards, nothing is given back (the
    run ends: its maps go now anyway), the pieces are removed."""
    import types

    from bert_data.run.kept_pieces import PieceKeeper

    mb = 1 << 20
    big, small = [(0, 2 * mb), (2 * mb, 2 * mb), (4 * mb, 2 * mb)], [(0, 100_000), (100_000, 100_000), (200_000, 9)]
    segments = {f"train/{shard}": np.array([[0, *big[shard], 10, 7], [1, *small[shard], 10, 7]], dtype=np.int64)
                for shard in range(3)}
    segments["train/3"] = np.array([[2, 0, 5 * mb, 10, 7]], dtype=np.int64)
    keeper = types.SimpleNamespace(pieces=["big.piece", "small.piece", "last.piece"])
    keeper.spent = lambda rows: PieceKeeper.spent(keeper, rows)
    calls = []
    removals = types.SimpleNamespace(release=lambda ranges: calls.append(("release", ranges)),
                                     remove=lambda paths: calls.append(("remove", paths)))
    left = final_shuffle._PiecesLeft(keeper, segments, set(), removals)
    assert final_shuffle.RELEASE_BYTES == 4 * mb
    left.shuffled(["train/0"])
    assert calls == []
    left.shuffled(["train/1"])
    assert calls == [("release", [("big.piece", [(0, 4 * mb)])])]
    calls.clear()
    left.shuffled(["train/2"])
    assert calls == [("release", [("big.piece", [(4 * mb, 2 * mb)]), ("small.piece", [(0, 200_009)])]),
                     ("remove", ["big.piece", "small.piece"])]
    calls.clear()
    left.shuffled(["train/3"])
    assert calls == [("remove", ["last.piece"])]
