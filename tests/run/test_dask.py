"""Generation on a real Dask cluster gives the bytes of a local run, even when a worker dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import dask
import pytest

from bert_data.config import GeneratorConfig
from bert_data.run.resolve import generate

from tests.helpers.corpus import file_hashes, make_corpus

REPO = Path(__file__).resolve().parents[2]


def config_for(corpus, output, **overrides):
    options = dict(metadata_files=[str(corpus.metadata)], input_files_prefix=str(corpus.root),
                   vocab_file=str(corpus.vocab), do_lower_case=True, max_seq_length=64, max_predictions_per_seq=10,
                   dupe_factor=20, split_num=10, num_output_files=4, output_dir=str(output), num_workers=1)
    options.update(overrides)
    return GeneratorConfig(**options)


@pytest.fixture(scope="module")
def corpus_and_reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("dask")
    corpus = make_corpus(root / "corpus", n_docs=120, min_sentences=15, max_sentences=30, words_per_doc=30)
    reference = root / "local"
    generate(config_for(corpus, reference), progress=False)
    return corpus, file_hashes(reference)


@pytest.fixture(scope="module")
def cluster():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as local, \
            Client(local) as client:
        yield local, client


def test_dask_cluster_output_is_identical_to_a_local_run(corpus_and_reference, cluster, tmp_path):
    corpus, reference = corpus_and_reference
    _, client = cluster
    summary = generate(config_for(corpus, tmp_path / "out"), executor=client.get_executor(pure=False),
                       parallelism=2, progress=False)
    assert file_hashes(tmp_path / "out") == reference
    assert summary.manifests["train"]["n_examples"] > 0


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(corpus_and_reference, cluster, tmp_path):
    corpus, reference = corpus_and_reference
    local, client = cluster
    journal = tmp_path / "out" / ".bert_data_work" / "journal.json"
    killed = []

    def kill_one_worker_once_work_is_under_way():
        deadline = time.time() + 60
        while time.time() < deadline and not journal.exists():
            time.sleep(0.01)
        seen_journal = journal.exists()
        pids = client.run(os.getpid)
        victim = sorted(pids.values())[0]
        os.kill(victim, signal.SIGKILL)
        killed.append((victim, seen_journal, time.perf_counter()))

    killer = threading.Thread(target=kill_one_worker_once_work_is_under_way)
    killer.start()
    generate(config_for(corpus, tmp_path / "out"), executor=client.get_executor(pure=False), parallelism=2,
             progress=False)
    finished = time.perf_counter()
    killer.join()
    assert killed, "no worker was killed"
    _, seen_journal, killed_at = killed[0]
    assert seen_journal and killed_at < finished  # killed while units were still being made
    assert file_hashes(tmp_path / "out") == reference
    # The nanny restarted the worker; the cluster is whole again for other tests.
    client.wait_for_workers(2, timeout=30)


def test_command_line_local_dask_cluster(corpus_and_reference, tmp_path):
    corpus, reference = corpus_and_reference
    command = [sys.executable, "-m", "bert_data.cli.create_tfrecords", "--metadata_files", str(corpus.metadata),
               "--input_files_prefix", str(corpus.root), "--vocab_file", str(corpus.vocab), "--do_lower_case",
               "--max_seq_length", "64", "--max_predictions_per_seq", "10", "--dupe_factor", "20", "--split_num",
               "10", "--num_output_files", "4", "--output_dir", str(tmp_path / "out"), "--dask", "--num_workers",
               "2", "--quiet"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert file_hashes(tmp_path / "out") == reference


def test_unreachable_scheduler_is_a_clear_error(tmp_path):
    from bert_data.cli.create_tfrecords import main

    corpus = make_corpus(tmp_path / "c", n_docs=3)
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        code = main(["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root),
                 "--vocab_file", str(corpus.vocab), "--output_dir", str(tmp_path / "out"), "--quiet",
                     "--scheduler", "tcp://127.0.0.1:1"])
    assert code == 2


@pytest.mark.parametrize("fmt", ["parquet", "megatron"])
def test_other_formats_on_the_cluster_are_a_local_runs_files(corpus_and_reference, cluster, tmp_path, fmt):
    """The formats written from column blocks (Parquet) and from the tokenized corpus (Megatron)
    go through the cluster as TFRecord does."""
    import hashlib

    corpus, _ = corpus_and_reference
    _, client = cluster
    generate(config_for(corpus, tmp_path / "local", output_format=fmt, dupe_factor=2), progress=False)
    generate(config_for(corpus, tmp_path / "out", output_format=fmt, dupe_factor=2),
             executor=client.get_executor(pure=False), parallelism=2, progress=False)

    def hashes(directory):
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.iterdir() if p.suffix != ".json"}

    assert hashes(tmp_path / "out") == hashes(tmp_path / "local") and len(hashes(tmp_path / "local")) >= 4


def test_dask_with_dedup_and_decontamination_gives_the_bytes_of_a_local_run(cluster, tmp_path):
    from bert_data.pipeline.dedup import normalized_words

    corpus = make_corpus(tmp_path / "corpus", n_docs=30, min_sentences=15, max_sentences=30, words_per_doc=30)
    (corpus.root / "docs" / "copy.txt").write_text((corpus.root / "docs" / "doc001.txt").read_text().upper())
    with open(corpus.metadata, "a") as metadata:
        metadata.write("docs/copy.txt\n")
    evaluation = tmp_path / "eval.txt"
    evaluation.write_text(" ".join(normalized_words((corpus.root / "docs" / "doc007.txt").read_text())[5:20]) + "\n")
    options = dict(dedup="near", decontaminate=[str(evaluation)])
    local = generate(config_for(corpus, tmp_path / "local", **options), progress=False)
    assert local.manifests["train"]["documents_removed"]["documents"] == 2
    _, client = cluster
    summary = generate(config_for(corpus, tmp_path / "out", **options), executor=client.get_executor(pure=False),
                       parallelism=2, progress=False)
    assert file_hashes(tmp_path / "out") == file_hashes(tmp_path / "local")
    assert summary.manifests["train"]["documents_removed"] == local.manifests["train"]["documents_removed"]


def test_packed_splits_on_the_cluster_give_the_bytes_of_a_local_run(cluster, tmp_path):
    # --pack_sequences packs each split as a whole: rows gather instances from several units'
    # pools, on whichever worker encodes them.
    corpus = make_corpus(tmp_path / "corpus", n_docs=40, min_sentences=4, max_sentences=20, words_per_doc=30)
    options = dict(pack_sequences=True, dupe_factor=2, val_fraction=0.2)
    generate(config_for(corpus, tmp_path / "local", **options), progress=False)
    _, client = cluster
    generate(config_for(corpus, tmp_path / "out", **options), executor=client.get_executor(pure=False),
             parallelism=2, progress=False)
    assert file_hashes(tmp_path / "out") == file_hashes(tmp_path / "local")
