#!/usr/bin/env python3
"""The built-in splitter's sentences without spaCy Docs against spaCy's pipeline, on a real corpus.

    python scripts/sentence_differential.py                       # ../shared/corpus (metadata.txt)
    python scripts/sentence_differential.py --metadata_files my/metadata.txt --input_files_prefix my

Splits every listed document twice -- ``SpacySentenceSplitter()`` (bert_data/pipeline/rule_sentences.py)
and ``SpacySentenceSplitter(force_spacy=True)`` (spacy.blank("en") + sentencizer, a Doc per
passage) -- and reports documents and sentences that differ (the first few shown), the CPU time
of each, the paragraphs the shortcut tokenized whole or handed to spaCy, and whether it needed
spaCy at all.  Exit status 1 if any document differs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus"
sys.path.insert(0, str(REPO))

from bert_data.pipeline.documents.reading import DocumentTexts  # noqa: E402
from bert_data.pipeline.sentences import SpacySentenceSplitter  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--metadata_files", nargs="*", default=None,
                        help=f"files listing the documents (default {DEFAULT_CORPUS}/metadata.txt)")
    parser.add_argument("--input_files_prefix", default=None, help="folder the listed paths are relative to")
    parser.add_argument("--show", type=int, default=5, help="differing documents to show")
    args = parser.parse_args(argv)
    if args.metadata_files is None:
        args.metadata_files = [str(DEFAULT_CORPUS / "metadata.txt")]
        args.input_files_prefix = args.input_files_prefix or str(DEFAULT_CORPUS)
    # The documents as the generator reads them.
    texts = list(DocumentTexts(args.metadata_files, args.input_files_prefix or ""))
    megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6

    fast = SpacySentenceSplitter()
    oracle = SpacySentenceSplitter(force_spacy=True)
    if fast._rules is None:
        sys.exit("sentence_differential: the rule sentencizer does not serve this spaCy pipeline")
    built = fast._nlp is not None  # the rules were derived now (a cold cache), not read
    asked = []
    pipeline_starts = fast._pipeline_starts
    fast._pipeline_starts = lambda text: asked.append(len(text)) or pipeline_starts(text)
    whole = []
    paragraph_starts = fast._rules._paragraph_starts
    fast._rules._paragraph_starts = lambda text, ask: whole.append(len(text)) or paragraph_starts(text, ask)

    started = time.process_time()
    got = list(fast.split(texts))
    fast_seconds = time.process_time() - started
    started = time.process_time()
    expected = list(oracle.split(texts))
    oracle_seconds = time.process_time() - started

    differing = [i for i, (a, b) in enumerate(zip(got, expected)) if a != b]
    n_sentences = sum(map(len, expected))
    same_sentences = sum(len(a) for a, b in zip(got, expected) if a == b)
    print(f"{len(texts):,} documents, {megabytes:.2f} MB, {n_sentences:,} sentences (spaCy pipeline)")
    print(f"identical documents: {len(texts) - len(differing):,} of {len(texts):,} "
          f"({100 * (len(texts) - len(differing)) / max(1, len(texts)):.3f}%); "
          f"sentences in identical documents: {same_sentences:,} of {n_sentences:,}")
    print(f"CPU time: rules {fast_seconds:.2f} s ({megabytes / fast_seconds:.2f} MB/s), spaCy pipeline "
          f"{oracle_seconds:.2f} s ({megabytes / oracle_seconds:.2f} MB/s): {oracle_seconds / fast_seconds:.1f}x")
    print(f"tokenized whole by the rules: {len(whole)} paragraphs, {sum(whole):,} characters; "
          f"handed to spaCy: {len(asked)} paragraphs, {sum(asked):,} characters")
    print("spaCy pipeline used by the rules: "
          + ("built to derive the rules (a cold cache)" if built else "yes" if fast._nlp is not None else "no"))
    for i in differing[: args.show]:
        a, b = got[i], expected[i]
        k = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        print(f"  document {i}: sentence {k}: rules {a[k:k + 2]!r} / spaCy {b[k:k + 2]!r}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
