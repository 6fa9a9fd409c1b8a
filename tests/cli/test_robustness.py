"""Nothing silent: bad input and failures are named in one line, or skipped and counted; a huge
document works in bounded memory.  Interruptions and --resume: faults/test_interruptions.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from bert_data.cli.create_tfrecords import main
from bert_data.run.run_files import OutputLock

from tests.helpers.cli_runs import small_run as cli
from tests.helpers.corpus import make_corpus

REPO = Path(__file__).resolve().parents[2]


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
    # The files are named (the first few), with what to do.
    assert code == 2 and ("no document with any text: every listed document was skipped (2 empty or white-space "
                          "only: blank1.txt, blank2.txt); name files that hold text") in err
    assert not list((tmp_path / "out2").glob("*.tfrecords*")) and not (tmp_path / "out2" / "data_params.json").exists()
    only_empty = corpus.root / "empty_files_meta.txt"
    only_empty.write_text("blank1.txt\n")
    code, err = cli(capsys, corpus, tmp_path / "out3", metadata=only_empty)
    assert code == 2 and (f"no document with any text in {only_empty}: blank1.txt is empty or white space only; "
                          "name files that hold text") in err


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
def exploding(real):  # whichever entry the tokenizing stage calls (ids as lists, or flat arrays)
    def encode(self, texts):
        if any("Kaboom" in text for text in texts):
            raise RuntimeError("tokenizer exploded")
        return real(self, texts)
    return encode
t.WordPieceTokenizer.encode_ids = exploding(t.WordPieceTokenizer.encode_ids)
t.WordPieceTokenizer.encode_flat = exploding(t.WordPieceTokenizer.encode_flat)
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
