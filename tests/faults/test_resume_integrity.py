"""What lies between a stop and its --resume: inputs edited or grown, work files overwritten,
cut short, emptied or deleted, a kept shard body with one bit flipped.  Each run is stopped by
work done (Ctrl-C at the n-th unit appended, ``interrupted_at_append``), the damage done, and
--resume either gives the bytes of an uninterrupted run (a damaged slice is tokenized again) or
one line naming the file and what to do, never a traceback and never silently other bytes."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from bert_data.config import ConfigError
from bert_data.run.resolve import generate
from bert_data.run.run_files import GenerationError

from tests.helpers.corpus import corpus_config, make_corpus
from tests.helpers.interruptions import interrupted_at_append

WORK = ".bert_data_work"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("integrity") / "corpus", n_docs=24, min_sentences=6,
                       max_sentences=14, words_per_doc=15)


def config(corpus, output, **overrides):
    return corpus_config(corpus, output, split_num=6, **overrides)


def all_hashes(directory: Path) -> dict:
    """Every file of a finished dataset (shards of any format, split files) but its manifest
    (which names the output directory)."""
    return {path.relative_to(directory).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(directory.rglob("*")) if path.is_file() and path.name != "data_params.json"}


@pytest.fixture(scope="module")
def references(corpus, tmp_path_factory):
    """The uninterrupted output of each format, made once."""
    made = {}

    def reference(output_format="tfrecord", **overrides):
        key = (output_format, *sorted(overrides.items()))
        if key not in made:
            output = tmp_path_factory.mktemp(f"reference-{output_format}")
            generate(config(corpus, output, output_format=output_format, **overrides), progress=False)
            made[key] = all_hashes(output)
        return made[key]
    return reference


def stopped_after_units(corpus, output, units=2, **overrides):
    """A run stopped by Ctrl-C once ``units`` units are appended and journaled."""
    with interrupted_at_append(units + 1), pytest.raises(KeyboardInterrupt):
        generate(config(corpus, output, **overrides), progress=False)
    assert json.loads((output / WORK / "journal.json").read_text())["totals"]["units_done"] == units


def resumed(corpus, output, **overrides):
    return generate(config(corpus, output, resume=True, **overrides), progress=False)


def refused(corpus, output, kind=ConfigError, **overrides) -> str:
    with pytest.raises(kind) as raised:
        resumed(corpus, output, **overrides)
    message = str(raised.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def slice_files(output: Path, suffix: str):
    found = sorted((output / WORK).glob(f"slice-*{suffix}"))
    assert found, "the stopped run kept tokenized slices"
    return found


# ---------------------------------------------------------------------------- inputs

def test_an_input_edited_before_resume_is_named_and_nothing_is_mixed(corpus, tmp_path):
    output, edited = tmp_path / "out", corpus.root / "docs" / "doc005.txt"
    stopped_after_units(corpus, output)
    original, stat = edited.read_bytes(), edited.stat()
    try:  # the same size, other bytes, a later time (as an editor saves it)
        edited.write_bytes(original.replace(b".", b",", 1))
        os.utime(edited, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
        message = refused(corpus, output)
    finally:
        edited.write_bytes(original)
        os.utime(edited, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert message.startswith("--resume: docs/doc005.txt changed since the run started (modified ")
    assert "restore it, or run without --resume, with --overwrite, to start afresh" in message
    # Restored (the same size and time): the run goes on.
    assert resumed(corpus, output).resumed_from_unit == 2


def test_an_input_that_grew_before_resume_is_named_with_its_sizes(corpus, references, tmp_path):
    output, grown = tmp_path / "out", corpus.root / "docs" / "doc011.txt"
    stopped_after_units(corpus, output)
    original, stat = grown.read_bytes(), grown.stat()
    try:
        grown.write_bytes(original + b"\nMore text came later.\n")
        message = refused(corpus, output)
    finally:
        grown.write_bytes(original)
        os.utime(grown, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert f"docs/doc011.txt changed since the run started ({len(original):,} bytes then, " \
           f"{len(original) + 23:,} bytes now)" in message
    resumed(corpus, output)
    assert all_hashes(output) == references()


# ---------------------------------------------------------------------------- work files

@pytest.mark.parametrize("damage", ["overwritten", "truncated"])
def test_a_damaged_tokenized_slice_is_tokenized_again_to_the_same_bytes(corpus, references, tmp_path, capsys, damage):
    output = tmp_path / "out"
    stopped_after_units(corpus, output)
    victim = slice_files(output, ".tokens.npy")[-1]
    data = bytearray(victim.read_bytes())
    if damage == "overwritten":  # token ids changed in place: the size and the header are as written
        data[200:216] = bytes(16)
        victim.write_bytes(bytes(data))
    else:
        victim.write_bytes(bytes(data[: len(data) // 2]))
    capsys.readouterr()
    assert resumed(corpus, output).resumed_from_unit == 2
    warning = capsys.readouterr().err
    assert f"{victim}" in warning and f"tokenizing slice {int(victim.name[6:13]) + 1} again" in warning
    assert all_hashes(output) == references()


def test_an_empty_journal_is_one_line_that_does_not_advise_resume(corpus, tmp_path):
    output = tmp_path / "out"
    stopped_after_units(corpus, output)
    (output / WORK / "journal.json").write_text("")
    message = refused(corpus, output)
    assert message == (f"--resume: the journal {output / WORK / 'journal.json'} is damaged (it is empty), so what the "
                       f"run in {output} kept cannot be vouched for; run without --resume, with --overwrite, to start "
                       "again")


def test_a_journal_with_a_changed_byte_is_damaged(corpus, tmp_path):
    output = tmp_path / "out"
    stopped_after_units(corpus, output)
    journal = output / WORK / "journal.json"
    journal.write_text(journal.read_text().replace('"units_done": 2', '"units_done": 3'))
    assert "is damaged (its checksum does not match its content)" in refused(corpus, output)


def test_a_deleted_journal_is_named_and_the_kept_work_is_not_called_nothing(corpus, references, tmp_path):
    output = tmp_path / "out"
    stopped_after_units(corpus, output)
    (output / WORK / "journal.json").unlink()
    message = refused(corpus, output)
    assert "stopped before it kept anything" not in message
    assert message.startswith(f"--resume: the journal of the run in {output} ({output / WORK / 'journal.json'}) is "
                              "missing, so the work there (")
    assert "tokenized slice files" in message and "kept piece files" in message
    assert message.endswith("restore the journal, or run without --resume, with --overwrite, to start again")
    generate(config(corpus, output, overwrite=True), progress=False)
    assert all_hashes(output) == references()


@pytest.mark.parametrize("output_format", ["parquet", "hdf5", "tfrecord"])
def test_a_flipped_bit_in_a_kept_shard_body_is_named_before_anything_is_appended(corpus, references, tmp_path,
                                                                                output_format):
    # TFRecord shards are assembled when they are not shuffled at the end (else the pieces are
    # kept: tests/faults/test_kept_pieces.py).
    overrides = {"keep_corpus_order": True} if output_format == "tfrecord" else {}
    output = tmp_path / "out"
    stopped_after_units(corpus, output, output_format=output_format, **overrides)
    journal = json.loads((output / WORK / "journal.json").read_text())
    bodies = sorted(path for path in output.iterdir() if path.name.endswith((".body", ".tmp")))
    victim = next(path for path in bodies if path.stat().st_size > 64)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x10
    victim.write_bytes(bytes(data))
    message = refused(corpus, output, GenerationError, output_format=output_format, **overrides)
    key = next(key for key, size in journal["shard_sizes"].items() if size == len(data))
    assert message.startswith(f"--resume: {victim} is damaged: its {journal['shard_sizes'][key]:,} journaled bytes "
                              "have CRC-32C ")
    assert message.endswith("run without --resume, with --overwrite, to start again")
    generate(config(corpus, output, output_format=output_format, overwrite=True, **overrides), progress=False)
    assert all_hashes(output) == references(output_format, **overrides)
