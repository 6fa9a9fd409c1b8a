"""spaCy's rule-based sentence boundaries, computed without building a spaCy ``Doc``.

The built-in splitter is ``spacy.blank(lang)`` + ``sentencizer``.  Building a ``Doc`` for every
passage is most of its cost, yet the sentencizer looks at very little of it.  Its state machine
(``spacy/pipeline/sentencizer.pyx``, ``Sentencizer.predict``) walks the tokens with one flag,
*seen_period*: a token whose text is one of ``punct_chars`` sets it; while it is set, the first
token that is neither ``is_punct`` nor in ``punct_chars`` starts a sentence and clears it.

spaCy's tokenizer cuts the text at whitespace into *words* (maximal runs of non-whitespace) and
tokenizes each word on its own (prefixes, suffixes, infixes, special cases, URL and token
matches).  Between two words, a whitespace run that is exactly ``" "`` makes no token; any other
run makes whitespace token(s), which are not punctuation and so start a sentence if the flag is
set.  Hence:

* a word holding none of ``punct_chars`` never sets the flag; if the flag is set when it comes,
  its first token starts a sentence unless that token is punctuation -- which, when the word's
  first character is not Unicode punctuation (category P*), it cannot be (``is_punct`` is "every
  character is P*"), so the sentence starts at the word;
* every other word that matters (one holding a punctuation character, or one starting with P*
  while the flag is set) is tokenized alone -- by ``word_tokens.AffixTokens``, which runs the
  pipeline tokenizer's own rules (special cases and the special-case matcher included) in
  spaCy's order without a ``Doc`` -- and the state machine is run over its tokens for both
  values of the flag; the result is cached per word.

Tokenizing a word alone gives the tokens it gets in context, with one exception: after the
words are tokenized, spaCy runs a matcher for special cases over the whole ``Doc``, and a match
can span two words separated by one space (its text then holds a space, so it is no special case
and changes nothing itself), but it can hide an overlapping match inside a word.  Such a match
needs adjacent tokens of some special case's pattern on either side of the space, and it matters
only if the word holds, on token boundaries, a special case that changes tokens; where a
tokenized word could be so joined to a neighbour, the paragraph holding it is tokenized whole
(``AffixTokens.text_tokens``: every word, then the matcher over all of the paragraph's tokens;
spaCy's pipeline where the port cannot answer) and the state machine run over its tokens
(paragraphs are independent: the paragraph separator is a whitespace token, which clears the
flag).  Where the word's tokens before the matcher are known (``AffixTokens.affix_tokens``), the
pattern's tokens on its side of the space are compared with them, not with its text.

spaCy stays the source of truth: the tokenizer's rules and the punctuation set are read from the
loaded pipeline (``spacy_rules_cache.derive_rules``, which declines any pipeline whose behaviour
these arguments do not cover, and checks the port against the tokenizer) and kept on disk, so
that a process splits without importing spaCy; tests compare the result with the pipeline's on
hostile text (tests/pipeline/test_sentence_rules.py; scripts/sentence_differential.py does it on
a corpus).

Here a *word* is a maximal run of non-whitespace characters (what ``str.split()`` returns).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable, Optional

import numpy as np

from .word_tokens import token_offsets

__all__ = ["RuleSentencizer"]

# Python's \s is str.isspace(), the test spaCy's tokenizer splits words with.
_WHITESPACE = re.compile(r"\s+")
_WORD = re.compile(r"\S+")
_SPACE_CHARACTER = re.compile(r"\s")
# The cache of tokenized words is bounded, for flat memory; words longer than this are not cached.
_CACHE_LIMIT = 100_000
_CACHED_WORD_CHARS = 200
# A word of letters then a sentence end: from a clear flag no start, from a set one a start at
# the letters; the flag set after it either way (``_stop_entry``).
_STOP_FROM_CLEAR = ((), True)
_STOP_FROM_SET = ((0,), True)
# Passages at least this long find their candidate words with numpy (``_candidate_words``).
_ARRAYS_FROM_CHARS = 1000


def _is_p(character: str) -> bool:
    return unicodedata.category(character)[0] == "P"


def _is_punct(text: str) -> bool:
    """spaCy's ``is_punct`` lexical attribute (``spacy.lang.lex_attrs.is_punct``, which
    ``spacy_rules_cache.derive_rules`` requires the pipeline to use): every character is P*."""
    if text.isalnum():  # letters and digits, no P* character: most tokens
        return False
    return all(unicodedata.category(c)[0] == "P" for c in text)


class _WholeParagraph(Exception):
    """A word at ``position`` could be tokenized differently in context: its paragraph is
    tokenized whole."""

    def __init__(self, position: int) -> None:
        self.position = position


class RuleSentencizer:
    """Sentence starts of the rule-based sentencizer for texts as the splitter gives them to spaCy.

    Made from ``rules`` (``spacy_rules_cache.SentencizerRules``: what the pipeline's tokenizer
    and sentencizer hold, as plain data) without importing spaCy; ``tokenizer()`` returns the
    pipeline's tokenizer, called (and spaCy imported) only for a word or paragraph the word port
    cannot answer: where the port does not serve the tokenizer, or a special case's substrings
    are not plain texts.
    """

    def __init__(self, rules, tokenizer: Callable[[], Callable]) -> None:
        self._tokenizer_of_pipeline = tokenizer
        self._punct = frozenset(rules.punct_chars)
        patterns = rules.patterns
        # The adjacent token pairs of the patterns of spaCy's special-case matcher.
        pairs: set[tuple[str, str]] = set()
        for pattern in patterns.values():
            pairs.update(zip(pattern, pattern[1:]))
        # The pairs by the last character of their first token; tokens are those of the patterns
        # (the tokens before the matcher), so pairs are tested on the words' text.
        self._pairs_by_last_char: dict[str, list[tuple[str, str]]] = {}
        # And by each token, the tokens a pattern has after it and before it.
        self._seconds_after: dict[str, list[str]] = {}
        self._firsts_before: dict[str, list[str]] = {}
        for first, second in pairs:
            if not any(c.isspace() for c in first + second):
                self._pairs_by_last_char.setdefault(first[-1], []).append((first, second))
                self._seconds_after.setdefault(first, []).append(second)
                self._firsts_before.setdefault(second, []).append(first)
        # ``_marked``'s translations: whitespace to " ", punctuation to NUL, NUL to "\x01".
        latin1 = bytearray(range(256))
        latin1[0] = 1
        for c in range(256):
            if chr(c).isspace():
                latin1[c] = 32
            elif chr(c) in self._punct:
                latin1[c] = 0
        self._latin1_marks = bytes(latin1)
        self._wide_marks = {0: "\x01", **{ord(c): "\0" for c in self._punct}}
        self._cache: dict[str, tuple] = {}
        # spaCy's tokenizer rules without a Doc (word_tokens.py), checked against the tokenizer
        # when the rules were derived (spacy_rules_cache.py).
        self._affix = rules.affix_tokens()
        # (``_stop_entry``'s, from the port: every beginning of a special case of spaCy's
        # matcher that changes tokens, the special cases, and whether a run of ASCII letters
        # is one token.)
        affix = self._affix
        self._changing_beginnings = affix._changing_beginnings if affix is not None else frozenset()
        self._changing = affix.changing if affix is not None else frozenset()
        self._specials = affix._specials if affix is not None else frozenset()
        self._letters_inert = affix is not None and affix._letters_inert
        self._changing_set = frozenset(rules.changing)
        self._longest_change = max(map(len, self._changing_set), default=0)
        # (in punct_chars, is_punct) by token text.
        self._kinds: dict[str, tuple[bool, bool]] = {}
        # A two-token word's runs and offsets by its tokens' kinds and the first's length: shared.
        self._two_tokens: dict[tuple, tuple] = {}

    def _spacy_tokens(self, text: str) -> list[tuple[int, bool, bool]]:
        """(offset, in punct_chars, is_punct) of the pipeline tokenizer's tokens of ``text``."""
        return [(token.idx, token.text in self._punct, token.is_punct) for token in self._tokenizer_of_pipeline()(text)]

    def _kind(self, text: str) -> tuple[bool, bool]:
        """(in punct_chars, is_punct) of a token's text, kept for the next token with that text."""
        kind = (text in self._punct, _is_punct(text))
        if len(self._kinds) < _CACHE_LIMIT:
            self._kinds[text] = kind
        return kind

    def _token_flags(self, pairs) -> list[tuple[int, bool, bool]]:
        """(offset, in punct_chars, is_punct) of tokens given as (offset, text)."""
        kinds = self._kinds
        flags = []
        for idx, text in pairs:
            kind = kinds.get(text)
            if kind is None:
                kind = self._kind(text)
            flags.append((idx, *kind))
        return flags

    def _entry(self, word: str) -> tuple:
        """For a word tokenized alone: ((starts, flag after) if the flag is clear before it,
        (starts, flag after) if it is set -- indexed by the flag --, token offsets, whether it
        holds a token-changing special case, its first and last tokens before spaCy's matcher or
        None if unknown)."""
        entry = self._cache.get(word)
        return entry if entry is not None else self._new_entry(word)

    def _new_entry(self, word: str) -> tuple:
        """``_entry`` for a word not in the cache, kept there."""
        entry = self._stop_entry(word)
        if entry is None:
            entry = self._any_entry(word)
        if len(word) <= _CACHED_WORD_CHARS:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[word] = entry
        return entry

    def _stop_entry(self, word: str) -> Optional[tuple]:
        """``_any_entry`` of most new words, ASCII letters then a sentencizer character ("word.",
        "Word?"), or None for another.  The port's ``_letters_then`` proves their tokens (the
        letters, then the character), unless the word is a special case; a word whose tokens spell a
        token-changing special case of spaCy's matcher is left to ``_any_entry``.
        A sentence starts at the letters if the flag was set; the character sets it."""
        affix = self._affix
        last = word[-1]
        if last not in self._punct or affix is None or not self._letters_inert or not word.isascii():
            return None
        letters = word[:-1]
        if not letters.isalpha() or letters in self._punct or word in self._specials:
            return None
        # (``AffixTokens.spells_a_changing_case`` of the two tokens.)
        changing = self._changing
        if last in changing or (letters in self._changing_beginnings and (letters in changing or word in changing)):
            return None
        if affix._letters_then(word) is None:
            return None
        return _STOP_FROM_CLEAR, _STOP_FROM_SET, (0, len(letters)), False, (letters, last)

    def _any_entry(self, word: str) -> tuple:
        """``_entry`` for a word, computed."""
        # The tokens before spaCy's matcher (``pre``, from the port) are the tokens a match
        # across words is made of; the word's tokens are those unless a special case took part
        # or the matcher could change them: then spaCy's tokenizer gives them.
        texts = pre = None
        changing = False
        affix = self._affix
        if affix is not None:
            pre, special = affix.affix_tokens(word)
            if pre:
                changing = affix.spells_a_changing_case(pre)
                if not changing:
                    texts = pre
                else:  # spaCy's matcher over the word alone
                    final = affix.retokenize(pre, [False] * len(pre), list(token_offsets(pre)))
                    texts = final[0] if final is not None else None
            else:
                pre = None
        # The state machine over the word's tokens, from a clear and from a set flag.
        if texts is None:
            runs = self._spacy_runs(word)
        elif len(texts) == 2 and len(texts[0]) <= _CACHED_WORD_CHARS:
            # Most words ("word.", "(word", "word,"): the runs and offsets of two tokens depend on
            # their kinds and the first's length only, and are shared.
            kinds = self._kinds
            first, second = texts
            if first.isalpha():  # letters (a new word's, mostly): no P* character, so not is_punct
                kind = (first in self._punct, False)
            else:
                kind = kinds.get(first) or self._kind(first)
            key = (kind, kinds.get(second) or self._kind(second), len(first))
            runs = self._two_tokens.get(key)
            if runs is None:
                runs = self._two_tokens[key] = self._runs(texts)
        else:
            runs = self._runs(texts)
        if pre is not None:
            return (*runs, changing, (pre[0], pre[-1]))
        return (*runs, self._holds_a_changing_case(word, runs[2]), None)

    def _runs(self, texts: list[str]) -> tuple:
        """``_state_runs`` over a word's tokens (texts), their kinds looked up."""
        kinds, marks, idx = self._kinds, [], 0
        for text in texts:
            kind = kinds.get(text)
            if kind is None:
                kind = self._kind(text)
            marks.append((idx, *kind))
            idx += len(text)
        return _state_runs(marks)

    def _spacy_runs(self, word: str) -> tuple:
        """``_state_runs`` over the pipeline tokenizer's tokens of ``word``."""
        return _state_runs(self._spacy_tokens(word))

    def _check_neighbours(self, text: str, start: int, end: int, entry: tuple) -> None:
        """Raise _WholeParagraph if a special-case match could span the word ``text[start:end]`` and a
        neighbour and hide a match inside the word that changes its tokens.

        Such a match needs, across the single space between the two words, adjacent tokens of a
        pattern: the first the last token of the left word (before the matcher), the second the
        first token of the right one.  Where the word's own tokens are known (``entry`` has
        them), a neighbour whose text ends (begins) with such a token has its tokens looked at
        too; otherwise a token at its edge is taken to be any suffix (prefix) of its text.
        """
        if not entry[3]:
            return
        edges = entry[4]
        joined = False
        if start >= 2 and text[start - 1] == " ":
            if edges is not None:
                firsts = self._firsts_before.get(edges[0], ())
                if any(text.endswith(first, 0, start - 1) for first in firsts):
                    joined = self._neighbour_edge(text, start - 1, last=True) in (None, *firsts)
            else:
                for first, second in self._pairs_by_last_char.get(text[start - 2], ()):
                    if text.startswith(second, start) and text.endswith(first, 0, start - 1):
                        joined = True
                        break
        if not joined and text[end : end + 1] == " ":
            if edges is not None:
                seconds = self._seconds_after.get(edges[1], ())
                if any(text.startswith(second, end + 1) for second in seconds):
                    joined = self._neighbour_edge(text, end + 1, last=False) in (None, *seconds)
            else:
                for first, second in self._pairs_by_last_char.get(text[end - 1], ()):
                    if text.endswith(first, start, end) and text.startswith(second, end + 1):
                        joined = True
                        break
        if joined:
            raise _WholeParagraph(start)

    def _neighbour_edge(self, text: str, at: int, last: bool) -> Optional[str]:
        """The last token (``last``: of the word ending at ``at``) or the first token (of the
        word beginning at ``at``) before spaCy's matcher, None where the port cannot tell."""
        if last:
            begin = at
            while begin > 0 and not text[begin - 1].isspace():
                begin -= 1
            word = text[begin:at]
        else:
            word = _WORD.match(text, at).group()
        edges = self._entry(word)[4]
        return None if edges is None else edges[1 if last else 0]

    def _holds_a_changing_case(self, word: str, token_starts: tuple) -> bool:
        """Whether a special case that changes tokens spans whole tokens of ``word`` (alone).

        A match spaCy would hide in context lies inside the word and matters only if it changes
        tokens; its ends are boundaries of the word's tokens before the matcher, which stay
        boundaries unless they fall inside another token-changing match, itself found here.
        """
        bounds = [*token_starts, len(word)]
        for i, begin in enumerate(bounds):
            for stop in bounds[i + 1 :]:
                if stop - begin > self._longest_change:
                    break
                if word[begin:stop] in self._changing_set:
                    return True
        return False

    def _carry(self, text: str, pos: int, limit: int, starts: list[int]) -> bool:
        """With the flag set after the word ending at ``pos``, walk the whitespace and the
        words without punctuation characters up to ``limit`` (the next word holding one, or
        the end); the flag afterwards."""
        n = len(text)
        while pos < n:
            if text[pos] != " " or (pos + 1 < n and text[pos + 1].isspace()):
                starts.append(_WHITESPACE.match(text, pos).end())  # whitespace token(s): not punctuation
                return False
            pos += 1  # one space: no token
            if pos >= limit:
                return True
            match = _WORD.match(text, pos)
            word = match.group()
            if not _is_p(word[0]):
                starts.append(pos)
                return False
            entry = self._cache.get(word) or self._new_entry(word)
            if entry[3]:
                self._check_neighbours(text, pos, match.end(), entry)
            found, seen = entry[1]
            for offset in found:
                starts.append(pos + offset)
            if not seen:
                return False
            pos = match.end()
        return True

    def _marked(self, text: str):
        """A copy of ``text``, offset for offset, where every whitespace character is " ", every
        sentencizer punctuation character NUL, and NUL "\x01"; and those two marks (byte values
        for Latin-1 text, encoded a byte a character and translated by a table; characters for
        wider text, rare, translated by a mapping and a class)."""
        try:
            encoded = text.encode("latin-1")
        except UnicodeEncodeError:
            return _SPACE_CHARACTER.sub(" ", text.translate(self._wide_marks)), "\0", " "
        return encoded.translate(self._latin1_marks), 0, 32

    def _candidate_words(self, text: str) -> tuple[list[int], list[int]]:
        """The starts and ends of the words of ``text`` holding a sentencizer punctuation
        character, in order, each once.

        A passage of ``_ARRAYS_FROM_CHARS`` characters or more (Latin-1: nearly all text) is
        looked at whole with numpy: a Python call a candidate (str.find and rfind cost ~1,400
        instructions each, their arguments parsed from a tuple) was a third of the sentence
        stage; shorter passages (a call a passage would cost more) and wider text search the
        marked copy (``_marked``) from one candidate to the next.
        """
        if len(text) >= _ARRAYS_FROM_CHARS:
            marked, mark, space = self._marked(text)
            if mark == 0:
                return self._candidate_words_of_array(np.frombuffer(marked, np.uint8))
        else:
            marked, mark, space = self._marked(text)
        starts: list[int] = []
        ends: list[int] = []
        find, rfind = marked.find, marked.rfind
        end = 0
        position = find(mark)
        while position >= 0:
            starts.append(rfind(space, end, position) + 1 or end)
            end = find(space, position)
            if end < 0:
                ends.append(len(text))
                break
            ends.append(end)
            position = find(mark, end)
        return starts, ends

    def _candidate_words_of_array(self, marked) -> tuple[list[int], list[int]]:
        """``_candidate_words`` of a marked passage (``_marked``) as a uint8 array: each
        punctuation character's word ends at the first whitespace after it and begins after the
        last before it; those with as much whitespace before them are in one word."""
        marks = np.flatnonzero(marked == 0)
        if not len(marks):
            return [], []
        spaces = np.flatnonzero(marked == 32)
        spaces_before = np.searchsorted(spaces, marks)
        if len(spaces_before) > 1:
            firsts = np.empty(len(spaces_before), bool)
            firsts[0] = True
            np.not_equal(spaces_before[1:], spaces_before[:-1], out=firsts[1:])
            spaces_before = spaces_before[firsts]
        # The whitespace with one before the text and one after it.
        edges = np.empty(len(spaces) + 2, np.intp)
        edges[0] = -1
        edges[1:-1] = spaces
        edges[-1] = len(marked)
        return (edges[spaces_before] + 1).tolist(), edges[spaces_before + 1].tolist()

    def boundaries(self, text: str, spacy_starts: Callable[[str], list[int]]) -> list[int]:
        """Offsets in ``text`` where the sentencizer starts a sentence, in order (after whitespace
        tokens, the offset of the next word: the same sentences once stripped).

        ``text`` is a passage as the splitter gives it to spaCy: paragraphs joined by ``"\n\n"``,
        where the flag is always clear.  A paragraph holding a word whose tokens could depend on
        its neighbours gets ``spacy_starts(paragraph)`` (the pipeline's starts) instead.
        """
        starts: list[int] = []
        add = starts.append
        seen = False
        resume = 0  # the end of the last word looked at
        cache = self._cache
        new_entry = self._new_entry
        for start, end in zip(*self._candidate_words(text)):
            if start < resume:
                continue  # in a paragraph taken whole
            word = text[start:end]
            try:
                if seen:
                    # The common gaps after a stop are decided here: whitespace other than one
                    # space (a token, not punctuation: the sentence starts after it), one space
                    # then the word itself, or then a word starting with a letter or digit (not
                    # punctuation: it starts the sentence); _carry walks any other.
                    if text[resume] != " ":  # a whitespace token (a paragraph break, mostly)
                        add(_WHITESPACE.match(text, resume).end())
                        seen = False
                    elif start == resume + 1:
                        pass
                    elif text[resume + 1].isalnum():
                        add(resume + 1)
                        seen = False
                    elif text[resume + 1].isspace():  # spaces: a whitespace token too
                        add(_WHITESPACE.match(text, resume).end())
                        seen = False
                    else:
                        seen = self._carry(text, resume, start, starts)
                entry = cache.get(word) or new_entry(word)
                if entry[3]:
                    self._check_neighbours(text, start, end, entry)
            except _WholeParagraph as ask:
                resume = self._take_whole_paragraph(text, ask.position, starts, spacy_starts)
                seen = False
                if start < resume:
                    continue
                # An earlier paragraph was taken whole (the flag reached here from it): this word
                # starts the next one, with the flag clear.
                entry = self._entry(word)
                try:
                    self._check_neighbours(text, start, end, entry)
                except _WholeParagraph as again:
                    resume = self._take_whole_paragraph(text, again.position, starts, spacy_starts)
                    continue
            found, seen = entry[seen]
            if found:  # (no iterator for none: most words start no sentence)
                for offset in found:
                    add(start + offset)
            resume = end
        if seen:
            try:
                self._carry(text, resume, len(text), starts)
            except _WholeParagraph as ask:
                self._take_whole_paragraph(text, ask.position, starts, spacy_starts)
        return starts

    def _paragraph_starts(self, paragraph: str, spacy_starts: Callable[[str], list[int]]) -> list[int]:
        """The sentencizer's starts in a paragraph (after its first token) from all of its
        tokens: the word port's (``AffixTokens.text_tokens``: spaCy's matcher over the whole
        paragraph) where it answers, else ``spacy_starts`` (the pipeline's)."""
        tokens = self._affix.text_tokens(paragraph) if self._affix is not None else None
        if tokens is None:
            return spacy_starts(paragraph)
        starts = []
        seen = False
        for i, (idx, period, punct) in enumerate(self._token_flags(tokens)):
            if seen and not punct and not period:
                if i:
                    starts.append(idx)
                seen = False
            elif period:
                seen = True
        return starts

    def _take_whole_paragraph(self, text: str, position: int, starts: list[int], spacy_starts) -> int:
        """Replace the starts of the paragraph around ``position`` with those from all of its
        tokens; its end."""
        begin = text.rfind("\n\n", 0, position)
        begin = 0 if begin < 0 else begin + 2
        end = text.find("\n\n", position)
        end = len(text) if end < 0 else end
        while starts and starts[-1] >= begin:
            starts.pop()
        starts.extend(begin + offset for offset in self._paragraph_starts(text[begin:end], spacy_starts))
        return end


def _state_runs(marks) -> tuple:
    """(starts, flag after) from a clear flag, the same from a set flag, and the token offsets:
    the sentencizer's state machine over a word's tokens, given as ``(offset, is a sentence
    end, is punctuation)`` each (computed once a word: words are cached)."""
    clear_starts, set_starts, offsets = [], [], []
    clear, seen = False, True
    for idx, period, punct in marks:
        offsets.append(idx)
        if period:
            clear = seen = True
        elif not punct:
            if clear:
                clear_starts.append(idx)
                clear = False
            if seen:
                set_starts.append(idx)
                seen = False
    return (tuple(clear_starts), clear), (tuple(set_starts), seen), tuple(offsets)
