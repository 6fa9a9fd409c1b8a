"""Content checksums of a dataset's files: the manifest's ``sha256_per_file`` (every file of a
split: shards, their companions such as Megatron's ``.idx``, files kept beside the shards such
as MDS's ``index.json``), made when a run publishes its shards, and checked by ``bert-data
verify`` and by every reader before it returns a record of a shard.

SHA-256 rather than CRC32C (TFRecord's) or BLAKE2: it is the hash the manifest already gives the
vocabulary, ``sha256sum`` checks it from a shell, MosaicML streaming's ``validate_hash`` knows it
(the MDS ``index.json`` records the same digests), and with the SHA extensions of current x86
and ARM processors it is the fastest of the cryptographic hashes hashlib has (measured here:
1.3 GB/s, BLAKE2b 0.44 GB/s); a 32-bit CRC over files of gigabytes is too weak a fingerprint to
vouch for a whole file.  The digest is of the file's bytes only, which are the same for any
number of workers, so the manifest stays the same too.

Readers check a shard once per process (:func:`check_shard`): hashed when first opened, before
any of its records is returned, and remembered while its size, modification time and inode stay
the same.  ``verify_checksums=False`` (the loaders' and readers' switch) skips the check.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, Mapping, Optional, Tuple

ALGORITHM = "sha256"
_BLOCK = 1 << 20

__all__ = ["ALGORITHM", "ChecksumError", "file_digest", "file_digests", "check_shard", "damage_message"]


class ChecksumError(ValueError):
    """A file whose bytes are not those its manifest vouches for."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}")
        self.path = path


def file_digest(path: str) -> str:
    """The hex SHA-256 of a local file's bytes, read a block at a time."""
    digest = hashlib.new(ALGORITHM)
    block = bytearray(_BLOCK)
    view = memoryview(block)
    with open(path, "rb", buffering=0) as handle:
        while True:
            n = handle.readinto(block)
            if not n:
                break
            digest.update(view[:n])
    return digest.hexdigest()


def file_digests(paths: Mapping[str, str]) -> Dict[str, str]:
    """``{name: path}`` -> ``{name: hex SHA-256}``, files hashed side by side (hashlib lets go
    of the GIL), in the order of ``paths``."""
    names = list(paths)
    if not names:
        return {}
    with ThreadPoolExecutor(max_workers=max(1, min(len(names), os.cpu_count() or 1))) as pool:
        digests = list(pool.map(file_digest, (paths[name] for name in names)))
    return dict(zip(names, digests))


def damage_message(expected_bytes: Optional[int], found_bytes: int, expected: str, found: Optional[str],
                   where: str) -> str:
    """What is wrong with a damaged file and what to do (``where``: the manifest's path)."""
    if expected_bytes is not None and found_bytes != expected_bytes:
        what = f"{found_bytes:,} bytes where {where} records {expected_bytes:,} (cut short or added to)"
    else:
        what = f"its {ALGORITHM} is {found[:16]}..., {where} records {expected[:16]}... (bytes changed)"
    return f"damaged: {what}; regenerate the dataset or restore this file from a copy"


# Files checked in this process: path -> (stat key, digest it had).
_CHECKED: Dict[str, Tuple[tuple, str]] = {}


def _stat_key(path: str) -> tuple:
    stat = os.stat(path)
    return stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


def _digest_once(path: str) -> str:
    key = _stat_key(path)
    seen = _CHECKED.get(path)
    if seen is not None and seen[0] == key:
        return seen[1]
    digest = file_digest(path)
    _CHECKED[path] = (key, digest)
    return digest


def _expected(path: str) -> Optional[tuple]:
    """``(manifest path, sha256_per_file, bytes_per_file)`` of the manifest listing ``path``,
    or None when none does (or it records no checksums: made before they were recorded)."""
    from .dataset import find_manifest

    manifest_path = find_manifest(path)
    if manifest_path is None:
        return None
    manifest = _read_manifest(manifest_path)
    if not manifest.sha256_per_file:
        return None
    return manifest_path, manifest.sha256_per_file, manifest.bytes_per_file


_MANIFESTS: Dict[str, tuple] = {}


def _read_manifest(manifest_path: str):
    from .manifest import Manifest

    key = _stat_key(manifest_path)
    cached = _MANIFESTS.get(manifest_path)
    if cached is None or cached[0] != key:
        cached = _MANIFESTS[manifest_path] = (key, Manifest.read(manifest_path))
    return cached[1]


def check_shard(path: str, verify: bool = True) -> None:
    """Raise :class:`ChecksumError` naming ``path`` (or its companion, Megatron's ``.idx``) when
    its bytes are not those the manifest listing it records; nothing when ``verify`` is False,
    when no manifest lists it, or when the manifest records no checksums."""
    if not verify:
        return
    expected = _expected(path)
    if expected is None:
        return
    manifest_path, digests, sizes = expected
    from .dataset_layout import companion_paths
    from .output_formats import format_of_path

    fmt = format_of_path(path)
    for file in (path,) + (companion_paths(path, fmt.name) if fmt.companions else ()):
        message = damage(file, digests, sizes, manifest_path, _digest_once)
        if message is not None:
            _CHECKED.pop(file, None)  # a file put right is hashed again
            raise ChecksumError(file, f"{message} (bert-data verify {os.path.dirname(manifest_path) or '.'} "
                                      "lists every damaged file)")


def damage(path: str, digests: Mapping[str, str], sizes: Mapping[str, int], where: str,
           digest=file_digest) -> Optional[str]:
    """What is wrong with the file at ``path`` (listed by its name in a manifest's
    ``sha256_per_file`` and ``bytes_per_file``, ``where`` the manifest's path), or None when its
    bytes are those recorded (or nothing is recorded of it)."""
    name = os.path.basename(path)
    want = digests.get(name)
    if want is None:
        return None
    size = os.path.getsize(path)
    if name in sizes and sizes[name] != size:  # cut short or added to: no need to hash
        return damage_message(sizes[name], size, want, None, where)
    found = digest(path)
    return None if found == want else damage_message(None, size, want, found, where)

def split_digests(shards, kind: str, directory: str, local=None, known: Optional[Mapping[str, str]] = None
                  ) -> Dict[str, str]:
    """The manifest's ``sha256_per_file`` for a split: each shard (paths, in order), its
    companions and the files kept beside the split's shards (in ``directory``), by name.
    ``local(path)``: where a shard or companion's bytes are on this machine, when not at its
    path (shards staged for an upload keep their names in progress).  ``known``: digests by
    name taken as the file was written (not read again)."""
    from .dataset_layout import companion_paths
    from .output_formats import get_format

    fmt = get_format(kind)
    files: Dict[str, str] = {}
    for shard in shards:
        for path in (shard,) + companion_paths(shard, kind):
            files[os.path.basename(path)] = local(path) if local else path
    for name in fmt.split_files:
        files[name] = os.path.join(directory, name)
    known = known or {}
    hashed = file_digests({name: path for name, path in files.items() if name not in known})
    return {name: known[name] if name in known else hashed[name] for name in files}
