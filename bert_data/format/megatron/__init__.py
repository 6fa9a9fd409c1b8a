"""Megatron-LM's indexed dataset: the tokenized corpus as ``.bin``/``.idx`` pairs, written as
Megatron's ``tools/preprocess_data.py --split-sentences`` writes them (every sentence a
sequence, documents as ranges of sequences) and read by
``megatron.core.datasets.indexed_dataset.IndexedDataset``.  Megatron builds its BERT samples
(pairs, masks) itself at train time; see ``writer`` and ``reader``."""

from .reader import MegatronReader, read_documents, read_index  # noqa: F401
from .writer import IndexedWriter, MegatronWriter, index_path, token_dtype  # noqa: F401
