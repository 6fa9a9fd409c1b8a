"""spaCy's tokenizer on one word, without a ``Doc``: the token texts its affix rules give.

``RuleSentencizer`` (rule_sentences.py) needs spaCy's tokens of each distinct word holding a
sentence punctuation character -- tens of thousands of words in a corpus of a few megabytes.
Calling the pipeline's tokenizer costs ~100 us a new word, nearly all of it a ``Doc`` and a
``Lexeme`` (with its lexical attributes) for every new token text; the rules themselves are a few
regular-expression searches.  ``AffixTokens`` runs those searches, with the tokenizer's own
compiled ``prefix_search``, ``suffix_search``, ``infix_finditer``, ``token_match`` and
``url_match`` and its own special-case table, in the order ``spacy/tokenizer.pyx`` does
(``Tokenizer._split_affixes`` then ``Tokenizer._attach_tokens``), and declines -- returns None, so
the caller asks spaCy -- wherever a special case takes part:

* the word, or any string the affix loop reaches, is a special case (spaCy then copies the
  special's tokens, and stops caching);
* a run of adjacent tokens spells a special case that spaCy put in its special-case matcher
  (``Tokenizer.add_special_case``: one with a prefix, suffix or infix, or every one without
  ``faster_heuristics``): ``Tokenizer._apply_special_cases`` could retokenize it.  A match needs
  its tokens to spell the special case's text, so when no run does there is no match.

What is left is spaCy's algorithm with nothing but the regular expressions deciding, which this
module follows step by step.  spaCy's tokenizer cache only memoises whole words' tokens, and the
string ``_attach_tokens`` looks up in it is one the affix loop left with no prefix and no suffix
(or a special case, declined), whose cached tokens are the infix split done here: the cache
changes nothing.  The port follows spaCy 3's tokenizer; ``AffixTokens.for_tokenizer`` returns
None for any other major version or tokenizer class, and the differential tests
(tests/pipeline/test_word_tokens.py) compare it with the tokenizer on hostile words.
"""

from __future__ import annotations

from typing import Optional

__all__ = ["AffixTokens"]


class AffixTokens:
    """The token texts spaCy's ``Tokenizer`` gives a single word (no whitespace), or None."""

    def __init__(self, tokenizer) -> None:
        self._prefix_search = tokenizer.prefix_search
        self._suffix_search = tokenizer.suffix_search
        self._infix_finditer = tokenizer.infix_finditer
        self._token_match = tokenizer.token_match
        self._url_match = tokenizer.url_match
        rules = tokenizer.rules or {}
        self._specials = frozenset(rules)
        # The special cases spaCy put in its matcher (Tokenizer.add_special_case's condition).
        self._matched = frozenset(
            text
            for text in rules
            if not tokenizer.faster_heuristics
            or tokenizer.find_prefix(text)
            or tokenizer.find_infix(text)
            or tokenizer.find_suffix(text)
            or " " in text
        )
        self._longest_matched = max(map(len, self._matched), default=0)

    @classmethod
    def for_tokenizer(cls, tokenizer) -> Optional["AffixTokens"]:
        """The port for ``tokenizer``, or None when it is not spaCy 3's ``Tokenizer`` (the port
        follows that class's code; a subclass may tokenize differently)."""
        import spacy
        from spacy.tokenizer import Tokenizer

        if type(tokenizer) is not Tokenizer or not spacy.__version__.startswith("3."):
            return None
        return cls(tokenizer)

    def _prefix_length(self, string: str) -> int:  # Tokenizer.find_prefix
        if self._prefix_search is None:
            return 0
        match = self._prefix_search(string)
        return match.end() - match.start() if match is not None else 0

    def _suffix_length(self, string: str) -> int:  # Tokenizer.find_suffix
        if self._suffix_search is None:
            return 0
        match = self._suffix_search(string)
        return match.end() - match.start() if match is not None else 0

    def tokens(self, word: str) -> Optional[list[str]]:
        """spaCy's token texts of ``word`` (non-empty, no whitespace) tokenized alone, or None
        where a special case takes part (the caller then asks spaCy)."""
        specials = self._specials
        if word in specials:
            return None
        token_match = self._token_match
        # Tokenizer._split_affixes (with_special_cases=True); a special case reached declines.
        string = word
        prefixes: list[str] = []
        suffixes: list[str] = []
        last_size = 0
        prefix = ""
        while string and len(string) != last_size:
            if token_match is not None and token_match(string):
                break
            if string in specials:
                return None
            last_size = len(string)
            pre_len = self._prefix_length(string)
            if pre_len:
                prefix = string[:pre_len]
                minus_pre = string[pre_len:]
                if minus_pre and minus_pre in specials:
                    return None
            suf_len = self._suffix_length(string[pre_len:])
            if suf_len:
                suffix = string[-suf_len:]
                minus_suf = string[:-suf_len]
                if minus_suf and minus_suf in specials:
                    return None
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
        if string:
            if string in specials:
                return None
            if (token_match is not None and token_match(string)) or (
                self._url_match is not None and self._url_match(string)
            ):
                tokens.append(string)
            else:
                matches = list(self._infix_finditer(string)) if self._infix_finditer is not None else ()
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
        if self._spells_a_matched_case(tokens):
            return None
        return tokens

    def _spells_a_matched_case(self, tokens: list[str]) -> bool:
        """Whether adjacent tokens spell a special case of spaCy's matcher (which could then
        retokenize them)."""
        matched = self._matched
        if len(tokens) == 1:
            return tokens[0] in matched
        for i in range(len(tokens)):
            text = ""
            for token in tokens[i:]:
                text += token
                if len(text) > self._longest_matched:
                    break
                if text in matched:
                    return True
        return False
