"""Writes one Megatron indexed dataset (``PREFIX.bin`` and ``PREFIX.idx``).

``.bin``: the token ids of every sequence one after the other, in the dataset's dtype (uint16
when the vocabulary has fewer than 65,500 entries, else int32: Megatron's ``optimal_dtype``).

``.idx`` (little-endian): the magic ``MMIDIDX\\x00\\x00``, uint64 version 1, uint8 dtype code
(Megatron's ``DType``: uint16 8, int32 4), uint64 sequence count, uint64 document count (the
length of the document index), int32 length of each sequence, int64 byte offset of each
sequence in ``.bin``, int64 document index: 0, then the number of sequences after each
document.

Both are written under temporary names and renamed when complete (``.idx`` last).

The generator writes a run's shards with :class:`IndexedWriter`, document after document as the
corpus is read; :class:`MegatronWriter` is the format's writer of the registry, whose batches
are documents (what :class:`~bert_data.format.megatron.reader.MegatronReader` gives back).
"""

from __future__ import annotations

import os
import struct
from typing import Dict, Iterable, List

import numpy as np

from ..output_formats import FORMATS, MEGATRON, Writer

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
DTYPE_CODES = {np.dtype(np.uint16): 8, np.dtype(np.int32): 4, np.dtype(np.int64): 5, np.dtype(np.uint8): 1,
               np.dtype(np.int8): 2, np.dtype(np.int16): 3}
TEMPORARY = ".tmp"


def token_dtype(vocab_size: int) -> np.dtype:
    """Megatron's ``DType.optimal_dtype``: uint16 below 65,500 tokens, else int32."""
    return np.dtype(np.uint16) if vocab_size < 65500 else np.dtype(np.int32)


def index_path(bin_path: str) -> str:
    """``PREFIX.idx`` beside ``PREFIX.bin`` (the suffixes the registry declares)."""
    declared = FORMATS[MEGATRON]
    return bin_path[: -len(declared.suffix)] + declared.companions[0]


class IndexedWriter:
    """Documents appended one by one (each a run of tokens cut into sentences)."""

    def __init__(self, bin_path: str, dtype: np.dtype):
        self.bin_path, self.dtype = bin_path, np.dtype(dtype)
        self.handle = open(bin_path + TEMPORARY, "wb")
        self.lengths: List[np.ndarray] = []
        self.document_ends: List[int] = [0]
        self.n_sequences = 0

    def add_document(self, tokens: np.ndarray, sentence_lengths: np.ndarray) -> None:
        self.handle.write(np.asarray(tokens, dtype=self.dtype).tobytes())
        self.lengths.append(np.asarray(sentence_lengths, dtype=np.int32))
        self.n_sequences += len(sentence_lengths)
        self.document_ends.append(self.n_sequences)

    def finish(self, rename: bool = True) -> None:
        self.handle.close()
        lengths = np.concatenate(self.lengths) if self.lengths else np.zeros(0, np.int32)
        pointers = np.concatenate([[0], np.cumsum(lengths.astype(np.int64) * self.dtype.itemsize)[:-1]]) \
            if len(lengths) else np.zeros(0, np.int64)
        idx = index_path(self.bin_path)
        with open(idx + TEMPORARY, "wb") as out:
            out.write(MAGIC + struct.pack("<Q", VERSION) + struct.pack("<B", DTYPE_CODES[self.dtype]))
            out.write(struct.pack("<Q", len(lengths)) + struct.pack("<Q", len(self.document_ends)))
            out.write(lengths.tobytes() + pointers.astype(np.int64).tobytes())
            out.write(np.asarray(self.document_ends, dtype=np.int64).tobytes())
        if rename:
            os.replace(self.bin_path + TEMPORARY, self.bin_path)
            os.replace(idx + TEMPORARY, idx)

    def remove(self) -> None:
        self.handle.close()
        for path in (self.bin_path, index_path(self.bin_path)):
            try:
                os.remove(path + TEMPORARY)
            except FileNotFoundError:
                pass


class MegatronWriter(Writer):
    """Shards of the tokenized corpus.  A batch is a run of documents: ``tokens`` (every
    sentence's, one after the other), ``sentence_lengths`` and ``document_sentences`` (the
    sentences of each document); the token dtype is the batches' (uint16 when there are none)."""

    def write_shard(self, batches: Iterable[Dict[str, np.ndarray]], path: str, name: str) -> dict:
        """``path`` ends in ``.bin``; its ``.idx`` is written beside it."""
        writer, n = None, 0
        try:
            for batch in batches:
                if writer is None:
                    writer = IndexedWriter(path, batch["tokens"].dtype)
                tokens_at = sentences_at = 0
                for count in np.asarray(batch["document_sentences"]).tolist():
                    lengths = batch["sentence_lengths"][sentences_at:sentences_at + count]
                    size = int(np.sum(lengths))
                    writer.add_document(batch["tokens"][tokens_at:tokens_at + size], lengths)
                    tokens_at, sentences_at = tokens_at + size, sentences_at + count
                n += len(batch["sentence_lengths"])
            writer = writer or IndexedWriter(path, np.uint16)
            writer.finish()
        except BaseException:
            if writer is not None:
                writer.remove()
            raise
        return {"path": name, "samples": n}
