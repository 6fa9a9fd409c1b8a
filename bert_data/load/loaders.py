"""Feeding the records to training code: tf.data, plain numpy, PyTorch.

* :func:`load_dataset` -- a ``tf.data.Dataset`` of batched feature dicts, the input pipeline of
  Google's ``run_pretraining.py`` (``input_fn_builder``): parallel interleaved reads over the
  shards, shuffling when training, ``int64`` features cast to ``int32``.
* :func:`read_examples` / :func:`read_batches` -- numpy dicts, without TensorFlow.
* :data:`TorchDataset` -- a ``torch.utils.data.IterableDataset`` over the same reader that splits
  the records across DataLoader workers (and distributed ranks) deterministically.

Names, types and lengths of the features come from the dataset's ``data_params.json``
(``"features"``: any layout of :func:`bert_data.format.layout.feature_specs`: NSP, MLM-only, unmasked,
v2 names), else from the first record of a shard.  Shards compressed with gzip or zlib are read
as the manifest's ``"compression"`` says, else as their first bytes say (``compression="auto"``,
see :func:`bert_data.format.tfrecord.detect_compression`), or as ``compression=`` forces.
:func:`dynamic_masking` draws masked-LM masks at load time for unmasked (``--disable_masking``)
data, with the generator's rules.  Nothing here imports TensorFlow or torch until the function
that needs it is called.

Paths and patterns accepted everywhere: a shard file, a glob (``out/*.tfrecords``), an output
directory (its ``data_params.json`` lists the shards), a comma-separated list of those (as
Google's ``--input_file``) or a Python list of them.
"""

from __future__ import annotations

import glob as _glob
import json
import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Union

from ..format.layout import FLOAT32, INT64, FeatureSpec, V2_NAMES, canonical_name, feature_specs

__all__ = [
    "MANIFEST",
    "DatasetInfo",
    "resolve_shards",
    "find_manifest",
    "infer_layout",
    "infer_specs",
    "layout_flags",
    "manifest_specs",
    "describe_layout",
    "dataset_info",
    "DynamicMasking",
    "dynamic_masking",
    "ShardGroup",
    "shard_groups",
    "read_batches",
    "read_examples",
    "load_dataset",
    "TorchDataset",
]

MANIFEST = "data_params.json"
SHARD_SUFFIX = ".tfrecords"
# Shard names found in a directory without manifest (the compression is read from the content).
SHARD_SUFFIXES = (".tfrecords", ".tfrecords.gz", ".tfrecords.gzip", ".tfrecords.zz", ".tfrecords.zlib")
_GLOB_CHARS = re.compile(r"[*?\[]")
# Records decoded together by the numpy readers: big enough for numpy to pay off.
DEFAULT_CHUNK = 4096

Paths = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]


# --------------------------------------------------------------------------------------------
# Finding shards and their layout
# --------------------------------------------------------------------------------------------


