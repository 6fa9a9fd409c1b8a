"""Orchestration: plan units, run them on an executor, assemble shards, write the manifest.

This module owns the run: the scheduler that feeds tasks to the executor in dependency order,
and the run from start to finish.  Around it: ``settings`` (the configuration resolved once),
``planning`` (checks and units, before any work), ``run_files`` (every file of the run: output
directory, lock, journal, work files), ``executors`` (where tasks run), ``tasks`` (what they
compute), ``assembly`` (pieces into shards) and ``totals`` (what the run reports: its counts and
manifests).

The stages know nothing of processes or files-in-progress; this module knows nothing of
tokens.  Any ``concurrent.futures``-style executor works (a local process pool by default;
Dask's ``Client.get_executor()`` for a cluster).  Pieces are appended to the shards strictly
in unit order, so the output bytes do not depend on how many workers there are or in which
order they finish.

Nothing lost, nothing silent:

* everything that can be checked is checked before any work (``make_plan``);
* shards are written in progress and renamed when complete, and the manifest is written
  last: a directory without it is not a finished dataset;
* after each unit is appended, a journal records the shards' sizes and the run's totals, so
  ``--resume`` truncates the shards to the last whole unit and goes on from there, giving the
  same bytes as an uninterrupted run;
* a lock file keeps a second run out of an output directory in use;
* on Ctrl-C or SIGTERM the workers are stopped at once and the journal kept for ``--resume``;
  on any other failure the temporary files are removed.
"""

from __future__ import annotations

import concurrent.futures as cf
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

from ..config import GeneratorConfig
from .assembly import ShardAssembler
from .corpus_output import record_totals, write_corpus
from ..format.output_formats import get_format
from ..pipeline.documents.types import BINARY, SPLIT_OF_CODE, Skip
from ..format.dataset_layout import TRAIN, VAL
from .. import storage
from .executors import (dead_worker_signal, default_executor, local_workers, shares_local_files, stop_executor,
                        wait_first)
from .locations import RemoteOutput, check_output_url, prepare_work_dir, run_locations
from .pieces import Segment
from .fault_injection import pause_if_chosen
from .run_files import (GenerationError, Interrupted, create_output_dir, finalize, locked_output, pool_path,
                        prepare_output_dir, refuse_writing_over_inputs, remove_run_files, remove_shards_being_shuffled,
                        shard_in_progress, slice_paths, split_dirs,
                        stopped, write_journal)
from .scratch import finished_slices, load_arrays
from .planning import Plan, make_plan, warn
from .resolve import RunSettings, resolve
from .totals import RunTotals, SkippedTotals, make_manifests
from .shard_shuffle import publish_shuffled, run_shuffle_task, shuffle_tasks, shuffled_size, shuffles_shards
from .tasks import (SPLIT_CODES, DOC_POSITION, TOKEN_END, TOKEN_START, SliceSummary, SliceTable, UnitError, UnitPairs,
                    encode_shards, make_encode_tasks, pair_unit, record_bytes, tokenize_slice)


@dataclass
class RunSummary:
    manifests: Dict[str, dict]
    seconds: float
    resumed_from_unit: int = 0


def _progress(total: int, enabled: bool, description: str, unit: str, initial: int = 0, position: int = 0):
    from tqdm import tqdm

    tqdm.monitor_interval = 0  # no monitor thread: worker processes are forked
    return tqdm(total=total, initial=initial, unit=unit, disable=not enabled, dynamic_ncols=True, file=sys.stderr,
                desc=description, position=position)


@dataclass
class UnitResult:
    """What the manifest needs from one finished unit."""

    pairs: UnitPairs
    segments: List[Segment] = field(default_factory=list)
    encode_tasks_left: int = 0


