"""Faults of the input (issue 18): compressed input read in bounded memory, and every codec's
truncated or corrupted file stopping the run with one line naming it.
"""

from __future__ import annotations

import bz2
import functools
import gzip
import io
import os
import lzma
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
import zstandard

from bert_data.cli.create_tfrecords import main
from bert_data.pipeline.documents import files
from bert_data.pipeline.documents.listing import read_metadata
from bert_data.pipeline.documents.planner import plan_corpus
from bert_data.pipeline.documents.reading import read_documents
from bert_data.pipeline.documents.text_files import _cut_parts, stream_parts
from bert_data.format.dataset_layout import TRAIN_CODE

from tests.helpers.corpus import make_corpus

# ---------------------------------------------------------------------------- bounded memory

PARAGRAPH = ("Some words make a sentence here. " * 30 + "\n") * 5 + "\n"


def test_a_large_one_document_gz_is_read_in_parts_in_bounded_memory(tmp_path, monkeypatch):
    """A 64 MB document in a .gz: the planner and the reader each hold about one part of it
    (1 MB here) and a decompression chunk, never the whole text.  Python's own allocations
    are counted (tracemalloc), so the bound does not depend on what else the process does."""
    monkeypatch.setattr(files, "READ_CHUNK", 1 << 20)
    path, size = tmp_path / "book.txt.gz", 0
    block = (PARAGRAPH * 1000).encode()
    with gzip.open(path, "wb", compresslevel=1) as handle:
        while size < 64 << 20:
            handle.write(block)
            size += len(block)
    (tmp_path / "m.txt").write_text("book.txt.gz\n")
    read_sizes = []
    real_read_range = files.read_range
    monkeypatch.setattr("bert_data.pipeline.documents.text_files.read_range",
                        lambda source: read_sizes.append(len(data := real_read_range(source))) or data)
    tracemalloc.start()
    try:
        entries = read_metadata([str(tmp_path / "m.txt")], str(tmp_path))
        corpus = plan_corpus(entries, lambda label, position: TRAIN_CODE, part_bytes=1 << 20)
        total = longest = 0
        for piece in corpus.slices:
            for document in read_documents(piece.sources, None, False, []):
                total += len(document.text)
                longest = max(longest, len(document.text))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    n_parts = sum(len(piece.sources) for piece in corpus.slices)
    assert corpus.n_docs == 1 and total == size and len(read_sizes) == n_parts > 60
    assert max(read_sizes) <= (1 << 20) + 4096 and longest <= (1 << 20) + 4096
    assert peak < 12 << 20, f"{peak / 1e6:.1f} MB held reading a {size / 1e6:.0f} MB document"


def test_a_compressed_document_in_parts_gives_the_bytes_of_its_plain_copy(tmp_path, monkeypatch):
    corpus = make_corpus(tmp_path / "corpus", n_docs=2, min_sentences=40, max_sentences=50)
    label = next(iter(corpus.documents))
    text = (corpus.root / label).read_bytes()
    (corpus.root / "big.txt.xz").write_bytes(lzma.compress(text))
    (corpus.root / "plain.txt").write_text(label + "\n")
    (corpus.root / "xz.txt").write_text("big.txt.xz\n")
    import bert_data.pipeline.documents.planner as planner

    original = planner.plan_corpus
    monkeypatch.setattr(planner, "plan_corpus", lambda *a, **k: original(*a, **dict(k, part_bytes=300)))
    outputs = []
    for metadata in ("plain.txt", "xz.txt"):
        out = tmp_path / metadata
        assert main(["--metadata_files", str(corpus.root / metadata), "--input_files_prefix", str(corpus.root),
                     "--vocab_file", str(corpus.vocab), "--do_lower_case", "--max_seq_length", "32",
                     "--dupe_factor", "2", "--num_output_files", "1", "--output_dir", str(out), "--quiet",
                     "--num_workers", "1"]) == 0
        outputs.append((out / "examples-1.tfrecords").read_bytes())
    assert len(text) > 4 * 300 and outputs[0] == outputs[1]


