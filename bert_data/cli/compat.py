"""Google's and ALBERT's ``create_pretraining_data.py`` command lines, as ``create_tfrecords``
reads them: their options map onto ours, their defaults apply where they are used, and what is
not supported is refused in one line instead of being ignored.

Google's options: ``--input_file`` (comma-separated globs of files holding one sentence a line,
documents separated by blank lines), ``--output_file`` (comma-separated files; instance i goes to
file i mod N), ``--vocab_file``, ``--do_lower_case`` (default true), ``--do_whole_word_mask``,
``--max_seq_length``, ``--max_predictions_per_seq``, ``--random_seed`` (default 12345),
``--dupe_factor``, ``--masked_lm_prob``, ``--short_seq_prob``.  ALBERT's add ``--ngram``,
``--favor_shorter_ngram``, ``--do_permutation``, ``--random_next_sentence``, ``--input_file_mode``
and ``--parallel``, and other defaults (see :data:`ALBERT_DEFAULTS`); its ``--spm_model_file`` is
ours too (:mod:`bert_data.tokenizers`).  An ALBERT command line (one of its own options, or
Google's ``--input_file`` with ``--spm_model_file``) writes sentence-order labels, as ALBERT does,
unless ``--random_next_sentence``.
"""

from __future__ import annotations

import argparse
from typing import List, Sequence

from ..config import ConfigError, default_of
from ..format.manifest import MANIFEST_NAME
from .flags import add_bool

# Options whose default depends on the command line's style (None in the parser until resolved).
STYLE_DEPENDENT = ("do_lower_case", "seed", "max_seq_length", "dupe_factor", "max_ngram_size", "mask_whole_word",
                   "output_dir", "num_output_files", "name", "sentence_order_prediction")
# Where Google's create_pretraining_data.py differs from ours: applied with --input_file.
GOOGLE_DEFAULTS = {"do_lower_case": True, "seed": 12345}
# ALBERT's defaults that differ from Google's: a user of ALBERT's script must give them (warned).
ALBERT_DEFAULTS = {"max_seq_length": 512, "dupe_factor": 40, "max_ngram_size": 3, "mask_whole_word": True}
ALBERT_NAMES = {"max_seq_length": "max_seq_length", "dupe_factor": "dupe_factor", "max_ngram_size": "ngram",
                "mask_whole_word": "do_whole_word_mask"}
ALBERT_ONLY = ("--ngram", "--favor_shorter_ngram", "--nofavor_shorter_ngram", "--do_permutation", "--nodo_permutation",
               "--random_next_sentence", "--norandom_next_sentence", "--input_file_mode", "--parallel",
               "--noparallel")

GOOGLE_HELP = """\
create_pretraining_data.py command lines run as they are. --input_file reads Google's format (one
sentence a line, a blank line between documents: it implies --single_sentence_per_line and
--multiple_docs_in_single_file) and applies Google's defaults where they differ from ours:
--do_lower_case true (ours: {do_lower_case}) and --random_seed 12345 (ours: {seed}); the others are the
same (max_seq_length {max_seq_length}, max_predictions_per_seq {max_predictions_per_seq}, masked_lm_prob
{masked_lm_prob}, short_seq_prob {short_seq_prob}, dupe_factor {dupe_factor}). ALBERT's script has other
defaults (max_seq_length 512, dupe_factor 40, ngram 3, do_whole_word_mask true): give them explicitly
(a warning lists those missing).""".format(**{option: str(default_of(option)).lower() for option in (
    "do_lower_case", "seed", "max_seq_length", "max_predictions_per_seq", "masked_lm_prob", "short_seq_prob",
    "dupe_factor")})


