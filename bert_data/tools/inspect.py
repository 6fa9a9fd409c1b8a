"""``bert-data inspect``: records as readable text.

Each record shows segment A and B (NSP layouts) or its tokens (MLM-only layouts: ``[CLS] tokens
[SEP]``, with any document separators inside) as the tokenizer's pieces, in its own form
(``##s``, ``▁word``, ``Ġword``), the next-sentence label when
there is one, and every masked-LM position as ``shown{original}``: ``[MASK]{cat}`` (replaced by
[MASK]), ``cat{=}`` (kept as is, still predicted) or ``dog{cat}`` (replaced by a random token).
A packed row (``--pack_sequences``) is shown instance by instance, each as above.
Unmasked records (``--disable_masking``) show their tokens as stored, or, with ``mask_seed``, a
preview of load-time masks (:func:`bert_data.dynamic_masking`).  Layout and compression
come from the manifest, else the first record and first bytes.  Without a vocabulary the token
ids are shown instead, and a masked position is only told kept (its id unchanged) or changed:
whether it became [MASK] or a random token needs the vocabulary's [MASK] id, which is not guessed.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Iterator, List, Optional

import numpy as np

__all__ = ["InspectedRecord", "inspect_records", "format_record", "record_json", "LEGEND", "LEGEND_WITHOUT_VOCAB"]

MASK, KEPT, RANDOM = "mask", "kept", "random"
# Without a vocabulary the [MASK] id is unknown: a changed position is [MASK] or a random token,
# and inspect does not guess which.
CHANGED = "mask_or_random"


@dataclass
class InspectedRecord:
    path: str
    index: int
    features: dict  # name (as the dataset stores it) -> 1-D numpy array
    tokens: List[str]  # the tokens shown to the model (with masks applied), unpadded
    length: int
    b_start: int  # position of B's first token (``length`` when there are no segments)
    masked: List[dict]  # {"position", "shown", "original", "kind"}
    next_sentence_label: Optional[int]  # None for MLM-only layouts
    has_segments: bool = True
    has_masks: bool = True  # False: unmasked records (no masked_lm features, no preview)
    preview: bool = False  # masks drawn here by load-time masking (not stored in the record)
    sentence_order: bool = False  # the label is ALBERT's sentence order (1: A and B swapped)
    # A packed row (--pack_sequences): its instances, each as an unpacked record (None: not packed).
    instances: Optional[List["InspectedRecord"]] = None
    row_start: int = 0  # an instance of a packed row: where in the row it starts
    origin: Optional[object] = None  # --record_provenance: where it came from (tools.provenance.Origin)


def _resolve_shard(path: str) -> str:
    """A shard file; for a directory, its first shard."""
    from ..format.dataset import resolve_shards

    if os.path.isdir(path):
        return resolve_shards(path)[0]
    return path


def inspect_records(shard: str, vocab_file: Optional[str] = None, n: int = 5,
                    start: int = 0, compression="auto", mask_seed: Optional[int] = None) -> Iterator[InspectedRecord]:
    """Decode records ``start .. start+n-1`` of ``shard`` (a file, or a directory: its first
    shard).  The vocabulary is ``vocab_file``, else the manifest's if it exists, else none.
    ``mask_seed``: for unmasked records, preview load-time masks drawn with this seed (the
    manifest's masking options; the records shown form one batch, key ``(0,)``)."""
    from ..format.dataset import dataset_info, decode_records, read_instance_columns
    from ..format.output_formats import format_of_path
    from ..format.tfrecord import iter_records
    from ..load.dynamic_masks import dynamic_masking
    from ..tokenizers import load_vocabulary
    from .provenance import origin_of

    shard = _resolve_shard(shard)
    info = dataset_info([shard], compression=compression)
    source = info.tokenizer_source(vocab_file)
    vocab = load_vocabulary(source) if source else None
    stop = start + n if n >= 0 else None
    if not format_of_path(shard).framed_records:  # HDF5, Parquet, MDS: through their readers
        batches = list(read_instance_columns(shard, info.specs))
        cols = {name: np.concatenate([batch[name] for batch in batches])[start:stop] for name in batches[0]} \
            if batches else {"input_ids": np.zeros((0, 0))}
        count = len(cols["input_ids"])
    else:
        records = list(itertools.islice(iter_records(shard, compression=info.compression(shard)), start, stop))
        count = len(records)
        cols = decode_records(records, info.specs, shard, start) if records else {}
    if not count:
        return
    preview = mask_seed is not None and not info.masked
    view = cols
    if preview:
        if vocab is None:
            raise ValueError("previewing load-time masks needs the vocabulary: pass --vocab_file")
        masker = dynamic_masking(vocab_file=vocab_file, seed=mask_seed, dataset=info)
        view = masker(view, key=(0,))
    mask_id = vocab.mask_id if vocab else None
    sentence_order = info.manifest is not None and info.manifest.sentence_order_prediction
    packed = info.flags["packed"]
    for j in range(count):
        stored = {info.stored_name(name): cols[name][j] for name in cols}
        feats = {name: view[name][j] for name in view}
        if packed:
            record = _inspect_packed(shard, start + j, stored, view, j, vocab, mask_id, preview, sentence_order)
        else:
            record = _inspect_one(shard, start + j, stored, feats, vocab, mask_id, preview)
        record.sentence_order = sentence_order
        record.origin = origin_of(stored, info.manifest)
        yield record


def _inspect_packed(path, index, stored, view, j, vocab, mask_id, preview, sentence_order) -> InspectedRecord:
    """A packed row: the row as stored, and each of its instances as an unpacked record."""
    from .packed_checks import instance_rows

    columns, _, numbers = instance_rows(view, np.array([j]))
    mask = view["input_mask"][j]
    instances = []
    for t in range(len(numbers)):
        feats = {name: value[t] for name, value in columns.items()}
        instance = _inspect_one(path, int(numbers[t]), feats, feats, vocab, mask_id, preview)
        instance.sentence_order = sentence_order
        instance.row_start = int(np.argmax(mask == numbers[t]))
        instances.append(instance)
    length = int((mask != 0).sum())
    ids = view["input_ids"][j][:length]
    tokens = vocab.convert_ids_to_tokens(ids) if vocab else [str(int(i)) for i in ids]
    return InspectedRecord(path, index, stored, tokens, length, length, [m for i in instances for m in i.masked],
                           None, False, "masked_lm_positions" in view, preview, instances=instances)


def _inspect_one(path, index, stored, f, vocab, mask_id, preview=False) -> InspectedRecord:
    length = int(f["input_mask"].sum())
    ids = f["input_ids"][:length]
    has_segments = "segment_ids" in f
    if has_segments:
        ones = np.flatnonzero(f["segment_ids"][:length] == 1)
        b_start = int(ones[0]) if ones.size else length
    else:
        b_start = length
    tokens = vocab.convert_ids_to_tokens(ids) if vocab else [str(int(i)) for i in ids]
    masked = []
    has_masks = "masked_lm_positions" in f
    if has_masks:
        for p, label, weight in zip(f["masked_lm_positions"], f["masked_lm_ids"], f["masked_lm_weights"]):
            if weight <= 0:
                continue
            p, label = int(p), int(label)
            shown_id = int(ids[p]) if 0 <= p < length else None
            if shown_id is None:
                kind = "invalid"
            elif shown_id == label:
                kind = KEPT
            elif mask_id is None:
                kind = CHANGED
            elif shown_id == mask_id:
                kind = MASK
            else:
                kind = RANDOM
            name = (lambda i: vocab.tokens[i] if 0 <= i < vocab.size else f"<{i}>") if vocab else str
            masked.append({"position": p, "shown": name(shown_id) if shown_id is not None else None,
                           "original": name(label), "kind": kind, "shown_id": shown_id, "original_id": label})
    nsp = int(f["next_sentence_labels"][0]) if "next_sentence_labels" in f else None
    return InspectedRecord(path, index, stored, tokens, length, b_start, masked, nsp, has_segments, has_masks,
                           preview)


def _display_tokens(rec: InspectedRecord) -> List[str]:
    shown = list(rec.tokens)
    for m in rec.masked:
        p = m["position"]
        if 0 <= p < len(shown):
            shown[p] = f"{shown[p]}{{=}}" if m["kind"] == KEPT else f"{shown[p]}{{{m['original']}}}"
    return shown


def format_record(rec: InspectedRecord) -> str:
    if rec.instances is not None:
        msl = len(next(iter(rec.features.values())))
        head = (f"{os.path.basename(rec.path)} record {rec.index}: packed row of {len(rec.instances)} instance(s), "
                f"{rec.length}/{msl} tokens")
        parts = [head]
        for instance in rec.instances:
            text = format_record(instance).split("\n")
            first = text[0].split(": ", 1)[1]  # without the file and record number
            parts.append(f"  instance {instance.index} (from position {instance.row_start}): {first}")
            parts += ["  " + line for line in text[1:]]
        return "\n".join(parts)
    shown = _display_tokens(rec)
    msl = len(next(iter(rec.features.values())))
    kinds = [m["kind"] for m in rec.masked]
    parts = [f"{os.path.basename(rec.path)} record {rec.index}: {rec.length}/{msl} tokens"]
    nsp = rec.next_sentence_label
    if nsp is not None:
        if rec.sentence_order:
            meaning = "sentence order: A and B swapped" if nsp == 1 else "sentence order: B follows A"
        else:
            meaning = "B is a random sentence" if nsp == 1 else "B follows A"
        parts.append(f"next_sentence_label={nsp} ({meaning})")
    if rec.has_masks:
        preview = ", load-time masks previewed" if rec.preview else ""
        if CHANGED in kinds:
            split = (f"{kinds.count(KEPT)} kept, {kinds.count(CHANGED)} [MASK] or random: no vocabulary to tell "
                     "them apart")
        else:
            split = f"{kinds.count(MASK)} [MASK], {kinds.count(KEPT)} kept, {kinds.count(RANDOM)} random"
        parts.append(f"{len(rec.masked)} predictions ({split}{preview})")
    else:
        parts.append("unmasked (masks are drawn at load time)")
    head = ", ".join(parts)
    if rec.origin is not None:
        head += f"\n  from: {rec.origin.describe()}"
    if not rec.has_segments:
        return f"{head}\n  tokens: {' '.join(shown)}"
    a = " ".join(shown[:rec.b_start])
    b = " ".join(shown[rec.b_start:])
    return f"{head}\n  A: {a}\n  B: {b}"


def record_json(rec: InspectedRecord) -> dict:
    if rec.instances is not None:
        instances = []
        for instance in rec.instances:
            data = record_json(instance)
            data.pop("features")
            data.pop("file")
            data["instance"] = data.pop("record")
            data["row_start"] = instance.row_start
            instances.append(data)
        return {"file": rec.path, "record": rec.index, "length": rec.length, "instances": instances,
                "features": {name: value.tolist() for name, value in rec.features.items()}}
    out = {
        "file": rec.path,
        "record": rec.index,
        "length": rec.length,
        "tokens": rec.tokens,
    }
    if rec.has_segments:
        out["segment_a"] = rec.tokens[:rec.b_start]
        out["segment_b"] = rec.tokens[rec.b_start:]
    out["next_sentence_label"] = rec.next_sentence_label
    out["masked"] = [{k: m[k] for k in ("position", "shown", "original", "kind")} for m in rec.masked]
    if rec.preview:
        out["masks_previewed"] = True
    if rec.origin is not None:
        out["source_index"], out["document_index"] = rec.origin.source_index, rec.origin.document_index
        out["source"] = rec.origin.source
    out["features"] = {name: value.tolist() for name, value in rec.features.items()}
    return out


LEGEND = ("legend: [MASK]{x} = masked, original x; t{=} = kept (still predicted); "
          "r{x} = replaced by random token r, original x")
LEGEND_WITHOUT_VOCAB = ("legend: t{=} = kept (still predicted); s{x} = changed to s ([MASK] or a random token: "
                        "no vocabulary to tell), original x")
