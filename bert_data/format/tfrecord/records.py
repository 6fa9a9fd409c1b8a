"""TFRecord framing without TensorFlow.

Each record on disk is::

    uint64 LE  length
    uint32 LE  masked_crc32c(length bytes)
    bytes      data[length]
    uint32 LE  masked_crc32c(data)

with ``masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8  (mod 2**32)``.  This is exactly
what ``tf.io.TFRecordWriter`` writes (uncompressed) and ``tf.data.TFRecordDataset`` reads.

Compressed files (``compression="gzip"`` or ``"zlib"``) are that same byte stream compressed as a
whole, as ``tf.io.TFRecordOptions(compression_type="GZIP"/"ZLIB")`` writes it: they are
decompressed while streaming (bounded memory).  A gzip file may hold several concatenated gzip
members (TensorFlow reads them all); a zlib file is one zlib stream (TensorFlow stops at its end,
so data after it is reported as corruption).  ``compression="auto"`` sniffs the first bytes: a
valid TFRecord length header means uncompressed, ``1f 8b`` gzip, a zlib header (``78 xx``) zlib.
"""

from __future__ import annotations

import io
import os
import struct
import zlib
from typing import BinaryIO, Dict, Iterator, Optional, Sequence, Union

import crc32c as _crc32c_mod
import numpy as np

__all__ = [
    "masked_crc32c",
    "frame_records",
    "CorruptRecordError",
    "NotTFRecordError",
    "iter_records",
    "count_records",
    "CompressionError",
    "COMPRESSIONS",
    "normalize_compression",
    "detect_compression",
    "file_format",
    "open_records",
]

_crc32c = _crc32c_mod.crc32c
_MASK_DELTA = 0xA282EAD8
_U32 = 0xFFFFFFFF

_pack_q = struct.Struct("<Q").pack
_pack_i = struct.Struct("<I").pack
_unpack_qi = struct.Struct("<QI").unpack
_unpack_i = struct.Struct("<I").unpack
_HEADER = 12  # uint64 length + uint32 length CRC
_FOOTER = 4  # uint32 data CRC

PathOrFile = Union[str, "os.PathLike[str]", BinaryIO]


def masked_crc32c(data) -> int:
    """The masked CRC32C TFRecord stores for ``data`` (any bytes-like object)."""
    crc = _crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & _U32) + _MASK_DELTA) & _U32


# Headers depend only on the record length, and a shard has few distinct lengths: cache them.
_header_cache: Dict[int, bytes] = {}


def _header(n: int) -> bytes:
    h = _header_cache.get(n)
    if h is None:
        lb = _pack_q(n)
        h = lb + _pack_i(masked_crc32c(lb))
        if len(_header_cache) < 65536:
            _header_cache[n] = h
    return h


def frame_header(lengths) -> "np.ndarray":
    """The frame headers (length, its masked CRC) of records of ``lengths`` bytes, as an
    ``(n, 12)`` uint8 matrix (a batch has few distinct lengths: each is computed once)."""
    distinct, which = np.unique(np.asarray(lengths, dtype=np.int64), return_inverse=True)
    headers = np.frombuffer(b"".join([_header(length) for length in distinct.tolist()]), dtype=np.uint8)
    return headers.reshape(-1, _HEADER)[which.reshape(-1)]


def masked_crc32c_batch(data, starts, ends) -> "np.ndarray":
    """The masked CRC of each record ``data[starts[i]:ends[i]]`` (``data``: any contiguous
    bytes-like object, not copied), as uint64."""
    view = memoryview(data).cast("B")
    crc = _crc32c
    c = np.array([crc(view[a:b]) for a, b in zip(np.asarray(starts).tolist(), np.asarray(ends).tolist())],
                 dtype=np.uint64)
    return ((((c >> np.uint64(15)) | (c << np.uint64(17))) & np.uint64(_U32)) + np.uint64(_MASK_DELTA)) & np.uint64(_U32)


def frame_records(records: Sequence[bytes]) -> bytes:
    """The TFRecord framing of ``records``, concatenated (what a writer would append)."""
    parts = []
    append = parts.append
    cache_get = _header_cache.get
    crc = _crc32c
    pack_i = _pack_i
    for rec in records:
        n = len(rec)
        h = cache_get(n)
        if h is None:
            h = _header(n)
        c = crc(rec)
        append(h)
        append(rec)
        append(pack_i(((((c >> 15) | (c << 17)) & _U32) + _MASK_DELTA) & _U32))
    return b"".join(parts)


