"""``bert-data verify``: check every record of a dataset before training on it.

Checked, for every record (numpy, vectorised over batches of decoded records; no TensorFlow):

* framing: length and data CRCs, truncation (a record whose data CRC fails is reported and
  skipped, reading goes on; a bad length header or truncation ends the file); for gzip/zlib
  shards also the compressed stream (corrupt or truncated data, data after a zlib stream, a
  file whose compression is not the manifest's: all reported with the record reached);
* layout: exactly the features of the dataset's layout (:func:`bert_data.format.layout.feature_specs`:
  Google's seven, MLM-only, unmasked, v2 names), with their types and lengths (from
  ``data_params.json``, else inferred from the first record);
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
  record counts per file and in total, file sizes.

Checks about features a layout does not have are skipped for it.

The vocabulary comes from ``vocab_file=`` or else the manifest's ``vocab_file``.  Without one,
the ``[CLS]`` and ``[SEP]`` ids are the most common first and last tokens of the first batch of
records (and are then required of every record), ids are range-checked against the manifest's
``vocab_size`` if there is one, and the checks needing the ``[PAD]``/``[MASK]`` ids are skipped;
a note says so.  This is not a failure: the layout checks still run.  A vocabulary whose SHA-256
differs from the manifest's ``vocab_sha256`` gives a warning (not a failure).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from ..format.layout import canonical_name, feature_specs
from ..load.loaders import (ShardGroup, describe_layout, infer_specs, layout_flags, manifest_specs, manifest_vocab_file,
                      shard_groups)

__all__ = ["Problem", "VerifyReport", "verify", "check_batch", "VocabIds"]

BATCH = 4096


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
class VerifyReport:
    files: List[FileResult] = field(default_factory=list)
    problems: List[Problem] = field(default_factory=list)  # the first max_problems
    n_problems: int = 0
    bad_records: int = 0
    warnings: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    seconds: float = 0.0
    max_problems: int = 20

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

    def summary(self) -> str:
        mb = self.n_bytes / 1e6
        speed = f", {mb / self.seconds:.0f} MB/s" if self.seconds > 0 else ""
        read = (f"{self.n_records:,} records in {len(self.files)} file(s), {mb:,.1f} MB, "
                f"{self.seconds:.1f} s{speed}")
        if self.ok:
            return f"OK: {read}"
        shown = f" (first {len(self.problems)} shown)" if self.n_problems > len(self.problems) else ""
        return (f"FAILED: {self.n_problems:,} problem(s) in {len(self.files)} file(s), "
                f"{self.bad_records:,} bad record(s){shown}; {read}")


@dataclass
class VocabIds:
    """The ids the checks need; None when unknown (the check is then skipped)."""

    size: Optional[int]
    cls_id: int
    sep_id: int
    pad_id: Optional[int] = None
    mask_id: Optional[int] = None
    tokens: Optional[Sequence[str]] = None
    separator_id: Optional[int] = None  # MLM-only data: the document separator (never a target)

    def name(self, token_id: int) -> str:
        if self.tokens is not None and 0 <= token_id < len(self.tokens):
            return f"{token_id} ({self.tokens[token_id]})"
        return str(token_id)


# --------------------------------------------------------------------------------------------
# The per-record checks, vectorised
# --------------------------------------------------------------------------------------------

Check = tuple  # (bad: (n,) bool, describe: row -> str)


def check_batch(cols: Dict[str, np.ndarray], ids: VocabIds) -> List[Check]:
    """Checks on one batch of decoded records: a list of ``(bad_rows, describe(row))``.

    ``cols`` holds the features of one layout under their canonical names (``input_ids``,
    ``segment_ids``); checks about features it lacks are skipped.  Checks that depend on a
    well-formed ``input_mask`` or ``segment_ids`` only look at the rows where those are well
    formed, so one broken record gives one or two messages, not twenty.
    """
    input_ids = cols["input_ids"]
    mask = cols["input_mask"]
    has_segments = "segment_ids" in cols
    masked = "masked_lm_positions" in cols
    n, msl = input_ids.shape
    rows = np.arange(n)
    col = np.arange(msl)
    checks: List[Check] = []

    def add(bad, describe):
        if bad.any():
            checks.append((bad, describe))

    def first_col(matrix_bad, row):
        return int(np.flatnonzero(matrix_bad[row])[0])

    # ---- input_mask: 1s then 0s, at least [CLS] a [SEP] b [SEP] (MLM-only: [CLS] a [SEP])
    length = mask.sum(axis=1)
    mask_ok = (mask == (col < length[:, None])).all(axis=1)
    add(~mask_ok, lambda r: f"input_mask is not 1s then 0s: {_short(mask[r])}")
    shortest, form = (5, "[CLS] A [SEP] B [SEP]") if has_segments else (3, "[CLS] tokens [SEP]")
    too_short = mask_ok & (length < shortest)
    add(too_short, lambda r: f"sequence has {int(length[r])} tokens; {form} needs at least {shortest}")
    ok = mask_ok & ~too_short
    length_c = np.clip(length, 1, msl)  # safe indices for the rows that are not ok

    # ---- input_ids: vocabulary range, padding
    if ids.size is not None:
        out = (input_ids < 0) | (input_ids >= ids.size)
    else:
        out = input_ids < 0
    out_rows = out.any(axis=1)
    limit = f"[0, {ids.size})" if ids.size is not None else "[0, ...)"
    add(out_rows, lambda r: f"input_ids[{first_col(out, r)}] = {int(input_ids[r, first_col(out, r)])} "
                            f"is outside the vocabulary {limit}")
    pad_bad = mask_ok[:, None] & (col >= length[:, None]) & (input_ids != 0)
    add(pad_bad.any(axis=1), lambda r: f"input_ids[{first_col(pad_bad, r)}] = "
                                       f"{int(input_ids[r, first_col(pad_bad, r)])} in the padding (must be 0)")

    # ---- [CLS] first, [SEP] last
    add(ok & (input_ids[:, 0] != ids.cls_id),
        lambda r: f"input_ids[0] is {ids.name(int(input_ids[r, 0]))}, expected [CLS] = {ids.name(ids.cls_id)}")
    last = input_ids[rows, length_c - 1]
    add(ok & (last != ids.sep_id),
        lambda r: f"input_ids[{int(length[r]) - 1}] (last token) is {ids.name(int(last[r]))}, "
                  f"expected [SEP] = {ids.name(ids.sep_id)}")

    # ---- segment_ids: 0s then 1s then padding 0s; both segments non-empty
    if has_segments:
        seg = cols["segment_ids"]
        n_b = np.where(mask == 1, seg, 0).sum(axis=1)
        b_start = length - n_b
        expected_seg = (col >= b_start[:, None]) & (col < length[:, None])
        seg_ok = mask_ok & (seg == expected_seg).all(axis=1)
        add(mask_ok & ~seg_ok, lambda r: f"segment_ids are not 0s, then 1s, then padding 0s: {_short(seg[r])}")
        seg_ok &= ok
        empty_b = seg_ok & (n_b < 2)
        add(empty_b, lambda r: "segment B is empty (segment_ids has no 1 before the final [SEP])")
        empty_a = seg_ok & (b_start < 3)
        add(empty_a, lambda r: "segment A is empty ([CLS] [SEP] with nothing between)")
        seg_ok &= ~empty_a & ~empty_b
        sep_a = np.clip(b_start - 1, 0, msl - 1)
        first_sep = input_ids[rows, sep_a]
        add(seg_ok & (first_sep != ids.sep_id),
            lambda r: f"input_ids[{int(sep_a[r])}] (end of segment A) is {ids.name(int(first_sep[r]))}, "
                      f"expected [SEP] = {ids.name(ids.sep_id)}")
    else:
        seg_ok = np.zeros(n, dtype=bool)
        sep_a = np.zeros(n, dtype=np.int64)

    if masked:
        _check_masked_lm(cols, ids, add, first_col, ok, length, seg_ok, sep_a, limit)
    elif ids.mask_id is not None:
        stray = input_ids == ids.mask_id
        add(stray.any(axis=1),
            lambda r: f"input_ids[{first_col(stray, r)}] is [MASK] in unmasked data (no masked_lm features)")

    # ---- next sentence label
    if "next_sentence_labels" in cols:
        nsp = cols["next_sentence_labels"][:, 0]
        add((nsp != 0) & (nsp != 1), lambda r: f"next_sentence_labels is {int(nsp[r])}, expected 0 or 1")
    return checks


def _check_masked_lm(cols, ids: VocabIds, add, first_col, ok, length, seg_ok, sep_a, limit) -> None:
    input_ids = cols["input_ids"]
    pos = cols["masked_lm_positions"]
    lab = cols["masked_lm_ids"]
    w = cols["masked_lm_weights"]
    n, msl = input_ids.shape
    mpp = pos.shape[1]
    rows = np.arange(n)

    # ---- masked_lm_weights: 1s then 0s
    k = (w == 1).sum(axis=1)
    kcol = np.arange(mpp)
    active = kcol < k[:, None]
    w_ok = (w == active).all(axis=1)
    add(~w_ok, lambda r: f"masked_lm_weights are not 1.0s then 0.0s: {_short(w[r])}")

    # ---- masked_lm_positions / ids
    pw = w_ok & ok
    at_pad = active & (pos >= length[:, None])
    below = active & (pos < 0)
    bad_pos = pw[:, None] & (at_pad | below)
    add(bad_pos.any(axis=1),
        lambda r: f"masked_lm_positions[{first_col(bad_pos, r)}] = {int(pos[r, first_col(bad_pos, r)])} "
                  f"is outside the sequence of {int(length[r])} tokens (points at padding)")
    special = active & ((pos == 0) | (pos == (length - 1)[:, None]) | (seg_ok[:, None] & (pos == sep_a[:, None])))
    special &= pw[:, None] & ~bad_pos
    add(special.any(axis=1),
        lambda r: f"masked_lm_positions[{first_col(special, r)}] = {int(pos[r, first_col(special, r)])} "
                  f"points at [CLS] or [SEP]")
    if mpp > 1:
        not_inc = pw[:, None] & active[:, 1:] & (pos[:, 1:] <= pos[:, :-1])
        add(not_inc.any(axis=1),
            lambda r: f"masked_lm_positions are not strictly increasing: {_short(pos[r, :int(k[r])])}")
    tail = w_ok[:, None] & ~active & ((pos != 0) | (lab != 0))
    add(tail.any(axis=1),
        lambda r: f"unused masked_lm slot {first_col(tail, r)} (weight 0) has position "
                  f"{int(pos[r, first_col(tail, r)])} and id {int(lab[r, first_col(tail, r)])}, expected 0 and 0")
    if ids.size is not None:
        lab_out = active & ((lab < 0) | (lab >= ids.size))
    else:
        lab_out = active & (lab < 0)
    add(lab_out.any(axis=1),
        lambda r: f"masked_lm_ids[{first_col(lab_out, r)}] = {int(lab[r, first_col(lab_out, r)])} "
                  f"is outside the vocabulary {limit}")
    specials = [ids.cls_id, ids.sep_id] + [x for x in (ids.pad_id, ids.mask_id) if x is not None]
    if "segment_ids" not in cols and ids.separator_id is not None:
        specials.append(ids.separator_id)
    lab_special = active & ~lab_out & np.isin(lab, specials)
    add(lab_special.any(axis=1),
        lambda r: f"masked_lm_ids[{first_col(lab_special, r)}] is {ids.name(int(lab[r, first_col(lab_special, r)]))}: "
                  f"a special token cannot be a masked-LM target")
    if ids.mask_id is not None:
        masked_here = np.zeros((n, msl), dtype=bool)
        r_idx = np.broadcast_to(rows[:, None], pos.shape)
        inside = active & (pos >= 0) & (pos < msl)
        masked_here[r_idx[inside], pos[inside]] = True
        stray = (input_ids == ids.mask_id) & ~masked_here & w_ok[:, None]
        add(stray.any(axis=1),
            lambda r: f"input_ids[{first_col(stray, r)}] is [MASK] but is not a masked_lm position")


def _short(values: np.ndarray, limit: int = 24) -> str:
    shown = [str(int(v)) if float(v).is_integer() else f"{float(v):g}" for v in values[:limit]]
    return "[" + " ".join(shown) + (" ...]" if len(values) > limit else "]")


# --------------------------------------------------------------------------------------------
# Driving the checks over files
# --------------------------------------------------------------------------------------------


class _FileChecker:
    def __init__(self, report: VerifyReport, specs, ids_holder: dict, display: str):
        self.report = report
        self.specs = specs
        self.canonical = {spec.name: canonical_name(spec.name) for spec in specs}
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
        from ..format.example_codec import decode_examples

        records, indices = self.records, np.asarray(self.indices)
        self.records, self.indices = [], []
        try:
            cols = decode_examples(records, self.specs)
        except ValueError:
            # Find the undecodable records one by one; check the others.
            good = []
            for j, record in enumerate(records):
                try:
                    decode_examples([record], self.specs)
                    good.append(j)
                except ValueError as error:
                    message = re.sub(r"^record \d+: ", "", str(error))
                    self.problem(int(indices[j]), message)
                    self.report.bad_records += 1
            if not good:
                return
            cols = decode_examples([records[j] for j in good], self.specs)
            indices = indices[good]
        cols = {self.canonical[name]: value for name, value in cols.items()}
        ids = self.ids_holder["ids"]
        if ids is None:  # no vocabulary: take [CLS]/[SEP] from the data
            ids = self.ids_holder["ids"] = _infer_ids(cols, self.ids_holder)
        checks = check_batch(cols, ids)
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


def _infer_ids(cols, holder) -> VocabIds:
    """[CLS]/[SEP] ids without a vocabulary: the most common first and last token of the first
    batch (so one bad record at the start does not condemn all the others)."""
    ids = cols["input_ids"]
    length = np.clip(cols["input_mask"].sum(axis=1), 1, ids.shape[1])
    firsts = ids[:, 0]
    lasts = ids[np.arange(len(ids)), length - 1]
    cls_id = int(np.bincount(firsts[firsts >= 0]).argmax()) if (firsts >= 0).any() else 0
    sep_id = int(np.bincount(lasts[lasts >= 0]).argmax()) if (lasts >= 0).any() else 0
    holder["notes"].append(
        f"no vocabulary: [CLS] = {cls_id} and [SEP] = {sep_id} taken from the data (first and last token) and required "
        f"of every record; {'ids checked against vocab_size ' + str(holder['size']) + ' from the manifest' if holder['size'] else 'ids not range-checked'}"
        f"; [PAD]/[MASK] checks skipped (pass --vocab_file for all checks)")
    separator = sep_id if holder.get("separator_token", "[SEP]") == "[SEP]" else None
    return VocabIds(holder["size"], cls_id, sep_id, separator_id=separator)


def _vocab_for(group: ShardGroup, vocab_file: Optional[str], report: VerifyReport, cache: dict):
    """The Vocab for a group (or None), with warnings/notes about where it came from."""
    from ..tokenization import VocabError, load_vocab

    manifest = group.manifest or {}
    path = vocab_file
    if path is None:
        listed = manifest.get("vocab_file")
        path = manifest_vocab_file(manifest, group.manifest_path)
        if listed and path is None:
            report.notes.append(f"{group.name}: the manifest's vocab_file {listed} does not exist")
    if path is None:
        return None
    if path not in cache:
        try:
            cache[path] = load_vocab(path)
        except VocabError as error:
            raise ValueError(str(error)) from None
    vocab = cache[path]
    sha = manifest.get("vocab_sha256")
    if sha and sha != vocab.sha256:
        report.warnings.append(
            f"{group.name}: vocabulary {path} (sha256 {vocab.sha256[:12]}..., {vocab.size} tokens) is not "
            f"the one the data was made with (manifest: sha256 {sha[:12]}..., "
            f"{manifest.get('vocab_size', '?')} tokens)")
    return vocab


def _check_manifest(group: ShardGroup, report: VerifyReport) -> Optional[tuple]:
    """Manifest-level checks; returns ``(specs, compression)`` or None when the manifest is unusable."""
    from ..format.tfrecord import normalize_compression

    manifest, name = group.manifest, group.manifest_path
    try:
        msl, mpp = int(manifest["max_seq_length"]), int(manifest["max_predictions_per_seq"])
    except (KeyError, TypeError, ValueError):
        report.add(Problem(name, None, "no usable max_seq_length / max_predictions_per_seq"))
        return None
    try:
        compression = normalize_compression(manifest.get("compression"))
        if compression == "auto":
            raise ValueError("compression 'auto'")
    except ValueError:
        report.add(Problem(name, None, f"compression {manifest.get('compression')!r} is not null, gzip or zlib"))
        return None
    options = dict(mlm_only=bool(manifest.get("mlm_only")), masked=not manifest.get("disable_masking"),
                   v2_feature_names=bool(manifest.get("v2_feature_names")))
    implied = feature_specs(msl, mpp, **options)
    specs = implied
    features = manifest.get("features")
    if features is not None:
        try:
            specs = manifest_specs(manifest)
            layout_flags(specs)
        except (KeyError, TypeError, ValueError) as error:
            report.add(Problem(name, None, f"features {features} are not a BERT record layout ({error})"))
            return None
        expected = {s.name: {"dtype": s.dtype, "length": s.length} for s in implied}
        if features != expected:
            said = ", ".join(f"{key}={value}" for key, value in (
                ("max_seq_length", msl), ("max_predictions_per_seq", mpp), ("mlm_only", options["mlm_only"]),
                ("disable_masking", not options["masked"]), ("v2_feature_names", options["v2_feature_names"])))
            report.add(Problem(name, None, f"features {features} differ from the layout of {said}: {expected}"))
    per_file = manifest.get("examples_per_file", {})
    total = sum(per_file.values())
    if "n_examples" in manifest and manifest["n_examples"] != total:
        report.add(Problem(name, None, f"n_examples is {manifest['n_examples']} but examples_per_file "
                                       f"adds up to {total}"))
    for path in group.unlisted:
        report.warnings.append(f"{path}: not listed in {name} (not part of the dataset; ignored)")
    return specs, compression


_COMPRESSION_TEXT = {None: "uncompressed", "gzip": "gzip-compressed", "zlib": "zlib-compressed"}


def verify(paths, vocab_file: Optional[str] = None, max_problems: int = 20,
           on_file: Optional[Callable[[FileResult], None]] = None, compression="auto") -> VerifyReport:
    """Check every record under ``paths`` (output directories, shard files or globs).

    The layout and compression of a dataset come from its ``data_params.json``; files without one
    get their layout from their first record and their compression from ``compression``
    (None, "gzip" or "zlib"), by default ("auto") from their first bytes.  A file whose content
    is not compressed as its manifest says is a problem (its records are still checked).

    Returns a :class:`VerifyReport`; ``report.ok`` is True only if every check held.  Raises
    ``ValueError`` for paths that name nothing or an unreadable vocabulary.
    """
    from ..format.tfrecord import CorruptRecordError, detect_compression, normalize_compression

    given = normalize_compression(compression)
    started = time.perf_counter()
    report = VerifyReport(max_problems=max_problems)
    vocab_cache: dict = {}
    for group in shard_groups(paths):
        specs = None
        manifest = group.manifest or {}

        def compression_of(path):
            return given if given != "auto" else detect_compression(path)

        if group.manifest is not None:
            checked = _check_manifest(group, report)
            if checked is None:
                continue
            specs, group_compression = checked
            compressions = {path: group_compression for path in group.files}
        else:
            report.notes.append(f"{', '.join(os.path.basename(f) for f in group.files[:3])}"
                                f"{' ...' if len(group.files) > 3 else ''}: no data_params.json "
                                f"lists these files: manifest checks (counts, sizes, vocabulary hash) skipped, "
                                f"layout inferred from the first record")
            compressions = {path: compression_of(path) for path in group.files}
            for path in group.files:
                try:
                    specs = infer_specs(path, compressions[path])
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
                for path in group.files:  # framing only
                    _read_framing_only(path, report, on_file, compressions[path])
                continue
        vocab = _vocab_for(group, vocab_file, report, vocab_cache)
        flags = layout_flags(specs)
        separator_token = manifest.get("document_separator_token") or "[SEP]"
        holder = {"ids": None, "size": manifest.get("vocab_size"), "notes": report.notes,
                  "separator_token": separator_token}
        if vocab is not None:
            separator = vocab.token_to_id.get(separator_token) if flags["mlm_only"] else None
            if flags["mlm_only"] and separator is None:
                report.warnings.append(f"{group.name}: document_separator_token {separator_token} is not in the "
                                       f"vocabulary {vocab.path}")
            holder["ids"] = VocabIds(vocab.size, vocab.cls_id, vocab.sep_id, vocab.pad_id, vocab.mask_id,
                                     vocab.tokens, separator)
        per_file = manifest.get("examples_per_file", {})
        sizes = manifest.get("bytes_per_file", {})
        for path in group.files:
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
            if group.manifest is not None and result.bytes:
                found = detect_compression(path)
                if found != file_compression:
                    checker.problem(None, f"the manifest says {_COMPRESSION_TEXT[file_compression]}, but the file is "
                                          f"{_COMPRESSION_TEXT[found] if found or _is_tfrecord(path) else 'neither a TFRecord file nor gzip or zlib data'}")
                    file_compression = found  # check the records anyway
            _read_file(path, checker, file_compression)
            checker.flush()
            if result.complete:
                if result.expected is not None and result.records != result.expected:
                    checker.problem(None, f"{result.records} records, the manifest says {result.expected}")
                if base in sizes and sizes[base] != result.bytes:
                    checker.problem(None, f"{result.bytes} bytes, the manifest says {sizes[base]}")
            report.files.append(result)
            if on_file:
                on_file(result)
    report.seconds = time.perf_counter() - started
    return report


def _is_tfrecord(path: str) -> bool:
    """Whether the file starts with a valid TFRecord length header."""
    from ..format.tfrecord import masked_crc32c

    with open(path, "rb") as handle:
        head = handle.read(12)
    return len(head) == 12 and int.from_bytes(head[8:], "little") == masked_crc32c(head[:8])


def _read_file(path: str, checker: _FileChecker, compression: Optional[str] = None) -> None:
    """Feed every record to ``checker``; a data CRC failure skips that record, anything else
    that breaks the framing (or the compressed stream) stops the file."""
    from ..format.tfrecord import CompressionError, CorruptRecordError, iter_records, open_records

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
