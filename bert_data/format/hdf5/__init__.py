"""HDF5 shards in the layout of NVIDIA DeepLearningExamples' BERT (and the MLPerf BERT
reference): one dataset per feature, one row per instance, read by their
``pretraining_dataset`` as it is.  See ``writer`` (:class:`HDF5Writer`) and ``reader``
(:class:`HDF5Reader`), found through ``format.output_formats``."""
