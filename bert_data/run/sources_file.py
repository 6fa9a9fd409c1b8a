"""The sources file (``--sources FILE``, TOML or JSON): read and checked once, by the resolve
step, every mistake one line naming the key and the fix.

.. code-block:: toml

    total_tokens = 1_000_000        # optional: the run's tokens, for shares

    [[source]]
    name = "wiki"
    metadata_files = ["wiki/metadata.txt"]   # or input_files = ["web/*.jsonl.gz"]
    input_files_prefix = "wiki"
    weight = 2.0                             # or tokens = 2_000_000_000, or share = 0.3

Relative paths (``metadata_files``, ``val_metadata_files``, ``input_files_prefix``, and
``input_files`` when the source has no prefix) are relative to the sources file's folder; URLs
and absolute paths are kept.  A source takes the run's reading options (``--text_field``,
``--val_fraction``, ``--val_seed``) unless it gives its own.
"""

from __future__ import annotations

import difflib
import json
import math
import os
from typing import Dict

from .. import storage
from ..config import ConfigError
from ..pipeline.sources import REQUESTS, SHARE, TOKENS, WEIGHT

SOURCE_KEYS = ("name", "metadata_files", "input_files", "input_files_prefix", "val_metadata_files", "val_fraction",
               "val_seed", "text_field") + REQUESTS
FILE_KEYS = ("source", "total_tokens")
PATH_LISTS = ("metadata_files", "input_files", "val_metadata_files")


def load_sources(path: str) -> dict:
    """The sources file, checked: ``{"source": [{key: value}...], "total_tokens": N or None}``,
    paths made relative to the current directory (or absolute), lists as lists.  Raises
    ConfigError naming the key and the fix."""
    where = f"--sources {path}"
    if not storage.is_url(path) and not os.path.isfile(path):
        raise ConfigError(f"{where}: file not found; name a TOML or JSON file of [[source]] tables")
    try:
        with storage.open_read(path) as handle:
            data = handle.read()
    except OSError as error:
        raise ConfigError(f"{where}: cannot read it: {error}") from None
    try:
        if path.endswith(".json"):
            content = json.loads(data)
        else:
            import tomllib

            content = tomllib.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        kind = "JSON" if path.endswith(".json") else "TOML (name a JSON file .json)"
        raise ConfigError(f"{where}: not valid {kind}: {' '.join(str(error).split())}") from None
    if not isinstance(content, dict):
        raise ConfigError(f"{where}: expected a table with [[source]] entries, got {type(content).__name__}")
    _unknown_keys(where, content, FILE_KEYS)
    sources = content.get("source")
    if not sources or not isinstance(sources, list) or not all(isinstance(item, dict) for item in sources):
        raise ConfigError(f"{where}: no [[source]] table; add one per source, with name, inputs and weight, tokens "
                          "or share")
    folder = "" if storage.is_url(path) else os.path.dirname(path)
    checked = [_check_source(where, index, source, folder) for index, source in enumerate(sources)]
    names = [source["name"] for source in checked]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"{where}: source name {repeated[0]!r} is given twice; give each source its own name")
    total = content.get("total_tokens")
    if total is not None and (isinstance(total, bool) or not isinstance(total, int) or total <= 0):
        raise ConfigError(f"{where}: total_tokens must be a positive whole number of tokens, got {total!r}")
    shares = [source for source in checked if SHARE in source]
    share_sum = sum(source[SHARE] for source in shares)
    if shares and total is None:
        if len(shares) < len(checked) and share_sum >= 1:
            raise ConfigError(f"{where}: the shares sum to {share_sum:g}, leaving nothing for the sources given by "
                              "weight or tokens; lower them below 1 or set total_tokens")
        if len(shares) == len(checked) and not math.isclose(share_sum, 1.0, rel_tol=1e-6):
            raise ConfigError(f"{where}: every source is a share and they sum to {share_sum:g}; make them sum to 1 "
                              "or set total_tokens (the run's tokens)")
    if total is not None and share_sum > 1 + 1e-9:
        raise ConfigError(f"{where}: the shares sum to {share_sum:g}, more than the run; lower them to sum to at "
                          "most 1")
    return {"source": checked, "total_tokens": total}


