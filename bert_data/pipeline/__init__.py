"""The stages of generation, in order, each a pure function of narrow, named options:

documents (``documents/``: the listed inputs read as documents) -> sentences -> tokens (token ids)
-> mixing (the seeded order units are cut from) -> instances (pairs or MLM-only windows) ->
masking -> packing -> columns (padded canonical columns, what every output format encodes).

No stage knows of processes, executors, the work directory or the run's output files: those are
:mod:`bert_data.run`'s.  A stage imports only lower stages, :mod:`bert_data.tokenizers` and
:mod:`bert_data.format`'s record layout.
"""
