"""The built-in splitter's spaCy rules kept on disk (bert_data/pipeline/spacy_rules_cache.py): the
same sentences from a cache written now or read back, no spaCy import when the cache is warm, and
a cache rebuilt when its key changes or it is corrupt, foreign or cannot be written."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys

import pytest

from bert_data.pipeline import spacy_rules_cache
from bert_data.pipeline.sentences import SpacySentenceSplitter
from tests.pipeline.test_sentence_rules import _fast_path_edge_texts, _hostile_text

COMMON = [
    "Mr. Smith went to Washington. He didn't stay long! Then the U.S. Senate met at 10 a.m. on Jan. 5.",
    "Title\n\nThe quick brown fox jumps. It lands (softly.) \"Yes.\" Fine?! Dr. Otis came at 3 p.m.",
    # A paragraph whose special case could be joined across a space: tokenized whole.
    "for the benefit . _beloved_'s most. Next one",
]


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "rules"
    monkeypatch.setenv(spacy_rules_cache.ENV_DIRECTORY, str(directory))
    return directory


@pytest.fixture(scope="module")
def oracle() -> SpacySentenceSplitter:
    return SpacySentenceSplitter(force_spacy=True)


def _files(directory) -> list[str]:
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


@pytest.fixture(scope="module")
def warm_file(tmp_path_factory):
    """A cache file written once for the module by a splitter that derived the rules from a
    pipeline built then: the tests that start from a warm cache copy it (deriving takes seconds;
    test_the_same_sentences_from_a_new_and_a_read_cache checks that derivation and its file)."""
    directory = tmp_path_factory.mktemp("warm-rules")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(spacy_rules_cache.ENV_DIRECTORY, str(directory))
        SpacySentenceSplitter()
    [name] = _files(directory)
    return directory / name


@pytest.fixture(scope="module")
def derivations() -> list:
    return []


def _derived_once(monkeypatch, derivations: list) -> None:
    """``derive_rules`` derives the rules from the first pipeline it is given in the module and
    returns those for the next ones (the same pipeline each time, so the same rules): for the
    tests of when the cache is rebuilt, which count the pipelines built (``_counting_builds``)."""
    derive = spacy_rules_cache.derive_rules

    def derive_once(nlp, first_component):
        if not derivations:
            derivations.append(derive(nlp, first_component))
        return derivations[0]

    monkeypatch.setattr(spacy_rules_cache, "derive_rules", derive_once)


def _warm(cache_dir, warm_file) -> None:
    """``cache_dir`` holding the module's warm cache file, as a splitter run before leaves it."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(warm_file, cache_dir / warm_file.name)


def _counting_builds(monkeypatch) -> list[int]:
    """Counts the pipelines load_rules builds to derive the rules (a rebuilt cache)."""
    builds = []
    load = spacy_rules_cache.load_rules

    def counting(build_nlp, first_component):
        return load(lambda: builds.append(1) or build_nlp(), first_component)

    monkeypatch.setattr(spacy_rules_cache, "load_rules", counting)
    return builds


def test_the_same_sentences_from_a_new_and_a_read_cache(cache_dir, oracle, monkeypatch):
    builds = _counting_builds(monkeypatch)
    derived = SpacySentenceSplitter(max_passage_chars=3000)
    assert builds == [1] and derived._nlp is not None  # derived from a pipeline built now
    assert len(_files(cache_dir)) == 1
    read = SpacySentenceSplitter(max_passage_chars=3000)
    assert builds == [1] and read._nlp is None  # read back: no pipeline
    rng = random.Random(21)
    texts = COMMON + [_hostile_text(rng, rng.randint(0, 300)) for _ in range(30)]
    texts += _fast_path_edge_texts(rng, oracle.nlp.tokenizer.rules)
    expected = list(oracle.split(texts))
    assert list(derived.split(texts)) == expected
    assert list(read.split(texts)) == expected
    assert read._nlp is None  # no word or paragraph needed spaCy


