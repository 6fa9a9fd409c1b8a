"""Stage 1: metadata files -> documents, grouped into units of work.

A *unit* is a fixed group of ``split_num`` documents.  It is the grain of parallelism, of
randomness (each unit has its own random stream) and of the random-next-sentence pool (as in
the Cerebras tool).  Units are planned in the parent before any work, from file names and, for
files holding many documents, from a scan of the separators; a unit records only byte ranges,
so planning a corpus of any size needs memory proportional to the number of units, and a
worker reads just its own bytes.

Input formats:

* plain text, one document a file (large files are read in parts, see ``document_parts``), or
  many documents a file separated by a separator line (``--multiple_docs_in_single_file``);
* JSON Lines (``--jsonl_text_key KEY``): one document a non-blank line, its text at ``KEY``;
* any of these compressed, chosen by extension (``.gz``, ``.bz2``, ``.xz``, ``.zst``/``.zstd``).
  The ranges of a compressed file are offsets in its decompressed stream, found by
  decompressing the file once while planning (in chunks: never the whole file in memory);
  ``input_files`` reads them.

Everything that reads documents goes through here: the generator's tasks, and
:class:`DocumentTexts` (``bert-data build-vocab``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import mmap
import os
import re
from dataclasses import dataclass, field
from typing import BinaryIO, Iterable, Iterator, List, Optional, Sequence, Tuple

from .input_files import (CODEC_NAMES, READ_CHUNK, InputError, check_codecs, codec_errors, compression_of, one_line,
                          open_decompressed, read_range)

TRAIN = "train"
VAL = "val"

# How a unit's documents are assigned to splits.
SPLIT_BY_HASH = "hash"  # --val_fraction: a stable hash of (seed, document) decides
ALL_TRAIN = "train"
ALL_VAL = "val"


@dataclass(frozen=True)
class Source:
    """A byte range of one input file: whole documents, or one part of a large document.

    For a compressed file (``codec`` set) the offsets are in the decompressed stream."""

    path: str  # as opened (prefix joined)
    label: str  # as listed in the metadata file: names the document in messages and hashes
    start: int
    end: int  # exclusive; -1 means end of file
    first_doc: int = 0  # index in the file of the first document of the range
    continues: bool = False  # a later part of the document the previous source began
    codec: str = ""  # "" (plain), "gz", "bz2", "xz" or "zst": how the file is compressed
    jsonl_key: Optional[str] = None  # JSON Lines: one document a line, its text at this key


@dataclass
class Unit:
    """``split_num`` documents: one random stream, one next-sentence pool, one piece of output.

    Its sources are grouped in *slices*, the grain at which documents are read, split into
    sentences and tokenized (in parallel, even within a unit); ``n_docs`` counts documents
    listed, before any are skipped.
    """

    index: int
    split_mode: str
    slices: List[List[Source]] = field(default_factory=list)
    n_docs: int = 0
    n_bytes: int = 0
    slice_docs: List[int] = field(default_factory=list)
    slice_bytes: List[int] = field(default_factory=list)

    @property
    def sources(self) -> List[Source]:
        return [source for group in self.slices for source in group]

    def add(self, source: Source, n_docs: int, n_bytes: int, max_slice_docs: int, max_slice_bytes: int) -> None:
        if (not self.slices or self.slice_docs[-1] + n_docs > max_slice_docs
                or self.slice_bytes[-1] + n_bytes > max_slice_bytes):
            self.slices.append([])
            self.slice_docs.append(0)
            self.slice_bytes.append(0)
        self.slices[-1].append(source)
        self.slice_docs[-1] += n_docs
        self.slice_bytes[-1] += n_bytes
        self.n_docs += n_docs
        self.n_bytes += n_bytes


@dataclass
class MetadataEntry:
    metadata_file: str
    line_number: int
    label: str
    path: str


def read_metadata(metadata_files: Sequence[str], prefix: str) -> List[MetadataEntry]:
    """Document paths from metadata files: one per line, blank lines and surrounding spaces ignored."""
    entries: List[MetadataEntry] = []
    for metadata_file in metadata_files:
        try:
            with open(metadata_file, "rb") as handle:
                raw = handle.read()
        except OSError as error:
            raise InputError(f"{metadata_file}: cannot read metadata file: {error.strerror}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            line = raw[: error.start].count(b"\n") + 1
            raise InputError(f"{metadata_file}:{line}: metadata file is not UTF-8 text") from None
        before = len(entries)
        for line_number, line in enumerate(text.splitlines(), start=1):
            label = line.strip()
            if label:
                # Absolute: workers (local or on a cluster) may run in another directory.
                path = os.path.abspath(os.path.join(prefix, label) if prefix else label)
                entries.append(MetadataEntry(metadata_file, line_number, label, path))
        if len(entries) == before:
            raise InputError(f"{metadata_file}: metadata file lists no documents")
    return entries


def check_documents_exist(entries: Sequence[MetadataEntry], skip_missing: bool = False):
    """Stat every listed file before any work. Returns (usable entries, [(entry, reason)])."""
    usable, missing = [], []
    for entry in entries:
        reason = None
        if not os.path.exists(entry.path):
            reason = "file not found"
        elif not os.path.isfile(entry.path):
            reason = "not a regular file"
        elif not os.access(entry.path, os.R_OK):
            reason = "file not readable"
        if reason is None:
            usable.append(entry)
        elif skip_missing:
            missing.append((entry, reason))
        else:
            raise InputError(
                f"{entry.metadata_file}:{entry.line_number}: {reason}: {entry.path}"
                + (" (use --skip_missing to skip such entries)" if reason != "not a regular file" else "")
            )
    return usable, missing


# ---------------------------------------------------------------------------- separators

def separator_pattern(separator_line: Optional[str]) -> "re.Pattern[bytes]":
    """A regex matching one whole separator line (with its newline) in UTF-8 bytes.

    ``None`` means documents are separated by blank (or white-space only) lines.
    """
    if separator_line is None:
        return re.compile(rb"(?m)^[ \t\r\f\v]*(?:\n|\Z)")
    return re.compile(
        rb"(?m)^[ \t\r\f\v]*" + re.escape(separator_line.encode("utf-8")) + rb"[ \t\r\f\v]*(?:\n|\Z)"
    )


_NON_SPACE = re.compile(rb"\S")


def document_spans(buffer, start: int, end: int, pattern) -> Iterator[Tuple[int, int]]:
    """Byte spans of the non-blank documents in ``buffer[start:end]``.

    The planner (over a memory map of the whole file) and the reader (over the bytes of one
    unit) both call this, so they agree on what a document is.
    """
    position = start
    for match in pattern.finditer(buffer, start, end):
        if match.start() > position and _NON_SPACE.search(buffer, position, match.start()):
            yield position, match.start()
        position = max(position, match.end())
    if end > position and _NON_SPACE.search(buffer, position, end):
        yield position, end


# JSON Lines: every line break ends a document; blank lines hold none.
LINE_PATTERN = re.compile(rb"\n")


def document_pattern(separator_line: Optional[str], jsonl: bool) -> "re.Pattern[bytes]":
    return LINE_PATTERN if jsonl else separator_pattern(separator_line)


def stream_document_spans(stream: BinaryIO, pattern, chunk_size: int = READ_CHUNK) -> Iterator[Tuple[int, int]]:
    """What ``document_spans`` finds over a whole stream, reading it in chunks: at most one chunk
    and one line (however long) are held.  Separators are whole lines, so each block, cut after
    its last line break, is scanned on its own; a document may run on across blocks."""
    base = 0  # offset in the stream of the block scanned
    doc_start = 0
    has_text = False  # the current document has non-space bytes in the blocks already scanned
    pending: List[bytes] = []  # the unfinished last line
    while True:
        chunk = stream.read(chunk_size)
        if chunk:
            cut = chunk.rfind(b"\n") + 1
            if not cut:
                pending.append(chunk)
                continue
            pending.append(chunk[:cut] if cut < len(chunk) else chunk)
            block = pending[0] if len(pending) == 1 else b"".join(pending)
            pending = [chunk[cut:]] if cut < len(chunk) else []
        else:
            block = b"".join(pending)
            pending = []
        position = 0
        for match in pattern.finditer(block):
            if match.start() == match.end():  # only at the block's end: no separator line
                continue
            if has_text or (match.start() > position and _NON_SPACE.search(block, position, match.start())):
                yield doc_start, base + match.start()
            doc_start, position, has_text = base + match.end(), match.end(), False
        has_text = has_text or bool(_NON_SPACE.search(block, position))
        base += len(block)
        if not chunk:
            break
    if has_text:
        yield doc_start, base


# ---------------------------------------------------------------------------- planning

# A compressed document's size is not known before it is decompressed; slices are grouped by
# this guess of the decompressed size (it shapes only how work is cut, never the output).
COMPRESSION_RATIO_GUESS = 4


def document_parts(path: str, size: int, part_bytes: int) -> List[Tuple[int, int]]:
    """Byte ranges of about ``part_bytes`` covering a one-document file, cut after a blank line
    (a paragraph break: a sentence boundary in every mode) where the last quarter of a part
    has one, else after a line break, else after a space, so that a part cut changes sentences
    as little as the splitter's own long-text pieces do.  Cuts fall on ASCII bytes, so never
    inside a UTF-8 character."""
    if size <= part_bytes:
        return [(0, size)]
    parts = []
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
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


def plan_units(
    entries: Sequence[MetadataEntry],
    split_num: int,
    split_mode: str,
    first_index: int = 0,
    multiple_docs_in_single_file: bool = False,
    separator_line: Optional[str] = None,
    slice_docs: int = 64,
    slice_bytes: int = 1 << 21,
    part_bytes: int = 1 << 22,
    jsonl_text_key: Optional[str] = None,
) -> List[Unit]:
    """Group documents, in metadata order, into units of ``split_num`` documents, and each
    unit's documents into slices of at most ``slice_docs`` documents or about ``slice_bytes``.

    With ``jsonl_text_key`` every file is JSON Lines (one document a non-blank line).  A
    compressed file is decompressed here once (in chunks) to find its documents, when it holds
    many; when it is one document, its first bytes are decompressed to check it."""
    check_codecs(entries)
    jsonl = jsonl_text_key is not None
    units: List[Unit] = []
    current = Unit(first_index, split_mode)

    def close_current():
        nonlocal current
        if current.n_docs:
            units.append(current)
            current = Unit(first_index + len(units), split_mode)

    def cannot_read(entry: MetadataEntry, codec: str, error: BaseException) -> InputError:
        return InputError(f"{entry.metadata_file}:{entry.line_number}: cannot read {CODEC_NAMES[codec]} file "
                          f"{entry.path}: {one_line(error)}")

    if not multiple_docs_in_single_file and not jsonl:
        for entry in entries:
            codec = compression_of(entry.path)
            if codec:
                try:  # the first bytes now: a file that is not what its name says fails before any work
                    with open_decompressed(entry.path, codec) as stream:
                        stream.read(1)
                except codec_errors() as error:
                    raise cannot_read(entry, codec, error) from None
                # One document, whole: a compressed stream cannot be cut into parts.
                current.add(Source(entry.path, entry.label, 0, -1, codec=codec), 1,
                            os.path.getsize(entry.path) * COMPRESSION_RATIO_GUESS, slice_docs, slice_bytes)
            else:
                size = os.path.getsize(entry.path)
                for number, (start, end) in enumerate(document_parts(entry.path, size, part_bytes)):
                    # Each part of a large document is a slice of its own (tokenized in parallel);
                    # only the first counts as a document.
                    current.add(Source(entry.path, entry.label, start, end, 0, continues=number > 0),
                                0 if number else 1, end - start, slice_docs, slice_bytes)
            if current.n_docs >= split_num:
                close_current()
        close_current()
        return units

    pattern = document_pattern(separator_line, jsonl)

    def plan_file(entry: MetadataEntry, spans: Iterable[Tuple[int, int]], codec: str) -> None:
        """Ranges of whole documents: a range ends with its unit, or when its slice is full."""
        range_start = range_end = None
        range_first = range_docs = 0
        last = None  # (list, index) of the file's last source

        def close_range():
            nonlocal range_start, range_docs, last
            if range_start is not None:
                source = Source(entry.path, entry.label, range_start, range_end, range_first, codec=codec,
                                jsonl_key=jsonl_text_key)
                current.add(source, range_docs, range_end - range_start, slice_docs, slice_bytes)
                last = (current.slices[-1], len(current.slices[-1]) - 1)
            range_start, range_docs = None, 0

        for doc_number, (doc_start, doc_end) in enumerate(spans):
            if range_start is None:
                range_start, range_first = doc_start, doc_number
            range_end = doc_end
            range_docs += 1
            if current.n_docs + range_docs >= split_num:
                close_range()
                close_current()
            elif range_docs >= slice_docs or range_end - range_start >= slice_bytes:
                close_range()
        close_range()
        if codec and last is not None:  # read on to the end of the stream, which is then closed
            group, index = last
            group[index] = dataclasses.replace(group[index], end=-1)

    for entry in entries:
        codec = compression_of(entry.path)
        if codec:
            try:
                with open_decompressed(entry.path, codec) as stream:
                    plan_file(entry, stream_document_spans(stream, pattern), codec)
            except codec_errors() as error:
                raise cannot_read(entry, codec, error) from None
            continue
        size = os.path.getsize(entry.path)
        if size == 0:
            continue
        with open(entry.path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            plan_file(entry, document_spans(buf, 0, size, pattern), "")
    close_current()
    return units


# ---------------------------------------------------------------------------- reading

@dataclass
class Document:
    label: str  # "path" or "path#3" for the fourth document of a multi-document file
    text: str
    n_replaced: int = 0  # bytes that were not UTF-8, replaced by U+FFFD
    continues: bool = False  # a later part of a large document (see document_parts)


@dataclass
class Skip:
    reason: str
    label: str


BINARY = "binary file (NUL bytes)"
EMPTY = "empty or white-space only"
NO_SENTENCE = "no sentence with any token"
# JSON Lines (--jsonl_text_key): a line that holds no document text.
INVALID_JSON = "invalid JSON line"
NOT_OBJECT = "JSON line is not an object"
MISSING_KEY = "missing text key"
NOT_STRING = "text value is not a string"


def decode_text(data: bytes) -> Tuple[str, int]:
    """UTF-8 with replacement; returns the text and how many replacements it took."""
    try:
        return data.decode("utf-8"), 0
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
        genuine = data.count("\ufffd".encode("utf-8"))
        return text, text.count("\ufffd") - genuine


def read_documents(sources: Sequence[Source], separator_line: Optional[str], multiple_docs_in_single_file: bool,
                   skips: List[Skip]) -> Iterator[Document]:
    """The documents of some sources, in order.  Empty and binary ones (and, in JSON Lines, lines
    without a text) are recorded in ``skips``.  A source's ``jsonl_key`` marks JSON Lines."""
    pattern = separator_pattern(separator_line) if multiple_docs_in_single_file else None
    for source in sources:
        data = read_range(source)
        if source.jsonl_key is not None:
            for offset, (doc_start, doc_end) in enumerate(list(document_spans(data, 0, len(data), LINE_PATTERN))):
                document = _json_document(data[doc_start:doc_end], f"{source.label}#{source.first_doc + offset}",
                                          source.jsonl_key, skips)
                if document is not None:
                    yield document
            continue
        if pattern is None:
            document = _decoded(data, source.label, skips)
            del data  # never hold a large text's bytes and its characters at once for long
            if document is not None:
                document.continues = source.continues
                yield document
            continue
        for offset, (doc_start, doc_end) in enumerate(list(document_spans(data, 0, len(data), pattern))):
            document = _decoded(data[doc_start:doc_end], f"{source.label}#{source.first_doc + offset}", skips)
            if document is not None:
                yield document


