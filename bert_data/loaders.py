"""Feeding the records to training code: tf.data, plain numpy, PyTorch.

* :func:`load_dataset` -- a ``tf.data.Dataset`` of batched feature dicts, the input pipeline of
  Google's ``run_pretraining.py`` (``input_fn_builder``): parallel interleaved reads over the
  shards, shuffling when training, ``int64`` features cast to ``int32``.
* :func:`read_examples` / :func:`read_batches` -- numpy dicts, without TensorFlow.
* :data:`TorchDataset` -- a ``torch.utils.data.IterableDataset`` over the same reader that splits
  the records across DataLoader workers (and distributed ranks) deterministically.

Names, types and lengths of the features all come from :mod:`bert_data.features`.  Nothing here
imports TensorFlow or torch until the function that needs it is called.

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

from .features import FEATURE_NAMES, INT64, FeatureSpec, feature_specs

__all__ = [
    "MANIFEST",
    "DatasetInfo",
    "resolve_shards",
    "find_manifest",
    "infer_layout",
    "dataset_info",
    "ShardGroup",
    "shard_groups",
    "read_batches",
    "read_examples",
    "load_dataset",
    "TorchDataset",
]

MANIFEST = "data_params.json"
SHARD_SUFFIX = ".tfrecords"
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
                    if name.endswith(SHARD_SUFFIX)), key=natural_key)
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
        present = sorted((n for n in os.listdir(directory) if n.endswith(SHARD_SUFFIX)), key=natural_key)
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


def infer_layout(shard: str) -> Optional[tuple]:
    """``(max_seq_length, max_predictions_per_seq)`` from the first record of ``shard``, or None
    if it has no records.  Raises ``ValueError`` when the record is not a BERT example."""
    from .example_codec import decode_example
    from .tfrecord import iter_records

    for record in iter_records(shard):
        example = decode_example(record)
        missing = [name for name in ("input_ids", "masked_lm_positions") if name not in example]
        if missing:
            raise ValueError(f"{shard}: record 0: feature {missing[0]!r} is missing")
        return len(example["input_ids"]), len(example["masked_lm_positions"])
    return None


@dataclass
class DatasetInfo:
    """What readers need to know about a set of shards."""

    files: List[str]
    max_seq_length: int
    max_predictions_per_seq: int
    manifest: Optional[dict] = None  # the (first) manifest listing the files, if any
    manifest_path: Optional[str] = None
    layout_source: str = "manifest"  # "manifest", "arguments" (no manifest) or "first record"
    manifests: Dict[str, dict] = field(default_factory=dict)  # manifest path -> manifest

    @property
    def specs(self) -> List[FeatureSpec]:
        return feature_specs(self.max_seq_length, self.max_predictions_per_seq)

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


def dataset_info(paths: Paths, max_seq_length: Optional[int] = None,
                 max_predictions_per_seq: Optional[int] = None) -> DatasetInfo:
    """Resolve ``paths`` and find the record layout: the manifest(s) next to the shards, else
    the arguments, else the first record.  Raises ``ValueError`` if the manifests of the shards
    disagree, or the arguments contradict the manifest (or the first record)."""
    files = resolve_shards(paths)
    manifests: Dict[str, dict] = {}
    for shard in files:
        path = find_manifest(shard)
        if path and path not in manifests:
            manifests[path] = read_manifest(path)
    layouts = {(m["max_seq_length"], m["max_predictions_per_seq"]) for m in manifests.values()}
    if len(layouts) > 1:
        raise ValueError(f"the shards have different layouts (max_seq_length, "
                         f"max_predictions_per_seq): {sorted(layouts)}")
    manifest_path = next(iter(manifests), None)
    manifest = manifests.get(manifest_path) if manifest_path else None
    given = (max_seq_length, max_predictions_per_seq)
    if layouts:
        (msl, mpp), = layouts
        if any(g is not None and g != have for g, have in zip(given, (msl, mpp))):
            raise ValueError(
                f"max_seq_length={max_seq_length}, max_predictions_per_seq={max_predictions_per_seq} "
                f"do not match the data ({manifest_path} says {msl}, {mpp})")
        return DatasetInfo(files, msl, mpp, manifest, manifest_path, "manifest", manifests)
    if None not in given:
        return DatasetInfo(files, max_seq_length, max_predictions_per_seq, None, None, "arguments", manifests)
    for shard in files:
        layout = infer_layout(shard)
        if layout:
            if any(g is not None and g != have for g, have in zip(given, layout)):
                raise ValueError(
                    f"max_seq_length={max_seq_length}, max_predictions_per_seq={max_predictions_per_seq} "
                    f"do not match the data ({shard} record 0 has {layout[0]}, {layout[1]})")
            return DatasetInfo(files, layout[0], layout[1], None, None, "first record", manifests)
    raise ValueError("the input files hold no records, so the record layout is unknown: "
                     "pass max_seq_length and max_predictions_per_seq")


# --------------------------------------------------------------------------------------------
# numpy reader (no TensorFlow)
# --------------------------------------------------------------------------------------------


def _postprocess(batch: Dict[str, "np.ndarray"], int32: bool, invert_input_mask: bool):
    import numpy as np

    if invert_input_mask:
        batch["input_mask"] = 1 - batch["input_mask"]
    if int32:
        for spec_name, value in batch.items():
            if value.dtype == np.int64:
                batch[spec_name] = value.astype(np.int32)
    return batch


def _iter_chunks(files: Sequence[str], specs, chunk: int, verify_crc: bool,
                 keep=None) -> Iterator[Dict[str, "np.ndarray"]]:
    """Decoded chunks of records, in file order, never spanning two files.  ``keep(i) -> bool``
    drops records (by running index over all files) before decoding: the worker split."""
    from .tfrecord import iter_records

    index = 0
    for path in files:
        buffer: List[bytes] = []
        first = 0  # index within the file of buffer[0]
        position = 0
        for record in iter_records(path, verify_crc=verify_crc):
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
    from .example_codec import decode_examples

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
                 invert_input_mask: bool = False) -> Iterator[Dict[str, "np.ndarray"]]:
    """Yield ``{feature: (batch, length) array}`` over the shards in order, without TensorFlow.

    int64 features come back as ``int64`` (``int32=True`` casts them, as the tf.data loader
    does), ``masked_lm_weights`` as ``float32``.  ``invert_input_mask`` gives 1 for padding and
    0 for tokens (Cerebras style).  Truncated or corrupt files raise
    :class:`bert_data.tfrecord.CorruptRecordError`.
    """
    import numpy as np

    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    info = dataset_info(paths, max_seq_length, max_predictions_per_seq)
    pending: List[Dict[str, np.ndarray]] = []
    n_pending = 0
    for chunk in _iter_chunks(info.files, info.specs, max(batch_size, DEFAULT_CHUNK), verify_crc):
        pending.append(chunk)
        n_pending += len(chunk["input_ids"])
        if n_pending < batch_size:
            continue
        merged = {name: np.concatenate([c[name] for c in pending]) for name in FEATURE_NAMES}
        full = (n_pending // batch_size) * batch_size
        for start in range(0, full, batch_size):
            yield _postprocess({name: merged[name][start:start + batch_size] for name in FEATURE_NAMES},
                               int32, invert_input_mask)
        pending = [{name: merged[name][full:] for name in FEATURE_NAMES}] if full < n_pending else []
        n_pending -= full
    if n_pending and not drop_remainder:
        merged = {name: np.concatenate([c[name] for c in pending]) for name in FEATURE_NAMES}
        yield _postprocess(merged, int32, invert_input_mask)


def read_examples(paths: Paths, max_seq_length: Optional[int] = None,
                  max_predictions_per_seq: Optional[int] = None, verify_crc: bool = True,
                  int32: bool = False, invert_input_mask: bool = False) -> Iterator[Dict[str, "np.ndarray"]]:
    """Yield one ``{feature: 1-D numpy array}`` dict per record, in file order, without TensorFlow.

    The layout comes from the manifest next to the shards, else from the arguments, else from
    the first record.  Records are decoded in vectorised chunks; the arrays yielded are views
    into a chunk (copy them to keep one record without its chunk).
    """
    for batch in read_batches(paths, DEFAULT_CHUNK, max_seq_length, max_predictions_per_seq,
                              verify_crc=verify_crc, int32=int32, invert_input_mask=invert_input_mask):
        n = len(batch["input_ids"])
        columns = [(name, batch[name]) for name in FEATURE_NAMES]
        for i in range(n):
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
                 input_context=None, prefetch: bool = True):
    """A ``tf.data.Dataset`` of feature dicts, batched, as Google's ``run_pretraining.py`` builds it.

    Training (``is_training=True``), as Google's ``input_fn``: the shard list is repeated and
    shuffled, ``min(num_cpu_threads, n_shards)`` shards are read at once and interleaved
    (non-deterministically unless ``seed`` is given), records are shuffled in a buffer of
    ``shuffle_buffer`` and batches are full-size (``drop_remainder`` defaults to True).
    Evaluation: the shards are read in order, once (``repeat`` defaults to ``is_training``),
    ``drop_remainder`` defaults to False, so every record comes out exactly once in file order.

    Each element is ``{name: Tensor[batch, length]}`` for the seven features of
    ``bert_data.features``; int64 features are cast to int32 (``int32=True``, Google's
    ``_decode_record`` does the same for TPUs).  ``invert_input_mask=True`` gives 1 for padding
    and 0 for tokens, as Cerebras's BERT input pipeline expects.  ``input_context`` (a
    ``tf.distribute.InputContext``) shards the files across input pipelines.

    ``max_seq_length`` / ``max_predictions_per_seq`` may be omitted when the shards' manifest
    (or first record) tells them; when given, they are checked against the manifest.
    """
    import tensorflow as tf

    from .features import tf_feature_description

    info = dataset_info(file_pattern, max_seq_length, max_predictions_per_seq)
    if drop_remainder is None:
        drop_remainder = is_training
    if repeat is None:
        repeat = is_training
    description = tf_feature_description(info.max_seq_length, info.max_predictions_per_seq)
    files = list(info.files)
    autotune = tf.data.AUTOTUNE

    def read(path):
        return tf.data.TFRecordDataset(path, buffer_size=1 << 20)

    d = tf.data.Dataset.from_tensor_slices(tf.constant(files))
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

    int_names = [spec.name for spec in info.specs if spec.dtype == INT64]

    def parse(serialized):
        example = tf.io.parse_example(serialized, description)
        if invert_input_mask:
            example["input_mask"] = 1 - example["input_mask"]
        if int32:
            for name in int_names:
                example[name] = tf.cast(example[name], tf.int32)
        return example

    d = d.batch(batch_size, drop_remainder=drop_remainder)
    if is_training:
        d = d.map(parse, num_parallel_calls=autotune, deterministic=seed is not None)
    else:
        d = d.map(parse, num_parallel_calls=autotune, deterministic=True)
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
        """

        def __init__(self, paths: Paths, batch_size: Optional[int] = None,
                     max_seq_length: Optional[int] = None, max_predictions_per_seq: Optional[int] = None,
                     split_by: str = "auto", shuffle_buffer: int = 0, seed: int = 0,
                     drop_remainder: bool = False, int32: bool = False, invert_input_mask: bool = False,
                     rank: Optional[int] = None, world_size: Optional[int] = None, verify_crc: bool = True):
            super().__init__()
            if split_by not in ("auto", "file", "record"):
                raise ValueError(f"split_by must be 'auto', 'file' or 'record', got {split_by!r}")
            info = dataset_info(paths, max_seq_length, max_predictions_per_seq)
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
            for chunk in _iter_chunks(files, specs, DEFAULT_CHUNK, self.verify_crc, keep):
                chunk = _postprocess(chunk, self.int32, self.invert_input_mask)
                n = len(chunk["input_ids"])
                if rng is None:
                    yield chunk
                    continue
                buffer.append(chunk)
                pooled = sum(len(c["input_ids"]) for c in buffer)
                if pooled >= self.shuffle_buffer + n:
                    merged = {k: np.concatenate([c[k] for c in buffer]) for k in FEATURE_NAMES}
                    perm = rng.permutation(pooled)
                    out, keep_rows = perm[:pooled - self.shuffle_buffer], perm[pooled - self.shuffle_buffer:]
                    yield {k: v[out] for k, v in merged.items()}
                    buffer = [{k: v[keep_rows] for k, v in merged.items()}]
            if buffer:
                merged = {k: np.concatenate([c[k] for c in buffer]) for k in FEATURE_NAMES}
                perm = rng.permutation(len(merged["input_ids"]))
                yield {k: v[perm] for k, v in merged.items()}

        def __iter__(self):
            if self.batch_size is None:
                for chunk in self._rows():
                    tensors = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in chunk.items()}
                    for i in range(len(chunk["input_ids"])):
                        yield {k: t[i] for k, t in tensors.items()}
                return
            bs = int(self.batch_size)
            carry: Optional[Dict[str, np.ndarray]] = None
            for chunk in self._rows():
                if carry is not None:
                    chunk = {k: np.concatenate([carry[k], chunk[k]]) for k in FEATURE_NAMES}
                n = len(chunk["input_ids"])
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
    # ``bert_data.loaders.TorchDataset`` is a real class (usable with isinstance), built on first
    # access so that importing this module never imports torch.
    if name == "TorchDataset":
        return _torch_dataset_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
