"""The runnable blocks of README.md and docs/*.md, run by Sybil (wired in the root conftest.py).

* ```python blocks run in one namespace per page (``>>>`` blocks are doctests: their output is
  compared);
* ```bash blocks run in ``bash -e -o pipefail``, the variables a page's earlier blocks assign
  (``SAMPLE=...``) set first; an unlabelled block right after a bash block is its output, compared
  with what the commands printed (stdout and stderr), the ``done in N s`` timing left out;
* every block runs in a directory of its page's own (``docs_workdir``) holding the shipped sample
  as the docs name it: ``examples/``, ``vocab/``, ``scripts/``, a copy of the quick start's ``tfrecords/`` (made once
  a session), and for docs/inputs.md ``metadata.txt``, ``corpus/`` and ``vocab.txt``; ``/tmp/`` in
  a command is that directory's ``tmp/``, so nothing is written outside the test's directory;
* ``<!-- skip: next "why" -->`` before a block leaves it out (a bucket, a cluster, an install, a
  training run, an input not shipped).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from sybil import Region
from sybil.parsers.markdown import CodeBlockParser

REPO = Path(__file__).resolve().parents[2]
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S.*$", re.MULTILINE)
# What varies from run to run: a run's duration, and verify's time and speed.
TIMING = re.compile(r"done in [0-9.,]+ (s|min)\b")
VERIFY_SPEED = re.compile(r", [0-9.]+ s, [0-9.,]+ MB/s$")


def command_env() -> dict:
    """The commands of this interpreter's environment, running this checkout's bert_data."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def link_sample(directory: Path) -> None:
    """The shipped sample where the README's commands look for it."""
    for name in ("examples", "vocab", "scripts"):
        (directory / name).symlink_to(REPO / name, target_is_directory=True)


def quick_start() -> list:
    """The README's quick-start command (after its ``pip install -e . &&``)."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    return shlex.split(re.search(r"^pip install -e \. && (create_tfrecords .*)$", readme, re.MULTILINE).group(1))


def make_sample(directory: Path) -> Path:
    """The README's quick start, run once: ``directory/tfrecords``."""
    link_sample(directory)
    subprocess.run(quick_start(), cwd=directory, env=command_env(), check=True, capture_output=True, text=True)
    return directory / "tfrecords"


def make_page_dir(directory: Path, sample: Path) -> Path:
    """A page's own working directory: the sample, the quick start's output, and a corpus in the
    shape docs/inputs.md names (``metadata.txt`` listing the files of ``corpus/``, ``vocab.txt``)."""
    directory.mkdir(parents=True)
    link_sample(directory)
    shutil.copytree(sample, directory / "tfrecords")
    (directory / "tmp").mkdir()
    corpus = directory / "corpus"
    corpus.mkdir()
    names = []
    for line in (REPO / "examples" / "sample" / "metadata.txt").read_text(encoding="utf-8").split():
        source = REPO / "examples" / "sample" / line
        shutil.copyfile(source, corpus / source.name)
        names.append(source.name)
    (directory / "metadata.txt").write_text("\n".join(names) + "\n", encoding="utf-8")
    (directory / "vocab.txt").symlink_to(REPO / "vocab" / "vocab.txt")
    return directory


def normalised(text: str, workdir: str) -> str:
    text = text.replace(workdir + "/tmp/", "/tmp/").replace(workdir + "/", "")
    return "\n".join(VERIFY_SPEED.sub(", N s, N MB/s", TIMING.sub("done in N s", line).rstrip())
                     for line in text.strip().splitlines())


def run_bash(example) -> None:
    code = example.parsed
    namespace = example.namespace
    workdir = os.getcwd()
    assignments = namespace.setdefault("_bash_assignments", [])
    script = "\n".join(assignments + [code.replace("/tmp/", workdir + "/tmp/")])
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=workdir, env=command_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    namespace.setdefault("_bash_outputs", {})[example.region.start] = normalised(done.stdout, workdir)
    assert done.returncode == 0, f"exit status {done.returncode}:\n{done.stdout[-3000:]}"
    assignments.extend(ASSIGNMENT.findall(code))


class BashParser(CodeBlockParser):
    language = "bash"

    def __init__(self):
        super().__init__(evaluator=run_bash)


# The command block's body never holds a fence, so a match cannot start at an earlier block.
OUTPUT = re.compile(r"^```bash\n(?:(?!^```).)*?^```\n\s*^```\n(?P<output>.*?)^```$", re.MULTILINE | re.DOTALL)


def check_output(example) -> None:
    command_start, expected = example.parsed
    outputs = example.namespace.get("_bash_outputs", {})
    assert command_start in outputs, "the output block's command did not run (skip both, or neither)"
    actual = outputs[command_start]
    wanted = normalised(expected, os.getcwd())
    assert actual == wanted, f"the page shows:\n{wanted}\nthe command printed:\n{actual}"


def parse_outputs(document):
    """An unlabelled block right after a ```bash block: what that block prints."""
    for match in OUTPUT.finditer(document.text):
        yield Region(match.start("output"), match.end(), (match.start(), match.group("output")), check_output)
