"""The work directory through which tasks hand each other data: a local directory, or a URL
(``--work_dir s3://...``) that every worker of a cluster reaches when they share no file system.

Local: arrays are ``.npy`` files written through a private temporary name and renamed (a task
run twice writes the same bytes; the copies replace each other atomically), and read
memory-mapped, so the pages are shared and only what is touched is read.

URL: each file is one object, written whole (an upload appears complete or not at all: a task
run twice, by a worker thought lost, overwrites it with the same bytes).  Reading the rows of
a unit's documents out of many tokenized slices takes two rounds of concurrent requests: the
slices' document tables and array headers, then exactly the token and sentence ranges needed.
A unit's pool and an encode task's piece are read or written whole.
"""

from __future__ import annotations

import errno
import functools
import io
import mmap
import os
import re
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import storage
from ..notices import warn
from . import work_checks
from .run_files import fetched_piece_path, private_temporary, slice_paths

HEADER_PROBE = 1024  # bytes read to find an .npy header (ours are 128)


class _Checksummed:
    """A file object's ``write``, the CRC-32C of what went through it kept (numpy writes an
    array to anything with ``write``, a chunk at a time)."""

    def __init__(self, handle):
        self.handle, self.crc32c = handle, 0

    def write(self, data) -> int:
        self.crc32c = work_checks.crc32c(data, self.crc32c)
        return self.handle.write(data)


def save_array(array: np.ndarray, path: str) -> int:
    """Returns the file's CRC-32C (kept in the slice's summary: ``--resume`` checks it).  A local
    file is handed to the disk and renamed into place, not waited for: the :func:`save_json`
    that vouches for it (``vouching_for``) makes it durable first, one fsync a file and the
    directory's once for them all."""
    if storage.is_url(path):
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        storage.write_bytes(path, buffer.getvalue())
        return work_checks.crc32c(buffer.getbuffer())
    temporary = private_temporary(path)
    with open(temporary, "wb") as handle:
        checksummed = _Checksummed(handle)
        np.save(checksummed, array, allow_pickle=False)
        handle.flush()
        work_checks.start_writeback(handle.fileno(), 0, handle.tell())
    os.replace(temporary, path)
    return checksummed.crc32c


def new_array_file(path: str, dtype, size: int) -> np.ndarray:
    """A local ``.npy`` file of ``size`` items, memory-mapped for writing in place, its blocks
    reserved first: on a full disk this raises ENOSPC here, where a sparse file would kill the
    process with SIGBUS at the first page that finds no block."""
    array = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(size,))
    handle = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(handle, 0, os.fstat(handle).st_size)
    except OSError as error:
        if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):  # a file system without it
            del array
            raise
    finally:
        os.close(handle)
    return array


def write_plain_array(handle, array: np.ndarray) -> None:
    """``np.lib.format.write_array(handle, array)``: the same bytes, the header of a 1-D array
    of a plain dtype written here (numpy builds it from a dict and its repr: ~0.1 ms a file, a
    unit's pool on a corpus of short documents); numpy writes any other array."""
    descr = array.dtype.str
    if array.ndim != 1 or not array.flags.c_contiguous or not _PLAIN_DESCR.fullmatch(descr):
        np.lib.format.write_array(handle, array, allow_pickle=False)
        return
    size = repr(len(array))
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': ({size},), }}" + " " * (21 - len(size))
    length = len(header) + 1  # (numpy's header: padded with spaces to 64 bytes in all, then a newline)
    padding = 64 - (10 + length) % 64
    handle.write(b"\x93NUMPY\x01\x00" + (length + padding).to_bytes(2, "little") + header.encode("latin1")
                 + b" " * padding + b"\n")
    handle.write(array.data)


_PLAIN_DESCR = re.compile(r"[<>|][iuf][1248]")


def load_array(path: str) -> np.ndarray:
    """Local: memory-mapped (the pages are shared and reclaimable, whatever the document
    sizes).  URL: read whole."""
    if storage.is_url(path):
        return np.load(io.BytesIO(storage.read_bytes(path)), allow_pickle=False)
    with open(path, "rb") as handle:
        return _load_open(handle, path)


