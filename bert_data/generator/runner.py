"""Orchestration: plan units, run them on an executor, assemble shards, write the manifest.

This module owns the run: the scheduler that feeds tasks to the executor in dependency order,
the run's totals and the manifests.  Around it: ``planning`` (checks and units, before any
work), ``output`` (the output directory, lock and journal), ``executors`` (where tasks run),
``tasks`` (what they compute) and ``assembly`` (pieces into shards).

The stages know nothing of processes or files-in-progress; this module knows nothing of
tokens.  Any ``concurrent.futures``-style executor works (a local process pool by default;
Dask's ``Client.get_executor()`` for a cluster).  Pieces are appended to the shards strictly
in unit order, so the output bytes do not depend on how many workers there are or in which
order they finish.

Nothing lost, nothing silent:

* everything that can be checked is checked before any work (``make_plan``);
* shards are written as ``*.tfrecords.tmp`` and renamed when complete, and the manifest is
  written last: a directory without it is not a finished dataset;
* after each unit is appended, a journal records the shards' sizes and the run's totals, so
  ``--resume`` truncates the shards to the last whole unit and goes on from there, giving the
  same bytes as an uninterrupted run;
* a lock file keeps a second run out of an output directory in use;
* on Ctrl-C or SIGTERM the workers are stopped at once and the journal kept for ``--resume``;
  on any other failure the temporary files are removed.
"""

from __future__ import annotations

import concurrent.futures as cf
import errno
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .. import __version__
from ..config import GeneratorConfig
from ..format.manifest import Manifest, SkippedDocuments
from .assembly import Segment, ShardAssembler
from .documents import BINARY, TRAIN, VAL
from .executors import default_executor, stop_executor
from .output import (GenerationError, Interrupted, OutputLock, create_output_dir, discard_unjournaled_work,
                     lock_path, manifest_name, prepare_output_dir, read_journal, shard_path, split_dirs, work_dir_of,
                     write_journal)
from .planning import Plan, make_plan, warn
from .tasks import UnitError, UnitPairs, encode_shards, make_encode_tasks, pair_unit, pool_path, tokenize_slice

MAX_LISTED_SKIPS = 100


# ---------------------------------------------------------------------------- totals

@dataclass
class RunTotals:
    """What the manifest reports, accumulated unit by unit (and kept in the journal)."""

    units_done: int = 0
    n_docs: Dict[str, int] = field(default_factory=lambda: {TRAIN: 0, VAL: 0})
    n_examples: Dict[str, int] = field(default_factory=lambda: {TRAIN: 0, VAL: 0})
    records_per_shard: Dict[str, int] = field(default_factory=dict)
    n_sentences: int = 0
    n_tokens: int = 0
    n_chars: int = 0
    invalid_utf8_replaced: int = 0
    skipped_by_reason: Dict[str, int] = field(default_factory=dict)
    skipped_first: List[dict] = field(default_factory=list)

    def add(self, result: "UnitResult") -> None:
        pairs = result.pairs
        self.units_done += 1
        for split in (TRAIN, VAL):
            self.n_docs[split] += pairs.n_docs[split]
            self.n_examples[split] += pairs.n_instances[split]
        for segment in result.segments:
            key = f"{segment.split}/{segment.shard}"
            self.records_per_shard[key] = self.records_per_shard.get(key, 0) + segment.n_records
        self.n_sentences += pairs.n_sentences
        self.n_tokens += pairs.n_tokens
        self.n_chars += pairs.n_bytes
        self.invalid_utf8_replaced += pairs.n_replaced
        for skip in pairs.skips:
            self.add_skip(skip.reason, skip.label)

    def add_skip(self, reason: str, label: str) -> None:
        self.skipped_by_reason[reason] = self.skipped_by_reason.get(reason, 0) + 1
        if len(self.skipped_first) < MAX_LISTED_SKIPS:
            self.skipped_first.append({"path": label, "reason": reason})

    def to_json(self) -> dict:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict) -> "RunTotals":
        return cls(**data)


@dataclass
class RunSummary:
    manifests: Dict[str, dict]
    seconds: float
    resumed_from_unit: int = 0


