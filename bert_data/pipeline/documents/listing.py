"""Which documents a run reads, checked before any work: the paths that metadata files list, and
paths or globs given directly (``--input_files``, Google's ``--input_file``), relative to
``--input_files_prefix``.

A wrong argument is named at its cause, in one line, instead of through its first consequence:
a prefix directory that does not exist (not "file not found" for the first listed document), a
metadata file that is not a list of paths (a text file passed by mistake: not "file not found:
Fellow-Citizens of the Senate..."), a metadata file none of whose paths exists (a wrong prefix),
a pattern that matches nothing.  ``create_tfrecords`` and ``bert-data build-vocab`` both list
their documents here.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Dict, Iterator, List, Sequence, Tuple

from ... import storage
from .types import InputError, MetadataEntry, one_line

INPUT_FILES = "--input_files"  # stands for the metadata file in messages about --input_files entries
_GLOB_CHARS = re.compile(r"[*?\[]")
# A line of this many words is a sentence, not a file name.
PROSE_WORDS = 4


def split_commas(values: Sequence[str]) -> List[str]:
    """Google's comma-separated lists (``--input_file=a.txt,b/*.txt``); a path that exists is
    kept whole even if it holds a comma."""
    items = []
    for value in values:
        if os.path.exists(value):
            items.append(value)
        else:
            items += [part.strip() for part in value.split(",") if part.strip()]
    return items


def check_prefix(prefix: str) -> None:
    if prefix and not storage.is_url(prefix) and not os.path.isdir(prefix):  # (object stores have no folders)
        what = "is not a directory" if os.path.exists(prefix) else "does not exist"
        raise InputError(f"--input_files_prefix {prefix} {what} (the document paths are relative to it)")


def expand_input_files(patterns: Sequence[str], prefix: str = "") -> List[MetadataEntry]:
    """Entries for paths and globs given on the command line, in the order given (each glob's
    matches sorted).  A pattern that matches no file is an error; a plain path that does not
    exist is left to ``check_documents_exist`` (an error, or a counted skip with
    ``--skip_missing``)."""
    entries: List[MetadataEntry] = []
    for pattern in split_commas(patterns):
        if storage.is_url(pattern) or storage.is_url(prefix):  # a URL, or a glob of URLs (fsspec's)
            entries += _url_entries(pattern, prefix, len(entries))
            continue
        full = os.path.join(prefix, pattern) if prefix else pattern
        if not os.path.exists(full) and _GLOB_CHARS.search(pattern):
            matched = sorted(path for path in glob.glob(full) if os.path.isfile(path))
            if not matched:
                where = f" under {prefix}" if prefix else ""
                raise InputError(f"input pattern {pattern} matches no file{where}")
        else:
            matched = [full]
        for path in matched:
            # The label names the document in messages and in the validation hash: as given.
            label = os.path.relpath(path, prefix) if prefix else path
            entries.append(MetadataEntry(INPUT_FILES, len(entries) + 1, storage.redact(label), os.path.abspath(path)))
    return entries


def _url_entries(pattern: str, prefix: str, before: int) -> List[MetadataEntry]:
    full = storage.resolve(prefix, pattern)
    matched = [full]
    if _GLOB_CHARS.search(pattern):
        try:
            matched = storage.glob(full)
        except OSError as error:
            raise InputError(f"input pattern {full}: {error}") from None
        if not matched:
            raise InputError(f"input pattern {full} matches no file")
    base = prefix.rstrip("/") + "/" if storage.is_url(prefix) else ""
    return [MetadataEntry(INPUT_FILES, before + number + 1,
                          storage.redact(url[len(base):] if base and url.startswith(base) else url), url)
            for number, url in enumerate(matched)]


# A metadata file lists paths, one a line: no path is longer than this.  A longer line (a text
# file given by mistake, or one enormous line) stops the run before it is held in memory.
MAX_LINE_BYTES = 64 * 1024
QUOTED_CHARS = 60  # how much of a bad line a message quotes


def shortened(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def quoted(text: str, limit: int = QUOTED_CHARS) -> str:
    """A short, one-line quotation of ``text`` for a message."""
    shown = repr(text[:limit])
    return shown + ("..." if len(text) > limit else "")


def read_metadata(metadata_files: Sequence[str], prefix: str,
                  allow_outside_prefix: bool = False) -> List[MetadataEntry]:
    """Document paths from metadata files: one per line, blank lines and surrounding spaces
    ignored.  A file is read a line at a time (lines of at most ``MAX_LINE_BYTES``); with a
    prefix, an entry that resolves outside it is refused unless ``allow_outside_prefix``."""
    entries: List[MetadataEntry] = []
    guard = PrefixGuard(prefix) if prefix and not allow_outside_prefix else None
    for metadata_file in metadata_files:
        before = len(entries)
        for line_number, label in metadata_lines(metadata_file):
            # Absolute (or a URL): workers (local or on a cluster) may run in another directory.
            # The label names the document in messages, files and the validation hash: never with
            # the credentials a URL may carry (the path keeps them, to be opened).
            entry = MetadataEntry(metadata_file, line_number, storage.redact(label), storage.resolve(prefix, label))
            if guard is not None:
                guard.check(entry)
            entries.append(entry)
        if len(entries) == before:
            raise InputError(f"{metadata_file}: metadata file lists no documents")
    return entries


def metadata_lines(metadata_file: str) -> Iterator[Tuple[int, str]]:
    """(line number, stripped text) of the non-blank lines of a metadata file, read a line at a
    time.  Lines end as ``str.splitlines`` ends them."""
    reason = storage.not_a_regular_file(metadata_file)
    if reason:
        raise InputError(f"{metadata_file}: cannot read metadata file: {reason}")
    try:
        handle = storage.open_read(metadata_file)
    except OSError as error:
        raise InputError(f"{metadata_file}: cannot read metadata file: {error.strerror or one_line(error)}") from None
    line_number = 0
    with handle:
        try:
            for raw in bounded_lines(handle, MAX_LINE_BYTES):
                try:
                    # "UTF-8 with BOM" (Windows editors): the mark is no part of the first path.
                    text = raw.decode("utf-8-sig" if line_number == 0 else "utf-8")
                except UnicodeDecodeError:
                    raise InputError(f"{metadata_file}:{line_number + 1}: metadata file is not UTF-8 text") from None
                for line in text.splitlines() or [""]:
                    line_number += 1
                    if line.strip():
                        yield line_number, line.strip()
        except LineTooLong as error:
            start = error.start.decode("utf-8", "replace")
            raise InputError(f"{metadata_file}:{line_number + 1}: line longer than {MAX_LINE_BYTES:,} bytes, not a "
                             f"path (a metadata file lists document paths, one a line): {quoted(start)}") from None
        except OSError as error:
            raise InputError(f"{metadata_file}: cannot read metadata file: {one_line(error)}") from None


class LineTooLong(ValueError):
    def __init__(self, start: bytes):
        super().__init__("line too long")
        self.start = start  # the line's first bytes


def bounded_lines(handle, limit: int, chunk_size: int = 1 << 16) -> Iterator[bytes]:
    """The lines of a binary file object (each with its line break, the last maybe without),
    holding at most ``limit`` bytes of a line: a longer one raises ``LineTooLong``."""
    pending = b""
    while True:
        chunk = handle.read(chunk_size)
        if not chunk:
            if pending:
                yield pending
            return
        pending += chunk
        start = 0
        while True:
            end = pending.find(b"\n", start)
            if end < 0:
                break
            if end + 1 - start > limit + 1:
                raise LineTooLong(pending[start : start + QUOTED_CHARS * 4])
            yield pending[start : end + 1]
            start = end + 1
        pending = pending[start:]
        if len(pending) > limit:
            raise LineTooLong(pending[: QUOTED_CHARS * 4])


class PrefixGuard:
    """Refuses metadata entries that resolve outside ``--input_files_prefix``: ``..`` that climbs
    out, an absolute path or a URL elsewhere, a symbolic link (the file's or a directory's) that
    leads out.  A directory's real place is looked up once, so a listing of millions of files
    costs one ``lstat`` a file."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.url = storage.is_url(prefix)
        self.root = prefix.rstrip("/") + "/" if self.url else os.path.realpath(prefix)
        self.directories: Dict[str, bool] = {}  # directory -> inside the prefix, once resolved

    def check(self, entry: MetadataEntry) -> None:
        if not self.inside(entry.path):
            raise InputError(f"{entry.metadata_file}:{entry.line_number}: {quoted(entry.label, 200)} is outside "
                             f"--input_files_prefix {self.prefix}; pass --allow_paths_outside_prefix to read "
                             "files elsewhere")

    def inside(self, path: str) -> bool:
        if self.url or storage.is_url(path):  # a URL under a URL prefix, without "." or ".." steps
            if not (self.url and storage.is_url(path) and path.startswith(self.root)):
                return False
            return not any(step in (".", "..") for step in path[len(self.root):].split("/"))
        directory = os.path.dirname(path)
        known = self.directories.get(directory)
        if known is None:
            known = self.directories[directory] = _within(os.path.realpath(directory), self.root)
        if not known:
            return False
        if os.path.islink(path):
            return _within(os.path.realpath(path), self.root)
        return True


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


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
                entry.size, entry.version = found["size"], found.get("version", "")
        else:  # (os.stat only: a FIFO is never opened, so nothing hangs)
            reason, found = storage.regular_file_status(entry.path)
            reason = reason or None
            if reason is None and not os.access(entry.path, os.R_OK):
                reason = "file not readable"
            elif reason is None:  # kept: the plan's sizes and the run's input stamps need no stat of their own
                entry.size, entry.modified_ns = found.st_size, found.st_mtime_ns
        if reason is None:
            usable.append(entry)
        elif skip_missing:
            missing.append((entry, reason))
        else:
            raise InputError(
                f"{entry.metadata_file}:{entry.line_number}: {reason}: {shortened(entry.path)}"
                + (" (use --skip_missing to skip such entries)" if not reason.startswith("not a regular file") else "")
            )
    return usable, missing


