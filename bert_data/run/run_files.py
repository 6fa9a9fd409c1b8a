"""Every file a run writes, and the only operations on them: create, journal, resume, finalize, discard.
No other module spells the name of a run's file.

The output directory: ``OUTPUT_DIR/NAME-1.tfrecords`` .. ``NAME-N.tfrecords`` and the manifest (with a
validation split, ``OUTPUT_DIR/train/`` and ``OUTPUT_DIR/val/``, each laid out like that; see
``format.dataset_layout``), plus, while a run is under way, shards in progress (``*.tfrecords.tmp``; in
the final shuffle, ``*.tfrecords.tmp.shuffling`` beside them), the work directory and the lock file
(``dataset_layout.WORK_DIR`` and ``LOCK``: readers recognise an unfinished run by them).

The work directory holds, for the tasks to hand each other data (see ``scratch``): tokenized slices
(``slice-N.tokens.npy``, ``.sentences.npy``, ``.docs.npy`` and the summary ``.json``, written last),
each unit's token pool (``unit-N.pool.npy``, and packed: its pairs), encode tasks' pieces
(``unit-N-SPLIT-SHARD.piece``; kept for the final shuffle, with each unit's table of segments,
``unit-N.segments.json``: see ``kept_pieces``), pieces fetched from a URL work directory, and
temporaries (``*.PID.UUID.tmp``); beside them the journal (``journal.json``).  Units are numbered from 1
in these names, as messages number them.

With Google's ``--output_file`` the shards are exactly the named files (in one directory), and the
manifest, work directory and lock are named after the first of them
(``Manifest.name_for_files("x.tfrecord")``, ``.x.tfrecord`` + ``WORK_DIR``, ``.x.tfrecord`` + ``LOCK``),
so that many such runs can write their own files into one directory at once, as is common with Google's
tool (one run per input shard); like Google's tool, such a run replaces the files it names.

The journal, rewritten after each unit is appended to the shards (durably, the shards' new bytes first;
or its pieces kept: then it vouches for the unit's table), records the shards' sizes and checksums
(zlib's Adler-32 for its trailer, and a CRC-32C of the bytes, checked by ``--resume``) and the run's
totals, under the fingerprint of the run, with a checksum of its own (``work_checks``): a resumed run
checks the shards, truncates them to those sizes and goes on from the next unit.  Beside it,
``inputs.json``: the listed files' sizes and times when the run started, which name the file a refused
``--resume`` blames.  Tokenized slices are kept for a resumed run; every other work file of a unit the
journal does not vouch for is discarded.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import signal
import uuid
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from .. import storage
from ..config import ConfigError
from ..format import dataset_layout
from ..format.checksums import split_digests
from ..format.dataset_layout import LOCK, TRAIN, WORK_DIR, in_progress, is_run_output_name
from ..format.manifest import MANIFEST_NAME, Manifest
from ..notices import warn
from .fault_injection import FinalizeSteps as _Steps
from .output_lock import OutputLock
from .run_record import INPUTS_CHANGED, changed_inputs, differences
from . import work_checks

if TYPE_CHECKING:  # (annotations only: what the command line imports of this module stays light)
    from .specs import OutputSpec

JOURNAL = "journal.json"
INPUT_STAMPS = "inputs.json"  # each listed file's size and time when the run started (see run_record)
# Tokenized slices, complete (written through a temporary and renamed): a resumed run keeps them.
_SLICE_KINDS = {"tokens": ".tokens.npy", "docs": ".docs.npy", "sentences": ".sentences.npy", "summary": ".json"}
_SCREEN = ".screen.npy"  # --dedup, --decontaminate: a slice's signature table (a --resume decides again)
_SLICE_FILE = re.compile(r"^slice-\d+(%s)$" % "|".join(map(re.escape, (*_SLICE_KINDS.values(), _SCREEN))))
_KEPT_FILE = re.compile(r"^unit-(\d{7})(-\w+-\d{5}\.piece|\.segments\.json)$")  # (kept_pieces: journaled units')


class GenerationError(RuntimeError):
    """The run cannot go on; the message is one line for the user."""


@dataclass
class Kept:
    """What a stopped run kept for ``--resume``: the first ``units`` of ``n_units`` units, in
    ``shard_bytes`` bytes of shards, and ``slices`` of ``n_slices`` tokenized slices."""

    units: int = 0
    n_units: int = 0
    shard_bytes: int = 0
    slices: int = 0
    n_slices: int = 0

    def describe(self, resume: str = "run the same command with --resume",
                 again: str = "run the same command again to start over") -> str:
        """Units are numbered from 1, as the work files are."""
        if self.units:
            kept = "unit 1" if self.units == 1 else f"units 1-{self.units:,}"
            then = "to finish" if self.units >= self.n_units else f"to continue with unit {self.units + 1:,}"
            return f"{kept} of {self.n_units:,} kept ({self.shard_bytes / 1e6:,.1f} MB of shards); {resume} {then}"
        resume = f"{resume} to continue with unit 1"
        if self.slices:
            return f"no unit was written yet; {self.slices:,} of {self.n_slices:,} tokenized slices kept; {resume}"
        return f"nothing was finished, so nothing is kept; {again}"


class Interrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C or SIGTERM (a KeyboardInterrupt, so callers that catch that still
    do), with what it kept for ``--resume``."""

    def __init__(self, signum: int, kept: Optional[Kept] = None):
        super().__init__(signum)
        self.signum, self.kept = signum, kept or Kept()

    def describe(self) -> str:
        return self.kept.describe()


