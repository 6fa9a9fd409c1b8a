"""``bert-data inspect``: records as readable text.

Each record shows segment A and B as WordPiece tokens, the next-sentence label, and every
masked-LM position as ``shown{original}``: ``[MASK]{cat}`` (replaced by [MASK]), ``cat{=}``
(kept as is, still predicted) or ``dog{cat}`` (replaced by a random token).  Without a
vocabulary the token ids are shown instead.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Iterator, List, Optional

import numpy as np

from .features import FEATURE_NAMES

__all__ = ["InspectedRecord", "inspect_records", "format_record", "record_json", "LEGEND"]

MASK, KEPT, RANDOM = "mask", "kept", "random"


@dataclass
class InspectedRecord:
    path: str
    index: int
    features: dict  # name -> 1-D numpy array
    tokens: List[str]  # the tokens shown to the model (with masks applied), unpadded
    length: int
    b_start: int  # position of B's first token
    masked: List[dict]  # {"position", "shown", "original", "kind"}
    next_sentence_label: int


def _resolve_shard(path: str) -> str:
    """A shard file; for a directory, its first shard."""
    from .loaders import resolve_shards

    if os.path.isdir(path):
        return resolve_shards(path)[0]
    return path


def inspect_records(shard: str, vocab_file: Optional[str] = None, n: int = 5,
                    start: int = 0) -> Iterator[InspectedRecord]:
    """Decode records ``start .. start+n-1`` of ``shard`` (a file, or a directory: its first
    shard).  The vocabulary is ``vocab_file``, else the manifest's if it exists, else none."""
    from .loaders import dataset_info
    from .tfrecord import iter_records
    from .example_codec import decode_examples
    from .tokenization import load_vocab

    shard = _resolve_shard(shard)
    info = dataset_info([shard])
    if vocab_file is None:
        vocab_file = info.vocab_file()
    vocab = load_vocab(vocab_file) if vocab_file else None
    records = list(itertools.islice(iter_records(shard), start, start + n if n >= 0 else None))
    if not records:
        return
    from .loaders import decode_chunk

    cols = decode_chunk(records, info.specs, shard, start)
    mask_id = vocab.mask_id if vocab else None
    for j in range(len(records)):
        feats = {name: cols[name][j] for name in FEATURE_NAMES}
        yield _inspect_one(shard, start + j, feats, vocab, mask_id)


def _inspect_one(path, index, f, vocab, mask_id) -> InspectedRecord:
    length = int(f["input_mask"].sum())
    ids = f["input_ids"][:length]
    seg = f["segment_ids"][:length]
    ones = np.flatnonzero(seg == 1)
    b_start = int(ones[0]) if ones.size else length
    tokens = vocab.convert_ids_to_tokens(ids) if vocab else [str(int(i)) for i in ids]
    masked = []
    for p, label, weight in zip(f["masked_lm_positions"], f["masked_lm_ids"], f["masked_lm_weights"]):
        if weight <= 0:
            continue
        p, label = int(p), int(label)
        shown_id = int(ids[p]) if 0 <= p < length else None
        if shown_id is None:
            kind = "invalid"
        elif mask_id is not None and shown_id == mask_id:
            kind = MASK
        elif shown_id == label:
            kind = KEPT
        else:
            kind = RANDOM
        name = (lambda i: vocab.tokens[i] if 0 <= i < vocab.size else f"<{i}>") if vocab else str
        masked.append({"position": p, "shown": name(shown_id) if shown_id is not None else None,
                       "original": name(label), "kind": kind, "shown_id": shown_id, "original_id": label})
    return InspectedRecord(path, index, f, tokens, length, b_start, masked,
                           int(f["next_sentence_labels"][0]))


def _display_tokens(rec: InspectedRecord) -> List[str]:
    shown = list(rec.tokens)
    for m in rec.masked:
        p = m["position"]
        if 0 <= p < len(shown):
            shown[p] = f"{shown[p]}{{=}}" if m["kind"] == KEPT else f"{shown[p]}{{{m['original']}}}"
    return shown


def format_record(rec: InspectedRecord) -> str:
    shown = _display_tokens(rec)
    msl = len(rec.features["input_ids"])
    nsp = rec.next_sentence_label
    kinds = [m["kind"] for m in rec.masked]
    head = (f"{os.path.basename(rec.path)} record {rec.index}: {rec.length}/{msl} tokens, "
            f"next_sentence_label={nsp} ({'B is a random sentence' if nsp == 1 else 'B follows A'}), "
            f"{len(rec.masked)} predictions ({kinds.count(MASK)} [MASK], {kinds.count(KEPT)} kept, "
            f"{kinds.count(RANDOM)} random)")
    a = " ".join(shown[:rec.b_start])
    b = " ".join(shown[rec.b_start:])
    return f"{head}\n  A: {a}\n  B: {b}"


def record_json(rec: InspectedRecord) -> dict:
    f = rec.features
    return {
        "file": rec.path,
        "record": rec.index,
        "length": rec.length,
        "tokens": rec.tokens,
        "segment_a": rec.tokens[:rec.b_start],
        "segment_b": rec.tokens[rec.b_start:],
        "next_sentence_label": rec.next_sentence_label,
        "masked": [{k: m[k] for k in ("position", "shown", "original", "kind")} for m in rec.masked],
        "features": {name: f[name].tolist() for name in FEATURE_NAMES},
    }


LEGEND = ("legend: [MASK]{x} = masked, original x; t{=} = kept (still predicted); "
          "r{x} = replaced by random token r, original x")
