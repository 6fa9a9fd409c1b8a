"""An encode task's chunks of several shards gathered, masked and encoded together
(``tasks.encode_shards``, batched) against a chunk at a time (``batched=False``, the reference):
the same files, byte for byte, whatever the format, compression, masking or columns, with
shards spanning several chunks and batches spanning several shards."""

from __future__ import annotations

import functools
import hashlib

import pytest

from bert_data.run import scheduler, tasks
from bert_data.run.resolve import generate

from tests.helpers.corpus import corpus_config, make_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("encode_batches"), n_docs=24, min_sentences=2, max_sentences=12)


def output_hashes(directory) -> dict:
    """Every file the run wrote but ``data_params.json`` (it names the output directory)."""
    return {path.relative_to(directory).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(directory.rglob("*")) if path.is_file() and path.name != "data_params.json"}


CASES = [
    dict(),
    dict(compression="gzip"),
    dict(compression="zlib"),
    dict(mask_whole_word=True, store_word_starts=True),
    dict(span_masking=True),
    dict(max_ngram_size=3),
    dict(record_provenance=True, val_fraction=0.25),
    dict(mlm_only=True),
    dict(mlm_only=True, disable_masking=True),
    dict(output_format="parquet"),
    dict(output_format="hdf5"),
    dict(pack_sequences=True),  # packed: a chunk at a time either way
]


@pytest.mark.parametrize("chunk_rows", [2048, 5])
@pytest.mark.parametrize("options", CASES, ids=[",".join(f"{k}={v}" for k, v in o.items()) or "tfrecord"
                                                for o in CASES])
def test_batched_chunks_write_the_reference_bytes(corpus, tmp_path, monkeypatch, options, chunk_rows):
    monkeypatch.setattr(tasks, "CHUNK_ROWS", chunk_rows)  # 5: shards of several chunks, batches of several shards
    batches = []
    range_columns = tasks.range_columns
    monkeypatch.setattr(tasks, "range_columns", lambda *a, **k: batches.append(1) or range_columns(*a, **k))
    written = {}
    for batched in (True, False):
        monkeypatch.setattr(scheduler, "encode_shards", functools.partial(tasks.encode_shards, batched=batched))
        output = tmp_path / str(batched)
        generate(corpus_config(corpus, output, split_num=4, num_output_files=7, dupe_factor=1, **options))
        written[batched] = output_hashes(output)
        if batched:
            assert bool(batches) == ("pack_sequences" not in options)  # the batched path ran (unpacked)
    assert written[True] == written[False]
    assert any(name.endswith((".tfrecords", ".tfrecords.gz", ".tfrecords.zlib", ".parquet", ".h5", ".hdf5"))
               for name in written[True]), sorted(written[True])
