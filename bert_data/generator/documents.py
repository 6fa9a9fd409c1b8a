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
  ``input_files`` reads them;
* Parquet and Arrow IPC tables (``.parquet``, ``.arrow``, ``.feather``): one document a row, its
  text in a column; a source is then a range of rows (``table_input``).

Any path (metadata files, the documents, the prefix) may be an fsspec URL (``storage``): files
are then stat-ed, scanned and read through it, in ranges as local files are.

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
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from .. import storage
from .input_files import (CODEC_NAMES, InputError, RangeBuffer, check_codecs, codec_errors,
                          compression_of, one_line, open_decompressed, read_range)
# Separators and document spans (re-exported: readers and tests look for them here).
from .spans import LINE_PATTERN, document_pattern, document_spans, separator_pattern, stream_document_spans  # noqa: F401
from .table_input import DEFAULT_TEXT_COLUMN, plan_table, table_documents, table_format_of

from ..format.dataset_layout import TRAIN, VAL  # noqa: F401  (split names: the dataset layout's)



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
    corpus_doc: int = 0  # position in the listed corpus of the range's first document
    in_parts: bool = False  # one part of a document read in parts (see document_parts)
    # A table file ("parquet", "arrow_file", "arrow_stream"): start and end are rows, one document
    # a row, its text in the column ``jsonl_key``; ``stamp`` the file's identity when planned
    # (a worker's open reader of an older file of the same name is not reused).
    table: str = ""
    stamp: str = ""


@dataclass
class Slice:
    """Neighbouring documents of the listed corpus, read, split into sentences and tokenized
    together: the grain of the first phase of work.  Small, so every core stays busy even when
    documents are few and large (a large document is read in parts, a slice each).

    ``first_doc`` is the corpus position of the first document that starts or continues here;
    ``n_docs`` counts the documents that start here (listed, before any are skipped).
    """

    index: int
    first_doc: int
    sources: List[Source] = field(default_factory=list)
    n_docs: int = 0
    n_bytes: int = 0

    @property
    def starts_with_a_part(self) -> bool:
        """It begins with a later part of a document that began in an earlier slice."""
        return bool(self.sources) and self.sources[0].continues


@dataclass
class CorpusPlan:
    """The listed corpus: its slices, in order, and the split of each document, by position
    (``doc_splits[g]`` is TRAIN_CODE or VAL_CODE for the document at position ``g``)."""

    slices: List[Slice]
    doc_splits: np.ndarray  # uint8, one per document
    docs_per_path: Dict[str, int] = field(default_factory=dict)  # input file -> documents planned

    @property
    def n_docs(self) -> int:
        return len(self.doc_splits)

    @property
    def n_bytes(self) -> int:
        return sum(piece.n_bytes for piece in self.slices)


TRAIN_CODE, VAL_CODE = 0, 1
SPLIT_OF_CODE = {TRAIN_CODE: TRAIN, VAL_CODE: VAL}


@dataclass
class MetadataEntry:
    metadata_file: str
    line_number: int
    label: str
    path: str
    size: int = -1  # bytes, when known from listing a URL's folder (saves a request a file)


