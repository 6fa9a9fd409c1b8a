"""Text files as documents: one document a file (a large one cut into *parts* at paragraph or
line breaks, for bounded memory), many documents a file between separator lines, or JSON Lines
(one document a line, its text at a key).  The planner asks ``document_parts`` where to cut a
large file; a worker reads each source's bytes (``files.read_range``) and turns them into
documents here.
"""

from __future__ import annotations

import json
import mmap
import os
import re
from dataclasses import dataclass
from itertools import compress, filterfalse, repeat
from operator import contains, itemgetter, methodcaller
from typing import BinaryIO, Callable, Iterator, List, Optional, Tuple, Union

from ... import storage
from .files import (HEAD_BYTES, READ_CHUNK, RangeBuffer, compression_of, open_decompressed, read_range, skip_bytes,
                    sniffed_compression)
from .spans import LINE_PATTERN, document_spans
from .types import (BINARY, COMPRESSED_UNNAMED, EMPTY, INVALID_JSON, MISSING_KEY, NOT_OBJECT, NOT_STRING, UTF8, Document,
                    DocumentColumns, Skip, Source, decode_text)

# A file named so (before any compression suffix: data.jsonl.gz) is JSON Lines.
JSON_LINES_SUFFIXES = (".jsonl", ".json", ".ndjson")


def is_json_lines_name(path: str) -> bool:
    """The file's name says JSON Lines (``a.jsonl``, ``a.json.zst``, ...)."""
    if compression_of(path):
        path = os.path.splitext(path)[0]
    return os.path.splitext(path)[1].lower() in JSON_LINES_SUFFIXES


# ---------------------------------------------------------------------------- a large document in parts


def document_parts(path: str, size: int, part_bytes: int) -> List[Tuple[int, int]]:
    """Byte ranges of about ``part_bytes`` covering a one-document file, cut after a blank line
    (a paragraph break: a sentence boundary in every mode) where the last quarter of a part
    has one, else after a line break, else after a space, so that a part cut changes sentences
    as little as the splitter's own long-text pieces do.  Cuts fall on ASCII bytes, so never
    inside a UTF-8 character."""
    if size <= part_bytes:
        return [(0, size)]
    if storage.is_url(path):  # ranges read as needed: what the cuts look at, not the whole file
        with RangeBuffer(path, size) as buf:
            return _cut_parts(buf, size, part_bytes)
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        return _cut_parts(buf, size, part_bytes)


