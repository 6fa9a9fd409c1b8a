"""spaCy's tokenizer on one word, without a ``Doc``: the token texts its affix rules give.

``RuleSentencizer`` (rule_sentences.py) needs spaCy's tokens of each distinct word holding a
sentence punctuation character -- tens of thousands of words in a corpus of a few megabytes.
Calling the pipeline's tokenizer costs ~90 us a new word: a ``Doc``, a ``Lexeme`` (with its
lexical attributes) for every new token text, and the rules' regular-expression searches, each
trying hundreds of alternatives at every position of the word.  ``AffixTokens`` runs those
searches, with the tokenizer's own compiled ``prefix_search``, ``suffix_search``,
``infix_finditer``, ``token_match`` and ``url_match`` and its own special-case table, in the order
``spacy/tokenizer.pyx`` does (``Tokenizer._split_affixes`` then ``Tokenizer._attach_tokens``):
``affix_tokens`` gives the tokens before spaCy's special-case matcher runs over the ``Doc`` (a
special case the word, or any string the affix loop reaches, is, gives the special's tokens), and
``retokenize`` runs that matcher (``Tokenizer._apply_special_cases``: a ``PhraseMatcher`` on the
token texts, the longest then leftmost match taken where it overlaps none taken before, a match
whose text is a special case replaced by its tokens).  spaCy puts a special case in its matcher
(``Tokenizer.add_special_case``) when it has a prefix, suffix or infix (or always, without
``faster_heuristics``), with the tokens the affix rules alone give its text; a match needs its
tokens to spell the special case's text, so the matcher only runs where a run of adjacent tokens
spells one whose tokens are not its pattern's (one whose substrings are its pattern, like
``"'"``, gives back the same texts).  ``tokens`` gives a word's final tokens, ``text_tokens`` a
whole text's (whitespace tokens and matches across words included); both return None only where
a special case's substrings are not plain texts, and the caller then asks spaCy.

What is left is spaCy's algorithm with nothing but the regular expressions deciding, which this
module follows step by step.  spaCy's tokenizer cache only memoises whole words' tokens, and the
string ``_attach_tokens`` looks up in it is one the affix loop left with no prefix and no suffix
(or a special case), whose cached tokens are the infix split done here: the cache changes
nothing.  A search is skipped where the string holds none of the characters every match of the
expression needs (``needed_characters``, read once from the expression's parse tree): a run of
letters skips all four.  The port follows spaCy 3's tokenizer; ``ingredients`` (what the port is
made of, as plain data, which ``spacy_rules_cache.py`` keeps on disk) returns None for any other
major version or tokenizer class, and the differential tests (tests/pipeline/test_word_tokens.py)
compare it with the tokenizer on hostile words and texts.
"""

from __future__ import annotations

import re as _re
from typing import Callable, Iterable, Optional

from .rule_expressions import EdgeSearch, first_characters, gate as _gate, needed_characters, needs_spec
from .rule_expressions import prefix_alternatives
from .rule_expressions import suffix_alternatives
from .pattern_codes import Patterns

__all__ = ["AffixTokens", "ingredients", "token_offsets", "matcher_patterns", "needed_characters"]


