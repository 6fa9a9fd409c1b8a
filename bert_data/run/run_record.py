"""What a run was started with, kept in its journal beside the ``--resume`` fingerprint so that a
refused resume can say what changed ("--max_seq_length was 128, now 256") rather than only that
something did.  The fingerprint stays the check (``planning.run_fingerprint``); this only
explains it.  Credentials in URLs are redacted, as in the fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from typing import List, Optional, Sequence

from .. import storage
from ..version import __version__

# What ``differences`` says when only the listed files' sizes or times differ (``changed_inputs``
# names them, from the stamps kept beside the journal).
INPUTS_CHANGED = "a listed document file changed (its size, modification time or version)"

# Options recorded under a name that is not the command line's.
_OPTION_NAMES = {"output_files": "output_file"}


def input_stamps(entries) -> List[list]:
    """What says a listed document file is unchanged: ``[label, size, version]``, the version
    being its modification time (ns) for a local file, its ETag (or other version id) for an
    object whose listing gave one.  No request and no ``stat`` of its own: the listing's answer,
    or the ``stat`` that ``check_documents_exist`` made, kept (the cost grows with files, not bytes).
    A content hash would catch an edit that keeps size and time, at the price of reading the
    corpus once more before a resume."""
    stamps = []
    for entry in entries:
        label = storage.redact(entry.label)  # (kept in the work directory: no credential)
        if storage.is_url(entry.path):
            stamps.append([label, entry.size, entry.version])
            continue
        if entry.modified_ns >= 0:  # stat-ed when listed (``check_documents_exist``)
            stamps.append([label, entry.size, entry.modified_ns])
            continue
        try:
            found = os.stat(entry.path)
        except OSError:
            stamps.append([label, -1, ""])
        else:
            stamps.append([label, found.st_size, found.st_mtime_ns])
    return stamps


def run_record(recorded_options: dict, vocab, entries, stamps: Optional[Sequence[list]] = None,
               evaluation_sha256: Optional[List[str]] = None) -> dict:
    """The options (``RunSpec.options``), the vocabulary's hash, the package version, the list
    of documents (its length and hash) and a hash of their stamps (``input_stamps``) of a run,
    as JSON; with ``--decontaminate``, the evaluation sets' hashes too.  The stamps themselves are kept beside the journal (``run_files.write_input_stamps``):
    the journal, rewritten after every unit, stays small however many files are listed."""
    digest = hashlib.sha256()
    for entry in entries:
        digest.update(entry.label.encode("utf-8", "surrogateescape") + b"\0")
    stamps = input_stamps(entries) if stamps is None else stamps
    record = {"options": {key: storage.redact_data(value) for key, value in recorded_options.items()},
              "vocab_sha256": vocab.sha256, "version": __version__,
              "n_listed": len(entries), "listed_sha256": digest.hexdigest(), "inputs_sha256": stamps_digest(stamps)}
    if evaluation_sha256:
        record["evaluation_sha256"] = list(evaluation_sha256)
    return record


def stamps_digest(stamps: Sequence[list]) -> str:
    return hashlib.sha256(json.dumps(list(stamps), separators=(",", ":")).encode("utf-8", "surrogateescape")).hexdigest()


def changed_inputs(before: Optional[Sequence[list]], now: Sequence[list]) -> List[str]:
    """The listed files whose stamp differs from the one the run was started with, each as
    "LABEL changed (3,201 bytes then, 3,412 now)"; [] if ``before`` is unknown."""
    if not before:
        return []
    old = {label: (size, version) for label, size, version in before}
    found = []
    for label, size, version in now:
        if label not in old or old[label] == (size, version):
            continue
        was_size, was_version = old[label]
        if was_size != size:
            what = f"{_bytes(was_size)} then, {_bytes(size)} now"
        elif isinstance(version, int) and isinstance(was_version, int):
            what = f"modified {_when(was_version)} then, {_when(version)} now"
        else:
            what = f"version {was_version or 'unknown'} then, {version or 'unknown'} now"
        found.append(f"{label} changed since the run started ({what})")
    return found


def _bytes(size: int) -> str:
    return "missing" if size < 0 else f"{size:,} bytes"


def _when(mtime_ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(mtime_ns / 1e9)) + f".{mtime_ns % 10**9 // 10**6:03d} UTC"


def differences(before: Optional[dict], now: dict) -> List[str]:
    """What differs between the run record of a journal (None: a journal of an earlier version,
    which kept none) and this run's, each as "--option was X, now Y"."""
    if not before:
        return []
    found = []
    old, new = before.get("options", {}), now["options"]
    for key in sorted(set(old) | set(new)):
        if key == "sources" and isinstance(old.get(key), dict) and isinstance(new.get(key), dict):
            found += _source_differences(old[key], new[key])
        elif old.get(key) != new.get(key):
            found.append(f"--{_OPTION_NAMES.get(key, key)} was {_shown(old.get(key))}, now {_shown(new.get(key))}")
    if before.get("vocab_sha256") != now["vocab_sha256"]:
        where = new.get("vocab_file") or new.get("tokenizer_file") or new.get("spm_model_file") or "the vocabulary"
        found.append(f"the content of {where} changed (SHA-256 {str(before.get('vocab_sha256'))[:12]}... then, "
                     f"{now['vocab_sha256'][:12]}... now)")
    if before.get("n_listed") != now["n_listed"]:
        found.append(f"{before.get('n_listed')} document files were listed, now {now['n_listed']}")
    elif before.get("listed_sha256") != now["listed_sha256"]:
        found.append(f"the list of document files changed (as many, {now['n_listed']}, other paths)")
    if before.get("evaluation_sha256") != now.get("evaluation_sha256") and \
            old.get("decontaminate") == new.get("decontaminate"):
        found.append("the content of an evaluation set (--decontaminate) changed")
    if before.get("inputs_sha256") != now.get("inputs_sha256") and before.get("listed_sha256") == now["listed_sha256"]:
        found.append(INPUTS_CHANGED)
    if before.get("version") != now["version"]:
        found.append(f"bert_data was {before.get('version')}, now {now['version']}")
    return found


def _source_differences(before: dict, now: dict) -> List[str]:
    """What changed in the sources file, key by key ("--sources: source 2 (web) weight was 1, now 2")."""
    found = []
    if before.get("total_tokens") != now.get("total_tokens"):
        found.append(f"--sources: total_tokens was {_shown(before.get('total_tokens'))}, now "
                     f"{_shown(now.get('total_tokens'))}")
    old, new = before.get("source") or [], now.get("source") or []
    if len(old) != len(new):
        return found + [f"--sources: {len(old)} sources were given, now {len(new)}"]
    for number, (a, b) in enumerate(zip(old, new), 1):
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                found.append(f"--sources: source {number} ({b.get('name')}) {key} was {_shown(a.get(key))}, now "
                             f"{_shown(b.get(key))}")
    return found


def _shown(value) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return " ".join(str(item) for item in value) if value else "none"
    return str(value)
