"""Orchestration: plan units, run them on an executor, assemble shards, write the manifest.

This module owns the run from start to finish, from a resolved :class:`~.specs.RunSpec`
(``resolve``: the configuration resolved once).  Around it: ``planning`` (checks and units,
before any work), ``scheduler`` (tasks fed to the executor in dependency order), ``run_files``
(every file of the run: output directory, lock, journal, work files), ``executors`` (where tasks
run), ``tasks`` (what they compute, with the pipeline's stages), ``assembly`` (pieces into
shards), ``shard_shuffle`` (the final shuffle) and ``totals`` (what the run reports: its counts
and manifests).

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
* when the final shuffle rewrites every shard (TFRecord, local pieces), no shard is assembled:
  a unit's pieces are kept and journaled instead (``kept_pieces``), and the shuffle reads them;
* a lock file keeps a second run out of an output directory in use;
* on Ctrl-C or SIGTERM the workers are stopped at once and the journal kept for ``--resume``;
  on any other failure the temporary files are removed.
"""

from __future__ import annotations

import concurrent.futures as cf
import signal
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

from .. import storage
from ..notices import note
from ..compiled import compiled_missing_note, end_of_run, note_compiling, start_in_background
from ..tokenizers import native_note
from ..pipeline.documents.types import BINARY, DEFAULT_TEXT_FIELD, MISSING_KEY
from .assembly import ShardAssembler
from .corpus_output import record_totals, write_corpus
from .executors import dead_worker_signal, default_executor, local_workers, shares_local_files, stop_executor
from .fault_injection import pause_armed, pause_if_chosen
from .locations import RemoteOutput, RunLocations, prepare_work_dir, run_locations
from .planning import Plan, deal_units, kept_tokens, make_plan, some_of, warn
from .run_files import (GenerationError, Interrupted, create_output_dir, finalize, locked_output, pairs_path,
                        pool_path, prepare_output_dir, refuse_writing_over_inputs, remove_run_files, slice_paths, stopped,
                        write_input_stamps, write_journal)
from .screening import screen_corpus
from .scheduler import Scheduler, ShardCounts, UnitResult, slices_still_needed
from .scratch import finished_slices, forget_mapped
from .source_plan import document_tokens
from .final_shuffle import shuffle_shards
from .kept_pieces import PieceKeeper, keeps_pieces, pieces_fit
from .shard_shuffle import forget_pieces
from .specs import OutputSpec, RunSpec
from .tasks import SliceSummary, UnitError
from .totals import RunTotals, SkippedTotals, make_manifests


@dataclass
class RunSummary:
    manifests: Dict[str, dict]
    seconds: float
    resumed_from_unit: int = 0


def _progress(total: int, enabled: bool, description: str, unit: str, initial: int = 0, position: int = 0):
    if not enabled:  # (a log, a pipe, --quiet: tqdm is not even imported, 7 ms of the run's serial start)
        return _NoBar(initial)
    from tqdm import tqdm

    tqdm.monitor_interval = 0  # no monitor thread: worker processes are forked
    return tqdm(total=total, initial=initial, unit=unit, disable=not enabled, dynamic_ncols=True, file=sys.stderr,
                desc=description, position=position)


class _NoBar:
    """A bar that is not shown, as tqdm's disabled bar behaves: ``n`` stays where it started."""

    def __init__(self, initial: int):
        self.n = initial

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, *args, **kwargs) -> None:
        pass

    def close(self) -> None:
        pass


def run(spec: RunSpec, executor: Optional[cf.Executor] = None, progress: bool = True, skip_missing: bool = False,
        parallelism: Optional[int] = None, allow_case_mismatch: bool = False,
        started: Optional[float] = None, notes: bool = True) -> RunSummary:
    """Run a resolved run (see ``resolve.generate``, the library's entry, for the arguments)."""
    say = note if notes else None  # (a faster way to run: in a log file too, where there is no bar)
    started = time.perf_counter() if started is None else started
    workers = spec.control.workers
    if executor is None:  # our own pool of processes: no more of them than cores
        parallelism = local_workers(parallelism or workers)
    note_compiling(say if executor is None else None)  # (a first run's compile said: not a silent minute)
    try:
        return _run(spec, executor, progress, skip_missing, parallelism, allow_case_mismatch, started, workers, say)
    finally:
        end_of_run()  # (whatever failed: no thread left importing numba at exit)