def test_a_warm_cache_splits_without_importing_spacy(cache_dir, oracle, warm_file):
    _warm(cache_dir, warm_file)
    code = (
        "import json, sys\n"
        "from bert_data.pipeline.sentences import SpacySentenceSplitter\n"
        "texts = json.loads(sys.stdin.read())\n"
        "print(json.dumps(list(SpacySentenceSplitter().split(texts))))\n"
        "assert 'spacy' not in sys.modules, 'spacy imported'\n"
        "assert 'thinc' not in sys.modules, 'thinc imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], input=json.dumps(COMMON), capture_output=True,
                          text=True, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [list(s) for s in oracle.split(COMMON)]


def test_a_changed_key_rebuilds_the_cache(cache_dir, monkeypatch, derivations):
    builds = _counting_builds(monkeypatch)
    _derived_once(monkeypatch, derivations)
    SpacySentenceSplitter()
    SpacySentenceSplitter()
    assert builds == [1]
    key = spacy_rules_cache.cache_key()
    for change in ({"spacy": "0.0.0"}, {"python": "another"}, {"format": -1},
                   {"spacy_files": key["spacy_files"][:-1] + [[key["spacy_files"][-1][0], 1, 2]]}):
        monkeypatch.setattr(spacy_rules_cache, "cache_key", lambda change=change: {**key, **change})
        before = len(builds)
        SpacySentenceSplitter()
        SpacySentenceSplitter()
        assert len(builds) == before + 1, change
    assert len(_files(cache_dir)) == 5  # one file a key: another spaCy's cache is kept


def test_the_key_follows_spacys_files(tmp_path, monkeypatch):
    """The size and modification time of spaCy's rule files are in the key (an edited or
    reinstalled spaCy of the same version), and so is this package's own derivation code."""
    root = tmp_path / "spacy"
    (root / "lang" / "en").mkdir(parents=True)
    rule_file = root / "lang" / "en" / "punctuation.py"
    rule_file.write_text("X = 1\n")
    (root / "lang" / "char_classes.py").write_text("Y = 2\n")
    monkeypatch.setattr(spacy_rules_cache, "_spacy_root", lambda: str(root))
    key = spacy_rules_cache.cache_key()
    assert [f[0] for f in key["spacy_files"]] == ["lang/char_classes.py", "lang/en/punctuation.py"]
    os.utime(rule_file, ns=(10**18, 10**18))
    touched = spacy_rules_cache.cache_key()
    assert touched != key and spacy_rules_cache.cache_path(touched) != spacy_rules_cache.cache_path(key)
    rule_file.write_text("X = 11\n")
    assert spacy_rules_cache.cache_key() != touched
    monkeypatch.setattr(spacy_rules_cache, "_OWN_FILES", ("word_tokens.py",))
    assert spacy_rules_cache.cache_key()["bert_data"] != key["bert_data"]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "foreign", "wrong_shape", "bad_regex"])
def test_a_corrupt_or_foreign_cache_is_rebuilt(cache_dir, oracle, monkeypatch, damage, warm_file, derivations):
    _warm(cache_dir, warm_file)
    [name] = _files(cache_dir)
    path = cache_dir / name
    data = json.loads(path.read_text(encoding="utf-8"))
    if damage == "garbage":
        path.write_bytes(b"\x00\xff not json")
    elif damage == "truncated":
        path.write_text(path.read_text(encoding="utf-8")[:5000], encoding="utf-8")
    elif damage == "empty":
        path.write_text("", encoding="utf-8")
    elif damage == "foreign":
        data["key"]["spacy"] = "9.9.9"
        path.write_text(json.dumps(data), encoding="utf-8")
    elif damage == "wrong_shape":
        data["rules"]["punct_chars"] = 5
        path.write_text(json.dumps(data), encoding="utf-8")
    else:
        data["rules"]["port"]["suffix_search"]["pattern"] = "(unclosed"
        path.write_text(json.dumps(data), encoding="utf-8")
    builds = _counting_builds(monkeypatch)
    _derived_once(monkeypatch, derivations)
    splitter = SpacySentenceSplitter()
    assert builds == [1]
    assert splitter.split_text(COMMON[0]) == oracle.split_text(COMMON[0])
    assert json.loads(path.read_text(encoding="utf-8"))["key"] == spacy_rules_cache.cache_key()  # rewritten
    assert _files(cache_dir) == [name]  # no temporary file left
    SpacySentenceSplitter()
    assert builds == [1]


