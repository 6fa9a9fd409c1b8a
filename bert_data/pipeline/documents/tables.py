"""Parquet and Arrow IPC files as tables of documents: one row a document, its text in one
column (``--text_field``, default ``text``), read through pyarrow.

A table is cut into *blocks*: a Parquet file's row groups, an Arrow file's record batches.  The
planner reads only their sizes (a Parquet footer; an Arrow stream, which has no footer, is read
once, a batch at a time, like a compressed file) and plans row ranges within a block as the
sources of slices, so several workers share one big file.  A reader never holds more than one
batch of ``READ_ROWS`` rows of the text column (Parquet is read with a bounded buffer, page by
page), and each worker thread keeps its last readers open: the ranges it reads of one file come
in file order, so it goes on where it stopped instead of decoding the file again from a block's
start.

Rows are documents in every case: a null, a non-string value (a column of another type, or a
union value) or an empty text is a counted skip with its reason, never an error.  A row's corpus
position is the file's first position plus its row number, as a JSON Lines file's lines are
numbered, so a table of the same documents in the same order gives the same shards.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple

from ... import storage
from .types import BINARY, EMPTY, NOT_STRING, NULL_TEXT, Document, InputError, Skip, Source, decode_text, one_line

TABLE_FORMATS = {".parquet": "parquet", ".arrow": "arrow", ".feather": "arrow"}
ARROW_FILE_MAGIC = b"ARROW1"
READ_ROWS = 128  # rows a Parquet read decodes at a time: bounds a reader's memory
PARQUET_BUFFER = 1 << 20  # Parquet pages are read through a buffer of this size, not a column chunk at once


def table_format_of(path: str) -> str:
    """"parquet", "arrow" or "" (not a table), from the file's extension."""
    return TABLE_FORMATS.get(os.path.splitext(path)[1].lower(), "")


def pyarrow_for(path: str):
    try:
        import pyarrow
        import pyarrow.ipc  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise InputError(f"{path}: Parquet and Arrow input needs pyarrow: pip install 'bert_data[parquet]'") from None
    return pyarrow


def _open(path: str, pa):
    """A pyarrow input file: memory-mapped when local (Arrow batches are then read without a
    copy), else fsspec's file object."""
    if storage.is_url(path):
        return pa.PythonFile(storage.open_read(path), mode="r")
    return pa.memory_map(path, "r")


@dataclass
class Block:
    rows: int
    text_bytes: int  # the text column's size in this block (uncompressed), to cut slices by size


@dataclass
class TableLayout:
    kind: str  # "parquet", "arrow_file" or "arrow_stream"
    blocks: List[Block]


def _missing_column(path: str, column: str, names: List[str]) -> InputError:
    shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
    return InputError(f"{path}: no column {column!r} (its columns: {shown or 'none'}); "
                      "name the text's column with --text_field")


def table_layout(path: str, column: str) -> TableLayout:
    """The blocks of a table file and the size of its text column in each; a missing column is
    an InputError naming the file and the columns it has."""
    pa = pyarrow_for(path)
    try:
        if table_format_of(path) == "parquet":
            return _parquet_layout(path, column, pa)
        with storage.open_read(path) as handle:
            is_file = handle.read(len(ARROW_FILE_MAGIC)) == ARROW_FILE_MAGIC
        return _arrow_layout(path, column, pa, is_file)
    except InputError:
        raise
    except (OSError, ValueError, pa.ArrowException) as error:
        kind = "Parquet" if table_format_of(path) == "parquet" else "Arrow IPC"
        raise InputError(f"{path}: cannot read {kind} file: {one_line(error)}") from None


def _parquet_layout(path: str, column: str, pa) -> TableLayout:
    source = _open(path, pa)
    try:
        parquet = pa.parquet.ParquetFile(source)
        names = parquet.schema_arrow.names
        if column not in names:
            raise _missing_column(path, column, names)
        metadata = parquet.metadata
        blocks = []
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            size = sum(row_group.column(c).total_uncompressed_size for c in range(row_group.num_columns)
                       if row_group.column(c).path_in_schema.split(".")[0] == column)
            blocks.append(Block(row_group.num_rows, size))
        return TableLayout("parquet", blocks)
    finally:
        source.close()


