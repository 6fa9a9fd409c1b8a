"""``bert-data verify``: check every record of a dataset before training on it.

Checked, for every record (numpy, vectorised over batches of decoded records; no TensorFlow):

* framing: length and data CRCs, truncation (a record whose data CRC fails is reported and
  skipped, reading goes on; a bad length header or truncation ends the file); for gzip/zlib
  shards also the compressed stream (corrupt or truncated data, data after a zlib stream, a
  file whose compression is not the manifest's: all reported with the record reached);
* layout: exactly the features of the dataset's layout (:func:`bert_data.format.layout.feature_specs`:
  Google's seven, MLM-only, unmasked, v2 names), with their types and lengths (from the
  manifest, else inferred from the first record);
* ``input_ids`` inside the vocabulary, padding 0; ``[CLS]`` first, ``[SEP]`` last;
  ``input_mask`` 1s then 0s; with segments (NSP layouts): ``[SEP]`` closing segment A,
  ``segment_ids`` 0s, then 1s, then padding 0s, both segments non-empty; MLM-only rows are
  ``[CLS] tokens [SEP]`` (document separators may appear inside);
* masked layouts: ``masked_lm_weights`` 1s then 0s; active ``masked_lm_positions`` strictly
  increasing, inside the sequence and pointing at a token (never padding, ``[CLS]`` or
  ``[SEP]``); their ``masked_lm_ids`` inside the vocabulary and not special tokens (nor the
  document separator of MLM-only data); inactive slots 0; no ``[MASK]`` outside the masked
  positions.  Unmasked layouts: no ``[MASK]`` at all.  ``next_sentence_labels`` 0 or 1;
* against the manifest: the feature table (against ``max_seq_length``, ``mlm_only``,
  ``disable_masking``, ``v2_feature_names``), the compression, every listed shard present,
  record counts per file and in total, file sizes, every file's SHA-256 (``file_checks``).

Checks about features a layout does not have are skipped for it.

The vocabulary comes from ``vocab_file=`` (a ``vocab.txt``, ``tokenizer.json`` or SentencePiece
model) or else the tokenizer the manifest records.  Without one,
the ``[CLS]`` and ``[SEP]`` ids are the most common first and last tokens of the first batch of
records (and are then required of every record), ids are range-checked against the manifest's
``vocab_size`` if there is one, and the checks needing the ``[PAD]``/``[MASK]`` ids are skipped;
a note says so.  This is not a failure: the layout checks still run.  A vocabulary whose SHA-256
differs from the manifest's ``vocab_sha256`` gives a warning (not a failure).

With a vocabulary, the [UNK] rate of each dataset's text tokens (masked positions restored,
[CLS]/[SEP] not counted) is reported, and a rate above ``max_unk_rate`` (default 1%) fails: the
vocabulary does not fit the text.

The per-record checks are :mod:`bert_data.tools.record_checks`; this module checks the manifest
and the framing, and drives the record checks over the files.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional

import numpy as np

from ..format.dataset import (ShardSet, decode_records, describe_layout, infer_specs, layout_flags,
                              read_instance_columns, shard_sets)
from ..format.output_formats import FORMATS, format_of_path
from ..format.layout import FeatureSpec, feature_specs
from ..format.manifest import MANIFEST_NAME
from ._common import guess_cls_sep
from .file_checks import no_checksums_note, other_file_problems, shard_damage
from .packed_checks import check_packed_batch
from .record_checks import VocabIds, check_batch
from ..config import default_of

# The generator's default, for data whose manifest does not say.
SEPARATOR = default_of("document_separator_token")

__all__ = ["Problem", "VerifyReport", "verify", "check_batch", "VocabIds", "count_unk", "DEFAULT_MAX_UNK_RATE"]

BATCH = 4096
# verify fails when more than this fraction of a dataset's text tokens is [UNK]: text tokenized
# with a vocabulary that fits it stays far below (BERT-Base uncased on English: about 0.01%),
# while an uncased vocabulary read without do_lower_case gives 5-10% on English text.
DEFAULT_MAX_UNK_RATE = 0.01


@dataclass
class Problem:
    path: str
    record: Optional[int]  # record number within the file (0-based), None for file-level problems
    message: str

    def __str__(self) -> str:
        if self.record is None:
            return f"{self.path}: {self.message}"
        return f"{self.path}: record {self.record}: {self.message}"


@dataclass
class FileResult:
    path: str
    records: int = 0
    bytes: int = 0
    problems: int = 0
    expected: Optional[int] = None  # from the manifest
    complete: bool = True  # False when a framing error stopped the reading


@dataclass
class SplitResult:
    """One dataset (an output directory, or its train/ or val/) as verify saw it."""

    name: str
    files: int = 0
    records: int = 0
    bytes: int = 0
    problems: int = 0

    def __str__(self) -> str:
        status = "OK" if not self.problems else f"FAILED ({self.problems:,} problem(s))"
        return f"{self.name}: {status}: {self.records:,} records in {self.files} file(s), {self.bytes / 1e6:,.1f} MB"


@dataclass
class VerifyReport:
    files: List[FileResult] = field(default_factory=list)
    splits: List[SplitResult] = field(default_factory=list)  # each dataset on its own (train/ and val/ apart)
    problems: List[Problem] = field(default_factory=list)  # the first max_problems
    n_problems: int = 0
    bad_records: int = 0
    warnings: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    seconds: float = 0.0
    max_problems: int = 20
    unk_tokens: int = 0  # [UNK] among the text tokens (masked positions restored, [CLS]/[SEP] not counted)
    text_tokens: int = 0  # of the datasets whose vocabulary is known

    @property
    def ok(self) -> bool:
        return self.n_problems == 0

    @property
    def n_records(self) -> int:
        return sum(f.records for f in self.files)

    @property
    def n_bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    def add(self, problem: Problem, n: int = 1) -> None:
        self.n_problems += n
        if len(self.problems) < self.max_problems:
            self.problems.append(problem)

    @property
    def unk_rate(self) -> Optional[float]:
        return self.unk_tokens / self.text_tokens if self.text_tokens else None

    def summary(self) -> str:
        mb = self.n_bytes / 1e6
        speed = f", {mb / self.seconds:.0f} MB/s" if self.seconds > 0 else ""
        unk = f", [UNK] {self.unk_rate:.2%} of {self.text_tokens:,} text tokens" if self.text_tokens else ""
        read = (f"{self.n_records:,} records in {len(self.files)} file(s), {mb:,.1f} MB{unk}, "
                f"{self.seconds:.1f} s{speed}")
        if self.ok:
            return f"OK: {read}"
        shown = f" (first {len(self.problems)} shown)" if self.n_problems > len(self.problems) else ""
        return (f"FAILED: {self.n_problems:,} problem(s) in {len(self.files)} file(s), "
                f"{self.bad_records:,} bad record(s){shown}; {read}")


# --------------------------------------------------------------------------------------------
# Driving the checks over files
# --------------------------------------------------------------------------------------------


class _FileChecker:
    def __init__(self, report: VerifyReport, specs, ids_holder: dict, display: str):
        self.report = report
        self.specs = specs
        self.ids_holder = ids_holder  # {"ids": VocabIds or None (infer), "size": int or None, "notes": list}
        self.display = display
        self.records: List[bytes] = []
        self.indices: List[int] = []
        self.result = FileResult(display)

    def problem(self, record: Optional[int], message: str, n: int = 1) -> None:
        self.result.problems += n
        self.report.add(Problem(self.display, record, message), n)

    def add(self, index: int, record: bytes) -> None:
        self.records.append(record)
        self.indices.append(index)
        if len(self.records) >= BATCH:
            self.flush()

    def flush(self) -> None:
        if not self.records:
            return
        records, indices = self.records, np.asarray(self.indices)
        self.records, self.indices = [], []
        try:
            cols = decode_records(records, self.specs)
        except ValueError:
            # Find the undecodable records one by one; check the others.
            good = []
            for j, record in enumerate(records):
                try:
                    decode_records([record], self.specs)
                    good.append(j)
                except ValueError as error:
                    message = re.sub(r"^record \d+: ", "", str(error))
                    self.problem(int(indices[j]), message)
                    self.report.bad_records += 1
            if not good:
                return
            cols = decode_records([records[j] for j in good], self.specs)
            indices = indices[good]
        self.check_columns(cols, indices)

    def check_columns(self, cols, indices: np.ndarray) -> None:
        """The record checks over a batch of decoded records (``indices``: their numbers in the file)."""
        ids = self.ids_holder["ids"]
        if ids is None:  # no vocabulary: take [CLS]/[SEP] from the data
            ids = self.ids_holder["ids"] = _infer_ids(cols, self.ids_holder)
        if self.ids_holder.get("unk_id") is not None:
            unk, text = count_unk(cols, self.ids_holder["unk_id"], ids.cls_id, ids.sep_id)
            self.ids_holder["n_unk"] += unk
            self.ids_holder["n_text"] += text
        checks = check_packed_batch(cols, ids) if "positions" in cols else check_batch(cols, ids)
        if not checks:
            return
        bad_any = np.zeros(len(indices), dtype=bool)
        found = []
        room = self.report.max_problems - len(self.report.problems)
        for order, (bad, describe) in enumerate(checks):
            bad_any |= bad
            rows = np.flatnonzero(bad)
            self.result.problems += len(rows)
            self.report.n_problems += len(rows)
            for r in rows[:max(room, 0)]:
                found.append((int(indices[r]), order, describe, int(r)))
        self.report.bad_records += int(bad_any.sum())
        found.sort(key=lambda t: (t[0], t[1]))
        for record, _, describe, r in found[:max(room, 0)]:
            self.report.problems.append(Problem(self.display, record, describe(r)))


def count_unk(cols, unk_id: int, cls_id: int, sep_id: int) -> tuple:
    """``([UNK] count, text tokens)`` of a batch: the original text's tokens (masked positions
    restored from ``masked_lm_ids``), without [CLS] and [SEP]."""
    ids, real = cols["input_ids"], cols["input_mask"] > 0
    if "masked_lm_positions" in cols:
        ids = ids.copy()
        positions = cols["masked_lm_positions"]
        active = (cols["masked_lm_weights"] > 0) & (positions >= 0) & (positions < ids.shape[1])
        rows = np.broadcast_to(np.arange(len(ids))[:, None], positions.shape)
        ids[rows[active], positions[active]] = cols["masked_lm_ids"][active]
    text = real & (ids != cls_id) & (ids != sep_id)
    return int((ids[text] == unk_id).sum()), int(text.sum())


def _check_unk_rate(shard_set: ShardSet, holder: dict, report: VerifyReport, max_unk_rate: float) -> None:
    if holder.get("unk_id") is None:
        report.notes.append(f"{shard_set.name}: [UNK] rate not measured (no vocabulary; pass --vocab_file)")
        return
    unk, text = holder["n_unk"], holder["n_text"]
    report.unk_tokens += unk
    report.text_tokens += text
    if text and unk / text > max_unk_rate:
        report.add(Problem(shard_set.name, None, f"[UNK] rate {unk / text:.2%} ({unk:,} of {text:,} text tokens) is above "
                                             f"--max_unk_rate {max_unk_rate:.2%}: the vocabulary does not fit the text "
                                             "(an uncased vocabulary without do_lower_case? text in another language?)"))


def _infer_ids(cols, holder) -> VocabIds:
    """[CLS]/[SEP] ids without a vocabulary, from the first batch (:func:`guess_cls_sep`)."""
    cls_id, sep_id = (found or 0 for found in guess_cls_sep(cols))
    holder["notes"].append(
        f"no vocabulary: [CLS] = {cls_id} and [SEP] = {sep_id} taken from the data (first and last token) and required "
        f"of every record; {'ids checked against vocab_size ' + str(holder['size']) + ' from the manifest' if holder['size'] else 'ids not range-checked'}"
        f"; [PAD]/[MASK] checks skipped (pass --vocab_file for all checks)")
    separator = sep_id if holder.get("separator_token", "[SEP]") == "[SEP]" else None
    return VocabIds(holder["size"], cls_id, sep_id, separator_id=separator)


def _vocab_for(shard_set: ShardSet, vocab_file: Optional[str], report: VerifyReport, cache: dict):
    """The Vocab for a shard set (or None), with warnings/notes about where it came from: the
    tokenizer the manifest records (vocab.txt, tokenizer.json or SentencePiece model), or
    ``vocab_file`` (any of those)."""
    from ..tokenizers.vocab import VocabError
    from ..tokenizers import TokenizerSource, load_vocabulary

    manifest = shard_set.manifest
    source, missing = TokenizerSource.from_manifest(manifest, shard_set.manifest_path, override=vocab_file)
    if missing:
        report.notes.append(f"{shard_set.name}: {missing}")
    if source is None:
        return None
    path = source.vocab_file or source.path
    if source not in cache:
        try:
            cache[source] = load_vocabulary(source)
        except VocabError as error:
            raise ValueError(str(error)) from None
    vocab = cache[source]
    sha = manifest.vocab_sha256 if manifest is not None else None
    if sha and sha != vocab.sha256:
        report.warnings.append(
            f"{shard_set.name}: vocabulary {path} (sha256 {vocab.sha256[:12]}..., {vocab.size} tokens) is not "
            f"the one the data was made with (manifest: sha256 {sha[:12]}..., "
            f"{manifest.vocab_size or '?'} tokens)")
    return vocab


def _table(specs: List[FeatureSpec]) -> dict:
    """A layout as the manifest's feature table shows it."""
    return {spec.name: {"dtype": spec.dtype, "length": spec.length} for spec in specs}


