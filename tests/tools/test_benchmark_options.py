"""``scripts/benchmark.py`` given options that do not go together: one line naming the fix,
before any corpus is read or run (its measurements themselves are minutes on the shared
corpus, never run here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "benchmark.py"


@pytest.mark.parametrize("arguments, message", [
    (["--per_byte"], "benchmark: --per_byte compares --shape short_docs with the listed corpus: add --shape short_docs"),
    (["--per_byte", "--shape", "listed"],
     "benchmark: --per_byte compares --shape short_docs with the listed corpus: add --shape short_docs"),
    (["--shape", "short_docs", "--input", "raw"],
     "benchmark: --shape short_docs is made from --corpus's sentences (--input sents)"),
])
def test_options_that_do_not_go_together_are_refused_in_one_line(tmp_path, arguments, message):
    done = subprocess.run([sys.executable, str(SCRIPT), "--corpus", str(tmp_path), *arguments],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and not done.stdout
    assert done.stderr.strip() == message
