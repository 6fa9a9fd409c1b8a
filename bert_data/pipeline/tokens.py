"""Stage 3: documents -> sentences -> token ids, for a run of neighbouring documents (a slice).

The result is three arrays, what the work directory keeps of a tokenized slice: the token ids of
every kept sentence end to end, each sentence's length, and a table with a row per kept
document (where its tokens and sentences lie, and how much of its text replaced invalid
UTF-8).  Sentences are tokenized in bounded batches (``encode_flat``: arrays from the native
WordPiece; a tokenizer that builds Python lists, a few hundred bytes a token, must never be given
a huge document as one huge batch).

As in Google's reference, a sentence with no token (only characters the normaliser drops) is
dropped, and a document left with no sentence is skipped (and recorded as such).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, List, Optional, Tuple

import numpy as np

from .documents.types import NO_SENTENCE, Document, Skip

# Columns of a slice's document table: one row per document kept in the slice (a document read
# in parts has a row in each of its slices).
DOC_POSITION, TOKEN_START, TOKEN_END, SENTENCE_START, SENTENCE_END, DOC_REPLACED = range(6)
TABLE_COLUMNS = 6
# Sentences tokenized in one call, and at most about this many characters.
TOKENIZE_BATCH = 4096
TOKENIZE_CHARS = 1_000_000


# With stored word starts (``--store_word_starts``) each token id carries its word start in its
# top bit (ids stay below 2**31): the start travels with its id through the slices, the unit's
# pool, pairing and truncation with nothing else to keep in step, and is split off where
# instances are laid out (:func:`split_word_starts`).
WORD_START_BIT = 1 << 31


def id_dtype(vocab_size: int, word_starts: bool = False) -> np.dtype:
    """Two bytes a token while the vocabulary fits (BERT's 30,522 does), else four; four, unsigned,
    when the ids carry word starts."""
    if word_starts:
        return np.dtype(np.uint32)
    return np.dtype(np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.int32)


def split_word_starts(ids: np.ndarray):
    """``(ids, word_starts)`` of int32 ids gathered from a pool whose ids carry word starts
    (``WORD_START_BIT``, wrapped to the sign bit by the cast to int32): the plain ids (int32)
    and 1 where a token starts a word (int32; 0 for a continuation, a special token, padding)."""
    bits = np.ascontiguousarray(ids, dtype=np.int32).view(np.uint32)
    return (bits & np.uint32(WORD_START_BIT - 1)).view(np.int32), (bits >> np.uint32(31)).astype(np.int32)


@dataclass
class TokenizedDocuments:
    """Documents tokenized: ``tokens`` (the kept sentences' ids end to end), ``sentence_lengths``
    (int32), ``table`` (int64, a row per kept document, columns ``DOC_POSITION`` ...
    ``DOC_REPLACED``), the characters of text read, the documents skipped, and the corpus
    positions of kept documents read in parts."""

    tokens: np.ndarray
    sentence_lengths: np.ndarray
    table: np.ndarray
    n_chars: int = 0
    skips: List[Skip] = field(default_factory=list)
    kept_in_parts: List[int] = field(default_factory=list)


class DocumentTokenizer:
    """Tokenizes the documents of one slice: ``tokenize(documents)`` once.  ``last_read`` is the
    document read last (for a message naming it when something fails)."""

    def __init__(self, splitter, tokenizer, dtype: np.dtype, word_starts: bool = False):
        """``word_starts``: each id carries its word start (``WORD_START_BIT``), as the
        tokenizer says it (``encode_flat_words``)."""
        self.splitter, self.tokenizer, self.dtype = splitter, tokenizer, dtype
        self.word_starts = word_starts
        self._read: List[Document] = []  # as read (the splitter may read ahead of what it yields)
        self._pending: List[Tuple[Document, List[str]]] = []  # split, waiting to be tokenized together
        self._n_chars = 0
        self._skips: List[Skip] = []
        self._rows: List[List[int]] = []
        self._token_parts: List[np.ndarray] = []
        self._n_tokens = 0
        self._sentence_lengths: List[int] = []
        self._kept_in_parts: List[int] = []

    def tokenize(self, documents: Iterable[Document], skips: List[Skip]) -> TokenizedDocuments:
        """``skips``: where the reader records what it skips (extended with documents left with
        no sentence); it becomes the result's."""
        self._skips = skips
        n_sentences = n_chars = 0
        for index, sentences in enumerate(self.splitter.split(self._texts(documents))):
            self._pending.append((self._read[index], sentences))
            n_sentences += len(sentences)
            n_chars += sum(map(len, sentences))
            if n_sentences >= TOKENIZE_BATCH or n_chars >= TOKENIZE_CHARS:
                self._flush()
                n_sentences = n_chars = 0
        self._flush()
        tokens = np.concatenate(self._token_parts) if self._token_parts else np.zeros(0, dtype=self.dtype)
        return TokenizedDocuments(tokens, np.asarray(self._sentence_lengths, dtype=np.int32),
                                  np.asarray(self._rows, dtype=np.int64).reshape(-1, TABLE_COLUMNS),
                                  self._n_chars, skips, self._kept_in_parts)

    @property
    def last_read(self) -> Optional[Document]:
        return self._read[-1] if self._read else None

    def _texts(self, documents: Iterable[Document]) -> Iterator[str]:
        for document in documents:
            self._n_chars += len(document.text)
            self._read.append(document)
            yield document.text
            document.text = ""  # the splitter has it; hold no second copy

    def _encode(self, batch: List[str]) -> Tuple[np.ndarray, np.ndarray]:
        """Ids of a batch of sentences end to end, and each sentence's count, in bounded calls."""
        lengths = np.zeros(len(batch), dtype=np.int64)
        parts: List[np.ndarray] = []
        start = 0
        while start < len(batch):
            end, chars = start, 0
            while end < len(batch) and end - start < TOKENIZE_BATCH and chars < TOKENIZE_CHARS:
                chars += len(batch[end])
                end += 1
            if self.word_starts:
                ids, counts, starts = self.tokenizer.encode_flat_words(batch[start:end])
                ids = ids.astype(np.uint32) | (starts.astype(np.uint32) << np.uint32(31))
            else:
                ids, counts = self.tokenizer.encode_flat(batch[start:end])
            lengths[start:end] = counts
            parts.append(ids.astype(self.dtype, copy=False))
            del ids
            start = end
        return (np.concatenate(parts) if parts else np.zeros(0, dtype=self.dtype)), lengths

    def _flush(self) -> None:
        tokens, lengths = self._encode([sentence for _, sentences in self._pending for sentence in sentences])
        ends = np.cumsum(lengths)
        first = 0
        for document, sentences in self._pending:
            doc_lengths = lengths[first : first + len(sentences)]
            kept = doc_lengths[doc_lengths > 0]
            if not len(kept):
                self._skips.append(Skip(NO_SENTENCE, document.label, document.corpus_doc, document.in_parts))
            else:
                begin = int(ends[first - 1]) if first else 0
                part = tokens[begin : int(ends[first + len(sentences) - 1])]
                self._token_parts.append(part)
                self._rows.append([document.corpus_doc, self._n_tokens, self._n_tokens + len(part),
                                   len(self._sentence_lengths), len(self._sentence_lengths) + len(kept),
                                   document.n_replaced])
                self._n_tokens += len(part)
                self._sentence_lengths.extend(kept.tolist())
                if document.in_parts:
                    self._kept_in_parts.append(document.corpus_doc)
            first += len(sentences)
        self._pending.clear()
