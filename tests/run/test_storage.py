"""Where bytes live: URLs and local paths, and a local run that imports none of the optional
libraries (pyarrow, fsspec, s3fs, gcsfs) unless a URL or a table asks for them."""

from __future__ import annotations

import pytest

from bert_data import storage

from tests.helpers.corpus import corpus_config, file_hashes
from tests.helpers.remote import serving
from tests.helpers.run_imports import modules_a_run_imports

OPTIONAL = ("pyarrow", "fsspec", "s3fs", "gcsfs")


def test_local_generation_imports_no_storage_or_table_library(synthetic_corpus, tmp_path):
    assert modules_a_run_imports(synthetic_corpus, tmp_path, OPTIONAL, "--num_workers", "2", "--split_num", "20") == []


def test_paths_and_urls():
    assert storage.is_url("s3://b/k") and storage.is_url("simplecache::gs://b/k") and storage.is_url("hf://x/y")
    assert not storage.is_url("/data/x.txt") and not storage.is_url("c:/data")
    assert storage.resolve("s3://b/corpus/", "docs/a.txt") == "s3://b/corpus/docs/a.txt"
    assert storage.resolve("s3://b/corpus", "gs://c/d.txt") == "gs://c/d.txt"
    assert storage.resolve("/data", "docs/a.txt") == "/data/docs/a.txt"
    assert storage.join("s3://b/out/", "train", "x") == "s3://b/out/train/x"
    assert storage.basename("s3://b/out/x.tfrecords") == "x.tfrecords"


def test_a_corpus_in_memory_urls_gives_the_bytes_of_local_files(synthetic_corpus, tmp_path, generated_reference,
                                                                 private_tmp):
    """``memory://`` (any fsspec file system): metadata, documents and vocabulary read through it."""
    fsspec = pytest.importorskip("fsspec")
    from bert_data.run.resolve import generate

    memory = fsspec.filesystem("memory")
    for path in sorted(synthetic_corpus.root.rglob("*")):
        if path.is_file():
            memory.pipe(f"/corpus/{path.relative_to(synthetic_corpus.root).as_posix()}", path.read_bytes())
    try:
        config = corpus_config(synthetic_corpus, tmp_path / "out", metadata_files=["memory://corpus/metadata.txt"],
                               input_files_prefix="memory://corpus", vocab_file="memory://corpus/vocab.txt")
        generate(config, progress=False)  # one worker: memory:// lives in this process
        assert file_hashes(tmp_path / "out") == generated_reference
    finally:
        memory.rm("/corpus", recursive=True)


@pytest.fixture(scope="module")
def generated_reference(synthetic_corpus, tmp_path_factory):
    from bert_data.run.resolve import generate

    output = tmp_path_factory.mktemp("reference")
    generate(corpus_config(synthetic_corpus, output), progress=False)
    return file_hashes(output)


def test_a_work_directory_of_its_own(synthetic_corpus, tmp_path, generated_reference):
    """--work_dir: the run's intermediate files go to a folder of its own there, removed after."""
    from bert_data.run.resolve import generate

    work = tmp_path / "work"
    work.mkdir()
    (work / "someone-elses.txt").write_text("kept")
    generate(corpus_config(synthetic_corpus, tmp_path / "out", work_dir=str(work), num_workers=2), progress=False)
    assert file_hashes(tmp_path / "out") == generated_reference
    assert sorted(p.name for p in work.iterdir()) == ["someone-elses.txt"]


def test_a_corpus_over_http_gives_the_bytes_of_local_files(synthetic_corpus, tmp_path, generated_reference,
                                                           private_tmp):
    """``http(s)://``: a web server on 127.0.0.1 serving the corpus folder (no listing is trusted:
    each listed file is asked for)."""
    pytest.importorskip("aiohttp")
    from bert_data.run.resolve import generate

    with serving(synthetic_corpus.root) as port:
        url = f"http://127.0.0.1:{port}"
        config = corpus_config(synthetic_corpus, tmp_path / "out", metadata_files=[f"{url}/metadata.txt"],
                               input_files_prefix=url, vocab_file=f"{url}/vocab.txt", num_workers=2)
        generate(config, progress=False)
        assert file_hashes(tmp_path / "out") == generated_reference


def test_background_removals_remove_what_is_given_and_raise_the_first_error_at_close(tmp_path):
    files = [tmp_path / f"f{i}" for i in range(3)]
    for path in files:
        path.write_bytes(b"x" * 100)
    removals = storage.BackgroundRemovals()
    removals.remove([str(files[0]), str(files[1])])
    removals.remove([str(tmp_path / "absent")])  # absent is fine, as for storage.remove
    removals.remove([str(files[2])])
    removals.close()
    assert list(tmp_path.iterdir()) == []

    (tmp_path / "a directory").mkdir()
    failing = storage.BackgroundRemovals()
    failing.remove([str(tmp_path / "a directory")])  # not a file: os.remove refuses it
    with pytest.raises(OSError):
        failing.close()
    quiet = storage.BackgroundRemovals()
    quiet.remove([str(tmp_path / "a directory")])
    quiet.close(quietly=True)  # the caller is failing already: its own error is the one raised
    assert (tmp_path / "a directory").is_dir()
