"""Inputs, vocabulary and output in an S3 bucket (a moto server on 127.0.0.1): the bytes of a
local run, shards that appear only when complete, the manifest last, an interrupted run
resumed, and a lock object that keeps a second run out."""

from __future__ import annotations

import gzip
import json
import os
import socket

import pytest

from bert_data.config import ConfigError
from bert_data.format.manifest import Manifest
from bert_data.pipeline.documents import planner
from bert_data.pipeline.documents.types import InputError
from bert_data.run.resolve import generate

from tests.helpers.corpus import corpus_config, file_hashes, make_corpus
from tests.helpers.interruptions import interrupted_at_append
from tests.helpers.remote import bucket_hashes

BUCKET = "s3://bert-data-tests"


@pytest.fixture(scope="module")
def corpus_and_reference(tmp_path_factory):
    root = tmp_path_factory.mktemp("s3corpus")
    corpus = make_corpus(root / "corpus", n_docs=30, min_sentences=6, max_sentences=14, words_per_doc=15)
    # Among the files: a gzip'd one (a JSON text, as text: decompressed from a stream), and a
    # long document that the planner cuts into parts (looking at its bytes in ranges).
    labels = corpus.metadata.read_text().split()
    lines = [json.dumps({"text": (corpus.root / label).read_text()}) for label in labels[:2]]
    (corpus.root / "docs" / "two.jsonl.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    long_text = "\n\n".join((corpus.root / label).read_text() for label in labels[2:12])
    (corpus.root / "docs" / "long.txt").write_text(long_text, encoding="utf-8")
    corpus.metadata.write_text("\n".join(labels + ["docs/long.txt"]) + "\n", encoding="utf-8")
    output = root / "local"
    with small_parts():
        summary = generate(s3_config(corpus, output, local=True), progress=False)
    return corpus, file_hashes(output), summary.manifests["train"]


class small_parts:
    """Documents over 3 KB are read in parts (so the long one is cut, locally and in the bucket alike)."""

    def __enter__(self):
        self.original = planner.plan_corpus
        planner.plan_corpus = lambda *a, **k: self.original(*a, **dict(k, part_bytes=3000))

    def __exit__(self, *exc):
        planner.plan_corpus = self.original


def s3_config(corpus, output, local=False, **overrides):
    prefix = str(corpus.root) if local else f"{BUCKET}/corpus"
    options = dict(metadata_files=[f"{prefix}/metadata.txt"], input_files_prefix=prefix,
                   vocab_file=f"{prefix}/vocab.txt", split_num=6, num_output_files=3)
    options.update(overrides)
    return corpus_config(corpus, output, **options)


def upload_corpus(fs, corpus):
    fs.put(str(corpus.root) + "/", "bert-data-tests/corpus/", recursive=True)


def test_inputs_and_output_in_a_bucket_give_the_bytes_of_a_local_run(s3, corpus_and_reference, tmp_path):
    corpus, reference, manifest = corpus_and_reference
    upload_corpus(s3, corpus)
    s3.rm("bert-data-tests/out", recursive=True) if s3.exists("bert-data-tests/out") else None
    with small_parts():
        summary = generate(s3_config(corpus, f"{BUCKET}/out", num_workers=2), progress=False)
    assert bucket_hashes(s3, f"{BUCKET}/out") == reference
    written = Manifest.read(f"{BUCKET}/out")
    assert written.n_examples == manifest["n_examples"] == summary.manifests["train"]["n_examples"]
    assert written.bytes_per_file == manifest["bytes_per_file"]
    assert written.sha256_per_file == manifest["sha256_per_file"] and written.sha256_per_file  # of the staged copies
    assert written.options["vocab_file"] == f"{BUCKET}/corpus/vocab.txt"
    # Nothing else is left: no temporary shard, lock or work files, and no local staging.
    s3.invalidate_cache()
    assert sorted(os.path.basename(p) for p in s3.ls("bert-data-tests/out")) == [
        "data_params.json", "examples-1.tfrecords", "examples-2.tfrecords", "examples-3.tfrecords"]
    assert not any((tmp_path / "cache" / "bert_data" / "staging").iterdir())


def test_an_interrupted_run_resumes_from_its_staging_to_the_same_bytes(s3, corpus_and_reference, tmp_path):
    corpus, reference, _ = corpus_and_reference
    upload_corpus(s3, corpus)
    output = f"{BUCKET}/resumed"
    # As Ctrl-C would, after three units were appended.
    with interrupted_at_append(4), small_parts(), pytest.raises(KeyboardInterrupt):
        generate(s3_config(corpus, output), progress=False)
    s3.invalidate_cache()
    assert not s3.exists(output.split("://")[1])  # nothing published, and the lock released
    staged = list((tmp_path / "cache" / "bert_data" / "staging").iterdir())
    assert len(staged) == 1 and (staged[0] / ".bert_data_work" / "journal.json").exists()
    # Starting afresh by mistake is refused: the staged run is named.
    with small_parts(), pytest.raises(ConfigError, match="interrupted run of it is staged in"):
        generate(s3_config(corpus, output), progress=False)
    with small_parts():
        summary = generate(s3_config(corpus, output, resume=True), progress=False)
    assert summary.resumed_from_unit == 3
    assert bucket_hashes(s3, output) == reference
    assert not any((tmp_path / "cache" / "bert_data" / "staging").iterdir())


def test_a_lock_object_keeps_a_second_run_out(s3, corpus_and_reference):
    corpus, reference, _ = corpus_and_reference
    upload_corpus(s3, corpus)
    output = f"{BUCKET}/locked"
    lock = f"bert-data-tests/locked/.bert_data.lock"
    s3.pipe(lock, json.dumps({"host": "elsewhere", "pid": 1, "started": "earlier"}).encode())
    with pytest.raises(ConfigError, match="in use by another run .pid 1 on elsewhere.*remove s3://"):
        generate(s3_config(corpus, output), progress=False)
    # A lock left by a dead process of this host is taken over.
    s3.pipe(lock, json.dumps({"host": socket.gethostname(), "pid": 2 ** 22 + 12345}).encode())
    with small_parts():
        generate(s3_config(corpus, output), progress=False)
    assert bucket_hashes(s3, output) == reference
    s3.invalidate_cache()
    assert not s3.exists(lock)
    # A finished dataset is not replaced without --overwrite.
    with pytest.raises(ConfigError, match="already holds output"):
        generate(s3_config(corpus, output), progress=False)
    with small_parts():
        generate(s3_config(corpus, output, overwrite=True), progress=False)
    assert bucket_hashes(s3, output) == reference


def test_a_missing_input_in_the_bucket_is_one_line_before_any_work(s3, corpus_and_reference):
    corpus, _, _ = corpus_and_reference
    upload_corpus(s3, corpus)
    s3.pipe("bert-data-tests/corpus/missing.txt", b"docs/doc000.txt\ndocs/nothing.txt\n")
    config = s3_config(corpus, f"{BUCKET}/never", metadata_files=[f"{BUCKET}/corpus/missing.txt"])
    with pytest.raises(InputError, match=r"missing.txt:2: file not found: s3://.*docs/nothing.txt"):
        generate(config, progress=False)
    s3.invalidate_cache()
    assert not s3.exists("bert-data-tests/never")


def test_files_of_many_documents_are_found_in_a_bucket_as_locally(s3, tmp_path):
    """JSON Lines, plain and compressed, blank-line separated files (scanned from a stream), and
    Parquet and Arrow tables (row groups read through fsspec's file objects)."""
    from bert_data.pipeline.documents.reading import DocumentTexts

    root = tmp_path / "many"
    root.mkdir()
    lines = [json.dumps({"text": f"document {i} " + "word " * (i % 7)}) for i in range(40)] + ["not json"]
    (root / "a.jsonl").write_text("\n".join(lines) + "\n")
    (root / "b.jsonl.gz").write_bytes(gzip.compress("\n\n".join(lines[::-1]).encode()))
    (root / "meta.txt").write_text("a.jsonl\nb.jsonl.gz\n")
    (root / "c.txt").write_text("\n\n\n".join(f"doc {i}\nline two" for i in range(25)))
    (root / "meta2.txt").write_text("c.txt\n")
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    texts = [f"row {i} " + "text " * (i % 5) if i % 9 else None for i in range(60)]
    pq.write_table(pa.table({"text": texts}), root / "t.parquet", row_group_size=7)
    with pa.ipc.new_stream(root / "t.arrow", pa.schema([("text", pa.string())])) as writer:
        for start in range(0, 60, 25):
            writer.write_batch(pa.record_batch([pa.array(texts[start:start + 25])], names=["text"]))
    (root / "meta3.txt").write_text("t.parquet\nt.arrow\n")
    s3.put(str(root) + "/", "bert-data-tests/many/", recursive=True)
    for meta, options in (("meta.txt", dict(text_field="text")),
                          ("meta2.txt", dict(multiple_docs_in_single_file=True)), ("meta3.txt", {})):
        local = DocumentTexts([str(root / meta)], str(root), **options)
        remote = DocumentTexts([f"{BUCKET}/many/{meta}"], f"{BUCKET}/many", **options)
        assert list(remote) == list(local) and len(list(local)) > 20
        assert remote.skipped == local.skipped


def test_shards_sized_by_records_are_uploaded_as_set(s3, corpus_and_reference, tmp_path):
    corpus, _, _ = corpus_and_reference
    upload_corpus(s3, corpus)
    with small_parts():
        local = generate(s3_config(corpus, tmp_path / "local", local=True, records_per_file=150), progress=False)
        generate(s3_config(corpus, f"{BUCKET}/sized", records_per_file=150), progress=False)
    count = local.manifests["train"]["num_output_files"]
    assert count != 3 and bucket_hashes(s3, f"{BUCKET}/sized") == file_hashes(tmp_path / "local")
    assert Manifest.read(f"{BUCKET}/sized").options["num_output_files"] == count


def test_input_files_globbed_in_a_bucket_as_locally(s3, corpus_and_reference, tmp_path):
    """--input_files with a pattern: fsspec's glob in a bucket, the same files in the same order."""
    corpus, _, _ = corpus_and_reference
    upload_corpus(s3, corpus)
    local = generate(s3_config(corpus, tmp_path / "local", local=True, metadata_files=[],
                               input_files=["docs/doc01*.txt"]), progress=False)
    remote = generate(s3_config(corpus, tmp_path / "remote", metadata_files=[], input_files=["docs/doc01*.txt"]),
                      progress=False)
    assert local.manifests["train"]["n_docs"] == remote.manifests["train"]["n_docs"] == 10
    assert file_hashes(tmp_path / "remote") == file_hashes(tmp_path / "local")


class _StopAtFinalizeStep:
    """``run_files``'s finalizing steps, with Ctrl-C at the chosen one (in process: the parent
    cannot be killed here, but every step must be done again all the same)."""

    def __init__(self, step):
        self.step, self.done = step, 0

    def __call__(self):
        self.done += 1
        if self.done == self.step:
            raise KeyboardInterrupt


@pytest.mark.parametrize("step", [2, 4])  # after the second upload; after the manifest (the commit point)
def test_a_run_stopped_while_uploading_its_shards_is_finished_by_resume(s3, corpus_and_reference, monkeypatch, step):
    from bert_data.run import run_files

    corpus, reference, _ = corpus_and_reference
    upload_corpus(s3, corpus)
    output = f"{BUCKET}/finishing-{step}"
    with monkeypatch.context() as patch:
        patch.setattr(run_files, "_Steps", lambda: _StopAtFinalizeStep(step))
        with small_parts(), pytest.raises(KeyboardInterrupt):
            generate(s3_config(corpus, output), progress=False)
    s3.invalidate_cache()
    assert s3.exists(output.split("://")[1] + "/data_params.json") == (step == 4)
    with small_parts():
        summary = generate(s3_config(corpus, output, resume=True), progress=False)
    assert summary.resumed_from_unit == summary.manifests["train"]["n_units"]  # only finishing was left
    assert bucket_hashes(s3, output) == reference


def test_a_gzip_object_named_txt_is_skipped_with_a_line_saying_to_name_it(s3, corpus_and_reference, tmp_path, capsys):
    """A URL's compression is told by its name (a request a file to sniff it would cost planning
    too much): a gzip object named .txt is not read as binary in silence, the run names it."""
    corpus, _, _ = corpus_and_reference
    upload_corpus(s3, corpus)
    labels = corpus.metadata.read_text().split()[:4]
    s3.pipe("bert-data-tests/corpus/docs/packed.txt", gzip.compress((corpus.root / labels[0]).read_bytes()))
    s3.pipe("bert-data-tests/corpus/gz-metadata.txt", ("\n".join(labels + ["docs/packed.txt"]) + "\n").encode())
    capsys.readouterr()
    summary = generate(s3_config(corpus, tmp_path / "out", metadata_files=[f"{BUCKET}/corpus/gz-metadata.txt"]),
                       progress=False)
    err = capsys.readouterr().err
    assert ("warning: docs/packed.txt: skipped: compressed file whose name does not say so (name it .gz, "
            ".bz2, .xz or .zst)") in err, err
    assert summary.manifests["train"]["n_docs"] == 4
