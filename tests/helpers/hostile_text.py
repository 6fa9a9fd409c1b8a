"""Hostile text for tokenizer differentials: seeded, made here (nothing downloaded), every class of
input on which two implementations of BERT's tokenizer are likely to part.

``hostile_texts(n, seed)`` mixes words of these classes (each text draws from several): control
characters and NUL, zero-width and format characters, accents precomposed and as combining
marks, CJK (BMP and the supplementary planes), emoji with modifiers and joiners, right-to-left
scripts and marks, special tokens spelled as text (``[MASK]``, ``[SEP]``...), words just under and
over 100 and 200 characters, invalid UTF-8 decoded with replacement characters, runs of every
kind of white space (``\\x0b``/``\\x0c`` join their neighbours in Google's clean-up), chunks of
14 to 17 bytes sharing a prefix (where a native tokenizer's packed cache keys change width),
and random code points from every plane.  The same seed gives the same texts.
"""

from __future__ import annotations

import random
from typing import List

WORDS = ("the of and to in is was for that running jumped unaffable tokenization extraordinary "
         "internationalization photosynthesis New York Paris I it's don't e-mail U.S.A. 3.14 1,000").split()
ACCENTED = ["Café", "naïve", "Ångström", "résumé", "Zürich", "São", "Dvořák", "Łódź", "İstanbul", "straße",
            "ÜBER", "ﬁne", "½", "²", "ǅemal", "ẞ", "ΟΔΟΣ", "Ὀδυσσεύς", "Москва", "ŉ", "ǰ", "ΐ", "K", "Å"]
COMBINING = ["\u0301", "\u0308", "\u0327", "\u20dd", "\u0345", "\u034f", "\u1ab0", "\u1dc0", "\ufe20"]
CONTROL = ["\x00", "\x01", "\x07", "\x1b", "\x1c", "\x1f", "\x7f", "\x80", "\x85", "\x9f", "\u00ad", "\u061c",
           "\u180e", "\ufff9", "\U000e0001", "\U000e0041"]
ZERO_WIDTH = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u200e", "\u200f", "\u202a", "\u202e",
              "\u2066", "\u2069"]
SPACES = [" ", "\t", "\n", "\r", "\r\n", "\x0b", "\x0c", "\u00a0", "\u1680", "\u2000", "\u2007", "\u200a",
          "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\x1c", "\x1d", "\x1e", "\x1f", "\x85"]
CJK = ["中", "国", "日本", "漢字", "𠀀", "𪜀", "𫝀", "𫠠", "丽", "〇", "ア", "한", "\u3400", "\u9fff", "\U0002b820",
       "\U0002ceaf", "\U00030000", "\uf900", "\U0002f800", "ｶ", "㍿"]
EMOJI = ["🙂", "👍🏽", "❤️", "🇫🇷", "👨‍👩‍👧", "🤖", "☕", "✓", "™", "©", "∞", "→", "🏳️‍🌈", "#️⃣", "\U0001f9d1\u200d\U0001f4bb"]
RTL = ["שלום", "עולם", "مرحبا", "بالعالم", "\u0627\u0644\u0652", "ﷺ", "ﻻ", "\u05d0\u05b8", "ܐܪܡܝܐ", "ދިވެހި"]
SPECIAL = ["[MASK]", "[SEP]", "[CLS]", "[PAD]", "[UNK]", "[mask]", "[MASK", "MASK]", "[[MASK]]", "<mask>", "<s>",
           "</s>", "##", "##s", "[unused1]"]
PUNCT = list(".,;:!?'\"()[]{}<>-–—…/\\@#$%^&*_+=|~`") + ["“", "”", "‘", "’", "«", "»", "¡", "¿", "§", "¶", "•",
                                                        "·", "†", "‰", "′", "″", "\u2e43", "\u061d", "\u0f0d"]
OTHER_SCRIPTS = ["हिन्दी", "ภาษาไทย", "ქართული", "Ελληνικά", "ꯃꯩꯇꯩ", "𐌰𐌱", "𓀀", "ᚠᚢ", "\ue000", "\uf8ff",
                 "\U000f0001", "\U0010fffd", "\ufffd", "\ufffe", "\uffff"]