def natural_key(path: str):
    """Sort key putting ``examples-2`` before ``examples-10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path)]


def read_manifest(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _split_dirs(directory: str) -> List[str]:
    return [os.path.join(directory, split) for split in ("train", "val")
            if os.path.isfile(os.path.join(directory, split, MANIFEST))]


def _directory_shards(directory: str) -> List[str]:
    manifest_path = os.path.join(directory, MANIFEST)
    if os.path.isfile(manifest_path):
        listed = read_manifest(manifest_path).get("examples_per_file")
        if listed:
            return [os.path.join(directory, name) for name in listed]
    found = sorted((os.path.join(directory, name) for name in os.listdir(directory)
                    if name.endswith(SHARD_SUFFIXES)), key=natural_key)
    if not found:
        splits = _split_dirs(directory)
        if splits:
            raise ValueError(
                f"{directory} holds a train/val split: give {' or '.join(splits)} instead")
        raise ValueError(f"{directory}: no *{SHARD_SUFFIX} files and no {MANIFEST}")
    return found


def resolve_shards(paths: Paths) -> List[str]:
    """The shard files named by ``paths`` (files, globs, directories, comma-separated lists).

    Order is deterministic: the manifest's order for a directory, natural order for a glob, the
    given order otherwise.  Raises ``ValueError`` when something names no file.
    """
    if isinstance(paths, (str, os.PathLike)):
        items = [os.fspath(paths)]
    else:
        items = [os.fspath(p) for p in paths]
    parts: List[str] = []
    for item in items:
        if os.path.exists(item):
            parts.append(item)  # a real path, even with a comma in it
        else:
            parts.extend(p.strip() for p in item.split(",") if p.strip())
    out: List[str] = []
    for part in parts:
        if os.path.isdir(part):
            out.extend(_directory_shards(part))
        elif os.path.exists(part):
            out.append(part)
        elif _GLOB_CHARS.search(part):
            matched = sorted(_glob.glob(part), key=natural_key)
            if not matched:
                raise ValueError(f"{part}: the pattern matches no file")
            out.extend(m for m in matched if os.path.isfile(m))
        else:
            raise ValueError(f"{part}: no such file or directory")
    if not out:
        raise ValueError("no input files")
    return out


@dataclass
class ShardGroup:
    """Shards that share one manifest (or none): one output directory or split."""

    name: str  # the directory (or "files") for messages
    files: List[str]
    manifest_path: Optional[str] = None
    manifest: Optional[dict] = None
    unlisted: List[str] = field(default_factory=list)  # *.tfrecords in the directory, not in the manifest


def _group_for_directory(directory: str) -> List["ShardGroup"]:
    manifest_path = os.path.join(directory, MANIFEST)
    if os.path.isfile(manifest_path):
        manifest = read_manifest(manifest_path)
        listed = list(manifest.get("examples_per_file", {}))
        present = sorted((n for n in os.listdir(directory) if n.endswith(SHARD_SUFFIXES)), key=natural_key)
        return [ShardGroup(directory, [os.path.join(directory, n) for n in listed], manifest_path, manifest,
                           [os.path.join(directory, n) for n in present if n not in set(listed)])]
    splits = _split_dirs(directory)
    if splits:
        return [group for split in splits for group in _group_for_directory(split)]
    return [ShardGroup(directory, _directory_shards(directory))]


def shard_groups(paths: Paths) -> List[ShardGroup]:
    """``paths`` as groups of shards with their manifest: a directory with ``data_params.json``
    is one group (its listed shards, present or not); an output directory with ``train/`` and
    ``val/`` gives one group per split; files and globs are grouped by the manifest next to them
    that lists them (files without one form a group without manifest)."""
    if isinstance(paths, (str, os.PathLike)):
        items = [os.fspath(paths)]
    else:
        items = [os.fspath(p) for p in paths]
    groups: List[ShardGroup] = []
    loose: Dict[Optional[str], List[str]] = {}
    for item in items:
        if os.path.isdir(item):
            groups.extend(_group_for_directory(item))
            continue
        for shard in resolve_shards(item):
            loose.setdefault(find_manifest(shard), []).append(shard)
    for manifest_path, files in loose.items():
        if manifest_path is None:
            groups.append(ShardGroup("files", files))
        else:
            groups.append(ShardGroup(os.path.dirname(manifest_path), files, manifest_path,
                                     read_manifest(manifest_path)))
    return groups


def find_manifest(shard: str) -> Optional[str]:
    """The ``data_params.json`` that lists ``shard`` (next to it), or None."""
    path = os.path.join(os.path.dirname(os.path.abspath(shard)), MANIFEST)
    if not os.path.isfile(path):
        return None
    try:
        manifest = read_manifest(path)
    except (OSError, ValueError):
        return None
    if os.path.basename(shard) in manifest.get("examples_per_file", {}):
        return path
    return None


def layout_flags(specs: Sequence[FeatureSpec]) -> dict:
    """``{"mlm_only", "masked", "v2_feature_names", "max_seq_length", "max_predictions_per_seq"}``
    of a record layout, or ValueError if ``specs`` is not one that
    :func:`bert_data.format.layout.feature_specs` makes (names, order, types and lengths)."""
    names = [spec.name for spec in specs]
    by_name = {spec.name: spec for spec in specs}
    v2 = "input_word_ids" in by_name
    ids = by_name.get("input_word_ids" if v2 else "input_ids")
    if ids is None:
        raise ValueError(f"features {names} have no input_ids (or input_word_ids)")
    positions = by_name.get("masked_lm_positions")
    flags = {
        "mlm_only": ("input_type_ids" if v2 else "segment_ids") not in by_name,
        "masked": positions is not None,
        "v2_feature_names": v2,
        "max_seq_length": ids.length,
        "max_predictions_per_seq": positions.length if positions is not None else None,
    }
    expected = feature_specs(ids.length, flags["max_predictions_per_seq"] or 0, flags["mlm_only"], flags["masked"], v2)
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
    if not flags["masked"]:
        kind += ", unmasked"
    if flags["v2_feature_names"]:
        kind += ", v2 names"
    sizes = f"max_seq_length={flags['max_seq_length']}"
    if flags["masked"]:
        sizes += f", max_predictions_per_seq={flags['max_predictions_per_seq']}"
    return f"{sizes} ({kind}: {', '.join(spec.name for spec in specs)})"


def manifest_specs(manifest: dict) -> List[FeatureSpec]:
    """The layout a manifest describes: its ``"features"`` table, else (older manifests) the one
    its options imply (``mlm_only``, ``disable_masking``, ``v2_feature_names``)."""
    if manifest.get("features"):
        return [FeatureSpec(name, entry["dtype"], int(entry["length"])) for name, entry in manifest["features"].items()]
    return feature_specs(int(manifest["max_seq_length"]), int(manifest["max_predictions_per_seq"]),
                         mlm_only=bool(manifest.get("mlm_only")), masked=not manifest.get("disable_masking"),
                         v2_feature_names=bool(manifest.get("v2_feature_names")))


def manifest_compression(manifest: Optional[dict]) -> Optional[str]:
    from ..format.tfrecord import normalize_compression

    return normalize_compression((manifest or {}).get("compression"))


def infer_specs(shard: str, compression="auto") -> Optional[List[FeatureSpec]]:
    """The record layout of ``shard`` from its first record, or None if it has no records.
    Raises ``ValueError`` when the record is not a BERT example (and
    :class:`bert_data.format.tfrecord.CorruptRecordError` when it cannot be read)."""
    from ..format.example_codec import decode_example
    from ..format.tfrecord import iter_records

    for record in iter_records(shard, compression=compression):
        try:
            example = decode_example(record)
        except ValueError as error:
            raise ValueError(f"{shard}: record 0: {error}") from None
        names = list(example)
        ids_name = "input_word_ids" if "input_word_ids" in example else "input_ids"
        for name in (ids_name, "input_mask"):
            if name not in example:
                raise ValueError(f"{shard}: record 0: feature {name!r} is missing")
        msl = len(example[ids_name])
        mpp = len(example["masked_lm_positions"]) if "masked_lm_positions" in example else 0
        canonical = {canonical_name(name) for name in names}
        specs = feature_specs(msl, mpp, mlm_only="segment_ids" not in canonical,
                              masked="masked_lm_positions" in canonical, v2_feature_names=ids_name != "input_ids")
        if set(names) != {spec.name for spec in specs}:
            raise ValueError(f"{shard}: record 0: features {sorted(names)} are not a BERT record layout")
        for spec in specs:
            value = example[spec.name]
            kind = FLOAT32 if getattr(value, "dtype", None) is not None and value.dtype.kind == "f" else INT64
            if isinstance(value, list) or kind != spec.dtype:
                raise ValueError(f"{shard}: record 0: feature {spec.name!r} is not a {spec.dtype} list")
        return specs
    return None


def infer_layout(shard: str, compression="auto") -> Optional[tuple]:
    """``(max_seq_length, max_predictions_per_seq)`` from the first record of ``shard`` (the
    second is None for unmasked records), or None if it has no records.  Raises ``ValueError``
    when the record is not a BERT example.  :func:`infer_specs` gives the whole layout."""
    specs = infer_specs(shard, compression)
    if specs is None:
        return None
    flags = layout_flags(specs)
    return flags["max_seq_length"], flags["max_predictions_per_seq"]


@dataclass
class DatasetInfo:
    """What readers need to know about a set of shards."""

    files: List[str]
    max_seq_length: int
    max_predictions_per_seq: int
    manifest: Optional[dict] = None  # the (first) manifest listing the files, if any
    manifest_path: Optional[str] = None
    layout_source: str = "manifest"  # "manifest", "first record" or "arguments" (no manifest, no records)
    manifests: Dict[str, dict] = field(default_factory=dict)  # manifest path -> manifest
    layout: Optional[List[FeatureSpec]] = None  # the record layout; None: Google's NSP layout
    compressions: Dict[str, Optional[str]] = field(default_factory=dict)  # file -> None, "gzip", "zlib"

    @property
    def specs(self) -> List[FeatureSpec]:
        if self.layout is not None:
            return list(self.layout)
        return feature_specs(self.max_seq_length, self.max_predictions_per_seq)

    @property
    def names(self) -> List[str]:
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

    @property
    def input_ids_name(self) -> str:
        return V2_NAMES["input_ids"] if self.v2_feature_names else "input_ids"

    def compression(self, path: str) -> Optional[str]:
        """How ``path`` is compressed: None, "gzip" or "zlib"."""
        return self.compressions.get(path)

    def vocab_file(self) -> Optional[str]:
        """The manifest's vocabulary file, if it still exists."""
        return manifest_vocab_file(self.manifest, self.manifest_path)


