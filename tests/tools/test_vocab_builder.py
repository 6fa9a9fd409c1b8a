"""bert_data.tokenizers.vocab_builder: WordPiece vocabulary training, and the build-vocab command
(bert_data.cli.build_vocab)."""

from __future__ import annotations

import bz2
import gzip
import json
from pathlib import Path

import pytest

from bert_data.cli.bert_data_cli import main as tools_main
from bert_data.cli.build_vocab import main as build_vocab_main
from bert_data.config import GeneratorConfig
from bert_data.run.resolve import generate
from bert_data.pipeline.documents.listing import read_metadata
from bert_data.pipeline.documents.reading import DocumentTexts
from bert_data.tokenizers.vocab_builder import train_wordpiece_vocab, write_vocab
from bert_data.tokenizers.vocab import SPECIAL_TOKENS, load_vocab, unk_rate
from bert_data.tokenizers.wordpiece import WordPieceTokenizer

from tests.helpers.corpus import make_corpus

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "sample"
METADATA = SAMPLE / "metadata.txt"
# The exact arguments vocab/README.md documents for rebuilding vocab/vocab.txt.
README_ARGS = ["--metadata_files", "examples/sample/metadata.txt", "--input_files_prefix",
               "examples/sample", "--vocab_size", "4000", "--do_lower_case"]


@pytest.fixture(scope="module")
def sample_texts() -> list[str]:
    return [Path(entry.path).read_text(encoding="utf-8") for entry in read_metadata([str(METADATA)], str(SAMPLE))]


@pytest.fixture(scope="module")
def trained(sample_texts) -> list[str]:
    return train_wordpiece_vocab(sample_texts, vocab_size=4000, do_lower_case=True)


def test_sample_corpus_shape(sample_texts):
    paths = [Path(entry.path) for entry in read_metadata([str(METADATA)], str(SAMPLE))]
    assert 35 <= len(paths) <= 45 and all(p.is_file() for p in paths)
    total = sum(len(t.encode("utf-8")) for t in sample_texts)
    assert 100_000 <= total <= 150_000
    for text in sample_texts:
        paragraphs = [p for p in text.split("\n\n") if p.strip()]
        assert 3 <= len(paragraphs) <= 13
        assert any("\n" in p for p in paragraphs)  # line breaks inside paragraphs


def test_specials_first_and_loadable(trained, tmp_path):
    assert trained[:5] == list(SPECIAL_TOKENS) == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert 3000 <= len(trained) <= 4000
    assert len(set(trained)) == len(trained)
    assert all(t == t.lower() for t in trained[5:])
    out = tmp_path / "vocab.txt"
    write_vocab(trained, out)
    v = load_vocab(out)
    assert v.tokens == tuple(trained)
    assert (v.pad_id, v.unk_id, v.cls_id, v.sep_id, v.mask_id) == (0, 1, 2, 3, 4)
    assert out.read_bytes().endswith(b"\n") and b"\r" not in out.read_bytes()


def test_low_unk_rate_on_sample_text(trained, sample_texts, tmp_path):
    out = tmp_path / "vocab.txt"
    write_vocab(trained, out)
    tok = WordPieceTokenizer(out, do_lower_case=True)
    lines = [line for t in sample_texts for line in t.split("\n") if line.strip()]
    ids = tok.encode_ids(lines)
    assert unk_rate(ids, tok.vocab) < 0.001
    # unseen but ordinary English still tokenizes into known pieces
    assert unk_rate(tok.encode_ids(["The quick brown fox jumps over the lazy dog."]), tok.vocab) == 0.0


def test_deterministic(sample_texts, trained, tmp_path):
    again = train_wordpiece_vocab(iter(sample_texts), vocab_size=4000, do_lower_case=True)
    assert again == trained  # a one-shot iterator gives the same result as a list
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    args = ["--metadata_files", str(METADATA), "--input_files_prefix", str(SAMPLE),
            "--vocab_size", "4000", "--do_lower_case", "--out"]
    assert build_vocab_main(args + [str(a)]) == 0
    assert build_vocab_main(args + [str(b)]) == 0
    assert a.read_bytes() == b.read_bytes()
    assert load_vocab(a).tokens == tuple(trained)


