"""The built-in splitter's sentences without spaCy Docs (bert_data/pipeline/rule_sentences.py) are
the spaCy pipeline's: a differential test on generated hostile text, with the pipeline
(``force_spacy=True``) as the oracle."""

from __future__ import annotations

import random
import re

import pytest

from bert_data.pipeline.sentences import SpacySentenceSplitter


@pytest.fixture(scope="module")
def splitters() -> tuple[SpacySentenceSplitter, SpacySentenceSplitter]:
    fast = SpacySentenceSplitter(max_passage_chars=3000)
    oracle = SpacySentenceSplitter(max_passage_chars=3000, force_spacy=True)
    assert fast._rules is not None and oracle._rules is None
    return fast, oracle


def _punct_chars() -> list[str]:
    from spacy.pipeline import Sentencizer

    return sorted(Sentencizer.default_punct_chars)


WORDS = [
    "the", "The", "cat", "Sat", "a", "I", "O", "x", "s", "vs", "Mr", "Dr", "it", "He", "that",
    "3.14", "1,000", "10.5%", "$4.99", "2:30", "1990s", "No.", "no.", "p.m.", "a.m.", "10a.m.",
    "e.g.", "i.e.", "E.g.", "U.S.", "U.S.A.", "Mr.", "Mrs.", "St.", "Jan.", "etc.", "vs.", "v.s.",
    "Ph.D.", "Inc.", "Jr.", "a.", "b.", "z.", "ä.", "l.a.", "u.s",
    "http://example.com/a.b?c=d.", "www.example.org.", "https://x.y/z!", "mail@example.com.",
    "a.b@c.d", "file.txt", "3.", "4!", "v2.0.1", "...", "..", ". . .", "?!", "!?", "!!", "??",
    "'s", "'S", "'re", "'d", "'em", "'bout", "'nuff", "'cause", "'Cause", "''", "``", "'", "’", "‘",
    "it's", "It's", "he's", "don't", "can't", "gonna", "y'all", "ma'am", "o'clock", "_", "_word_",
    "_beloved_'s", "*bold*", "--", "-", "—", "–", "/", "and/or", "w/", "w/o", "<3", "</3", ":)",
    ":-)", ";)", ":(", "(._.)", "(-_-)", "^_^", "o.O", "O.o", "(:", ":'-(", ">:(", "=)", ":D",
    ":-D", "xD", "(╯°□°）╯︵┻━┻", "¯\\_(ツ)_/¯", "°C.", "°F", "☺", "😀", "👍🏽", "🇺🇸", "❤️",
    "日本語", "東京。", "中文！", "한국어.", "Привет.", "мир!", "مرحبا؟", "سلام۔", "नमस्ते।", "हिंदी॥",
    "ሰላም።", "Ελλάδα;", "ɪpa", "ﬁne", "Ⅻ", "½", "x²", "Straße.", "naïve", "café.", "İ.",
    "U.", "etc.)", "3.)", "Ü.", "\x00", "a\x01.", "\x7f.",
]
PUNCT_AROUND = ['"', "'", "(", ")", "[", "]", "{", "}", "«", "»", "“", "”", "‘", "’", "„", "¿", "¡",
                "*", "_", "-", ",", ";", ":", "/", "\\", "…", "·", "§", "†", "‼", "⁉", "%", "#", "&"]
SEPARATORS = [" "] * 12 + ["  ", "   ", "\t", " \t ", "\n", "\n\n", " \n \n ", "\n \n", "\r\n", "\r\n\r\n",
                           "\xa0", " \xa0", "\u3000", "\u2009", "\x0c", "\x0b", "\u2028", "\u2029",
                           "\x85", "\x1c", "\n\t\n", " \n"]


def _hostile_text(rng: random.Random, n_items: int) -> str:
    punct = _punct_chars()
    parts = []
    for _ in range(n_items):
        kind = rng.random()
        if kind < 0.45:
            item = rng.choice(WORDS)
        elif kind < 0.6:
            item = rng.choice(WORDS) + rng.choice(punct)
        elif kind < 0.7:
            item = rng.choice(punct) * rng.randint(1, 3)
        elif kind < 0.8:
            # stops followed by quotes and brackets, and the reverse
            item = rng.choice(WORDS) + rng.choice(".!?…") + "".join(rng.choices(PUNCT_AROUND, k=rng.randint(1, 3)))
        elif kind < 0.9:
            item = "".join(rng.choices(PUNCT_AROUND, k=rng.randint(1, 2))) + rng.choice(WORDS)
        else:
            item = "".join(rng.choices(WORDS + punct + PUNCT_AROUND, k=rng.randint(2, 4)))  # glued
        parts.append(item)
        parts.append(rng.choice(SEPARATORS) if rng.random() < 0.9 else "")
    return "".join(parts)


