"""MosaicML streaming's MDS shards (``format/mds`` of ``mosaicml-streaming``) and their
``index.json``, for ``streaming.StreamingDataset``.  See ``writer`` (:class:`MDSWriter`) and
``reader`` (:class:`MDSReader`), found through ``format.output_formats``."""