# ---------------------------------------------------------------------------- names

def shard_path(directory: str, output: OutputSpec, shard: int) -> str:
    if output.files:  # Google's --output_file: the named files (all in output_dir)
        return output.files[shard]
    name = dataset_layout.shard_name(output.name, shard, output.format, output.compression)
    return storage.join(directory, name)


def shard_in_progress(directory: str, output: OutputSpec, shard: int) -> str:
    """A complete shard waiting for ``finalize`` (TFRecord's: also where units are appended)."""
    return in_progress(shard_path(directory, output, shard))


def shard_being_shuffled(path: str) -> str:
    """A shard being written in its final, shuffled order (``shard_shuffle``), beside ``path``,
    its final name (or, staged for an upload, its name in progress)."""
    return path + ".shuffling"


def remove_shards_being_shuffled(paths: List[str]) -> None:
    """Shards half written in their final order by an interrupted final pass (the shards in
    progress, ``paths``, are whole until the journal says they are shuffled)."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.remove(shard_being_shuffled(path))


def _run_file(output: OutputSpec, name: str) -> str:
    """``name`` in the output directory, or for named output files ``.FIRST.<name>`` (its own
    per run: FIRST is the first output file's name)."""
    if output.files:
        return os.path.join(output.directory, f".{os.path.basename(output.files[0])}{name}")
    return os.path.join(output.directory, name)


def manifest_name(output: OutputSpec) -> str:
    if output.files:
        return Manifest.name_for_files(output.files[0])
    return MANIFEST_NAME


def work_dir_of(output: OutputSpec) -> str:
    # Absolute: workers, here or on a cluster, may run in another directory.
    return os.path.abspath(_run_file(output, WORK_DIR))


def lock_path(output: OutputSpec) -> str:
    return _run_file(output, LOCK)


def output_work_dir(output: str) -> str:
    """The work directory at an output URL (tasks of a cluster exchange data there)."""
    return storage.join(output, WORK_DIR)


def output_lock(output: str) -> str:
    """The lock object at an output URL."""
    return storage.join(output, LOCK)


def run_dir_name(output: str) -> str:
    """A folder of its own for the run writing ``output``, under ``--work_dir`` or the staging root."""
    where = output if storage.is_url(output) else os.path.abspath(output)
    return f"bert_data-{hashlib.sha256(where.rstrip('/').encode('utf-8')).hexdigest()[:16]}"


def slice_paths(work_dir: str, index: int) -> Dict[str, str]:
    """A tokenized slice's files: ``tokens``, ``docs`` (its document table), ``sentences``, ``summary``
    (written last: a slice with a summary is complete) and ``screen`` (see ``_SCREEN``, kept to the end)."""
    base = storage.join(work_dir, f"slice-{index:07d}")
    return {kind: base + suffix for kind, suffix in (*_SLICE_KINDS.items(), ("screen", _SCREEN))}


def pool_path(work_dir: str, unit_index: int) -> str:  # (units numbered from 1, as messages do)
    return storage.join(work_dir, f"unit-{unit_index + 1:07d}.pool.npy")


def pairs_path(work_dir: str, unit_index: int) -> str:  # --pack_sequences: a unit's pairs (run.split_packing)
    return storage.join(work_dir, f"unit-{unit_index + 1:07d}.pairs.npy")


def piece_path(work_dir: str, unit_index: int, split: str, first_shard: int) -> str:
    """An encode task's piece: its unit's records for some shards, the first being ``first_shard``."""
    return storage.join(work_dir, f"unit-{unit_index + 1:07d}-{split}-{first_shard:05d}.piece")


def unit_table_path(work_dir: str, unit_index: int) -> str:  # a unit's kept pieces and segments (kept_pieces)
    return storage.join(work_dir, f"unit-{unit_index + 1:07d}.segments.json")


def fetched_piece_path(into_dir: str) -> str:
    """A local copy of a piece at a URL, while it is appended to the shards."""
    return os.path.join(into_dir, f"fetched-{uuid.uuid4().hex}.piece")


def private_temporary(path: str) -> str:
    """A temporary name for ``path`` that no other run of the same task shares: a task that runs
    twice (a cluster worker thought lost) writes the same bytes, and the copies replace each
    other atomically with ``os.replace``."""
    return f"{path}.{os.getpid()}.{uuid.uuid4().hex}.tmp"


# ---------------------------------------------------------------------------- create

def refuse_writing_over_inputs(output: OutputSpec, inputs: Iterable[str]) -> None:
    """Before anything is deleted: no file this run would write, replace or remove may be one it
    reads (``--output_file`` naming an ``--input_file``, an input inside the output directory
    named as a run's output)."""
    if storage.is_url(output.directory):
        return
    own = {os.path.realpath(name) for path in output.files for name in (path, in_progress(path))}
    own.add(os.path.realpath(Manifest.path_in(output.directory, manifest_name(output))))
    output_dirs = {os.path.realpath(directory)
                   for directory in [output.directory, *dataset_layout.split_dirs(output.directory, True).values()]}
    real_path = storage.RealPaths()
    for path in inputs:
        if not path or storage.is_url(path):
            continue
        real = real_path(path)
        if real in own or (not output.files and os.path.dirname(real) in output_dirs
                           and is_run_output_name(os.path.basename(real))):
            option = "--output_file" if output.files else "--output_dir"
            raise ConfigError(f"{path} is read by this run and {option} would overwrite it; choose another {option}")


def existing_outputs(output: OutputSpec) -> List[str]:
    """Files and directories of an earlier run in the output directory (only ones this tool writes)."""
    if output.files:  # only this run's own files: other runs may share the directory
        manifest = Manifest.path_in(output.directory, manifest_name(output))
        candidates = [p for path in [*output.files, manifest] for p in (path, in_progress(path), path + ".body")]
        return [path for path in candidates + [work_dir_of(output)] if os.path.exists(path)]
    # What this tool's records say it wrote: the manifests and the shards they list; with a
    # journal (a run stopped before its manifest), shards named as this run names them; shards
    # in progress named so; the work directory.  Never a user's other files, *.tfrecords or not.
    # ``output.directory`` may be a URL (then the journal is in the local staging directory).
    root = output.directory
    work = storage.join(root, WORK_DIR)
    work_names = storage.listdir(work)
    journaled = JOURNAL in work_names
    ours = _own_shard_name(output)
    found = []
    for directory in [root] + list(dataset_layout.split_dirs(root, True, storage.join).values()):
        names = storage.listdir(directory)
        listed = set()
        if Manifest.exists_in(directory):
            try:
                listed = set(Manifest.read(directory).examples_per_file)
            except ValueError:
                pass  # not a manifest of ours after all: its listed files stay
            else:
                found.append(Manifest.path_in(directory))
        for name in names:
            final, shard, split_file = dataset_layout.run_file_parts(name, output.format)
            if shard in listed or (split_file and (listed or journaled)) or (journaled and ours.match(shard)) or \
                    (final is not None and (ours.match(shard) or final == MANIFEST_NAME)):
                found.append(storage.join(directory, name))
    if work_names or (not storage.is_url(work) and os.path.isdir(work)):
        found.append(work)
    return found


def _own_shard_name(output: OutputSpec):
    """The names this run gives its shards (any count)."""
    example = dataset_layout.shard_name(output.name, 0, output.format, output.compression)
    return re.compile(re.escape(output.name) + r"-\d+" + re.escape(example[len(f"{output.name}-1"):]) + "$")


def refuse_replacing_others(output: OutputSpec) -> None:
    """A file named as this run will name a shard, that no record of ours lists: not ours to replace."""
    if output.files:
        return  # named output files are replaced, as Google's tool replaces them
    ours = _own_shard_name(output)
    for directory in output.split_dirs().values():
        for name in (sorted(os.listdir(directory)) if os.path.isdir(directory) else []):
            if ours.match(name):
                raise ConfigError(f"{os.path.join(directory, name)} was not written by this tool (no manifest or "
                                  "journal of ours lists it) and this run would replace it: move it away, or choose "
                                  "another --output_dir or --name")


def remove_outputs(paths: List[str]) -> None:
    for path in paths:  # only files this tool writes: never a user's other files
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)


