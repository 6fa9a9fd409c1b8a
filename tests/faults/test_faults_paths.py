"""Input that is refused (issue 18): metadata entries outside --input_files_prefix, files that
are not regular files (FIFOs, devices) wherever a path is taken, metadata lines that cannot
be paths.  Each refusal is one line naming the file or entry, before any work.
"""

from __future__ import annotations

import os
import signal

import pytest

from bert_data.cli.create_tfrecords import main
from bert_data.pipeline.documents.listing import MAX_LINE_BYTES, PrefixGuard, bounded_lines, read_metadata
from bert_data.pipeline.documents.types import InputError, MetadataEntry

from tests.helpers.corpus import make_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("paths"), n_docs=3, min_sentences=4, max_sentences=6)


@pytest.fixture
def no_hang():
    """A safety net, not a synchronisation: a test that would block on a FIFO fails instead."""
    def stop(signum, frame):
        raise TimeoutError("blocked: a FIFO or device was opened")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def run(corpus, tmp_path, capsys, metadata_lines, *options, prefix=None):
    metadata = tmp_path / "m.txt"
    metadata.write_text("".join(line + "\n" for line in metadata_lines))
    code = main(["--metadata_files", str(metadata), "--input_files_prefix", str(prefix or corpus.root),
                 "--vocab_file", str(corpus.vocab), "--do_lower_case", "--output_dir", str(tmp_path / "out"),
                 "--quiet", "--max_seq_length", "32", "--dupe_factor", "1", "--num_output_files", "1",
                 "--num_workers", "1", *options])
    return code, capsys.readouterr().err.strip().splitlines()


# ---------------------------------------------------------------------------- outside the prefix

def test_entries_outside_the_prefix_are_refused_naming_the_entry(corpus, tmp_path, capsys):
    inside = sorted(corpus.documents)[0]
    outside = tmp_path / "secret.txt"
    outside.write_text("A private document that no run should read.\n")
    (corpus.root / "docs" / "link_out.txt").symlink_to(outside)
    (corpus.root / "dir_out").symlink_to(tmp_path)
    try:
        relative = os.path.relpath(outside, corpus.root)
        for bad in (relative, str(outside), "docs/link_out.txt", "dir_out/secret.txt", "docs/../../" + relative):
            code, err = run(corpus, tmp_path, capsys, [inside, bad])
            assert code == 2 and len(err) == 1, (bad, err)
            assert f"m.txt:2: '{bad}' is outside --input_files_prefix {corpus.root}" in err[0]
            assert "--allow_paths_outside_prefix" in err[0] and not (tmp_path / "out").exists()
        # The option lets them in.
        code, err = run(corpus, tmp_path, capsys, [inside, "docs/link_out.txt"], "--allow_paths_outside_prefix")
        assert code == 0 and "from 2 documents" in err[0]
    finally:
        (corpus.root / "docs" / "link_out.txt").unlink()
        (corpus.root / "dir_out").unlink()


def test_links_and_dots_that_stay_inside_are_read(corpus, tmp_path, capsys):
    first, second = sorted(corpus.documents)[:2]
    (corpus.root / "docs" / "alias.txt").symlink_to(corpus.root / first)
    try:
        code, err = run(corpus, tmp_path, capsys, ["docs/alias.txt", "docs/../" + second])
        assert code == 0 and "from 2 documents" in err[0]
    finally:
        (corpus.root / "docs" / "alias.txt").unlink()


def test_url_entries_stay_under_a_url_prefix():
    guard = PrefixGuard("s3://bucket/corpus")
    assert guard.inside("s3://bucket/corpus/a/b.txt")
    for path in ("s3://bucket/corpus/../private/x.txt", "s3://bucket/other/x.txt", "s3://bucket/corpusX/a.txt",
                 "https://example.com/x.txt", "/etc/passwd"):
        assert not guard.inside(path), path
    assert not PrefixGuard("/data").inside("s3://bucket/x.txt")


def test_no_prefix_means_paths_as_written(corpus, tmp_path):
    (tmp_path / "m.txt").write_text(f"{corpus.root / sorted(corpus.documents)[0]}\n")
    assert len(read_metadata([str(tmp_path / "m.txt")], "")) == 1


# ---------------------------------------------------------------------------- not regular files

@pytest.mark.parametrize("option", ["--metadata_files", "--vocab_file", "--tokenizer_file", "--spm_model_file",
                                    "--val_metadata_files", "entry", "--input_files"])
