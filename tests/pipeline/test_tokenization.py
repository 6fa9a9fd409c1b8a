"""bert_data.tokenizers.vocab and .wordpiece: vocabulary loading and faithfulness of the fast
tokenizer to Google's FullTokenizer (tests/helpers/reference_tokenizer.py is the yardstick); the old
module name bert_data.tokenization still gives the same objects."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import pickle
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bert_data.tokenizers.vocab import Vocab, VocabError, load_vocab, unk_rate
from bert_data.tokenizers.wordpiece import (
    WordPieceTokenizer,
    check_case_mismatch,
    force_single_thread,
    vocab_is_lowercase,
)

from tests.helpers.reference_tokenizer import ReferenceTokenizer, basic_tokenize

REPO = Path(__file__).resolve().parents[2]
SHARED_VOCAB = Path(__file__).resolve().parents[3] / "shared" / "vocab"
PROJECT_VOCAB = REPO / "vocab" / "vocab.txt"
BERT_UNCASED = SHARED_VOCAB / "bert-base-uncased-vocab.txt"
BERT_CASED = SHARED_VOCAB / "bert-base-cased-vocab.txt"
HAVE_BERT = BERT_UNCASED.is_file() and BERT_CASED.is_file()

# (name, vocab file, do_lower_case). Without ../shared/vocab the project's own (uncased)
# vocabulary stands in for both: the comparison with the reference still holds.
CONFIGS = [
    ("uncased", BERT_UNCASED if HAVE_BERT else PROJECT_VOCAB, True),
    ("cased", BERT_CASED if HAVE_BERT else PROJECT_VOCAB, False),
]


@pytest.fixture(scope="module", params=CONFIGS, ids=[c[0] for c in CONFIGS])
def pair(request):
    name, path, lower = request.param
    fast = WordPieceTokenizer(path, do_lower_case=lower)
    ref = ReferenceTokenizer(fast.vocab.tokens, do_lower_case=lower)
    return name, fast, ref


# --------------------------------------------------------------------------- generated text

ENGLISH = ("the of and to in is was for that on with as by at from his an were are which "
           "this be or has had not but first one their its new after who they have her she "
           "two been other when there all during into school time may years more most only "
           "over city some world would where later up such used many can state about national "
           "out known university united then made unaffable tokenization running jumped "
           "quickly extraordinary misunderstanding internationalization photosynthesis").split()
ACCENTED = ["Café", "naïve", "Ångström", "résumé", "façade", "Zürich", "São", "Paulo", "Éire",
            "coöperate", "crème", "brûlée", "piñata", "jalapeño", "Dvořák", "Łódź", "Øresund",
            "İstanbul", "straße", "ÜBER", "Ærø", "ﬁne", "½", "²", "µm", "№", "ǅemal", "ẞ"]
FOREIGN = ["Der schnelle braune Fuchs springt über den faulen Hund.",
           "Les élèves ont étudié à l'école jusqu'à minuit.",
           "¿Dónde está la estación de tren? ¡Muy lejos!",
           "Ça va très bien, merci beaucoup.", "Größenwahn und Gemütlichkeit",
           "ΟΔΟΣ ΚΑΙ ΛΟΓΟΣ", "Ὀδυσσεύς", "Москва — столица России.", "Київ",
           "東京タワーは高い。", "北京欢迎你", "서울특별시", "שלום עולם", "مرحبا بالعالم",
           "हिन्दी भाषा", "ภาษาไทย"]
CJK = ["中", "国", "人", "日本", "漢字", "𠀀", "𪜀", "𫝀", "𫠠", "丽", "〇", "ア", "한"]
PUNCT = list(".,;:!?'\"()[]{}<>-–—…/\\@#$%^&*_+=|~`") + ["“", "”", "‘", "’", "«", "»", "¡", "¿",
                                                        "§", "¶", "•", "·", "†", "‰", "′", "″"]
CONTROL = ["\x00", "\x07", "\x1b", "\x7f", "\x85", "\u200b", "\u200d", "\ufeff", "\u00ad",
           "\r", "\t", "\n", "\r\n", "\x0b", "\x0c", "\u2028", "\u2029", "\u00a0", "\u3000",
           "\ufffd", "\u0301", "\u0308", "\ue000", "\uf0b7", "\U000f0001", "\u061d", "\u2e5d"]
EMOJI = ["🙂", "👍🏽", "❤️", "🇫🇷", "👨‍👩‍👧", "🤖", "☕", "✓", "™", "©", "∞", "→"]


def _word(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.45:
        w = rng.choice(ENGLISH)
        return w.capitalize() if rng.random() < 0.2 else (w.upper() if rng.random() < 0.05 else w)
    if r < 0.55:
        return rng.choice(ACCENTED)
    if r < 0.62:
        return str(rng.choice([rng.randint(0, 99), rng.randint(1000, 2025), rng.random() * 1000]))[:9]
    if r < 0.67:
        return rng.choice(ENGLISH) + rng.choice(["-", "'", "’", "'s", "n't", "/", "."]) + rng.choice(ENGLISH)
    if r < 0.72:
        return "".join(rng.choice(CJK) for _ in range(rng.randint(1, 4)))
    if r < 0.77:
        return rng.choice(EMOJI)
    if r < 0.80:  # glue a control / odd character inside a word
        w = rng.choice(ENGLISH)
        i = rng.randint(0, len(w))
        return w[:i] + rng.choice(CONTROL) + w[i:]
    if r < 0.82:  # long words around the 100 / 200 character limits
        n = rng.choice([99, 100, 101, 150, 199, 200, 201, 250])
        return "".join(rng.choice("abcdefghij") for _ in range(n))
    if r < 0.84:
        return rng.choice(ENGLISH) * rng.randint(5, 40)
    return rng.choice(PUNCT) * rng.randint(1, 2)


def generated_sentences(n: int = 400, seed: int = 1234) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        if rng.random() < 0.1:
            out.append(rng.choice(FOREIGN) + " " + rng.choice(FOREIGN))
            continue
        parts = []
        for _ in range(rng.randint(1, 25)):
            parts.append(_word(rng))
            parts.append(rng.choice([" ", " ", " ", " ", "", "  ", "\t", "\n", rng.choice(CONTROL)]))
        out.append("".join(parts))
    out += ["", " ", "\x00", "\t\n", "\u200b"]
    return out


SENTENCES = generated_sentences()


def test_generated_sentences_match_reference(pair):
    name, fast, ref = pair
    batch = fast.encode_ids(SENTENCES)
    assert len(batch) == len(SENTENCES)
    mismatches = []
    for text, ids in zip(SENTENCES, batch):
        expected = ref.tokenize(text)
        if fast.tokenize(text) != expected or ids != ref.convert_tokens_to_ids(expected):
            mismatches.append((text, fast.tokenize(text), expected))
    assert not mismatches, f"{name}: {len(mismatches)} mismatches, first: {mismatches[0]!r}"


def test_pure_hugging_face_matches_reference_on_ordinary_text(pair):
    """Without the Python fallback, HF alone matches Google on all but the documented characters."""
    name, fast, ref = pair
    pure = WordPieceTokenizer(fast.vocab, do_lower_case=fast.do_lower_case, google_fallback=False)
    search = fast._needs_fallback
    texts = [t for t in SENTENCES if not search(t)]
    assert len(texts) > 200
    got = pure.encode_ids(texts)
    for text, ids in zip(texts, got):
        assert ids == ref.convert_tokens_to_ids(ref.tokenize(text)), (name, text)


def test_sample_corpus_matches_reference(pair):
    name, fast, ref = pair
    docs = [p.read_text(encoding="utf-8") for p in sorted((REPO / "examples/sample/docs").glob("*.txt"))]
    assert len(docs) >= 30
    lines = [line for d in docs for line in d.split("\n") if line.strip()]
    for text, ids in zip(lines, fast.encode_ids(lines)):
        assert ids == ref.convert_tokens_to_ids(ref.tokenize(text)), (name, text)


def test_code_point_sample_matches_reference(pair):
    """Every 61st code point plus all that need the fallback, alone and inside words."""
    name, fast, ref = pair
    from bert_data.tokenizers import wordpiece as tk
    cps = set(range(0, 0x110000, 61))
    for lo, hi in tk._HF_DIVERGENT_RANGES + tk._CJK_EXT_E_GAP:
        cps.update(range(lo, hi + 1))
    cps.update([0x3A3, 0xE000, 0xF8FF, 0xF0000, 0x10FFFD, 0x2028, 0x2029, 0x85, 0x1C])
    cps = sorted(c for c in cps if not 0xD800 <= c <= 0xDFFF)
    for ctx in ("{}", "ab{}cd", "Éé{}", "{}x"):
        texts = [ctx.format(chr(c)) for c in cps]
        for c, text, ids in zip(cps, texts, fast.encode_ids(texts)):
            assert ids == ref.convert_tokens_to_ids(ref.tokenize(text)), (name, hex(c), text)


# Hand-checked against the reference (Google's algorithm) with the BERT-Base vocabularies.
PINNED_UNCASED = {
    "Hello, World! It's 3.14 o'clock": ["hello", ",", "world", "!", "it", "'", "s", "3", ".", "14",
                                        "o", "'", "clock"],
    "Café naïve Ångström résumé": ["cafe", "naive", "ang", "##strom", "resume"],
    "straße Über ÉCOLE": ["st", "##raße", "uber", "ecole"],
    "unaffable": ["una", "##ffa", "##ble"],
    "e-mail self-driving": ["e", "-", "mail", "self", "-", "driving"],
    "北京欢迎你 and 東京": ["北", "京", "[UNK]", "[UNK]", "[UNK]", "and", "東", "京"],
    "a\x00b\x07c\u200bd\ufeffe\r\nf\tg": ["abc", "##de", "f", "g"],
    "I ❤️ NY 🙂👍🏽": ["i", "[UNK]", "ny", "[UNK]"],
    "$100.00 (approx.) #hashtag @user": ["$", "100", ".", "00", "(", "approx", ".", ")", "#", "hash",
                                         "##tag", "@", "user"],
    "“quoted” «guillemets» …": ["“", "quoted", "”", "«", "gui", "##lle", "##met", "##s", "»", "…"],
    "İstanbul ẞ ῼ": ["istanbul", "ß", "ω"],
    "x" * 201: ["[UNK]"],
    "ΟΔΟΣ": ["ο", "##δ", "##ος"],            # Python's final sigma (HF alone: ##ο ##σ)
    "\ue000abc def": ["[UNK]", "def"],        # private use kept by Google (HF alone drops it)
    "abc\U0002B820def": ["abc", "[UNK]", "def"],  # CJK Ext E isolated by Google (HF alone: [UNK])
}
PINNED_CASED = {
    "Hello, World! It's 3.14 o'clock": ["Hello", ",", "World", "!", "It", "'", "s", "3", ".", "14",
                                        "o", "'", "clock"],
    "Café naïve Ångström résumé": ["Café", "na", "##ï", "##ve", "Å", "##ng", "##st", "##röm", "r",
                                   "##és", "##um", "##é"],
    "straße Über ÉCOLE": ["s", "##tra", "##ße", "Ü", "##ber", "É", "##CO", "##LE"],
    "unaffable": ["un", "##af", "##fa", "##ble"],
    "a\x00b\x07c\u200bd\ufeffe\r\nf\tg": ["a", "##b", "##c", "##de", "f", "g"],
    "e\u0301": ["e", "##́"],
    "ΟΔΟΣ": ["Ο", "##Δ", "##Ο", "##Σ"],
    "\ue000abc def": ["[UNK]", "def"],
    "abc\U0002B820def": ["a", "##b", "##c", "[UNK]", "def"],
    "x" * 201: ["[UNK]"],
}


@pytest.mark.parametrize("lower", [True, False], ids=["uncased", "cased"])
def test_pinned_cases(lower):
    pinned = PINNED_UNCASED if lower else PINNED_CASED
    if HAVE_BERT:
        fast = WordPieceTokenizer(BERT_UNCASED if lower else BERT_CASED, do_lower_case=lower)
        for text, expected in pinned.items():
            assert fast.tokenize(text) == expected, text
    else:  # the literal lists need the BERT vocabularies; check against the reference instead
        fast = WordPieceTokenizer(PROJECT_VOCAB, do_lower_case=lower)
        ref = ReferenceTokenizer(fast.vocab.tokens, do_lower_case=lower)
        for text in pinned:
            assert fast.tokenize(text) == ref.tokenize(text), text


def test_reference_basic_tokenizer_follows_google():
    assert basic_tokenize(" \tHeLLo!how  \n Are yoU?  ", True) == ["hello", "!", "how", "are", "you", "?"]
    assert basic_tokenize("H\u00E9llo", True) == ["hello"]
    assert basic_tokenize(" \tHeLLo!how  \n Are yoU?  ", False) == ["HeLLo", "!", "how", "Are", "yoU", "?"]
    assert basic_tokenize("ah\u535A\u63A8zz", True) == ["ah", "\u535A", "\u63A8", "zz"]
    assert basic_tokenize("a\u2028b", False) == ["a", "b"]


def test_max_input_chars_per_word():
    v = load_vocab(PROJECT_VOCAB)
    word = "ab" * 75  # 150 characters
    for limit in (100, 200):
        fast = WordPieceTokenizer(v, do_lower_case=True, max_input_chars_per_word=limit)
        ref = ReferenceTokenizer(v.tokens, do_lower_case=True, max_input_chars_per_word=limit)
        assert fast.tokenize(word) == ref.tokenize(word)
        assert (fast.tokenize(word) == ["[UNK]"]) == (limit == 100)
    # Google's default is 200 characters
    assert WordPieceTokenizer(v).tokenize("a" * 200) != ["[UNK]"]
    assert WordPieceTokenizer(v).tokenize("a" * 201) == ["[UNK]"]


def test_encode_ids_batch_equals_single_and_accepts_tuples():
    fast = WordPieceTokenizer(PROJECT_VOCAB, do_lower_case=True)
    texts = SENTENCES[:50]
    batch = fast.encode_ids(texts)
    assert batch == [fast.encode_one(t) for t in texts]
    assert fast.encode_ids(tuple(texts)) == batch
    assert fast.encode_ids([]) == []
    assert all(isinstance(i, int) for ids in batch for i in ids)


def test_force_single_thread_same_results(monkeypatch):
    fast = WordPieceTokenizer(PROJECT_VOCAB, do_lower_case=True)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    parallel = fast.encode_ids(SENTENCES)
    previous = force_single_thread()
    assert previous == "true"
    assert os.environ["TOKENIZERS_PARALLELISM"] == "false"
    assert fast.encode_ids(SENTENCES) == parallel


# --------------------------------------------------------------------------- vocabulary


def _write(path: Path, data) -> Path:
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_load_vocab_fields(tmp_path):
    tokens = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[XYZ]",
              "the", "##s", "dog", "##ing", "##", "[notspecial]", "[Unused2]"]
    p = _write(tmp_path / "vocab.txt", "\r\n".join(tokens) + "\r\n")  # CRLF is stripped
    v = load_vocab(p)
    assert v.tokens == tuple(tokens)
    assert v.size == len(v) == len(tokens)
    assert (v.pad_id, v.unk_id, v.cls_id, v.sep_id, v.mask_id) == (0, 3, 4, 5, 6)
    assert v.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()
    assert v.path == str(p)
    assert v.token_to_id["dog"] == 10
    assert v.is_continuation.dtype == bool
    assert list(np.flatnonzero(v.is_continuation)) == [9, 11, 12]
    assert v.ordinary_ids.dtype == np.int32
    assert [v.tokens[i] for i in v.ordinary_ids] == ["the", "##s", "dog", "##ing", "##",
                                                      "[notspecial]", "[Unused2]"]
    with pytest.raises(ValueError):
        v.ordinary_ids[0] = 1  # read-only
    assert v.convert_tokens_to_ids(["dog", "cat"]) == [10, 3]
    assert v.convert_ids_to_tokens([8, 9]) == ["the", "##s"]


def test_a_vocab_is_loaded_once_a_process_until_its_bytes_change(tmp_path):
    """A run loads its vocabulary to resolve its options and again for its tokenizer: the second
    is the first's object; a file rewritten in place (its bytes read every time) is loaded anew."""
    p = _write(tmp_path / "vocab.txt", "\n".join(SPECIALS + ["dog"]) + "\n")
    first = load_vocab(p)
    assert load_vocab(str(p)) is first
    _write(p, "\n".join(SPECIALS + ["cat", "dog"]) + "\n")  # (same size or not: the bytes decide)
    again = load_vocab(p)
    assert again is not first and again.token_to_id["dog"] == 6 and first.token_to_id["dog"] == 5
    copy = _write(tmp_path / "copy.txt", p.read_text())
    assert load_vocab(copy).path == str(copy)  # another file of the same bytes: its own path
    from bert_data.tokenizers import vocab as vocab_module

    for number in range(vocab_module._KEPT + 2):  # a process loading many vocabularies keeps a few
        load_vocab(_write(tmp_path / f"v{number}.txt", "\n".join(SPECIALS + [f"w{number}"]) + "\n"))
    assert len(vocab_module._LOADED) == vocab_module._KEPT


