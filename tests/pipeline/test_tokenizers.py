"""Tokenizers besides a WordPiece vocab.txt (bert_data.tokenizers): a Hugging Face tokenizer.json
and ALBERT's SentencePiece, each trained here on synthetic text (nothing downloaded), through
generation, verify, stats, inspect and load-time masking."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from bert_data import dynamic_masking, read_examples
from bert_data.cli.build_vocab import main as build_vocab_main
from bert_data.cli.create_tfrecords import main as create_main
from bert_data.format.manifest import Manifest
from bert_data.run.resolve import generate
from bert_data.tokenizers.vocab import VocabError, is_start_piece
from bert_data.tokenizers import (HUGGINGFACE, SENTENCEPIECE, WORDPIECE, TokenizerSource, detect_kind,
                                  load_vocabulary, make_tokenizer)
from bert_data.tools.inspect import format_record, inspect_records
from bert_data.tools.verify import verify

from tests.helpers.corpus import corpus_config, file_hashes, make_corpus
from tests.helpers.run_imports import modules_a_run_imports

spm = pytest.importorskip("sentencepiece")
REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ ALBERT's code, as Python 3 runs it

def albert_preprocess_text(inputs, remove_space=True, lower=False):
    outputs = inputs
    if remove_space:
        outputs = " ".join(inputs.strip().split())
    outputs = unicodedata.normalize("NFKD", outputs)
    outputs = "".join([c for c in outputs if not unicodedata.combining(c)])
    if lower:
        outputs = outputs.lower()
    return outputs


SPIECE_UNDERLINE = "▁".encode("utf-8")  # bytes, as in ALBERT's tokenization.py


def albert_encode_ids(sp_model, text):
    """ALBERT's encode_pieces + PieceToId, line for line (the str/bytes comparisons included)."""
    pieces = sp_model.EncodeAsPieces(text)
    new_pieces = []
    for piece in pieces:
        if len(piece) > 1 and piece[-1] == "," and piece[-2].isdigit():
            cur_pieces = sp_model.EncodeAsPieces(piece[:-1].encode("utf-8").replace(SPIECE_UNDERLINE, b""))
            if piece[0] != SPIECE_UNDERLINE and cur_pieces[0][0] == SPIECE_UNDERLINE:
                cur_pieces = cur_pieces[1:] if len(cur_pieces[0]) == 1 else [cur_pieces[0][1:]] + cur_pieces[1:]
            cur_pieces.append(piece[-1])
            new_pieces.extend(cur_pieces)
        else:
            new_pieces.append(piece)
    return [sp_model.PieceToId(p.decode("utf-8") if isinstance(p, bytes) else p) for p in new_pieces]


def albert_is_start_piece_sp(piece):
    special_pieces = set(list('!"#$%&\"()*+,-./:;?@[\\]^_`{|}~'))
    special_pieces.add(u"€".encode("utf-8"))
    special_pieces.add(u"£".encode("utf-8"))
    english_chars = set(list("abcdefghijklmnopqrstuvwxyz"))
    return (piece.startswith("▁") or piece.startswith("<") or piece in special_pieces
            or not all([str(i).lower() in english_chars.union(special_pieces) for i in piece]))


# ------------------------------------------------------------------ fixtures

WORDS = ["the", "cat", "Sat", "ON", "mat", "Café", "naïve", "résumé", "1,990,", "2,021", "37,", "x1,", "(ok)",
         "well-known", "a.b", "£5", "€3,", "don't", "Ünïcödé", "ﬁne", "  spaced\tout "]