@contextlib.contextmanager
def locked_output(output: OutputSpec) -> Iterator[None]:
    """The run's locks for its length (see :class:`OutputLock`)."""
    locks = [OutputLock(output.directory, shared=True)] if output.files else []
    locks.append(OutputLock(output.directory, lock_path(output)))
    held = []
    try:
        for lock in locks:
            lock.acquire()
            held.append(lock)
        yield
    finally:
        for lock in reversed(held):
            lock.release()


def create_output_dir(output: OutputSpec) -> None:
    if os.path.exists(output.directory) and not os.path.isdir(output.directory):
        raise ConfigError(f"--output_dir {output.directory} exists and is not a directory")
    try:
        os.makedirs(output.directory, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"--output_dir {output.directory} cannot be created: {error.strerror}") from None


def prepare_output_dir(output: OutputSpec, fingerprint: str, resume: bool, overwrite: bool,
                       record: Optional[dict] = None, stamps: Optional[list] = None) -> Optional[dict]:
    """Make the (locked) output directory ready: ``resume`` an interrupted run (returns its journal) or
    start one, removing an earlier run's files if ``overwrite``.  ``record``: this run's ``run_record``,
    and ``stamps`` its inputs' (``run_record.input_stamps``), to say what changed when the fingerprint differs."""
    if not os.access(output.directory, os.W_OK):
        raise ConfigError(f"--output_dir {output.directory} is not writable")
    work_dir = work_dir_of(output)
    found = existing_outputs(output)
    journal = read_journal(work_dir, output.directory) if resume else None
    if resume:
        # A run killed after its manifest finishes its clean-up on resume (here, if its journal went).
        if Manifest.exists_in(output.split_dirs()[TRAIN], manifest_name(output)) and not (journal or {}).get("finished"):
            left = journal is None and os.path.isdir(work_dir)
            if left:
                shutil.rmtree(work_dir, ignore_errors=True)
            raise ConfigError(f"--resume: {output.directory} holds a finished run; nothing to resume"
                              + (f" (removed {work_dir}, which its interrupted clean-up left)" if left else ""))
        if journal is None:
            _refuse_without_journal(output, work_dir, found)
        if journal.get("fingerprint") != fingerprint:
            _refuse_other_run(output, work_dir, journal, record, stamps)
        discard_unjournaled(work_dir, journal)
    elif found:
        # Named output files (--output_file) are replaced, as Google's tool replaces them.
        if not (overwrite or output.files):
            raise ConfigError(f"--output_dir {output.directory} already holds output ({os.path.basename(found[0])}"
                              f"{' and more' if len(found) > 1 else ''}); pass --overwrite to replace it or --resume "
                              "to continue an interrupted run")
        remove_outputs(found)
    if not resume:
        refuse_replacing_others(output)
    for directory in output.split_dirs().values():
        os.makedirs(directory, exist_ok=True)
    os.makedirs(work_dir, exist_ok=True)
    return journal