def test_python_whitespace_is_spacy_whitespace():
    """rule_sentences finds chunks with re's \\s; spaCy's tokenizer splits at str.isspace()."""
    space = re.compile(r"\s")
    wrong = [hex(c) for c in range(0x110000) if bool(space.match(chr(c))) != chr(c).isspace()]
    assert wrong == []


def test_every_sentencizer_punctuation_character(splitters):
    fast, oracle = splitters
    texts = []
    for c in _punct_chars():
        texts += [f"One{c} Two", f"One {c} Two", f"One{c}{c} two", f"One{c}\" Two", f"One{c}) two",
                  f"One{c}  \" two", f"{c}", f"{c} {c}", f"a{c}b c", f"One{c}\n\nTwo{c}"]
    assert list(fast.split(texts)) == list(oracle.split(texts))


@pytest.mark.parametrize("seed", range(12))
def test_hostile_text_gives_the_pipelines_sentences(splitters, seed):
    fast, oracle = splitters
    rng = random.Random(seed)
    texts = [_hostile_text(rng, rng.randint(0, 300)) for _ in range(40)]
    got, expected = list(fast.split(texts)), list(oracle.split(texts))
    for text, a, b in zip(texts, got, expected):
        assert a == b, text


@pytest.mark.parametrize("by_arrays", [True, False])
def test_candidate_words_found_either_way_give_the_pipelines_sentences(splitters, monkeypatch, by_arrays):
    """Hostile text with the candidate words found by numpy in every Latin-1 passage, or by
    substring searches in every passage."""
    from bert_data.pipeline import rule_sentences

    monkeypatch.setattr(rule_sentences, "_ARRAYS_FROM_CHARS", 0 if by_arrays else 10**9)
    fast, oracle = splitters
    rng = random.Random(100 + by_arrays)
    texts = [_hostile_text(rng, rng.randint(0, 300)) for _ in range(40)]
    texts += [t.encode("latin-1", "ignore").decode("latin-1") for t in texts]
    got, expected = list(fast.split(texts)), list(oracle.split(texts))
    for text, a, b in zip(texts, got, expected):
        assert a == b, text


def test_long_documents_cut_into_passages():
    """Documents over max_passage_chars (100,000 by default): cut at paragraph breaks, line
    breaks, whitespace or hard, the same way on both paths."""
    rng = random.Random(7)
    fast = SpacySentenceSplitter()
    oracle = SpacySentenceSplitter(force_spacy=True)
    one_paragraph = " ".join(rng.choice(WORDS) for _ in range(30_000))  # > 100,000 characters
    texts = [
        _hostile_text(rng, 30_000),
        one_paragraph,
        one_paragraph.replace(" ", "\n", 5000),
        "x." * 60_000,  # no whitespace: cut hard
    ]
    assert min(len(t) for t in texts) > 100_000
    assert list(fast.split(texts)) == list(oracle.split(texts))


@pytest.mark.parametrize("port", [True, False])
def test_a_special_case_that_could_span_chunks_takes_the_whole_paragraph(splitters, port):
    """"'s" inside "_beloved_'s" is a special case; after " . " a matcher match for "._" could
    span the two chunks: that paragraph (and only that one) is tokenized whole -- by the word
    port (spaCy's matcher over the paragraph's tokens), or, without the port, by spaCy."""
    fast, oracle = splitters
    asked = []
    pipeline_starts = fast._pipeline_starts
    whole = fast._rules._paragraph_starts
    affix = fast._rules._affix

    def recording(text):
        asked.append(text)
        return pipeline_starts(text)

    fast._pipeline_starts = recording
    fast._rules._paragraph_starts = lambda text, spacy_starts: asked.append("whole") or whole(text, spacy_starts)
    if not port:
        fast._rules._affix = None
    try:
        text = "First paragraph. Fine.\n\nfor the benefit . _beloved_'s most. Next one"
        assert fast.split_text(text) == oracle.split_text(text)
    finally:
        del fast._pipeline_starts
        del fast._rules._paragraph_starts
        fast._rules._affix = affix
    expected = ["whole"] + ([] if port else ["for the benefit . _beloved_'s most. Next one"])
    assert asked == expected