def _display_name(path_or_file) -> str:
    if isinstance(path_or_file, (str, bytes, os.PathLike)):
        return os.fsdecode(path_or_file)
    name = getattr(path_or_file, "name", None)
    return str(name) if isinstance(name, (str, bytes)) and name != "" else "<stream>"


class CorruptRecordError(ValueError):
    """A TFRecord file is truncated or fails a CRC check.

    ``str(err)`` is one line: ``"<path>: record <index> at byte <offset>: <reason>"``; ``offset``
    is where the record's length header starts.

    For a compressed file (``compression`` set) the offset counts bytes of the decompressed
    stream, and the message says so: ``"<path>: record <index> at uncompressed byte <offset>:
    <reason>"``.
    """

    def __init__(self, path: str, record_index: int, offset: int, reason: str,
                 compression: Optional[str] = None):
        self.path = path
        self.record_index = record_index
        self.offset = offset
        self.reason = reason
        self.compression = compression
        where = "uncompressed byte" if compression else "byte"
        super().__init__(f"{path}: record {record_index} at {where} {offset}: {reason}")

    def __reduce__(self):  # picklable across multiprocessing
        return (type(self), (self.path, self.record_index, self.offset, self.reason, self.compression))


class NotTFRecordError(CorruptRecordError):
    """The file's first bytes are no TFRecord header at all: another kind of file (text, Parquet...)
    or a shard corrupt from its first byte.  ``str(err)``: ``"<path> is not a TFRecord file
    (<what its first bytes are>); <what to do>"``."""

    def __init__(self, path: str, record_index: int = 0, offset: int = 0, reason: str = "",
                 compression: Optional[str] = None):
        super().__init__(path, record_index, offset, reason, compression)
        content = "its first bytes, decompressed," if compression else "its first bytes"
        self.args = (f"{path} is not a TFRecord file ({content} {reason}); give the shards create_tfrecords "
                     "wrote, or their output directory",)


def describe_start(head: bytes) -> str:
    """What the first bytes of a file that is not TFRecord are, for :class:`NotTFRecordError`."""
    if head.startswith(b"PAR1"):
        return "are a Parquet file's"
    if head.startswith(b"\x89HDF"):
        return "are an HDF5 file's"
    text = head.decode("utf-8", "replace")
    if "\ufffd" not in text[:-3] and "\x00" not in text:
        line = text.strip().split("\n")[0]
        return f"are text: {line[:40] + '...' if len(line) > 40 else line!r}"
    return f"{head[:12].hex(' ')} are no record header: another kind of file, or a shard corrupt from its start"


# --------------------------------------------------------------------------------------------
# Compression
# --------------------------------------------------------------------------------------------

COMPRESSIONS = (None, "gzip", "zlib")
_COMPRESSION_NAMES = {None: None, "": None, "none": None, "gzip": "gzip", "gz": "gzip", "zlib": "zlib"}
_COMPRESSED_CHUNK = 1 << 16
_FEED = 1 << 13  # compressed bytes per zlib call


class CompressionError(ValueError):
    """The compressed stream of a file is corrupt or truncated (raised while reading a stream from
    :func:`open_records`; :func:`iter_records` turns it into a :class:`CorruptRecordError`)."""


def normalize_compression(compression) -> Optional[str]:
    """``None``/``""``/``"none"`` -> None; ``"gzip"``/``"GZIP"``/``"gz"`` -> ``"gzip"``; ``"zlib"``/
    ``"ZLIB"`` -> ``"zlib"``; ``"auto"`` is returned as is.  Anything else raises ValueError."""
    if isinstance(compression, str):
        key = compression.strip().lower()
        if key == "auto":
            return "auto"
    else:
        key = compression
    try:
        return _COMPRESSION_NAMES[key]
    except (KeyError, TypeError):
        raise ValueError(f"compression must be None, 'gzip', 'zlib' or 'auto', got {compression!r}") from None


