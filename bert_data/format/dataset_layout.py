"""A dataset's layout on disk, in one place: split names, shard names and suffixes per output
format, and which files of a directory are a run's output.

The writer (``bert_data.run``), the readers (``format.dataset``, ``load``) and the tools
all take these names from here, so they cannot drift apart.  The manifest's own name belongs to
:mod:`bert_data.format.manifest`.

An output directory holds ``NAME-1<suffix>`` .. ``NAME-N<suffix>`` and the manifest; with a
validation split, ``train/`` and ``val/``, each laid out like that.  While a run writes a shard
it is ``<shard name>.tmp`` (renamed when complete, before the manifest, which is written last).

Each output format (*kind*) declares its shard suffix, the suffixes a reader recognises in a
directory without a manifest (a compressed TFRecord file may carry its codec in its name; MDS
names its compressed shards ``.mds.zstd`` / ``.mds.gz``, as MosaicML streaming does), the files
it keeps beside a split's shards (MDS's ``index.json``) and each shard's companions (Megatron's
``.idx``) in the one registry, :mod:`bert_data.format.output_formats`; this module makes names
from them.  Formats whose shards are written from appended column batches (HDF5, Parquet, MDS)
append them to ``<shard name>.body`` and write the shard from it when every unit is in.
"""

from __future__ import annotations

import os
from typing import Dict, Iterable, Optional, Tuple

from .manifest import Manifest
from .output_formats import DEFAULT_FORMAT, FORMATS, get_format

TRAIN = "train"
VAL = "val"
SPLITS = (TRAIN, VAL)
# A split's code: one byte a document in a corpus plan, and a key of the split's random streams
# and of its shuffles (changing them changes every output's bytes).
TRAIN_CODE, VAL_CODE = 0, 1
SPLIT_CODES = {TRAIN: TRAIN_CODE, VAL: VAL_CODE}
SPLIT_OF_CODE = {code: split for split, code in SPLIT_CODES.items()}

# A shard (or a manifest) being written; renamed to its final name when complete.
IN_PROGRESS_SUFFIX = ".tmp"
# The body of an HDF5, Parquet or MDS shard: its appended column batches, from which the shard
# (first in progress, then under its name) is written when every unit is in.
BODY_SUFFIX = ".body"
# While a run is under way (or after it stopped, for --resume), its output directory holds its
# work directory and its lock (``run.run_files`` owns what is inside and every operation;
# with Google's --output_file both are named ``.FIRST_FILE<name>``, one per run).
WORK_DIR = ".bert_data_work"
LOCK = ".bert_data.lock"


def shard_suffix(kind: str = DEFAULT_FORMAT, compression: Optional[str] = None) -> str:
    """``.tfrecords`` for TFRecord shards (``.mds.zstd`` for MDS shards compressed with zstd)."""
    return get_format(kind).suffix_for(compression)


def shard_name(name: str, shard: int, kind: str = DEFAULT_FORMAT, compression: Optional[str] = None) -> str:
    """The file name of shard ``shard`` (numbered from 0) of a run named ``name``: ``name-1.tfrecords``."""
    return f"{name}-{shard + 1}{shard_suffix(kind, compression)}"


def companion_paths(shard: str, kind: str) -> Tuple[str, ...]:
    """The files that go with a shard (Megatron's ``NAME-i.idx`` beside ``NAME-i.bin``)."""
    stem = shard[: -len(FORMATS[kind].suffix)]
    return tuple(stem + suffix for suffix in FORMATS[kind].companions)


def body_path(shard: str, appendable: bool) -> str:
    """Where a shard's units are appended: the shard in progress itself when its format's
    segments are the file (TFRecord), else its body (``NAME-i.hdf5.body``)."""
    return in_progress(shard) if appendable else shard + BODY_SUFFIX


def run_file_parts(name: str, kind: str) -> Tuple[Optional[str], str, bool]:
    """What a file name in an output directory is to a run of format ``kind``: ``(final, shard,
    split_file)``: the final name of a file in progress (``.tmp``) or of a body (None if neither),
    the shard it belongs to (Megatron's ``NAME-i.idx`` -> ``NAME-i.bin``), whether it is a file
    the format keeps beside a split's shards (MDS's index.json)."""
    final = next((name[: -len(t)] for t in (IN_PROGRESS_SUFFIX, BODY_SUFFIX) if name.endswith(t)), None)
    shard, layout = final or name, FORMATS[kind]
    for suffix in layout.companions:
        if shard.endswith(suffix):
            shard = shard[: -len(suffix)] + layout.suffix
    return final, shard, name in layout.split_files


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


def is_run_output_name(name: str, kind: Optional[str] = None) -> bool:
    """A file name a run of this tool writes into its output directory: a shard of any format,
    finished or in progress, or a manifest (or one in progress); with ``kind``, also the files
    that format keeps beside its shards (MDS's ``index.json``)."""
    if kind is not None and name in FORMATS[kind].split_files:
        return True
    for temporary in (IN_PROGRESS_SUFFIX, BODY_SUFFIX):
        if name.endswith(temporary):
            name = name[: -len(temporary)]
    suffixes = tuple(suffix for f in FORMATS.values()
                     for suffix in (f.suffix,) + tuple(s for _, s in f.compressed_suffixes) + f.companions)
    return Manifest.is_manifest_file(name) or name.endswith(suffixes)