def add_google_arguments(parser: argparse.ArgumentParser) -> None:
    google = parser.add_argument_group("Google's and ALBERT's create_pretraining_data.py", GOOGLE_HELP)
    google.add_argument("--input_file", action="append", default=[], metavar="FILES",
                        help="comma-separated files or globs in Google's input format; instead of --metadata_files")
    google.add_argument("--output_file", action="append", default=[], metavar="FILES",
                        help="comma-separated output files: the shards are exactly these (all in one directory; "
                             "instance i goes to file i mod N, as Google's tool writes them), replaced if they "
                             f"exist; the manifest is FIRST_FILE.{MANIFEST_NAME} beside them. Instead of "
                             "--output_dir, --num_output_files and --name")
    google.add_argument("--random_seed", type=int, default=None, dest="seed", help="= --seed")
    albert = parser.add_argument_group("ALBERT's options")
    add_bool(albert, "--favor_shorter_ngram", default=None,
             help="n-gram sizes favour shorter spans (what --max_ngram_size does; false is not supported)")
    add_bool(albert, "--do_permutation", default=None, help="ALBERT's permutation training (only false is supported)")
    add_bool(albert, "--random_next_sentence", default=None,
             help="ALBERT's switch: true writes BERT's next-sentence prediction, false (ALBERT's default) its "
                  "sentence-order prediction (= --sentence_order_prediction)")
    albert.add_argument("--input_file_mode", default=None, choices=["r", "rb"],
                        help="accepted for ALBERT's command line; files are read as bytes, decoded as --input_encoding says")
    add_bool(albert, "--parallel", default=None,
             help="accepted for ALBERT's command line; the work is always parallel (--num_workers)")


def split_commas(values: Sequence[str]) -> List[str]:
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def resolve(args: argparse.Namespace, argv: Sequence[str], warn) -> argparse.Namespace:
    """Map Google's and ALBERT's options onto ours, apply the defaults of the style used and
    refuse what cannot work; ``warn(message)`` for ALBERT defaults not applied."""
    refuse_unsupported(args)
    google = bool(args.input_file)
    if google:
        for option, value in (("--metadata_files", args.metadata_files), ("--input_files", args.input_files),
                              ("--text_field", args.text_field)):
            if value:
                raise ConfigError(f"--input_file reads Google's format (a sentence a line, blank lines between "
                                  f"documents) and cannot be combined with {option}: use --input_files for that")
        args.input_files = split_commas(args.input_file)
        args.single_sentence_per_line = args.multiple_docs_in_single_file = True
    if args.output_file:
        for option in ("output_dir", "num_output_files", "name", "records_per_file", "megabytes_per_file"):
            if getattr(args, option) is not None:
                raise ConfigError(f"--output_file names the output files: it cannot be combined with --{option}")
        args.output_files = split_commas(args.output_file)
    # Only ALBERT's script takes a SentencePiece model with Google's --input_file.
    albert = any(arg.split("=")[0] in ALBERT_ONLY for arg in argv) or (google and bool(args.spm_model_file))
    if args.random_next_sentence and args.sentence_order_prediction:
        raise ConfigError("--random_next_sentence and --sentence_order_prediction contradict each other: "
                          "next-sentence or sentence-order labels, not both")
    ours = {option: default_of(option) for option in STYLE_DEPENDENT}  # GeneratorConfig's, the one place
    if albert:
        missing = [f"{ALBERT_NAMES[key]} {str(value).lower()} (this run: {str(ours[key]).lower()})"
                   for key, value in ALBERT_DEFAULTS.items() if getattr(args, key) is None]
        if missing:
            warn("ALBERT's create_pretraining_data.py defaults are not applied: " + ", ".join(missing)
                 + "; give them explicitly to match ALBERT")
        # ALBERT writes sentence-order labels unless --random_next_sentence.
        if args.sentence_order_prediction is None:
            args.sentence_order_prediction = not args.random_next_sentence
    defaults = dict(ours, **(GOOGLE_DEFAULTS if google else {}))
    if args.tokenizer_file:  # a tokenizer.json does its own normalisation: Google's true would be refused
        defaults["do_lower_case"] = False
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    for key in ("input_file", "output_file", "favor_shorter_ngram", "do_permutation", "random_next_sentence",
                "input_file_mode", "parallel"):
        delattr(args, key)
    return args


def refuse_unsupported(args: argparse.Namespace) -> None:
    if args.do_permutation:
        raise ConfigError("--do_permutation=true (ALBERT's permutation training) is not supported; "
                          "only --do_permutation=false")
    if args.favor_shorter_ngram is False and (args.max_ngram_size or 1) > 1:
        raise ConfigError("--favor_shorter_ngram=false (uniform n-gram sizes) is not supported: n-gram spans "
                          "favour shorter sizes, as ALBERT's default")
