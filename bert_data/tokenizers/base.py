"""What the tokenizers built from a :class:`~bert_data.tokenizers.TokenizerSource` share."""

from __future__ import annotations

from itertools import chain
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np


def flatten(ids: List[List[int]]) -> Tuple[np.ndarray, np.ndarray]:
    """``(ids, lengths)`` of per-text id lists: the ids end to end and each text's count."""
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    return np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum())), lengths


def with_word_starts(flat: Tuple[np.ndarray, np.ndarray], vocab) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``encode_flat``'s ``(ids, lengths)`` and each id's word start by the vocabulary's marks
    (every text's first token starts a word, whatever its mark)."""
    ids, lengths = flat
    starts = (~np.asarray(vocab.is_continuation)[ids]).astype(np.uint8)
    firsts = (np.cumsum(lengths) - lengths)[lengths > 0]
    starts[firsts] = 1
    return ids, lengths, starts


def starts_of_word_ids(word_ids: Sequence[Sequence[Optional[int]]]) -> np.ndarray:
    """Word starts (uint8, the texts end to end) from each text's ``word_ids`` (the word of each
    token, as Hugging Face encodings give them): a token starts a word when its word differs
    from the token's before it, or it is its text's first."""
    parts = []
    for words in word_ids:
        words = np.asarray([-1 if word is None else word for word in words], dtype=np.int64)
        starts = np.ones(len(words), dtype=np.uint8)
        starts[1:] = words[1:] != words[:-1]
        parts.append(starts)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint8)


class SourceTokenizer:
    """A tokenizer built from its source by ``_init()``: token/id lookups go through its
    vocabulary, and it pickles as its source (a worker process rebuilds it, never receives a
    native tokenizer object)."""

    def encode_flat(self, texts: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
        """``(ids, lengths)``: every text's ids end to end and each text's count."""
        return flatten(self.encode_ids(texts))

    def encode_flat_words(self, texts: Sequence[str]) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ids, lengths, word_starts)``: :meth:`encode_flat` and, for each id, 1 where it starts
        a word (uint8).  Here from the vocabulary's marks (``Vocab.is_continuation``); a
        tokenizer whose pieces carry none says it from its own pre-tokenizer's words."""
        return with_word_starts(self.encode_flat(texts), self.vocab)

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> List[int]:
        return self.vocab.convert_tokens_to_ids(tokens)

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> List[str]:
        return self.vocab.convert_ids_to_tokens(ids)

    def __getstate__(self):
        return {"source": self.source, "native": getattr(self, "native", True)}

    def __setstate__(self, state) -> None:
        self.source = state["source"]
        self.native = state.get("native", True)
        self._init()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.source.path!r}, size={self.vocab.size})"
