"""MosaicML streaming's MDS shards (``format/mds`` of ``mosaicml-streaming``) and their
``index.json``, for ``streaming.StreamingDataset``.  See ``writer`` and ``reader``."""

from .reader import read_columns  # noqa: F401
from .writer import COMPRESSION_EXTENSIONS, write_shard, write_split_files  # noqa: F401