def _unknown_keys(where: str, table: dict, known) -> None:
    for key in table:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known keys: {', '.join(known)}"
            raise ConfigError(f"{where}: unknown key {key!r}; {hint}")


def _check_source(where: str, index: int, source: dict, folder: str) -> dict:
    name = source.get("name")
    at = f"{where}: source {index + 1}" + (f" ({name!r})" if isinstance(name, str) else "")
    _unknown_keys(at, source, SOURCE_KEYS)
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{at}: missing name; give each source a name = \"...\"")
    checked: Dict[str, object] = {"name": name}
    for key in PATH_LISTS:
        value = source.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise ConfigError(f"{at}: {key} must be a path or a list of paths, got {value!r}")
        checked[key] = value
    if not checked["metadata_files"] and not checked["input_files"]:
        raise ConfigError(f"{at}: missing inputs; give metadata_files (with input_files_prefix) or input_files "
                          "(paths or globs: text, JSON Lines, Parquet, URLs)")
    prefix = source.get("input_files_prefix", "")
    if not isinstance(prefix, str):
        raise ConfigError(f"{at}: input_files_prefix must be a directory, got {prefix!r}")
    checked["input_files_prefix"] = _relative_to(folder, prefix) if prefix else ""
    for key in ("metadata_files", "val_metadata_files"):
        checked[key] = [_relative_to(folder, item) for item in checked[key]]
    if not prefix:
        checked["input_files"] = [_relative_to(folder, item) for item in checked["input_files"]]
    for key, kind in (("val_fraction", float), ("val_seed", int), ("text_field", str)):
        if key in source:
            value = source[key]
            good = (isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1) \
                if kind is float else (isinstance(value, int) and not isinstance(value, bool) and value >= 0) \
                if kind is int else (isinstance(value, str) and bool(value))
            if not good:
                wanted = {"val_fraction": "a number in [0, 1)", "val_seed": "a whole number >= 0",
                          "text_field": "a non-empty key or column name"}[key]
                raise ConfigError(f"{at}: {key} must be {wanted}, got {value!r}")
            checked[key] = value
    if "val_fraction" in checked and checked["val_metadata_files"]:
        raise ConfigError(f"{at}: val_fraction and val_metadata_files contradict each other; choose validation "
                          "documents by hash or list them")
    given = [key for key in REQUESTS if key in source]
    if len(given) != 1:
        raise ConfigError(f"{at}: " + (f"{' and '.join(given)} are both given; keep one of weight, tokens or share"
                                        if given else "missing weight, tokens or share; give one (weight = 1.0 "
                                        "takes every document once)"))
    key = given[0]
    value = source[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (key == TOKENS and not isinstance(value, int)):
        kind = "a whole number of tokens" if key == TOKENS else "a number"
        raise ConfigError(f"{at}: {key} must be {kind}, got {value!r}")
    if value < 0 or not math.isfinite(value):
        raise ConfigError(f"{at}: {key} must not be negative, got {value!r}; 0 leaves the source out of training")
    if key == SHARE and value > 1:
        raise ConfigError(f"{at}: share is a fraction of the run's tokens, at most 1, got {value!r}")
    checked[key] = value
    return checked


def _relative_to(folder: str, path: str) -> str:
    if not folder or storage.is_url(path) or os.path.isabs(os.path.expanduser(path)):
        return os.path.expanduser(path)
    return os.path.join(folder, path)


def request_of(source: dict) -> tuple:
    """(``WEIGHT``, ``TOKENS`` or ``SHARE``, its value) of a checked source."""
    key = next(key for key in REQUESTS if key in source)
    return key, source[key]

