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
import codecs
import functools
import gzip
import lzma
import os
import re
import threading
import zlib
from collections import OrderedDict
from typing import BinaryIO, Sequence, Tuple

from ... import storage
from .types import AUTO, UTF8, InputError, MetadataEntry, Source, one_line
from .zstd_frames import FrameCheckedFile, TruncatedZstd

# Chosen by the document file's extension (never for metadata files).
CODECS = {".gz": "gz", ".bz2": "bz2", ".xz": "xz", ".zst": "zst", ".zstd": "zst"}
CODEC_NAMES = {"gz": "gzip", "bz2": "bzip2", "xz": "xz", "zst": "zstd"}
READ_CHUNK = 1 << 22  # decompressed bytes a read: large reads keep decompression at C speed


def compression_of(path: str) -> str:
    """The codec of a document file from its extension: "" for plain text."""
    return CODECS.get(os.path.splitext(path)[1].lower(), "")


# ---------------------------------------------------------------------------- what a file's bytes are

# A compressed file is recognised by its first bytes whatever its name (a .gz named .txt).
_MAGIC = ((b"\x1f\x8b", "gz"), (b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zst"))
_BZ2_MAGIC = re.compile(rb"BZh[1-9](?:\x31\x41\x59\x26\x53\x59|\x17\x72\x45\x38\x50\x90)")
# Byte-order marks of the encodings that are not ASCII's superset (UTF-32's first: FF FE 00 00).
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))
HEAD_BYTES = 10  # enough for every magic number and byte-order mark
DETECT_BYTES = 1 << 16  # what --input_encoding auto looks at, from a file's (decompressed) start
TRANSCODED = "+"  # in a source's codec: "gz+utf-16", "+utf-16" (see types.Source)
UNDECODABLE = "bert_data.undecodable"  # the error handler of transcoded text: an invalid UTF-8 byte a fault


def _undecodable(error: UnicodeDecodeError):
    return "\udcff", error.end  # written as the byte 0xFF (surrogateescape): counted as UTF-8 is, when read


codecs.register_error(UNDECODABLE, _undecodable)


def sniffed_compression(head: bytes) -> str:
    """The codec whose magic number ``head`` starts with ("" if none)."""
    for magic, codec in _MAGIC:
        if head.startswith(magic):
            return codec
    return "bz2" if _BZ2_MAGIC.match(head) else ""


def ascii_superset(encoding: str) -> bool:
    """Text in ``encoding`` has ASCII's bytes for ASCII's characters (latin-1, cp1252, shift_jis...):
    its line breaks and spaces are where the planner looks for them, so it is decoded once, a
    document at a time.  Otherwise (UTF-16, UTF-32, EBCDIC...) it is read transcoded to UTF-8."""
    sample = "\n\t\r abcXYZ019+-#[]{}\"'\\/:"
    try:
        return sample.encode(encoding) == sample.encode("ascii") and \
            sample.encode("ascii").decode(encoding) == sample
    except (UnicodeError, LookupError):
        return False


def how_to_read(path: str, requested: str) -> Tuple[str, str]:
    """(codec, encoding) of a document file (see ``types.Source``): compressed as its name says,
    else as its first bytes say (local files); its text in ``requested`` (``UTF8``, a codec's
    name, or ``AUTO``: detected from its first ``DETECT_BYTES``), or UTF-16/UTF-32 when it starts
    with their byte-order mark and no other encoding was asked for."""
    codec = compression_of(path)
    url = storage.is_url(path)
    size = DETECT_BYTES if requested == AUTO else HEAD_BYTES
    head = None
    if not codec and not url:  # one read of the file's start (raw: a corpus may have millions of files)
        handle = os.open(path, os.O_RDONLY)
        try:
            head = os.read(handle, size)
        finally:
            os.close(handle)
        codec = sniffed_compression(head) if head[:1] in _MAGIC_FIRST else ""
    encoding = requested
    if requested in (UTF8, AUTO) and (requested == AUTO or not url):
        if head is None or codec:
            head = _head(path, codec, size)
        bom = head[:1] in _BOM_FIRST and next((name for bom, name in _BOMS if head.startswith(bom)), None)
        encoding = bom or (detected_encoding(head) if requested == AUTO else UTF8)
    return _read_as(codec, encoding)