def test_load_vocab_whitespace_bom_and_missing_final_newline(tmp_path):
    p = _write(tmp_path / "v.txt", "\ufeff" + "\n".join(SPECIALS + ["  spaced  ", "last"]))
    v = load_vocab(p)
    assert v.tokens == tuple(SPECIALS + ["spaced", "last"])


def test_real_bert_vocabularies():
    v = load_vocab(BERT_UNCASED if HAVE_BERT else PROJECT_VOCAB)
    if HAVE_BERT:
        assert v.size == 30522 and (v.pad_id, v.unk_id, v.cls_id, v.sep_id, v.mask_id) == (0, 100, 101, 102, 103)
        assert v.sha256.startswith("07eced37")
        assert len(v.ordinary_ids) == 30522 - 5 - 994
        assert load_vocab(BERT_CASED).size == 28996
    assert not any(v.tokens[i].startswith("[unused") for i in v.ordinary_ids)
    assert v.is_continuation.sum() == sum(t.startswith("##") for t in v.tokens)


@pytest.mark.parametrize("content, needle", [
    (b"", "empty"),
    (b"\n  \n", "empty"),
    ("\n".join(SPECIALS + ["a", "b", "a"]).encode(), "duplicate token 'a' at lines 6 and 8"),
    ("\n".join(SPECIALS + ["x", "[UNK]"]).encode(), "duplicate token '[UNK]' at lines 2 and 7"),
    ("\n".join(["[PAD]", "[UNK]", "[SEP]", "a"]).encode(), "missing special token(s) [CLS] [MASK]"),
    ("\n".join(SPECIALS + ["ok"]).encode() + b"\nbad\xff\xfe\n", "not valid UTF-8 at line 7"),
    ("\n".join(SPECIALS).encode("utf-16"), "is UTF-16 text, and a vocab.txt is read as UTF-8: convert it"),
    ("\n".join(SPECIALS).encode("utf-16-le"), "is UTF-16 text, and a vocab.txt is read as UTF-8: convert it"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\xff\xfe" + bytes(range(256)) * 4,
     "is a binary file, not a BERT vocabulary (a vocab.txt holds one token a line)"),
    (b'{\n  "version": "1.0",\n  "model": {"type": "WordPiece", "vocab": {"[PAD]": 0}}\n}\n',
     "is a Hugging Face tokenizer.json, not a vocab.txt (one token a line): pass it as --tokenizer_file"),
    (b'{"a": 1}\n', "is JSON, not a BERT vocabulary"),
])
def test_vocab_errors(tmp_path, content, needle):
    p = _write(tmp_path / "bad_vocab.txt", content)
    with pytest.raises(VocabError) as e:
        load_vocab(p)
    msg = str(e.value)
    assert needle in msg
    assert str(p) in msg and "\n" not in msg


