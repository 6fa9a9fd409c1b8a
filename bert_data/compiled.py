"""Compiled kernels: the generator's per-instance loops, compiled by numba when it is installed.

Pairing (Google's loop over sentences, with Python's own random stream), masking and record
encoding each have a reference implementation in plain Python/numpy, which stays the fallback
and the test oracle; a kernel gives exactly its output (the same bytes), several times faster.
``numba`` is optional (``pip install "bert_data[native]"``, with the native WordPiece; see
pyproject.toml for why not a default dependency): without it the reference paths run.

``BERT_DATA_COMPILED=0`` in the environment turns the kernels off (the tests run both paths and
compare them); compiled code is cached on disk by numba (``cache=True``: next to the module, or
under ``NUMBA_CACHE_DIR``), so a worker pays the compilation once per installation, not per run;
that first run says so in one line (:func:`note_compiling`) rather than waiting up to a minute mute.

numba's start (its import and CPU target, about 100,000 Python objects that live as long as the
process) costs 0.5-1 s a process: :func:`start_in_background` begins it in a thread of the
command's process while the first slices are tokenized (which mostly lets go of the GIL), and
:func:`start_before_fork` waits for it there, once, in the parent of a forked pool, whose
workers inherit it.  In the command's own processes (:func:`claim_process`)
those objects, and what else a process keeps to its end (a worker's tokenizer and spaCy
pipeline), are built without cyclic collections and then kept out of them (:func:`long_lived`,
``gc.freeze``): every full collection would walk them all again (0.3-0.6 s each, a few per
worker and run: 1.1-1.4 s of each worker's CPU), and so would the collection at interpreter exit
(0.4-1.2 s after the run had finished).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import sys
import threading
from typing import Callable, Iterator, Optional

__all__ = ["kernel", "helper", "claim_process", "long_lived", "kernels_enabled", "compiled_missing_note",
           "start_before_fork", "start_in_background", "wait_for_start", "note_compiling", "end_of_run",
           "DISABLE_VARIABLE"]

PACKAGE = "numba"
DISABLE_VARIABLE = "BERT_DATA_COMPILED"
_HELPERS: list = []  # functions kernels call, registered with numba before the first compilation
_REGISTERING = threading.Lock()  # a kernel compiled in another thread waits until all are registered
_start_lock = threading.Lock()  # numba started by one thread (a Dask worker runs tasks in several)


@functools.lru_cache(maxsize=None)
def _importable() -> bool:
    try:
        with long_lived(), _unused_by_kernels_hidden():
            import numba  # noqa: F401
    except Exception:  # not installed, or an install that does not match this numpy: the reference runs
        return False
    return True


# What numba's start imports and no kernel uses, for features of numba's we do not use: scipy's
# BLAS and LAPACK bindings (numba's np.linalg; they import scipy.linalg: 0.3-0.9 s), scipy itself
# (numba only checks its version: ~15 ms), cffi (numba's typing of cffi functions; it imports
# pycparser: ~25 ms) and yaml (numba's reader of a .numba_config.yaml: ~15 ms; hidden only when
# there is no such file, so that one is read as numba always reads it).
_UNUSED_BY_KERNELS = ("scipy.linalg.cython_blas", "scipy.linalg.cython_lapack", "scipy", "cffi")
_NUMBA_CONFIG_FILE = ".numba_config.yaml"  # (numba's name: read from the working directory)


@contextlib.contextmanager
def _unused_by_kernels_hidden() -> Iterator[None]:
    """In a claimed process, while numba starts: those modules hidden from this thread (an
    import of them raises ImportError, as when they are not installed; another thread, which
    may be planning the run meanwhile (:func:`start_in_background`), imports them as usual);
    they import normally afterwards.  Not in a library caller's process, whose own numba code
    may use them, nor for a module already imported."""
    hidden = _UNUSED_BY_KERNELS + (() if os.path.isfile(_NUMBA_CONFIG_FILE) else ("yaml",))
    hidden = {name for name in hidden if name not in sys.modules} if _OWN_PROCESS else set()
    if not hidden:
        yield
        return
    finder = _HiddenFromThread(hidden, threading.get_ident())
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


class _HiddenFromThread:
    """An import finder that finds nothing, for ``names``, in one thread: there they are not
    installed (a ``sys.modules`` entry of None would hide them from every thread)."""

    def __init__(self, names, thread: int):
        self.names, self.thread = names, thread

    def find_spec(self, name, path=None, target=None):
        if name in self.names and threading.get_ident() == self.thread:
            raise ModuleNotFoundError(f"No module named {name!r} (not needed by bert_data's kernels)", name=name)
        return None


def _turned_off() -> bool:
    return os.environ.get(DISABLE_VARIABLE, "1").strip() in ("0", "false", "no", "off")


def kernels_enabled() -> bool:
    """Whether compiled kernels run: numba importable and not turned off by the environment."""
    _join_background_start()
    return not _turned_off() and _importable()


_OWN_PROCESS = False  # set by the command line and the generator's own worker processes


def claim_process() -> None:
    """Say that this process runs only bert_data (the command line, a local worker process):
    numba may then start without its BLAS bindings, which import ``scipy.linalg`` (0.3-0.9 s
    of every process's start; no kernel uses BLAS).  Not done in a library caller's process,
    where the user's own numba code may need them.

    Nothing here multiplies matrices either, so numpy's BLAS is told to start no thread of its
    own (``OPENBLAS_NUM_THREADS=1``, read once, at numpy's import: only when numpy is not
    imported yet, and never over the user's own setting).  OpenBLAS starts a thread per core
    but one at that import, and each spins about 0.1 s of CPU before it sleeps: 0.11 s of a
    2-core machine's 2.8 s run, and one core-second for every ten cores of a larger one, in
    every process that imports numpy."""
    global _OWN_PROCESS
    _OWN_PROCESS = True
    if "numpy" not in sys.modules:
        os.environ.setdefault(_BLAS_THREADS, "1")


_BLAS_THREADS = "OPENBLAS_NUM_THREADS"


@contextlib.contextmanager
def long_lived() -> Iterator[None]:
    """Around the build of what a claimed process keeps until it ends (numba's start, a worker's
    tokenizer or spaCy pipeline): no cyclic collection during the build (each would walk all
    that was built so far: a third of numba's start, about 1 s of each worker's CPU on raw text
    with spaCy's), and what is alive afterwards frozen out of every later collection and out of
    the one at exit (``gc.freeze``; refcounting still frees what is dropped).  Garbage is
    collected first, so that none is frozen (cheap once the process's own start is frozen: only
    what is younger is walked); what the build itself leaves is.  In any other process (a library
    caller's) the collector is left alone.  Enter it only when something is built."""
    if not _OWN_PROCESS:
        yield
        return
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


_STARTED = False  # numba's CPU target loaded in this process (or the parent it was forked from)


def _start_numba() -> None:
    """Load numba's CPU target, once a process; in a claimed process, with the modules no kernel
    uses hidden while numba looks for them (``_unused_by_kernels_hidden``).  (numba refreshes
    the target again before each compilation: what registers later is seen then.)"""
    global _STARTED
    if _STARTED:
        return
    with long_lived(), _unused_by_kernels_hidden():
        from numba.core.registry import cpu_target

        if _OWN_PROCESS:
            _skip_numba_extensions()
        cpu_target.target_context.refresh()
    _STARTED = True


def started() -> bool:
    """Whether numba has started in this process (or the parent it was forked from): a kernel
    used where the reference path is nearly as cheap (a plan's order of documents) is worth
    its first call only then (starting numba costs 0.3-0.5 s)."""
    return _STARTED


def _skip_numba_extensions() -> None:
    """numba's start looks for third-party extensions (``numba_extensions`` entry points) among
    all installed packages' metadata: 30-35 ms with 220 packages installed.  An extension types
    and compiles its own objects for code that uses them; no kernel does (they take numpy arrays
    and numbers), so a claimed process starts numba without looking."""
    from numba.core import entrypoints

    if hasattr(entrypoints, "_already_initialized"):
        entrypoints._already_initialized = True


_background_start: Optional[threading.Thread] = None


def start_in_background(report: Optional[Callable[[str], None]] = None) -> bool:
    """In a claimed process about to run tasks that use kernels: numba's start (its import, its
    CPU target: 0.4-0.5 s) begun in a thread, while this one tokenizes the first slices, much
    of which lets go of the GIL (reading and syncing files, the native tokenizer); the first
    kernel asked for, or :func:`start_before_fork`, waits for it.  ``report`` is given
    :func:`compiled_missing_note`'s line when numba does not import.  Returns whether that
    check is the thread's (else the caller's); nothing starts in a library caller's process,
    with kernels turned off, or once started."""
    global _background_start
    if not _OWN_PROCESS or _turned_off() or _STARTED or _background_start is not None:
        return False  # (started, or found missing by an earlier run's thread: the caller's check is cheap)

    def start() -> None:
        with _start_lock:
            if _importable():
                _start_numba()
            elif report is not None:
                report(_MISSING_NOTE)

    _background_start = threading.Thread(target=start, name="bert_data-numba-start", daemon=True)
    _background_start.start()
    return True


def _join_background_start() -> None:
    """Wait for :func:`start_in_background`'s thread, if one runs (numba imported by two threads
    at once would each hide and restore modules around it: ``_unused_by_kernels_hidden``)."""
    thread = _background_start
    if thread is not None and thread is not threading.current_thread():
        thread.join()


def wait_for_start() -> None:
    """Wait for numba's start in the background (:func:`start_in_background`), if one runs."""
    _join_background_start()


def end_of_run() -> None:
    """A run is over (finished or failed): nobody is told of compiles any more
    (:func:`note_compiling`), and numba's start in the background is waited for (no thread
    left importing it at the interpreter's exit)."""
    note_compiling(None)
    _join_background_start()


def start_before_fork() -> None:
    """In a claimed process about to fork a pool of workers: numba started here, once, for all of
    them (each would otherwise pay 0.3-0.5 s of CPU for it), and what this process has built
    collected and frozen (``gc.freeze``), so that the workers' collections never walk (and so never
    copy) the pages they share with it.  Call it with no other thread running.  In a library
    caller's process nothing happens (its numba would start with BLAS: its workers, claimed, start
    without)."""
    if not _OWN_PROCESS:
        return
    _join_background_start()  # (no thread may run at the fork: it could hold a lock the workers need)
    with _start_lock:
        if kernels_enabled():
            _start_numba()
    gc.collect()
    gc.freeze()


def kernel(function: Callable) -> Callable[[], Optional[Callable]]:
    """Decorator: a getter for ``function`` compiled with ``numba.njit`` (cached on disk, without
    the GIL), or None when kernels are not enabled, so that the caller runs its reference path.

    The compilation happens on first use, not at import (importing numba costs ~0.5 s, and a run
    that never reaches the kernel must not pay it)."""
    compiled: dict = {}

    def get() -> Optional[Callable]:
        if not kernels_enabled():
            return None
        if "kernel" not in compiled:
            import numba

            with _start_lock:
                _start_numba()
            _register_helpers()
            compiled["kernel"] = _said_when_compiled(numba.njit(cache=True, nogil=True)(function))
        return compiled["kernel"]

    get.python_function = function  # type: ignore[attr-defined]  (tests may run the loop uncompiled)
    return get


_compiling_note: Optional[Callable[[str], None]] = None
_compiling_said = None  # (a byte of shared memory and its lock: one line for a run and its forked workers)

COMPILING_NOTE = ("compiling bert_data's kernels for this CPU: the first run after installing or upgrading "
                  "spends up to a minute on it, once (later runs load them from numba's cache)")


def note_compiling(report: Optional[Callable[[str], None]]) -> None:
    """``report`` is given :data:`COMPILING_NOTE`, once, when a kernel is about to be compiled
    rather than loaded from numba's cache: otherwise the first run after an install sits without
    a word for 20-60 s (with a progress bar, at its first unit).  Once for this process and the
    workers it forks from now on, not once per worker: a byte of anonymous shared memory and a
    lock, both inherited by a fork, neither holding a file open (``multiprocessing.Value`` keeps
    one open for writing, which would cost the command its quick exit, ``cli.process_exit``).
    None: nobody is told (a library caller's process, or the run is over)."""
    global _compiling_note, _compiling_said
    _compiling_note, _compiling_said = report, None
    if report is not None:
        import mmap
        import multiprocessing

        try:
            _compiling_said = (mmap.mmap(-1, 1), multiprocessing.get_context("fork").Lock())
        except (ValueError, OSError):  # (no fork here: each process says it once)
            _compiling_said = (bytearray(1), threading.Lock())


def _say_compiling() -> None:
    report, said = _compiling_note, _compiling_said
    if report is None or said is None:
        return
    flag, lock = said
    with lock:
        if flag[0]:
            return
        flag[0] = 1
    report(COMPILING_NOTE)


def _said_when_compiled(dispatcher):
    """``dispatcher``, which says :data:`COMPILING_NOTE` (:func:`note_compiling`) just before it
    compiles, when numba's cache has no code of it for these argument types and this CPU (its
    first call, in the first run after an install).  Through a private numba attribute: when
    it is missing (another numba version), nothing is said rather than something wrong."""
    cache = getattr(dispatcher, "_cache", None)
    load = getattr(cache, "load_overload", None)
    if load is None:
        return dispatcher

    def load_or_say(*args, **kwargs):
        loaded = load(*args, **kwargs)
        if loaded is None:  # (numba compiles next)
            _say_compiling()
        return loaded

    cache.load_overload = load_or_say
    return dispatcher


def helper(function: Optional[Callable] = None, *, inline: bool = False):
    """Decorator for a plain function that kernels call (a kernel can call only compiled code):
    from Python it stays the function itself; before the first kernel compiles, numba's
    ``register_jitable`` makes it compilable into the kernels that call it (``inline``: its body
    copied into each caller, for a small function called per element: numba's calls cost tens of
    nanoseconds; not for a large one, whose copies make compiling slow).  (numba's on-disk
    cache keys a kernel on its own file: after editing a helper in another module, delete the
    kernel's cache, ``__pycache__/*.nbi``/``*.nbc``, or the old code runs on.)"""
    if function is None:
        return functools.partial(helper, inline=inline)
    _HELPERS.append((function, inline))
    return function


def _register_helpers() -> None:
    from numba.extending import register_jitable

    with _REGISTERING:
        while _HELPERS:
            function, inline = _HELPERS.pop()
            register_jitable(inline="always" if inline else "never")(function)


def compiled_missing_note() -> Optional[str]:
    """The note a run prints when numba is not installed (None when it is, or is turned off)."""
    _join_background_start()
    if _turned_off() or _importable():
        return None
    return _MISSING_NOTE


_MISSING_NOTE = (f"pairing, masking and encoding run without compiled kernels (the same bytes, several times "
                 f"slower): pip install \"bert_data[native]\" (or {PACKAGE}) for them")
