"""``create_tfrecords``: the BERT pretraining data generator, with Cerebras's options, and
Google's and ALBERT's ``create_pretraining_data.py`` command lines as they are (``cli.compat``).

Only the standard library (and ``format.manifest``, which names the manifest file) is imported until
the options are parsed, so ``--help`` is instant.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import List, Optional

from .. import notices
from ..config import default_of
from ..format.manifest import MANIFEST_NAME
from ..format.output_formats import FORMATS
from ..format.dataset_layout import WORK_DIR
from .compat import add_google_arguments, resolve
from .flags import Parser, add_bool, parse_args
from ..redaction import redacting

DESCRIPTION = """\
Turn raw text into BERT pretraining data: TFRecord shards of tf.train.Example with input_ids,
input_mask, segment_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights and
next_sentence_labels, exactly as Google's run_pretraining.py and Cerebras's
BertTfRecordsProcessor read them. Same inputs, options and seed give the same bytes, whatever
--num_workers is."""

EPILOG = """\
examples:
  create_tfrecords --metadata_files examples/sample/metadata.txt \\
      --input_files_prefix examples/sample --vocab_file vocab/vocab.txt --do_lower_case \\
      --output_dir ./tfrecords --overwrite
  create_tfrecords --input_files 'corpus/*.txt' --vocab_file vocab.txt --do_lower_case --output_dir out/
  create_tfrecords --input_file=examples/google/sample_text.txt --output_file=/tmp/tf_examples.tfrecord \\
      --vocab_file=vocab/vocab.txt --do_lower_case=True --max_seq_length=128 \\
      --max_predictions_per_seq=20 --masked_lm_prob=0.15 --random_seed=12345 --dupe_factor=5

boolean options are absl-style, as in Google's tool: --flag, --flag=true|false (True/False, 1/0,
yes/no) or --noflag; --flag false (a separate word) too. Options are never abbreviated.

input files ending in .gz, .bz2, .xz or .zst/.zstd are decompressed as they are read
(.zst needs pip install zstandard); .parquet, .arrow and .feather files are tables, one
document a row (pip install 'bert_data[parquet]').

paths (metadata files, --input_files_prefix, the listed files, --vocab_file, --output_dir,
--work_dir) may be URLs: s3://, gs://, hf://, https://, ... through fsspec
(pip install 'bert_data[cloud]'); credentials come from each library's usual environment.

output: OUTPUT_DIR/NAME-1.tfrecords .. NAME-N.tfrecords and the manifest OUTPUT_DIR/{manifest}
(with a validation split: OUTPUT_DIR/train/ and OUTPUT_DIR/val/, each laid out like that); with
--output_file, the named files and FIRST_FILE.{manifest} beside them.