def _refuse_without_journal(output: OutputSpec, work_dir: str, found: List[str]) -> None:
    """--resume without a journal: never start afresh silently (the user believes work is
    kept), and never call work files that are there nothing."""
    names = [name for name in storage.listdir(work_dir) if name != INPUT_STAMPS] if os.path.isdir(work_dir) else []
    kept = [name for name in names if _SLICE_FILE.match(name)]
    pieces = [name for name in names if name.endswith(".piece") and _KEPT_FILE.match(name)]
    shards = [path for path in found if path != work_dir]
    if kept or shards or pieces:
        what = ", ".join(part for part in (f"{len(kept):,} tokenized slice files" if kept else "",
                                           f"{len(pieces):,} kept piece files" if pieces else "",
                                           f"{len(shards):,} shard files" if shards else "") if part)
        raise ConfigError(f"--resume: the journal of the run in {output.directory} ({os.path.join(work_dir, JOURNAL)}) "
                          f"is missing, so the work there ({what}) cannot be vouched for; restore the journal, or run "
                          "without --resume, with --overwrite, to start again")
    if found:
        raise ConfigError(f"--resume: the run in {output.directory} stopped before it kept anything, so there "
                          "is nothing to resume; run without --resume, with --overwrite, to start again")
    raise ConfigError(f"--resume: {output.directory} holds no interrupted run, so there is nothing to resume; "
                      "run without --resume to start")


