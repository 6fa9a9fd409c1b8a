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


def allocated(path) -> int:
    return path.stat().st_blocks * 512


def test_released_blocks_are_those_wholly_inside_the_ranges_and_no_other_byte_changes(tmp_path):
    """Holes punched in the blocks wholly inside each range (they read as zeros, take no disk);
    the bytes around them, even in the blocks a range shares with its neighbours, stay as they
    were; the file keeps its size.  (Linux's file systems punch holes: ext4, XFS, btrfs, tmpfs.)"""
    import os

    path = tmp_path / "piece"
    data = os.urandom(64 * 1024)
    with open(path, "wb") as handle:
        handle.write(data)
        os.fsync(handle.fileno())  # (allocated on disk, not only reserved)
    before = allocated(path)
    block = max(os.stat(path).st_blksize, 4096)
    ranges = [(1000, 5 * block - 1000 + 17), (9 * block + 5, 3 * block), (12 * block + 100, 50)]
    assert storage.release_blocks(str(path), ranges)
    after = path.read_bytes()
    assert len(after) == len(data)
    holes = [(block, 5 * block), (10 * block, 12 * block)]  # (the last range holds no whole block)
    expected = bytearray(data)
    for begin, end in holes:
        expected[begin:end] = bytes(end - begin)
    assert after == bytes(expected)
    assert before - allocated(path) == sum(end - begin for begin, end in holes)
    assert storage.release_blocks(str(tmp_path / "gone"), ranges)  # a file removed meanwhile is fine


def test_where_holes_cannot_be_punched_nothing_changes_and_removals_stop_asking(tmp_path, monkeypatch):
    """A file system without holes (EOPNOTSUPP): False, the file as it was; the removals' thread
    then asks no more, and a removal still happens.  Another error (EIO) is raised at close."""
    import ctypes
    import errno
    import os

    calls = []

    def refusing(code):
        def fallocate(handle, mode, offset, length):
            calls.append((offset, length))
            ctypes.set_errno(code)
            return -1
        return lambda: fallocate

    path = tmp_path / "piece"
    data = os.urandom(32 * 1024)
    path.write_bytes(data)
    monkeypatch.setattr(storage, "_fallocate", refusing(errno.EOPNOTSUPP))
    assert not storage.release_blocks(str(path), [(0, len(data))])
    removals = storage.BackgroundRemovals()
    removals.release([(str(path), [(0, len(data))])])
    removals.release([(str(path), [(0, len(data))])])
    other = tmp_path / "other"
    other.write_bytes(b"x")
    removals.remove([str(other)])
    removals.close()
    assert path.read_bytes() == data and len(calls) == 2 and not removals.releasing and not other.exists()

    monkeypatch.setattr(storage, "_fallocate", refusing(errno.EIO))
    failing = storage.BackgroundRemovals()
    failing.release([(str(path), [(0, len(data))])])
    with pytest.raises(OSError, match="giving back the blocks of"):
        failing.close()


def test_real_paths_are_os_realpath(tmp_path, monkeypatch):
    """RealPaths (each directory resolved once, one lstat a file) gives what os.path.realpath
    gives: links to files and directories, dangling and looping links, "." and "..", names that do
    not exist, a file used as a directory, relative paths."""
    import os

    (tmp_path / "real" / "sub").mkdir(parents=True)
    (tmp_path / "real" / "a.txt").write_text("a")
    (tmp_path / "real" / "sub" / "b.txt").write_text("b")
    os.symlink(tmp_path / "real", tmp_path / "dirlink")
    os.symlink(tmp_path / "real" / "a.txt", tmp_path / "real" / "filelink.txt")
    os.symlink("sub/../a.txt", tmp_path / "real" / "relative_link.txt")
    os.symlink(tmp_path / "nowhere", tmp_path / "real" / "dangling.txt")
    os.symlink(tmp_path / "real" / "loop2", tmp_path / "real" / "loop1")
    os.symlink(tmp_path / "real" / "loop1", tmp_path / "real" / "loop2")
    names = ["real/a.txt", "real/sub/b.txt", "dirlink/a.txt", "dirlink/sub/b.txt", "dirlink/filelink.txt",
             "real/filelink.txt", "real/relative_link.txt", "dirlink/relative_link.txt", "real/dangling.txt",
             "real/loop1", "real/missing.txt", "dirlink/missing/x.txt", "real/a.txt/x", "real/sub/..",
             "dirlink/sub/../a.txt", "real/.", "dirlink/", "real//a.txt", "real/sub/./b.txt"]
    real_path = storage.RealPaths()
    for name in names * 2:  # (the second time from the resolved directories)
        assert real_path(str(tmp_path / name)) == os.path.realpath(tmp_path / name), name
    monkeypatch.chdir(tmp_path / "dirlink")
    relative = storage.RealPaths()
    for name in ["a.txt", "sub/b.txt", "filelink.txt", "missing.txt", "../dirlink/a.txt", "."]:
        assert relative(name) == os.path.realpath(name), name


def test_an_input_reached_through_a_link_is_not_overwritten(tmp_path):
    """The check before a run deletes anything: an input that is, through a link to its directory
    or to itself, a shard this run writes is refused (RealPaths resolves both)."""
    import os

    from bert_data.config import ConfigError
    from bert_data.run.run_files import refuse_writing_over_inputs
    from bert_data.run.specs import OutputSpec

    out = tmp_path / "out"
    out.mkdir()
    (out / "examples-1.tfrecords").write_bytes(b"")
    os.symlink(out, tmp_path / "outlink")
    os.symlink(out / "examples-1.tfrecords", tmp_path / "doc.txt")
    (tmp_path / "other.txt").write_text("x")
    spec = OutputSpec(directory=str(out), files=(), name="examples", format="tfrecord", compression=None,
                      num_output_files=1, records_per_file=None, megabytes_per_file=None, has_validation=False,
                      features=(), sentence_order=False, shuffle_seed=None)
    refuse_writing_over_inputs(spec, [str(tmp_path / "other.txt")])
    for read in ("outlink/examples-1.tfrecords", "doc.txt"):
        with pytest.raises(ConfigError, match="would overwrite it"):
            refuse_writing_over_inputs(spec, [str(tmp_path / "other.txt"), str(tmp_path / read)])