def _run(spec: RunSpec, executor: Optional[cf.Executor], progress: bool, skip_missing: bool,
         parallelism: Optional[int], allow_case_mismatch: bool, started: float, workers: int,
         say: Optional[Callable[[str], None]]) -> RunSummary:
    plan = make_plan(spec, skip_missing, allow_case_mismatch=allow_case_mismatch)
    # Our own workers: numba's start says, in its thread, whether numba is missing (_write_units).
    for slower in (native_note(spec.tokenizer), None if executor is None else compiled_missing_note()):
        if slower and say:  # (--quiet: the output is the same either way)
            say(slower)
    output = spec.output
    refuse_writing_over_inputs(output, [source.path for slice_ in plan.slices for source in slice_.sources]
                               + list(spec.inputs.metadata_files) + list(spec.inputs.val_metadata_files)
                               + [spec.tokenizer.path, spec.tokenizer.vocab_file])
    # Output to a URL is assembled in a local staging directory (see ``locations``).
    places = run_locations(output, spec.control.work_dir, distributed=not shares_local_files(executor))
    remote = RemoteOutput(output, spec.control, places) if places.remote else None
    if remote is not None:
        remote.acquire()
    try:
        staged = places.staged(output)
        if remote is not None:
            remote.check_staging()
        create_output_dir(staged)
        with locked_output(staged):
            return _run_locked(spec, staged, places, remote, plan, executor, progress, started,
                               parallelism or workers, say)
    finally:
        if remote is not None:
            remote.release()


class NoText(GenerationError):
    """Every listed document was skipped: a rerun of the same input gives the same."""


def _run_locked(spec: RunSpec, staged: OutputSpec, places: RunLocations, remote: Optional[RemoteOutput], plan: Plan,
                executor, progress: bool, started: float, parallelism: int, say: Optional[Callable]) -> RunSummary:
    """``staged``: the output as the local side writes it (``spec.output`` itself unless the
    output is a URL: then its staging directory); ``places.scratch``: where tasks exchange data;
    ``places.journal_dir``: the journal.

    Whatever stops the run (Ctrl-C, a killed worker, a full disk, any failure but the input's
    own), what the journal vouches for stays for ``--resume`` (``run_files.stopped``)."""
    control = spec.control
    journal = prepare_output_dir(staged, plan.fingerprint, control.resume, control.overwrite, plan.record,
                                 plan.input_stamps) \
        if remote is None else remote.prepare(staged, plan.fingerprint, plan.record, plan.input_stamps)
    prepare_work_dir(places, journal, executor)
    totals = RunTotals.from_json(journal["totals"]) if journal else RunTotals()
    first_unit = totals.units_done
    assembler: Optional[ShardAssembler] = None
    try:
        if not (journal and journal.get("finished")):  # else killed while finalizing: finalize again
            assembler = _assembler(staged, places, journal, totals, len(plan.units))
            _write_units(spec, staged, places, plan, executor, progress, started, parallelism, journal, totals,
                         assembler, say)
        summaries = finished_slices([slice_.index for slice_ in plan.slices], places.scratch, len(plan.slices))
        skipped = SkippedTotals(plan)
        skipped.add_slices([SliceSummary.from_json(summaries[index]) for index in sorted(summaries)])
        if skipped.undecoded.n_docs:  # on every run, resumed or not: text was lost
            warn(skipped.undecoded.describe(spec.inputs.reading.encoding))
        if spec.screening is not None and plan.removal_report is None:  # resumed when all was written
            screen_corpus(plan, spec.screening, places.scratch,
                          [SliceSummary.from_json(summaries[index]) for index in sorted(summaries)])
        per_source = None
        if plan.sources is not None:  # each source's request and realization, from the slices' tables
            doc_tokens = document_tokens(plan.corpus.n_docs, len(plan.slices), places.scratch)
            if plan.units_pending:  # (finishing a run that was stopped while finalizing)
                deal_units(plan, spec, doc_tokens)
            per_source = plan.sources.report(plan.corpus.doc_splits, kept_tokens(plan, doc_tokens),
                                             {split: counts.source_instances for split, counts in totals.splits.items()})
        manifests = finalize(spec.output, staged, places, totals.shard_counts,
                             lambda sizes, digests: make_manifests(spec, plan, totals, skipped, sizes, digests,
                                                                   per_source), remote)
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


