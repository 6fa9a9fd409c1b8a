"""``bert-data build-vocab``: train a WordPiece ``vocab.txt`` from the documents that metadata
files list (or ``--input_files`` name), read exactly as ``create_tfrecords`` reads them (same
input options; compressed and JSON Lines files included).

Only the standard library is imported until the options are parsed, so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional, Sequence

from .create_tfrecords import add_document_arguments
from .flags import add_bool, parse_args

EXAMPLE = """\
examples:
  bert-data build-vocab --metadata_files examples/sample/metadata.txt \\
      --input_files_prefix examples/sample --vocab_size 4000 --do_lower_case --out vocab/vocab.txt
  bert-data build-vocab --input_files 'corpus/*.txt' --vocab_size 30522 --do_lower_case --out vocab.txt

boolean options are absl-style: --flag, --flag=true|false or --noflag. Options are never
abbreviated. Input files ending in .gz, .bz2, .xz or .zst/.zstd are decompressed as they are
read (.zst needs pip install zstandard)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bert-data build-vocab",
        description="Train a BERT WordPiece vocabulary (vocab.txt) from the documents listed "
                    "in metadata files or given as paths or globs. For fine-tuning or continued "
                    "pretraining use your model's own vocabulary instead.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    inputs = parser.add_argument_group("input (as create_tfrecords)",
                                       "--metadata_files or --input_files names the documents")
    add_document_arguments(inputs, metadata_help=" (comma-separated also accepted)")
    add_bool(inputs, "--skip_missing", help="skip listed files that are missing, instead of stopping")
    vocab = parser.add_argument_group("vocabulary")
    vocab.add_argument("--vocab_size", type=int, default=30522, help="target size (default 30522)")
    add_bool(vocab, "--do_lower_case", help="lower-case and strip accents (uncased vocabulary); default: cased")
    # The spelling of earlier versions (argparse's BooleanOptionalAction).
    vocab.add_argument("--no-do_lower_case", dest="do_lower_case", action="store_false", help=argparse.SUPPRESS)
    vocab.add_argument("--min_frequency", type=int, default=2)
    vocab.add_argument("--limit_alphabet", type=int, default=1000)
    vocab.add_argument("--out", required=True, help="output vocab.txt")
    add_bool(parser, "--quiet", help="no progress bar (there is none either when stderr is not a terminal)")
    return parser


def split_commas(values: Sequence[str]) -> List[str]:
    return [value for item in values for value in item.split(",") if value]


class _Progress:
    """The documents, with a progress bar for each of the trainer's two passes over them."""

    def __init__(self, texts, enabled: bool):
        self.texts, self.enabled, self.passes = texts, enabled, 0

    def __iter__(self):
        from tqdm import tqdm

        self.passes += 1
        what = "counting characters" if self.passes == 1 else "training"
        with tqdm(total=self.texts.n_listed, unit="doc", desc=f"pass {self.passes}/2: {what}", file=sys.stderr,
                  disable=not self.enabled, dynamic_ncols=True) as bar:
            for text in self.texts:
                yield text
                bar.update(1)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(build_parser(), argv)

    from ..config import check_input_options, separator_line_of
    from ..generator.documents import DocumentTexts
    from ..generator.vocab_builder import train_wordpiece_vocab, write_vocab

    if not args.metadata_files and not args.input_files:
        print("build-vocab: error: no documents: give --metadata_files (files listing them) or --input_files "
              "(paths or globs)", file=sys.stderr)
        return 2
    try:  # ConfigError, InputError (reading, even mid-training) and a bad --vocab_size are ValueErrors
        check_input_options(args.multiple_docs_in_single_file, args.multiple_docs_separator, args.jsonl_text_key)
        texts = DocumentTexts(split_commas(args.metadata_files), args.input_files_prefix,
                              multiple_docs_in_single_file=args.multiple_docs_in_single_file,
                              separator_line=separator_line_of(args.multiple_docs_separator),
                              jsonl_text_key=args.jsonl_text_key, skip_missing=args.skip_missing,
                              input_files=args.input_files)
        for entry, reason in texts.missing:
            print(f"build-vocab: warning: {entry.metadata_file}:{entry.line_number}: skipped: {reason}: {entry.path}",
                  file=sys.stderr)
        progress = _Progress(texts, enabled=not args.quiet and sys.stderr.isatty())
        tokens = train_wordpiece_vocab(progress, vocab_size=args.vocab_size, do_lower_case=args.do_lower_case,
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
        note = (f" (fewer than the requested {args.vocab_size:,}: the corpus supports no more pieces "
                f"with --min_frequency {args.min_frequency})")
    skipped = "".join(f", {count:,} skipped: {reason}" for reason, count in texts.skipped.items())
    print(f"build-vocab: wrote {len(tokens):,} tokens from {texts.n_docs:,} documents{skipped} to {args.out}{note}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
