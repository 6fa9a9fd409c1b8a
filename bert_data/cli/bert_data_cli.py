"""``bert-data``: inspect, verify and describe generated TFRecords; build a vocabulary.

Only the standard library is imported until a subcommand runs, so ``bert-data --help`` is
instant.  The work is done by ``bert_data.tools.inspect``, ``bert_data.tools.verify``,
``bert_data.tools.stats`` and ``bert_data.tokenizers.vocab_builder``.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from ..format.manifest import MANIFEST_NAME
from .flags import Parser
from ..redaction import redacting
from .flags import expand_home

DESCRIPTION = """\
Tools for BERT pretraining TFRecords made by create_tfrecords (or Google's
create_pretraining_data.py): look at records, check every one of them, summarise them,
and train a WordPiece vocabulary."""

EPILOG = f"""\
examples:
  bert-data inspect ./tfrecords/examples-1.tfrecords -n 3
  bert-data verify ./tfrecords
  bert-data stats ./tfrecords --plot stats.png
  bert-data build-vocab --metadata_files metadata.txt --vocab_size 30522 --out vocab.txt

Every record layout create_tfrecords writes is read (NSP, --mlm_only, --disable_masking,
--v2_feature_names), as {MANIFEST_NAME} describes it (for files without one: as their first
record shows), and gzip/zlib shards (--compression) as the manifest says, else as their first
bytes show (--compression forces it for files without manifest).

run 'bert-data COMMAND --help' for a command's options."""

# bert-data verify fails above this [UNK] rate (see tools.verify.DEFAULT_MAX_UNK_RATE, not imported: --help is instant).
DEFAULT_MAX_UNK_RATE = 0.01

COMPRESSION_HELP = (f"compression of files without {MANIFEST_NAME}: auto (default: from their first bytes), "
                    "none, gzip or zlib; a manifest's own compression always applies")


def _add_compression(p) -> None:
    p.add_argument("--compression", default="auto", choices=["auto", "none", "gzip", "zlib"], help=COMPRESSION_HELP)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="bert-data", description=DESCRIPTION, epilog=EPILOG,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("inspect", allow_abbrev=False, help="decode records to readable text",
                       description="Show records as text: segments A and B, the next-sentence label, "
                                   "and each masked-LM position as shown{original}: [MASK]{cat} was "
                                   "masked, cat{=} kept, dog{cat} replaced by a random token.")
    p.add_argument("shard", help="a .tfrecords file (or an output directory: its first shard)")
    p.add_argument("--vocab_file", default=None,
                   help="vocabulary to show tokens: a vocab.txt, tokenizer.json or SentencePiece model "
                        "(default: the one the manifest records; else ids)")
    p.add_argument("-n", "--num_records", type=int, default=5, help="records to show (default 5)")
    p.add_argument("--start", type=int, default=0, help="first record to show (default 0)")
    p.add_argument("--json", action="store_true", help="one JSON object per record")
    p.add_argument("--mask_seed", type=int, default=None, metavar="SEED",
                   help="unmasked (--disable_masking) records: preview the masks load-time masking would draw "
                        "with this seed (the manifest's masking options)")
    _add_compression(p)

    p = sub.add_parser("verify", allow_abbrev=False, help="check every record (exit status 0 only if all is well)",
                       description="Check framing and CRCs, the feature layout, token ids, positions, "
                                   f"weights, segments, [CLS]/[SEP] and the counts in {MANIFEST_NAME}, "
                                   "for every record. Exit status 0 only if everything holds, 1 with "
                                   "the first problems (FILE: record N: problem) otherwise.")
    p.add_argument("paths", nargs="+", metavar="OUT_DIR_OR_FILES",
                   help=f"output directories (with {MANIFEST_NAME}; train/ and val/ are both checked), "
                        ".tfrecords files or globs")
    p.add_argument("--vocab_file", default=None,
                   help="vocabulary for the id checks: a vocab.txt, tokenizer.json or SentencePiece model "
                        "(default: the one the manifest records)")
    p.add_argument("--max_problems", type=int, default=20, help="problems to list (default 20)")
    p.add_argument("--max_unk_rate", type=float, default=DEFAULT_MAX_UNK_RATE, metavar="FRACTION",
                   help=f"fail when more than this fraction of a dataset's text tokens is [UNK] (default "
                        f"{DEFAULT_MAX_UNK_RATE:g}: text tokenized with the right vocabulary is far below it, an "
                        "uncased vocabulary read without do_lower_case far above; 1 never fails)")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per file")
    _add_compression(p)

    p = sub.add_parser("stats", allow_abbrev=False, help="summarise the records (lengths, masking, NSP, [UNK], top tokens)",
                       description="Tokens per instance, short sequences, predictions per instance, the "
                                   "[MASK]/kept/random split, NSP balance, [UNK] rate and top tokens.")
    p.add_argument("paths", nargs="+", metavar="OUT_DIR", help="output directory (or .tfrecords files)")
    p.add_argument("--vocab_file", default=None,
                   help="vocabulary: a vocab.txt, tokenizer.json or SentencePiece model (default: the one the "
                        "manifest records)")
    p.add_argument("--plot", default=None, metavar="PNG",
                   help="also write histograms to this PNG (needs matplotlib: pip install 'bert_data[plot]')")
    p.add_argument("--limit", type=int, default=None, help="only the first N records of each dataset")
    p.add_argument("--top", type=int, default=20, help="most frequent tokens to list (default 20)")
    p.add_argument("--mixing", nargs="+", default=[], metavar="TOKEN",
                   help="how well mixed the shards are: the share of records holding any of these tokens of "
                        "the vocabulary (e.g. a topic word of one part of the corpus) in each window of each "
                        "shard, against the shard's share; reports the worst gap (see docs/mixing.md)")
    p.add_argument("--windows", type=int, default=10, metavar="N",
                   help="windows a shard is cut into for --mixing (default 10: tenths)")
    p.add_argument("--json", action="store_true",
                   help="print the statistics as JSON (one object; a list for train/ and val/)")
    _add_compression(p)

    sub.add_parser("build-vocab", allow_abbrev=False,
                   help="train a vocabulary: WordPiece vocab.txt, tokenizer.json (BPE, Unigram, WordPiece) or "
                        "SentencePiece model",
                   add_help=False)
    return parser


