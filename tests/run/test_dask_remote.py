"""A Dask cluster that shares no file system with the client: inputs, vocabulary and output in
an S3 bucket (a moto server on 127.0.0.1), and workers that cannot see any of the client's
files (a worker plugin makes every path under the client's folders not exist for them).  The
work goes through the bucket: the same bytes as a local run, even when a worker is killed."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import threading
import time

import pytest

pytest.importorskip("distributed")
pytest.importorskip("s3fs")

import cloudpickle  # noqa: E402
from distributed.diagnostics.plugin import WorkerPlugin  # noqa: E402

from bert_data.config import ConfigError  # noqa: E402
from bert_data.run.resolve import generate  # noqa: E402

from tests.helpers.corpus import corpus_config, file_hashes, make_corpus  # noqa: E402
from tests.helpers.remote import bucket_hashes  # noqa: E402

BUCKET = "s3://bert-data-tests"
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the plugin travels to the workers


class BlindToClientFiles(WorkerPlugin):
    """Paths under ``roots`` (but not under ``own``, the worker's temporary folder) do not exist
    for this worker: as on a cluster without a shared file system, where the client's
    directories are on another machine."""

    name = "blind-to-client-files"

    def __init__(self, roots, own):
        self.roots = tuple(os.path.abspath(root) for root in roots)
        self.own = os.path.abspath(own)

    def setup(self, worker):
        import builtins
        import io

        roots, own = self.roots, self.own

        def hidden(path) -> bool:
            try:
                path = os.path.abspath(os.fsdecode(path))
            except TypeError:
                return False  # a file descriptor
            return path.startswith(roots) and not path.startswith(own)

        def guard(function):
            def guarded(path, *args, **kwargs):
                if hidden(path):
                    raise FileNotFoundError(2, "not on this machine", os.fsdecode(path))
                return function(path, *args, **kwargs)
            return guarded

        for module, names in ((os, ("stat", "open", "listdir", "scandir", "lstat")), (builtins, ("open",)),
                              (io, ("open",))):
            for name in names:
                setattr(module, name, guard(getattr(module, name)))


@pytest.fixture(scope="module")
def setup(s3_endpoint, tmp_path_factory):
    """The corpus (uploaded), the reference bytes of a local run, and a cluster blind to the
    client's folders (the tests' temporary root, the staging folders)."""
    import s3fs
    from distributed import Client, LocalCluster

    root = tmp_path_factory.mktemp("dask_remote")
    corpus = make_corpus(root / "corpus", n_docs=60, min_sentences=8, max_sentences=16, words_per_doc=15)
    reference = root / "local"
    generate(corpus_config(corpus, reference, split_num=8, num_output_files=3, dupe_factor=3), progress=False)
    fs = s3fs.S3FileSystem(endpoint_url=s3_endpoint)
    fs.put(str(corpus.root) + "/", "bert-data-tests/dask-corpus/", recursive=True)
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_CACHE_HOME", str(root / "cache"))  # the client's staging: blind to the workers too
    # Every process's temporary files (the workers' copies of the vocabulary, their pieces) go
    # with the test: a folder of their own, outside what the workers are blind to.
    scratch = tmp_path_factory.mktemp("worker_tmp", numbered=True)
    patch.setenv("TMPDIR", str(scratch))
    patch.setattr(tempfile, "tempdir", str(scratch))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.register_plugin(BlindToClientFiles([str(tmp_path_factory.getbasetemp()), str(root)], str(scratch)))
        yield corpus, file_hashes(reference), client, fs, root
    patch.undo()


def remote_config(corpus, output, **overrides):
    prefix = f"{BUCKET}/dask-corpus"
    return corpus_config(corpus, output, metadata_files=[f"{prefix}/metadata.txt"], input_files_prefix=prefix,
                         vocab_file=f"{prefix}/vocab.txt", split_num=8, num_output_files=3, dupe_factor=3,
                         **overrides)


def test_the_workers_really_cannot_see_the_clients_files(setup):
    corpus, _, client, _, root = setup
    assert os.path.exists(corpus.vocab)
    assert not any(client.run(os.path.exists, str(corpus.vocab)).values())


def test_work_goes_through_the_bucket_and_gives_the_bytes_of_a_local_run(setup):
    corpus, reference, client, fs, _ = setup
    output = f"{BUCKET}/dask-out"
    generate(remote_config(corpus, output), executor=client.get_executor(pure=False), parallelism=2,
             progress=False)
    assert bucket_hashes(fs, output) == reference
    assert not fs.exists("bert-data-tests/dask-out/.bert_data_work")  # the work files went with the run


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(setup):
    corpus, reference, client, fs, root = setup
    output = f"{BUCKET}/dask-killed"
    killed = []

    def kill_one_worker_once_units_are_written():
        deadline = time.time() + 60
        journals = []
        while time.time() < deadline and not journals:
            journals = list((root / "cache").glob("bert_data/staging/*/.bert_data_work/journal.json"))
            time.sleep(0.01)
        victim = sorted(client.run(os.getpid).values())[0]
        os.kill(victim, signal.SIGKILL)
        killed.append((victim, bool(journals), time.perf_counter()))

    killer = threading.Thread(target=kill_one_worker_once_units_are_written)
    killer.start()
    generate(remote_config(corpus, output), executor=client.get_executor(pure=False), parallelism=2,
             progress=False)
    finished = time.perf_counter()
    killer.join()
    assert killed and killed[0][1] and killed[0][2] < finished  # killed while units were being made
    assert bucket_hashes(fs, output) == reference
    client.wait_for_workers(2, timeout=30)


def test_a_local_work_directory_the_workers_cannot_see_is_refused_before_any_work(setup):
    corpus, _, client, fs, root = setup
    with pytest.raises(ConfigError, match="not visible to Dask worker .*give --work_dir a URL"):
        generate(remote_config(corpus, f"{BUCKET}/dask-refused", work_dir=str(root / "work")),
                 executor=client.get_executor(pure=False), parallelism=2, progress=False)
    fs.invalidate_cache()
    assert not fs.exists("bert-data-tests/dask-refused/examples-1.tfrecords")


def test_a_local_output_with_a_scratch_url_for_the_work(setup, tmp_path):
    corpus, reference, client, fs, _ = setup
    generate(remote_config(corpus, str(tmp_path / "out"), work_dir=f"{BUCKET}/scratch"),
             executor=client.get_executor(pure=False), parallelism=2, progress=False)
    assert file_hashes(tmp_path / "out") == reference
    fs.invalidate_cache()
    assert not fs.find("bert-data-tests/scratch")  # the run's folder there went with it
