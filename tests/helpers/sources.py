"""A corpus of two sources (the synthetic corpus's documents cut in two metadata files) and a
sources file over it; every document's words are its own, so a record's tokens name its
source and its place there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Tuple

from tests.helpers.corpus import SyntheticCorpus, make_corpus


def two_sources(root: Path, n_docs: int = 60, first: int = 24, **corpus_options) -> Tuple[SyntheticCorpus, List[Path]]:
    corpus = make_corpus(root, n_docs=n_docs, **corpus_options)
    labels = corpus.metadata.read_text().split()
    lists = [root / "first.txt", root / "second.txt"]
    lists[0].write_text("\n".join(labels[:first]) + "\n")
    lists[1].write_text("\n".join(labels[first:]) + "\n")
    return corpus, lists


def sources_file(path: Path, corpus: SyntheticCorpus, lists: List[Path], *requests: Dict[str, object],
                 total_tokens=None) -> Path:
    """A TOML sources file: one [[source]] per metadata list, each with its request."""
    lines = [] if total_tokens is None else [f"total_tokens = {total_tokens}", ""]
    for number, (metadata, request) in enumerate(zip(lists, requests)):
        lines += ["[[source]]", f'name = "{metadata.stem}"', f"metadata_files = [{json.dumps(str(metadata))}]",
                  f"input_files_prefix = {json.dumps(str(corpus.root))}"]
        lines += [f"{key} = {json.dumps(value)}" for key, value in request.items()]
        lines.append("")
    path.write_text("\n".join(lines))
    return path


def origin_of_tokens(corpus: SyntheticCorpus, lists: List[Path], tokens: List[str]) -> Tuple[int, int]:
    """(source index, place in its listing) of the document whose words these are."""
    owners = corpus.document_of(tokens)
    assert len(owners) == 1, owners
    label = owners.pop()
    for index, metadata in enumerate(lists):
        listed = metadata.read_text().split()
        if label in listed:
            return index, listed.index(label)
    raise AssertionError(label)
