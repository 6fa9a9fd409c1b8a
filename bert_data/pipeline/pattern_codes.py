"""Compiled regular expressions kept as data, so that a process skips compiling spaCy's rules.

The word port (``word_tokens.AffixTokens``) compiles spaCy's tokenizer expressions in every
process: the infix and URL expressions whole, the prefix and suffix alternatives a word's edge
character chooses (``rule_expressions.EdgeSearch``), the needed-character gates.  Their classes
of thousands of characters (``\\p{So}``, every alphabet's letters) make ``re`` spend ~0.1 s
parsing and optimising them.  What ``re`` makes of a pattern is a list of integers (its
``_compiler._code``) handed to ``_sre.compile``; ``Patterns`` records that list for each pattern
it compiles (``stored()``, plain data kept with the rules by ``spacy_rules_cache.py``) and, given
such data, builds each pattern from its list, as ``re._compiler.compile`` does, without parsing.

The code belongs to one Python (``_sre.MAGIC`` and the interpreter's version are stored with it
and must match, and the rules cache's key names the Python too); anything that does not fit --
another Python, a missing pattern, ``_sre`` refusing the code -- is compiled by ``re.compile``:
the data only saves time, never decides a match.
"""

from __future__ import annotations

import hashlib
import re
import sys
from typing import Optional

try:
    import _sre
    from re import _compiler as _sre_compiler, _parser as _sre_parse
except ImportError:  # pragma: no cover - a Python without these internals (re.compile then)
    _sre = None

__all__ = ["Patterns"]


def _key(pattern: str, flags: int) -> str:
    return f"{flags}:{hashlib.sha1(pattern.encode('utf-8', 'surrogatepass')).hexdigest()}"


def _python() -> list:
    return [sys.hexversion, getattr(_sre, "MAGIC", None)]


def _code_of(pattern: str, flags: int) -> Optional[dict]:
    """What ``re._compiler.compile`` hands ``_sre.compile`` for ``pattern``, as plain data."""
    try:
        parsed = _sre_parse.parse(pattern, flags)
        code = _sre_compiler._code(parsed, flags)
    except Exception:  # noqa: BLE001 - re's internals moved: nothing stored, re.compile then
        return None
    groupindex = dict(parsed.state.groupdict)
    indexgroup: list[Optional[str]] = [None] * parsed.state.groups
    for name, index in groupindex.items():
        indexgroup[index] = name
    return {"flags": flags | parsed.state.flags, "code": list(code), "groups": parsed.state.groups - 1,
            "groupindex": groupindex, "indexgroup": indexgroup}


class Patterns:
    """``compile(pattern, flags)``: ``re.compile``'s pattern, made from ``stored`` code where it
    holds this pattern's for this Python; ``stored()`` gives the code of every pattern compiled
    so far, for a later process."""

    def __init__(self, stored: Optional[dict] = None) -> None:
        usable = _sre is not None and isinstance(stored, dict) and stored.get("python") == _python()
        self._codes: dict = stored["codes"] if usable else {}
        self._compiled: dict[tuple[str, int], None] = {}

    def compile(self, pattern: str, flags: int = 0) -> "re.Pattern[str]":
        self._compiled[(pattern, flags)] = None
        data = self._codes.get(_key(pattern, flags))
        if data is not None:
            try:
                return _sre.compile(pattern, data["flags"], data["code"], data["groups"], data["groupindex"],
                                    tuple(data["indexgroup"]))
            except (TypeError, ValueError, RuntimeError, KeyError):  # refused: compiled the usual way
                pass
        return re.compile(pattern, flags)

    def stored(self) -> Optional[dict]:
        """The compiled code of every pattern compiled so far (plain data), or None without
        ``re``'s internals."""
        if _sre is None:
            return None
        codes = {}
        for pattern, flags in self._compiled:
            data = _code_of(pattern, flags)
            if data is not None:
                codes[_key(pattern, flags)] = data
        return {"python": _python(), "codes": codes}