def test_whitespace_runs_are_tokens(splitters):
    """A run of whitespace other than one space is a token that is not punctuation: after a
    stop it starts the sentence, so a quote after it opens the next sentence."""
    fast, oracle = splitters
    texts = ['He said "Hi." "Then"', 'He said "Hi."  "Then"', 'He said "Hi."\t"Then"',
             'He said "Hi." \xa0"Then"', "Hi.  ) there", "Hi. ) there"]
    got = list(fast.split(texts))
    assert got == list(oracle.split(texts))
    assert got[0] == ['He said "Hi." "', 'Then"'] and got[1] == ['He said "Hi."', '"Then"']


def _fast_path_edge_texts(rng: random.Random, rules) -> list[str]:
    """Text at the edges of the word port's fast path: every tokenizer special case (alone, with
    a stop, behind quotes) before capitalised words and words a special-case pattern could join
    across the space, single capitals and numbers before a stop, quotes and brackets after stops,
    emoji, abbreviations."""
    specials = [text for text in rules if not any(c.isspace() for c in text)]
    after = ["The", "Otero", "o", "O", "She", "he", "3", "(It", '"Yes', "'s", ":)", "_x_", "...", "😀", "U.S."]
    shapes = ["U.", "A.", "I.", "x.", "3.", "10.", "1,000.", "3.14.", "No.", "no.", "Mr.", "St.", "U.S.",
              "e.g.", "etc.", "a.m.", "10a.m.", "Ph.D.", "Calif.", "Inc.", "v.", "vs.", "Jan.", "1960's.",
              "doctor's.", "'bout?", "don't.", "gonna.", "word.", "word!", "word?", "word...", "word?!",
              'word."', "word.'", "word.)", "word.”", "word.’", 'word.")', "(word).", "[word].", "«word».",
              "word😀.", "😀.", "👍🏽!", "🇺🇸?", "❤️.", "http://x.org.", "www.x.com!", "mail@x.com.",
              "_beloved_'s", "(._.)", "o.O", "O.o", ":)", ":-)", "<3", "^_^", "°C.", "5km.", "$4.99."]
    texts = []
    for _ in range(60):
        words = []
        for _ in range(rng.randint(5, 60)):
            kind = rng.random()
            if kind < 0.35:
                words.append(rng.choice(specials) + rng.choice(["", "", ".", "!", '."', ".)", "?"]))
            elif kind < 0.7:
                words.append(rng.choice(shapes))
            else:
                words.append(rng.choice(after))
        texts.append(" ".join(words) + rng.choice(["", "\n\nNext paragraph here.", "  Two spaces.", "\tTab."]))
    return texts


@pytest.mark.parametrize("seed", range(3))
def test_the_word_ports_edges_give_the_pipelines_sentences(splitters, seed):
    fast, oracle = splitters
    texts = _fast_path_edge_texts(random.Random(seed), fast.nlp.tokenizer.rules)
    got, expected = list(fast.split(texts)), list(oracle.split(texts))
    for text, a, b in zip(texts, got, expected):
        assert a == b, text


def test_without_the_word_port_the_sentences_are_the_same():
    """The port off (spaCy's tokenizer for every new word, the text-based neighbour check): the
    same sentences, on the port's edge shapes and hostile text."""
    fast = SpacySentenceSplitter(max_passage_chars=3000)
    oracle = SpacySentenceSplitter(max_passage_chars=3000, force_spacy=True)
    fast._rules._affix = None
    rng = random.Random(3)
    texts = _fast_path_edge_texts(rng, fast.nlp.tokenizer.rules) + [_hostile_text(rng, 200) for _ in range(10)]
    assert list(fast.split(texts)) == list(oracle.split(texts))


def test_a_special_case_word_is_joined_by_its_own_tokens(splitters):
    """"Mr." is a special case whose tokens ("Mr.") are not its pattern's ("Mr", "."); pattern
    pairs fit its text and its neighbours' across the spaces (", M", ". O"), but a match across a
    space needs the pattern's tokens at the word's edge, and "Mr." is one token before the
    matcher: no paragraph goes to spaCy (the text-only check sent these), and the sentences are
    the pipeline's."""
    fast, oracle = splitters
    asked = []
    pipeline_starts = fast._pipeline_starts
    fast._pipeline_starts = lambda text: asked.append(text) or pipeline_starts(text)
    try:
        texts = ["Then Mr. Otero said so. Dr. Otis came. Mr. O'Brien left!", "Ask Mr. Otero. Fine.",
                 "It was worse. Also, Mr. Otero was barred.", "Human Services, Dr. Otis Bowen, spoke."]
        assert list(fast.split(texts)) == list(oracle.split(texts))
    finally:
        del fast._pipeline_starts
    assert asked == []