class _Scheduler:
    """Runs the three kinds of task on an executor, in dependency order:

    tokenize (one per slice, in corpus order) -> pair (one per unit, once every slice holding
    its documents is tokenized) -> encode (a few per unit).

    With the corpus mixed, a unit's documents come from everywhere, so pairing starts when
    tokenizing ends; with ``--keep_corpus_order`` a unit is ready as soon as its own slices are.
    Ready encode and pair tasks go before new tokenize tasks, and at most ``open_units`` units
    are between their pairing and their merge, so the data held here stays bounded.  Yields
    units, as each one's pieces are all written, in any order.
    """

    def __init__(self, plan: Plan, settings: RunSettings, executor: cf.Executor, work_dir: str,
                 first_unit: int = 0, parallelism: int = 1, done_slices: Optional[Dict[int, SliceSummary]] = None,
                 shards: Optional["ShardCounts"] = None, records_before: Optional[Dict[str, int]] = None):
        self.plan, self.executor, self.work_dir = plan, executor, work_dir
        self.settings, self.config = settings, settings.config  # tasks get the settings, resolved once
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

    @property
    def tokenized_prefix(self) -> int:
        """Slices 0 .. N - 1 are all tokenized."""
        done = self.to_tokenize[0] if self.to_tokenize else len(self.plan.slices)
        pending = [index for kind, index, _ in self.in_flight.values() if kind == "tokenize"]
        return min([done] + pending)

    def fill(self) -> None:
        while len(self.in_flight) < self.max_in_flight:
            if self.ready:
                kind, index, args = self.ready.pop(0)
                self.in_flight[self.executor.submit(encode_shards, *args)] = (kind, index, None)
                continue
            units = self.plan.units
            if (self.next_unit < len(units) and self.unmerged_units < self.open_units
                    and units[self.next_unit].last_slice < self.tokenized_prefix):
                unit = units[self.next_unit]
                work = self.plan.unit_work(unit)
                future = self.executor.submit(pair_unit, work, self.table, self.settings, self.work_dir)
                self.in_flight[future] = ("pair", unit.index, None)
                self.next_unit += 1
                self.unmerged_units += 1
                continue
            if not self.to_tokenize:
                return
            index = self.to_tokenize.pop(0)
            future = self.executor.submit(tokenize_slice, self.plan.slices[index], self.settings, self.work_dir)
            self.in_flight[future] = ("tokenize", index, None)

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
                self.binary_skips += [skip for skip in value.skips if skip.reason == BINARY]
            elif kind == "pair":
                self.units[index] = UnitResult(value)
                self.instances_paired += value.n_instances
                self.waiting_for_count[index] = value
                for ready_index in self.shards.settle(self.waiting_for_count):
                    if self.config.output_files:  # in unit order, without gaps (see records_before)
                        if ready_index != self.next_to_encode:
                            break
                        self.next_to_encode += 1
                    yield from self._encode(self.waiting_for_count.pop(ready_index))
            else:
                self.records_encoded += sum(segment.n_records for segment in value)
                result = self.units[index]
                result.segments += value
                result.encode_tasks_left -= 1
                if not result.encode_tasks_left:
                    yield self.units.pop(index)

    def _encode(self, value: UnitPairs):
        """Queue a paired unit's encode tasks (none for a unit without text: it is done)."""
        result = self.units[value.unit_index]
        if value.pairs is not None:
            count = self.shards.counts[value.split]
            rotation = self.records_before[value.split] if self.config.output_files else None
            for task in make_encode_tasks(value.unit_index, value.split, value.pairs, count, rotation):
                self.ready.append(("encode", value.unit_index, (task, self.settings, self.work_dir)))
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

    def __init__(self, plan: Plan, settings: RunSettings, assembler: ShardAssembler, counts: Dict[str, int],
                 work_dir: str):
        config = settings.config
        self.plan, self.settings, self.config, self.assembler, self.work_dir = plan, settings, config, assembler, work_dir
        self.counts = counts  # the journaled totals' own dict: set counts are journaled with them
        self.split_tokens: Optional[Dict[str, int]] = None
        self.first_unit = {}
        for unit in plan.units:
            self.first_unit.setdefault(unit.split, unit.index)
        for split in split_dirs(config):
            if split not in counts and not config.sizes_shards:
                self.set(split, config.num_output_files)

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
        if self.config.records_per_file is not None:
            return max(1, round(records / self.config.records_per_file))
        target = self.config.megabytes_per_file * 1e6
        # A segment is one unit's share of a shard: it depends on the count being set, so the
        # count is estimated uncompressed first, then with segments of the size it implies.
        uncompressed = records * record_bytes(first.pairs, self.settings, first.n_records)
        count = max(1, round(uncompressed / target))
        if self.config.compression:
            # Shuffled shards are compressed as one stream; others a segment a unit.
            segment_rows = 1 << 30 if shuffles_shards(self.config) else max(1, first.n_records // count)
            count = max(1, round(records * record_bytes(first.pairs, self.settings, segment_rows) / target))
        return count

    def finish(self) -> None:
        """A split with no unit of text still gets its (empty) shards."""
        for split in split_dirs(self.config):
            if split not in self.counts:
                self.set(split, 1 if self.config.sizes_shards else self.config.num_output_files)


def split_token_counts(plan: Plan, work_dir: str) -> Dict[str, int]:
    """Tokens of each split, from the tokenized slices' document tables."""
    counts = {TRAIN: 0, VAL: 0}
    paths = [slice_paths(work_dir, slice_.index)["docs"] for slice_ in plan.slices]
    # A batch at a time: a URL answers a batch's requests concurrently, and memory stays bounded.
    tables = (rows for first in range(0, len(paths), 256) for rows in load_arrays(paths[first:first + 256]))
    for rows in tables:
        if not len(rows):
            continue
        tokens = rows[:, TOKEN_END] - rows[:, TOKEN_START]
        codes = plan.corpus.doc_splits[rows[:, DOC_POSITION]]
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


def generate(
    config: Union[GeneratorConfig, RunSettings],
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

    ``config``: the options, validated and resolved here (``settings.resolve``), or already
    resolved (a command that checks its options before starting a cluster).  ``executor``: any
    ``concurrent.futures`` executor (default: a local process pool of ``config.num_workers``);
    ``parallelism``: how many tasks it runs at once (default ``config.workers``), which sets how
    many tasks are kept in flight.
    """
    started = time.perf_counter()
    settings = config if isinstance(config, RunSettings) else resolve(config)
    config = settings.config
    if executor is None:  # our own pool of processes: no more of them than cores
        parallelism = local_workers(parallelism or config.workers)
    check_output_url(config)
    plan = make_plan(settings, skip_missing, allow_case_mismatch=allow_case_mismatch)
    refuse_writing_over_inputs(config, [source.path for slice_ in plan.slices for source in slice_.sources]
                               + config.metadata_files + config.val_metadata_files
                               + [config.vocab_file, config.tokenizer_file, config.spm_model_file])
    # Output to a URL is assembled in a local staging directory (see ``locations``).
    places = run_locations(config, distributed=not shares_local_files(executor))
    remote = RemoteOutput(config, places) if places.remote else None
    if remote is not None:
        remote.acquire()
    try:
        local = places.local_config(config)
        if remote is not None:
            remote.check_staging()
        create_output_dir(local)
        with locked_output(local):
            return _run_locked(settings, local, places, remote, plan, executor, progress, started,
                               parallelism or config.workers)
    finally:
        if remote is not None:
            remote.release()


class NoText(GenerationError):
    """Every listed document was skipped: a rerun of the same input gives the same."""


def _run_locked(settings: RunSettings, local, places, remote: Optional[RemoteOutput], plan: Plan, executor,
                progress: bool, started: float, parallelism: int) -> RunSummary:
    """``local``: the configuration of the local side (``settings.config`` itself unless the output
    is a URL); ``places.scratch``: where tasks exchange data; ``places.journal_dir``: the journal.

    Whatever stops the run (Ctrl-C, a killed worker, a full disk, any failure but the input's
    own), what the journal vouches for stays for ``--resume`` (``run_files.stopped``)."""
    config = settings.config
    journal = prepare_output_dir(local, plan.fingerprint) if remote is None else remote.prepare(local, plan.fingerprint)
    prepare_work_dir(places, journal is not None, executor)
    totals = RunTotals.from_json(journal["totals"]) if journal else RunTotals()
    first_unit = totals.units_done
    assembler: Optional[ShardAssembler] = None
    try:
        if not (journal and journal.get("finished")):  # else killed while finalizing: finalize again
            assembler = ShardAssembler(local, journal["shard_sizes"] if journal else None,
                                       journal.get("shard_checksums") if journal else None,
                                       dict(totals.shard_counts), fetch_dir=places.journal_dir,
                                       options=settings.shard_options)
            _write_units(settings, local, places, plan, executor, progress, started, parallelism, journal, totals,
                         assembler)
        summaries = finished_slices([slice_.index for slice_ in plan.slices], places.scratch, len(plan.slices))
        skipped = SkippedTotals(plan)
        skipped.add_slices([SliceSummary.from_json(summaries[index]) for index in sorted(summaries)])
        manifests = finalize(config, local, places, totals.shard_counts,
                             lambda sizes: make_manifests(settings, plan, totals, skipped, sizes), remote)
    except BaseException as error:
        remove_shards = assembler.remove if assembler is not None else (lambda: None)
        if assembler is not None:
            assembler.close()
        if isinstance(error, (UnitError, NoText)):  # the input's own fault: the same run fails the same way
            remove_shards()
            remove_run_files(places)
            raise GenerationError(str(error)) from error
        outcome = stopped(error, places, remove_shards, len(plan.units), len(plan.slices),
                          getattr(error, "worker_signal", None))
        if outcome is error:
            raise
        raise outcome from (None if isinstance(outcome, Interrupted) else error)
    return RunSummary({split: manifest.to_json() for split, manifest in manifests.items()},
                      time.perf_counter() - started, first_unit)


def _write_units(settings: RunSettings, local, places, plan: Plan, executor, progress: bool, started: float,
                 parallelism: int, journal: Optional[dict], totals: RunTotals, assembler: ShardAssembler) -> None:
    """Every unit still to write, appended to the shards in unit order and journaled; then the
    shards completed and the journal marked finished (what is left is ``run_files.finalize``)."""
    work_dir, journal_dir = places.scratch, places.journal_dir
    config = settings.config
    corpus = not get_format(config.output_format).instances  # megatron: no unit is paired (see corpus_output)
    first_unit = len(plan.units) if corpus else totals.units_done
    shards = ShardCounts(plan, settings, assembler, totals.shard_counts, work_dir)
    still_needed = slices_still_needed(plan)
    done_slices = {index: SliceSummary.from_json(data) for index, data in
                   finished_slices([slice_.index for slice_ in plan.slices], work_dir,
                                   0 if corpus else still_needed[first_unit]).items()}
    if not journal:  # from now on an interruption can be resumed, tokenized slices and all
        write_journal(journal_dir, plan.fingerprint, assembler.sizes(), assembler.checksums, totals.to_json())

    own_executor = executor is None
    if own_executor:
        executor = default_executor(max(1, min(parallelism, len(plan.slices) + len(plan.units))))
    scheduler = _Scheduler(plan, settings, executor, work_dir, first_unit, parallelism, done_slices, shards,
                           {split: counts.n_examples for split, counts in totals.splits.items()})
    first_records = totals.n_examples
    finished: Dict[int, UnitResult] = {}
    freed_below = 0
    tokenize_bar = _progress(plan.corpus.n_docs, progress, "tokenized", "doc", scheduler.docs_tokenized)
    units_bar = _progress(len(plan.units), progress, "written", "unit", first_unit, position=1)
    previous_term = _raise_on_sigterm()
    warned_binary = 0
    try:
        while (scheduler.to_tokenize or scheduler.in_flight) if corpus else totals.units_done < len(plan.units):
            scheduler.fill()
            for result in scheduler.finished_units():
                finished[result.pairs.unit_index] = result
            while totals.units_done in finished:  # strictly in unit order: bytes do not depend on timing
                result = finished.pop(totals.units_done)
                assembler.append(result.segments)
                storage.remove(pool_path(work_dir, result.pairs.unit_index))  # the unit's pool is spent
                totals.add(result)
                scheduler.merged()
                # Tokenized slices that no later unit reads (with the corpus mixed: none before the
                # end, when the work directory goes whole: a file at a time would cost the parent a
                # removal a file, thousands on a corpus of many short documents).
                while freed_below < still_needed[totals.units_done] and totals.units_done < len(plan.units):
                    paths = slice_paths(work_dir, freed_below)
                    # The summary and the document table stay: skips and split sizes are counted from them.
                    storage.remove_many([paths["tokens"], paths["sentences"]])
                    freed_below += 1
                write_journal(journal_dir, plan.fingerprint, assembler.sizes(), assembler.checksums, totals.to_json())
                units_bar.update(1)
                pause_if_chosen(totals.units_done)
            while scheduler.binary_skips:  # a binary file among the inputs is worth a word at once
                skip = scheduler.binary_skips.pop(0)
                if warned_binary < 20:
                    warn(f"{skip.label}: skipped: {skip.reason}")
                    warned_binary += 1
            tokenize_bar.update(scheduler.docs_tokenized - tokenize_bar.n)
            elapsed = max(time.perf_counter() - started, 1e-9)
            # Records written by each encode task as it finishes (a unit has several).
            units_bar.set_postfix(instances=f"{first_records + scheduler.records_encoded:,}",
                                  MBps=f"{scheduler.bytes_done / 1e6 / elapsed:.1f}", refresh=False)
        if corpus:
            record_totals(totals, write_corpus(plan, local, work_dir, rename=False))  # published by finalize
        if not totals.n_examples:
            skipped = SkippedTotals(plan)
            skipped.add_slices(list(scheduler.summaries.values()))
            raise NoText("no document with any text: every listed document was skipped "
                         f"({', '.join(f'{n:,} {r}' for r, n in skipped.reasons().items())})")
        shards.finish()
        if shuffles_shards(config):
            sizes = assembler.finish(sync=False)  # written again, durably, by the final shuffle
            _shuffle_shards(local, plan, totals, sizes, assembler.checksums, journal_dir,
                            executor if own_executor or shares_local_files(executor) else None, scheduler, progress)
        else:
            sizes = assembler.finish()
        write_journal(journal_dir, plan.fingerprint, sizes, assembler.checksums, totals.to_json(), finished=True)
    except BaseException as error:
        if isinstance(error, cf.process.BrokenProcessPool) and not hasattr(error, "worker_signal"):  # see wait_first
            error.worker_signal = dead_worker_signal(executor)
        _stop_work(executor, own_executor, scheduler)
        raise
    finally:
        tokenize_bar.close()
        units_bar.close()
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)
    if own_executor:
        executor.shutdown()


def _shuffle_shards(local: GeneratorConfig, plan: Plan, totals: RunTotals, sizes: Dict[str, int],
                    checksums: Dict[str, list], journal_dir: str, executor: Optional[cf.Executor],
                    scheduler: "_Scheduler", progress: bool) -> None:
    """The final pass (``shard_shuffle``): every shard not yet shuffled, a task each (on the
    executor when its workers see these files, else here).  Each task is written beside its
    shards in progress, journaled (its keys and new sizes), then put in their place, so a
    resumed run finds every shard either whole and unshuffled or shuffled, never half."""
    groups = []
    for split, directory in split_dirs(local).items():
        paths = [shard_in_progress(directory, local, shard) for shard in range(totals.shard_counts[split])]
        groups += shuffle_tasks(local, SPLIT_CODES[split], split, paths, paths)
    done = set(totals.shuffled)

    def finished(group) -> None:
        if not set(group.keys) <= done:
            for key, target in zip(group.keys, group.targets):
                sizes[key] = shuffled_size(target)
            totals.shuffled += group.keys
            done.update(group.keys)
            write_journal(journal_dir, plan.fingerprint, sizes, checksums, totals.to_json())
        publish_shuffled(group)

    pending = []
    for group in groups:
        if set(group.keys) <= done:
            publish_shuffled(group)  # journaled, perhaps not yet in place
        else:
            remove_shards_being_shuffled(group.targets)  # half written by an interrupted run
            pending.append(group)
    bar = _progress(sum(len(group.keys) for group in groups), progress, "shuffled", "shard", len(done), position=2)
    try:
        if executor is None:
            for group in pending:
                run_shuffle_task(group)
                finished(group)
                bar.update(len(group.keys))
            return
        waiting, running = list(reversed(pending)), {}
        while waiting or running:
            while waiting and len(running) < scheduler.parallelism:  # each journaled as it is done
                group = waiting.pop()
                future = executor.submit(run_shuffle_task, group)
                running[future] = group
                scheduler.in_flight[future] = ("shuffle", len(running), None)  # cancelled with the rest on a stop
            ended, _ = wait_first(list(running), executor)
            for future in ended:
                future.result()
                group = running.pop(future)
                scheduler.in_flight.pop(future)
                finished(group)
                bar.update(len(group.keys))
    finally:
        bar.close()


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
