"""``create_tfrecords``: the BERT pretraining data generator (Cerebras-compatible options).

Only the standard library (and ``format.manifest``, which names the manifest file) is imported until
the options are parsed, so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ..format.manifest import MANIFEST_NAME

DESCRIPTION = """\
Turn raw text into BERT pretraining data: TFRecord shards of tf.train.Example with input_ids,
input_mask, segment_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights and
next_sentence_labels, exactly as Google's run_pretraining.py and Cerebras's
BertTfRecordsProcessor read them. Same inputs, options and seed give the same bytes, whatever
--num_workers is."""

EPILOG = """\
example:
  create_tfrecords --metadata_files examples/sample/metadata.txt \\
      --input_files_prefix examples/sample --vocab_file vocab/vocab.txt --do_lower_case \\
      --output_dir ./tfrecords --overwrite

input files ending in .gz, .bz2, .xz or .zst/.zstd are decompressed as they are read
(.zst needs pip install zstandard); .parquet, .arrow and .feather files are tables, one
document a row (pip install 'bert_data[parquet]').

paths (metadata files, --input_files_prefix, the listed files, --vocab_file, --output_dir,
--work_dir) may be URLs: s3://, gs://, hf://, https://, ... through fsspec
(pip install 'bert_data[cloud]'); credentials come from each library's usual environment.