def _progress(total_docs: int, enabled: bool, initial: int = 0):
    from tqdm import tqdm

    tqdm.monitor_interval = 0  # no monitor thread: worker processes are forked
    return tqdm(total=total_docs, initial=initial, unit="doc", disable=not enabled, dynamic_ncols=True,
                file=sys.stderr, desc="documents")


@dataclass
class UnitResult:
    """What the manifest needs from one finished unit."""

    pairs: UnitPairs
    segments: List[Segment] = field(default_factory=list)
    encode_tasks_left: int = 0


class _Scheduler:
    """Runs the three kinds of task on an executor, in dependency order:

    tokenize (one per slice) -> pair (one per unit) -> encode (a few per unit and split).

    Ready pair and encode tasks go before new tokenize tasks, and at most ``open_units`` units
    are between their first task and their merge, so the data held here stays bounded.
    Yields units, as each one's pieces are all written, in any order.
    """

    def __init__(self, plan: Plan, config: GeneratorConfig, executor: cf.Executor, work_dir: str,
                 first_unit: int = 0, parallelism: int = 1, records_before: Optional[Dict[str, int]] = None):
        self.plan, self.config, self.executor, self.work_dir = plan, config, executor, work_dir
        # Tasks in flight: every worker busy, and enough queued that workers do not wait while
        # the parent appends a unit to the shards.
        self.window = 2 * parallelism + 2
        self.open_units = parallelism + 2
        self.in_flight: Dict[cf.Future, tuple] = {}
        self.slices: Dict[int, list] = {}
        self.slices_missing: Dict[int, int] = {}
        self.ready: List[tuple] = []  # (kind, args) of pair and encode tasks whose inputs are here
        self.units: Dict[int, UnitResult] = {}
        self.next_unit = first_unit  # next unit whose slices are to be submitted
        self.next_slice = 0
        self.unmerged_units = 0
        self.docs_done = 0
        self.bytes_done = 0
        self.records_encoded = 0  # by the encode tasks finished so far (the progress bar's count)
        # Google's --output_file spreads the run's instance i over file i mod N: a unit's encode
        # tasks need the instances of the units before it, so they wait for those to be paired.
        self.records_before = dict(records_before or {TRAIN: 0, VAL: 0})
        self.paired: Dict[int, UnitPairs] = {}
        self.next_to_encode = first_unit

    def fill(self) -> None:
        while len(self.in_flight) < self.window:
            if self.ready:
                kind, index, args = self.ready.pop(0)
                function = pair_unit if kind == "pair" else encode_shards
                self.in_flight[self.executor.submit(function, *args)] = (kind, index, None)
                continue
            if self.next_unit >= len(self.plan.units):
                return
            unit = self.plan.units[self.next_unit]
            if self.next_slice == 0:
                if self.unmerged_units >= self.open_units:
                    return
                self.unmerged_units += 1
                self.slices[unit.index] = [None] * len(unit.slices)
                self.slices_missing[unit.index] = len(unit.slices)
            # Work files number units from 1, as messages do.
            tokens_path = os.path.join(self.work_dir,
                                       f"unit-{unit.index + 1:07d}-slice-{self.next_slice:05d}.tokens.npy")
            future = self.executor.submit(tokenize_slice, unit.slices[self.next_slice], self.config, tokens_path)
            self.in_flight[future] = ("tokenize", unit.index, self.next_slice)
            self.next_slice += 1
            if self.next_slice == len(unit.slices):
                self.next_unit, self.next_slice = self.next_unit + 1, 0

    def finished_units(self):
        """Wait for some tasks; yield the units whose output is all written."""
        done, _ = cf.wait(list(self.in_flight), return_when=cf.FIRST_COMPLETED)
        for future in done:
            kind, index, slice_number = self.in_flight.pop(future)
            value = future.result()
            if kind == "tokenize":
                self.docs_done += value.n_docs_seen
                self.bytes_done += value.n_bytes
                self.slices[index][slice_number] = value
                self.slices_missing[index] -= 1
                if not self.slices_missing[index]:
                    del self.slices_missing[index]
                    unit = self.plan.units[index]
                    self.ready.append(("pair", index, (unit, self.slices.pop(index), self.config, self.work_dir)))
            elif kind == "pair":
                self.paired[index] = value
                yield from self.encode_paired()
            else:
                self.records_encoded += sum(segment.n_records for segment in value)
                result = self.units[index]
                result.segments += value
                result.encode_tasks_left -= 1
                if not result.encode_tasks_left:
                    yield self.units.pop(index)

    def encode_paired(self):
        """Queue the encode tasks of paired units (in unit order with --output_file, see
        ``records_before``); yield those that have nothing to encode."""
        if self.config.output_files:
            indices = []
            while self.next_to_encode in self.paired:
                indices.append(self.next_to_encode)
                self.next_to_encode += 1
        else:
            indices = list(self.paired)
        for index in indices:
            value = self.paired.pop(index)
            result = self.units[index] = UnitResult(value)
            for split, data in value.splits.items():
                rotation = self.records_before[split] if self.config.output_files else None
                for task in make_encode_tasks(index, split, data, self.config.num_output_files, rotation):
                    self.ready.append(("encode", index, (task, self.config, self.work_dir)))
                    result.encode_tasks_left += 1
                self.records_before[split] += value.n_instances[split]
            value.splits = {}  # the tasks hold what is needed; keep the parent lean
            if not result.encode_tasks_left:
                yield self.units.pop(index)

    def merged(self) -> None:
        self.unmerged_units -= 1


