"""Reads a Megatron indexed dataset back: the mirror of ``writer`` (no Megatron needed; the
tests read the same files with ``megatron.core``'s ``IndexedDataset``)."""

from __future__ import annotations

import struct
from typing import Dict, Iterator, List

import numpy as np

from ..checksums import check_shard
from ..output_formats import Reader
from .writer import DTYPE_CODES, MAGIC, index_path

_DTYPES = {code: dtype for dtype, code in DTYPE_CODES.items()}


def read_index(bin_path: str) -> Dict[str, np.ndarray]:
    """``dtype``, ``sequence_lengths``, ``sequence_pointers``, ``document_indices``."""
    with open(index_path(bin_path), "rb") as handle:
        data = handle.read()
    if not data.startswith(MAGIC):
        raise ValueError(f"{index_path(bin_path)}: not a Megatron index (no MMIDIDX header)")
    at = len(MAGIC) + 8
    dtype = _DTYPES[data[at]]
    n_sequences, n_documents = struct.unpack_from("<QQ", data, at + 1)
    at += 1 + 16
    lengths = np.frombuffer(data, np.int32, n_sequences, at)
    at += 4 * n_sequences
    pointers = np.frombuffer(data, np.int64, n_sequences, at)
    at += 8 * n_sequences
    documents = np.frombuffer(data, np.int64, n_documents, at)
    return {"dtype": dtype, "sequence_lengths": lengths, "sequence_pointers": pointers,
            "document_indices": documents}


def read_documents(bin_path: str) -> Iterator[List[np.ndarray]]:
    """Each document as its sentences' token ids."""
    index = read_index(bin_path)
    tokens = np.memmap(bin_path, dtype=index["dtype"], mode="r") if index["sequence_lengths"].sum() else \
        np.zeros(0, index["dtype"])
    starts = index["sequence_pointers"] // index["dtype"].itemsize
    documents = index["document_indices"]
    for first, last in zip(documents[:-1], documents[1:]):
        yield [np.asarray(tokens[starts[i]:starts[i] + index["sequence_lengths"][i]]) for i in range(first, last)]


class MegatronReader(Reader):
    """A ``.bin``/``.idx`` pair's documents in batches of ``batch_size`` documents, as
    :class:`~bert_data.format.megatron.writer.MegatronWriter` takes them: ``tokens``,
    ``sentence_lengths``, ``document_sentences`` (the corpus, not instances: no options needed)."""

    def read_columns(self, path: str, batch_size: int = 1024) -> Iterator[Dict[str, np.ndarray]]:
        check_shard(path, self.verify_checksums)  # the .bin and its .idx
        index = read_index(path)
        documents = iter(read_documents(path))
        dtype = index["dtype"]
        while True:
            batch = [document for _, document in zip(range(batch_size), documents)]
            if not batch:
                return
            sentences = [sentence for document in batch for sentence in document]
            yield {"tokens": np.concatenate(sentences) if sentences else np.zeros(0, dtype),
                   "sentence_lengths": np.array([len(s) for s in sentences], np.int32),
                   "document_sentences": np.array([len(document) for document in batch], np.int64)}
