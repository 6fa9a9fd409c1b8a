"""Document text -> sentences.

Two splitters share one interface, ``split(texts) -> Iterator[list[str]]``: one list of sentence
strings per input document, in input order, streamed (documents are consumed lazily).

``LineSentenceSplitter`` (``--single_sentence_per_line``)
    Every non-empty line (after ``strip()``) is a sentence.  Lines are what ``str.splitlines``
    calls lines.

``SpacySentenceSplitter``
    spaCy sentence segmentation.  Without a model it uses an embedded rule-based pipeline,
    ``spacy.blank("en")`` + ``sentencizer`` (punctuation-based, nothing to download); with a model
    it loads an installed pipeline package or a pipeline directory and disables the components
    that take no part in sentence boundaries (ner, lemmatizer, tagger, attribute_ruler, ...).
    spaCy is imported only when a model is given, or the pipeline itself is needed: the
    built-in sentencizer's rules are read from a cache derived from the pipeline once
    (``spacy_rules_cache.py``), and spaCy is imported only to build that cache or for text the
    rules cannot answer.

Line breaks (unlike the Cerebras tool, which deletes ``"\\n"`` and so glues the last word of a
line to the first word of the next):

* a *blank line* (empty or whitespace-only) separates paragraphs, and a paragraph break is always
  a sentence boundary: a heading followed by a blank line stays its own sentence;
* inside a paragraph a line break is just whitespace.

How: before spaCy sees a passage of text, each line is stripped, the lines of a paragraph are
joined with one space and the paragraphs with ``"\\n\\n"``.  So every sentence comes out in
single-line form (``"The quick\\nbrown fox."`` -> ``"The quick brown fox."``), the text spaCy
tokenizes is never longer than the original (and has fewer whitespace tokens), and the only
newlines left are paragraph separators.  A small component placed first in the pipeline marks the
token after each separator as a sentence start -- the sentencizer, senter and parser all keep
preset boundaries, so a parser works under the constraint instead of having its output patched --
and, as a guarantee, a sentence text is also split at any separator left inside it.  Sentence
texts are sliced from the passage by character offsets (``.strip()``-ed, empty ones dropped), which
is the same text as ``Span.text.strip()`` but avoids building a Python object per token.

The built-in sentencizer's sentences are computed without a spaCy ``Doc``: its boundaries depend
only on spaCy's tokens of each whitespace-delimited word that holds sentence punctuation, which
``rule_sentences.py`` gets from the pipeline tokenizer's own rules (``word_tokens.py``, once a
word) and runs the sentencizer's state machine over; a paragraph where a word's tokens could
depend on its neighbours is tokenized whole.  The sentences are the pipeline's (``force_spacy=True``
runs the pipeline itself: the oracle of the tests).

Long documents: a document is fed to spaCy in *passages* of at most ``max_passage_chars`` characters
(default 100,000, and never more than ``nlp.max_length``).  A passage ends after the last paragraph
break that fits; failing that (one huge paragraph) after the last line break; failing that after
the last whitespace; failing that (100,000 characters without whitespace) it is cut hard.  Passages
of all documents stream through one ``nlp.pipe``, and a document's sentences are those of its
passages, in order.  At most about ``batch_size`` passages' spaCy ``Doc`` objects exist at a time, so
memory is bounded by ``batch_size * max_passage_chars`` (plus the text itself) whatever the document
length.  A passage cut is a sentence boundary: a sentence spanning a cut (only possible inside a
paragraph longer than ``max_passage_chars``) is split there; words are never split unless a whole
passage has no whitespace.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, compress
from typing import Any, List, Optional, Tuple, Union

__all__ = [
    "SentenceSplitterError",
    "LineSentenceSplitter",
    "SpacySentenceSplitter",
    "make_sentence_splitter",
    "DEFAULT_MAX_PASSAGE_CHARS",
    "DEFAULT_BATCH_SIZE",
]

DEFAULT_MAX_PASSAGE_CHARS = 100_000
# Passages can be DEFAULT_MAX_PASSAGE_CHARS long, so this bounds the spaCy objects alive at once
# (~64 * 100k chars); the rule-based sentencizer gains nothing from bigger batches.
DEFAULT_BATCH_SIZE = 64

# The separator put between paragraphs in the text given to spaCy.  Lines are stripped and joined
# with spaces, so "\n" occurs in that text only inside separators.
_PARAGRAPH_SEP = "\n\n"

# What str.splitlines() treats as line breaks, for the searches that choose where to cut.
_LB = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_NL = rf"(?:\r\n|[{_LB}])"
_HWS = rf"[^\S{_LB}]"  # whitespace that is not a line break
# ``match(text, lo, hi)`` with a greedy ``.*`` prefix finds the *last* occurrence in [lo, hi);
# each pattern is linear in the window (no two unbounded repeats compete for the same chars).
_LAST_PARAGRAPH_BREAK = re.compile(rf"(?s:.*){_NL}(?:{_HWS}*{_NL})+")
_LAST_LINE_BREAK = re.compile(rf"(?s:.*){_NL}")
_LAST_WHITESPACE = re.compile(r"(?s:.*)\s")
_ANY_LINE_BREAK = re.compile(rf"[{_LB}]")

_COMPONENT_NAME = "bert_data_paragraph_breaks"

# Components (by factory) that set no sentence boundaries and that nothing sentence-related
# depends on: disabled on loaded pipelines, for speed.
_UNNEEDED_FACTORIES = frozenset(
    {
        "ner",
        "beam_ner",
        "entity_ruler",
        "entity_linker",
        "span_ruler",
        "spancat",
        "spancat_singlelabel",
        "span_finder",
        "textcat",
        "textcat_multilabel",
        "tagger",
        "morphologizer",
        "attribute_ruler",
        "lemmatizer",
        "trainable_lemmatizer",
        "merge_entities",
        "merge_noun_chunks",
        "merge_subtokens",
        "doc_cleaner",
    }
)
_BOUNDARY_FACTORIES = frozenset({"parser", "beam_parser", "senter", "sentencizer"})


class SentenceSplitterError(ValueError):
    """A sentence splitter cannot be built or used (one-line message)."""


def _check_positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SentenceSplitterError(f"{name} must be a positive integer, got {value!r}")
    return value


def _check_text(text: Any) -> str:
    if not isinstance(text, str):
        raise SentenceSplitterError(f"documents must be str, got {type(text).__name__}")
    return text


class LineSentenceSplitter:
    """One sentence per line: each non-empty line (after ``strip()``) is a sentence."""

    def split(self, texts: Iterable[str]) -> Iterator[list[str]]:
        """Yield the sentences of each document of ``texts``, in order (``split_text`` of each,
        without a call a document: corpora hold millions of short ones)."""
        strip = str.strip
        for text in texts:
            if type(text) is not str:
                _check_text(text)
            yield [s for s in map(strip, text.splitlines()) if s]

    def split_text(self, text: str) -> list[str]:
        """The sentences of one document."""
        return [s for s in (line.strip() for line in _check_text(text).splitlines()) if s]

    def split_batch(self, texts: Sequence[str]) -> Tuple[List[str], "np.ndarray"]:
        """The sentences ``split`` gives each document of ``texts``, all end to end, and how
        many each document has (int64): every line of every document split, stripped and
        kept or not a batch at a time, with no Python call a document (a slice of short
        documents has thousands)."""
        import numpy as np

        if texts and set(map(type, texts)) != {str}:
            split = list(self.split(texts))  # (the reference, and its message for what is not text)
            return list(chain.from_iterable(split)), np.fromiter(map(len, split), np.int64, len(split))
        per_document = list(map(str.splitlines, texts))
        stripped = list(map(str.strip, chain.from_iterable(per_document)))
        n_lines = np.fromiter(map(len, per_document), np.int64, len(per_document))
        if all(stripped):  # no blank line (the common case): every line a sentence
            return stripped, n_lines
        kept = np.fromiter(map(bool, stripped), bool, len(stripped))
        kept_before = np.zeros(len(stripped) + 1, np.int64)  # nonempty lines before each line
        np.cumsum(kept, out=kept_before[1:])
        line_ends = np.zeros(len(per_document) + 1, np.int64)
        np.cumsum(n_lines, out=line_ends[1:])
        return list(compress(stripped, kept)), np.diff(kept_before[line_ends])

    def __reduce__(self):
        return (type(self), ())

    def __repr__(self) -> str:
        return "LineSentenceSplitter()"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))


# -- text preparation -------------------------------------------------------------------------------


def _normalise(passage: str) -> str:
    """Strip lines, join a paragraph's lines with " " and paragraphs with ``_PARAGRAPH_SEP``.

    The result is never longer than ``passage``.
    """
    if _ANY_LINE_BREAK.search(passage) is None:
        return passage.strip()
    paragraphs = []
    lines: list[str] = []
    for line in passage.splitlines():
        line = line.strip()
        if line:
            lines.append(line)
        elif lines:
            paragraphs.append(" ".join(lines))
            lines = []
    if lines:
        paragraphs.append(" ".join(lines))
    return _PARAGRAPH_SEP.join(paragraphs)


def _iter_raw_passages(text: str, limit: int) -> Iterator[str]:
    """Cut ``text`` into consecutive passages of at most ``limit`` characters (module docstring)."""
    n = len(text)
    lo = 0
    while n - lo > limit:
        hi = lo + limit
        cut = -1
        if _ANY_LINE_BREAK.search(text, lo, hi) is not None:
            m = _LAST_PARAGRAPH_BREAK.match(text, lo, hi) or _LAST_LINE_BREAK.match(text, lo, hi)
            if m is not None:
                cut = m.end()
        if cut <= lo:
            m = _LAST_WHITESPACE.match(text, lo, hi)
            cut = m.end() if m is not None else hi
        yield text[lo:cut]
        lo = cut
    yield text[lo:] if lo else text


# -- spaCy pipeline ---------------------------------------------------------------------------------


def _paragraph_breaks_component(doc):
    """Mark the token after each paragraph separator token as a sentence start.

    Vectorised: ``Doc.text`` or a per-token Python loop would cost about as much as tokenizing.
    """
    import numpy as np
    from spacy.attrs import ORTH, SENT_START

    if len(doc) > 2:
        arr = doc.to_array([ORTH, SENT_START])
        after_sep = np.flatnonzero(arr[:-1, 0] == doc.vocab.strings[_PARAGRAPH_SEP]) + 1
        if after_sep.size:
            # (Token.is_sent_start's setter scans the whole Doc on every call.)
            sent_start = arr[:, 1]
            sent_start[after_sep] = 1
            doc.from_array([SENT_START], sent_start)
    return doc


def _register_component() -> None:
    from spacy.language import Language

    if not Language.has_factory(_COMPONENT_NAME):
        Language.component(_COMPONENT_NAME, func=_paragraph_breaks_component)


_RULES_HINT = "or omit --spacy_model to use the built-in rule-based sentencizer"


def _load_error(model: str, exc: BaseException) -> SentenceSplitterError:
    detail = " ".join(str(exc).split())
    if len(detail) > 300:
        detail = detail[:297] + "..."
    if os.path.exists(model):
        if not os.path.isfile(os.path.join(model, "config.cfg")):
            return SentenceSplitterError(
                f"spaCy model path '{model}' is not a spaCy pipeline directory (no config.cfg): give "
                f"an installed spaCy pipeline package name or a pipeline directory, {_RULES_HINT}"
            )
        return SentenceSplitterError(f"could not load spaCy pipeline '{model}': {detail}")
    if any(sep and sep in model for sep in (os.sep, os.altsep)) or model.startswith("."):
        return SentenceSplitterError(
            f"spaCy model path '{model}' does not exist: give an installed spaCy pipeline package "
            f"name or the path of a pipeline directory, {_RULES_HINT}"
        )
    if isinstance(exc, OSError):
        return SentenceSplitterError(
            f"spaCy model '{model}' is not installed: install it with "
            f"'python -m spacy download {model}' (or pip install the model package), {_RULES_HINT}"
        )
    return SentenceSplitterError(f"could not load spaCy model '{model}': {detail}")


def _import_spacy(allow_torch: bool):
    """Import spaCy.  Its machine-learning layer (thinc) imports PyTorch whenever PyTorch is
    installed -- about 250 MB in every worker process -- though the rule-based sentencizer never
    uses it.  So, unless a loaded model may need it, PyTorch is hidden during the import (and only
    then: a later ``import torch`` elsewhere works as usual)."""
    import sys

    if allow_torch or "spacy" in sys.modules or "torch" in sys.modules:
        import spacy

        return spacy
    sys.modules["torch"] = None  # makes `import torch` raise ImportError
    try:
        import spacy
    finally:
        del sys.modules["torch"]
    return spacy


def _build_nlp(model: Optional[str]):
    spacy = _import_spacy(allow_torch=model is not None)

    _register_component()
    if model is None:
        nlp = spacy.blank("en")
        nlp.add_pipe("sentencizer")
    else:
        try:
            nlp = spacy.load(model)
        except (OSError, ValueError, KeyError, ImportError) as exc:
            raise _load_error(model, exc) from None
        boundary = False
        for name in list(nlp.pipe_names):
            factory = nlp.get_pipe_meta(name).factory
            if factory in _UNNEEDED_FACTORIES:
                nlp.disable_pipe(name)
            elif factory in _BOUNDARY_FACTORIES:
                boundary = True
        if not boundary:
            # e.g. a pipeline whose senter ships disabled and that has no parser.
            senters = [n for n in nlp.disabled if nlp.get_pipe_meta(n).factory == "senter"]
            if senters:
                nlp.enable_pipe(senters[0])
            else:
                nlp.add_pipe("sentencizer")
    nlp.add_pipe(_COMPONENT_NAME, first=True)
    return nlp


def _punctuation_characters(nlp) -> Optional[list[str]]:
    """The rule-based sentencizer's punctuation characters in ``nlp``, or None if not applicable."""
    if "sentencizer" not in nlp.pipe_names:
        return None
    return getattr(nlp.get_pipe("sentencizer"), "punct_chars", None) or None