def _assembler(staged: OutputSpec, places: RunLocations, journal: Optional[dict], totals: RunTotals,
               n_units: int) -> ShardAssembler:
    """The shards' assembler, or with the pieces kept for the final shuffle their keeper (as the
    journal of a resumed run says, when it kept some; a new run, when its shuffle tasks could map
    all the pieces they read: ``pieces_fit``)."""
    sizes, checksums = (journal["shard_sizes"], journal.get("shard_checksums")) if journal else (None, None)
    kept = (journal or {}).get("kept_units")
    if kept is not None or (keeps_pieces(staged, places.scratch) and not totals.units_done
                            and pieces_fit(n_units, len(staged.files))):
        if not keeps_pieces(staged, places.scratch):
            raise GenerationError(f"--resume: the run kept its pieces in a local work directory, which this one, working "
                                  f"in {places.scratch}, would not read; resume with the --work_dir it was started with")
        return PieceKeeper(staged, places.scratch, sizes, checksums, dict(totals.shard_counts), kept or [],
                           rewritten=totals.shuffled)
    return ShardAssembler(staged, sizes, checksums, dict(totals.shard_counts), fetch_dir=places.journal_dir,
                          rewritten=totals.shuffled)


def _write_units(spec: RunSpec, staged: OutputSpec, places: RunLocations, plan: Plan, executor, progress: bool,
                 started: float, parallelism: int, journal: Optional[dict], totals: RunTotals,
                 assembler: ShardAssembler, say: Optional[Callable[[str], None]]) -> None:
    """Every unit still to write, appended to the shards in unit order and journaled; then the
    shards completed and the journal marked finished (what is left is ``run_files.finalize``)."""
    work_dir, journal_dir = places.scratch, places.journal_dir
    corpus = not staged.kind.instances  # megatron: no unit is paired (see corpus_output)
    own_executor = executor is None
    if own_executor and not start_in_background(say) and say:
        # (numba's start in a thread while the first slices are tokenized, which mostly lets go
        # of the GIL: the planning before it does not, and would only wait for the thread)
        slower = compiled_missing_note()
        if slower:
            say(slower)
    if plan.units_pending:  # budgets and shares: every document's tokens are counted, then the units dealt
        if not journal:  # an interruption while tokenizing can be resumed (no shard is open yet)
            write_journal(journal_dir, plan.fingerprint, assembler.sizes(), assembler.checksums, totals.to_json(),
                          record=plan.record, kept=assembler.kept())
        if own_executor:
            executor = default_executor(max(1, min(parallelism, len(plan.slices))))
        _tokenize_all(spec, plan, executor, work_dir, parallelism, progress, own_executor)
        if spec.screening is not None:  # removals first: a budget is met by documents that are kept
            summaries = finished_slices([slice_.index for slice_ in plan.slices], work_dir, len(plan.slices))
            screen_corpus(plan, spec.screening, work_dir,
                          [SliceSummary.from_json(summaries[index]) for index in sorted(summaries)])
        deal_units(plan, spec, document_tokens(plan.corpus.n_docs, len(plan.slices), work_dir))
    first_unit = len(plan.units) if corpus else totals.units_done
    shards = ShardCounts(plan, staged, spec.encoding, spec.vocab, assembler, totals.shard_counts, work_dir)
    still_needed = slices_still_needed(plan)
    if spec.pairing.packing is not None:  # every unit is paired again on --resume: every slice stays
        still_needed = [0] * len(still_needed)
    done_slices = {index: SliceSummary.from_json(data) for index, data in
                   finished_slices([slice_.index for slice_ in plan.slices], work_dir,
                                   0 if corpus else still_needed[first_unit], verify=journal is not None).items()}
    if not journal:  # from now on an interruption can be resumed, tokenized slices and all
        write_input_stamps(journal_dir, plan.input_stamps)
        write_journal(journal_dir, plan.fingerprint, assembler.sizes(), assembler.checksums, totals.to_json(),
                      record=plan.record, kept=assembler.kept())

    if own_executor and executor is None:
        executor = default_executor(max(1, min(parallelism, len(plan.slices) + len(plan.units))))
    scheduler = Scheduler(plan, spec, executor, work_dir, first_unit, parallelism, done_slices, shards,
                          {split: counts.n_examples for split, counts in totals.splits.items()})
    first_records = totals.n_examples
    finished: Dict[int, UnitResult] = {}
    freed_below = 0
    tokenize_bar = _progress(plan.corpus.n_docs, progress, "tokenized", "doc", scheduler.docs_tokenized)
    units_bar = _progress(len(plan.units), progress, "written", "unit", first_unit, position=1)
    previous_term = _raise_on_sigterm()
    warned_binary = 0
    commits = _UnitCommits(assembler, journal_dir, plan)
    assembler.piece_removals = spent = storage.BackgroundRemovals()  # work files no later step reads (pieces appended)
    try:
        while (scheduler.to_tokenize or scheduler.in_flight) if corpus else totals.units_done < len(plan.units):
            scheduler.fill()
            for result in scheduler.finished_units():
                finished[result.pairs.unit_index] = result
            while True:  # strictly in unit order: bytes do not depend on timing
                result = finished.get(totals.units_done) or scheduler.units.get(totals.units_done)
                if result is None or not (result.segments or totals.units_done in finished):
                    break
                if not result.begun:
                    result.begun = True
                    # The units before, journaled now that their bytes had time to reach the disk:
                    # in a thread, while the workers get their next tasks (with one worker,
                    # while this process does them) and this unit is appended.  One commit at a
                    # time: while one runs, the units appended meanwhile wait for the next, all
                    # together (``_UnitCommits.ready``); but for the last unit, whose commit
                    # follows the one running: nothing more is appended.
                    if totals.units_done + 1 < len(plan.units):
                        scheduler.fill()  # (the workers' next tasks, before this process waits for the disk)
                        if commits.ready():
                            commits.wait()
                            commits.commit_in_background()
                    else:
                        commits.commit_in_background()
                    scheduler.fill()
                # Each encode task's segments as soon as it is done (a shard has one segment a
                # unit: the order of the tasks changes no byte): the disk writes a unit's bytes
                # while its other tasks run, not all of them after its last.
                assembler.append(result.segments[result.appended:])
                result.appended = len(result.segments)
                if totals.units_done not in finished:
                    break
                del finished[totals.units_done]
                # The unit's pool (and packed, its pairs) is spent: rows packed with the split take
                # instances of their own unit and later ones only (split_packing).
                spent.remove([pool_path(work_dir, result.pairs.unit_index)])
                if spec.pairing.packing is not None:
                    spent.remove([pairs_path(work_dir, result.pairs.unit_index)])
                totals.add(result)
                scheduler.merged()
                # Tokenized slices that no later unit reads (with the corpus mixed: none before the
                # end, when the work directory goes whole: a file at a time would cost the parent a
                # removal a file, thousands on a corpus of many short documents).
                while freed_below < still_needed[totals.units_done] and totals.units_done < len(plan.units):
                    paths = slice_paths(work_dir, freed_below)
                    # The summary and the document table stay: skips and split sizes are counted from them.
                    spent.remove([paths["tokens"], paths["sentences"]])
                    freed_below += 1
                commits.appended(totals)
                units_bar.update(1)
            while scheduler.binary_skips:  # a binary file among the inputs is worth a word at once
                skip = scheduler.binary_skips.pop(0)
                if warned_binary < 20:
                    warn(f"{skip.label}: skipped: {skip.reason}" + ("" if skip.reason != BINARY else
                         "; if it is text, it may be UTF-16 or UTF-32 without a byte-order mark: give its encoding "
                         "with --input_encoding (e.g. utf-16-le)"))
                    warned_binary += 1
            tokenize_bar.update(scheduler.docs_tokenized - tokenize_bar.n)
            elapsed = max(time.perf_counter() - started, 1e-9)
            # Records written by each encode task as it finishes (a unit has several).
            units_bar.set_postfix(instances=f"{first_records + scheduler.records_encoded:,}",
                                  MBps=f"{scheduler.bytes_done / 1e6 / elapsed:.1f}", refresh=False)
        if corpus:
            scheduler.screened()  # (no unit was paired: the removals are decided here)
            record_totals(totals, write_corpus(plan, staged, work_dir, rename=False))  # published by finalize
        if not totals.n_examples:
            skipped = SkippedTotals(plan)
            skipped.add_slices(list(scheduler.summaries.values()))
            first = [item["path"] for split in skipped.by_split.values() for item in split.first]
            reasons = skipped.reasons()
            # JSON Lines whose text is under another key: name the option that says which.
            fix = (f"name the key of the documents' text with --text_field (looked for "
                   f"{spec.inputs.reading.text_field or DEFAULT_TEXT_FIELD!r})" if MISSING_KEY in reasons
                   else "name files that hold text")
            raise NoText("no document with any text: every listed document was skipped "
                         f"({', '.join(f'{n:,} {r}' for r, n in reasons.items())}: {some_of(first)}); {fix}")
        if staged.shuffles_shards:
            # The last unit's fsync runs while the shuffle starts on its bytes (from the page
            # cache), after the unit before's (still running, perhaps: not waited for here); the
            # shuffle's first journal record waits for both.
            commits.commit_in_background()
            shards.finish()
            sizes = assembler.finish(sync=False)  # written again, durably, by the final shuffle
            bar = _progress(sum(totals.shard_counts.values()), progress, "shuffled", "shard", len(totals.shuffled),
                            position=2)
            try:
                shuffle_shards(staged, plan, totals, sizes, assembler, journal_dir,
                               executor if own_executor or shares_local_files(executor) else None, scheduler, bar,
                               commits.joined, spent)
            finally:
                bar.close()
            commits.wait()
        else:
            commits.wait()
            commits.commit()
            shards.finish()
            sizes = assembler.finish()
        spent.close()
        write_journal(journal_dir, plan.fingerprint, sizes, assembler.checksums, totals.to_json(), finished=True,
                      record=plan.record, kept=assembler.kept())
    except BaseException as error:
        if isinstance(error, cf.process.BrokenProcessPool) and not hasattr(error, "worker_signal"):  # see wait_first
            error.worker_signal = dead_worker_signal(executor)
        _stop_work(executor, own_executor, scheduler)
        commits.commit_on_stop()
        spent.close(quietly=True)
        raise
    finally:
        forget_mapped()  # (this process's slices, when it paired units itself: its work directory goes)
        forget_pieces()  # (and the kept pieces it shuffled itself)
        tokenize_bar.close()
        units_bar.close()
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)
    if own_executor:
        executor.shutdown()


