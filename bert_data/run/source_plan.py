"""A run's sources (``--sources``) as the plan holds them: where each source's documents lie in
the listed corpus (sources one after the other, each in its own listed order), the copies of
each training document its request gives (``pipeline.sources``), and what each source was
asked for and given, for the manifest.

Every document's *origin* is its source's index and its place in its source's listing
(``document_origins``): what a unit carries to pairing, where each instance's source is
counted and, with ``--record_provenance``, written into its record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from ..format.dataset_layout import TRAIN_CODE, VAL_CODE
from ..pipeline.sources import SourcesSpec, realize, training_list
from ..pipeline.tokens import DOC_POSITION, TOKEN_END, TOKEN_START
from .run_files import slice_paths
from .scratch import load_arrays


def document_origins(starts: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """(source index, place in the source's listing) of each document (corpus positions), as
    an (n, 2) int64 array; ``starts``: where each source begins, then the corpus's end."""
    docs = np.asarray(docs, dtype=np.int64)
    source = np.searchsorted(starts, docs, side="right") - 1
    return np.stack([source, docs - starts[source]], axis=1).astype(np.int64)


@dataclass
class SourcePlan:
    spec: SourcesSpec
    starts: np.ndarray  # int64, n_sources + 1: where each source's documents begin, then the corpus's end
    copies: Optional[np.ndarray] = None  # int64 a document: copies in training (validation documents: 1)
    requested_tokens: List[float] = field(default_factory=list)

    def realize(self, doc_splits: np.ndarray, doc_tokens: Optional[np.ndarray]) -> None:
        """Each training document's copies, from its source's request (``doc_tokens``: every
        document's tokens, for budgets and shares)."""
        train = [np.flatnonzero(doc_splits[a:b] == TRAIN_CODE) + a for a, b in zip(self.starts[:-1], self.starts[1:])]
        tokens = None if doc_tokens is None else [doc_tokens[positions] for positions in train]
        copies, self.requested_tokens = realize(self.spec, train, tokens)
        self.copies = np.ones(len(doc_splits), dtype=np.int64)
        for positions, counts in zip(train, copies):
            self.copies[positions] = counts

    def training_list(self, doc_splits: np.ndarray) -> np.ndarray:
        train = np.flatnonzero(doc_splits == TRAIN_CODE)
        return training_list([train], [self.copies[train]])

    def report(self, doc_splits: np.ndarray, doc_tokens: np.ndarray, instances: Dict[str, List[int]]) -> List[dict]:
        """Each source, as the manifest reports it: what was asked, and the documents and tokens
        listed and realized (training: copies counted; validation: once), and the instances made
        (``instances``: per split, a count a source)."""
        report = []
        for index, source in enumerate(self.spec.sources):
            a, b = int(self.starts[index]), int(self.starts[index + 1])
            codes, tokens, copies = doc_splits[a:b], doc_tokens[a:b], self.copies[a:b]
            train, val = codes == TRAIN_CODE, codes == VAL_CODE
            with_text = tokens > 0
            requested_tokens = self.requested_tokens[index] if index < len(self.requested_tokens) else float("nan")
            if np.isnan(requested_tokens):
                requested_tokens = source.amount * float(tokens[train].sum()) if source.request == "weight" else None
            requested_docs = source.amount * int(np.sum(train & with_text)) if source.request == "weight" else None
            report.append({
                "name": source.name, "index": index,
                "requested": {"by": source.request, source.request: source.amount, "documents": requested_docs,
                              "tokens": requested_tokens},
                "listed": {"documents": b - a, "train_documents": int(train.sum()),
                           "val_documents": int(val.sum()), "train_tokens": int(tokens[train].sum())},
                "realized": {"documents": int(copies[train & with_text].sum()),
                             "tokens": int((copies[train] * tokens[train]).sum()),
                             "instances": int(_at(instances.get("train"), index)),
                             "val_documents": int(np.sum(val & with_text)), "val_tokens": int(tokens[val].sum()),
                             "val_instances": int(_at(instances.get("val"), index))},
            })
        return report


def _at(counts: Optional[List[int]], index: int) -> int:
    return counts[index] if counts and index < len(counts) else 0


def document_tokens(n_docs: int, n_slices: int, work_dir: str) -> np.ndarray:
    """Every document's tokens (int64, by corpus position; 0 for a skipped one), from the
    tokenized slices' document tables (a document read in parts: its parts summed)."""
    tokens = np.zeros(n_docs, dtype=np.int64)
    paths = [slice_paths(work_dir, index)["docs"] for index in range(n_slices)]
    for first in range(0, len(paths), 256):  # a batch at a time: memory stays bounded
        for rows in load_arrays(paths[first:first + 256]):
            if len(rows):
                np.add.at(tokens, rows[:, DOC_POSITION], rows[:, TOKEN_END] - rows[:, TOKEN_START])
    return tokens
