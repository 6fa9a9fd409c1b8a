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

from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import chain
from operator import attrgetter
from typing import Callable, Iterable, Iterator, List, Optional, Tuple, Union

import numpy as np

from .documents.types import NO_SENTENCE, Document, DocumentColumns, Skip

# Columns of a slice's document table: one row per document kept in the slice (a document read
# in parts has a row in each of its slices).
DOC_POSITION, TOKEN_START, TOKEN_END, SENTENCE_START, SENTENCE_END, DOC_REPLACED = range(6)
TABLE_COLUMNS = 6
# Sentences tokenized in one call, and at most about this many characters.
TOKENIZE_BATCH = 4096
TOKENIZE_CHARS = 1_000_000
_CORPUS_DOC, _REPLACED, _IN_PARTS = attrgetter("corpus_doc"), attrgetter("n_replaced"), attrgetter("in_parts")


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
        self._rows: List[np.ndarray] = []  # a table a batch of documents
        self._token_parts: List[np.ndarray] = []
        self._n_tokens = 0
        self._sentence_lengths: List[np.ndarray] = []  # the kept sentences' lengths, a batch at a time
        self._n_sentences = 0
        self._kept_in_parts: List[int] = []

    def tokenize(self, documents: Iterable[Document], skips: List[Skip]) -> TokenizedDocuments:
        """``skips``: where the reader records what it skips (extended with documents left with
        no sentence); it becomes the result's."""
        self._skips = skips
        n_sentences = n_chars = 0
        pending, read = self._pending, self._read
        for index, sentences in enumerate(self.splitter.split(self._texts(documents))):
            pending.append((read[index], sentences))
            n_sentences += len(sentences)
            n_chars += sum(map(len, sentences))
            if n_sentences >= TOKENIZE_BATCH or n_chars >= TOKENIZE_CHARS:
                self._flush()
                n_sentences = n_chars = 0
        self._flush()
        return self._result()

    def _result(self) -> TokenizedDocuments:
        tokens = np.concatenate(self._token_parts) if self._token_parts else np.zeros(0, dtype=self.dtype)
        sentence_lengths = np.concatenate(self._sentence_lengths) if self._sentence_lengths else np.zeros(0, np.int32)
        table = np.concatenate(self._rows) if self._rows else np.zeros((0, TABLE_COLUMNS), dtype=np.int64)
        return TokenizedDocuments(tokens, sentence_lengths, table, self._n_chars, self._skips, self._kept_in_parts)

    def tokenize_read(self, documents: Iterable[Union[Document, DocumentColumns]],
                      skips: List[Skip]) -> TokenizedDocuments:
        """``tokenize`` of documents read whole first, none of them read in parts (JSON Lines),
        split by a splitter that splits a batch at once (``split_batch``): the same arrays, and
        the same skips in the same order, without Python a document.  ``documents``: whole
        ``Document``s, or blocks of them as ``DocumentColumns`` (no object a document: their
        texts, positions and labels as columns).  ``tokenize`` records a document left with no
        sentence when it tokenizes the batch holding it: after the reader's skips of the lines
        before that batch's last document, before those of the lines after it (the reader is
        read as it goes); the batches are found here as it finds them (by the sentences and
        characters split), and those skips placed so."""
        self._skips = skips
        read = self._read  # (as read: a failure names the document read last)
        texts: List[str] = []
        firsts: List[int] = []  # where each item read begins among the texts
        for item in documents:
            read.append(item)
            firsts.append(len(texts))
            if type(item) is DocumentColumns:
                texts += item.texts
            elif item.in_parts:
                raise ValueError("tokenize_read takes whole documents; one read in parts goes through tokenize")
            else:
                texts.append(item.text)
        n = len(texts)
        positions, replaced = np.empty(n, np.int64), np.zeros(n, np.int64)
        for item, first in zip(read, firsts):  # (an item a block of lines, or a document read one by one)
            if type(item) is DocumentColumns:
                positions[first:first + len(item.texts)] = np.arange(item.corpus_doc, item.corpus_doc + len(item.texts))
            else:
                positions[first], replaced[first] = item.corpus_doc, item.n_replaced
        n_reader_skips = len(skips)
        self._n_chars = sum(map(len, texts))
        sentences, counts = self.splitter.split_batch(texts)
        del texts
        sentences_before = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=sentences_before[1:])
        chars_before = np.zeros(len(sentences) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, sentences), np.int64, len(sentences)), out=chars_before[1:])
        sentence_chars = chars_before[1:]
        chars_before = chars_before[sentences_before]  # per document
        # ``tokenize``'s batches: each ends at the first document bringing its sentences to
        # TOKENIZE_BATCH or its characters to TOKENIZE_CHARS (the rest: when reading ends).
        ends, start = [], 0
        while start < n:
            end = min(int(np.searchsorted(sentences_before, sentences_before[start] + TOKENIZE_BATCH, "left")),
                      int(np.searchsorted(chars_before, chars_before[start] + TOKENIZE_CHARS, "left")))
            if end > n:
                break
            ends.append(end)
            start = end
        tokens, lengths = self._encode(sentences, sentence_chars)
        del sentences, sentence_chars

        def document_at(index: int) -> Document:  # (rare: a document left with no sentence)
            k = bisect_right(firsts, index) - 1
            return read[k].document(index - firsts[k]) if type(read[k]) is DocumentColumns else read[k]

        left_empty = self._keep(positions, replaced, None, document_at, tokens, lengths, counts)
        if len(left_empty):  # their skips, moved to where their batch recorded them
            reader_skips, empty_skips = skips[:n_reader_skips], skips[n_reader_skips:]
            reader_positions = np.fromiter(map(_CORPUS_DOC, reader_skips), np.int64, len(reader_skips))
            batches = np.searchsorted(np.asarray(ends, np.int64), left_empty, "right")
            merged, taken = [], 0
            for skip, batch in zip(empty_skips, batches.tolist()):
                before = len(reader_skips) if batch == len(ends) else \
                    int(np.searchsorted(reader_positions, positions[ends[batch] - 1], "left"))
                merged += reader_skips[taken:before]
                merged.append(skip)
                taken = max(taken, before)
            skips[:] = merged + reader_skips[taken:]
        return self._result()

    @property
    def last_read(self) -> Optional[Document]:
        if not self._read:
            return None
        last = self._read[-1]
        return last.document(len(last.texts) - 1) if type(last) is DocumentColumns else last

    def _texts(self, documents: Iterable[Document]) -> Iterator[str]:
        read = self._read.append
        for document in documents:
            text = document.text
            self._n_chars += len(text)
            read(document)
            document.text = ""  # the splitter has it; hold no second copy
            yield text

    def _encode(self, batch: List[str], chars: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
        """Ids of a batch of sentences end to end, and each sentence's count, in bounded calls: at
        most TOKENIZE_BATCH sentences, ending at the sentence that brings a call's characters to
        TOKENIZE_CHARS (the bounds found on the sentences' summed lengths, not sentence by
        sentence; ``chars``: those sums, if the caller has them)."""
        lengths = np.zeros(len(batch), dtype=np.int64)
        parts: List[np.ndarray] = []
        if chars is None:
            chars = np.cumsum(np.fromiter(map(len, batch), np.int64, len(batch)))
        start = 0
        while start < len(batch):
            before = int(chars[start - 1]) if start else 0
            filled = int(np.searchsorted(chars, before + TOKENIZE_CHARS, side="left")) + 1
            end = min(len(batch), start + TOKENIZE_BATCH, filled)
            if self.word_starts:
                ids, counts, starts = self.tokenizer.encode_flat_words(batch[start:end] if start or end < len(batch)
                                                                       else batch)
                ids = ids.astype(np.uint32) | (starts.astype(np.uint32) << np.uint32(31))
            else:
                ids, counts = self.tokenizer.encode_flat(batch[start:end] if start or end < len(batch) else batch)
            lengths[start:end] = counts
            parts.append(ids.astype(self.dtype, copy=False))
            del ids
            start = end
        return (np.concatenate(parts) if len(parts) != 1 else parts[0]) if parts else np.zeros(0, dtype=self.dtype), \
            lengths

    def _flush(self) -> None:
        """Tokenize the pending documents' sentences together, and keep them as arrays a batch:
        the tokens whole (a document left with no token has none in them), the nonempty
        sentences' lengths, a table row a kept document (counted on the sentences' summed
        lengths and counts, not document by document)."""
        pending = self._pending
        if not pending:
            return
        documents, split = zip(*pending)
        tokens, lengths = self._encode(list(chain.from_iterable(split)))
        n = len(documents)
        # Each document's fields once, as arrays (a slice of short documents has thousands).
        self._keep(np.fromiter(map(_CORPUS_DOC, documents), np.int64, n),
                   np.fromiter(map(_REPLACED, documents), np.int64, n),
                   np.fromiter(map(_IN_PARTS, documents), bool, n), documents.__getitem__,
                   tokens, lengths, np.fromiter(map(len, split), np.int64, n))
        pending.clear()

    def _keep(self, positions: np.ndarray, replaced: np.ndarray, in_parts: Optional[np.ndarray],
              document_at: Callable[[int], Document], tokens: np.ndarray, lengths: np.ndarray,
              counts: np.ndarray) -> np.ndarray:
        """Tokenized documents (their corpus positions, bytes replaced, whether each is read in
        parts (None: none is), ``document_at(d)`` the ``d``-th; ``counts``: each one's sentences,
        ``lengths`` each sentence's tokens, ``tokens`` theirs end to end) kept as arrays, those
        left with no sentence recorded as skipped; returns where those are among them."""
        bounds = np.zeros(len(positions) + 1, dtype=np.int64)  # where each document's sentences begin
        np.cumsum(counts, out=bounds[1:])
        kept_sentence = lengths > 0
        sentences_before = np.concatenate([[0], np.cumsum(kept_sentence)])[bounds]  # kept sentences before each
        tokens_before = np.concatenate([[0], np.cumsum(lengths)])[bounds]
        kept = np.diff(sentences_before) > 0
        rows = np.empty((int(kept.sum()), TABLE_COLUMNS), dtype=np.int64)
        rows[:, DOC_POSITION] = positions[kept]
        rows[:, TOKEN_START] = self._n_tokens + tokens_before[:-1][kept]
        rows[:, TOKEN_END] = self._n_tokens + tokens_before[1:][kept]
        rows[:, SENTENCE_START] = self._n_sentences + sentences_before[:-1][kept]
        rows[:, SENTENCE_END] = self._n_sentences + sentences_before[1:][kept]
        rows[:, DOC_REPLACED] = replaced[kept]
        for d in np.flatnonzero(~kept if in_parts is None else ~kept | in_parts).tolist():  # (in corpus order)
            document = document_at(d)
            if not kept[d]:
                self._skips.append(Skip(NO_SENTENCE, document.label, document.corpus_doc, document.in_parts))
            else:
                self._kept_in_parts.append(document.corpus_doc)
        self._rows.append(rows)
        self._token_parts.append(tokens)
        self._sentence_lengths.append(lengths[kept_sentence].astype(np.int32))
        self._n_tokens += len(tokens)
        self._n_sentences += int(sentences_before[-1])
        return np.flatnonzero(~kept)
