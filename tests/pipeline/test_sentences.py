"""Tests for bert_data.pipeline.sentences (no spaCy model downloads: the built-in sentencizer only)."""

from __future__ import annotations

import pickle
import random
import sys
import subprocess

import pytest

from bert_data.pipeline.sentences import (
    LineSentenceSplitter,
    SentenceSplitterError,
    SpacySentenceSplitter,
    _iter_raw_passages,
    make_sentence_splitter,
)


@pytest.fixture(scope="module")
def splitter() -> SpacySentenceSplitter:
    return SpacySentenceSplitter()


class _RecordingTokenizer:
    """Wraps nlp.tokenizer to record the length of every text given to spaCy."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.lengths: list[int] = []

    def __call__(self, text):
        self.lengths.append(len(text))
        return self.tokenizer(text)


def _words(sentences: list[str]) -> list[str]:
    return " ".join(sentences).split()


# -- module hygiene ---------------------------------------------------------------------------------


def test_import_does_not_import_spacy_or_tensorflow():
    code = (
        "import sys, bert_data.pipeline.sentences as s\n"
        "s.LineSentenceSplitter().split_text('a\\nb')\n"
        "s.make_sentence_splitter(True, None)\n"
        "assert 'spacy' not in sys.modules, 'spacy imported'\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- LineSentenceSplitter ---------------------------------------------------------------------------


def test_line_splitter_basics():
    sp = LineSentenceSplitter()
    docs = ["First sentence.\nSecond one\n", "", "  \n\t\n", "  padded  \r\n\r\nafter blank\rlast"]
    assert list(sp.split(docs)) == [
        ["First sentence.", "Second one"],
        [],
        [],
        ["padded", "after blank", "last"],
    ]
    assert sp.split_text("no newline") == ["no newline"]


def test_line_splitter_split_is_split_text_of_each_document():
    """``split`` (one loop over the documents) gives each document's ``split_text``, on every
    line break ``str.splitlines`` knows and white space that ``str.strip`` removes."""
    rng = random.Random(11)
    pieces = ["word", "two words", " ", "\t", "\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e",
              "\x85", "\u2028", "\u2029", "\u00a0", "\u3000", "caf\u00e9", "\u4e2d\u6587", "\U0001f600", ""]
    docs = ["".join(rng.choice(pieces) for _ in range(rng.randrange(0, 30))) for _ in range(500)] + ["", "\n\n"]
    sp = LineSentenceSplitter()
    assert list(sp.split(docs)) == [sp.split_text(doc) for doc in docs]
    with pytest.raises(SentenceSplitterError):
        list(sp.split(["fine", b"bytes"]))


def test_line_splitter_is_lazy():
    consumed = []

    def gen():
        for i in range(1000):
            consumed.append(i)
            yield f"doc {i}"

    it = LineSentenceSplitter().split(gen())
    assert next(it) == ["doc 0"]
    assert len(consumed) == 1


def test_make_sentence_splitter():
    assert isinstance(make_sentence_splitter(True, None), LineSentenceSplitter)
    assert isinstance(make_sentence_splitter(True, "ignored_model"), LineSentenceSplitter)
    sp = make_sentence_splitter(False, None, max_passage_chars=500, batch_size=8)
    assert isinstance(sp, SpacySentenceSplitter)
    assert (sp.model, sp.max_passage_chars, sp.batch_size) == (None, 500, 8)


# -- SpacySentenceSplitter: semantics ---------------------------------------------------------------


def test_simple_sentence_boundaries(splitter):
    text = "This is the first sentence. This is the second! Is this the third? Yes."
    assert splitter.split_text(text) == [
        "This is the first sentence.",
        "This is the second!",
        "Is this the third?",
        "Yes.",
    ]


def test_newline_inside_sentence_becomes_space(splitter):
    assert splitter.split_text("The quick\nbrown fox.") == ["The quick brown fox."]
    # Whitespace around the line break collapses to one space; CRLF and CR are line breaks too.
    assert splitter.split_text("The quick  \n   brown\r\nfox\rjumps. Then\nit rests.") == [
        "The quick brown fox jumps.",
        "Then it rests.",
    ]


def test_words_are_never_glued_across_lines(splitter):
    text = "alpha beta\ngamma delta.\nepsilon\nzeta eta theta\n\niota kappa\nlambda."
    sents = splitter.split_text(text)
    assert _words(sents) == text.split()
    assert all("\n" not in s for s in sents)


# Alike in shape with test_simple_sentence_boundaries: each test is a text and its sentences.
def test_paragraph_break_splits_heading(splitter):
    text = "Introduction\n\nThe quick brown fox jumps. It lands.\n \t \nConclusion\r\n\r\nDone here."
    assert splitter.split_text(text) == [
        "Introduction",
        "The quick brown fox jumps.",
        "It lands.",
        "Conclusion",
        "Done here.",
    ]
    # Without the blank line, the heading is part of the next sentence (a line break is a space).
    assert splitter.split_text("Introduction\nThe quick brown fox jumps.") == [
        "Introduction The quick brown fox jumps."
    ]


def test_paragraph_break_is_a_boundary_even_without_the_component(splitter):
    # The post-split fallback alone also guarantees the boundary.
    with splitter.nlp.select_pipes(disable=["bert_data_paragraph_breaks"]):
        assert splitter.split_text("Title\n\nBody text here. More.") == [
            "Title",
            "Body text here.",
            "More.",
        ]


def test_empty_and_whitespace_docs_yield_empty_lists(splitter):
    docs = ["", "   ", "\n\n\t\n", "One. Two.", "\r\n", "Three."]
    assert list(splitter.split(docs)) == [[], [], [], ["One.", "Two."], [], ["Three."]]
    assert list(splitter.split([])) == []


def test_non_str_document_is_an_error(splitter):
    with pytest.raises(SentenceSplitterError, match="must be str"):
        list(splitter.split([b"bytes"]))


# -- long documents -----------------------------------------------------------------------------


def _paragraph_doc(rng: random.Random, n_paragraphs: int, tag: str) -> str:
    paragraphs = []
    for p in range(n_paragraphs):
        sents = [f"{tag} paragraph {p} sentence {s} says {rng.randint(0, 999)}." for s in range(3)]
        lines = " ".join(sents).replace(" says", "\nsays", 1)  # a line break inside a paragraph
        paragraphs.append(lines)
    return "\n\n".join(paragraphs)


def test_document_longer_than_passage_size(splitter):
    rng = random.Random(0)
    text = _paragraph_doc(rng, 200, "Doc")  # ~18 k chars, paragraphs < 150 chars
    small = SpacySentenceSplitter(max_passage_chars=400)
    recorder = _RecordingTokenizer(small.nlp.tokenizer)
    small.nlp.tokenizer = recorder
    got = small.split_text(text)
    # Cuts fall on paragraph breaks only, so the result equals the one-passage result.
    assert got == splitter.split_text(text)
    assert len(got) == 600
    assert len(recorder.lengths) > 40 and max(recorder.lengths) <= 400


def test_passages_stay_below_nlp_max_length():
    rng = random.Random(1)
    text = _paragraph_doc(rng, 100, "Long")
    sp = SpacySentenceSplitter(max_passage_chars=1_000_000)
    sp.nlp.max_length = 300
    with pytest.raises(ValueError, match="E088"):
        sp.nlp(text)  # proves the limit is real
    recorder = _RecordingTokenizer(sp.nlp.tokenizer)
    sp.nlp.tokenizer = recorder
    got = sp.split_text(text)
    assert len(got) == 300
    assert got[0].startswith("Long paragraph 0 sentence 0 says") and got[-1].startswith(
        "Long paragraph 99 sentence 2 says"
    )
    assert len(recorder.lengths) > 10 and max(recorder.lengths) <= 300


def test_long_document_without_newlines_or_punctuation():
    rng = random.Random(2)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 12))) for _ in range(8000)]
    text = " ".join(words)  # ~52 k chars, one line, no sentence punctuation
    sp = SpacySentenceSplitter(max_passage_chars=1000)
    recorder = _RecordingTokenizer(sp.nlp.tokenizer)
    sp.nlp.tokenizer = recorder
    sents = sp.split_text(text)
    assert max(recorder.lengths) <= 1000
    assert len(sents) == len(recorder.lengths) > 50  # one "sentence" per passage
    assert all(len(s) <= 1000 for s in sents)
    assert _words(sents) == words  # cut only at whitespace: no word broken or glued


def test_paragraph_longer_than_passage_is_cut_at_line_breaks():
    lines = [f"line {i} of a huge paragraph" for i in range(200)]
    text = "\n".join(lines)
    sp = SpacySentenceSplitter(max_passage_chars=300)
    sents = sp.split_text(text)
    # Each cut falls right after a line break, so every "line i" stays whole.
    assert _words(sents) == text.split()
    for s in sents:
        assert s.startswith("line ") and s.endswith("paragraph")


def test_hard_cut_when_there_is_no_whitespace():
    sp = SpacySentenceSplitter(max_passage_chars=1000)
    assert sp.split_text("x" * 2500) == ["x" * 1000, "x" * 1000, "x" * 500]


def test_raw_passages_cover_the_text_and_prefer_paragraph_breaks():
    rng = random.Random(3)
    text = _paragraph_doc(rng, 50, "P") + "\n" + "word " * 300 + "y" * 700
    passages = list(_iter_raw_passages(text, 250))
    assert "".join(passages) == text
    assert all(0 < len(p) <= 250 for p in passages)
    paragraph_part = len(_paragraph_doc(random.Random(3), 50, "P"))
    consumed = 0
    for p in passages:
        consumed += len(p)
        if consumed < paragraph_part - 250:
            assert p.endswith("\n\n")  # cut right after a paragraph break
    assert list(_iter_raw_passages("short", 250)) == ["short"]


def test_order_preserved_across_many_docs_and_passages():
    rng = random.Random(4)
    docs, expected = [], []
    for d in range(300):
        kind = d % 5
        if kind == 0:
            docs.append("")
            expected.append([])
        elif kind == 1:  # long: several passages
            n = rng.randint(5, 15)
            docs.append("\n\n".join(f"Doc {d} part {i} here." for i in range(n)))
            expected.append([f"Doc {d} part {i} here." for i in range(n)])
        else:  # short (< 60 chars): one passage
            n = rng.randint(1, 3)
            docs.append(" ".join(f"Doc {d} s{i}\nends." for i in range(n)))
            expected.append([f"Doc {d} s{i} ends." for i in range(n)])
    sp = SpacySentenceSplitter(max_passage_chars=60, batch_size=7)
    assert list(sp.split(iter(docs))) == expected


def test_split_streams_lazily():
    sp = SpacySentenceSplitter(batch_size=4)
    consumed = []

    def gen():
        for i in range(10_000):
            consumed.append(i)
            yield f"Document number {i}. It has two sentences."

    it = sp.split(gen())
    first = next(it)
    assert first == ["Document number 0.", "It has two sentences."]
    assert len(consumed) < 100


# -- loading models ---------------------------------------------------------------------------------


def test_unknown_model_is_a_clear_error():
    with pytest.raises(SentenceSplitterError) as excinfo:
        SpacySentenceSplitter("en_core_web_sm_not_a_real_model")
    message = str(excinfo.value)
    assert "'en_core_web_sm_not_a_real_model' is not installed" in message
    assert "python -m spacy download en_core_web_sm_not_a_real_model" in message
    assert "--spacy_model" in message
    assert "\n" not in message
    with pytest.raises(SentenceSplitterError, match="is not installed"):
        make_sentence_splitter(False, "xx_no_such_pipeline")


def test_bad_model_paths_are_clear_errors(tmp_path):
    with pytest.raises(SentenceSplitterError, match="does not exist"):
        SpacySentenceSplitter(str(tmp_path / "missing" / "model"))
    with pytest.raises(SentenceSplitterError, match="not a spaCy pipeline directory"):
        SpacySentenceSplitter(str(tmp_path))
    not_a_dir = tmp_path / "file.txt"
    not_a_dir.write_text("x")
    with pytest.raises(SentenceSplitterError, match="not a spaCy pipeline directory"):
        SpacySentenceSplitter(not_a_dir)


def test_loaded_pipeline_directory(tmp_path):
    import spacy

    # No sentence-boundary component: attribute_ruler is disabled, a sentencizer is added.
    nlp = spacy.blank("en")
    nlp.add_pipe("attribute_ruler")
    nlp.to_disk(tmp_path / "p1")
    sp = SpacySentenceSplitter(str(tmp_path / "p1"))
    assert "attribute_ruler" in sp.nlp.disabled
    assert "sentencizer" in sp.nlp.pipe_names
    assert sp.split_text("Heading\n\nOne here. Two\nthere.") == ["Heading", "One here.", "Two there."]

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer", config={"punct_chars": [";"]})
    nlp.to_disk(tmp_path / "p2")
    sp = SpacySentenceSplitter(tmp_path / "p2")  # PathLike accepted
    assert sp.split_text("a b; c d. e f") == ["a b;", "c d. e f"]


def test_invalid_parameters():
    with pytest.raises(SentenceSplitterError, match="max_passage_chars"):
        SpacySentenceSplitter(max_passage_chars=0)
    with pytest.raises(SentenceSplitterError, match="batch_size"):
        SpacySentenceSplitter(batch_size=0)
    with pytest.raises(SentenceSplitterError, match="spaCy model"):
        SpacySentenceSplitter("")


# -- pickling -------------------------------------------------------------------------------------


def test_pickle_round_trip():
    line = LineSentenceSplitter()
    assert pickle.loads(pickle.dumps(line)) == line

    sp = SpacySentenceSplitter(batch_size=16, max_passage_chars=2000)
    data = pickle.dumps(sp)
    assert len(data) < 1000  # constructor arguments only, not the spaCy pipeline
    clone = pickle.loads(data)
    assert isinstance(clone, SpacySentenceSplitter)
    assert (clone.model, clone.batch_size, clone.max_passage_chars) == (None, 16, 2000)
    assert clone.nlp is not sp.nlp
    docs = ["Title\n\nFirst one. Second\none.", "", "Another doc!"]
    assert list(clone.split(docs)) == list(sp.split(docs))


def test_text_without_punctuation_skips_spacy_with_the_same_result():
    """The shortcut for punctuation-free passages gives exactly what the sentencizer gives."""
    import random

    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "\n", "\n\n", "  ", "\t"]
    splitter = SpacySentenceSplitter(max_passage_chars=300)
    slow = SpacySentenceSplitter(max_passage_chars=300, force_spacy=True)
    slow._no_boundary_possible = None
    texts = ["".join(rng.choice(words) + " " for _ in range(rng.randint(0, 400))) for _ in range(60)]
    texts += ["One sentence. And another one", "no punctuation here\n\nsecond paragraph"]
    assert list(splitter.split(texts)) == list(slow.split(texts))
    assert splitter.split_text("no punctuation here\n\nsecond paragraph") == ["no punctuation here",
                                                                            "second paragraph"]


def test_builtin_sentencizer_does_not_load_pytorch():
    """thinc imports PyTorch when it is installed (250 MB a worker); the rule-based path hides it."""
    import subprocess
    import sys

    code = ("import sys\nfrom bert_data.pipeline.sentences import make_sentence_splitter\n"
            "splitter = make_sentence_splitter(False, None)\n"
            "assert splitter.split_text('One. Two.') == ['One.', 'Two.']\n"
            "print('torch' in sys.modules)\nimport torch\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
