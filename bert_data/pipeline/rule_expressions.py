"""Reading the regular expressions of spaCy's tokenizer rules, once (``word_tokens.py``'s helpers).

* The characters a match needs (``needed_characters``, ``needs_spec``): a string holding none of
  them cannot match, so ``AffixTokens`` skips the search (a run of letters skips all four rules).
* The prefix and suffix expressions cut into their alternatives (``prefix_alternatives``,
  ``suffix_alternatives``): spaCy's are alternatives each anchored at the beginning (the end); a
  word is searched only with those that can begin with its first (end with its last) character
  (``alternatives_at``: for a word ending in ".", 4 suffixes of 82; for one beginning with a
  lower-case letter, no prefix), suffixes of bounded width in the word's tail only
  (``suffix_search``).

All read the expression's parse tree (``re._parser``) and give plain data (pattern strings),
which ``spacy_rules_cache.py`` keeps with the rules.
"""

from __future__ import annotations

from typing import Callable, Optional

__all__ = [
    "needed_characters", "needs_spec", "gate", "first_characters", "prefix_alternatives", "suffix_alternatives", "alternatives_at", "suffix_search",
    "EdgeSearch",
]

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


def _edge_characters(items, last: bool) -> Optional[list[tuple[int, int]]]:
    """Characters the first (or ``last``) character a match of the sequence ``items`` consumes
    can be, as ranges, or None when the analysis cannot tell (a match could consume nothing, or
    the sequence begins/ends in what is not followed here: case folding, negated or category
    classes, an optional repeat, a group reference, ...).  Zero-width items at that edge
    (anchors and lookarounds) consume nothing and are passed over."""
    for op, av in (reversed(list(items)) if last else items):
        if op in (_sre.AT, _sre.ASSERT, _sre.ASSERT_NOT):
            continue
        if op is _sre.LITERAL:
            return [(av, av)]
        if op is _sre.IN:
            return _class_ranges(av)
        if op is _sre.SUBPATTERN:
            return None if av[1] & _sre.SRE_FLAG_IGNORECASE else _edge_characters(av[3], last)
        if op is _sre.BRANCH:
            found = []
            for alternative in av[1]:
                edge = _edge_characters(alternative, last)
                if edge is None:
                    return None
                found += edge
            return found
        if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None)):
            return _edge_characters(av[2], last) if av[0] >= 1 else None
        return None
    return None


def _anchored_alternatives(spec: Optional[dict], at_end: bool) -> Optional[list[dict]]:
    """The expression's top-level alternatives, each with ``pattern``, ``width`` (the most
    characters a match consumes, None if unbounded) and ``edge`` (the characters, as [low, high]
    code point ranges, that the first -- or, ``at_end``, the last -- character a match consumes
    can be; None if unknown), or None unless every alternative is anchored at the beginning
    (``^...``) or at the end (``...$``) and the expression is a search, neither verbose nor
    case-folding."""
    import re

    if spec is None or spec["method"] != "search" or spec["flags"] & (re.VERBOSE | re.IGNORECASE | re.MULTILINE):
        return None
    source, flags = spec["pattern"], spec["flags"]
    pieces = _top_level_alternatives(source)
    if "|".join(pieces) != source:
        return None
    anchor = (_sre.AT, _sre.AT_END) if at_end else (_sre.AT, _sre.AT_BEGINNING)
    alternatives = []
    try:
        for piece in pieces:
            parsed = _sre_parse.parse(piece, flags)
            if not parsed.data or parsed.data[-1 if at_end else 0] != anchor:
                return None
            high = parsed.getwidth()[1]
            edge = _edge_characters(parsed.data, at_end)
            alternatives.append({
                "pattern": piece,
                "width": None if high >= _sre.MAXREPEAT or high >= 1000 else high,
                "edge": None if edge is None else [list(pair) for pair in sorted(set(edge))],
            })
    except (re.error, RecursionError):
        return None
    return alternatives


def first_characters(spec: Optional[dict]) -> Optional[list[list[int]]]:
    """The characters a match of the expression (the infix rule's: alternatives anywhere in a
    string) can begin with, as [low, high] code point ranges: every match starts at one of
    them, so a string's matches are found by trying only there.  None where unknown (an
    alternative could match empty, or begins with what is not followed here), or for a
    verbose or case-folding expression."""
    import re

    if spec is None or spec["flags"] & (re.VERBOSE | re.IGNORECASE):
        return None
    pieces = _top_level_alternatives(spec["pattern"])
    if "|".join(pieces) != spec["pattern"]:
        return None
    found = []
    try:
        for piece in pieces:
            edge = _edge_characters(_sre_parse.parse(piece, spec["flags"]).data, last=False)
            if edge is None:
                return None
            found += edge
    except (re.error, RecursionError):
        return None
    return [list(pair) for pair in sorted(set(found))]


def prefix_alternatives(spec: Optional[dict]) -> Optional[list[dict]]:
    """The prefix expression (spaCy's: alternatives each anchored at the beginning, ``^...``)
    as its top-level alternatives (``_anchored_alternatives``), for searches that try only those
    that can begin with a string's first character.  ``^`` (not multiline) matches at the start
    only, so ``prefix_search`` gives the first alternative, in order, that matches there; one
    that cannot begin with the first character (``edge``) cannot match, and leaving it out
    changes nothing (one that could match empty has an unknown ``edge`` and stays in)."""
    return _anchored_alternatives(spec, at_end=False)


