"""Any Hugging Face ``tokenizers`` tokenizer (``--tokenizer_file tokenizer.json``), run as the file says.

The file's normalizer, pre-tokenizer and model decide the pieces; three things are switched off,
because the generator lays out ``[CLS] A [SEP] B [SEP]`` itself: truncation, padding, and the
matching of special tokens in the text (``encode_special_tokens``), so that a document that
contains the text "[MASK]" gets the pieces of that text, as Google's tokenizer gives, never the
[MASK] id.

A WordPiece file runs on the native ``nanotoken`` when it is installed, with the same ids
(:mod:`bert_data.tokenizers.native`); any other model on ``tokenizers``.

Special tokens: the ``--cls_token`` ... options when given; else the tokenizer's own (the
``[CLS]``/``[SEP]`` of its post-processor, its model's unknown token, its padding token, an
added ``<mask>`` special token when there is no ``[MASK]``); else BERT's names.  A missing one is a
one-line ``VocabError`` before any work.

Word boundaries (whole-word and n-gram masking), from the file: a WordPiece model, or a BPE
model with a ``continuing_subword_prefix``, marks continuations with that prefix (``##``); a
``Metaspace`` pre-tokenizer (SentencePiece-style, "▁") or a byte-level one ("Ġ") marks word
starts, read with ALBERT's rule (:func:`bert_data.tokenizers.vocab.is_start_piece`); a WordLevel
model's pieces are words.  Any other tokenizer (e.g. BPE on white-space words without a
prefix or suffix mark) shows no boundaries in its pieces: for whole-word, n-gram and span
masking the run then records each token's word start from the tokenizer's own words
(:meth:`HuggingFaceTokenizer.encode_flat_words`, the pre-tokenizer's words) and stores them
with the records (``word_starts``; ``--store_word_starts``).

With a BERT-uncased ``tokenizer.json`` (``BertWordPieceTokenizer(vocab, lowercase=True)``) the
records are byte-identical to ``--vocab_file vocab.txt --do_lower_case`` except where Hugging
Face's tokenizer itself differs from Google's: its ``max_input_chars_per_word`` is 100, not 200
(longer words are one [UNK]), and the rare characters :mod:`bert_data.tokenizers.wordpiece` lists
(``WordPieceTokenizer`` falls back to Google's algorithm on them; a ``tokenizer.json`` is run as
it is, as ``transformers`` runs it at fine-tuning time).
"""

from __future__ import annotations

import hashlib
import json
from typing import List, Optional, Sequence

from .base import SourceTokenizer, flatten, starts_of_word_ids
from .native import native_wordpiece
from .vocab import KIND_OF_OPTION, SPECIAL_TOKENS, VocabError, option_for_file, vocab_from_tokens

__all__ = ["HuggingFaceTokenizer", "load_hf_vocabulary", "word_boundary_of"]


def _read(path: str):
    """``(Tokenizer, parsed JSON, sha256)`` of a tokenizer.json, or a one-line VocabError."""
    from tokenizers import Tokenizer

    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise VocabError(f"{path}: cannot read the tokenizer file: {error.strerror or error}") from None
    try:
        text = data.decode("utf-8")
        tokenizer = Tokenizer.from_str(text)
        parsed = json.loads(text)
    except Exception as error:  # tokenizers raises a bare Exception for any malformed file
        belongs = option_for_file(data)
        if belongs and belongs != "--tokenizer_file":
            raise VocabError(f"{path} is not a tokenizer.json but a {KIND_OF_OPTION[belongs]}: pass it as "
                             f"{belongs}") from None
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise VocabError(f"{path}: not a Hugging Face tokenizer.json ({first})") from None
    return tokenizer, parsed, hashlib.sha256(data).hexdigest()


def _flatten(component) -> List[dict]:
    """A normalizer/pre-tokenizer/processor and, for a ``Sequence``, its members."""
    if not isinstance(component, dict):
        return []
    members = component.get("pretokenizers") or component.get("normalizers") or component.get("processors")
    if component.get("type") == "Sequence" and isinstance(members, list):
        return [leaf for member in members for leaf in _flatten(member)]
    return [component]


def word_boundary_of(parsed: dict) -> Optional[str]:
    """How the tokenizer's pieces show word starts (``Vocab.word_boundary``), or None."""
    model = parsed.get("model") or {}
    kind = model.get("type")
    prefix = model.get("continuing_subword_prefix")
    if kind == "WordPiece":
        return "prefix:" + (prefix or "##")
    if kind == "BPE" and prefix:
        return "prefix:" + prefix
    if kind == "WordLevel":
        return "words:"
    for step in _flatten(parsed.get("pre_tokenizer")):
        if step.get("type") == "Metaspace":
            return "start:" + (step.get("replacement") or "\u2581")
        if step.get("type") == "ByteLevel":
            return "start:\u0120"
    # Newer SentencePiece conversions put the "▁" in the normalizer (Replace + Prepend).
    if "\u2581" in json.dumps(parsed.get("normalizer"), ensure_ascii=False):
        return "start:\u2581"
    return None


