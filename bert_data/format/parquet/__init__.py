"""Parquet shards for Hugging Face: one row an instance in ``transformers``' names and
conventions, unpadded, so ``datasets.load_dataset("parquet", ...)`` with a padding collator
feeds ``BertForPreTraining`` (``AlbertForPreTraining``, ``BertForMaskedLM``) as it is.  See
``writer`` (:class:`ParquetWriter`) and ``reader`` (:class:`ParquetReader`), found through
``format.output_formats``."""
