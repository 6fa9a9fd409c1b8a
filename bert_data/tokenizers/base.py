"""What the tokenizers built from a :class:`~bert_data.tokenizers.TokenizerSource` share."""

from __future__ import annotations

from itertools import chain
from typing import Iterable, List, Sequence, Tuple

import numpy as np


def flatten(ids: List[List[int]]) -> Tuple[np.ndarray, np.ndarray]:
    """``(ids, lengths)`` of per-text id lists: the ids end to end and each text's count."""
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    return np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum())), lengths


class SourceTokenizer:
    """A tokenizer built from its source by ``_init()``: token/id lookups go through its
    vocabulary, and it pickles as its source (a worker process rebuilds it, never receives a
    native tokenizer object)."""

    def encode_flat(self, texts: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
        """``(ids, lengths)``: every text's ids end to end and each text's count."""
        return flatten(self.encode_ids(texts))

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
