"""spaCy's tokenizer on one word without a Doc (bert_data/pipeline/word_tokens.py) gives the
tokenizer's tokens wherever it answers, and the characters-a-match-needs analysis it skips
regex searches with never skips a search that would match."""

from __future__ import annotations

import random
import re

import pytest

from bert_data.pipeline.word_tokens import AffixTokens, needed_characters
from tests.pipeline.test_sentence_rules import PUNCT_AROUND, WORDS, _punct_chars


@pytest.fixture(scope="module")
def tokenizer():
    import spacy

    return spacy.blank("en").tokenizer


@pytest.fixture(scope="module")
def port(tokenizer) -> AffixTokens:
    port = AffixTokens.for_tokenizer(tokenizer)
    assert port is not None
    return port


def _spacy_tokens(tokenizer, word: str) -> list[str]:
    return [token.text for token in tokenizer(word)]


def _edge_words(tokenizer) -> list[str]:
    """Words at the edges of the port: every special case alone, glued to letters, digits and
    stops, and behind brackets and quotes; single capitals and numbers before a stop; stops
    followed by quotes and brackets; emoji; URLs."""
    stops = [".", "!", "?", "...", "?!", "!!", "…", "。"]
    words = [w for w in WORDS if not any(c.isspace() for c in w)]
    for text in tokenizer.rules:
        if any(c.isspace() for c in text):
            continue
        words += [text, text + ".", "x" + text, text + "x", "3" + text, "(" + text + ")",
                  '"' + text + '."', text + "'s", "'" + text]
    for c in "AIUXaiux":
        words += [c + s for s in stops] + [c + ".)", c + '."', c + "'.", c + ".'", c + "..", c + ".-"]
    for number in ["3", "10", "1,000", "3.14", "2nd", "1990s", "$4", "4%", "°C", "10km", "5kg"]:
        words += [number + s for s in stops] + [number + ".)", number + '."']
    for emoji in ["😀", "👍🏽", "🇺🇸", "❤️", "☺", "(╯°□°）╯︵┻━┻"]:
        words += [emoji + ".", "Wow" + emoji + "!", emoji + emoji + "?", "(" + emoji + ")."]
    for word in ["word", "Word", "WORD", "it's", "U.S", "e.g", "Mr", "don't", "a-b", "a/b", "x:y"]:
        for stop in stops:
            words += [word + stop + after for after in ["", '"', "'", ")", "]", "”", "’", "»", ".)", '")']]
            words += [before + word + stop for before in ['"', "(", "[", "“", "‘", "«", "¿", "¡", "--"]]
    words += ["http://example.com/a.b?c=d.", "www.example.org.", "https://x.y/z!", "mail@example.com.",
              "(https://a.b/c).", '"www.x.com."', "example.com/path?q=1!", "ftp://a.b."]
    return words


def _fuzzed_words(rng: random.Random, n: int) -> list[str]:
    pool = (list("aAzZiIuUsS019") + _punct_chars() + PUNCT_AROUND
            + ["'s", "n't", "km", "°", "$", "US$", "😀", "é", "ß", "İ", "-", "—", "/", "@", "."])
    return ["".join(rng.choices(pool, k=rng.randint(1, 8))) for _ in range(n)]


def test_the_port_gives_the_tokenizers_tokens_at_its_edges(tokenizer, port):
    words = _edge_words(tokenizer)
    answered = 0
    for word in words:
        tokens = port.tokens(word)
        if tokens is not None:
            answered += 1
            assert tokens == _spacy_tokens(tokenizer, word), word
    # The port answers for the common shapes (it is the fast path), declining only where
    # special cases take part.
    assert answered > 5000
    common = [w + s + a for w in ["word", "Word", "WORD"] for s in [".", "!", "?", "...", "?!"]
              for a in ["", '"', "'", ")", "”", '")']]
    assert [w for w in common if port.tokens(w) is None] == []


