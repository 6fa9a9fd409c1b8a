"""The output directory of a run: where shards go, what counts as earlier output, the lock that
keeps a second run out, and the journal that makes ``--resume`` possible.

Layout: ``OUTPUT_DIR/NAME-1.tfrecords`` .. ``NAME-N.tfrecords`` and the manifest (with a
validation split, ``OUTPUT_DIR/train/`` and ``OUTPUT_DIR/val/``, each laid out like that), plus,
while a run is under way, the work directory ``.bert_data_work`` (token files, piece files and
the journal) and the lock file ``.bert_data.lock``.

With Google's ``--output_file`` the shards are exactly the named files (in one directory), and
the manifest, work directory and lock are named after the first of them
(``Manifest.name_for_files("x.tfrecord")``, ``.x.tfrecord.bert_data_work``, ``.x.tfrecord.bert_data.lock``),
so that many such runs can write their own files into one directory at once, as is common with
Google's tool (one run per input shard); like Google's tool, such a run replaces the files it
names.

The journal, rewritten after each unit is appended to the shards, records the shards' sizes
and zlib checksums and the run's totals, under the fingerprint of the run: a resumed run
truncates the shards to those sizes and goes on from the next unit.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from typing import Dict, List, Optional

from ..config import ConfigError, GeneratorConfig
from ..format.manifest import MANIFEST_NAME, Manifest, write_json_atomic
from .inputs.types import TRAIN, VAL

WORK_DIR = ".bert_data_work"
JOURNAL = "journal.json"
LOCK = ".bert_data.lock"


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


def split_dirs(config: GeneratorConfig) -> Dict[str, str]:
    if config.has_validation:
        return {TRAIN: os.path.join(config.output_dir, TRAIN), VAL: os.path.join(config.output_dir, VAL)}
    return {TRAIN: config.output_dir}


def shard_path(directory: str, config: GeneratorConfig, shard: int) -> str:
    if config.output_files:  # Google's --output_file: the named files (all in output_dir)
        return config.output_files[shard]
    return os.path.join(directory, f"{config.name}-{shard + 1}.tfrecords")


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


def existing_outputs(config: GeneratorConfig) -> List[str]:
    """Files and directories of an earlier run in the output directory (only ones this tool writes)."""
    if config.output_files:  # only this run's own files: other runs may share the directory
        manifest = Manifest.path_in(config.output_dir, manifest_name(config))
        candidates = [p for path in config.output_files + [manifest] for p in (path, path + ".tmp")]
        return [path for path in candidates + [work_dir_of(config)] if os.path.exists(path)]
    found = []
    for directory in (config.output_dir, os.path.join(config.output_dir, TRAIN), os.path.join(config.output_dir, VAL)):
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            if Manifest.is_manifest_file(name) or name.endswith(".tfrecords") or name.endswith(".tfrecords.tmp"):
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
        discard_unjournaled_work(work_dir)
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


# Tokenized slices, complete (written through a temporary and renamed): a resumed run keeps them.
_SLICE_FILE = re.compile(r"^slice-\d+\.(tokens\.npy|docs\.npy|sentences\.npy|json)$")


def count_tokenized_slices(work_dir: str) -> int:
    """Slices whose tokenization finished (their summary is written last)."""
    try:
        return sum(1 for name in os.listdir(work_dir) if name.startswith("slice-") and name.endswith(".json"))
    except FileNotFoundError:
        return 0


def discard_unjournaled_work(work_dir: str) -> None:
    """Remove the work files of units the journal does not vouch for (a resumed run redoes
    them), and any temporary file; tokenized slices stay for the resumed run."""
    for name in os.listdir(work_dir):
        if name != JOURNAL and not _SLICE_FILE.match(name):
            os.remove(os.path.join(work_dir, name))
