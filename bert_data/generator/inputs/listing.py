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
from typing import List, Sequence, Tuple

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
            entries.append(MetadataEntry(INPUT_FILES, len(entries) + 1, label, os.path.abspath(path)))
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
    return [MetadataEntry(INPUT_FILES, before + number + 1, url[len(base):] if base and url.startswith(base) else url,
                          url) for number, url in enumerate(matched)]


def read_metadata(metadata_files: Sequence[str], prefix: str) -> List[MetadataEntry]:
    """Document paths from metadata files: one per line, blank lines and surrounding spaces ignored."""
    entries: List[MetadataEntry] = []
    for metadata_file in metadata_files:
        try:
            raw = storage.read_bytes(metadata_file)
        except OSError as error:
            raise InputError(f"{metadata_file}: cannot read metadata file: {error.strerror or one_line(error)}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            line = raw[: error.start].count(b"\n") + 1
            raise InputError(f"{metadata_file}:{line}: metadata file is not UTF-8 text") from None
        before = len(entries)
        for line_number, line in enumerate(text.splitlines(), start=1):
            label = line.strip()
            if label:
                # Absolute (or a URL): workers (local or on a cluster) may run in another directory.
                entries.append(MetadataEntry(metadata_file, line_number, label, storage.resolve(prefix, label)))
        if len(entries) == before:
            raise InputError(f"{metadata_file}: metadata file lists no documents")
    return entries


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
                entry.size = found["size"]
        elif not os.path.exists(entry.path):
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
    raise InputError(f"{metadata_file}: {lines} {where}, e.g. line {first.line_number}: {first.path}; "
                     "is --input_files_prefix right?")


def list_documents(metadata_files: Sequence[str], input_files: Sequence[str], prefix: str,
                   skip_missing: bool = False) -> Tuple[List[MetadataEntry], list]:
    """The documents to read, in order: every metadata file's entries, then ``input_files``.
    Returns (usable entries, [(entry, reason)] skipped with ``skip_missing``); raises
    ``InputError`` naming the first problem."""
    check_prefix(prefix)
    entries: List[MetadataEntry] = []
    for metadata_file in metadata_files:
        listed = read_metadata([metadata_file], prefix)
        check_metadata_names_files(metadata_file, listed, prefix)
        entries += listed
    entries += expand_input_files(input_files, prefix)
    return check_documents_exist(entries, skip_missing)