exit status: 0 done, 2 bad options or input (one line says which), 130 after Ctrl-C and 143
after SIGTERM (finished units are kept for --resume).""".format(manifest=MANIFEST_NAME)


def add_document_arguments(group, metadata_help: str = "") -> None:
    """The options that say which documents to read and how (``bert-data build-vocab`` reads
    documents with the same ones)."""
    group.add_argument("--metadata_files", nargs="+", default=[], metavar="FILE",
                       help="files listing the documents, one path per line (relative to "
                            "--input_files_prefix); several files are concatenated" + metadata_help)
    group.add_argument("--input_files", nargs="+", default=[], metavar="PATH_OR_GLOB",
                       help="documents given directly: paths or globs (quote them; comma-separated lists too), "
                            "relative to --input_files_prefix; instead of or after --metadata_files")
    group.add_argument("--input_files_prefix", default=default_of("input_files_prefix"), metavar="DIR",
                       help="directory the document paths are relative to (default: as written); a metadata "
                            "entry that resolves outside it (.., an absolute path, a symbolic link leading out) "
                            "is refused")
    add_bool(group, "--allow_paths_outside_prefix",
             help="read metadata entries that resolve outside --input_files_prefix")
    add_bool(group, "--read_path_lists_as_text",
             help="read an --input_files file whose lines are all paths of existing files as text (by default "
                  "refused: it looks like a metadata file, which --metadata_files reads)")
    group.add_argument("--input_encoding", default=default_of("input_encoding"), metavar="NAME",
                       help="the encoding of the text files: any Python codec (latin-1, cp1252, utf-16, shift_jis, "
                            "...), or auto: detected per file from its first 64 KiB (UTF-8 if it is; needs pip install "
                            "'bert_data[encoding]'). Default utf-8; a file starting with a UTF-16 or UTF-32 "
                            "byte-order mark is read as such. Bytes not in the encoding are replaced, and reported")
    add_bool(group, "--multiple_docs_in_single_file",
             help="each file holds many documents, separated by --multiple_docs_separator")
    group.add_argument("--multiple_docs_separator", default=default_of("multiple_docs_separator"), metavar="TEXT",
                       help="a line holding this text separates documents; the default \\n (typed "
                            "literally) means a blank line")
    # One option names the text in tables and JSON Lines alike; the older names stay as aliases.
    group.add_argument("--text_field", "--text_column", "--jsonl_text_key", dest="text_field", default=None,
                       metavar="NAME",
                       help="the text's column in Parquet and Arrow files (.parquet, .arrow, .feather: one "
                            "document a row) and its key in JSON Lines (one document a line, its text the string "
                            "at NAME); default text. Given, every file that is not a table is read as JSON Lines, "
                            "whatever its extension. Rows and lines without a text are skipped and counted. "
                            "--text_column and --jsonl_text_key are the same option")


def add_tokenizer_arguments(group) -> None:
    """The tokenizers besides a WordPiece vocab.txt, and their special tokens (bert_data.tokenizers)."""
    group.add_argument("--tokenizer_file", default=None, metavar="FILE",
                       help="a Hugging Face tokenizers tokenizer.json (WordPiece, BPE, Unigram...) instead of "
                            "--vocab_file; it does its own normalisation (no --do_lower_case)")
    group.add_argument("--spm_model_file", default=None, metavar="FILE",
                       help="a SentencePiece model, tokenized as ALBERT does (needs pip install sentencepiece); "
                            "--do_lower_case lower-cases first")
    for role, default in (("cls", "[CLS]"), ("sep", "[SEP]"), ("mask", "[MASK]"), ("pad", "[PAD]"),
                          ("unk", "[UNK]")):
        group.add_argument(f"--{role}_token", default=None, metavar="TOKEN",
                           help=f"the tokenizer's {role} token (default: the tokenizer's own, else {default})")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="create_tfrecords",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    inputs = parser.add_argument_group(
        "input", "one of --metadata_files, --input_files, --input_file (Google's) or --sources names the documents")
    add_document_arguments(inputs)
    add_bool(inputs, "--single_sentence_per_line",
             help="input is already one sentence per line (no spaCy); with --multiple_docs_in_single_file "
                  "this reads Google's input format")
    inputs.add_argument("--spacy_model", default=None, metavar="NAME_OR_PATH",
                        help="installed spaCy pipeline for sentence splitting (default: built-in "
                             "rule-based sentencizer, no download needed)")
    inputs.add_argument("--sources", default=None, metavar="FILE",
                        help="a TOML or JSON file of [[source]] tables instead of --metadata_files/--input_files: "
                             "each with a name, its inputs (metadata_files and input_files_prefix, or input_files "
                             "globs: text, JSON Lines, Parquet, URLs) and one of weight (repeat factor: 2.0 takes "
                             "every document twice, 0.2 a seeded fifth), tokens (a token budget) or share (a share "
                             "of the run's tokens); realized to the document, and reported per source in the "
                             "manifest (docs/recipes.md)")
    add_bool(inputs, "--record_provenance",
             help="add to every record its source_index (place in --sources, 0 without it) and document_index "
                  "(the document's place in its source's listing): an int64 feature or column that Google's "
                  "run_pretraining.py and other readers ignore; bert-data inspect shows it")

    tokens = parser.add_argument_group("tokens")
    tokens.add_argument("--vocab_file", default=default_of("vocab_file"), metavar="FILE",
                        help="WordPiece vocabulary (vocab.txt) of the model you will train (required, unless "
                             "--tokenizer_file or --spm_model_file; with the latter, optional: the vocabulary whose "
                             "line numbers are the ids)")
    add_bool(tokens, "--do_lower_case", default=None,
             help="lower-case and strip accents (use with uncased vocabularies; default "
                  f"{str(default_of('do_lower_case')).lower()}, with --input_file true as Google's)")
    add_bool(tokens, "--allow_case_mismatch",
             help="run even though the vocabulary's case disagrees with --do_lower_case (by default that "
                  "stops the run, with the [UNK] rate measured on the first documents)")
    add_tokenizer_arguments(tokens)

    instances = parser.add_argument_group("instances and masking (as Google's create_pretraining_data.py)")
    instances.add_argument("--max_seq_length", type=int, default=None,
                           help=f"tokens per instance (default {default_of('max_seq_length')})")
    instances.add_argument("--max_predictions_per_seq", type=int, default=default_of("max_predictions_per_seq"),
                           help=f"most masked-LM predictions per instance (default {default_of('max_predictions_per_seq')}; "
                                "use about max_seq_length * masked_lm_prob: a lower cap masks fewer tokens, with a "
                                "warning)")
    instances.add_argument("--masked_lm_prob", type=float, default=default_of("masked_lm_prob"),
                           help=f"fraction of tokens to mask, in (0, 1] (default {default_of('masked_lm_prob')})")
    instances.add_argument("--short_seq_prob", type=float, default=default_of("short_seq_prob"),
                           help=f"probability of a shorter target length (default {default_of('short_seq_prob')})")
    instances.add_argument("--short_seq_draw", choices=["document", "chunk"], default=default_of("short_seq_draw"),
                           help="when the shorter target is drawn: once per document (default, as Google: a "
                                "long document that draws it becomes many short pairs) or per chunk (about "
                                "short_seq_prob of instances are short whatever the document sizes)")
    instances.add_argument("--min_short_seq_length", type=int, default=None,
                           help="shortest target length when short, in [2, max_seq_length - 3) (default 2)")
    instances.add_argument("--dupe_factor", type=int, default=None,
                           help=f"passes over the data, each with different masks (default {default_of('dupe_factor')})")
    add_bool(instances, "--mask_whole_word", "--do_whole_word_mask", default=None,
             help="mask all WordPiece pieces of a word together (--do_whole_word_mask: Google's name)")
    instances.add_argument("--seed", type=int, default=None,
                           help=f"random seed (default {default_of('seed')}, with --input_file 12345 as Google's; "
                                "--random_seed too)")
    add_bool(instances, "--sentence_order_prediction", default=None,
             help="ALBERT's sentence-order task instead of next-sentence prediction: B always follows A in the "
                  "document, and half the pairs are swapped (label 1); still written as next_sentence_labels "
                  "(default false; with ALBERT's command line true unless --random_next_sentence)")

    recipes = parser.add_argument_group("recipes after BERT")
    add_bool(recipes, "--mlm_only",
             help="masked LM only, no next-sentence task: windows of max_seq_length - 2 contiguous tokens as "
                  "[CLS] tokens [SEP]; records without segment_ids and next_sentence_labels (Cerebras's "
                  "MLM-only layout)")
    add_bool(recipes, "--allow_cross_document_examples",
             help="with --mlm_only: windows run on from one document into the next, with "
                  "--document_separator_token between them")
    recipes.add_argument("--document_separator_token", default=default_of("document_separator_token"),
                         metavar="TOKEN",
                         help="with --allow_cross_document_examples: the vocabulary token between documents "
                              f"(default {default_of('document_separator_token')}); never masked")
    recipes.add_argument("--overlap_size", type=int, default=None,
                         help="with --mlm_only: tokens a window shares with the previous one (default "
                              "max_seq_length / 4, as Cerebras)")
    add_bool(recipes, "--disable_masking",
             help="with --mlm_only: write unmasked input_ids and input_mask only, and mask at load time "
                  "(bert_data.load); needs --dupe_factor 1")
    recipes.add_argument("--max_ngram_size", "--ngram", type=int, default=None,
                         help="n-gram (span) masking as in TF Model Garden and ALBERT (--ngram): spans of 1..N "
                              f"whole words, shorter spans likelier (default {default_of('max_ngram_size')}: single "
                              "tokens, or words with --mask_whole_word)")
    add_bool(recipes, "--span_masking",
             help="SpanBERT's span masking: spans of whole words, lengths geometric (p 0.2, at most 10 words, "
                  "mean 3.8), until masked_lm_prob of the tokens are chosen")
    add_bool(recipes, "--store_word_starts",
             help="store each token's word start (a word_starts feature or column, 1 where a word starts, as the "
                  "tokenizer splits words) for load-time whole-word, n-gram and span masks with a tokenizer whose "
                  "pieces show no word start (no ##, \u2581 or \u0120); on by itself when such masks are drawn at "
                  "generation")
    add_bool(recipes, "--v2_feature_names",
             help="name features input_word_ids and input_type_ids (TF Model Garden's BERT)")
    add_bool(recipes, "--pack_sequences",
             help="pack instances into rows of max_seq_length (Graphcore's packed BERT): input_mask holds "
                  "each token's instance index (1..k), positions restart at 0 for each instance, and the "
                  "pair task has next_sentence_positions/labels/weights of k each; no padding spent, "
                  "no attention across instances; Parquet and MDS rows hold position_ids instead "
                  "(docs/packing.md)")
    recipes.add_argument("--max_sequences_per_pack", type=int, default=None, metavar="K",
                         help="with --pack_sequences: the most instances a row holds (default 16, or as many of the "
                              "shortest instances as fit in max_seq_length; Graphcore's 3 caps the fill)")
    recipes.add_argument("--compression", choices=["gzip", "zlib", "zstd", "snappy"], default=None,
                         help="compress the shards as their format does: tfrecord gzip or zlib (read with "
                              "tf.data.TFRecordDataset(compression_type='GZIP' or 'ZLIB')), hdf5 gzip (as NVIDIA's "
                              "files), parquet snappy, zstd or gzip, mds zstd or gzip (default: none)")

    screening = parser.add_argument_group(
        "deduplication and decontamination (docs/recipes.md)",
        "words are compared normalized: NFKC, case folded, punctuation and symbols removed")
    screening.add_argument("--dedup", choices=["exact", "near"], default=default_of("dedup"),
                           help="remove documents that repeat one listed before them (the first is kept): exact "
                                "(equal normalized text) or near (MinHash with locality-sensitive hashing over word "
                                "shingles: Jaccard similarity at least --dedup_threshold; exact duplicates too); "
                                "default: none")
    screening.add_argument("--dedup_threshold", type=float, default=default_of("dedup_threshold"), metavar="J",
                           help="with --dedup near: the Jaccard similarity of two documents' shingle sets from "
                                f"which the later one goes (default {default_of('dedup_threshold')})")
    screening.add_argument("--dedup_shingle_size", type=int, default=default_of("dedup_shingle_size"),
                           metavar="WORDS",
                           help=f"with --dedup near: words a shingle (default {default_of('dedup_shingle_size')})")
    screening.add_argument("--decontaminate", nargs="+", default=[], metavar="PATH",
                           help="evaluation sets (text, JSON Lines with the text at 'text', Parquet with a 'text' "
                                "column; compressed or not; URLs too): remove documents that share an n-gram of "
                                "--decontamination_ngram words with any line of them; reported per set")
    screening.add_argument("--decontamination_ngram", type=int, default=default_of("decontamination_ngram"),
                           metavar="N",
                           help=f"words of a shared n-gram (default {default_of('decontamination_ngram')}, as GPT-3 "
                                "and NeMo Curator)")
    screening.add_argument("--decontaminate_mode", choices=["documents", "passages"],
                           default=default_of("decontaminate_mode"),
                           help="documents (default): a document sharing an n-gram goes whole; passages: only its "
                                "lines holding a word of a shared n-gram go")

    output = parser.add_argument_group("output")
    output.add_argument("--output_format", choices=list(FORMATS), default=default_of("output_format"),
                        help=f"the trainer's own format (default {default_of('output_format')}): "
                             + "; ".join(f"{name}: {fmt.help}" for name, fmt in FORMATS.items())
                             + ". Instance formats hold the same instances as tfrecord, shard by shard; megatron "
                               "holds the tokenized corpus (Megatron builds its samples at train time); see "
                               "docs/formats.md")
    output.add_argument("--output_dir", default=None, metavar="DIR",
                        help=f"where shards and the manifest ({MANIFEST_NAME}) go: a directory or a URL "
                             "(s3://, gs://, ...: shards are staged locally and uploaded whole when complete, the "
                             f"manifest last) (default {default_of('output_dir')})")
    output.add_argument("--num_output_files", type=int, default=None,
                        help=f"shards per split (default {default_of('num_output_files')})")
    sizing = output.add_mutually_exclusive_group()
    sizing.add_argument("--records_per_file", type=int, default=None, metavar="N",
                        help="size shards by records instead of --num_output_files: about N records each")
    sizing.add_argument("--megabytes_per_file", type=float, default=None, metavar="MB",
                        help="size shards by bytes instead of --num_output_files: about MB megabytes each "
                             "(TensorFlow's guidance for large datasets: 100-200 MB). The count of shards per "
                             "split is set when its first unit is paired, from an estimate of the split's "
                             "size; shards come out within a few percent of the target")
    output.add_argument("--name", default=None, help=f"shard file name prefix (default {default_of('name')})")
    add_bool(output, "--overwrite", help="replace output already in --output_dir (only files this tool writes)")
    add_bool(output, "--resume",
             help="continue an interrupted run in --output_dir (same options, vocabulary and documents): "
                  "finished units are kept, and the result is byte-identical to an uninterrupted run; "
                  "refused when there is nothing to resume")
    output.add_argument("--val_fraction", type=float, default=default_of("val_fraction"),
                        help="fraction of documents, chosen by a stable hash of their path and --val_seed, "
                             f"that go to OUTPUT_DIR/val (default {default_of('val_fraction'):g}: no validation split)")
    output.add_argument("--val_seed", type=int, default=default_of("val_seed"),
                        help=f"seed of the --val_fraction hash (default {default_of('val_seed')}); --seed changes "
                             "masks and pairs, never which documents are held out")
    output.add_argument("--val_metadata_files", nargs="+", default=[], metavar="FILE",
                        help="metadata files listing validation documents (instead of --val_fraction); a "
                             "document listed there is left out of train even if --metadata_files lists it "
                             "(counted as n_docs_held_out in the train manifest)")

    add_google_arguments(parser)

    work = parser.add_argument_group("work")
    work.add_argument("--split_num", type=int, default=default_of("split_num"),
                      help=f"documents per unit of work (default {default_of('split_num')}): about 16 runs of "
                           "neighbouring documents from all over the corpus, the pool random-next sentences come "
                           "from. Every shard is shuffled at the end, so every stretch of it is a sample of the "
                           "whole split (docs/mixing.md)")
    add_bool(work, "--keep_corpus_order",
             help="units of neighbouring documents in listed order, shards not shuffled at the end, instead "
                  "of a mixed corpus (e.g. for a curriculum). Costs mixing: each shard then walks the corpus "
                  "from its first source to its last, and random-next sentences come from neighbouring "
                  "documents; a trainer's small shuffle buffer sees one part of the corpus at a time")
    work.add_argument("--num_workers", type=int, default=None,
                      help="worker processes (default: all cores this process may use; more than that is capped, "
                           "with a warning); output is identical for any value")
    cluster = work.add_mutually_exclusive_group()
    cluster.add_argument("--scheduler", metavar="ADDRESS", default=None,
                         help="run the work on the Dask cluster whose scheduler is at ADDRESS "
                              "(tcp://host:8786); inputs and the vocabulary must be URLs or on a file system "
                              "every worker reaches, and so must the work directory (see --work_dir). Needs "
                              "pip install -e \".[dask]\"")
    add_bool(cluster, "--dask", help="run the work on a local Dask cluster of --num_workers processes")
    work.add_argument("--work_dir", default=None, metavar="DIR_OR_URL",
                      help="where workers exchange intermediate data (token ids, pools, encoded pieces): a "
                           "directory, or a URL every worker reaches (s3://bucket/scratch) when a Dask cluster "
                           f"shares no file system with this machine (default OUTPUT_DIR/{WORK_DIR}; with "
                           f"--scheduler and an --output_dir URL, that URL's {WORK_DIR}). A run uses its own "
                           "folder inside it and removes it when done")
    add_bool(work, "--skip_missing",
             help="skip (and count) listed files that are missing, instead of stopping")
    add_bool(work, "--quiet", help="no progress bar and no notes (there is no bar either when stderr is not a terminal)")
    return parser


def config_from_args(args: argparse.Namespace):
    """The generator's options among the parsed arguments (the others, ``--quiet``, ``--dask``...,
    say how this command runs it: ``generate``'s arguments)."""
    import dataclasses

    from ..config import GeneratorConfig

    options = {f.name for f in dataclasses.fields(GeneratorConfig)}
    return GeneratorConfig(**{key: value for key, value in vars(args).items() if key in options})


