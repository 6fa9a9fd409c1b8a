"""BERT's WordPiece tokenization, fast and exactly Google's.

``WordPieceTokenizer`` reproduces Google BERT's ``FullTokenizer`` (BasicTokenizer +
WordpieceTokenizer from google-research/bert ``tokenization.py``) with the Rust Hugging
Face ``tokenizers`` library: ``BertNormalizer`` + ``BertPreTokenizer`` + ``WordPiece``.
``tests/pipeline/test_tokenization.py`` checks it token for token against an independent
pure-Python re-implementation of Google's algorithm.

Hugging Face's normalizer differs from Google's on a few rare characters: it drops
private-use characters (U+E000-U+F8FF, planes 15-16) that Google keeps, does not isolate
CJK Extension E ideographs U+2B820-U+2B91F, lower-cases a word-final capital sigma to
``σ`` where Python's ``str.lower()`` gives ``ς``, and its Unicode tables (Unicode 9 era)
miss about 500 punctuation, mark and format characters added since. Texts containing any
of these characters (checked with one O(1) ``isascii()`` plus a regex search on
non-ASCII texts) are re-tokenized with a small pure-Python implementation of Google's
algorithm, so the output is exactly Google's. The table of such characters was derived
for Python 3.11 (Unicode 14) and tokenizers 0.23 by running every code point through both
tokenizers; ``tests/pipeline/test_tokenization.py`` re-checks a sample of all code points.

Native speed: with ``nanotoken`` installed (the ``[native]`` extra), batches go through a Rust
WordPiece built from the same Hugging Face tokenizer and checked against it when built
(:mod:`bert_data.tokenizers.native`); it has Hugging Face's tables, so the same texts take the
Google fallback, and the ids are the same either way.  ``native=False`` keeps Hugging Face's.

Threads: Hugging Face ``encode_batch*`` runs on a Rayon thread pool sized to all CPUs
unless the environment variable ``TOKENIZERS_PARALLELISM`` is ``false``. The pipeline runs
one tokenizer per worker process and wants one thread each: call ``force_single_thread()``
in the parent before the first batch call (before forking workers; the variable is
inherited), or set ``TOKENIZERS_PARALLELISM=false`` in the environment. Results are
identical either way; only the thread count differs.

This module must not import TensorFlow or spaCy.
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from itertools import compress
from operator import not_
from typing import Iterable, Sequence

import numpy as np

from .base import flatten, with_word_starts
from .native import native_wordpiece
from .vocab import Vocab, load_vocab, unk_rate

__all__ = [
    "WordPieceTokenizer",
    "force_single_thread",
    "bert_hf_tokenizer",
    "vocab_is_lowercase",
    "check_case_mismatch",
    "measure_case_mismatch",
    "CaseMismatch",
    "GOOGLE_MAX_INPUT_CHARS_PER_WORD",
]

#: Google's ``WordpieceTokenizer`` default (``FullTokenizer`` keeps it): longer words -> [UNK].
GOOGLE_MAX_INPUT_CHARS_PER_WORD = 200


# Code points (besides private use, CJK Extension E and, when lower-casing, capital sigma)
# on which Hugging Face's BertNormalizer/BertPreTokenizer (tokenizers 0.23, Unicode 9 era
# tables) and Google's tokenizer on Python 3.11 (Unicode 14) disagree, found by
# tokenizing every code point alone and between letters with both.
_HF_DIVERGENT_RANGES = (
    (0x061D, 0x061D), (0x07FD, 0x07FD), (0x0890, 0x0891), (0x0898, 0x089F),
    (0x08CA, 0x08E2), (0x09FD, 0x09FE), (0x0A76, 0x0A76), (0x0AFA, 0x0AFF), (0x0B55, 0x0B55),
    (0x0C04, 0x0C04), (0x0C3C, 0x0C3C), (0x0C77, 0x0C77), (0x0C84, 0x0C84), (0x0D00, 0x0D00),
    (0x0D3B, 0x0D3C), (0x0D81, 0x0D81), (0x0EBA, 0x0EBA), (0x166D, 0x166D), (0x1734, 0x1734),
    (0x180F, 0x180F), (0x1885, 0x1886), (0x1ABF, 0x1ACE), (0x1B7D, 0x1B7E), (0x1DF6, 0x1DFB),
    (0x2E43, 0x2E4F), (0x2E52, 0x2E5D), (0xA82C, 0xA82C), (0xA8C5, 0xA8C5), (0xA8FF, 0xA8FF),
    (0xA9BD, 0xA9BD), (0x10D24, 0x10D27), (0x10EAB, 0x10EAD), (0x10F46, 0x10F50),
    (0x10F55, 0x10F59), (0x10F82, 0x10F89), (0x11070, 0x11070), (0x11073, 0x11074),
    (0x110C2, 0x110C2), (0x110CD, 0x110CD), (0x111C9, 0x111C9), (0x111CF, 0x111CF),
    (0x1123E, 0x1123E), (0x1133B, 0x1133B), (0x11438, 0x1143F), (0x11442, 0x11444),
    (0x11446, 0x11446), (0x1144B, 0x1144F), (0x1145A, 0x1145B), (0x1145D, 0x1145E),
    (0x11660, 0x1166C), (0x116B9, 0x116B9), (0x1182F, 0x11837), (0x11839, 0x1183B),
    (0x1193B, 0x1193C), (0x1193E, 0x1193E), (0x11943, 0x11946), (0x119D4, 0x119D7),
    (0x119DA, 0x119DB), (0x119E0, 0x119E0), (0x119E2, 0x119E2), (0x11A01, 0x11A0A),
    (0x11A33, 0x11A38), (0x11A3B, 0x11A47), (0x11A51, 0x11A56), (0x11A59, 0x11A5B),
    (0x11A8A, 0x11A96), (0x11A98, 0x11A9C), (0x11A9E, 0x11AA2), (0x11C30, 0x11C36),
    (0x11C38, 0x11C3D), (0x11C3F, 0x11C3F), (0x11C41, 0x11C45), (0x11C70, 0x11C71),
    (0x11C92, 0x11CA7), (0x11CAA, 0x11CB0), (0x11CB2, 0x11CB3), (0x11CB5, 0x11CB6),
    (0x11D31, 0x11D36), (0x11D3A, 0x11D3A), (0x11D3C, 0x11D3D), (0x11D3F, 0x11D45),
    (0x11D47, 0x11D47), (0x11D90, 0x11D91), (0x11D95, 0x11D95), (0x11D97, 0x11D97),
    (0x11EF3, 0x11EF4), (0x11EF7, 0x11EF8), (0x11FFF, 0x11FFF), (0x12FF1, 0x12FF2),
    (0x13430, 0x13438), (0x16E97, 0x16E9A), (0x16F4F, 0x16F4F), (0x16FE2, 0x16FE2),
    (0x16FE4, 0x16FE4), (0x1CF00, 0x1CF2D), (0x1CF30, 0x1CF46), (0x1E000, 0x1E006),
    (0x1E008, 0x1E018), (0x1E01B, 0x1E021), (0x1E023, 0x1E024), (0x1E026, 0x1E02A),
    (0x1E130, 0x1E136), (0x1E2AE, 0x1E2AE), (0x1E2EC, 0x1E2EF), (0x1E944, 0x1E94A),
    (0x1E95E, 0x1E95F),
)
_PRIVATE_USE_RANGES = ((0xE000, 0xF8FF), (0xF0000, 0xFFFFD), (0x100000, 0x10FFFD))
_CJK_EXT_E_GAP = ((0x2B820, 0x2B91F),)  # Google isolates these ideographs; HF does not

_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _char_class(ranges) -> str:
    return "".join(re.escape(chr(lo)) + ("-" + re.escape(chr(hi)) if hi > lo else "")
                   for lo, hi in ranges)


_FALLBACK_CLASS = _char_class(_HF_DIVERGENT_RANGES + _PRIVATE_USE_RANGES + _CJK_EXT_E_GAP)
_FALLBACK_RE_CASED = re.compile("[" + _FALLBACK_CLASS + "]")
_FALLBACK_RE_UNCASED = re.compile("[" + _FALLBACK_CLASS + "\u03a3]")
# Whether no Latin-1 character needs the fallback (true of both classes: all lie past U+00FF), so
# that a batch whose every character is Latin-1 is cleared without a regular expression.
_LATIN1_CLEAR = not any(regex.search(chr(code)) for regex in (_FALLBACK_RE_CASED, _FALLBACK_RE_UNCASED)
                        for code in range(256))


def _google_basic_tokenize(text: str, do_lower_case: bool) -> list[str]:
    """Google BERT's BasicTokenizer (clean, isolate CJK, split, lower + strip accents,
    split punctuation), on Python's ``unicodedata``."""
    cat = unicodedata.category
    chars = []
    for ch in text:
        if ch in " \t\n\r":
            chars.append(" ")
            continue
        c = cat(ch)
        if ch == "\x00" or ch == "\ufffd" or c in ("Cc", "Cf"):
            continue
        if c == "Zs":
            chars.append(" ")
        elif ord(ch) >= 0x3400 and any(lo <= ord(ch) <= hi for lo, hi in _CJK_RANGES):
            chars.append(" " + ch + " ")
        else:
            chars.append(ch)
    out: list[str] = []
    for word in "".join(chars).split():
        if do_lower_case:
            word = "".join(x for x in unicodedata.normalize("NFD", word.lower()) if cat(x) != "Mn")
        start = 0
        for i, ch in enumerate(word):
            o = ord(ch)
            if (33 <= o <= 47 or 58 <= o <= 64 or 91 <= o <= 96 or 123 <= o <= 126
                    or cat(ch).startswith("P")):
                if i > start:
                    out.append(word[start:i])
                out.append(ch)
                start = i + 1
        if start < len(word):
            out.append(word[start:])
    return " ".join(out).split()


