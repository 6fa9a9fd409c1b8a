"""A dataset's layout on disk, in one place: split names, shard names and suffixes per output
format, and which files of a directory are a run's output.

The writer (``bert_data.generator``), the readers (``format.dataset``, ``load``) and the tools
all take these names from here, so they cannot drift apart.  The manifest's own name belongs to
:mod:`bert_data.format.manifest`.

An output directory holds ``NAME-1<suffix>`` .. ``NAME-N<suffix>`` and the manifest; with a
validation split, ``train/`` and ``val/``, each laid out like that.  While a run writes a shard
it is ``<shard name>.tmp`` (renamed when complete, before the manifest, which is written last).

Each output format (*kind*) has its shard suffix, and the suffixes a reader recognises in a
directory without a manifest (a compressed TFRecord file may carry its codec in its name).
Only TFRecord is written today; a new format adds a :class:`ShardFormat` to :data:`FORMATS`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, Iterable, Optional, Tuple

from .manifest import Manifest

TRAIN = "train"
VAL = "val"
SPLITS = (TRAIN, VAL)

# A shard (or a manifest) being written; renamed to its final name when complete.
IN_PROGRESS_SUFFIX = ".tmp"
# While a run is under way (or after it stopped, for --resume), its output directory holds its
# work directory and its lock (``generator.run_files`` owns what is inside and every operation;
# with Google's --output_file both are named ``.FIRST_FILE<name>``, one per run).
WORK_DIR = ".bert_data_work"
LOCK = ".bert_data.lock"


@dataclass(frozen=True)
class ShardFormat:
    """How shards of one output format are named."""

    kind: str
    suffix: str  # the writer's: NAME-i<suffix>
    read_suffixes: Tuple[str, ...]  # names a reader takes for shards of this kind (the writer's first)


TFRECORD = "tfrecord"
FORMATS: Dict[str, ShardFormat] = {
    TFRECORD: ShardFormat(TFRECORD, ".tfrecords",
                          (".tfrecords", ".tfrecords.gz", ".tfrecords.gzip", ".tfrecords.zz", ".tfrecords.zlib")),
}
DEFAULT_FORMAT = TFRECORD


def shard_format(kind: str = DEFAULT_FORMAT) -> ShardFormat:
    try:
        return FORMATS[kind]
    except KeyError:
        raise ValueError(f"unknown output format {kind!r} (known: {', '.join(sorted(FORMATS))})") from None


def shard_suffix(kind: str = DEFAULT_FORMAT) -> str:
    """``.tfrecords`` for TFRecord shards."""
    return shard_format(kind).suffix


def shard_name(name: str, shard: int, kind: str = DEFAULT_FORMAT) -> str:
    """The file name of shard ``shard`` (numbered from 0) of a run named ``name``: ``name-1.tfrecords``."""
    return f"{name}-{shard + 1}{shard_suffix(kind)}"


def in_progress(path: str) -> str:
    """The name a shard (or manifest) has while it is written."""
    return path + IN_PROGRESS_SUFFIX


def split_dirs(output_dir: str, has_validation: bool, join=os.path.join) -> Dict[str, str]:
    """The directory of each split: the output directory itself, or its ``train/`` and ``val/``.
    ``join``: how paths are joined (``storage.join`` for a URL)."""
    if has_validation:
        return {split: join(output_dir, split) for split in SPLITS}
    return {TRAIN: output_dir}


def shard_suffixes(kinds: Optional[Iterable[str]] = None) -> Tuple[str, ...]:
    """Every suffix a reader takes for a shard (of the given kinds; default: every kind)."""
    return tuple(suffix for kind in (kinds or FORMATS) for suffix in FORMATS[kind].read_suffixes)


def is_shard_name(name: str, kinds: Optional[Iterable[str]] = None) -> bool:
    """A file name readers take for a shard in a directory without manifest."""
    return name.endswith(shard_suffixes(kinds))


def unfinished_run(directory: str) -> Optional[str]:
    """The path of a trace of a run that has not finished in ``directory`` (its work directory,
    or a shard or manifest in progress; for a split's directory, in the output directory above
    it too), or None.  A directory whose manifest is absent and that holds one is not a
    dataset: readers say so, and ``--resume`` finishes it."""
    places = [directory]
    if os.path.basename(os.path.normpath(directory)) in SPLITS:
        places.append(os.path.dirname(os.path.normpath(directory)) or ".")
    for place in places:
        try:
            names = sorted(os.listdir(place))
        except OSError:
            continue
        for name in names:
            if name.endswith(WORK_DIR) or (name.endswith(IN_PROGRESS_SUFFIX) and is_run_output_name(name)):
                return os.path.join(place, name)
    return None


def unfinished_message(directory: str, trace: str) -> str:
    return (f"{directory} holds an unfinished run (no manifest yet; {trace} is still there), not a dataset: "
            "run the same create_tfrecords command with --resume to finish it")


def is_run_output_name(name: str) -> bool:
    """A file name a run of this tool writes into its output directory: a shard of any format,
    finished or in progress, or a manifest (or one in progress)."""
    if name.endswith(IN_PROGRESS_SUFFIX):
        name = name[: -len(IN_PROGRESS_SUFFIX)]
    return Manifest.is_manifest_file(name) or name.endswith(tuple(f.suffix for f in FORMATS.values()))
