"""The steps of the numpy and PyTorch readers, as small generator stages (in the style of
webdataset's ``filters.py``): each takes an iterator of column batches (``{name: (n, ...)
numpy array}``) and yields new ones, so a reader is a chain of them written once here.

* :func:`decoded_chunks` -- the source: records of shard files, decoded in chunks (canonical
  feature names), optionally only the records a reader keeps;
* :func:`reader_share` -- which shards and records one of several readers (DataLoader workers,
  distributed ranks) takes;
* :func:`masked` -- load-time masks per batch, keyed by the batch number;
* :func:`postprocessed` -- casts, mask inversion, the output names (used by ``tf.data`` too);
* :func:`to_transformers` / :func:`formatted` -- Hugging Face ``transformers``'s model inputs
  (``format="transformers"``) instead of Google's layout;
* :func:`shuffled` -- a shuffle buffer;
* :func:`rebatched` / :func:`unbatched` -- batches of a fixed size, or single records.
"""

from __future__ import annotations

import functools
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Sequence

import numpy as np

from ..format.columns import IGNORE_INDEX
from ..format.dataset import decode_records

__all__ = ["DEFAULT_CHUNK", "FORMATS", "IGNORE_INDEX", "decoded_chunks", "reader_share", "masked", "postprocess",
           "output_names", "postprocessed", "check_format", "sequence_label_name", "masked_lm_labels",
           "to_transformers", "formatted", "PACKED_ATTENTION", "shuffled", "rebatched", "unbatched"]

# Records decoded together: big enough for numpy to pay off.
DEFAULT_CHUNK = 4096

# What readers hand out: the stored layout (Google's, Cerebras's with invert_input_mask), or the
# inputs of Hugging Face transformers' models.
FORMATS = ("google", "transformers")
# IGNORE_INDEX (format.columns, re-exported): the label of positions without a prediction,
# PyTorch's CrossEntropyLoss ignore_index, which transformers' models use.

Batch = Dict[str, np.ndarray]


def _rows(batch: Batch) -> int:
    return len(next(iter(batch.values())))


def _concatenated(batches: Sequence[Batch]) -> Batch:
    return {name: np.concatenate([batch[name] for batch in batches]) for name in batches[0]}


def decoded_chunks(files: Sequence[str], specs, chunk: int = DEFAULT_CHUNK, verify_crc: bool = True,
                   compressions: Optional[Dict[str, Optional[str]]] = None,
                   keep: Optional[Callable[[int], bool]] = None, verify_checksums: bool = True) -> Iterator[Batch]:
    """Decoded chunks of at most ``chunk`` records, in file order, never spanning two files, under
    canonical names (:func:`bert_data.format.dataset.decode_records`).  ``keep(i) -> bool``
    drops records (by running index over all files) before decoding.  ``compressions``: file ->
    None, "gzip" or "zlib" (default: uncompressed).  ``verify_checksums``: each file's bytes
    are checked against its manifest's SHA-256 when it is reached, before any of its records
    (:func:`bert_data.format.checksums.check_shard`: a damaged one raises ``ChecksumError``)."""
    from ..format.checksums import check_shard
    from ..format.dataset import read_instance_columns
    from ..format.output_formats import format_of_path
    from ..format.tfrecord import iter_records

    compressions = compressions or {}
    index = 0
    for path in files:
        check_shard(path, verify_checksums)
        if not format_of_path(path).framed_records:  # HDF5, Parquet, MDS: their readers give the columns
            for batch in read_instance_columns(path, specs, chunk, verify_checksums=False):  # (checked above)
                rows = np.arange(index, index + _rows(batch))
                index += len(rows)
                kept = rows if keep is None else np.array([i for i in rows if keep(i)], dtype=np.int64)
                if len(kept):
                    yield batch if len(kept) == len(rows) else {k: v[kept - rows[0]] for k, v in batch.items()}
            continue
        buffer: List[bytes] = []
        first = 0  # index within the file of buffer[0]
        position = 0
        for record in iter_records(path, verify_crc=verify_crc, compression=compressions.get(path)):
            if keep is None or keep(index):
                if not buffer:
                    first = position
                buffer.append(record)
                if len(buffer) >= chunk:
                    yield decode_records(buffer, specs, path, first if keep is None else None)
                    buffer = []
            index += 1
            position += 1
        if buffer:
            yield decode_records(buffer, specs, path, first if keep is None else None)


