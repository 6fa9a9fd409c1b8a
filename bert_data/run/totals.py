"""What a run reports: its totals, accumulated unit by unit (and kept in the journal, so that a
resumed run goes on counting), the documents it skipped, and each split's manifest made from them.
``runner`` owns the run; this module only counts.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..format.dataset_layout import SPLIT_OF_CODE, TRAIN, VAL
from ..format.manifest import Manifest, SkippedDocuments
from ..pipeline.documents.reading import Undecoded
from ..pipeline.documents.types import BINARY
from ..version import __version__
from .planning import Plan
from .screening import split_report
from .run_files import shard_path
from .specs import RunSpec
from .tasks import SliceSummary

MAX_LISTED_SKIPS = 100


# ---------------------------------------------------------------------------- totals

@dataclass
class SplitTotals:
    """One split's counts, accumulated unit by unit (and kept in the journal)."""

    n_units: int = 0
    n_docs: int = 0
    n_examples: int = 0  # records (packed rows with --pack_sequences)
    n_instances: int = 0
    n_record_tokens: int = 0  # record tokens that are not padding
    n_sentences: int = 0
    n_tokens: int = 0
    invalid_utf8_replaced: int = 0
    source_instances: List[int] = field(default_factory=list)  # with --sources: instances a source


@dataclass
class RunTotals:
    """What the manifests report of the units written so far (kept in the journal)."""

    units_done: int = 0
    splits: Dict[str, SplitTotals] = field(default_factory=lambda: {TRAIN: SplitTotals(), VAL: SplitTotals()})
    records_per_shard: Dict[str, int] = field(default_factory=dict)
    shard_counts: Dict[str, int] = field(default_factory=dict)  # per split, once set
    shuffled: List[str] = field(default_factory=list)  # shards ("split/shard") written in their final order
    # Their SHA-256, taken as they were written (the manifest's, without reading them again at the end).
    shuffled_sha256: Dict[str, str] = field(default_factory=dict)

    def add(self, result) -> None:  # a finished unit (runner.UnitResult): its pairs and segments
        pairs = result.pairs
        self.units_done += 1
        totals = self.splits[pairs.split]
        totals.n_units += 1
        totals.n_docs += pairs.n_docs
        totals.n_examples += pairs.n_records
        totals.n_instances += pairs.n_instances
        totals.n_record_tokens += pairs.n_record_tokens
        totals.n_sentences += pairs.n_sentences
        totals.n_tokens += pairs.n_tokens
        totals.invalid_utf8_replaced += pairs.n_replaced
        for index, count in enumerate(pairs.source_instances or []):
            if index >= len(totals.source_instances):
                totals.source_instances.append(0)
            totals.source_instances[index] += count
        for segment in result.segments:
            key = f"{segment.split}/{segment.shard}"
            self.records_per_shard[key] = self.records_per_shard.get(key, 0) + segment.n_records

    @property
    def n_examples(self) -> int:
        return sum(totals.n_examples for totals in self.splits.values())

    def to_json(self) -> dict:
        """The totals as of now, for a journal record: a copy (a commit's thread may write the
        record while the run goes on counting)."""
        return copy.deepcopy({
            "units_done": self.units_done, "records_per_shard": self.records_per_shard,
            "splits": {split: dataclasses.asdict(totals) for split, totals in self.splits.items()},
            "shard_counts": self.shard_counts, "shuffled": self.shuffled, "shuffled_sha256": self.shuffled_sha256})

    @classmethod
    def from_json(cls, data: dict) -> "RunTotals":
        return cls(data["units_done"], {split: SplitTotals(**totals) for split, totals in data["splits"].items()},
                   data["records_per_shard"], data.get("shard_counts", {}), data.get("shuffled", []),
                   data.get("shuffled_sha256", {}))