def synthetic_lines(n: int, seed: int) -> list:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for _ in range(n)]


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    """A small model trained here, with ALBERT's special pieces, and its .vocab."""
    directory = tmp_path_factory.mktemp("spm")
    spm.SentencePieceTrainer.train(sentence_iterator=iter(synthetic_lines(3000, 1)),
                                   model_prefix=str(directory / "m"), vocab_size=60, pad_id=0, unk_id=1, bos_id=-1,
                                   eos_id=-1, control_symbols="[CLS],[SEP],[MASK]", num_threads=1, minloglevel=2)
    return directory / "m.model"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("tok_corpus"), n_docs=16, min_sentences=6, max_sentences=20)


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    """A byte-level BPE tokenizer.json and an ALBERT-style SentencePiece model, by build-vocab."""
    directory = tmp_path_factory.mktemp("trained")
    common = ["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root), "--do_lower_case"]
    assert build_vocab_main(common + ["--model", "bpe", "--vocab_size", "500", "--out", str(directory / "bpe.json")]) == 0
    assert build_vocab_main(common + ["--model", "sentencepiece", "--vocab_size", "400",
                                      "--out", str(directory / "spm" / "m.model")]) == 0
    return {"bpe": directory / "bpe.json", "spm": directory / "spm" / "m.model"}


# ------------------------------------------------------------------ SentencePiece

@pytest.mark.parametrize("lower", [True, False])
def test_sentencepiece_ids_equal_albert_and_the_library(spm_model, lower):
    processor = spm.SentencePieceProcessor(model_file=str(spm_model))
    texts = synthetic_lines(400, 2) + ["", "   ", "1,990, 2,0,", "Ⅻ ½ ﬃ", "a,b,c 9,"]
    ours = make_tokenizer(TokenizerSource(SENTENCEPIECE, str(spm_model), do_lower_case=lower))
    got = ours.encode_ids(texts)
    expected = [albert_encode_ids(processor, albert_preprocess_text(t, lower=lower)) for t in texts]
    assert got == expected
    # Where ALBERT's digit-and-comma rule does not apply, these are the library's own ids.
    plain = [i for i, t in enumerate(texts) if not any(
        len(p) > 1 and p[-1] == "," and p[-2].isdigit()
        for p in processor.EncodeAsPieces(albert_preprocess_text(t, lower=lower)))]
    assert len(plain) > 100
    assert all(got[i] == processor.EncodeAsIds(albert_preprocess_text(texts[i], lower=lower)) for i in plain)
    assert sum(got[i] != processor.EncodeAsIds(albert_preprocess_text(texts[i], lower=lower))
               for i in range(len(texts))) > 10  # the rule did apply somewhere
    # tokenize gives the pieces of those ids; a one-text call gives what the batch gives.
    assert [ours.convert_tokens_to_ids(ours.tokenize(t)) for t in texts[:50]] == got[:50]
    assert ours.encode_one(texts[3]) == got[3]


def test_sentencepiece_vocab_file_gives_the_same_ids(spm_model):
    plain = make_tokenizer(TokenizerSource(SENTENCEPIECE, str(spm_model), do_lower_case=True))
    with_file = make_tokenizer(TokenizerSource(SENTENCEPIECE, str(spm_model), str(spm_model.with_suffix(".vocab")),
                                               do_lower_case=True))
    texts = synthetic_lines(50, 3)
    assert with_file.encode_ids(texts) == plain.encode_ids(texts)
    assert with_file.vocab.tokens == plain.vocab.tokens and with_file.vocab.sha256 != plain.vocab.sha256
    # Another kind of vocabulary given with the model is refused, naming both.
    other = spm_model.with_name("bert_vocab.txt")
    other.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "##s"]) + "\n")
    with pytest.raises(VocabError, match=r"bert_vocab\.txt: holds only \d+ of the 60 pieces of .*m\.model"):
        load_vocabulary(TokenizerSource(SENTENCEPIECE, str(spm_model), str(other)))


def test_sentencepiece_vocabulary(spm_model):
    vocab = load_vocabulary(TokenizerSource(SENTENCEPIECE, str(spm_model)))
    assert vocab.special_tokens == ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")
    assert (vocab.pad_id, vocab.unk_id, vocab.cls_id, vocab.sep_id, vocab.mask_id) == (0, 1, 2, 3, 4)
    # ALBERT's word-start rule decides whole words, piece by piece.
    assert [not c for c in vocab.is_continuation] == [albert_is_start_piece_sp(t) for t in vocab.tokens]
    assert any(vocab.is_continuation) and not all(vocab.is_continuation)
    assert not set(vocab.ordinary_ids.tolist()) & {0, 1, 2, 3, 4}
    assert all(is_start_piece(p) == albert_is_start_piece_sp(p) for p in ["▁a", "ab", "9", "<x>", ",", "..", "'s",
                                                                          "é", "€", "[", "Ab"])


