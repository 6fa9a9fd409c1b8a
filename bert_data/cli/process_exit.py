"""The end of a command's process, without the interpreter's teardown when nothing needs it.

After ``main`` returns, Python's own exit clears its ~700 modules and frees what they hold one
object at a time (``Py_FinalizeEx``; what ``compiled.long_lived`` froze is left alone): 0.04-0.1 s
of a run's wall time (measured from the last ``atexit`` callback to the process's end, dupe-10
run, 2 workers: 0.065-0.18 s against 0.026-0.048 s without it) after its work is done and
reported, in a process that is about to end anyway.  :func:`exit_process` does what Python's exit does before that teardown (non-daemon
threads joined and ``threading``'s exit callbacks, ``atexit``'s callbacks, ``sys.stdout`` and
``sys.stderr`` flushed) and then ends the process with ``os._exit``, but only when the teardown
could change nothing anyone sees:

* no thread other than daemons is left (Python's exit would wait for it);
* no child process is left (after ``atexit``, where ``multiprocessing`` joins its own);
* no file is open for writing besides stdin, stdout, stderr and what the process was started
  with (a file object's buffer is flushed and its file closed by the teardown: a file this
  process opened and left open keeps the ordinary exit; a descriptor inherited from the shell,
  a pipe or a jobserver's, has no buffer here);
* the flushes of stdout and stderr succeed (a failure there is reported by Python's exit, with
  its own exit status 120).

Otherwise ``sys.exit(code)``: Python's exit, as always.  The exit status is ``code`` either way,
and nothing is written to stderr by the teardown of a process that passes these checks (it has
nothing left to flush or close).  Only for the console scripts (``create_tfrecords``); a library
caller's ``main(argv)`` returns as before.  Linux only (``/proc``); elsewhere Python's exit.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import FrozenSet, List, NoReturn, Tuple

_STDIO = {0, 1, 2}


def exit_process(code: int, inherited: FrozenSet[Tuple[int, int, int]] = frozenset()) -> NoReturn:
    """End the process with exit status ``code`` (see the module's docstring).  ``inherited``:
    :func:`files_open_for_writing` when the process started."""
    if isinstance(code, int) and not _threads_left() and os.path.isdir("/proc/self/fd"):
        shutdown = getattr(threading, "_shutdown", None)  # Python's exit's first step (joins no thread here)
        if shutdown is not None:
            shutdown()
        atexit._run_exitfuncs()  # (run once: Python's exit finds none left if it runs after all)
        if not _children_left() and not files_open_for_writing() - inherited and _flushed():
            os._exit(code)
    sys.exit(code)


def _threads_left() -> List[str]:
    """Threads Python's exit would wait for."""
    return [thread.name for thread in threading.enumerate()
            if thread is not threading.main_thread() and not thread.daemon and thread.is_alive()]


def _children_left() -> List[int]:
    """This process's child processes (running or not yet reaped), as /proc lists them."""
    children: List[int] = []
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as listing:
                children += [int(pid) for pid in listing.read().split()]
    except OSError:  # no /proc listing of children: assume there may be some
        return [-1]
    return children


def files_open_for_writing() -> FrozenSet[Tuple[int, int, int]]:
    """The descriptors besides stdin, stdout and stderr open for writing, each with what it is
    open on (descriptor, device, inode); one that cannot be examined counts as open."""
    found = set()
    try:
        descriptors = os.listdir("/proc/self/fd")
    except OSError:
        return frozenset({(-1, -1, -1)})
    for name in descriptors:
        if int(name) in _STDIO:
            continue
        try:
            with open(f"/proc/self/fdinfo/{name}") as info:
                flags = next(int(line.split()[1], 8) for line in info if line.startswith("flags:"))
            if flags & (os.O_WRONLY | os.O_RDWR):
                status = os.fstat(int(name))
                found.add((int(name), status.st_dev, status.st_ino))
        except FileNotFoundError:  # (the descriptor listdir itself had open, closed since)
            continue
        except (OSError, StopIteration, ValueError):
            found.add((int(name), -1, -1))
    return frozenset(found)


def _flushed() -> bool:
    """stdout and stderr flushed, as Python's exit flushes them (False if that failed: then
    Python's exit reports it, with its own exit status)."""
    try:
        for stream in {id(s): s for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)
                       if s is not None}.values():
            stream.flush()
    except (OSError, ValueError):
        return False
    return True