@pytest.mark.parametrize("seed", range(4))
def test_the_port_gives_the_tokenizers_tokens_on_fuzzed_words(tokenizer, port, seed):
    rng = random.Random(seed)
    for word in _fuzzed_words(rng, 3000):
        if any(c.isspace() for c in word):
            continue
        tokens = port.tokens(word)
        if tokens is not None:
            assert tokens == _spacy_tokens(tokenizer, word), word


def test_the_common_shapes_are_answered_without_spacy(port):
    assert port.tokens("word.") == ["word", "."]
    assert port.tokens('Word."') == ["Word", ".", '"']
    assert port.tokens("(word)?") == ["(", "word", ")", "?"]
    assert port.tokens("3.") == ["3", "."]
    # Special cases, and tokens spelling one spaCy's matcher retokenizes.
    assert port.tokens("Mr.") == ["Mr."]
    assert port.tokens('"Mr.') == ['"', "Mr."]
    assert port.tokens(":)") == [":)"]
    assert port.tokens("don't.") == ["do", "n't", "."]


def test_the_port_gives_the_tokenizers_tokens_of_whole_texts(tokenizer, port):
    """AffixTokens.text_tokens: spaCy's tokens and offsets of a whole text -- whitespace tokens,
    and the special-case matcher over the text, across words too -- on hostile text, and texts
    built of special cases and the words a pattern could join them to."""
    from tests.pipeline.test_sentence_rules import _fast_path_edge_texts, _hostile_text

    rng = random.Random(13)
    texts = [_hostile_text(rng, rng.randint(0, 250)) for _ in range(150)]
    texts += _fast_path_edge_texts(rng, tokenizer.rules)
    texts += ["for the benefit . _beloved_'s most.", "  lead", "a  \t b", "", " ", "x . _y_'s :) (:"]
    for text in texts:
        assert port.text_tokens(text) == [(token.idx, token.text) for token in tokenizer(text)], text


def test_the_ports_ingredients_are_plain_data(tokenizer):
    """What spacy_rules_cache.py stores: JSON round trips it, and the port made from the round
    trip tokenizes as the one made from the tokenizer."""
    import json

    from bert_data.pipeline.word_tokens import ingredients

    found = ingredients(tokenizer)
    again = AffixTokens(json.loads(json.dumps(found)))
    for word in _edge_words(tokenizer)[:3000]:
        if not any(c.isspace() for c in word):
            assert again.tokens(word) == _spacy_tokens(tokenizer, word), word


def test_the_port_declines_other_tokenizers(tokenizer):
    from spacy.tokenizer import Tokenizer

    class Custom(Tokenizer):
        pass

    custom = Custom(tokenizer.vocab, rules={}, prefix_search=tokenizer.prefix_search)
    assert AffixTokens.for_tokenizer(custom) is None


# -- characters a match needs ------------------------------------------------------------------------


def test_needed_characters_of_small_patterns():
    needs = needed_characters(re.compile(r"(?<=[0-9])(?:km|m)$|'s$|\.\.+$"))
    assert needs is not None
    # Each alternative brings its cheapest needed class: the digits of the lookbehind, the quote,
    # the dot -- not the letters of the units.
    assert {c for c in "09'.kms" if needs.match(c)} == set("09'.")
    assert needed_characters(re.compile(r"a*")) is None  # an empty match needs nothing
    assert needed_characters(re.compile(r"x|y*")) is None  # nor does an alternative that can be empty
    assert needed_characters(re.compile(r"abc", re.IGNORECASE)) is None  # case folding: not followed
    assert needed_characters(re.compile(r"[^a]")) is None  # negated class: not followed
    assert needed_characters(re.compile(r"(?i:q)r")).pattern == r"[\U00000072]"  # r, not the folded q
    assert needed_characters(re.compile(r"(?!a)b")).match("b")


