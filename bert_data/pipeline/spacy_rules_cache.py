"""spaCy's rules for the built-in splitter, derived from the pipeline once and kept on disk.

The built-in splitter's sentences (``spacy.blank("en")`` + ``sentencizer``) are computed from a
few things the pipeline holds: the sentencizer's punctuation characters and the tokenizer's rules
(prefix, suffix and infix expressions, ``token_match``/``url_match``, the special cases and the
patterns of its special-case matcher).  Importing spaCy and building the pipeline costs 1.5-2 s
in every process, so those things are read from the loaded pipeline once, written as plain data
to the user's cache directory and read back by later processes, which then split text without
importing spaCy (``rule_sentences.py`` imports it only for what the data cannot answer).

spaCy stays the source of truth: the file is *derived* from a loaded pipeline, never written by
hand, and is found by a key naming everything the rules depend on -- the spaCy distribution's
version and the size and modification time of the spaCy files that define English's rules, the
tokenizer and the sentencizer; the Python version (``re``); and this derivation's format and
source code.  When the file is written, the word port made from it (``word_tokens.AffixTokens``)
is compared with spaCy's tokenizer on every special case in many contexts and on generated text;
if they differ anywhere the file says so, and the splitter asks spaCy's tokenizer instead.

A missing, unreadable, corrupt (its rules no longer hash to the digest written with them), old or
foreign file is rebuilt without a word (it is a cache); concurrent processes may race to write
it: each writes a temporary file in the same directory and renames it into place, so a reader
sees a whole file or none.  Where the directory cannot be
written the rules are derived in memory for the process.  ``BERT_DATA_SPACY_RULES_CACHE`` names
another directory (the tests' own); the default is ``$XDG_CACHE_HOME/bert_data/spacy_rules``
(``~/.cache`` without XDG_CACHE_HOME), as for the other caches of bert_data.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Callable, Optional

from .word_tokens import AffixTokens, compiled_patterns, ingredients, matcher_patterns

__all__ = ["SentencizerRules", "load_rules", "derive_rules", "cache_path", "cache_key"]

# Changed whenever what is stored, or how it is derived, changes meaning.
FORMAT = 2
ENV_DIRECTORY = "BERT_DATA_SPACY_RULES_CACHE"

# The spaCy files whose contents define the rules of blank English + sentencizer (relative to
# the package; globs of one directory).
_SPACY_FILES = (
    "lang/*.py",
    "lang/en/*.py",
    "tokenizer*.so",
    "tokenizer.pyx",
    "pipeline/sentencizer*.so",
    "pipeline/sentencizer.pyx",
    "matcher/phrasematcher*.so",
    "lexeme*.so",
    "vocab*.so",
    "attrs*.so",
    "language.py",
    "util.py",
    "default_config.cfg",
)
# This package's files whose code decides what is derived and how it is read.
_OWN_FILES = ("word_tokens.py", "rule_expressions.py", "pattern_codes.py", "spacy_rules_cache.py", "sentences.py")


@dataclass(frozen=True)
class SentencizerRules:
    """What the rule sentencizer reads from the pipeline, as plain data.

    ``supported``: whether ``rule_sentences`` covers the pipeline at all (otherwise the splitter
    runs the pipeline); ``punct_chars``: the sentencizer's; ``max_length``: the pipeline's
    ``nlp.max_length``; ``patterns``: the special-case matcher's patterns (token texts) by
    special case; ``changing``: the special cases whose application changes a word's tokens;
    ``port``: the word port's ingredients (``word_tokens.ingredients``), None where the port does
    not serve the tokenizer (spaCy's tokenizer is then asked for each word).
    """

    supported: bool
    punct_chars: tuple[str, ...] = ()
    max_length: int = 0
    patterns: Optional[dict] = None
    changing: tuple[str, ...] = ()
    port: Optional[dict] = None

    @functools.cached_property
    def _affix(self) -> Optional[AffixTokens]:
        return None if self.port is None else AffixTokens(self.port)

    def affix_tokens(self) -> Optional[AffixTokens]:
        """The word port made from ``port`` (made once: reading the cache checks it compiles)."""
        return self._affix

    def to_json(self) -> dict:
        return {
            "supported": self.supported,
            "punct_chars": list(self.punct_chars),
            "max_length": self.max_length,
            "patterns": self.patterns,
            "changing": list(self.changing),
            "port": self.port,
        }

    @classmethod
    def from_json(cls, data: dict) -> "SentencizerRules":
        """Raises (KeyError, TypeError, ValueError) on anything not shaped as written."""
        supported = data["supported"]
        if not isinstance(supported, bool):
            raise TypeError("supported")
        if not supported:
            return cls(False)
        punct = data["punct_chars"]
        patterns = data["patterns"]
        changing = data["changing"]
        max_length = data["max_length"]
        if not (isinstance(punct, list) and punct and all(isinstance(c, str) and len(c) == 1 for c in punct)):
            raise TypeError("punct_chars")
        if not (isinstance(patterns, dict) and all(
            isinstance(p, list) and p and all(isinstance(t, str) for t in p) for p in patterns.values()
        )):
            raise TypeError("patterns")
        if not (isinstance(changing, list) and all(isinstance(t, str) for t in changing)):
            raise TypeError("changing")
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
            raise TypeError("max_length")
        port = data["port"]
        if port is not None and not isinstance(port, dict):
            raise TypeError("port")
        return cls(True, tuple(punct), max_length, patterns, tuple(changing), port)


# -- the key and the file -----------------------------------------------------------------------------


def _spacy_root() -> Optional[str]:
    """The spaCy package's directory, found without importing it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("spacy")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def cache_key() -> Optional[dict]:
    """What the derived rules depend on (see the module docstring), or None without spaCy."""
    import fnmatch
    import importlib.metadata

    root = _spacy_root()
    if root is None:
        return None
    try:
        version = importlib.metadata.version("spacy")
    except importlib.metadata.PackageNotFoundError:
        version = None
    files = []
    listings: dict[str, list[str]] = {}
    for pattern in _SPACY_FILES:
        folder, _, name = pattern.rpartition("/")
        if folder not in listings:
            try:
                listings[folder] = sorted(os.listdir(os.path.join(root, folder)))
            except OSError:
                listings[folder] = []
        for entry in fnmatch.filter(listings[folder], name):
            relative = f"{folder}/{entry}" if folder else entry
            try:
                stat = os.stat(os.path.join(root, relative))
            except OSError:
                continue
            files.append([relative, stat.st_size, stat.st_mtime_ns])
    own = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    for name in _OWN_FILES:
        with open(os.path.join(here, name), "rb") as handle:
            own.update(handle.read())
    return {
        "format": FORMAT,
        "python": sys.version,
        "spacy": version,
        "spacy_root": root,
        "spacy_files": files,
        "bert_data": own.hexdigest(),
    }


def cache_directory() -> str:
    directory = os.environ.get(ENV_DIRECTORY)
    if directory:
        return directory
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "bert_data", "spacy_rules")