def _load_open(handle, path: str) -> np.ndarray:
    """``load_array`` of a local file open in ``handle``."""
    header = _plain_header(handle.read(HEADER_PROBE))
    if header is None:  # not one of ours: numpy reads it
        return np.load(path, mmap_mode="r", allow_pickle=False)
    dtype, shape, offset = header
    count = int(np.prod(shape))
    if not count:  # (an empty file cannot be mapped)
        empty = np.zeros(shape, dtype)
        empty.flags.writeable = False
        return empty
    mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    return np.frombuffer(mapped, dtype, count, offset).reshape(shape)


# The header numpy writes for a C-ordered array of a plain dtype (ours: ``save_array``,
# ``new_array_file``).  numpy's own reader evaluates it as a Python literal, a millisecond a file:
# a unit of many short documents maps dozens of slice files.
_PLAIN_HEADER = re.compile(rb"\{'descr': '([<>|][a-z][0-9]+)', 'fortran_order': False, 'shape': \(([0-9, ]*)\), \} *\n")


@functools.lru_cache(maxsize=64)
def _dtype(descr: bytes) -> np.dtype:
    return np.dtype(descr.decode("ascii"))


def _plain_header(data: bytes) -> Optional[Tuple[np.dtype, Tuple[int, ...], int]]:
    """(dtype, shape, offset of the data) of an ``.npy`` file's first bytes in numpy's format
    1.0 or 2.0, when its header is ``_PLAIN_HEADER``; else None."""
    if data[:6] != b"\x93NUMPY" or data[6] not in (1, 2):
        return None
    start = 10 if data[6] == 1 else 12
    end = start + int.from_bytes(data[8:start], "little")
    found = _PLAIN_HEADER.fullmatch(data, start, end) if end <= len(data) else None
    if found is None:
        return None
    shape = tuple(int(size) for size in found.group(2).split(b",") if size.strip())
    return _dtype(found.group(1)), shape, end


def load_arrays(paths: Sequence[str]) -> List[np.ndarray]:
    """Several arrays: memory-mapped, or read at once from a URL (concurrent requests)."""
    if not paths or not storage.is_url(paths[0]):
        return [load_array(path) for path in paths]
    return [np.load(io.BytesIO(data), allow_pickle=False) for data in storage.read_many(list(paths))]


def save_json(data: dict, path: str, vouching_for: Sequence[str] = ()) -> None:
    """With a checksum of its content (``work_checks.dumps_checked``); durable when local, and
    the files it vouches for (``vouching_for``, written with ``save_array`` in its
    directory) durable before it is: a power cut never leaves it naming a file whose bytes
    were lost (one that did lose them is found by its checksum, and rebuilt)."""
    text = work_checks.dumps_checked(data)
    if storage.is_url(path):
        storage.write_bytes(path, text.encode("utf-8"))
        return
    for vouched in vouching_for:  # one fsync a file, together; their names with this one's, below
        work_checks.sync_file(vouched)
    temporary = private_temporary(path)
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        work_checks.replace_durably(temporary, path, handle)


def load_json(path: str) -> Optional[dict]:
    """The object, or None if the file does not exist (``work_checks.Damaged`` if it is not
    what it was written as)."""
    try:
        return work_checks.loads_checked(storage.read_bytes(path))
    except FileNotFoundError:
        return None


def load_jsons(paths: Sequence[str]) -> List[Optional[dict]]:
    """Several (existing) JSON files, read at once; None for one that is damaged."""
    found = []
    for data in storage.read_many(list(paths)):
        try:
            found.append(work_checks.loads_checked(data))
        except work_checks.Damaged:
            found.append(None)
    return found


def listdir(work_dir: str) -> List[str]:
    return storage.listdir(work_dir)


