"""The scheduler: the three kinds of task fed to an executor in dependency order, and how many
shards each split gets (:class:`ShardCounts`).  The run (``runner``) appends what the scheduler
yields to the shards, in unit order."""

from __future__ import annotations

import concurrent.futures as cf
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from ..format.dataset_layout import TRAIN, VAL
from ..format.dataset_layout import SPLIT_OF_CODE
from ..pipeline.documents.types import BINARY, COMPRESSED_UNNAMED, Skip
from ..pipeline.tokens import DOC_POSITION, TOKEN_END, TOKEN_START
from .assembly import ShardAssembler
from .executors import wait_first
from .pieces import Segment
from .planning import Plan
from .run_files import slice_paths
from .scratch import load_arrays
from .screening import screen_corpus
from .specs import EncodeSpec, OutputSpec, RunSpec
from .split_packing import SplitPacker
from .tasks import SliceSummary, encode_shards, pair_unit, record_bytes, tokenize_slice
from .units import SliceTable, UnitPairs, make_encode_tasks


@dataclass
class UnitResult:
    """What the manifest needs from one finished unit."""

    pairs: UnitPairs
    segments: List[Segment] = field(default_factory=list)  # its encode tasks' so far, in the order they ended
    encode_tasks_left: int = 0
    begun: bool = False  # the runner appends to the shards for it (the unit before is committed)
    appended: int = 0  # of its segments, those the runner has appended


