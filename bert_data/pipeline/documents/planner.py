"""The planner: metadata entries -> the corpus plan, its documents numbered in listed order and
cut into slices.

A slice records only byte (or row) ranges of input files, so planning a corpus of any size needs
memory proportional to the number of slices (and one byte a document, for its split), and a
worker reads just its own bytes.  What each kind of file holds is found as follows:

* plain text, one document a file: from its size (a large file is cut into parts, see
  ``text_files.document_parts``);
* many documents a file (``--multiple_docs_in_single_file``) or JSON Lines (a file named
  ``.jsonl``/``.json``/``.ndjson``, compressed or not, or every file with ``--text_field``): from a
  scan of its separators (line breaks, for JSON Lines), over a memory map, or over a stream for a
  URL;
* a compressed file (``.gz``, ``.bz2``, ``.xz``, ``.zst``): by decompressing it once, in chunks
  (never the whole file in memory), to find its documents or, one document a file, its parts;
  its ranges are offsets in the decompressed stream;
* a table (``.parquet``, ``.arrow``, ``.feather``): from its blocks' row counts (``tables``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import mmap
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from ... import storage
from .files import check_codecs, codec_errors, codec_name, how_to_read, open_decompressed
from .spans import (LINE_PATTERN, document_spans, group_span_blocks, line_span_blocks, separator_pattern,
                    stream_document_spans)
from .tables import plan_table, table_format_of
from .text_files import compressed_document_parts, document_parts, is_json_lines_name
from ...format.dataset_layout import VAL_CODE
from .types import DEFAULT_TEXT_FIELD, UTF8, CorpusPlan, InputError, MetadataEntry, Slice, Source, one_line

# (document label, corpus position) -> TRAIN_CODE or VAL_CODE; one with a ``same_for_all`` code
# (not None) gives it to every document.
SplitCode = Callable[[str, int], int]


def plan_corpus(
    entries: Sequence[MetadataEntry],
    split_of: SplitCode,
    val_entries: Sequence[MetadataEntry] = (),
    multiple_docs_in_single_file: bool = False,
    separator_line: Optional[str] = None,
    slice_docs: int = 1 << 14,
    slice_bytes: int = 1 << 20,
    part_bytes: int = 1 << 22,
    text_field: Optional[str] = None,
    encoding: str = UTF8,
) -> CorpusPlan:
    """Number the documents of ``entries`` and then ``val_entries``, in listed order, and cut
    them into slices.  ``split_of(label, position)`` gives the split code of a document of
    ``entries``; every document of ``val_entries`` is validation.

    A file named ``.jsonl``/``.json``/``.ndjson`` (compressed or not) is JSON Lines (one
    document a non-blank line), and with ``text_field`` every file that is not a table is.  A
    Parquet or Arrow file (by extension) is a table, one document a row.  The text is at the key,
    or in the column, ``text_field`` (default ``text``): one option names it in both formats.
    Text files are in ``encoding`` (see ``files.how_to_read``), compressed as their name or first
    bytes say."""
    check_codecs(list(entries) + list(val_entries))
    planner = CorpusPlanner(slice_docs, slice_bytes, part_bytes, multiple_docs_in_single_file, separator_line,
                            text_field, encoding)
    for entry in entries:
        planner.plan_file(entry, split_of)
    for entry in val_entries:
        planner.plan_file(entry, lambda label, position: VAL_CODE)
    return planner.plan()


def plan_corpus_groups(
    groups: Sequence[Tuple[Sequence[MetadataEntry], SplitCode, Sequence[MetadataEntry], Optional[str]]],
    multiple_docs_in_single_file: bool = False,
    separator_line: Optional[str] = None,
    encoding: str = UTF8,
    **sizes,
) -> Tuple[CorpusPlan, List[int]]:
    """As :func:`plan_corpus`, for a corpus of several sources (``--sources``), one after the
    other: each group is a source's ``(entries, split_of, val_entries, text_field)``.  Also
    returns where each source's documents start in the corpus, and its end (n + 1 positions)."""
    check_codecs([entry for entries, _, val_entries, _ in groups for entry in list(entries) + list(val_entries)])
    planner = CorpusPlanner(sizes.get("slice_docs", 1 << 14), sizes.get("slice_bytes", 1 << 20),
                            sizes.get("part_bytes", 1 << 22), multiple_docs_in_single_file, separator_line,
                            None, encoding)
    starts = []
    for entries, split_of, val_entries, text_field in groups:
        starts.append(planner.next_doc)
        planner.every_file_json_lines = text_field is not None
        planner.text_field = text_field or DEFAULT_TEXT_FIELD
        for entry in entries:
            planner.plan_file(entry, split_of)
        for entry in val_entries:
            planner.plan_file(entry, lambda label, position: VAL_CODE)
    starts.append(planner.next_doc)
    return planner.plan(), starts