def cache_path(key: dict) -> str:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode("utf-8")).hexdigest()[:24]
    return os.path.join(cache_directory(), f"sentencizer-{digest}.json")


def _digest(rules: dict) -> str:
    """A hash of the rules as written: a file whose rules do not hash to its digest was damaged."""
    return hashlib.sha256(json.dumps(rules, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def _read(path: str, key: dict) -> Optional[SentencizerRules]:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        if not isinstance(data, dict) or data.get("key") != key:
            return None  # foreign (or a hash collision)
        if data.get("digest") != _digest(data["rules"]):
            return None  # damaged since it was written (its expressions compile when first needed)
        rules = SentencizerRules.from_json(data["rules"])
        rules.affix_tokens()  # what it compiles at once, it compiles
        return rules
    except Exception:  # unreadable, corrupt, old: rebuilt, the cache is not the source of truth
        return None


def _write(path: str, key: dict, rules: SentencizerRules) -> None:
    """Atomically: a temporary file in the same directory renamed into place (a racing writer's
    file is as good as this one)."""
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
        fd, temporary = tempfile.mkstemp(prefix=".sentencizer-", suffix=".tmp", dir=directory)
    except OSError:
        return  # not writable: the rules serve this process only
    try:
        data = rules.to_json()
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"key": key, "digest": _digest(data), "rules": data}, handle, ensure_ascii=False)
        os.replace(temporary, path)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def load_rules(build_nlp: Callable[[], object], first_component: str) -> tuple[SentencizerRules, Optional[object]]:
    """The rules of the pipeline ``build_nlp()`` makes (blank English + ``first_component`` +
    sentencizer): from the cache when it holds them for this key, else derived from a pipeline
    built now and written to the cache.  Returns the rules and the pipeline if one was built."""
    key = cache_key()
    path = cache_path(key) if key is not None else None
    if path is not None:
        rules = _read(path, key)
        if rules is not None:
            return rules, None
    nlp = build_nlp()
    rules = derive_rules(nlp, first_component)
    if path is not None:
        _write(path, key, rules)
    return rules, nlp


