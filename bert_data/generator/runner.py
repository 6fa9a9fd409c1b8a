"""Orchestration: plan units, run them on an executor, assemble shards, write the manifest.

The stages know nothing of processes or files-in-progress; this module knows nothing of
tokens.  Any ``concurrent.futures``-style executor works (a local process pool by default;
Dask's ``Client.get_executor()`` for a cluster).  Pieces are appended to the shards strictly
in unit order, so the output bytes do not depend on how many workers there are or in which
order they finish.

Nothing lost, nothing silent:

* everything that can be checked is checked before any work (``make_plan``);
* shards are written as ``*.tfrecords.tmp`` and renamed when complete, and ``data_params.json``
  is written last: a directory without it is not a finished dataset;
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
import hashlib
import json
import multiprocessing
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from .. import __version__
from . import documents as docs_mod
from ..config import ConfigError, GeneratorConfig
from .documents import BINARY, TRAIN, VAL, InputError, Unit
from .tasks import (Segment, UnitError, UnitPairs, config_feature_specs, encode_shards, make_encode_tasks,
                       pair_unit, pool_path, tokenize_slice)

MANIFEST = "data_params.json"
WORK_DIR = ".bert_data_work"
JOURNAL = "journal.json"
LOCK = ".bert_data.lock"
MAX_LISTED_SKIPS = 100
# Options that change how the work is done, never what is written.
NOT_IN_FINGERPRINT = ("num_workers", "overwrite", "resume")


class GenerationError(RuntimeError):
    """The run cannot go on; the message is one line for the user."""


def warn(message: str) -> None:
    print(f"create_tfrecords: warning: {message}", file=sys.stderr)


# ---------------------------------------------------------------------------- planning

@dataclass
class Plan:
    units: List[Unit]
    n_listed: int
    missing: list = field(default_factory=list)  # (MetadataEntry, reason), with --skip_missing
    vocab: object = None
    fingerprint: str = ""


def make_plan(config: GeneratorConfig, skip_missing: bool = False, check_case: bool = True) -> Plan:
    """Everything that can be checked before any work: inputs, vocabulary, sentence model."""
    from ..tokenization import load_vocab

    vocab = load_vocab(config.vocab_file)
    if config.mlm_only and config.document_separator_token not in vocab.token_to_id:
        raise ConfigError(f"--document_separator_token {config.document_separator_token} is not in "
                          f"{config.vocab_file}")
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
    for entry, reason in missing:
        warn(f"{entry.metadata_file}:{entry.line_number}: skipped: {reason}: {entry.path}")

    split_mode = docs_mod.SPLIT_BY_HASH if config.val_fraction > 0 else docs_mod.ALL_TRAIN
    plan_args = dict(
        split_num=config.split_num,
        multiple_docs_in_single_file=config.multiple_docs_in_single_file,
        separator_line=config.separator_line,
        jsonl_text_key=config.jsonl_text_key,
    )
    units = docs_mod.plan_units(entries, split_mode=split_mode, **plan_args)
    units += docs_mod.plan_units(val_entries, split_mode=docs_mod.ALL_VAL, first_index=len(units), **plan_args)
    if not units or not any(unit.n_bytes for unit in units):
        raise InputError("no document with any text in " + ", ".join(config.metadata_files + config.val_metadata_files))
    if check_case:
        check_vocabulary_case(config, vocab, units)
    return Plan(units, len(entries) + len(val_entries) + len(missing), missing, vocab,
                run_fingerprint(config, vocab, entries + val_entries))


def check_vocabulary_case(config: GeneratorConfig, vocab, units: List[Unit], sample_chars: int = 200_000) -> None:
    """Warn when a lower-case vocabulary meets cased text (or the reverse), with the [UNK] rate
    measured on the first documents: the most common silent mistake in BERT data."""
    from ..tokenization import WordPieceTokenizer, check_case_mismatch, vocab_is_lowercase

    if vocab_is_lowercase(vocab) == config.do_lower_case:
        return
    texts, size = [], 0
    for document in docs_mod.read_documents(units[0].sources, config.separator_line,
                                            config.multiple_docs_in_single_file, []):
        texts += [line for line in document.text[: sample_chars - size].split("\n") if line.strip()]
        size += len(document.text)
        if size >= sample_chars:
            break
    message = check_case_mismatch(vocab, config.do_lower_case, texts, WordPieceTokenizer(config.vocab_file, config.do_lower_case))
    if message:
        warn(message)


def run_fingerprint(config: GeneratorConfig, vocab, entries) -> str:
    """What must not change between a run and its --resume: options that shape the output, the
    vocabulary, the list of documents and the package version."""
    options = {key: value for key, value in config.as_dict().items() if key not in NOT_IN_FINGERPRINT}
    digest = hashlib.sha256()
    digest.update(json.dumps(options, sort_keys=True).encode())
    digest.update(vocab.sha256.encode())
    digest.update(__version__.encode())
    for entry in entries:
        digest.update(entry.label.encode("utf-8", "surrogateescape") + b"\0")
    return digest.hexdigest()


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
            if name in (MANIFEST, MANIFEST + ".tmp") or name.endswith(".tfrecords") or name.endswith(".tfrecords.tmp"):
                found.append(os.path.join(directory, name))
    work = os.path.join(config.output_dir, WORK_DIR)
    if os.path.isdir(work):
        found.append(work)
    return found


def remove_outputs(paths: List[str]) -> None:
    for path in paths:  # only files this tool writes: never a user's other files
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.remove(path)
            except FileNotFoundError:
                pass


class OutputLock:
    """An exclusive lock on the output directory for the length of a run (released by the OS
    if the process dies, so a killed run never blocks the next one)."""

    def __init__(self, output_dir: str):
        self.path = os.path.join(output_dir, LOCK)
        self.handle = None

    def acquire(self) -> None:
        import fcntl

        try:
            self.handle = open(self.path, "a+")
        except OSError as error:
            raise ConfigError(f"--output_dir {os.path.dirname(self.path) or '.'} is not writable: "
                              f"{error.strerror}") from None
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.handle.seek(0)
            holder = self.handle.read().strip() or "another process"
            self.handle.close()
            self.handle = None
            raise ConfigError(
                f"--output_dir {os.path.dirname(self.path) or '.'} is in use by another run ({holder}); "
                "wait for it to finish or choose another directory"
            ) from None
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(f"pid {os.getpid()} on {os.uname().nodename}\n")
        self.handle.flush()

    def release(self) -> None:
        if self.handle is not None:
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass
            self.handle.close()
            self.handle = None


def prepare_output_dir(config: GeneratorConfig, plan: Plan) -> Optional[dict]:
    """Make the output directory ready; returns the journal when resuming."""
    if not os.access(config.output_dir, os.W_OK):
        raise ConfigError(f"--output_dir {config.output_dir} is not writable")

    journal_path = os.path.join(config.output_dir, WORK_DIR, JOURNAL)
    journal = None
    if config.resume:
        if os.path.exists(os.path.join(split_dirs(config)[TRAIN], MANIFEST)):
            raise ConfigError(f"--resume: {config.output_dir} holds a finished run; nothing to resume")
        if os.path.exists(journal_path):
            with open(journal_path, encoding="utf-8") as handle:
                journal = json.load(handle)
            if journal.get("fingerprint") != plan.fingerprint:
                raise ConfigError(
                    f"--resume: {config.output_dir} was started with other options, another vocabulary or "
                    "other documents; resume with the same ones, or use --overwrite to start again"
                )
            work_dir = os.path.dirname(journal_path)
            for name in os.listdir(work_dir):  # pieces of units the journal does not vouch for
                if name != JOURNAL:
                    os.remove(os.path.join(work_dir, name))
    found = existing_outputs(config)
    if found and journal is None:
        if not (config.overwrite or config.resume):
            raise ConfigError(
                f"--output_dir {config.output_dir} already holds output ({os.path.basename(found[0])}"
                f"{' and more' if len(found) > 1 else ''}); pass --overwrite to replace it or --resume to "
                "continue an interrupted run"
            )
        remove_outputs(found)  # --overwrite, or --resume of a run that never finished a unit
    for directory in split_dirs(config).values():
        os.makedirs(directory, exist_ok=True)
    os.makedirs(os.path.join(config.output_dir, WORK_DIR), exist_ok=True)
    return journal


# ---------------------------------------------------------------------------- executors

class InlineExecutor(cf.Executor):
    """Runs each task at submission, in this process: one worker without inter-process cost."""

    def submit(self, fn, /, *args, **kwargs):
        future: cf.Future = cf.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:  # handed to the caller through the future
            future.set_exception(error)
        return future


def _worker_init(parent_pid: int):
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    # Ctrl-C goes to the whole process group: the parent alone decides what happens.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # forked after the parent's handler: stop quietly
    _die_with_parent(parent_pid)


def _die_with_parent(parent_pid: int) -> None:
    """A parent killed with SIGKILL cannot stop its workers; on Linux the kernel can (no orphans)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(1)


