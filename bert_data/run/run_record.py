"""What a run was started with, kept in its journal beside the ``--resume`` fingerprint so that a
refused resume can say what changed ("--max_seq_length was 128, now 256") rather than only that
something did.  The fingerprint stays the check (``planning.run_fingerprint``); this only
explains it.  Credentials in URLs are redacted, as in the fingerprint.
"""

from __future__ import annotations

import hashlib
from typing import List, Optional

from .. import storage
from ..version import __version__

# Options recorded under a name that is not the command line's.
_OPTION_NAMES = {"output_files": "output_file"}


def run_record(recorded_options: dict, vocab, entries) -> dict:
    """The options (``RunSpec.options``), the vocabulary's hash, the package version and the list
    of documents (its length and hash) of a run, as JSON."""
    digest = hashlib.sha256()
    for entry in entries:
        digest.update(entry.label.encode("utf-8", "surrogateescape") + b"\0")
    return {"options": {key: storage.redact_data(value) for key, value in recorded_options.items()},
            "vocab_sha256": vocab.sha256, "version": __version__,
            "n_listed": len(entries), "listed_sha256": digest.hexdigest()}


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