@redacting
def main(argv: Optional[List[str]] = None) -> int:
    notices.use_program_name("create_tfrecords")
    from ..compiled import claim_process

    claim_process()  # the command's process runs only bert_data (see compiled.claim_process)
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(parser, argv)

    from ..config import ConfigError
    from ..pipeline.documents.types import InputError
    from ..run.run_files import Interrupted
    from ..pipeline.sentences import SentenceSplitterError
    from ..run.resolve import generate, resolve as resolve_run
    from ..run.run_files import GenerationError
    from ..tokenizers.vocab import VocabError

    try:
        args = resolve(args, argv, notices.warn)
        config = config_from_args(args)
        spec = resolve_run(config)  # checked once, before a cluster starts
        # No bar in a log file or pipe: its redraws would fill it.  Notes go there too: a job's
        # log is where a slower path than it needs to be gets noticed.
        run = dict(progress=not args.quiet and sys.stderr.isatty(), notes=not args.quiet,
                   skip_missing=args.skip_missing, allow_case_mismatch=args.allow_case_mismatch)
        if args.scheduler or args.dask:
            from ..run.executors import dask_executor, local_workers

            # A local cluster's processes are this machine's: no more than its cores.
            workers = spec.control.workers if args.scheduler else local_workers(spec.control.workers)
            with dask_executor(args.scheduler, workers) as (executor, parallelism):
                summary = generate(spec, executor=executor, parallelism=parallelism, **run)
        else:
            summary = generate(spec, **run)
    except (ConfigError, InputError, VocabError, SentenceSplitterError, GenerationError) as error:
        print(f"create_tfrecords: error: {error}", file=sys.stderr)
        return 2
    except Interrupted as stop:
        how = "by SIGTERM" if stop.signum == signal.SIGTERM else ""
        print(f"create_tfrecords: interrupted{' ' + how if how else ''}; {stop.describe()}", file=sys.stderr)
        return 128 + stop.signum
    except KeyboardInterrupt:  # before the run started: nothing was written
        print("create_tfrecords: interrupted before any work was done; nothing was written", file=sys.stderr)
        return 130
    report(spec.output, spec.control.resume, summary)
    return 0