def _check_manifest(shard_set: ShardSet, report: VerifyReport) -> Optional[tuple]:
    """Manifest-level checks; returns ``(specs, compression)`` or None when the manifest is unusable."""
    manifest, name = shard_set.manifest, shard_set.manifest_path
    try:
        msl, mpp = manifest.max_seq_length, manifest.max_predictions_per_seq
    except (KeyError, TypeError, ValueError):
        report.add(Problem(name, None, "no usable max_seq_length / max_predictions_per_seq"))
        return None
    try:
        compression = manifest.compression
    except ValueError:
        report.add(Problem(name, None, f"compression {manifest.option('compression')!r} is not null, gzip or zlib"))
        return None
    implied = manifest.implied_specs
    specs = manifest.specs
    if manifest.features:
        try:
            layout_flags(specs)
        except ValueError as error:
            report.add(Problem(name, None, f"features {_table(specs)} are not a BERT record layout ({error})"))
            return None
        if specs != implied:
            said = ", ".join(f"{key}={value}" for key, value in (
                ("max_seq_length", msl), ("max_predictions_per_seq", mpp), ("mlm_only", manifest.mlm_only),
                ("disable_masking", not manifest.masked), ("v2_feature_names", manifest.v2_feature_names),
                ("pack_sequences", manifest.packed)))
            report.add(Problem(name, None, f"features {_table(specs)} differ from the layout of {said}: "
                                           f"{_table(implied)}"))
    total = sum(manifest.examples_per_file.values())
    if manifest.n_examples != total:
        report.add(Problem(name, None, f"n_examples is {manifest.n_examples} but examples_per_file "
                                       f"adds up to {total}"))
    for path in shard_set.unlisted:
        report.warnings.append(f"{path}: not listed in {name} (not part of the dataset; ignored)")
    return specs, compression


