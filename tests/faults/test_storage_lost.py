"""Object storage lost mid-run: the S3 endpoint (moto's server on 127.0.0.1, behind a relay the
test cuts) goes away once the run has journaled two units (the runner's pause seam: by work
done, never by time).  The run ends in one line naming the URL it could not reach and the units
kept, no traceback and no credential; once the endpoint is back, --resume gives the bytes of an
uninterrupted run."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bert_data.run.fault_injection import GO_ON, PAUSE_AFTER_UNIT
from bert_data.run.resolve import generate

from tests.helpers.corpus import corpus_config, file_hashes, make_corpus
from tests.helpers.remote import Cuttable, bucket_hashes

REPO = Path(__file__).resolve().parents[2]
BUCKET = "bert-data-tests"


@pytest.fixture(scope="module")
def corpus_and_reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("lost")
    corpus = make_corpus(root / "corpus", n_docs=40, min_sentences=6, max_sentences=14, words_per_doc=15)
    reference = root / "reference"
    generate(corpus_config(corpus, reference, split_num=6, num_output_files=3), progress=False)
    return corpus, file_hashes(reference)


@pytest.fixture()
def relay(s3_endpoint, monkeypatch):
    """The endpoint the runs are given: a relay to the moto server, that the test cuts."""
    import fsspec.config
    import s3fs

    relay = Cuttable(int(s3_endpoint.rsplit(":", 1)[1]))
    endpoint = f"http://127.0.0.1:{relay.port}"
    monkeypatch.setenv("FSSPEC_S3_ENDPOINT_URL", endpoint)
    monkeypatch.setitem(fsspec.config.conf, "s3", {"endpoint_url": endpoint})
    s3fs.S3FileSystem.clear_instance_cache()
    yield relay
    relay.close()
    s3fs.S3FileSystem.clear_instance_cache()


def command(corpus, output, *extra):
    prefix = f"s3://{BUCKET}/lost-corpus"
    return [sys.executable, "-m", "bert_data.cli.create_tfrecords", "--metadata_files", f"{prefix}/metadata.txt",
            "--input_files_prefix", prefix, "--vocab_file", f"{prefix}/vocab.txt", "--do_lower_case",
            "--output_dir", output, "--max_seq_length", "64", "--max_predictions_per_seq", "10", "--dupe_factor", "2",
            "--split_num", "6", "--num_output_files", "3", "--num_workers", "2", "--quiet", *extra]


@pytest.mark.parametrize("work_dir", ["staged", "in the bucket"])
def test_object_storage_lost_mid_run_is_one_line_and_resume_gives_the_same_bytes(s3, relay, corpus_and_reference,
                                                                                 tmp_path, work_dir):
    corpus, reference = corpus_and_reference
    s3.put(str(corpus.root) + "/", f"{BUCKET}/lost-corpus/", recursive=True)
    name = "lost-" + work_dir.split()[-1]
    output = f"s3://{BUCKET}/{name}"
    extra = ["--work_dir", f"s3://{BUCKET}/{name}-work"] if work_dir != "staged" else []
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "TMPDIR": str(tmp_path)}
    # One attempt a request (botocore's default is 5, with exponential backoff between them): the
    # endpoint is gone for good once cut, and retries would only add their backoff to the test.
    process = subprocess.Popen(command(corpus, output, *extra), cwd=REPO, stderr=subprocess.PIPE, text=True,
                               env={**env, PAUSE_AFTER_UNIT: "2", "AWS_MAX_ATTEMPTS": "1"})
    for line in process.stderr:  # blocks until the run says it paused (or ends: then the assert fails)
        if line.startswith("bert_data: test: paused after unit 2"):
            break
    else:
        raise AssertionError(f"the run ended before unit 2: {process.communicate()}")
    relay.cut()
    process.send_signal(GO_ON)
    _, err = process.communicate(timeout=600)
    assert process.returncode == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert re.fullmatch(rf"create_tfrecords: error: cannot reach http://127\.0\.0\.1:{relay.port}/{BUCKET}/\S+: "
                        r"units 1-\d+ of \d+ kept \([\d.]+ MB of shards\); when it is reachable again, run the same "
                        r"command with --resume to (finish|continue with unit \d+)", err.strip()), err
    assert "testing" not in err  # (the credentials' values)

    relay.restore()
    resumed = subprocess.run(command(corpus, output, *extra, "--resume"), cwd=REPO, capture_output=True, text=True,
                             env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed: units 1-" in resumed.stderr
    assert bucket_hashes(s3, output) == reference
    assert not any((tmp_path / "cache" / "bert_data" / "staging").iterdir())