def suffix_alternatives(spec: Optional[dict]) -> Optional[list[dict]]:
    """The suffix expression (spaCy's: alternatives each anchored at the end, ``...$``) as its
    top-level alternatives, for searches that try neither every alternative nor every position
    of a word (``_anchored_alternatives``: a bounded match starts in the word's last ``width``
    characters; ``edge``, the characters the last character of a match can be).  Every match
    ends at the end of the string (before a final newline aside), so the leftmost match of the
    whole expression -- what ``suffix_search`` gives -- is the longest match of any alternative,
    and only alternatives whose ``edge`` holds the string's last character (or is unknown) can match it (one that matches consumes that character, or
    nothing: an empty match, a suffix of length 0 either way).  A lookbehind still sees the
    characters before a searched tail.  None where the expression is not cut so (not a search,
    verbose, case-folding, an alternative not anchored at the end)."""
    return _anchored_alternatives(spec, at_end=True)


def alternatives_at(alternatives: list[dict], character: str) -> tuple[int, ...]:
    """The indices of the alternatives (``prefix_alternatives`` or ``suffix_alternatives``) whose
    match can begin (prefixes) or end (suffixes) with ``character``, in order."""
    code = ord(character)
    return tuple(
        i for i, alternative in enumerate(alternatives)
        if alternative["edge"] is None or any(lo <= code <= hi for lo, hi in alternative["edge"])
    )


class EdgeSearch:
    """A tokenizer's prefix (or suffix) search as the length of what it finds at the start (end)
    of a string, made for each first (last) character from the alternatives that can begin
    (end) with it (``prefix_alternatives``, ``suffix_alternatives``): ``for_character(c)`` gives
    that function, or None where no alternative can match.  Without alternatives (None: the
    expression is not cut so), and for a newline at the end (``$`` matches before one), the
    whole expression searches.  Each choice of alternatives is compiled once, when first needed."""

    def __init__(self, spec: dict, alternatives: Optional[list[dict]], at_end: bool, compile: Callable = None) -> None:
        import re

        self._compile = compile or re.compile
        self._spec = spec
        self._alternatives = alternatives
        self._at_end = at_end
        # Made once a character (few characters begin or end words; bounded all the same).
        self.by_character: dict[str, Optional[Callable[[str], int]]] = {}
        self._by_choice: dict[Optional[tuple[int, ...]], Callable[[str], int]] = {}

    def for_character(self, character: str) -> Optional[Callable[[str], int]]:
        if self._alternatives is None or (self._at_end and character == "\n"):
            choice = None
        else:
            choice = alternatives_at(self._alternatives, character)
        if choice == ():
            found = None
        else:
            found = self._by_choice.get(choice)
            if found is None:
                found = self._by_choice[choice] = self._search(choice)
        if len(self.by_character) >= 10_000:
            self.by_character.clear()
        self.by_character[character] = found
        return found

    def _search(self, choice: Optional[tuple[int, ...]]) -> Callable[[str], int]:
        flags = self._spec["flags"]
        if choice is None:  # the rule's own method (a search, mostly)
            whole = getattr(self._compile(self._spec["pattern"], flags), self._spec["method"])

            def length(string: str) -> int:
                match = whole(string)
                return 0 if match is None else match.end() - match.start()

            return length
        chosen = [self._alternatives[i] for i in choice]
        if not self._at_end:  # "^": a match at the start only, the first alternative in order
            first = self._compile("|".join(a["pattern"] for a in chosen), flags).search

            def length(string: str) -> int:
                match = first(string)
                return 0 if match is None else match.end() - match.start()

            return length
        return suffix_search(chosen, flags, self._compile)


def suffix_search(alternatives: list[dict], flags: int, compile: Callable = None) -> Callable[[str], int]:
    """The length of the suffix ``alternatives`` (``suffix_alternatives``'s, all or some) find at
    the end of a string not ending in a newline: the longest of their matches, those of bounded
    width searched in the string's tail only (patterns made by ``compile``, ``re.compile``'s)."""
    import re

    compile = compile or re.compile
    bounded = [a for a in alternatives if a["width"] is not None]
    unbounded = [a for a in alternatives if a["width"] is None]
    width = max((a["width"] for a in bounded), default=0)
    bounded_search = compile("|".join(a["pattern"] for a in bounded), flags).search if bounded else None
    unbounded_search = compile("|".join(a["pattern"] for a in unbounded), flags).search if unbounded else None

    def suffix_length(string: str) -> int:
        length = 0
        if bounded_search is not None:
            match = bounded_search(string, max(0, len(string) - width))
            if match is not None:
                length = match.end() - match.start()
        if unbounded_search is not None:
            match = unbounded_search(string)
            if match is not None and match.end() - match.start() > length:
                length = match.end() - match.start()
        return length

    return suffix_length


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


def gate(rule, needs: Optional[dict], is_ascii: bool, compile: Callable = None):
    """Whether a rule is worth running on a string (ASCII or not): False when it cannot match
    (no rule, or none of the characters a match needs is ASCII, for an ASCII string), True when
    nothing is known, else the search for the characters a match needs (``needs_spec``; made by
    ``compile``, ``re.compile``'s)."""
    import re

    compile = compile or re.compile
    if rule is None:
        return False
    if needs is None:
        return True
    if is_ascii:
        return compile(needs["ascii"]).search if needs["ascii"] else False
    return compile(needs["all"]).search


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