def _format_of(head: bytes) -> Optional[str]:
    if len(head) >= _HEADER and _unpack_qi(head[:_HEADER])[1] == masked_crc32c(head[:8]):
        return "tfrecord"  # a valid TFRecord length header
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if len(head) >= 2 and head[0] & 0x0F == 8 and head[0] >> 4 <= 7 and (head[0] << 8 | head[1]) % 31 == 0:
        return "zlib"
    return None


def file_format(path_or_file) -> Optional[str]:
    """What a file starts with: ``"tfrecord"`` (a valid TFRecord length header), ``"gzip"``
    (``1f 8b``), ``"zlib"`` (a zlib header: ``78 01``, ``78 9c``, ``78 da``...) or None (empty or
    unrecognised).  A file object must support ``peek`` (e.g. a buffered file); it is not consumed."""
    if isinstance(path_or_file, (str, bytes, os.PathLike)):
        with open(path_or_file, "rb") as handle:
            return _format_of(handle.read(_HEADER))
    peek = getattr(path_or_file, "peek", None)
    if peek is None:
        raise ValueError(f"{_display_name(path_or_file)}: cannot detect the compression of a stream "
                         f"without peek(): pass compression=None, 'gzip' or 'zlib'")
    return _format_of(peek(_HEADER)[:_HEADER])


def detect_compression(path_or_file) -> Optional[str]:
    """The compression of a TFRecord file from its first bytes (:func:`file_format`): ``"gzip"``,
    ``"zlib"``, or None (a valid TFRecord length header, or an empty or unrecognised file)."""
    found = file_format(path_or_file)
    return found if found in ("gzip", "zlib") else None


def _resolved_compression(compression, path_or_file) -> Optional[str]:
    """``compression`` normalised, with ``"auto"`` replaced by what the file's first bytes say."""
    if compression is None:
        return None
    compression = normalize_compression(compression)
    return detect_compression(path_or_file) if compression == "auto" else compression


class _Decompressor(io.RawIOBase):
    """The decompressed bytes of a gzip (one or more members) or zlib (one stream) file, read
    incrementally; errors raise :class:`CompressionError`.

    Compressed input goes to zlib in pieces of ``_FEED`` bytes and output is handed on as soon
    as there is some; when zlib fails on a piece, what it inflated before the damage is still
    handed on (from a copy of its state) before the error is raised: damage is reported at the
    record it hits (by zlib, or by the CRC of the garbage record it inflates to), not at the
    first record of the piece."""

    def __init__(self, fileobj, compression: str, name: str, owns_file: bool):
        super().__init__()
        self._file = fileobj
        self._owns_file = owns_file
        self._gzip = compression == "gzip"
        self._kind = compression
        self.name = name
        self._d = self._new()
        self._pending = b""  # compressed bytes read from the file, not yet given to zlib
        self._offset = 0  # ... from this offset
        self._tail = b""  # given to zlib but not consumed (output limit reached)
        self._pos = 0  # decompressed bytes delivered
        self._started = False
        self._done = False
        self._salvaged = b""  # output recovered before a zlib error, not yet delivered
        self._error: Optional[CompressionError] = None  # raised once _salvaged is delivered

    def _new(self):
        return zlib.decompressobj(31 if self._gzip else 15)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._pos

    def _rest(self) -> bytes:
        """Compressed input not yet given to zlib (reading more from the file if there is none)."""
        if self._offset >= len(self._pending):
            self._pending, self._offset = self._file.read(_COMPRESSED_CHUNK), 0
            if self._pending:
                self._started = True
        return self._pending[self._offset:]

    def _end_of_stream(self) -> bool:
        """After a gzip member or the zlib stream: True at the end of the file, else start the
        next gzip member."""
        rest = self._d.unused_data + self._rest()
        if not self._gzip:
            if rest or self._file.read(1):
                raise CompressionError("data after the end of the zlib stream (TensorFlow stops reading there)")
            return True
        if len(rest) == 1:
            rest += self._file.read(_COMPRESSED_CHUNK)
        if not rest:
            return True
        if rest[:2] != b"\x1f\x8b":
            raise CompressionError("data after the end of a gzip member is not another gzip member")
        self._d = self._new()  # concatenated members: TensorFlow reads them all
        self._pending, self._offset = rest, 0
        return False

    def _deliver(self, b, out) -> int:
        b[: len(out)] = out
        self._pos += len(out)
        return len(out)

    @staticmethod
    def _salvage(decompressor, piece) -> bytes:
        """What ``decompressor`` (a copy of the state before ``piece``) inflates before failing."""
        parts = []
        view = memoryview(piece)
        for start in range(0, len(view), 64):
            try:
                parts.append(decompressor.decompress(view[start:start + 64]))
            except zlib.error:
                break
        return b"".join(parts)

    def readinto(self, b) -> int:
        want = len(b)
        if want == 0:
            return 0
        if self._salvaged:
            out, self._salvaged = self._salvaged[:want], self._salvaged[want:]
            return self._deliver(b, out)
        if self._error is not None:
            raise self._error
        while not self._done:
            if self._d.eof:
                if self._end_of_stream():
                    self._done = True
                    return 0
                continue
            if self._tail:
                piece, self._tail = self._tail, b""
            else:
                if self._offset >= len(self._pending):
                    self._rest()
                if not self._pending:
                    if not self._started:
                        self._done = True  # an empty file: no records
                        return 0
                    raise CompressionError(f"{self._kind} stream is truncated (the file ends before the end of "
                                           f"the compressed data)")
                piece = memoryview(self._pending)[self._offset:self._offset + _FEED]
                self._offset += len(piece)
            backup = self._d.copy()
            try:
                out = self._d.decompress(piece, want)
            except zlib.error as error:
                self._error = CompressionError(f"{self._kind} data is corrupt ({error})")
                self._salvaged = self._salvage(backup, piece)
                if not self._salvaged:
                    raise self._error from None
                out, self._salvaged = self._salvaged[:want], self._salvaged[want:]
                return self._deliver(b, out)
            # At the end of a stream zlib reports the input after it as unused_data (and, when the
            # output was limited, as unconsumed_tail too): it is taken from unused_data only.
            self._tail = b"" if self._d.eof else self._d.unconsumed_tail
            if out:
                return self._deliver(b, out)
        return 0

    def close(self) -> None:
        if not self.closed:
            super().close()
            if self._owns_file:
                self._file.close()


