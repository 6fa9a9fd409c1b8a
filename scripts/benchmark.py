#!/usr/bin/env python3
"""Measure create_tfrecords on a real corpus: speed, memory, and the floor it is compared with.

    python scripts/benchmark.py                         # ../shared/corpus, sentence a line, dupe 10
    python scripts/benchmark.py --input raw --dupe_factor 1 --num_workers 1 2
    python scripts/benchmark.py --repeat 4 --json       # a 4x larger corpus: memory must not grow
    python scripts/benchmark.py --metadata_files my/metadata.txt --input_files_prefix my --input raw \\
        --vocab_file my/vocab.txt --num_workers 1 2     # your own corpus
    python scripts/benchmark.py --input_files 'wiki/*.txt' --generator_args='--multiple_docs_in_single_file'
    python scripts/benchmark.py --shape short_docs --dupe_factor 1 --num_workers 2 --vs_corpus_order --rounds 3
    python scripts/benchmark.py --shape short_docs --per_byte --dupe_factor 1 --num_workers 1 2 --rounds 3

Corpus shapes (``--shape``, from ``--corpus``): ``listed`` (default), its documents as listed
(source by source); ``short_docs``, many short documents as real corpora have them (Wikipedia's
millions of articles, C4's hundreds of millions): the corpus's sentences, two a document, in
order, cycled until there are ``--short_docs`` documents (default 200,000), written as one JSON
Lines file (``{"text": "sentence\nsentence"}``, read with ``--single_sentence_per_line``).
``--per_byte`` (with ``short_docs``) runs the listed corpus too, sentence a line with the same
options, right after each run of the short documents, and reports each shape's input MB/s and
their ratio (fastest against fastest, median against median): what many documents cost per
byte, from one invocation.
``--vs_corpus_order`` runs every configuration twice, mixed and with ``--keep_corpus_order``,
one after the other (``--rounds`` times, alternately), and reports the ratio: what mixing costs.
``--baseline DIR`` runs every configuration again right after, with the bert_data of another
checkout (``git worktree add /tmp/before <commit>``), and reports each run over its baseline run:
a change measured against the code before it, alternately, in one session.
With ``--rounds`` N, the floor is measured before each round and the fastest measurement is the
floor (the machine's slower spells only lengthen a measurement), and the fastest run of each
configuration is reported against it too.
Each checkout's bytecode is compiled first (into its ``__pycache__``), as installing a package
does, so that no run pays for compiling the package's source, whatever PYTHONDONTWRITEBYTECODE says.

Any corpus works: ``--metadata_files``/``--input_files`` (with ``--input_files_prefix``) name the
documents as create_tfrecords takes them, and the document options in ``--generator_args``
(``--multiple_docs_in_single_file``, ``--text_field``, ...) apply to the floor too.

Each run is a real ``create_tfrecords`` process.  Its speed is its input's MB/s, and per core
(``mb_per_s_per_core``: over its workers, a core each; a one-worker run keeps about 1.1 cores
busy with its threads, as ``cpu_seconds`` over ``wall_seconds`` shows).  Peak memory is the
largest sum of resident memory over the whole process tree (parent and workers), sampled every
20 ms: ``peak_rss_mb`` all of it, ``peak_own_mb`` the processes' own (less the pages of mapped
files, which the kernel drops and reads again at will: the kept pieces a shard's shuffle maps
are as large as the shard, so that part grows with the corpus at a given number of shards; the
processes' own must not).  The *floor* is measured in the same invocation, in a separate
single-threaded process: the same tokenizer over the same sentences (ids only, batched), plus,
for raw input, spaCy's blank("en") + sentencizer over the same documents (its pipeline, a Doc
per passage: ``time_over_spacy``; the sentence stage, the built-in splitter that gives the same
sentences without Docs, is timed against it too).  ``time/floor`` stays comparable across
machines.  Each tokenizer floor is also reported alone: Hugging Face ``tokenizers``
(``over_tokenizers``, the reference path) and the native WordPiece, ``nanotoken``
(``over_native``, when it runs the tokenizer).  With more than one ``--num_workers``, the
machine's own *parallel ceiling* is measured too: what N processes of pure CPU work, sharing
nothing, get over one (``parallel_ceiling``), the most ``speedup_vs_first`` could be on this
machine at this moment (less than N on hyperthreads or busy cores).  And the disk's floor: the
time it takes to write and sync as many bytes as the output (``disk``, ``over_disk``), which no
number of workers shortens: a run's shards are durable before its manifest.

The tokenizer is BERT's WordPiece (``--vocab_file``, default the shared BERT-uncased vocabulary),
a Hugging Face ``--tokenizer_file tokenizer.json`` or a ``--spm_model_file`` SentencePiece model
(ALBERT's tokenization; ``--vocab_file`` then optional), passed to every run and to the floor.
"""