def test_project_vocab_is_reproducible(tmp_path, monkeypatch):
    """vocab/vocab.txt is exactly what the command in vocab/README.md produces."""
    monkeypatch.chdir(REPO)
    out = tmp_path / "vocab.txt"
    assert build_vocab_main(README_ARGS + ["--out", str(out)]) == 0
    assert out.read_bytes() == (REPO / "vocab" / "vocab.txt").read_bytes()
    readme = (REPO / "vocab" / "README.md").read_text(encoding="utf-8")
    assert " ".join(README_ARGS) in " ".join(readme.split())


def test_cased_and_small_vocab(sample_texts):
    cased = train_wordpiece_vocab(sample_texts, vocab_size=4000, do_lower_case=False)
    assert cased[:5] == list(SPECIAL_TOKENS)
    assert any(t != t.lower() for t in cased)
    assert "é" in cased  # accents are kept when not lower-casing
    small = train_wordpiece_vocab(sample_texts, vocab_size=300, do_lower_case=True)
    assert small[:5] == list(SPECIAL_TOKENS) and len(small) <= 300
    with pytest.raises(ValueError):
        train_wordpiece_vocab(sample_texts, vocab_size=3)


def test_write_vocab_rejects_bad_tokens(tmp_path):
    with pytest.raises(ValueError, match="duplicate"):
        write_vocab([*SPECIAL_TOKENS, "a", "a"], tmp_path / "v.txt")
    with pytest.raises(ValueError, match="whitespace"):
        write_vocab([*SPECIAL_TOKENS, " a"], tmp_path / "v.txt")
    with pytest.raises(ValueError):
        write_vocab([*SPECIAL_TOKENS, ""], tmp_path / "v.txt")


