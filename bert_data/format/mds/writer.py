"""Writes MDS shards as ``streaming``'s ``MDSWriter`` lays them out, one per output shard, and
the split's ``index.json`` that ``StreamingDataset(local=SPLIT_DIR)`` reads.

A sample is one instance in ``transformers``' names (the Parquet rows, less ``attention_mask``,
which a padding collator makes): ``input_ids`` (``ndarray:int32``, unpadded, masked as the run
masks; with ``--disable_masking`` the plain tokens, for masking at load time as ModernBERT
trains), ``token_type_ids`` (``ndarray:uint8``, pairs), ``labels`` (``ndarray:int32``, -100 but
at masked positions) and ``next_sentence_label`` / ``sentence_order_label`` (``int32``); with
``--record_provenance``, ``source_index`` and ``document_index`` (``int64``); with
``--store_word_starts``, ``word_starts`` (``ndarray:uint8``, 1 where a token starts a word).

The shard file (MDS version 2): uint32 sample count, uint32 offsets of each sample and of the
end (n + 1, from the file's start), the writer's configuration as JSON, then the samples; a
sample is the uint32 byte sizes of its variable-size columns, then its columns' bytes, columns
in name order.  With ``--compression zstd`` or ``gzip`` the whole file is compressed
(``NAME-K.mds.zstd``, ``.mds.gz``), and ``index.json`` records both the raw and the
compressed file, as ``MDSWriter`` does, each with its SHA-256 (``MDSWriter(hashes=["sha256"])``),
which ``StreamingDataset(..., validate_hash="sha256")`` checks as it fetches a shard from its
remote.  Offsets are 32-bit: a shard holds at most 4 GiB.

Packed rows (``--pack_sequences``): a sample is a pack in ``packed_rows.packed_to_rows``' model, the
Parquet packed rows' columns: ``input_ids``, ``token_type_ids``, ``labels`` of all its instances
one after the other, ``position_ids`` (``ndarray:int32``, from 0 at each instance), and for
pairs the pair label and ``next_sentence_positions`` (``ndarray:int32``, one an instance).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import tempfile
from typing import Dict, Iterable, List, Sequence

import numpy as np

from ..checksums import ALGORITHM, file_digest
from ..columns import pair_label_name, to_rows
from ..layout import PROVENANCE_FEATURE_NAMES, WORD_STARTS
from ..output_formats import MDS_INDEX, Writer
from ..packed_rows import packed_to_rows

COMPRESSION_EXTENSIONS = {"zstd": "zstd", "gzip": "gz"}  # ours -> streaming's compression name
_SHAPE_BYTE = {np.dtype(np.uint8): 0, np.dtype(np.uint16): 1, np.dtype(np.uint32): 2}
_VALUE_TYPES = {"input_ids": np.int32, "token_type_ids": np.uint8, "labels": np.int32, "position_ids": np.int32,
                WORD_STARTS: np.uint8}
_ENCODINGS = {"input_ids": "ndarray:int32", "token_type_ids": "ndarray:uint8", "labels": "ndarray:int32",
              "position_ids": "ndarray:int32", WORD_STARTS: "ndarray:uint8"}
_SCALAR_SIZES = {"int32": 4, "int64": 8}
_INSTANCE_COLUMNS = ("next_sentence_positions",)  # packed rows: one value an instance, with the pair label


def column_encodings(options) -> Dict[str, str]:
    widths = options.widths
    columns = {"input_ids": _ENCODINGS["input_ids"]}
    if "segment_ids" in widths:
        columns["token_type_ids"] = _ENCODINGS["token_type_ids"]
    if "masked_lm_positions" in widths:
        columns["labels"] = _ENCODINGS["labels"]
    if options.packed:
        columns["position_ids"] = _ENCODINGS["position_ids"]
    if "next_sentence_labels" in widths:
        if options.packed:
            columns[pair_label_name(options.sentence_order)] = "ndarray:int32"
            columns["next_sentence_positions"] = "ndarray:int32"
        else:
            columns[pair_label_name(options.sentence_order)] = "int32"
    for name in PROVENANCE_FEATURE_NAMES:  # --record_provenance
        if name in widths:
            columns[name] = "int64"
    if WORD_STARTS in widths:  # --store_word_starts
        columns[WORD_STARTS] = _ENCODINGS[WORD_STARTS]
    return dict(sorted(columns.items()))


def shard_config(options) -> dict:
    """What ``MDSWriter.get_config`` says of its shards (in each shard file and index entry)."""
    encodings = column_encodings(options)
    return {"column_encodings": list(encodings.values()), "column_names": list(encodings),
            "column_sizes": [None if encoding.startswith("ndarray") else _SCALAR_SIZES[encoding]
                             for encoding in encodings.values()],
            "compression": COMPRESSION_EXTENSIONS.get(options.compression) if options.compression else None,
            "format": "mds", "hashes": [ALGORITHM], "size_limit": None, "version": 2}


def _array_bytes(values: np.ndarray) -> bytes:
    """streaming's ``ndarray:<dtype>`` with a dynamic shape: a byte (ndim << 2 | shape type),
    the shape in the smallest unsigned type, the values."""
    length = len(values)
    shape_type = np.uint8 if length < 1 << 8 else np.uint16 if length < 1 << 16 else np.uint32
    return bytes([(1 << 2) | _SHAPE_BYTE[np.dtype(shape_type)]]) + np.array([length], shape_type).tobytes() + \
        values.tobytes()


def encode_samples(batch, options) -> List[bytes]:
    names = list(column_encodings(options))
    packed = options.packed
    label = pair_label_name(options.sentence_order)
    rows = packed_to_rows(batch, label) if packed else to_rows(batch, options.sentence_order)
    offsets = rows["offsets"]
    per_instance = (label,) + _INSTANCE_COLUMNS if packed else ()
    samples = []
    for i in range(len(offsets) - 1):
        sizes, data = [], []
        for name in names:
            if name in _VALUE_TYPES:
                datum = _array_bytes(rows[name][offsets[i]:offsets[i + 1]].astype(_VALUE_TYPES[name]))
                sizes.append(len(datum))
            elif name in per_instance:
                cut = rows["instance_offsets"]
                datum = _array_bytes(rows[name][cut[i]:cut[i + 1]].astype(np.int32))
                sizes.append(len(datum))
            elif name in PROVENANCE_FEATURE_NAMES:
                datum = np.int64(rows[name][i]).tobytes()
            else:
                datum = np.int32(rows[name][i]).tobytes()
            data.append(datum)
        samples.append(np.array(sizes, np.uint32).tobytes() + b"".join(data))
    return samples


class MDSWriter(Writer):
    """As ``streaming``'s ``MDSWriter``: each shard and its index entry say ``shard_config``."""

    def write_shard(self, batches: Iterable[dict], path: str, name: str) -> dict:
        return _write(batches, path, name, self.options)

    def write_split_files(self, directory: str, shards: Sequence[dict]) -> List[str]:
        """``index.json``: the split's shards in order, as ``MDSWriter`` writes it."""
        path = os.path.join(directory, MDS_INDEX)
        with open(path + ".tmp", "w", encoding="utf-8") as out:
            json.dump({"version": 2, "shards": list(shards)}, out, sort_keys=True)
        os.replace(path + ".tmp", path)
        return [path]


