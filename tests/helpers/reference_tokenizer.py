"""A small, independent, pure-Python re-implementation of the tokenizer that Google's
BERT release uses (``FullTokenizer`` = ``BasicTokenizer`` + ``WordpieceTokenizer`` in
google-research/bert ``tokenization.py``), written from its algorithm description.

It is deliberately slow and simple: it is the yardstick the fast Hugging Face based
``bert_data.tokenizers.wordpiece.WordPieceTokenizer`` is compared against.

Algorithm (per input text):

1. Clean: drop U+0000, U+FFFD and every "control" character (Unicode category Cc or Cf,
   except tab / newline / carriage return); map every "whitespace" character (space,
   tab, newline, carriage return, or category Zs) to a plain space.
2. Surround every CJK ideograph (the CJK Unified Ideographs blocks and extensions,
   compatibility ideographs) with spaces so that each becomes a word of its own.
3. Split on whitespace with Python's ``str.split()`` (which also splits on a few
   characters the cleaning step keeps, e.g. U+2028 / U+2029).
4. For each word, when lower-casing: ``str.lower()`` on the word, then NFD and drop
   every non-spacing mark (category Mn), i.e. strip accents.
5. Split each word around punctuation: every punctuation character becomes a word of
   its own. Punctuation = any ASCII character that is neither a letter, a digit, a
   space nor a control character (``!"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~``) plus every
   character of a Unicode P* category.
6. WordPiece each word: a word longer than ``max_input_chars_per_word`` characters is
   ``[UNK]``; otherwise take, greedily from the left, the longest prefix that is in the
   vocabulary (pieces after the first get the ``##`` prefix); if at some position no
   piece matches, the whole word is ``[UNK]``.

Google's ``WordpieceTokenizer`` uses ``max_input_chars_per_word=200`` by default (and
``FullTokenizer`` does not change it); Hugging Face ``transformers`` uses 100.
"""

from __future__ import annotations

import unicodedata

GOOGLE_MAX_INPUT_CHARS_PER_WORD = 200

# CJK ideograph ranges that BERT isolates (inclusive).
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

_ASCII_PUNCT = frozenset(chr(c) for c in range(128) if 33 <= c <= 126 and not chr(c).isalnum())


def is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def is_control(ch: str) -> bool:
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cc", "Cf")


def is_punctuation(ch: str) -> bool:
    return ch in _ASCII_PUNCT or unicodedata.category(ch).startswith("P")


def clean_text(text: str) -> str:
    out = []
    for ch in text:
        if ch == "\x00" or ch == "\ufffd" or is_control(ch):
            continue
        out.append(" " if is_whitespace(ch) else ch)
    return "".join(out)


def isolate_cjk(text: str) -> str:
    return "".join(f" {ch} " if is_cjk(ch) else ch for ch in text)


def strip_accents(word: str) -> str:
    return "".join(ch for ch in unicodedata.normalize("NFD", word) if unicodedata.category(ch) != "Mn")


def split_punctuation(word: str) -> list[str]:
    pieces: list[str] = []
    current: list[str] = []
    for ch in word:
        if is_punctuation(ch):
            if current:
                pieces.append("".join(current))
                current = []
            pieces.append(ch)
        else:
            current.append(ch)
    if current:
        pieces.append("".join(current))
    return pieces


def basic_tokenize(text: str, do_lower_case: bool) -> list[str]:
    text = isolate_cjk(clean_text(text))
    words: list[str] = []
    for word in text.split():
        if do_lower_case:
            word = strip_accents(word.lower())
        words.extend(split_punctuation(word))
    # Lower-casing / accent stripping may leave empty words or expose whitespace.
    return " ".join(words).split()


def wordpiece(word: str, vocab, unk_token: str = "[UNK]",
              max_input_chars_per_word: int = GOOGLE_MAX_INPUT_CHARS_PER_WORD) -> list[str]:
    if len(word) > max_input_chars_per_word:
        return [unk_token]
    pieces: list[str] = []
    start = 0
    n = len(word)
    while start < n:
        end = n
        found = None
        while end > start:
            candidate = word[start:end]
            if start > 0:
                candidate = "##" + candidate
            if candidate in vocab:
                found = candidate
                break
            end -= 1
        if found is None:
            return [unk_token]
        pieces.append(found)
        start = end
    return pieces


class ReferenceTokenizer:
    """Google ``FullTokenizer`` semantics. ``vocab_tokens``: the vocabulary, in id order."""

    def __init__(self, vocab_tokens, do_lower_case: bool = True,
                 max_input_chars_per_word: int = GOOGLE_MAX_INPUT_CHARS_PER_WORD):
        self.vocab = {tok: i for i, tok in enumerate(vocab_tokens)}
        self.do_lower_case = do_lower_case
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text: str) -> list[str]:
        out: list[str] = []
        for word in basic_tokenize(text, self.do_lower_case):
            out.extend(wordpiece(word, self.vocab, "[UNK]", self.max_input_chars_per_word))
        return out

    def convert_tokens_to_ids(self, tokens) -> list[int]:
        return [self.vocab[t] for t in tokens]
