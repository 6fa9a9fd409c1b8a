"""Text read as the user meant it (issue 33): bytes that are not UTF-8 are reported on the console
on every run; ``--input_encoding NAME`` and ``auto`` read latin-1, cp1252, UTF-16... as the same
text a UTF-8 copy holds (the same shards, byte for byte); UTF-16/UTF-32 files with a byte-order
mark, and compressed files whatever their name, are read as text instead of skipped as binary."""

from __future__ import annotations

import bz2
import codecs
import gzip
import importlib.util
import json
import lzma
import random
from pathlib import Path

import pytest
import zstandard

from bert_data.config import ConfigError, GeneratorConfig
from bert_data.pipeline.documents.files import how_to_read
from bert_data.pipeline.documents.types import decode_text
from bert_data.run.planning import make_plan
from bert_data.run.resolve import generate, resolve

from tests.helpers.cli_runs import run_cli
from tests.helpers.corpus import file_hashes

REPO = Path(__file__).resolve().parents[2]
VOCAB = REPO / "vocab" / "vocab.txt"
WORDS = ("le café de la société générale à genève reçoit l’élève et son père pendant l’été où "
         "les enfants jouent près du lac avec leurs amis").split()


def french_documents(n_docs: int = 12, seed: int = 0):
    """Documents of accented words and curly quotes (cp1252 has them, latin-1 not the quotes)."""
    rng = random.Random(seed)
    documents = []
    for _ in range(n_docs):
        sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))).capitalize() + "."
                     for _ in range(rng.randint(6, 12))]
        documents.append("“" + "\n".join(sentences) + "”\n")
    return documents