class Scheduler:
    """Runs the three kinds of task on an executor, in dependency order:

    tokenize (one per slice, in corpus order) -> pair (one per unit, once every slice holding
    its documents is tokenized) -> encode (a few per unit).

    With the corpus mixed, a unit's documents come from everywhere, so pairing starts when
    tokenizing ends; with ``--keep_corpus_order`` a unit is ready as soon as its own slices are.
    Ready encode and pair tasks go before new tokenize tasks, and at most ``open_units`` units
    are between their pairing and their merge, so the data held here stays bounded.  Yields
    units, as each one's pieces are all written, in any order.
    """

    def __init__(self, plan: Plan, spec: RunSpec, executor: cf.Executor, work_dir: str,
                 first_unit: int = 0, parallelism: int = 1, done_slices: Optional[Dict[int, SliceSummary]] = None,
                 shards: Optional["ShardCounts"] = None, records_before: Optional[Dict[str, int]] = None):
        self.plan, self.executor, self.work_dir = plan, executor, work_dir
        # What each kind of task receives (made once: the same small objects for every task).
        self.tokenizing, self.pairing, self.encoding = spec.tokenizing, spec.pairing, spec.encoding
        self.screening = spec.screening
        self.named_files = bool(spec.output.files)  # Google's --output_file (see records_before)
        self.shards = shards
        self.waiting_for_count: Dict[int, UnitPairs] = {}  # paired units of splits not yet sized
        # Tasks in flight: every worker busy, and enough queued that workers do not wait while
        # the parent appends a unit to the shards.
        self.parallelism = parallelism
        self.max_in_flight = 2 * parallelism + 2
        self.open_units = parallelism + 2
        self.in_flight: Dict[cf.Future, tuple] = {}
        self.table = SliceTable.of(plan.slices)
        self.summaries: Dict[int, SliceSummary] = dict(done_slices or {})
        self.to_tokenize = [slice_.index for slice_ in plan.slices if slice_.index not in self.summaries]
        self.ready: List[tuple] = []  # (kind, index, args) of encode tasks whose inputs are here
        # Units paired and not yet all encoded: their encode tasks' segments gather here as the
        # tasks end (the runner appends those of the next unit in order at once).
        self.units: Dict[int, UnitResult] = {}
        self.next_unit = first_unit  # next unit to pair
        self.unmerged_units = 0
        self.docs_tokenized = sum(plan.slices[index].n_docs for index in self.summaries)
        self.bytes_done = 0
        self.instances_paired = 0
        self.records_encoded = 0  # by the encode tasks finished so far (the progress bar's count)
        self.binary_skips: List[Skip] = []  # reported as slices finish
        # Google's --output_file spreads the run's instance i over file i mod N: a unit's encode
        # tasks need the instances of the units before it, so they wait for those to be paired.
        self.records_before = dict(records_before or {TRAIN: 0, VAL: 0})
        self.next_to_encode = first_unit
        # --pack_sequences: each split packed as a whole once all its units are paired, so every
        # unit is paired, those a resumed run has written too (their lengths are the split's).
        self.packer = None
        if spec.pairing.packing is not None:
            units_per_split: Dict[str, List[int]] = {}
            for unit in plan.units:
                units_per_split.setdefault(unit.split, []).append(unit.index)
            self.packer = SplitPacker(units_per_split, spec.pairing.packing, spec.pairing.seed, work_dir)
            self.next_unit = 0
        self.first_unit = first_unit
        self.paired: Dict[int, UnitPairs] = {}  # packed: paired units waiting for their split's packing

    @property
    def tokenized_prefix(self) -> int:
        """Slices 0 .. N - 1 are all tokenized."""
        done = self.to_tokenize[0] if self.to_tokenize else len(self.plan.slices)
        pending = [index for kind, index, _ in self.in_flight.values() if kind == "tokenize"]
        return min([done] + pending)

    def fill(self) -> None:
        while len(self.in_flight) < self.max_in_flight:
            if self.ready:
                # The earliest unit's first: units are appended in unit order, so a later unit's
                # pieces wait for it, and the parent's appends would all come at the end, while
                # the workers have nothing to do.
                kind, index, args = self.ready.pop(min(range(len(self.ready)), key=lambda at: self.ready[at][1]))
                self.in_flight[self.executor.submit(encode_shards, *args)] = (kind, index, None)
                continue
            units = self.plan.units
            if (self.next_unit < len(units) and (self.packer is not None or self.unmerged_units < self.open_units)
                    and units[self.next_unit].last_slice < self.tokenized_prefix and self.screened()):
                unit = units[self.next_unit]
                work = self.plan.unit_work(unit)
                future = self.executor.submit(pair_unit, work, self.table, self.pairing, self.work_dir)
                self.in_flight[future] = ("pair", unit.index, None)
                self.next_unit += 1
                self.unmerged_units += 1
                continue
            if not self.to_tokenize:
                return
            index = self.to_tokenize.pop(0)
            future = self.executor.submit(tokenize_slice, self.plan.slices[index], self.tokenizing, self.work_dir)
            self.in_flight[future] = ("tokenize", index, None)

    def screened(self) -> bool:
        """With --dedup or --decontaminate: every slice is tokenized and the removals are decided
        (here, once, in the parent; every unit waits for every slice, see ``make_plan``)."""
        if self.screening is None or self.plan.removal_report is not None:
            return True
        if self.tokenized_prefix < len(self.plan.slices):
            return False
        screen_corpus(self.plan, self.screening, self.work_dir, self.summaries.values())
        return True

    def finished_units(self):
        """Wait for some tasks; yield the units whose output is all written."""
        done, _ = wait_first(list(self.in_flight), self.executor)
        for future in done:
            kind, index, _ = self.in_flight.pop(future)
            value = future.result()
            if kind == "tokenize":
                self.summaries[index] = value
                self.docs_tokenized += self.plan.slices[index].n_docs
                self.bytes_done += value.n_bytes
                self.binary_skips += [skip for skip in value.skips if skip.reason in (BINARY, COMPRESSED_UNNAMED)]
            elif kind == "pair" and self.packer is not None:
                yield from self._packed(index, value)
            elif kind == "pair":
                self.units[index] = UnitResult(value)
                self.instances_paired += value.n_instances
                self.waiting_for_count[index] = value
                yield from self._settled()
            else:
                self.records_encoded += sum(segment.n_records for segment in value)
                result = self.units[index]
                result.segments += value
                result.encode_tasks_left -= 1
                if not result.encode_tasks_left:
                    yield self.units.pop(index)

    def _settled(self):
        """Encode the units waiting whose split's shard count is now set."""
        for ready_index in self.shards.settle(self.waiting_for_count):
            if self.named_files:  # in unit order, without gaps (see records_before)
                if ready_index != self.next_to_encode:
                    break
                self.next_to_encode += 1
            yield from self._encode(self.waiting_for_count.pop(ready_index))

    def _packed(self, index: int, value: UnitPairs):
        """A paired unit when splits are packed whole: its lengths kept; once its split's units
        are all paired, the split packed and each unit still to write given its rows."""
        self.packer.add(index, value.lengths)
        value.lengths = None
        if index >= self.first_unit:  # (a resumed run pairs the units it has written for their lengths only)
            self.units[index] = UnitResult(value)
            self.instances_paired += value.n_instances
            self.paired[index] = value
        if not self.packer.ready(value.split):
            return
        for unit, (rows, tokens) in self.packer.blocks(value.split).items():
            if unit < self.first_unit:
                continue
            paired = self.paired.pop(unit)
            paired.pairs, paired.n_record_tokens = rows, tokens
            paired.n_records = rows.n_records if rows is not None else 0
            self.waiting_for_count[unit] = paired
        yield from self._settled()

    def _encode(self, value: UnitPairs):
        """Queue a paired unit's encode tasks (none for a unit without text: it is done)."""
        result = self.units[value.unit_index]
        if value.pairs is not None:
            count = self.shards.counts[value.split]
            rotation = self.records_before[value.split] if self.named_files else None
            for task in make_encode_tasks(value.unit_index, value.split, value.pairs, count, rotation):
                self.ready.append(("encode", value.unit_index, (task, self.encoding, self.work_dir)))
                result.encode_tasks_left += 1
        self.records_before[value.split] += value.n_records
        value.pairs = None  # the tasks hold what is needed; keep the parent lean
        if not result.encode_tasks_left:
            yield self.units.pop(value.unit_index)

    def merged(self) -> None:
        self.unmerged_units -= 1


