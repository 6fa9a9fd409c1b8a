"""The record layout, in one place.

The writer, the readers, ``bert-data verify`` and the training loaders all take their feature
names, types and lengths from here, so they cannot drift apart.  The layout is the one Google's
``run_pretraining.py`` parses (and Cerebras's ``BertTfRecordsProcessor``):

=====================  =======  ===========================
feature                type     length
=====================  =======  ===========================
input_ids              int64    max_seq_length
input_mask             int64    max_seq_length
segment_ids            int64    max_seq_length
masked_lm_positions    int64    max_predictions_per_seq
masked_lm_ids          int64    max_predictions_per_seq
masked_lm_weights      float32  max_predictions_per_seq
next_sentence_labels   int64    1
=====================  =======  ===========================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

INT64 = "int64"
FLOAT32 = "float32"


@dataclass(frozen=True)
class FeatureSpec:
    name: str
    dtype: str  # INT64 or FLOAT32
    length: int


FEATURE_NAMES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "masked_lm_weights",
    "next_sentence_labels",
)


def feature_specs(max_seq_length: int, max_predictions_per_seq: int) -> List[FeatureSpec]:
    """The features of one record, in the order the writer emits them."""
    return [
        FeatureSpec("input_ids", INT64, max_seq_length),
        FeatureSpec("input_mask", INT64, max_seq_length),
        FeatureSpec("segment_ids", INT64, max_seq_length),
        FeatureSpec("masked_lm_positions", INT64, max_predictions_per_seq),
        FeatureSpec("masked_lm_ids", INT64, max_predictions_per_seq),
        FeatureSpec("masked_lm_weights", FLOAT32, max_predictions_per_seq),
        FeatureSpec("next_sentence_labels", INT64, 1),
    ]


def tf_feature_description(max_seq_length: int, max_predictions_per_seq: int):
    """``tf.io.parse_single_example`` spec, identical to Google's run_pretraining.py input_fn.

    Imports TensorFlow, so only verification and tf.data loading call it.
    """
    import tensorflow as tf

    dtypes = {INT64: tf.int64, FLOAT32: tf.float32}
    return {
        spec.name: tf.io.FixedLenFeature([spec.length], dtypes[spec.dtype])
        for spec in feature_specs(max_seq_length, max_predictions_per_seq)
    }
