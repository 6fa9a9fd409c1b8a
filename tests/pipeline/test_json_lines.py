"""JSON Lines read by orjson (a block of lines at once, or a line at a time) give exactly the
documents and skips of the json module's readers: the scanner over a range decoded at once, and
the reference, a line at a time (``document_spans`` + ``_json_document``)."""

from __future__ import annotations

import random

import pytest

from bert_data.pipeline.documents import text_files
from bert_data.pipeline.documents.types import Source
from tests.pipeline.test_input_kinds import HOSTILE_LINES

pytest.importorskip("orjson")

# Lines as bytes, some not UTF-8, some that orjson and json might read differently.
HOSTILE_BYTES = [line.encode("utf-8") for line in HOSTILE_LINES] + [
    b'{"text": "bad \xff byte"}', b'{"text": "raw surrogate \xed\xa0\x80"}', b'{"text": "overlong \xc0\xaf"}',
    b'\xef\xbb\xbf{"text": "bom bytes"}', b'{"text": "x"}\x00', b'{"text": "raw \x00 nul"}', b'{"text": "tab\tinside"}',
    b'{"text": "crlf"}\r', b"\r", b" \r", b'{"text": "x", "n": ' + b"7" * 5000 + b"}",
    b'{"text": "x", "n": -' + b"7" * 400 + b"}", b'{"text": "x", "n": 1e999}', b'{"text": "x", "n": 1e-999}',
    b'{"text": "x", "n": -0.0e+0}', b'{"text": "x", "n": 01}', b'{"text": "x", "n": Infinity}',
    b'{"text": "deep", "n": ' + b"[" * 250 + b"]" * 250 + b"}",
    b'{"text": "deeper", "n": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    b'{"text": "many", "n": [' + b"[], " * 300 + b"[]]}",
    b'{"text": "lone \\udbff\\u0041"}', b'{"text": "pair \\uD83D\\uDE00 upper"}', b'{"te\\u0000xt": "key nul"}',
    b'{"text": "\\u00a0\\u3000"}', b'{"text": "\xc2\xa0\xe3\x80\x80"}', b'{"text": "\\u0000"}', b'{"text": ""}',
    b'{"text": "a",}', b'{"text": "a" "b"}', b'{"text": "x"} \t', b'\t{"text": "x"}', b'{"text" : "spaced" }',
    b'{"text": "x", "text": "dup \xff"}', b'{"text": "\xe2\x80\xa8"}', b'{"text": [1]}', b'{"text": true}',
    b"null", b"{", b"}", b"{}{}", b'{"a": "}\n"}',
]
CLEAN = [b'{"text": "Sentence %d here.\\nAnd another, caf\\u00e9 \xe4\xb8\xad."}' % i for i in range(20)]


def _read(path, size, monkeypatch, reader: str):
    """Documents and skips of a source over the whole file, read by ``reader``: each document
    with the skips recorded by the time it is read."""
    with monkeypatch.context() as patch:
        if reader == "orjson by line":
            patch.setattr(text_files, "_json_block", lambda *args: None)
        if reader in ("scanner", "reference"):
            patch.setattr(text_files, "_fast_loads", None)
        if reader == "reference":
            patch.setattr(text_files, "_utf8_lines", lambda data: None)
        source = Source(str(path), "lines.jsonl", 0, size, first_doc=7, text_field="text", corpus_doc=100)
        skips = []
        # (with the skips recorded when each document comes: a tokenizer reading as it goes
        # records its own skips between them)
        documents = [(d.label, d.text, d.n_replaced, d.bad_line, d.corpus_doc, d.in_parts, d.continues, len(skips))
                     for d in text_files.text_documents(source, None, skips)]
        return documents, [(s.reason, s.label, s.corpus_doc, s.in_parts) for s in skips]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("utf8", [True, False])
@pytest.mark.parametrize("hostile_share", [0.001, 0.3])
def test_orjson_reads_json_lines_as_the_json_module_does(tmp_path, monkeypatch, seed, utf8, hostile_share):
    """Blocks of clean lines with hostile ones among them (a block holding one is read a line at
    a time): the same documents (labels, text, replacements, positions) and the same skips, in
    the same order, as every other reader, whether the range is valid UTF-8 or not."""
    rng = random.Random(seed)
    hostile = [line for line in HOSTILE_BYTES if utf8 == _is_utf8(line)] if utf8 else HOSTILE_BYTES
    lines = [rng.choice(CLEAN) for _ in range(text_files._BLOCK_LINES + rng.randrange(3))]  # a clean block or two
    lines += [rng.choice(hostile) if rng.random() < hostile_share else rng.choice(CLEAN) for _ in range(3000)]
    if not utf8:
        lines[rng.randrange(text_files._BLOCK_LINES + 2, len(lines))] = b'{"text": "bad \xff byte"}'
    lines += hostile
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"\n" if seed % 2 else b""))
    size = path.stat().st_size

    blocks = []  # what each block read at once gave (None: read a line at a time)
    block = text_files._json_block
    monkeypatch.setattr(text_files, "_json_block", lambda *args: blocks.append(block(*args)) or blocks[-1])
    fast = _read(path, size, monkeypatch, "orjson")
    monkeypatch.setattr(text_files, "_json_block", block)
    assert any(found is None for found in blocks) and any(found is not None for found in blocks)
    assert len(fast[0]) > 1000 and fast[1]
    for reader in ("orjson by line", "scanner", "reference"):
        assert _read(path, size, monkeypatch, reader) == fast, reader