def _looks_like_prose(label: str) -> str:
    """Why a metadata line cannot be a path ("" if it might be one)."""
    if label.startswith("{"):
        return "JSON"
    if len(label.split()) >= PROSE_WORDS:
        return "prose"
    return ""


def check_metadata_names_files(metadata_file: str, entries: Sequence[MetadataEntry], prefix: str) -> None:
    """A metadata file none of whose lines names an existing file is the wrong file, or read
    under the wrong prefix: say which, instead of reporting its first line as a missing file."""
    if not entries or any(storage.is_url(entry.path) or os.path.exists(entry.path) for entry in entries):
        return  # (URLs are stat-ed together, by check_documents_exist)
    lines = f"none of its {len(entries):,} lines names an existing file" if len(entries) > 1 else \
        "its only line names no existing file"
    for entry in entries[:20]:
        kind = _looks_like_prose(entry.label)
        if kind:
            raise InputError(
                f"{metadata_file} does not look like a metadata file: line {entry.line_number} is {kind}, not a path; "
                f"{lines} (a metadata file lists document paths, one a line; to read text files directly use "
                f"--input_files)")
    first = entries[0]
    where = (f"under --input_files_prefix {prefix}" if prefix
             else "relative to the current directory (no --input_files_prefix)")
    raise InputError(f"{metadata_file}: {lines} {where}, e.g. line {first.line_number}: {shortened(first.path)}; "
                     "is --input_files_prefix right?")