def test_a_fifo_is_refused_wherever_a_path_is_taken(corpus, tmp_path, capsys, no_hang, option):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    argv = ["--input_files_prefix", str(corpus.root), "--output_dir", str(tmp_path / "out"), "--quiet"]
    documents = ["--metadata_files", str(corpus.metadata)]
    if option == "entry":
        (tmp_path / "m.txt").write_text(f"{sorted(corpus.documents)[0]}\n{fifo}\n")
        argv += ["--metadata_files", str(tmp_path / "m.txt"), "--allow_paths_outside_prefix",
                 "--vocab_file", str(corpus.vocab)]
    elif option in ("--metadata_files", "--input_files"):
        argv += [option, str(fifo), "--vocab_file", str(corpus.vocab)]
    elif option == "--val_metadata_files":
        argv += documents + [option, str(fifo), "--vocab_file", str(corpus.vocab)]
    else:  # the tokenizer's files
        argv += documents + [option, str(fifo)]
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert str(fifo) in err[0] and "not a regular file: a FIFO (named pipe)" in err[0]


def test_a_device_is_refused(corpus, tmp_path, capsys, no_hang):
    code, err = run(corpus, tmp_path, capsys, ["/dev/zero"], "--allow_paths_outside_prefix")
    assert code == 2 and len(err) == 1 and "m.txt:1: not a regular file: a character device: /dev/zero" in err[0]


def test_build_vocab_refuses_a_fifo_metadata_file(tmp_path, capsys, no_hang):
    from bert_data.cli.build_vocab import main as build_vocab

    os.mkfifo(tmp_path / "pipe")
    code = build_vocab(["--metadata_files", str(tmp_path / "pipe"), "--out", str(tmp_path / "v.txt")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "not a regular file: a FIFO" in err[0]


# ---------------------------------------------------------------------------- metadata lines

def test_a_metadata_line_too_long_for_a_path_stops_with_a_short_message(corpus, tmp_path, capsys):
    long_line = "word " * (MAX_LINE_BYTES // 2)
    code, err = run(corpus, tmp_path, capsys, [sorted(corpus.documents)[0], long_line])
    assert code == 2 and len(err) == 1 and len(err[0]) < 400
    assert f"m.txt:2: line longer than {MAX_LINE_BYTES:,} bytes, not a path" in err[0] and "'word word" in err[0]


class CountingReader:
    """A file of one endless line, counting what is read of it."""

    def __init__(self):
        self.read_bytes = 0

    def read(self, size):
        self.read_bytes += size
        return b"x" * size


def test_a_long_line_is_never_held_whole():
    reader = CountingReader()
    with pytest.raises(ValueError):
        list(bounded_lines(reader, MAX_LINE_BYTES))
    assert reader.read_bytes <= MAX_LINE_BYTES + (1 << 16)  # stopped at the limit, not at the line's end


def test_metadata_lines_end_as_before(tmp_path):
    """Lines are read a line at a time but numbered and split as str.splitlines did."""
    (tmp_path / "m.txt").write_bytes(b"a.txt\r\nb.txt\rc.txt\n\n  d.txt  \n")
    entries = read_metadata([str(tmp_path / "m.txt")], "")
    assert [(e.line_number, e.label) for e in entries] == [(1, "a.txt"), (2, "b.txt"), (3, "c.txt"), (5, "d.txt")]
    assert isinstance(entries[0], MetadataEntry)
    with pytest.raises(InputError, match="metadata file is not UTF-8"):
        (tmp_path / "bad.txt").write_bytes(b"ok\n\xff\xfe\n")
        read_metadata([str(tmp_path / "bad.txt")], "")


def test_every_vocabulary_loader_refuses_a_fifo(tmp_path, no_hang):
    """The tools and loaders load vocabularies too (bert-data inspect/verify --vocab_file)."""
    from bert_data.tokenizers import HUGGINGFACE, SENTENCEPIECE, TokenizerSource, load_vocabulary
    from bert_data.tokenizers.vocab import VocabError, load_vocab

    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(VocabError, match="pipe: not a regular file: a FIFO"):
        load_vocab(tmp_path / "pipe")
    for kind in (HUGGINGFACE, SENTENCEPIECE):
        with pytest.raises(VocabError, match="pipe: not a regular file: a FIFO"):
            load_vocabulary(TokenizerSource(kind, str(tmp_path / "pipe")))