class AffixTokens:
    """The token texts spaCy's ``Tokenizer`` gives a single word (no whitespace), or a text.

    Made from plain *ingredients* (``ingredients(tokenizer)``: the rules' regular expressions as
    pattern strings, the special cases' token texts, the matcher's patterns), which is what
    ``spacy_rules_cache.py`` stores, so that a process can tokenize without importing spaCy.
    """

    def __init__(self, ingredients: dict) -> None:
        # The expressions are made from their compiled code where the ingredients keep it
        # (``pattern_codes``: spaCy's classes of thousands of characters cost ~0.1 s to compile).
        self._patterns = Patterns(ingredients.get("compiled"))

        def compiled(name: str):
            spec = ingredients[name]
            if spec is None:
                return None
            return getattr(self._patterns.compile(spec["pattern"], spec["flags"]), spec["method"])

        # The prefix and suffix searches by a string's first and last character, with the
        # alternatives that can match it (``rule_expressions.EdgeSearch``), compiled when needed.
        self._prefix = self._edge_search(ingredients, "prefix_search", "prefix_alternatives", at_end=False)
        self._suffix = self._edge_search(ingredients, "suffix_search", "suffix_alternatives", at_end=True)
        self._infix_finditer = compiled("infix_finditer")
        self._token_match = compiled("token_match")
        self._url_match = compiled("url_match")
        # Where an infix match can begin, in an ASCII string (``_infix_spans``; None: anywhere).
        self._infix_starts = self._infix_match = None
        starts = ingredients.get("infix_starts")
        infix = ingredients["infix_finditer"]
        if starts is not None and infix is not None and infix["method"] == "finditer":
            ascii_starts = "".join(_re.escape(chr(c)) for lo, hi in starts for c in range(lo, min(hi, 127) + 1))
            if ascii_starts:
                self._infix_starts = self._patterns.compile(f"[{ascii_starts}]").finditer
            else:
                self._infix_starts = lambda string: ()
            self._infix_match = self._patterns.compile(infix["pattern"], infix["flags"]).match
        # Special case -> its tokens' texts (None: a substring whose text is not a plain str).
        self._special_texts: dict[str, Optional[list[str]]] = ingredients["specials"]
        self._specials = frozenset(self._special_texts)
        self._changing = frozenset(ingredients["changing"])
        # Every beginning of one: a run of tokens spelling none stops growing.
        self._changing_beginnings = frozenset(text[:i] for text in self._changing for i in range(1, len(text) + 1))
        # spaCy's special-case matcher (a PhraseMatcher on ORTH): its patterns by first token.
        self._patterns_by_first: dict[str, list[tuple[str, ...]]] = {}
        for pattern in ingredients["patterns"].values():
            self._patterns_by_first.setdefault(pattern[0], []).append(tuple(pattern))
        # For each rule, characters a string must hold for it to match anywhere: a word part
        # without any (a run of letters, mostly) skips the search.
        needs = ingredients["needs"]
        # By whether the word is ASCII: for each rule, False (it cannot match: absent, or none of
        # the characters it needs are ASCII), True (search), or the search for what it needs.
        # (The classes of all characters are thousands of ranges: compiled at the first word that
        # is not ASCII.)
        self._needs = needs
        self._gates = {True: self._gates_for(True)}
        # Whether a run of ASCII letters can match no rule (no token_match; every other rule
        # needs a character that is not an ASCII letter): then, not a special case, it is one token.
        self._letters_inert = self._token_match is None and all(
            ingredients[name] is None
            or (needs[name] is not None and not any(c.isalpha() for c in _ascii_class_members(needs[name]["ascii"])))
            for name in ("prefix_search", "suffix_search", "infix_finditer", "url_match")
        )
        self._word_cache: dict[str, tuple[tuple[str, ...], bool]] = {}

    def _letters_then(self, word: str) -> Optional[list[str]]:
        """The tokens of an ASCII word (not a special case) that is letters, or letters and one
        more character, where the rules prove them without running the affix loop: a run of
        ASCII letters that is no special case is one token (``_letters_inert``), and letters
        then a character whose prefix search finds nothing and whose suffix search finds that
        character are the letters and it (the loop takes the suffix, leaving the letters, which
        are one token) -- most words holding sentence punctuation ("word.", "Word?").  None where
        the loop must run."""
        if word.isalpha():
            return [word]
        letters = word[:-1]
        if not letters.isalpha() or letters in self._specials:
            return None
        first, last = word[0], word[-1]
        if self._prefix is not None:
            by_first = self._prefix.by_character
            prefix_length = by_first[first] if first in by_first else self._prefix.for_character(first)
            if prefix_length is not None and prefix_length(word):
                return None
        if self._suffix is None:
            return None
        by_last = self._suffix.by_character
        suffix_length = by_last[last] if last in by_last else self._suffix.for_character(last)
        if suffix_length is None or suffix_length(word) != 1:
            return None
        return [letters, last]

    def _infix_spans(self, string: str, is_ascii: bool) -> list[tuple[int, int]]:
        """The spans of ``infix_finditer(string)``.  In an ASCII string, a match is tried only
        where one can begin (``first_characters``), each the leftmost from the end of the last,
        as ``finditer`` finds them (a lookbehind still sees the characters before)."""
        starts = self._infix_starts if is_ascii else None
        if starts is None:
            return [match.span() for match in self._infix_finditer(string)]
        spans = []
        end = 0
        match_at = self._infix_match
        for candidate in starts(string):
            begin = candidate.start()
            if begin < end:
                continue
            match = match_at(string, begin)
            if match is not None:
                end = match.end()
                spans.append((begin, end))
        return spans

    def _gates_for(self, is_ascii: bool) -> tuple:
        rules = (self._infix_finditer, self._url_match)
        names = ("infix_finditer", "url_match")
        return tuple(_gate(rule, self._needs[name], is_ascii, self._patterns.compile) for rule, name in zip(rules, names))

    def _edge_search(self, ingredients: dict, name: str, cut: str, at_end: bool) -> Optional[EdgeSearch]:
        spec = ingredients[name]
        return None if spec is None else EdgeSearch(spec, ingredients.get(cut), at_end, self._patterns.compile)

    @property
    def changing(self) -> frozenset[str]:
        """The special cases of spaCy's matcher whose application changes tokens."""
        return self._changing

    @classmethod
    def for_tokenizer(
        cls, tokenizer, patterns: Optional[dict[str, list[str]]] = None, also_changing: Iterable[str] = ()
    ) -> Optional["AffixTokens"]:
        """The port for ``tokenizer``, or None when it is not spaCy 3's ``Tokenizer`` with its
        rules as compiled regular expressions (the port follows that class's code; a subclass
        may tokenize differently)."""
        found = ingredients(tokenizer, patterns, also_changing)
        return None if found is None else cls(found)

    def tokens(self, word: str) -> Optional[list[str]]:
        """spaCy's token texts of ``word`` (non-empty, no whitespace) tokenized alone, or None
        where a special case's substrings are not plain texts (the caller then asks spaCy)."""
        tokens, _ = self.affix_tokens(word)
        if tokens is None:
            return None
        if not self.spells_a_changing_case(tokens):
            return tokens
        final = self.retokenize(tokens, [False] * len(tokens), list(token_offsets(tokens)))
        return None if final is None else final[0]

    def affix_tokens(self, word: str) -> tuple[Optional[list[str]], bool]:
        """The tokens spaCy's tokenizer has for ``word`` before its special-case matcher runs
        over the ``Doc`` (what a match across words is made of), and whether a special case
        took part; (None, True) when a special case's substrings are not plain texts."""
        specials = self._specials
        if word in specials:
            return self._special_tokens(word), True
        letters_inert = self._letters_inert
        if letters_inert and word.isascii():
            letters = self._letters_then(word)
            if letters is not None:
                return letters, False
        token_match = self._token_match
        is_ascii = word.isascii()
        gates = self._gates.get(is_ascii)
        if gates is None:
            gates = self._gates[is_ascii] = self._gates_for(is_ascii)
        infix_gate, url_gate = gates
        prefix_rule, suffix_rule = self._prefix, self._suffix
        prefix_by_first = prefix_rule.by_character if prefix_rule is not None else None
        suffix_by_last = suffix_rule.by_character if suffix_rule is not None else None
        # Tokenizer._split_affixes (with_special_cases=True); find_prefix and find_suffix inline.
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
            if letters_inert and string.isalpha() and string.isascii():
                break  # a run of ASCII letters matches no rule: the loop would end with it
            last_size = len(string)
            pre_len = 0
            if prefix_by_first is not None:
                first = string[0]
                prefix_length = prefix_by_first[first] if first in prefix_by_first else prefix_rule.for_character(first)
                if prefix_length is not None:
                    pre_len = prefix_length(string)
            if pre_len:
                prefix = string[:pre_len]
                minus_pre = string[pre_len:]
                if minus_pre and minus_pre in specials:
                    string = minus_pre
                    prefixes.append(prefix)
                    break
            suf_len = 0
            rest = string[pre_len:] if pre_len else string
            if rest and suffix_by_last is not None:
                last = rest[-1]
                suffix_length = suffix_by_last[last] if last in suffix_by_last else suffix_rule.for_character(last)
                if suffix_length is not None:
                    suf_len = suffix_length(rest)
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
            elif letters_inert and string.isalpha() and string.isascii():
                tokens.append(string)  # one token: no rule can match it
            elif (token_match is not None and token_match(string)) or (
                (url_gate is True or (url_gate and url_gate(string))) and self._url_match(string)
            ):
                tokens.append(string)
            elif not (infix_gate is True or (infix_gate and infix_gate(string))):
                tokens.append(string)
            else:
                start = 0
                for infix_start, infix_end in self._infix_spans(string, is_ascii):
                    if infix_start == 0:  # spaCy's start_before_infixes
                        continue
                    if infix_start != start:
                        tokens.append(string[start:infix_start])
                    if infix_start != infix_end:
                        tokens.append(string[infix_start:infix_end])
                    start = infix_end
                if string[start:]:
                    tokens.append(string[start:])
        if suffixes:
            tokens.extend(reversed(suffixes))
        return tokens, special

    def _special_tokens(self, text: str) -> Optional[list[str]]:
        """The token texts of the special case ``text`` (its substrings' ORTH)."""
        texts = self._special_texts[text]
        return None if texts is None else list(texts)

    def retokenize(
        self, texts: list[str], spaces: list[bool], starts: list[int]
    ) -> Optional[tuple[list[str], list[bool], list[int]]]:
        """spaCy's special-case matcher over tokens (``Tokenizer._apply_special_cases``): the
        tokens' texts, trailing-space flags and offsets after it, or None where a matched special
        case's substrings are not plain texts.

        The matcher finds every run of tokens equal to a pattern; the runs are taken longest
        first, then leftmost, each unless its first or last token is in a run looked at before
        (``_filter_special_spans``); a taken run whose text (its tokens with their spaces) is a
        special case becomes that case's tokens, any other stays as it is."""
        n = len(texts)
        by_first = self._patterns_by_first
        matches = []
        for i in range(n):
            for pattern in by_first.get(texts[i], ()):
                j = i + len(pattern)
                if j <= n and tuple(texts[i:j]) == pattern:
                    matches.append((i - j, i))  # sorted: longest first, then leftmost
        if not matches:
            return texts, spaces, starts
        matches.sort()
        seen: set[int] = set()
        taken = []
        for negative_length, i in matches:
            j = i - negative_length
            if i not in seen and j - 1 not in seen:
                taken.append((i, j))
            seen.update(range(i, j))
        taken.sort()
        out_texts: list[str] = []
        out_spaces: list[bool] = []
        out_starts: list[int] = []
        done = 0
        for i, j in taken:
            out_texts += texts[done:i]
            out_spaces += spaces[done:i]
            out_starts += starts[done:i]
            done = j
            text = "".join(t + (" " if s else "") for t, s in zip(texts[i : j - 1], spaces[i : j - 1])) + texts[j - 1]
            if text not in self._specials:
                out_texts += texts[i:j]
                out_spaces += spaces[i:j]
                out_starts += starts[i:j]
                continue
            substrings = self._special_texts[text]
            if substrings is None:
                return None
            out_texts += substrings
            out_spaces += [False] * (len(substrings) - 1) + [spaces[j - 1]]
            out_starts += [starts[i] + offset for offset in token_offsets(substrings)]
        out_texts += texts[done:]
        out_spaces += spaces[done:]
        out_starts += starts[done:]
        return out_texts, out_spaces, out_starts

    def text_tokens(self, text: str) -> Optional[list[tuple[int, str]]]:
        """spaCy's tokens of a whole text, as (offset, text), or None where a special case's
        substrings are not plain texts (``Tokenizer.__call__``: ``_tokenize_affixes`` then
        ``_apply_special_cases``).

        The text is cut into runs of whitespace and of other characters; one space after a
        word is that word's trailing space, and every other run (whitespace included) is
        tokenized as a word."""
        texts: list[str] = []
        spaces: list[bool] = []
        starts: list[int] = []
        cache = self._word_cache
        for match in _RUNS.finditer(text):
            start, span = match.start(), match.group()
            if span[0] == " " and start:
                spaces[-1] = True  # the space after a word: no token
                span = span[1:]
                start += 1
                if not span:
                    continue
            known = cache.get(span)
            if known is None:
                tokens, special = self.affix_tokens(span)
                if tokens is None:
                    return None
                known = (tuple(tokens), special)
                if len(cache) >= 100_000:
                    cache.clear()
                cache[span] = known
            tokens = known[0]
            texts += tokens
            spaces += [False] * len(tokens)
            starts += [start + offset for offset in token_offsets(tokens)]
        if not texts:
            return []
        # The matcher needs its tokens to spell a special case; none spelt, nothing changes.
        if not self.spells_a_changing_case(texts):
            return list(zip(starts, texts))
        final = self.retokenize(texts, spaces, starts)
        return None if final is None else list(zip(final[2], final[0]))

    def spells_a_changing_case(self, tokens: list[str]) -> bool:
        """Whether adjacent tokens spell a special case of spaCy's matcher that changes tokens
        (a match needs its tokens to spell the special case's text)."""
        changing = self._changing
        beginnings = self._changing_beginnings
        n = len(tokens)
        for i, text in enumerate(tokens):
            if text not in beginnings:  # most tokens begin no special case
                continue
            if text in changing:
                return True
            for j in range(i + 1, n):
                text += tokens[j]
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