def reader_share(files: Sequence[str], reader: int, readers: int, split_by: str = "auto",
                 order: Optional[Sequence[int]] = None):
    """``(files, keep)`` for reader ``reader`` of ``readers``: its shards, and a record filter
    for :func:`decoded_chunks` (None: every record of its shards).  ``order`` permutes the shards
    first (every reader must use the same).  ``split_by="file"``: shards ``reader, reader +
    readers, ...``; ``"record"``: every shard, the records whose running index ``i`` has ``i %
    readers == reader``; ``"auto"``: by file when there are at least as many shards as readers."""
    files = list(files) if order is None else [files[i] for i in order]
    if split_by == "auto":
        split_by = "file" if len(files) >= readers else "record"
    if readers == 1:
        return files, None
    if split_by == "file":
        return files[reader::readers], None
    return files, (lambda i: i % readers == reader)


def masked(batches: Iterable[Batch], masker, key_prefix: Sequence[int] = ()) -> Iterator[Batch]:
    """Each batch through ``masker(batch, key)`` (load-time masking), with ``key = (*key_prefix,
    k)`` for the ``k``-th batch; batches pass unchanged when ``masker`` is None."""
    if masker is None:
        yield from batches
        return
    for number, batch in enumerate(batches):
        yield masker(batch, key=(*key_prefix, number))


def postprocess(batch, int32: bool, invert_input_mask: bool, rename: Callable[[str], str],
                cast: Callable = lambda value, dtype: value.astype(dtype)):
    """One batch as readers hand it out: the input mask inverted if asked (1 on padding), int64
    features cast to int32 with ``int32`` (else the int32 of load-time masks to int64), names
    through ``rename``.  ``cast(value, dtype_name)`` converts (numpy by default; the tf.data
    reader passes ``tf.cast``), so that numpy arrays and TensorFlow tensors get the same rules."""
    if invert_input_mask:
        batch = dict(batch, input_mask=1 - batch["input_mask"])
    source, target = ("int64", "int32") if int32 else ("int32", "int64")
    return {rename(name): cast(value, target) if value.dtype.name == source else value
            for name, value in batch.items()}


def output_names(info, canonical_names: bool) -> Callable[[str], str]:
    """How a reader names its features (for :func:`postprocess`): canonical, or as the dataset
    (``info``, a :class:`~bert_data.format.dataset.DatasetInfo`) stores them."""
    if canonical_names:
        return lambda name: name
    return functools.lru_cache(maxsize=None)(info.stored_name)  # called per feature and batch


def postprocessed(batches: Iterable[Batch], int32: bool, invert_input_mask: bool,
                  rename: Callable[[str], str]) -> Iterator[Batch]:
    """:func:`postprocess` over a stream of batches."""
    for batch in batches:
        yield postprocess(batch, int32, invert_input_mask, rename)


def check_format(format: str, info, masked_at_load: bool, int32: bool = False,
                 invert_input_mask: bool = False, packed_attention: str = "block_diagonal") -> None:
    """Refuse a reader's ``format=`` option (see :data:`FORMATS`) when it is unknown or cannot be
    honoured for the dataset ``info`` (a :class:`~bert_data.format.dataset.DatasetInfo`), and an
    unknown ``packed_attention``."""
    if format not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(map(repr, FORMATS))}, got {format!r}")
    if packed_attention not in PACKED_ATTENTION:
        raise ValueError(f"packed_attention must be one of {', '.join(map(repr, PACKED_ATTENTION))}, "
                         f"got {packed_attention!r}")
    if invert_input_mask and info.flags["packed"]:
        raise ValueError("invert_input_mask=True does not apply to packed rows: their input_mask holds the "
                         "instance index of each token (0 on padding)")
    if format != "transformers":
        return
    if int32 or invert_input_mask:
        # The models want int64 (CrossEntropyLoss refuses int32 targets) and 1 on tokens.
        option = "int32=True" if int32 else "invert_input_mask=True"
        raise ValueError(f"format='transformers' gives int64 ids, labels and masks with 1 on tokens, as the "
                         f"models take them: {option} does not apply")
    if not info.masked and not masked_at_load:
        raise ValueError("format='transformers' needs masked-LM labels: the records are unmasked "
                         "(--disable_masking), pass mask= to draw masks at load time")
    sequence_label_name(info)  # shards that disagree fail here, not at the first batch


