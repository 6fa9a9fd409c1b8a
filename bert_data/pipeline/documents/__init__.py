"""The input side of the generator: which documents a run reads and how.

Layered bottom to top, each module importing only those below it:

* ``types``: the words (metadata entry, source, slice, corpus plan, document, skip, InputError);
* ``files`` (the bytes of a file's range, plain or decompressed: gz, bz2, xz, zst, with
  ``zstd_frames`` checking that a zstd file is not cut short) and ``spans`` (where documents
  begin and end among those bytes);
* readers per kind of input: ``text_files`` (one or many documents a file, JSON Lines; a large
  document in parts), ``tables`` (Parquet and Arrow); ``listing`` (metadata files and paths ->
  entries, checked: inside the prefix, regular files);
* ``planner`` (entries -> the corpus plan) and, on top, ``reading`` (sources -> documents,
  and ``DocumentTexts`` for ``bert-data build-vocab``).

Any path may be an fsspec URL (``bert_data.storage``).  Of the rest of the package it imports
only ``storage`` and the split codes of ``format.dataset_layout``: no other stage, nothing of
the run.
"""