def test_a_string_without_the_needed_characters_has_no_match(tokenizer):
    """The tokenizer's own rules on fuzzed strings: wherever the analysis says a search cannot
    match, it does not."""
    rng = random.Random(5)
    patterns = [getattr(f, "__self__") for f in (tokenizer.prefix_search, tokenizer.suffix_search,
                                                 tokenizer.infix_finditer, tokenizer.url_match)]
    strings = _fuzzed_words(rng, 4000) + _edge_words(tokenizer) + ["hello", "Hello", "km", "5km", "a.b"]
    skipped = 0
    for pattern in patterns:
        needs = needed_characters(pattern)
        assert needs is not None
        for string in strings:
            if needs.search(string) is None:
                skipped += 1
                assert pattern.search(string) is None, (pattern.pattern[:40], string)
    assert skipped > 1000


def test_tokens_before_the_matcher_are_spacys_where_no_pattern_matches(tokenizer, port):
    """affix_tokens (special cases included) are the tokens spaCy's matcher runs over: wherever
    no run of them is a matcher pattern, they are the tokenizer's final tokens."""
    from bert_data.pipeline.word_tokens import matcher_patterns

    patterns = {tuple(p) for p in matcher_patterns(tokenizer).values()}
    longest = max(map(len, patterns))
    rng = random.Random(11)
    checked = with_special = 0
    for word in _edge_words(tokenizer) + _fuzzed_words(rng, 3000):
        if any(c.isspace() for c in word):
            continue
        tokens, special = port.affix_tokens(word)
        assert tokens, word
        runs = {tuple(tokens[i:j]) for i in range(len(tokens)) for j in range(i + 1, min(len(tokens), i + longest) + 1)}
        if runs & patterns:
            continue
        checked += 1
        with_special += special
        assert tokens == _spacy_tokens(tokenizer, word), word
    assert checked > 5000 and with_special > 500


def test_prefixes_and_suffixes_searched_by_edge_character_are_the_tokenizers(tokenizer, port):
    """EdgeSearch: the prefix (suffix) alternatives that can begin (end) with a string's first
    (last) character, suffixes of bounded width searched in the string's tail only, find what
    the whole expression finds, on edge and fuzzed words (long ones, non-ASCII and newline-ended
    ones too), and the cut is made only where it is exact."""
    from bert_data.pipeline.rule_expressions import (
        EdgeSearch, _top_level_alternatives, alternatives_at, prefix_alternatives, suffix_alternatives)

    rng = random.Random(17)
    words = _edge_words(tokenizer) + _fuzzed_words(rng, 4000)
    words += ["".join(rng.choices(["a", "b", ".", "..", "!", "'s", "km", "3", ")", "…", "US$", "(", "$", "é", "\n"],
                                  k=rng.randint(1, 40))) for _ in range(3000)]
    assert port._prefix._alternatives is not None and port._suffix._alternatives is not None
    for word in words:
        for rule, expected_search in ((port._prefix, tokenizer.prefix_search), (port._suffix, tokenizer.suffix_search)):
            match = expected_search(word)
            expected = match.end() - match.start() if match else 0
            edge = word[-1] if rule is port._suffix else word[0]
            length = rule.for_character(edge)
            assert (length(word) if length is not None else 0) == expected, word
    # Few alternatives per character: a lower-case letter begins no prefix; "." ends 4 suffixes.
    assert port._prefix.for_character("h") is None
    assert len(alternatives_at(port._suffix._alternatives, ".")) < 10 < len(port._suffix._alternatives)
    assert _top_level_alternatives(r"a(?:b|c)$|[|\]]x$|\|y$") == [r"a(?:b|c)$", r"[|\]]x$", r"\|y$"]
    spec = {"pattern": r"a+$|bc$|(?:x|yz)$|[^q]$|\.?$", "flags": 32, "method": "search"}
    assert suffix_alternatives(spec) == [
        {"pattern": "a+$", "width": None, "edge": [[97, 97]]},
        {"pattern": "bc$", "width": 2, "edge": [[99, 99]]},
        {"pattern": "(?:x|yz)$", "width": 2, "edge": [[120, 120], [122, 122]]},
        {"pattern": "[^q]$", "width": 1, "edge": None},  # negated class: not followed
        {"pattern": r"\.?$", "width": 1, "edge": None},  # may match empty
    ]
    assert suffix_alternatives({**spec, "pattern": r"ab$|c"}) is None  # not anchored at the end
    assert suffix_alternatives({**spec, "flags": 32 | re.IGNORECASE}) is None
    assert prefix_alternatives({**spec, "pattern": r"^(?=a)b|^US\$|^\.\.+"}) == [
        {"pattern": "^(?=a)b", "width": 1, "edge": [[98, 98]]},
        {"pattern": r"^US\$", "width": 3, "edge": [[85, 85]]},
        {"pattern": r"^\.\.+", "width": None, "edge": [[46, 46]]},
    ]
    assert prefix_alternatives({**spec, "pattern": r"^a|b"}) is None  # not anchored at the start
    cut = EdgeSearch({**spec, "pattern": r"^(?:\.|ab)|^a"}, prefix_alternatives({**spec, "pattern": r"^(?:\.|ab)|^a"}), False)
    assert cut.for_character("a")("abc") == 2 and cut.for_character("a")("ac") == 1 and cut.for_character("b") is None


