"""SentencePiece as ALBERT tokenizes (``--spm_model_file m.model``, ``--vocab_file`` optional).

ALBERT's ``create_pretraining_data.py`` passes every line through ``preprocess_text`` (white
space collapsed, NFKD, combining marks dropped, lower-cased with ``--do_lower_case``) and its
``FullTokenizer`` splits it with ``encode_pieces``: the model's pieces, except that a piece
ending in a digit and a comma ("▁1,990,") is split again: the model's pieces of the text before
the comma (all "▁" removed), then ",".  ALBERT meant to drop the "▁" that the model puts in front
of that re-encoded text when the piece had none, but on Python 3 the test compares a ``str``
with the ``bytes`` ``SPIECE_UNDERLINE`` and is never true, so the "▁" stays; this module does
what ALBERT's code does (Hugging Face's ``AlbertTokenizer`` implements the intended version).
The ids are the model's (``PieceToId``) or, with ``--vocab_file``, the line numbers of the pieces
in that file (first column, as the trainer's ``m.vocab`` is written; ALBERT itself ignores the
file when it has a model: with the trainer's ``m.vocab`` both give the same ids).  A piece the
file lacks becomes its unknown token.

Batched: the model encodes a batch of sentences to ids in one call (one thread: parallelism
comes from worker processes); only sentences holding a digit-and-comma piece are re-encoded
piece by piece.  Sentences go through ``preprocess_text`` in this module, per sentence, as
ALBERT does per line.

Special tokens: ``--cls_token`` ... when given, else ``[CLS]``, ``[SEP]``, ``[MASK]`` (ALBERT's
model has them as control symbols) and the model's own padding and unknown pieces.  Whole-word
and n-gram masking use ALBERT's word-start rule (``_is_start_piece_sp``:
:func:`bert_data.tokenizers.vocab.is_start_piece`).  Ordinary tokens (random replacements) are all
pieces but the special ones and the model's control, unknown, unused and byte pieces.

The ``sentencepiece`` package is imported only here, only when a SentencePiece model is used.
"""

from __future__ import annotations

import hashlib
import unicodedata
from typing import List, Sequence

import numpy as np

from .base import SourceTokenizer
from .vocab import KIND_OF_OPTION, VocabError, option_for_file, vocab_from_tokens

__all__ = ["SentencePieceTokenizer", "load_spm_vocabulary", "preprocess_text"]

SPIECE_UNDERLINE = "\u2581"


def preprocess_text(text: str, lower: bool) -> str:
    """ALBERT's ``preprocess_text``: white space collapsed, NFKD, combining marks dropped,
    lower-cased when ``lower``."""
    text = " ".join(text.strip().split())
    if not text.isascii():  # NFKD and combining marks change nothing in ASCII text
        text = unicodedata.normalize("NFKD", text)
        text = "".join(c for c in text if not unicodedata.combining(c))
    return text.lower() if lower else text


def _processor(path: str):
    """A loaded ``SentencePieceProcessor`` and the model file's sha256, or a one-line VocabError."""
    try:
        import sentencepiece
    except ImportError:
        raise VocabError(f"{path}: reading a SentencePiece model needs the sentencepiece package: "
                         f"pip install sentencepiece (or 'bert_data[sentencepiece]')") from None
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise VocabError(f"{path}: cannot read the SentencePiece model: {error.strerror or error}") from None
    processor = sentencepiece.SentencePieceProcessor()
    try:
        processor.LoadFromSerializedProto(data)
    except Exception as error:  # RuntimeError or OSError, depending on the version
        belongs = option_for_file(data)
        if belongs and belongs != "--spm_model_file":
            raise VocabError(f"{path} is not a SentencePiece model but a {KIND_OF_OPTION[belongs]}: pass it as "
                             f"{belongs}") from None
        raise VocabError(f"{path}: not a SentencePiece model ({str(error).strip() or type(error).__name__})") from None
    if processor.GetPieceSize() == 0:
        raise VocabError(f"{path}: not a SentencePiece model (no pieces)")
    return processor, hashlib.sha256(data).hexdigest()


