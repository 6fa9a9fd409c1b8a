"""Input formats: compressed files (.gz, .bz2, .xz, .zst) and JSON Lines, read as streams.

The same documents in any format give the same shards: units have the same documents in the
same order, and a record depends on that, never on how the bytes were stored.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import threading
import time
from pathlib import Path

import psutil
import pytest
import zstandard

from bert_data.pipeline.documents.listing import read_metadata
from bert_data.pipeline.documents.reading import read_documents
from bert_data.pipeline.documents.spans import LINE_PATTERN, document_spans, separator_pattern, stream_document_spans
from bert_data.pipeline.documents.types import BINARY, EMPTY, INVALID_JSON, MISSING_KEY, NOT_OBJECT, NOT_STRING
from bert_data.pipeline.documents import files as input_files
from bert_data.config import ConfigError, GeneratorConfig
from bert_data.pipeline.documents.types import InputError
from bert_data.run.planning import make_plan
from bert_data.run.resolve import resolve
from bert_data.run.resolve import generate

from tests.helpers.corpus import file_hashes, make_corpus
from tests.helpers.planning import plan, sources

MSL, MPP = 64, 8
CODECS = {
    "gz": lambda data: gzip.compress(data, 6),
    "bz2": bz2.compress,
    "xz": lzma.compress,
    "zst": lambda data: zstandard.ZstdCompressor().compress(data),
}


def write_compressed(path: Path, data: bytes, codec: str) -> Path:
    """``path`` compressed with ``codec`` as ``path.<codec>`` ("" leaves it plain)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if codec:
        path = path.with_name(path.name + "." + codec)
        data = CODECS[codec](data)
    path.write_bytes(data)
    return path


def write_metadata(path: Path, root: Path, files) -> Path:
    path.write_text("\n".join(str(Path(f).relative_to(root)) for f in files) + "\n", encoding="utf-8")
    return path


def run(corpus, metadata: Path, root: Path, output: Path, **overrides):
    options = dict(
        metadata_files=[str(metadata)], input_files_prefix=str(root), vocab_file=str(corpus.vocab),
        do_lower_case=True, max_seq_length=MSL, max_predictions_per_seq=MPP, dupe_factor=2, split_num=5,
        num_output_files=2, output_dir=str(output), num_workers=1, seed=7,
    )
    options.update(overrides)
    summary = generate(GeneratorConfig(**options), progress=False)
    return summary.manifests["train"], file_hashes(output)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("inputs"), n_docs=24, min_sentences=8, max_sentences=20)


def document_texts(corpus):
    return [(corpus.root / label).read_text(encoding="utf-8") for label in corpus.documents]


def google_format(text: str) -> str:
    """The document as Google's input wants it: a sentence a line (the synthetic documents
    already put each sentence on its own line; blank lines only separate paragraphs)."""
    return "".join(line + "\n" for line in text.splitlines() if line.strip())


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    """Shards of the plain corpus: one document a file, and Google's multi-document format."""
    out = tmp_path_factory.mktemp("reference")
    one_doc = run(corpus, corpus.metadata, corpus.root, out / "one")
    root = tmp_path_factory.mktemp("google")
    texts = [google_format(t) for t in document_texts(corpus)]
    files = [write_compressed(root / f"part{i}.txt", "\n".join(texts[i::3]).encode(), "") for i in range(3)]
    multi = run(corpus, write_metadata(root / "metadata.txt", root, files), root, out / "multi",
                single_sentence_per_line=True, multiple_docs_in_single_file=True)
    assert one_doc[0]["n_examples"] > 150 and multi[0]["n_examples"] > 150
    return one_doc, multi


def interleaved(items, parts=3):
    """Documents spread over files as part0 = items[0::3], ...: metadata order is file order."""
    return [items[i::parts] for i in range(parts)]


# ---------------------------------------------------------------------------- (a) compressed = plain

@pytest.mark.parametrize("codec", ["gz", "bz2", "xz", "zst"])
def test_compressed_one_document_per_file_gives_the_same_shards(corpus, reference, tmp_path, codec):
    files = [write_compressed(tmp_path / label, (corpus.root / label).read_bytes(), codec)
             for label in corpus.documents]
    manifest, hashes = run(corpus, write_metadata(tmp_path / "metadata.txt", tmp_path, files), tmp_path,
                           tmp_path / "out")
    assert manifest["n_docs"] == 24 and manifest["documents_skipped"]["count"] == 0
    assert hashes == reference[0][1]