def _google_wordpiece_ids(words: list[str], vocab: Vocab, max_chars: int) -> list[int]:
    """Google BERT's WordpieceTokenizer (greedy longest match first), as ids."""
    t2i = vocab.token_to_id
    ids: list[int] = []
    for word in words:
        if len(word) > max_chars:
            ids.append(vocab.unk_id)
            continue
        pieces: list[int] = []
        start, n = 0, len(word)
        while start < n:
            end = n
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in t2i:
                    pieces.append(t2i[piece])
                    break
                end -= 1
            else:
                pieces = [vocab.unk_id]
                break
            start = end
        ids.extend(pieces)
    return ids


# --------------------------------------------------------------------------- tokenizer


def force_single_thread() -> str | None:
    """Make Hugging Face ``tokenizers`` run batch calls on the calling thread only.

    Sets ``TOKENIZERS_PARALLELISM=false`` (returns the previous value). Call it before the
    first ``encode_ids`` call and before forking worker processes; child processes inherit
    it. ``encode_ids`` gives the same results with or without it.
    """
    previous = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    return previous


def bert_hf_tokenizer(model, do_lower_case: bool):
    """A Hugging Face ``Tokenizer`` around ``model`` behind BERT's normaliser and pre-tokenizer
    (Google's BasicTokenizer: clean, isolate CJK, lower-case and strip accents when
    ``do_lower_case``, split on white space and punctuation).  The tokenizer here and the
    vocabulary trainer (``tokenizers.vocab_builder``) both use it, so that a trained vocabulary
    fits the tokenizer."""
    from tokenizers import Tokenizer
    from tokenizers.normalizers import BertNormalizer
    from tokenizers.pre_tokenizers import BertPreTokenizer

    tk = Tokenizer(model)
    tk.normalizer = BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                   strip_accents=bool(do_lower_case), lowercase=bool(do_lower_case))
    tk.pre_tokenizer = BertPreTokenizer()
    return tk


