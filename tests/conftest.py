"""Fixtures shared by every test folder: the synthetic corpus (tests/helpers/corpus.py), an S3
server on 127.0.0.1 and its file system, and a private temporary folder.  Helper functions are in
tests/helpers/."""

from __future__ import annotations

import pytest

from tests.helpers.corpus import SyntheticCorpus, make_corpus


@pytest.fixture(scope="session")
def synthetic_corpus(tmp_path_factory) -> SyntheticCorpus:
    return make_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="session", autouse=True)
def _spacy_rules_cache_in_pytest_temp(tmp_path_factory):
    """The built-in splitter's derived spaCy rules (bert_data/pipeline/spacy_rules_cache.py) are
    cached under pytest's temporary directory, not in the user's cache; set in the environment,
    so that processes started by the tests share it."""
    import os

    previous = os.environ.get("BERT_DATA_SPACY_RULES_CACHE")
    os.environ["BERT_DATA_SPACY_RULES_CACHE"] = str(tmp_path_factory.mktemp("spacy-rules"))
    yield
    if previous is None:
        os.environ.pop("BERT_DATA_SPACY_RULES_CACHE", None)
    else:
        os.environ["BERT_DATA_SPACY_RULES_CACHE"] = previous


@pytest.fixture(scope="session")
def s3_endpoint():
    """An S3 server on 127.0.0.1 (moto, as s3fs's own tests use it), with dummy credentials, a
    bucket, and fsspec pointed at it here and in every process started from here (through
    FSSPEC_S3_ENDPOINT_URL, as a user points fsspec at a non-AWS endpoint).  Stopped at the end."""
    import logging

    pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    import fsspec.config
    import s3fs

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    patch = pytest.MonkeyPatch()
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_SESSION_TOKEN", "testing"), ("AWS_DEFAULT_REGION", "us-east-1"),
                        ("FSSPEC_S3_ENDPOINT_URL", endpoint)):
        patch.setenv(name, value)
    patch.setitem(fsspec.config.conf, "s3", {"endpoint_url": endpoint})
    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem(endpoint_url=endpoint)
    fs.mkdir("bert-data-tests")
    try:
        yield endpoint
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
        patch.undo()
        server.stop()


@pytest.fixture()
def s3(s3_endpoint, tmp_path, monkeypatch, private_tmp):
    """The bucket's file system, for a test that runs against it; staging directories go under
    the test's own folder, and go with it."""
    import s3fs

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return s3fs.S3FileSystem(endpoint_url=s3_endpoint)


@pytest.fixture()
def private_tmp(tmp_path, monkeypatch):
    """This process's (and its children's) temporary files under the test's folder: copies of
    files at URLs are cached in TMPDIR, and go with the test."""
    import tempfile

    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setenv("TMPDIR", str(directory))
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory
