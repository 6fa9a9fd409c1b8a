"""``--output_format megatron``: the tokenized corpus itself, from the tokenized slices, in the
listed document order (Megatron pairs and masks at train time: no unit is paired or encoded).

Each split's documents are cut into ``--num_output_files`` runs of neighbouring documents of
about equal tokens (or as many as ``--records_per_file`` sentences or ``--megabytes_per_file``
of tokens make), each run one ``.bin``/``.idx`` pair (``format.megatron``): every sentence a
sequence, every document a range of sequences, as Megatron's ``preprocess_data.py
--split-sentences`` writes them.  A document read in parts is joined again; a skipped document
is left out.  The tokenized slices are read twice: their document tables to plan the shards,
then their tokens in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Tuple

import numpy as np

from ..format.megatron import IndexedWriter, token_dtype
from ..format.dataset_layout import SPLIT_OF_CODE
from ..pipeline.tokens import DOC_POSITION, DOC_REPLACED, SENTENCE_END, SENTENCE_START, TOKEN_END, TOKEN_START
from .planning import Plan
from .run_files import shard_path, slice_paths
from .scratch import load_array, load_arrays
from .specs import OutputSpec


@dataclass
class CorpusSplit:
    """What the manifest reports of one split's corpus shards."""

    n_docs: int = 0
    n_sequences: int = 0
    n_tokens: int = 0
    invalid_utf8_replaced: int = 0
    sequences_per_shard: List[int] = field(default_factory=list)


@dataclass
class _Document:
    split: str
    parts: List[Tuple[int, np.ndarray]]  # (slice, row of its document table), in order
    n_tokens: int = 0
    n_sentences: int = 0
    shard: int = 0  # of its split, once planned


def _documents(plan: Plan, work_dir: str) -> List[_Document]:
    """Every kept document in listed order, with its rows in the slices that hold it."""
    documents: List[_Document] = []
    paths = [slice_paths(work_dir, piece.index)["docs"] for piece in plan.slices]
    last_position = -1
    for first in range(0, len(paths), 256):  # a batch of tables at a time: bounded memory
        for number, rows in enumerate(load_arrays(paths[first:first + 256]), first):
            rows = np.asarray(rows)
            if plan.removed is not None and len(plan.removed):  # --dedup, --decontaminate
                rows = rows[~np.isin(rows[:, DOC_POSITION], plan.removed)]
            for row in rows:
                position = int(row[DOC_POSITION])
                if position != last_position:  # a later part of a document joins its first
                    split = SPLIT_OF_CODE[int(plan.corpus.doc_splits[position])]
                    documents.append(_Document(split, []))
                    last_position = position
                document = documents[-1]
                document.parts.append((number, row))
                document.n_tokens += int(row[TOKEN_END] - row[TOKEN_START])
                document.n_sentences += int(row[SENTENCE_END] - row[SENTENCE_START])
    return documents


def shard_count(output: OutputSpec, n_sentences: int, n_tokens: int, itemsize: int) -> int:
    if output.records_per_file is not None:
        return max(1, round(n_sentences / output.records_per_file))
    if output.megabytes_per_file is not None:
        return max(1, round(n_tokens * itemsize / (output.megabytes_per_file * 1e6)))
    return output.num_output_files


def write_corpus(plan: Plan, output: OutputSpec, work_dir: str, rename: bool = True) -> Dict[str, CorpusSplit]:
    """Write every split's ``.bin``/``.idx`` pairs (under temporary names unless ``rename``:
    staged for an upload); returns what each split holds."""
    dtype = token_dtype(plan.vocab.size)
    documents = _documents(plan, work_dir)
    totals = {split: CorpusSplit() for split in output.split_dirs()}
    writers: Dict[str, List[IndexedWriter]] = {}
    for split, directory in output.split_dirs().items():
        mine = [document for document in documents if document.split == split]
        tokens = np.array([document.n_tokens for document in mine], dtype=np.int64)
        count = shard_count(output, sum(d.n_sentences for d in mine), int(tokens.sum()), dtype.itemsize)
        # Neighbouring documents, about equal tokens a shard: by where each document's middle falls.
        middles = np.cumsum(tokens) - tokens / 2
        shards = np.minimum(count - 1, (middles * count // max(1, tokens.sum())).astype(np.int64)).tolist()
        for document, shard in zip(mine, shards):
            document.shard = shard
        writers[split] = [IndexedWriter(shard_path(directory, output, shard), dtype) for shard in range(count)]
        totals[split].sequences_per_shard = [0] * count
    try:
        by_slice: Dict[int, List[Tuple[_Document, int]]] = {}
        for document in documents:
            for part, (number, _) in enumerate(document.parts):
                by_slice.setdefault(number, []).append((document, part))
        pending: Dict[int, List[np.ndarray]] = {}
        for number in sorted(by_slice):
            paths = slice_paths(work_dir, plan.slices[number].index)
            tokens, lengths = load_array(paths["tokens"]), load_array(paths["sentences"])
            for document, part in by_slice[number]:
                row = document.parts[part][1]
                key = id(document)
                pending.setdefault(key, []).extend([tokens[row[TOKEN_START]:row[TOKEN_END]],
                                                    lengths[row[SENTENCE_START]:row[SENTENCE_END]]])
                if part == len(document.parts) - 1:
                    pieces = pending.pop(key)
                    shard, split = document.shard, totals[document.split]
                    doc_tokens, doc_lengths = np.concatenate(pieces[0::2]), np.concatenate(pieces[1::2])
                    writers[document.split][shard].add_document(doc_tokens, doc_lengths)
                    split.n_docs += 1
                    split.n_sequences += len(doc_lengths)
                    split.n_tokens += len(doc_tokens)
                    split.invalid_utf8_replaced += sum(int(r[DOC_REPLACED]) for _, r in document.parts)
                    split.sequences_per_shard[shard] += len(doc_lengths)
        for split_writers in writers.values():
            for writer in split_writers:
                writer.finish(rename)
    except BaseException:
        for split_writers in writers.values():
            for writer in split_writers:
                writer.remove()
        raise
    return totals


def record_totals(totals, splits: Dict[str, CorpusSplit]) -> None:
    """Into the run's totals (``runner.RunTotals``, for the manifests): a sentence is a record."""
    for split, written in splits.items():
        counts = totals.splits[split]
        counts.n_docs, counts.n_examples, counts.n_sentences = written.n_docs, written.n_sequences, written.n_sequences
        counts.n_tokens, counts.invalid_utf8_replaced = written.n_tokens, written.invalid_utf8_replaced
        totals.shard_counts[split] = len(written.sequences_per_shard)  # in place: ShardCounts holds this dict
        totals.records_per_shard.update({f"{split}/{i}": n for i, n in enumerate(written.sequences_per_shard)})
