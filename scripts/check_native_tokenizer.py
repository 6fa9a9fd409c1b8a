#!/usr/bin/env python3
"""Check the native WordPiece (nanotoken) against the reference paths on real and hostile text.

    python scripts/check_native_tokenizer.py                    # ../shared/corpus + hostile text
    python scripts/check_native_tokenizer.py --code_points      # and every code point (slow)
    python scripts/check_native_tokenizer.py --vocab_file v.txt --corpus my/corpus --hostile 20000

For each vocabulary (default: ../shared/vocab's BERT-Base uncased and cased) and lower-casing on
and off, it compares, id for id:

* every line of every file under ``--corpus`` (default ../shared/corpus: its documents, and its
  one-sentence-a-line copies), native path against the reference path (Hugging Face
  ``tokenizers`` with Google's fallback, which the test suite checks against Google's algorithm);
* ``--hostile`` texts of tests/helpers/hostile_text.py, native path against Google's algorithm
  itself (tests/helpers/reference_tokenizer.py) and nanotoken alone against ``tokenizers`` alone;
* with ``--code_points``, every code point alone and in six contexts, nanotoken alone against
  ``tokenizers`` alone.

Prints one line per check and exits 1 on any difference (the first few are shown).  The test
suite runs the same comparisons on small generated text (tests/pipeline/test_native_tokenizer.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's bert_data and its test helpers

from bert_data.tokenizers.vocab import load_vocab  # noqa: E402
from bert_data.tokenizers.wordpiece import WordPieceTokenizer  # noqa: E402
from tests.helpers.hostile_text import hostile_texts  # noqa: E402
from tests.helpers.reference_tokenizer import ReferenceTokenizer  # noqa: E402

SHARED = REPO.parent / "shared"
CONTEXTS = ("{}", "ab{}cd", "Éé{}", "{}x", "x {} y", "ΣΣ{}Σ", "中{}a")


def corpus_lines(root: Path) -> list:
    lines = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix not in (".md",)
                       and not p.name.startswith("metadata")):
        text = path.read_bytes().decode("utf-8", errors="replace")
        lines += [line for line in text.split("\n") if line.strip()]
    return lines


def compare(label: str, texts, got, expected) -> int:
    wrong = [(text, ids, want) for text, ids, want in zip(texts, got, expected) if list(ids) != list(want)]
    print(f"  {label}: {len(texts):,} texts, {sum(map(len, expected)):,} ids, "
          + ("identical" if not wrong else f"{len(wrong):,} DIFFER"), flush=True)
    for text, ids, want in wrong[:3]:
        print(f"    {text[:120]!r}\n      native    {list(ids)[:30]}\n      reference {list(want)[:30]}")
    return len(wrong)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab_file", nargs="+", default=[str(SHARED / "vocab" / "bert-base-uncased-vocab.txt"),
                                                             str(SHARED / "vocab" / "bert-base-cased-vocab.txt")])
    parser.add_argument("--corpus", default=str(SHARED / "corpus"), help="a folder of text files ('' for none)")
    parser.add_argument("--hostile", type=int, default=5000, help="hostile texts (tests/helpers/hostile_text.py)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--code_points", action="store_true", help="every code point in seven contexts (slow)")
    args = parser.parse_args(argv)

    lines = corpus_lines(Path(args.corpus)) if args.corpus else []
    hostile = hostile_texts(args.hostile, args.seed)
    code_points = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF] if args.code_points else []
    differ = 0
    for vocab_file in args.vocab_file:
        vocab = load_vocab(vocab_file)
        for lower in (True, False):
            native = WordPieceTokenizer(vocab, do_lower_case=lower)
            if not native.is_native:
                sys.exit("check_native_tokenizer: nanotoken is not installed (pip install nanotoken)")
            reference = WordPieceTokenizer(vocab, do_lower_case=lower, native=False)
            print(f"{vocab_file}, do_lower_case={lower}", flush=True)
            if lines:
                started = time.perf_counter()
                got = native.encode_ids(lines)
                native_seconds = time.perf_counter() - started
                started = time.perf_counter()
                expected = reference.encode_ids(lines)
                print(f"  (corpus: native {native_seconds:.2f} s, reference {time.perf_counter() - started:.2f} s)")
                differ += compare(f"corpus {args.corpus}", lines, got, expected)
            google = ReferenceTokenizer(vocab.tokens, do_lower_case=lower)
            differ += compare("hostile text vs Google's algorithm", hostile, native.encode_ids(hostile),
                              [google.convert_tokens_to_ids(google.tokenize(text)) for text in hostile])
            alone = WordPieceTokenizer(vocab, do_lower_case=lower, google_fallback=False)
            hf_alone = WordPieceTokenizer(vocab, do_lower_case=lower, google_fallback=False, native=False)
            differ += compare("hostile text, nanotoken alone vs tokenizers alone", hostile, alone.encode_ids(hostile),
                              hf_alone.encode_ids(hostile))
            for context in CONTEXTS if code_points else ():
                texts = [context.format(ch) for ch in code_points]
                differ += compare(f"every code point in {context!r}, nanotoken alone vs tokenizers alone", texts,
                                  alone.encode_ids(texts), hf_alone.encode_ids(texts))
    print("all identical" if not differ else f"{differ:,} texts differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
