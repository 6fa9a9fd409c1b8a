"""The bytes of each output format and the readers of them: TFRecord, HDF5, Parquet, MDS,
Megatron, record layouts, the dataset's layout on disk."""
