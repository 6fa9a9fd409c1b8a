"""Every format through the pipeline's other paths: output to a bucket (a moto S3 server on
127.0.0.1) gives a local run's files, MDS's index.json and Megatron's .idx included; an
interrupted Megatron run resumes from its tokenized slices to the same bytes; a document read
in parts is one Megatron document again."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from bert_data.format.megatron import read_documents
from bert_data.pipeline.documents import planner
from bert_data.run.run_files import Interrupted
from bert_data.run.resolve import generate
from bert_data.run import runner, scheduler

from tests.helpers.corpus import corpus_config, make_corpus

BUCKET = "s3://bert-data-tests"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("format_runs") / "corpus", n_docs=12, seed=6)


def local_hashes(directory: Path):
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in directory.iterdir()
            if path.name != "data_params.json"}


@pytest.mark.parametrize("fmt, compression", [("mds", "zstd"), ("megatron", None), ("parquet", "snappy")])
def test_output_in_a_bucket_is_a_local_runs_files(s3, corpus, tmp_path, fmt, compression):
    generate(corpus_config(corpus, tmp_path / "local", output_format=fmt, compression=compression), progress=False)
    prefix = f"bert-data-tests/{fmt}"
    generate(corpus_config(corpus, f"s3://{prefix}", output_format=fmt, compression=compression), progress=False)
    s3.invalidate_cache()
    found = {path.rsplit("/", 1)[1]: hashlib.sha256(s3.cat_file(path)).hexdigest() for path in s3.find(prefix)
             if not path.endswith("data_params.json")}
    assert found == local_hashes(tmp_path / "local")
    assert s3.exists(f"{prefix}/data_params.json")


def test_an_interrupted_megatron_run_resumes_to_the_same_bytes(corpus, tmp_path, monkeypatch):
    generate(corpus_config(corpus, tmp_path / "reference", output_format="megatron", split_num=4), progress=False)
    calls = []

    def stop_before_writing(*args, **kwargs):  # Ctrl-C once every slice is tokenized
        calls.append(1)
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(runner, "write_corpus", stop_before_writing)
        with pytest.raises(Interrupted) as stopped:
            generate(corpus_config(corpus, tmp_path / "out", output_format="megatron", split_num=4), progress=False)
    assert calls and stopped.value.kept.slices == stopped.value.kept.n_slices >= 1
    assert not list((tmp_path / "out").glob("*.bin"))
    monkeypatch.setattr(scheduler, "tokenize_slice", lambda *a: pytest.fail("a kept slice was tokenized again"))
    generate(corpus_config(corpus, tmp_path / "out", output_format="megatron", split_num=4, resume=True),
             progress=False)
    assert local_hashes(tmp_path / "out") == local_hashes(tmp_path / "reference")


def test_a_document_read_in_parts_is_one_megatron_document(corpus, tmp_path, monkeypatch):
    generate(corpus_config(corpus, tmp_path / "whole", output_format="megatron", num_output_files=1), progress=False)
    original = planner.plan_corpus
    monkeypatch.setattr(planner, "plan_corpus", lambda *a, **k: original(*a, **dict(k, part_bytes=300)))
    generate(corpus_config(corpus, tmp_path / "parts", output_format="megatron", num_output_files=1), progress=False)
    whole = [[s.tolist() for s in d] for d in read_documents(str(tmp_path / "whole" / "examples-1.bin"))]
    parts = [[s.tolist() for s in d] for d in read_documents(str(tmp_path / "parts" / "examples-1.bin"))]
    assert len(parts) == len(whole) == 12 and parts == whole
