"""Vocabularies: BERT's ``vocab.txt``, or the pieces of any tokenizer in ``bert_data.tokenizers``.

A :class:`Vocab` holds the ids, the special tokens, which pieces continue a word (for whole-word
and n-gram masking) and the ordinary tokens (for random replacement).  :func:`load_vocab` reads
and checks a ``vocab.txt``; :func:`vocab_from_tokens` builds one from another tokenizer's pieces.

This module must not import TensorFlow or spaCy.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Optional, Sequence, Tuple

import numpy as np

from .. import storage

__all__ = [
    "SPECIAL_TOKENS",
    "VocabError",
    "Vocab",
    "WORDPIECE_BOUNDARY",
    "load_vocab",
    "vocab_from_tokens",
    "is_start_piece",
    "continuation_flags",
    "unk_rate",
]

#: The five tokens every BERT vocabulary must contain, in their conventional order.
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

_UNUSED_RE = re.compile(r"^\[unused\d+\]$")
_BRACKETED_SPECIAL_RE = re.compile(r"^\[[A-Z_]+\]$")
_WHITE_SPACE = re.compile(r"\s")  # what str.split() splits on (both are Py_UNICODE_ISSPACE)


class VocabError(ValueError):
    """A vocabulary file that cannot be used; the message names the file and the problem."""


# --------------------------------------------------------------------------- vocabulary


def _is_excluded_from_random(token: str, specials=()) -> bool:
    return (not token or token in SPECIAL_TOKENS or token in specials or _UNUSED_RE.match(token) is not None
            or _BRACKETED_SPECIAL_RE.match(token) is not None)


def _ordinary_ids(tokens: Sequence[str], excluded: set) -> np.ndarray:
    """The ids ``_is_excluded_from_random`` lets through, with the patterns tried only on tokens
    that open with "[" (both need it): a vocabulary is loaded by every process of a run."""
    keep = np.ones(len(tokens), dtype=bool)
    keep[[i for i, token in enumerate(tokens)
          if not token or token in excluded
          or (token[0] == "[" and (_UNUSED_RE.match(token) or _BRACKETED_SPECIAL_RE.match(token)))]] = False
    return np.flatnonzero(keep).astype(np.int32)


# How whole-word and n-gram masking tell where a word starts (``Vocab.word_boundary``):
#   "prefix:##"  a piece starting with "##" continues the word before it (BERT's WordPiece);
#   "start:▁"    ALBERT's rule for SentencePiece pieces (``is_start_piece``), with the marker
#                that stands for a space ("▁"; "Ġ" for byte-level BPE);
#   "words:"     every piece is a whole word (a WordLevel tokenizer.json): nothing continues one;
#   None         the pieces carry no mark: words cannot be told apart.
WORDPIECE_BOUNDARY = "prefix:##"

# ALBERT's ``_is_start_piece_sp`` counts these one-character pieces (and any piece holding a
# character outside a-z and them) as starting a word.  Its set lists '"' twice and no "'", and
# adds "€" and "£" as bytes, which never equal a character: copied as written.
_ALBERT_PUNCTUATION = frozenset('!"#$%&"()*+,-./:;?@[\\]^_`{|}~')
_ALBERT_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz") | _ALBERT_PUNCTUATION


def is_start_piece(piece: str, marker: str = "\u2581") -> bool:
    """ALBERT's word-start rule for SentencePiece pieces: a piece starts a word when it begins
    with the space marker or "<", is a punctuation character, or holds any character that is
    not an English letter or such punctuation (digits and foreign scripts are words of their own)."""
    return (piece.startswith(marker) or piece.startswith("<") or piece in _ALBERT_PUNCTUATION
            or not all(c.lower() in _ALBERT_WORD_CHARS for c in piece))


def continuation_flags(tokens: Sequence[str], word_boundary: Optional[str]) -> np.ndarray:
    """Per token: does it continue the word before it (see ``WORDPIECE_BOUNDARY``)?"""
    if not word_boundary:
        return np.zeros(len(tokens), dtype=bool)
    kind, _, mark = word_boundary.partition(":")
    if kind == "prefix":
        return np.fromiter((t.startswith(mark) for t in tokens), dtype=bool, count=len(tokens))
    if kind == "start":
        return np.fromiter((not is_start_piece(t, mark) for t in tokens), dtype=bool, count=len(tokens))
    if kind == "words":
        return np.zeros(len(tokens), dtype=bool)
    raise ValueError(f"unknown word boundary rule {word_boundary!r}")


@dataclass(frozen=True)
class Vocab:
    """A loaded vocabulary (immutable; cheap to pickle): BERT's ``vocab.txt``, or the pieces of
    another tokenizer (``bert_data.tokenizers``).

    ``tokens[i]`` is the token of id ``i``, in the tokenizer's own form. ``is_continuation[i]``
    is True for pieces that continue the word before them (``##`` pieces for WordPiece; see
    ``word_boundary``), used by whole-word and n-gram masking. ``ordinary_ids`` are the ids
    random replacement may draw: all but the special tokens ([PAD] [UNK] [CLS] [SEP] [MASK] or
    the tokenizer's own), ``reserved`` ones, ``[unusedN]`` and other bracketed all-caps
    specials like ``[XYZ]``. ``pad_id`` and ``unk_id`` are None for a tokenizer without them.
    """

    path: str
    tokens: tuple[str, ...]
    sha256: str
    pad_id: Optional[int]
    unk_id: Optional[int]
    cls_id: int
    sep_id: int
    mask_id: int
    size: int
    token_to_id: dict[str, int] = field(repr=False, compare=False)
    is_continuation: np.ndarray = field(repr=False, compare=False)
    ordinary_ids: np.ndarray = field(repr=False, compare=False)
    # (pad, unk, cls, sep, mask) as this vocabulary spells them; None: it has no such token.
    special_tokens: tuple = SPECIAL_TOKENS
    word_boundary: Optional[str] = WORDPIECE_BOUNDARY
    reserved: tuple = ()  # the tokenizer's other special tokens

    def __len__(self) -> int:
        return self.size

    def __reduce__(self):
        # Pickle only the token list (as one string: much cheaper than a tuple of 30k
        # strings) and rebuild the derived fields in the receiving process.
        return (_vocab_from_state, (self.path, "\n".join(self.tokens), self.sha256, self.special_tokens,
                                    self.word_boundary, self.reserved))

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        t2i = self.token_to_id
        return [t2i.get(t, self.unk_id) for t in tokens]

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        toks = self.tokens
        return [toks[int(i)] for i in ids]


def _vocab_from_state(path: str, joined: str, sha256: str, special_tokens=SPECIAL_TOKENS,
                      word_boundary=WORDPIECE_BOUNDARY, reserved=()) -> Vocab:
    return vocab_from_tokens(joined.split("\n"), path=path, sha256=sha256, special_tokens=special_tokens,
                             word_boundary=word_boundary, reserved=reserved)


def vocab_from_tokens(tokens: Sequence[str], path: str = "<memory>", sha256: str | None = None,
                      special_tokens: Sequence[Optional[str]] = SPECIAL_TOKENS,
                      word_boundary: Optional[str] = WORDPIECE_BOUNDARY, reserved: Sequence[str] = ()) -> Vocab:
    """Build a ``Vocab`` from tokens in id order (checks duplicates and specials).

    ``special_tokens``: the (pad, unk, cls, sep, mask) tokens, each required to be in ``tokens``;
    None for a pad or unk token the tokenizer does not have."""
    tokens = tuple(tokens)
    special_tokens = tuple(special_tokens)
    if sha256 is None:
        sha256 = hashlib.sha256(("\n".join(tokens) + "\n").encode("utf-8")).hexdigest()
    if not tokens:
        raise VocabError(f"{path}: vocabulary is empty")
    token_to_id: dict[str, int] = dict(zip(tokens, range(len(tokens))))
    if len(token_to_id) != len(tokens):  # a duplicate: found again, in order, for the message
        token_to_id = {}
        for i, tok in enumerate(tokens):
            first = token_to_id.setdefault(tok, i)
            if first != i:
                shown = repr(tok) + (" (blank line)" if tok == "" else "")
                raise VocabError(f"{path}: duplicate token {shown} at lines {first + 1} and {i + 1}")
    if None in special_tokens[2:]:
        raise VocabError(f"{path}: [CLS], [SEP] and [MASK] tokens are required")
    missing = [s for s in special_tokens if s is not None and s not in token_to_id]
    if missing:
        if special_tokens == SPECIAL_TOKENS:
            raise VocabError(f"{path}: missing special token(s) {' '.join(missing)} "
                             f"(a BERT vocabulary needs all of {' '.join(SPECIAL_TOKENS)})")
        raise VocabError(f"{path}: missing special token(s) {' '.join(missing)}")
    is_cont = continuation_flags(tokens, word_boundary)
    excluded = {s for s in special_tokens if s is not None} | set(reserved)
    ordinary = _ordinary_ids(tokens, excluded | set(SPECIAL_TOKENS))
    is_cont.flags.writeable = False
    ordinary.flags.writeable = False
    pad, unk, cls, sep, mask = (None if s is None else token_to_id[s] for s in special_tokens)
    return Vocab(
        path=str(path), tokens=tokens, sha256=sha256, pad_id=pad, unk_id=unk, cls_id=cls, sep_id=sep,
        mask_id=mask, size=len(tokens), token_to_id=token_to_id, is_continuation=is_cont, ordinary_ids=ordinary,
        special_tokens=special_tokens, word_boundary=word_boundary, reserved=tuple(reserved),
    )


def load_vocab(path) -> Vocab:
    """Load a BERT ``vocab.txt``: one token per line, id = line number - 1.

    Like Google's ``load_vocab`` each line is ``strip()``-ed and lines are split on
    ``\\n`` only. Raises ``VocabError`` for a missing/unreadable file, non-UTF-8 bytes,
    an empty file, duplicate tokens or missing special tokens.
    """
    path = os.fspath(path)
    reason = storage.not_a_regular_file(path)
    if reason and reason != storage.FILE_NOT_FOUND and not os.path.isdir(path):  # a FIFO would block
        raise VocabError(f"{path}: {reason}, not a vocabulary file")
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise VocabError(f"{path}: vocabulary file not found") from None
    except IsADirectoryError:
        raise VocabError(f"{path}: is a directory, not a vocabulary file") from None
    except OSError as e:
        raise VocabError(f"{path}: cannot read vocabulary file: {e.strerror or e}") from None
    sha256 = hashlib.sha256(data).hexdigest()
    loaded = _LOADED.get((path, sha256))
    if loaded is not None:  # the same file with the same bytes: the same (immutable) vocabulary
        return loaded
    not_a_vocab = _another_kind_of_file(path, data)
    if not_a_vocab:
        raise VocabError(not_a_vocab)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1)
        raise VocabError(f"{path}: not valid UTF-8 at line {line} (byte offset {e.start}, "
                         f"byte {col} of the line: {data[e.start:e.start + 1]!r})") from None
    if text.startswith("\ufeff"):  # tolerate a UTF-8 byte-order mark
        text = text[1:]
    if not text.strip():
        raise VocabError(f"{path}: vocabulary file is empty")
    lines = text.split("\n")
    if lines[-1] == "":  # newline at end of file
        lines.pop()
    tokens = [line.strip() for line in lines]
    problem = _not_one_token_a_line(tokens)
    if problem:  # a text file given as the vocabulary: say so, not "duplicate token ''"
        missing = [s for s in SPECIAL_TOKENS if s not in set(tokens)]
        lacks = f"; it also lacks {' '.join(missing)}" if missing else ""
        raise VocabError(f"{path} does not look like a BERT vocabulary (one token a line): {problem}{lacks}")
    vocab = vocab_from_tokens(tokens, path=path, sha256=sha256)
    while len(_LOADED) >= _KEPT:  # the oldest goes (pop: another thread may have taken it)
        _LOADED.pop(next(iter(_LOADED), None), None)
    _LOADED[(path, sha256)] = vocab
    return vocab


# Vocabularies loaded in this process, by path and content: a run loads its vocabulary once to
# resolve its options and again to build its tokenizer (~0.1 s each for BERT's 30,522 tokens, in
# the parent, then in every worker; forked workers find the parent's).  Keyed by the bytes'
# SHA-256, read every time: a file changed in place is loaded again.
_LOADED: Dict[Tuple[str, str], Vocab] = {}
_KEPT = 4


# What the file of each tokenizer option is, for messages.
KIND_OF_OPTION = {"--vocab_file": "BERT vocabulary (vocab.txt, one token a line)",
                  "--tokenizer_file": "Hugging Face tokenizer.json",
                  "--spm_model_file": "SentencePiece model"}


def option_for_file(data: bytes) -> str | None:
    """The tokenizer option a file's first bytes say it belongs to: ``--tokenizer_file`` (a
    tokenizer.json), ``--spm_model_file`` (a SentencePiece model) or ``--vocab_file`` (text of one
    token a line); None when they tell nothing."""
    head = data[:4096]
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{") and b'"model"' in data[:1 << 20]:
        return "--tokenizer_file"
    if b"\x00" in head:
        return "--spm_model_file" if head.startswith(b"\n") else None  # a ModelProto opens with its first piece
    try:
        text = head.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    lines = text.split("\n")[:-1] if len(head) == 4096 else text.split("\n")  # the last may be cut
    tokens = [line.strip() for line in lines if line.strip()]
    controls = any(unicodedata.category(c) == "Cc" and c not in "\t\r\n" for c in text)
    if len(tokens) >= 2 and not controls and all(len(token.split()) == 1 for token in tokens):
        return "--vocab_file"
    return None


def _another_kind_of_file(path: str, data: bytes) -> str | None:
    """What a file given as a vocab.txt is instead, with the option it belongs to: a Hugging Face
    tokenizer.json (``--tokenizer_file``), other JSON, or a binary file (a SentencePiece model:
    ``--spm_model_file``); None for text."""
    head = data[:4096]
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        import json

        try:
            parsed = json.loads(data.decode("utf-8-sig"))
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and "model" in parsed:
            return (f"{path} is a Hugging Face tokenizer.json, not a vocab.txt (one token a line): pass it as "
                    "--tokenizer_file")
        return f"{path} is JSON, not a BERT vocabulary (a vocab.txt holds one token a line)"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or _mostly_nul(head[1::2]) or _mostly_nul(head[0::2]):
        return (f"{path} is UTF-16 text, and a vocab.txt is read as UTF-8: convert it (e.g. iconv -f UTF-16 "
                "-t UTF-8)")
    if b"\x00" in head:
        spm = path.endswith(".model") or head.startswith(b"\n")  # a ModelProto opens with its first piece
        hint = "; a SentencePiece model is passed as --spm_model_file" if spm else ""
        return f"{path} is a binary file, not a BERT vocabulary (a vocab.txt holds one token a line){hint}"
    return None


def _mostly_nul(half: bytes) -> bool:
    """Every other byte NUL: ASCII text in UTF-16 without a byte-order mark."""
    return len(half) >= 8 and half.count(0) >= 0.9 * len(half)


def _not_one_token_a_line(tokens: Sequence[str]) -> str | None:
    """Why these lines cannot be a vocab.txt (prose, paragraphs), or None.  One blank line is
    let through, as Google's load_vocab does (it becomes the token '')."""
    if not _WHITE_SPACE.search("".join(tokens)) and tokens.count("") <= 1:  # (stripped: a space is between words)
        return None
    for number, token in enumerate(tokens, start=1):
        if len(token.split()) > 1:
            shown = token if len(token) <= 40 else token[:40] + "..."
            return f"line {number} holds several words ({shown!r})"
    blank = [number for number, token in enumerate(tokens, start=1) if not token]
    if len(blank) > 1:
        return f"{len(blank):,} lines are blank (lines {blank[0]} and {blank[1]} first)"
    return None


# --------------------------------------------------------------------------- Google fallback


def unk_rate(ids_lists: Iterable[Sequence[int]], vocab: Vocab) -> float:
    """Fraction of ids equal to ``vocab.unk_id`` (0.0 when there are no ids)."""
    unk = vocab.unk_id
    total = n_unk = 0
    for ids in ids_lists:
        total += len(ids)
        n_unk += ids.count(unk) if isinstance(ids, list) else int(np.count_nonzero(np.asarray(ids) == unk))
    return n_unk / total if total else 0.0
