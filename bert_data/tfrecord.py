"""TFRecord framing without TensorFlow.

Each record on disk is::

    uint64 LE  length
    uint32 LE  masked_crc32c(length bytes)
    bytes      data[length]
    uint32 LE  masked_crc32c(data)

with ``masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8  (mod 2**32)``.  This is exactly
what ``tf.io.TFRecordWriter`` writes (uncompressed) and ``tf.data.TFRecordDataset`` reads.
"""

from __future__ import annotations

import io
import os
import struct
from typing import BinaryIO, Dict, Iterator, Optional, Sequence, Union

import crc32c as _crc32c_mod

__all__ = [
    "masked_crc32c",
    "frame_records",
    "TFRecordWriter",
    "CorruptRecordError",
    "iter_records",
    "count_records",
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


class TFRecordWriter:
    """Appends framed records to a binary file.

    ``target`` is a path (opened ``"wb"`` and closed by :meth:`close`) or an already-open binary
    file object (flushed but left open by :meth:`close`).  Use as a context manager.
    """

    def __init__(self, target: PathOrFile):
        if isinstance(target, (str, bytes, os.PathLike)):
            self._file: BinaryIO = open(target, "wb")
            self._owns = True
        else:
            self._file = target
            self._owns = False
        self.path = _display_name(target)
        self.bytes_written = 0
        self.records_written = 0
        self._closed = False

    def write(self, record: bytes) -> None:
        self.write_many((record,))

    def write_many(self, records: Sequence[bytes]) -> None:
        """Frame and append ``records`` (any iterable of bytes) with a single file write."""
        if self._closed:
            raise ValueError(f"{self.path}: write to a closed TFRecordWriter")
        if not isinstance(records, (list, tuple)):
            records = list(records)
        if not records:
            return
        data = frame_records(records)
        self._file.write(data)
        self.bytes_written += len(data)
        self.records_written += len(records)

    def flush(self) -> None:
        if not self._closed:
            self._file.flush()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._owns:
            self._file.close()
        else:
            self._file.flush()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "TFRecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class CorruptRecordError(ValueError):
    """A TFRecord file is truncated or fails a CRC check.

    ``str(err)`` is one line: ``"<path>: record <index> at byte <offset>: <reason>"``; ``offset``
    is where the record's length header starts.
    """

    def __init__(self, path: str, record_index: int, offset: int, reason: str):
        self.path = path
        self.record_index = record_index
        self.offset = offset
        self.reason = reason
        super().__init__(f"{path}: record {record_index} at byte {offset}: {reason}")

    def __reduce__(self):  # picklable across multiprocessing
        return (type(self), (self.path, self.record_index, self.offset, self.reason))


def _open_for_read(path_or_file, buffer_size: int):
    if isinstance(path_or_file, (str, bytes, os.PathLike)):
        return open(path_or_file, "rb", buffering=buffer_size), True
    return path_or_file, False


def _remaining_size(f) -> Optional[int]:
    """Bytes left from the current position if ``f`` is a regular seekable file, else None."""
    try:
        fileno = f.fileno()
        st = os.fstat(fileno)
        if not (st.st_mode & 0o170000 == 0o100000):  # S_ISREG
            return None
        return st.st_size - f.tell()
    except (AttributeError, OSError, io.UnsupportedOperation, ValueError):
        pass
    if isinstance(f, io.BytesIO):
        return len(f.getbuffer()) - f.tell()
    return None


def iter_records(
    path_or_file: PathOrFile, verify_crc: bool = True, buffer_size: int = 1 << 20
) -> Iterator[bytes]:
    """Yield the data of each record in a TFRecord file, streaming.

    The length CRC is always checked (it guards against reading garbage lengths); the data CRC
    only when ``verify_crc``.  Truncation and CRC failures raise :class:`CorruptRecordError`.
    A path is opened (and closed) here; a file object is read from its current position.
    """
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
        while True:
            header = read(_HEADER)
            if len(header) != _HEADER:
                if not header:
                    return
                raise CorruptRecordError(name, index, offset, "truncated length header")
            n, lcrc = unpack_qi(header)
            c = crc(header[:8])
            if lcrc != ((((c >> 15) | (c << 17)) & _U32) + _MASK_DELTA) & _U32:
                raise CorruptRecordError(name, index, offset, "length CRC mismatch")
            if remaining is not None and offset + _HEADER + n > remaining:
                # Known file size: fail before trying to allocate a huge buffer.
                avail = max(0, remaining - offset - _HEADER)
                raise CorruptRecordError(
                    name, index, offset,
                    f"truncated record data (expected {n} bytes, file ends after {avail})",
                )
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


def count_records(path: PathOrFile) -> int:
    """Number of records in a TFRecord file, from the length headers (data is skipped).

    Length CRCs are checked and truncation is detected; data CRCs are not.
    """
    f, owns = _open_for_read(path, 1 << 16)
    name = _display_name(path)
    try:
        remaining = _remaining_size(f)
        seekable = remaining is not None and hasattr(f, "seek")
        offset = 0
        index = 0
        while True:
            header = f.read(_HEADER)
            if len(header) != _HEADER:
                if not header:
                    return index
                raise CorruptRecordError(name, index, offset, "truncated length header")
            n, lcrc = _unpack_qi(header)
            if lcrc != masked_crc32c(header[:8]):
                raise CorruptRecordError(name, index, offset, "length CRC mismatch")
            if seekable:
                avail = remaining - offset - _HEADER
                if n > avail:
                    raise CorruptRecordError(
                        name, index, offset,
                        f"truncated record data (expected {n} bytes, file ends after {max(0, avail)})",
                    )
                if n + _FOOTER > avail:
                    raise CorruptRecordError(name, index, offset, "truncated data CRC")
                f.seek(n + _FOOTER, os.SEEK_CUR)
            else:
                got = 0
                while got < n:
                    chunk = f.read(min(n - got, 1 << 20))
                    if not chunk:
                        break
                    got += len(chunk)
                if got != n:
                    raise CorruptRecordError(
                        name, index, offset,
                        f"truncated record data (expected {n} bytes, file ends after {got})",
                    )
                if len(f.read(_FOOTER)) != _FOOTER:
                    raise CorruptRecordError(name, index, offset, "truncated data CRC")
            offset += _HEADER + n + _FOOTER
            index += 1
    finally:
        if owns:
            f.close()