# Runs of whitespace (str.isspace(), as spaCy splits) and of other characters.
_RUNS = _re.compile(r"\s+|\S+")


def _ascii_class_members(pattern: Optional[str]) -> str:
    """The ASCII characters a character class (``needs_spec``'s ASCII part) holds."""
    if pattern is None:
        return ""
    matches = _re.compile(pattern).fullmatch
    return "".join(chr(c) for c in range(128) if matches(chr(c)))


def token_offsets(tokens) -> Iterable[int]:
    """The offsets of consecutive tokens (texts) in the text they make."""
    offset = 0
    for token in tokens:
        yield offset
        offset += len(token)


def _regex_spec(method) -> Optional[dict]:
    """A compiled pattern's bound search/match/finditer as plain data; raises ValueError for
    any other callable (the port then does not serve the tokenizer)."""
    import re

    if method is None:
        return None
    pattern = getattr(method, "__self__", None)
    name = getattr(method, "__name__", "")
    if not isinstance(pattern, re.Pattern) or not isinstance(pattern.pattern, str) or name not in (
        "search", "match", "fullmatch", "finditer"
    ):
        raise ValueError(f"not a compiled regular expression's method: {method!r}")
    return {"pattern": pattern.pattern, "flags": pattern.flags, "method": name}


def ingredients(
    tokenizer, patterns: Optional[dict[str, list[str]]] = None, also_changing: Iterable[str] = ()
) -> Optional[dict]:
    """What ``AffixTokens`` is made of, read from spaCy 3's ``Tokenizer`` (plain data: str,
    int, lists and dicts), or None for any other tokenizer or rules that are not compiled
    regular expressions."""
    import spacy
    from spacy.attrs import NORM, ORTH
    from spacy.tokenizer import Tokenizer

    if type(tokenizer) is not Tokenizer or not spacy.__version__.startswith("3."):
        return None
    try:
        found = {name: _regex_spec(getattr(tokenizer, name)) for name in _RULES}
    except ValueError:
        return None
    rules = tokenizer.rules or {}
    specials: dict[str, Optional[list[str]]] = {}
    for text, substrings in rules.items():
        orths = [substring.get(ORTH, substring.get("ORTH")) for substring in substrings]
        specials[text] = orths if all(isinstance(orth, str) for orth in orths) else None
    if patterns is None:
        patterns = matcher_patterns(tokenizer)
    # The special cases of spaCy's matcher whose tokens are not their pattern's (applying one
    # changes tokens; one whose substrings are its pattern, with nothing but a norm, leaves the
    # texts as they were), and any the caller counts as such too.
    changing = {
        text
        for text, pattern in patterns.items()
        if specials[text] != pattern or any(set(substring) - {ORTH, NORM} for substring in rules[text])
    } | set(also_changing)
    found["specials"] = specials
    found["patterns"] = {text: list(pattern) for text, pattern in patterns.items()}
    found["changing"] = sorted(changing)
    found["needs"] = {name: needs_spec(found[name]) for name in _RULES}
    found["infix_starts"] = first_characters(found["infix_finditer"])
    found["prefix_alternatives"] = prefix_alternatives(found["prefix_search"])
    found["suffix_alternatives"] = suffix_alternatives(found["suffix_search"])
    found["compiled"] = compiled_patterns(found)
    return found


def compiled_patterns(found: dict, characters: Iterable[str] = ()) -> Optional[dict]:
    """The compiled code (``pattern_codes``) of what a port made of ``found`` compiles: its
    rules, its gates, and its prefix and suffix searches for every ASCII character, every
    character an alternative names alone, and ``characters``."""
    port = AffixTokens({**found, "compiled": None})
    edges = {chr(c) for c in range(1, 128)} | set(characters)
    for rule in (port._prefix, port._suffix):
        if rule is not None and rule._alternatives is not None:
            edges |= {chr(lo) for a in rule._alternatives for lo, hi in (a["edge"] or ()) if lo == hi}
    for character in sorted(edges):
        for rule in (port._prefix, port._suffix):
            if rule is not None:
                rule.for_character(character)
    port._gates_for(False)
    return port._patterns.stored()


_RULES = ("prefix_search", "suffix_search", "infix_finditer", "token_match", "url_match")
