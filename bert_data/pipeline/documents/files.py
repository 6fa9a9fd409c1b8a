"""The bytes of input files: a file's codec (from its extension), its decompressed stream, and
the byte range a document source names, read plain or decompressed.

A compressed stream cannot be cut into byte ranges, so the ranges of a compressed file are
offsets in its *decompressed* stream.  A reader decompresses from the start of the file and
discards up to its range; each worker thread keeps its last streams open, so the ranges it
reads of one file, which come in file order, continue the same stream instead of starting
over.  The planner ends a file's last range at the end of the stream (-1), so reading it closes
the stream.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
import threading
import zlib
from collections import OrderedDict
from typing import BinaryIO, Sequence, Tuple

from ... import storage
from .types import InputError, MetadataEntry, Source, one_line
from .zstd_frames import FrameCheckedFile, TruncatedZstd

# Chosen by the document file's extension (never for metadata files).
CODECS = {".gz": "gz", ".bz2": "bz2", ".xz": "xz", ".zst": "zst", ".zstd": "zst"}
CODEC_NAMES = {"gz": "gzip", "bz2": "bzip2", "xz": "xz", "zst": "zstd"}
READ_CHUNK = 1 << 22  # decompressed bytes a read: large reads keep decompression at C speed


def compression_of(path: str) -> str:
    """The codec of a document file from its extension: "" for plain text."""
    return CODECS.get(os.path.splitext(path)[1].lower(), "")


def _zstandard():
    try:
        import zstandard
    except ImportError:
        return None
    return zstandard


class _ClosingStream:
    """A decompressed stream over a file object it opened: closing it closes both (gzip, bz2
    and lzma leave a file object they were given open)."""

    def __init__(self, stream, raw):
        self.stream, self.raw = stream, raw

    def read(self, size: int = -1) -> bytes:
        return self.stream.read(size)

    def close(self) -> None:
        try:
            self.stream.close()
        finally:
            self.raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_decompressed(path: str, codec: str) -> BinaryIO:
    """A binary stream of the decompressed bytes (multi-member/-stream/-frame files read whole)."""
    if storage.is_url(path) and codec in ("gz", "bz2", "xz"):
        raw = storage.open_read(path)
        opener = {"gz": gzip.GzipFile, "bz2": bz2.BZ2File, "xz": lzma.LZMAFile}[codec]
        try:
            return _ClosingStream(opener(fileobj=raw, mode="rb") if codec == "gz" else opener(raw, "rb"), raw)
        except BaseException:
            raw.close()
            raise
    if codec == "gz":
        return gzip.GzipFile(path, "rb")
    if codec == "bz2":
        return bz2.BZ2File(path, "rb")
    if codec == "xz":
        return lzma.LZMAFile(path, "rb")
    if codec == "zst":
        zstandard = _zstandard()
        if zstandard is None:
            raise InputError(f"{path}: zstd-compressed input needs the zstandard package: pip install zstandard")
        # (zstandard reads a file cut inside a frame as a shorter text: the frames are followed)
        return zstandard.ZstdDecompressor().stream_reader(FrameCheckedFile(storage.open_read(path)), read_size=1 << 20,
                                                          read_across_frames=True, closefd=True)
    raise ValueError(f"unknown codec {codec!r}")


def codec_errors() -> tuple:
    """What a corrupt or truncated compressed file raises while being read."""
    errors = [OSError, EOFError, zlib.error, lzma.LZMAError, TruncatedZstd]
    zstandard = _zstandard()
    if zstandard is not None:
        errors.append(zstandard.ZstdError)
    return tuple(errors)


def check_codecs(entries: Sequence[MetadataEntry]) -> None:
    """Fail at once, naming the file, when a .zst file is listed and zstandard is missing."""
    if _zstandard() is not None:
        return
    for entry in entries:
        if compression_of(entry.path) == "zst":
            raise InputError(f"{entry.metadata_file}:{entry.line_number}: {entry.path} is zstd-compressed and the "
                             f"zstandard package is missing: pip install zstandard")


def read_exactly(stream: BinaryIO, size: int) -> bytes:
    """``size`` bytes (fewer at the end of the stream), in large reads."""
    parts = []
    while size > 0:
        chunk = stream.read(min(size, READ_CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        size -= len(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def read_to_end(stream: BinaryIO) -> bytes:
    parts = []
    while True:
        chunk = stream.read(READ_CHUNK)
        if not chunk:
            break
        parts.append(chunk)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def skip_bytes(stream: BinaryIO, size: int) -> None:
    """Decompress and discard ``size`` bytes, one chunk in memory at a time."""
    while size > 0:
        chunk = stream.read(min(size, READ_CHUNK))
        if not chunk:
            break
        size -= len(chunk)


class _OpenStreams(threading.local):
    """Per thread (and per process: a forked child drops what it inherited), the last few
    decompressed streams and where they stand, so consecutive ranges of a file are read
    without decompressing the file again from its start."""

    MAX_OPEN = 2

    def __init__(self):
        self.pid = os.getpid()
        self.streams: "OrderedDict[Tuple[str, str], list]" = OrderedDict()

    def read(self, source: Source) -> bytes:
        if self.pid != os.getpid():  # inherited through fork: the parent's file offsets
            self.pid, self.streams = os.getpid(), OrderedDict()
        key = (source.path, source.codec)
        held = self.streams.pop(key, None)
        if held is not None and held[1] > source.start:
            held[0].close()
            held = None
        stream, position = held if held is not None else (open_decompressed(source.path, source.codec), 0)
        try:
            skip_bytes(stream, source.start - position)
            if source.end < 0:
                data = read_to_end(stream)
                stream.close()
                return data
            data = read_exactly(stream, source.end - source.start)
        except BaseException:
            stream.close()
            raise
        self.streams[key] = [stream, source.end]
        while len(self.streams) > self.MAX_OPEN:
            self.streams.popitem(last=False)[1][0].close()
        return data


_open_streams = _OpenStreams()


def read_range(source: Source) -> bytes:
    """The bytes of a source's range (decompressed, for a compressed file)."""
    if source.codec:
        try:
            return _open_streams.read(source)
        except InputError:
            raise
        except codec_errors() as error:
            codec = CODEC_NAMES[source.codec]
            raise InputError(f"{source.path}: cannot read {codec} file: {one_line(error)}") from None
    if storage.is_url(source.path):
        try:
            return storage.read_bytes(source.path, source.start, None if source.end < 0 else source.end)
        except OSError as error:
            raise InputError(f"{source.path}: cannot read: {one_line(error)}") from None
    with open(source.path, "rb") as handle:
        handle.seek(source.start)
        return handle.read() if source.end < 0 else handle.read(source.end - source.start)


class RangeBuffer:
    """What ``text_files.document_parts`` asks of a memory map, over a URL: reads of the byte
    ranges it looks at (a part's last quarter), never the whole file."""

    SEARCH_CHUNK = 1 << 20

    def __init__(self, path: str, size: int):
        self.path, self.size = path, size
        self.handle = storage.open_read(path)

    def _read(self, start: int, end: int) -> bytes:
        self.handle.seek(start)
        return self.handle.read(max(0, min(end, self.size) - start))

    def rfind(self, sub: bytes, start: int, end: int) -> int:
        found = self._read(start, end).rfind(sub)
        return -1 if found < 0 else start + found

    def __getitem__(self, index: int) -> int:
        return self._read(index, index + 1)[0]

    def white_space_end(self, start: int) -> int:
        """Just after the first space, tab or line break from ``start`` (``start`` if none)."""
        position = start
        while position < self.size:
            chunk = self._read(position, position + self.SEARCH_CHUNK)
            match = re.search(rb"[ \t\n]", chunk)
            if match:
                return position + match.end()
            position += len(chunk)
        return start

    def close(self) -> None:
        self.handle.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