def test_ordinary_ids_are_what_the_exclusion_rule_lets_through():
    """``vocab_from_tokens`` finds the ordinary ids with the patterns tried only on tokens opening
    with "[": the same ids as the rule token by token, on tokens made to tell them apart."""
    from bert_data.tokenizers.vocab import SPECIAL_TOKENS, _is_excluded_from_random, vocab_from_tokens

    tricky = ["", "[unused0]", "[unused12]", "[unused\u0663]", "[unused]", "[unused1]x", "x[unused1]", "[UNUSED1]",
              "[XYZ]", "[A_B]", "[AB1]", "[ab]", "[]", "[", "]", "[[MASK]]", "[MASK]x", "<s>", "<pad>", "[Unused2]",
              "\u2581[X]", "[X] ", "the", "##s", "[\u00c9]"]
    tokens = list(SPECIAL_TOKENS) + ["<s>", "<pad>"]
    tokens += sorted({token + end for token in tricky for end in ("", "a", "##", "[Q]")} - set(tokens) - {""},
                     key=lambda token: random.Random(token).random())
    tokens.append("")
    for specials, reserved in [(SPECIAL_TOKENS, ()), (("<pad>", "[UNK]", "[CLS]", "[SEP]", "[MASK]"), ("<s>",))]:
        vocab = vocab_from_tokens(tokens, special_tokens=specials, reserved=reserved)
        excluded = set(specials) | set(reserved)
        expected = [i for i, token in enumerate(tokens) if not _is_excluded_from_random(token, excluded)]
        assert vocab.ordinary_ids.dtype == np.int32 and vocab.ordinary_ids.tolist() == expected


