"""The native WordPiece (nanotoken) gives exactly the ids of the reference paths: Google's
FullTokenizer (tests/helpers/reference_tokenizer.py) for a vocab.txt, Hugging Face ``tokenizers``
for a tokenizer.json, on hostile text made here (tests/helpers/hostile_text.py), with the
project's vocabulary and a small one built here, lower-casing on and off.  Its guard (a probe at
construction) and its absence (Hugging Face runs, with a note) are checked too.

The whole shared corpus and every code point: ``python scripts/check_native_tokenizer.py``.
"""

from __future__ import annotations

import json
import pickle
from collections import Counter
from pathlib import Path

import pytest

from bert_data.tokenizers import TokenizerSource, make_tokenizer, native
from bert_data.tokenizers.vocab import SPECIAL_TOKENS, load_vocab, vocab_from_tokens
from bert_data.tokenizers.wordpiece import WordPieceTokenizer

from tests.helpers.hostile_text import hostile_texts
from tests.helpers.reference_tokenizer import ReferenceTokenizer, basic_tokenize

REPO = Path(__file__).resolve().parents[2]
PROJECT_VOCAB = REPO / "vocab" / "vocab.txt"
TEXTS = hostile_texts(160, seed=27, huge=False)


def small_vocabulary():
    """300 words of the hostile text and every character seen, alone and as a ``##`` piece:
    many words split into pieces, some [UNK]."""
    words = Counter(word for text in TEXTS[:120] for word in basic_tokenize(text, True))
    chars = sorted({ch for word in words for ch in word})
    tokens = list(SPECIAL_TOKENS) + [w for w, _ in words.most_common(300) if len(w) > 1] + chars
    tokens += ["##" + ch for ch in chars] + ["##ing", "##ed", "##s", "##tion"]
    return vocab_from_tokens(list(dict.fromkeys(tokens)), "small")


VOCABULARIES = {"project": lambda: load_vocab(PROJECT_VOCAB), "small": small_vocabulary}


def reference_ids(tokenizer: WordPieceTokenizer, texts):
    ref = ReferenceTokenizer(tokenizer.vocab.tokens, do_lower_case=tokenizer.do_lower_case)
    return [ref.convert_tokens_to_ids(ref.tokenize(text)) for text in texts]


@pytest.mark.parametrize("lower", [True, False], ids=["lower", "cased"])
@pytest.mark.parametrize("which", sorted(VOCABULARIES))
def test_native_wordpiece_gives_googles_ids_on_hostile_text(which, lower):
    vocab = VOCABULARIES[which]()
    fast = WordPieceTokenizer(vocab, do_lower_case=lower)
    assert fast.is_native
    expected = reference_ids(fast, TEXTS)
    got = fast.encode_ids(TEXTS)
    wrong = [(text, ids, want) for text, ids, want in zip(TEXTS, got, expected) if ids != want]
    assert not wrong, f"{len(wrong)} of {len(TEXTS)} texts differ, first: {wrong[0]!r}"
    ids, lengths = fast.encode_flat(TEXTS)
    assert lengths.tolist() == [len(want) for want in expected]
    assert ids.tolist() == [i for want in expected for i in want]
    # The native tokenizer alone (no Google fallback) is Hugging Face's tokenizer, on every text.
    pure = WordPieceTokenizer(vocab, do_lower_case=lower, google_fallback=False)
    reference = WordPieceTokenizer(vocab, do_lower_case=lower, google_fallback=False, native=False)
    assert pure.is_native and not reference.is_native
    assert pure.encode_ids(TEXTS) == reference.encode_ids(TEXTS)


