"""bert_data.compiled: the one switch between compiled kernels and the reference paths."""

import numpy as np
import pytest

from bert_data import compiled


@compiled.kernel
def _running_sum(values):
    total = 0
    out = np.empty_like(values)
    for i in range(values.shape[0]):
        total += values[i]
        out[i] = total
    return out


def test_kernel_compiles_to_the_same_result_as_its_python_function(monkeypatch):
    monkeypatch.delenv(compiled.DISABLE_VARIABLE, raising=False)
    pytest.importorskip("numba")  # dev installs numba: this runs in CI
    fast = _running_sum()
    assert fast is not None and fast is not _running_sum.python_function
    values = np.arange(1, 50, dtype=np.int64)
    assert np.array_equal(fast(values), _running_sum.python_function(values))
    assert np.array_equal(fast(values), np.cumsum(values))


@pytest.mark.parametrize("setting", ["0", "false", "off", " no "])
def test_the_environment_turns_kernels_off(monkeypatch, setting):
    monkeypatch.setenv(compiled.DISABLE_VARIABLE, setting)
    assert not compiled.kernels_enabled()
    assert _running_sum() is None
    assert compiled.compiled_missing_note() is None  # turned off on purpose: nothing to advise


def test_without_numba_the_reference_runs_and_the_note_says_how_to_get_kernels(monkeypatch):
    monkeypatch.delenv(compiled.DISABLE_VARIABLE, raising=False)
    monkeypatch.setattr(compiled, "_importable", lambda: False)
    assert _running_sum() is None
    note = compiled.compiled_missing_note()
    assert note is not None and 'pip install "bert_data[native]"' in note and "\n" not in note
