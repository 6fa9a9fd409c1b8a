"""Compiled regular expressions kept as data, so that a process skips compiling spaCy's rules.

The word port (``word_tokens.AffixTokens``) compiles spaCy's tokenizer expressions in every
process: the infix and URL expressions whole, the prefix and suffix alternatives a word's edge
character chooses (``rule_expressions.EdgeSearch``), the needed-character gates.  Their classes
of thousands of characters (``\\p{So}``, every alphabet's letters) make ``re`` spend ~0.1 s
parsing and optimising them.  What ``re`` makes of a pattern is a list of integers (its
``_compiler._code``) handed to ``_sre.compile``; ``Patterns`` records that list for each pattern
it compiles (``stored()``, plain data kept with the rules by ``spacy_rules_cache.py``) and, given
such data, builds each pattern from its list, as ``re._compiler.compile`` does, without parsing.
The code is made from the parse tree with every wide class split (``_split_wide_classes``: a
table for the characters below U+10000, which ``re`` does not make for a class reaching past
U+FFFF), which matches the same strings several times faster.

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
    from re import _compiler as _sre_compiler, _constants as _sre_constants, _parser as _sre_parse
except ImportError:  # pragma: no cover - a Python without these internals (re.compile then)
    _sre = None

__all__ = ["Patterns"]


def _key(pattern: str, flags: int) -> str:
    return f"{flags}:{hashlib.sha1(pattern.encode('utf-8', 'surrogatepass')).hexdigest()}"


def _python() -> list:
    return [sys.hexversion, getattr(_sre, "MAGIC", None)]


_WIDE = 0x10000  # the first character past the Basic Multilingual Plane


def _split_class(items: list, state) -> Optional[tuple]:
    """A class of plain characters and ranges (``[...]``) reaching past U+FFFF, as the
    equivalent ``(?:[its part below U+10000]|(?=[\U00010000-\U0010FFFF])[its part above])``;
    None for any other class."""
    low, high = [], []
    for op, av in items:
        if op is _sre_constants.LITERAL:
            (high if av >= _WIDE else low).append((op, av))
        elif op is _sre_constants.RANGE:
            lo, hi = av
            if hi < _WIDE:
                low.append((op, av))
            elif lo >= _WIDE:
                high.append((op, av))
            else:
                low.append((op, (lo, _WIDE - 1)))
                high.append((op, (_WIDE, hi)))
        else:  # negated, categories: left as they are
            return None
    if not high:
        return None
    SubPattern = _sre_parse.SubPattern
    guard = SubPattern(state, [(_sre_constants.IN, [(_sre_constants.RANGE, (_WIDE, 0x10FFFF))])])
    wide = SubPattern(state, [(_sre_constants.ASSERT, (1, guard)), (_sre_constants.IN, high)])
    alternatives = [SubPattern(state, [(_sre_constants.IN, low)]), wide] if low else [wide]
    return (_sre_constants.BRANCH, (None, alternatives))


def _split_wide_classes(pattern) -> None:
    """In place, in a parsed pattern (not case-folding): every class of plain characters
    reaching past U+FFFF split in two (``_split_class``).  ``re`` compresses a class into a
    table only when all of it is below U+10000; otherwise it tests the class's ranges one by
    one, for every character -- spaCy's ``\p{So}`` symbols and alphabets are hundreds of
    ranges, tested at every position of every word.  The part below becomes a table; the part
    above is tried only for a character past U+FFFF.  The same characters match."""
    C = _sre_constants
    for i, (op, av) in enumerate(pattern.data):
        if op is C.IN:
            split = _split_class(av, pattern.state)
            if split is not None:
                pattern.data[i] = split
        elif op is C.SUBPATTERN:
            if not (av[1] & C.SRE_FLAG_IGNORECASE):  # inline flags turning case folding on
                _split_wide_classes(av[3])
        elif op is C.BRANCH:
            for alternative in av[1]:
                _split_wide_classes(alternative)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
            _split_wide_classes(av[2])
        elif op in (C.ASSERT, C.ASSERT_NOT):
            _split_wide_classes(av[1])
        elif op is getattr(C, "ATOMIC_GROUP", None):
            _split_wide_classes(av)
        elif op is C.GROUPREF_EXISTS:
            _split_wide_classes(av[1])
            if av[2] is not None:
                _split_wide_classes(av[2])


def _code_of(pattern: str, flags: int) -> Optional[dict]:
    """What ``re._compiler.compile`` hands ``_sre.compile`` for ``pattern``, as plain data, with
    its wide classes split (``_split_wide_classes``) unless it folds case."""
    try:
        parsed = _sre_parse.parse(pattern, flags)
        if not ((flags | parsed.state.flags) & re.IGNORECASE):
            _split_wide_classes(parsed)
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
        self._codes: dict = dict(stored["codes"]) if usable else {}
        self._compiled: dict[tuple[str, int], None] = {}

    def compile(self, pattern: str, flags: int = 0) -> "re.Pattern[str]":
        self._compiled[(pattern, flags)] = None
        key = _key(pattern, flags)
        data = self._codes.get(key)
        if data is None and _sre is not None:  # made now (its wide classes split), kept for the process
            data = self._codes[key] = _code_of(pattern, flags)
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
