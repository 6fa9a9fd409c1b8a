"""The datasets of every record layout and compression the generator writes, for the tests of
readers, tools and load-time masks (format/test_layouts.py, tools/test_layouts_in_tools.py,
load/test_load_time_masks.py).

Layouts (``bert_data.format.layout.feature_specs``): Google's NSP layout, the same with TF Model
Garden's v2 names, MLM-only, MLM-only across documents (separators inside the sequence), and
MLM-only unmasked (masks drawn at load time); each uncompressed, gzip (two concatenated members)
and zlib (one stream).  They are written here, record by record, with ``encode_examples`` +
``frame_records`` and a hand-made ``data_params.json``, so the tests do not depend on the generator.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from bert_data.format.tfrecord.example_codec import encode_examples
from bert_data.format.layout import canonical_name, feature_specs, tf_feature_description
from bert_data.format.manifest import Manifest
from bert_data.pipeline.masking import MaskingSpec, mask_tokens
from bert_data.format.tfrecord import frame_records
from bert_data.tokenizers.vocab import load_vocab

from tests.helpers.corpus import write_vocab, all_stems


MSL, MPP = 32, 5
N_RECORDS = (23, 17)  # per shard
LAYOUTS = {
    # name: (mlm_only, masked, v2_feature_names, cross_document)
    "nsp": (False, True, False, False),
    "nsp_v2": (False, True, True, False),
    "mlm": (True, True, False, False),
    "mlm_cross": (True, True, False, True),
    "unmasked": (True, False, False, True),
}
COMPRESSIONS = [None, "gzip", "zlib"]
TF_TYPE = {None: "", "gzip": "GZIP", "zlib": "ZLIB"}


@pytest.fixture(scope="module")
def vocab_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("layouts_vocab") / "vocab.txt"
    write_vocab(path, all_stems()[:300])
    return path


def word_rows(vocab, rng, n, lengths):
    """Token rows of real words (stems, some followed by a ## piece), without specials."""
    stems = [i for i, t in enumerate(vocab.tokens) if t.isalpha() and t.islower()]
    pieces = np.flatnonzero(vocab.is_continuation)
    rows = []
    for length in lengths:
        row = []
        while len(row) < length:
            row.append(int(rng.choice(stems)))
            if rng.random() < 0.3 and len(row) < length:
                row.append(int(rng.choice(pieces)))
        rows.append(row[:length])
    return rows


def make_columns(vocab, layout, n, seed):
    """Valid records of ``layout`` as columns (canonical names)."""
    mlm_only, masked, _, cross = LAYOUTS[layout]
    rng = np.random.default_rng(seed)
    ids = np.zeros((n, MSL), np.int64)
    mask = np.zeros((n, MSL), np.int64)
    seg = np.zeros((n, MSL), np.int64)
    for r in range(n):
        total = int(rng.integers(8 if mlm_only else 9, MSL + 1))
        if mlm_only:
            body = word_rows(vocab, rng, 1, [total - 2])[0]
            if cross and r % 3 == 0:  # a document boundary inside the window
                cut = int(rng.integers(2, len(body) - 2))
                body[cut] = vocab.sep_id
            tokens = [vocab.cls_id] + body + [vocab.sep_id]
        else:
            a_len = int(rng.integers(2, total - 4))
            a, b = word_rows(vocab, rng, 2, [a_len, total - 3 - a_len])
            tokens = [vocab.cls_id] + a + [vocab.sep_id] + b + [vocab.sep_id]
            seg[r, a_len + 2:total] = 1
        ids[r, :total] = tokens
        mask[r, :total] = 1
    cols = {"input_ids": ids, "input_mask": mask}
    if not mlm_only:
        cols["segment_ids"] = seg
    if masked:
        spec = MaskingSpec.for_vocab(vocab, masked_lm_prob=0.15, max_predictions_per_seq=MPP)
        out = mask_tokens(ids, mask.sum(axis=1), spec, vocab, rng)
        cols.update(input_ids=out.input_ids.astype(np.int64), masked_lm_positions=out.masked_lm_positions,
                    masked_lm_ids=out.masked_lm_ids, masked_lm_weights=out.masked_lm_weights)
    if not mlm_only:
        cols["next_sentence_labels"] = rng.integers(0, 2, (n, 1))
    return cols


def compress(data: bytes, compression) -> bytes:
    if compression == "gzip":  # two members, split inside a record: TF reads them as one stream
        cut = len(data) // 3
        return gzip.compress(data[:cut], mtime=0) + gzip.compress(data[cut:], mtime=0)
    if compression == "zlib":
        return zlib.compress(data)
    return data


def layout_specs(layout):
    mlm_only, masked, v2, _ = LAYOUTS[layout]
    return feature_specs(MSL, MPP, mlm_only=mlm_only, masked=masked, v2_feature_names=v2)


def write_dataset(directory: Path, vocab_path, layout, compression, seed=0, **manifest_extra):
    """Two shards and a data_params.json; returns the columns written (stored names), per shard."""
    vocab = load_vocab(vocab_path)
    mlm_only, masked, v2, cross = LAYOUTS[layout]
    specs = layout_specs(layout)
    directory.mkdir(parents=True, exist_ok=True)
    written, counts, sizes = [], {}, {}
    for shard, n in enumerate(N_RECORDS):
        cols = make_columns(vocab, layout, n, seed * 10 + shard)
        cols = {spec.name: cols[canonical_name(spec.name)] for spec in specs}
        name = f"examples-{shard + 1}.tfrecords"
        data = compress(frame_records(encode_examples(cols, specs)), compression)
        (directory / name).write_bytes(data)
        written.append(cols)
        counts[name], sizes[name] = n, len(data)
    manifest = {
        "vocab_file": str(vocab_path), "vocab_sha256": vocab.sha256, "vocab_size": vocab.size,
        "max_seq_length": MSL, "max_predictions_per_seq": MPP, "masked_lm_prob": 0.15,
        "mask_whole_word": False, "max_ngram_size": 1, "mlm_only": mlm_only,
        "allow_cross_document_examples": cross, "document_separator_token": "[SEP]",
        "disable_masking": not masked, "v2_feature_names": v2, "compression": compression,
        "n_examples": sum(N_RECORDS), "examples_per_file": counts, "bytes_per_file": sizes,
        "features": {s.name: {"dtype": s.dtype, "length": s.length} for s in specs},
    }
    manifest.update(manifest_extra)
    (directory / "data_params.json").write_text(json.dumps(manifest, indent=2))
    return written


def joined(parts):
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}


@pytest.fixture(scope="module")
def datasets(tmp_path_factory, vocab_path):
    """(layout, compression) -> (directory, columns as written)."""
    root = tmp_path_factory.mktemp("layouts")
    out = {}
    for layout in LAYOUTS:
        for compression in COMPRESSIONS:
            directory = root / f"{layout}-{compression}"
            out[layout, compression] = directory, joined(write_dataset(directory, vocab_path, layout, compression))
    return out


def tf_reference(directory):
    """TensorFlow's own reader and parser, with the manifest's spec and compression."""
    import tensorflow as tf

    manifest = Manifest.read(directory)
    description = tf_feature_description(MSL, MPP, specs=manifest.specs)
    files = [str(directory / name) for name in manifest.examples_per_file]
    d = tf.data.TFRecordDataset(files, compression_type=TF_TYPE[manifest.compression])
    raw = [r.numpy() for r in d]
    parsed = tf.io.parse_example(tf.constant(raw), description)
    return raw, {name: value.numpy() for name, value in parsed.items()}


ALL = [(layout, compression) for layout in LAYOUTS for compression in COMPRESSIONS]
