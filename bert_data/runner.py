"""Orchestration: plan units, run them on an executor, assemble shards, write the manifest.

The stages know nothing of processes or files-in-progress; this module knows nothing of
tokens.  Any ``concurrent.futures``-style executor works (a local process pool by default;
Dask's ``Client.get_executor()`` for a cluster): units are submitted in order with a bounded
window, and their pieces are appended to the shards strictly in unit order, so the output
bytes do not depend on how many workers there are or in which order they finish.

Crash safety: shards are written as ``*.tmp`` and renamed when complete; ``data_params.json``
is written last, so a directory without it is not a finished dataset.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import multiprocessing
import os
import shutil
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional

from . import __version__
from . import documents as docs_mod
from .config import ConfigError, GeneratorConfig
from .documents import TRAIN, VAL, InputError, Unit
from .features import feature_specs
from .pipeline import Segment, UnitError, UnitPairs, encode_shards, pair_unit, shard_groups, tokenize_slice

MANIFEST = "data_params.json"
WORK_DIR = ".bert_data_work"
MAX_LISTED_SKIPS = 100


class GenerationError(RuntimeError):
    """The run cannot go on; the message is one line for the user."""


@dataclass
class Plan:
    units: List[Unit]
    n_listed: int
    missing: list = field(default_factory=list)  # (MetadataEntry, reason), with --skip_missing
    vocab: object = None


def make_plan(config: GeneratorConfig, skip_missing: bool = False) -> Plan:
    """Everything that can be checked before any work: inputs, vocabulary, sentence model."""
    from .tokenization import load_vocab

    vocab = load_vocab(config.vocab_file)
    if config.spacy_model and not config.single_sentence_per_line:
        from .sentences import make_sentence_splitter

        make_sentence_splitter(False, config.spacy_model)  # fails now, with advice, if missing

    entries = docs_mod.read_metadata(config.metadata_files, config.input_files_prefix)
    entries, missing = docs_mod.check_documents_exist(entries, skip_missing)
    val_entries = []
    if config.val_metadata_files:
        val_entries = docs_mod.read_metadata(config.val_metadata_files, config.input_files_prefix)
        val_entries, val_missing = docs_mod.check_documents_exist(val_entries, skip_missing)
        missing += val_missing

    split_mode = docs_mod.SPLIT_BY_HASH if config.val_fraction > 0 else docs_mod.ALL_TRAIN
    plan_args = dict(
        split_num=config.split_num,
        multiple_docs_in_single_file=config.multiple_docs_in_single_file,
        separator_line=config.separator_line,
    )
    units = docs_mod.plan_units(entries, split_mode=split_mode, **plan_args)
    units += docs_mod.plan_units(val_entries, split_mode=docs_mod.ALL_VAL, first_index=len(units), **plan_args)
    if not units:
        raise InputError("no documents with any text in " + ", ".join(config.metadata_files))
    return Plan(units, len(entries) + len(val_entries) + len(missing), missing, vocab)


# ---------------------------------------------------------------------------- output layout

def split_dirs(config: GeneratorConfig) -> Dict[str, str]:
    if config.has_validation:
        return {TRAIN: os.path.join(config.output_dir, TRAIN), VAL: os.path.join(config.output_dir, VAL)}
    return {TRAIN: config.output_dir}


def shard_path(directory: str, config: GeneratorConfig, shard: int) -> str:
    return os.path.join(directory, f"{config.name}-{shard + 1}.tfrecords")


def existing_outputs(config: GeneratorConfig) -> List[str]:
    found = []
    for directory in (config.output_dir, os.path.join(config.output_dir, TRAIN), os.path.join(config.output_dir, VAL)):
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            if name == MANIFEST or name.endswith(".tfrecords") or name.endswith(".tfrecords.tmp"):
                found.append(os.path.join(directory, name))
    work = os.path.join(config.output_dir, WORK_DIR)
    if os.path.isdir(work):
        found.append(work)
    return found


def prepare_output_dir(config: GeneratorConfig) -> None:
    if os.path.exists(config.output_dir) and not os.path.isdir(config.output_dir):
        raise ConfigError(f"--output_dir {config.output_dir} exists and is not a directory")
    found = existing_outputs(config)
    if found and not config.overwrite:
        raise ConfigError(
            f"--output_dir {config.output_dir} already holds output ({os.path.basename(found[0])}"
            f"{' and more' if len(found) > 1 else ''}); pass --overwrite to replace it"
        )
    for path in found:  # only files this tool writes: never a user's other files
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.remove(path)
    for directory in split_dirs(config).values():
        os.makedirs(directory, exist_ok=True)
    os.makedirs(os.path.join(config.output_dir, WORK_DIR), exist_ok=True)
    probe = os.path.join(config.output_dir, WORK_DIR, ".writable")
    try:
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as error:
        raise ConfigError(f"--output_dir {config.output_dir} is not writable: {error.strerror}") from None


# ---------------------------------------------------------------------------- executors

class InlineExecutor(cf.Executor):
    """Runs each task at submission, in this process: one worker without inter-process cost."""

    def submit(self, fn, /, *args, **kwargs):
        future: cf.Future = cf.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:  # handed to the caller through the future
            future.set_exception(error)
        return future


def _worker_init():
    os.environ["TOKENIZERS_PARALLELISM"] = "false"


def default_executor(workers: int) -> cf.Executor:
    if workers == 1:
        return InlineExecutor()
    # fork: workers start at once and inherit what the parent imported (never TensorFlow).
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method), initializer=_worker_init)


# ---------------------------------------------------------------------------- shard assembly

class ShardAssembler:
    """Appends piece segments to ``*.tmp`` shards in unit order; renames shards when all are in."""

    def __init__(self, config: GeneratorConfig):
        self.config = config
        self.dirs = split_dirs(config)
        self.handles = {
            (split, shard): open(shard_path(directory, config, shard) + ".tmp", "wb")
            for split, directory in self.dirs.items()
            for shard in range(config.num_output_files)
        }
        self.records = Counter()
        self.bytes = Counter()

    def append(self, segments: List[Segment]) -> None:
        """One unit's segments, in (split, shard) order; their piece files are removed after."""
        pieces = {}
        try:
            for segment in sorted(segments, key=lambda s: (s.split != TRAIN, s.shard)):
                piece = pieces.get(segment.path) or pieces.setdefault(segment.path, open(segment.path, "rb"))
                target = self.handles[(segment.split, segment.shard)]
                piece.seek(segment.offset)
                remaining = segment.length
                while remaining:
                    block = piece.read(min(remaining, 1 << 22))
                    if not block:
                        raise GenerationError(f"{segment.path}: piece file is shorter than recorded")
                    target.write(block)
                    remaining -= len(block)
                self.records[(segment.split, segment.shard)] += segment.n_records
                self.bytes[(segment.split, segment.shard)] += segment.length
        finally:
            for piece in pieces.values():
                piece.close()
        for path in pieces:
            os.remove(path)

    def finish(self) -> None:
        for (split, shard), handle in self.handles.items():
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
            final = shard_path(self.dirs[split], self.config, shard)
            os.replace(final + ".tmp", final)

    def abandon(self) -> None:
        for (split, shard), handle in self.handles.items():
            handle.close()
            try:
                os.remove(shard_path(self.dirs[split], self.config, shard) + ".tmp")
            except FileNotFoundError:
                pass


