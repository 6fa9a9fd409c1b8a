"""Parquet shards for Hugging Face: one row an instance in ``transformers``' names and
conventions, unpadded, so ``datasets.load_dataset("parquet", ...)`` with a padding collator
feeds ``BertForPreTraining`` (``AlbertForPreTraining``, ``BertForMaskedLM``) as it is.  See
``writer`` and ``reader``."""

from .reader import read_columns  # noqa: F401
from .writer import schema_for, write_shard  # noqa: F401
