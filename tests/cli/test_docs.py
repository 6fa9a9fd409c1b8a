"""The README stays a front door and the docs keep up with the code: the README is short and every
page it links exists or is one being written; every option of ``create_tfrecords`` and
``bert-data`` is documented in a page of docs/."""

from __future__ import annotations

import re
from pathlib import Path

from bert_data.cli.bert_data_cli import build_parser as tools_parser
from bert_data.cli.create_tfrecords import build_parser

REPO = Path(__file__).resolve().parents[2]


def options_of(parser) -> set:
    found = set()
    for action in parser._actions:
        found |= {s for s in action.option_strings if s.startswith("--") and s != "--help"}
        if isinstance(getattr(action, "choices", None), dict):  # subcommands
            for sub in action.choices.values():
                found |= options_of(sub)
    return found


def test_the_readme_is_a_front_door():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    # The test command is what CI runs (.ci/run), step for step.
    steps = [line.strip().replace("python -m pip", "pip") for line in (REPO / ".ci" / "run").read_text().splitlines()
             if line.strip() and not line.startswith(("#", "set ", "cd "))]
    assert " && ".join(steps) in readme, steps
    linked = set(re.findall(r"\]\((docs/[\w./-]+\.md)", readme))
    assert {"docs/options.md", "docs/design.md", "docs/troubleshooting.md"} <= linked


def test_every_option_is_documented():
    docs = " ".join(path.read_text(encoding="utf-8") for path in (REPO / "docs").glob("*.md"))
    options = options_of(build_parser()) | options_of(tools_parser())
    # absl's --noflag spellings are one rule (docs/google-compat.md), not an option each.
    undocumented = sorted(o for o in options if not o.startswith("--no") and not re.search(re.escape(o) + r"\b", docs))
    assert undocumented == []


def test_every_extra_the_docs_and_examples_name_exists():
    """``pip install -e ".[x]"`` or ``bert_data[x]`` in a page or an example installs: each x is an extra."""
    import tomllib

    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    pages = [REPO / "README.md", *(REPO / "docs").glob("*.md"), *(REPO / "examples").rglob("*.py")]
    named = set()
    for page in pages:
        for group in re.findall(r"(?:\.|bert_data)\[([a-z0-9_,-]+)\]", page.read_text(encoding="utf-8")):
            named |= set(group.split(","))
    assert named and named <= extras, sorted(named - extras)