def _arrow_layout(path: str, column: str, pa, is_file: bool) -> TableLayout:
    source = _open(path, pa)
    try:
        reader = pa.ipc.open_file(source) if is_file else pa.ipc.open_stream(source)
        names = reader.schema.names
        if column not in names:
            raise _missing_column(path, column, names)
        index = names.index(column)
        batches = (reader.get_batch(i) for i in range(reader.num_record_batches)) if is_file else reader
        blocks = [Block(batch.num_rows, batch.column(index).nbytes) for batch in batches]
        if not is_file:
            check_stream_end(path)
        return TableLayout("arrow_file" if is_file else "arrow_stream", blocks)
    finally:
        source.close()


# An Arrow IPC stream ends with this marker: pyarrow reads a stream cut between two record
# batches as a shorter table without a word.  (Streams from before Arrow 0.15, whose messages
# do not begin with the continuation marker, end with 4 zero bytes: too weak to check.)
CONTINUATION = b"\xff\xff\xff\xff"
STREAM_END = CONTINUATION + b"\x00\x00\x00\x00"


def check_stream_end(path: str) -> None:
    size = storage.size(path)
    if storage.read_bytes(path, 0, len(CONTINUATION)) != CONTINUATION:
        return
    if storage.read_bytes(path, max(0, size - len(STREAM_END)), size) != STREAM_END:
        raise InputError(f"{path}: Arrow IPC stream has no end-of-stream marker (truncated)")


