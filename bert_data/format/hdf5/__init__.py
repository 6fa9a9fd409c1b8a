"""HDF5 shards in the layout of NVIDIA DeepLearningExamples' BERT (and the MLPerf BERT
reference): one dataset per feature, one row per instance, read by their
``pretraining_dataset`` as it is.  See ``writer`` and ``reader``."""

from .reader import read_columns  # noqa: F401
from .writer import NVIDIA_DTYPES, write_shard  # noqa: F401