def finished_slices(slice_indices: Sequence[int], work_dir: str, first_needed: int,
                    verify: bool = False) -> Dict[int, dict]:
    """Slices an interrupted run tokenized (a summary is written last), as their summaries' JSON:
    not tokenized again, unless a unit still to come needs tokens that were already freed.  One
    listing of the work directory, and the summaries read at once (a URL answers them
    concurrently).  ``verify`` (a resumed run, before it reuses them): every file of each slice
    is checked against the checksums of its summary; a damaged slice is named in a warning,
    its files removed, and it is tokenized again (the same bytes: tokenizing is deterministic)."""
    names = set(listdir(work_dir))
    if not names:
        return {}
    candidates = []
    for index in slice_indices:
        paths = slice_paths(work_dir, index)
        if storage.basename(paths["summary"]) not in names:
            continue
        needed = [path for kind, path in paths.items() if kind != "screen"]  # (none without screening)
        if index >= first_needed and not all(storage.basename(path) in names for path in needed):
            continue
        candidates.append(index)
    summaries = load_jsons([slice_paths(work_dir, index)["summary"] for index in candidates])
    found = {}
    for index, summary in zip(candidates, summaries):
        damage = "its summary is damaged" if summary is None else (
            _slice_damage(slice_paths(work_dir, index), names, summary) if verify else None)
        if damage is None:
            found[index] = summary
            continue
        paths = slice_paths(work_dir, index)
        warn(f"--resume: {damage}: tokenizing slice {index + 1:,} again")
        storage.remove_many([path for path in paths.values() if storage.basename(path) in names])
    return found


def _slice_damage(paths: Dict[str, str], names, summary: dict) -> Optional[str]:
    """What is wrong with a kept slice's files (None: each is as written).  A slice of an
    earlier version carries no checksums: taken as is."""
    for kind, expected in sorted((summary.get("checksums") or {}).items()):
        path = paths[kind]
        if storage.basename(path) not in names:
            continue  # freed: no later unit reads it
        try:
            found = work_checks.file_crc32c(path)
        except (OSError, work_checks.Damaged) as error:
            return f"{path} cannot be read ({error})"
        if found != expected:
            return f"{path} is damaged (its CRC-32C is {found:08x}, it was written as {expected:08x})"
    return None


class _Ranges:
    """The ranges of one ``.npy`` array a task asked for, fetched: ``array[a:b]`` for those."""

    def __init__(self, fetched: Dict[Tuple[int, int], np.ndarray], dtype: np.dtype):
        self.fetched, self.dtype = fetched, dtype

    def __getitem__(self, key: slice) -> np.ndarray:
        if key.start == key.stop:
            return np.zeros(0, self.dtype)
        return self.fetched[(int(key.start), int(key.stop))]


def _header(data: bytes) -> Tuple[np.dtype, int]:
    """(dtype, offset of the data) of an ``.npy`` file from its first bytes."""
    handle = io.BytesIO(data)
    version = np.lib.format.read_magic(handle)
    reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    _, _, dtype = reader(handle)
    return dtype, handle.tell()


