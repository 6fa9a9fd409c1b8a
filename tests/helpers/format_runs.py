"""Runs of one small synthetic corpus in every output format, for the format tests: each layout
(NSP, SOP, MLM-only, unmasked) written as TFRecord and as the instance formats with the same
options and seed, and the TFRecord shards decoded to compare with."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import numpy as np

from bert_data.format.dataset import decode_records, infer_specs
from bert_data.format.tfrecord import iter_records
from bert_data.run.resolve import generate

from tests.helpers.corpus import corpus_config, make_corpus

MSL, MPP, SHARDS = 64, 10, 3
LAYOUTS = {
    "nsp": dict(),
    "sop": dict(sentence_order_prediction=True),
    "mlm": dict(mlm_only=True),
    "unmasked": dict(mlm_only=True, disable_masking=True, dupe_factor=1),
}
# format -> compression used for it in the runs (each format's own, where it has one)
FORMAT_RUNS = {"tfrecord": None, "hdf5": "gzip", "parquet": "zstd", "mds": "zstd"}
SUFFIXES = {"tfrecord": ".tfrecords", "hdf5": ".hdf5", "parquet": ".parquet", "mds": ".mds.zstd"}


def make_runs(root: Path, layouts=LAYOUTS, formats=FORMAT_RUNS) -> Dict[str, Dict[str, Path]]:
    """layout -> format -> output directory."""
    corpus = make_corpus(root / "corpus", n_docs=16, seed=3)
    runs: Dict[str, Dict[str, Path]] = {}
    for layout, options in layouts.items():
        for fmt, compression in formats.items():
            out = root / layout / fmt
            generate(run_config(corpus, out, fmt, compression, **options), progress=False)
            runs.setdefault(layout, {})[fmt] = out
    runs["corpus"] = corpus  # type: ignore[assignment]
    return runs


def run_config(corpus, out, fmt: str, compression=None, **options):
    return corpus_config(corpus, out, output_format=fmt, compression=compression, max_seq_length=MSL,
                         max_predictions_per_seq=MPP, num_output_files=SHARDS, seed=7, **options)


def shard_files(directory: Path, fmt: str) -> List[Path]:
    return [directory / f"examples-{i + 1}{SUFFIXES[fmt]}" for i in range(SHARDS)]


def tfrecord_columns(directory: Path) -> List[Dict[str, np.ndarray]]:
    """Each TFRecord shard's records as padded canonical columns."""
    shards = []
    for path in shard_files(directory, "tfrecord"):
        specs = infer_specs(str(path))
        shards.append(decode_records(list(iter_records(str(path))), specs))
    return shards


def expected_rows(columns: Dict[str, np.ndarray], sentence_order: bool) -> List[dict]:
    """What a transformers row of each instance must hold, by hand from the TFRecord columns:
    unpadded tokens, token types, a mask of ones, labels -100 but at masked positions, the
    pair label under BERT's or ALBERT's name."""
    rows = []
    for i in range(len(columns["input_ids"])):
        length = int(columns["input_mask"][i].sum())
        row = {"input_ids": columns["input_ids"][i, :length].tolist()}
        if "segment_ids" in columns:
            row["token_type_ids"] = columns["segment_ids"][i, :length].tolist()
        row["attention_mask"] = [1] * length
        if "masked_lm_positions" in columns:
            labels = [-100] * length
            for position, token, weight in zip(columns["masked_lm_positions"][i], columns["masked_lm_ids"][i],
                                               columns["masked_lm_weights"][i]):
                if weight:
                    labels[position] = int(token)
            row["labels"] = labels
        if "next_sentence_labels" in columns:
            name = "sentence_order_label" if sentence_order else "next_sentence_label"
            row[name] = int(columns["next_sentence_labels"][i, 0])
        rows.append(row)
    return rows