def test_a_neighbour_is_looked_at_by_its_own_tokens(splitters):
    """"doctor's." holds the special case "'s" and ends in the token "."; a pattern pair
    ("." then a token beginning with "O", "D", "-") fits the neighbour's text ("Oh", "David",
    "--"), but the neighbour's first token is the whole word: no paragraph is tokenized whole.
    Where the neighbour's token is the pattern's ("O", ". _x_") it is, and the sentences are the
    pipeline's either way."""
    fast, oracle = splitters
    whole = []
    paragraph_starts = fast._rules._paragraph_starts
    fast._rules._paragraph_starts = lambda text, ask: whole.append(text) or paragraph_starts(text, ask)
    try:
        quiet = ["at the doctor's. Oh, my goodness.", "Opens two Firefox's. Only in 09 Version.",
                 "the 1960's. Our own freedom", "Horsham, Pa.; David Chiodo, Dallas.", "Tel Inc. (Chandler, Ariz.) -- Jerry"]
        assert list(fast.split(quiet)) == list(oracle.split(quiet))
        assert whole == []
        joined = ["at the doctor's. O said so.", "the film's benefit . _beloved_'s most. Next"]
        assert list(fast.split(joined)) == list(oracle.split(joined))
        assert len(whole) >= 1
    finally:
        del fast._rules._paragraph_starts


@pytest.mark.parametrize("by_arrays", [True, False])
def test_candidate_words_in_ascii_latin1_and_wider_text(splitters, monkeypatch, by_arrays):
    """The words holding a sentencizer character (maximal runs of what str.isspace() is not),
    found with numpy in long Latin-1 passages and by substring searches in a marked copy
    elsewhere, are every one of them, once, whatever the whitespace (tabs, U+0085, U+00A0,
    U+001C..U+001F, U+3000) and control characters around them."""
    from bert_data.pipeline import rule_sentences

    monkeypatch.setattr(rule_sentences, "_ARRAYS_FROM_CHARS", 0 if by_arrays else 10**9)
    fast, _ = splitters
    rules = fast._rules
    punct = set(_punct_chars())
    rng = random.Random(11)
    alphabet = (list("ab .!?\n\t\x00\x01\x1c\x1f\x7f") + ["é", "£", "°", "¿", "¡", "ß", "\xa0", "\x85", "\xff"]
                + sorted(punct) + ["’", "😀", "—", "\u3000", "  "])
    for size in (0, 1, 5, 60, 400):
        for _ in range(200):
            text = "".join(rng.choices(alphabet, k=size))
            for narrowed in (text, text.encode("latin-1", "ignore").decode("latin-1"), text.encode("ascii", "ignore").decode()):
                words = [m.span() for m in re.finditer(r"\S+", narrowed) if punct & set(m.group())]
                starts, ends = rules._candidate_words(narrowed)
                assert list(zip(starts, ends)) == words, narrowed


def test_a_new_stop_words_entry_is_the_general_one(splitters):
    """``_stop_entry`` (letters then a sentencizer character, shortcut) gives what the general
    computation gives, and declines special cases, words spelling a token-changing special case
    and words it does not cover."""
    fast, _ = splitters
    rules = fast._rules
    punct = _punct_chars()
    words = [w + c for w in ["word", "Word", "U", "I", "a", "Mr", "Ph", "e", "etc", "vs", "Inc", "ma", "x"]
             for c in punct] + ["3.", "U.S.", "p.m.", "e.g.", "Mr.", "word.)", "ä.", "a.b", ".", "..", "😀."]
    words += [text for text in fast.nlp.tokenizer.rules if text[:-1].isalpha() and text.isascii()]
    shortcut = 0
    for word in words:
        entry = rules._stop_entry(word)
        if entry is not None:
            shortcut += 1
            assert entry == rules._any_entry(word), word
    assert rules._stop_entry("Mr.") is None and rules._stop_entry("3.") is None and rules._stop_entry("ä.") is None
    assert shortcut > 10 and rules._stop_entry("word.") is not None
