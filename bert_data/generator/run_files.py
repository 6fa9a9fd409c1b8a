"""Every file a run writes, and the only operations on them: create, journal, resume,
finalize, discard.  No other module spells the name of a run's file.

The output directory: ``OUTPUT_DIR/NAME-1.tfrecords`` .. ``NAME-N.tfrecords`` and the manifest
(with a validation split, ``OUTPUT_DIR/train/`` and ``OUTPUT_DIR/val/``, each laid out like
that; see ``format.dataset_layout``), plus, while a run is under way, shards in progress
(``*.tfrecords.tmp``; in the final shuffle, ``*.tfrecords.shuffling``), the work directory
``.bert_data_work`` and the lock file ``.bert_data.lock``.

The work directory holds, for the tasks to hand each other data (see ``scratch``): tokenized
slices (``slice-N.tokens.npy``, ``.sentences.npy``, ``.docs.npy`` and the summary ``.json``,
written last), each unit's token pool (``unit-N.pool.npy``), encode tasks' pieces
(``unit-N-SPLIT-SHARD.piece``), pieces fetched from a URL work directory, and temporaries
(``*.PID.UUID.tmp``); beside them the journal (``journal.json``).  Units are numbered from 1
in these names, as messages number them.

With Google's ``--output_file`` the shards are exactly the named files (in one directory), and
the manifest, work directory and lock are named after the first of them
(``Manifest.name_for_files("x.tfrecord")``, ``.x.tfrecord.bert_data_work``, ``.x.tfrecord.bert_data.lock``),
so that many such runs can write their own files into one directory at once, as is common with
Google's tool (one run per input shard); like Google's tool, such a run replaces the files it
names.

The journal, rewritten after each unit is appended to the shards, records the shards' sizes
and zlib checksums and the run's totals, under the fingerprint of the run: a resumed run
truncates the shards to those sizes and goes on from the next unit.  Tokenized slices are kept
for a resumed run; every other work file of a unit the journal does not vouch for is discarded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from typing import Callable, Dict, List, Optional, Tuple

from .. import storage
from ..config import ConfigError, GeneratorConfig
from ..format import dataset_layout
from ..format.dataset_layout import TRAIN, in_progress, is_run_output_name
from ..format.manifest import MANIFEST_NAME, Manifest, write_json_atomic
from ..notices import warn

WORK_DIR = ".bert_data_work"
JOURNAL = "journal.json"
LOCK = ".bert_data.lock"
# Tokenized slices, complete (written through a temporary and renamed): a resumed run keeps them.
_SLICE_KINDS = {"tokens": ".tokens.npy", "docs": ".docs.npy", "sentences": ".sentences.npy", "summary": ".json"}
_SLICE_FILE = re.compile(r"^slice-\d+(%s)$" % "|".join(re.escape(suffix) for suffix in _SLICE_KINDS.values()))


class GenerationError(RuntimeError):
    """The run cannot go on; the message is one line for the user."""


class Interrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C or SIGTERM (a KeyboardInterrupt, so callers that catch that still
    do), with what it kept for ``--resume``: the first ``units_kept`` of ``n_units`` units, in
    ``bytes_kept`` bytes of shards, and ``slices_kept`` of ``n_slices`` tokenized slices."""

    def __init__(self, signum: int, units_kept: int = 0, n_units: int = 0, bytes_kept: int = 0,
                 slices_kept: int = 0, n_slices: int = 0):
        super().__init__(signum)
        self.signum, self.units_kept, self.n_units, self.bytes_kept = signum, units_kept, n_units, bytes_kept
        self.slices_kept, self.n_slices = slices_kept, n_slices

    def describe(self) -> str:
        """Units are numbered from 1, as the work files are."""
        resume = f"run the same command with --resume to continue with unit {self.units_kept + 1:,}"
        if self.units_kept:
            kept = "unit 1" if self.units_kept == 1 else f"units 1-{self.units_kept:,}"
            return f"{kept} of {self.n_units:,} kept ({self.bytes_kept / 1e6:,.1f} MB of shards); {resume}"
        if self.slices_kept:
            return (f"no unit was written yet; {self.slices_kept:,} of {self.n_slices:,} tokenized slices kept; "
                    f"{resume}")
        return "nothing was finished, so nothing is kept; run the same command again to start over"


# ---------------------------------------------------------------------------- names

def output_kind(config: GeneratorConfig) -> str:
    """The run's output format (see ``format.dataset_layout.FORMATS``)."""
    return getattr(config, "output_format", None) or dataset_layout.DEFAULT_FORMAT


def split_dirs(config: GeneratorConfig) -> Dict[str, str]:
    return dataset_layout.split_dirs(config.output_dir, config.has_validation, storage.join)


def shard_path(directory: str, config: GeneratorConfig, shard: int) -> str:
    if config.output_files:  # Google's --output_file: the named files (all in output_dir)
        return config.output_files[shard]
    return storage.join(directory, dataset_layout.shard_name(config.name, shard, output_kind(config)))