def read_metadata(metadata_files: Sequence[str], prefix: str) -> List[MetadataEntry]:
    """Document paths from metadata files: one per line, blank lines and surrounding spaces ignored."""
    entries: List[MetadataEntry] = []
    for metadata_file in metadata_files:
        try:
            raw = storage.read_bytes(metadata_file)
        except OSError as error:
            raise InputError(f"{metadata_file}: cannot read metadata file: {error.strerror or one_line(error)}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            line = raw[: error.start].count(b"\n") + 1
            raise InputError(f"{metadata_file}:{line}: metadata file is not UTF-8 text") from None
        before = len(entries)
        for line_number, line in enumerate(text.splitlines(), start=1):
            label = line.strip()
            if label:
                # Absolute (or a URL): workers (local or on a cluster) may run in another directory.
                entries.append(MetadataEntry(metadata_file, line_number, label, storage.resolve(prefix, label)))
        if len(entries) == before:
            raise InputError(f"{metadata_file}: metadata file lists no documents")
    return entries


def check_documents_exist(entries: Sequence[MetadataEntry], skip_missing: bool = False):
    """Stat every listed file before any work. Returns (usable entries, [(entry, reason)])."""
    usable, missing = [], []
    urls = [entry.path for entry in entries if storage.is_url(entry.path)]
    try:
        remote = storage.stat_files(urls) if urls else {}
    except OSError as error:
        raise InputError(f"{urls[0]}: cannot reach: {one_line(error)}") from None
    for entry in entries:
        reason = None
        if entry.path in remote:
            found = remote[entry.path]
            if found is None:
                reason = "file not found"
            elif found["type"] != "file":
                reason = "not a regular file"
            else:
                entry.size = found["size"]
        elif not os.path.exists(entry.path):
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


class _SlicePlanner:
    """Cuts the corpus, in listed order, into slices of at most ``slice_docs`` documents or
    about ``slice_bytes``, and numbers its documents."""

    def __init__(self, slice_docs: int, slice_bytes: int):
        self.slice_docs, self.slice_bytes = slice_docs, slice_bytes
        self.slices: List[Slice] = []
        self.splits = bytearray()  # the split code of each document, by corpus position
        self.docs_per_path: Dict[str, int] = {}

    @property
    def next_doc(self) -> int:
        return len(self.splits)

    def new_documents(self, path: str, split_codes: Iterable[int]) -> None:
        before = len(self.splits)
        self.splits.extend(split_codes)
        self.docs_per_path[path] = self.docs_per_path.get(path, 0) + len(self.splits) - before

    def add(self, source: Source, n_docs: int, n_bytes: int) -> None:
        current = self.slices[-1] if self.slices else None
        if (current is None or current.n_docs + n_docs > self.slice_docs
                or current.n_bytes + n_bytes > self.slice_bytes):
            current = Slice(len(self.slices), source.corpus_doc)
            self.slices.append(current)
        current.sources.append(source)
        current.n_docs += n_docs
        current.n_bytes += n_bytes


def size_of(entry: MetadataEntry) -> int:
    return entry.size if entry.size >= 0 else storage.size(entry.path)


def plan_corpus(
    entries: Sequence[MetadataEntry],
    split_of: Callable[[str, int], int],
    val_entries: Sequence[MetadataEntry] = (),
    multiple_docs_in_single_file: bool = False,
    separator_line: Optional[str] = None,
    slice_docs: int = 64,
    slice_bytes: int = 1 << 21,
    part_bytes: int = 1 << 22,
    jsonl_text_key: Optional[str] = None,
) -> CorpusPlan:
    """Number the documents of ``entries`` and then ``val_entries``, in listed order, and cut
    them into slices.  ``split_of(label, position)`` gives the split code of a document of
    ``entries``; every document of ``val_entries`` is validation.

    With ``jsonl_text_key`` every file is JSON Lines (one document a non-blank line).  A
    compressed file is decompressed here once (in chunks) to find its documents, when it holds
    many; when it is one document, its first bytes are decompressed to check it.  A Parquet or
    Arrow file (by extension) is a table, one document a row, its text in the column
    ``jsonl_text_key`` (default ``text``): one option names the text in both formats.  Memory:
    the slices, and one byte a document."""
    check_codecs(list(entries) + list(val_entries))
    jsonl = jsonl_text_key is not None
    planner = _SlicePlanner(slice_docs, slice_bytes)
    pattern = document_pattern(separator_line, jsonl)

    def cannot_read(entry: MetadataEntry, codec: str, error: BaseException) -> InputError:
        return InputError(f"{entry.metadata_file}:{entry.line_number}: cannot read {CODEC_NAMES[codec]} file "
                          f"{entry.path}: {one_line(error)}")

    def plan_whole_file(entry: MetadataEntry, split_code) -> None:
        """One document a file; a large plain one in parts, each a slice of its own."""
        position = planner.next_doc
        codec = compression_of(entry.path)
        if codec:
            try:  # the first bytes now: a file that is not what its name says fails before any work
                with open_decompressed(entry.path, codec) as stream:
                    stream.read(1)
            except codec_errors() as error:
                raise cannot_read(entry, codec, error) from None
            # One document, whole: a compressed stream cannot be cut into parts.
            planner.add(Source(entry.path, entry.label, 0, -1, codec=codec, corpus_doc=position), 1,
                        size_of(entry) * COMPRESSION_RATIO_GUESS)
        else:
            size = size_of(entry)
            parts = document_parts(entry.path, size, part_bytes)
            for number, (start, end) in enumerate(parts):
                # Only the first part counts as a document.
                planner.add(Source(entry.path, entry.label, start, end, 0, continues=number > 0, corpus_doc=position,
                                   in_parts=len(parts) > 1), 0 if number else 1, end - start)
        planner.new_documents(entry.path, [split_code(entry.label, position)])

    def plan_file(entry: MetadataEntry, spans: Iterable[Tuple[int, int]], codec: str, split_code) -> None:
        """Ranges of whole documents, each ending when its slice is full."""
        range_start = range_end = None
        range_first = range_docs = 0
        codes = bytearray()  # one byte a document: files may hold millions
        last = None  # the file's last source: (slice, index)

        def close_range():
            nonlocal range_start, range_docs, last
            if range_start is not None:
                source = Source(entry.path, entry.label, range_start, range_end, range_first, codec=codec,
                                jsonl_key=jsonl_text_key, corpus_doc=planner.next_doc + range_first)
                planner.add(source, range_docs, range_end - range_start)
                last = (planner.slices[-1], len(planner.slices[-1].sources) - 1)
            range_start, range_docs = None, 0

        for doc_number, (doc_start, doc_end) in enumerate(spans):
            if range_start is None:
                range_start, range_first = doc_start, doc_number
            range_end = doc_end
            range_docs += 1
            codes.append(split_code(f"{entry.label}#{doc_number}", planner.next_doc + doc_number))
            if range_docs >= slice_docs or range_end - range_start >= slice_bytes:
                close_range()
        close_range()
        planner.new_documents(entry.path, codes)
        if codec and last is not None:  # read on to the end of the stream, which is then closed
            piece, index = last
            piece.sources[index] = dataclasses.replace(piece.sources[index], end=-1)

    for group, split_code in ((entries, split_of), (val_entries, lambda label, position: VAL_CODE)):
        for entry in group:
            if table_format_of(entry.path):
                try:
                    plan_table(planner, entry, jsonl_text_key or DEFAULT_TEXT_COLUMN, split_code)
                except InputError as error:
                    raise InputError(f"{entry.metadata_file}:{entry.line_number}: {error}") from None
                continue
            if not multiple_docs_in_single_file and not jsonl:
                plan_whole_file(entry, split_code)
                continue
            codec = compression_of(entry.path)
            if codec:
                try:
                    with open_decompressed(entry.path, codec) as stream:
                        plan_file(entry, stream_document_spans(stream, pattern), codec, split_code)
                except codec_errors() as error:
                    raise cannot_read(entry, codec, error) from None
                continue
            size = size_of(entry)
            if size == 0:
                continue
            if storage.is_url(entry.path):  # scanned as a stream: the same spans as over a memory map
                with storage.open_read(entry.path) as stream:
                    plan_file(entry, stream_document_spans(stream, pattern), "", split_code)
                continue
            with open(entry.path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                plan_file(entry, document_spans(buf, 0, size, pattern), "", split_code)
    return CorpusPlan(planner.slices, np.frombuffer(bytes(planner.splits), dtype=np.uint8), planner.docs_per_path)


# ---------------------------------------------------------------------------- reading

@dataclass
class Document:
    label: str  # "path" or "path#3" for the fourth document of a multi-document file
    text: str
    n_replaced: int = 0  # bytes that were not UTF-8, replaced by U+FFFD
    continues: bool = False  # a later part of a large document (see document_parts)
    corpus_doc: int = 0  # position in the listed corpus
    in_parts: bool = False  # one part of a document read in parts


@dataclass
class Skip:
    reason: str
    label: str
    corpus_doc: int = 0
    in_parts: bool = False


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
        if source.table:
            yield from table_documents(source, skips)
            continue
        data = read_range(source)
        if pattern is None and source.jsonl_key is None:
            document = _decoded(data, source.label, skips, source.corpus_doc, source.in_parts)
            del data  # never hold a large text's bytes and its characters at once for long
            if document is not None:
                document.continues = source.continues
                yield document
            continue
        spans = list(document_spans(data, 0, len(data), LINE_PATTERN if source.jsonl_key is not None else pattern))
        for offset, (doc_start, doc_end) in enumerate(spans):
            label, position = f"{source.label}#{source.first_doc + offset}", source.corpus_doc + offset
            if source.jsonl_key is not None:
                document = _json_document(data[doc_start:doc_end], label, source.jsonl_key, skips, position)
            else:
                document = _decoded(data[doc_start:doc_end], label, skips, position)
            if document is not None:
                yield document


_SURROGATE = re.compile("[\ud800-\udfff]")


def _json_document(line: bytes, label: str, key: str, skips: List[Skip], position: int) -> Optional[Document]:
    """One JSON Lines document: the string at ``key`` of the object on the line."""
    skips = _Skips(skips, label, position)
    text, n_replaced = decode_text(line)
    try:
        record = json.loads(text[1:] if text.startswith("\ufeff") else text)  # a byte-order mark may lead
    except (ValueError, RecursionError):
        skips.add(INVALID_JSON)
        return None
    if not isinstance(record, dict):
        skips.add(NOT_OBJECT)
        return None
    if key not in record:
        skips.add(MISSING_KEY)
        return None
    value = record[key]
    if not isinstance(value, str):
        skips.add(NOT_STRING)
        return None
    if "\x00" in value:
        skips.add(BINARY)
        return None
    if n_replaced:  # invalid UTF-8 elsewhere on the line does not count
        n_replaced = min(n_replaced, value.count("\ufffd"))
    if _SURROGATE.search(value):  # a lone surrogate escape ("\\ud800"): not encodable text
        value, replaced = _SURROGATE.subn("\ufffd", value)
        n_replaced += replaced
    if not value.strip():
        skips.add(EMPTY)
        return None
    return Document(label, value, n_replaced, corpus_doc=position)


def _decoded(data: bytes, label: str, skips: List[Skip], position: int, in_parts: bool = False) -> Optional[Document]:
    skips = _Skips(skips, label, position, in_parts)
    if b"\x00" in data:
        skips.add(BINARY)
        return None
    text, n_replaced = decode_text(data)
    if not text.strip():
        skips.add(EMPTY)
        return None
    return Document(label, text, n_replaced, corpus_doc=position, in_parts=in_parts)


@dataclass
class _Skips:
    """Where one document's skip, if any, is recorded."""

    into: List[Skip]
    label: str
    position: int
    in_parts: bool = False

    def add(self, reason: str) -> None:
        self.into.append(Skip(reason, self.label, self.position, self.in_parts))


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
        # Slices group the generator's work; here only their sources, in order, matter.
        plan = plan_corpus(entries, lambda label, position: TRAIN_CODE,
                           multiple_docs_in_single_file=multiple_docs_in_single_file,
                           separator_line=separator_line, jsonl_text_key=jsonl_text_key)
        self.sources = [source for piece in plan.slices for source in piece.sources]
        self.n_listed = plan.n_docs  # documents found, before any is skipped
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