from __future__ import annotations

import argparse
import atexit
import compileall
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus"
DEFAULT_VOCAB = REPO.parent / "shared" / "vocab" / "bert-base-uncased-vocab.txt"
sys.path.insert(0, str(REPO))  # this checkout's bert_data, as the runs below use

from bert_data.format.manifest import Manifest  # noqa: E402

sys.path.append(str(Path(__file__).resolve().parent))  # (its sibling, also under PYTHONSAFEPATH)
from benchmark_machine import disk_seconds, parallel_ceiling, run_generator  # noqa: E402

FLOOR_SCRIPT = r"""
import json, os, sys, time
os.environ["TOKENIZERS_PARALLELISM"] = "false"
metadata, raw, source, documents = json.load(open(sys.argv[1]))
from bert_data.config import separator_line_of
from bert_data.pipeline.documents.reading import DocumentTexts
from bert_data.tokenizers import TokenizerSource, make_tokenizer
# The documents as the generator reads them (many a file, JSON Lines, compressed), read before timing.
texts = list(DocumentTexts([metadata], "", multiple_docs_in_single_file=documents["multiple_docs_in_single_file"],
                           separator_line=separator_line_of(documents["multiple_docs_separator"]),
                           text_field=documents["text_field"]))
spacy_seconds = sentences_seconds = 0.0
if raw:
    from bert_data.pipeline.sentences import SpacySentenceSplitter
    # The floor is spaCy's own pipeline (a Doc per passage); the sentence stage, the built-in
    # splitter as runs use it (the same sentences without Docs), is timed against it.
    started = time.perf_counter()
    sentences = [s for doc in SpacySentenceSplitter(force_spacy=True).split(texts) for s in doc]
    spacy_seconds = time.perf_counter() - started
    started = time.perf_counter()
    same = [s for doc in SpacySentenceSplitter().split(texts) for s in doc] == sentences
    sentences_seconds = time.perf_counter() - started
    if not same:
        sys.exit("the sentence stage's sentences differ from spaCy's pipeline's")
else:
    sentences = [line.strip() for text in texts for line in text.split("\n") if line.strip()]
def tokenizer_floor(encode, count):
    started, n_tokens = time.perf_counter(), 0
    for start in range(0, len(sentences), 4096):
        n_tokens += count(encode(sentences[start:start + 4096]))
    return time.perf_counter() - started, n_tokens
# The `tokenizers` floor (Hugging Face's lists of ids: the reference path) and the native one
# (nanotoken's arrays), when the tokenizer runs on it.
reference = make_tokenizer(TokenizerSource(*source), native=False)
tokenizer_seconds, n_tokens = tokenizer_floor(reference.encode_ids, lambda ids: sum(map(len, ids)))
native = make_tokenizer(TokenizerSource(*source))
native_seconds = None
if getattr(native, "is_native", False):
    native_seconds = tokenizer_floor(native.encode_flat, lambda flat: len(flat[0]))[0]
print(json.dumps({"sentences": len(sentences), "tokens": n_tokens, "tokenizer_seconds": tokenizer_seconds,
                  "native_seconds": native_seconds, "spacy_seconds": spacy_seconds,
                  "sentences_seconds": sentences_seconds}))
"""


