"""What the tokenizers built from a :class:`~bert_data.tokenizers.TokenizerSource` share."""

from __future__ import annotations

from typing import Iterable, List


class SourceTokenizer:
    """A tokenizer built from its source by ``_init()``: token/id lookups go through its
    vocabulary, and it pickles as its source (a worker process rebuilds it, never receives a
    native tokenizer object)."""

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> List[int]:
        return self.vocab.convert_tokens_to_ids(tokens)

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> List[str]:
        return self.vocab.convert_ids_to_tokens(ids)

    def __getstate__(self):
        return {"source": self.source}

    def __setstate__(self, state) -> None:
        self.source = state["source"]
        self._init()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.source.path!r}, size={self.vocab.size})"