_COMPRESSION_TEXT = {None: "uncompressed", "gzip": "gzip-compressed", "zlib": "zlib-compressed"}


def verify(paths, vocab_file: Optional[str] = None, max_problems: int = 20,
           on_file: Optional[Callable[[FileResult], None]] = None, compression="auto",
           max_unk_rate: float = DEFAULT_MAX_UNK_RATE) -> VerifyReport:
    """Check every record under ``paths`` (output directories, shard files or globs).

    The layout and compression of a dataset come from its manifest; files without one
    get their layout from their first record and their compression from ``compression``
    (None, "gzip" or "zlib"), by default ("auto") from their first bytes.  A file whose content
    is not compressed as its manifest says is a problem (its records are still checked).

    With a vocabulary, the [UNK] rate of each dataset's text tokens is measured and a rate above
    ``max_unk_rate`` is a problem.

    Returns a :class:`VerifyReport`; ``report.ok`` is True only if every check held.  Raises
    ``ValueError`` for paths that name nothing or an unreadable vocabulary.
    """
    from ..format.tfrecord import normalize_compression

    given = normalize_compression(compression)
    started = time.perf_counter()
    report = VerifyReport(max_problems=max_problems)
    vocab_cache: dict = {}
    for shard_set in shard_sets(paths):
        first_file, problems_before = len(report.files), report.n_problems
        _verify_set(shard_set, report, vocab_file, vocab_cache, on_file, given, max_unk_rate)
        for path, message in other_file_problems(shard_set):  # Megatron's .idx, MDS's index.json
            report.add(Problem(path, None, message))
        report.notes.extend(filter(None, [no_checksums_note(shard_set)]))
        files = report.files[first_file:]
        split = SplitResult(shard_set.name, len(files), sum(f.records for f in files), sum(f.bytes for f in files))
        if files and not split.records and report.n_problems == problems_before:
            fix = ("; regenerate with a larger --val_fraction, or without one" if os.path.basename(
                os.path.normpath(shard_set.name)) == "val" else "")
            report.add(Problem(shard_set.name, None, f"empty: no record in its {len(files)} file(s){fix}"))
        split.problems = report.n_problems - problems_before
        report.splits.append(split)
    report.seconds = time.perf_counter() - started
    return report