def row_ranges(layout: TableLayout, slice_docs: int, slice_bytes: int) -> Iterator[Tuple[int, int, int]]:
    """(first row, end row, estimated bytes) of ranges inside blocks, each at most ``slice_docs``
    rows and about ``slice_bytes`` of text: the sources of slices."""
    start = 0
    for block in layout.blocks:
        if block.rows:
            per_row = max(1.0, block.text_bytes / block.rows)
            step = max(1, min(slice_docs, int(slice_bytes // per_row)))
            for first in range(start, start + block.rows, step):
                end = min(first + step, start + block.rows)
                yield first, end, int((end - first) * per_row)
        start += block.rows


# ---------------------------------------------------------------------------- reading

class _Reader:
    """One open table and where it stands: rows are read forward from ``position``."""

    def __init__(self, path: str, kind: str, column: str, pa):
        self.pa, self.kind, self.column = pa, kind, column
        self.source = _open(path, pa)
        self.batches: Optional[Iterator] = None
        self.pending = None  # the rest of the last batch read, starting at ``position``
        self.position = 0
        self.block_starts = [0]  # row of each block's start (streams: unknown, never needed)
        if kind == "parquet":
            self.parquet = pa.parquet.ParquetFile(self.source, buffer_size=PARQUET_BUFFER)
            metadata = self.parquet.metadata
            for group in range(metadata.num_row_groups):
                self.block_starts.append(self.block_starts[-1] + metadata.row_group(group).num_rows)
        elif kind == "arrow_file":
            self.file = pa.ipc.open_file(self.source)
            for index in range(self.file.num_record_batches):  # headers only when memory-mapped
                self.block_starts.append(self.block_starts[-1] + self.file.get_batch(index).num_rows)
        self._start_block(0)

    def _block_of(self, row: int) -> int:
        import bisect

        return max(0, bisect.bisect_right(self.block_starts, row) - 1)

    def _start_block(self, block: int) -> None:
        """Read on from the start of ``block``."""
        if self.kind == "parquet":
            groups = range(block, len(self.block_starts) - 1)
            self.batches = self.parquet.iter_batches(batch_size=READ_ROWS, row_groups=groups, columns=[self.column],
                                                     use_threads=False)
        elif self.kind == "arrow_file":
            self.batches = (self.file.get_batch(i) for i in range(block, self.file.num_record_batches))
        else:
            self.batches = iter(self.pa.ipc.open_stream(self.source))
        self.position, self.pending = self.block_starts[block], None

    def rows(self, start: int, end: int) -> Iterator[Tuple[int, object]]:
        """(row, value) for rows ``start`` .. ``end``; values as Python objects (bytes for text)."""
        if self.kind != "arrow_stream":
            block = self._block_of(start)
            if start < self.position or self.block_starts[block] > self.position:
                self._start_block(block)  # backwards, or whole blocks ahead: skip them unread
        elif start < self.position:
            raise ValueError("an Arrow stream is read forwards only")
        while self.position < end:
            batch, self.pending = self.pending, None
            if batch is None:  # the text column of the next record batch
                record_batch = next(self.batches, None)
                if record_batch is None:
                    return
                batch = record_batch.column(0 if self.kind == "parquet" else
                                            record_batch.schema.names.index(self.column))
            first = self.position
            if first + len(batch) <= start:  # wholly before the range: skipped undecoded
                self.position += len(batch)
                continue
            lo, hi = max(0, start - first), min(len(batch), end - first)
            for offset, value in enumerate(_python_values(batch.slice(lo, hi - lo), self.pa)):
                yield first + lo + offset, value
            if hi < len(batch):
                self.pending = batch.slice(hi)
                self.position = first + hi
                return
            self.position = first + len(batch)

    def close(self) -> None:
        self.source.close()


def _python_values(array, pa) -> list:
    """Text as UTF-8 bytes (decoded later, with replacement, as text files are); other values as
    Python objects (a skip, unless null)."""
    kind = array.type
    if pa.types.is_dictionary(kind):
        array = array.dictionary_decode()
        kind = array.type
    if pa.types.is_string(kind) or pa.types.is_binary(kind):
        array = array.cast(pa.binary())
    elif pa.types.is_large_string(kind) or pa.types.is_large_binary(kind):
        array = array.cast(pa.large_binary())
    elif hasattr(pa.types, "is_string_view") and pa.types.is_string_view(kind):
        array = array.cast(pa.string()).cast(pa.binary())
    return array.to_pylist()


class _OpenReaders(threading.local):
    """Per thread (and per process: a forked child drops what it inherited), the last readers."""

    MAX_OPEN = 2

    def __init__(self):
        self.pid = os.getpid()
        self.readers: "OrderedDict[tuple, _Reader]" = OrderedDict()

    def get(self, key: tuple, kind: str) -> _Reader:
        """The reader of (path, column, stamp), opened if not held."""
        if self.pid != os.getpid():
            self.pid, self.readers = os.getpid(), OrderedDict()
        reader = self.readers.pop(key, None)
        if reader is None:
            path, column, _ = key
            reader = _Reader(path, kind, column, pyarrow_for(path))
        self.readers[key] = reader
        while len(self.readers) > self.MAX_OPEN:
            self.readers.popitem(last=False)[1].close()
        return reader

    def drop(self, key: tuple) -> None:
        reader = self.readers.pop(key, None)
        if reader is not None:
            reader.close()


_open_readers = _OpenReaders()


def read_table_rows(path: str, kind: str, column: str, start: int, end: int,
                    stamp: str = "") -> Iterator[Tuple[int, object]]:
    """(row, value) of rows ``start`` .. ``end`` of a table file (``stamp``: its identity when
    planned; an open reader of another is not reused)."""
    pa = pyarrow_for(path)
    key = (path, column, stamp)
    reader = _open_readers.get(key, kind)
    if kind == "arrow_stream" and start < reader.position:  # streams only go forward: reopen
        _open_readers.drop(key)
        reader = _open_readers.get(key, kind)
    try:
        yield from reader.rows(start, end)
    except (OSError, ValueError, pa.ArrowException) as error:
        _open_readers.drop(key)
        raise InputError(f"{path}: cannot read table rows {start}-{end}: {one_line(error)}") from None


# ---------------------------------------------------------------------------- planning and documents

def plan_table(planner, entry, column: str, split_code) -> None:
    """A table file's rows as documents: ranges of rows inside its blocks, added to the
    planner's slices, and each row's split (rows are named ``path#ROW``, as JSON lines are)."""
    layout = table_layout(entry.path, column)
    stamp = storage.stamp(entry.path)
    first = planner.next_doc
    for start, end, size in row_ranges(layout, planner.slice_docs, planner.slice_bytes):
        planner.add(Source(entry.path, entry.label, start, end, start, text_field=column, corpus_doc=first + start,
                           table=layout.kind, stamp=stamp), end - start, size)
    n_rows = sum(block.rows for block in layout.blocks)
    planner.new_documents(entry.path, bytearray(split_code(f"{entry.label}#{row}", first + row)
                                                for row in range(n_rows)))


def table_documents(source, skips: list):
    """The documents of a source's rows; a row without text is a skip with its reason (null, not
    a string, binary, empty), checked as a text file's or a JSON line's text is."""
    for row, value in read_table_rows(source.path, source.table, source.text_field, source.start, source.end,
                                      source.stamp):
        label, position = f"{source.label}#{row}", source.corpus_doc + row - source.start
        if isinstance(value, str):  # a union column's string member
            value = value.encode("utf-8", "surrogatepass")
        if value is None:
            reason = NULL_TEXT
        elif not isinstance(value, bytes):
            reason = NOT_STRING
        elif b"\x00" in value:
            reason = BINARY
        else:
            text, n_replaced, bad_line = decode_text(value)
            if text.strip():
                yield Document(label, text, n_replaced, bad_line, corpus_doc=position)
                continue
            reason = EMPTY
        skips.append(Skip(reason, label, position))