@pytest.mark.parametrize("codec", ["gz", "bz2", "xz", "zst"])
def test_compressed_multi_document_files_give_the_same_shards(corpus, reference, tmp_path, codec):
    texts = [google_format(t) for t in document_texts(corpus)]
    # Units of 5 documents over files of 8: units span files, and files start mid-unit.
    parts = ["\n".join(group).encode() for group in interleaved(texts)]
    files = [write_compressed(tmp_path / f"part{i}.txt", data, codec) for i, data in enumerate(parts)]
    manifest, hashes = run(corpus, write_metadata(tmp_path / "metadata.txt", tmp_path, files), tmp_path,
                           tmp_path / "out", single_sentence_per_line=True, multiple_docs_in_single_file=True)
    assert manifest["n_docs"] == 24 and manifest["n_units"] == 5
    assert hashes == reference[1][1]


def test_compressed_ranges_read_by_worker_processes_give_the_same_shards(corpus, reference, tmp_path):
    """Worker processes (forked after the parent read the first unit) each keep their own streams."""
    texts = [google_format(t) for t in document_texts(corpus)]
    files = [write_compressed(tmp_path / f"part{i}.txt", "\n".join(group).encode(), "gz")
             for i, group in enumerate(interleaved(texts))]
    _, hashes = run(corpus, write_metadata(tmp_path / "metadata.txt", tmp_path, files), tmp_path, tmp_path / "out",
                    single_sentence_per_line=True, multiple_docs_in_single_file=True, num_workers=3)
    assert hashes == reference[1][1]


def jsonl_bytes(texts, key="text", start=0) -> bytes:
    return "".join(json.dumps({"id": start + i, key: text}) + "\n" for i, text in enumerate(texts)).encode()


@pytest.mark.parametrize("codec", ["", "gz", "bz2", "xz", "zst"])
def test_jsonl_plain_and_compressed_give_the_same_shards_as_one_document_per_file(corpus, reference, tmp_path, codec):
    """(b) JSON Lines of the corpus = the corpus as files: same documents, same order, same units
    (labels differ, path#N against path, but no record depends on them without a validation split)."""
    texts = document_texts(corpus)
    files = [write_compressed(tmp_path / "a.jsonl", jsonl_bytes(texts[:10]), codec),
             write_compressed(tmp_path / "b.jsonl", jsonl_bytes(texts[10:]), codec)]
    manifest, hashes = run(corpus, write_metadata(tmp_path / "metadata.txt", tmp_path, files), tmp_path,
                           tmp_path / "out", text_field="text")
    assert manifest["n_docs"] == 24 and manifest["documents_skipped"]["count"] == 0
    assert hashes == reference[0][1]


def test_jsonl_with_a_sentence_a_line_equals_google_format(corpus, reference, tmp_path):
    texts = [google_format(t) for t in document_texts(corpus)]
    files = [write_compressed(tmp_path / f"part{i}.jsonl", jsonl_bytes(group), "gz")
             for i, group in enumerate(interleaved(texts))]
    _, hashes = run(corpus, write_metadata(tmp_path / "metadata.txt", tmp_path, files), tmp_path, tmp_path / "out",
                    text_field="text", single_sentence_per_line=True)
    assert hashes == reference[1][1]


# ---------------------------------------------------------------------------- (c) bad JSON lines

def test_bad_jsonl_lines_are_skipped_and_counted(corpus, reference, tmp_path):
    texts = document_texts(corpus)
    good = [json.dumps({"text": t}) for t in texts]
    bad = ['{"text": "unterminated', "[1, 2, 3]", '{"body": "no text key"}', '{"text": 5}', '{"text": "  \\n "}']
    lines = good[:3] + [bad[0], "", "   "] + good[3:12] + bad[1:3] + good[12:] + bad[3:]
    path = write_compressed(tmp_path / "mixed.jsonl", ("\n".join(lines) + "\n").encode(), "")
    manifest, _ = run(corpus, write_metadata(tmp_path / "metadata.txt", tmp_path, [path]), tmp_path,
                      tmp_path / "out", text_field="text")
    skipped = manifest["documents_skipped"]
    assert skipped["count"] == 5 and manifest["n_docs"] == 24
    assert skipped["by_reason"] == {INVALID_JSON: 1, NOT_OBJECT: 1, MISSING_KEY: 1, NOT_STRING: 1, EMPTY: 1}
    # Blank lines hold no document; N counts the file's documents (non-blank lines).
    assert {s["path"] for s in skipped["first"]} == {"mixed.jsonl#3", "mixed.jsonl#13", "mixed.jsonl#14",
                                                     "mixed.jsonl#27", "mixed.jsonl#28"}


