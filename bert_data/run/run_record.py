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


def run_record(recorded_options: dict, vocab, entries, evaluation_sha256: Optional[List[str]] = None) -> dict:
    """The options (``RunSpec.options``), the vocabulary's hash, the package version and the list
    of documents (its length and hash) of a run, as JSON; with ``--decontaminate``, the
    evaluation sets' hashes too."""
    digest = hashlib.sha256()
    for entry in entries:
        digest.update(entry.label.encode("utf-8", "surrogateescape") + b"\0")
    record = {"options": {key: storage.redact_data(value) for key, value in recorded_options.items()},
              "vocab_sha256": vocab.sha256, "version": __version__,
              "n_listed": len(entries), "listed_sha256": digest.hexdigest()}
    if evaluation_sha256:
        record["evaluation_sha256"] = list(evaluation_sha256)
    return record


def differences(before: Optional[dict], now: dict) -> List[str]:
    """What differs between the run record of a journal (None: a journal of an earlier version,
    which kept none) and this run's, each as "--option was X, now Y"."""
    if not before:
        return []
    found = []
    old, new = before.get("options", {}), now["options"]
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
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
    if before.get("version") != now["version"]:
        found.append(f"bert_data was {before.get('version')}, now {now['version']}")
    return found


def _shown(value) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return " ".join(str(item) for item in value) if value else "none"
    return str(value)