def _refuse_other_run(output: OutputSpec, work_dir: str, journal: dict, record: Optional[dict],
                      stamps: Optional[list]) -> None:
    changed = differences(journal.get("run"), record) if record else []
    if changed and all(change == INPUTS_CHANGED for change in changed):
        files = changed_inputs(read_input_stamps(work_dir), stamps or [])
        first = files[0] if files else changed[0]
        more = f" (and {len(files) - 1:,} more)" if len(files) > 1 else ""
        raise ConfigError(f"--resume: {first}{more}: the work kept in {output.directory} was made from the file as it "
                          "was; restore it, or run without --resume, with --overwrite, to start afresh")
    changed = [change for change in changed if change != INPUTS_CHANGED]
    what = "; ".join(changed) if changed else "other options, another vocabulary or other documents"
    raise ConfigError(f"--resume: {output.directory} was started with {'other options: ' if changed else ''}"
                      f"{what}; resume with the same ones, or use --overwrite to start again")


# ---------------------------------------------------------------------------- journal

def read_journal(work_dir: str, output_dir: Optional[str] = None) -> Optional[dict]:
    """``{"fingerprint", "shard_sizes", "shard_checksums", "totals"}``, or None if the run never
    began writing (the journal is written before the first task).  ``shard_checksums`` is missing
    from journals of earlier versions.  A journal that is empty, not JSON or not what its
    checksum says is a ConfigError naming it (``output_dir``: the run's, for the message)."""
    path = os.path.join(work_dir, JOURNAL)
    try:
        with open(path, "rb") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    try:
        return work_checks.loads_checked(text)
    except work_checks.Damaged as damage:
        raise ConfigError(f"--resume: the journal {path} is damaged ({damage}), so what the run in "
                          f"{output_dir or os.path.dirname(work_dir)} kept cannot be vouched for; run without --resume, "
                          "with --overwrite, to start again") from None


def write_journal(work_dir: str, fingerprint: str, shard_sizes: Dict[str, int], shard_checksums: Dict[str, list],
                  totals: dict, finished: bool = False, record: Optional[dict] = None, kept: Optional[list] = None) -> None:
    """``finished``: every shard is complete (in progress still, or renamed since): what is left
    is ``finalize``, which a resumed run does again from the start.  ``record``: the run's
    ``run_record`` (what a refused --resume names as changed).  ``kept``: with pieces kept for the
    final shuffle, each journaled unit's table's size and CRC-32C (``kept_pieces``).  Checksummed
    (its own content), and durable before it replaces the one before, as the bytes it vouches for are."""
    data = {"fingerprint": fingerprint, "shard_sizes": shard_sizes, "shard_checksums": shard_checksums,
            "totals": totals, **({"kept_units": kept} if kept is not None else {}), **({"run": record} if record else {}),
            **({"finished": True} if finished else {})}
    path = os.path.join(work_dir, JOURNAL)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(work_checks.dumps_checked(data))
        work_checks.replace_durably(temporary, path, handle)


def write_input_stamps(work_dir: str, stamps: list) -> None:
    """Each listed file's size and time as the run started (``run_record.input_stamps``; the
    journal's record holds only their hash), written once, before the first journal."""
    path = os.path.join(work_dir, INPUT_STAMPS)
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(stamps, handle, separators=(",", ":"))
        work_checks.replace_durably(path + ".tmp", path, handle)


