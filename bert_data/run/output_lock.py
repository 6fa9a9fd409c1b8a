"""The lock a run holds on its output directory (``run_files`` names the lock files and takes
them: ``locked_output``)."""

from __future__ import annotations

import os
from typing import Optional

from ..config import ConfigError
from ..format.dataset_layout import LOCK


class OutputLock:
    """A lock on the output directory for the length of a run (released by the OS if the
    process dies, so a killed run never blocks the next one).

    One lock file per directory (``dataset_layout.LOCK``): a run of the directory holds it
    exclusively; runs writing named files there (Google's ``--output_file``) hold it shared, so
    that many of them share a directory but none runs beside a run of the whole directory (whose
    ``--overwrite`` could otherwise meet their files in progress), and each also holds its own
    exclusively (``path``)."""

    def __init__(self, output_dir: str, path: Optional[str] = None, shared: bool = False):
        self.path = path or os.path.join(output_dir, LOCK)
        self.shared = shared
        self.handle = None

    def acquire(self) -> None:
        import fcntl

        try:
            self.handle = open(self.path, "a+")
        except OSError as error:
            raise ConfigError(f"--output_dir {os.path.dirname(self.path) or '.'} is not writable: "
                              f"{error.strerror}") from None
        try:
            fcntl.flock(self.handle, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except OSError:
            self.handle.seek(0)
            holder = self.handle.read().strip() or "runs writing --output_file files there"
            self.handle.close()
            self.handle = None
            raise ConfigError(
                f"--output_dir {os.path.dirname(self.path) or '.'} is in use by another run ({holder}); "
                "wait for it to finish or choose another directory"
            ) from None
        if self.shared:
            return  # (the holders of a shared lock name nobody: there may be many)
        self.handle.seek(0)
        self.handle.truncate()
        self.handle.write(f"pid {os.getpid()} on {os.uname().nodename}\n")
        self.handle.flush()

    def release(self) -> None:
        import fcntl

        if self.handle is None:
            return
        last = True
        if self.shared:  # the file goes with the last of the runs sharing it
            try:
                fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                last = False
        if last:
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass
        self.handle.close()
        self.handle = None
