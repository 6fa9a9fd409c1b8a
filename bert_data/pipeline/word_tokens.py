"""spaCy's tokenizer on one word, without a ``Doc``: the token texts its affix rules give.

``RuleSentencizer`` (rule_sentences.py) needs spaCy's tokens of each distinct word holding a
sentence punctuation character -- tens of thousands of words in a corpus of a few megabytes.
Calling the pipeline's tokenizer costs ~90 us a new word: a ``Doc``, a ``Lexeme`` (with its
lexical attributes) for every new token text, and the rules' regular-expression searches, each
trying hundreds of alternatives at every position of the word.  ``AffixTokens`` runs those
searches, with the tokenizer's own compiled ``prefix_search``, ``suffix_search``,
``infix_finditer``, ``token_match`` and ``url_match`` and its own special-case table, in the order
``spacy/tokenizer.pyx`` does (``Tokenizer._split_affixes`` then ``Tokenizer._attach_tokens``):
``affix_tokens`` gives the tokens before spaCy's special-case matcher runs over the ``Doc``, and
``tokens`` declines -- returns None, so the caller asks spaCy -- wherever a special case takes part:

* the word, or any string the affix loop reaches, is a special case (spaCy then copies the
  special's tokens, and stops caching);
* a run of adjacent tokens spells a special case that spaCy put in its special-case matcher
  (``Tokenizer.add_special_case``: one with a prefix, suffix or infix, or every one without
  ``faster_heuristics``) and whose tokens are not its pattern's: ``Tokenizer._apply_special_cases``
  could retokenize them.  A match needs its tokens to spell the special case's text, so when no
  run does, no match changes a token (one whose substrings are its pattern, like ``"'"``, gives
  back the same texts).

What is left is spaCy's algorithm with nothing but the regular expressions deciding, which this
module follows step by step.  spaCy's tokenizer cache only memoises whole words' tokens, and the
string ``_attach_tokens`` looks up in it is one the affix loop left with no prefix and no suffix
(or a special case), whose cached tokens are the infix split done here: the cache changes
nothing.  A search is skipped where the string holds none of the characters every match of the
expression needs (``needed_characters``, read once from the expression's parse tree): a run of
letters skips all four.  The port follows spaCy 3's tokenizer; ``AffixTokens.for_tokenizer``
returns None for any other major version or tokenizer class, and the differential tests
(tests/pipeline/test_word_tokens.py) compare it with the tokenizer on hostile words.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional

__all__ = ["AffixTokens", "matcher_patterns", "needed_characters"]


class AffixTokens:
    """The token texts spaCy's ``Tokenizer`` gives a single word (no whitespace), or None."""

    def __init__(
        self, tokenizer, patterns: Optional[dict[str, list[str]]] = None, also_changing: Iterable[str] = ()
    ) -> None:
        from spacy.attrs import NORM, ORTH

        self._prefix_search = tokenizer.prefix_search
        self._suffix_search = tokenizer.suffix_search
        self._infix_finditer = tokenizer.infix_finditer
        self._token_match = tokenizer.token_match
        self._url_match = tokenizer.url_match
        rules = tokenizer.rules or {}
        self._rules = rules
        self._orth = ORTH
        self._specials = frozenset(rules)
        # The special cases of spaCy's matcher whose tokens are not their pattern's (applying
        # one changes tokens; one whose substrings are its pattern, with nothing but a norm,
        # leaves the texts as they were), and any the caller counts as such too.
        if patterns is None:
            patterns = matcher_patterns(tokenizer)
        self._changing = frozenset(
            text
            for text, pattern in patterns.items()
            if [substring.get(ORTH) for substring in rules[text]] != pattern
            or any(set(substring) - {ORTH, NORM} for substring in rules[text])
        ) | frozenset(also_changing)
        # Every beginning of one: a run of tokens spelling none stops growing.
        self._changing_beginnings = frozenset(text[:i] for text in self._changing for i in range(1, len(text) + 1))
        # For each rule, characters a string must hold for it to match anywhere: a word part
        # without any (a run of letters, mostly) skips the search.
        self._prefix_needs = _needs_of(self._prefix_search)
        self._suffix_needs = _needs_of(self._suffix_search)
        self._infix_needs = _needs_of(self._infix_finditer)
        self._url_needs = _needs_of(self._url_match)

    @property
    def changing(self) -> frozenset[str]:
        """The special cases the port declines to see spelt by adjacent tokens."""
        return self._changing

    @classmethod
    def for_tokenizer(
        cls, tokenizer, patterns: Optional[dict[str, list[str]]] = None, also_changing: Iterable[str] = ()
    ) -> Optional["AffixTokens"]:
        """The port for ``tokenizer``, or None when it is not spaCy 3's ``Tokenizer`` (the port
        follows that class's code; a subclass may tokenize differently)."""
        import spacy
        from spacy.tokenizer import Tokenizer

        if type(tokenizer) is not Tokenizer or not spacy.__version__.startswith("3."):
            return None
        return cls(tokenizer, patterns, also_changing)

    def _prefix_length(self, string: str) -> int:  # Tokenizer.find_prefix
        if self._prefix_search is None or (self._prefix_needs and not self._prefix_needs(string)):
            return 0
        match = self._prefix_search(string)
        return match.end() - match.start() if match is not None else 0

    def _suffix_length(self, string: str) -> int:  # Tokenizer.find_suffix
        if self._suffix_search is None or (self._suffix_needs and not self._suffix_needs(string)):
            return 0
        match = self._suffix_search(string)
        return match.end() - match.start() if match is not None else 0

    def tokens(self, word: str) -> Optional[list[str]]:
        """spaCy's token texts of ``word`` (non-empty, no whitespace) tokenized alone, or None
        where a special case takes part (the caller then asks spaCy)."""
        tokens, special = self.affix_tokens(word)
        if special or tokens is None or self.spells_a_changing_case(tokens):
            return None
        return tokens

    def affix_tokens(self, word: str) -> tuple[Optional[list[str]], bool]:
        """The tokens spaCy's tokenizer has for ``word`` before its special-case matcher runs
        over the ``Doc`` (what a match across words is made of), and whether a special case
        took part; (None, True) when a special case's substrings are not plain texts."""
        specials = self._specials
        if word in specials:
            return self._special_tokens(word), True
        token_match = self._token_match
        # Tokenizer._split_affixes (with_special_cases=True).
        string = word
        prefixes: list[str] = []
        suffixes: list[str] = []
        last_size = 0
        prefix = ""
        while string and len(string) != last_size:
            if token_match is not None and token_match(string):
                break
            if string in specials:
                break
            last_size = len(string)
            pre_len = self._prefix_length(string)
            if pre_len:
                prefix = string[:pre_len]
                minus_pre = string[pre_len:]
                if minus_pre and minus_pre in specials:
                    string = minus_pre
                    prefixes.append(prefix)
                    break
            suf_len = self._suffix_length(string[pre_len:])
            if suf_len:
                suffix = string[-suf_len:]
                minus_suf = string[:-suf_len]
                if minus_suf and minus_suf in specials:
                    string = minus_suf
                    suffixes.append(suffix)
                    break
            if pre_len and suf_len and pre_len + suf_len <= len(string):
                string = string[pre_len:-suf_len]
                prefixes.append(prefix)
                suffixes.append(suffix)
            elif pre_len:
                string = minus_pre
                prefixes.append(prefix)
            elif suf_len:
                string = minus_suf
                suffixes.append(suffix)
        # Tokenizer._attach_tokens.
        tokens = prefixes
        special = False
        if string:
            if string in specials:
                substrings = self._special_tokens(string)
                if substrings is None:
                    return None, True
                tokens += substrings
                special = True
            elif (token_match is not None and token_match(string)) or (
                self._url_match is not None
                and not (self._url_needs and not self._url_needs(string))
                and self._url_match(string)
            ):
                tokens.append(string)
            else:
                if self._infix_finditer is None or (self._infix_needs and not self._infix_needs(string)):
                    matches = ()
                else:
                    matches = list(self._infix_finditer(string))
                if not matches:
                    tokens.append(string)
                else:
                    start = 0
                    for match in matches:
                        infix_start, infix_end = match.start(), match.end()
                        if infix_start == 0:  # spaCy's start_before_infixes
                            continue
                        if infix_start != start:
                            tokens.append(string[start:infix_start])
                        if infix_start != infix_end:
                            tokens.append(string[infix_start:infix_end])
                        start = infix_end
                    if string[start:]:
                        tokens.append(string[start:])
        tokens.extend(reversed(suffixes))
        return tokens, special

    def _special_tokens(self, text: str) -> Optional[list[str]]:
        """The token texts of the special case ``text`` (its substrings' ORTH)."""
        orths = [substring.get(self._orth, substring.get("ORTH")) for substring in self._rules[text]]
        return orths if all(isinstance(orth, str) for orth in orths) else None

    def spells_a_changing_case(self, tokens: list[str]) -> bool:
        """Whether adjacent tokens spell a special case of spaCy's matcher that changes tokens
        (a match needs its tokens to spell the special case's text)."""
        changing = self._changing
        beginnings = self._changing_beginnings
        for i in range(len(tokens)):
            text = ""
            for token in tokens[i:]:
                text += token
                if text not in beginnings:
                    break
                if text in changing:
                    return True
        return False