def manifest_vocab_file(manifest: Optional[dict], manifest_path: Optional[str]) -> Optional[str]:
    """The ``vocab_file`` a manifest names, if it exists: as written (relative to the current
    directory), else relative to the manifest's directory.  None otherwise."""
    path = (manifest or {}).get("vocab_file")
    if not path:
        return None
    if os.path.isfile(path):
        return path
    if manifest_path and not os.path.isabs(path):
        alt = os.path.join(os.path.dirname(manifest_path), path)
        if os.path.isfile(alt):
            return alt
    return None


def _file_compressions(files: Sequence[str], listed_in: Dict[str, Optional[str]], manifests: Dict[str, dict],
                       compression) -> Dict[str, Optional[str]]:
    """Per file: the manifest's compression, else the given one, else sniffed from the content."""
    from ..format.tfrecord import detect_compression, normalize_compression

    given = normalize_compression(compression)
    out: Dict[str, Optional[str]] = {}
    for shard in files:
        manifest_path = listed_in.get(shard)
        if manifest_path is not None:
            have = manifest_compression(manifests[manifest_path])
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
    from ..format.tfrecord import CorruptRecordError

    files = resolve_shards(paths)
    manifests: Dict[str, dict] = {}
    listed_in: Dict[str, Optional[str]] = {}
    for shard in files:
        path = find_manifest(shard)
        listed_in[shard] = path
        if path and path not in manifests:
            manifests[path] = read_manifest(path)
    layouts = {}
    for path, m in manifests.items():
        try:
            specs = manifest_specs(m)
            layout_flags(specs)
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{path}: no usable record layout ({error})") from None
        layouts.setdefault((int(m["max_seq_length"]), int(m["max_predictions_per_seq"]), tuple(specs)), path)
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


# --------------------------------------------------------------------------------------------
# Load-time masking
# --------------------------------------------------------------------------------------------

MASK_OUTPUTS = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


