"""``bert-data build-vocab``: train a WordPiece ``vocab.txt``, a Hugging Face ``tokenizer.json``
(WordPiece, byte-level BPE, Unigram) or a SentencePiece model from the documents that metadata
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
examples:
  bert-data build-vocab --metadata_files examples/sample/metadata.txt \\
      --input_files_prefix examples/sample --vocab_size 4000 --do_lower_case --out vocab/vocab.txt
  bert-data build-vocab ... --model bpe --out tokenizer.json          # create_tfrecords --tokenizer_file
  bert-data build-vocab ... --model sentencepiece --out spm/m.model   # create_tfrecords --spm_model_file
                                                                      # (writes spm/m.vocab too)

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
    vocab.add_argument("--do_lower_case", action=argparse.BooleanOptionalAction, default=False,
                       help="lower-case and strip accents (uncased vocabulary); default: cased")
    vocab.add_argument("--min_frequency", type=int, default=2)
    vocab.add_argument("--limit_alphabet", type=int, default=1000)
    vocab.add_argument("--out", required=True, help="output file: vocab.txt, tokenizer.json or m.model")
    return parser


MODELS = ("wordpiece", "bpe", "unigram", "sentencepiece")


def split_commas(values: Sequence[str]) -> List[str]:
    return [value for item in values for value in item.split(",") if value]


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)

    from ..config import check_input_options, separator_line_of
    from ..generator.documents import DocumentTexts
    from ..generator import vocab_builder

    try:  # ConfigError, InputError (reading, even mid-training) and a bad --vocab_size are ValueErrors
        check_input_options(args.multiple_docs_in_single_file, args.multiple_docs_separator, args.jsonl_text_key)
        texts = DocumentTexts(split_commas(args.metadata_files), args.input_files_prefix,
                              multiple_docs_in_single_file=args.multiple_docs_in_single_file,
                              separator_line=separator_line_of(args.multiple_docs_separator),
                              jsonl_text_key=args.jsonl_text_key, skip_missing=args.skip_missing)
        for entry, reason in texts.missing:
            print(f"build-vocab: warning: {entry.metadata_file}:{entry.line_number}: skipped: {reason}: {entry.path}",
                  file=sys.stderr)
        size = train(args, texts, vocab_builder)
    except ValueError as error:
        print(f"build-vocab: {error}", file=sys.stderr)
        return 2
    if size is None:
        print("build-vocab: no document with any text: nothing to train on", file=sys.stderr)
        return 2
    note = ""
    if size < args.vocab_size:
        note = (f" (fewer than the requested {args.vocab_size}: the corpus supports no more pieces "
                f"with --min_frequency {args.min_frequency})")
    skipped = "".join(f", {count} skipped: {reason}" for reason, count in texts.skipped.items())
    also = f" and {args.out[:-len('.model')]}.vocab" if args.model == "sentencepiece" else ""
    print(f"build-vocab: wrote {size} tokens from {texts.n_docs} documents{skipped} to {args.out}{also}{note}",
          file=sys.stderr)
    return 0


def train(args, texts, vocab_builder) -> Optional[int]:
    """Train what ``--model`` asks and write ``--out``; returns the vocabulary size, or None when
    there was no text (nothing is written then)."""
    if args.model == "sentencepiece":
        if not args.out.endswith(".model"):
            raise ValueError(f"--out {args.out}: a SentencePiece model's name ends in .model (its .vocab goes beside it)")
        try:
            return vocab_builder.train_sentencepiece(texts, args.out, args.vocab_size, args.do_lower_case,
                                                     args.spm_model_type, args.character_coverage)
        except ValueError:
            if not texts.n_docs:  # SentencePiece fails on no text: say why
                return None
            raise
    if args.model == "wordpiece" and not args.out.endswith(".json"):
        tokens = vocab_builder.train_wordpiece_vocab(texts, vocab_size=args.vocab_size, do_lower_case=args.do_lower_case,
                                                     min_frequency=args.min_frequency, limit_alphabet=args.limit_alphabet)
        if not texts.n_docs:
            return None
        vocab_builder.write_vocab(tokens, args.out)
        return len(tokens)
    tokenizer = vocab_builder.train_hf_tokenizer(texts, args.model, args.vocab_size, args.do_lower_case,
                                                 args.min_frequency, args.limit_alphabet)
    if not texts.n_docs:
        return None
    vocab_builder.write_tokenizer(tokenizer, args.out)
    return tokenizer.get_vocab_size(with_added_tokens=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
