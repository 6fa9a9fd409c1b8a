"""No secret leaves the process (issue 18): credentials inside URLs (``user:password@``, presigned
query strings, tokens) never appear in what a run prints, in its manifest, or in any file it
writes, tracebacks of storage libraries included.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bert_data import storage
from bert_data.cli.create_tfrecords import main

from tests.helpers.corpus import make_corpus
from tests.helpers.remote import serving

PASSWORD, TOKEN, SIGNATURE = "pa55w0rd-xyzzy", "t0ken-plugh", "s1gnature-frob"


@pytest.mark.parametrize("text, expected", [
    ("http://alice:pw@host/x.txt", "http://***@host/x.txt"),
    ("s3://AKIAKEY:se/cr+et@bucket/a.txt", "s3://***@bucket/a.txt"),
    ("https://h/v.txt?X-Amz-Credential=K&X-Amz-Signature=abc&X-Amz-Date=1", "https://h/v.txt?X-Amz-Credential=***&"
     "X-Amz-Signature=***&X-Amz-Date=1"),
    ("https://acct.blob.core.windows.net/c/x?sv=2020&sig=S1G", "https://acct.blob.core.windows.net/c/x?sv=2020&sig=***"),
    ("error: 'gs://k:s@b/x' failed; see hf://datasets/x?token=abc", "error: 'gs://***@b/x' failed; see "
     "hf://datasets/x?token=***"),
    ("s3://bucket/name@2x.txt and /local/a@b.txt", "s3://bucket/name@2x.txt and /local/a@b.txt"),
])
def test_redact(text, expected):
    assert storage.redact(text) == expected
    assert storage.redact(expected) == expected
    assert storage.redact_data({"a": [text], text: 1}) == {"a": [expected], expected: 1}


@pytest.fixture
def web_server(tmp_path):
    """A web server on 127.0.0.1 serving a small corpus (it ignores credentials and queries,
    which is all this needs: they must still never be printed or stored)."""
    pytest.importorskip("aiohttp")
    corpus = make_corpus(tmp_path / "served", n_docs=4, min_sentences=5, max_sentences=8)
    with serving(corpus.root) as port:
        yield corpus, port


def assert_no_secret(text: str, where: str) -> None:
    for secret in (PASSWORD, TOKEN, SIGNATURE):
        assert secret not in text, f"{secret} in {where}"


def assert_no_secret_in_files(root: Path, written_by_test=()) -> int:
    """Every file under ``root`` (names and contents), but those the test itself wrote."""
    checked = 0
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory) / name
            if path in written_by_test:
                continue
            assert_no_secret(str(path), "a file name")
            assert_no_secret(path.read_bytes().decode("utf-8", "replace"), str(path))
            checked += 1
    return checked


def test_a_run_over_urls_with_credentials_stores_and_prints_none(web_server, tmp_path, capsys, private_tmp):
    corpus, port = web_server
    url = f"http://reader:{PASSWORD}@127.0.0.1:{port}"
    code = main(["--metadata_files", f"{url}/metadata.txt", "--input_files_prefix", url,
                 "--vocab_file", f"http://127.0.0.1:{port}/vocab.txt?token={TOKEN}&X-Amz-Signature={SIGNATURE}",
                 "--do_lower_case", "--max_seq_length", "32", "--dupe_factor", "1", "--num_output_files", "1",
                 "--output_dir", str(tmp_path / "out"), "--num_workers", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert_no_secret(out + err, "the output")
    manifest = json.loads((tmp_path / "out" / "data_params.json").read_text())
    assert manifest["input_files_prefix"] == f"http://***@127.0.0.1:{port}"
    assert manifest["vocab_file"] == f"http://127.0.0.1:{port}/vocab.txt?token=***&X-Amz-Signature=***"
    # Nothing the run wrote holds a secret: the shards, the manifest, the local copy of the vocabulary.
    assert assert_no_secret_in_files(tmp_path, written_by_test=set((tmp_path / "served").rglob("*"))) >= 2


@pytest.mark.parametrize("option", ["--input_files", "--vocab_file", "--metadata_files"])
def test_an_unreachable_url_with_credentials_is_named_without_them(tmp_path, capsys, option):
    corpus = make_corpus(tmp_path / "corpus", n_docs=2, min_sentences=3, max_sentences=4)
    bad = f"http://reader:{PASSWORD}@127.0.0.1:9/x.txt?token={TOKEN}"  # the discard port: nothing listens
    argv = ["--vocab_file", str(corpus.vocab), "--output_dir", str(tmp_path / "out"), "--quiet", "--do_lower_case"]
    argv += [option, bad] if option != "--vocab_file" else ["--metadata_files", str(corpus.metadata),
                                                            "--input_files_prefix", str(corpus.root), option, bad]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "http://***@127.0.0.1:9/x.txt?token=***" in err
    assert_no_secret(out + err, "the output")
    assert_no_secret_in_files(tmp_path, written_by_test=set((tmp_path / "corpus").rglob("*")))


def test_tracebacks_and_log_records_of_libraries_are_redacted(tmp_path):
    """An exception no handler expected (a storage library's, say) and a library's log record,
    in a real process: what reaches stderr is redacted."""
    script = (
        "import logging, sys\n"
        "from bert_data.redaction import redacting\n"
        "@redacting\n"
        "def main():\n"
        f"    logging.getLogger('fsspec.http').warning('retrying %s', 'http://u:{PASSWORD}@h/x')\n"
        f"    print('progress http://h/x?X-Amz-Signature={SIGNATURE}', file=sys.stderr)\n"
        f"    raise RuntimeError('GET http://u:{PASSWORD}@h/x?token={TOKEN} failed')\n"
        "main()\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env=dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", "")))
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "RuntimeError: GET http://***@h/x?token=*** failed" in done.stderr
    assert "retrying http://***@h/x" in done.stderr and "X-Amz-Signature=***" in done.stderr
    assert_no_secret(done.stdout + done.stderr, "the process's output")


def test_messages_of_input_and_config_errors_are_redacted():
    from bert_data.config import ConfigError
    from bert_data.pipeline.documents.types import InputError

    for error in (InputError(f"s3://k:{PASSWORD}@b/x: not found"), ConfigError(f"--vocab_file x?sig={SIGNATURE}"),
                  storage.StorageError(f"https://u:{PASSWORD}@h/: refused")):
        assert_no_secret(str(error), type(error).__name__)
        assert "***" in str(error)


def test_a_dask_worker_redacts_its_own_output(tmp_path):
    """A Dask cluster's workers are not forked from the command: the plugin every worker runs
    when it starts redacts what it logs (a failed task's arguments) and prints."""
    pytest.importorskip("distributed")
    script = (
        "import logging, sys\n"
        "from bert_data.run.dask_workers import RedactingWorker\n"
        "RedactingWorker().setup(worker=None)\n"
        "logging.basicConfig()\n"
        f"logging.getLogger('distributed.worker').error('Compute Failed: read(%r)', 'http://u:{PASSWORD}@h/x')\n"
        f"print('s3://key:{PASSWORD}@bucket/a.txt', file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0 and "Compute Failed: read('http://***@h/x')" in done.stderr
    assert "s3://***@bucket/a.txt" in done.stderr
    assert_no_secret(done.stdout + done.stderr, "a worker's output")


def test_the_fingerprint_in_the_journal_holds_no_credentials():
    """The --resume fingerprint is stored in the journal: a digest of the options without the
    credentials of their URLs (so new credentials also resume the same run)."""
    from types import SimpleNamespace

    from bert_data.config import GeneratorConfig
    from bert_data.run.planning import run_fingerprint
    from bert_data.run.resolve import recorded_options
    from bert_data.run.run_record import run_record

    vocab = SimpleNamespace(sha256="0" * 64)

    def fingerprint(prefix: str) -> str:
        return run_fingerprint(run_record(recorded_options(GeneratorConfig(input_files_prefix=prefix)), vocab, []))

    prints = {fingerprint(f"s3://key:{secret}@bucket/corpus") for secret in (PASSWORD, TOKEN)}
    assert len(prints) == 1
    assert prints != {fingerprint("s3://key:x@other/corpus")}


def test_the_run_record_in_the_journal_holds_no_credentials():
    """Beside the fingerprint the journal keeps the options, to name what a refused --resume
    changed: redacted as the manifest's."""
    from types import SimpleNamespace

    from bert_data.config import GeneratorConfig
    from bert_data.run.resolve import recorded_options
    from bert_data.run.run_record import differences, run_record

    vocab = SimpleNamespace(sha256="0" * 64)
    records = [run_record(recorded_options(GeneratorConfig(input_files_prefix=f"s3://key:{secret}@bucket/corpus")),
                          vocab, []) for secret in (PASSWORD, TOKEN)]
    for record in records:
        assert_no_secret(json.dumps(record), "the journal's run record")
    assert differences(*records) == []