def shard_in_progress(directory: str, config: GeneratorConfig, shard: int) -> str:
    return in_progress(shard_path(directory, config, shard))


def shard_being_shuffled(path: str) -> str:
    """A shard being written in its final, shuffled order (``shard_shuffle``), beside ``path``,
    its final name (or, staged for an upload, its name in progress)."""
    return path + ".shuffling"


def remove_shards_being_shuffled(config: GeneratorConfig, shard_counts: Dict[str, int]) -> None:
    """Shards half written in their final order (an interrupted final pass): ``--resume`` redoes
    them from the shards in progress, which are whole until their shuffled copy is."""
    for split, directory in split_dirs(config).items():
        for shard in range(shard_counts.get(split, 0)):
            for path in (shard_path(directory, config, shard), shard_in_progress(directory, config, shard)):
                try:
                    os.remove(shard_being_shuffled(path))
                except FileNotFoundError:
                    pass


def _run_file(config: GeneratorConfig, name: str) -> str:
    """``name`` in the output directory, or for named output files ``.FIRST.<name>`` (its own
    per run: FIRST is the first output file's name)."""
    if config.output_files:
        return os.path.join(config.output_dir, f".{os.path.basename(config.output_files[0])}{name}")
    return os.path.join(config.output_dir, name)


def manifest_name(config: GeneratorConfig) -> str:
    if config.output_files:
        return Manifest.name_for_files(config.output_files[0])
    return MANIFEST_NAME


def work_dir_of(config: GeneratorConfig) -> str:
    # Absolute: workers, here or on a cluster, may run in another directory.
    return os.path.abspath(_run_file(config, WORK_DIR))


def lock_path(config: GeneratorConfig) -> str:
    return _run_file(config, LOCK)


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
    """A tokenized slice's files: ``tokens``, ``docs`` (its document table), ``sentences`` and
    ``summary`` (written last: a slice with a summary is complete)."""
    base = storage.join(work_dir, f"slice-{index:07d}")
    return {kind: base + suffix for kind, suffix in _SLICE_KINDS.items()}


def pool_path(work_dir: str, unit_index: int) -> str:
    return storage.join(work_dir, f"unit-{unit_index + 1:07d}.pool.npy")  # units numbered from 1, as messages do


def piece_path(work_dir: str, unit_index: int, split: str, first_shard: int) -> str:
    """An encode task's piece: its unit's records for some shards, the first being ``first_shard``."""
    return storage.join(work_dir, f"unit-{unit_index + 1:07d}-{split}-{first_shard:05d}.piece")


def fetched_piece_path(into_dir: str) -> str:
    """A local copy of a piece at a URL, while it is appended to the shards."""
    return os.path.join(into_dir, f"fetched-{uuid.uuid4().hex}.piece")


def private_temporary(path: str) -> str:
    """A temporary name for ``path`` that no other run of the same task shares: a task that runs
    twice (a cluster worker thought lost) writes the same bytes, and the copies replace each
    other atomically with ``os.replace``."""
    return f"{path}.{os.getpid()}.{uuid.uuid4().hex}.tmp"


# ---------------------------------------------------------------------------- create

def existing_outputs(config: GeneratorConfig) -> List[str]:
    """Files and directories of an earlier run in the output directory (only ones this tool writes)."""
    if config.output_files:  # only this run's own files: other runs may share the directory
        manifest = Manifest.path_in(config.output_dir, manifest_name(config))
        candidates = [p for path in config.output_files + [manifest] for p in (path, path + ".tmp")]
        return [path for path in candidates + [work_dir_of(config)] if os.path.exists(path)]
    found = []
    for directory in [config.output_dir] + list(dataset_layout.split_dirs(config.output_dir, True).values()):
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            if is_run_output_name(name):
                found.append(os.path.join(directory, name))
    work = os.path.join(config.output_dir, WORK_DIR)
    if os.path.isdir(work):
        found.append(work)
    return found


def existing_outputs_at(output: str) -> List[str]:
    """URLs of files an earlier run wrote at an output URL (only ones this tool writes)."""
    found = []
    for directory in [output] + list(dataset_layout.split_dirs(output, True, storage.join).values()):
        found += [storage.join(directory, name) for name in storage.listdir(directory) if is_run_output_name(name)]
    if storage.listdir(output_work_dir(output)):
        found.append(output_work_dir(output))
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

    def __init__(self, output_dir: str, path: Optional[str] = None):
        self.path = path or os.path.join(output_dir, LOCK)
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


def create_output_dir(config: GeneratorConfig) -> None:
    if os.path.exists(config.output_dir) and not os.path.isdir(config.output_dir):
        raise ConfigError(f"--output_dir {config.output_dir} exists and is not a directory")
    try:
        os.makedirs(config.output_dir, exist_ok=True)
    except OSError as error:
        raise ConfigError(f"--output_dir {config.output_dir} cannot be created: {error.strerror}") from None


def prepare_output_dir(config: GeneratorConfig, fingerprint: str) -> Optional[dict]:
    """Make the (locked) output directory ready; returns the journal when resuming."""
    if not os.access(config.output_dir, os.W_OK):
        raise ConfigError(f"--output_dir {config.output_dir} is not writable")

    work_dir = work_dir_of(config)
    journal = None
    found = existing_outputs(config)
    if config.resume:
        if Manifest.exists_in(split_dirs(config)[TRAIN], manifest_name(config)):
            raise ConfigError(f"--resume: {config.output_dir} holds a finished run; nothing to resume")
        journal = read_journal(work_dir)
        if journal is None:
            # Never start afresh silently under --resume: the user believes work is kept.
            if found:
                raise ConfigError(f"--resume: the run in {config.output_dir} stopped before it kept anything, so there "
                                  "is nothing to resume; run without --resume, with --overwrite, to start again")
            raise ConfigError(f"--resume: {config.output_dir} holds no interrupted run, so there is nothing to resume; "
                              "run without --resume to start")
        if journal.get("fingerprint") != fingerprint:
            raise ConfigError(
                f"--resume: {config.output_dir} was started with other options, another vocabulary or "
                "other documents; resume with the same ones, or use --overwrite to start again"
            )
        discard_unjournaled(work_dir)
    elif found:
        # Named output files (--output_file) are replaced, as Google's tool replaces them.
        if not (config.overwrite or config.output_files):
            raise ConfigError(
                f"--output_dir {config.output_dir} already holds output ({os.path.basename(found[0])}"
                f"{' and more' if len(found) > 1 else ''}); pass --overwrite to replace it or --resume to "
                "continue an interrupted run"
            )
        remove_outputs(found)
    for directory in split_dirs(config).values():
        os.makedirs(directory, exist_ok=True)
    os.makedirs(work_dir, exist_ok=True)
    return journal


# ---------------------------------------------------------------------------- journal

def read_journal(work_dir: str) -> Optional[dict]:
    """``{"fingerprint", "shard_sizes", "shard_checksums", "totals"}``, or None if the run never
    began writing (the journal is written before the first task).  ``shard_checksums`` is missing
    from journals of earlier versions."""
    path = os.path.join(work_dir, JOURNAL)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def write_journal(work_dir: str, fingerprint: str, shard_sizes: Dict[str, int], shard_checksums: Dict[str, list],
                  totals: dict) -> None:
    # Not synced, like the shards before they are complete: it guards against a stopped process
    # (whose writes the page cache keeps), and an fsync per unit would stall the parent.
    write_json_atomic(os.path.join(work_dir, JOURNAL), {
        "fingerprint": fingerprint, "shard_sizes": shard_sizes, "shard_checksums": shard_checksums, "totals": totals,
    }, sync=False)


def count_slices(work_dir: str) -> int:
    """Slices whose tokenization finished (their summary is written last)."""
    summary = _SLICE_KINDS["summary"]
    return sum(1 for name in storage.listdir(work_dir) if _SLICE_FILE.match(name) and name.endswith(summary))


def discard_unjournaled(work_dir: str) -> None:
    """Remove the work files of units the journal does not vouch for (a resumed run redoes
    them), and any temporary file; tokenized slices stay for the resumed run.  ``work_dir``: a
    local directory or a URL."""
    storage.remove_many([storage.join(work_dir, name) for name in storage.listdir(work_dir)
                         if name != JOURNAL and not _SLICE_FILE.match(name)])


def keep_journaled(places, remove_shards: Callable[[], None]) -> Tuple[Optional[dict], int]:
    """After a stop: keep what ``--resume`` needs (the units the journal vouches for, and the
    tokenized slices), discard every other work file; when nothing is kept, every file of the
    run goes, as if it had never started (``remove_shards`` removes the shards in progress).
    Returns the journal (None if never written) and the count of tokenized slices kept."""
    journal = read_journal(places.journal_dir)
    discard_unjournaled(places.journal_dir)
    kept_slices = count_slices(places.scratch)
    if not (journal and journal["totals"]["units_done"]) and not kept_slices:
        remove_shards()
        remove_run_files(places)
    elif places.scratch != places.journal_dir:
        discard_unjournaled(places.scratch)
    return journal, kept_slices


# ---------------------------------------------------------------------------- finalize, discard

def write_manifests(config: GeneratorConfig, manifests: Dict[str, Manifest]) -> None:
    """Each split's manifest into its directory: written last, it marks the split finished."""
    for split, directory in split_dirs(config).items():
        manifests[split].write(directory, manifest_name(config))


def remove_run_files(places) -> None:
    """The run's work files, local or at a URL, and its staging directory (``places``: the run's
    ``locations.RunLocations``): at the end of a run, or after a failure (a failure to clean a
    URL up is a warning, never an error)."""
    shutil.rmtree(places.journal_dir, ignore_errors=True)
    if places.scratch != places.journal_dir:
        try:
            storage.remove_tree(places.scratch)
        except OSError as error:
            warn(f"could not remove the work directory {places.scratch}: {error}")
    if places.remote:
        shutil.rmtree(places.local_output, ignore_errors=True)
