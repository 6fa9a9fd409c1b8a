"""What kind of input a file is, and the one option that names its text.

A file named ``.jsonl``/``.json``/``.ndjson`` (compressed or not) is JSON Lines with its text at
``text``; ``--text_field`` (also spelled ``--text_column`` and ``--jsonl_text_key``) names the
text's key in JSON Lines and its column in tables, and, given, reads every file that is not a
table as JSON Lines.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import zstandard

from bert_data.cli.create_tfrecords import build_parser, main
from bert_data.config import ConfigError, GeneratorConfig
from bert_data.format.manifest import Manifest
from bert_data.pipeline.documents.listing import read_metadata
from bert_data.pipeline.documents.planner import plan_corpus
from bert_data.pipeline.documents.reading import read_documents
from bert_data.format.dataset_layout import TRAIN_CODE
from bert_data.pipeline.documents.types import MISSING_KEY

from tests.helpers.corpus import make_corpus

TEXTS = ["The first document.\nIt has two lines.", "A second one, {with braces}.", "Third: \"quoted\"."]


def jsonl(texts, key="text") -> bytes:
    return "".join(json.dumps({"id": i, key: text}) + "\n" for i, text in enumerate(texts)).encode()


def write(path: Path, data: bytes) -> Path:
    if path.suffix == ".gz":
        data = gzip.compress(data)
    elif path.suffix == ".zst":
        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)
    return path


def read_all(tmp_path: Path, names, multiple_docs_in_single_file=False, **options):
    """(documents' texts, skips) of the files ``names`` as the generator reads them."""
    metadata = tmp_path / "m.txt"
    metadata.write_text("\n".join(names) + "\n")
    entries = read_metadata([str(metadata)], str(tmp_path))
    corpus = plan_corpus(entries, lambda label, position: TRAIN_CODE,
                         multiple_docs_in_single_file=multiple_docs_in_single_file, **options)
    skips = []
    sources = [source for piece in corpus.slices for source in piece.sources]
    texts = [document.text for document in read_documents(sources, None, multiple_docs_in_single_file, skips)]
    return texts, skips


@pytest.mark.parametrize("name", ["a.jsonl", "a.json", "a.ndjson", "a.JSONL", "a.jsonl.gz", "a.json.zst"])
def test_a_file_named_json_lines_is_read_as_json_lines_without_any_option(tmp_path, name):
    write(tmp_path / name, jsonl(TEXTS))
    texts, skips = read_all(tmp_path, [name])
    assert texts == TEXTS and not skips


def test_text_field_names_the_key_and_reads_every_other_file_as_json_lines(tmp_path):
    write(tmp_path / "a.jsonl", jsonl(TEXTS, key="body"))
    write(tmp_path / "b.txt", jsonl(TEXTS[:1], key="body"))  # JSON Lines whatever its name, once asked
    texts, skips = read_all(tmp_path, ["a.jsonl", "b.txt"], text_field="body")
    assert texts == TEXTS + TEXTS[:1] and not skips
    # Without it, the key is "text": lines without it are skipped and counted, never read raw.
    texts, skips = read_all(tmp_path, ["a.jsonl"])
    assert texts == [] and [skip.reason for skip in skips] == [MISSING_KEY] * 3
    # ... and a .txt file stays text.
    texts, _ = read_all(tmp_path, ["b.txt"])
    assert texts == [jsonl(TEXTS[:1], key="body").decode()]


def test_json_lines_by_name_beside_multi_document_text_files(tmp_path):
    write(tmp_path / "a.jsonl", jsonl(TEXTS))
    write(tmp_path / "b.txt", b"one\n\ntwo\n")
    texts, skips = read_all(tmp_path, ["a.jsonl", "b.txt"], multiple_docs_in_single_file=True)
    assert texts == TEXTS + ["one\n", "two\n"] and not skips


@pytest.mark.parametrize("spelling", ["--text_field", "--text_column", "--jsonl_text_key"])
def test_one_option_three_spellings(spelling):
    args = build_parser().parse_args(["--vocab_file", "v", spelling, "body"])
    assert args.text_field == "body"


def test_the_former_library_name_is_accepted():
    assert GeneratorConfig(jsonl_text_key="body").text_field == "body"
    assert GeneratorConfig(text_field="body", jsonl_text_key="body").text_field == "body"
    with pytest.raises(ConfigError, match="text_field 'a' and its former name jsonl_text_key 'b' disagree"):
        GeneratorConfig(text_field="a", jsonl_text_key="b")
    with pytest.raises(ConfigError, match="--text_field must be a non-empty"):
        GeneratorConfig(metadata_files=["m"], vocab_file="v", text_field="").validate()


def test_a_jsonl_corpus_gives_the_shards_of_its_text_files(tmp_path):
    """End to end through the command line: the .jsonl.gz of a corpus, with no option, gives the
    shards of the corpus as text files (one document a file)."""
    corpus = make_corpus(tmp_path / "corpus", n_docs=8, min_sentences=6, max_sentences=12)
    texts = [(corpus.root / label).read_text(encoding="utf-8") for label in corpus.documents]
    write(corpus.root / "all.jsonl.gz", jsonl(texts))
    (corpus.root / "jsonl.txt").write_text("all.jsonl.gz\n")
    common = ["--input_files_prefix", str(corpus.root), "--vocab_file", str(corpus.vocab), "--do_lower_case",
              "--max_seq_length", "48", "--max_predictions_per_seq", "6", "--dupe_factor", "1", "--quiet",
              "--num_output_files", "1", "--num_workers", "1"]
    assert main(["--metadata_files", str(corpus.metadata), "--output_dir", str(tmp_path / "a")] + common) == 0
    assert main(["--metadata_files", str(corpus.root / "jsonl.txt"), "--output_dir", str(tmp_path / "b")]
                + common) == 0
    shards = [(tmp_path / out / "examples-1.tfrecords").read_bytes() for out in ("a", "b")]
    assert shards[0] == shards[1] and Manifest.read(str(tmp_path / "b")).n_docs == 8
    assert Manifest.read(str(tmp_path / "b")).options["text_field"] is None


HOSTILE_LINES = [
    '{"text": "plain"}', "", "   ", "\t\v\f\r", "\u00a0", '{"text": "nbsp \u00a0 inside"}', '\ufeff{"text": "bom"}',
    '{"text": "crlf"}\r', "not json", "[1, 2]", '{"other": "x"}', '{"text": 3}', '{"text": "nul \\u0000"}',
    '{"text": "lone \\ud800 surrogate"}', '{"text": "pair \\ud83d\\ude00"}', '{"text": "escaped \\\\ud800"}',
    '{"text": "   "}', '{"text": "caf\u00e9 \u4e2d\u6587 \U0001f600"}', '1, [2', '3]', '{"text": "dup", "text": "last"}',
    '{"text": "NaN", "n": NaN}', '{"text": "replacement \ufffd kept"}', '{"text": "last line, no break"}',
    # Lines of the common shape and lines that only look like it (the scanner's fast path).
    ' {"text": "space before"}', '{"text": "space after"} ', '{"text": "a"} x', '{"text": "a"}{"text": "b"}',
    '{"text": "a"}, {"text": "b"}', '{"c": "}', '{"}', '{"text": {"a": 1}}', '{"text": null}', '{}', "true",
    '"string"', '{"text": "x", "meta": {"k": [1, 2, {"z": null}]}}', '{"te\\u0078t": "escaped key"}',
    '{"text": "esc \\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\u4e2d"}', '{"text": "one sentence"}',
    '{"text": "two\\nsentences"}', '{"text": "\\n\\n  \\n"}', '{"text": "\\u0085"}', '{"text": "\u2028 sep"}',
    '{"text": "a", "text": 3}', '{"text": 3, "text": "b"}', '{"text": "long ' + "word " * 20_000 + '"}',
    '{"a":' * 3000 + "1" + "}" * 3000, '{"text": "bad \\x escape"}', '{"text": "unterminated}',
    '{"text": "lone low \\udc00"}', '{"text": "caf\u00e9 \\ud800"}', '{"text": "\u00e9\\n\u4e2d"}',
]


@pytest.mark.parametrize("trailing_break", [True, False])
def test_json_lines_decoded_at_once_are_the_lines_decoded_one_by_one(tmp_path, monkeypatch, trailing_break):
    """The fast path for a valid UTF-8 range (decoded once, split at line breaks) gives exactly the
    documents and skips of the line-by-line reader: labels, positions, text, replacements."""
    import random

    from bert_data.pipeline.documents import text_files
    from bert_data.pipeline.documents.types import Source

    rng = random.Random(5)
    lines = [rng.choice(HOSTILE_LINES) for _ in range(400)] + HOSTILE_LINES
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(("\n".join(lines) + ("\n" if trailing_break else "")).encode("utf-8", "surrogatepass"))
    source = Source(str(path), "hostile.jsonl", 0, path.stat().st_size, first_doc=7, text_field="text", corpus_doc=100)

    def read():
        skips = []
        documents = [(d.label, d.text, d.n_replaced, d.corpus_doc) for d in text_files.text_documents(source, None, skips)]
        return documents, [(s.reason, s.label, s.corpus_doc, s.in_parts) for s in skips]

    monkeypatch.setattr(text_files, "_fast_loads", None)  # the json module's readers (orjson's: test_json_lines.py)
    referred = []  # the lines the decoded-at-once reader leaves to the reference (``_json_value``)
    reference = text_files._json_value
    monkeypatch.setattr(text_files, "_json_value", lambda *args: referred.append(args[0]) or reference(*args))
    fast = read()
    left = list(referred)
    monkeypatch.setattr(text_files, "_utf8_lines", lambda data: None)  # the line-by-line reader
    assert fast == read()
    assert len(fast[0]) > 100 and len(fast[1]) > 50
    # The scanner's path took the lines of the common shape, the reference all that are not.
    assert left and '{"text": "plain"}' not in left and '{"text": "a"} x' in left
