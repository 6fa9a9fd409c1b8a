"""bert_data.compiled: the one switch between compiled kernels and the reference paths."""

import subprocess
import sys

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


# numba's lookup of its extensions among the installed packages' entry points, recorded.
SPY_ON_EXTENSION_LOOKUP = (
    "import importlib.metadata\n"
    "scanned = []\n"
    "def spy(*args, real=importlib.metadata.entry_points, **kwargs):\n"
    "    scanned.append(args or kwargs)\n"
    "    return real(*args, **kwargs)\n"
    "importlib.metadata.entry_points = spy\n")


def test_a_claimed_process_starts_numba_without_scipy_and_scipy_still_imports(tmp_path):
    """In the command's own processes numba starts without its BLAS bindings (scipy.linalg costs
    0.3-0.9 s a process), without scipy, cffi (and pycparser) and yaml, which no kernel uses;
    they import normally afterwards; and without looking for numba's extensions, which no kernel
    uses either.  Run in a fresh interpreter."""
    pytest.importorskip("numba")
    pytest.importorskip("scipy")
    import subprocess
    import sys

    script = (
        "import sys, numpy as np\n"
        + SPY_ON_EXTENSION_LOOKUP +
        "from bert_data import compiled\n"
        "compiled.claim_process()\n"
        "@compiled.kernel\n"
        "def twice(values):\n"
        "    return values * 2\n"
        "assert twice()(np.arange(3)).tolist() == [0, 2, 4]\n"
        "assert 'scipy.linalg' not in sys.modules, 'numba imported scipy.linalg'\n"
        "imported = [name for name in ('scipy', 'cffi', 'pycparser', 'yaml') if name in sys.modules]\n"
        "assert not imported, f'numba imported {imported}'\n"
        "assert all(sys.modules.get(name, 0) is not None for name in compiled._UNUSED_BY_KERNELS + ('yaml',))\n"
        "assert not scanned, 'numba looked for extensions among the installed packages'\n"
        "import scipy.linalg.cython_blas\n"
        "for name in ('cffi', 'yaml'):\n"
        "    try:\n"
        "        __import__(name)\n"
        "    except ImportError as error:\n"
        "        assert 'halted' not in str(error), error  # installed or not, never left hidden\n"
        "print('ok')\n")
    program = tmp_path / "claimed.py"  # a file: numba caches next to it (in tmp_path), not for "-c"
    program.write_text(script)
    result = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, cwd=tmp_path,
                            env={**__import__("os").environ, compiled.DISABLE_VARIABLE: "1"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_a_numba_config_file_is_read_as_numba_reads_it_in_a_claimed_process(tmp_path):
    """yaml is hidden from numba's start only when there is no .numba_config.yaml to read: with
    one in the working directory, its settings apply as they do without bert_data."""
    pytest.importorskip("numba")
    pytest.importorskip("yaml")
    (tmp_path / ".numba_config.yaml").write_text("color_scheme: light_bg\n")  # (harmless: colours of its messages)
    out = _run_fresh(tmp_path, (
        "import numpy as np\n"
        "from bert_data import compiled\n"
        "compiled.claim_process()\n"
        "@compiled.kernel\n"
        "def twice(values):\n"
        "    return values * 2\n"
        "assert twice()(np.arange(3)).tolist() == [0, 2, 4]\n"
        "from numba.core import config\n"
        "print(config.COLOR_SCHEME)\n"))
    assert out == "light_bg"


def test_long_lived_freezes_what_a_claimed_process_builds_and_no_garbage(monkeypatch):
    """In a claimed process what is built inside ``long_lived`` is frozen out of the collector,
    the garbage made before is collected first (never frozen), and the collector runs again after;
    elsewhere nothing is frozen."""
    import gc
    import weakref

    class Node:
        pass

    def garbage_cycle():
        node = Node()
        node.me = node
        return weakref.ref(node)

    monkeypatch.setattr(compiled, "_OWN_PROCESS", False)
    before = gc.get_freeze_count()
    with compiled.long_lived():
        built = [Node() for _ in range(100)]
    assert gc.get_freeze_count() == before and gc.isenabled()

    monkeypatch.setattr(compiled, "_OWN_PROCESS", True)
    try:
        dead = garbage_cycle()
        with compiled.long_lived():
            assert not gc.isenabled()
            built = [Node() for _ in range(100)]
        assert dead() is None  # collected, not frozen
        assert gc.get_freeze_count() >= before + len(built) and gc.isenabled()
    finally:
        gc.unfreeze()  # (this test's process goes on)


def _run_fresh(tmp_path, script: str) -> str:
    """``script`` in a fresh interpreter (a file: numba caches next to it, in tmp_path); its stdout."""
    import os
    import subprocess
    import sys

    program = tmp_path / "program.py"
    program.write_text(script)
    result = subprocess.run([sys.executable, str(program)], capture_output=True, text=True, cwd=tmp_path,
                            env={**os.environ, compiled.DISABLE_VARIABLE: "1"})
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_a_library_callers_numba_starts_with_blas_and_its_collector_is_left_alone(tmp_path):
    """Not claimed (a library caller's process): numba starts as numba does (its BLAS bindings
    loaded and its extensions looked for, for the caller's own code) and nothing is frozen out
    of the garbage collector."""
    pytest.importorskip("numba")
    pytest.importorskip("scipy")
    out = _run_fresh(tmp_path, (
        "import gc, sys, numpy as np\n"
        + SPY_ON_EXTENSION_LOOKUP +
        "from bert_data import compiled\n"
        "@compiled.kernel\n"
        "def twice(values):\n"
        "    return values * 2\n"
        "assert twice()(np.arange(3)).tolist() == [0, 2, 4]\n"
        "compiled.start_before_fork()  # nothing in a library caller's process\n"
        "print('scipy.linalg.cython_blas' in sys.modules, gc.get_freeze_count(), gc.isenabled(), bool(scanned))\n"))
    assert out == "True 0 True True"  # (numba's extensions looked for, as numba does)


def test_a_claimed_process_freezes_numbas_objects_out_of_the_collector(tmp_path):
    """Claimed: numba's import and start leave their objects frozen (``gc.freeze``: no later
    collection walks them, nor the one at exit) and the collector running; what the run builds
    afterwards is collected as usual."""
    pytest.importorskip("numba")
    out = _run_fresh(tmp_path, (
        "import gc, numpy as np\n"
        "from bert_data import compiled\n"
        "compiled.claim_process()\n"
        "assert gc.get_freeze_count() == 0\n"
        "@compiled.kernel\n"
        "def twice(values):\n"
        "    return values * 2\n"
        "assert twice()(np.arange(3)).tolist() == [0, 2, 4]\n"
        "frozen = gc.get_freeze_count()\n"
        "class Node:\n"
        "    pass\n"
        "node = Node(); node.me = node; del node  # garbage made after the start: collected\n"
        "print(frozen > 50_000, gc.isenabled(), gc.collect() >= 1)\n"))
    assert out == "True True True"


def test_workers_forked_by_the_command_inherit_numba_started_and_the_frozen_heap(tmp_path):
    """The command's pool: numba started once in the parent before the fork (no worker starts it
    again) and the parent's heap frozen, so that the workers' collections do not walk it."""
    pytest.importorskip("numba")
    out = _run_fresh(tmp_path, (
        "import gc\n"
        "from bert_data import compiled\n"
        "from bert_data.run.executors import default_executor\n"
        "def state(_):\n"
        "    return compiled._STARTED, gc.get_freeze_count() > 50_000\n"
        "if __name__ == '__main__':\n"
        "    compiled.claim_process()\n"
        "    assert not compiled._STARTED\n"
        "    pool = default_executor(2)\n"
        "    try:\n"
        "        print(sorted(set(pool.map(state, range(4)))))\n"
        "    finally:\n"
        "        pool.shutdown()\n"))
    assert out == "[(True, True)]"


def test_numba_starts_in_a_thread_while_another_imports_what_numbas_start_does_without(tmp_path):
    """The command's numba start runs in a thread while the first slices are tokenized
    (``start_in_background``): modules numba's start does without (yaml here) are hidden from
    that thread alone, so the tokenizing thread imports them as usual meanwhile; the start is
    then done, and what waits for it (a kernel, the fork) finds numba started."""
    pytest.importorskip("numba")
    pytest.importorskip("yaml")
    out = _run_fresh(tmp_path, (
        "import contextlib, sys, threading\n"
        "import numpy as np\n"
        "from bert_data import compiled\n"
        "compiled.claim_process()\n"
        "inside, imported = threading.Event(), threading.Event()\n"
        "real = compiled._unused_by_kernels_hidden\n"
        "@contextlib.contextmanager\n"
        "def hidden_until_the_other_thread_imported():\n"
        "    with real():\n"
        "        inside.set()\n"
        "        assert imported.wait(120)\n"
        "        yield\n"
        "compiled._unused_by_kernels_hidden = hidden_until_the_other_thread_imported\n"
        "notes = []\n"
        "assert compiled.start_in_background(notes.append)\n"
        "assert inside.wait(120) and 'yaml' not in sys.modules\n"
        "import yaml  # in this thread, while numba's start hides it from its own\n"
        "imported.set()\n"
        "@compiled.kernel\n"
        "def twice(values):\n"
        "    return values * 2\n"
        "assert twice()(np.arange(3)).tolist() == [0, 2, 4]  # (waits for the start)\n"
        "assert compiled._STARTED and not notes and not compiled.start_in_background()\n"
        "print(sorted(name for name in ('scipy', 'cffi') if name in sys.modules))\n"))
    assert out == "[]"


def test_a_background_start_without_numba_reports_the_note(monkeypatch):
    """numba missing: the thread reports the note the run prints (the run's own check is then
    skipped); a later run's check, numba still missing, gives it again."""
    monkeypatch.delenv(compiled.DISABLE_VARIABLE, raising=False)
    monkeypatch.setattr(compiled, "_importable", lambda: False)
    monkeypatch.setattr(compiled, "_OWN_PROCESS", True)
    monkeypatch.setattr(compiled, "_STARTED", False)
    monkeypatch.setattr(compiled, "_background_start", None)
    notes = []
    assert compiled.start_in_background(notes.append)
    compiled.wait_for_start()
    assert len(notes) == 1 and 'pip install "bert_data[native]"' in notes[0]
    assert not compiled.start_in_background(notes.append)
    assert compiled.compiled_missing_note() == notes[0]


def test_a_run_without_numba_says_so_once_and_writes_the_same_records(tmp_path, monkeypatch, capsys):
    """The command, numba missing (its import fails): one note on how to get the kernels, from
    numba's start in its thread, in a log as on a terminal (none with --quiet), and the
    reference paths' records, byte for byte the kernels'."""
    from bert_data.cli.create_tfrecords import main
    from tests.helpers.corpus import file_hashes, make_corpus

    corpus = make_corpus(tmp_path / "corpus", n_docs=12, min_sentences=6, max_sentences=10, words_per_doc=15)
    args = ["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root),
            "--vocab_file", str(corpus.vocab), "--do_lower_case", "--max_seq_length", "32",
            "--max_predictions_per_seq", "5", "--num_workers", "1"]
    monkeypatch.delenv(compiled.DISABLE_VARIABLE, raising=False)
    assert main(args + ["--output_dir", str(tmp_path / "kernels"), "--quiet"]) == 0
    monkeypatch.setattr(compiled, "_importable", lambda: False)
    monkeypatch.setattr(compiled, "_STARTED", False)  # (as in a fresh process)
    monkeypatch.setattr(compiled, "_background_start", None)
    capsys.readouterr()
    import sys

    assert not sys.stderr.isatty()  # (a job's log: no bar, but the note all the same)
    assert main(args + ["--output_dir", str(tmp_path / "reference")]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "compiled kernels" in line]
    assert len(notes) == 1 and 'pip install "bert_data[native]"' in notes[0]
    assert file_hashes(tmp_path / "reference") == file_hashes(tmp_path / "kernels")
    monkeypatch.setattr(compiled, "_STARTED", False)
    monkeypatch.setattr(compiled, "_background_start", None)
    assert main(args + ["--output_dir", str(tmp_path / "quiet"), "--quiet"]) == 0
    assert "note:" not in capsys.readouterr().err  # --quiet: nothing but errors and warnings


BLAS_THREADS_PROGRAM = (
    "import os, sys\n"
    "from bert_data import compiled\n"
    "if sys.argv[1] == 'claimed':\n"
    "    compiled.claim_process()\n"
    "import numpy\n"
    "numpy.ones((64, 64)) @ numpy.ones((64, 64))  # (OpenBLAS's threads, if any, started by now)\n"
    "print(os.environ.get('OPENBLAS_NUM_THREADS'), len(os.listdir('/proc/self/task')))\n")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="threads counted in /proc (Linux)")
def test_a_claimed_process_starts_no_blas_thread_and_keeps_the_user_s_setting():
    """numpy imported in a claimed process: OpenBLAS told to start no thread (each spins 0.1 s of
    CPU at the import; nothing here multiplies matrices), as the same program unclaimed would
    (on a machine of more than one core); a user's own OPENBLAS_NUM_THREADS is kept."""
    import os

    def run(mode, **env):
        environment = {key: value for key, value in os.environ.items() if key != "OPENBLAS_NUM_THREADS"}
        result = subprocess.run([sys.executable, "-c", BLAS_THREADS_PROGRAM, mode], capture_output=True, text=True,
                                env={**environment, **env}, timeout=300)
        assert result.returncode == 0, result.stderr
        setting, threads = result.stdout.split()
        return setting, int(threads)

    assert run("claimed") == ("1", 1)
    setting, threads = run("unclaimed")
    assert setting == "None" and (threads > 1 or (os.cpu_count() or 1) == 1)
    assert run("claimed", OPENBLAS_NUM_THREADS="2")[0] == "2"
