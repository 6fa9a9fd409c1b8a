"""compiled.note_compiling: a first run's kernel compilation is said once, never a warm run's."""

import importlib.util
import multiprocessing
import sys

import pytest

from bert_data import compiled

KERNEL_MODULE = '''
import numpy as np
from bert_data import compiled


@compiled.kernel
def doubled(values):
    out = np.empty_like(values)
    for i in range(values.shape[0]):
        out[i] = 2 * values[i]
    return out


@compiled.kernel
def halved(values):
    out = np.empty_like(values)
    for i in range(values.shape[0]):
        out[i] = values[i] // 2
    return out
'''


def _load(path, name):
    """The module at ``path`` imported afresh as ``name`` (new getters: nothing compiled yet)."""
    sys.modules.pop(name, None)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def kernels_on(monkeypatch):
    monkeypatch.delenv(compiled.DISABLE_VARIABLE, raising=False)
    pytest.importorskip("numba")  # dev installs numba: this runs in CI
    yield
    compiled.note_compiling(None)


def test_a_cold_cache_is_said_once_and_a_warm_one_not_at_all(tmp_path, kernels_on):
    import numpy as np

    path = tmp_path / "note_kernels.py"  # (numba caches it in tmp_path/__pycache__: cold at first)
    path.write_text(KERNEL_MODULE)
    said = []
    compiled.note_compiling(said.append)
    module = _load(path, "note_kernels")
    values = np.arange(7, dtype=np.int64)
    assert module.halved() is not None and said == []  # a getter alone compiles nothing (a run's other path)
    assert np.array_equal(module.doubled()(values), 2 * values)  # compiled, and saved in the cache
    assert said == [compiled.COMPILING_NOTE]
    assert np.array_equal(module.halved()(values), values // 2)  # compiled too: said once a run
    assert said == [compiled.COMPILING_NOTE]

    compiled.note_compiling(said.append)  # the next run, its kernels in numba's cache
    again = _load(path, "note_kernels")
    assert np.array_equal(again.doubled()(values), 2 * values) and np.array_equal(again.halved()(values), values // 2)
    assert said == [compiled.COMPILING_NOTE]

    compiled.note_compiling(said.append)
    path.write_text(KERNEL_MODULE + "\n# edited: numba's cache no longer current\n")
    edited = _load(path, "note_kernels")
    assert np.array_equal(edited.doubled()(values), 2 * values)
    assert said == [compiled.COMPILING_NOTE] * 2


def test_nothing_is_said_when_nobody_listens_or_the_run_is_over(tmp_path, kernels_on):
    import numpy as np

    path = tmp_path / "quiet_kernels.py"
    path.write_text(KERNEL_MODULE)
    said = []
    compiled.note_compiling(said.append)
    compiled.end_of_run()  # (--quiet, a library caller's executor, or the run ended)
    module = _load(path, "quiet_kernels")
    assert np.array_equal(module.doubled()(np.arange(3)), 2 * np.arange(3))
    assert said == []


def _compile_in_child(path, out):
    import numpy as np

    compiled._compiling_note = lambda line: open(out, "a").write(line + "\n")  # (the child's own stderr)
    module = _load(path, "forked_kernels")
    module.doubled()(np.arange(3))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="workers are forked on POSIX")
def test_workers_forked_during_a_run_say_it_once_between_them(tmp_path, kernels_on):
    path, out = tmp_path / "forked_kernels.py", tmp_path / "said.txt"
    path.write_text(KERNEL_MODULE)
    said = []
    compiled.note_compiling(said.append)
    child = multiprocessing.get_context("fork").Process(target=_compile_in_child, args=(str(path), str(out)))
    child.start()
    child.join()
    assert child.exitcode == 0
    assert out.read_text() == compiled.COMPILING_NOTE + "\n"
    path.write_text(KERNEL_MODULE + "\n# edited: cold again\n")
    assert _load(path, "forked_kernels").doubled() is not None  # cold here too: compiled on first call
    assert said == []  # the child said it for the run