# ---------------------------------------------------------------------------- the run

@dataclass
class RunSummary:
    manifests: Dict[str, dict]
    seconds: float


def _progress(total_docs: int, enabled: bool):
    from tqdm import tqdm

    tqdm.monitor_interval = 0  # no monitor thread: worker processes are forked
    return tqdm(total=total_docs, unit="doc", disable=not enabled, dynamic_ncols=True, file=sys.stderr,
                desc="documents")


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

    def __init__(self, plan: Plan, config: GeneratorConfig, executor: cf.Executor, work_dir: str):
        self.plan, self.config, self.executor, self.work_dir = plan, config, executor, work_dir
        self.window = config.workers + 2  # tasks in flight: every worker busy, some queued behind
        self.open_units = config.workers + 2
        self.in_flight: Dict[cf.Future, tuple] = {}
        self.slices: Dict[int, list] = {}
        self.slices_missing: Dict[int, int] = {}
        self.ready: List[tuple] = []  # (kind, args) of pair and encode tasks whose inputs are here
        self.units: Dict[int, UnitResult] = {}
        self.next_unit = 0  # next unit whose slices are to be submitted
        self.next_slice = 0
        self.unmerged_units = 0
        self.docs_done = 0
        self.bytes_done = 0

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
            future = self.executor.submit(tokenize_slice, unit.slices[self.next_slice], self.config)
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
                    self.ready.append(("pair", index, (unit, self.slices.pop(index), self.config)))
            elif kind == "pair":
                result = self.units[index] = UnitResult(value)
                for split, data in value.splits.items():
                    for shards in shard_groups(len(data.pairs), self.config.num_output_files):
                        self.ready.append(("encode", index, (index, split, data, shards, self.config, self.work_dir)))
                        result.encode_tasks_left += 1
                if not result.encode_tasks_left:
                    yield self.units.pop(index)
            else:
                result = self.units[index]
                result.segments += value
                result.encode_tasks_left -= 1
                if not result.encode_tasks_left:
                    yield self.units.pop(index)

    def merged(self) -> None:
        self.unmerged_units -= 1


