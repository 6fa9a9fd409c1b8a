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


class DroppingTokenizer(WordTokenizer):
    """``WordTokenizer``, but a word "-" has no id (a sentence of them: no token, as text the
    normaliser drops)."""

    def _ids(self, texts):
        return super()._ids([" ".join(word for word in text.split() if word != "-") for text in texts])


def _read_with_skips(rng, n, skips):
    """A reader of whole documents (JSON Lines): between documents it records skipped lines in
    ``skips`` as it reads them; documents with no text, no line, or only words without ids."""
    for d in range(n):
        if rng.random() < 0.3:  # a skipped line before the document, recorded as the reader passes it
            skips.append(Skip("invalid JSON", f"file#{2 * d}", 100 + 2 * d, False))
        kind = rng.random()
        if kind < 0.15:
            text = "\n".join(["-"] * int(rng.integers(1, 4)))  # no token: left with no sentence
        elif kind < 0.2:
            text = " \n\t\n"  # no sentence at all
        else:
            text = "\n".join(rng.choice(["a bb", "ccc", "  d - ee ", "-", "", "f\rg", "h\u2028i"],
                                        int(rng.integers(1, 6))).tolist())
        yield Document(f"file#{2 * d + 1}", text, n_replaced=int(rng.integers(0, 2)), corpus_doc=101 + 2 * d)
    if rng.random() < 0.7:
        skips.append(Skip("empty", f"file#{2 * n}", 100 + 2 * n, False))  # a trailing line, read last


@pytest.mark.parametrize("word_starts", [False, True])
@pytest.mark.parametrize("batch,chars", [(4096, 1_000_000), (7, 1_000_000), (5, 40), (1, 1), (3, 2)])
@pytest.mark.parametrize("seed", range(3))
def test_documents_read_first_give_what_documents_read_as_they_go_give(monkeypatch, word_starts, batch, chars,
                                                                       seed):
    """``tokenize_read`` (JSON Lines: the slice read, then split and tokenized at once) against
    ``tokenize``: the same arrays, and the same skips in the same order (a document left with
    no sentence is recorded with its batch, among the reader's skips), across batches."""
    from bert_data.pipeline.sentences import LineSentenceSplitter

    monkeypatch.setattr(tokens_module, "TOKENIZE_BATCH", batch)
    monkeypatch.setattr(tokens_module, "TOKENIZE_CHARS", chars)
    dtype = np.dtype(np.uint32 if word_starts else np.uint16)
    results = []
    for method in ("tokenize", "tokenize_read"):
        skips = []
        stage = DocumentTokenizer(LineSentenceSplitter(), DroppingTokenizer(), dtype, word_starts)
        result = getattr(stage, method)(_read_with_skips(np.random.default_rng(seed), 80, skips), skips)
        assert result.skips is skips
        results.append((result, stage.last_read.label))
    (ours, our_last), (theirs, their_last) = results[1], results[0]
    for name in ("tokens", "sentence_lengths", "table"):
        assert getattr(ours, name).dtype == getattr(theirs, name).dtype, name
        np.testing.assert_array_equal(getattr(ours, name), getattr(theirs, name), err_msg=name)
    assert ours.skips == theirs.skips
    reasons = [skip.reason for skip in ours.skips]
    if batch < 80:  # batches end inside the slice: their skips sit among the reader's
        assert reasons.index(NO_SENTENCE) < len(reasons) - 1 - reasons[::-1].index("invalid JSON")
    assert (ours.n_chars, ours.kept_in_parts, our_last) == (theirs.n_chars, theirs.kept_in_parts, their_last)


def test_documents_read_first_must_be_whole():
    from bert_data.pipeline.sentences import LineSentenceSplitter

    stage = DocumentTokenizer(LineSentenceSplitter(), WordTokenizer(), np.dtype(np.uint16))
    with pytest.raises(ValueError, match="in parts"):
        stage.tokenize_read([Document("a", "x y", corpus_doc=0, in_parts=True)], [])
    assert DocumentTokenizer(LineSentenceSplitter(), WordTokenizer(), np.dtype(np.uint16)).tokenize_read(
        [], []).table.shape == (0, TABLE_COLUMNS)


def test_lines_split_a_batch_at_once_are_split_a_document_at_a_time():
    from bert_data.pipeline.sentences import LineSentenceSplitter

    splitter = LineSentenceSplitter()
    texts = ["a\nb", "", "  \n\n x \r\n y\u2028z", "one", "\n\n", "q\x0bw\x1cz\x85k\u2029", "\t", "last line "]
    sentences, counts = splitter.split_batch(texts)
    expected = list(splitter.split(texts))
    assert counts.dtype == np.int64 and counts.tolist() == [len(s) for s in expected]
    assert sentences == [s for document in expected for s in document]
    for texts in (["a\nb c", "d", " e \r\nf\u2028g "], [], ["\n"]):  # no blank line (the common case), none at all
        sentences, counts = splitter.split_batch(texts)
        expected = list(splitter.split(texts))
        assert counts.tolist() == [len(s) for s in expected] and sentences == [s for d in expected for s in d]

    class Text(str):
        pass

    assert splitter.split_batch(["a\nb", Text(" c ")])[0] == ["a", "b", "c"]  # (a str's subclass: the reference)
    with pytest.raises(Exception, match="documents must be str"):
        splitter.split_batch(["a", b"b"])