class DynamicMasking:
    """Masks drawn at load time, with the generator's rules (:func:`bert_data.masking.mask_tokens`):
    ``masked_lm_prob`` of each row's tokens (rounded, at least 1, at most
    ``max_predictions_per_seq``), never [CLS], [SEP] or the document separator; 80% [MASK], 10%
    kept, 10% a random ordinary token; whole words or n-gram spans when asked.

    ``masking(batch, key=None)`` maps ``{"input_ids" (or "input_word_ids"): (n, L), "input_mask":
    (n, L), ...}`` (numpy; ``input_mask`` 1 for tokens) to a new dict: the same entries with the
    token ids masked (int32), plus ``masked_lm_positions`` and ``masked_lm_ids`` (int32) and
    ``masked_lm_weights`` (float32), each ``(n, max_predictions_per_seq)``.

    Deterministic: the masks of a batch depend only on ``(seed, *key)`` and the batch.  The
    readers pass ``key=(batch_number,)`` (numbered from 0 in read order), so the numpy readers
    and ``load_dataset`` give identical masks for the same seed and batches.  Without ``key``, calls
    are numbered 0, 1, 2... by the object.  ``seed=None`` draws a seed (kept in ``.seed``).
    """

    def __init__(self, vocab, masked_lm_prob: float = 0.15, max_predictions_per_seq: int = 20,
                 whole_word: bool = False, max_ngram_size: int = 1, seed: Optional[int] = None,
                 document_separator_token: str = "[SEP]", spec=None):
        import numpy as np

        from ..masking import MaskingSpec

        if spec is None:
            spec = MaskingSpec.for_vocab(vocab, document_separator_token, masked_lm_prob=masked_lm_prob,
                                         max_predictions_per_seq=max_predictions_per_seq, whole_word=whole_word,
                                         max_ngram_size=max_ngram_size)
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(2, np.uint64)[0] >> np.uint64(1))
        if isinstance(seed, bool) or int(seed) < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.vocab = vocab
        self.spec = spec
        self.seed = int(seed)
        self.document_separator_token = document_separator_token
        self._calls = 0

    # The settings, as the spec holds them.
    masked_lm_prob = property(lambda self: self.spec.masked_lm_prob)
    max_predictions_per_seq = property(lambda self: self.spec.max_predictions_per_seq)
    whole_word = property(lambda self: self.spec.whole_word)
    max_ngram_size = property(lambda self: self.spec.max_ngram_size)
    special_ids = property(lambda self: list(self.spec.special_ids))

    def __repr__(self) -> str:
        return (f"DynamicMasking(vocab={self.vocab.path!r}, masked_lm_prob={self.masked_lm_prob}, "
                f"max_predictions_per_seq={self.max_predictions_per_seq}, whole_word={self.whole_word}, "
                f"max_ngram_size={self.max_ngram_size}, seed={self.seed}, "
                f"document_separator_token={self.document_separator_token!r})")

    def rng(self, key: Sequence[int]):
        import numpy as np

        return np.random.default_rng([self.seed, *(int(k) for k in key)])

    def arrays(self, input_ids, input_mask, key: Sequence[int]):
        """``(input_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights)`` for a batch."""
        import numpy as np

        from ..masking import mask_tokens

        lengths = np.asarray(input_mask).sum(axis=1)
        out = mask_tokens(np.asarray(input_ids), lengths, self.spec, self.vocab, self.rng(key))
        return (out.input_ids.astype(np.int32, copy=False), out.masked_lm_positions.astype(np.int32, copy=False),
                out.masked_lm_ids.astype(np.int32, copy=False), out.masked_lm_weights.astype(np.float32, copy=False))

    def __call__(self, batch: Dict[str, "np.ndarray"], key: Optional[Sequence[int]] = None) -> Dict[str, "np.ndarray"]:
        if key is None:
            key = (self._calls,)
            self._calls += 1
        name = "input_ids" if "input_ids" in batch else "input_word_ids"
        if name not in batch or "input_mask" not in batch:
            raise ValueError(f"load-time masking needs input_ids (or input_word_ids) and input_mask, "
                             f"got {sorted(batch)}")
        present = [n for n in MASK_OUTPUTS if n in batch]
        if present:
            raise ValueError(f"the batch is already masked (it has {present[0]})")
        ids, positions, labels, weights = self.arrays(batch[name], batch["input_mask"], key)
        out = dict(batch)
        out[name] = ids
        out.update(masked_lm_positions=positions, masked_lm_ids=labels, masked_lm_weights=weights)
        return out


def _manifest_of(dataset):
    """``(manifest, manifest_path)`` of a DatasetInfo, a manifest dict or paths."""
    if dataset is None:
        return None, None
    if isinstance(dataset, DatasetInfo):
        return dataset.manifest, dataset.manifest_path
    if isinstance(dataset, dict):
        return dataset, None
    info = dataset_info(dataset)
    return info.manifest, info.manifest_path


def dynamic_masking(vocab_file: Optional[str] = None, masked_lm_prob: Optional[float] = None,
                    max_predictions_per_seq: Optional[int] = None, whole_word: Optional[bool] = None,
                    max_ngram_size: Optional[int] = None, seed: Optional[int] = None,
                    document_separator_token: Optional[str] = None, dataset=None) -> DynamicMasking:
    """A :class:`DynamicMasking` (a callable ``batch -> masked batch``) for unmasked data.

    Each option left None comes from ``dataset``'s manifest when there is one (``dataset``: a
    directory or shard paths, a :class:`DatasetInfo` or a manifest dict): ``vocab_file``,
    ``masked_lm_prob``, ``max_predictions_per_seq``, ``mask_whole_word``, ``max_ngram_size``,
    ``document_separator_token``; else the defaults 0.15, 20, False, 1, ``"[SEP]"`` (and
    ``vocab_file`` is required).  A vocabulary whose SHA-256 differs from the manifest's
    ``vocab_sha256`` is an error: the ids would mean other tokens.
    """
    from ..tokenization import load_vocab

    manifest, manifest_path = _manifest_of(dataset)
    m = manifest or {}
    if vocab_file is None:
        vocab_file = manifest_vocab_file(manifest, manifest_path)
        if vocab_file is None:
            listed = m.get("vocab_file")
            raise ValueError(f"load-time masking needs the vocabulary: the manifest's vocab_file {listed} does "
                             f"not exist, pass vocab_file=" if listed else
                             "load-time masking needs the vocabulary: pass vocab_file=")
    vocab = load_vocab(vocab_file)
    sha = m.get("vocab_sha256")
    if sha and sha != vocab.sha256:
        raise ValueError(f"vocabulary {vocab_file} (sha256 {vocab.sha256[:12]}...) is not the one the data was "
                         f"made with (manifest: sha256 {sha[:12]}...)")

    def pick(value, key, default):
        if value is not None:
            return value
        got = m.get(key)
        return default if got is None else got

    return DynamicMasking(
        vocab,
        masked_lm_prob=pick(masked_lm_prob, "masked_lm_prob", 0.15),
        max_predictions_per_seq=pick(max_predictions_per_seq, "max_predictions_per_seq", 20),
        whole_word=pick(whole_word, "mask_whole_word", False),
        max_ngram_size=pick(max_ngram_size, "max_ngram_size", 1),
        seed=seed,
        document_separator_token=pick(document_separator_token, "document_separator_token", "[SEP]"),
    )