def _build_hf_tokenizer(vocab: Vocab, do_lower_case: bool, max_input_chars_per_word: int):
    from tokenizers.models import WordPiece

    return bert_hf_tokenizer(WordPiece(vocab=dict(vocab.token_to_id), unk_token=vocab.special_tokens[1],
                                       max_input_chars_per_word=max_input_chars_per_word), do_lower_case)


class WordPieceTokenizer:
    """Google BERT ``FullTokenizer`` semantics on Hugging Face ``tokenizers`` (Rust).

    ``vocab_file``: path to ``vocab.txt`` or an already loaded ``Vocab``. No special
    tokens are added. ``max_input_chars_per_word``: longer words become ``[UNK]``;
    Google's default is 200 (Hugging Face ``transformers`` uses 100).
    ``google_fallback``: re-tokenize the rare texts on which Hugging Face's normalizer
    differs from Google's with a pure-Python copy of Google's algorithm (see the module
    docstring); turn off for pure Hugging Face output.

    Picklable: the Hugging Face object is rebuilt from the token list (not the path) in
    the receiving process.
    """

    def __init__(self, vocab_file, do_lower_case: bool = True,
                 max_input_chars_per_word: int = GOOGLE_MAX_INPUT_CHARS_PER_WORD,
                 google_fallback: bool = True, native: bool = True):
        self.vocab: Vocab = vocab_file if isinstance(vocab_file, Vocab) else load_vocab(vocab_file)
        self.do_lower_case = bool(do_lower_case)
        self.max_input_chars_per_word = int(max_input_chars_per_word)
        self.google_fallback = bool(google_fallback)
        self.native = bool(native)
        self._init_hf()

    def _init_hf(self) -> None:
        self._tk = _build_hf_tokenizer(self.vocab, self.do_lower_case, self.max_input_chars_per_word)
        self._encode_batch = getattr(self._tk, "encode_batch_fast", None) or self._tk.encode_batch
        self._needs_fallback = None
        if self.google_fallback:
            regex = _FALLBACK_RE_UNCASED if self.do_lower_case else _FALLBACK_RE_CASED
            self._needs_fallback = regex.search
        # The same ids as self._tk (checked when built), natively; None without nanotoken.
        self._native = native_wordpiece(self._tk) if self.native else None

    @property
    def is_native(self) -> bool:
        """Whether batches go through the native tokenizer (``nanotoken``)."""
        return self._native is not None

    def _google_ids(self, text: str) -> list[int]:
        words = _google_basic_tokenize(text, self.do_lower_case)
        return _google_wordpiece_ids(words, self.vocab, self.max_input_chars_per_word)

    def _fallback_rows(self, texts: list[str]) -> list[int]:
        """The texts holding a character on which Hugging Face's normaliser (and so the native
        tokenizer, which has its tables) parts from Google's: usually none, seen at once when the
        whole batch is ASCII."""
        search = self._needs_fallback
        if search is None or "".join(texts).isascii():
            return []
        # (the texts not ASCII found in C: most of a batch's sentences are, even when one is not)
        rows = list(compress(range(len(texts)), map(not_, map(str.isascii, texts))))
        if _LATIN1_CLEAR:
            try:  # (a character class of many ranges scans slowly: not run over Western European text)
                "".join([texts[i] for i in rows]).encode("latin-1")
                return []
            except UnicodeEncodeError:
                pass
        return [i for i in rows if search(texts[i])]

    def encode_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text (batched; no special tokens)."""
        if not texts:
            return []
        if not isinstance(texts, list):
            texts = list(texts)
        if self._native is not None:
            out = self._native.encode_ids(texts)
        else:
            out = [enc.ids for enc in self._encode_batch(texts, add_special_tokens=False)]
        for i in self._fallback_rows(texts):
            out[i] = self._google_ids(texts[i])
        return out

    def encode_flat(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, lengths)``: the ids of every text end to end and each text's count, as arrays
        (what the generator keeps; no Python list per token on the native path)."""
        if not isinstance(texts, list):
            texts = list(texts)
        if self._native is None:
            return flatten(self.encode_ids(texts))
        rows = self._fallback_rows(texts)
        if not rows:
            return self._native.encode_flat(texts)
        native_texts = list(texts)
        for i in rows:
            native_texts[i] = ""  # no ids: Google's go in their place
        ids, lengths = self._native.encode_flat(native_texts)
        starts = np.concatenate([[0], np.cumsum(lengths)])
        parts, done = [], 0
        for i in rows:
            google = self._google_ids(texts[i])
            lengths[i] = len(google)
            parts += [ids[done:starts[i]], np.asarray(google, dtype=ids.dtype)]
            done = starts[i]
        parts.append(ids[done:])
        return np.concatenate(parts), lengths

    def encode_flat_words(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``encode_flat`` and each id's word start (uint8), by the ``##`` marks."""
        return with_word_starts(self.encode_flat(texts), self.vocab)

    def encode_one(self, text: str) -> list[int]:
        """Token ids of one text (no special tokens): public API, the single-text form of
        ``encode_ids`` as ``tokenize`` is of tokens (the generator itself always batches)."""
        if self._needs_fallback is not None and not text.isascii() and self._needs_fallback(text):
            return self._google_ids(text)
        return self._tk.encode(text, add_special_tokens=False).ids

    def tokenize(self, text: str) -> list[str]:
        """WordPiece tokens of ``text`` (as Google's ``FullTokenizer.tokenize``)."""
        if self._needs_fallback is not None and not text.isascii() and self._needs_fallback(text):
            return self.vocab.convert_ids_to_tokens(self._google_ids(text))
        return self._tk.encode(text, add_special_tokens=False).tokens

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        return self.vocab.convert_tokens_to_ids(tokens)

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        return self.vocab.convert_ids_to_tokens(ids)

    def __getstate__(self):
        return {"vocab": self.vocab, "do_lower_case": self.do_lower_case,
                "max_input_chars_per_word": self.max_input_chars_per_word,
                "google_fallback": self.google_fallback, "native": self.native}

    def __setstate__(self, state) -> None:
        self.vocab = state["vocab"]
        self.do_lower_case = state["do_lower_case"]
        self.max_input_chars_per_word = state["max_input_chars_per_word"]
        self.google_fallback = state.get("google_fallback", True)
        self.native = state.get("native", True)
        self._init_hf()

    def __repr__(self) -> str:
        return (f"WordPieceTokenizer(vocab={self.vocab.path!r}, size={self.vocab.size}, "
                f"do_lower_case={self.do_lower_case})")


# --------------------------------------------------------------------------- checks


def vocab_is_lowercase(vocab: Vocab, n_tokens: int = 2000) -> bool:
    """True when none of the first ``n_tokens`` ordinary tokens has an upper-case letter."""
    checked = 0
    for i in vocab.ordinary_ids:
        tok = vocab.tokens[int(i)]
        if tok.lower() != tok:
            return False
        checked += 1
        if checked >= n_tokens:
            break
    return True


@dataclass(frozen=True)
class CaseMismatch:
    """A vocabulary whose case disagrees with ``do_lower_case``, measured on sample texts:
    ``unk_rate`` with the setting given, ``other_unk_rate`` with the other one; ``changes_tokens``
    says whether the setting changes any token of the sample (if not, the mismatch is harmless
    on this text, e.g. a script without capitals)."""

    vocab_path: str
    vocab_is_lowercase: bool
    do_lower_case: bool
    unk_rate: float
    other_unk_rate: float
    n_texts: int
    changes_tokens: bool

    def describe(self) -> str:
        """E.g. "vocabulary V looks uncased but do_lower_case is off: [UNK] rate 8.80% on 120
        sample lines, 0.02% with do_lower_case on"."""
        other = "on" if not self.do_lower_case else "off"
        rates = (f"[UNK] rate {self.unk_rate:.2%} on {self.n_texts:,} sample line(s), "
                 f"{self.other_unk_rate:.2%} with do_lower_case {other}")
        if self.vocab_is_lowercase:
            return f"vocabulary {self.vocab_path} looks uncased (lower-cased) but do_lower_case is off: {rates}"
        return (f"vocabulary {self.vocab_path} looks cased but do_lower_case is on, so its capitalised tokens "
                f"are never used: {rates}")


def measure_case_mismatch(vocab: Vocab, do_lower_case: bool, sample_texts: Iterable[str]) -> CaseMismatch | None:
    """None when the vocabulary's case (:func:`vocab_is_lowercase`) agrees with
    ``do_lower_case``; else both settings' [UNK] rates on the sample."""
    lowercase_vocab = vocab_is_lowercase(vocab)
    if lowercase_vocab == bool(do_lower_case):
        return None
    texts = [t for t in sample_texts if t]
    given = WordPieceTokenizer(vocab, do_lower_case=do_lower_case).encode_ids(texts) if texts else []
    other = WordPieceTokenizer(vocab, do_lower_case=not do_lower_case).encode_ids(texts) if texts else []
    return CaseMismatch(vocab.path, lowercase_vocab, bool(do_lower_case), unk_rate(given, vocab),
                        unk_rate(other, vocab), len(texts), given != other)


def check_case_mismatch(vocab: Vocab, do_lower_case: bool, sample_texts: Iterable[str],
                        tokenizer: WordPieceTokenizer | None = None) -> str | None:
    """One-line warning when the vocabulary's casing and ``do_lower_case`` disagree.

    A lower-case vocabulary used without ``do_lower_case`` (or a cased one with it) gives
    many ``[UNK]``s or loses case information; the warning includes the ``[UNK]`` rate
    measured on ``sample_texts`` with both settings. Returns None when they agree.
    (``tokenizer`` is accepted for compatibility; both settings are measured afresh.)
    """
    mismatch = measure_case_mismatch(vocab, do_lower_case, sample_texts)
    if mismatch is None:
        return None
    advice = "pass --do_lower_case for an uncased model" if mismatch.vocab_is_lowercase else \
        "drop --do_lower_case for a cased model"
    return f"{mismatch.describe()}; {advice}"
