"""Every tokenizer the generator takes, behind one interface, and the one factory that builds them.

Three kinds, named by the option that chooses them:

* ``--vocab_file vocab.txt``: BERT's WordPiece, exactly as Google's ``FullTokenizer``
  (:class:`bert_data.tokenizers.wordpiece.WordPieceTokenizer`);
* ``--tokenizer_file tokenizer.json``: any Hugging Face ``tokenizers`` tokenizer (WordPiece, BPE,
  Unigram...), run as the file says (:mod:`.huggingface`);
* ``--spm_model_file m.model`` (``--vocab_file`` optional): SentencePiece as ALBERT's
  ``FullTokenizer`` runs it (:mod:`.sentencepiece`; needs the ``sentencepiece`` package, imported
  only then).

A :class:`TokenizerSource` says which one, with which files and special tokens; it comes from a
configuration (``run/resolve.py``) or from a dataset's manifest
(:meth:`TokenizerSource.from_manifest`, for the loaders and tools), so that the same vocabulary
is rebuilt at load time.  :func:`load_vocabulary` gives its :class:`~bert_data.tokenizers.vocab.Vocab`
(ids, special tokens, word boundaries for whole-word masking, ordinary tokens for random
replacement); :func:`make_tokenizer` the tokenizer itself.  Every tokenizer has ``vocab``,
``encode_ids(texts)`` (batched, no special tokens added), ``encode_one(text)`` and
``tokenize(text)`` (pieces in the tokenizer's own form), ``encode_flat(texts)`` (the ids end to end
and each text's count, as arrays), and pickles cheaply.  WordPiece (a ``vocab.txt`` or a WordPiece
``tokenizer.json``) runs on the native ``nanotoken`` when it is installed, with the same ids
(:mod:`.native`).

This package must not import TensorFlow or spaCy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Tuple

from .. import storage
from .vocab import SPECIAL_TOKENS, VocabError

__all__ = ["WORDPIECE", "HUGGINGFACE", "SENTENCEPIECE", "SPECIAL_ROLES", "TokenizerSource", "load_vocabulary",
           "make_tokenizer", "detect_kind", "native_note"]

WORDPIECE, HUGGINGFACE, SENTENCEPIECE = "wordpiece", "huggingface", "sentencepiece"
#: The special tokens' roles, in ``SPECIAL_TOKENS``' order (options ``--pad_token`` ...).
SPECIAL_ROLES = ("pad", "unk", "cls", "sep", "mask")
_OPTION = {WORDPIECE: "--vocab_file", HUGGINGFACE: "--tokenizer_file", SENTENCEPIECE: "--spm_model_file"}


@dataclass(frozen=True)
class TokenizerSource:
    """Which tokenizer, from which files: hashable (the workers cache a tokenizer per source).

    ``special_tokens``: (pad, unk, cls, sep, mask) as the options give them; None leaves a role
    to the tokenizer (its own special tokens), else BERT's name.  ``vocab_file``: for
    SentencePiece only, a vocabulary whose line numbers are the ids (ALBERT's optional
    ``--vocab_file``).
    """

    kind: str
    path: str
    vocab_file: Optional[str] = None
    do_lower_case: bool = False
    special_tokens: Tuple[Optional[str], ...] = (None,) * 5

    @property
    def option(self) -> str:
        """The command-line option that names ``path``."""
        return _OPTION[self.kind]

    @classmethod
    def from_manifest(cls, manifest, manifest_path: Optional[str] = None,
                      override: Optional[str] = None) -> Tuple[Optional["TokenizerSource"], Optional[str]]:
        """The tokenizer a dataset was made with: ``(source, None)``; ``(None, why)`` when a file
        the manifest records cannot be found; ``(None, None)`` when it records none.
        ``override``: a vocabulary or tokenizer file to use instead (its kind is read from its
        content); the manifest still gives case and special tokens."""
        specials = manifest.special_token_options if manifest is not None else (None,) * 5
        lower = manifest.do_lower_case if manifest is not None else False
        if override is not None:
            kind = detect_kind(override)
            if kind == WORDPIECE and manifest is not None and manifest.spm_model_file:
                model = manifest.find_tokenizer_file(manifest_path)
                if model is not None:  # a SentencePiece dataset's --vocab_file: the ids' file
                    return cls(SENTENCEPIECE, model, override, lower, specials), None
            return cls(kind, override, None, lower and kind != HUGGINGFACE, specials), None
        if manifest is None:
            return None, None
        lower = lower and not manifest.tokenizer_file
        if manifest.spm_model_file or manifest.tokenizer_file:
            kind = SENTENCEPIECE if manifest.spm_model_file else HUGGINGFACE
            found = manifest.find_tokenizer_file(manifest_path)
            if found is None:
                recorded = manifest.spm_model_file or manifest.tokenizer_file
                return None, f"the manifest's {_OPTION[kind][2:]} {recorded} does not exist"
            vocab_file = None
            if kind == SENTENCEPIECE and manifest.vocab_file:  # the ids' file
                vocab_file = manifest.find_vocab_file(manifest_path)
                if vocab_file is None:
                    return None, f"the manifest's vocab_file {manifest.vocab_file} does not exist"
            return cls(kind, found, vocab_file, lower, specials), None
        if manifest.vocab_file:
            found = manifest.find_vocab_file(manifest_path)
            if found is None:
                return None, f"the manifest's vocab_file {manifest.vocab_file} does not exist"
            return cls(WORDPIECE, found, None, lower, specials), None
        return None, None

    def recorded_paths(self) -> Tuple[Optional[str], Optional[str]]:
        """``(vocab_path, tokenizer_path)``: the absolute paths a manifest records beside the
        options (which keep the paths as typed)."""
        if self.kind == WORDPIECE:
            return os.path.abspath(self.path), None
        return (os.path.abspath(self.vocab_file) if self.vocab_file else None), os.path.abspath(self.path)


def detect_kind(path: str) -> str:
    """What a vocabulary or tokenizer file is, from its first bytes: a JSON object is a Hugging
    Face ``tokenizer.json``, binary content (a protocol buffer) a SentencePiece model, anything
    else a ``vocab.txt``."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return WORDPIECE  # let the loader name the problem
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{"):
        return HUGGINGFACE
    try:
        head.decode("utf-8")
        binary = b"\x00" in head
    except UnicodeDecodeError as error:
        binary = error.start < len(head) - 4  # a character cut at the end of the sample is fine
    return SENTENCEPIECE if binary or path.endswith(".model") else WORDPIECE


def load_vocabulary(source: TokenizerSource):
    """The :class:`~bert_data.tokenizers.vocab.Vocab` of ``source`` (without building the tokenizer
    where that costs more).  Raises ``VocabError`` naming the file and the problem."""
    if source.kind == WORDPIECE:
        from .vocab import load_vocab, vocab_from_tokens

        vocab = load_vocab(source.path)
        specials = _with_defaults(source.special_tokens)
        if specials == SPECIAL_TOKENS:
            return vocab
        return vocab_from_tokens(vocab.tokens, vocab.path, vocab.sha256, special_tokens=specials)
    _check_readable(source)
    if source.kind == HUGGINGFACE:
        from .huggingface import load_hf_vocabulary

        return load_hf_vocabulary(source)
    from .sentencepiece import load_spm_vocabulary

    return load_spm_vocabulary(source)


def make_tokenizer(source: TokenizerSource, native: bool = True):
    """The tokenizer ``source`` names (see the module docstring for the interface).  ``native``:
    WordPiece through ``nanotoken`` when it is installed (the same ids; False: Hugging Face's
    ``tokenizers`` always, the reference the benchmark's floor and the tests compare with)."""
    if source.kind == WORDPIECE:
        from .wordpiece import WordPieceTokenizer

        return WordPieceTokenizer(load_vocabulary(source), source.do_lower_case, native=native)
    _check_readable(source)
    if source.kind == HUGGINGFACE:
        from .huggingface import HuggingFaceTokenizer

        return HuggingFaceTokenizer(source, native=native)
    from .sentencepiece import SentencePieceTokenizer

    return SentencePieceTokenizer(source)


def native_note(source: TokenizerSource) -> Optional[str]:
    """One line for a WordPiece run without the native tokenizer installed (the ids are the same,
    the tokenizing slower): how to get it.  None otherwise."""
    if source.kind != WORDPIECE:
        return None
    from .native import native_missing_note

    return native_missing_note()


def _with_defaults(specials) -> tuple:
    return tuple(given or default for given, default in zip(specials, SPECIAL_TOKENS))


def _check_readable(source: TokenizerSource) -> None:
    """A tokenizer.json or SentencePiece model that is not there (``load_vocab`` checks a vocab.txt)."""
    what = "tokenizer file" if source.kind == HUGGINGFACE else "SentencePiece model"
    if os.path.isdir(source.path):
        raise VocabError(f"{source.path}: is a directory, not a {what} ({source.option})")
    if os.path.exists(source.path) and not os.path.isfile(source.path):  # (a FIFO would block)
        raise VocabError(f"{source.path}: {storage.not_a_regular_file(source.path)}, not a {what} "
                         f"({source.option})")
    if not os.path.isfile(source.path):
        raise VocabError(f"{source.path}: {what} not found ({source.option})")