def test_stream_cuts_are_the_cuts_of_a_memory_map():
    """The cutter over a stream finds the parts the one over a whole buffer finds, at any chunk
    size, with runs of megabytes without white space (read again from the part's target) and
    multi-byte characters at the cuts."""
    import random

    rng = random.Random(5)
    pieces = [b"\n\n", b"\n", b" ", "\u00e9\u20ac\U0001F600".encode(), b"x" * 2500, b"abc", b"defgh"]
    for trial in range(300):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 3000)))
        if trial % 10 == 0:
            data = b"y" * rng.randint(0, 8000) + data[:50]
        part_bytes, chunk = rng.randint(1, 3000), rng.randint(1, 5000)
        expected = _cut_parts(data, len(data), part_bytes) if len(data) > part_bytes else [(0, len(data))]
        assert stream_parts(lambda: io.BytesIO(data), part_bytes, chunk) == expected, (trial, part_bytes, chunk)


# ---------------------------------------------------------------------------- truncated and corrupted

TEXT = b"".join(b"Line %d of a document that is long enough to be compressed in several blocks.\n" % i
                for i in range(12_000))


def zstd_with_checksum(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(write_checksum=True).compress(data)


COMPRESSORS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress, "zst": zstd_with_checksum}
CODEC_NAMES = {"gz": "gzip", "bz2": "bzip2", "xz": "xz", "zst": "zstd"}


@functools.lru_cache(maxsize=None)
def packed_text(codec: str) -> bytes:
    return COMPRESSORS[codec](TEXT)


def truncated(data: bytes, fraction: float) -> bytes:
    return data[: int(len(data) * fraction)]


def corrupted(data: bytes, at: float = 0.5) -> bytes:
    damaged = bytearray(data)
    middle = int(len(damaged) * at)
    for index in range(middle, middle + 16):
        damaged[index] ^= 0x5A
    return bytes(damaged)


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("vocab"), n_docs=2).vocab


def run_fails(tmp_path: Path, vocab, name: str, data: bytes, capsys, *options: str) -> str:
    """Run on one good file and ``name`` holding ``data``: the run must stop with exit status 2
    and one line, before writing any shard; returns the line."""
    (tmp_path / "good.txt").write_text("A good document.\n")
    (tmp_path / name).write_bytes(data)
    (tmp_path / "m.txt").write_text(f"good.txt\n{name}\n")
    out = tmp_path / "out"
    code = main(["--metadata_files", str(tmp_path / "m.txt"), "--input_files_prefix", str(tmp_path),
                 "--vocab_file", str(vocab), "--output_dir", str(out), "--quiet", "--num_workers", "1", *options])
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert not out.exists() or not list(out.glob("*.tfrecords"))
    return lines[0]


@pytest.mark.parametrize("codec", sorted(COMPRESSORS))
@pytest.mark.parametrize("damage", ["truncated at 43%", "truncated by one byte", "corrupted"])
@pytest.mark.parametrize("mode", ["one document a file", "many documents a file"])
def test_every_codec_truncated_or_corrupted_stops_the_run_naming_the_file(tmp_path, vocab, capsys, codec, damage,
                                                                          mode):
    packed = packed_text(codec)
    data = {"truncated at 43%": truncated(packed, 0.43), "truncated by one byte": packed[:-1],
            "corrupted": corrupted(packed)}[damage]
    options = ["--multiple_docs_in_single_file"] if mode == "many documents a file" else []
    line = run_fails(tmp_path, vocab, f"doc.txt.{codec}", data, capsys, *options)
    assert f"m.txt:2: cannot read {CODEC_NAMES[codec]} file {tmp_path / f'doc.txt.{codec}'}: " in line


