"""MosaicML ``streaming``, which cannot share our environment (it pins numpy and transformers
below ours; .ci/peer_envs makes its own): MDS directories read by its interpreter, through
peers/read_mds.py, as a trainer reads them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READER = Path(__file__).resolve().parent / "peers" / "read_mds.py"


def streaming_python() -> str:
    python = os.environ.get("BERT_DATA_STREAMING_PYTHON") or str(ROOT / ".ci" / "venvs" / "streaming" / "bin" / "python")
    if not os.path.exists(python):
        pytest.fail(f"MosaicML streaming's environment is missing ({python}): run `bash .ci/peer_envs` once "
                    "(CI does), or point BERT_DATA_STREAMING_PYTHON at a Python with mosaicml-streaming")
    return python


def read_with_streaming(split_dirs, tmp_path: Path) -> dict:
    """StreamingDataset over a copy of each split directory (it writes decompressed shards
    beside the compressed ones, as in a trainer's local cache): split dir -> what it read."""
    copies = []
    for number, split_dir in enumerate(split_dirs):
        copies.append(tmp_path / f"copy-{number}")
        shutil.copytree(split_dir, copies[-1])
    out = tmp_path / "samples.json"
    env = dict(os.environ, TMPDIR=str(tmp_path))
    done = subprocess.run([streaming_python(), str(READER), str(out)] + [str(copy) for copy in copies],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads(out.read_text())
    return {split_dir: read[str(copy)] for split_dir, copy in zip(split_dirs, copies)}


def fetch_with_streaming(split_dirs, tmp_path: Path) -> dict:
    """Each split directory fetched by ``StreamingDataset(remote=split_dir, local=cache,
    validate_hash="sha256")`` (peers/validate_mds.py): split dir -> ``{"samples": n}`` or
    ``{"error": what streaming raised}``."""
    out = tmp_path / "fetched.json"
    env = dict(os.environ, TMPDIR=str(tmp_path))
    done = subprocess.run([streaming_python(), str(READER.parent / "validate_mds.py"), str(out), str(tmp_path / "caches")]
                          + [str(split_dir) for split_dir in split_dirs], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    fetched = json.loads(out.read_text())
    return {split_dir: fetched[str(split_dir)] for split_dir in split_dirs}