def read_input_stamps(work_dir: str) -> Optional[list]:
    with contextlib.suppress(OSError, ValueError), open(os.path.join(work_dir, INPUT_STAMPS), encoding="utf-8") as handle:
        return json.load(handle)
    return None


def count_slices(work_dir: str) -> int:
    """Slices whose tokenization finished (their summary is written last)."""
    summary = _SLICE_KINDS["summary"]
    return sum(1 for name in storage.listdir(work_dir) if _SLICE_FILE.match(name) and name.endswith(summary))


def discard_unjournaled(work_dir: str, journal: Optional[dict] = None) -> None:
    """Remove the work files of units the journal does not vouch for (a resumed run redoes them),
    and any temporary file; tokenized slices stay, and the pieces and tables of the units it keeps
    pieces of (``kept_units``).  ``work_dir``: a local directory or a URL."""
    units = len((journal or {}).get("kept_units") or ())
    storage.remove_many([storage.join(work_dir, name) for name in storage.listdir(work_dir)
                         if name not in (JOURNAL, INPUT_STAMPS) and not _SLICE_FILE.match(name)
                         and not ((kept := _KEPT_FILE.match(name)) and int(kept.group(1)) <= units)])


def keep_journaled(places, remove_shards: Callable[[], None]) -> Tuple[Optional[dict], int]:
    """After a stop: keep what ``--resume`` needs (the units the journal vouches for, and the
    tokenized slices), discard every other work file; when nothing is kept, every file of the
    run goes, as if it had never started (``remove_shards`` removes the shards in progress).
    Returns the journal (None if never written) and the count of tokenized slices kept."""
    journal = read_journal(places.journal_dir)
    discard_unjournaled(places.journal_dir, journal)
    try:
        kept_slices = count_slices(places.scratch)
    except Exception as error:  # noqa: BLE001 - a work directory at a URL that is gone: what it
        if storage.unreachable(error) is None:  # holds stays (a resumed run discards what it must)
            raise
        return journal, 0
    if not (journal and journal["totals"]["units_done"]) and not kept_slices:
        remove_shards()
        remove_run_files(places)
    elif places.scratch != places.journal_dir:
        discard_unjournaled(places.scratch, journal)
    return journal, kept_slices


def stopped(error: BaseException, places, remove_shards: Callable[[], None], n_units: int, n_slices: int,
            worker_signal: Optional[int] = None) -> BaseException:
    """What to raise for a run stopped by ``error`` (its workers already stopped), having kept what
    ``--resume`` needs (see :func:`keep_journaled`): :class:`Interrupted` for Ctrl-C or SIGTERM; for a
    killed worker, a full disk or another failure to write, a :class:`GenerationError` of one line
    naming the cause and what was kept; any other error itself (with what was kept in a note: its
    traceback is worth having).  ``worker_signal``: the signal that killed a worker, when one died."""
    journal, slices = keep_journaled(places, remove_shards)
    kept = Kept(journal["totals"]["units_done"] if journal else 0, n_units,
                sum(journal["shard_sizes"].values()) if journal else 0, slices, n_slices)
    if isinstance(error, KeyboardInterrupt):
        return Interrupted(getattr(error, "signum", signal.SIGINT), kept)
    if isinstance(error, GenerationError):  # its message says what to do already
        return error
    if isinstance(error, BrokenProcessPool):
        how = f"was killed by {signal.Signals(worker_signal).name}" if worker_signal else "died"
        advice = (" (the out-of-memory killer sends it: fewer --num_workers need less memory)"
                  if worker_signal == signal.SIGKILL else "")
        return GenerationError(f"a worker process {how}{advice}: {kept.describe()}")
    url = storage.unreachable(error)
    if url is not None:  # object storage gone (before the disk-fault branch: ConnectionError is an OSError)
        return GenerationError(f"cannot reach {url}: " + kept.describe(
            "when it is reachable again, run the same command with --resume",
            "when it is reachable again, run the same command again"))
    if isinstance(error, OSError):
        where = os.path.dirname(error.filename) if isinstance(error.filename, str) else places.local_output
        if error.errno in (errno.ENOSPC, errno.EDQUOT) or is_short_write(error):
            cause = "no space left on" if error.errno != errno.EDQUOT else "disk quota exceeded on"
            return GenerationError(f"{cause} {where}: " + kept.describe("free space and run the same command with --resume",
                                                                        "free space and run the same command again"))
        what = error.filename if isinstance(error.filename, str) else f"in {where}"
        return GenerationError(f"cannot write {what}: {error.strerror or error}: "
                               f"{kept.describe('fix that and run the same command with --resume')}")
    error.add_note(f"bert_data: {kept.describe()}")
    return error