def _masker_for(mask, info: DatasetInfo):
    """The reader's ``mask=`` option as a callable ``(batch, key) -> batch``, or None."""
    if mask is None or mask is False:
        return None
    if info.masked:
        raise ValueError("mask=: the records are already masked (masked_lm_* features); load-time masking "
                         "is for unmasked data (create_tfrecords --mlm_only --disable_masking)")
    if mask is True:
        return dynamic_masking(dataset=info)
    if isinstance(mask, dict):
        return dynamic_masking(dataset=info, **mask)
    if callable(mask):
        return mask
    raise TypeError(f"mask= must be None, True, a dict of dynamic_masking options or a DynamicMasking, "
                    f"got {type(mask).__name__}")


# --------------------------------------------------------------------------------------------
# numpy reader (no TensorFlow)
# --------------------------------------------------------------------------------------------


def _postprocess(batch: Dict[str, "np.ndarray"], int32: bool, invert_input_mask: bool,
                 canonical_names: bool = False):
    """Cast (int32: int64 -> int32; else int32 from load-time masking -> int64), invert the mask,
    rename v2 features."""
    import numpy as np

    if invert_input_mask:
        batch["input_mask"] = 1 - batch["input_mask"]
    source, target = (np.int64, np.int32) if int32 else (np.int32, np.int64)
    for name, value in batch.items():
        if value.dtype == source:
            batch[name] = value.astype(target)
    if canonical_names:
        batch = {canonical_name(name): value for name, value in batch.items()}
    return batch


def _iter_chunks(files: Sequence[str], specs, chunk: int, verify_crc: bool,
                 keep=None, compressions: Optional[Dict[str, Optional[str]]] = None
                 ) -> Iterator[Dict[str, "np.ndarray"]]:
    """Decoded chunks of records, in file order, never spanning two files.  ``keep(i) -> bool``
    drops records (by running index over all files) before decoding: the worker split.
    ``compressions``: file -> None, "gzip" or "zlib" (default: uncompressed)."""
    from ..format.tfrecord import iter_records

    compressions = compressions or {}
    index = 0
    for path in files:
        buffer: List[bytes] = []
        first = 0  # index within the file of buffer[0]
        position = 0
        for record in iter_records(path, verify_crc=verify_crc, compression=compressions.get(path)):
            if keep is None or keep(index):
                if not buffer:
                    first = position
                buffer.append(record)
                if len(buffer) >= chunk:
                    yield decode_chunk(buffer, specs, path, first if keep is None else None)
                    buffer = []
            index += 1
            position += 1
        if buffer:
            yield decode_chunk(buffer, specs, path, first if keep is None else None)


_RECORD_PREFIX = re.compile(r"^record (\d+): ")


def decode_chunk(records: Sequence[bytes], specs, path: str, first: Optional[int]):
    """``decode_examples`` with errors naming the file and, when ``first`` (the file index of
    ``records[0]``) is known, the record number within the file."""
    from ..format.example_codec import decode_examples

    try:
        return decode_examples(records, specs)
    except ValueError as error:
        message = str(error)
        match = _RECORD_PREFIX.match(message)
        if match and first is not None:
            message = f"record {first + int(match.group(1))}: {message[match.end():]}"
        raise ValueError(f"{path}: {message}") from None