def test_a_vocab_line_of_several_words_is_found_whatever_separates_them(tmp_path):
    """The check that a vocab.txt holds one token a line looks for white space in all the lines at
    once: a regular expression's \\s, which must be exactly what str.split() splits on."""
    from bert_data.tokenizers.vocab import _WHITE_SPACE

    assert [c for c in map(chr, range(0x110000)) if bool(_WHITE_SPACE.match(c)) != c.isspace()] == []
    for space in (" ", "\t", "\x1c", "\x85", "\u00a0", "\u2003", "\u3000"):
        p = _write(tmp_path / "v.txt", "\n".join(SPECIALS + ["one" + space + "two", "three"]) + "\n")
        with pytest.raises(VocabError, match="line 6 holds several words"):
            load_vocab(p)


def test_vocab_error_missing_file_and_directory(tmp_path):
    with pytest.raises(VocabError, match="not found") as e:
        load_vocab(tmp_path / "nope.txt")
    assert "nope.txt" in str(e.value)
    with pytest.raises(VocabError, match="directory"):
        load_vocab(tmp_path)
    assert issubclass(VocabError, ValueError)


def test_vocab_non_utf8_reports_byte_offset(tmp_path):
    p = _write(tmp_path / "v.txt", "\n".join(SPECIALS).encode() + b"\ncaf\xe9\n")
    with pytest.raises(VocabError, match=r"line 6 \(byte offset 34, byte 3 of the line"):
        load_vocab(p)


