"""Reading the regular expressions of spaCy's tokenizer rules, once (``word_tokens.py``'s helpers).

* The characters a match needs (``needed_characters``, ``needs_spec``): a string holding none of
  them cannot match, so ``AffixTokens`` skips the search (a run of letters skips all four rules).
* The suffix expression cut in two (``suffix_parts``): spaCy's suffixes are alternatives each
  anchored at the end; those of bounded width are searched in the word's tail only.

Both read the expression's parse tree (``re._parser``) and give plain data (pattern strings),
which ``spacy_rules_cache.py`` keeps with the rules.
"""

from __future__ import annotations

from typing import Callable, Optional

__all__ = ["needed_characters", "needs_spec", "gate", "suffix_parts"]

# -- characters a match needs ----------------------------------------------------------------------

try:  # Python >= 3.11
    from re import _constants as _sre, _parser as _sre_parse
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as _sre  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]


def _class_ranges(items) -> Optional[list[tuple[int, int]]]:
    ranges = []
    for op, av in items:
        if op is _sre.LITERAL:
            ranges.append((av, av))
        elif op is _sre.RANGE:
            ranges.append(av)
        else:  # NEGATE, CATEGORY, ...: not followed
            return None
    return ranges


def _cost(ranges: list[tuple[int, int]]) -> tuple[int, int, int]:
    """Which of a sequence's needed classes to keep: the one with the fewest ASCII letters (words
    are mostly letters), then digits, then the smallest."""
    letters = sum(max(0, min(hi, h) - max(lo, l) + 1) for lo, hi in ranges for l, h in ((65, 90), (97, 122)))
    digits = sum(max(0, min(hi, 57) - max(lo, 48) + 1) for lo, hi in ranges)
    return letters, digits, sum(hi - lo + 1 for lo, hi in ranges)


def _needed(items) -> Optional[list[tuple[int, int]]]:
    """Characters of which a match of the sequence ``items`` holds at least one (in what it
    consumes or what a positive lookaround sees), or None if it could match without any or the
    analysis cannot tell.  Any one item a match cannot do without gives such a set; an item the
    analysis does not follow gives none, and another item may."""
    best = None
    for op, av in items:
        if op is _sre.LITERAL:
            found = [(av, av)]
        elif op is _sre.IN:
            found = _class_ranges(av)
        elif op is _sre.SUBPATTERN:
            found = None if av[1] & _sre.SRE_FLAG_IGNORECASE else _needed(av[3])
        elif op is _sre.BRANCH:
            found = []
            for alternative in av[1]:
                needed = _needed(alternative)
                if needed is None:
                    found = None
                    break
                found += needed
        elif op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)):
            found = _needed(av[2]) if av[0] >= 1 else None
        elif op is _sre.ASSERT:  # a positive lookahead or lookbehind sees characters of the string
            found = _needed(av[1])
        else:  # zero-width (negative lookarounds, anchors) or not followed
            found = None
        if found and (best is None or _cost(found) < _cost(best)):
            best = found
    return best


def _top_level_alternatives(source: str) -> list[str]:
    """``source`` cut at its top-level ``|`` (outside groups and classes, not escaped)."""
    pieces = []
    depth = 0
    start = 0
    in_class = False
    i = 0
    while i < len(source):
        c = source[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
        elif c == "[":
            in_class = True
            j = i + 1
            if source[j : j + 1] == "^":
                j += 1
            if source[j : j + 1] == "]":  # a "]" first in a class is a character
                i = j
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            pieces.append(source[start:i])
            start = i + 1
        i += 1
    pieces.append(source[start:])
    return pieces


def suffix_parts(spec: Optional[dict]) -> Optional[dict]:
    """The suffix expression (spaCy's: alternatives each anchored at the end, ``...$``) cut in
    two, for a search that does not try every position of a long word: the alternatives of
    bounded width (``bounded``, at most ``width`` characters: a match starts in the last
    ``width``) and the others (``unbounded``, or None).  Every match of either ends at the end,
    so the leftmost match of the whole expression is the longest of the two parts' (a lookbehind
    still sees the characters before the searched tail).  None where the expression is not cut
    so (not a search, verbose, an alternative not anchored at the end)."""
    import re

    if spec is None or spec["method"] != "search" or spec["flags"] & re.VERBOSE:
        return None
    source, flags = spec["pattern"], spec["flags"]
    pieces = _top_level_alternatives(source)
    if "|".join(pieces) != source:
        return None
    bounded, unbounded, width = [], [], 0
    try:
        for piece in pieces:
            parsed = _sre_parse.parse(piece, flags)
            if not parsed.data or parsed.data[-1] != (_sre.AT, _sre.AT_END):
                return None
            low, high = parsed.getwidth()
            if high >= _sre.MAXREPEAT or high >= 1000:
                unbounded.append(piece)
            else:
                bounded.append(piece)
                width = max(width, high)
    except (re.error, RecursionError):
        return None
    if not bounded:
        return None
    return {"bounded": "|".join(bounded), "width": width, "unbounded": "|".join(unbounded) or None}


def needs_spec(spec: Optional[dict]) -> Optional[dict]:
    """For a rule (``_regex_spec``'s data): the character classes a match needs (``needed_characters``)
    as pattern strings, the whole class and its ASCII part, or None."""
    import re

    if spec is None or spec["method"] not in ("search", "match", "fullmatch", "finditer"):
        return None
    needs = needed_characters(re.compile(spec["pattern"], spec["flags"]))
    if needs is None:
        return None
    # The class can be thousands of ranges, which re tests one by one for every character; its
    # ASCII part is a small table, enough for an ASCII string (most words).
    ascii_part = "".join(re.escape(chr(c)) for c in range(128) if needs.match(chr(c)))
    return {"all": needs.pattern, "ascii": f"[{ascii_part}]" if ascii_part else None}


def gate(rule, needs: Optional[dict], is_ascii: bool):
    """Whether a rule is worth running on a string (ASCII or not): False when it cannot match
    (no rule, or none of the characters a match needs is ASCII, for an ASCII string), True when
    nothing is known, else the search for the characters a match needs (``needs_spec``)."""
    import re

    if rule is None:
        return False
    if needs is None:
        return True
    if is_ascii:
        return re.compile(needs["ascii"]).search if needs["ascii"] else False
    return re.compile(needs["all"]).search


def needed_characters(pattern) -> Optional["re.Pattern[str]"]:
    """A compiled character class such that a string with none of its characters has no match
    of ``pattern`` (a compiled ``re`` pattern) anywhere; None when the analysis cannot tell (a
    match could be empty, or the pattern uses what is not followed here: case folding, negated or
    category classes, ...).  A one-off reading of the pattern's parse tree (``re._parser``)."""
    import re

    if pattern is None or not isinstance(pattern.pattern, str) or pattern.flags & re.IGNORECASE:
        return None
    try:
        ranges = _needed(_sre_parse.parse(pattern.pattern, pattern.flags))
    except (re.error, RecursionError):
        return None
    if not ranges:
        return None
    parts = []
    for lo, hi in sorted(set(ranges)):
        parts.append(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}")
    return re.compile("[" + "".join(parts) + "]")
