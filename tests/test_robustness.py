"""Nothing lost, nothing silent: bad input, failures and interruptions (issue: robustness)."""

from __future__ import annotations

import errno
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bert_data.cli.create_tfrecords import main
from bert_data.generator import runner
from bert_data.generator.assembly import ShardAssembler
from bert_data.generator.run_files import OutputLock

from conftest import file_hashes, make_corpus

REPO = Path(__file__).resolve().parents[1]


def cli(capsys, corpus, output, *extra, metadata=None):
    argv = [
        "--metadata_files", str(metadata or corpus.metadata), "--input_files_prefix", str(corpus.root),
        "--vocab_file", str(corpus.vocab), "--do_lower_case", "--output_dir", str(output),
        "--dupe_factor", "1", "--quiet", "--num_workers", "1", "--max_seq_length", "64",
        "--max_predictions_per_seq", "10", "--num_output_files", "2", *extra,
    ]
    code = main(argv)
    return code, capsys.readouterr().err


def manifest_of(output):
    return json.loads((Path(output) / "data_params.json").read_text())


@pytest.fixture
def corpus(tmp_path):
    return make_corpus(tmp_path / "corpus", n_docs=8, min_sentences=5, max_sentences=12)


def add_documents(corpus, files: dict) -> Path:
    """Write extra documents and a metadata file listing the corpus plus them."""
    for name, data in files.items():
        path = corpus.root / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    metadata = corpus.root / "with_extra.txt"
    metadata.write_text(corpus.metadata.read_text() + "\n".join(files) + "\n")
    return metadata


def test_missing_file_is_an_error_naming_metadata_line_or_a_counted_skip(capsys, corpus, tmp_path):
    metadata = corpus.root / "m.txt"
    metadata.write_text(corpus.metadata.read_text() + "docs/nope.txt\n")
    code, err = cli(capsys, corpus, tmp_path / "out", metadata=metadata)
    assert code == 2 and f"{metadata}:9: file not found" in err and "--skip_missing" in err
    assert not (tmp_path / "out").exists()
    code, err = cli(capsys, corpus, tmp_path / "out", "--skip_missing", metadata=metadata)
    assert code == 0 and "skipped: file not found" in err
    skipped = manifest_of(tmp_path / "out")["documents_skipped"]
    assert skipped["count"] == 1 and skipped["first"] == [{"path": "docs/nope.txt", "reason": "file not found"}]


def test_empty_metadata_and_corpus_without_text_are_errors(capsys, corpus, tmp_path):
    empty = corpus.root / "empty_meta.txt"
    empty.write_text("\n\n")
    code, err = cli(capsys, corpus, tmp_path / "out", metadata=empty)
    assert code == 2 and "metadata file lists no documents" in err
    (corpus.root / "blank1.txt").write_text("")
    (corpus.root / "blank2.txt").write_text("   \n\n\t ")
    only_blank = corpus.root / "blank_meta.txt"
    only_blank.write_text("blank1.txt\nblank2.txt\n")
    code, err = cli(capsys, corpus, tmp_path / "out2", metadata=only_blank)
    assert code == 2 and "no document with any text" in err
    assert not list((tmp_path / "out2").glob("*.tfrecords*")) and not (tmp_path / "out2" / "data_params.json").exists()


def test_bad_documents_are_skipped_and_counted(capsys, corpus, tmp_path):
    metadata = add_documents(corpus, {
        "empty.txt": "",
        "spaces.txt": " \n\t\n  ",
        "control.txt": "\x07\x07 \x01\n",  # no character survives BERT's text cleaning
        "binary.bin": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
        "latin1.txt": "Caf\xe9 noir et cr\xe8me. Encore une phrase ici.".encode("latin-1"),
    })
    code, err = cli(capsys, corpus, tmp_path / "out", metadata=metadata)
    assert code == 0, err
    assert "binary.bin: skipped: binary file (NUL bytes)" in err
    manifest = manifest_of(tmp_path / "out")
    skipped = manifest["documents_skipped"]
    assert skipped["by_reason"] == {"binary file (NUL bytes)": 1, "empty or white-space only": 2,
                                    "no sentence with any token": 1}
    assert {entry["path"] for entry in skipped["first"]} == {"empty.txt", "spaces.txt", "control.txt", "binary.bin"}
    assert manifest["invalid_utf8_replaced"] == 2
    assert manifest["n_docs"] == 9  # the 8 documents and the Latin-1 one


