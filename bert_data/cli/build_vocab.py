"""``bert-data build-vocab``: train a WordPiece ``vocab.txt``, a Hugging Face ``tokenizer.json``
(WordPiece, byte-level BPE, Unigram) or a SentencePiece model from the documents that metadata
files list (or ``--input_files`` name), read exactly as ``create_tfrecords`` reads them (same
input options; compressed and JSON Lines files included).

Only the standard library is imported until the options are parsed, so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional, Sequence

from .create_tfrecords import add_document_arguments
from .flags import Parser, add_bool, parse_args
from ..redaction import redacting

EXAMPLE = """\
examples:
  bert-data build-vocab --metadata_files examples/sample/metadata.txt \\
      --input_files_prefix examples/sample --vocab_size 4000 --do_lower_case --out vocab/vocab.txt
  bert-data build-vocab --input_files 'corpus/*.txt' --vocab_size 30522 --do_lower_case --out vocab.txt
  bert-data build-vocab ... --model bpe --out tokenizer.json          # create_tfrecords --tokenizer_file
  bert-data build-vocab ... --model sentencepiece --out spm/m.model   # create_tfrecords --spm_model_file
                                                                      # (writes spm/m.vocab too)

boolean options are absl-style: --flag, --flag=true|false, --flag false or --noflag. Options
are never abbreviated. Input files ending in .gz, .bz2, .xz or .zst/.zstd are decompressed as they are
read (.zst needs pip install zstandard)."""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="bert-data build-vocab",
        description="Train a vocabulary (BERT's WordPiece vocab.txt, a Hugging Face tokenizer.json or a "
                    "SentencePiece model) from the documents listed in metadata files or given as paths or "
                    "globs. For fine-tuning or continued pretraining use your model's own vocabulary instead.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    inputs = parser.add_argument_group("input (as create_tfrecords)",
                                       "--metadata_files or --input_files names the documents")
    add_document_arguments(inputs, metadata_help=" (comma-separated also accepted)")
    add_bool(inputs, "--skip_missing", help="skip listed files that are missing, instead of stopping")
    vocab = parser.add_argument_group("vocabulary")
    vocab.add_argument("--model", choices=MODELS, default="wordpiece",
                       help="wordpiece (default): BERT's vocab.txt, or a tokenizer.json when --out ends in .json; "
                            "bpe, unigram: a Hugging Face tokenizer.json (byte-level BPE; SentencePiece-style "
                            "Unigram); sentencepiece: a SentencePiece model as ALBERT's (--out m.model, and "
                            "m.vocab beside it; needs pip install sentencepiece)")
    vocab.add_argument("--spm_model_type", choices=["unigram", "bpe", "char", "word"], default="unigram",
                       help="with --model sentencepiece: its algorithm (default unigram, as ALBERT)")
    vocab.add_argument("--character_coverage", type=float, default=0.9995,
                       help="with --model sentencepiece: share of characters the model covers (default 0.9995)")
    vocab.add_argument("--vocab_size", type=int, default=30522, help="target size (default 30522)")
    add_bool(vocab, "--do_lower_case", help="lower-case and strip accents (uncased vocabulary); default: cased")
    # The spelling of earlier versions (argparse's BooleanOptionalAction).
    vocab.add_argument("--no-do_lower_case", dest="do_lower_case", action="store_false", help=argparse.SUPPRESS)
    vocab.add_argument("--min_frequency", type=int, default=2)
    vocab.add_argument("--limit_alphabet", type=int, default=1000)
    vocab.add_argument("--out", required=True, help="output file: vocab.txt, tokenizer.json or m.model")
    add_bool(parser, "--quiet", help="no progress bar (there is none either when stderr is not a terminal)")
    return parser


MODELS = ("wordpiece", "bpe", "unigram", "sentencepiece")


def split_commas(values: Sequence[str]) -> List[str]:
    return [value for item in values for value in item.split(",") if value]


class _Progress:
    """The documents, with a progress bar for each of the trainer's two passes over them."""

    def __init__(self, texts, enabled: bool, total: int = 2):
        self.texts, self.enabled, self.passes, self.total = texts, enabled, 0, total

    def __iter__(self):
        from tqdm import tqdm

        self.passes += 1
        what = "counting characters" if self.passes < self.total else "training"
        with tqdm(total=self.texts.n_listed, unit="doc", desc=f"pass {self.passes}/{self.total}: {what}", file=sys.stderr,
                  disable=not self.enabled, dynamic_ncols=True) as bar:
            for text in self.texts:
                yield text
                bar.update(1)


