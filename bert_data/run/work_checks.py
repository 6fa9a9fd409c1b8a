"""Checksums and durability of the work files a ``--resume`` reuses (tokenized slices, the
journal, the shards' bodies): each is checksummed when written, made durable (the file, then
its directory) before the journal vouches for it, and checked before it is reused.  Which
files those are, and what is done about a damaged one, is ``run_files``'s and the runner's.

The checksum is CRC-32C: a dependency already (TFRecord's framing), computed in hardware
(SSE 4.2, ARMv8) at several GB/s, and two CRCs of consecutive byte ranges combine into the
CRC of both without reading them again (:func:`crc32c_combine`), so an encode task checksums
its segment where it writes it and the parent, appending segments to a shard, keeps the
shard's CRC for the cost of a few hundred integer operations.  A cryptographic hash
(BLAKE2b, SHA-256) would guard against a forger, not against a disk or a stray write, and is
several times slower; no such combination exists for it.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Optional

import crc32c as _crc32c

from .. import storage

_BLOCK = 1 << 22
_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected


class Damaged(ValueError):
    """A work file whose bytes are not those it was written with (the message says how)."""


def crc32c(data, value: int = 0) -> int:
    return _crc32c.crc32c(data, value)


def file_crc32c(path: str, length: Optional[int] = None, offset: int = 0) -> int:
    """The CRC-32C of a file's ``length`` bytes from ``offset`` (all: None), read a block at a
    time (a URL: at once).  Damaged if the file holds fewer than ``length`` there."""
    if storage.is_url(path):
        data = storage.read_bytes(path, offset, None if length is None else offset + length)
        if length is not None and len(data) < length:
            raise Damaged(f"{len(data):,} bytes where {length:,} were written")
        return crc32c(data)
    value, left = 0, length
    with open(path, "rb") as handle:
        handle.seek(offset)
        while left is None or left > 0:
            block = handle.read(_BLOCK if left is None else min(_BLOCK, left))
            if not block:
                break
            value = crc32c(block, value)
            if left is not None:
                left -= len(block)
    if left:
        raise Damaged(f"{length - left:,} bytes where {length:,} were written")
    return value


def _multmodp(a: int, b: int) -> int:
    """a(x) b(x) modulo the CRC's polynomial (bit-reflected), as zlib's ``multmodp``."""
    m, product = 1 << 31, 0
    while True:
        if a & m:
            product ^= b
            if not a & (m - 1):
                return product
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1


_X2N = []  # x^(2^k) modulo the polynomial
_power = 1 << 30  # x^1
for _ in range(32):
    _X2N.append(_power)
    _power = _multmodp(_power, _power)


def crc32c_combine(crc1: int, crc2: int, length2: int) -> int:
    """The CRC-32C of A + B from A's (``crc1``), B's (``crc2``) and B's length (zlib's
    ``crc32_combine``, for this polynomial): ``crc1`` times x^(8 n), a factor x^(2^k) for each
    bit k of 8 n (multiplication commutes), each a product by a constant: four table lookups
    (the parent combines one a shard a unit; ``_crc32c_combine_bitwise`` is the reference)."""
    value, k, n = crc1, 3, length2
    while n:
        if n & 1:
            table = _times_x2n(k & 31)
            value = table[value & 0xFF] ^ table[256 + (value >> 8 & 0xFF)] ^ table[512 + (value >> 16 & 0xFF)] ^ \
                table[768 + (value >> 24)]
        n >>= 1
        k += 1
    return value ^ crc2


@functools.lru_cache(maxsize=None)
def _times_x2n(k: int) -> list:
    """v -> v x^(2^k) modulo the polynomial, a table for each of v's four bytes (256 entries
    each, end to end): the product is linear in v, so a byte's entry is the sum of its bits'."""
    table = [0] * 1024
    for byte in range(4):
        base = 256 * byte
        for bit in range(8):
            table[base + (1 << bit)] = _multmodp(_X2N[k], 1 << (8 * byte + bit))
        for value in range(3, 256):
            low = value & -value
            if value != low:
                table[base + value] = table[base + (value ^ low)] ^ table[base + low]
    return table


def _crc32c_combine_bitwise(crc1: int, crc2: int, length2: int) -> int:
    """``crc32c_combine`` as zlib computes it: x^(8 n) first, then its product with ``crc1``."""
    power, k, n = 1 << 31, 3, length2  # x^0, then x^(8 n)
    while n:
        if n & 1:
            power = _multmodp(_X2N[k & 31], power)
        n >>= 1
        k += 1
    return _multmodp(power, crc1) ^ crc2


_SYNC_FILE_RANGE_WRITE = 2  # linux/fs.h: start writing the range's dirty pages, do not wait


def _sync_file_range():
    """Linux's ``sync_file_range`` (None elsewhere: Python has no binding for it)."""
    return storage.linux_call("sync_file_range", "c_int", "c_int64", "c_int64", "c_uint")


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Hand ``length`` written bytes of a file from ``offset`` to the disk now, without waiting:
    the fsync that makes the file durable later (before a journal names it) then waits for
    less, the disk having worked while the process went on.  It promises nothing by itself
    (no metadata, no cache flush of the device): a hint, which costs one system call."""
    function = _sync_file_range()
    if function is not None and length > 0:
        function(fd, offset, length, _SYNC_FILE_RANGE_WRITE)  # (a failure is the fsync's to report)


class Writeback:
    """:func:`start_writeback` for ranges of files named by path, by a thread of its own: the
    hint blocks while the disk's queue is full (the commits' fsyncs keep it so), and the
    caller -- the parent appending units to the shards while workers wait for their next task
    -- must not.  Without it, a unit's bytes would wait in memory for its commit's fsync, and
    the disk would sit idle until then (Linux writes dirty pages by itself only past a share
    of memory, or after 30 s).  A hint only: a range whose file is gone, or any failure, is
    left to the fsync that makes the file durable."""

    def __init__(self):
        self._work = None
        self._thread = None

    def start(self, ranges) -> None:
        """Hand ``(path, offset, length)`` ranges to the disk, without waiting."""
        if _sync_file_range() is None or not ranges:
            return
        if self._thread is None:
            import queue
            import threading

            self._work = queue.SimpleQueue()
            self._thread = threading.Thread(target=self._run, name="bert_data-writeback", daemon=True)
            self._thread.start()
        self._work.put(list(ranges))

    def _run(self) -> None:
        while True:
            ranges = self._work.get()
            if ranges is None:
                return
            for path, offset, length in ranges:
                try:
                    handle = os.open(path, os.O_RDONLY)
                except OSError:
                    continue
                try:
                    start_writeback(handle, offset, length)
                finally:
                    os.close(handle)

    def close(self, wait: bool = True) -> None:
        """The thread told to end once the hints it has are given (``wait``: and joined)."""
        if self._thread is not None:
            self._work.put(None)
            if wait:
                self._thread.join()
            self._thread = None


def sync_directory(directory: str) -> None:
    """Make the names in ``directory`` (a file renamed into place) durable."""
    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass  # not every file system syncs a directory
    finally:
        os.close(handle)


def sync_file(path: str) -> None:
    """A file's bytes durable (an fsync of it, by name; its name is its directory's business)."""
    handle = os.open(path, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def replace_durably(temporary: str, path: str, handle=None) -> None:
    """``temporary`` (its open ``handle``, flushed here, if given) renamed to ``path``, its bytes
    on disk before the name, the name on disk before this returns: a journal written after it
    never vouches for a file a power cut would lose."""
    if handle is not None:
        handle.flush()
        os.fsync(handle.fileno())
    else:
        with open(temporary, "rb") as opened:
            os.fsync(opened.fileno())
    os.replace(temporary, path)
    sync_directory(os.path.dirname(path) or ".")


def dumps_checked(data: dict) -> str:
    """``data`` as JSON with a ``crc32c`` of its own content (see :func:`loads_checked`)."""
    body = json.dumps(data, sort_keys=True)
    return json.dumps({**data, "crc32c": crc32c(body.encode("utf-8"))}, sort_keys=True)


def loads_checked(text) -> dict:
    """The object :func:`dumps_checked` wrote; Damaged if the text is not JSON, is empty or does
    not match its checksum (a JSON object without one, of an earlier version, is taken as is)."""
    if not text or not (text.strip() if isinstance(text, str) else text.strip()):
        raise Damaged("it is empty")
    try:
        data = json.loads(text)
    except ValueError as error:
        raise Damaged(f"it is not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise Damaged("it is not a JSON object")
    if "crc32c" in data:
        stored = data.pop("crc32c")
        if crc32c(json.dumps(data, sort_keys=True).encode("utf-8")) != stored:
            raise Damaged("its checksum does not match its content")
    return data