def _verify_set(shard_set: ShardSet, report: VerifyReport, vocab_file, vocab_cache: dict, on_file, given,
                max_unk_rate: float) -> None:
    """The checks of :func:`verify` for one dataset."""
    from ..format.tfrecord import CorruptRecordError, NotTFRecordError, detect_compression, file_format

    specs = None
    manifest = shard_set.manifest

    def compression_of(path):
        return given if given != "auto" else detect_compression(path)

    declared = FORMATS.get(manifest.output_format) if manifest is not None else None
    if declared is not None and not declared.instances:  # Megatron's tokenized corpus
        _verify_corpus(shard_set, report, on_file)
        return
    if manifest is not None:
        checked = _check_manifest(shard_set, report)
        if checked is None:
            return
        specs, set_compression = checked
        compressions = {path: set_compression for path in shard_set.files}
    else:
        report.notes.append(f"{', '.join(os.path.basename(f) for f in shard_set.files[:3])}"
                            f"{' ...' if len(shard_set.files) > 3 else ''}: no {MANIFEST_NAME} "
                            f"lists these files: manifest checks (counts, sizes, vocabulary hash) skipped, "
                            f"layout inferred from the first record")
        compressions = {path: compression_of(path) for path in shard_set.files}
        for path in shard_set.files:
            try:
                specs = infer_specs(path, compressions[path])
            except NotTFRecordError as error:  # a file given that no manifest lists: a wrong argument
                raise ValueError(str(error)) from None
            except CorruptRecordError:
                specs = None  # reported when the file is read
            except ValueError as error:
                report.add(Problem(path, 0, f"not a BERT example ({error}); cannot infer the layout"))
                specs = None
                break
            if specs:
                report.notes.append(f"layout from {os.path.basename(path)} record 0: {describe_layout(specs)}")
                break
        if specs is None:
            for path in shard_set.files:  # framing only
                _read_framing_only(path, report, on_file, compressions[path])
            return
    vocab = _vocab_for(shard_set, vocab_file, report, vocab_cache)
    flags = layout_flags(specs)
    separator_token = manifest.option("document_separator_token", SEPARATOR) if manifest else SEPARATOR
    holder = {"ids": None, "size": manifest.vocab_size if manifest else None, "notes": report.notes,
              "separator_token": separator_token, "unk_id": vocab.unk_id if vocab is not None else None,
              "n_unk": 0, "n_text": 0}
    if vocab is not None:
        separator = vocab.token_to_id.get(separator_token) if flags["mlm_only"] else None
        if flags["mlm_only"] and separator is None:
            report.warnings.append(f"{shard_set.name}: document_separator_token {separator_token} is not in the "
                                   f"vocabulary {vocab.path}")
        holder["ids"] = VocabIds(vocab.size, vocab.cls_id, vocab.sep_id, vocab.pad_id, vocab.mask_id,
                                 vocab.tokens, separator)
    per_file = manifest.examples_per_file if manifest else {}
    sizes = manifest.bytes_per_file if manifest else {}
    for path in shard_set.files:
        base = os.path.basename(path)
        if not os.path.isfile(path):
            report.add(Problem(path, None, "listed in the manifest but missing"))
            report.files.append(FileResult(path, complete=False))
            continue
        checker = _FileChecker(report, specs, holder, path)
        result = checker.result
        result.expected = per_file.get(base)
        result.bytes = os.path.getsize(path)
        file_compression = compressions[path]
        framed = format_of_path(path).framed_records  # TFRecord: its records and framing checked here
        if not framed:  # HDF5, Parquet, MDS: read as their format is
            _read_columns_file(path, checker)
        elif manifest is not None and result.bytes:
            found = file_format(path)
            found_compression = None if found == "tfrecord" else found
            if found_compression != file_compression:
                what = _COMPRESSION_TEXT[found_compression] if found else "neither a TFRecord file nor gzip or zlib data"
                checker.problem(None, f"the manifest says {_COMPRESSION_TEXT[file_compression]}, but the file is "
                                      f"{what}")
                file_compression = found_compression  # check the records anyway
        if framed:
            _read_file(path, checker, file_compression)
        checker.flush()
        if result.complete:
            if result.expected is not None and result.records != result.expected:
                checker.problem(None, f"{result.records} records, the manifest says {result.expected}")
            if base in sizes and sizes[base] != result.bytes:
                checker.problem(None, f"{result.bytes} bytes, the manifest says {sizes[base]}")
        damaged = shard_damage(path, shard_set, size_said=result.complete)  # (the size, said above if complete)
        if damaged is not None:
            checker.problem(None, damaged)
        report.files.append(result)
        if on_file:
            on_file(result)
    _check_unk_rate(shard_set, holder, report, max_unk_rate)


