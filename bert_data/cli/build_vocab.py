"""``bert-data build-vocab``: train a WordPiece ``vocab.txt`` from the documents that metadata
files list, read exactly as ``create_tfrecords`` reads them (same input options; compressed and
JSON Lines files included).

Only the standard library is imported until the options are parsed, so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional, Sequence

from .create_tfrecords import add_document_arguments

EXAMPLE = """\
example:
  bert-data build-vocab --metadata_files examples/sample/metadata.txt \\
      --input_files_prefix examples/sample --vocab_size 4000 --do_lower_case --out vocab/vocab.txt

input files ending in .gz, .bz2, .xz or .zst/.zstd are decompressed as they are read
(.zst needs pip install zstandard)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bert-data build-vocab",
        description="Train a BERT WordPiece vocabulary (vocab.txt) from the documents listed "
                    "in metadata files. For fine-tuning or continued pretraining use your "
                    "model's own vocabulary instead.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    inputs = parser.add_argument_group("input (as create_tfrecords)")
    add_document_arguments(inputs, metadata_help=" (comma-separated also accepted)")
    inputs.add_argument("--skip_missing", action="store_true",
                        help="skip metadata entries whose file is missing, instead of stopping")
    vocab = parser.add_argument_group("vocabulary")
    vocab.add_argument("--vocab_size", type=int, default=30522, help="target size (default 30522)")
    vocab.add_argument("--do_lower_case", action=argparse.BooleanOptionalAction, default=False,
                       help="lower-case and strip accents (uncased vocabulary); default: cased")
    vocab.add_argument("--min_frequency", type=int, default=2)
    vocab.add_argument("--limit_alphabet", type=int, default=1000)
    vocab.add_argument("--out", required=True, help="output vocab.txt")
    return parser


def split_commas(values: Sequence[str]) -> List[str]:
    return [value for item in values for value in item.split(",") if value]


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)

    from ..config import check_input_options, separator_line_of
    from ..generator.documents import DocumentTexts
    from ..generator.vocab_builder import train_wordpiece_vocab, write_vocab

    try:  # ConfigError, InputError (reading, even mid-training) and a bad --vocab_size are ValueErrors
        check_input_options(args.multiple_docs_in_single_file, args.multiple_docs_separator, args.jsonl_text_key)
        texts = DocumentTexts(split_commas(args.metadata_files), args.input_files_prefix,
                              multiple_docs_in_single_file=args.multiple_docs_in_single_file,
                              separator_line=separator_line_of(args.multiple_docs_separator),
                              jsonl_text_key=args.jsonl_text_key, skip_missing=args.skip_missing)
        for entry, reason in texts.missing:
            print(f"build-vocab: warning: {entry.metadata_file}:{entry.line_number}: skipped: {reason}: {entry.path}",
                  file=sys.stderr)
        tokens = train_wordpiece_vocab(texts, vocab_size=args.vocab_size, do_lower_case=args.do_lower_case,
                                       min_frequency=args.min_frequency, limit_alphabet=args.limit_alphabet)
    except ValueError as error:
        print(f"build-vocab: {error}", file=sys.stderr)
        return 2
    if not texts.n_docs:
        print("build-vocab: no document with any text: nothing to train on", file=sys.stderr)
        return 2
    write_vocab(tokens, args.out)
    note = ""
    if len(tokens) < args.vocab_size:
        note = (f" (fewer than the requested {args.vocab_size}: the corpus supports no more pieces "
                f"with --min_frequency {args.min_frequency})")
    skipped = "".join(f", {count} skipped: {reason}" for reason, count in texts.skipped.items())
    print(f"build-vocab: wrote {len(tokens)} tokens from {texts.n_docs} documents{skipped} to {args.out}{note}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