def _random_code_point(rng: random.Random) -> str:
    while True:
        plane = rng.choice([0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 14, 15, 16])
        cp = plane * 0x10000 + rng.randrange(0x10000)
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def _invalid_utf8(rng: random.Random) -> str:
    """Bytes with stray continuation, overlong and truncated sequences, decoded as the reader does."""
    parts = [rng.choice([b"ok", b"caf\xc3\xa9", b"\xff", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x99", b"\xc0\xaf",
                         b"\xed\xa0\x80", b"\x80\x80", b"\xf4\x90\x80\x80", b"abc"]) for _ in range(rng.randint(1, 6))]
    return b"".join(parts).decode("utf-8", errors="replace")


def _long_word(rng: random.Random) -> str:
    n = rng.choice([99, 100, 101, 150, 199, 200, 201, 250, 1000])
    alphabet = rng.choice(["abcdefghij", "ABCdéf", "αβγ", "ab\u0301", "xyz\u200b"])
    return "".join(rng.choice(alphabet) for _ in range(n))


def _key_width_word(rng: random.Random) -> str:
    """14 to 17 bytes sharing a prefix: the width where a packed cache key stops fitting."""
    stem = rng.choice(["internationaliz", "photosynthesisx", "abcdefghijklmno", "aaaaaaaaaaaaaaaa", "ééééééé"])
    return (stem * 2)[: rng.randint(12, 18)]


def _word(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.30:
        word = rng.choice(WORDS)
        return word.upper() if rng.random() < 0.1 else word
    if kind < 0.38:
        return rng.choice(ACCENTED)
    if kind < 0.43:  # combining marks on ASCII and non-ASCII bases, and on nothing
        return rng.choice(["e", "A", "ß", "Σ", "", "中", "1"]) + "".join(rng.choice(COMBINING)
                                                                      for _ in range(rng.randint(1, 3)))
    if kind < 0.48:
        return "".join(rng.choice(CJK) for _ in range(rng.randint(1, 4)))
    if kind < 0.52:
        return rng.choice(EMOJI)
    if kind < 0.56:
        return rng.choice(RTL)
    if kind < 0.60:
        return rng.choice(SPECIAL)
    if kind < 0.64:  # a control, zero-width or odd space character inside a word
        word = rng.choice(WORDS)
        at = rng.randint(0, len(word))
        return word[:at] + rng.choice(CONTROL + ZERO_WIDTH + SPACES) + word[at:]
    if kind < 0.66:
        return _long_word(rng)
    if kind < 0.70:
        return _key_width_word(rng)
    if kind < 0.73:
        return _invalid_utf8(rng)
    if kind < 0.755:
        return "".join(_random_code_point(rng) for _ in range(rng.randint(1, 5)))
    if kind < 0.82:
        return rng.choice(OTHER_SCRIPTS)
    if kind < 0.86:
        return rng.choice(WORDS) + rng.choice(PUNCT) + rng.choice(WORDS)
    return rng.choice(PUNCT) * rng.randint(1, 3)


def _gap(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.6:
        return " "
    if kind < 0.7:
        return ""
    if kind < 0.8:  # a long run of mixed white space
        return "".join(rng.choice(SPACES) for _ in range(rng.randint(2, 60)))
    return rng.choice(SPACES + ZERO_WIDTH + CONTROL)


def hostile_texts(n: int = 2000, seed: int = 0, huge: bool = True) -> List[str]:
    """``n`` texts of 1 to 40 hostile words, plus a few edge cases (empty, white space only,
    special tokens alone; with ``huge``, a word of 100,000 characters)."""
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 40)):
            parts.append(_word(rng))
            parts.append(_gap(rng))
        texts.append("".join(parts))
    texts += ["", " ", "\x00", "\t\n", "\u200b", "\x0b\x0c", " " * 10_000, "[MASK]", "[SEP] [CLS]", "a" * 201,
              "a" * 200, "\ufffd" * 3, "Σ", "ΟΔΟΣ ΟΔΟΣ.", "\U0002b820" * 3]
    return texts + (["x" * 100_000] if huge else [])