def report(output, resumed_run: bool, summary) -> None:
    """``output``: the run's ``OutputSpec``; ``resumed_run``: it ran with --resume."""
    from ..format.manifest import describe_removed
    from ..run.run_files import manifest_name

    for split, manifest in summary.manifests.items():
        skipped = manifest["documents_skipped"]["count"]
        directory = output.split_dirs()[split]
        counts = f"{manifest['n_examples']:,} examples from {manifest['n_docs']:,} documents"
        if output.files:
            files = ", ".join(output.files)
            where = f"in {files} (manifest {os.path.join(directory, manifest_name(output))})"
        else:
            where = f"in {len(manifest['examples_per_file']):,} files under {directory}"
        note = f" ({skipped:,} documents skipped, see {manifest_name(output)})" if skipped else ""
        print(f"{split}: {counts} {where}{note}", file=sys.stderr)
        if manifest.get("documents_removed") is not None:
            print(f"{split}: {describe_removed(manifest['documents_removed'])}", file=sys.stderr)
        empty = sum(1 for count in manifest["examples_per_file"].values() if not count)
        if empty and manifest["n_examples"]:
            notices.warn(f"{split}: {empty:,} of {len(manifest['examples_per_file']):,} files hold no example "
                         f"({manifest['n_examples']:,} examples in all); pass a smaller --num_output_files")
        elif empty:
            fix = ("raise --val_fraction or name validation documents with --val_metadata_files" if split == "val"
                   else "give documents long enough for an instance")
            notices.warn(f"{split}: no example: its {empty:,} file{'s are' if empty > 1 else ' is'} empty; {fix}")
    resumed = ""
    if resumed_run and not summary.resumed_from_unit:
        resumed = " (resumed: no unit had been written; the interrupted run's tokenized slices were reused)"
    elif summary.resumed_from_unit:
        n_units = sum(manifest.get("n_units") or 0 for manifest in summary.manifests.values())
        kept = summary.resumed_from_unit
        done = "nothing was left but to finish" if kept >= n_units else (
            f"unit {n_units:,} done now" if kept + 1 == n_units else f"units {kept + 1:,}-{n_units:,} done now")
        resumed = f" (resumed: unit{'s 1-' if kept > 1 else ' '}{kept:,} kept from the interrupted run, {done})"
    print(f"done in {summary.seconds:.1f} s{resumed}", file=sys.stderr)


def command() -> None:
    """The console script and ``python -m``: :func:`main`, then the process ends without the
    interpreter's teardown when nothing needs it (``process_exit``; 0.05-0.3 s of a run)."""
    from .process_exit import exit_process, files_open_for_writing

    inherited = files_open_for_writing()  # (not this process's files: the shell's, a jobserver's)
    exit_process(main(), inherited)


if __name__ == "__main__":
    command()