_SURROGATE = re.compile("[\ud800-\udfff]")


def _json_document(line: bytes, label: str, key: str, skips: List[Skip]) -> Optional[Document]:
    """One JSON Lines document: the string at ``key`` of the object on the line."""
    text, n_replaced = decode_text(line)
    try:
        record = json.loads(text[1:] if text.startswith("\ufeff") else text)  # a byte-order mark may lead
    except (ValueError, RecursionError):
        skips.append(Skip(INVALID_JSON, label))
        return None
    if not isinstance(record, dict):
        skips.append(Skip(NOT_OBJECT, label))
        return None
    if key not in record:
        skips.append(Skip(MISSING_KEY, label))
        return None
    value = record[key]
    if not isinstance(value, str):
        skips.append(Skip(NOT_STRING, label))
        return None
    if "\x00" in value:
        skips.append(Skip(BINARY, label))
        return None
    if n_replaced:  # invalid UTF-8 elsewhere on the line does not count
        n_replaced = min(n_replaced, value.count("\ufffd"))
    if _SURROGATE.search(value):  # a lone surrogate escape ("\\ud800"): not encodable text
        value, replaced = _SURROGATE.subn("\ufffd", value)
        n_replaced += replaced
    if not value.strip():
        skips.append(Skip(EMPTY, label))
        return None
    return Document(label, value, n_replaced)