def default_executor(workers: int) -> cf.Executor:
    if workers == 1:
        return InlineExecutor()
    # fork: workers start at once and inherit what the parent imported (never TensorFlow).
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method), initializer=_worker_init,
                                  initargs=(os.getpid(),))


def stop_executor(executor: cf.Executor) -> None:
    """Cancel what has not started and stop the workers now: no orphans, no waiting."""
    processes = []
    if isinstance(executor, cf.ProcessPoolExecutor):
        processes = list((executor._processes or {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()


# ---------------------------------------------------------------------------- shard assembly

def copy_range(source, offset: int, length: int, target, name: str) -> None:
    """Append ``length`` bytes of ``source`` from ``offset`` to ``target``; in the kernel where
    the system allows (no trip through Python for hundreds of MB)."""
    target.flush()
    copied = 0
    if hasattr(os, "copy_file_range"):
        try:
            while copied < length:
                step = os.copy_file_range(source.fileno(), target.fileno(), length - copied, offset + copied)
                if step == 0:
                    break
                copied += step
            target.seek(0, os.SEEK_END)  # the kernel moved the file offset; keep Python's in step
        except OSError as error:
            if error.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
    source.seek(offset + copied)
    while copied < length:
        block = source.read(min(length - copied, 1 << 22))
        if not block:
            raise GenerationError(f"{name}: piece file is shorter than recorded")
        target.write(block)
        copied += len(block)

ZLIB_HEADER = b"\x78\x9c"  # deflate, 32 KB window, default level
DEFLATE_FINAL_BLOCK = b"\x03\x00"  # an empty final block


def adler32_combine(first: int, second: int, second_length: int) -> int:
    """Adler-32 of A + B from those of A and B (zlib's adler32_combine)."""
    base = 65521
    remainder = second_length % base
    sum1 = first & 0xFFFF
    sum2 = (remainder * sum1) % base
    sum1 += (second & 0xFFFF) + base - 1
    sum2 += (first >> 16) + (second >> 16) + base - remainder
    sum1 %= base
    sum2 %= base
    return sum1 | (sum2 << 16)


class ShardAssembler:
    """Appends piece segments to ``*.tmp`` shards in unit order; renames shards when all are in.

    With ``--compression zlib`` a shard is one zlib stream: a header, the segments' raw deflate
    data, then a final block and the Adler-32 of everything (combined from the segments')."""

    def __init__(self, config: GeneratorConfig, sizes: Optional[Dict[str, int]] = None,
                 checksums: Optional[Dict[str, list]] = None):
        self.config = config
        self.dirs = split_dirs(config)
        self.zlib = config.compression == "zlib"
        self.checksums: Dict[str, list] = dict(checksums or {})  # key -> [adler32, raw length]
        self.handles = {}
        for split, directory in self.dirs.items():
            for shard in range(config.num_output_files):
                path = shard_path(directory, config, shard) + ".tmp"
                key = f"{split}/{shard}"
                if sizes is None:
                    handle = open(path, "wb")
                    if self.zlib:
                        handle.write(ZLIB_HEADER)
                    self.checksums[key] = [1, 0]
                else:  # resume: drop whatever came after the last unit the journal vouches for
                    if not os.path.exists(path) or os.path.getsize(path) < sizes[key]:
                        raise GenerationError(f"--resume: {path} is missing or shorter than the journal says; "
                                              "use --overwrite to start again")
                    handle = open(path, "r+b")
                    handle.truncate(sizes[key])
                    handle.seek(sizes[key])
                self.handles[key] = handle

    def append(self, segments: List[Segment]) -> None:
        """One unit's segments, in (split, shard) order; their piece files are removed after."""
        pieces = {}
        try:
            for segment in sorted(segments, key=lambda s: (s.split != TRAIN, s.shard)):
                piece = pieces.get(segment.path) or pieces.setdefault(segment.path, open(segment.path, "rb"))
                key = f"{segment.split}/{segment.shard}"
                copy_range(piece, segment.offset, segment.length, self.handles[key], segment.path)
                adler, length = self.checksums[key]
                self.checksums[key] = [adler32_combine(adler, segment.adler32, segment.raw_length),
                                       length + segment.raw_length]
        finally:
            for piece in pieces.values():
                piece.close()
        for path in pieces:
            os.remove(path)
        for handle in self.handles.values():
            handle.flush()  # the journal written next must never vouch for bytes still in a buffer

    def sizes(self) -> Dict[str, int]:
        return {key: handle.tell() for key, handle in self.handles.items()}

    def finish(self) -> None:
        for key, handle in self.handles.items():
            if self.zlib:
                handle.write(DEFLATE_FINAL_BLOCK + self.checksums[key][0].to_bytes(4, "big"))
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
            split, shard = key.split("/")
            final = shard_path(self.dirs[split], self.config, int(shard))
            os.replace(final + ".tmp", final)

    def close(self) -> None:
        for handle in self.handles.values():
            handle.close()

    def remove(self) -> None:
        self.close()
        for key in self.handles:
            split, shard = key.split("/")
            try:
                os.remove(shard_path(self.dirs[split], self.config, int(shard)) + ".tmp")
            except FileNotFoundError:
                pass


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
                 first_unit: int = 0, parallelism: int = 1):
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
            tokens_path = os.path.join(self.work_dir, f"unit-{unit.index:07d}-slice-{self.next_slice:05d}.tokens.npy")
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
                result = self.units[index] = UnitResult(value)
                for split, data in value.splits.items():
                    for task in make_encode_tasks(index, split, data, self.config.num_output_files):
                        self.ready.append(("encode", index, (task, self.config, self.work_dir)))
                        result.encode_tasks_left += 1
                value.splits = {}  # the tasks hold what is needed; keep the parent lean
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
    parallelism: Optional[int] = None,
) -> RunSummary:
    """Run the whole generator. Raises ConfigError/InputError/VocabError before any work,
    GenerationError for a failure during it, KeyboardInterrupt when interrupted (resumable).

    ``executor``: any ``concurrent.futures`` executor (default: a local process pool of
    ``config.num_workers``); ``parallelism``: how many tasks it runs at once (default
    ``config.workers``), which sets how many tasks are kept in flight.
    """
    started = time.perf_counter()
    config.validate()
    plan = make_plan(config, skip_missing)
    if os.path.exists(config.output_dir) and not os.path.isdir(config.output_dir):
        raise ConfigError(f"--output_dir {config.output_dir} exists and is not a directory")
    try:
        os.makedirs(config.output_dir, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"--output_dir {config.output_dir} cannot be created: {error.strerror}") from None
    lock = OutputLock(config.output_dir)
    lock.acquire()
    try:
        return _run_locked(config, plan, executor, progress, started, parallelism or config.workers)
    finally:
        lock.release()


def _run_locked(config, plan: Plan, executor, progress: bool, started: float, parallelism: int) -> RunSummary:
    journal = prepare_output_dir(config, plan)
    # Absolute: workers, here or on a cluster, may run in another directory.
    work_dir = os.path.abspath(os.path.join(config.output_dir, WORK_DIR))
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
    scheduler = _Scheduler(plan, config, executor, work_dir, first_unit, parallelism)
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
                write_json_atomic(os.path.join(work_dir, JOURNAL), {
                    "fingerprint": plan.fingerprint, "shard_sizes": assembler.sizes(),
                    "shard_checksums": assembler.checksums, "totals": totals.to_json(),
                }, sync=False)
            bar.update(done_docs + scheduler.docs_done - bar.n)
            elapsed = max(time.perf_counter() - started, 1e-9)
            bar.set_postfix(instances=sum(totals.n_examples.values()),
                            MBps=f"{scheduler.bytes_done / 1e6 / elapsed:.1f}", refresh=False)
        if not sum(totals.n_examples.values()):
            raise GenerationError("no document with any text: every listed document was skipped "
                                  f"({', '.join(f'{n} {r}' for r, n in totals.skipped_by_reason.items())})")
        assembler.finish()
    except KeyboardInterrupt:
        bar.close()
        _stop_work(executor, own_executor, scheduler)
        assembler.close()
        for name in os.listdir(work_dir):  # units not yet appended are redone by --resume
            if name != JOURNAL:
                os.remove(os.path.join(work_dir, name))
        raise
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
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        return signal.signal(signal.SIGTERM, handler)
    except ValueError:
        return None


def write_manifests(config, plan: Plan, totals: RunTotals) -> Dict[str, dict]:
    manifests = {}
    skipped = sum(totals.skipped_by_reason.values())
    for split, directory in split_dirs(config).items():
        names = [os.path.basename(shard_path(directory, config, shard)) for shard in range(config.num_output_files)]
        sizes = [os.path.getsize(os.path.join(directory, name)) for name in names]
        manifest = {key: value for key, value in config.as_dict().items() if key not in ("overwrite", "resume")}
        manifest.update(
            {
                "n_examples": totals.n_examples[split],
                "n_docs": totals.n_docs[split],
                "split": split,
                "examples_per_file": {name: totals.records_per_shard.get(f"{split}/{i}", 0)
                                      for i, name in enumerate(names)},
                "bytes_per_file": dict(zip(names, sizes)),
                "features": {
                    spec.name: {"dtype": spec.dtype, "length": spec.length}
                    for spec in config_feature_specs(config)
                },
                "n_docs_listed": plan.n_listed,
                "n_sentences": totals.n_sentences,
                "n_tokens": totals.n_tokens,
                "n_units": len(plan.units),
                "invalid_utf8_replaced": totals.invalid_utf8_replaced,
                "documents_skipped": {
                    "count": skipped,
                    "by_reason": dict(sorted(totals.skipped_by_reason.items())),
                    "first": totals.skipped_first,
                },
                "vocab_sha256": plan.vocab.sha256,
                "vocab_size": plan.vocab.size,
                "bert_data_version": __version__,
            }
        )
        write_json_atomic(os.path.join(directory, MANIFEST), manifest)
        manifests[split] = manifest
    return manifests


def write_json_atomic(path: str, data: dict, sync: bool = True) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)
        handle.write("\n")
        handle.flush()
        if sync:
            os.fsync(handle.fileno())
    os.replace(path + ".tmp", path)
