"""WordPiece at native speed: ``nanotoken`` (Rust), with exactly the ids of Hugging Face ``tokenizers``.

``nanotoken`` reads a WordPiece ``tokenizer.json`` and claims the ids of Hugging Face's
``tokenizers`` for it; on BERT's vocabularies it is 10-60x faster on one core and returns the
ids of a whole batch as one numpy array (no Python list per token).  It is an optional
dependency (``pip install "bert_data[native]"``; see pyproject.toml for why not a default one):
without it, or for a tokenizer it cannot run, the Hugging Face path runs, with the same ids.

Exactness is checked, not assumed: :func:`native_wordpiece` builds the native tokenizer from the
Hugging Face tokenizer's own JSON and encodes :data:`PROBE_TEXTS` (every class of text on which
the two could part) with both; any difference, e.g. a new ``nanotoken`` release that changed,
gives no native tokenizer and a one-line warning, and the Hugging Face path runs.  The tests
(``tests/pipeline/test_native_tokenizer.py``) and ``scripts/check_native_tokenizer.py`` (a whole
corpus, every code point) compare the two on far more.

Two settings make the native tokenizer the one the generator runs: special tokens written in the
text are text (Hugging Face's ``encode_special_tokens``: the special added tokens are left out of
the JSON it loads), and no truncation or padding.  It always runs on the calling thread (the
generator's parallelism is its worker processes).
"""

from __future__ import annotations

import json
import os
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..notices import warn

__all__ = ["NativeWordPiece", "native_wordpiece", "native_missing_note", "PROBE_TEXTS"]

PACKAGE = "nanotoken"
# nanotoken caches the ids of the chunks it has seen, by default up to 2**20 entries a level: about
# 240 MB more per worker once a corpus has shown it millions of distinct words (a large one does).
# 2**16 entries keep that to about 45 MB, at the same speed on ../shared/corpus.  The environment
# variable NANOTOKEN_CACHE_ENTRIES, when set, decides instead.
CACHE_ENTRIES = 1 << 16

# One text per class of input where a native WordPiece could part from Hugging Face's: checked at
# every construction (about a millisecond).
PROBE_TEXTS = (
    "Hello, World! It's 3.14 o'clock; e-mail U.S.A. unaffable",
    "Café naïve Ångström résumé straße ÜBER ﬁne ½ ² ǅemal ẞ İstanbul",
    "e\u0301 A\u0308\u0327 \u0301\u0308 中\u20dd",
    "ΟΔΟΣ Ὀδυσσεύς Москва ŉ ǰ ΐ K Å",
    "北京欢迎你 東京タワー 𠀀𪜀 丽〇 한국어 ｶﾀｶﾅ ㍿",
    "a\x00b\x01c\x07d\x1be\x7ff\x85g\u00adh\u200bi\u200dj\ufeffk\u2060l\u202em",
    "x\x0by\x0cz a\u00a0b\u3000c\u2028d\u2029e\u1680f \t\r\n  \t   g",
    "[MASK] [SEP] [CLS] [PAD] [UNK] [mask] [[MASK]] <mask> ## ##s [unused1]",
    "🙂 👍🏽 ❤️ 🇫🇷 👨‍👩‍👧 ™ © ∞ → #️⃣",
    "שלום עולם مرحبا بالعالم \u200f\u202b ﷺ ﻻ",
    "\ufffd\ufffd caf\ufffd \ue000abc \U000f0001 \uffff",
    "a" * 99 + " " + "b" * 100 + " " + "c" * 101 + " " + "d" * 200 + " " + "e" * 201,
    "internationaliz internationaliza internationalizat photosynthesisx photosynthesisxp",
    "“quoted” «guillemets» … ¿Dónde? ¡Sí! $100.00 (approx.) #hashtag @user \u2e43 \u061d",
    "",
)


class NativeWordPiece:
    """A ``nanotoken`` WordPiece tokenizer as the generator runs it (see the module docstring)."""

    def __init__(self, backend):
        self._backend = backend

    def encode_flat(self, texts: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
        """``(ids, lengths)``: every text's ids end to end (uint32) and each text's count (int64)."""
        ids, offsets = self._backend.encode_batch(texts, add_special_tokens=False, parallel=False)
        return ids, np.diff(offsets)

    def encode_ids(self, texts: Sequence[str]) -> List[List[int]]:
        return self._backend.encode_batch_list(texts, add_special_tokens=False, parallel=False)


def _importable() -> bool:
    try:
        import nanotoken.nanotoken_rs  # noqa: F401
    except ImportError:
        return False
    return True


def native_missing_note() -> Optional[str]:
    """The note a WordPiece run prints when ``nanotoken`` is not installed, else None."""
    if _importable():
        return None
    return (f"WordPiece runs on Hugging Face tokenizers (the same ids, several times slower): "
            f"pip install \"bert_data[native]\" (or {PACKAGE}) for the native tokenizer")


def _as_generator_runs_it(hf_tokenizer) -> str:
    """The tokenizer's JSON with special tokens treated as text (left out of the added tokens:
    Hugging Face's ``encode_special_tokens``) and no truncation or padding: as it is when it has
    none of them (a ``vocab.txt``'s, built here), without parsing half a megabyte of JSON twice."""
    tokenizer_json = hf_tokenizer.to_str()
    if hf_tokenizer.truncation is None and hf_tokenizer.padding is None \
            and not hf_tokenizer.get_added_tokens_decoder():
        return tokenizer_json
    parsed = json.loads(tokenizer_json)
    parsed["added_tokens"] = [entry for entry in parsed.get("added_tokens") or [] if not entry.get("special")]
    parsed["truncation"] = None
    parsed["padding"] = None
    return json.dumps(parsed, ensure_ascii=False)


def native_wordpiece(hf_tokenizer) -> Optional[NativeWordPiece]:
    """The native twin of ``hf_tokenizer`` (a ``tokenizers.Tokenizer`` set up as the generator
    runs it: special tokens as text, no truncation or padding), or None: ``nanotoken`` missing, a
    tokenizer it does not run (not WordPiece, a normaliser it lacks), or one whose ids differ from
    ``hf_tokenizer``'s on :data:`PROBE_TEXTS` (warned about: a ``nanotoken`` release that changed)."""
    if not _importable():
        return None
    import nanotoken
    from nanotoken.nanotoken_rs import WordPieceTokenizer

    if "NANOTOKEN_CACHE_ENTRIES" not in os.environ:
        nanotoken.set_cache_entries(CACHE_ENTRIES)
    try:
        backend = WordPieceTokenizer.from_json(_as_generator_runs_it(hf_tokenizer))
    except Exception:  # UnsupportedTokenizerError, or a file nanotoken reads otherwise: Hugging Face runs it
        return None
    native = NativeWordPiece(backend)
    probe = list(PROBE_TEXTS)
    expected = [encoding.ids for encoding in hf_tokenizer.encode_batch(probe, add_special_tokens=False)]
    if native.encode_ids(probe) != expected:
        first = next(text for text, ids, want in zip(probe, native.encode_ids(probe), expected) if ids != want)
        warn(f"{PACKAGE} gives other ids than Hugging Face tokenizers (e.g. on {first[:40]!r}): tokenizing with "
             f"tokenizers instead (the same ids, slower); report it with the {PACKAGE} version")
        return None
    return native
