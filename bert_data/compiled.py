"""Compiled kernels: the generator's per-instance loops, compiled by numba when it is installed.

Pairing (Google's loop over sentences, with Python's own random stream), masking and record
encoding each have a reference implementation in plain Python/numpy, which stays the fallback
and the test oracle; a kernel gives exactly its output (the same bytes), several times faster.
``numba`` is optional (``pip install "bert_data[native]"``, with the native WordPiece; see
pyproject.toml for why not a default dependency): without it the reference paths run.

``BERT_DATA_COMPILED=0`` in the environment turns the kernels off (the tests run both paths and
compare them); compiled code is cached on disk by numba (``cache=True``: next to the module, or
under ``NUMBA_CACHE_DIR``), so a worker pays the compilation once per installation, not per run.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Callable, Optional

__all__ = ["kernel", "helper", "kernels_enabled", "compiled_missing_note", "DISABLE_VARIABLE"]

PACKAGE = "numba"
DISABLE_VARIABLE = "BERT_DATA_COMPILED"
_HELPERS: list = []  # functions kernels call, registered with numba before the first compilation
_REGISTERING = threading.Lock()  # a kernel compiled in another thread waits until all are registered


@functools.lru_cache(maxsize=None)
def _importable() -> bool:
    try:
        import numba  # noqa: F401
    except Exception:  # not installed, or an install that does not match this numpy: the reference runs
        return False
    return True


def kernels_enabled() -> bool:
    """Whether compiled kernels run: numba importable and not turned off by the environment."""
    return os.environ.get(DISABLE_VARIABLE, "1").strip() not in ("0", "false", "no", "off") and _importable()


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

            _register_helpers()
            compiled["kernel"] = numba.njit(cache=True, nogil=True)(function)
        return compiled["kernel"]

    get.python_function = function  # type: ignore[attr-defined]  (tests may run the loop uncompiled)
    return get


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
    if _importable() or os.environ.get(DISABLE_VARIABLE, "1").strip() in ("0", "false", "no", "off"):
        return None
    return (f"pairing, masking and encoding run without compiled kernels (the same bytes, several times "
            f"slower): pip install \"bert_data[native]\" (or {PACKAGE}) for them")
