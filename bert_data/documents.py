"""Stage 1: metadata files -> documents, grouped into units of work.

A *unit* is a fixed group of ``split_num`` documents.  It is the grain of parallelism, of
randomness (each unit has its own random stream) and of the random-next-sentence pool (as in
the Cerebras tool).  Units are planned in the parent before any work, from file names and, for
files holding many documents, from a scan of the separators; a unit records only byte ranges,
so planning a corpus of any size needs memory proportional to the number of units, and a
worker reads just its own bytes.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import re
from dataclasses import dataclass, field
from typing import Iterator, List, Optional, Sequence, Tuple

TRAIN = "train"
VAL = "val"

# How a unit's documents are assigned to splits.
SPLIT_BY_HASH = "hash"  # --val_fraction: a stable hash of (seed, document) decides
ALL_TRAIN = "train"
ALL_VAL = "val"


class InputError(ValueError):
    """Bad input found while planning; the message is one line naming the file."""


@dataclass(frozen=True)
class Source:
    """A byte range of one input file: whole documents, or one part of a large document."""

    path: str  # as opened (prefix joined)
    label: str  # as listed in the metadata file: names the document in messages and hashes
    start: int
    end: int  # exclusive; -1 means end of file
    first_doc: int = 0  # index in the file of the first document of the range
    continues: bool = False  # a later part of the document the previous source began


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


# ---------------------------------------------------------------------------- planning

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
) -> List[Unit]:
    """Group documents, in metadata order, into units of ``split_num`` documents, and each
    unit's documents into slices of at most ``slice_docs`` documents or about ``slice_bytes``."""
    units: List[Unit] = []
    current = Unit(first_index, split_mode)

    def close_current():
        nonlocal current
        if current.n_docs:
            units.append(current)
            current = Unit(first_index + len(units), split_mode)

    if not multiple_docs_in_single_file:
        for entry in entries:
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

    pattern = separator_pattern(separator_line)
    for entry in entries:
        size = os.path.getsize(entry.path)
        if size == 0:
            continue
        with open(entry.path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            range_start = range_end = None
            range_first = range_docs = 0

            def close_range():
                nonlocal range_start, range_docs
                if range_start is not None:
                    source = Source(entry.path, entry.label, range_start, range_end, range_first)
                    current.add(source, range_docs, range_end - range_start, slice_docs, slice_bytes)
                range_start, range_docs = None, 0

            for doc_number, (doc_start, doc_end) in enumerate(document_spans(buf, 0, size, pattern)):
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
MISSING = "file not found"


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
    """The documents of some sources, in order.  Empty and binary ones are recorded in ``skips``."""
    pattern = separator_pattern(separator_line) if multiple_docs_in_single_file else None
    for source in sources:
        with open(source.path, "rb") as handle:
            handle.seek(source.start)
            data = handle.read() if source.end < 0 else handle.read(source.end - source.start)
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


def _decoded(data: bytes, label: str, skips: List[Skip]) -> Optional[Document]:
    if b"\x00" in data:
        skips.append(Skip(BINARY, label))
        return None
    text, n_replaced = decode_text(data)
    if not text.strip():
        skips.append(Skip(EMPTY, label))
        return None
    return Document(label, text, n_replaced)


def is_validation_document(label: str, seed: int, val_fraction: float) -> bool:
    """A stable choice: depends only on the document's label and the seed, so adding documents
    to a corpus never moves others between train and validation."""
    if val_fraction <= 0:
        return False
    digest = hashlib.blake2b(f"{seed}\x00{label}".encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < val_fraction