def _wanted_rows(column: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The rows whose value in ``column`` is one of ``wanted`` (sorted, unique): ``np.isin`` by
    binary search (isin sorts both, a slice's whole table for a unit's few documents)."""
    if not len(wanted):
        return np.zeros(0, np.int64)
    at = np.minimum(np.searchsorted(wanted, column), len(wanted) - 1)
    return np.flatnonzero(wanted[at] == column)


# Tokenized slices a process keeps mapped between units (``slice_rows``).  A unit takes its
# documents from ~16 places of the corpus, so a corpus of many short documents has hundreds of
# units each opening and mapping ~16 slices' three files, and searching each slice's whole
# table: most of a unit's cost.  Bounded by the files' bytes (pages of mapped files, shared and
# reclaimable; ~3 bytes a token: 64 MB is a 40 MB corpus's slices whole) and by their number
# (a mapping holds a file descriptor), and dropped at the end of a run (``forget_mapped``: a
# mapping keeps a removed file's blocks).
MAPPED_BYTES = 64 << 20
MAPPED_FILES = 192


@dataclass
class _Mapped:
    identity: Tuple[int, int, int, int]  # (device, inode, size, mtime): the very file mapped
    array: np.ndarray
    column: Optional[np.ndarray] = None  # a table's position column, contiguous
    sorted_column: bool = False
    generation: Optional[str] = None  # the run (``SliceTable.generation``) that last found it the file mapped


_mapped: "OrderedDict[str, _Mapped]" = OrderedDict()
_mapped_lock = threading.Lock()  # (the inline executor's tasks may share a process with threads)


def _identity(status: os.stat_result) -> Tuple[int, int, int, int]:
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns


def _mapped_array(path: str, position_column: Optional[int] = None, generation: Optional[str] = None) -> _Mapped:
    """``load_array(path)``, mapped once for as long as the file is the one mapped: work files
    are written whole and renamed into place, never changed in place, and while a mapping holds
    a file its inode cannot be another file's, so an equal (device, inode, size, mtime) is the
    same bytes.  ``position_column``: a table's, kept contiguous and searched by bisection.

    ``generation`` (a run's ``SliceTable.generation``): within one run a slice's files are
    written once, before any unit reads them, and removed only after the last unit that reads
    them (a task run twice writes the same bytes), so a mapping this generation has checked
    already is used without a ``stat`` (a unit of short documents reads ~14 slices' 3 files:
    8,000 stats on 200,000 documents).  A mapping another run made -- a resumed run, a slice
    tokenized again, a worker serving several runs -- is checked again, as without one."""
    with _mapped_lock:
        entry = _mapped.get(path)
        if entry is not None and generation is not None and entry.generation == generation:
            _mapped.move_to_end(path)
            return entry
    identity = _identity(os.stat(path))
    with _mapped_lock:
        entry = _mapped.get(path)
        if entry is not None and entry.identity == identity:
            _mapped.move_to_end(path)
            entry.generation = generation
            return entry
    with open(path, "rb") as handle:
        identity = _identity(os.fstat(handle.fileno()))  # what is mapped, whatever replaced it since
        array = _load_open(handle, path)
    entry = _Mapped(identity, array, generation=generation)
    if position_column is not None:
        entry.column = np.ascontiguousarray(array[:, position_column], dtype=np.int64)
        entry.sorted_column = bool(np.all(entry.column[1:] >= entry.column[:-1]))
    if array.size:  # mapped (an empty array maps nothing: nothing would hold the inode)
        with _mapped_lock:
            _mapped[path] = entry
            _mapped.move_to_end(path)
            held = sum(kept.identity[2] for kept in _mapped.values())
            while (held > MAPPED_BYTES or len(_mapped) > MAPPED_FILES) and len(_mapped) > 1:
                held -= _mapped.popitem(last=False)[1].identity[2]
    return entry


def forget_mapped() -> None:
    """Unmap the slices kept between units (the end of a run: its work directory goes)."""
    with _mapped_lock:
        _mapped.clear()
    _slice_files.cache_clear()


def _rows_in(entry: _Mapped, wanted: np.ndarray) -> np.ndarray:
    """``_wanted_rows`` of a mapped table: by bisection when its positions are in order (a
    slice's documents are), a unit's few hundred documents searched among its thousands."""
    if not entry.sorted_column:
        return _wanted_rows(entry.column, wanted)
    if not len(entry.column):
        return np.zeros(0, np.int64)
    # Only the wanted positions within the slice's are searched for (a unit's documents lie in
    # many slices: each holds a few of them).
    wanted = wanted[np.searchsorted(wanted, entry.column[0], "left"):np.searchsorted(wanted, entry.column[-1], "right")]
    lows = np.searchsorted(entry.column, wanted, "left")
    highs = np.searchsorted(entry.column, wanted, "right")
    present = highs > lows
    if not present.any():
        return np.zeros(0, np.int64)
    lows, counts = lows[present], (highs - lows)[present]
    if int(counts.max()) == 1:
        return lows.astype(np.int64)
    ends = np.cumsum(counts)
    return np.arange(int(ends[-1]), dtype=np.int64) + np.repeat(lows - (ends - counts), counts)


@functools.lru_cache(maxsize=4096)
def _slice_files(work_dir: str, number: int) -> Tuple[str, str, str]:
    paths = slice_paths(work_dir, number)
    return paths["docs"], paths["tokens"], paths["sentences"]


def mapped_slices(work_dir: str, numbers: Sequence[int], position_column: int,
                  generation: Optional[str] = None) -> List[Tuple["_Mapped", np.ndarray, np.ndarray]]:
    """Local slices, for each (its document table, mapped with its ``position_column`` kept
    contiguous; its tokens; its sentence lengths), mapped and kept between units like
    ``slice_rows``' (``generation``: see ``_mapped_array``)."""
    found = []
    for number in numbers:
        docs, tokens, sentences = _slice_files(work_dir, number)
        found.append((_mapped_array(docs, position_column, generation), _mapped_array(tokens, None, generation).array,
                      _mapped_array(sentences, None, generation).array))
    return found


def slice_rows(paths: Sequence[Dict[str, str]], wanted: np.ndarray, position_column: int,
               ranges_of, generation: Optional[str] = None) -> List[Optional[tuple]]:
    """For each slice (its ``run_files.slice_paths``): None if it holds none of the ``wanted``
    document positions, else (its table rows of those documents, tokens, sentences), where
    ``tokens[a:b]`` and ``sentences[a:b]`` give the ranges ``ranges_of(row)`` names
    (``((token_start, token_end), (sentence_start, sentence_end))``).  ``wanted``: sorted, unique."""
    if not paths:
        return []
    if not storage.is_url(paths[0]["docs"]):
        found = []
        for slice_files in paths:
            table = _mapped_array(slice_files["docs"], position_column, generation)
            hits = _rows_in(table, wanted)
            found.append(None if not len(hits) else (
                np.array(table.array[hits]), _mapped_array(slice_files["tokens"], None, generation).array,
                _mapped_array(slice_files["sentences"], None, generation).array))  # (rows copied at once)
        return found
    # One round: every document table, and the headers of the arrays.
    first = storage.read_many([f["docs"] for f in paths] + [f[kind] for f in paths for kind in ("tokens", "sentences")],
                              [0] * (3 * len(paths)), [None] * len(paths) + [HEADER_PROBE] * (2 * len(paths)))
    found: List[Optional[list]] = []
    dtypes: Dict[Tuple[int, str], np.dtype] = {}
    requests: List[Tuple[int, str, int, int, np.dtype, int]] = []  # (slice, kind, a, b, dtype, offset)
    for number, slice_files in enumerate(paths):
        table = np.load(io.BytesIO(first[number]), allow_pickle=False)
        rows = [np.array(table[hit]) for hit in np.flatnonzero(np.isin(table[:, position_column], wanted))]
        found.append(rows or None)
        for kind_number, kind in enumerate(("tokens", "sentences")):
            dtype, offset = _header(first[len(paths) + 2 * number + kind_number])
            dtypes[(number, kind)] = dtype
            for row in rows:
                a, b = (int(bound) for bound in ranges_of(row)[kind_number])
                if b > a:
                    requests.append((number, kind, a, b, dtype, offset))
    # A second: exactly the ranges needed.
    data = storage.read_many([paths[n][kind] for n, kind, *_ in requests],
                             [offset + a * dtype.itemsize for _, _, a, _, dtype, offset in requests],
                             [offset + b * dtype.itemsize for _, _, _, b, dtype, offset in requests])
    fetched: Dict[Tuple[int, str], Dict[Tuple[int, int], np.ndarray]] = {}
    for (number, kind, a, b, dtype, _), chunk in zip(requests, data):
        fetched.setdefault((number, kind), {})[(a, b)] = np.frombuffer(chunk, dtype=dtype)
    return [None if rows is None else (rows, _Ranges(fetched.get((n, "tokens"), {}), dtypes[(n, "tokens")]),
                                       _Ranges(fetched.get((n, "sentences"), {}), dtypes[(n, "sentences")]))
            for n, rows in enumerate(found)]


class PieceWriter:
    """An encode task's piece file: written in place when local; for a URL, into a local
    temporary file (pieces can be large: never held in memory) uploaded whole when done."""

    def __init__(self, path: str):
        self.path = path
        self.remote = storage.is_url(path)
        if self.remote:
            handle, self.temporary = tempfile.mkstemp(prefix="bert_data-piece-", suffix=".tmp")
            os.close(handle)
        else:
            self.temporary = private_temporary(path)
        self.handle = open(self.temporary, "wb")

    def __enter__(self):
        return self.handle

    def __exit__(self, kind, error, traceback) -> None:
        self.handle.close()
        try:
            if kind is None:
                if self.remote:
                    storage.upload(self.temporary, self.path)
                else:
                    os.replace(self.temporary, self.path)
        finally:
            if (self.remote or kind is not None) and os.path.exists(self.temporary):
                os.remove(self.temporary)


def fetch_piece(path: str, into_dir: str) -> Tuple[str, bool]:
    """A local path of a piece file (downloaded into ``into_dir`` when it is a URL) and whether
    it is a downloaded copy."""
    if not storage.is_url(path):
        return path, False
    local = fetched_piece_path(into_dir)
    storage.download(path, local)
    return local, True