def test_jsonl_reader_reasons_labels_and_text(tmp_path):
    lines = [b'{"t": "caf\\u00e9 ok"}', b"", b"nope", b'"a string"', b"{}", b'{"t": null}',
             '\ufeff{"t": "bom"}'.encode(), b'{"t": "lone \\ud800 surrogate"}', b'{"t": "nul \\u0000"}',
             b'{"t": "x", "other": "\xff"}']
    path = write_compressed(tmp_path / "f.jsonl", b"\r\n".join(lines), "")
    entries = read_metadata([str(write_metadata(tmp_path / "m.txt", tmp_path, [path]))], str(tmp_path))
    corpus = plan(entries, text_field="t")
    assert corpus.n_docs == 9  # the blank line holds no document
    skips = []
    docs = list(read_documents(sources(corpus), None, False, skips))
    assert [(doc.label, doc.text, doc.n_replaced) for doc in docs] == [
        ("f.jsonl#0", "caf\u00e9 ok", 0), ("f.jsonl#5", "bom", 0), ("f.jsonl#6", "lone \ufffd surrogate", 1),
        ("f.jsonl#8", "x", 0)]
    assert [(s.reason, s.label) for s in skips] == [
        (INVALID_JSON, "f.jsonl#1"), (NOT_OBJECT, "f.jsonl#2"), (MISSING_KEY, "f.jsonl#3"),
        (NOT_STRING, "f.jsonl#4"), (BINARY, "f.jsonl#7")]


def test_jsonl_contradicts_multiple_docs_in_single_file(corpus, tmp_path):
    config = GeneratorConfig(metadata_files=["m"], vocab_file="v", text_field="text",
                             multiple_docs_in_single_file=True)
    with pytest.raises(ConfigError, match="--text_field and --multiple_docs_in_single_file contradict"):
        config.validate()
    with pytest.raises(ConfigError, match="--text_field must be a non-empty"):
        GeneratorConfig(metadata_files=["m"], vocab_file="v", text_field="").validate()


# ---------------------------------------------------------------------------- (d) errors before any work