def _punctuation_free_test(characters):
    """For the rule-based sentencizer: a test that a text holds none of its punctuation
    ``characters`` (so the sentencizer would find no boundary in it), or None if not applicable."""
    if not characters or any(len(c) != 1 for c in characters):
        return None
    pattern = re.compile("[" + "".join(re.escape(c) for c in sorted(characters)) + "]")
    ascii_characters = [c for c in characters if c.isascii()]

    def no_punctuation(text: str) -> bool:
        if text.isascii():  # a few substring scans beat a 128-character class by 50x
            return not any(c in text for c in ascii_characters)
        return pattern.search(text) is None

    return no_punctuation


def _doc_starts(doc) -> list[int]:
    """Character offsets of the tokens after the first that start a sentence, as in ``Doc.sents``."""
    import numpy as np
    from spacy.attrs import IDX, SENT_START

    if not len(doc):
        return []
    arr = doc.to_array([IDX, SENT_START])
    return arr[np.flatnonzero(arr[1:, 1] == 1) + 1, 0].tolist()


def _slice_sentences(passage: str, starts: list[int], sentences: list[str]) -> None:
    """Append the sentences of ``passage`` cut at ``starts`` (increasing offsets): each piece
    stripped, empty ones dropped, and cut again at any paragraph separator left inside it."""
    begin = 0
    for end in (*starts, len(passage)):
        s = passage[begin:end].strip()
        begin = end
        if s:
            if "\n" in s:  # a paragraph separator inside a sentence: a boundary
                sentences.extend(p for p in (p.strip() for p in s.split("\n")) if p)
            else:
                sentences.append(s)


