"""The shape of the code, kept: the stages (``bert_data/pipeline/``) know nothing of the run
(``bert_data/run/``) or of the configuration; the dataset format (``bert_data/format/``) imports
no stage; past the resolve step no function sees a ``GeneratorConfig``; modules stay small.

Read with ``ast`` (nothing is imported): a refactor that breaks a rule fails here, naming where.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

from tests.architecture.test_import_cycles import PACKAGE, import_graph, module_names

# Where the configuration may be seen: the options themselves, the commands that build them,
# the resolve step that turns them into specs, and the package's lazy export of the class.
CONFIGURATION_ALLOWED = ("bert_data.config", "bert_data.cli", "bert_data.run.resolve", "bert_data")
# What a stage must not import: the run, the commands, the readers, the tools, the options.
NOT_FOR_STAGES = ("bert_data.run", "bert_data.cli", "bert_data.load", "bert_data.tools", "bert_data.config")
NOT_FOR_FORMAT = ("bert_data.pipeline", "bert_data.run", "bert_data.cli", "bert_data.load", "bert_data.tools")
MAX_LINES = 600


def within(module: str, packages) -> bool:
    return any(module == package or module.startswith(package + ".") for package in packages)


def forbidden_imports(owner: str, forbidden, graph=None) -> List[Tuple[str, str]]:
    graph = graph or import_graph()
    return sorted((module, target) for module, targets in graph.items() if within(module, (owner,))
                  for target in targets if within(target, forbidden))


def code_nodes(path: Path) -> Iterator[ast.AST]:
    """The nodes of a module, docstrings aside."""
    yield from ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path)))


def configuration_uses(modules: Dict[str, Path]) -> List[str]:
    """Places outside ``CONFIGURATION_ALLOWED`` that name ``GeneratorConfig`` in code, or define a
    function taking a parameter called ``config`` (the configuration under any annotation)."""
    found = []
    for name, path in sorted(modules.items()):
        allowed = name == "bert_data" or within(name, CONFIGURATION_ALLOWED[:-1])
        if allowed:
            continue
        for node in code_nodes(path):
            if isinstance(node, ast.Name) and node.id == "GeneratorConfig" or \
                    isinstance(node, ast.alias) and node.name == "GeneratorConfig" or \
                    isinstance(node, ast.Attribute) and node.attr == "GeneratorConfig":
                found.append(f"{name}:{node.lineno}: GeneratorConfig")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                for argument in arguments:
                    annotation = ast.unparse(argument.annotation) if argument.annotation is not None else ""
                    if argument.arg == "config" or "GeneratorConfig" in annotation:
                        found.append(f"{name}:{node.lineno}: {node.name}({argument.arg})")
    return sorted(found)


def test_stages_import_nothing_of_the_run_the_commands_or_the_options():
    graph = import_graph()
    assert any(within(module, ("bert_data.pipeline",)) for module in graph)  # the stages were found
    assert forbidden_imports("bert_data.pipeline", NOT_FOR_STAGES, graph) == []


def test_the_dataset_format_imports_no_stage_and_nothing_of_the_run():
    assert forbidden_imports("bert_data.format", NOT_FOR_FORMAT) == []


def test_no_function_past_the_resolve_step_takes_the_configuration():
    assert configuration_uses(module_names()) == []


def test_the_checks_find_what_they_look_for(tmp_path):
    """The rules above fail where they should (a check that cannot fail protects nothing)."""
    package = tmp_path / "bert_data"
    for folder in ("pipeline", "run", "format"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "config.py").write_text("class GeneratorConfig:\n    pass\n")
    (package / "run" / "tasks.py").write_text("def task(x):\n    pass\n")
    (package / "pipeline" / "stage.py").write_text("from ..run import tasks\n")
    (package / "format" / "codec.py").write_text("def f():\n    from ..pipeline import stage\n")
    (package / "run" / "files.py").write_text("from ..config import GeneratorConfig\n"
                                              "def write(where, config):\n    pass\n")
    graph = import_graph(package)
    assert forbidden_imports("bert_data.pipeline", NOT_FOR_STAGES, graph) == [
        ("bert_data.pipeline.stage", "bert_data.run.tasks")]
    assert forbidden_imports("bert_data.format", NOT_FOR_FORMAT, graph) == [
        ("bert_data.format.codec", "bert_data.pipeline.stage")]
    assert configuration_uses(module_names(package)) == ["bert_data.run.files:1: GeneratorConfig",
                                                         "bert_data.run.files:2: write(config)"]


def test_modules_and_test_files_stay_small():
    tests = Path(__file__).resolve().parents[1]
    too_long = [f"{path.relative_to(root.parent)}: {n} lines"
                for root in (PACKAGE, tests) for path in sorted(root.rglob("*.py"))
                if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    assert too_long == []