class SkippedTotals:
    """Documents skipped, per split: the missing files, then what the tokenized slices report
    (recounted from the slices' summaries on every run, so a resumed run counts each once)."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.by_split = {TRAIN: SkippedDocuments(), VAL: SkippedDocuments()}
        self.undecoded = Undecoded()  # documents read with bytes not in their encoding (the console's warning)
        for entry, reason, split in plan.missing:
            self._add(split, reason, entry.label)

    def _add(self, split: str, reason: str, label: str) -> None:
        skipped = self.by_split[split]
        skipped.count += 1
        skipped.by_reason[reason] = skipped.by_reason.get(reason, 0) + 1
        if len(skipped.first) < MAX_LISTED_SKIPS:
            skipped.first.append({"path": label, "reason": reason})

    def add_slices(self, summaries: List[SliceSummary]) -> None:
        """A document read in parts is skipped once, not once a part, and a blank part does not
        make it blank (a binary part is reported all the same: text was lost)."""
        kept_in_parts = {position for summary in summaries for position in summary.kept_in_parts}
        seen = set()
        for summary in summaries:
            self.undecoded.merge(summary.undecoded)
            for skip in summary.skips:
                if skip.in_parts:
                    if (skip.reason, skip.corpus_doc) in seen or (
                            skip.reason != BINARY and skip.corpus_doc in kept_in_parts):
                        continue
                    seen.add((skip.reason, skip.corpus_doc))
                split = SPLIT_OF_CODE[int(self.plan.corpus.doc_splits[skip.corpus_doc])]
                self._add(split, skip.reason, skip.label)

    @property
    def count(self) -> int:
        return sum(skipped.count for skipped in self.by_split.values())

    def reasons(self) -> Dict[str, int]:
        merged: Dict[str, int] = {}
        for skipped in self.by_split.values():
            for reason, n in skipped.by_reason.items():
                merged[reason] = merged.get(reason, 0) + n
        return merged


def make_manifests(spec: RunSpec, plan: Plan, totals: RunTotals, skipped: SkippedTotals,
                   sizes: Optional[Dict[str, int]] = None,
                   digests: Optional[Dict[str, Dict[str, str]]] = None,
                   per_source: Optional[List[dict]] = None) -> Dict[str, Manifest]:
    """Each split's manifest (``run_files.finalize`` writes them, last).  Each describes its own
    split: its counts, and the options it was made with (``spec.options``: with the effective
    values of options left to their defaults).  ``sizes``: shard path -> bytes, for shards that
    are not local files (uploaded from staging); ``digests``: split -> the SHA-256 of each of its
    files (``format.checksums.split_digests``); ``per_source``: with --sources, each source's
    request and realization (``SourcePlan.report``), in every split's manifest."""
    output = spec.output
    manifests = {}
    vocab_path, tokenizer_path = spec.tokenizer.recorded_paths()
    for split, directory in output.split_dirs().items():
        names = [os.path.basename(shard_path(directory, output, shard)) for shard in range(totals.shard_counts[split])]
        counts = totals.splits[split]
        options = dict(spec.options)
        options["num_output_files"] = totals.shard_counts[split]  # as set, when shards are sized
        if split == VAL:
            options["dupe_factor"] = 1  # validation instances are made once
        manifest = Manifest(
            options=options,
            n_examples=counts.n_examples,
            n_docs=counts.n_docs,
            n_instances=counts.n_instances,
            fill_rate=counts.n_record_tokens / (counts.n_examples * spec.instances.max_seq_length) if counts.n_examples
            else None,
            split=split,
            examples_per_file={name: totals.records_per_shard.get(f"{split}/{i}", 0) for i, name in enumerate(names)},
            bytes_per_file={name: sizes[path] if sizes else os.path.getsize(path)
                            for name, path in ((name, os.path.join(directory, name)) for name in names)},
            sha256_per_file=dict((digests or {}).get(split, {})),
            features=list(output.features) if output.kind.instances else [],
            n_docs_listed=plan.n_listed[split],
            n_sentences=counts.n_sentences,
            n_tokens=counts.n_tokens,
            n_units=counts.n_units,
            invalid_utf8_replaced=counts.invalid_utf8_replaced,
            documents_skipped=skipped.by_split[split],
            n_docs_held_out=plan.excluded_as_validation if split == TRAIN else 0,
            vocab_sha256=plan.vocab.sha256,
            vocab_path=vocab_path,
            tokenizer_path=tokenizer_path,
            vocab_size=plan.vocab.size,
            bert_data_version=__version__,
            documents_removed=split_report(plan, split),
            per_source=per_source,
        )
        manifests[split] = manifest
    return manifests