# --------------------------------------------------------------------------- pickling


def test_vocab_pickle_roundtrip_and_size():
    v = load_vocab(BERT_UNCASED if HAVE_BERT else PROJECT_VOCAB)
    data = pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL)
    naive = pickle.dumps((v.tokens, v.token_to_id, v.is_continuation, v.ordinary_ids),
                         protocol=pickle.HIGHEST_PROTOCOL)
    assert len(data) < 0.5 * len(naive)
    w = pickle.loads(data)
    assert w == v and hash(w) == hash(v)
    assert w.token_to_id == v.token_to_id
    np.testing.assert_array_equal(w.is_continuation, v.is_continuation)
    np.testing.assert_array_equal(w.ordinary_ids, v.ordinary_ids)


def test_tokenizer_pickle_rebuilds_without_the_file(tmp_path):
    src = tmp_path / "vocab.txt"
    src.write_bytes(PROJECT_VOCAB.read_bytes())
    fast = WordPieceTokenizer(src, do_lower_case=True, max_input_chars_per_word=50)
    data = pickle.dumps(fast)
    src.unlink()
    clone = pickle.loads(data)
    assert clone.vocab == fast.vocab and clone.max_input_chars_per_word == 50
    assert clone.encode_ids(SENTENCES) == fast.encode_ids(SENTENCES)


