"""bert_data.generator.vocab_builder: WordPiece vocabulary training and the build-vocab command."""

from __future__ import annotations

from pathlib import Path

import pytest

from bert_data.tokenization import WordPieceTokenizer, load_vocab, unk_rate
from bert_data.generator.vocab_builder import (
    SPECIAL_TOKENS,
    build_vocab_main,
    read_metadata,
    train_wordpiece_vocab,
    write_vocab,
)

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "sample"
METADATA = SAMPLE / "metadata.txt"
# The exact arguments vocab/README.md documents for rebuilding vocab/vocab.txt.
README_ARGS = ["--metadata_files", "examples/sample/metadata.txt", "--input_files_prefix",
               "examples/sample", "--vocab_size", "4000", "--do_lower_case"]


@pytest.fixture(scope="module")
def sample_texts() -> list[str]:
    paths = read_metadata([METADATA], SAMPLE)
    return [p.read_text(encoding="utf-8") for p in paths]


@pytest.fixture(scope="module")
def trained(sample_texts) -> list[str]:
    return train_wordpiece_vocab(sample_texts, vocab_size=4000, do_lower_case=True)


def test_sample_corpus_shape(sample_texts):
    paths = read_metadata([METADATA], SAMPLE)
    assert 35 <= len(paths) <= 45 and all(p.is_file() for p in paths)
    total = sum(len(t.encode("utf-8")) for t in sample_texts)
    assert 100_000 <= total <= 150_000
    for text in sample_texts:
        paragraphs = [p for p in text.split("\n\n") if p.strip()]
        assert 3 <= len(paragraphs) <= 13
        assert any("\n" in p for p in paragraphs)  # line breaks inside paragraphs


def test_specials_first_and_loadable(trained, tmp_path):
    assert trained[:5] == SPECIAL_TOKENS == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
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
    assert cased[:5] == SPECIAL_TOKENS
    assert any(t != t.lower() for t in cased)
    assert "é" in cased  # accents are kept when not lower-casing
    small = train_wordpiece_vocab(sample_texts, vocab_size=300, do_lower_case=True)
    assert small[:5] == SPECIAL_TOKENS and len(small) <= 300
    with pytest.raises(ValueError):
        train_wordpiece_vocab(sample_texts, vocab_size=3)


def test_write_vocab_rejects_bad_tokens(tmp_path):
    with pytest.raises(ValueError, match="duplicate"):
        write_vocab(SPECIAL_TOKENS + ["a", "a"], tmp_path / "v.txt")
    with pytest.raises(ValueError, match="whitespace"):
        write_vocab(SPECIAL_TOKENS + [" a"], tmp_path / "v.txt")
    with pytest.raises(ValueError):
        write_vocab(SPECIAL_TOKENS + [""], tmp_path / "v.txt")


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