class SpacySentenceSplitter:
    """spaCy sentence splitter; see the module docstring for the semantics.

    ``model=None`` uses ``spacy.blank("en")`` + ``sentencizer``; otherwise ``spacy.load(model)``
    (an installed package name or a pipeline directory).  ``batch_size`` is the number of passages
    per ``nlp.pipe`` batch, ``max_passage_chars`` the longest text given to spaCy at once.
    ``self.nlp`` is the spaCy pipeline (passages are also kept within ``nlp.max_length``).

    The built-in sentencizer's sentences are computed without building a spaCy ``Doc`` per passage
    (``rule_sentences.py``: spaCy's tokenizer rules per whitespace-delimited word holding
    punctuation, cached; a paragraph whose words could be joined by spaCy's matcher tokenized
    whole), from rules read from the pipeline once and cached on disk (``spacy_rules_cache.py``),
    so that ``self.nlp`` is built, and spaCy imported, only when first used; they are the
    pipeline's.
    ``force_spacy=True`` runs the pipeline on every passage instead: the oracle tests compare with.
    """

    def __init__(
        self,
        model: Optional[Union[str, os.PathLike]] = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        max_passage_chars: int = DEFAULT_MAX_PASSAGE_CHARS,
        force_spacy: bool = False,
    ) -> None:
        if isinstance(model, os.PathLike):
            model = os.fspath(model)
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise SentenceSplitterError(
                f"spaCy model must be a package name, a path or None, got {model!r}"
            )
        self.model = model
        self.batch_size = _check_positive_int("batch_size", batch_size)
        self.max_passage_chars = _check_positive_int("max_passage_chars", max_passage_chars)
        self.force_spacy = bool(force_spacy)
        self._nlp = None
        self._pristine: Optional[tuple] = None
        self._rules = None
        punct_chars = None
        if model is None and not self.force_spacy:
            # The built-in sentencizer's rules, from the cache when they are there (no spaCy
            # import), else from a pipeline built now (kept: it is self.nlp).
            from .rule_sentences import RuleSentencizer
            from .spacy_rules_cache import load_rules

            rules, nlp = load_rules(lambda: _build_nlp(None), _COMPONENT_NAME)
            if nlp is not None:
                self._adopt(nlp)
            if rules.supported:
                self._rules = RuleSentencizer(rules, lambda: self.nlp.tokenizer)
                self._rules_facts = (frozenset(rules.punct_chars), rules.max_length)
                punct_chars = rules.punct_chars
        if self._rules is None:
            nlp = self.nlp
            punct_chars = _punctuation_characters(nlp) if model is None else None
        self._no_boundary_possible = _punctuation_free_test(punct_chars)

    @property
    def nlp(self):
        """The spaCy pipeline (built, and spaCy imported, at first use when the rule
        sentencizer's rules came from the cache)."""
        if self._nlp is None:
            self._adopt(_build_nlp(self.model))
        return self._nlp

    def _adopt(self, nlp) -> None:
        self._nlp = nlp
        sentencizer = nlp.get_pipe("sentencizer") if "sentencizer" in nlp.pipe_names else None
        self._pristine = (nlp.tokenizer, list(nlp.pipe_names), sentencizer)

    def _rules_serve(self) -> bool:
        """Whether the rule sentencizer gives this splitter's sentences: it exists, and the
        pipeline, if built, is still as built (its tokenizer, components and punctuation
        characters unchanged since) and holds the rules' punctuation characters."""
        if self._rules is None:
            return False
        nlp = self._nlp
        if nlp is None:
            return True
        tokenizer, names, sentencizer = self._pristine
        return (
            nlp.tokenizer is tokenizer
            and nlp.pipe_names == names
            and nlp.get_pipe("sentencizer") is sentencizer
            and frozenset(sentencizer.punct_chars) == self._rules_facts[0]
        )

    def _max_length(self) -> int:
        if self._nlp is None and self._rules is not None:
            return self._rules_facts[1]
        return self.nlp.max_length

    def _passages(self, texts: Iterable[str]) -> Iterator[tuple[str, tuple[str, bool, Optional[list]]]]:
        """``(text for spaCy, (passage, is_last_passage_of_its_document, sentences or None))``; each
        document gives >= 1 passage.  With the built-in sentencizer, a passage with no sentence
        punctuation at all can only split at paragraph breaks: its sentences are known without
        spaCy (its cost is the tokenizer, and such text can be hundreds of MB), and spaCy gets ""."""
        limit = max(1, min(self.max_passage_chars, self._max_length()))

        def item(passage: str, last: bool):
            if self._no_boundary_possible is not None and self._no_boundary_possible(passage):
                known = [p for p in (p.strip() for p in passage.split("\n")) if p]
                return "", (passage, last, known)
            return passage, (passage, last, None)

        for text in texts:
            _check_text(text)
            if len(text) <= limit:
                yield item(_normalise(text), True)
                continue
            previous = None
            for raw in _iter_raw_passages(text, limit):
                if previous is not None:
                    yield item(previous, False)
                previous = _normalise(raw)
            yield item(previous, True)

    def split(self, texts: Iterable[str]) -> Iterator[list[str]]:
        """Yield the sentences of each document of ``texts``, in order, streaming."""
        if self._rules_serve():
            yield from self._split_by_rules(texts)
            return
        sentences: list[str] = []
        docs = self.nlp.pipe(self._passages(texts), as_tuples=True, batch_size=self.batch_size)
        for doc, (passage, last, known) in docs:
            if known is not None:
                sentences.extend(known)
            else:
                _slice_sentences(passage, _doc_starts(doc), sentences)
            if last:
                yield sentences
                sentences = []

    def _pipeline_starts(self, text: str) -> list[int]:
        return _doc_starts(self.nlp(text))

    def _split_by_rules(self, texts: Iterable[str]) -> Iterator[list[str]]:
        """The built-in sentencizer's sentences without a spaCy ``Doc`` (rule_sentences.py), and
        with one for a paragraph where that cannot be proved to agree."""
        sentences: list[str] = []
        for _, (passage, last, known) in self._passages(texts):
            if known is not None:
                sentences.extend(known)
            else:
                _slice_sentences(passage, self._rules.boundaries(passage, self._pipeline_starts), sentences)
            if last:
                yield sentences
                sentences = []

    def split_text(self, text: str) -> list[str]:
        """The sentences of one document."""
        return next(self.split([text]))

    # Pickling rebuilds from the constructor arguments; the spaCy object is never pickled.
    def __reduce__(self):
        return (type(self), (self.model, self.batch_size, self.max_passage_chars, self.force_spacy))

    def __repr__(self) -> str:
        return (
            f"SpacySentenceSplitter(model={self.model!r}, batch_size={self.batch_size}, "
            f"max_passage_chars={self.max_passage_chars}"
            + (", force_spacy=True)" if self.force_spacy else ")")
        )


@dataclass(frozen=True)
class SentenceSpec:
    """How documents become sentences: a sentence a line (``--single_sentence_per_line``), or
    spaCy (``spacy_model``; None: the built-in rule-based sentencizer)."""

    one_per_line: bool
    spacy_model: Optional[str]

    def splitter(self) -> Union[LineSentenceSplitter, SpacySentenceSplitter]:
        return make_sentence_splitter(self.one_per_line, self.spacy_model)


def make_sentence_splitter(
    single_sentence_per_line: bool,
    spacy_model: Optional[str] = None,
    **spacy_options: Any,
) -> Union[LineSentenceSplitter, SpacySentenceSplitter]:
    """The splitter for a configuration.

    ``single_sentence_per_line`` -> ``LineSentenceSplitter`` (``spacy_model`` is then unused);
    otherwise ``SpacySentenceSplitter(spacy_model, **spacy_options)`` (``batch_size``,
    ``max_passage_chars``); ``spacy_model=None`` is the built-in rule-based sentencizer.
    """
    if single_sentence_per_line:
        return LineSentenceSplitter()
    return SpacySentenceSplitter(spacy_model, **spacy_options)
