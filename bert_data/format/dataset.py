"""A dataset on disk: its shard files, the manifest that lists them, their record layout and
compression, and decoding its records to columns.

Paths name a dataset everywhere (loaders and tools alike): a shard file, a glob
(``out/*.tfrecords``), an output directory (its manifest lists the shards), a comma-separated
list of those (as Google's ``--input_file``) or a Python list of them.  The layout and
compression come from the manifest next to the shards (:class:`~bert_data.format.manifest.Manifest`),
else from the first record and the first bytes of each file, else from the caller's arguments.

:func:`decode_records` is where records become numpy columns for every reader and tool, and
where TF Model Garden's v2 feature names become canonical ones: code after it sees
``input_ids`` and ``segment_ids`` only.
"""

from __future__ import annotations

import glob as _glob
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Union

from .dataset_layout import SPLITS, TRAIN, is_shard_name, shard_suffix, unfinished_message, unfinished_run
from .layout import FLOAT32, INT64, V2_NAMES, FeatureSpec, canonical_name, feature_specs, layout_options
from .manifest import MANIFEST_NAME, Manifest
from .output_formats import HDF5, ShardOptions, format_of_path

__all__ = [
    "Paths",
    "natural_key",
    "resolve_shards",
    "ShardSet",
    "shard_sets",
    "find_manifest",
    "layout_flags",
    "describe_layout",
    "infer_specs",
    "DatasetInfo",
    "dataset_info",
    "shard_set_info",
    "decode_records",
]

_GLOB_CHARS = re.compile(r"[*?\[]")

Paths = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]


# --------------------------------------------------------------------------------------------
# Shards and their manifests
# --------------------------------------------------------------------------------------------


