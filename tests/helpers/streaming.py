"""MosaicML ``streaming``, which cannot share our environment (it pins numpy and transformers
below ours; .ci/peer_envs makes its own): MDS directories read by its interpreter, through
peers/read_mds.py and peers/validate_mds.py, as a trainer reads them; one interpreter serves the
whole session (peers/serve.py)."""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).resolve().parent / "peers" / "serve.py"


def streaming_python() -> str:
    python = os.environ.get("BERT_DATA_STREAMING_PYTHON") or str(ROOT / ".ci" / "venvs" / "streaming" / "bin" / "python")
    if not os.path.exists(python):
        pytest.fail(f"MosaicML streaming's environment is missing ({python}): run `bash .ci/peer_envs` once "
                    "(CI does), or point BERT_DATA_STREAMING_PYTHON at a Python with mosaicml-streaming")
    return python


class _Peer:
    """One interpreter of streaming's environment serving every read of this test session
    (peers/serve.py): ``import streaming`` takes seconds, once.  Started at the first read,
    ended (its stdin closed) when the session's process exits."""

    process = None

    @classmethod
    def run(cls, script: str, argv, tmp_path: Path) -> None:
        """``python peers/SCRIPT.py ARGV...`` as run with ``TMPDIR=tmp_path``, in the peer."""
        if cls.process is None or cls.process.poll() is not None:
            started = tmp_path / "streaming-start.stderr"
            with open(started, "w") as stderr:
                cls.process = subprocess.Popen([streaming_python(), str(SERVER)], stdin=subprocess.PIPE,
                                               stdout=subprocess.PIPE, stderr=stderr, text=True, cwd=ROOT,
                                               env=dict(os.environ, TMPDIR=str(tmp_path)))
            atexit.register(cls.end, cls.process)
        request = {"script": script, "argv": [str(a) for a in argv], "tmpdir": str(tmp_path)}
        cls.process.stdin.write(json.dumps(request) + "\n")
        cls.process.stdin.flush()
        # The bound only keeps a hang from stalling the suite; it asserts nothing about speed.
        if not select.select([cls.process.stdout], [], [], 300)[0]:
            cls.process.kill()
            raise AssertionError("streaming's interpreter did not answer in 300 s")
        answer = cls.process.stdout.readline()
        if not answer:
            code = cls.process.wait(timeout=60)
            stderr = (tmp_path / "streaming-start.stderr")
            raise AssertionError(f"streaming's interpreter ended (exit status {code}): "
                                 f"{stderr.read_text()[-3000:] if stderr.exists() else ''}")
        error = json.loads(answer)["error"]
        assert error is None, error

    @staticmethod
    def end(process) -> None:
        process.stdin.close()  # the peer's loop ends with its stdin
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def read_with_streaming(split_dirs, tmp_path: Path) -> dict:
    """StreamingDataset over a copy of each split directory (it writes decompressed shards
    beside the compressed ones, as in a trainer's local cache): split dir -> what it read."""
    copies = []
    for number, split_dir in enumerate(split_dirs):
        copies.append(tmp_path / f"copy-{number}")
        shutil.copytree(split_dir, copies[-1])
    out = tmp_path / "samples.json"
    _Peer.run("read_mds", [out, *copies], tmp_path)
    read = json.loads(out.read_text())
    return {split_dir: read[str(copy)] for split_dir, copy in zip(split_dirs, copies)}


def fetch_with_streaming(split_dirs, tmp_path: Path) -> dict:
    """Each split directory fetched by ``StreamingDataset(remote=split_dir, local=cache,
    validate_hash="sha256")`` (peers/validate_mds.py): split dir -> ``{"samples": n}`` or
    ``{"error": what streaming raised}``."""
    out = tmp_path / "fetched.json"
    _Peer.run("validate_mds", [out, tmp_path / "caches", *split_dirs], tmp_path)
    fetched = json.loads(out.read_text())
    return {split_dir: fetched[str(split_dir)] for split_dir in split_dirs}
