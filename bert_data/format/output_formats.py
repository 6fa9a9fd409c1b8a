"""The output formats' one registry: :data:`FORMATS` maps a format's name to its declaration
(:class:`OutputFormat`), and nothing else in ``bert_data.format`` lists formats.

A declaration says how the format's files are named (shard suffix, the suffixes a reader takes,
compressed suffixes, files kept beside a split's shards, companions of each shard), which
``--compression`` values it has, what it can do (its capabilities) and where its writer and
reader classes live.  Those classes are imported when the format is used, so the declarations
import neither numpy nor h5py nor pyarrow: ``create_tfrecords --help`` reads this table, and
``format.dataset_layout`` (file names) builds on it.

Each format lives in its own folder (``format/tfrecord/``, ``format/hdf5/``, ``format/parquet/``,
``format/mds/``, ``format/megatron/``) with a :class:`Writer` and a :class:`Reader` that mirror
each other, as MosaicML streaming's writers and readers do: both are made from the same
:class:`ShardOptions`, and what a writer's ``write_shard`` takes is what its reader's
``read_columns`` gives back.  The generator's side of the contract:

* an encode task turns a batch of instances (padded canonical columns, see
  :mod:`bert_data.format.columns`) into bytes appended to a shard (:meth:`Writer.encode_segment`);
* when all units are in, :meth:`Writer.write_shard` turns a shard's appended bytes (its *body*)
  into the final file, unless the format is ``appendable`` (TFRecord: the body is the file);
* when a split's shards are written, :meth:`Writer.write_split_files` writes what the format
  keeps beside them (MDS's ``index.json``).

The readers' side: :meth:`Reader.read_columns` gives a shard's instances back as padded
canonical columns, whatever the format, so ``verify``, ``inspect``, ``stats`` and the loaders
read every instance format alike.  ``megatron`` holds the tokenized corpus, not instances
(``instances=False``): its batches are documents (see :mod:`bert_data.format.megatron`).
"""

from __future__ import annotations

import importlib
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Type

from .layout import FeatureSpec, canonical_name

if TYPE_CHECKING:  # the command line's --help must not import numpy
    import numpy as np

__all__ = ["TFRECORD", "HDF5", "PARQUET", "MDS", "MEGATRON", "DEFAULT_FORMAT", "MDS_INDEX", "ShardOptions",
           "Writer", "Reader", "UnpaddedRowsReader", "OutputFormat", "FORMATS", "get_format", "format_of_path"]

TFRECORD, HDF5, PARQUET, MDS, MEGATRON = "tfrecord", "hdf5", "parquet", "mds", "megatron"
DEFAULT_FORMAT = TFRECORD
MDS_INDEX = "index.json"  # MosaicML streaming's name for a dataset's shard list


@dataclass(frozen=True)
class ShardOptions:
    """What a format's writer and reader need to know of the run: the record layout (``specs``,
    as the TFRecord layout names it), its compression and the pair task's name."""

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

    @property
    def max_sequences_per_pack(self) -> Optional[int]:
        """Packed rows' instance slots (the pair task's columns are that wide), else None."""
        return self.widths.get("next_sentence_positions")

    @property
    def packed(self) -> bool:
        return "positions" in self.widths


class Writer(ABC):
    """Writes shards of one format for a run (``options``).  The defaults are those of a format
    whose shards are written from a body of column batches (HDF5, Parquet, MDS)."""

    def __init__(self, options: ShardOptions):
        self.options = options

    def encode_segment(self, columns: Dict[str, np.ndarray]) -> bytes:
        """Rows of one shard (padded canonical columns) -> bytes appended to the shard's body:
        column batches, unless the format's segments are the file itself (``appendable``)."""
        from .columns import encode_batch

        return encode_batch(columns)

    def encode_segments(self, columns: Dict[str, np.ndarray], bounds: Sequence[int]) -> list:
        """``encode_segment`` of each range of rows ``bounds[k]:bounds[k + 1]`` (the segments of
        several shards' rows, given together); a format whose segments are records row by row
        encodes them at once (this, a call a range, is the reference)."""
        return [self.encode_segment({name: column[a:b] for name, column in columns.items()})
                for a, b in zip(bounds[:-1], bounds[1:])]

    @abstractmethod
    def write_shard(self, batches: Iterable[Dict[str, np.ndarray]], path: str, name: str) -> dict:
        """The shard's column batches (its body's, ``columns.iter_batches``, in the order the
        shard holds them) -> the shard file, written at ``path`` (the caller renames it to its
        final ``name``); returns what the split's files need to know of the shard (MDS: its
        entry in ``index.json``)."""

    def write_split_files(self, directory: str, shards: Sequence[dict]) -> List[str]:
        """Files the format keeps beside a split's shards (written after them, before the
        manifest); returns their paths.  Most formats keep none."""
        return []


class Reader(ABC):
    """Reads shards of one format back, given the run's ``options`` (a writer's options are
    its reader's; None when the file itself tells the layout, as HDF5's and TFRecord's do).
    Before it returns a record of a shard, a reader checks the shard's bytes against the
    SHA-256 its manifest records (``format.checksums.check_shard``), unless
    ``verify_checksums`` is False."""

    def __init__(self, options: Optional[ShardOptions] = None, verify_checksums: bool = True):
        self.options = options
        self.verify_checksums = verify_checksums

    @abstractmethod
    def read_columns(self, path: str, batch_size: int = 1024) -> Iterator[Dict[str, np.ndarray]]:
        """A shard's instances, in order, as padded canonical columns in batches (packed rows as
        the packed layout's columns)."""


