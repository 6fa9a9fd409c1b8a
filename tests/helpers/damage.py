"""Datasets in every output format made from one small corpus, and damaged copies of them: a
flipped bit (where the format keeps its records' bytes) or a shard cut short, as a disk, a
copy or a download damages files."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Dict, Optional

from bert_data.run.resolve import generate

from tests.helpers.corpus import make_corpus
from tests.helpers.format_runs import run_config

# name -> (--output_format, --compression, the suffix of its shards)
DATASETS = {
    "tfrecord": ("tfrecord", None, ".tfrecords"),
    "hdf5": ("hdf5", "gzip", ".hdf5"),
    "parquet": ("parquet", "zstd", ".parquet"),
    "mds": ("mds", None, ".mds"),
    "mds-zstd": ("mds", "zstd", ".mds.zstd"),
    "megatron": ("megatron", None, ".bin"),
}


def make_datasets(root: Path, names=tuple(DATASETS)) -> Dict[str, Path]:
    """name -> output directory (3 shards each)."""
    corpus = make_corpus(root / "corpus", n_docs=16, seed=3)
    out = {}
    for name in names:
        fmt, compression, _ = DATASETS[name]
        out[name] = root / name
        generate(run_config(corpus, out[name], fmt, compression), progress=False)
    return out


def shard(directory: Path, name: str, number: int = 2) -> Path:
    return directory / f"examples-{number}{DATASETS[name][2]}"


def damaged_copy(directory: Path, tmp_path: Path, file: str, flip_at: Optional[int] = None,
                 cut: Optional[int] = None) -> Path:
    """A copy of the dataset with one bit of ``file`` flipped (at byte ``flip_at``; negative:
    from the end; None: the middle) or its last ``cut`` bytes gone."""
    copy = tmp_path / f"copy-of-{directory.name}"
    shutil.copytree(directory, copy)
    path = copy / file
    data = bytearray(path.read_bytes())
    if cut:
        del data[-cut:]
    else:
        data[len(data) // 2 if flip_at is None else flip_at] ^= 1
    path.write_bytes(bytes(data))
    return copy
