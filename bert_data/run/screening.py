"""The run's side of deduplication and decontamination (``pipeline.screening`` is the core): the
global step over every tokenized slice's signature table, once all are tokenized and before any
unit is paired, and the report of what it removed, per split and per input file.

The decision is never stored: it is a pure function of the slices' signature tables (kept in
the work directory until the run ends) and summaries, so a ``--resume`` recomputes the same
removals whatever the number of workers before and after.
"""

from __future__ import annotations

from typing import Callable, Iterable, Optional

import numpy as np

from ..format.dataset_layout import SPLIT_OF_CODE
from ..pipeline.dedup import decide_removals
from ..pipeline.screening import RemovalReport, ScreeningSpec
from .planning import Plan
from .run_files import slice_paths
from .scratch import load_arrays

BATCH = 256  # signature tables read at once (a URL answers a batch concurrently)


def screen_corpus(plan: Plan, screening: ScreeningSpec, work_dir: str, summaries: Iterable) -> RemovalReport:
    """Decide the removals (``dedup.decide_removals``) and set them on ``plan`` (its units then
    leave the removed documents out).  ``summaries``: every slice's ``SliceSummary``."""
    paths = [slice_paths(work_dir, slice_.index)["screen"] for slice_ in plan.slices]
    tables = [table for first in range(0, len(paths), BATCH) for table in load_arrays(paths[first:first + BATCH])]
    table = np.concatenate([np.asarray(t).reshape(-1, screening.columns) for t in tables]) if tables else \
        np.zeros((0, screening.columns), np.uint64)
    removals = decide_removals(table, screening.dedup, screening.removes_contaminated)
    decontamination = screening.decontamination
    lines_removed = sorted((removal for summary in summaries for removal in summary.lines_removed),
                      key=lambda removal: removal.position)
    report = RemovalReport(removals, lines_removed, decontamination.paths if decontamination else (),
                           bool(decontamination and decontamination.lines_only))
    plan.removed = removals.positions
    plan.removal_report = report
    return report


def file_of(plan: Plan) -> Callable[[int], str]:
    """A document's input file (as listed), from its position: the one whose documents start
    at or before it."""
    sources = [source for slice_ in plan.slices for source in slice_.sources if not source.continues]
    starts = np.asarray([source.corpus_doc for source in sources], dtype=np.int64)
    labels = [source.label for source in sources]

    def of(position: int) -> str:
        return labels[int(np.searchsorted(starts, position, side="right")) - 1]
    return of


def split_report(plan: Plan, split: str) -> Optional[dict]:
    """One split's removals for its manifest: the counts, and the same per input file (a
    per-source breakdown passes its own position -> source function to ``grouped``)."""
    report = plan.removal_report
    if report is None:
        return None
    codes = plan.corpus.doc_splits

    def in_split(position: int) -> bool:
        return SPLIT_OF_CODE[int(codes[position])] == split
    counts = report.counts(in_split)
    counts["by_file"] = report.grouped(file_of(plan), in_split)
    if plan.sources is not None:  # --sources: the same per source, by name
        starts, names = plan.sources.starts, [source.name for source in plan.sources.spec.sources]

        def source_of(position: int) -> str:
            return names[int(np.searchsorted(starts, position, side="right")) - 1]
        counts["by_source"] = report.grouped(source_of, in_split)
    return counts