@redacting
def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "build-vocab":
        from .build_vocab import main as build_vocab_main

        return build_vocab_main(argv[1:])
    parser = build_parser()
    args = expand_home(parser.parse_args(argv))
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    manifest_given = _manifest_given(args)
    if manifest_given:
        return _error(args.command, manifest_given)
    try:
        return {"inspect": _inspect, "verify": _verify, "stats": _stats}[args.command](args)
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
        return 0


def _manifest_given(args) -> str:
    """The dataset's manifest given where its shards are expected (the one file of a dataset anyone
    opens by hand): what to give instead, or ""."""
    from ..format.manifest import MANIFEST_NAME

    for path in [args.shard] if args.command == "inspect" else args.paths:
        if os.path.basename(str(path).rstrip("/")) == MANIFEST_NAME:
            return f"{path} is the dataset's manifest, not a shard: give its directory, {os.path.dirname(path) or '.'}"
    return ""


def _compression(args):
    return None if args.compression == "none" else args.compression


def _error(command: str, message: str) -> int:
    print(f"bert-data {command}: error: {message}", file=sys.stderr)
    return 2


def _count_records(shard: str, compression) -> int:
    """How many records a shard holds, for the message when --start is past its end."""
    from ..tools.inspect import inspect_records

    return sum(1 for _ in inspect_records(shard, None, 1 << 62, 0, compression=compression))