class _UnitCommits:
    """Group commit of the units appended to the shards: unit k is journaled (its shards' new
    bytes fsynced first, then the journal) when unit k + 1 is ready to be appended, when the
    units end, or when the run stops, not at once: the disk writes unit k's bytes (handed to it
    by ``ShardAssembler.append``) while the next unit is made, and the fsync waits for little;
    it runs in a thread besides (``commit_in_background``) while unit k + 1 is appended, and is
    joined before the next journal record.  While a commit runs, the units appended meanwhile
    are not waited for: they are journaled together by the next (``ready``), so a run of many
    small units (short documents, or a small ``--split_num``) makes as many commits as the disk
    can take, not one a unit, with the run waiting for each.  The journal never vouches for
    bytes not on disk; a power cut loses at most the units not yet journaled, which
    ``--resume`` truncates and writes again."""

    def __init__(self, assembler: ShardAssembler, journal_dir: str, plan: Plan):
        self.assembler, self.journal_dir, self.plan = assembler, journal_dir, plan
        self.pending: Optional[tuple] = None  # what the journal will say of the last unit appended
        self.background: Optional[threading.Thread] = None  # ``commit_in_background``'s
        self.background_outcome: list = []  # the units done by each, or the error one met, in order
        self.failed = False  # a background commit failed: nothing more is journaled

    def appended(self, totals: RunTotals) -> None:
        self.assembler.end_unit()
        self.pending = (totals.units_done, self.assembler.sizes(),
                        {key: list(value) for key, value in self.assembler.checksums.items()}, totals.to_json())
        # (the kept units' proofs are those of the first ``units_done``, taken when journaled: no copy a unit)

    def ready(self) -> bool:
        """Whether to commit the units appended now: no commit is running (or a test chose a
        unit to pause after: then one unit at a time, as its seam expects)."""
        return self.background is None or not self.background.is_alive() or pause_armed()

    def commit(self) -> None:
        if self.pending is None:
            return
        pending, self.pending = self.pending, None  # (tried once: a journal that failed is not tried again on the stop)
        pause_if_chosen(self._journal(pending, self.assembler.take_unsynced()))

    def _journal(self, pending: tuple, paths: List[str]) -> int:
        units_done, sizes, checksums, totals = pending
        self.assembler.make_durable(paths)
        write_journal(self.journal_dir, self.plan.fingerprint, sizes, checksums, totals, record=self.plan.record,
                      kept=self.assembler.kept(units_done))
        return units_done

    def commit_in_background(self) -> None:
        """``commit`` in a thread (``os.fsync`` lets the interpreter run on): the bytes reach
        the disk while the run goes on: the next unit is appended meanwhile (its shards are
        synced by the next commit), and for the last unit, the final shuffle reads them from
        the page cache.  No other journal record is written before ``wait`` returns, but this
        commit's own when one is still running (the last unit's, which does not wait for the
        one before it): it follows that one, and is not made if that one failed."""
        if self.pending is None:
            return
        pending, self.pending = self.pending, None
        paths = self.assembler.take_unsynced()  # (here: the next append adds to the next commit's)
        before = self.background

        def journal() -> None:
            try:
                if before is not None:
                    before.join()
                    if any(isinstance(outcome, BaseException) for outcome in self.background_outcome):
                        return
                self.background_outcome.append(self._journal(pending, paths))
            except BaseException as error:  # noqa: BLE001 - raised by ``wait``, in the run's own thread
                self.background_outcome.append(error)

        self.background = threading.Thread(target=journal, name="bert_data-unit-commit", daemon=True)
        self.background.start()

    def wait(self) -> None:
        """The background commits done (the first error raised here); the test seam's pause
        after each."""
        if self.background is None:
            return
        self.background.join()  # (it joined the one it followed)
        self.background = None
        outcomes, self.background_outcome = self.background_outcome, []
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                self.failed = True
                raise outcome
            pause_if_chosen(outcome)

    def joined(self) -> Optional[BaseException]:
        """The background commit done, and the first error of the commits so far (from any
        thread: its outcome stays for ``wait``, in the run's own thread)."""
        background = self.background
        if background is not None:
            background.join()
        return next((outcome for outcome in self.background_outcome if isinstance(outcome, BaseException)), None)

    def commit_on_stop(self) -> None:
        """The units appended whole before a stop are kept too, as when they were journaled at
        once (a failure to journal them now leaves the journal before them, which is as true)."""
        if self.background is not None:  # the unit before, being journaled
            self.background.join()
            self.background = None
            outcomes, self.background_outcome = self.background_outcome, []
            self.failed = self.failed or any(isinstance(outcome, BaseException) for outcome in outcomes)
        if self.pending is None or self.failed:  # (a failed commit's bytes may not be on disk: no
            return  # later journal may vouch for them)
        units_done, sizes, checksums, totals = self.pending
        self.pending = None
        try:
            self.assembler.make_durable(self.assembler.take_unsynced())
            write_journal(self.journal_dir, self.plan.fingerprint, sizes, checksums, totals, record=self.plan.record,
                          kept=self.assembler.kept(units_done))
        except BaseException:  # noqa: BLE001 - (a second Ctrl-C, a full disk): the run stops either way
            pass


def _tokenize_all(spec: RunSpec, plan: Plan, executor, work_dir: str, parallelism: int, progress: bool,
                  own_executor: bool) -> None:
    """Every slice not yet tokenized, tokenized (sources asked by budget or share are realized
    from every document's tokens, before any unit is dealt)."""
    done = {index: SliceSummary.from_json(data) for index, data in
            finished_slices([slice_.index for slice_ in plan.slices], work_dir, len(plan.slices)).items()}
    scheduler = Scheduler(plan, spec, executor, work_dir, 0, parallelism, done, None)
    bar = _progress(plan.corpus.n_docs, progress, "tokenized", "doc", scheduler.docs_tokenized)
    try:
        while scheduler.to_tokenize or scheduler.in_flight:
            scheduler.fill()
            for _ in scheduler.finished_units():  # (no unit is dealt yet: only slices finish)
                pass
            bar.update(scheduler.docs_tokenized - bar.n)
    except BaseException:
        _stop_work(executor, own_executor, scheduler)
        raise
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