def test_fallback_texts_anywhere_in_a_batch_and_empty_batches():
    fast = WordPieceTokenizer(PROJECT_VOCAB, do_lower_case=True)
    google = ["ΟΔΟΣ", "abc\U0002b820def", "\ue000x"]  # final sigma, CJK Ext E, private use: Google's path
    plain = ["the cat sat", "", "naïve café", "[MASK] text"]
    for batch in (google + plain, plain + google, [plain[0], google[0], plain[2], google[1], google[2]], google,
                  plain):  # (the last: not ASCII, and none of Google's characters)
        ids, lengths = fast.encode_flat(batch)
        expected = reference_ids(fast, batch)
        assert lengths.tolist() == list(map(len, expected)), batch
        assert ids.tolist() == [i for row in expected for i in row], batch
        assert fast.encode_ids(batch) == expected
    for empty in ([], ()):
        ids, lengths = fast.encode_flat(empty)
        assert len(ids) == len(lengths) == 0 and fast.encode_ids(empty) == []


def _tokenizer_json(tmp_path, vocab_tokens, *, added=(), truncate=False):
    from tokenizers import AddedToken, Tokenizer
    from tokenizers.models import WordPiece
    from tokenizers.normalizers import BertNormalizer
    from tokenizers.pre_tokenizers import BertPreTokenizer
    from tokenizers.processors import BertProcessing

    ids = {token: i for i, token in enumerate(vocab_tokens)}
    tk = Tokenizer(WordPiece(vocab=ids, unk_token="[UNK]", max_input_chars_per_word=100))
    tk.normalizer = BertNormalizer(lowercase=True)
    tk.pre_tokenizer = BertPreTokenizer()
    tk.post_processor = BertProcessing(("[SEP]", ids["[SEP]"]), ("[CLS]", ids["[CLS]"]))
    tk.add_special_tokens(list(SPECIAL_TOKENS))
    tk.add_tokens([AddedToken(word, normalized=True) for word in added])
    if truncate:
        tk.enable_truncation(8)
        tk.enable_padding(length=16)
    path = tmp_path / "tokenizer.json"
    tk.save(str(path))
    return path


@pytest.mark.parametrize("shape", ["plain", "added_tokens", "truncation_in_file"])
def test_native_tokenizer_json_gives_hugging_faces_ids(tmp_path, shape):
    path = _tokenizer_json(tmp_path, load_vocab(PROJECT_VOCAB).tokens,
                           added=("new york", "xyzzy") if shape == "added_tokens" else (),
                           truncate=shape == "truncation_in_file")
    source = TokenizerSource("huggingface", str(path))
    fast, reference = make_tokenizer(source), make_tokenizer(source, native=False)
    assert fast.is_native and not reference.is_native
    texts = TEXTS + ["New York xyzzy [MASK] [SEP]"]
    expected = reference.encode_ids(texts)
    assert fast.encode_ids(texts) == expected
    ids, lengths = fast.encode_flat(texts)
    assert lengths.tolist() == list(map(len, expected)) and ids.tolist() == [i for row in expected for i in row]
    # [MASK] written in the text is text, as in Google's tokenizer
    assert fast.vocab.mask_id not in fast.encode_ids(["[MASK]"])[0]
    clone = pickle.loads(pickle.dumps(fast))
    assert clone.is_native and clone.encode_ids(texts[:50]) == expected[:50]


def test_a_tokenizer_json_nanotoken_does_not_run_stays_on_hugging_face(tmp_path):
    from bert_data.tokenizers.vocab_builder import train_hf_tokenizer, write_tokenizer

    path = tmp_path / "bpe.json"
    write_tokenizer(train_hf_tokenizer(TEXTS[:200], model="bpe", vocab_size=300), path)
    tokenizer = make_tokenizer(TokenizerSource("huggingface", str(path)))
    assert not tokenizer.is_native
    ids, lengths = tokenizer.encode_flat(TEXTS[:50])
    assert ids.tolist() == [i for row in tokenizer.encode_ids(TEXTS[:50]) for i in row]