def _inspect(args) -> int:
    from ..tools.inspect import LEGEND, LEGEND_WITHOUT_VOCAB, format_record, inspect_records, record_json
    from ..format.tfrecord import CorruptRecordError
    from ..tokenizers.vocab import VocabError

    if args.num_records < 0 or args.start < 0:
        return _error("inspect", "-n and --start must not be negative")
    if args.mask_seed is not None and args.mask_seed < 0:
        return _error("inspect", "--mask_seed must not be negative")
    try:
        import json

        shown = 0
        from ..tools.corpus_view import inspect_documents, is_corpus, vocabulary_for
        from ..tools.inspect import _resolve_shard

        shard = _resolve_shard(args.shard)
        if is_corpus(shard):  # Megatron's tokenized corpus: documents, not instances
            for text in inspect_documents(shard, vocabulary_for(shard, args.vocab_file), args.num_records, args.start):
                print(text)
            return 0
        for rec in inspect_records(args.shard, args.vocab_file, args.num_records, args.start,
                                   compression=_compression(args), mask_seed=args.mask_seed):
            if args.json:
                print(json.dumps(record_json(rec)))
            else:
                if shown == 0:
                    no_vocab = not rec.tokens or rec.tokens[0].isdigit()
                    if no_vocab:
                        print("note: no vocabulary found (pass --vocab_file): token ids are shown, and a masked "
                              "position is told only as kept or changed ([MASK] or random: not guessed)",
                              file=sys.stderr)
                    if rec.has_masks:
                        print(LEGEND_WITHOUT_VOCAB if no_vocab else LEGEND)
                print(format_record(rec))
            shown += 1
        if shown == 0 and args.num_records > 0:
            return _error("inspect", f"{shard}: no record at or after --start {args.start:,}; it holds "
                          f"{_count_records(shard, _compression(args)):,} (inspect reads one shard)")
    except BrokenPipeError:
        raise  # piped into head: main stops quietly
    except (CorruptRecordError, VocabError, ValueError, OSError, ImportError) as error:
        return _error("inspect", str(error))
    return 0


def _verify(args) -> int:
    from ..tokenizers.vocab import VocabError
    from ..tools.verify import verify

    def on_file(result):
        if args.verbose:
            expected = f" (manifest: {result.expected})" if result.expected is not None else ""
            status = "OK" if not result.problems else f"{result.problems} problem(s)"
            print(f"{result.path}: {result.records} records{expected}, {result.bytes / 1e6:.1f} MB: {status}",
                  file=sys.stderr)

    try:
        if not 0 <= args.max_unk_rate <= 1:
            return _error("verify", f"--max_unk_rate must be in [0, 1], got {args.max_unk_rate}")
        report = verify(args.paths, vocab_file=args.vocab_file, max_problems=args.max_problems,
                        on_file=on_file, compression=_compression(args), max_unk_rate=args.max_unk_rate)
    except (VocabError, ValueError, OSError, ImportError) as error:  # ImportError: protobuf, see format.tfrecord.example_proto
        return _error("verify", str(error))
    for note in report.notes:
        print(f"note: {note}")
    for warning in report.warnings:
        print(f"warning: {warning}")
    for problem in report.problems:
        print(problem)
    if len(report.splits) > 1:  # train/ and val/ (or several datasets): each on its own
        for split in report.splits:
            print(split)
    print(report.summary())
    return 0 if report.ok else 1


def _stats(args) -> int:
    from ..tools.stats import check_plotting, compute_stats, format_stats, plot_stats
    from ..format.tfrecord import CorruptRecordError
    from ..tokenizers.vocab import VocabError

    try:
        if args.plot:
            check_plotting()  # before scanning: a missing matplotlib must not cost a whole pass
        if args.windows < 1:
            raise ValueError(f"--windows must be at least 1, got {args.windows}")
        from ..format.dataset import shard_sets
        from ..tools.corpus_view import corpus_summary, is_corpus

        corpora = [found for found in shard_sets(args.paths) if found.files and is_corpus(found.files[0])]
        for shard_set in corpora:  # Megatron's tokenized corpus: its counts (instances are made at train time)
            print(corpus_summary(shard_set.name, shard_set.files, shard_set.manifest))
        stats = compute_stats(args.paths, vocab_file=args.vocab_file, limit=args.limit,
                              compression=_compression(args), mixing=args.mixing, windows=args.windows)
        if corpora and not stats:
            return 0
    except (CorruptRecordError, VocabError, ValueError, OSError, ImportError, RuntimeError) as error:
        return _error("stats", str(error))
    if args.json:
        import json

        out = [st.to_dict(args.top) for st in stats]
        print(json.dumps(out[0] if len(out) == 1 else out))
    else:
        print("\n\n".join(format_stats(st, args.top) for st in stats))
    if args.plot:
        try:
            plot_stats(stats, args.plot)
        except RuntimeError as error:
            return _error("stats", str(error))
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