def test_edge_shapes_follow_the_reference_without_crashing(capsys, corpus, tmp_path):
    words = " ".join(["bada"] * 300)  # one sentence far longer than max_seq_length
    metadata = corpus.root / "edge.txt"
    (corpus.root / "long.txt").write_text(words + ".")
    (corpus.root / "one.txt").write_text("Bada beda.")
    metadata.write_text("long.txt\n")
    code, err = cli(capsys, corpus, tmp_path / "a", metadata=metadata)
    assert code == 0, err
    assert manifest_of(tmp_path / "a")["n_examples"] == 1  # one chunk, one sentence: one pair
    metadata.write_text("one.txt\n")  # a corpus of one document of one sentence
    code, err = cli(capsys, corpus, tmp_path / "b", "--dupe_factor", "3", metadata=metadata)
    assert code == 0, err
    assert manifest_of(tmp_path / "b")["n_examples"] == 3


def test_vocabulary_problems_are_named(capsys, corpus, tmp_path):
    broken = tmp_path / "vocab.txt"
    broken.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n")
    argv = ["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root), "--quiet",
            "--vocab_file", str(broken), "--output_dir", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "[MASK]" in err and "vocab.txt" in err and len(err.strip().splitlines()) == 1


def test_cased_text_with_lowercase_vocabulary_is_refused_with_unk_rate_unless_allowed(capsys, corpus, tmp_path):
    argv = ["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root), "--quiet",
            "--vocab_file", str(corpus.vocab), "--output_dir", str(tmp_path / "out"), "--dupe_factor", "1",
            "--num_workers", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("create_tfrecords: error: ")
    assert "uncased" in err and "[UNK] rate" in err and "add --do_lower_case" in err and "--allow_case_mismatch" in err
    assert re.search(r"\[UNK\] rate [1-9]\d*\.\d\d% .* 0\.00% with do_lower_case on", err), err
    assert not (tmp_path / "out").exists()
    assert main(argv + ["--allow_case_mismatch"]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "uncased" in err and "[UNK] rate" in err


def test_cased_vocabulary_with_do_lower_case_is_refused(capsys, corpus, tmp_path):
    cased = tmp_path / "cased.txt"  # the corpus vocabulary plus the capitalised words it has
    words = {word for path in corpus.documents for word in (corpus.root / path).read_text().split()}
    capitals = sorted({word.strip(".,") for word in words if word[:1].isupper()})
    cased.write_text(corpus.vocab.read_text() + "\n".join(capitals) + "\n")
    argv = ["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root), "--quiet",
            "--vocab_file", str(cased), "--do_lower_case=True", "--output_dir", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "looks cased but do_lower_case is on" in err and "drop --do_lower_case" in err
    assert len(err.strip().splitlines()) == 1
    assert main(argv[:-3] + ["--output_dir", str(tmp_path / "out2"), "--dupe_factor", "1"]) == 0  # cased: fine


def test_a_vocabulary_without_the_other_case_is_not_a_mismatch_when_it_changes_no_token(capsys, corpus, tmp_path):
    """A lower-case vocabulary with text that has no capitals (here: the corpus lower-cased)
    reads the same with and without --do_lower_case: nothing to refuse."""
    lowered = tmp_path / "lowered"
    for label in corpus.documents:
        (lowered / label).parent.mkdir(parents=True, exist_ok=True)
        (lowered / label).write_text((corpus.root / label).read_text().lower())
    argv = ["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(lowered), "--quiet",
            "--vocab_file", str(corpus.vocab), "--output_dir", str(tmp_path / "out"), "--dupe_factor", "1"]
    assert main(argv) == 0, capsys.readouterr().err
    assert "uncased" not in capsys.readouterr().err


def test_uninstalled_spacy_model_is_named_with_advice(capsys, corpus, tmp_path):
    code, err = cli(capsys, corpus, tmp_path / "out", "--spacy_model", "en_core_web_nonexistent")
    assert code == 2
    assert "en_core_web_nonexistent" in err and "python -m spacy download" in err
    assert "--spacy_model" in err  # how to fall back to the built-in sentencizer


def test_second_run_into_the_same_directory_is_refused(capsys, corpus, tmp_path):
    output = tmp_path / "out"
    output.mkdir()
    lock = OutputLock(str(output))
    lock.acquire()  # as a running generator holds it
    try:
        code, err = cli(capsys, corpus, output)
        assert code == 2 and "is in use by another run" in err
    finally:
        lock.release()
    assert cli(capsys, corpus, output)[0] == 0


def test_full_disk_gives_a_clear_error_and_removes_temporary_files(capsys, corpus, tmp_path, monkeypatch):
    real_append = ShardAssembler.append

    def append_to_a_full_disk(self, segments):
        real_append(self, segments)
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out" / "examples-1.tfrecords.tmp"))

    monkeypatch.setattr(ShardAssembler, "append", append_to_a_full_disk)
    code, err = cli(capsys, corpus, tmp_path / "out")
    assert code == 2 and "No space left on device" in err and "temporary files removed" in err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == []


def test_unwritable_output_directory(capsys, corpus, tmp_path):
    target = tmp_path / "file-not-dir"
    target.write_text("x")
    code, err = cli(capsys, corpus, target / "out")
    assert code == 2 and "cannot be created" in err


def test_an_exception_in_a_worker_names_the_document_and_leaves_no_process(corpus, tmp_path):
    (corpus.root / "poison.txt").write_text("Kaboom here. Another sentence.")
    metadata = corpus.root / "poisoned.txt"
    metadata.write_text(corpus.metadata.read_text() + "poison.txt\n")
    script = f"""
import sys
import bert_data.tokenizers.wordpiece as t
real = t.WordPieceTokenizer.encode_ids
def encode_ids(self, texts):
    if any("Kaboom" in text for text in texts):
        raise RuntimeError("tokenizer exploded")
    return real(self, texts)
t.WordPieceTokenizer.encode_ids = encode_ids
from bert_data.cli.create_tfrecords import main
sys.exit(main(["--metadata_files", {str(metadata)!r}, "--input_files_prefix", {str(corpus.root)!r},
               "--vocab_file", {str(corpus.vocab)!r}, "--do_lower_case", "--output_dir", {str(tmp_path / 'out')!r},
               "--num_workers", "2", "--split_num", "3", "--quiet"]))
"""
    # The timeout only keeps a hang from stalling the suite; it asserts nothing about speed.
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=600)
    assert result.returncode == 2, result.stderr
    assert "poison.txt" in result.stderr and "tokenizer exploded" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not [p for p in (tmp_path / "out").iterdir() if p.name != ".bert_data.lock"]
    leftovers = [p for p in psutil.process_iter(["cmdline"]) if "poisoned.txt" in " ".join(p.info["cmdline"] or [])]
    assert not leftovers


# ---------------------------------------------------------------------------- interruptions

@pytest.fixture(scope="module")
def long_run(tmp_path_factory):
    """A corpus whose generation takes a few seconds, and its uninterrupted output."""
    root = tmp_path_factory.mktemp("long")
    corpus = make_corpus(root / "corpus", n_docs=240, min_sentences=20, max_sentences=40, words_per_doc=20)
    reference = root / "reference"
    assert subprocess.run(generator_command(corpus, reference), cwd=REPO, capture_output=True).returncode == 0
    return corpus, file_hashes(reference)


def generator_command(corpus, output, *extra):
    return [sys.executable, "-m", "bert_data.cli.create_tfrecords", "--metadata_files", str(corpus.metadata),
            "--input_files_prefix", str(corpus.root), "--vocab_file", str(corpus.vocab), "--do_lower_case",
            "--output_dir", str(output), "--dupe_factor", "30", "--split_num", "8", "--num_output_files", "4",
            "--num_workers", "2", "--quiet", *extra]


def units_done(journal):
    try:
        return json.loads(journal.read_text())["totals"]["units_done"]
    except (OSError, ValueError, KeyError):
        return 0


def interrupt_after_first_units(corpus, output, send):
    """Start a run, wait until it has finished some units, interrupt it; returns (code, stderr,
    units done when the signal was sent)."""
    process = subprocess.Popen(generator_command(corpus, output), cwd=REPO, stderr=subprocess.PIPE, text=True)
    journal = output / ".bert_data_work" / "journal.json"
    while units_done(journal) < 2:  # the suite's own timeout guards against a hang
        assert process.poll() is None, "the run finished before it could be interrupted"
        time.sleep(0.01)
    done_at_signal = units_done(journal)
    send(process)
    _, err = process.communicate(timeout=600)
    return process.returncode, err, done_at_signal


def looks_complete(output):
    return sorted(p.name for p in output.rglob("*") if p.name.endswith(".tfrecords") or p.name == "data_params.json")


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_interrupted_run_leaves_nothing_complete_looking_and_resumes_to_the_same_bytes(long_run, tmp_path, how):
    corpus, reference = long_run
    output = tmp_path / "out"
    code, err, done_at_signal = interrupt_after_first_units(corpus, output,
                                                           lambda p: p.send_signal(getattr(signal, how)))
    assert looks_complete(output) == []
    done_at_exit = units_done(output / ".bert_data_work" / "journal.json")
    if how != "SIGKILL":
        assert code == {"SIGINT": 130, "SIGTERM": 143}[how]
        # It stops at once: the units in flight are dropped, not finished (2 workers keep at
        # most 2 + 2 units open), however long the rest of the run would take.
        assert 2 <= done_at_signal <= done_at_exit <= done_at_signal + 4 < 30
        # What is kept and where --resume goes on, numbered from 1 as the work files are.
        assert f"units 1-{done_at_exit} of 30 kept (" in err and " MB of shards)" in err, err
        assert f"with --resume to continue with unit {done_at_exit + 1}" in err
        assert len(err.strip().splitlines()) == 1
    # A killed parent's workers notice and exit (the kernel signals them); waiting for that has
    # a generous bound only so that a leak fails the test instead of hanging it.
    def survivors():
        return [p for p in psutil.process_iter(["cmdline"]) if str(output) in " ".join(p.info["cmdline"] or [])]

    for _ in range(3000):
        if not survivors():
            break
        time.sleep(0.01)
    assert not survivors()

    resumed = subprocess.run(generator_command(corpus, output, "--resume"), cwd=REPO, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed: units 1-{done_at_exit} kept from the interrupted run, units {done_at_exit + 1}-30 done now" \
        in resumed.stderr
    assert file_hashes(output) == reference
    assert not (output / ".bert_data_work").exists()


def test_resume_refuses_other_options_and_finished_runs(long_run, tmp_path):
    corpus, _ = long_run
    output = tmp_path / "out"
    code, _, _ = interrupt_after_first_units(corpus, output, lambda p: p.send_signal(signal.SIGINT))
    assert code == 130
    other = subprocess.run(generator_command(corpus, output, "--resume", "--masked_lm_prob", "0.2"), cwd=REPO,
                           capture_output=True, text=True)
    assert other.returncode == 2 and "started with other options" in other.stderr
    plain = subprocess.run(generator_command(corpus, output), cwd=REPO, capture_output=True, text=True)
    assert plain.returncode == 2 and "--resume" in plain.stderr
    assert subprocess.run(generator_command(corpus, output, "--resume"), cwd=REPO, capture_output=True).returncode == 0
    again = subprocess.run(generator_command(corpus, output, "--resume"), cwd=REPO, capture_output=True, text=True)
    assert again.returncode == 2 and "nothing to resume" in again.stderr


def interrupt_at_append(monkeypatch, number: int, seen_pieces: list):
    """Ctrl-C during the ``number``-th unit's append to the shards (after ``number - 1`` units
    were journaled), in this process."""
    real_append = ShardAssembler.append
    calls = []

    def append(self, segments):
        calls.append(1)
        seen_pieces.extend(Path(segment.path).name for segment in segments)
        if len(calls) == number:
            raise KeyboardInterrupt
        real_append(self, segments)

    monkeypatch.setattr(ShardAssembler, "append", append)


def test_interrupted_before_anything_was_finished_keeps_nothing_and_a_plain_rerun_works(capsys, corpus, tmp_path,
                                                                                         monkeypatch):
    output = tmp_path / "out"
    with monkeypatch.context() as patch:
        def tokenize_slice(*args):
            raise KeyboardInterrupt

        patch.setattr(runner, "tokenize_slice", tokenize_slice)
        code, err = cli(capsys, corpus, output, "--split_num", "2")
    assert code == 130
    assert err.strip() == ("create_tfrecords: interrupted; nothing was finished, so nothing is kept; run the same "
                           "command again to start over")
    assert list(output.iterdir()) == []  # as if the run had never started
    code, err = cli(capsys, corpus, output, "--split_num", "2", "--resume")
    assert code == 2 and "holds no interrupted run, so there is nothing to resume; run without --resume" in err
    assert cli(capsys, corpus, output, "--split_num", "2")[0] == 0  # no --overwrite needed


def test_interrupted_before_the_first_unit_keeps_the_tokenized_slices(capsys, corpus, tmp_path, monkeypatch):
    assert cli(capsys, corpus, tmp_path / "reference", "--split_num", "2")[0] == 0
    output = tmp_path / "out"
    with monkeypatch.context() as patch:
        interrupt_at_append(patch, 1, [])
        code, err = cli(capsys, corpus, output, "--split_num", "2")
    assert code == 130
    assert err.strip() == ("create_tfrecords: interrupted; no unit was written yet; 1 of 1 tokenized slices kept; run "
                           "the same command with --resume to continue with unit 1")
    code, err = cli(capsys, corpus, output, "--split_num", "2", "--resume")
    assert code == 0 and "resumed: no unit had been written; the interrupted run's tokenized slices were reused" in err
    assert file_hashes(output) == file_hashes(tmp_path / "reference")


def test_interrupted_after_one_unit_says_what_is_kept_and_resume_goes_on_from_there(capsys, corpus, tmp_path,
                                                                                       monkeypatch):
    assert cli(capsys, corpus, tmp_path / "reference", "--split_num", "2")[0] == 0
    output = tmp_path / "out"
    pieces = []
    with monkeypatch.context() as patch:
        interrupt_at_append(patch, 2, pieces)
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


def test_a_200_mb_document_without_newline_or_punctuation(tmp_path):
    """Works, in bounded memory (parts in parallel, no spaCy needed)."""
    words = ["lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed", "tempor"]
    import random

    rng = random.Random(0)
    block = (" ".join(rng.choice(words) for _ in range(100_000)) + " ").encode()
    path = tmp_path / "huge.txt"
    with open(path, "wb") as handle:
        for _ in range(200_000_000 // len(block) + 1):
            handle.write(block)
    size = path.stat().st_size
    assert size >= 200_000_000 and b"\n" not in block and b"." not in block
    (tmp_path / "meta.txt").write_text("huge.txt\n")
    command = [sys.executable, "-m", "bert_data.cli.create_tfrecords", "--metadata_files", str(tmp_path / "meta.txt"),
               "--input_files_prefix", str(tmp_path), "--vocab_file", str(REPO / "vocab" / "vocab.txt"),
               "--do_lower_case", "--output_dir", str(tmp_path / "out"), "--dupe_factor", "1", "--num_workers", "2",
               "--quiet"]
    process = subprocess.Popen(command, cwd=REPO, stderr=subprocess.PIPE, text=True)
    watched, peak = psutil.Process(process.pid), 0
    while process.poll() is None:
        try:
            peak = max(peak, sum(p.memory_info().rss for p in [watched] + watched.children(recursive=True)))
        except psutil.Error:
            pass
        time.sleep(0.05)
    assert process.returncode == 0, process.stderr.read()
    path.unlink()  # 200 MB: not kept until the end of the session
    manifest = manifest_of(tmp_path / "out")
    assert manifest["n_docs"] == 1 and manifest["n_examples"] > 1000
    assert manifest["n_tokens"] > 30_000_000
    # Speed is measured by scripts/benchmark.py, never here: CI machines vary 2x from day to day.
    # The text is 200 MB and its token ids about 80 MB; three processes stay far below the
    # gigabytes that holding Python objects for 40 M tokens would take.
    assert peak < 1.2e9, f"peak memory {peak / 1e6:.0f} MB"