def test_an_unwritable_cache_directory_still_splits(tmp_path, oracle, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(spacy_rules_cache.ENV_DIRECTORY, str(blocker / "rules"))
    splitter = SpacySentenceSplitter()
    assert splitter._rules is not None
    assert list(splitter.split(COMMON)) == list(oracle.split(COMMON))


def test_a_port_that_disagrees_with_the_tokenizer_is_not_cached(cache_dir, oracle, monkeypatch):
    """The guard, when the rules are derived: the port made from the cache's data is compared
    with spaCy's tokenizer; a port that disagrees (a spaCy whose tokenizer it does not follow) is
    recorded as not serving, and the sentences stay the pipeline's (spaCy's tokenizer per word)."""
    from bert_data.pipeline.word_tokens import AffixTokens

    monkeypatch.setattr(AffixTokens, "tokens", lambda self, word: [word])  # "end." would hide its stop
    SpacySentenceSplitter()
    [name] = _files(cache_dir)
    assert json.loads((cache_dir / name).read_text(encoding="utf-8"))["rules"]["port"] is None
    monkeypatch.undo()
    monkeypatch.setenv(spacy_rules_cache.ENV_DIRECTORY, str(cache_dir))
    splitter = SpacySentenceSplitter()
    assert splitter._rules._affix is None
    texts = ["It ends here. And here! Then more? Yes.", "A second one. Fine."] + COMMON
    assert list(splitter.split(texts)) == list(oracle.split(texts))


def test_an_unsupported_pipeline_is_recorded(cache_dir, oracle, monkeypatch):
    """Rules that do not cover the pipeline are cached as such: the splitter runs the pipeline."""
    monkeypatch.setattr(spacy_rules_cache, "derive_rules",
                        lambda nlp, first: spacy_rules_cache.SentencizerRules(False))
    SpacySentenceSplitter()
    monkeypatch.undo()
    monkeypatch.setenv(spacy_rules_cache.ENV_DIRECTORY, str(cache_dir))
    splitter = SpacySentenceSplitter()
    assert splitter._rules is None and splitter._nlp is not None
    assert list(splitter.split(COMMON)) == list(oracle.split(COMMON))


def test_the_shipped_samples_sentences_from_a_read_cache(cache_dir, oracle, warm_file):
    """A corpus sample (the documents shipped in examples/): the pipeline's sentences from a
    cache read back, without building the pipeline; every paragraph's tokens from the word port
    are the tokenizer's."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    paths = sorted((repo / "examples" / "sample" / "docs").glob("*.txt")) + [repo / "examples" / "google" / "sample_text.txt"]
    texts = [path.read_text(encoding="utf-8") for path in paths]
    assert len(texts) > 10
    _warm(cache_dir, warm_file)
    read = SpacySentenceSplitter()
    assert read._nlp is None
    assert list(read.split(texts)) == list(oracle.split(texts))
    assert read._nlp is None
    port = read._rules._affix
    tokenizer = oracle.nlp.tokenizer
    for text in texts:
        for paragraph in text.split("\n\n"):
            paragraph = " ".join(paragraph.split("\n"))
            assert port.text_tokens(paragraph) == [(t.idx, t.text) for t in tokenizer(paragraph)], paragraph