output: OUTPUT_DIR/NAME-1.tfrecords .. NAME-N.tfrecords and the manifest OUTPUT_DIR/{manifest}
(with a validation split: OUTPUT_DIR/train/ and OUTPUT_DIR/val/, each laid out like that).""".format(manifest=MANIFEST_NAME)


def add_document_arguments(group, metadata_help: str = "") -> None:
    """The options that say which documents to read and how (``bert-data build-vocab`` reads
    documents with the same ones)."""
    group.add_argument("--metadata_files", nargs="+", required=True, metavar="FILE",
                       help="files listing the documents, one path per line (relative to "
                            "--input_files_prefix); several files are concatenated" + metadata_help)
    group.add_argument("--input_files_prefix", default="", metavar="DIR",
                       help="directory the metadata paths are relative to (default: as written)")
    group.add_argument("--multiple_docs_in_single_file", action="store_true",
                       help="each file holds many documents, separated by --multiple_docs_separator")
    group.add_argument("--multiple_docs_separator", default="\n", metavar="TEXT",
                       help="a line holding this text separates documents; the default \\n (typed "
                            "literally) means a blank line")
    # Where documents live (issue 14): one option names the text in tables and JSON Lines alike.
    group.add_argument("--text_column", "--jsonl_text_key", dest="jsonl_text_key", default=None, metavar="NAME",
                       help="the text's column in Parquet and Arrow files (.parquet, .arrow, .feather: one "
                            "document a row; default text) and its key in JSON Lines. Given, the other files "
                            "are read as JSON Lines: one document a line, its text the string at NAME. Rows "
                            "and lines without a text are skipped and counted. --jsonl_text_key is the same "
                            "option")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="create_tfrecords",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    inputs = parser.add_argument_group("input")
    add_document_arguments(inputs)
    inputs.add_argument("--single_sentence_per_line", action="store_true",
                        help="input is already one sentence per line (no spaCy); with "
                             "--multiple_docs_in_single_file this reads Google's input format")
    inputs.add_argument("--spacy_model", default=None, metavar="NAME_OR_PATH",
                        help="installed spaCy pipeline for sentence splitting (default: built-in "
                             "rule-based sentencizer, no download needed)")

    tokens = parser.add_argument_group("tokens")
    tokens.add_argument("--vocab_file", required=True, metavar="FILE",
                        help="WordPiece vocabulary (vocab.txt) of the model you will train")
    tokens.add_argument("--do_lower_case", action="store_true",
                        help="lower-case and strip accents (use with uncased vocabularies)")

    instances = parser.add_argument_group("instances and masking (as Google's create_pretraining_data.py)")
    instances.add_argument("--max_seq_length", type=int, default=128, help="tokens per instance (default 128)")
    instances.add_argument("--max_predictions_per_seq", type=int, default=20,
                           help="most masked-LM predictions per instance (default 20)")
    instances.add_argument("--masked_lm_prob", type=float, default=0.15,
                           help="fraction of tokens to mask, in (0, 1] (default 0.15)")
    instances.add_argument("--short_seq_prob", type=float, default=0.1,
                           help="probability of a shorter target length (default 0.1)")
    instances.add_argument("--short_seq_draw", choices=["document", "chunk"], default="document",
                           help="when the shorter target is drawn: once per document (default, as Google: a "
                                "long document that draws it becomes many short pairs) or per chunk (about "
                                "short_seq_prob of instances are short whatever the document sizes)")
    instances.add_argument("--min_short_seq_length", type=int, default=None,
                           help="shortest target length when short, in [2, max_seq_length - 3) (default 2)")
    instances.add_argument("--dupe_factor", type=int, default=10,
                           help="passes over the data, each with different masks (default 10)")
    instances.add_argument("--mask_whole_word", action="store_true",
                           help="mask all WordPiece pieces of a word together")
    instances.add_argument("--seed", type=int, default=0, help="random seed (default 0)")

    recipes = parser.add_argument_group("recipes after BERT")
    recipes.add_argument("--mlm_only", action="store_true",
                         help="masked LM only, no next-sentence task: windows of max_seq_length - 2 "
                              "contiguous tokens as [CLS] tokens [SEP]; records without segment_ids and "
                              "next_sentence_labels (Cerebras's MLM-only layout)")
    recipes.add_argument("--allow_cross_document_examples", action="store_true",
                         help="with --mlm_only: windows run on from one document into the next, with "
                              "--document_separator_token between them")
    recipes.add_argument("--document_separator_token", default="[SEP]", metavar="TOKEN",
                         help="with --allow_cross_document_examples: the vocabulary token between documents "
                              "(default [SEP]); never masked")
    recipes.add_argument("--overlap_size", type=int, default=None,
                         help="with --mlm_only: tokens a window shares with the previous one (default "
                              "max_seq_length / 4, as Cerebras)")
    recipes.add_argument("--disable_masking", action="store_true",
                         help="with --mlm_only: write unmasked input_ids and input_mask only, and mask at load "
                              "time (bert_data.load.loaders); needs --dupe_factor 1")
    recipes.add_argument("--max_ngram_size", type=int, default=1,
                         help="n-gram (span) masking as in TF Model Garden: spans of 1..N whole words, "
                              "shorter spans likelier (default 1: single tokens, or words with --mask_whole_word)")
    recipes.add_argument("--v2_feature_names", action="store_true",
                         help="name features input_word_ids and input_type_ids (TF Model Garden's BERT)")
    recipes.add_argument("--compression", choices=["gzip", "zlib"], default=None,
                         help="compress the shards; read them with "
                              "tf.data.TFRecordDataset(compression_type='GZIP' or 'ZLIB')")

    output = parser.add_argument_group("output")
    output.add_argument("--output_dir", default="./tfrecords/", metavar="DIR",
                        help=f"where shards and the manifest ({MANIFEST_NAME}) go: a directory or a URL "
                             "(s3://, gs://, ...: shards are staged locally and uploaded whole when complete, the "
                             "manifest last) (default ./tfrecords/)")
    output.add_argument("--num_output_files", type=int, default=10, help="shards per split (default 10)")
    sizing = output.add_mutually_exclusive_group()
    sizing.add_argument("--records_per_file", type=int, default=None, metavar="N",
                        help="size shards by records instead of --num_output_files: about N records each")
    sizing.add_argument("--megabytes_per_file", type=float, default=None, metavar="MB",
                        help="size shards by bytes instead of --num_output_files: about MB megabytes each "
                             "(TensorFlow's guidance for large datasets: 100-200 MB). The count of shards per "
                             "split is set when its first unit is paired, from an estimate of the split's "
                             "size; shards come out within a few percent of the target")
    output.add_argument("--name", default="examples", help="shard file name prefix (default examples)")
    output.add_argument("--overwrite", action="store_true",
                        help="replace output already in --output_dir (only files this tool writes)")
    output.add_argument("--resume", action="store_true",
                        help="continue an interrupted run in --output_dir (same options, vocabulary and "
                             "documents): finished units are kept, and the result is byte-identical to an "
                             "uninterrupted run")
    output.add_argument("--val_fraction", type=float, default=0.0,
                        help="fraction of documents, chosen by a stable hash of their path and --val_seed, "
                             "that go to OUTPUT_DIR/val (default 0: no validation split)")
    output.add_argument("--val_seed", type=int, default=0,
                        help="seed of the --val_fraction hash (default 0); --seed changes masks and pairs, "
                             "never which documents are held out")
    output.add_argument("--val_metadata_files", nargs="+", default=[], metavar="FILE",
                        help="metadata files listing validation documents (instead of --val_fraction); a "
                             "document listed there is left out of train even if --metadata_files lists it "
                             "(counted as n_docs_held_out in the train manifest)")

    work = parser.add_argument_group("work")
    work.add_argument("--split_num", type=int, default=1000,
                      help="documents per unit of work; random-next sentences come from the same "
                           "unit (default 1000). Units are uniform samples of the whole corpus, so every "
                           "stretch of every shard is too")
    work.add_argument("--keep_corpus_order", action="store_true",
                      help="units of neighbouring documents in listed order instead of a mixed corpus (e.g. "
                           "for a curriculum). Costs mixing: each shard then walks the corpus from its first "
                           "source to its last, and random-next sentences come from neighbouring documents; "
                           "a trainer's small shuffle buffer sees one region at a time")
    work.add_argument("--num_workers", type=int, default=None,
                      help="worker processes (default: all cores); output is identical for any value")
    cluster = work.add_mutually_exclusive_group()
    cluster.add_argument("--scheduler", metavar="ADDRESS", default=None,
                         help="run the work on the Dask cluster whose scheduler is at ADDRESS "
                              "(tcp://host:8786); inputs and the vocabulary must be URLs or on a file system "
                              "every worker reaches, and so must the work directory (see --work_dir). Needs "
                              "pip install -e \".[dask]\"")
    cluster.add_argument("--dask", action="store_true",
                         help="run the work on a local Dask cluster of --num_workers processes")
    work.add_argument("--work_dir", default=None, metavar="DIR_OR_URL",
                      help="where workers exchange intermediate data (token ids, pools, encoded pieces): a "
                           "directory, or a URL every worker reaches (s3://bucket/scratch) when a Dask cluster "
                           "shares no file system with this machine (default OUTPUT_DIR/.bert_data_work; with "
                           "--scheduler and an --output_dir URL, that URL's .bert_data_work). A run uses its own "
                           "folder inside it and removes it when done")
    work.add_argument("--skip_missing", action="store_true",
                      help="skip (and count) metadata entries whose file is missing, instead of stopping")
    work.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def config_from_args(args: argparse.Namespace):
    from ..config import GeneratorConfig

    options = vars(args).copy()
    for key in ("skip_missing", "quiet", "scheduler", "dask"):
        options.pop(key)
    return GeneratorConfig(**options)


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    from ..config import ConfigError
    from ..generator.documents import InputError
    from ..generator.runner import GenerationError, generate
    from ..generator.sentences import SentenceSplitterError
    from ..tokenization import VocabError

    try:
        config = config_from_args(args).validate()
        if args.scheduler or args.dask:
            from ..generator.executors import dask_executor

            with dask_executor(args.scheduler, config.workers) as (executor, parallelism):
                summary = generate(config, executor=executor, parallelism=parallelism,
                                   progress=not args.quiet, skip_missing=args.skip_missing)
        else:
            summary = generate(config, progress=not args.quiet, skip_missing=args.skip_missing)
    except (ConfigError, InputError, VocabError, SentenceSplitterError, GenerationError) as error:
        print(f"create_tfrecords: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("create_tfrecords: interrupted; no shard was completed. Run the same command with --resume "
              "to continue from the last finished unit", file=sys.stderr)
        return 130
    for split, manifest in summary.manifests.items():
        skipped = manifest["documents_skipped"]["count"]
        print(
            f"{split}: {manifest['n_examples']} examples from {manifest['n_docs']} documents in "
            f"{len(manifest['examples_per_file'])} files under {config.output_dir}"
            + (f" ({skipped} documents skipped, see {MANIFEST_NAME})" if skipped else ""),
            file=sys.stderr,
        )
    resumed = f" (resumed after unit {summary.resumed_from_unit})" if summary.resumed_from_unit else ""
    print(f"done in {summary.seconds:.1f} s{resumed}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