def _vocab_file_tokens(path: str) -> tuple:
    """The tokens of a vocabulary file in id order: the first tab-separated column of each line
    (a trainer's ``m.vocab`` is ``piece<TAB>score``; a plain list works too), and its sha256."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise VocabError(f"{path}: vocabulary file not found") from None
    except OSError as error:
        raise VocabError(f"{path}: cannot read vocabulary file: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise VocabError(f"{path}: not valid UTF-8 (byte offset {error.start})") from None
    lines = text.lstrip("\ufeff").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    tokens = [line.rstrip("\r").split("\t")[0].strip() for line in lines]
    if not tokens:
        raise VocabError(f"{path}: vocabulary file is empty")
    return tokens, hashlib.sha256(data).hexdigest()


def _build(source):
    """``(processor, Vocab, model id -> vocabulary id or None)``."""
    processor, model_sha = _processor(source.path)
    size = processor.GetPieceSize()
    pieces = [processor.IdToPiece(i) for i in range(size)]
    not_text = tuple(piece for i, piece in enumerate(pieces)
                     if processor.IsControl(i) or processor.IsUnknown(i) or processor.IsUnused(i)
                     or processor.IsByte(i))
    pad_id = processor.pad_id()
    own = (pieces[pad_id] if 0 <= pad_id < size else None, pieces[processor.unk_id()], "[CLS]", "[SEP]", "[MASK]")
    if source.vocab_file:
        tokens, vocab_sha = _vocab_file_tokens(source.vocab_file)
        where = source.vocab_file
        # Both files decide the ids: the hash that identifies the vocabulary covers both.
        sha256 = hashlib.sha256((model_sha + vocab_sha).encode()).hexdigest()
    else:
        tokens, where, sha256 = pieces, source.path, model_sha
    known = set(tokens)
    specials = []
    for role, given, found in zip(("pad", "unk", "cls", "sep", "mask"), source.special_tokens, own):
        token = given or found
        if token is not None and token not in known:
            if given or role in ("cls", "sep", "mask"):
                raise VocabError(f"{where}: the {role} token {token} is not a piece of the vocabulary: train the model "
                                 f"with it (e.g. control_symbols=[CLS],[SEP],[MASK]) or pass --{role}_token")
            token = None
        specials.append(token)
    vocab = vocab_from_tokens(tokens, path=where, sha256=sha256, special_tokens=tuple(specials),
                              word_boundary="start:" + SPIECE_UNDERLINE, reserved=not_text)
    translate = None
    if source.vocab_file:
        found = sum(piece in vocab.token_to_id for piece in pieces)
        if found < size / 2:  # e.g. a WordPiece vocab.txt given with a SentencePiece model
            raise VocabError(f"{where}: holds only {found} of the {size} pieces of {source.path}: not this model's "
                             f"vocabulary (its .vocab file lists them)")
        unk = vocab.unk_id
        if unk is None and found < size:
            missing = next(piece for piece in pieces if piece not in vocab.token_to_id)
            raise VocabError(f"{where}: lacks the model's piece {missing!r} and has no unknown token")
        translate = np.asarray([vocab.token_to_id.get(piece, unk) for piece in pieces], dtype=np.int64)
    return processor, vocab, translate


def _resplit(piece: str) -> bool:
    """A piece ALBERT's ``encode_pieces`` splits again: a digit then a comma at its end."""
    return len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit()


def load_spm_vocabulary(source):
    return _build(source)[1]


class SentencePieceTokenizer(SourceTokenizer):
    """ALBERT's SentencePiece tokenization (see the module docstring).  Picklable: the receiving
    process reads the files again."""

    def __init__(self, source):
        self.source = source
        self._init()

    def _init(self) -> None:
        self._sp, self.vocab, self._translate = _build(self.source)
        self.do_lower_case = bool(self.source.do_lower_case)
        sp = self._sp
        # Model ids of the pieces encode_pieces splits again ("▁1,990," -> "▁1" "," "990" ",").
        self._resplit_ids = frozenset(i for i in range(sp.GetPieceSize()) if _resplit(sp.IdToPiece(i)))

    def _pieces(self, text: str) -> List[str]:
        """ALBERT's ``encode_pieces`` on preprocessed text."""
        sp = self._sp
        out: List[str] = []
        for piece in sp.EncodeAsPieces(text):
            if _resplit(piece):
                # ALBERT's intended removal of a leading "▁" never happens on Python 3 (see above).
                out.extend(sp.EncodeAsPieces(piece[:-1].replace(SPIECE_UNDERLINE, "")))
                out.append(piece[-1])
            else:
                out.append(piece)
        return out

    def _model_ids(self, texts: List[str]) -> List[List[int]]:
        rows = self._sp.Encode(texts, out_type=int, num_threads=1)
        resplit = self._resplit_ids
        if resplit:
            for i, row in enumerate(rows):
                if not resplit.isdisjoint(row):
                    rows[i] = [self._sp.PieceToId(piece) for piece in self._pieces(texts[i])]
        return rows

    def encode_ids(self, texts: Sequence[str]) -> List[List[int]]:
        """Token ids of each text (batched; no special tokens)."""
        if not texts:
            return []
        lower = self.do_lower_case
        rows = self._model_ids([preprocess_text(text, lower) for text in texts])
        if self._translate is not None:
            translate = self._translate
            rows = [translate[row].tolist() if row else [] for row in rows]
        return rows

    def encode_one(self, text: str) -> List[int]:
        return self.encode_ids([text])[0]

    def tokenize(self, text: str) -> List[str]:
        """ALBERT's pieces of ``text`` (``preprocess_text`` then ``encode_pieces``)."""
        return self._pieces(preprocess_text(text, self.do_lower_case))