def write_corpus(root: Path, documents, encode, name="doc{:02d}.txt", compress=None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    labels = []
    for index, text in enumerate(documents):
        data = encode(text)
        (root / name.format(index)).write_bytes(compress(data) if compress else data)
        labels.append(name.format(index))
    (root / "metadata.txt").write_text("\n".join(labels) + "\n", encoding="utf-8")
    return root


def run(root: Path, output: Path, **overrides):
    options = dict(metadata_files=[str(root / "metadata.txt")], input_files_prefix=str(root), vocab_file=str(VOCAB),
                   do_lower_case=True, max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1,
                   num_output_files=2, output_dir=str(output), num_workers=1, split_num=5)
    options.update(overrides)
    summary = generate(GeneratorConfig(**options), progress=False)
    return summary.manifests["train"], file_hashes(output)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The documents in UTF-8, and their shards."""
    root = write_corpus(tmp_path_factory.mktemp("utf8"), french_documents(), lambda text: text.encode("utf-8"))
    manifest, hashes = run(root, tmp_path_factory.mktemp("out") / "o")
    assert manifest["n_examples"] > 20 and manifest["invalid_utf8_replaced"] == 0
    return hashes


def latin1(text: str) -> bytes:
    return text.replace("“", '"').replace("”", '"').replace("’", "'").encode("latin-1")


@pytest.mark.parametrize("encoding, encode", [
    ("cp1252", lambda text: text.encode("cp1252")),  # curly quotes and all
    ("utf-16", lambda text: text.encode("utf-16")),  # not ASCII's superset: read transcoded
    ("utf-16-le", lambda text: text.encode("utf-16-le")),  # no byte-order mark: only when named
    ("utf-8", lambda text: text.encode("utf-8")),
])
def test_input_encoding_reads_the_text_a_utf8_copy_holds(reference, tmp_path, encoding, encode):
    root = write_corpus(tmp_path / "in", french_documents(), encode)
    manifest, hashes = run(root, tmp_path / "out", input_encoding=encoding)
    assert hashes == reference
    assert manifest["invalid_utf8_replaced"] == 0
    assert manifest["input_encoding"] == codecs.lookup(encoding).name


def test_latin1_reads_cafe_and_societe_and_records_its_encoding(tmp_path):
    documents = [text.replace("“", '"').replace("”", '"').replace("’", "'") for text in french_documents()]
    expected = run(write_corpus(tmp_path / "utf8", documents, lambda t: t.encode("utf-8")), tmp_path / "ref")[1]
    root = write_corpus(tmp_path / "in", documents, latin1)
    manifest, hashes = run(root, tmp_path / "out", input_encoding="latin-1")
    assert hashes == expected and manifest["invalid_utf8_replaced"] == 0
    assert manifest["input_encoding"] == "iso8859-1"  # one name a codec
    text, _, _ = decode_text(latin1("Le café de la Société"), "iso8859-1")
    assert text == "Le café de la Société"


@pytest.mark.skipif(importlib.util.find_spec("charset_normalizer") is None, reason="the encoding extra")
def test_auto_detects_each_file_and_keeps_utf8_files_on_the_fast_path(reference, tmp_path):
    documents = french_documents()
    encodings = ["utf-8", "cp1252", "utf-16", "utf-8"] * 3
    root = tmp_path / "in"
    root.mkdir()
    for index, (text, encoding) in enumerate(zip(documents, encodings)):
        (root / f"doc{index:02d}.txt").write_bytes(text.encode(encoding))
    (root / "metadata.txt").write_text("".join(f"doc{i:02d}.txt\n" for i in range(len(documents))))
    assert how_to_read(str(root / "doc00.txt"), "auto") == ("", "")  # UTF-8: decoded once, as UTF-8
    assert how_to_read(str(root / "doc02.txt"), "auto") == ("+utf-16", "")
    manifest, hashes = run(root, tmp_path / "out", input_encoding="auto")
    assert hashes == reference and manifest["invalid_utf8_replaced"] == 0


def test_utf16_and_utf32_with_a_byte_order_mark_are_text_by_default(reference, tmp_path):
    documents = french_documents()
    root = tmp_path / "in"
    root.mkdir()
    for index, text in enumerate(documents):
        data = (text.encode("utf-16"), text.encode("utf-32"), codecs.BOM_UTF16_BE + text.encode("utf-16-be"))
        (root / f"doc{index:02d}.txt").write_bytes(data[index % 3])
    (root / "metadata.txt").write_text("".join(f"doc{i:02d}.txt\n" for i in range(len(documents))))
    manifest, hashes = run(root, tmp_path / "out")
    assert hashes == reference and manifest["documents_skipped"]["count"] == 0


COMPRESS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress,
            "zst": lambda data: zstandard.ZstdCompressor().compress(data)}


@pytest.mark.parametrize("codec", sorted(COMPRESS))
def test_a_compressed_file_named_txt_is_read_decompressed(reference, tmp_path, codec):
    root = write_corpus(tmp_path / "in", french_documents(), lambda text: text.encode("utf-8"),
                        compress=COMPRESS[codec])
    manifest, hashes = run(root, tmp_path / "out")
    assert hashes == reference and manifest["documents_skipped"]["count"] == 0


def test_a_gzip_named_txt_of_many_documents_in_utf16(tmp_path):
    """Google's format, gzip-compressed UTF-16 under a .txt name: the records of the UTF-8 file."""
    text = "\n".join(french_documents())
    plain, packed = tmp_path / "plain.txt", tmp_path / "packed.txt"
    plain.write_bytes(text.encode("utf-8"))
    packed.write_bytes(gzip.compress(text.encode("utf-16")))
    outputs = []
    for path in (plain, packed):
        summary = generate(GeneratorConfig(input_files=[str(path)], vocab_file=str(VOCAB), do_lower_case=True,
                                           single_sentence_per_line=True, multiple_docs_in_single_file=True,
                                           max_seq_length=64, max_predictions_per_seq=10, dupe_factor=1,
                                           output_dir=str(tmp_path / path.stem), num_workers=1), progress=False)
        outputs.append((summary.manifests["train"]["n_docs"], file_hashes(tmp_path / path.stem)))
    assert outputs[0] == outputs[1] and outputs[0][0] > 1


def test_bytes_that_are_not_utf8_are_reported_on_the_console_on_every_run(capsys, tmp_path):
    root = tmp_path / "in"
    root.mkdir()
    (root / "clean.txt").write_text("Le cafe de la gare. Les enfants jouent.\n" * 5)
    (root / "l1.txt").write_bytes(b"Le lac est beau.\n" + b"Le caf\xe9 de la Soci\xe9t\xe9 \xe0 Gen\xe8ve.\n" * 30)
    argv = ["--input_files", root / "clean.txt", root / "l1.txt", "--vocab_file", VOCAB, "--do_lower_case",
            "--output_dir", tmp_path / "o", "--quiet", "--num_workers", "1", "--dupe_factor", "1"]
    for extra in ([], ["--overwrite"]):
        code, err = run_cli(capsys, *argv, *extra)
        assert code == 0, err
        warning = [line for line in err.splitlines() if "warning" in line]
        assert warning == [f"create_tfrecords: warning: 1 document holds 150 bytes that are not UTF-8, replaced by "
                           f"U+FFFD (the tokenizer drops it): text is lost; first in {root / 'l1.txt'} line 2; give the "
                           "input's encoding with --input_encoding (e.g. latin-1, cp1252) or --input_encoding auto"]
    manifest = json.loads((tmp_path / "o" / "data_params.json").read_text())
    assert manifest["invalid_utf8_replaced"] == 150
    code, err = run_cli(capsys, *argv, "--overwrite", "--input_encoding", "latin-1")
    assert code == 0 and "warning" not in err, err


def test_a_document_of_many_names_its_line(capsys, tmp_path):
    path = tmp_path / "google.txt"
    path.write_bytes(b"Le lac est beau.\n\nLes enfants jouent.\nLe caf\xe9 est beau.\n")
    code, err = run_cli(capsys, f"--input_file={path}", f"--output_file={tmp_path / 'x.tfrecord'}",
                        f"--vocab_file={VOCAB}")
    assert code == 0, err
    assert f"first in {path}#1, line 2 of that document;" in err


def test_googles_command_line_keeps_googles_records_with_the_warning(capsys, tmp_path):
    """Google's reader drops the bytes that are not UTF-8 (``decode("utf-8", "ignore")``); ours
    replaces them by U+FFFD, which BERT's normaliser drops: the same records, and now a warning."""
    dropped, kept = tmp_path / "dropped.txt", tmp_path / "kept.txt"
    line = b"Le caf\xe9 de la Soci\xe9t\xe9 \xe0 Gen\xe8ve, les enfants jouent.\n"
    kept.write_bytes(b"".join(line.replace(b"jouent", word) + (b"\n" if i % 4 == 3 else b"")
                              for i, word in enumerate([b"jouent", b"lac", b"beau", b"amis"] * 6)))
    dropped.write_bytes(kept.read_bytes().replace(b"\xe9", b"").replace(b"\xe0", b"").replace(b"\xe8", b""))
    hashes = []
    for path in (dropped, kept):
        code, err = run_cli(capsys, f"--input_file={path}", f"--output_file={tmp_path / (path.stem + '.tfrecord')}",
                            f"--vocab_file={VOCAB}", "--max_seq_length=64", "--max_predictions_per_seq=10")
        assert code == 0, err
        assert ("not UTF-8" in err) == (path == kept)
        hashes.append((tmp_path / (path.stem + ".tfrecord")).read_bytes())
    assert hashes[0] == hashes[1]


def test_input_encoding_is_in_the_resume_fingerprint(tmp_path):
    root = write_corpus(tmp_path / "in", french_documents(3), lambda text: text.encode("utf-8"))

    def fingerprint(encoding):
        config = GeneratorConfig(metadata_files=[str(root / "metadata.txt")], input_files_prefix=str(root),
                                 vocab_file=str(VOCAB), do_lower_case=True, output_dir=str(tmp_path / "o"),
                                 input_encoding=encoding)
        return make_plan(resolve(config), check_case=False).fingerprint

    assert fingerprint("utf-8") == fingerprint("utf8")
    assert fingerprint("utf-8") != fingerprint("latin-1")


@pytest.mark.parametrize("value", ["klingon", "base64", ""])
def test_a_bad_input_encoding_is_one_line(capsys, tmp_path, value):
    code, err = run_cli(capsys, "--input_files", VOCAB, "--vocab_file", VOCAB, "--input_encoding", value,
                        "--output_dir", tmp_path / "o")
    assert code == 2
    assert err.strip() == ("create_tfrecords: error: --input_encoding must be a text encoding Python knows (utf-8, "
                           "latin-1, cp1252, utf-16, shift_jis, ...) or auto, got " + repr(value))


def test_auto_without_charset_normalizer_names_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "charset_normalizer" else real(name, *a))
    with pytest.raises(ConfigError, match=r"--input_encoding auto needs charset-normalizer: pip install "
                                          r"'bert_data\[encoding\]'"):
        GeneratorConfig(input_files=["x"], vocab_file="v", input_encoding="auto").validate()


def test_utf16_without_a_byte_order_mark_is_skipped_with_the_option_that_reads_it(capsys, tmp_path):
    path = tmp_path / "u16.txt"
    path.write_bytes("\n".join(french_documents(1)).encode("utf-16-le"))
    (tmp_path / "a.txt").write_text("Le lac est beau. Les enfants jouent.\n")
    argv = ["--input_files", tmp_path / "a.txt", path, "--vocab_file", VOCAB, "--do_lower_case", "--quiet",
            "--num_workers", "1"]
    code, err = run_cli(capsys, *argv, "--output_dir", tmp_path / "o")
    assert code == 0 and (f"{path}: skipped: binary file (NUL bytes); if it is text, it may be UTF-16 or UTF-32 "
                          "without a byte-order mark: give its encoding with --input_encoding (e.g. utf-16-le)") in err
    code, err = run_cli(capsys, *argv, "--output_dir", tmp_path / "o2", "--input_encoding", "utf-16-le")
    assert code == 0 and "skipped" not in err and "1 document holds" in err  # a.txt is not UTF-16, and is said so