def _decoded(data: bytes, label: str, skips: List[Skip]) -> Optional[Document]:
    if b"\x00" in data:
        skips.append(Skip(BINARY, label))
        return None
    text, n_replaced = decode_text(data)
    if not text.strip():
        skips.append(Skip(EMPTY, label))
        return None
    return Document(label, text, n_replaced)


class DocumentTexts:
    """The text of every document the metadata files (and ``input_files``) list, read as the
    generator reads it (compressed files, many documents a file, JSON Lines, large documents in
    parts); empty and binary documents, and JSON lines without a text, are skipped.  Planned
    once, iterable any number of times (``bert-data build-vocab`` reads the texts twice).

    ``missing``: the (entry, reason) skipped with ``skip_missing``.  After a full pass:
    ``n_docs``, the documents read, and ``skipped``, reason -> documents skipped.
    """

    def __init__(self, metadata_files: Sequence[str], input_files_prefix: str = "",
                 multiple_docs_in_single_file: bool = False, separator_line: Optional[str] = None,
                 jsonl_text_key: Optional[str] = None, skip_missing: bool = False,
                 input_files: Sequence[str] = ()):
        from .listing import list_documents  # (it builds on this module)

        entries, self.missing = list_documents(metadata_files, input_files, input_files_prefix, skip_missing)
        # Units group the generator's work; here only their sources, in order, matter.
        units = plan_units(entries, split_num=max(1, len(entries)), split_mode=ALL_TRAIN,
                           multiple_docs_in_single_file=multiple_docs_in_single_file,
                           separator_line=separator_line, jsonl_text_key=jsonl_text_key)
        self.sources = [source for unit in units for source in unit.sources]
        self.n_listed = sum(unit.n_docs for unit in units)  # documents found, before any is skipped
        self.separator_line = separator_line
        self.multiple_docs_in_single_file = multiple_docs_in_single_file
        self.n_docs = 0
        self.skipped: dict = {}

    def __iter__(self) -> Iterator[str]:
        skips: List[Skip] = []
        read = set()
        for document in read_documents(self.sources, self.separator_line, self.multiple_docs_in_single_file, skips):
            read.add(document.label)
            yield document.text
        self.n_docs = len(read)
        skipped = {}
        for skip in skips:
            if skip.label not in read:  # not a blank part of a document that has text
                skipped.setdefault(skip.reason, set()).add(skip.label)
        self.skipped = {reason: len(labels) for reason, labels in sorted(skipped.items())}


def is_validation_document(label: str, seed: int, val_fraction: float) -> bool:
    """A stable choice: depends only on the document's label and the seed, so adding documents
    to a corpus never moves others between train and validation."""
    if val_fraction <= 0:
        return False
    digest = hashlib.blake2b(f"{seed}\x00{label}".encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < val_fraction