@redacting
def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(build_parser(), argv)

    from ..config import check_input_options, input_encoding_of, separator_line_of
    from ..pipeline.documents.reading import DocumentTexts
    from ..tokenizers import vocab_builder

    if not args.metadata_files and not args.input_files:
        print("build-vocab: error: no documents: give --metadata_files (files listing them) or --input_files "
              "(paths or globs)", file=sys.stderr)
        return 2
    try:  # ConfigError, InputError (reading, even mid-training) and a bad --vocab_size are ValueErrors
        check_input_options(args.multiple_docs_in_single_file, args.multiple_docs_separator, args.text_field)
        texts = DocumentTexts(split_commas(args.metadata_files), args.input_files_prefix,
                              multiple_docs_in_single_file=args.multiple_docs_in_single_file,
                              separator_line=separator_line_of(args.multiple_docs_separator),
                              text_field=args.text_field, skip_missing=args.skip_missing,
                              input_files=args.input_files,
                              allow_outside_prefix=args.allow_paths_outside_prefix,
                              encoding=input_encoding_of(args.input_encoding),
                              read_path_lists_as_text=args.read_path_lists_as_text)
        for entry, reason in texts.missing:
            print(f"build-vocab: warning: {entry.metadata_file}:{entry.line_number}: skipped: {reason}: {entry.path}",
                  file=sys.stderr)
        size = train(args, texts, vocab_builder, enabled=not args.quiet and sys.stderr.isatty())
    except ValueError as error:
        print(f"build-vocab: {error}", file=sys.stderr)
        return 2
    if size is None:
        print("build-vocab: no document with any text: nothing to train on", file=sys.stderr)
        return 2
    note = ""
    if size < args.vocab_size:
        note = (f" (fewer than the requested {args.vocab_size:,}: the corpus supports no more pieces "
                f"with --min_frequency {args.min_frequency})")
    if texts.undecoded.n_docs:
        print(f"build-vocab: warning: {texts.undecoded.describe(texts.encoding)}", file=sys.stderr)
    skipped = "".join(f", {count:,} skipped: {reason}" for reason, count in texts.skipped.items())
    also = f" and {args.out[:-len('.model')]}.vocab" if args.model == "sentencepiece" else ""
    print(f"build-vocab: wrote {size:,} tokens from {texts.n_docs:,} documents{skipped} to {args.out}{also}{note}",
          file=sys.stderr)
    return 0


def train(args, texts, vocab_builder, enabled: bool) -> Optional[int]:
    """Train what ``--model`` asks and write ``--out``; returns the vocabulary size, or None when
    there was no text (nothing is written then).  ``enabled``: progress bars."""
    two_passes = args.model == "wordpiece"  # WordPiece counts characters first; the others read once
    documents = _Progress(texts, enabled, total=2 if two_passes else 1)
    if args.model == "sentencepiece":
        if not args.out.endswith(".model"):
            raise ValueError(f"--out {args.out}: a SentencePiece model's name ends in .model (its .vocab goes beside it)")
        try:
            return vocab_builder.train_sentencepiece(documents, args.out, args.vocab_size, args.do_lower_case,
                                                     args.spm_model_type, args.character_coverage)
        except ValueError:
            if not texts.n_docs:  # SentencePiece fails on no text: say why
                return None
            raise
    if args.model == "wordpiece" and not args.out.endswith(".json"):
        tokens = vocab_builder.train_wordpiece_vocab(documents, vocab_size=args.vocab_size,
                                                     do_lower_case=args.do_lower_case,
                                                     min_frequency=args.min_frequency, limit_alphabet=args.limit_alphabet)
        if not texts.n_docs:
            return None
        vocab_builder.write_vocab(tokens, args.out)
        return len(tokens)
    tokenizer = vocab_builder.train_hf_tokenizer(documents, args.model, args.vocab_size, args.do_lower_case,
                                                 args.min_frequency, args.limit_alphabet)
    if not texts.n_docs:
        return None
    vocab_builder.write_tokenizer(tokenizer, args.out)
    return tokenizer.get_vocab_size(with_added_tokens=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