def _is_utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


@pytest.mark.parametrize("line", HOSTILE_BYTES)
def test_each_hostile_line_alone_and_in_a_block_of_clean_ones(tmp_path, monkeypatch, line):
    """Each hostile line, between clean lines (a block read at once if the line is of the common
    shape, else a line at a time): as the reference reads it."""
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"\n".join(CLEAN[:5] + [line] + CLEAN[5:10]) + b"\n")
    size = path.stat().st_size
    assert _read(path, size, monkeypatch, "orjson") == _read(path, size, monkeypatch, "reference")
    assert _read(path, size, monkeypatch, "orjson by line") == _read(path, size, monkeypatch, "reference")


def test_a_block_of_the_common_shape_is_read_at_once_and_refuses_what_it_cannot_vouch_for():
    """``_json_block`` reads a block whose every line is an object with a text of its own; any
    other line (blank, not an object, no text, not a string, NUL, a lone surrogate, deep
    nesting) and the block is left to the line-by-line reader."""
    block = text_files._json_block(CLEAN[:3], "text")
    assert len(block) == 3 and block[0] == "Sentence 0 here.\nAnd another, caf\u00e9 \u4e2d."
    assert text_files._json_block([b""] + CLEAN[:3] + [b"", b""], "text") == block  # empty lines: no document
    assert text_files._json_block([b"", b""], "text") is None
    for line in (b"  ", b"\r", b"[1]", b'{"other": "x"}', b'{"text": 3}', b'{"text": "a\\u0000"}', b'{"text": " \\n"}',
                 b'{"text": "\\ud800"}', b'{"text": "x", "n": ' + b"[" * 300 + b"]" * 300 + b"}", b'{"text": NaN}'):
        assert text_files._json_block(CLEAN[:3] + [line], "text") is None, line
    # Long lines of many brackets, none past the bound alone though all of them are: read at once;
    # one past it (not deep: brackets are counted, not nesting), left to the reference.
    wide = b'{"text": "wide", "n": [' + b"[], " * 150 + b"[]]}"
    assert len(text_files._json_block([wide, wide], "text")) == 2
    wider = b'{"text": "wider", "n": [' + b"[], " * 250 + b"[]]}"
    assert text_files._json_block([wide, wider], "text") is None