def group_spans(spans: Iterable[Tuple[int, int]], max_docs: int,
                max_bytes: int) -> Iterator[Tuple[int, int, int, int]]:
    """(number of the first document, documents, start, end) of runs of consecutive documents,
    each run ending once it holds ``max_docs`` documents or ``max_bytes``."""
    start = first = end = number = 0
    open_run = False
    for number, (doc_start, doc_end) in enumerate(spans):
        if not open_run:
            start, first, open_run = doc_start, number, True
        end = doc_end
        if number + 1 - first >= max_docs or end - start >= max_bytes:
            yield first, number + 1 - first, start, end
            open_run = False
    if open_run:
        yield first, number + 1 - first, start, end


def size_of(entry: MetadataEntry) -> int:
    return entry.size if entry.size >= 0 else storage.size(entry.path)


class CorpusPlanner:
    """Cuts the corpus, in listed order, into slices of at most ``slice_docs`` documents or
    about ``slice_bytes``, and numbers its documents, file by file (``plan_file``)."""

    def __init__(self, slice_docs: int, slice_bytes: int, part_bytes: int = 1 << 22,
                 multiple_docs_in_single_file: bool = False, separator_line: Optional[str] = None,
                 text_field: Optional[str] = None, encoding: str = UTF8):
        self.slice_docs, self.slice_bytes, self.part_bytes = slice_docs, slice_bytes, part_bytes
        self.encoding = encoding
        self.every_file_json_lines = text_field is not None
        self.text_field = text_field or DEFAULT_TEXT_FIELD
        self.multiple_docs_in_single_file = multiple_docs_in_single_file
        self.separator = separator_pattern(separator_line)
        self.slices: List[Slice] = []
        self.splits = bytearray()  # the split code of each document, by corpus position
        self.docs_per_path: Dict[str, int] = {}

    def plan(self) -> CorpusPlan:
        return CorpusPlan(self.slices, np.frombuffer(bytes(self.splits), dtype=np.uint8), self.docs_per_path)

    @property
    def next_doc(self) -> int:
        """The corpus position of the next file's first document."""
        return len(self.splits)

    def new_documents(self, path: str, split_codes: Iterable[int]) -> None:
        """Number a file's documents (once its sources are added), with their split codes."""
        before = len(self.splits)
        self.splits.extend(split_codes)
        self.docs_per_path[path] = self.docs_per_path.get(path, 0) + len(self.splits) - before

    def add(self, source: Source, n_docs: int, n_bytes: int) -> None:
        """Add a source to the last slice, or to a new one if it would overflow."""
        current = self.slices[-1] if self.slices else None
        if (current is None or current.n_docs + n_docs > self.slice_docs
                or current.n_bytes + n_bytes > self.slice_bytes):
            current = Slice(len(self.slices), source.corpus_doc)
            self.slices.append(current)
        current.sources.append(source)
        current.n_docs += n_docs
        current.n_bytes += n_bytes

    # ------------------------------------------------------------------ one file

    def plan_file(self, entry: MetadataEntry, split_code: SplitCode) -> None:
        if table_format_of(entry.path):
            try:
                plan_table(self, entry, self.text_field, split_code)
            except InputError as error:
                raise InputError(f"{entry.metadata_file}:{entry.line_number}: {error}") from None
            return
        try:
            codec, encoding = how_to_read(entry.path, self.encoding)
        except InputError as error:
            raise InputError(f"{entry.metadata_file}:{entry.line_number}: {error}") from None
        except codec_errors() as error:
            raise InputError(f"{entry.metadata_file}:{entry.line_number}: cannot read {entry.path}: "
                             f"{one_line(error)}") from None
        if self.every_file_json_lines or is_json_lines_name(entry.path):
            self.plan_many_documents(entry, split_code, LINE_PATTERN, self.text_field, codec, encoding)
        elif self.multiple_docs_in_single_file:
            self.plan_many_documents(entry, split_code, self.separator, None, codec, encoding)
        else:
            self.plan_one_document(entry, split_code, codec, encoding)

    def plan_many_documents(self, entry: MetadataEntry, split_code: SplitCode, pattern,
                            json_key: Optional[str], codec: str = "", encoding: str = "") -> None:
        """A file of many documents, ended by ``pattern`` (JSON Lines: line breaks, the text at
        ``json_key``), scanned once: over a memory map, or as a stream (compressed or transcoded,
        or a URL)."""
        if codec:
            try:
                with open_decompressed(entry.path, codec) as stream:
                    self.add_documents(entry, stream_document_spans(stream, pattern), codec, json_key, split_code,
                                       encoding)
            except codec_errors() as error:
                raise _cannot_read(entry, codec, error) from None
        elif storage.is_url(entry.path):  # scanned as a stream: the same spans as over a memory map
            if size_of(entry):
                with storage.open_read(entry.path) as stream:
                    self.add_documents(entry, stream_document_spans(stream, pattern), "", json_key, split_code,
                                       encoding)
        else:
            size = size_of(entry)
            if size:
                with open(entry.path, "rb") as handle, \
                        mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                    if pattern is LINE_PATTERN:  # (a block of lines at a time: no Python a document)
                        groups = group_span_blocks(line_span_blocks(buf, 0, size), self.slice_docs, self.slice_bytes)
                        self.add_documents(entry, None, "", json_key, split_code, encoding, groups)
                    else:
                        self.add_documents(entry, document_spans(buf, 0, size, pattern), "", json_key, split_code,
                                           encoding)

    def plan_one_document(self, entry: MetadataEntry, split_code: SplitCode, codec: str = "",
                          encoding: str = "") -> None:
        """One document a file; a large one in parts, each a slice of its own.  A compressed file
        is decompressed once here, a chunk at a time, to find its parts (offsets in its
        decompressed stream): a worker then holds one part of it, never the whole text, and a
        file that is not what its name says, or is cut short, fails before any work."""
        position = self.next_doc
        if codec:
            try:
                parts = compressed_document_parts(entry.path, codec, self.part_bytes)
            except codec_errors() as error:
                raise _cannot_read(entry, codec, error) from None
        else:
            parts = document_parts(entry.path, size_of(entry), self.part_bytes)
        for number, (start, end) in enumerate(parts):
            last = number == len(parts) - 1
            # Only the first part counts as a document; a compressed file's last part reads on to
            # the end of its stream, which then closes.
            self.add(Source(entry.path, entry.label, start, -1 if codec and last else end, 0, continues=number > 0,
                            codec=codec, encoding=encoding, corpus_doc=position, in_parts=len(parts) > 1),
                     0 if number else 1, end - start)
        self.new_documents(entry.path, [split_code(entry.label, position)])

    def add_documents(self, entry: MetadataEntry, spans: Optional[Iterable[Tuple[int, int]]], codec: str,
                      json_key: Optional[str], split_code: SplitCode, encoding: str = "",
                      groups: Optional[Iterable[Tuple[int, int, int, int]]] = None) -> None:
        """A file of many documents (at ``spans``, or already in ``groups`` as ``group_spans``
        makes them): ranges of whole documents, each ending when its slice is full."""
        position = self.next_doc
        codes = bytearray()  # one byte a document: files may hold millions
        same = getattr(split_code, "same_for_all", None)  # (no validation split: no label to make a document)
        for first, n_docs, start, end in group_spans(spans, self.slice_docs, self.slice_bytes) if groups is None \
                else groups:
            self.add(Source(entry.path, entry.label, start, end, first, codec=codec, text_field=json_key,
                            encoding=encoding, corpus_doc=position + first), n_docs, end - start)
            if same is not None:
                codes += bytes((same,)) * n_docs
            else:
                codes += bytes(split_code(f"{entry.label}#{number}", position + number)
                               for number in range(first, first + n_docs))
        if codec and len(codes):  # the file's last range reads on to the end of the stream, then closes it
            last = self.slices[-1].sources
            last[-1] = dataclasses.replace(last[-1], end=-1)
        self.new_documents(entry.path, codes)


def _cannot_read(entry: MetadataEntry, codec: str, error: BaseException) -> InputError:
    return InputError(f"{entry.metadata_file}:{entry.line_number}: cannot read {codec_name(codec)} file "
                      f"{entry.path}: {one_line(error)}")


def is_validation_document(label: str, seed: int, val_fraction: float) -> bool:
    """A stable choice: depends only on the document's label and the seed, so adding documents
    to a corpus never moves others between train and validation."""
    if val_fraction <= 0:
        return False
    digest = hashlib.blake2b(f"{seed}\x00{label}".encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < val_fraction
