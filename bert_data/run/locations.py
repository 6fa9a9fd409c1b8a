"""Where a run's data lives: the output (a local directory or a URL), the local directory the
shards are assembled in, the work directory tasks exchange data through, and the files
(vocabulary, tokenizer) that workers need local copies of.

Output to a URL keeps every promise of a local run:

* the shards are assembled in a local *staging* directory (appending is what a local file
  system does well and an object store cannot), with the journal beside them, so ``--resume``
  works as it does locally, on the same machine: the staging directory is named after the
  output URL (``$XDG_CACHE_HOME/bert_data/staging/<hash>``, or under a local ``--work_dir``);
* when every unit is in, each shard is uploaded to its final key (an upload appears complete or
  not at all: a reader never sees part of a shard), then the manifests, last;
* a lock object in the output (see ``run_files``) keeps a second run out: written with a check and
  read back, naming the host, process and staging directory.  Object stores have no exclusive
  create here, so two runs started in the same instant could both pass; the rule is one run per
  output prefix, and the lock catches the common mistake.  A lock left by a killed run on this
  host is taken over; one from another host must be removed by hand (the error says how).

The work directory (``--work_dir``) is local by default (beside the journal: a local run is as
before), or any URL all workers reach: with a Dask executor and a URL output, it defaults to
the output's work directory on the object store, so no task ever needs a path only the client
can see.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
import tempfile
import time
from dataclasses import dataclass
from typing import Dict, Optional

from .. import storage
from ..config import ConfigError
from ..format.dataset_layout import TRAIN, companion_paths, in_progress
from ..format.manifest import Manifest
from ..tokenizers import TokenizerSource
from .run_files import (GenerationError, discard_unjournaled, existing_outputs, output_lock, output_work_dir,
                        prepare_output_dir, read_journal, run_dir_name, shard_in_progress, shard_path, work_dir_of)
from .specs import OutputSpec, RunControl

# ---------------------------------------------------------------------------- files workers open

_local_copies: Dict[str, str] = {}


def local_copy(url: str) -> str:
    """A local copy of a file at a URL, fetched once per process (a forked worker uses its
    parent's) into a cache shared by this machine's processes, named by the URL and the
    object's version: an object replaced since is fetched again, and a crashed worker leaves no
    private directory behind.  ``forget_local_copies`` makes the next call look again."""
    path = _local_copies.get(url)
    if path is None or not os.path.exists(path):
        try:
            version = storage.stamp(url)
            directory = os.path.join(tempfile.gettempdir(), f"bert_data-files-{os.getuid()}")
            os.makedirs(directory, exist_ok=True)
            digest = hashlib.sha256(f"{url}\0{version}".encode("utf-8")).hexdigest()[:16]
            # (the file's name without the URL's query: it may hold a token)
            path = os.path.join(directory, f"{digest}-{storage.basename(url.split('?')[0])}")
            if not os.path.exists(path):
                temporary = f"{path}.{os.getpid()}.tmp"
                storage.download(url, temporary)
                os.replace(temporary, path)  # processes fetching at once each write whole copies
        except FileNotFoundError:
            raise ConfigError(f"{url}: file not found") from None
        except OSError as error:
            raise ConfigError(f"{url}: cannot read: {error.strerror or error}") from None
        _local_copies[url] = path
    return path


def forget_local_copies() -> None:
    """A new run fetches its files again (they may have changed since the last)."""
    _local_copies.clear()


def local_tokenizer(source: TokenizerSource) -> TokenizerSource:
    """``source`` with its files at URLs replaced by this machine's copies (fetched once per
    process): what a tokenizer, which opens paths, is built from."""
    local = {name: local_copy(getattr(source, name)) for name in ("path", "vocab_file")
             if storage.is_url(getattr(source, name))}
    return dataclasses.replace(source, **local) if local else source


# ---------------------------------------------------------------------------- the run's places

@dataclass
class RunLocations:
    output: str  # --output_dir as given: a local directory or a URL
    local_output: str  # where shards are assembled: the output directory, or the staging directory
    scratch: str  # the work directory tasks exchange data through: local, or a URL
    journal_dir: str  # local: the journal, beside the shards in progress

    @property
    def remote(self) -> bool:
        return storage.is_url(self.output)

    def staged(self, output: OutputSpec) -> OutputSpec:
        """The output the local machinery (lock, journal, assembly) works on: ``output`` itself,
        or for an output at a URL its staging directory."""
        return output.staged_at(self.local_output) if self.remote else output


def default_staging_root() -> str:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "bert_data", "staging")


def run_locations(spec: OutputSpec, work: Optional[str], distributed: bool = False) -> RunLocations:
    """Where this run's data goes.  ``work``: ``--work_dir``; ``distributed``: tasks run on
    machines that may not see this one's files (a Dask cluster)."""
    output = spec.directory
    run = run_dir_name(output)
    if storage.is_url(output):
        root = work if work and not storage.is_url(work) else default_staging_root()
        local_output = os.path.abspath(os.path.join(root, run))
    else:
        local_output = output
    journal_dir = work_dir_of(spec.staged_at(local_output))
    if work and storage.is_url(work):
        scratch = storage.join(work, run)
    elif work:  # local: its own folder there (for a URL output, the staging folder's work directory)
        scratch = journal_dir if storage.is_url(output) else os.path.abspath(os.path.join(work, run))
    elif distributed and storage.is_url(output):
        scratch = output_work_dir(output)
    else:
        scratch = journal_dir
    return RunLocations(output, local_output, scratch, journal_dir)


