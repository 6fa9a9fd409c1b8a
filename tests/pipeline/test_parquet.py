"""Parquet and Arrow tables as input: one row a document, read in row groups, bad rows counted,
and the same bytes as the same documents as text files or JSON Lines."""

from __future__ import annotations

import json

import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

from bert_data.cli.create_tfrecords import main  # noqa: E402
from bert_data.format.manifest import Manifest  # noqa: E402
from bert_data.pipeline.documents import planner  # noqa: E402
from bert_data.run.resolve import generate  # noqa: E402

from tests.helpers.corpus import corpus_config, file_hashes, make_corpus  # noqa: E402

# Rows that hold no document, by position: the text files get an empty file there instead.
BAD_ROWS = {3: None, 11: "", 20: "  \n ", 33: None}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("tables")
    corpus = make_corpus(root / "corpus", n_docs=48, min_sentences=4, max_sentences=12, words_per_doc=12)
    labels = corpus.metadata.read_text().split()
    texts = [(corpus.root / label).read_text(encoding="utf-8") for label in labels]
    for position, value in BAD_ROWS.items():
        (corpus.root / labels[position]).write_text(value or "", encoding="utf-8")
        texts[position] = value
    return corpus, texts


def write_metadata(path, names):
    path.write_text("\n".join(names) + "\n", encoding="utf-8")
    return path


def table_config(corpus, metadata, output, **overrides):
    return corpus_config(corpus, output, metadata_files=[str(metadata)], input_files_prefix=str(metadata.parent),
                         split_num=7, num_output_files=3, **overrides)


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory):
    """The documents as text files, one a file (the bad rows: empty files)."""
    corpus, _ = corpus
    output = tmp_path_factory.mktemp("reference")
    summary = generate(corpus_config(corpus, output, split_num=7, num_output_files=3), progress=False)
    return file_hashes(output), summary.manifests["train"]


def test_parquet_in_row_groups_gives_the_bytes_of_text_files(corpus, reference, tmp_path, monkeypatch):
    corpus, texts = corpus
    # Two files, the first of many small row groups: more row groups than a slice holds, and
    # slices of 4 rows that cut row groups, so that two workers share each file.
    pq.write_table(pa.table({"id": list(range(30)), "text": texts[:30]}), tmp_path / "part-0.parquet",
                   row_group_size=6)
    pq.write_table(pa.table({"text": texts[30:], "extra": [1.5] * len(texts[30:])}), tmp_path / "part-1.parquet")
    assert pq.ParquetFile(tmp_path / "part-0.parquet").num_row_groups == 5
    metadata = write_metadata(tmp_path / "tables.txt", ["part-0.parquet", "part-1.parquet"])
    original = planner.plan_corpus
    monkeypatch.setattr(planner, "plan_corpus", lambda *a, **k: original(*a, **dict(k, slice_docs=4)))
    summary = generate(table_config(corpus, metadata, tmp_path / "out", num_workers=2), progress=False)
    hashes, manifest = reference
    assert file_hashes(tmp_path / "out") == hashes
    train = summary.manifests["train"]
    assert train["n_examples"] == manifest["n_examples"] and train["n_docs"] == manifest["n_docs"] == 44
    assert train["documents_skipped"]["by_reason"] == {"empty or white-space only": 2, "text value is null": 2}
    assert {entry["path"] for entry in train["documents_skipped"]["first"]} == {
        "part-0.parquet#3", "part-0.parquet#11", "part-0.parquet#20", "part-1.parquet#3"}