def test_letters_then_one_character_are_the_tokenizers(tokenizer, port):
    """The shortcut for ASCII letters, or letters and one more character (most words holding
    sentence punctuation): the tokenizer's tokens for bodies at its edges (single letters and
    capitals, abbreviations and special cases without their stop, units, "US" of "US$") before
    every ASCII character and the sentencizer's punctuation, and the shortcut does answer
    where it should."""
    assert port._letters_inert
    bodies = ["a", "A", "I", "U", "x", "e", "word", "Word", "WORD", "US", "C", "km", "etc", "Mr", "Mrs", "St",
              "vs", "Jan", "Inc", "Ph", "No", "no", "pm", "am", "s", "S", "em", "nuff", "bout", "cause", "gonna",
              "doctor", "o", "O", "D", "xD", "Calif", "Ariz", "Pa", "mph", "kg", "lb", "http", "www", "com"]
    bodies += [text.rstrip(".") for text in tokenizer.rules if text.rstrip(".").isalpha() and text.isascii()]
    ends = [chr(c) for c in range(33, 127) if not chr(c).isalnum()] + _punct_chars() + ["…", "’", "”", "»", "😀"]
    for body in bodies:
        for end in ["", *ends]:
            word = body + end
            assert port.tokens(word) == _spacy_tokens(tokenizer, word), word
    assert port._letters_then("word.") == ["word", "."] and port._letters_then("Word?") == ["Word", "?"]
    assert port._letters_then("A.") is None  # "A." is one token: the suffix search finds no "."
    assert port._letters_then("US$") is None  # a prefix ("US$")


def test_infixes_tried_only_where_one_can_begin_are_the_tokenizers(tokenizer, port):
    """_infix_spans: in an ASCII string a match is tried only at the characters an infix can
    begin with (first_characters), and finds what infix_finditer finds, on edge, fuzzed and
    infix-dense words; the analysis declines what it cannot follow."""
    from bert_data.pipeline.rule_expressions import first_characters

    assert port._infix_starts is not None
    rng = random.Random(23)
    words = _edge_words(tokenizer) + _fuzzed_words(rng, 4000)
    words += ["".join(rng.choices(["a", "B", "3", ".", "..", "-", "--", ",", ":", "/", "+", "^", "*", "=", "<", "~", "é", "…"],
                                  k=rng.randint(1, 30))) for _ in range(4000)]
    for word in words:
        expected = [match.span() for match in tokenizer.infix_finditer(word)]
        assert port._infix_spans(word, word.isascii()) == expected, word
    spec = {"pattern": r"(?<=[0-9])[+\-](?=[0-9])|\.\.+|(?:ab|c)", "flags": 32, "method": "finditer"}
    assert first_characters(spec) == [[43, 43], [45, 45], [46, 46], [97, 97], [99, 99]]
    assert first_characters({**spec, "pattern": r"x|a*"}) is None  # may match empty
    assert first_characters({**spec, "pattern": r"x|[^a]"}) is None  # negated class: not followed