# ---------------------------------------------------------------------------- output at a URL

class RemoteOutput:
    """The output URL's side of a run: its lock object, what an earlier run left there, and
    the finished dataset's upload."""

    def __init__(self, output: OutputSpec, control: RunControl, places: RunLocations):
        self.output, self.control, self.places = output, control, places
        self.lock_url = output_lock(places.output)
        self.owner = {"host": socket.gethostname(), "pid": os.getpid(), "staging": places.local_output,
                      "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        self.held = False

    # ------------------------------------------------------------------ lock
    def acquire(self) -> None:
        output = self.places.output
        try:
            found = json.loads(storage.read_bytes(self.lock_url))
        except FileNotFoundError:
            found = None
        except (OSError, ValueError) as error:
            raise ConfigError(f"--output_dir {output}: cannot read: {getattr(error, 'strerror', None) or error}") from None
        if found is not None and not self._stale(found):
            raise ConfigError(
                f"--output_dir {output} is in use by another run (pid {found.get('pid')} on {found.get('host')} since "
                f"{found.get('started')}); wait for it to finish, or if that run is dead remove {self.lock_url}")
        try:
            storage.write_bytes(self.lock_url, json.dumps(self.owner).encode("utf-8"))
            again = json.loads(storage.read_bytes(self.lock_url))
        except (OSError, ValueError) as error:
            raise ConfigError(f"--output_dir {output} is not writable: {getattr(error, 'strerror', None) or error}") \
                from None
        if again != self.owner:  # another run wrote its lock at the same moment
            raise ConfigError(f"--output_dir {output} is in use by another run (pid {again.get('pid')} on "
                              f"{again.get('host')}); one run per output prefix")
        self.held = True

    def _stale(self, found: dict) -> bool:
        """A lock of a process of this host that no longer exists."""
        if found.get("host") != self.owner["host"]:
            return False
        try:
            os.kill(int(found.get("pid")), 0)
        except ProcessLookupError:
            return True
        except (PermissionError, TypeError, ValueError):
            return False
        return False

    def release(self) -> None:
        if not self.held:
            return
        try:
            if json.loads(storage.read_bytes(self.lock_url)) == self.owner:
                storage.remove(self.lock_url)
        except (OSError, ValueError):
            pass
        except Exception as error:  # noqa: BLE001 - storage gone: the lock stays, stale, and
            if storage.unreachable(error) is None:  # the next run of this host takes it over
                raise
        self.held = False

    # ------------------------------------------------------------------ earlier output
    def check_staging(self) -> None:
        """An interrupted run of this output staged here is never dropped silently."""
        control, staging = self.control, self.places.local_output
        if control.resume or control.overwrite or not os.path.isdir(staging) or not os.listdir(staging):
            return
        raise ConfigError(f"--output_dir {self.places.output}: an interrupted run of it is staged in {staging}; "
                          "pass --resume to continue it or --overwrite to start again")

    def prepare(self, staged: OutputSpec, fingerprint: str, record: Optional[dict] = None,
                stamps: Optional[list] = None) -> Optional[dict]:
        """``run_files.prepare_output_dir`` for the staging directory (``staged``), then the
        URL's side: refuse to mix with an earlier run's files unless told (--overwrite: they go;
        --resume: a finished run has nothing to resume).  Returns the journal when resuming."""
        control, output = self.control, self.places.output
        if control.resume and storage.exists(Manifest.path_in(self.output.split_dirs()[TRAIN])) and \
                not (read_journal(self.places.journal_dir) or {}).get("finished"):  # (else: finish it again)
            raise ConfigError(f"--resume: {output} holds a finished run; nothing to resume")
        try:
            journal = prepare_output_dir(staged, fingerprint, control.resume, control.overwrite, record, stamps)
        except ConfigError as error:  # name the URL the user gave, and where its run is staged
            raise ConfigError(str(error).replace(staged.directory, f"{output} (staged in {staged.directory})")) \
                from None
        found = existing_outputs(self.output)  # at the URL
        if not found or journal is not None:
            return journal
        if not (control.overwrite or control.resume):
            raise ConfigError(
                f"--output_dir {output} already holds output ({storage.basename(found[0])}"
                f"{' and more' if len(found) > 1 else ''}); pass --overwrite to replace it or --resume to "
                "continue an interrupted run")
        for url in found:  # only this tool's files, as a local --overwrite
            if url == output_work_dir(output):
                storage.remove_tree(url)
            else:
                storage.remove(url)
        return journal

    # ------------------------------------------------------------------ the finished dataset
    def upload_shards(self, staged: OutputSpec, shard_counts: Dict[str, int], step=lambda: None) -> Dict[str, int]:
        """Each finished shard, staged under ``staged``, to its final key (the manifests come
        after; ``step`` is called after each); returns the shards' sizes by URL, for the manifests."""
        output, sizes = self.output, {}
        urls = output.split_dirs()
        kind = output.format
        for split, directory in staged.split_dirs().items():
            for shard in range(shard_counts[split]):
                staged_shard = shard_in_progress(directory, staged, shard)
                url = shard_path(urls[split], output, shard)
                self._upload(staged_shard, url)
                sizes[url] = os.path.getsize(staged_shard)
                for staged_with, url_with in zip(companion_paths(shard_path(directory, staged, shard), kind),
                                                 companion_paths(url, kind)):  # Megatron's .idx
                    self._upload(in_progress(staged_with), url_with)
                step()
            for name in output.kind.split_files:  # after the shards they list
                self._upload(os.path.join(directory, name), storage.join(urls[split], name))
        return sizes

    def _upload(self, local: str, url: str) -> None:
        try:
            storage.upload(local, url)
        except OSError as error:
            raise GenerationError(f"cannot upload {url}: {error.strerror or error}; the finished shards stay "
                                  f"staged in {self.places.local_output}: run the same command with --resume to "
                                  "upload them") from error


def check_output_url(output_dir: str, work_dir: Optional[str]) -> None:
    """A URL output needs fsspec and the protocol's library: say so before any work."""
    if storage.is_url(output_dir):
        try:
            storage.filesystem(output_dir)
        except storage.StorageError as error:
            raise ConfigError(f"--output_dir {error}") from None
    if work_dir and storage.is_url(work_dir):
        try:
            storage.filesystem(work_dir)
        except storage.StorageError as error:
            raise ConfigError(f"--work_dir {error}") from None


# ---------------------------------------------------------------------------- the work directory

def prepare_work_dir(places: RunLocations, journal: Optional[dict], executor) -> None:
    """A work directory of its own (``--work_dir``, or the output URL's): emptied for a new run,
    its unjournaled files dropped for a resumed one (``journal``: its); then every worker must
    reach it."""
    from .executors import check_workers_see

    if places.scratch != places.journal_dir:
        if journal is not None:
            discard_unjournaled(places.scratch, journal)
        else:
            storage.remove_tree(places.scratch)
        storage.makedirs(places.scratch)
    check_workers_see(executor, places.scratch)