@pytest.mark.parametrize("mode", ["one", "multi", "jsonl"])
def test_corrupt_gzip_fails_at_planning_with_one_line_naming_the_file(corpus, tmp_path, mode):
    good = write_compressed(tmp_path / "good.txt", b"Some text.\n", "gz")
    bad = tmp_path / "bad.txt.gz"
    bad.write_bytes(b"this is not gzip at all\n" * 10)
    metadata = write_metadata(tmp_path / "metadata.txt", tmp_path, [good, bad])
    options = {"one": {}, "multi": {"multiple_docs_in_single_file": True}, "jsonl": {"text_field": "text"}}[mode]
    config = GeneratorConfig(metadata_files=[str(metadata)], input_files_prefix=str(tmp_path),
                             vocab_file=str(corpus.vocab), output_dir=str(tmp_path / "out"), **options)
    with pytest.raises(InputError) as caught:
        make_plan(resolve(config))
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{metadata}:2: cannot read gzip file {bad}")
    # Through the command line: exit status 2, one line, and nothing written.
    from bert_data.cli.create_tfrecords import main

    argv = ["--metadata_files", str(metadata), "--input_files_prefix", str(tmp_path), "--vocab_file",
            str(corpus.vocab), "--output_dir", str(tmp_path / "out"), "--quiet"]
    argv += {"one": [], "multi": ["--multiple_docs_in_single_file"], "jsonl": ["--jsonl_text_key", "text"]}[mode]
    assert main(argv) == 2
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_truncated_compressed_multi_document_file_fails_at_planning(tmp_path):
    data = CODECS["xz"](b"one\n\ntwo\n" * 1000)
    path = tmp_path / "cut.txt.xz"
    path.write_bytes(data[: len(data) // 2])
    entries = read_metadata([str(write_metadata(tmp_path / "m.txt", tmp_path, [path]))], str(tmp_path))
    with pytest.raises(InputError, match=r"m.txt:1: cannot read xz file .*cut.txt.xz: "):
        plan(entries, multiple_docs_in_single_file=True)


def test_missing_zstandard_fails_at_planning_naming_the_file(tmp_path, monkeypatch):
    path = write_compressed(tmp_path / "a.txt", b"text\n", "zst")
    entries = read_metadata([str(write_metadata(tmp_path / "m.txt", tmp_path, [path]))], str(tmp_path))
    monkeypatch.setattr(input_files, "_zstandard", lambda: None)
    with pytest.raises(InputError, match=r"m.txt:1: .*a.txt.zst is zstd-compressed .*pip install zstandard$"):
        plan(entries)


# ---------------------------------------------------------------------------- (e) planning

def slice_contents(slices, multi=True):
    return [[(doc.label, doc.corpus_doc, doc.text) for doc in read_documents(s.sources, None, multi, [])]
            for s in slices]


@pytest.mark.parametrize("codec", ["gz", "bz2", "zst"])
def test_slices_across_compressed_multi_document_files(tmp_path, codec):
    sizes = [5, 7, 3, 1, 0]
    files, plain = [], []
    for number, size in enumerate(sizes):
        text = "\n\n".join(f"file {number} doc {i}\nsecond line" for i in range(size)) + "\n\n\n"
        files.append(write_compressed(tmp_path / codec / f"f{number}.txt", text.encode(), codec))
        plain.append(write_compressed(tmp_path / "plain" / f"f{number}.txt", text.encode(), ""))
    entries = read_metadata([str(write_metadata(tmp_path / "m.txt", tmp_path / codec, files))], str(tmp_path / codec))
    plain_entries = read_metadata([str(write_metadata(tmp_path / "p.txt", tmp_path / "plain", plain))],
                                    str(tmp_path / "plain"))
    for slice_docs in (64, 2, 1, 3):
        corpus = plan(entries, multiple_docs_in_single_file=True, slice_docs=slice_docs)
        reference = plan(plain_entries, multiple_docs_in_single_file=True, slice_docs=slice_docs)
        assert [s.n_docs for s in corpus.slices] == [s.n_docs for s in reference.slices]
        assert [s.first_doc for s in corpus.slices] == [s.first_doc for s in reference.slices]
        assert corpus.n_docs == 16 and all(s.n_docs <= slice_docs for s in corpus.slices)
        assert all(s.codec == codec for s in sources(corpus))
        # Only a file's last range reads on to the end of its stream.
        assert [s.end < 0 for s in sources(corpus)].count(True) == 4
        plain_labels = [[(label.replace(f".{codec}#", "#"), position, text) for label, position, text in contents]
                        for contents in slice_contents(corpus.slices)]
        assert plain_labels == slice_contents(reference.slices)
        assert slice_contents(corpus.slices)[-1][-1] == (f"f3.txt.{codec}#0", 15, "file 3 doc 0\nsecond line\n")
    found = [(label, position) for contents in slice_contents(corpus.slices) for label, position, _ in contents]
    assert found == list(zip([f"f{n}.txt.{codec}#{i}" for n, size in enumerate(sizes) for i in range(size)],
                             range(16)))


def test_stream_spans_equal_whole_buffer_spans_at_any_chunk_size():
    import io

    text = (b"a\n\n  \nb b\n[SEP]\nc\n \t\n\n" b"d [SEP] e\n  [SEP]  \n" + b"x" * 50 + b"\n\n\n" + b"long " * 40 + b"\n"
            b"  \n" b"last  ")
    for pattern in (separator_pattern(None), separator_pattern("[SEP]"), LINE_PATTERN):
        expected = list(document_spans(text, 0, len(text), pattern))
        for chunk in (1, 2, 3, 7, 16, 1000):
            assert list(stream_document_spans(io.BytesIO(text), pattern, chunk)) == expected, (pattern, chunk)
        assert list(stream_document_spans(io.BytesIO(b""), pattern, 4)) == []


def test_ranges_read_out_of_order_and_from_threads(tmp_path):
    """A reader's open stream is only a shortcut: any range, in any order, in any thread."""
    text = "".join(f"doc {i} " + "word " * (i % 7) + "\n\n" for i in range(300)).encode()
    path = write_compressed(tmp_path / "f.txt", text, "gz")
    entries = read_metadata([str(write_metadata(tmp_path / "m.txt", tmp_path, [path]))], str(tmp_path))
    units = plan(entries, multiple_docs_in_single_file=True, slice_docs=10).slices
    expected = slice_contents(units)
    assert slice_contents(units[::-1]) == expected[::-1]
    results = {}

    def read(index):
        results[index] = slice_contents([units[index]])[0]

    threads = [threading.Thread(target=read, args=(i,)) for i in range(len(units))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [results[i] for i in range(len(units))] == expected
    # A process forked while the parent holds a stream open must not share its file offset.
    assert slice_contents(units[:1]) == expected[:1] and input_files._open_streams.streams
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.map(slice_contents, [[unit] for unit in units[1:]]) == [[e] for e in expected[1:]]
    assert slice_contents(units[1:]) == expected[1:]


def test_compressed_one_document_files_are_cut_into_the_parts_of_a_plain_copy(tmp_path):
    text = ("word " * 30 + "\n") * 200  # 30 KB: cut into parts of about 4,000 bytes
    files = [write_compressed(tmp_path / "a.txt", text.encode(), "bz2"),
             write_compressed(tmp_path / "b.txt", text.encode(), "")]
    entries = read_metadata([str(write_metadata(tmp_path / "m.txt", tmp_path, files))], str(tmp_path))
    corpus = plan(entries, part_bytes=4000)
    found = sources(corpus)
    compressed = [s for s in found if s.codec == "bz2"]
    plain = [s for s in found if not s.codec]
    assert corpus.n_docs == 2 and len(compressed) == len(plain) > 3
    assert [(s.start, s.end) for s in compressed[:-1]] == [(s.start, s.end) for s in plain[:-1]]
    assert compressed[-1].end == -1 and all(s.in_parts for s in found)  # the last part closes the stream
    docs = list(read_documents(compressed, None, False, []))
    assert "".join(d.text for d in docs) == text and docs[0].label == "a.txt.bz2"
    assert [d.continues for d in docs] == [False] + [True] * (len(docs) - 1)


# ---------------------------------------------------------------------------- (f) bounded memory

def test_memory_stays_bounded_reading_a_large_compressed_jsonl_file(tmp_path):
    n_lines, size = 50_000, 0
    line_template = '{"id": %d, "text": "%s"}\n'
    body = " ".join(f"word{i % 97}" for i in range(160))  # about 1 KB a line, 50 MB in all
    path = tmp_path / "big.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as handle:
        for start in range(0, n_lines, 5000):
            chunk = "".join(line_template % (i, f"{i} {body}") for i in range(start, start + 5000)).encode()
            size += len(chunk)
            handle.write(chunk)
    assert size > 50_000_000
    metadata = write_metadata(tmp_path / "m.txt", tmp_path, [path])

    process = psutil.Process()
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            time.sleep(0.002)

    baseline = process.memory_info().rss
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        entries = read_metadata([str(metadata)], str(tmp_path))
        corpus = plan(entries, text_field="text")
        n_docs = n_chars = 0
        for slice_ in corpus.slices:
            for document in read_documents(slice_.sources, None, False, []):
                n_docs += 1
                n_chars += len(document.text)
    finally:
        done.set()
        sampler.join()
    assert n_docs == corpus.n_docs == n_lines and n_chars > 45_000_000
    # Slices of about 1 MB of text (their number grows with bytes, not documents).
    assert len(corpus.slices) == pytest.approx(sum(slice_.n_bytes for slice_ in corpus.slices) / (1 << 20), rel=0.1)
    growth = max(peak[0], process.memory_info().rss) - baseline
    print(f"RSS growth {growth / 1e6:.1f} MB")
    assert growth < 30_000_000, f"RSS grew by {growth / 1e6:.1f} MB reading 50 MB"


def test_the_plan_stats_each_local_document_once_and_records_what_it_found(tmp_path, monkeypatch):
    """Cost a document before any work: one os.stat each (the check that it is a readable regular
    file), whose size and time the plan's sizes and the run's input stamps (what a --resume
    compares) then use, instead of a stat each of their own; the stamps are the files' own."""
    import collections
    import os

    from bert_data.run.run_record import input_stamps

    corpus = make_corpus(tmp_path / "corpus", n_docs=12)
    documents = {str(corpus.root / line.strip()) for line in corpus.metadata.read_text().splitlines() if line.strip()}
    spec = resolve(GeneratorConfig(metadata_files=[str(corpus.metadata)], input_files_prefix=str(corpus.root),
                                   vocab_file=str(corpus.vocab), do_lower_case=True,
                                   output_dir=str(tmp_path / "out")))
    stats = collections.Counter()
    real_stat = os.stat

    def counting_stat(path, *args, **kwargs):
        if str(path) in documents:
            stats[str(path)] += 1
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", counting_stat)
    planned = make_plan(spec)
    monkeypatch.setattr(os, "stat", real_stat)
    # (and the first document once more: the check that a metadata file names any existing file)
    assert len(documents) == 12 and set(stats) == documents and sum(stats.values()) == 12 + 1, stats
    expected = {str(corpus.root / label): [label, real_stat(corpus.root / label).st_size,
                                           real_stat(corpus.root / label).st_mtime_ns]
                for label, *_ in planned.input_stamps}
    assert sorted(planned.input_stamps) == sorted(expected.values())
    assert sum(slice_.n_bytes for slice_ in planned.slices) == sum(stamp[1] for stamp in planned.input_stamps)
    assert input_stamps([]) == []
