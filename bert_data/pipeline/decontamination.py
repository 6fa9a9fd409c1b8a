"""Decontamination's pure core (``--decontaminate``): the word n-grams of evaluation sets, as a
sorted array of 64-bit hashes (memory: 16 bytes an n-gram, bounded by the evaluation sets'
size), and a document's matches against them.

Words are normalized as deduplication's are (:func:`~.dedup.normalized_text`).  An
evaluation set is read as the generator reads inputs (text, JSON Lines with the text at
``text``, Parquet with a ``text`` column; compressed or not), and each *line* of its texts is
taken on its own: an n-gram never joins two evaluation examples, and a line shorter than ``n``
words has no n-gram (it cannot match, as in GPT-3's filter).

A document's n-grams run over all its words.  With ``--decontaminate_mode passages``, a
passage is a line of the document (in a raw corpus a paragraph, in a corpus of one sentence a line, a sentence): every
line holding a word of a matching n-gram is removed, and the rest of the document kept.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from .dedup import normalized_text, span_hash_chunks, span_hashes
from .documents.types import one_line

DOCUMENTS = "documents"
PASSAGES = "passages"
DECONTAMINATE_MODES = (DOCUMENTS, PASSAGES)
MAX_EVAL_SETS = 64  # one bit each in a 64-bit mask


@dataclass(frozen=True)
class DecontaminationSpec:
    """The evaluation sets (paths or URLs, their order the bits of a match), the n-gram length
    in words, and whether whole documents or only their overlapping lines go
    (``--decontaminate_mode passages``)."""

    paths: Tuple[str, ...]
    ngram: int = 13
    lines_only: bool = False


@dataclass
class EvalNgrams:
    """Every evaluation n-gram: ``hashes`` sorted and distinct (uint64), ``sets`` the bit mask
    of the evaluation sets that hold each."""

    hashes: np.ndarray
    sets: np.ndarray

    def matches(self, ngrams: np.ndarray) -> np.ndarray:
        """For each n-gram hash: the mask of the evaluation sets holding it (0: none)."""
        if not len(self.hashes) or not len(ngrams):
            return np.zeros(len(ngrams), dtype=np.uint64)
        at = np.minimum(np.searchsorted(self.hashes, ngrams), len(self.hashes) - 1)
        return np.where(self.hashes[at] == ngrams, self.sets[at], np.uint64(0))


def text_ngrams(text: str, n: int) -> np.ndarray:
    """The n-gram hashes of every line of an evaluation text."""
    parts = [span_hashes(normalized_text(line), n) for line in text.split("\n")]
    parts = [part for part in parts if len(part)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)


def eval_texts(path: str):
    """The texts of one evaluation set, read as inputs are (see the module's docstring)."""
    from .documents.reading import DocumentTexts

    return DocumentTexts([], input_files=[path], allow_outside_prefix=True)


def build_eval_ngrams(paths: Tuple[str, ...], n: int) -> EvalNgrams:
    hashes, sets = [], []
    for number, path in enumerate(paths):
        for text in eval_texts(path):
            found = np.unique(text_ngrams(text, n))
            hashes.append(found)
            sets.append(np.full(len(found), np.uint64(1) << np.uint64(number), dtype=np.uint64))
    if not hashes:
        return EvalNgrams(np.zeros(0, np.uint64), np.zeros(0, np.uint64))
    all_hashes, all_sets = np.concatenate(hashes), np.concatenate(sets)
    order = np.argsort(all_hashes, kind="stable")
    all_hashes, all_sets = all_hashes[order], all_sets[order]
    firsts = np.flatnonzero(np.r_[True, all_hashes[1:] != all_hashes[:-1]]) if len(all_hashes) else order[:0]
    if not len(firsts):
        return EvalNgrams(all_hashes, all_sets)
    return EvalNgrams(all_hashes[firsts], np.bitwise_or.reduceat(all_sets, firsts))


def evaluation_digests(paths: Tuple[str, ...]) -> List[str]:
    """The SHA-256 of each evaluation set's bytes (a ``--resume`` with other evaluation text
    would remove other documents), read before any work: a missing set is one line here."""
    import hashlib

    from .. import storage
    from .documents.types import InputError

    digests = []
    for path in paths:
        digest = hashlib.sha256()
        try:
            with storage.open_read(path) as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
        except (OSError, storage.StorageError) as error:
            raise InputError(f"--decontaminate {path}: {one_line(error)}") from None
        digests.append(digest.hexdigest())
    return digests


@functools.lru_cache(maxsize=2)
def eval_ngrams(spec: DecontaminationSpec) -> EvalNgrams:
    """The evaluation sets' n-grams, read once a process (a worker screens many slices)."""
    return build_eval_ngrams(spec.paths, spec.ngram)


def document_matches(normalized: str, n: int, evaluation: EvalNgrams) -> int:
    """The mask of the evaluation sets sharing an n-gram with a normalized text."""
    sets = 0
    for chunk in span_hash_chunks(normalized, n):
        found = evaluation.matches(chunk)
        sets |= int(np.bitwise_or.reduce(found)) if len(found) else 0
    return sets


def remove_lines(text: str, n: int, evaluation: EvalNgrams) -> Tuple[Optional[str], int, int]:
    """``(text, sets, lines)``: the text without the lines that hold a word of an n-gram
    shared with an evaluation set (None when nothing matched, the text unchanged), the mask of
    the sets matched, and how many lines were removed."""
    lines = text.split("\n")
    normalized = [normalized_text(line) for line in lines]
    line_of_word = np.repeat(np.arange(len(lines)), [line.count(" ") + 1 if line else 0 for line in normalized])
    found = evaluation.matches(span_hashes(" ".join(line for line in normalized if line), n))
    hits = np.flatnonzero(found)
    if not len(hits):
        return None, 0, 0
    # Every line from the one of an n-gram's first word to that of its last.
    starts, ends = line_of_word[hits], line_of_word[hits + n - 1]
    covered = np.zeros(len(lines) + 1, dtype=np.int64)
    np.add.at(covered, starts, 1)
    np.add.at(covered, ends + 1, -1)
    removed = np.cumsum(covered[:-1]) > 0
    kept = "\n".join(line for line, gone in zip(lines, removed.tolist()) if not gone)
    return kept, int(np.bitwise_or.reduce(found[hits])), int(removed.sum())
