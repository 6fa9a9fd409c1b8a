"""The output formats, behind one interface: what the generator writes through and what the
readers, tools and loaders read through.

Each format lives in its own folder (``format/tfrecord/``, ``format/hdf5/``, ``format/parquet/``,
``format/mds/``, ``format/megatron/``) with a writer and a reader that mirror each other; this
module names them and says what each can do.  The generator's side of the contract:

* an encode task turns a batch of instances (padded canonical columns, see
  :mod:`bert_data.format.columns`) into bytes appended to a shard (:meth:`OutputFormat.encode_segment`);
* when all units are in, :meth:`OutputFormat.write_shard` turns a shard's appended bytes (its
  *body*) into the final file; TFRecord's body already is the file;
* when a split's shards are written, :meth:`OutputFormat.write_split_files` writes what the
  format keeps beside them (MDS's ``index.json``).

The readers' side: :meth:`OutputFormat.read_columns` gives a shard's instances back as padded
canonical columns, whatever the format, so ``verify``, ``inspect``, ``stats`` and the loaders
read every instance format alike.  ``megatron`` holds the tokenized corpus, not instances: it
is written from the tokenized slices (see :mod:`bert_data.format.megatron`).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from . import dataset_layout
from .dataset_layout import HDF5, MDS, MEGATRON, PARQUET, TFRECORD
from .layout import FeatureSpec, canonical_name

if TYPE_CHECKING:  # the command line's --help must not import numpy
    import numpy as np



@dataclass(frozen=True)
class ShardOptions:
    """What a shard writer needs to know of the run: the record layout (``specs``, as the
    TFRecord layout names it), its compression and the pair task's name."""

    specs: Tuple[FeatureSpec, ...]
    compression: Optional[str] = None
    sentence_order: bool = False

    @property
    def widths(self) -> Dict[str, int]:
        """Canonical column -> values per instance."""
        return {canonical_name(spec.name): spec.length for spec in self.specs}

    @property
    def max_seq_length(self) -> int:
        return self.widths["input_ids"]

    @property
    def max_predictions_per_seq(self) -> Optional[int]:
        return self.widths.get("masked_lm_positions")


@dataclass(frozen=True)
class OutputFormat:
    """One output format: its name, the compressions it has, and where its writer and reader
    live (modules imported when used: h5py and pyarrow only for their formats).  Its file names
    are ``format.dataset_layout``'s."""

    name: str
    compressions: Tuple[str, ...]
    module: str  # bert_data.format.<name>: its writer and reader
    instances: bool = True  # False: the tokenized corpus (megatron)
    appendable: bool = False  # True: segments appended in unit order are the file itself
    help: str = ""

    def _impl(self):
        return importlib.import_module(self.module)

    @property
    def split_files(self) -> Tuple[str, ...]:
        """Files kept beside a split's shards (MDS's index.json)."""
        return dataset_layout.FORMATS[self.name].split_files

    def encode_segment(self, columns: Dict[str, np.ndarray], options: ShardOptions) -> bytes:
        """Rows of one shard (padded canonical columns) -> bytes appended to the shard's body."""
        if self.appendable:
            return self._impl().encode_segment(columns, options)
        from .columns import encode_batch

        return encode_batch(columns)

    def write_shard(self, batches: Iterable[Dict[str, np.ndarray]], path: str, name: str,
                    options: ShardOptions) -> dict:
        """The shard's column batches (its body's, ``columns.iter_batches``, in the order the
        shard holds them) -> the shard file, written at ``path`` (a temporary: the caller
        renames it to its final ``name``); returns what the split's files need to know of the
        shard (MDS: its entry in ``index.json``)."""
        return self._impl().write_shard(batches, path, name, options)

    def write_split_files(self, directory: str, shards: Sequence[dict], options: ShardOptions) -> List[str]:
        """Files the format keeps beside a split's shards (written after them, before the
        manifest); returns their paths."""
        write = getattr(self._impl(), "write_split_files", None)
        return write(directory, shards, options) if write else []

    def read_columns(self, path: str, max_seq_length: int, max_predictions_per_seq: Optional[int],
                     batch_size: int = 1024, max_sequences_per_pack: Optional[int] = None
                     ) -> Iterator[Dict[str, np.ndarray]]:
        """A shard's instances, in order, as padded canonical columns in batches (packed rows
        as the packed layout's columns: Parquet and MDS need ``max_sequences_per_pack`` for the
        pair task's columns, which their rows hold unpadded)."""
        if max_sequences_per_pack:
            return self._impl().read_columns(path, max_seq_length, max_predictions_per_seq, batch_size,
                                             max_sequences_per_pack=max_sequences_per_pack)
        return self._impl().read_columns(path, max_seq_length, max_predictions_per_seq, batch_size)


FORMATS: Dict[str, OutputFormat] = {
    TFRECORD: OutputFormat(TFRECORD, ("gzip", "zlib"), "bert_data.format.tfrecord.shards",
                           appendable=True,
                           help="tf.train.Example records: TensorFlow, Google's run_pretraining.py, Cerebras"),
    HDF5: OutputFormat(HDF5, ("gzip",), "bert_data.format.hdf5",
                       help="NVIDIA DeepLearningExamples / MLPerf BERT's HDF5 instances"),
    PARQUET: OutputFormat(PARQUET, ("snappy", "zstd", "gzip"), "bert_data.format.parquet",
                          help="one row an instance in transformers' names, for datasets.load_dataset('parquet')"),
    MDS: OutputFormat(MDS, ("zstd", "gzip"), "bert_data.format.mds",
                      help="MosaicML streaming's MDS shards and index.json, for StreamingDataset"),
    MEGATRON: OutputFormat(MEGATRON, (), "bert_data.format.megatron", instances=False,
                           help="Megatron-LM's indexed .bin/.idx pairs of the tokenized corpus (a sentence a "
                                "sequence, documents in listed order), for IndexedDataset"),
}


def get_format(name: str) -> OutputFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown output format {name!r}: one of {', '.join(FORMATS)}") from None


def format_of_path(path: str) -> OutputFormat:
    """The format of a shard file, by its name."""
    return FORMATS[dataset_layout.kind_of_shard(os.path.basename(path))]