def _encode_in_child(args):
    tokenizer, texts = args
    return tokenizer.encode_ids(texts)


def test_tokenizer_works_in_worker_process():
    fast = WordPieceTokenizer(PROJECT_VOCAB, do_lower_case=True)
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    with ctx.Pool(1) as pool:
        got = pool.map(_encode_in_child, [(fast, SENTENCES[:100])])[0]
    assert got == fast.encode_ids(SENTENCES[:100])


def test_the_old_module_name_gives_the_same_objects():
    import bert_data.tokenization as old
    from bert_data.tokenizers import vocab, wordpiece

    assert sorted(old.__all__) == sorted(vocab.__all__ + wordpiece.__all__)
    for name in old.__all__:
        assert getattr(old, name) is getattr(vocab, name, None) or getattr(old, name) is getattr(wordpiece, name)
    assert old.WordPieceTokenizer is WordPieceTokenizer and old.load_vocab is load_vocab


def test_module_imports_neither_tensorflow_nor_spacy():
    code = ("import sys, bert_data.tokenization; "
            "bad = [m for m in ('tensorflow', 'spacy') if m in sys.modules]; "
            "sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# --------------------------------------------------------------------------- checks


def _cased_vocab(tmp_path) -> Vocab:
    words = ["The", "the", "Dog", "dog", "runs", "Fast", "fast", "."]
    return load_vocab(_write(tmp_path / "cased.txt", "\n".join(SPECIALS + words) + "\n"))


def test_unk_rate():
    v = load_vocab(PROJECT_VOCAB)
    assert unk_rate([[v.unk_id, 7], [8, v.unk_id, v.unk_id, 9]], v) == pytest.approx(0.5)
    assert unk_rate([], v) == 0.0 and unk_rate([[]], v) == 0.0
    assert unk_rate([np.array([v.unk_id, 5], dtype=np.int32)], v) == pytest.approx(0.5)


def test_check_case_mismatch(tmp_path):
    uncased = load_vocab(PROJECT_VOCAB)
    texts = ["The Dog Runs Fast.", "Paris and Lisbon"]
    assert vocab_is_lowercase(uncased)
    assert check_case_mismatch(uncased, True, texts) is None
    warning = check_case_mismatch(uncased, False, texts)
    assert warning and "lower-cased" in warning and "[UNK] rate" in warning and "\n" not in warning
    cased = _cased_vocab(tmp_path)
    assert not vocab_is_lowercase(cased)
    assert check_case_mismatch(cased, False, texts) is None
    warning = check_case_mismatch(cased, True, texts)
    assert warning and "cased" in warning and "%" in warning
    if HAVE_BERT:
        assert vocab_is_lowercase(load_vocab(BERT_UNCASED))
        assert not vocab_is_lowercase(load_vocab(BERT_CASED))


@pytest.mark.parametrize("lower", [True, False])
def test_fallback_rows_found_in_batches_are_those_found_text_by_text(lower):
    """``_fallback_rows`` (non-ASCII texts picked in C; a batch of Latin-1 text cleared without
    the character class, which holds no Latin-1 character) gives the rows the class finds text
    by text, and a batch's ids are the same as each text's alone."""
    from bert_data.tokenizers import wordpiece

    assert wordpiece._LATIN1_CLEAR
    fast = WordPieceTokenizer(PROJECT_VOCAB, do_lower_case=lower)
    search = (wordpiece._FALLBACK_RE_UNCASED if lower else wordpiece._FALLBACK_RE_CASED).search
    batches = [["plain", "café naïve", "Zürich ½"], ["plain", "café", "\u03a3 sigma", "\ue000 private", "中文"],
               ["ascii only"], ["\u2e43", "x"], []]
    for texts in batches:
        assert fast._fallback_rows(texts) == [i for i, text in enumerate(texts) if search(text)], texts
        if texts:
            ids, lengths = fast.encode_flat(texts)
            assert [part.tolist() for part in np.split(ids, np.cumsum(lengths)[:-1])] == \
                [fast.encode_ids([text])[0] for text in texts]
