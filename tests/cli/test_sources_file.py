"""``--sources FILE``: each mistake in the file is one line naming the key and the fix, before
any work; a good file in TOML or JSON runs."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli_runs import base_options, run_cli
from tests.helpers.corpus import make_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("sources_cli") / "corpus", n_docs=8, min_sentences=5,
                       max_sentences=10, words_per_doc=20)


def source(corpus, **keys):
    entry = {"name": "wiki", "metadata_files": [str(corpus.metadata)], "input_files_prefix": str(corpus.root),
             "weight": 1.0}
    entry.update(keys)
    return {key: value for key, value in entry.items() if value is not None}


def toml_of(content: dict):
    """The content as TOML (None when a key is not a scalar TOML can write this simply)."""
    if any(isinstance(value, (list, dict)) for key, value in content.items() if key != "source"):
        return None
    lines = [f"{key} = {json.dumps(value)}" for key, value in content.items() if key != "source"]
    for entry in content.get("source", []):
        lines += ["[[source]]"] + [f"{key} = {json.dumps(value)}" for key, value in entry.items()]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("content, message", [
    (lambda c: {"source": [source(c, wieght=2.0, weight=None)]}, "unknown key 'wieght'; did you mean 'weight'?"),
    (lambda c: {"sources": [source(c)]}, "unknown key 'sources'; did you mean 'source'?"),
    (lambda c: {"source": [source(c, metadata_files=None, input_files_prefix=None)]},
     "source 1 ('wiki'): missing inputs; give metadata_files (with input_files_prefix) or input_files"),
    (lambda c: {"source": [source(c, tokens=1000)]},
     "source 1 ('wiki'): weight and tokens are both given; keep one of weight, tokens or share"),
    (lambda c: {"source": [source(c, weight=None)]}, "source 1 ('wiki'): missing weight, tokens or share; give one"),
    (lambda c: {"source": [source(c, weight=-1.0)]}, "source 1 ('wiki'): weight must not be negative, got -1.0"),
    (lambda c: {"source": [source(c, weight=None, tokens=2.5)]}, "tokens must be a whole number of tokens"),
    (lambda c: {"source": [source(c, weight=None, share=1.5)]}, "share is a fraction of the run's tokens, at most 1"),
    (lambda c: {"source": [source(c, name=None)]}, "source 1: missing name; give each source a name"),
    (lambda c: {"source": [source(c), source(c)]}, "source name 'wiki' is given twice"),
    (lambda c: {"source": [source(c, weight=None, share=0.5), source(c, name="web", weight=None, share=0.25)]},
     "every source is a share and they sum to 0.75; make them sum to 1 or set total_tokens"),
    (lambda c: {"source": [source(c), source(c, name="web", weight=None, share=1.0)]},
     "the shares sum to 1, leaving nothing for the sources given by weight or tokens"),
    (lambda c: {}, "no [[source]] table; add one per source"),
])
def test_each_mistake_is_one_line_naming_the_key_and_the_fix(corpus, tmp_path, capsys, content, message):
    for path, text in ((tmp_path / "sources.toml", toml_of(content(corpus))),
                       (tmp_path / "sources.json", json.dumps(content(corpus)))):
        if text is None:
            continue
        path.write_text(text)
        code, err = run_cli(capsys, "--sources", path, *base_options(corpus, tmp_path / "out"))
        assert code == 2
        assert len(err.strip().splitlines()) == 1, err
        assert message in err
        assert not (tmp_path / "out").exists()  # refused before any work


def test_a_missing_or_unreadable_file_names_itself(corpus, tmp_path, capsys):
    code, err = run_cli(capsys, "--sources", tmp_path / "nowhere.toml", *base_options(corpus, tmp_path / "out"))
    assert code == 2 and "--sources " in err and "nowhere.toml: file not found" in err
    bad = tmp_path / "bad.toml"
    bad.write_text("[[source]\nname = 1\n")
    code, err = run_cli(capsys, "--sources", bad, *base_options(corpus, tmp_path / "out"))
    assert code == 2 and "not valid TOML" in err and len(err.strip().splitlines()) == 1


def test_sources_and_command_line_inputs_are_not_both_given(corpus, tmp_path, capsys):
    path = tmp_path / "sources.json"
    path.write_text(json.dumps({"source": [source(corpus)]}))
    code, err = run_cli(capsys, "--sources", path, "--metadata_files", corpus.metadata,
                        *base_options(corpus, tmp_path / "out"))
    assert code == 2 and "give the inputs in the sources file, not also --metadata_files" in err


def test_a_json_file_with_paths_relative_to_it_runs(corpus, tmp_path, capsys):
    (tmp_path / "lists").mkdir()
    listing = tmp_path / "lists" / "metadata.txt"
    listing.write_text(corpus.metadata.read_text())
    path = tmp_path / "lists" / "sources.json"
    path.write_text(json.dumps({"source": [{"name": "all", "metadata_files": ["metadata.txt"],
                                            "input_files_prefix": str(corpus.root), "weight": 2}]}))
    code, err = run_cli(capsys, "--sources", path, *base_options(corpus, tmp_path / "out"))
    assert code == 0, err
    manifest = json.loads((tmp_path / "out" / "data_params.json").read_text())
    assert manifest["per_source"][0]["realized"]["documents"] == 16