def open_records(path_or_file: PathOrFile, compression=None, buffer_size: int = 1 << 20):
    """``(stream, owns)``: a binary stream of the *uncompressed* TFRecord bytes of
    ``path_or_file`` (a path, opened here, or a binary file object), and whether the caller must
    close it.  Closing a decompressing stream made for a path closes the file too.  Reads of a
    corrupt compressed stream raise :class:`CompressionError`; ``stream.tell()`` counts
    uncompressed bytes."""
    compression = _resolved_compression(compression, path_or_file)
    f, owns = _open_for_read(path_or_file, buffer_size if compression is None else _COMPRESSED_CHUNK)
    if compression is None:
        return f, owns
    raw = _Decompressor(f, compression, _display_name(path_or_file), owns)
    return io.BufferedReader(raw, buffer_size), True


def _open_for_read(path_or_file, buffer_size: int):
    if isinstance(path_or_file, (str, bytes, os.PathLike)):
        return open(path_or_file, "rb", buffering=buffer_size), True
    return path_or_file, False


def _remaining_size(f) -> Optional[int]:
    """Bytes left from the current position if ``f`` is a regular seekable file, else None.

    Only a plain file (``FileIO``, or a buffered reader over one) counts: a wrapper such as
    ``gzip.GzipFile`` also has ``fileno()``, of the compressed file, whose size is not ours."""
    if isinstance(f, io.BytesIO):
        return len(f.getbuffer()) - f.tell()
    raw = f.raw if isinstance(f, (io.BufferedReader, io.BufferedRandom)) else f
    if not isinstance(raw, io.FileIO):
        return None
    try:
        fileno = f.fileno()
        st = os.fstat(fileno)
        if not (st.st_mode & 0o170000 == 0o100000):  # S_ISREG
            return None
        return st.st_size - f.tell()
    except (AttributeError, OSError, io.UnsupportedOperation, ValueError):
        return None