def sequence_label_name(info) -> str:
    """What transformers calls the record's sentence-pair label: ``"sentence_order_label"``
    (``AlbertForPreTraining``) for data made with sentence-order prediction, else
    ``"next_sentence_label"`` (``BertForPreTraining``).  Both are stored as
    ``next_sentence_labels``; only the manifest tells them apart (no manifest: next sentence)."""
    orders = {manifest.sentence_order_prediction for manifest in info.manifests.values()}
    if len(orders) > 1:
        raise ValueError("the shards mix sentence-order and next-sentence labels (their manifests' "
                         "sentence_order_prediction differ)")
    return "sentence_order_label" if True in orders else "next_sentence_label"


def masked_lm_labels(input_ids: np.ndarray, positions: np.ndarray, ids: np.ndarray,
                     weights: np.ndarray) -> np.ndarray:
    """Google's ``masked_lm_*`` columns as one label per token (``(n, length)`` int64), as
    transformers' masked-LM losses take them: the original id at each predicted position,
    :data:`IGNORE_INDEX` elsewhere.  Only slots with weight > 0 are predictions; the padding
    slots (position 0, id 0, weight 0) must set nothing, or they would write label 0 on [CLS]
    (or over a real label at position 0)."""
    labels = np.full(np.shape(input_ids), IGNORE_INDEX, dtype=np.int64)
    rows, slots = np.nonzero(np.asarray(weights) > 0)
    labels[rows, np.asarray(positions)[rows, slots]] = np.asarray(ids)[rows, slots]
    return labels


PACKED_ATTENTION = ("block_diagonal", "cu_seqlens")


def to_transformers(batch, sequence_label: str = "next_sentence_label", labels: Callable = masked_lm_labels,
                    cast: Callable = lambda value, dtype: value.astype(dtype, copy=False),
                    packed_attention: str = "block_diagonal"):
    """A (masked) batch under canonical names as transformers' models take it: ``input_ids``
    (as stored, [MASK] included), ``attention_mask`` (``input_mask``), ``token_type_ids``
    (``segment_ids``; not for MLM-only data), ``labels`` (:func:`masked_lm_labels`) and
    ``sequence_label`` (``next_sentence_labels`` as ``(n,)``, see :func:`sequence_label_name`;
    not for MLM-only data), all int64.  ``labels`` and ``cast`` are numpy's by default; the
    tf.data reader passes TensorFlow ones (the same rules, as in :func:`postprocess`).

    Packed rows (:mod:`bert_data.pipeline.packing`) as packed training takes them: ``position_ids``
    restarting at 0 in each instance (as ``DataCollatorWithFlattening`` makes them), and
    ``packed_attention="block_diagonal"``: ``attention_mask`` ``(n, 1, L, L)`` bool, each token
    attending to its own instance only (any BERT of transformers takes it), or
    ``"cu_seqlens"`` (numpy only): no ``attention_mask`` but flash attention's ``cu_seq_lens_q``
    / ``cu_seq_lens_k`` (int32, over the batch's rows laid end to end) and ``max_length_q`` /
    ``max_length_k``.  The pair label is per instance, ``(n, k)`` with -100 (ignored by the
    loss) on unused slots, beside ``next_sentence_positions`` ``(n, k)``: where each instance's
    [CLS] is, for the pair head (transformers' pooler reads position 0 only)."""
    out = {"input_ids": cast(batch["input_ids"], "int64"), "attention_mask": cast(batch["input_mask"], "int64")}
    if "segment_ids" in batch:
        out["token_type_ids"] = cast(batch["segment_ids"], "int64")
    packed = "positions" in batch
    if packed:
        out["position_ids"] = cast(batch["positions"], "int64")
        instance = batch["input_mask"]
        if packed_attention == "cu_seqlens":
            from ..pipeline.packing import cu_seqlens

            del out["attention_mask"]
            boundaries = cu_seqlens(np.asarray(instance))
            longest = int(np.diff(boundaries).max(initial=0))
            out.update(cu_seq_lens_q=boundaries, cu_seq_lens_k=boundaries, max_length_q=longest,
                       max_length_k=longest)
        else:
            out["attention_mask"] = ((instance[:, :, None] == instance[:, None, :])
                                     & (instance[:, None, :] != 0))[:, None, :, :]
    out["labels"] = labels(batch["input_ids"], batch["masked_lm_positions"], batch["masked_lm_ids"],
                           batch["masked_lm_weights"])
    if "next_sentence_labels" in batch and packed:
        used = cast(batch["next_sentence_weights"] > 0, "int64")
        out[sequence_label] = cast(batch["next_sentence_labels"], "int64") * used + IGNORE_INDEX * (1 - used)
        out["next_sentence_positions"] = cast(batch["next_sentence_positions"], "int64")
    elif "next_sentence_labels" in batch:
        out[sequence_label] = cast(batch["next_sentence_labels"][:, 0], "int64")
    return out


