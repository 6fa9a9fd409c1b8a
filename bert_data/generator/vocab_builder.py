"""Train a BERT WordPiece vocabulary (``vocab.txt``) from raw text.

Uses Hugging Face ``tokenizers``' ``WordPieceTrainer`` behind the same normalizer and
pre-tokenizer as ``bert_data.tokenization.WordPieceTokenizer`` (BERT's, from
``tokenization.bert_hf_tokenizer``), so the resulting vocabulary fits that tokenizer. The
special tokens come first, in the order [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4).

The command ``bert-data build-vocab`` (``bert_data.cli.build_vocab``) reads the documents
through ``generator.documents``, as ``create_tfrecords`` does, and calls this module.

For real pretraining, use the vocabulary of the model you start from (e.g. BERT-Base
uncased); a vocabulary trained here only suits models trained from scratch.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from ..tokenization import SPECIAL_TOKENS, bert_hf_tokenizer

__all__ = ["train_wordpiece_vocab", "write_vocab"]


def train_wordpiece_vocab(texts_iterator: Iterable[str], vocab_size: int = 30522,
                          do_lower_case: bool = True, min_frequency: int = 2,
                          limit_alphabet: int = 1000) -> list[str]:
    """Train a WordPiece vocabulary; returns the tokens in id order (specials first).

    ``texts_iterator`` yields texts of any length (lines, paragraphs or documents). It is
    read twice: pass a re-iterable (a list, or an object whose ``__iter__`` starts over);
    a one-shot iterator is first collected into a list. The result may be smaller than
    ``vocab_size`` when the corpus does not support more pieces, or larger when the
    special tokens, the alphabet and its ``##`` forms alone exceed it. Deterministic: the
    same texts give the same list.
    """
    from tokenizers.models import WordPiece
    from tokenizers.trainers import WordPieceTrainer

    if vocab_size < len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must be at least {len(SPECIAL_TOKENS)}, got {vocab_size}")
    tk = bert_hf_tokenizer(WordPiece(unk_token="[UNK]"), do_lower_case)
    normalizer = tk.normalizer

    # Hugging Face's trainer is not deterministic by itself: it numbers the "##x"
    # continuation pieces in hash-map order, and those numbers break ties between
    # equally frequent merges (and it drops alphabet characters beyond limit_alphabet
    # with ties broken in hash-map order). So: one pass to count the characters of the
    # normalized text, choose the alphabet with a fixed tie-break, and give the trainer
    # the alphabet and every "##x" piece up front, in sorted order.
    if iter(texts_iterator) is texts_iterator:  # one-shot iterator: we need two passes
        texts_iterator = list(texts_iterator)
    char_counts: Counter = Counter()
    for text in _only_str(texts_iterator):
        char_counts.update(normalizer.normalize_str(text))
    for ch in [c for c in char_counts if c.isspace()]:
        del char_counts[ch]
    alphabet = sorted(char_counts, key=lambda c: (-char_counts[c], c))[:max(0, int(limit_alphabet))]
    alphabet.sort()
    # ASCII punctuation is always a word of its own: no "##" form. (Every other character
    # gets one, so that the trainer never has to create one in hash-map order.)
    continuations = ["##" + c for c in alphabet if not (33 <= ord(c) <= 126 and not c.isalnum())]

    trainer = WordPieceTrainer(vocab_size=int(vocab_size), min_frequency=int(min_frequency),
                               special_tokens=list(SPECIAL_TOKENS) + continuations,
                               limit_alphabet=len(alphabet), initial_alphabet=alphabet,
                               continuing_subword_prefix="##", show_progress=False)
    tk.train_from_iterator(_only_str(texts_iterator), trainer=trainer)
    vocab = tk.get_vocab(with_added_tokens=True)
    trained = [tok for tok, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    # Order as BERT vocabularies are: specials, characters, "##" characters, longer pieces.
    head = list(SPECIAL_TOKENS) + [c for c in alphabet if c in vocab] + continuations
    head_set = set(head)
    return head + [t for t in trained if t not in head_set]


def _only_str(texts: Iterable[str]) -> Iterator[str]:
    for t in texts:
        if not isinstance(t, str):
            raise TypeError(f"texts must be str, got {type(t).__name__}")
        if t:
            yield t


def write_vocab(tokens: Sequence[str], path) -> None:
    """Write tokens one per line (UTF-8, ``\\n`` line ends), as BERT's ``vocab.txt``."""
    seen = set()
    for i, tok in enumerate(tokens):
        if not tok or tok != tok.strip() or "\n" in tok or "\r" in tok:
            raise ValueError(f"token {i} ({tok!r}) cannot be written to a vocab.txt "
                             f"(empty, or surrounding/embedded whitespace)")
        if tok in seen:
            raise ValueError(f"duplicate token {tok!r} at index {i}")
        seen.add(tok)
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(tok + "\n" for tok in tokens))
    os.replace(tmp, path)