class ShardCounts:
    """How many shards each split gets: ``--num_output_files``, or, with ``--records_per_file`` /
    ``--megabytes_per_file``, a count set when the split's first unit is paired (whichever
    unit's pairing finishes first, the first unit decides, so the count is the same in every
    run): that unit is a sample of the split, so its instances per token, times the split's
    tokens, estimate the split's records, and a sample of its records, encoded, their size."""

    def __init__(self, plan: Plan, output: OutputSpec, encoding: EncodeSpec, vocab, assembler: ShardAssembler,
                 counts: Dict[str, int], work_dir: str):
        self.plan, self.output, self.assembler, self.work_dir = plan, output, assembler, work_dir
        self.encoding, self.vocab = encoding, vocab  # to encode a sample of records (shards sized by megabytes)
        self.counts = counts  # the journaled totals' own dict: set counts are journaled with them
        self.split_tokens: Optional[Dict[str, int]] = None
        self.first_unit = {}
        for unit in plan.units:
            self.first_unit.setdefault(unit.split, unit.index)
        for split in output.split_dirs():
            if split not in counts and not output.sizes_shards:
                self.set(split, output.num_output_files)

    def set(self, split: str, count: int) -> None:
        self.counts[split] = count
        self.assembler.open_split(split, count)

    def settle(self, waiting: Dict[int, UnitPairs]) -> List[int]:
        """The waiting units whose split has (now) a shard count, in unit order."""
        for split, first in self.first_unit.items():
            if split not in self.counts and first in waiting:
                self.set(split, self.estimate(waiting[first]))
        return sorted(index for index, value in waiting.items() if value.split in self.counts)

    def estimate(self, first: UnitPairs) -> int:
        if not first.n_tokens or first.pairs is None:
            return 1
        if self.split_tokens is None:  # once: every slice's table is read
            self.split_tokens = split_token_counts(self.plan, self.work_dir)
        split_tokens = self.split_tokens[first.split]
        records = first.n_records * split_tokens / first.n_tokens
        output = self.output
        if output.records_per_file is not None:
            return max(1, round(records / output.records_per_file))
        target = output.megabytes_per_file * 1e6
        # A segment is one unit's share of a shard: it depends on the count being set, so the
        # count is estimated uncompressed first, then with segments of the size it implies.
        uncompressed = records * self._record_bytes(first, first.n_records)
        count = max(1, round(uncompressed / target))
        if output.compression:
            # Shuffled shards are compressed as one stream; others a segment a unit.
            segment_rows = 1 << 30 if output.shuffles_shards else max(1, first.n_records // count)
            count = max(1, round(records * self._record_bytes(first, segment_rows) / target))
        return count

    def finish(self) -> None:
        """A split with no unit of text still gets its (empty) shards."""
        for split in self.output.split_dirs():
            if split not in self.counts:
                self.set(split, 1 if self.output.sizes_shards else self.output.num_output_files)

    def _record_bytes(self, first: UnitPairs, segment_rows: int) -> float:
        return record_bytes(first.pairs, self.encoding, self.vocab, self.output.compression, segment_rows)


def split_token_counts(plan: Plan, work_dir: str) -> Dict[str, int]:
    """Tokens of each split, from the tokenized slices' document tables (with --sources, each
    training document's as many times as it has copies)."""
    counts = {TRAIN: 0, VAL: 0}
    paths = [slice_paths(work_dir, slice_.index)["docs"] for slice_ in plan.slices]
    # A batch at a time: a URL answers a batch's requests concurrently, and memory stays bounded.
    tables = (rows for first in range(0, len(paths), 256) for rows in load_arrays(paths[first:first + 256]))
    for rows in tables:
        if not len(rows):
            continue
        if plan.removed is not None and len(plan.removed):  # removed documents are not written
            rows = rows[~np.isin(rows[:, DOC_POSITION], plan.removed)]
        tokens = rows[:, TOKEN_END] - rows[:, TOKEN_START]
        codes = plan.corpus.doc_splits[rows[:, DOC_POSITION]]
        if plan.sources is not None:  # a document repeated by its source's request counts each time
            tokens = tokens * plan.sources.copies[rows[:, DOC_POSITION]]
        for code, split in SPLIT_OF_CODE.items():
            counts[split] += int(tokens[codes == code].sum())
    return counts


def slices_still_needed(plan: Plan) -> List[int]:
    """For each unit u: the first slice any unit from u on needs (slices before it can go)."""
    needed, lowest = [0] * (len(plan.units) + 1), len(plan.slices)
    needed[-1] = lowest
    for unit in reversed(plan.units):
        lowest = min(lowest, unit.first_slice)
        needed[unit.index] = lowest
    return needed