def test_a_native_tokenizer_that_differs_is_refused_with_a_warning(monkeypatch, capsys):
    """The guard: a nanotoken whose ids part from Hugging Face's on the probe is not used."""
    honest = native.NativeWordPiece.encode_ids

    def off_by_one(self, texts):
        return [[i + 1 for i in ids] for ids in honest(self, texts)]

    monkeypatch.setattr(native.NativeWordPiece, "encode_ids", off_by_one)
    fast = WordPieceTokenizer(PROJECT_VOCAB, do_lower_case=True)
    assert not fast.is_native
    warning = capsys.readouterr().err
    assert "nanotoken gives other ids than Hugging Face tokenizers" in warning and warning.count("\n") == 1
    assert fast.encode_ids(TEXTS[:60]) == reference_ids(fast, TEXTS[:60])


def test_without_nanotoken_hugging_face_runs_with_a_note(monkeypatch):
    assert native.native_missing_note() is None  # installed here (the dev extra)
    monkeypatch.setattr(native, "_importable", lambda: False)
    fast = WordPieceTokenizer(PROJECT_VOCAB, do_lower_case=True)
    assert not fast.is_native
    assert fast.encode_ids(TEXTS[:60]) == reference_ids(fast, TEXTS[:60])
    ids, lengths = fast.encode_flat(TEXTS)
    assert lengths.sum() == len(ids) and ids.dtype.kind in "iu"
    note = native.native_missing_note()
    assert note and 'pip install "bert_data[native]"' in note and "\n" not in note


def test_the_probe_covers_what_the_hostile_text_covers():
    """The guard's probe holds each class of hostile character the differential uses."""
    probe = "".join(native.PROBE_TEXTS)
    for needed in ("\x00", "\u200b", "\u0301", "\x0b", "\x0c", "\u3000", "[MASK]", "[SEP]", "𠀀", "Σ", "\ufffd",
                   "\ue000", "e" * 201, "🙂", "\u202e", "שלום"):
        assert needed in probe, repr(needed)


def _hostile_run(tmp_path, name, progress):
    from bert_data.config import GeneratorConfig
    from bert_data.run.resolve import generate

    corpus = tmp_path / "corpus"
    if not corpus.exists():
        corpus.mkdir()
        for number in range(8):  # (without NUL: the reader takes a file holding one for a binary file)
            text = "\n".join(TEXTS[number * 20:(number + 1) * 20]).replace("\x00", "")
            (corpus / f"doc{number}.txt").write_text(text, encoding="utf-8")
        (corpus / "metadata.txt").write_text("".join(f"doc{number}.txt\n" for number in range(8)))
    out = tmp_path / name
    generate(GeneratorConfig(metadata_files=[str(corpus / "metadata.txt")], input_files_prefix=str(corpus),
                             vocab_file=str(PROJECT_VOCAB), do_lower_case=True, max_seq_length=48,
                             max_predictions_per_seq=6, dupe_factor=2, split_num=4, num_output_files=2,
                             output_dir=str(out), num_workers=1, seed=3, single_sentence_per_line=True),
             progress=progress)
    return out


def test_a_run_makes_the_same_bytes_without_nanotoken_and_says_so_once(tmp_path, monkeypatch, capsys):
    from tests.helpers.corpus import file_hashes

    native_out = _hostile_run(tmp_path, "native", progress=True)
    assert "note:" not in capsys.readouterr().err
    monkeypatch.setattr(native, "_importable", lambda: False)

    def not_here(*_):
        raise AssertionError("the native tokenizer ran without nanotoken")

    monkeypatch.setattr(native.NativeWordPiece, "encode_flat", not_here)
    from bert_data.run import tasks

    monkeypatch.setattr(tasks, "_tokenizers", {})  # the first run's tokenizer, cached in this process
    reference_out = _hostile_run(tmp_path, "reference", progress=True)
    notes = [line for line in capsys.readouterr().err.splitlines() if "note:" in line]
    assert len(notes) == 1 and 'pip install "bert_data[native]"' in notes[0]
    from bert_data.format.manifest import Manifest

    assert Manifest.read(str(native_out)).n_docs == 8  # every document kept
    hashes = file_hashes(native_out)
    assert len(hashes) == 2 and hashes == file_hashes(reference_out)