def formatted(batches: Iterable[Batch], format: str, info, int32: bool, invert_input_mask: bool,
              canonical_names: bool, packed_attention: str = "block_diagonal") -> Iterator[Batch]:
    """The last step of the numpy and PyTorch readers: batches as ``format`` asks
    (:func:`check_format` first), Google's layout through :func:`postprocess`, or
    :func:`to_transformers`."""
    if format == "transformers":
        sequence_label = sequence_label_name(info)
        return (to_transformers(batch, sequence_label, packed_attention=packed_attention) for batch in batches)
    return postprocessed(batches, int32, invert_input_mask, output_names(info, canonical_names))


def shuffled(batches: Iterable[Batch], buffer_size: int, rng: np.random.Generator) -> Iterator[Batch]:
    """Records shuffled through a buffer of ``buffer_size`` (plus the batch that fills it): as
    each batch arrives, a random draw of the pool leaves and the rest stays."""
    buffer: List[Batch] = []
    for batch in batches:
        buffer.append(batch)
        pooled = sum(_rows(b) for b in buffer)
        if pooled >= buffer_size + _rows(batch):
            merged = _concatenated(buffer)
            permutation = rng.permutation(pooled)
            out, kept = permutation[:pooled - buffer_size], permutation[pooled - buffer_size:]
            yield {name: value[out] for name, value in merged.items()}
            buffer = [{name: value[kept] for name, value in merged.items()}]
    if buffer:
        merged = _concatenated(buffer)
        permutation = rng.permutation(_rows(merged))
        yield {name: value[permutation] for name, value in merged.items()}


def rebatched(batches: Iterable[Batch], batch_size: int, drop_remainder: bool = False) -> Iterator[Batch]:
    """Batches of exactly ``batch_size`` records, in order, across the incoming ones (the rows of
    one carry over to the next); the last, shorter one unless ``drop_remainder``."""
    pending: List[Batch] = []
    n_pending = 0
    for batch in batches:
        pending.append(batch)
        n_pending += _rows(batch)
        if n_pending < batch_size:
            continue
        merged = _concatenated(pending)
        full = (n_pending // batch_size) * batch_size
        for start in range(0, full, batch_size):
            yield {name: value[start:start + batch_size] for name, value in merged.items()}
        pending = [{name: value[full:] for name, value in merged.items()}] if full < n_pending else []
        n_pending -= full
    if n_pending and not drop_remainder:
        yield _concatenated(pending)


def unbatched(batches: Iterable[Batch]) -> Iterator[Batch]:
    """One ``{name: row}`` per record (views into the batch)."""
    for batch in batches:
        columns = list(batch.items())
        for i in range(_rows(batch)):
            yield {name: value[i] for name, value in columns}