class UnpaddedRowsReader(Reader):
    """A reader of shards whose rows are stored unpadded (Parquet, MDS): the options give the
    padded widths (and packed rows' instance slots) the columns come back in."""

    def read_columns(self, path: str, batch_size: int = 1024) -> Iterator[Dict[str, np.ndarray]]:
        options = self.options
        return self.read_rows(path, options.max_seq_length, options.max_predictions_per_seq, batch_size,
                              options.max_sequences_per_pack)

    @abstractmethod
    def read_rows(self, path: str, max_seq_length: int, max_predictions_per_seq: Optional[int], batch_size: int,
                  max_sequences_per_pack: Optional[int]) -> Iterator[Dict[str, np.ndarray]]:
        """The shard's rows as padded canonical columns, ``batch_size`` at a time."""


def _load(where: str) -> type:
    module, name = where.split(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class OutputFormat:
    """One output format's declaration."""

    name: str
    suffix: str  # the writer's: NAME-i<suffix>
    read_suffixes: Tuple[str, ...]  # names a reader takes for shards of this format (the writer's first)
    compressions: Tuple[str, ...]  # its --compression values
    writer: str  # "module:Class" of its Writer, imported when used
    reader: str  # "module:Class" of its Reader
    compressed_suffixes: Tuple[Tuple[str, str], ...] = ()  # (compression, suffix) where the name says it
    split_files: Tuple[str, ...] = ()  # kept beside a split's shards
    companions: Tuple[str, ...] = ()  # suffixes of files that go with each shard (Megatron's .idx)
    # Capabilities:
    instances: bool = True  # False: the tokenized corpus (megatron), written from the corpus, not instances
    appendable: bool = False  # segments appended in unit order are the file itself
    framed_records: bool = False  # records in a framing whose offsets can be read (the final shuffle's input)
    layout_names: bool = False  # features named as the record layout names them (--v2_feature_names renames them)
    help: str = ""

    def suffix_for(self, compression: Optional[str] = None) -> str:
        return dict(self.compressed_suffixes).get(compression, self.suffix)

    @property
    def single_file_shards(self) -> bool:
        """A shard is one file, nothing beside it (Google's --output_file can name it)."""
        return not self.split_files and not self.companions

    def writer_class(self) -> Type[Writer]:
        return _load(self.writer)

    def reader_class(self) -> Type[Reader]:
        return _load(self.reader)

    def make_writer(self, options: ShardOptions) -> Writer:
        return self.writer_class()(options)

    def make_reader(self, options: Optional[ShardOptions] = None, verify_checksums: bool = True) -> Reader:
        return self.reader_class()(options, verify_checksums)


FORMATS: Dict[str, OutputFormat] = {
    TFRECORD: OutputFormat(
        TFRECORD, ".tfrecords", (".tfrecords", ".tfrecords.gz", ".tfrecords.gzip", ".tfrecords.zz", ".tfrecords.zlib"),
        ("gzip", "zlib"), "bert_data.format.tfrecord.shards:TFRecordWriter",
        "bert_data.format.tfrecord.shards:TFRecordReader", appendable=True, framed_records=True, layout_names=True,
        help="tf.train.Example records: TensorFlow, Google's run_pretraining.py, Cerebras"),
    HDF5: OutputFormat(
        HDF5, ".hdf5", (".hdf5", ".h5"), ("gzip",), "bert_data.format.hdf5.writer:HDF5Writer",
        "bert_data.format.hdf5.reader:HDF5Reader",
        help="NVIDIA DeepLearningExamples / MLPerf BERT's HDF5 instances"),
    PARQUET: OutputFormat(
        PARQUET, ".parquet", (".parquet",), ("snappy", "zstd", "gzip"), "bert_data.format.parquet.writer:ParquetWriter",
        "bert_data.format.parquet.reader:ParquetReader",
        help="one row an instance in transformers' names, for datasets.load_dataset('parquet')"),
    MDS: OutputFormat(
        MDS, ".mds", (".mds", ".mds.zstd", ".mds.gz"), ("zstd", "gzip"), "bert_data.format.mds.writer:MDSWriter",
        "bert_data.format.mds.reader:MDSReader", compressed_suffixes=(("zstd", ".mds.zstd"), ("gzip", ".mds.gz")),
        split_files=(MDS_INDEX,),
        help="MosaicML streaming's MDS shards and index.json, for StreamingDataset"),
    MEGATRON: OutputFormat(
        MEGATRON, ".bin", (".bin",), (), "bert_data.format.megatron.writer:MegatronWriter",
        "bert_data.format.megatron.reader:MegatronReader", companions=(".idx",), instances=False,
        help="Megatron-LM's indexed .bin/.idx pairs of the tokenized corpus (a sentence a sequence, documents in "
             "listed order), for IndexedDataset"),
}


def get_format(name: str = DEFAULT_FORMAT) -> OutputFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown output format {name!r}: one of {', '.join(FORMATS)}") from None


def format_of_path(path: str) -> OutputFormat:
    """The format of a shard file, by its name: the one place a path says its format
    (TFRecord when no other format's suffix fits: its files have many names)."""
    name = os.path.basename(path)
    for fmt in FORMATS.values():
        if fmt.name != DEFAULT_FORMAT and name.endswith(fmt.read_suffixes):
            return fmt
    return FORMATS[DEFAULT_FORMAT]