def iter_records(
    path_or_file: PathOrFile, verify_crc: bool = True, buffer_size: int = 1 << 20,
    compression: Optional[str] = None,
) -> Iterator[bytes]:
    """Yield the data of each record in a TFRecord file, streaming.

    The length CRC is always checked (it guards against reading garbage lengths); the data CRC
    only when ``verify_crc``.  Truncation and CRC failures raise :class:`CorruptRecordError`.
    A path is opened (and closed) here; a file object is read from its current position.

    ``compression``: None (plain TFRecord), ``"gzip"``, ``"zlib"`` (the file is decompressed while
    streaming; a corrupt or truncated compressed stream raises :class:`CorruptRecordError` too,
    with offsets in the uncompressed stream) or ``"auto"`` (:func:`detect_compression`).
    """
    compression = _resolved_compression(compression, path_or_file)
    if compression is not None:
        yield from _iter_compressed(path_or_file, verify_crc, buffer_size, compression)
        return
    f, owns = _open_for_read(path_or_file, buffer_size)
    name = _display_name(path_or_file)
    try:
        remaining = _remaining_size(f)
        read = f.read
        crc = _crc32c
        unpack_qi = _unpack_qi
        unpack_i = _unpack_i
        offset = 0
        index = 0
        at_start = _position(f) == 0  # the first record of the file: a bad header there is no TFRecord file
        while True:
            header = read(_HEADER)
            if len(header) != _HEADER:
                if not header:
                    return
                if at_start and index == 0:
                    raise NotTFRecordError(name, 0, 0, describe_start(header))
                raise CorruptRecordError(name, index, offset, "truncated length header")
            n, lcrc = unpack_qi(header)
            c = crc(header[:8])
            if lcrc != ((((c >> 15) | (c << 17)) & _U32) + _MASK_DELTA) & _U32:
                if at_start and index == 0:
                    raise NotTFRecordError(name, 0, 0, describe_start(header + read(60)))
                raise CorruptRecordError(name, index, offset, "length CRC mismatch")
            if remaining is not None:
                if offset + _HEADER + n > remaining:
                    # Known file size: fail before trying to allocate a huge buffer.
                    avail = max(0, remaining - offset - _HEADER)
                    raise CorruptRecordError(
                        name, index, offset,
                        f"truncated record data (expected {n} bytes, file ends after {avail})",
                    )
                data = read(n)
            elif n > _BIG_RECORD:
                data = _read_in_pieces(read, n)  # a stream: memory grows only as data arrives
            else:
                data = read(n)
            if len(data) != n:
                raise CorruptRecordError(
                    name, index, offset,
                    f"truncated record data (expected {n} bytes, file ends after {len(data)})",
                )
            footer = read(_FOOTER)
            if len(footer) != _FOOTER:
                raise CorruptRecordError(name, index, offset, "truncated data CRC")
            if verify_crc:
                c = crc(data)
                if unpack_i(footer)[0] != ((((c >> 15) | (c << 17)) & _U32) + _MASK_DELTA) & _U32:
                    raise CorruptRecordError(name, index, offset, "data CRC mismatch")
            yield data
            offset += _HEADER + n + _FOOTER
            index += 1
    finally:
        if owns:
            f.close()


_BIG_RECORD = 1 << 26


def _position(f) -> Optional[int]:
    try:
        return f.tell()
    except (AttributeError, OSError, io.UnsupportedOperation, ValueError):
        return None


def _read_in_pieces(read, n: int) -> bytes:
    parts = []
    got = 0
    while got < n:
        part = read(min(n - got, _BIG_RECORD))
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _iter_compressed(path_or_file, verify_crc: bool, buffer_size: int, compression: str) -> Iterator[bytes]:
    """:func:`iter_records` over the decompressed stream, with decompression errors reported as
    :class:`CorruptRecordError` naming the record being read."""
    name = _display_name(path_or_file)
    stream, owns = open_records(path_or_file, compression, buffer_size)
    index = 0
    offset = 0
    try:
        try:
            for data in iter_records(stream, verify_crc):
                yield data
                index += 1
                offset += _HEADER + len(data) + _FOOTER
        except CorruptRecordError as error:
            raise type(error)(name, error.record_index, error.offset, error.reason, compression) from None
        except CompressionError as error:
            raise CorruptRecordError(name, index, offset, str(error), compression) from None
    finally:
        if owns:
            stream.close()


def count_records(path_or_file: PathOrFile, compression: Optional[str] = None) -> int:
    """Number of records in a TFRecord file.  Framing is checked as by :func:`iter_records`
    (truncation, length CRCs), data CRCs are not; ``compression`` as there."""
    return sum(1 for _ in iter_records(path_or_file, verify_crc=False, compression=compression))