def _write(batches, path: str, name: str, options) -> dict:
    config = json.dumps(shard_config(options), sort_keys=True).encode("utf-8")
    sizes: List[int] = []
    raw_name = name
    if options.compression:
        raw_name = raw_name[: -len(COMPRESSION_EXTENSIONS[options.compression]) - 1]
    directory = os.path.dirname(path) or "."
    with tempfile.TemporaryFile(dir=directory) as samples:
        for batch in batches:
            for sample in encode_samples(batch, options):
                samples.write(sample)
                sizes.append(len(sample))
        n = len(sizes)
        offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]) + 4 + 4 * (n + 1) + len(config)
        if offsets[-1] >= 1 << 32:
            raise ValueError(f"{path}: an MDS shard holds at most 4 GiB; use more shards (--num_output_files, "
                             "--megabytes_per_file)")
        samples.seek(0)
        raw_path = path if not options.compression else path + ".raw"
        with open(raw_path, "wb") as out:
            out.write(np.uint32(n).tobytes() + offsets.astype(np.uint32).tobytes() + config)
            shutil.copyfileobj(samples, out, 1 << 22)
    entry = {"samples": n, "raw_data": {"basename": raw_name, "bytes": int(offsets[-1]),
                                        "hashes": {ALGORITHM: file_digest(raw_path)}},
             "zip_data": None}
    if options.compression:
        _compress(raw_path, path, options.compression)
        os.remove(raw_path)
        entry["zip_data"] = {"basename": name, "bytes": os.path.getsize(path), "hashes": {ALGORITHM: file_digest(path)}}
    entry.update(shard_config(options))
    return entry


def _compress(source: str, target: str, compression: str) -> None:
    with open(source, "rb") as raw, open(target, "wb") as out:
        if compression == "gzip":  # mtime 0: the same bytes every run
            with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as packed:
                shutil.copyfileobj(raw, packed, 1 << 22)
        else:
            import zstandard

            # The frame's own checksum too: zstd checks it as it decompresses (streaming does).
            zstandard.ZstdCompressor(write_checksum=True).copy_stream(raw, out)

