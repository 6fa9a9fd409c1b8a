"""The words stay true: one meaning a word, one owner a shared constant (docs/design.md, "Glossary:
portions of work").

* *block* is a table's row group or record batch only: the mixing's runs of neighbouring
  documents are *regions* (no ``block`` in ``pipeline/mixing.py``, in the identifiers of
  ``run/planning.py`` or in docs/mixing.md);
* the split codes (``TRAIN_CODE``, ``VAL_CODE``, ``SPLIT_CODES``, ``SPLIT_OF_CODE``) are
  assigned in ``format/dataset_layout.py`` alone and ``IGNORE_INDEX`` (-100) in
  ``format/columns.py`` alone; no other module writes a ``{TRAIN: 0, VAL: 1}`` of its own or a
  literal -100;
* every path and name the glossary table points to exists, each name defined in a path of its
  row, and no word has two rows.

Everything is read with ``ast`` and regular expressions: nothing is imported.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Dict, List, Set

import pytest

REPO = next(parent for parent in Path(__file__).resolve().parents if (parent / "pyproject.toml").exists())
PACKAGE = REPO / "bert_data"
DESIGN = REPO / "docs" / "design.md"

# name -> the one module (relative to bert_data/) that assigns it.
OWNERS = {
    "TRAIN_CODE": "format/dataset_layout.py",
    "VAL_CODE": "format/dataset_layout.py",
    "SPLIT_CODES": "format/dataset_layout.py",
    "SPLIT_OF_CODE": "format/dataset_layout.py",
    "IGNORE_INDEX": "format/columns.py",
}


def modules() -> Dict[str, ast.Module]:
    return {path.relative_to(PACKAGE).as_posix(): ast.parse(path.read_text(encoding="utf-8"), str(path))
            for path in sorted(PACKAGE.rglob("*.py"))}


def identifiers(tree: ast.AST) -> Set[str]:
    """Every name a module binds or uses: variables, attributes, functions, classes, arguments,
    keyword arguments and imported names."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.arg):
            found.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            found.add(node.arg)
        elif isinstance(node, ast.alias):
            found.add(node.asname or node.name)
    return found


def assigned_names(tree: ast.AST) -> Set[str]:
    """Names a module assigns anywhere (``x = ``, ``x: T = ``, ``a, b = ``), imports excluded."""
    found = set()
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name) and isinstance(leaf.ctx, ast.Store):
                    found.add(leaf.id)
    return found


def top_level_definitions(tree: ast.Module) -> Set[str]:
    """What a module defines at its top level: functions, classes and assigned names."""
    found = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            found |= assigned_names(node)
    return found


# ------------------------------------------------------------------------ block: tables only

def test_the_mixing_says_region_never_block():
    """The mixing's runs of neighbouring documents are regions; block is left to tables."""
    mixing = (PACKAGE / "pipeline" / "mixing.py").read_text(encoding="utf-8")
    assert not re.search(r"block", mixing, re.IGNORECASE), "pipeline/mixing.py says block: say region"
    assert "REGIONS_PER_UNIT" in mixing and "region_size" in mixing
    trees = modules()
    for name in ("pipeline/mixing.py", "run/planning.py"):
        blocks = sorted(word for word in identifiers(trees[name]) if "block" in word.lower())
        assert blocks == [], f"{name}: {blocks}: the mixing's word is region"
    page = (REPO / "docs" / "mixing.md").read_text(encoding="utf-8")
    assert not re.search(r"\bblocks?\b", page, re.IGNORECASE), "docs/mixing.md says block: say region"


# ------------------------------------------------------------------- one owner for a constant

def test_each_shared_constant_is_assigned_in_one_module():
    assigners: Dict[str, List[str]] = {name: [] for name in OWNERS}
    for module, tree in modules().items():
        for name in assigned_names(tree) & set(OWNERS):
            assigners[name].append(module)
    assert assigners == {name: [owner] for name, owner in OWNERS.items()}


def _is_split_table(node: ast.Dict) -> bool:
    """A dict literal ``{TRAIN: 0, VAL: 1}``: split names to distinct int literals (a table of
    split codes; ``{TRAIN: 0, VAL: 0}``, counts starting at zero, is not one)."""
    keys = [key.id if isinstance(key, ast.Name) else getattr(key, "value", None) for key in node.keys]
    values = [value.value for value in node.values
              if isinstance(value, ast.Constant) and type(value.value) is int]
    return (sorted(map(str, keys)) in (["TRAIN", "VAL"], ["train", "val"])
            and len(values) == 2 and len(set(values)) == 2)


def test_no_module_writes_split_codes_or_the_ignore_index_of_its_own():
    copies = []
    for module, tree in modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Dict) and _is_split_table(node):
                copies.append(f"{module}:{node.lineno}: a table of split codes")
            if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub)
                    and isinstance(node.operand, ast.Constant) and node.operand.value == 100
                    and module != OWNERS["IGNORE_INDEX"]):
                copies.append(f"{module}:{node.lineno}: -100 (IGNORE_INDEX, from format/columns.py)")
    assert copies == []


def test_the_owners_values():
    """Split codes are part of every output's bytes (a corpus plan's byte a document, a key of the
    random streams and of the shuffles): a change here is a change of the golden bytes."""
    from bert_data.format.columns import IGNORE_INDEX
    from bert_data.format.dataset_layout import SPLIT_CODES, SPLIT_OF_CODE, TRAIN, TRAIN_CODE, VAL, VAL_CODE
    from bert_data.load import stages

    assert (TRAIN_CODE, VAL_CODE) == (0, 1)
    assert SPLIT_CODES == {TRAIN: TRAIN_CODE, VAL: VAL_CODE}
    assert SPLIT_OF_CODE == {TRAIN_CODE: TRAIN, VAL_CODE: VAL}
    assert IGNORE_INDEX == -100 and stages.IGNORE_INDEX is IGNORE_INDEX and "IGNORE_INDEX" in stages.__all__


# ------------------------------------------------------------------------- the glossary table

def glossary_rows() -> List[List[str]]:
    text = DESIGN.read_text(encoding="utf-8")
    section = text.split("## Glossary: portions of work", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| word |") and set(rows[1]) <= set("|- ")
    return [[cell.strip() for cell in row.strip().strip("|").split(" | ")] for row in rows[2:]]


def test_the_glossary_has_one_row_a_word():
    words = [re.fullmatch(r"\*([a-z ]+)\*", word).group(1) for word, _, _ in glossary_rows()]
    assert len(words) == len(set(words)), words
    assert {"block", "region", "slice", "unit", "chunk", "piece", "segment"} <= set(words)


@pytest.mark.parametrize("word,where", [(row[0].strip("*"), row[2]) for row in glossary_rows()])
def test_every_path_and_name_of_the_glossary_exists(word, where):
    """Paths are under bert_data/ (a folder ends in /); a name is defined (at the top level) in a
    module among the paths of its row."""
    quoted = re.findall(r"`([^`]+)`", where)
    assert quoted, f"{word}: the glossary says nowhere where it is"
    paths = [item for item in quoted if "/" in item or item.endswith(".py")]
    names = [item for item in quoted if item not in paths]
    files: List[Path] = []
    for item in paths:
        path = PACKAGE / item
        assert path.exists(), f"{word}: bert_data/{item} does not exist"
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    defined = set()
    for path in files:
        defined |= top_level_definitions(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    for name in names:
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name), f"{word}: {name!r}: a name, with its module as a path"
        assert name in defined, f"{word}: {name} is defined in none of {paths}"
