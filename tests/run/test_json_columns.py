"""JSON Lines read as columns (``DocumentColumns``: a block of lines' texts, no ``Document`` a
line) and tokenized a slice at once (``DocumentTokenizer.tokenize_read``) give exactly what the
reference gives: each line read and parsed by ``json`` alone (``_json_document``), each document
split and tokenized as it is read (``DocumentTokenizer.tokenize``).  The whole task,
``tasks.tokenize_slice``, runs both ways on generated hostile JSON Lines, plain and compressed,
and the slices' files (tokens, sentence lengths, document table) and summaries (skips in order,
characters read, bytes replaced) must be equal."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import numpy as np
import pytest

from bert_data.format.dataset_layout import TRAIN_CODE
from bert_data.pipeline.documents import planner, text_files
from bert_data.pipeline.documents.listing import list_documents
from bert_data.pipeline.documents.types import Document, DocumentColumns, ReadingSpec
from bert_data.pipeline.sentences import LineSentenceSplitter, SentenceSpec
from bert_data.pipeline.tokens import DocumentTokenizer
from bert_data.run import tasks
from bert_data.run.run_files import slice_paths
from bert_data.run.scratch import load_array, load_json
from bert_data.run.specs import TokenizeSpec
from bert_data.tokenizers import WORDPIECE, TokenizerSource
from tests.helpers.hostile_text import ACCENTED, CJK, WORDS, hostile_texts

pytest.importorskip("orjson")
zstandard = pytest.importorskip("zstandard")

VOCAB = Path(__file__).resolve().parents[2] / "vocab" / "vocab.txt"

# Lines no writer of the common shape gives: each read by the reference, which says why it is
# skipped, or keeps it.
ODD_LINES = [
    b"", b"   ", b"\t\r", b"\r", b'{"text": ""}', b'{"text": "   \\n\\t "}', b'{"other": "no text key"}',
    b'{"text": 3}', b'{"text": null}', b'{"text": ["a", "b"]}', b'{"text": {"nested": "object"}}', b"[1, 2]",
    b'"just a string"', b"not json", b'{"text": "unterminated}', b'{"text": "a",}', b'{"text": "crlf line"}\r',
    b'\xef\xbb\xbf{"text": "after a byte-order mark"}', b'{"text": "lone \\ud800 surrogate"}',
    b'{"text": "lone low \\udc00"}', b'{"text": "pair \\ud83d\\ude00 kept"}', b'{"text": "raw \xed\xa0\x80 surrogate"}',
    b'{"text": "bad \xff byte\\nsecond line"}', b'{"text": "nul \\u0000 inside"}', b'{"text": "raw \x00 nul"}',
    b'{"text": "\\u0001\\n\\u0007"}', b'{"text": "-\\n\\u200b"}', b'{"text": "\\u00e9\\u4e2d \\u0085 next\\u2028line"}',
    b'{"text": "a\\r\\nb\\rc\\u000bd\\u000ce\\u001cf"}', b'{"te\\u0078t": "escaped key"}',
    b'{"text": "first", "text": "duplicate key wins"}', b'{"meta": {"k": [1, {"z": null}]}, "text": "nested before"}',
    b'{"text": "deep", "n": ' + b"[" * 300 + b"]" * 300 + b"}", b'{"text": "x", "n": NaN}',
    b'{"text": "long ' + b"word " * 30_000 + b'"}', b' {"text": "space before"}', b'{"text": "after"}  ',
    b'{"text": "a"}{"text": "b"}',
]


def _common_line(rng: random.Random, text: str) -> bytes:
    """A line as writers write them: ``json.dumps`` with or without escapes, a key or two more."""
    record = {"text": text}
    if rng.random() < 0.2:
        record = {"id": rng.randrange(10**6), "text": text, "meta": {"lang": "en", "tags": [1, 2]}}
    return json.dumps(record, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")


def _text(rng: random.Random) -> str:
    """A document of the common shape: sentences of words, accents, CJK, on lines."""
    words = WORDS + ACCENTED + CJK
    return "\n".join(" ".join(rng.choice(words) for _ in range(rng.randrange(1, 12)))
                     for _ in range(rng.randrange(1, 5)))


def _lines(seed: int, n: int, odd_share: float):
    """Lines of the common shape; past the first 1,024 (a clean block), an odd line
    or a hostile text (control characters, NUL, lone surrogates...) at ``odd_share``."""
    rng = random.Random(seed)
    hostile = iter(hostile_texts(n, seed, huge=False))
    lines = []
    for index in range(n):
        if index < 1024 or rng.random() >= odd_share:
            lines.append(_common_line(rng, _text(rng)))
        elif rng.random() < 0.5:
            lines.append(_common_line(rng, "\n".join(next(hostile).split(" "))))
        else:
            lines.append(rng.choice(ODD_LINES))
    return lines + ODD_LINES


def _corpus(root: Path, seed: int, odd_share: float):
    """Three JSON Lines files (plain, gzip, zstd) listed in a metadata file."""
    root.mkdir()
    names = []
    for number, suffix in enumerate(("", ".gz", ".zst")):
        lines = _lines(seed * 10 + number, 2000, odd_share)
        data = b"\n".join(lines) + (b"\n" if number != 1 else b"")
        if number == 2:
            data = b"\xef\xbb\xbf" + data  # a byte-order mark on the file's first line
        name = f"part{number}.jsonl{suffix}"
        packed = {"": lambda b: b, ".gz": gzip.compress, ".zst": zstandard.ZstdCompressor().compress}[suffix](data)
        (root / name).write_bytes(packed)
        names.append(name)
    metadata = root / "metadata.txt"
    metadata.write_text("\n".join(names) + "\n")
    return metadata


class _SplitterWithoutBatches:
    """The line splitter without ``split_batch``: ``tokenize_slice`` then tokenizes each document
    as it is read (the reference path)."""

    def __init__(self):
        self._splitter = LineSentenceSplitter()

    def split(self, texts):
        return self._splitter.split(texts)


def _tokenize_slices(metadata: Path, work: Path, reference: bool, monkeypatch):
    entries, _ = list_documents([str(metadata)], [], str(metadata.parent), False, False, False)
    plan = planner.plan_corpus(entries, lambda label, position: TRAIN_CODE, text_field="text",
                               slice_bytes=300_000, slice_docs=2000)
    spec = TokenizeSpec(TokenizerSource(WORDPIECE, str(VOCAB), None, True), SentenceSpec(True, None),
                        ReadingSpec(False, None, "text", "utf-8"))
    work.mkdir()
    columns = []  # the blocks read as columns
    reader = text_files.text_documents

    def spied(*args, **kwargs):
        for item in reader(*args, **kwargs):
            if type(item) is DocumentColumns:
                columns.append(len(item))
            yield item

    with monkeypatch.context() as patch:
        patch.setattr(text_files, "text_documents", spied)
        patch.setattr("bert_data.pipeline.documents.reading.text_documents", spied)
        if reference:
            patch.setattr(text_files, "_fast_loads", None)  # each line parsed by json
            patch.setattr(text_files, "_utf8_lines", lambda data: None)  # ... a line at a time (_json_document)
            patch.setattr(tasks, "worker_splitter", lambda spec: _SplitterWithoutBatches())
        summaries = [tasks.tokenize_slice(slice_, spec, str(work)) for slice_ in plan.slices]
    results = []
    for summary in summaries:
        paths = slice_paths(str(work), summary.index)
        saved = load_json(paths["summary"])
        results.append(({kind: np.array(load_array(paths[kind])) for kind in ("tokens", "sentences", "docs")}, saved))
    return results, columns, len(plan.slices)


@pytest.mark.parametrize("seed,odd_share,block_lines", [(0, 0.002, 1024), (1, 0.05, 16), (2, 0.4, 1024),
                                                        (3, 0.03, 8)])
def test_json_lines_as_columns_tokenize_as_the_reference_does(tmp_path, monkeypatch, seed, odd_share, block_lines):
    """Small blocks: many hold a single odd line, which alone must send its block to the
    line-by-line reader."""
    monkeypatch.setattr(text_files, "_BLOCK_LINES", block_lines)
    metadata = _corpus(tmp_path / "corpus", seed, odd_share)
    fast, columns, n_slices = _tokenize_slices(metadata, tmp_path / "fast", False, monkeypatch)
    reference, reference_columns, _ = _tokenize_slices(metadata, tmp_path / "reference", True, monkeypatch)
    assert n_slices > 3 and sum(columns) > 2000 and not reference_columns  # both paths taken
    skipped = set()
    for (ours, our_summary), (theirs, their_summary) in zip(fast, reference):
        for kind in ours:
            assert ours[kind].dtype == theirs[kind].dtype, kind
            np.testing.assert_array_equal(ours[kind], theirs[kind], err_msg=kind)
        assert our_summary == their_summary
        skipped.update(skip[0] for skip in our_summary["skips"])
    # The hostile lines were met: every reason a JSON line is skipped, and documents left with
    # no sentence (only characters the tokenizer drops).
    assert {"invalid JSON line", "missing text key", "text value is not a string", "empty or white-space only",
            "no sentence with any token", "JSON line is not an object"} <= skipped, skipped
    assert sum(summary["undecoded"]["n_docs"] for _, summary in fast) > 0


def test_blocks_and_documents_together_tokenize_as_documents_one_by_one():
    """``tokenize_read`` of ``DocumentColumns`` and ``Document``s mixed (a block read at once,
    then lines read one by one) gives what ``tokenize`` gives the same documents one by one,
    naming the last read the same way."""
    from tests.pipeline.test_document_tokens import WordTokenizer

    blocks = [DocumentColumns(["a bb\nccc", "-\n", "d"], "f.jsonl", 4, 10),
              DocumentColumns(["e f g", "\n\n", "hh"], "f.jsonl", 8, 14)]

    def lone():  # (``tokenize`` takes a document's text: one each)
        return Document("f.jsonl#7", "x\ny zz", 2, 1, corpus_doc=13)

    items = [blocks[0], lone(), blocks[1]]
    documents = blocks[0].documents() + [lone()] + blocks[1].documents()
    results = []
    for method, given in (("tokenize", documents), ("tokenize_read", items)):
        stage = DocumentTokenizer(LineSentenceSplitter(), WordTokenizer(), np.dtype(np.uint16))
        results.append((getattr(stage, method)(iter(given), []), stage.last_read))
    (theirs, their_last), (ours, our_last) = results
    for name in ("tokens", "sentence_lengths", "table"):
        np.testing.assert_array_equal(getattr(ours, name), getattr(theirs, name), err_msg=name)
    assert ours.skips == theirs.skips and [skip.label for skip in ours.skips] == ["f.jsonl#9"]
    assert (ours.n_chars, our_last.label, our_last.corpus_doc) == (theirs.n_chars, "f.jsonl#10", 16)