def per_byte(runs: list, listed_runs: list) -> list:
    """--per_byte: for each configuration (workers, order), the short documents' input MB/s
    against the listed corpus's, fastest against fastest and median against median (this
    code's runs only: a baseline's are not compared)."""
    compared = []
    for key in dict.fromkeys((row["num_workers"], row["order"]) for row in listed_runs):
        short = sorted(row["input_mb_per_s"] for row in runs
                       if (row["num_workers"], row["order"]) == key and row.get("code", "current") == "current")
        listed = sorted(row["input_mb_per_s"] for row in listed_runs if (row["num_workers"], row["order"]) == key)
        short_median, listed_median = short[len(short) // 2], listed[len(listed) // 2]
        compared.append({"num_workers": key[0], "order": key[1], "runs": len(listed),
                         "short_fastest": short[-1], "listed_fastest": listed[-1],
                         "fastest_ratio": round(short[-1] / listed[-1], 3),
                         "short_median": short_median, "listed_median": listed_median,
                         "median_ratio": round(short_median / listed_median, 3)})
    return compared


def fastest_runs(runs: list, floor, repeat: int, input_mb: float) -> list:
    """The fastest run of each configuration (workers, order, code): its input MB/s per core (a
    worker each), over the floor and over the ``tokenizers`` floor alone when there is one."""
    fastest = []
    for key in dict.fromkeys((row["num_workers"], row["order"], row.get("code", "")) for row in runs):
        seconds = min(row["wall_seconds"] for row in runs
                      if (row["num_workers"], row["order"], row.get("code", "")) == key)
        best = {"num_workers": key[0], "order": key[1], "code": key[2], "wall_seconds": seconds,
                "mb_per_s_per_core": round(input_mb / seconds / key[0], 2)}
        if floor:
            best["time_over_floor"] = round(seconds / floor["seconds"], 3)
            best["over_tokenizers"] = round(seconds / (repeat * floor["tokenizer_seconds"]), 3)
        fastest.append(best)
    return fastest


def fastest_floor(floors: list, repeat: int) -> dict:
    """The floor of the rounds' measurements: each time the fastest of them (the machine's
    pauses and slower spells only lengthen a measurement), the counts the first's."""
    floor = dict(floors[0])
    for key in ("tokenizer_seconds", "spacy_seconds", "sentences_seconds", "native_seconds"):
        if floor[key] is not None:
            floor[key] = min(measured[key] for measured in floors)
    floor["measurements"] = len(floors)
    # One pass was measured; a repeated corpus costs that many passes.
    floor["seconds"] = repeat * (floor["tokenizer_seconds"] + floor["spacy_seconds"])
    return floor


def write_short_docs(corpus: Path, path: Path, n_docs: int) -> int:
    """--shape short_docs: the sentences of ``corpus``'s metadata_sents.txt, two a document (a
    document's last sentence alone if it has an odd count), cycled until ``n_docs`` documents,
    as JSON Lines."""
    metadata = corpus / "metadata_sents.txt"
    if not metadata.exists():
        sys.exit(f"benchmark: {metadata} not found (--shape short_docs needs --corpus's sentence files)")
    pairs = []
    for name in metadata.read_text().split():
        sentences = [line.strip() for line in (corpus / name).read_text(encoding="utf-8").split("\n") if line.strip()]
        pairs += ["\n".join(sentences[i:i + 2]) for i in range(0, len(sentences), 2)]
    with open(path, "w", encoding="utf-8") as out:
        for number in range(n_docs):
            out.write(json.dumps({"text": pairs[number % len(pairs)]}) + "\n")
    return n_docs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--corpus", default=str(DEFAULT_CORPUS),
                        help="folder with metadata.txt (raw) and metadata_sents.txt (sentence a line); default "
                             "../shared/corpus; not used with --metadata_files or --input_files")
    parser.add_argument("--metadata_files", nargs="+", default=[], metavar="FILE",
                        help="your corpus: metadata files listing its documents (as create_tfrecords takes them)")
    parser.add_argument("--input_files", nargs="+", default=[], metavar="PATH_OR_GLOB",
                        help="your corpus: its documents as paths or globs")
    parser.add_argument("--input_files_prefix", default="", metavar="DIR",
                        help="directory the paths of --metadata_files / --input_files are relative to")
    parser.add_argument("--vocab_file", default=None,
                        help=f"WordPiece vocab.txt (default {DEFAULT_VOCAB}); with --spm_model_file, optional")
    parser.add_argument("--tokenizer_file", default=None, help="a Hugging Face tokenizer.json instead")
    parser.add_argument("--spm_model_file", default=None, help="a SentencePiece model instead (ALBERT's tokenization)")
    parser.add_argument("--cased", action="store_true", help="do not pass --do_lower_case")
    parser.add_argument("--input", choices=["sents", "raw"], default="sents",
                        help="sents: one sentence a line (--single_sentence_per_line; with --corpus: "
                             "metadata_sents.txt); raw: documents through spaCy (with --corpus: metadata.txt)")
    parser.add_argument("--num_workers", type=int, nargs="+", default=[1], help="one run per value")
    parser.add_argument("--dupe_factor", type=int, default=10)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--split_num", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=1, help="list every document K times (a K-times larger corpus)")
    parser.add_argument("--exclude", nargs="*", default=[], help="skip documents whose path contains any of these")
    parser.add_argument("--no_floor", action="store_true", help="skip the floor measurement")
    parser.add_argument("--generator_args", default="", metavar="'ARGS'",
                        help="more create_tfrecords options, e.g. '--mask_whole_word' or '--compression gzip'")
    parser.add_argument("--shape", choices=["listed", "short_docs"], default="listed",
                        help="listed: --corpus's documents as listed; short_docs: its sentences two a document, "
                             "--short_docs of them, as one JSON Lines file (sentence a line)")
    parser.add_argument("--short_docs", type=int, default=200_000, metavar="N",
                        help="documents of --shape short_docs (default 200,000)")
    parser.add_argument("--per_byte", action="store_true",
                        help="with --shape short_docs: run the listed corpus (sentence a line, the same options) "
                             "right after each run too, and report the short documents' input MB/s over its")
    parser.add_argument("--vs_corpus_order", action="store_true",
                        help="also run each configuration with --keep_corpus_order, alternately, and report "
                             "mixed time over corpus-order time")
    parser.add_argument("--baseline", default=None, metavar="DIR",
                        help="another checkout of bert_data (the code before a change): every run is repeated "
                             "with its code right after, and reported over it")
    parser.add_argument("--rounds", type=int, default=1, help="times each run is repeated (alternately)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args(argv)
    if args.short_docs < 1 or args.rounds < 1:
        sys.exit("benchmark: --short_docs and --rounds must be at least 1")
    if args.baseline and not (Path(args.baseline) / "bert_data" / "__init__.py").is_file():
        sys.exit(f"benchmark: --baseline {args.baseline} is not a checkout of bert_data (no bert_data/__init__.py)")
    if args.per_byte and args.shape != "short_docs":
        sys.exit("benchmark: --per_byte compares --shape short_docs with the listed corpus: add --shape short_docs")
    if args.shape == "short_docs" and (args.metadata_files or args.input_files or args.input != "sents"):
        sys.exit("benchmark: --shape short_docs is made from --corpus's sentences (--input sents)")
    if args.tokenizer_file and (args.spm_model_file or args.vocab_file):
        sys.exit("benchmark: --tokenizer_file replaces --vocab_file and --spm_model_file")
    if not (args.tokenizer_file or args.spm_model_file or args.vocab_file):
        args.vocab_file = str(DEFAULT_VOCAB)
    # The tokenizer, as create_tfrecords takes it and as bert_data.tokenizers.TokenizerSource holds
    # it: (kind, path, vocab_file, do_lower_case).  A tokenizer.json does its own normalisation.
    lower = not args.cased and not args.tokenizer_file
    if args.tokenizer_file:
        tokenizer_args, source = ["--tokenizer_file", args.tokenizer_file], ["huggingface", args.tokenizer_file, None]
    elif args.spm_model_file:
        tokenizer_args = ["--spm_model_file", args.spm_model_file]
        tokenizer_args += ["--vocab_file", args.vocab_file] if args.vocab_file else []
        source = ["sentencepiece", args.spm_model_file, args.vocab_file]
    else:
        tokenizer_args, source = ["--vocab_file", args.vocab_file], ["wordpiece", args.vocab_file, None]
    tokenizer_args += ["--do_lower_case"] if lower else []
    source.append(lower)

    from bert_data.cli.create_tfrecords import build_parser as generator_parser
    from bert_data.cli.flags import rewrite_bool_values
    from bert_data.pipeline.documents.listing import list_documents

    # The document options among --generator_args: they shape what the floor reads too.
    generator = generator_parser()
    generator_args = shlex.split(args.generator_args)
    workdir = Path(tempfile.mkdtemp(prefix="bert_data_bench_"))
    atexit.register(shutil.rmtree, workdir, True)  # also when a check below stops the benchmark
    listed_args = list(generator_args)  # (--per_byte's runs of the listed corpus: without the JSON key)
    if args.shape == "short_docs":
        short = workdir / "short_docs.jsonl"
        n_written = write_short_docs(Path(args.corpus), short, args.short_docs)
        args.metadata_files, args.input_files_prefix = [str(workdir / "short_docs.txt")], str(workdir)
        Path(args.metadata_files[0]).write_text(short.name + "\n")
        # --jsonl_text_key: the older name of --text_field, which every version takes (--baseline)
        generator_args += ["--jsonl_text_key", "text"]
    documents, _ = generator.parse_known_args(rewrite_bool_values(generator, generator_args))
    documents = {key: getattr(documents, key) for key in ("multiple_docs_in_single_file", "multiple_docs_separator",
                                                          "text_field")}
    if args.shape == "short_docs":
        corpus, described = Path(args.corpus), f"{args.corpus} as {n_written:,} short documents"
        metadata_files, input_files, prefix = args.metadata_files, [], args.input_files_prefix
    elif args.metadata_files or args.input_files:
        corpus = Path(args.input_files_prefix or ".")
        described = " ".join(args.metadata_files + args.input_files)
        metadata_files, input_files, prefix = args.metadata_files, args.input_files, args.input_files_prefix
    else:
        corpus = Path(args.corpus)
        metadata = corpus / ("metadata_sents.txt" if args.input == "sents" else "metadata.txt")
        if not metadata.exists():
            sys.exit(f"benchmark: {metadata} not found (give --corpus, --metadata_files or --input_files)")
        described = str(corpus)
        metadata_files, input_files, prefix = [str(metadata)], [], str(corpus)
    try:
        entries, _ = list_documents(metadata_files, input_files, prefix)
    except ValueError as error:
        sys.exit(f"benchmark: {error}")
    paths = [entry.path for entry in entries if not any(part in entry.label for part in args.exclude)]
    input_bytes = sum(os.path.getsize(p) for p in paths)

    # PYTHONSAFEPATH: ``python -m`` puts the current directory first on sys.path, before
    # PYTHONPATH: run from a checkout, every run (--baseline's too) would import that checkout.
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONSAFEPATH="1")
    try:
        run_metadata = workdir / "metadata.txt"  # absolute paths: the documents, --repeat times
        run_metadata.write_text("\n".join(paths * args.repeat) + "\n")
        listed_metadata, listed_bytes = workdir / "listed.txt", 0
        if args.per_byte:  # the corpus's sentence files, as --shape listed reads them
            listed, _ = list_documents([str(Path(args.corpus) / "metadata_sents.txt")], [], args.corpus)
            listed_paths = [entry.path for entry in listed if not any(part in entry.label for part in args.exclude)]
            listed_bytes = sum(os.path.getsize(p) for p in listed_paths)
            listed_metadata.write_text("\n".join(listed_paths * args.repeat) + "\n")
        once = workdir / "once.txt"
        once.write_text("\n".join(paths) + "\n")

        payload = workdir / "floor.json"
        payload.write_text(json.dumps([str(once), args.input == "raw", source, documents]))
        floors = []  # one measurement before each round of runs

        def measure_floor() -> None:
            out = subprocess.run([sys.executable, "-c", FLOOR_SCRIPT, str(payload)], capture_output=True, text=True,
                                 env=env)
            if out.returncode:
                sys.exit(f"benchmark: floor measurement failed:\n{out.stderr}")
            floors.append(json.loads(out.stdout))

        ceiling = {workers: parallel_ceiling(workers) for workers in sorted(set(args.num_workers)) if workers > 1}

        runs, listed_runs = [], []  # (--per_byte's listed runs apart: no floor, baseline or speed-up of theirs)
        orders = [False, True] if args.vs_corpus_order else [False]
        codes = {"current": env}
        if args.baseline:
            codes["baseline"] = dict(os.environ, PYTHONPATH=str(Path(args.baseline).resolve()) + os.pathsep
                                     + os.environ.get("PYTHONPATH", ""), PYTHONSAFEPATH="1")
        for code, code_env in codes.items():  # each run imports the checkout it is named after
            expected = REPO if code == "current" else Path(args.baseline).resolve()
            imported = subprocess.run([sys.executable, "-c", "import bert_data; print(bert_data.__file__)"],
                                      capture_output=True, text=True, env=code_env).stdout.strip()
            if Path(imported).resolve().parent.parent != expected:
                sys.exit(f"benchmark: the {code} runs would import {imported}, not the bert_data of {expected} "
                         "(Python 3.11 or later is needed for PYTHONSAFEPATH; or run from another directory)")
            # Each checkout's bytecode, compiled once as ``pip install`` does for an installed
            # package: with PYTHONDONTWRITEBYTECODE set (or a read-only checkout) every run would
            # otherwise compile the package's modules from source again (~0.3 s of its start).
            compileall.compile_dir(str(expected / "bert_data"), quiet=1)
        plan = [(workers, kept, code) for _ in range(args.rounds) for workers in args.num_workers
                for kept in orders for code in codes]
        for number, (workers, kept, code) in enumerate(plan):
            if not args.no_floor and number % (len(plan) // args.rounds) == 0:
                measure_floor()  # (each round's: the machine's speed drifts between rounds)
            output = workdir / f"out-{workers}"

            def generator_command(metadata: Path, extra: list) -> list:
                return [
                    sys.executable, "-m", "bert_data.cli.create_tfrecords",
                    "--metadata_files", str(metadata),
                    *tokenizer_args, "--output_dir", str(output), "--quiet",
                    "--dupe_factor", str(args.dupe_factor), "--max_seq_length", str(args.max_seq_length),
                    "--max_predictions_per_seq", str(args.max_predictions_per_seq), "--split_num", str(args.split_num),
                    "--num_workers", str(workers),
                    *(["--single_sentence_per_line"] if args.input == "sents" else []),
                    *extra, *(["--keep_corpus_order"] if kept else []),
                ]

            measured = run_generator(generator_command(run_metadata, generator_args), codes[code])
            manifest = Manifest.read(str(output))
            output_bytes = sum(f.stat().st_size for f in output.glob("*.tfrecords"))
            seconds = measured["seconds"]
            row = {
                "num_workers": workers,
                "order": "kept" if kept else "mixed",
                **({"code": code} if args.baseline else {}),
                "wall_seconds": round(seconds, 2),
                "cpu_seconds": round(measured["cpu_seconds"], 2),
                "docs_per_s": round(manifest.n_docs / seconds, 1),
                "input_mb_per_s": round(args.repeat * input_bytes / 1e6 / seconds, 2),
                "mb_per_s_per_core": round(args.repeat * input_bytes / 1e6 / seconds / workers, 2),
                "instances_per_s": round(manifest.n_examples / seconds),
                "output_mb": round(output_bytes / 1e6, 1),
                "peak_rss_mb": round(measured["peak_rss_mb"], 1),
                "peak_own_mb": round(measured["peak_own_mb"], 1),
                "n_examples": manifest.n_examples,
            }
            runs.append(row)
            shutil.rmtree(output)
            if args.per_byte and code == "current":  # the listed corpus right after, by the same code
                measured = run_generator(generator_command(listed_metadata, listed_args), env)
                listed_runs.append({"num_workers": workers, "order": "kept" if kept else "mixed",
                                    "wall_seconds": round(measured["seconds"], 2),
                                    "cpu_seconds": round(measured["cpu_seconds"], 2),
                                    "input_mb_per_s": round(args.repeat * listed_bytes / 1e6 / measured["seconds"], 2),
                                    "peak_rss_mb": round(measured["peak_rss_mb"], 1),
                                    "peak_own_mb": round(measured["peak_own_mb"], 1)})
                shutil.rmtree(output)
        output_mb = max(row["output_mb"] for row in runs)
        disk_time = disk_seconds(workdir, int(output_mb * 1e6))
        disk = {"output_mb": output_mb, "seconds": round(disk_time, 3)}
        for row in runs if disk_time > 0 else []:  # (a clock too coarse for a small output: no ratio)
            row["over_disk"] = round(row["wall_seconds"] / disk_time, 2)
        floor = fastest_floor(floors, args.repeat) if floors else None
        for row in runs if floor else []:
            seconds = row["wall_seconds"]
            row["time_over_floor"] = round(seconds / floor["seconds"], 2)
            if floor["spacy_seconds"]:
                row["time_over_spacy"] = round(seconds / (args.repeat * floor["spacy_seconds"]), 2)
            # Over each tokenizer floor alone (one pass of the corpus per --repeat).
            row["over_tokenizers"] = round(seconds / (args.repeat * floor["tokenizer_seconds"]), 2)
            if floor["native_seconds"]:
                row["over_native"] = round(seconds / (args.repeat * floor["native_seconds"]), 2)
        if len(args.num_workers) > 1:
            base = runs[0]["wall_seconds"]
            for row in runs:
                row["speedup_vs_first"] = round(base / row["wall_seconds"], 2)
        if args.baseline:  # each run against the baseline's run of the same configuration right after it
            for current, before in zip(runs[::2], runs[1::2]):
                current["over_baseline"] = round(current["wall_seconds"] / before["wall_seconds"], 3)
                current["cpu_over_baseline"] = round(current["cpu_seconds"] / before["cpu_seconds"], 3)
        if args.vs_corpus_order:  # each mixed run against the corpus-order run of the same code
            step = len(codes)  # the plan: mixed for each code, then kept for each code
            pairs = [(runs[start + k], runs[start + k + step]) for start in range(0, len(runs), 2 * step)
                     for k in range(step)]
            for mixed, kept in pairs:
                mixed["mixed_over_kept"] = round(mixed["wall_seconds"] / kept["wall_seconds"], 3)
                mixed["cpu_mixed_over_kept"] = round(mixed["cpu_seconds"] / kept["cpu_seconds"], 3)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    report = {
        "corpus": described, "input": args.input, "files": len(paths) * args.repeat,
        "input_mb": round(args.repeat * input_bytes / 1e6, 1), "dupe_factor": args.dupe_factor,
        "max_seq_length": args.max_seq_length, "repeat": args.repeat, "generator_args": " ".join(generator_args),
        "shape": args.shape,
        "tokenizer": {"kind": source[0], "path": source[1], "vocab_file": source[2], "do_lower_case": lower},
        "floor": floor, "runs": runs, "parallel_ceiling": ceiling, "disk": disk,
        "fastest": fastest_runs(runs, floor, args.repeat, args.repeat * input_bytes / 1e6),
    }
    if args.per_byte:
        report["listed_runs"] = listed_runs
        report["listed_input_mb"] = round(args.repeat * listed_bytes / 1e6, 1)
        report["per_byte"] = per_byte(runs, listed_runs)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"corpus {described} ({args.input}): {report['files']:,} listed files, {report['input_mb']} MB, "
          f"dupe_factor {args.dupe_factor}, max_seq_length {args.max_seq_length}, {source[0]} {source[1]}"
          + (f", {args.generator_args}" if args.generator_args else ""))
    if floor:
        parts = f"tokenizer {args.repeat} x {floor['tokenizer_seconds']:.2f} s"
        if args.input == "raw":
            parts += f" + spaCy {args.repeat} x {floor['spacy_seconds']:.2f} s"
        print(f"floor: {floor['seconds']:.2f} s ({parts}; {floor['sentences']} sentences, single thread"
              + (f"; the fastest of {floor['measurements']}, one before each round)" if floor["measurements"] > 1
                 else ")"))
        if floor["spacy_seconds"]:
            print(f"sentence stage (the built-in splitter, same sentences): {floor['sentences_seconds']:.2f} s, "
                  f"{floor['sentences_seconds'] / floor['spacy_seconds']:.2f} x spaCy's pipeline")
        native = f"{floor['native_seconds']:.2f} s" if floor["native_seconds"] else "none (nanotoken not installed)"
        print(f"tokenizer floors, one pass: tokenizers {floor['tokenizer_seconds']:.2f} s, native {native}")
    for workers, most in ceiling.items():
        print(f"machine: {workers} processes of pure CPU work run at {most}x one (the most speedup_vs_first can be here)")
    print(f"machine: its disk takes {disk['seconds']:.3f} s to write and sync the output's {disk['output_mb']} MB "
          "(the least a run spends on it, however many workers: over_disk)")
    columns = ["num_workers", "order", "code", "wall_seconds", "cpu_seconds", "docs_per_s", "input_mb_per_s",
               "mb_per_s_per_core", "instances_per_s", "output_mb",
               "peak_rss_mb", "peak_own_mb", "time_over_floor", "time_over_spacy", "over_tokenizers", "over_native", "over_disk",
               "speedup_vs_first",
               "mixed_over_kept", "cpu_mixed_over_kept", "over_baseline", "cpu_over_baseline"]
    columns = [c for c in columns if any(c in r for r in runs)]
    widths = [max(len(c), *(len(str(r.get(c, ""))) for r in runs)) for c in columns]
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths)))
    for row in runs:
        print("  ".join(str(row.get(c, "")).rjust(w) for c, w in zip(columns, widths)))
    if args.rounds > 1:  # the least disturbed run of each configuration, against the least disturbed floor
        for best in report["fastest"]:
            workers = best["num_workers"]
            print(f"fastest of {args.rounds} rounds, {workers} worker{'s' if workers > 1 else ''} {best['order']}"
                  + (f" {best['code']}" if best["code"] else "") + f": {best['wall_seconds']:.2f} s, "
                  f"{best['mb_per_s_per_core']:.2f} MB/s per core"
                  + (f", {best['time_over_floor']:.2f} of the floor" if floor else "")
                  + (f" ({best['over_tokenizers']:.2f} of the tokenizers floor alone)"
                     if floor and floor["spacy_seconds"] else ""))
    for compared in report.get("per_byte", []):
        workers = compared["num_workers"]
        print(f"per byte, {workers} worker{'s' if workers > 1 else ''} {compared['order']}: the short documents "
              f"({report['input_mb']} MB) {compared['short_fastest']} MB/s against {compared['listed_fastest']} MB/s "
              f"for the listed corpus ({report['listed_input_mb']} MB, sentence a line), fastest against fastest: "
              f"{compared['fastest_ratio']}; median against median: {compared['median_ratio']} "
              f"({compared['short_median']} against {compared['listed_median']} MB/s, {compared['runs']} runs each)")
    for code in ("current", "baseline"):
        chosen = [row for row in runs if "mixed_over_kept" in row and row.get("code", "current") == code]
        if chosen:
            ratios = sorted(row["mixed_over_kept"] for row in chosen)
            cpu = sorted(row["cpu_mixed_over_kept"] for row in chosen)
            print(f"mixed / --keep_corpus_order{' (baseline)' if code == 'baseline' else ''}: median "
                  f"{ratios[len(ratios) // 2]} (each mixed run over the corpus-order run of the same code: "
                  f"{', '.join(map(str, ratios))}); CPU time: median {cpu[len(cpu) // 2]}")
    for order in ("mixed", "kept"):
        chosen = [row for row in runs if "over_baseline" in row and row["order"] == order]
        if chosen:
            ratios = sorted(row["over_baseline"] for row in chosen)
            cpu = sorted(row["cpu_over_baseline"] for row in chosen)
            print(f"{order}, this code / --baseline: median {ratios[len(ratios) // 2]} (each run over the baseline's "
                  f"run right after it: {', '.join(map(str, ratios))}); CPU time: median {cpu[len(cpu) // 2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
