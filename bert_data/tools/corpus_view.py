"""``bert-data inspect`` and ``stats`` for a tokenized corpus (``--output_format megatron``):
documents shown sentence by sentence, and the corpus's counts (documents, sentences, tokens,
their lengths), from the ``.bin``/``.idx`` pairs through ``format.megatron``'s reader."""

from __future__ import annotations

import itertools
import os
from typing import Iterator, List, Optional

import numpy as np


def inspect_documents(shard: str, vocab=None, n: int = 5, start: int = 0) -> Iterator[str]:
    """Documents ``start .. start + n - 1`` of one ``.bin`` file, as text: a line a sentence
    (tokens through ``vocab``, else ids)."""
    from ..format.megatron import read_documents

    stop = start + n if n >= 0 else None
    for number, document in itertools.islice(enumerate(read_documents(shard)), start, stop):
        lines = [f"{os.path.basename(shard)} document {number}: {len(document)} sentences, "
                 f"{sum(len(s) for s in document)} tokens"]
        for sentence in document:
            shown = [vocab.tokens[i] if vocab is not None else str(i) for i in sentence.tolist()]
            lines.append("  " + " ".join(shown))
        yield "\n".join(lines)


def corpus_summary(name: str, files: List[str], manifest=None) -> str:
    """Counts of a corpus's shards: documents, sentences, tokens, and the spread of their lengths."""
    from ..format.megatron import read_index

    sentences, per_document = [], []
    for path in files:
        index = read_index(path)
        sentences.append(np.asarray(index["sequence_lengths"], dtype=np.int64))
        per_document.append(np.diff(index["document_indices"]))
    lengths = np.concatenate(sentences) if sentences else np.zeros(0, np.int64)
    counts = np.concatenate(per_document) if per_document else np.zeros(0, np.int64)

    def spread(values: np.ndarray) -> str:
        if not len(values):
            return "-"
        q = np.quantile(values, [0.1, 0.5, 0.9])
        return (f"mean {values.mean():.1f}  min {values.min()}  p10 {q[0]:.0f}  median {q[1]:.0f}  "
                f"p90 {q[2]:.0f}  max {values.max()}")

    lines = [f"{name}: tokenized corpus (Megatron .bin/.idx) in {len(files)} file(s): {len(counts):,} documents, "
             f"{len(lengths):,} sentences, {int(lengths.sum()):,} tokens",
             f"  tokens per sentence    {spread(lengths)}",
             f"  sentences per document {spread(counts)}"]
    if manifest is not None:
        lines.append(f"  vocabulary             {manifest.vocab_size:,} tokens; Megatron --data-path: "
                     + " ".join(os.path.splitext(path)[0] for path in files))
    return "\n".join(lines)


def is_corpus(path: str) -> bool:
    """A file of a corpus format (Megatron's), not of instances."""
    from ..format.output_formats import format_of_path

    return not format_of_path(path).instances


def vocabulary_for(shard: str, vocab_file: Optional[str]):
    """The vocabulary named, else the one the manifest beside ``shard`` records (or None)."""
    from ..format.dataset import dataset_info
    from ..tokenizers import load_vocabulary

    info = dataset_info([shard])
    source = info.tokenizer_source(vocab_file)
    return load_vocabulary(source) if source else None