_MAGIC_FIRST = {magic[:1] for magic, _ in _MAGIC} | {b"B"}
_BOM_FIRST = {bom[:1] for bom, _ in _BOMS}


@functools.lru_cache(maxsize=256)
def _read_as(codec: str, encoding: str) -> Tuple[str, str]:
    encoding = codecs.lookup(encoding).name
    if encoding == UTF8:
        return codec, ""
    if ascii_superset(encoding):
        return codec, encoding
    return codec + TRANSCODED + encoding, ""


def _head(path: str, codec: str, size: int) -> bytes:
    if codec:
        try:
            with open_decompressed(path, codec) as stream:
                return read_exactly(stream, size)
        except codec_errors() as error:
            raise InputError(f"cannot read {CODEC_NAMES[codec]} file {path}: {one_line(error)}") from None
    if storage.is_url(path):
        return storage.read_bytes(path, 0, size)
    with open(path, "rb") as handle:
        return handle.read(size)


# charset-normalizer's names, the most widespread first: what a tie between them resolves to.
WIDESPREAD = ("utf_8", "cp1252", "latin_1", "iso8859_15")


def detected_encoding(head: bytes) -> str:
    """``--input_encoding auto``: UTF-8 if ``head`` is (a character cut at its end allowed), else
    what charset-normalizer finds, the most widespread of those it cannot tell apart (cp1252 before
    cp1250 for French text without the letters that differ); UTF-8 if it finds nothing: bytes
    are then replaced, and reported."""
    try:
        codecs.getincrementaldecoder(UTF8)().decode(head, final=False)
        return UTF8
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    matches = list(from_bytes(head))
    if not matches:
        return UTF8
    best = matches[0]
    # Encodings the sample cannot tell apart (as good on both measures): the most widespread.
    tied = {match.encoding for match in matches if (match.chaos, match.coherence) == (best.chaos, best.coherence)}
    return next((name for name in WIDESPREAD if name in tied), best.encoding)


def codec_name(codec: str) -> str:
    """A source's codec for messages: "gzip", "UTF-16 text", "gzip (UTF-16 text)"."""
    compression, _, encoding = codec.partition(TRANSCODED)
    text = f"{encoding} text" if encoding else ""
    if not compression:
        return text
    return f"{CODEC_NAMES[compression]} ({text})" if text else CODEC_NAMES[compression]


class _Transcoded:
    """The UTF-8 bytes of a stream of text in another encoding, decoded as they are read; a byte
    that cannot be decoded becomes an invalid UTF-8 byte (0xFF), replaced and counted when read."""

    def __init__(self, raw, encoding: str):
        self.raw = raw
        self.decoder = codecs.getincrementaldecoder(encoding)(errors=UNDECODABLE)
        self.pending = bytearray()
        self.at_end = False

    def read(self, size: int = -1) -> bytes:
        while (size < 0 or len(self.pending) < size) and not self.at_end:
            chunk = self.raw.read(READ_CHUNK)
            self.at_end = not chunk
            self.pending += self.decoder.decode(chunk, final=self.at_end).encode(UTF8, "surrogateescape")
        if size < 0 or size >= len(self.pending):
            data, self.pending = bytes(self.pending), bytearray()
            return data
        data = bytes(self.pending[:size])
        del self.pending[:size]
        return data

    def close(self) -> None:
        self.raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
    """A binary stream of the decompressed bytes (multi-member/-stream/-frame files read whole),
    transcoded to UTF-8 when ``codec`` says so (``"gz+utf-16"``, ``"+utf-16"``)."""
    codec, transcoded, encoding = codec.partition(TRANSCODED)
    if transcoded:
        raw = open_decompressed(path, codec) if codec else storage.open_read(path)
        return _Transcoded(raw, encoding)
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
            raise InputError(f"{source.path}: cannot read {codec_name(source.codec)} file: {one_line(error)}") from None
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