def generate(
    config: GeneratorConfig,
    executor: Optional[cf.Executor] = None,
    progress: bool = True,
    skip_missing: bool = False,
    parallelism: Optional[int] = None,
    allow_case_mismatch: bool = False,
) -> RunSummary:
    """Run the whole generator. Raises ConfigError/InputError/VocabError before any work,
    GenerationError for a failure during it, ``output.Interrupted`` (a KeyboardInterrupt) when
    interrupted (resumable).  A vocabulary whose case disagrees with ``do_lower_case`` is a
    ConfigError unless ``allow_case_mismatch``.

    ``executor``: any ``concurrent.futures`` executor (default: a local process pool of
    ``config.num_workers``); ``parallelism``: how many tasks it runs at once (default
    ``config.workers``), which sets how many tasks are kept in flight.
    """
    started = time.perf_counter()
    config.validate()
    plan = make_plan(config, skip_missing, allow_case_mismatch=allow_case_mismatch)
    create_output_dir(config)
    lock = OutputLock(config.output_dir, lock_path(config))
    lock.acquire()
    try:
        return _run_locked(config, plan, executor, progress, started, parallelism or config.workers)
    finally:
        lock.release()


def _run_locked(config, plan: Plan, executor, progress: bool, started: float, parallelism: int) -> RunSummary:
    journal = prepare_output_dir(config, plan.fingerprint)
    work_dir = work_dir_of(config)
    totals = RunTotals.from_json(journal["totals"]) if journal else RunTotals()
    if not journal:
        for entry, reason in plan.missing:
            totals.add_skip(reason, entry.label)
    first_unit = totals.units_done
    assembler = ShardAssembler(config, journal["shard_sizes"] if journal else None,
                               journal.get("shard_checksums") if journal else None)

    own_executor = executor is None
    if own_executor:
        remaining_slices = sum(len(u.slices) for u in plan.units[first_unit:])
        executor = default_executor(max(1, min(config.workers, remaining_slices)))
    scheduler = _Scheduler(plan, config, executor, work_dir, first_unit, parallelism, dict(totals.n_examples))
    first_records = sum(totals.n_examples.values())
    finished: Dict[int, UnitResult] = {}
    done_docs = sum(u.n_docs for u in plan.units[:first_unit])
    bar = _progress(sum(u.n_docs for u in plan.units), progress, initial=done_docs)
    previous_term = _raise_on_sigterm()
    warned_binary = 0
    try:
        while totals.units_done < len(plan.units):
            scheduler.fill()
            for result in scheduler.finished_units():
                finished[result.pairs.unit_index] = result
            while totals.units_done in finished:  # strictly in unit order: bytes do not depend on timing
                result = finished.pop(totals.units_done)
                assembler.append(result.segments)
                for split in (TRAIN, VAL):  # the unit's token pools are no longer needed
                    path = pool_path(work_dir, result.pairs.unit_index, split)
                    if os.path.exists(path):
                        os.remove(path)
                totals.add(result)
                scheduler.merged()
                for skip in result.pairs.skips:
                    if skip.reason == BINARY and warned_binary < 20:
                        warn(f"{skip.label}: skipped: {skip.reason}")
                        warned_binary += 1
                write_journal(work_dir, plan.fingerprint, assembler.sizes(), assembler.checksums, totals.to_json())
            bar.update(done_docs + scheduler.docs_done - bar.n)
            elapsed = max(time.perf_counter() - started, 1e-9)
            bar.set_postfix(instances=f"{first_records + scheduler.records_encoded:,}",
                            MBps=f"{scheduler.bytes_done / 1e6 / elapsed:.1f}", refresh=False)
        if not sum(totals.n_examples.values()):
            raise GenerationError("no document with any text: every listed document was skipped "
                                  f"({', '.join(f'{n:,} {r}' for r, n in totals.skipped_by_reason.items())})")
        assembler.finish()
    except KeyboardInterrupt as interruption:
        bar.close()
        _stop_work(executor, own_executor, scheduler)
        journal = read_journal(work_dir)  # what --resume will find: the units it vouches for
        if journal is None:  # nothing to keep: leave the directory as if the run never started
            assembler.remove()
            shutil.rmtree(work_dir, ignore_errors=True)
        else:
            assembler.close()
            discard_unjournaled_work(work_dir)  # units not yet appended are redone by --resume
        signum = interruption.signum if isinstance(interruption, Interrupted) else signal.SIGINT
        kept = journal["totals"]["units_done"] if journal else 0
        raise Interrupted(signum, kept, len(plan.units),
                          sum(journal["shard_sizes"].values()) if journal else 0) from None
    except BaseException as error:
        bar.close()
        _stop_work(executor, own_executor, scheduler)
        assembler.remove()
        shutil.rmtree(work_dir, ignore_errors=True)
        if isinstance(error, UnitError):
            raise GenerationError(str(error)) from error
        if isinstance(error, cf.process.BrokenProcessPool):
            raise GenerationError(f"a worker process died unexpectedly ({error}); temporary files removed") from error
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EROFS):
            where = f" ({error.filename})" if error.filename else ""
            raise GenerationError(f"cannot write output{where}: {error.strerror}; temporary files removed") from error
        raise
    finally:
        bar.close()
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)
    if own_executor:
        executor.shutdown()
    manifests = write_manifests(config, plan, totals)
    shutil.rmtree(work_dir, ignore_errors=True)
    return RunSummary(manifests, time.perf_counter() - started, first_unit)