def is_short_write(error: OSError) -> bool:
    """numpy's ``... requested and ... written``: a write the file system cut short (a full disk)."""
    return error.errno is None and "requested and" in str(error) and "written" in str(error)


# ---------------------------------------------------------------------------- finalize, discard

def finalize(output: OutputSpec, staged: OutputSpec, places, shard_counts: Dict[str, int],
             make_manifests: Callable[[Optional[Dict[str, int]], Dict[str, Dict[str, str]]], Dict[str, Manifest]],
             remote=None) -> Dict[str, Manifest]:
    """Publish a run whose journal says every shard is complete, as one recoverable step: each
    shard to its final name (``remote``: uploaded from staging, a ``locations.RemoteOutput``),
    then the manifests, the commit point (train's last: it is what marks the run finished),
    then the work files go.  Every step may be done again, so a run killed at any of them is
    finished by ``--resume``.  ``make_manifests(sizes, digests)``: sizes of shards that are not
    local files (uploaded), else None; each split's files' SHA-256 (``format.checksums``)."""
    step = _Steps()
    journal = read_journal(places.journal_dir) or {}
    if remote is not None:
        sizes = remote.upload_shards(staged, shard_counts, step)
    else:
        sizes = None
        for split, directory in staged.split_dirs().items():
            for shard in range(shard_counts[split]):
                final, size = shard_path(directory, staged, shard), journal.get("shard_sizes", {}).get(f"{split}/{shard}")
                for path in (final,) + dataset_layout.companion_paths(final, staged.format):  # Megatron's .idx
                    _publish(in_progress(path), path, size if path == final else None)
                step()
            work_checks.sync_directory(directory)
    uploaded = dataset_layout.in_progress if remote is not None else None  # hashed: the staged copies
    known = journal.get("totals", {}).get("shuffled_sha256", {})  # the final shuffle hashed what it wrote
    digests = {split: split_digests([shard_path(directory, staged, shard) for shard in range(shard_counts[split])],
                                    staged.format, directory, uploaded,
                                    {os.path.basename(shard_path(directory, staged, shard)): known[f"{split}/{shard}"]
                                     for shard in range(shard_counts[split]) if f"{split}/{shard}" in known})
               for split, directory in staged.split_dirs().items()}
    manifests = make_manifests(sizes, digests)
    for split in sorted(manifests, key=lambda split: split == TRAIN):
        manifests[split].write(output.split_dirs()[split], manifest_name(output))
        step()
    for split, directory in staged.split_dirs().items():  # bodies that HDF5/Parquet/MDS shards were written from
        for shard in range(shard_counts[split]):
            with contextlib.suppress(FileNotFoundError):
                os.remove(shard_path(directory, staged, shard) + dataset_layout.BODY_SUFFIX)
    remove_run_files(places)
    step()
    return manifests


def _publish(in_progress_path: str, final: str, size: Optional[int]) -> None:
    """A complete shard to its final name; done already by a run killed while finalizing."""
    if os.path.exists(in_progress_path):
        os.replace(in_progress_path, final)
    elif not os.path.exists(final) or (size is not None and os.path.getsize(final) != size):
        raise GenerationError(f"--resume: {final} is missing or not the size the journal says; "
                              "run with --overwrite to start again")


def remove_run_files(places) -> None:
    """The run's work files, local or at a URL, and its staging directory (``places``: the run's
    ``locations.RunLocations``): at the end of a run, or after a failure (a failure to clean a
    URL up is a warning, never an error)."""
    with contextlib.suppress(OSError):  # the journal first: a clean-up cut short is never resumed as a run
        os.remove(os.path.join(places.journal_dir, JOURNAL))
    shutil.rmtree(places.journal_dir, ignore_errors=True)
    if places.scratch != places.journal_dir:
        try:
            storage.remove_tree(places.scratch)
        except OSError as error:
            warn(f"could not remove the work directory {places.scratch}: {error}")
    if places.remote:
        shutil.rmtree(places.local_output, ignore_errors=True)