def _processor_specials(parsed: dict) -> tuple:
    """``(cls, sep)`` of the tokenizer's post-processor (None where it names none)."""
    for step in _flatten(parsed.get("post_processor")):
        if step.get("type") in ("BertProcessing", "RobertaProcessing"):
            return step.get("cls", [None])[0], step.get("sep", [None])[0]
        if step.get("type") == "TemplateProcessing":
            single = step.get("single") or []
            names = [list(item.values())[0].get("id") if "SpecialToken" in item else "$A" for item in single]
            if "$A" in names:
                at = names.index("$A")
                before = [name for name in names[:at]]
                after = [name for name in names[at + 1:]]
                return (before[-1] if before else None), (after[0] if after else None)
    return None, None


def _resolve_specials(source, parsed: dict, token_to_id: dict, added_special: List[str]) -> tuple:
    model = parsed.get("model") or {}
    cls, sep = _processor_specials(parsed)
    unk = model.get("unk_token")
    if unk is None and isinstance(model.get("unk_id"), int) and model.get("type") == "Unigram":
        unk = model["vocab"][model["unk_id"]][0]
    pad = (parsed.get("padding") or {}).get("pad_token")
    mask = "<mask>" if "[MASK]" not in token_to_id and "<mask>" in added_special else None
    own = (pad, unk, cls, sep, mask)
    resolved = []
    for role, given, found, default in zip(("pad", "unk", "cls", "sep", "mask"), source.special_tokens, own,
                                           SPECIAL_TOKENS):
        token = given or found or default
        if token not in token_to_id:
            if not given and role in ("pad", "unk"):
                token = None  # a tokenizer may have neither (byte-level BPE has no unknown token)
            else:
                source_of = f"--{role}_token" if given else ("the tokenizer's own" if found else "BERT's name")
                raise VocabError(f"{source.path}: the {role} token {token} ({source_of}) is not in the tokenizer: "
                                 f"pass --{role}_token with one it has")
        resolved.append(token)
    return tuple(resolved)


def _vocab_of(source, tokenizer, parsed: dict, sha256: str):
    token_to_id = tokenizer.get_vocab(with_added_tokens=True)
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    tokens: List[Optional[str]] = [None] * size
    for token, index in token_to_id.items():
        if 0 <= index < size:
            tokens[index] = token
    if None in tokens:
        raise VocabError(f"{source.path}: the tokenizer has no token of id {tokens.index(None)} (ids must run "
                         f"0..{size - 1} without gaps)")
    added_special = [entry["content"] for entry in parsed.get("added_tokens") or [] if entry.get("special")]
    specials = _resolve_specials(source, parsed, token_to_id, added_special)
    return vocab_from_tokens(tokens, path=source.path, sha256=sha256, special_tokens=specials,
                             word_boundary=word_boundary_of(parsed), reserved=tuple(added_special))


def load_hf_vocabulary(source):
    tokenizer, parsed, sha256 = _read(source.path)
    return _vocab_of(source, tokenizer, parsed, sha256)


class HuggingFaceTokenizer(SourceTokenizer):
    """A ``tokenizer.json``, for the generator (see the module docstring).  Picklable: the
    receiving process reads the file again."""

    def __init__(self, source, native: bool = True):
        self.source = source
        self.native = native  # False: always Hugging Face's own (the benchmark's floor, the tests' oracle)
        self._init()

    def _init(self) -> None:
        tokenizer, parsed, sha256 = _read(self.source.path)
        self.vocab = _vocab_of(self.source, tokenizer, parsed, sha256)
        tokenizer.no_truncation()
        tokenizer.no_padding()
        tokenizer.encode_special_tokens = True
        self._tk = tokenizer
        self._encode_batch = getattr(tokenizer, "encode_batch_fast", None) or tokenizer.encode_batch
        # A WordPiece file runs natively when nanotoken is there (the same ids, checked when built).
        native = (parsed.get("model") or {}).get("type") == "WordPiece" and getattr(self, "native", True)
        self._native = native_wordpiece(tokenizer) if native else None

    @property
    def is_native(self) -> bool:
        """Whether batches go through the native tokenizer (``nanotoken``)."""
        return self._native is not None

    def encode_ids(self, texts: Sequence[str]) -> List[List[int]]:
        """Token ids of each text (batched; no special tokens)."""
        if not texts:
            return []
        if self._native is not None:
            return self._native.encode_ids(list(texts))
        return [encoding.ids for encoding in self._encode_batch(list(texts), add_special_tokens=False)]

    def encode_flat(self, texts: Sequence[str]):
        if self._native is not None:
            return self._native.encode_flat(list(texts))
        return super().encode_flat(texts)

    def encode_flat_words(self, texts: Sequence[str]):
        """``(ids, lengths, word_starts)``: by the pieces' marks when they have some, else by the
        words of the file's pre-tokenizer (``Encoding.word_ids``; e.g. a Whitespace
        pre-tokenizer's words and punctuation), as the tokenizer itself splits the text."""
        if self.vocab.word_boundary is not None:
            return super().encode_flat_words(texts)
        encodings = self._tk.encode_batch(list(texts), add_special_tokens=False) if texts else []
        ids, lengths = flatten([encoding.ids for encoding in encodings])
        return ids, lengths, starts_of_word_ids([encoding.word_ids for encoding in encodings])

    def encode_one(self, text: str) -> List[int]:
        return self._tk.encode(text, add_special_tokens=False).ids

    def tokenize(self, text: str) -> List[str]:
        """The pieces of ``text`` in the tokenizer's own form (e.g. "Ġword", "▁word", "##s")."""
        return self._tk.encode(text, add_special_tokens=False).tokens
