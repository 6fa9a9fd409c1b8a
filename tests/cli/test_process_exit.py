"""The end of the command's process (bert_data.cli.process_exit): without the interpreter's
teardown only when nothing depends on it, with the same exit status, output and files.

Each case runs in a fresh interpreter.  Whether the teardown ran is seen by an object whose
``__del__`` writes a line when its module is torn down (made when the program ends: what a run
froze out of the collector, ``compiled.long_lived``, is not torn down by Python's exit either)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.corpus import file_hashes

REPO = Path(__file__).resolve().parents[2]
TEARDOWN = "torn down"

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="exit_process skips teardown on Linux only")

# What a program's module keeps to its end: its __del__ runs in the interpreter's teardown only.
PROLOGUE = (
    "import atexit, os, sys, threading, types\n"
    "from bert_data.cli.process_exit import exit_process\n"
    "class Witness:\n"
    "    def __del__(self):\n"
    f"        os.write(2, b'{TEARDOWN}\\n')\n"
    "def witness():\n"
    "    sys.modules['witness'] = types.ModuleType('witness')\n"
    "    sys.modules['witness'].witness = Witness()\n")


def run_program(body: str, tmp_path, *args, **kwargs) -> subprocess.CompletedProcess:
    program = tmp_path / "program.py"
    program.write_text(PROLOGUE + body)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYTHONUNBUFFERED", None)  # (stdout buffered, as it usually is: flushed by the exit)
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **kwargs}
    return subprocess.run([sys.executable, str(program), *args], text=True, cwd=tmp_path, env=env, timeout=120,
                          **streams)


def test_nothing_left_no_teardown_and_the_same_status_output_and_exit_callbacks(tmp_path):
    result = run_program(
        "atexit.register(lambda: print('atexit ran'))\n"
        "threading.Thread(target=threading.Event().wait, daemon=True).start()  # (a daemon: never waited for)\n"
        "with open('kept.txt', 'w') as kept:\n"
        "    kept.write('kept')\n"
        "sys.stdout.write('unflushed out')\n"
        "sys.stderr.write('unflushed err\\n')\n"
        "witness()\n"
        "exit_process(3)\n", tmp_path)
    assert result.returncode == 3
    assert result.stdout == "unflushed outatexit ran\n"
    assert result.stderr == "unflushed err\n"  # no teardown: no witness
    assert (tmp_path / "kept.txt").read_text() == "kept"


def test_a_file_left_open_for_writing_gets_the_teardown_that_flushes_it(tmp_path):
    result = run_program(
        "left = open('left.txt', 'w')\n"
        "left.write('buffered, flushed only by the teardown')\n"
        "witness()\n"
        "exit_process(0)\n", tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "left.txt").read_text() == "buffered, flushed only by the teardown"
    assert TEARDOWN in result.stderr


def test_a_descriptor_the_process_was_started_with_is_not_its_own_file(tmp_path):
    """A pipe inherited open for writing (a shell's, a jobserver's) holds no buffer of this
    process: no teardown for it; a file opened since on another descriptor still gets it."""
    read, write = os.pipe()
    try:
        body = ("inherited = files_open_for_writing()\n"
                f"assert any(fd == {write} for fd, *_ in inherited), inherited\n"
                "{opened}"
                "witness()\n"
                "exit_process(0, inherited)\n")
        prologue = "from bert_data.cli.process_exit import files_open_for_writing\n"
        alone = run_program(prologue + body.format(opened=""), tmp_path, pass_fds=(write,))
        opened = run_program(prologue + body.format(opened="left = open('left.txt', 'w')\nleft.write('x')\n"),
                             tmp_path, pass_fds=(write,))
    finally:
        os.close(read)
        os.close(write)
    assert alone.returncode == 0 and opened.returncode == 0, alone.stderr + opened.stderr
    assert TEARDOWN not in alone.stderr and TEARDOWN in opened.stderr
    assert (tmp_path / "left.txt").read_text() == "x"


def test_a_thread_left_is_waited_for_by_pythons_exit(tmp_path):
    result = run_program(
        "done = threading.Event()\n"
        "def last_words():\n"
        "    done.wait()\n"
        "    with open('thread.txt', 'w') as out:\n"
        "        out.write('finished')\n"
        "threading.Thread(target=last_words).start()\n"
        "def when_the_exit_begins():  # (the main thread is stopped by Python's exit, before it waits)\n"
        "    threading.main_thread().join()\n"
        "    done.set()\n"
        "threading.Thread(target=when_the_exit_begins, daemon=True).start()\n"
        "witness()\n"
        "exit_process(5)\n", tmp_path)
    assert result.returncode == 5, result.stderr
    assert (tmp_path / "thread.txt").read_text() == "finished"
    assert TEARDOWN in result.stderr


def test_a_child_process_left_keeps_pythons_exit(tmp_path):
    result = run_program(
        "import subprocess\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'], stdin=subprocess.PIPE)\n"
        "witness()\n"
        "exit_process(0)  # (the child reads until this process's end closes its stdin)\n", tmp_path)
    assert result.returncode == 0, result.stderr
    assert TEARDOWN in result.stderr


def test_a_failed_flush_of_stdout_is_reported_by_pythons_exit(tmp_path):
    """stdout a pipe whose reader is gone: Python's exit reports the lost output and exits 120,
    as without exit_process."""
    program = "sys.stdout.write('x' * 100)  # (buffered: written by the exit's flush)\nwitness()\n"
    read, write = os.pipe()
    os.close(read)
    try:
        plain = run_program(program + "sys.exit(0)\n", tmp_path, stdout=write, stderr=subprocess.PIPE)
        ours = run_program(program + "exit_process(0)\n", tmp_path, stdout=write, stderr=subprocess.PIPE)
    finally:
        os.close(write)
    assert plain.returncode == ours.returncode == 120
    assert "BrokenPipeError" in ours.stderr and TEARDOWN in ours.stderr


def _command(corpus, output, *extra):
    return ["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root), "--vocab_file",
            str(corpus.vocab), "--do_lower_case", "--output_dir", str(output), "--dupe_factor", "2",
            "--split_num", "20", *extra]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_command_ends_without_teardown_with_the_bytes_status_and_messages_of_pythons_exit(
        synthetic_corpus, tmp_path, workers):
    """A whole run through the command's entry (``python -m``) leaves nothing that needs the
    teardown (no thread, child process or file open for writing): it ends without it, with the
    same shards, exit status and stderr as ``main`` followed by Python's own exit; and so does a
    run that stops on a bad option (status 2, its one line)."""
    # The console script's own lines (``command``), with the witness made once ``main`` returns.
    entry = ("from bert_data.cli import create_tfrecords\n"
             "run = create_tfrecords.main\n"
             "def main_then_witness(*args):\n"
             "    code = run(*args)\n"
             "    witness()\n"
             "    return code\n"
             "create_tfrecords.main = main_then_witness\n"
             "sys.exit(create_tfrecords.command())\n")
    plain = ("from bert_data.cli.create_tfrecords import main\n"
             "code = main(sys.argv[1:])\n"
             "witness()\n"
             "sys.exit(code)\n")
    outcomes = {}
    for name, body in (("command", entry), ("main", plain)):
        (tmp_path / name).mkdir()
        result = run_program(body, tmp_path / name, *_command(synthetic_corpus, tmp_path / name / "out", "--num_workers",
                                                              workers))
        assert result.returncode == 0, result.stderr
        bad = run_program(body, tmp_path / name, *_command(synthetic_corpus, tmp_path / name / "bad", "--dupe_factor",
                                                           "0"))
        for run in (result, bad):  # (each wrote into its own directory)
            run.stderr = run.stderr.replace(str(tmp_path / name), "DIR")
        outcomes[name] = (result, bad, file_hashes(tmp_path / name / "out"))
    (command, command_bad, command_files), (main, main_bad, main_files) = outcomes["command"], outcomes["main"]
    assert TEARDOWN not in command.stderr and TEARDOWN not in command_bad.stderr
    assert TEARDOWN in main.stderr  # (the witness works)
    assert command_files == main_files and command_files
    timing = re.compile(r"done in [0-9.]+ s")
    assert timing.sub("", command.stderr) == timing.sub("", main.stderr.replace(TEARDOWN + "\n", ""))
    assert command_bad.returncode == main_bad.returncode == 2
    assert command_bad.stderr == main_bad.stderr.replace(TEARDOWN + "\n", "")
    assert command_bad.stderr.startswith("create_tfrecords: error: --dupe_factor")