def _verify_corpus(shard_set: ShardSet, report: VerifyReport, on_file) -> None:
    """A tokenized corpus (Megatron's ``.bin``/``.idx`` pairs): see ``corpus_checks``."""
    from .corpus_checks import check_corpus_file

    manifest = shard_set.manifest
    for path in shard_set.files:
        base = os.path.basename(path)
        result = FileResult(path, expected=manifest.examples_per_file.get(base))
        if not os.path.isfile(path):
            report.add(Problem(path, None, "listed in the manifest but missing"))
            report.files.append(FileResult(path, complete=False))
            continue
        result.bytes = os.path.getsize(path)
        result.records, problems = check_corpus_file(path, manifest.vocab_size)
        if result.expected is not None and result.records != result.expected:
            problems.append((None, f"{result.records} sequences, the manifest says {result.expected}"))
        if base in manifest.bytes_per_file and manifest.bytes_per_file[base] != result.bytes:
            problems.append((None, f"{result.bytes} bytes, the manifest says {manifest.bytes_per_file[base]}"))
        problems.extend((None, damaged) for damaged in [shard_damage(path, shard_set, size_said=True)] if damaged)
        for sequence, message in problems:
            result.problems += 1
            report.add(Problem(path, sequence, message))
        report.files.append(result)
        if on_file:
            on_file(result)