def natural_key(path: str):
    """Sort key putting ``examples-2`` before ``examples-10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def _items(paths: Paths) -> List[str]:
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


def _split_dirs(directory: str) -> List[str]:
    return [os.path.join(directory, split) for split in SPLITS
            if Manifest.exists_in(os.path.join(directory, split))]


def _shard_names(directory: str) -> List[str]:
    """The shard files in ``directory``, whether a manifest lists them or not, in natural order."""
    # (The compression is read from the content.)
    return sorted((name for name in os.listdir(directory) if is_shard_name(name)), key=natural_key)


def _run_manifests(directory: str) -> List[str]:
    """The per-run manifests in ``directory`` (runs with Google's ``--output_file`` name theirs
    after their first file, so that many runs can share a directory), by name."""
    return sorted(os.path.join(directory, name) for name in os.listdir(directory) if Manifest.is_run_manifest_name(name))


def _refuse_unfinished(directory: str) -> None:
    """A directory without its manifest (its own, or its train split's) that holds a run's
    traces is never read as a dataset."""
    if Manifest.exists_in(directory) or Manifest.exists_in(os.path.join(directory, TRAIN)) or \
            _run_manifest_index(directory):  # (runs that share a directory: the finished ones are read)
        return
    trace = unfinished_run(directory)
    if trace is not None:
        raise ValueError(unfinished_message(directory, trace))


def _refuse_unfinished_files(files: List[str]) -> None:
    """Shard files named directly, beside an unfinished run and listed by no manifest."""
    for directory in sorted({os.path.dirname(os.path.abspath(path)) for path in files}):
        trace = unfinished_run(directory)
        if trace is not None and any(find_manifest(path) is None for path in files
                                     if os.path.dirname(os.path.abspath(path)) == directory):
            raise ValueError(unfinished_message(directory, trace))


def _directory_shards(directory: str) -> List[str]:
    _refuse_unfinished(directory)
    if Manifest.exists_in(directory):
        listed = Manifest.read(directory).examples_per_file
        if listed:
            return [os.path.join(directory, name) for name in listed]
    runs = [os.path.join(directory, name) for path in _run_manifests(directory)
            for name in Manifest.read(path).examples_per_file]
    if runs:
        return runs
    found = [os.path.join(directory, name) for name in _shard_names(directory)]
    if not found:
        splits = _split_dirs(directory)
        if splits:
            raise ValueError(
                f"{directory} holds a train/val split: give {' or '.join(splits)} instead")
        raise ValueError(f"{directory}: no *{shard_suffix()} files and no {MANIFEST_NAME}")
    return found


def resolve_shards(paths: Paths) -> List[str]:
    """The shard files named by ``paths`` (files, globs, directories, comma-separated lists).

    Order is deterministic: the manifest's order for a directory, natural order for a glob, the
    given order otherwise.  Raises ``ValueError`` when something names no file.
    """
    parts: List[str] = []
    for item in _items(paths):
        if os.path.exists(item):
            parts.append(item)  # a real path, even with a comma in it
        else:
            parts.extend(p.strip() for p in item.split(",") if p.strip())
    out: List[str] = []
    named: List[str] = []  # files named directly or by a pattern (not through a directory's manifest)
    for part in parts:
        if os.path.isdir(part):
            out.extend(_directory_shards(part))
        elif os.path.exists(part):
            named.append(part)
            out.append(part)
        elif _GLOB_CHARS.search(part):
            matched = sorted(_glob.glob(part), key=natural_key)
            if not matched:
                raise ValueError(f"{part}: the pattern matches no file")
            named.extend(m for m in matched if os.path.isfile(m))
            out.extend(m for m in matched if os.path.isfile(m))
        else:
            raise ValueError(f"{part}: no such file or directory")
    if not out:
        raise ValueError("no input files")
    _refuse_unfinished_files(named)
    return out


@dataclass
class ShardSet:
    """Shards that share one manifest (or none): one output directory or split, or the files
    named that no manifest lists.  (Not the final shuffle's tasks, ``run.shard_shuffle``.)"""

    name: str  # the directory (or "files") for messages
    files: List[str]
    manifest_path: Optional[str] = None
    manifest: Optional[Manifest] = None
    unlisted: List[str] = field(default_factory=list)  # shard files in the directory, not in the manifest


def _sets_for_directory(directory: str) -> List[ShardSet]:
    _refuse_unfinished(directory)
    if Manifest.exists_in(directory):
        manifest = Manifest.read(directory)
        listed = list(manifest.examples_per_file)
        return [ShardSet(directory, [os.path.join(directory, n) for n in listed], Manifest.path_in(directory),
                           manifest, [os.path.join(directory, n) for n in _shard_names(directory)
                                      if n not in set(listed)])]
    splits = _split_dirs(directory)
    if splits:
        return [shard_set for split in splits for shard_set in _sets_for_directory(split)]
    sets = []
    for path in _run_manifests(directory):
        manifest = Manifest.read(path)
        sets.append(ShardSet(directory, [os.path.join(directory, n) for n in manifest.examples_per_file], path,
                             manifest))
    return sets or [ShardSet(directory, _directory_shards(directory))]


def shard_sets(paths: Paths) -> List[ShardSet]:
    """``paths`` as sets of shards with their manifest: a directory with a manifest is one
    set (its listed shards, present or not); an output directory with ``train/`` and ``val/``
    gives one set per split; files and globs are gathered by the manifest next to them that
    lists them (files without one form a set without manifest)."""
    sets: List[ShardSet] = []
    loose: Dict[Optional[str], List[str]] = {}
    for item in _items(paths):
        if os.path.isdir(item):
            sets.extend(_sets_for_directory(item))
            continue
        for shard in resolve_shards(item):
            loose.setdefault(find_manifest(shard), []).append(shard)
    for manifest_path, files in loose.items():
        if manifest_path is None:
            sets.append(ShardSet("files", files))
        else:
            sets.append(ShardSet(os.path.dirname(manifest_path), files, manifest_path, Manifest.read(manifest_path)))
    return sets


def find_manifest(shard: str) -> Optional[str]:
    """The path of the manifest that lists ``shard`` (next to it), or None: the directory's
    manifest, else a per-run manifest (Google's ``--output_file``): the one named after
    ``shard``, else any other run's in the directory."""
    directory = os.path.dirname(os.path.abspath(shard))
    name = os.path.basename(shard)
    candidates = [Manifest.path_in(directory), Manifest.path_in(directory, Manifest.name_for_files(name))]
    for path in candidates + [p for p in _run_manifest_index(directory) if p not in candidates]:
        if not os.path.isfile(path):
            continue
        try:
            if name in _listed(path):
                return path
        except (OSError, ValueError):
            continue
    return None


_LISTED_CACHE: Dict[tuple, frozenset] = {}


def _listed(manifest_path: str) -> frozenset:
    """The shard names a manifest lists; cached by path and modification time, since every shard
    of a directory of many runs' files may look through every run's manifest."""
    stat = os.stat(manifest_path)
    key = (manifest_path, stat.st_mtime_ns, stat.st_size)
    if key not in _LISTED_CACHE:
        _LISTED_CACHE[key] = frozenset(Manifest.read(manifest_path).examples_per_file)
    return _LISTED_CACHE[key]


def _run_manifest_index(directory: str) -> List[str]:
    try:
        return _run_manifests(directory)
    except OSError:
        return []


# --------------------------------------------------------------------------------------------
# Record layouts
# --------------------------------------------------------------------------------------------


def layout_flags(specs: Sequence[FeatureSpec]) -> dict:
    """``{"mlm_only", "masked", "v2_feature_names", "max_seq_length", "max_predictions_per_seq",
    "packed", "max_sequences_per_pack"}`` of a record layout, or ValueError if ``specs`` is not
    one that :func:`bert_data.format.layout.feature_specs` makes (names, order, types and
    lengths).  For packed rows ``max_predictions_per_seq`` is a row's prediction slots and
    ``max_sequences_per_pack`` is None for MLM-only rows (their layout does not show it)."""
    by_name = {canonical_name(spec.name): spec for spec in specs}
    ids = by_name.get("input_ids")
    if ids is None:
        raise ValueError(f"features {[spec.name for spec in specs]} have no input_ids "
                         f"(or {V2_NAMES['input_ids']})")
    positions = by_name.get("masked_lm_positions")
    pack_slots = by_name["next_sentence_positions"].length if "next_sentence_positions" in by_name else None
    options = layout_options((spec.name for spec in specs), pack_slots)
    flags = dict(options, max_seq_length=ids.length,
                 max_predictions_per_seq=positions.length if positions is not None else None,
                 packed=options["max_sequences_per_pack"] > 0,
                 max_sequences_per_pack=pack_slots if options["max_sequences_per_pack"] else None)
    expected = feature_specs(ids.length, flags["max_predictions_per_seq"] or 0, **options)
    if list(specs) != expected:
        raise ValueError(f"features {[(s.name, s.dtype, s.length) for s in specs]} are not a BERT record layout "
                         f"(expected {[(s.name, s.dtype, s.length) for s in expected]})")
    return flags


def describe_layout(specs: Sequence[FeatureSpec]) -> str:
    """E.g. ``"max_seq_length=128 (MLM-only, unmasked: input_ids, input_mask)"``."""
    try:
        flags = layout_flags(specs)
    except ValueError:
        return "unknown layout: " + ", ".join(spec.name for spec in specs)
    kind = "MLM-only" if flags["mlm_only"] else "NSP"
    if flags["packed"]:
        kind += ", packed" + (f" (up to {flags['max_sequences_per_pack']} a row)"
                              if flags["max_sequences_per_pack"] else "")
    if not flags["masked"]:
        kind += ", unmasked"
    if flags["v2_feature_names"]:
        kind += ", v2 names"
    sizes = f"max_seq_length={flags['max_seq_length']}"
    if flags["masked"]:
        sizes += f", max_predictions_per_seq={flags['max_predictions_per_seq']}"
    return f"{sizes} ({kind}: {', '.join(spec.name for spec in specs)})"


def infer_specs(shard: str, compression="auto") -> Optional[List[FeatureSpec]]:
    """The record layout of ``shard`` from its first record, or None if it has no records.
    Raises ``ValueError`` when the record is not a BERT example (and
    :class:`bert_data.format.tfrecord.CorruptRecordError` when it cannot be read)."""
    from .tfrecord.example_codec import decode_example
    from .tfrecord import iter_records

    fmt = format_of_path(shard)
    if fmt.name == HDF5:  # e.g. NVIDIA's own files: the datasets' shapes tell the layout
        return _hdf5_specs(shard)
    if not fmt.framed_records:  # (Parquet and MDS rows are unpadded: their widths are the manifest's)
        raise ValueError(f"{shard}: the record layout of a {fmt.name} shard comes from its manifest "
                         f"({MANIFEST_NAME}), which is missing")
    for record in iter_records(shard, compression=compression):
        try:
            example = decode_example(record)
        except ValueError as error:
            raise ValueError(f"{shard}: record 0: {error}") from None
        stored = {canonical_name(name): name for name in example}
        for name in ("input_ids", "input_mask"):
            if name not in stored:
                raise ValueError(f"{shard}: record 0: feature {name!r} is missing")
        pack_slots = len(example["next_sentence_positions"]) if "next_sentence_positions" in example else None
        options = layout_options(example, pack_slots)
        specs = feature_specs(len(example[stored["input_ids"]]),
                              len(example["masked_lm_positions"]) if options["masked"] else 0, **options)
        if set(example) != {spec.name for spec in specs}:
            raise ValueError(f"{shard}: record 0: features {sorted(example)} are not a BERT record layout")
        for spec in specs:
            value = example[spec.name]
            kind = FLOAT32 if getattr(value, "dtype", None) is not None and value.dtype.kind == "f" else INT64
            if isinstance(value, list) or kind != spec.dtype:
                raise ValueError(f"{shard}: record 0: feature {spec.name!r} is not a {spec.dtype} list")
        return specs
    return None


# --------------------------------------------------------------------------------------------
# What readers need to know
# --------------------------------------------------------------------------------------------


@dataclass
class DatasetInfo:
    """What readers need to know about a set of shards."""

    files: List[str]
    max_seq_length: int
    max_predictions_per_seq: int
    manifest: Optional[Manifest] = None  # the (first) manifest listing the files, if any
    manifest_path: Optional[str] = None
    layout_source: str = "manifest"  # "manifest", "first record" or "arguments" (no manifest, no records)
    manifests: Dict[str, Manifest] = field(default_factory=dict)  # manifest path -> manifest
    layout: Optional[List[FeatureSpec]] = None  # the record layout; None: Google's NSP layout
    compressions: Dict[str, Optional[str]] = field(default_factory=dict)  # file -> None, "gzip", "zlib"

    @property
    def specs(self) -> List[FeatureSpec]:
        if self.layout is not None:
            return list(self.layout)
        return feature_specs(self.max_seq_length, self.max_predictions_per_seq)

    @property
    def names(self) -> List[str]:
        """The feature names as stored (v2 names for v2 data)."""
        return [spec.name for spec in self.specs]

    @property
    def flags(self) -> dict:
        return layout_flags(self.specs)

    @property
    def mlm_only(self) -> bool:
        return self.flags["mlm_only"]

    @property
    def masked(self) -> bool:
        return self.flags["masked"]

    @property
    def v2_feature_names(self) -> bool:
        return self.flags["v2_feature_names"]

    def stored_name(self, name: str) -> str:
        """The dataset's own name for the canonical feature ``name`` (features the layout lacks,
        e.g. masks drawn at load time, keep theirs)."""
        for spec in self.specs:
            if canonical_name(spec.name) == name:
                return spec.name
        return name

    def compression(self, path: str) -> Optional[str]:
        """How ``path`` is compressed: None, "gzip" or "zlib"."""
        return self.compressions.get(path)

    def vocab_file(self) -> Optional[str]:
        """The manifest's vocabulary file, if it still exists."""
        return self.manifest.find_vocab_file(self.manifest_path) if self.manifest is not None else None

    def tokenizer_source(self, override: Optional[str] = None):
        """The tokenizer the data was made with (a :class:`bert_data.tokenizers.TokenizerSource`),
        or None when its files are gone or no manifest names one; ``override``: a vocabulary or
        tokenizer file to use instead."""
        from ..tokenizers import TokenizerSource

        return TokenizerSource.from_manifest(self.manifest, self.manifest_path, override)[0]


def _file_compressions(files: Sequence[str], listed_in: Dict[str, Optional[str]], manifests: Dict[str, Manifest],
                       compression) -> Dict[str, Optional[str]]:
    """Per file: the manifest's compression, else the given one, else sniffed from the content."""
    from .tfrecord import detect_compression, normalize_compression

    given = normalize_compression(compression)
    out: Dict[str, Optional[str]] = {}
    for shard in files:
        manifest_path = listed_in.get(shard)
        if not format_of_path(shard).framed_records:  # compressed inside, as its format does
            out[shard] = None
        elif manifest_path is not None:
            have = manifests[manifest_path].compression
            if given != "auto" and given != have:
                raise ValueError(f"compression={given!r} does not match the data "
                                 f"({manifest_path} says {have!r})")
            out[shard] = have
        elif given != "auto":
            out[shard] = given
        else:
            out[shard] = detect_compression(shard) if os.path.isfile(shard) else None
    return out


def dataset_info(paths: Paths, max_seq_length: Optional[int] = None,
                 max_predictions_per_seq: Optional[int] = None, compression="auto") -> DatasetInfo:
    """Resolve ``paths`` and find the record layout and compression: the manifest(s) next to
    the shards, else the first record (and the first bytes of each file, unless ``compression``
    is given), else the arguments (Google's layout).  Raises ``ValueError`` if the manifests of
    the shards disagree, or the arguments contradict the manifest (or the first record)."""
    from .tfrecord import CorruptRecordError

    files = resolve_shards(paths)
    manifests: Dict[str, Manifest] = {}
    listed_in: Dict[str, Optional[str]] = {}
    for shard in files:
        path = find_manifest(shard)
        listed_in[shard] = path
        if path and path not in manifests:
            manifests[path] = Manifest.read(path)
    layouts = {}
    for path, manifest in manifests.items():
        try:
            specs = manifest.specs
            layout_flags(specs)
            key = (manifest.max_seq_length, manifest.max_predictions_per_seq, tuple(specs))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{path}: no usable record layout ({error})") from None
        layouts.setdefault(key, path)
    if len(layouts) > 1:
        raise ValueError(f"the shards have different layouts (max_seq_length, max_predictions_per_seq, "
                         f"features): {sorted((k[0], k[1], [s.name for s in k[2]]) for k in layouts)}")
    manifest_path = next(iter(manifests), None)
    manifest = manifests.get(manifest_path) if manifest_path else None
    compressions = _file_compressions(files, listed_in, manifests, compression)
    given = (max_seq_length, max_predictions_per_seq)
    if layouts:
        (msl, mpp, specs), = layouts
        if any(g is not None and g != have for g, have in zip(given, (msl, mpp))):
            raise ValueError(
                f"max_seq_length={max_seq_length}, max_predictions_per_seq={max_predictions_per_seq} "
                f"do not match the data ({manifest_path} says {msl}, {mpp})")
        return DatasetInfo(files, msl, mpp, manifest, manifest_path, "manifest", manifests, list(specs), compressions)
    for shard in files:
        try:
            specs = infer_specs(shard, compressions[shard])
        except CorruptRecordError:
            if None not in given:
                break  # reported when the file is read
            raise
        if specs:
            flags = layout_flags(specs)
            have = (flags["max_seq_length"], flags["max_predictions_per_seq"])
            if given[0] is not None and given[0] != have[0] or (
                    given[1] is not None and have[1] is not None and given[1] != have[1]):
                raise ValueError(
                    f"max_seq_length={max_seq_length}, max_predictions_per_seq={max_predictions_per_seq} "
                    f"do not match the data ({shard} record 0 has {have[0]}, {have[1]})")
            mpp = have[1] if have[1] is not None else (given[1] or 0)
            return DatasetInfo(files, have[0], mpp, None, None, "first record", manifests, specs, compressions)
    if None not in given:
        return DatasetInfo(files, max_seq_length, max_predictions_per_seq, None, None, "arguments", manifests,
                           None, compressions)
    raise ValueError("the input files hold no records, so the record layout is unknown: "
                     "pass max_seq_length and max_predictions_per_seq")


def shard_set_info(shard_set: ShardSet, compression="auto") -> DatasetInfo:
    """The :class:`DatasetInfo` of one :class:`ShardSet`: a set with a manifest is read as the
    manifest says (``compression`` is for files without one), listed shards present or not;
    other sets as :func:`dataset_info` finds them."""
    manifest = shard_set.manifest
    if manifest is None:
        return dataset_info(shard_set.files, compression=compression)
    compressions = dict.fromkeys(shard_set.files, manifest.compression)
    return DatasetInfo(list(shard_set.files), manifest.max_seq_length, manifest.max_predictions_per_seq, manifest,
                       shard_set.manifest_path, "manifest", {shard_set.manifest_path: manifest}, manifest.specs,
                       compressions)


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------


def _hdf5_specs(shard: str) -> Optional[List[FeatureSpec]]:
    # (only the datasets' shapes are read here: whoever reads the records checks the file)
    for columns in format_of_path(shard).make_reader(verify_checksums=False).read_columns(shard, 1):
        masked = "masked_lm_ids" in columns
        return feature_specs(columns["input_ids"].shape[1], columns["masked_lm_ids"].shape[1] if masked else 0,
                             mlm_only="segment_ids" not in columns, masked=masked)
    return None


def read_instance_columns(path: str, specs: Sequence[FeatureSpec], batch_size: int = 1024,
                          verify_checksums: bool = True):
    """The instances of a shard in any instance format other than TFRecord (HDF5, Parquet, MDS),
    in batches of padded canonical columns, as ``decode_records`` gives TFRecord's; the shard's
    bytes are checked against its manifest's SHA-256 first, unless ``verify_checksums`` is False."""
    fmt = format_of_path(path)
    if not fmt.instances:
        raise ValueError(f"{path}: a {fmt.name} file holds the tokenized corpus, not instances")
    return fmt.make_reader(ShardOptions(tuple(specs)), verify_checksums).read_columns(path, batch_size)

_RECORD_PREFIX = re.compile(r"^record (\d+): ")


def decode_records(records: Sequence[bytes], specs: Sequence[FeatureSpec], path: Optional[str] = None,
                   first: Optional[int] = None) -> dict:
    """Records of the layout ``specs`` as ``{canonical name: (n, length) numpy array}``, in the
    layout's order.  Errors are ``ValueError("record K: ...")``; with ``path`` they name the file
    too, and the record number within the file when ``first`` (the file index of
    ``records[0]``) is known."""
    from .tfrecord.example_codec import decode_examples

    try:
        columns = decode_examples(records, specs)
    except ValueError as error:
        if path is None:
            raise
        message = str(error)
        match = _RECORD_PREFIX.match(message)
        if match and first is not None:
            message = f"record {first + int(match.group(1))}: {message[match.end():]}"
        raise ValueError(f"{path}: {message}") from None
    return {canonical_name(name): value for name, value in columns.items()}