def test_build_vocab_main_metadata_handling(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("Alpha beta gamma.\nAlpha beta.\n" * 5, encoding="utf-8")
    (docs / "b.txt").write_text("Gamma delta, alpha!\n" * 5, encoding="utf-8")
    m1, m2 = tmp_path / "m1.txt", tmp_path / "m2.txt"
    m1.write_text("docs/a.txt\n\n", encoding="utf-8")
    m2.write_text("\ndocs/b.txt\n", encoding="utf-8")
    out = tmp_path / "out" / "vocab.txt"
    rc = build_vocab_main(["--metadata_files", f"{m1},{m2}", "--input_files_prefix", str(tmp_path),
                           "--vocab_size", "200", "--out", str(out)])
    assert rc == 0
    v = load_vocab(out)
    assert "Alpha" in v.token_to_id and "gamma" in v.token_to_id  # cased by default
    assert "2 documents" in capsys.readouterr().err
    m2.write_text("docs/missing.txt\n", encoding="utf-8")
    assert build_vocab_main(["--metadata_files", str(m1), str(m2), "--input_files_prefix",
                             str(tmp_path), "--out", str(out)]) == 2
    assert "missing.txt" in capsys.readouterr().err
    assert build_vocab_main(["--metadata_files", str(tmp_path / "nope.txt"), "--out", str(out)]) == 2


def test_build_vocab_reads_documents_as_create_tfrecords_does(tmp_path, capsys):
    """Compressed files, JSON Lines and many documents a file: the generator's reader, so the
    same texts give the same vocabulary however they are stored."""
    texts = [f"Alpha beta{i % 3} gamma{i % 5}, delta epsilon{i % 7}!\nZeta eta theta{i % 4}." for i in range(30)]
    plain, packed, lines = tmp_path / "plain", tmp_path / "packed", tmp_path / "lines"
    for directory in (plain, packed, lines):
        directory.mkdir()
    for i, text in enumerate(texts):
        (plain / f"d{i}.txt").write_text(text + "\n", encoding="utf-8")
    (plain / "m.txt").write_text("".join(f"d{i}.txt\n" for i in range(len(texts))), encoding="utf-8")
    half = len(texts) // 2
    with gzip.open(packed / "a.txt.gz", "wt", encoding="utf-8") as handle:  # one document a file
        handle.write(texts[0] + "\n")
    with bz2.open(packed / "b.txt.bz2", "wt", encoding="utf-8") as handle:  # many, [SEP]-separated
        handle.write("\n[SEP]\n".join(texts[1:]) + "\n")
    (packed / "m.txt").write_text("a.txt.gz\nb.txt.bz2\n", encoding="utf-8")
    records = [json.dumps({"id": i, "text": text}) for i, text in enumerate(texts)]
    with gzip.open(lines / "a.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(records[:half]) + "\n")
    (lines / "b.jsonl").write_text("\n".join(records[half:]) + "\nnot json\n", encoding="utf-8")
    (lines / "m.txt").write_text("a.jsonl.gz\nb.jsonl\n", encoding="utf-8")

    def build(directory, *options):
        out = directory / "vocab.txt"
        code = build_vocab_main(["--metadata_files", str(directory / "m.txt"), "--input_files_prefix",
                                 str(directory), "--vocab_size", "200", "--out", str(out), *options])
        assert code == 0
        return out.read_bytes(), capsys.readouterr().err

    expected, err = build(plain)
    assert "from 30 documents to" in err
    packed_vocab, err = build(packed, "--multiple_docs_in_single_file", "--multiple_docs_separator", "[SEP]")
    assert packed_vocab == expected and "from 30 documents to" in err
    lines_vocab, err = build(lines, "--jsonl_text_key", "text")
    assert lines_vocab == expected and "from 30 documents, 1 skipped: invalid JSON line to" in err
    assert "gamma" in load_vocab(lines / "vocab.txt").token_to_id


def test_build_vocab_input_options_are_checked(tmp_path, capsys):
    (tmp_path / "d.txt").write_text("text\n", encoding="utf-8")
    (tmp_path / "m.txt").write_text("d.txt\nmissing.txt\n", encoding="utf-8")
    args = ["--metadata_files", str(tmp_path / "m.txt"), "--input_files_prefix", str(tmp_path),
            "--out", str(tmp_path / "vocab.txt")]
    assert build_vocab_main(args + ["--jsonl_text_key", "text", "--multiple_docs_in_single_file"]) == 2
    assert "contradict each other" in capsys.readouterr().err
    assert build_vocab_main(args) == 2
    assert "m.txt:2: file not found" in capsys.readouterr().err
    assert build_vocab_main(args + ["--skip_missing", "--min_frequency", "1"]) == 0
    err = capsys.readouterr().err
    assert "warning: " in err and "skipped: file not found" in err and "from 1 documents" in err
    (tmp_path / "d.txt").write_text("  \n", encoding="utf-8")
    assert build_vocab_main(args + ["--skip_missing"]) == 2
    assert "no document with any text" in capsys.readouterr().err


def test_document_texts_can_be_read_again(tmp_path):
    (tmp_path / "d.txt.gz").write_bytes(gzip.compress(b"one\n\ntwo\n\n\x00binary\n"))
    (tmp_path / "m.txt").write_text("d.txt.gz\n", encoding="utf-8")
    texts = DocumentTexts([str(tmp_path / "m.txt")], str(tmp_path), multiple_docs_in_single_file=True)
    assert list(texts) == list(texts) == ["one\n", "two\n"]
    assert texts.n_docs == 2 and texts.skipped == {"binary file (NUL bytes)": 1}


def test_build_vocab_reads_input_files(tmp_path, capsys):
    corpus = make_corpus(tmp_path / "c", n_docs=4, min_sentences=5, max_sentences=8)
    code = build_vocab_main(["--input_files", str(corpus.root / "docs" / "*.txt"), "--vocab_size", "200",
                             "--min_frequency", "1", "--do_lower_case=true", "--quiet", "--out", str(tmp_path / "v.txt")])
    assert code == 0
    assert "from 4 documents" in capsys.readouterr().err
    assert (tmp_path / "v.txt").read_text().startswith("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n")


def test_build_vocab_then_generate_and_verify(tmp_path, capsys):
    corpus = make_corpus(tmp_path / "corpus", n_docs=8, seed=3)
    vocab_path = tmp_path / "vocab.txt"
    code = tools_main(["build-vocab", "--metadata_files", str(corpus.metadata), "--input_files_prefix",
                       str(corpus.root), "--vocab_size", "400", "--do_lower_case", "--out", str(vocab_path)])
    assert code == 0 and "build-vocab: wrote" in capsys.readouterr().err
    tokens = vocab_path.read_text(encoding="utf-8").split("\n")
    assert tokens[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    out = tmp_path / "out"
    generate(GeneratorConfig(metadata_files=[str(corpus.metadata)], input_files_prefix=str(corpus.root),
                             vocab_file=str(vocab_path), do_lower_case=True, max_seq_length=64,
                             max_predictions_per_seq=10, dupe_factor=1, output_dir=str(out), num_workers=1,
                             num_output_files=1), progress=False)
    assert tools_main(["verify", str(out)]) == 0, capsys.readouterr().out


def test_build_vocab_usage_error(tmp_path, capsys):
    assert tools_main(["build-vocab", "--out", str(tmp_path / "v.txt")]) == 2  # no documents named
    err = capsys.readouterr().err
    assert err.strip() == ("build-vocab: error: no documents: give --metadata_files (files listing them) or "
                           "--input_files (paths or globs)")


def test_unigram_settling_is_independent_of_the_trainers_hash_order():
    """Hugging Face's Unigram trainer gives the characters its pieces lack the scores
    min + k * 0.0001 in hash-map order, and the first of them ties with the lowest trained piece,
    which may be a single character too.  Every order the trainer can produce settles to one file
    (this tie made build-vocab differ between processes about one run in twelve)."""
    from tokenizers import Tokenizer
    from tokenizers.models import Unigram

    from bert_data.tokenizers.vocab_builder import _settled_unigram

    lowest = -8.6182544364
    trained = [("▁the", -2.5), ("he", -4.25), ("l", lowest)]  # "l": a trained character, lowest score
    added = ["B", "Z", "k", "q"]

    def trainer_output(order):
        pieces = [(token, 0.0) for token in SPECIAL_TOKENS] + trained
        pieces += [(char, lowest + k * 0.0001) for k, char in enumerate(order)]
        head, rest = pieces[:len(SPECIAL_TOKENS)], pieces[len(SPECIAL_TOKENS):]
        rest.sort(key=lambda entry: -entry[1])  # stable: ties in the given (hash) order
        return Tokenizer(Unigram(head + (rest[::-1] if order[0] == "q" else rest), unk_id=1))

    settled = {_settled_unigram(trainer_output(order)).to_str()
               for order in (added, added[::-1], ["k", "B", "q", "Z"], ["q", "k", "Z", "B"])}
    assert len(settled) == 1
    vocab = json.loads(settled.pop())["model"]["vocab"]
    assert [piece for piece, _ in vocab[:len(SPECIAL_TOKENS)]] == list(SPECIAL_TOKENS)
    scores = {piece: score for piece, score in vocab}
    assert {piece for piece, _ in vocab} == set(SPECIAL_TOKENS) | {"▁the", "he", "l", *added}
    assert scores["▁the"] == -2.5 and scores["he"] == -4.25
    # The five characters hold the five scores the trainer gave them, in character order.
    assert sorted(scores[c] for c in ["B", "Z", "k", "l", "q"]) == sorted(
        round(lowest + k * 0.0001, 10) for k in (0, 0, 1, 2, 3))


def test_build_vocab_reads_input_encoding_and_warns_of_bytes_not_utf8(capsys, tmp_path):
    from bert_data.cli.build_vocab import main as build_vocab_main

    text = tmp_path / "l1.txt"
    text.write_bytes(b"Le caf\xe9 de la Soci\xe9t\xe9 \xe0 Gen\xe8ve.\n" * 30)
    argv = ["--input_files", str(text), "--vocab_size", "200", "--min_frequency", "1", "--do_lower_case", "--quiet"]
    assert build_vocab_main(argv + ["--out", str(tmp_path / "utf8.txt")]) == 0
    assert "build-vocab: warning: 1 document holds 150 bytes that are not UTF-8" in capsys.readouterr().err
    assert build_vocab_main(argv + ["--out", str(tmp_path / "latin1.txt"), "--input_encoding", "latin-1"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert {"cafe", "societe"} <= set((tmp_path / "latin1.txt").read_text().split())