def test_a_zstd_file_without_checksum_is_still_checked_for_truncation(tmp_path, vocab, capsys):
    packed = zstandard.ZstdCompressor().compress(TEXT)  # zstandard's default: no checksum
    for cut in (0.43, 0.999):
        line = run_fails(tmp_path, vocab, "doc.jsonl.zst", truncated(packed, cut), capsys)
        assert "cannot read zstd file" in line and "truncated" in line


def table_bytes(kind: str) -> bytes:
    table = pa.table({"text": [f"Document {i} has some text." for i in range(1200)]})
    sink = io.BytesIO()
    if kind == "parquet":
        pq.write_table(table, sink, row_group_size=200)
    else:
        with (ipc.new_file if kind == "arrow file" else ipc.new_stream)(sink, table.schema) as writer:
            for batch in table.to_batches(max_chunksize=200):
                writer.write_batch(batch)
    return sink.getvalue()


@pytest.mark.parametrize("kind", ["parquet", "arrow file", "arrow stream"])
def test_a_truncated_table_stops_the_run_naming_the_file(tmp_path, vocab, capsys, kind):
    data = table_bytes(kind)
    name = "t.parquet" if kind == "parquet" else "t.arrow"
    for cut in (truncated(data, 0.6), data[:-8]):  # an Arrow stream without its end marker reads silently
        line = run_fails(tmp_path, vocab, name, cut, capsys)
        assert f"m.txt:2: {tmp_path / name}: " in line and ("truncated" in line or "cannot read" in line)


def test_a_corrupted_parquet_file_stops_the_run_naming_the_file(tmp_path, vocab, capsys):
    """Parquet's pages are compressed: altered bytes inside one fail to decompress.  (Arrow IPC
    files carry no checksum: altered text inside them cannot be told from text; see docs/faults.md.)"""
    line = run_fails(tmp_path, vocab, "t.parquet", corrupted(table_bytes("parquet"), 0.5), capsys)
    assert str(tmp_path / "t.parquet") in line and "cannot read" in line
    line = run_fails(tmp_path, vocab, "t.arrow", corrupted(table_bytes("arrow file"), 0.999), capsys)
    assert str(tmp_path / "t.arrow") in line


# ---------------------------------------------------------------------------- resources

def test_more_workers_than_cores_are_capped_with_one_warning(tmp_path, capsys, monkeypatch):
    """--num_workers 1000 on a machine (here: a process allowed) one core starts one worker,
    through the command line and through the library alike."""
    from bert_data.config import GeneratorConfig, available_cores
    from bert_data.run import executors, runner
    from bert_data.run.resolve import generate

    assert 1 <= available_cores() <= (os.cpu_count() or 1)
    monkeypatch.setattr(executors, "available_cores", lambda: 1)
    started = []
    real_executor = runner.default_executor
    monkeypatch.setattr(runner, "default_executor", lambda workers: started.append(workers) or real_executor(workers))
    corpus = make_corpus(tmp_path / "corpus", n_docs=3, min_sentences=4, max_sentences=6)
    common = ["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root), "--vocab_file",
              str(corpus.vocab), "--do_lower_case", "--max_seq_length", "32", "--dupe_factor", "1", "--quiet",
              "--num_output_files", "2"]  # (10 shards of 9 records would be warned about too)
    assert main(common + ["--output_dir", str(tmp_path / "cli"), "--num_workers", "1000"]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == ["create_tfrecords: warning: --num_workers 1,000 is more than the cores this process may "
                        "use (1): starting 1 worker processes"]
    generate(GeneratorConfig(metadata_files=[str(corpus.metadata)], input_files_prefix=str(corpus.root),
                             vocab_file=str(corpus.vocab), do_lower_case=True, max_seq_length=32,
                             dupe_factor=1, output_dir=str(tmp_path / "library"), num_workers=64),
             progress=False)
    assert "--num_workers 64 is more than the cores this process may use (1)" in capsys.readouterr().err
    assert started == [1, 1]
