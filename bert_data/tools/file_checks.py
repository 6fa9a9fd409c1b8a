"""``bert-data verify``'s content checks of whole files: each file a manifest vouches for (its
``sha256_per_file``: shards, Megatron's ``.idx`` companions, MDS's ``index.json``) against the
SHA-256 and size it records (:mod:`bert_data.format.checksums`).  They find what the record
checks cannot: a changed token id that is still a valid id, an HDF5 or Parquet file changed
outside its checksummed chunks and pages, an MDS shard cut short at a sample's end."""

from __future__ import annotations

import os
from typing import List, Optional, Tuple

from ..format.checksums import damage
from ..format.dataset import ShardSet


def shard_damage(path: str, shard_set: ShardSet, size_said: bool = False) -> Optional[str]:
    """What is wrong with a listed shard's bytes, or None (intact, or nothing recorded; or, with
    ``size_said``, a size that differs from the manifest's: verify has said so in its words)."""
    manifest = shard_set.manifest
    if manifest is None or not manifest.sha256_per_file:
        return None
    recorded = manifest.bytes_per_file.get(os.path.basename(path))
    if size_said and recorded is not None and recorded != os.path.getsize(path):
        return None
    return damage(path, manifest.sha256_per_file, manifest.bytes_per_file, shard_set.manifest_path)


def other_file_problems(shard_set: ShardSet) -> List[Tuple[str, str]]:
    """``(path, problem)`` of the files the manifest vouches for beside its shards (Megatron's
    ``.idx``, MDS's ``index.json``): missing or damaged."""
    manifest = shard_set.manifest
    if manifest is None or not manifest.sha256_per_file:
        return []
    directory = os.path.dirname(shard_set.manifest_path)
    problems = []
    for name in manifest.sha256_per_file:
        if name in manifest.examples_per_file:
            continue  # a shard: checked with its records
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            problems.append((path, "listed in the manifest but missing"))
            continue
        found = damage(path, manifest.sha256_per_file, manifest.bytes_per_file, shard_set.manifest_path)
        if found is not None:
            problems.append((path, found))
    return problems


def no_checksums_note(shard_set: ShardSet) -> Optional[str]:
    """A note for a manifest bert_data wrote before it recorded content checksums."""
    manifest = shard_set.manifest
    if manifest is None or manifest.sha256_per_file or not manifest.bert_data_version:
        return None
    return (f"{shard_set.manifest_path}: no content checksums (written by bert_data {manifest.bert_data_version}, "
            "before sha256_per_file): a changed byte that still reads as a valid record goes unseen; "
            "regenerate the dataset to have them")
