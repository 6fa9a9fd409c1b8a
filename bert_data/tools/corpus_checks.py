"""``bert-data verify`` for a tokenized corpus (``--output_format megatron``): the checks of one
``.bin``/``.idx`` pair, as Megatron's ``IndexedDataset`` relies on them.

* the index: its header (``MMIDIDX``, version 1, a known dtype), its sizes;
* the sequences: offsets that follow each other exactly, lengths that fill ``.bin`` to its
  last byte, no empty sentence;
* the documents: the index starts at 0, never goes back, ends at the last sequence, no empty
  document;
* the tokens: inside the vocabulary (``vocab_size``), read in blocks (bounded memory).
"""

from __future__ import annotations

import os
import struct
from typing import List, Optional, Tuple

import numpy as np

BLOCK = 1 << 22  # tokens read at a time


def check_corpus_file(path: str, vocab_size: Optional[int]) -> Tuple[int, List[Tuple[Optional[int], str]]]:
    """``(sequences, problems)`` of ``PREFIX.bin`` (and its ``.idx``); a problem is
    ``(sequence or None, message)``."""
    from ..format.megatron import read_index

    try:
        index = read_index(path)
    except (OSError, ValueError, KeyError, struct.error) as error:
        return 0, [(None, f"index unreadable: {type(error).__name__}: {error}")]
    lengths, pointers, documents = index["sequence_lengths"], index["sequence_pointers"], index["document_indices"]
    itemsize = index["dtype"].itemsize
    problems: List[Tuple[Optional[int], str]] = []
    n = len(lengths)
    expected = np.concatenate([[0], np.cumsum(lengths.astype(np.int64) * itemsize)])
    if not np.array_equal(pointers, expected[:-1]):
        first = int(np.flatnonzero(pointers != expected[:-1])[0])
        problems.append((first, f"sequence offset {int(pointers[first])}, the lengths before it say {int(expected[first])}"))
    size = os.path.getsize(path)
    if size != expected[-1]:
        problems.append((None, f".bin holds {size} bytes, the index's sequences {int(expected[-1])}"))
    empty = np.flatnonzero(lengths <= 0)
    if len(empty):
        problems.append((int(empty[0]), f"{len(empty)} empty sequence(s)"))
    if not len(documents) or documents[0] != 0 or documents[-1] != n or np.any(np.diff(documents) < 0):
        problems.append((None, f"document index {documents[:3].tolist()}...{documents[-2:].tolist()} does not run "
                               f"from 0 up to the {n} sequences"))
    elif np.any(np.diff(documents) == 0):
        problems.append((None, f"{int(np.sum(np.diff(documents) == 0))} empty document(s)"))
    if vocab_size and size == expected[-1] and size:
        tokens = np.memmap(path, dtype=index["dtype"], mode="r")
        ends = np.cumsum(lengths.astype(np.int64))
        for start in range(0, len(tokens), BLOCK):
            block = np.asarray(tokens[start:start + BLOCK])
            bad = np.flatnonzero(block.astype(np.int64) >= vocab_size)
            if len(bad):
                sequence = int(np.searchsorted(ends, start + bad[0], side="right"))
                problems.append((sequence, f"token id {int(block[bad[0]])} outside the vocabulary ({vocab_size})"))
                break
    return n, problems