def generate(
    config: GeneratorConfig,
    executor: Optional[cf.Executor] = None,
    progress: bool = True,
    skip_missing: bool = False,
) -> RunSummary:
    """Run the whole generator. Raises ConfigError/InputError/VocabError before any work."""
    started = time.perf_counter()
    config.validate()
    plan = make_plan(config, skip_missing)
    prepare_output_dir(config)
    work_dir = os.path.join(config.output_dir, WORK_DIR)

    own_executor = executor is None
    if own_executor:
        executor = default_executor(min(config.workers, sum(len(u.slices) for u in plan.units)))
    scheduler = _Scheduler(plan, config, executor, work_dir)
    assembler = ShardAssembler(config)
    finished: Dict[int, UnitResult] = {}
    merged: List[UnitResult] = []
    bar = _progress(sum(u.n_docs for u in plan.units), progress)
    instances = 0
    try:
        while len(merged) < len(plan.units):
            scheduler.fill()
            for result in scheduler.finished_units():
                finished[result.pairs.unit_index] = result
            while len(merged) in finished:  # strictly in unit order: the bytes do not depend on timing
                result = finished.pop(len(merged))
                assembler.append(result.segments)
                merged.append(result)
                scheduler.merged()
                instances += sum(result.pairs.n_instances.values())
            bar.update(scheduler.docs_done - bar.n)
            elapsed = max(time.perf_counter() - started, 1e-9)
            bar.set_postfix(instances=instances, MBps=f"{scheduler.bytes_done / 1e6 / elapsed:.1f}", refresh=False)
        assembler.finish()
    except UnitError as error:
        _abandon(assembler, scheduler, executor, own_executor)
        raise GenerationError(str(error)) from error
    except cf.process.BrokenProcessPool as error:
        _abandon(assembler, scheduler, executor, own_executor)
        raise GenerationError(f"a worker process died ({error}); no output was written") from error
    except BaseException:
        _abandon(assembler, scheduler, executor, own_executor)
        raise
    finally:
        bar.close()
    if own_executor:
        executor.shutdown()
    shutil.rmtree(work_dir, ignore_errors=True)

    manifests = write_manifests(config, plan, merged, assembler)
    return RunSummary(manifests, time.perf_counter() - started)


def _abandon(assembler, scheduler, executor, own_executor) -> None:
    assembler.abandon()
    for future in scheduler.in_flight:
        future.cancel()
    if own_executor:
        executor.shutdown(wait=False, cancel_futures=True)


def write_manifests(config, plan: Plan, results: List[UnitResult], assembler: ShardAssembler):
    results = [result.pairs for result in results]
    skips = [(skip.reason, skip.label) for result in results for skip in result.skips]
    skips += [(reason, entry.label) for entry, reason in plan.missing]
    by_reason = Counter(reason for reason, _ in skips)
    manifests = {}
    for split, directory in assembler.dirs.items():
        per_file = {
            os.path.basename(shard_path(directory, config, shard)): assembler.records[(split, shard)]
            for shard in range(config.num_output_files)
        }
        manifest = dict(config.as_dict())
        manifest.update(
            {
                "n_examples": sum(per_file.values()),
                "n_docs": sum(result.n_docs[split] for result in results),
                "split": split,
                "examples_per_file": per_file,
                "bytes_per_file": {
                    os.path.basename(shard_path(directory, config, shard)): assembler.bytes[(split, shard)]
                    for shard in range(config.num_output_files)
                },
                "features": {
                    spec.name: {"dtype": spec.dtype, "length": spec.length}
                    for spec in feature_specs(config.max_seq_length, config.max_predictions_per_seq)
                },
                "n_docs_listed": plan.n_listed,
                "n_sentences": sum(result.n_sentences for result in results),
                "n_tokens": sum(result.n_tokens for result in results),
                "n_units": len(plan.units),
                "invalid_utf8_replaced": sum(result.n_replaced for result in results),
                "documents_skipped": {
                    "count": len(skips),
                    "by_reason": dict(sorted(by_reason.items())),
                    "first": [{"path": label, "reason": reason} for reason, label in skips[:MAX_LISTED_SKIPS]],
                },
                "vocab_sha256": plan.vocab.sha256,
                "vocab_size": plan.vocab.size,
                "bert_data_version": __version__,
            }
        )
        write_json_atomic(os.path.join(directory, MANIFEST), manifest)
        manifests[split] = manifest
    return manifests


def write_json_atomic(path: str, data: dict) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=False)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(path + ".tmp", path)
