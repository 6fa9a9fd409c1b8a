"""Sybil runs the blocks of README.md and docs/*.md as tests (tests/helpers/markdown_docs.py says
how): this file is at the root because Sybil collects the pages below the conftest.py that
creates it, and pyproject.toml's testpaths name the pages so that `python -m pytest -q` runs them."""

from __future__ import annotations

import doctest

import pytest
from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

from tests.helpers.markdown_docs import BashParser, make_page_dir, make_sample, parse_outputs


@pytest.fixture(scope="session", autouse=True)
def _dask_scratch_in_pytest_temp(tmp_path_factory):
    """Dask's clusters (the tests' and docs' LocalClusters, ``--dask_scheduler local``) keep their
    scratch space under pytest's temporary directory, not in /tmp, where it would outlive the run.
    Set in the environment, so that worker processes see it too."""
    import os

    previous = os.environ.get("DASK_TEMPORARY_DIRECTORY")
    os.environ["DASK_TEMPORARY_DIRECTORY"] = str(tmp_path_factory.mktemp("dask-scratch"))
    try:
        import dask.config

        dask.config.refresh()
    except ImportError:
        pass
    yield
    if previous is None:
        os.environ.pop("DASK_TEMPORARY_DIRECTORY", None)
    else:
        os.environ["DASK_TEMPORARY_DIRECTORY"] = previous


@pytest.fixture(scope="session")
def docs_sample(tmp_path_factory):
    """The README's quick start on the shipped sample, made once for every page."""
    return make_sample(tmp_path_factory.mktemp("docs-sample"))


@pytest.fixture(scope="session")
def _docs_page_dirs(tmp_path_factory):
    return {}


@pytest.fixture
def docs_workdir(request, docs_sample, _docs_page_dirs, monkeypatch):
    """The page's own working directory (made at its first block), the current directory while a
    block runs."""
    page = request.node.example.path
    if page not in _docs_page_dirs:
        _docs_page_dirs[page] = make_page_dir(docs_sample.parent / f"page-{len(_docs_page_dirs)}", docs_sample)
    monkeypatch.chdir(_docs_page_dirs[page])
    return _docs_page_dirs[page]


pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser(doctest_optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE),
             BashParser(), parse_outputs, SkipParser()],
    # Every page: a new page's blocks run from the start.
    patterns=["README.md", "docs/*.md"],
    fixtures=["docs_workdir"],
).pytest()