def read_batches(paths: Paths, batch_size: int = DEFAULT_CHUNK, max_seq_length: Optional[int] = None,
                 max_predictions_per_seq: Optional[int] = None, drop_remainder: bool = False,
                 verify_crc: bool = True, int32: bool = False,
                 invert_input_mask: bool = False, compression="auto", mask=None,
                 canonical_names: bool = False) -> Iterator[Dict[str, "np.ndarray"]]:
    """Yield ``{feature: (batch, length) array}`` over the shards in order, without TensorFlow.

    The features are the dataset's (its manifest's ``"features"``, else the first record's):
    e.g. no ``segment_ids``/``next_sentence_labels`` for MLM-only data, ``input_word_ids`` with
    v2 names (``canonical_names=True`` renames them ``input_ids``/``segment_ids``).  int64
    features come back as ``int64`` (``int32=True`` casts them, as the tf.data loader does),
    ``masked_lm_weights`` as ``float32``.  ``invert_input_mask`` gives 1 for padding and 0 for
    tokens (Cerebras style).  ``compression``: "auto" (the manifest's, else sniffed per file),
    None, "gzip" or "zlib".

    ``mask``: load-time masking of unmasked (``--disable_masking``) data: True (options from the
    manifest, random seed), a dict of :func:`dynamic_masking` options (e.g. ``{"seed": 0}``) or a
    :class:`DynamicMasking`; batch number ``k`` (from 0) is masked with ``key=(k,)``.  Truncated
    or corrupt files raise :class:`bert_data.format.tfrecord.CorruptRecordError`.
    """
    import numpy as np

    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    info = dataset_info(paths, max_seq_length, max_predictions_per_seq, compression)
    masker = _masker_for(mask, info)
    names = info.names
    counter = 0

    def finish(batch):
        nonlocal counter
        if masker is not None:
            batch = masker(batch, key=(counter,))
        counter += 1
        return _postprocess(batch, int32, invert_input_mask, canonical_names)

    pending: List[Dict[str, np.ndarray]] = []
    n_pending = 0
    for chunk in _iter_chunks(info.files, info.specs, max(batch_size, DEFAULT_CHUNK), verify_crc,
                              compressions=info.compressions):
        pending.append(chunk)
        n_pending += len(chunk["input_mask"])
        if n_pending < batch_size:
            continue
        merged = {name: np.concatenate([c[name] for c in pending]) for name in names}
        full = (n_pending // batch_size) * batch_size
        for start in range(0, full, batch_size):
            yield finish({name: merged[name][start:start + batch_size] for name in names})
        pending = [{name: merged[name][full:] for name in names}] if full < n_pending else []
        n_pending -= full
    if n_pending and not drop_remainder:
        merged = {name: np.concatenate([c[name] for c in pending]) for name in names}
        yield finish(merged)


def read_examples(paths: Paths, max_seq_length: Optional[int] = None,
                  max_predictions_per_seq: Optional[int] = None, verify_crc: bool = True,
                  int32: bool = False, invert_input_mask: bool = False, compression="auto",
                  mask=None, canonical_names: bool = False) -> Iterator[Dict[str, "np.ndarray"]]:
    """Yield one ``{feature: 1-D numpy array}`` dict per record, in file order, without TensorFlow.

    The layout comes from the manifest next to the shards, else from the first record (else the
    arguments).  Records are decoded in vectorised chunks of 4,096 (and load-time masks, with
    ``mask=``, drawn per chunk: as ``read_batches(batch_size=4096, mask=...)``); the arrays yielded
    are views into a chunk (copy them to keep one record without its chunk).  Options as
    :func:`read_batches`.
    """
    for batch in read_batches(paths, DEFAULT_CHUNK, max_seq_length, max_predictions_per_seq,
                              verify_crc=verify_crc, int32=int32, invert_input_mask=invert_input_mask,
                              compression=compression, mask=mask, canonical_names=canonical_names):
        columns = list(batch.items())
        for i in range(len(batch["input_mask"])):
            yield {name: value[i] for name, value in columns}


# --------------------------------------------------------------------------------------------
# tf.data
# --------------------------------------------------------------------------------------------


def load_dataset(file_pattern: Paths, max_seq_length: Optional[int] = None,
                 max_predictions_per_seq: Optional[int] = None, batch_size: int = 32,
                 is_training: bool = True, num_cpu_threads: int = 4,
                 drop_remainder: Optional[bool] = None, repeat: Optional[bool] = None,
                 shuffle_buffer: int = 100, seed: Optional[int] = None,
                 int32: bool = True, invert_input_mask: bool = False,
                 input_context=None, prefetch: bool = True, compression="auto", mask=None,
                 canonical_names: bool = False):
    """A ``tf.data.Dataset`` of feature dicts, batched, as Google's ``run_pretraining.py`` builds it.

    Training (``is_training=True``), as Google's ``input_fn``: the shard list is repeated and
    shuffled, ``min(num_cpu_threads, n_shards)`` shards are read at once and interleaved
    (non-deterministically unless ``seed`` is given), records are shuffled in a buffer of
    ``shuffle_buffer`` and batches are full-size (``drop_remainder`` defaults to True).
    Evaluation: the shards are read in order, once (``repeat`` defaults to ``is_training``),
    ``drop_remainder`` defaults to False, so every record comes out exactly once in file order.

    Each element is ``{name: Tensor[batch, length]}`` for the features of the dataset's layout
    (its manifest's ``"features"``, else the first record's: Google's seven, MLM-only, unmasked,
    v2 names; ``canonical_names=True`` renames ``input_word_ids``/``input_type_ids`` to
    ``input_ids``/``segment_ids``), parsed with that spec; int64 features are cast to int32
    (``int32=True``, Google's ``_decode_record`` does the same for TPUs).
    ``invert_input_mask=True`` gives 1 for padding and 0 for tokens, as Cerebras's BERT input
    pipeline expects.  ``input_context`` (a ``tf.distribute.InputContext``) shards the files
    across input pipelines.  Compressed shards are read with their ``compression_type``
    (``compression``: "auto" = the manifest's, else sniffed per file; or None, "gzip", "zlib").

    ``mask``: load-time masking of unmasked data, as in :func:`read_batches` (True, a dict of
    :func:`dynamic_masking` options, or a :class:`DynamicMasking`), applied to each batch with
    ``tf.numpy_function`` and keyed by the batch number (counted from 0 over the whole stream, so
    repeated epochs get new masks; with ``input_context`` the key is ``(pipeline_id, k)``): for the
    same seed and the same batches, the masks equal those of :func:`read_batches`.

    ``max_seq_length`` / ``max_predictions_per_seq`` may be omitted when the shards' manifest
    (or first record) tells them; when given, they are checked against the manifest.
    """
    import tensorflow as tf

    from ..format.layout import tf_feature_description

    info = dataset_info(file_pattern, max_seq_length, max_predictions_per_seq, compression)
    masker = _masker_for(mask, info)
    if drop_remainder is None:
        drop_remainder = is_training
    if repeat is None:
        repeat = is_training
    specs = info.specs
    description = tf_feature_description(info.max_seq_length, info.max_predictions_per_seq, specs=specs)
    files = list(info.files)
    types = [{None: "", "gzip": "GZIP", "zlib": "ZLIB"}[info.compression(f)] for f in files]
    autotune = tf.data.AUTOTUNE

    def read(path, compression_type):
        return tf.data.TFRecordDataset(path, compression_type=compression_type, buffer_size=1 << 20)

    d = tf.data.Dataset.from_tensor_slices((tf.constant(files), tf.constant(types)))
    if input_context is not None:
        d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if is_training:
        if repeat:
            d = d.repeat()
        d = d.shuffle(buffer_size=len(files), seed=seed, reshuffle_each_iteration=True)
        cycle_length = max(1, min(num_cpu_threads, len(files)))
        # Google: parallel_interleave(sloppy=is_training); sloppy unless a seed asks for repeatability.
        d = d.interleave(read, cycle_length=cycle_length, block_length=1,
                         num_parallel_calls=cycle_length, deterministic=seed is not None)
        if shuffle_buffer and shuffle_buffer > 1:
            d = d.shuffle(buffer_size=shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    else:
        d = d.interleave(read, cycle_length=1, block_length=1)  # one shard after the other
        if repeat:
            d = d.repeat()

    ids_name = info.input_ids_name
    key_prefix = [] if input_context is None else [int(input_context.input_pipeline_id)]
    mpp = getattr(masker, "max_predictions_per_seq", None) or info.max_predictions_per_seq

    def apply_mask(ids, input_mask, number):
        def run(ids_np, mask_np, number_np):
            out = masker({ids_name: ids_np, "input_mask": mask_np}, key=(*key_prefix, int(number_np)))
            return (out[ids_name].astype("int32"), out["masked_lm_positions"].astype("int32"),
                    out["masked_lm_ids"].astype("int32"), out["masked_lm_weights"].astype("float32"))

        outputs = tf.numpy_function(run, [ids, input_mask, number],
                                    [tf.int32, tf.int32, tf.int32, tf.float32], stateful=False)
        rows = ids.shape[0]
        outputs[0].set_shape(ids.shape)
        for tensor in outputs[1:]:
            tensor.set_shape([rows, mpp or None])
        return outputs

    def parse(serialized, number=None):
        example = tf.io.parse_example(serialized, description)
        if masker is not None:
            ids, positions, labels, weights = apply_mask(example[ids_name], example["input_mask"], number)
            example[ids_name] = tf.cast(ids, tf.int64)
            example.update(masked_lm_positions=tf.cast(positions, tf.int64),
                           masked_lm_ids=tf.cast(labels, tf.int64), masked_lm_weights=weights)
        if invert_input_mask:
            example["input_mask"] = 1 - example["input_mask"]
        if int32:
            for name, value in example.items():
                if value.dtype == tf.int64:
                    example[name] = tf.cast(value, tf.int32)
        if canonical_names:
            example = {canonical_name(name): value for name, value in example.items()}
        return example

    d = d.batch(batch_size, drop_remainder=drop_remainder)
    if masker is not None:
        d = tf.data.Dataset.zip((d, tf.data.Dataset.counter()))
    deterministic = True if not is_training else seed is not None
    d = d.map(parse, num_parallel_calls=autotune, deterministic=deterministic)
    if prefetch:
        d = d.prefetch(autotune)
    return d


# --------------------------------------------------------------------------------------------
# PyTorch
# --------------------------------------------------------------------------------------------

_TORCH_CLASS = None


def _torch_dataset_class():
    """Build (once) the IterableDataset subclass; importing torch only now."""
    global _TORCH_CLASS
    if _TORCH_CLASS is not None:
        return _TORCH_CLASS
    import numpy as np

    try:
        import torch
    except ImportError as error:
        raise ImportError(f"bert_data TorchDataset needs PyTorch ({error}): pip install torch") from error
    from torch.utils.data import IterableDataset, get_worker_info

    class TorchDataset(IterableDataset):
        """Records as dicts of ``torch`` tensors, split across DataLoader workers and ranks.

        ``TorchDataset(paths, batch_size=None, ...)``: with ``batch_size=None`` each item is one
        record (``{name: tensor[length]}``; DataLoader's default collation stacks them); with a
        ``batch_size`` each item is already a batch (``{name: tensor[batch, length]}``; use
        ``DataLoader(ds, batch_size=None)``), which is much faster.

        Splitting is deterministic.  Reader number ``g = rank * num_workers + worker_id`` of
        ``G = world_size * num_workers`` gets, with ``split_by="file"``, the shards ``g, g+G, ...``
        (in shuffled order when shuffling: all readers use the same permutation), and with
        ``split_by="record"`` the records whose running index ``i`` (over the shards in order)
        has ``i % G == g``: equal counts to within one per shard, at the cost of every reader
        reading (not decoding) every shard.  ``"auto"``: by file when there are at least ``G``
        shards, else by record.

        ``shuffle_buffer > 0`` shuffles records within each reader through a buffer, seeded by
        ``(seed, epoch, g)``; call :meth:`set_epoch` between epochs.  int64 features become
        ``torch.long`` (``int32=True``: ``torch.int32``), weights ``torch.float32``.

        The features are the dataset's layout (see :func:`read_batches`; ``canonical_names``);
        ``compression`` as there.  ``mask`` (as in :func:`read_batches`) masks unmasked data at
        load time, per decoded chunk of records before shuffling, keyed by ``(epoch, g, chunk)``:
        new masks every epoch, different ones in every reader, reproducible for a seed.
        """

        def __init__(self, paths: Paths, batch_size: Optional[int] = None,
                     max_seq_length: Optional[int] = None, max_predictions_per_seq: Optional[int] = None,
                     split_by: str = "auto", shuffle_buffer: int = 0, seed: int = 0,
                     drop_remainder: bool = False, int32: bool = False, invert_input_mask: bool = False,
                     rank: Optional[int] = None, world_size: Optional[int] = None, verify_crc: bool = True,
                     compression="auto", mask=None, canonical_names: bool = False):
            super().__init__()
            if split_by not in ("auto", "file", "record"):
                raise ValueError(f"split_by must be 'auto', 'file' or 'record', got {split_by!r}")
            info = dataset_info(paths, max_seq_length, max_predictions_per_seq, compression)
            self.masker = _masker_for(mask, info)
            self.canonical_names = canonical_names
            self.info = info
            self.files = list(info.files)
            self.batch_size = batch_size
            self.split_by = split_by
            self.shuffle_buffer = int(shuffle_buffer)
            self.seed = int(seed)
            self.epoch = 0
            self.drop_remainder = drop_remainder
            self.int32 = int32
            self.invert_input_mask = invert_input_mask
            self.verify_crc = verify_crc
            if rank is None or world_size is None:
                dist = torch.distributed
                if dist.is_available() and dist.is_initialized():
                    rank = dist.get_rank() if rank is None else rank
                    world_size = dist.get_world_size() if world_size is None else world_size
            self.rank = int(rank or 0)
            self.world_size = int(world_size or 1)
            if not 0 <= self.rank < self.world_size:
                raise ValueError(f"rank {self.rank} is not in [0, world_size={self.world_size})")

        def set_epoch(self, epoch: int) -> None:
            self.epoch = int(epoch)

        def reader(self):
            """``(g, G)`` for the calling worker."""
            worker = get_worker_info()
            worker_id, num_workers = (worker.id, worker.num_workers) if worker else (0, 1)
            return self.rank * num_workers + worker_id, self.world_size * num_workers

        def assignment(self, g: int, total: int):
            """``(files, keep)`` for reader ``g`` of ``total``: its shards and record filter."""
            files = list(self.files)
            if self.shuffle_buffer > 0:
                order = np.random.default_rng([self.seed, self.epoch]).permutation(len(files))
                files = [files[i] for i in order]
            mode = self.split_by
            if mode == "auto":
                mode = "file" if len(files) >= total else "record"
            if total == 1:
                return files, None
            if mode == "file":
                return files[g::total], None
            return files, (lambda i: i % total == g)

        def _rows(self):
            g, total = self.reader()
            files, keep = self.assignment(g, total)
            if not files:
                return
            specs = self.info.specs
            rng = np.random.default_rng([self.seed, self.epoch, g]) if self.shuffle_buffer > 0 else None
            buffer: List[Dict[str, np.ndarray]] = []
            chunks = _iter_chunks(files, specs, DEFAULT_CHUNK, self.verify_crc, keep, self.info.compressions)
            for number, chunk in enumerate(chunks):
                if self.masker is not None:
                    chunk = self.masker(chunk, key=(self.epoch, g, number))
                chunk = _postprocess(chunk, self.int32, self.invert_input_mask, self.canonical_names)
                n = len(chunk["input_mask"])
                if rng is None:
                    yield chunk
                    continue
                buffer.append(chunk)
                pooled = sum(len(c["input_mask"]) for c in buffer)
                if pooled >= self.shuffle_buffer + n:
                    merged = {k: np.concatenate([c[k] for c in buffer]) for k in chunk}
                    perm = rng.permutation(pooled)
                    out, keep_rows = perm[:pooled - self.shuffle_buffer], perm[pooled - self.shuffle_buffer:]
                    yield {k: v[out] for k, v in merged.items()}
                    buffer = [{k: v[keep_rows] for k, v in merged.items()}]
            if buffer:
                merged = {k: np.concatenate([c[k] for c in buffer]) for k in buffer[0]}
                perm = rng.permutation(len(merged["input_mask"]))
                yield {k: v[perm] for k, v in merged.items()}

        def __iter__(self):
            if self.batch_size is None:
                for chunk in self._rows():
                    tensors = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in chunk.items()}
                    for i in range(len(chunk["input_mask"])):
                        yield {k: t[i] for k, t in tensors.items()}
                return
            bs = int(self.batch_size)
            carry: Optional[Dict[str, np.ndarray]] = None
            for chunk in self._rows():
                if carry is not None:
                    chunk = {k: np.concatenate([carry[k], chunk[k]]) for k in chunk}
                n = len(chunk["input_mask"])
                full = (n // bs) * bs
                for start in range(0, full, bs):
                    yield {k: torch.from_numpy(np.ascontiguousarray(v[start:start + bs]))
                           for k, v in chunk.items()}
                carry = {k: v[full:] for k, v in chunk.items()} if full < n else None
            if carry is not None and not self.drop_remainder:
                yield {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in carry.items()}

    TorchDataset.__module__ = __name__
    TorchDataset.__qualname__ = "TorchDataset"
    _TORCH_CLASS = TorchDataset
    return TorchDataset


def __getattr__(name):
    # ``bert_data.load.loaders.TorchDataset`` is a real class (usable with isinstance), built on first
    # access so that importing this module never imports torch.
    if name == "TorchDataset":
        return _torch_dataset_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
