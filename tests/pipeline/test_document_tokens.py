"""``DocumentTokenizer`` (``pipeline/tokens.py``): the slice's arrays from batches of documents,
counted on whole-batch arrays, against a document-by-document oracle written here: the same
tokens, sentence lengths, table rows, skips and documents kept in parts, across flushes and
tokenizer calls bounded by sentences and characters."""

import numpy as np
import pytest

from bert_data.pipeline import tokens as tokens_module
from bert_data.pipeline.documents.types import NO_SENTENCE, Document, Skip
from bert_data.pipeline.tokens import TABLE_COLUMNS, DocumentTokenizer, WORD_START_BIT


class LineSplitter:
    """A document's lines are its sentences (a blank line is a sentence with no token)."""

    def split(self, texts):
        for text in texts:
            yield text.split("\n")


class WordTokenizer:
    """An id a word (its length times 7, plus 1000), a word start at each even id; records each
    call's batch size."""

    def __init__(self):
        self.calls = []

    def _ids(self, texts):
        self.calls.append(len(texts))
        per_sentence = [[1000 + 7 * len(word) for word in text.split()] for text in texts]
        counts = np.array([len(ids) for ids in per_sentence], dtype=np.int64)
        flat = np.array([i for ids in per_sentence for i in ids], dtype=np.int64)
        return flat, counts

    def encode_flat(self, texts):
        return self._ids(texts)

    def encode_flat_words(self, texts):
        flat, counts = self._ids(texts)
        return flat, counts, (flat % 2 == 0).astype(np.uint8)


def _documents(rng, n):
    documents = []
    for d in range(n):
        lines = []
        for _ in range(int(rng.integers(0, 6))):
            words = int(rng.integers(0, 5)) if rng.random() < 0.8 else 0
            lines.append(" ".join("w" * int(rng.integers(1, 9)) for _ in range(words)))
        documents.append(Document(f"doc{d}", "\n".join(lines) if lines else "", n_replaced=int(rng.integers(0, 3)),
                                  corpus_doc=100 + 3 * d, in_parts=bool(rng.random() < 0.2)))
    return documents


def _oracle(documents, word_starts):
    """Document by document, as the stage is specified."""
    tokenizer, tokens, sentence_lengths, rows, skips, in_parts = WordTokenizer(), [], [], [], [], []
    for document in documents:
        if word_starts:
            ids, counts, starts = tokenizer.encode_flat_words(document.text.split("\n"))
            ids = ids.astype(np.uint32) | (starts.astype(np.uint32) << np.uint32(31))
        else:
            ids, counts = tokenizer.encode_flat(document.text.split("\n"))
        kept = [int(c) for c in counts if c > 0]
        if not kept:
            skips.append(Skip(NO_SENTENCE, document.label, document.corpus_doc, document.in_parts))
            continue
        rows.append([document.corpus_doc, len(tokens), len(tokens) + len(ids), len(sentence_lengths),
                     len(sentence_lengths) + len(kept), document.n_replaced])
        tokens.extend(ids.tolist())
        sentence_lengths.extend(kept)
        if document.in_parts:
            in_parts.append(document.corpus_doc)
    return tokens, sentence_lengths, rows, skips, in_parts


@pytest.mark.parametrize("word_starts", [False, True])
@pytest.mark.parametrize("batch,chars", [(4096, 1_000_000), (7, 1_000_000), (5, 40), (1, 1)])
def test_batched_tables_are_the_document_by_document_ones(monkeypatch, word_starts, batch, chars):
    monkeypatch.setattr(tokens_module, "TOKENIZE_BATCH", batch)
    monkeypatch.setattr(tokens_module, "TOKENIZE_CHARS", chars)
    documents = _documents(np.random.default_rng(batch + chars), 60)
    expected = _oracle([Document(**vars(d)) for d in documents], word_starts)
    tokenizer = WordTokenizer()
    dtype = np.dtype(np.uint32 if word_starts else np.uint16)
    stage = DocumentTokenizer(LineSplitter(), tokenizer, dtype, word_starts)
    skips = []
    result = stage.tokenize(documents, skips)
    assert result.tokens.dtype == dtype and result.tokens.tolist() == expected[0]
    assert result.sentence_lengths.dtype == np.int32 and result.sentence_lengths.tolist() == expected[1]
    assert result.table.dtype == np.int64 and result.table.shape[1] == TABLE_COLUMNS
    assert result.table.tolist() == expected[2]
    assert result.skips is skips and skips == expected[3] and len(skips) > 0
    assert result.kept_in_parts == expected[4]
    assert max(tokenizer.calls) <= batch  # the bounds held
    if word_starts:
        assert (result.tokens & WORD_START_BIT).any() and not (result.tokens & WORD_START_BIT).all()


def test_a_call_ends_at_the_sentence_that_reaches_the_character_bound(monkeypatch):
    monkeypatch.setattr(tokens_module, "TOKENIZE_CHARS", 10)
    tokenizer = WordTokenizer()
    stage = DocumentTokenizer(LineSplitter(), tokenizer, np.dtype(np.uint16))
    ids, lengths = stage._encode(["abcd", "efgh", "ij", "k", "lmnopqrstuv", "w"])  # 4, 8, 10 | 1, 12 | 1
    assert tokenizer.calls == [3, 2, 1] and lengths.tolist() == [1] * 6 and len(ids) == 6
    assert stage._encode([]) [0].size == 0 and tokenizer.calls == [3, 2, 1]


def test_no_documents():
    result = DocumentTokenizer(LineSplitter(), WordTokenizer(), np.dtype(np.uint16)).tokenize([], [])
    assert result.tokens.size == 0 and result.sentence_lengths.size == 0 and result.table.shape == (0, TABLE_COLUMNS)