def test_sentencepiece_without_the_special_pieces_is_refused(tmp_path):
    spm.SentencePieceTrainer.train(sentence_iterator=iter(synthetic_lines(500, 4)), model_prefix=str(tmp_path / "p"),
                                   vocab_size=60, minloglevel=2, num_threads=1)
    with pytest.raises(VocabError, match=r"p\.model: the cls token \[CLS\] is not a piece of the vocabulary"):
        load_vocabulary(TokenizerSource(SENTENCEPIECE, str(tmp_path / "p.model")))
    vocab = load_vocabulary(TokenizerSource(SENTENCEPIECE, str(tmp_path / "p.model"),
                                            special_tokens=(None, None, "<s>", "</s>", "<unk>")))
    assert vocab.pad_id is None and vocab.cls_id == 1
    (tmp_path / "bad.model").write_bytes(b"\x0a\x05junk")
    with pytest.raises(VocabError, match="bad.model: not a SentencePiece model"):
        load_vocabulary(TokenizerSource(SENTENCEPIECE, str(tmp_path / "bad.model")))


# ------------------------------------------------------------------ tokenizer.json

def test_tokenizer_json_run_equals_the_vocab_txt_run(corpus, tmp_path):
    from tokenizers import BertWordPieceTokenizer

    tokenizer_file = tmp_path / "tokenizer.json"
    BertWordPieceTokenizer(str(corpus.vocab), lowercase=True).save(str(tokenizer_file))
    assert detect_kind(str(tokenizer_file)) == HUGGINGFACE and detect_kind(str(corpus.vocab)) == WORDPIECE
    options = dict(mask_whole_word=True, max_seq_length=48, dupe_factor=2, split_num=6)
    generate(corpus_config(corpus, tmp_path / "txt", **options), progress=False)
    generate(corpus_config(corpus, tmp_path / "json", vocab_file=None, do_lower_case=False,
                           tokenizer_file=str(tokenizer_file), **options), progress=False)
    assert file_hashes(tmp_path / "txt") == file_hashes(tmp_path / "json")
    # Text that spells a special token is text, as with Google's tokenizer.
    tokenizer = make_tokenizer(TokenizerSource(HUGGINGFACE, str(tokenizer_file)))
    reference = make_tokenizer(TokenizerSource(WORDPIECE, str(corpus.vocab), do_lower_case=True))
    assert tokenizer.encode_ids(["a [MASK] b [CLS]"]) == reference.encode_ids(["a [MASK] b [CLS]"])


def test_tokenizer_json_special_tokens(tmp_path, trained):
    vocab = load_vocabulary(TokenizerSource(HUGGINGFACE, str(trained["bpe"])))
    assert vocab.special_tokens == ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
    assert vocab.word_boundary == "start:Ġ"
    assert not set(vocab.ordinary_ids.tolist()) & {0, 1, 2, 3, 4}
    with pytest.raises(VocabError, match=r"bpe\.json: the mask token <mask> \(--mask_token\) is not in the tokenizer"):
        load_vocabulary(TokenizerSource(HUGGINGFACE, str(trained["bpe"]), special_tokens=(None,) * 4 + ("<mask>",)))
    # A RoBERTa-style tokenizer: its own <s> </s> from the post-processor, <mask> among its specials.
    data = json.loads(trained["bpe"].read_text())
    renames = {"[CLS]": "<s>", "[SEP]": "</s>", "[MASK]": "<mask>", "[PAD]": "<pad>", "[UNK]": "<unk>"}
    for entry in data["added_tokens"]:
        entry["content"] = renames[entry["content"]]
    vocab_map = data["model"]["vocab"]
    for old, new in renames.items():
        vocab_map[new] = vocab_map.pop(old)
    processor = data["post_processor"]
    processor["single"] = [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                           {"SpecialToken": {"id": "</s>", "type_id": 0}}]
    processor["special_tokens"] = {"<s>": {"id": "<s>", "ids": [2], "tokens": ["<s>"]},
                                   "</s>": {"id": "</s>", "ids": [3], "tokens": ["</s>"]}}
    processor["pair"] = processor["single"]
    (tmp_path / "roberta.json").write_text(json.dumps(data))
    roberta = load_vocabulary(TokenizerSource(HUGGINGFACE, str(tmp_path / "roberta.json")))
    assert roberta.special_tokens == (None, None, "<s>", "</s>", "<mask>")
    (tmp_path / "broken.json").write_text("{\"model\": 3}")
    with pytest.raises(VocabError, match=r"broken\.json: not a Hugging Face tokenizer\.json"):
        load_vocabulary(TokenizerSource(HUGGINGFACE, str(tmp_path / "broken.json")))