# A document file whose first lines (up to this many) all name existing files is a metadata file.
PATH_LIST_LINES = 1000
PATH_LINE_BYTES = 4096


def path_list_lines(entry: MetadataEntry, prefix: str) -> int:
    """How many non-blank lines a local document file holds if each names an existing file (as a
    metadata line would: relative to ``prefix``, or as written), looking at no more than
    ``PATH_LIST_LINES``; 0 as soon as one does not (prose stops at its first line)."""
    if storage.is_url(entry.path):
        return 0
    count = 0
    try:
        with open(entry.path, "rb") as handle:
            for raw in bounded_lines(handle, PATH_LINE_BYTES):
                line = raw.decode("utf-8").strip()
                if not line:
                    continue
                if not (os.path.isfile(storage.resolve(prefix, line)) or os.path.isfile(line)):
                    return 0
                count += 1
                if count >= PATH_LIST_LINES:
                    break
    except (LineTooLong, UnicodeDecodeError, OSError, ValueError):
        return 0
    return count


def check_not_path_lists(entries: Sequence[MetadataEntry], prefix: str) -> None:
    """A file given as a document (``--input_files``) whose lines are all paths of existing files
    is a metadata file given to the wrong option: refused, in one line, before it is trained on
    as text ("t ##xt do ##c ##s")."""
    for entry in entries:
        if entry.metadata_file != INPUT_FILES:
            continue
        lines = path_list_lines(entry, prefix)
        if lines:
            each = "its only line names" if lines == 1 else f"each of its {'first ' if lines >= PATH_LIST_LINES else ''}" \
                f"{lines:,} lines names"
            raise InputError(f"{entry.label} looks like a metadata file: {each} an existing file; list documents "
                             "with --metadata_files, or pass --read_path_lists_as_text to read it as text")


def list_documents(metadata_files: Sequence[str], input_files: Sequence[str], prefix: str,
                   skip_missing: bool = False, allow_outside_prefix: bool = False,
                   read_path_lists_as_text: bool = False) -> Tuple[List[MetadataEntry], list]:
    """The documents to read, in order: every metadata file's entries, then ``input_files``.
    Returns (usable entries, [(entry, reason)] skipped with ``skip_missing``); raises
    ``InputError`` naming the first problem.  Metadata entries must resolve inside ``prefix``
    (when given) unless ``allow_outside_prefix``; paths given directly are the user's own, and
    one that is a list of paths is refused unless ``read_path_lists_as_text``."""
    check_prefix(prefix)
    entries: List[MetadataEntry] = []
    for metadata_file in metadata_files:
        listed = read_metadata([metadata_file], prefix, allow_outside_prefix)
        check_metadata_names_files(metadata_file, listed, prefix)
        entries += listed
    entries += expand_input_files(input_files, prefix)
    usable, missing = check_documents_exist(entries, skip_missing)
    if not read_path_lists_as_text:
        check_not_path_lists(usable, prefix)
    return usable, missing