def _read_columns_file(path: str, checker: _FileChecker) -> None:
    """A shard of an instance format other than TFRecord, through its reader: every record
    checked as TFRecord's are; a file its format's library cannot read ends there."""
    result, index = checker.result, 0
    try:
        for cols in read_instance_columns(path, checker.specs, BATCH, verify_checksums=False):  # hashed apart
            n = len(cols["input_ids"])
            checker.check_columns(cols, np.arange(index, index + n))
            index += n
            result.records += n
    except Exception as error:  # noqa: BLE001 -- h5py, pyarrow and our MDS reader raise their own
        checker.problem(index, f"unreadable from record {index}: {type(error).__name__}: {error}")
        checker.report.bad_records += 1
        result.complete = False


def _read_file(path: str, checker: _FileChecker, compression: Optional[str] = None) -> None:
    """Feed every record to ``checker``; a data CRC failure skips that record, anything else
    that breaks the framing (or the compressed stream) stops the file."""
    from ..format.tfrecord import CompressionError, CorruptRecordError, NotTFRecordError, iter_records, open_records

    result = checker.result
    where = "uncompressed byte" if compression else "byte"
    kind = f"{compression} " if compression else ""
    stream, owns = open_records(path, compression)
    try:
        base_index = 0
        base_offset = 0
        while True:
            index = base_index
            try:
                for record in iter_records(stream):
                    checker.add(index, record)
                    index += 1
                    result.records += 1
                return
            except CorruptRecordError as error:
                offset = base_offset + error.offset
                checker.flush()  # earlier records first
                if isinstance(error, NotTFRecordError):
                    content = "its first bytes, decompressed," if compression else "its first bytes"
                    checker.problem(None, f"not a TFRecord file ({content} {error.reason})")
                    checker.report.bad_records += 1
                    result.complete = False
                    return
                if error.reason == "data CRC mismatch":
                    checker.problem(index, f"data CRC mismatch, record at {where} {offset}; record skipped")
                    checker.report.bad_records += 1
                    result.records += 1
                    base_offset = stream.tell()  # the reader stopped right after the bad record
                    base_index = index + 1
                    continue
                checker.problem(index, f"{error.reason}, record at {where} {offset}; the rest of the "
                                       f"{kind}file is unreadable")
                checker.report.bad_records += 1
                result.complete = False
                return
            except CompressionError as error:
                checker.flush()
                checker.problem(index, f"{error}: this record and the rest of the file are unreadable")
                checker.report.bad_records += 1
                result.complete = False
                return
    finally:
        if owns:
            stream.close()


def _read_framing_only(path: str, report: VerifyReport, on_file, compression: Optional[str] = None) -> None:
    """Framing and CRCs only: for files whose record layout could not be found."""
    from ..format.tfrecord import CorruptRecordError, iter_records

    result = FileResult(path, bytes=os.path.getsize(path) if os.path.isfile(path) else 0)
    try:
        for _ in iter_records(path, compression=compression):
            result.records += 1
    except CorruptRecordError as error:
        result.problems += 1
        result.complete = False
        report.bad_records += 1
        where = "uncompressed byte" if error.compression else "byte"
        report.add(Problem(path, error.record_index, f"{error.reason}, record at {where} {error.offset}"))
    report.files.append(result)
    if on_file:
        on_file(result)