def test_bpe_without_word_marks_stores_word_starts_for_whole_word_masking(corpus, tmp_path, capsys):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE(unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.train_from_iterator(synthetic_lines(300, 5), trainer=trainers.BpeTrainer(
        vocab_size=80, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False))
    tk.save(str(tmp_path / "plain.json"))
    argv = ["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root), "--tokenizer_file",
            str(tmp_path / "plain.json"), "--output_dir", str(tmp_path / "out"), "--quiet"]
    # The pieces show no word start: the run stores the tokenizer's own (tests/load/test_stored_word_starts.py).
    assert create_main(argv + ["--mask_whole_word"]) == 0
    manifest = Manifest.read(str(tmp_path / "out"))
    assert manifest.option("store_word_starts") is True and manifest.specs[-1].name == "word_starts"
    assert create_main(argv + ["--do_lower_case"]) == 2
    assert "--do_lower_case does not apply to --tokenizer_file" in capsys.readouterr().err
    missing = ["--metadata_files", str(corpus.metadata), "--input_files_prefix", str(corpus.root), "--spm_model_file",
               str(tmp_path / "gone.model"), "--output_dir", str(tmp_path / "out2"), "--quiet"]
    assert create_main(missing) == 2
    assert capsys.readouterr().err == (f"create_tfrecords: error: {tmp_path / 'gone.model'}: SentencePiece model not "
                                       f"found (--spm_model_file)\n")


# ------------------------------------------------------------------ end to end, every tool

@pytest.mark.parametrize("kind", ["bpe", "spm"])
def test_trained_tokenizers_end_to_end(corpus, trained, tmp_path, kind):
    option = {"bpe": dict(tokenizer_file=str(trained["bpe"]), do_lower_case=False),
              "spm": dict(spm_model_file=str(trained["spm"]), do_lower_case=True)}[kind]
    common = dict(vocab_file=None, max_seq_length=48, dupe_factor=2, split_num=5, **option)
    one, two = tmp_path / "one", tmp_path / "two"
    generate(corpus_config(corpus, one, mask_whole_word=True, **common), progress=False)
    generate(corpus_config(corpus, two, mask_whole_word=True, num_workers=2, **common), progress=False)
    assert file_hashes(one) == file_hashes(two) and len(file_hashes(one)) == 3
    report = verify([str(one)])
    assert report.ok, report.problems
    records = list(inspect_records(str(one), n=3))
    marker = "Ġ" if kind == "bpe" else "▁"
    assert any(token.startswith(marker) for record in records for token in record.tokens)
    assert "[CLS]" in format_record(records[0])
    # Whole words: a masked piece that continues a word has its word start masked too.
    vocab = load_vocabulary(TokenizerSource.from_manifest(Manifest.read(str(one)), str(one))[0])
    continued = 0
    for record in read_examples(str(one)):
        k = int(record["masked_lm_weights"].sum())
        positions = set(record["masked_lm_positions"][:k].tolist())
        restored = record["input_ids"].copy()
        restored[record["masked_lm_positions"][:k]] = record["masked_lm_ids"][:k]
        for p in positions:
            if vocab.is_continuation[restored[p]] and restored[p - 1] not in (vocab.cls_id, vocab.sep_id):
                assert p - 1 in positions
                continued += 1
    assert continued > 20
    # Unmasked MLM-only data, masks drawn at load time from the manifest's tokenizer.
    unmasked = tmp_path / "unmasked"
    generate(corpus_config(corpus, unmasked, mlm_only=True, disable_masking=True, dupe_factor=1,
                           **{k: v for k, v in common.items() if k != "dupe_factor"}), progress=False)
    masker = dynamic_masking(dataset=str(unmasked), seed=3, whole_word=True)
    assert masker.vocab.sha256 == vocab.sha256
    batch = next(iter(read_examples(str(unmasked), mask=masker)))
    assert 0 < batch["masked_lm_weights"].sum() <= 10
    assert verify([str(unmasked)]).ok


def test_resume_with_a_sentencepiece_model(corpus, trained, tmp_path, monkeypatch):
    """An interrupted run resumes to the bytes of an uninterrupted one (the model's hash is in the
    run's fingerprint, with the options)."""
    from bert_data.run import runner

    def config(output, **extra):
        return corpus_config(corpus, output, vocab_file=None, spm_model_file=str(trained["spm"]), do_lower_case=True,
                             max_seq_length=48, dupe_factor=1, split_num=4, **extra)

    generate(config(tmp_path / "reference"), progress=False)
    journaled = []

    def interrupt_after_two_units(*args, **kwargs):
        original(*args, **kwargs)
        journaled.append(1)
        if len(journaled) == 2:
            raise KeyboardInterrupt

    original = runner.write_journal
    monkeypatch.setattr(runner, "write_journal", interrupt_after_two_units)
    with pytest.raises(KeyboardInterrupt):
        generate(config(tmp_path / "out"), progress=False)
    monkeypatch.undo()
    assert not file_hashes(tmp_path / "out")
    generate(config(tmp_path / "out", resume=True), progress=False)
    assert file_hashes(tmp_path / "out") == file_hashes(tmp_path / "reference")


def test_generation_imports_sentencepiece_only_for_a_model(corpus, tmp_path):
    assert modules_a_run_imports(corpus, tmp_path, ["sentencepiece", "tensorflow"], "--num_workers", "1") == []


def test_build_vocab_is_deterministic_across_processes(corpus, tmp_path):
    script = (
        "import sys\n"
        "from bert_data.cli.build_vocab import main\n"
        "out = sys.argv[1]\n"
        f"common = ['--metadata_files', {str(corpus.metadata)!r}, '--input_files_prefix', {str(corpus.root)!r}, "
        "'--vocab_size', '300']\n"
        "for model, name in (('bpe', 'b.json'), ('unigram', 'u.json'), ('wordpiece', 'w.json'), "
        "('sentencepiece', 'm.model')):\n"
        "    assert main(common + ['--model', model, '--out', name]) == 0\n"
    )
    for run in ("a", "b"):
        (tmp_path / run).mkdir()
        result = subprocess.run([sys.executable, "-c", script, run], capture_output=True, text=True,
                                cwd=tmp_path / run, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert result.returncode == 0, result.stderr
    for name in ("b.json", "u.json", "w.json", "m.model", "m.vocab"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    # Each is a tokenizer create_tfrecords takes.
    for name, kind in (("b.json", HUGGINGFACE), ("u.json", HUGGINGFACE), ("w.json", HUGGINGFACE),
                       ("m.model", SENTENCEPIECE)):
        assert detect_kind(str(tmp_path / "a" / name)) == kind
        tokenizer = make_tokenizer(TokenizerSource(kind, str(tmp_path / "a" / name)))
        assert tokenizer.vocab.word_boundary and len(tokenizer.encode_ids(["Some text."])[0]) >= 2
        ids = np.asarray(tokenizer.encode_ids(synthetic_lines(20, 6)[:5])[0])
        assert (ids >= 0).all() and (ids < tokenizer.vocab.size).all()