def _cut_parts(buf, size: int, part_bytes: int) -> List[Tuple[int, int]]:
    """``document_parts`` over a memory map or a ``RangeBuffer``."""
    parts = []
    start = 0
    while size - start > part_bytes:
        target = start + part_bytes
        window = max(start + 1, target - part_bytes // 4)
        cut = -1
        for separator in (b"\n\n", b"\n", b" ", b"\t"):
            found = buf.rfind(separator, window, target)
            if found >= 0:
                cut = found + len(separator)
                break
        if cut < 0:  # no white space near: the first after the target, else a character boundary
            if isinstance(buf, RangeBuffer):
                cut = buf.white_space_end(target)
            else:
                match = re.compile(rb"[ \t\n]").search(buf, target)
                cut = match.end() if match else target
            while cut < size and buf[cut] & 0xC0 == 0x80:
                cut += 1
        if cut >= size:
            break
        parts.append((start, cut))
        start = cut
    parts.append((start, size))
    return parts


def compressed_document_parts(path: str, codec: str, part_bytes: int) -> List[Tuple[int, int]]:
    """``document_parts`` of a compressed one-document file: offsets in its decompressed stream,
    found by decompressing it once, a chunk at a time (at most about ``part_bytes`` and a chunk
    held), with the cuts a plain copy of the file gets."""
    return stream_parts(lambda: open_decompressed(path, codec), part_bytes)


_CUT_SEPARATORS = (b"\n\n", b"\n", b" ", b"\t")
_WHITE_SPACE = re.compile(rb"[ \t\n]")


class _StreamWindow:
    """The bytes of a stream from ``base`` on, read as needed; what lies before ``base`` is gone."""

    def __init__(self, open_stream: Callable[[], BinaryIO], chunk_size: int):
        self.open_stream, self.chunk_size = open_stream, chunk_size
        self.stream = open_stream()
        self.buffer, self.base, self.at_end = bytearray(), 0, False

    @property
    def end(self) -> int:
        """The stream offset just after the bytes read so far."""
        return self.base + len(self.buffer)

    def fill(self, upto: int) -> None:
        """Read until the window reaches ``upto`` or the stream ends."""
        while not self.at_end and self.end < upto:
            chunk = self.stream.read(self.chunk_size)
            if chunk:
                self.buffer += chunk
            else:
                self.at_end = True

    def drop_before(self, offset: int) -> None:
        if offset > self.base:
            del self.buffer[: offset - self.base]
            self.base = offset

    def restart_at(self, offset: int) -> None:
        """Open the stream again and go on from ``offset`` (bytes dropped are needed again)."""
        self.stream.close()
        self.stream = self.open_stream()
        skip_bytes(self.stream, offset)
        self.buffer, self.base, self.at_end = bytearray(), offset, False

    def close(self) -> None:
        self.stream.close()


def stream_parts(open_stream: Callable[[], BinaryIO], part_bytes: int,
                 chunk_size: int = READ_CHUNK) -> List[Tuple[int, int]]:
    """``_cut_parts`` over a stream: the same cuts, holding only the bytes from the current
    part's start on.  When a part has no white space near its end, the cut is after the first
    white space past it, searched without holding what is passed; if there is none to the end of
    the stream, it is opened again to go on from the part's target (rare: a run of megabytes
    without a space or a line break)."""
    parts: List[Tuple[int, int]] = []
    window = _StreamWindow(open_stream, chunk_size)
    try:
        start = 0
        while True:
            window.fill(start + part_bytes + 1)
            if window.at_end and window.end - start <= part_bytes:
                parts.append((start, window.end))
                return parts
            cut = _cut_in_window(window, start, part_bytes)
            window.fill(cut + 1)
            if window.at_end and cut >= window.end:
                parts.append((start, window.end))
                return parts
            parts.append((start, cut))
            start = cut
            window.drop_before(start)
    finally:
        window.close()


def _cut_in_window(window: _StreamWindow, start: int, part_bytes: int) -> int:
    """Where the part from ``start`` ends, as ``_cut_parts`` cuts it."""
    target = start + part_bytes
    near = max(start + 1, target - part_bytes // 4)
    base = window.base
    for separator in _CUT_SEPARATORS:
        found = window.buffer.rfind(separator, near - base, target - base)
        if found >= 0:
            return base + found + len(separator)
    match = _WHITE_SPACE.search(window.buffer, target - base)  # none near: the first after the target
    while match is None and not window.at_end:
        window.drop_before(window.end)  # searched: not needed again, unless no white space follows at all
        window.fill(window.end + window.chunk_size)
        match = _WHITE_SPACE.search(window.buffer)
    if match is not None:
        cut = window.base + match.end()
    else:
        cut = target
        window.restart_at(target)
    window.fill(cut + 1)
    while cut < window.end and window.buffer[cut - window.base] & 0xC0 == 0x80:  # not inside a character
        cut += 1
        window.fill(cut + 1)
    return cut


# ---------------------------------------------------------------------------- reading


def text_documents(source: Source, pattern, skips: List[Skip],
                   columns: bool = False) -> Iterator[Union[Document, DocumentColumns]]:
    """The documents of one source of a text file: the whole range as one document (``pattern``
    None, not JSON Lines), else each document between separators (``pattern``) or each JSON line
    (the source's ``text_field`` set).  ``columns``: blocks of JSON lines of the common shape
    come as ``DocumentColumns`` (no ``Document`` a line), the other documents as ``Document``s."""
    data = read_range(source)
    encoding = source.encoding
    if pattern is None and source.text_field is None:
        document = _decoded(data, source.label, skips, source.corpus_doc, source.in_parts, encoding)
        del data  # never hold a large text's bytes and its characters at once for long
        if document is not None:
            document.continues = source.continues
            yield document
        return
    if source.text_field is not None and not encoding:
        if _fast_loads is not None:  # any range, valid UTF-8 or not: parsed a line at a time in C
            items = _json_byte_lines(data.split(b"\n"), source, skips)
            del data
            if columns:
                yield from items
            else:
                for item in items:
                    if type(item) is DocumentColumns:
                        yield from item.documents()
                    else:
                        yield item
            return
        lines = _utf8_lines(data)
        if lines is not None:  # valid UTF-8: decoded once, not a line at a time
            del data
            yield from _json_lines(lines, source, skips)
            return
    spans = list(document_spans(data, 0, len(data), LINE_PATTERN if source.text_field is not None else pattern))
    for offset, (doc_start, doc_end) in enumerate(spans):
        label, position = f"{source.label}#{source.first_doc + offset}", source.corpus_doc + offset
        if source.text_field is not None:
            document = _json_document(data[doc_start:doc_end], label, source.text_field, skips, position, encoding)
        else:
            document = _decoded(data[doc_start:doc_end], label, skips, position, encoding=encoding)
        if document is not None:
            yield document


_SURROGATE = re.compile("[\ud800-\udfff]")
_ASCII_SPACE = " \t\n\r\f\v"  # what ``spans``' bytes patterns call white space


def _utf8_lines(data: bytes) -> Optional[List[str]]:
    """A JSON Lines range's lines, decoded at once (None if it is not valid UTF-8).  The same
    lines as its bytes split at line breaks, each decoded: in UTF-8 a line break is one byte,
    never part of another character."""
    try:
        return data.decode(UTF8).split("\n")
    except UnicodeDecodeError:
        return None


try:  # a JSON parser in C that refuses all that ``json`` refuses and more (see ``_json_byte_lines``)
    from orjson import loads as _fast_loads
except ImportError:  # (then ``_json_lines``: the json module's scanner)
    _fast_loads = None

_SPACE_BYTES = b" \t\n\r\f\v"  # what ``spans``' bytes patterns call white space
# Nesting ``json`` is sure to parse (it raises RecursionError some 900 levels deep, fewer when
# called deep in a stack; orjson goes deeper): a line with more brackets than this is left to it.
_SAFE_DEPTH = 200


def _json_byte_lines(lines: List[bytes], source: Source,
                     skips: List[Skip]) -> Iterator[Union[DocumentColumns, Document]]:
    """``text_documents`` over the lines of a JSON Lines range (UTF-8, valid or not), each parsed
    by orjson, as the line-by-line reader (``document_spans`` with ``LINE_PATTERN``, then
    ``_json_document``) reads them: each line holding a byte other than ASCII white space is a
    document; a skip is recorded when the reader passes its line (a tokenizer that reads as it
    goes records its own skips between them).

    A block of lines all of the common shape (empty lines among them) is read at once
    (``_json_block``: none is skipped) and comes as ``DocumentColumns``;
    in any other block, a line orjson parses to an object whose text is a string with text,
    without NUL or a lone surrogate, is kept here, and any other line goes to
    ``_json_document``, the reference, which says why it is skipped.  What orjson accepts,
    ``json.loads`` accepts with the same strings (tests/pipeline/test_json_lines.py compares them
    on hostile lines): both follow RFC 8259 (the same white space, escapes, numbers; control
    characters refused in strings), orjson checks UTF-8 (so a line it parses decodes without
    replacement) and refuses more (a lone surrogate escape, NaN and Infinity, a number beyond a
    double's range: integers of more digits than Python converts among them); of what it
    accepts, only nesting deeper than the interpreter's recursion allows would fail in ``json``,
    hence the bracket count of long lines."""
    key, label, first, position = source.text_field, source.label, source.first_doc, source.corpus_doc
    if lines and not lines[-1]:  # (after the range's last line break: no line)
        lines.pop()
    loads, offset = _fast_loads, 0
    for block in range(0, len(lines), _BLOCK_LINES):
        texts = _json_block(lines[block:block + _BLOCK_LINES], key)
        if texts is not None:
            if texts:
                yield DocumentColumns(texts, label, first + offset, position + offset)
            offset += len(texts)
            continue
        for line in lines[block:block + _BLOCK_LINES]:
            if line[:1] != b"{" and not line.strip(_SPACE_BYTES):
                continue
            value = None
            try:
                record = loads(line)
            except (ValueError, RecursionError):
                record = None
            if type(record) is dict:
                value = record.get(key)
                if type(value) is not str or not value or value.isspace() or "\x00" in value or \
                        not value.isascii() and _SURROGATE.search(value) or \
                        len(line) > 2 * _SAFE_DEPTH and line.count(b"[") + line.count(b"{") > _SAFE_DEPTH:
                    value = None
            if value is not None:
                yield Document(f"{label}#{first + offset}", value, 0, 0, corpus_doc=position + offset)
            else:
                document = _json_document(line, f"{label}#{first + offset}", key, skips, position + offset)
                if document is not None:
                    yield document
            offset += 1


# Lines read as a block by ``_json_block``: a block holding a line of another shape is read a line
# at a time, the others still as blocks.
_BLOCK_LINES = 1024


def _json_block(lines: List[bytes], key: str) -> Optional[List[str]]:
    """The texts of a block of lines, all of the common shape (each line an object whose text
    is a string with text, without NUL or a lone surrogate) or empty (no document: passed over),
    with no Python a line; None if any is not (a line of white space included)."""
    if b"" in lines:  # (a C loop of comparisons: most blocks have no empty line)
        lines = list(filter(None, lines))
    try:  # (TypeError: a line holding a value that is not an object, or null)
        values = list(map(itemgetter(key), map(_fast_loads, lines)))
    except (ValueError, KeyError, RecursionError, TypeError):
        return None
    if set(map(type, values)) != {str} or not all(values) or any(map(str.isspace, values)) or \
            any(map(contains, values, repeat("\x00"))) or _holds_surrogate("".join(filterfalse(str.isascii, values))):
        return None
    # Nesting: only a line of more than 2 * _SAFE_DEPTH bytes can hold more.  Each holds an object,
    # so at least one bracket, and none holds more than all of theirs but one for each other one;
    # only when that is too many are they counted one by one.
    long_lines = list(compress(lines, map((2 * _SAFE_DEPTH).__lt__, map(len, lines))))
    if long_lines and sum(map(methodcaller("count", b"{"), long_lines)) + \
            sum(map(methodcaller("count", b"["), long_lines)) - len(long_lines) + 1 > _SAFE_DEPTH and \
            any(line.count(b"[") + line.count(b"{") > _SAFE_DEPTH for line in long_lines):
        return None
    return values


def _holds_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (the one thing strict UTF-8 cannot encode): found
    by encoding, faster than ``_SURROGATE``'s scan."""
    try:
        text.encode(UTF8)
    except UnicodeEncodeError:
        return True
    return False


# What ``json.loads`` runs on a string: a decoder's scanner (C when the json module has its
# accelerator), called here once a line, without loads' three Python calls around it.
_SCAN_ONCE = json.JSONDecoder().scan_once


def _json_lines(lines: List[str], source: Source, skips: List[Skip]) -> Iterator[Document]:
    """``text_documents`` over the lines of a valid UTF-8 JSON Lines range: each line holding
    more than white space is a document, as ``document_spans`` with ``LINE_PATTERN`` finds them.

    A line of the common shape (an object, nothing around it, its text a string with text,
    nothing to replace in it) is scanned and kept here; any other line, and any the scanner
    refuses, goes through ``_json_value``, the reference, which says why it is skipped."""
    key, offset, label, first, position = source.text_field, 0, source.label, source.first_doc, source.corpus_doc
    scan = _SCAN_ONCE
    for line in lines:
        if not line.strip(_ASCII_SPACE):
            continue
        value = None
        if line[:1] == "{" and line[-1:] == "}":
            # ``json.loads(line)`` is ``scan(line, 0)`` when the object ends the line (no white
            # space to skip at either end: the line starts and ends with its braces).
            try:
                record, end = scan(line, 0)
            except (ValueError, StopIteration, RecursionError):
                record = end = None
            if end == len(line) and type(record) is dict:
                value = record.get(key)
                # A string with text, without NUL or a lone surrogate (``isascii``: a flag of the
                # string; most texts are not searched).
                if type(value) is not str or "\x00" in value or not value.strip() or \
                        not value.isascii() and _SURROGATE.search(value):
                    value = None
        if value is not None:
            yield Document(f"{label}#{first + offset}", value, 0, 0, corpus_doc=position + offset)
        else:
            document = _json_value(line, 0, f"{label}#{first + offset}", key, skips, position + offset)
            if document is not None:
                yield document
        offset += 1


def _json_document(line: bytes, label: str, key: str, skips: List[Skip], position: int,
                   encoding: str = "") -> Optional[Document]:
    """One JSON Lines document: the string at ``key`` of the object on the line."""
    text, n_replaced, _ = decode_text(line, encoding)
    return _json_value(text, n_replaced, label, key, skips, position)


def _json_value(text: str, n_replaced: int, label: str, key: str, into: List[Skip],
                position: int) -> Optional[Document]:
    """The document of one decoded JSON line (``n_replaced``: characters that replaced invalid
    bytes), or None with its skip recorded in ``into``."""
    found = _json_text(text, key)
    if not isinstance(found, str):
        into.append(Skip(found[0], label, position, False))
        return None
    value = found
    if n_replaced:  # invalid UTF-8 elsewhere on the line does not count
        n_replaced = min(n_replaced, value.count("\ufffd"))
    # A lone surrogate escape ("\\ud800"): not encodable text.  (``isascii`` is a flag of the
    # string: most values are not searched at all.)
    if not value.isascii() and _SURROGATE.search(value):
        value, replaced = _SURROGATE.subn("\ufffd", value)
        n_replaced += replaced
    if not value.strip():
        into.append(Skip(EMPTY, label, position, False))
        return None
    return Document(label, value, n_replaced, 1 if n_replaced else 0, corpus_doc=position)


def _json_text(text: str, key: str):
    """The string at ``key`` of the JSON object ``text``, or (why not,) ."""
    try:
        record = json.loads(text[1:] if text.startswith("\ufeff") else text)  # a byte-order mark may lead
    except (ValueError, RecursionError):
        return (INVALID_JSON,)
    if not isinstance(record, dict):
        return (NOT_OBJECT,)
    if key not in record:
        return (MISSING_KEY,)
    value = record[key]
    if not isinstance(value, str):
        return (NOT_STRING,)
    if "\x00" in value:
        return (BINARY,)
    return value


def _decoded(data: bytes, label: str, skips: List[Skip], position: int, in_parts: bool = False,
             encoding: str = "") -> Optional[Document]:
    skips = _Skips(skips, label, position, in_parts)
    if b"\x00" in data:
        skips.add(COMPRESSED_UNNAMED if sniffed_compression(data[:HEAD_BYTES]) else BINARY)
        return None
    text, n_replaced, bad_line = decode_text(data, encoding)
    if not text.strip():
        skips.add(EMPTY)
        return None
    return Document(label, text, n_replaced, bad_line, corpus_doc=position, in_parts=in_parts)


@dataclass
class _Skips:
    """Where one document's skip, if any, is recorded."""

    into: List[Skip]
    label: str
    position: int
    in_parts: bool = False

    def add(self, reason: str) -> None:
        self.into.append(Skip(reason, self.label, self.position, self.in_parts))
