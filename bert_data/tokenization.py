"""The old home of the WordPiece tokenizer and the vocabulary, kept importable for code written
against it.  They live in ``bert_data.tokenizers`` with the other tokenizers:
:mod:`bert_data.tokenizers.vocab` (``Vocab``, ``load_vocab``, ``SPECIAL_TOKENS``, ``VocabError``,
``unk_rate``...) and :mod:`bert_data.tokenizers.wordpiece` (``WordPieceTokenizer``, the case
checks, ``force_single_thread``...).  The names here are those objects themselves.
"""

from .tokenizers import vocab as _vocab, wordpiece as _wordpiece
from .tokenizers.vocab import *  # noqa: F401,F403
from .tokenizers.wordpiece import *  # noqa: F401,F403

__all__ = list(_vocab.__all__) + list(_wordpiece.__all__)