def matcher_patterns(tokenizer) -> dict[str, list[str]]:
    """The patterns (token texts) of the tokenizer's special-case matcher, by special case.

    spaCy (``Tokenizer.add_special_case``) adds a special case to that matcher, with the tokens the
    affix rules alone give its text, when the text has a prefix, suffix or infix or a space (or
    always, without ``faster_heuristics``).  A tokenizer with the same affix rules and no special
    cases gives those tokens.
    """
    from spacy.tokenizer import Tokenizer

    bare = Tokenizer(
        tokenizer.vocab,
        rules={},
        prefix_search=tokenizer.prefix_search,
        suffix_search=tokenizer.suffix_search,
        infix_finditer=tokenizer.infix_finditer,
        token_match=tokenizer.token_match,
        url_match=tokenizer.url_match,
    )
    patterns = {}
    for text in tokenizer.rules or {}:
        if not (
            not tokenizer.faster_heuristics
            or tokenizer.find_prefix(text)
            or tokenizer.find_infix(text)
            or tokenizer.find_suffix(text)
            or " " in text
        ):
            continue
        patterns[text] = [token.text for token in bare(text)]
    return patterns


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


def _needs_of(method) -> Optional[Callable[[str], object]]:
    """For a compiled pattern's search/match/finditer method: the search for the characters a
    match needs (``needed_characters``), or None."""
    import re

    pattern = getattr(method, "__self__", None)
    if not isinstance(pattern, re.Pattern) or getattr(method, "__name__", "") not in (
        "search", "match", "fullmatch", "finditer"
    ):
        return None
    needs = needed_characters(pattern)
    if needs is None:
        return None
    # The class can be thousands of ranges, which re tests one by one for every character; its
    # ASCII part is a small table, enough for an ASCII string (most words).
    ascii_part = "".join(re.escape(chr(c)) for c in range(128) if needs.match(chr(c)))
    search_ascii = re.compile(f"[{ascii_part}]").search if ascii_part else (lambda string: None)
    search_all = needs.search

    def search(string: str):
        return search_ascii(string) if string.isascii() else search_all(string)

    return search


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