# -- deriving the rules from a pipeline ---------------------------------------------------------------


def derive_rules(nlp, first_component: str) -> SentencizerRules:
    """Read the rules from ``nlp``; ``supported=False`` when the pipeline is not one whose
    sentences ``rule_sentences`` covers (its module docstring)."""
    from spacy.attrs import IS_PUNCT
    from spacy.lang.lex_attrs import is_punct
    from spacy.pipeline import Sentencizer
    from spacy.tokenizer import Tokenizer

    unsupported = SentencizerRules(False)
    if nlp.pipe_names != [first_component, "sentencizer"]:
        return unsupported
    sentencizer = nlp.get_pipe("sentencizer")
    punct = getattr(sentencizer, "punct_chars", None)
    if type(sentencizer) is not Sentencizer or not punct:
        return unsupported
    if any(not isinstance(c, str) or len(c) != 1 or c.isspace() for c in punct):
        return unsupported
    tokenizer = nlp.tokenizer
    if type(tokenizer) is not Tokenizer or nlp.vocab.lex_attr_getters.get(IS_PUNCT) is not is_punct:
        return unsupported
    # Special cases holding whitespace could join words; whitespace-only ones (spaCy's own
    # " ", "\t", "\n", "\xa0") only touch whitespace tokens.
    for text in tokenizer.rules or {}:
        if any(c.isspace() for c in text) and not text.isspace():
            return unsupported
    patterns = matcher_patterns(tokenizer)
    # Special cases whose tokens (the tokenizer's own) differ from their pattern's.
    changing = sorted(text for text, pattern in patterns.items() if [t.text for t in tokenizer(text)] != pattern)
    port = ingredients(tokenizer, patterns, changing)
    if port is not None:
        # A JSON round trip: the port checked is the one later processes make from the file.
        # With the compiled code of the sentencizer's punctuation's searches too.
        port = json.loads(json.dumps({**port, "compiled": compiled_patterns(port, punct)}))
        if not _port_agrees(AffixTokens(port), tokenizer, sorted(punct)):
            port = None
        else:
            changing = sorted(set(changing) | set(port["changing"]))
    return SentencizerRules(True, tuple(sorted(punct)), int(nlp.max_length), patterns, tuple(changing), port)


def _guard_words(specials: list[str], punct: list[str]) -> list[str]:
    """Words at the edges of the port: every special case glued to letters, digits, stops and
    apostrophes and behind brackets and quotes; every sentence punctuation character after and
    around a word; common shapes of abbreviations, numbers, URLs and emoji."""
    words = []
    for text in specials:
        words += [text + ",", "x" + text, "3" + text, "(" + text + ")", '"' + text + '."', text + "'s"]
    for c in punct:
        words += ["word" + c, "Word" + c + '"', "(word" + c + ")", c + "word", c + c, "a" + c + "b"]
    for shape in ("U.S.", "e.g.", "a.m.", "10a.m.", "Ph.D.", "3.14.", "1,000.", "$4.99.", "2:30.", "1990's.",
                  "http://example.com/a.b?c=d.", "www.example.org.", "mail@example.com.", "😀.", "👍🏽!",
                  "(╯°□°）╯︵┻━┻", "¯\\_(ツ)_/¯", "word...", "word?!", "word.”", "word.’", "«word».", "--word--"):
        words += [shape, '"' + shape, shape + ")", shape + "'s"]
    return words


def _port_agrees(port: AffixTokens, tokenizer, punct: list[str]) -> bool:
    """Whether the port gives the tokenizer's tokens: of every special case and punctuation
    character alone and with a stop, and of texts made of the guard words (each word in a
    text is tokenized as alone, then the matcher runs over the text)."""
    specials = [text for text in (tokenizer.rules or {}) if not any(c.isspace() for c in text)]
    for word in [*specials, *(text + "." for text in specials), *punct, *(c + "." for c in punct)]:
        if port.tokens(word) != [token.text for token in tokenizer(word)]:
            return False
    words = _guard_words(specials, punct)
    separators = [" ", " ", " ", "  ", "\t", " \xa0", "\u3000"]
    for i in range(0, len(words), 60):
        group = words[i : i + 60]
        text = "".join(word + separators[(i + j) % len(separators)] for j, word in enumerate(group))
        if port.text_tokens(text) != [(token.idx, token.text) for token in tokenizer(text)]:
            return False
    return True
