"""Screening: what the tokenize phase records of each document for deduplication and
decontamination, before its text is split into sentences (:class:`DocumentScreen`), and the
report of what a run removed (:class:`RemovalReport`).

Per slice, in parallel: every document gets a row of the slice's *signature table*
(:mod:`.dedup`: its position, exact digest, the evaluation sets it shares an n-gram with and,
for near deduplication, its MinHash), and with ``--decontaminate_mode passages`` its overlapping
lines are removed here (:mod:`.decontamination`).  The removals themselves are decided once the whole corpus is
screened, by one deterministic global step in listed order (:func:`.dedup.decide_removals`):
the documents it removes are then left out of the units as documents without text are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence

import numpy as np

from .decontamination import DecontaminationSpec, EvalNgrams, document_matches, remove_lines
from .dedup import (REMOVED_CONTAMINATED, REMOVED_EXACT, REMOVED_NEAR, SIGNATURE_CONTAMINATION, SIGNATURE_MINHASH,
                    SIGNATURE_POSITION, DedupSpec, Removals, normalized_text, signature_row)
from .documents.types import Document


@dataclass(frozen=True)
class ScreeningSpec:
    """Deduplication and decontamination, either of which may be off (None)."""

    dedup: Optional[DedupSpec] = None
    decontamination: Optional[DecontaminationSpec] = None

    @property
    def columns(self) -> int:
        return self.dedup.columns if self.dedup is not None else SIGNATURE_MINHASH

    @property
    def removes_contaminated(self) -> bool:
        """Whole documents go (not only their overlapping lines)."""
        return self.decontamination is not None and not self.decontamination.lines_only


@dataclass
class LineRemoval:
    """Lines removed from one document (or part of one) with ``--decontaminate_mode passages``."""

    position: int
    sets: int
    lines: int
    emptied: bool  # no line was left: the document (part) was dropped

    def to_json(self) -> list:
        return [self.position, self.sets, self.lines, self.emptied]


class DocumentScreen:
    """Screens one slice's documents as they pass (``screen(documents)`` yields them, overlapping
    lines removed), then ``table()``: the slice's signature table, ``lines_removed``: what was removed."""

    def __init__(self, spec: ScreeningSpec, evaluation: Optional[EvalNgrams]):
        self.spec, self.evaluation = spec, evaluation
        self.rows: List[np.ndarray] = []
        self.lines_removed: List[LineRemoval] = []

    def screen(self, documents: Iterable[Document]) -> Iterator[Document]:
        decontamination = self.spec.decontamination
        for document in documents:
            contamination = 0
            if decontamination is not None and decontamination.lines_only:
                kept, sets, count = remove_lines(document.text, decontamination.ngram, self.evaluation)
                if kept is not None:
                    emptied = not kept.strip()
                    self.lines_removed.append(LineRemoval(document.corpus_doc, sets, count, emptied))
                    if emptied:
                        continue
                    document.text = kept
            normalized = normalized_text(document.text)
            if decontamination is not None and not decontamination.lines_only:
                contamination = document_matches(normalized, decontamination.ngram, self.evaluation)
            if self.spec.dedup is not None:
                if normalized:  # a document without words is skipped anyway: nothing to compare
                    self.rows.append(signature_row(document.corpus_doc, normalized, self.spec.dedup, contamination))
            elif contamination:
                row = np.zeros(self.spec.columns, dtype=np.uint64)
                row[SIGNATURE_POSITION], row[SIGNATURE_CONTAMINATION] = document.corpus_doc, contamination
                self.rows.append(row)
            yield document

    def table(self) -> np.ndarray:
        if not self.rows:
            return np.zeros((0, self.spec.columns), dtype=np.uint64)
        return np.stack(self.rows)


# ---------------------------------------------------------------------------- the report

EXACT_KEY, NEAR_KEY, CONTAMINATED_KEY = "exact_duplicates", "near_duplicates", "contaminated"
_REASON_KEYS = {REMOVED_EXACT: EXACT_KEY, REMOVED_NEAR: NEAR_KEY, REMOVED_CONTAMINATED: CONTAMINATED_KEY}


@dataclass
class RemovalReport:
    """What screening removed, by document: the global step's removals and the lines removed
    with ``--decontaminate_mode passages``.  :meth:`grouped` counts them by any grouping of
    documents (an input file today; a source of ``--sources`` passes its own function of a
    position)."""

    removals: Removals
    lines_removed: List[LineRemoval] = field(default_factory=list)
    eval_names: Sequence[str] = ()
    lines_mode: bool = False

    def set_names(self, mask: int) -> List[str]:
        return [name for bit, name in enumerate(self.eval_names) if mask >> bit & 1]

    def counts(self, chosen: Callable[[int], bool] = lambda position: True) -> dict:
        """``documents`` removed in all; how many as exact and near duplicates; with
        decontamination, per evaluation set, the documents removed (``contaminated``: a document
        counts under every set it matches) or, with ``--decontaminate_mode passages``, the documents
        touched, lines removed and documents left empty (``contaminated_lines``)."""
        result: Dict[str, object] = {"documents": 0, EXACT_KEY: 0, NEAR_KEY: 0}
        contaminated = {name: 0 for name in self.eval_names}
        for position, reason, sets in zip(self.removals.positions.tolist(), self.removals.reasons.tolist(),
                                          self.removals.eval_sets.tolist()):
            if not chosen(position):
                continue
            result["documents"] += 1
            if reason == REMOVED_CONTAMINATED:
                for name in self.set_names(sets):
                    contaminated[name] += 1
            else:
                result[_REASON_KEYS[reason]] += 1
        if self.eval_names and not self.lines_mode:
            result[CONTAMINATED_KEY] = contaminated
        if self.lines_mode:
            lines = {name: {"documents": 0, "lines": 0, "documents_emptied": 0} for name in self.eval_names}
            for removal in self.lines_removed:
                if not chosen(removal.position):
                    continue
                result["documents"] += int(removal.emptied)
                for name in self.set_names(removal.sets):
                    lines[name]["documents"] += 1
                    lines[name]["lines"] += removal.lines
                    lines[name]["documents_emptied"] += int(removal.emptied)
            result["contaminated_lines"] = lines
        return result

    def grouped(self, group_of: Callable[[int], str], chosen: Callable[[int], bool] = lambda position: True
                ) -> Dict[str, dict]:
        """Counts per group (``group_of``: a document's position -> its group's name), only
        groups with a removal, in name order."""
        positions = set(self.removals.positions.tolist()) | {removal.position for removal in self.lines_removed}
        groups = sorted({group_of(position) for position in positions if chosen(position)})
        return {group: self.counts(lambda position, group=group: chosen(position) and group_of(position) == group)
                for group in groups}