def _stop_work(executor, own_executor: bool, scheduler) -> None:
    """Our own pool is stopped outright; a caller's executor (a Dask client) only loses our tasks."""
    if own_executor:
        stop_executor(executor)
    else:
        for future in scheduler.in_flight:
            future.cancel()


def _raise_on_sigterm():
    """SIGTERM takes the same clean path as Ctrl-C (only the main thread can set handlers)."""
    def handler(signum, frame):
        raise Interrupted(signum)

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:
        return None


def write_manifests(config: GeneratorConfig, plan: Plan, totals: RunTotals) -> Dict[str, dict]:
    """Write each split's manifest (last: it marks the split finished); returns them as JSON."""
    manifests = {}
    skipped = SkippedDocuments(sum(totals.skipped_by_reason.values()), dict(totals.skipped_by_reason),
                               list(totals.skipped_first))
    for split, directory in split_dirs(config).items():
        names = [os.path.basename(shard_path(directory, config, shard)) for shard in range(config.num_output_files)]
        manifest = Manifest(
            options=config.as_dict(),
            n_examples=totals.n_examples[split],
            n_docs=totals.n_docs[split],
            split=split,
            examples_per_file={name: totals.records_per_shard.get(f"{split}/{i}", 0) for i, name in enumerate(names)},
            bytes_per_file={name: os.path.getsize(os.path.join(directory, name)) for name in names},
            features=config.feature_specs(),
            n_docs_listed=plan.n_listed,
            n_sentences=totals.n_sentences,
            n_tokens=totals.n_tokens,
            n_units=len(plan.units),
            invalid_utf8_replaced=totals.invalid_utf8_replaced,
            documents_skipped=skipped,
            vocab_sha256=plan.vocab.sha256,
            vocab_path=os.path.abspath(config.vocab_file),
            vocab_size=plan.vocab.size,
            bert_data_version=__version__,
        )
        manifest.write(directory, manifest_name(config))
        manifests[split] = manifest.to_json()
    return manifests