def test_arrow_files_and_streams_and_json_lines_give_the_same_bytes(corpus, reference, tmp_path):
    corpus, texts = corpus
    # An Arrow IPC file (Feather v2) whose text column is a union: one row is a number.
    types = [0 if value is None or isinstance(value, str) else 1 for value in texts]
    types[7] = 1
    children = [pa.array([None if t else texts[i] for i, t in enumerate(types)], pa.string()),
                pa.array([7 if t else 0 for t in types], pa.int64())]
    union = pa.UnionArray.from_sparse(pa.array(types, pa.int8()), children)
    with pa.ipc.new_file(tmp_path / "a.feather", pa.schema([("body", union.type)])) as writer:
        for start in range(0, 24, 5):  # record batches of five rows
            writer.write_batch(pa.record_batch([union.slice(start, min(5, 24 - start))], names=["body"]))
    # The rest as an Arrow stream (the format of Hugging Face datasets' cache files) ...
    with pa.ipc.new_stream(tmp_path / "b.arrow", pa.schema([("body", pa.large_string())])) as writer:
        for start in range(24, 48, 10):
            writer.write_batch(pa.record_batch([pa.array(texts[start:start + 10], pa.large_string())], names=["body"]))
    metadata = write_metadata(tmp_path / "arrow.txt", ["a.feather", "b.arrow"])
    summary = generate(table_config(corpus, metadata, tmp_path / "arrow", text_field="body"), progress=False)
    hashes, manifest = reference
    # Row 7, a number, is a skipped document where the text files have one: other bytes.
    assert summary.manifests["train"]["documents_skipped"]["by_reason"] == {
        "empty or white-space only": 2, "text value is not a string": 1, "text value is null": 2}

    # ... and the same with row 7 a text: the bytes of the text files, as JSON Lines gives them.
    children[0] = pa.array([None if t else texts[i] for i, t in enumerate(types[:7] + [0] + types[8:])], pa.string())
    fixed = pa.UnionArray.from_sparse(pa.array(types[:7] + [0] + types[8:], pa.int8()), children)
    with pa.ipc.new_file(tmp_path / "a.feather", pa.schema([("body", fixed.type)])) as writer:
        writer.write_batch(pa.record_batch([fixed.slice(0, 24)], names=["body"]))
    generate(table_config(corpus, metadata, tmp_path / "arrow2", text_field="body"), progress=False)
    assert file_hashes(tmp_path / "arrow2") == hashes
    lines = "".join(json.dumps({"body": text}) + "\n" for text in texts)
    (tmp_path / "docs.jsonl").write_text(lines, encoding="utf-8")
    jsonl = write_metadata(tmp_path / "jsonl.txt", ["docs.jsonl"])
    generate(table_config(corpus, jsonl, tmp_path / "jsonl", text_field="body"), progress=False)
    assert file_hashes(tmp_path / "jsonl") == hashes


def test_a_missing_column_stops_the_run_before_any_work(corpus, tmp_path, capsys):
    corpus, texts = corpus
    pq.write_table(pa.table({"content": texts[:5], "url": ["u"] * 5}), tmp_path / "t.parquet")
    metadata = write_metadata(tmp_path / "m.txt", ["t.parquet"])
    code = main(["--metadata_files", str(metadata), "--input_files_prefix", str(tmp_path), "--vocab_file",
                 str(corpus.vocab), "--output_dir", str(tmp_path / "out"), "--quiet"])
    error = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(error) == 1
    assert "t.parquet: no column 'text' (its columns: content, url)" in error[0] and "--text_field" in error[0]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    # --text_field (or its aliases --text_column and --jsonl_text_key) names it.
    assert main(["--metadata_files", str(metadata), "--input_files_prefix", str(tmp_path), "--vocab_file",
                 str(corpus.vocab), "--output_dir", str(tmp_path / "out"), "--quiet", "--do_lower_case",
                 "--text_column", "content", "--max_seq_length", "32", "--dupe_factor", "1"]) == 0
    assert Manifest.read(str(tmp_path / "out")).options["text_field"] == "content"


def test_a_reader_holds_a_batch_not_a_row_group(tmp_path, monkeypatch):
    """Rows are decoded a batch at a time, and a worker reading ranges in order goes on where it
    stopped instead of decoding the file again."""
    from bert_data.pipeline.documents import tables as table_input

    texts = [f"document {i} " * 20 for i in range(1000)]
    pq.write_table(pa.table({"text": texts}), tmp_path / "big.parquet", row_group_size=500)
    decoded = []
    original = table_input._python_values
    monkeypatch.setattr(table_input, "_python_values", lambda array, pa: decoded.append(len(array)) or
                        original(array, pa))
    rows = []
    for start in range(100, 1000, 150):
        rows += list(table_input.read_table_rows(str(tmp_path / "big.parquet"), "parquet", "text", start,
                                                 min(start + 150, 1000)))
    assert [row for row, _ in rows] == list(range(100, 1000))
    assert [value.decode() for _, value in rows] == texts[100:]
    assert max(decoded) <= table_input.READ_ROWS and sum(decoded) == 900
