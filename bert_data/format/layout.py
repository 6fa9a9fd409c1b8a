"""The record layout, in one place: feature names, types and lengths, and the one translation
between TF Model Garden's v2 names and the canonical ones.

The writer, the readers, ``bert-data verify`` and the training loaders all take their feature
names, types and lengths from here, so they cannot drift apart.  Readers translate v2 names
(``input_word_ids``, ``input_type_ids``) with :func:`canonical_name` where records are decoded,
so everything downstream sees canonical names only.  The layout is the one Google's
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

Packed rows (``--pack_sequences``, Graphcore's packed BERT; see :mod:`bert_data.pipeline.packing` and
docs/packing.md) hold up to ``k = max_sequences_per_pack`` instances each:

=======================  =======  ===========================================
feature                  type     length
=======================  =======  ===========================================
input_ids                int64    max_seq_length
input_mask               int64    max_seq_length (instance index 1..k, 0 pad)
segment_ids              int64    max_seq_length
positions                int64    max_seq_length (from 0 in each instance)
masked_lm_positions      int64    max_predictions_per_seq + k
masked_lm_ids            int64    max_predictions_per_seq + k
masked_lm_weights        float32  max_predictions_per_seq + k (instance index)
next_sentence_positions  int64    k
next_sentence_labels     int64    k
next_sentence_weights    float32  k
=======================  =======  ===========================================

MLM-only packed rows have no ``segment_ids`` and no ``next_sentence_*``; unmasked ones no
``masked_lm_*``.  Data made with ``--store_word_starts`` has ``word_starts`` last (int64,
max_seq_length: 1 where a token starts a word), packed or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Optional

DEFAULT_SEQUENCES_PER_PACK = 3  # what a manifest that does not record max_sequences_per_pack means (older runs)

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
# The features only packed rows have.
PACKED_FEATURE_NAMES = ("positions", "next_sentence_positions", "next_sentence_weights")
# Where a record came from (``--record_provenance``): the source's place in the sources file (0
# without one) and the document's position in its source's listing; one int64 each, after the
# layout's features (Google's run_pretraining.py parses the features it names and ignores these).
PROVENANCE_FEATURE_NAMES = ("source_index", "document_index")
# Each token's word start (``--store_word_starts``, for tokenizers whose pieces show none): 1
# where a token starts a word, 0 for a continuation, a special token or padding; max_seq_length
# int64, last (run_pretraining.py ignores it); load-time whole-word and span masks use it.
WORD_STARTS = "word_starts"


V2_NAMES = {"input_ids": "input_word_ids", "segment_ids": "input_type_ids"}


def feature_specs(
    max_seq_length: int,
    max_predictions_per_seq: int,
    mlm_only: bool = False,
    masked: bool = True,
    v2_feature_names: bool = False,
    max_sequences_per_pack: int = 0,
    provenance: bool = False,
    word_starts: bool = False,
) -> List[FeatureSpec]:
    """The features of one record, in the order the writer emits them.

    ``mlm_only``: no next-sentence task, so no ``segment_ids`` and no ``next_sentence_labels``
    (Cerebras's MLM-only layout).  ``masked=False``: unmasked token ids only, for masking at load
    time (no ``masked_lm_*``).  ``v2_feature_names``: TF Model Garden's names, ``input_word_ids``
    and ``input_type_ids``.

    ``max_sequences_per_pack`` (k > 0): packed rows (Graphcore's layout, in its order):
    ``positions`` after the token features, ``max_predictions_per_seq`` is the prediction slots
    of a *row* (the generator's per-instance budget + k), and the pair task has ``k`` of
    ``next_sentence_positions``, ``next_sentence_labels`` and ``next_sentence_weights``.  An
    MLM-only packed layout is the same for every k.

    ``provenance``: ``source_index`` and ``document_index`` last (``PROVENANCE_FEATURE_NAMES``).
    ``word_starts``: each token's word start (``WORD_STARTS``), after everything else.
    """
    packed = max_sequences_per_pack > 0
    specs = [FeatureSpec("input_ids", INT64, max_seq_length), FeatureSpec("input_mask", INT64, max_seq_length)]
    if not mlm_only:
        specs.append(FeatureSpec("segment_ids", INT64, max_seq_length))
    if packed:
        specs.append(FeatureSpec("positions", INT64, max_seq_length))
    if masked:
        specs += [
            FeatureSpec("masked_lm_positions", INT64, max_predictions_per_seq),
            FeatureSpec("masked_lm_ids", INT64, max_predictions_per_seq),
            FeatureSpec("masked_lm_weights", FLOAT32, max_predictions_per_seq),
        ]
    if not mlm_only and packed:
        specs += [FeatureSpec("next_sentence_positions", INT64, max_sequences_per_pack),
                  FeatureSpec("next_sentence_labels", INT64, max_sequences_per_pack),
                  FeatureSpec("next_sentence_weights", FLOAT32, max_sequences_per_pack)]
    elif not mlm_only:
        specs.append(FeatureSpec("next_sentence_labels", INT64, 1))
    if provenance:
        specs += [FeatureSpec(name, INT64, 1) for name in PROVENANCE_FEATURE_NAMES]
    if word_starts:
        specs.append(FeatureSpec(WORD_STARTS, INT64, max_seq_length))
    if v2_feature_names:
        specs = [FeatureSpec(V2_NAMES.get(spec.name, spec.name), spec.dtype, spec.length) for spec in specs]
    return specs


def layout_options(names: Iterable[str], pack_slots: Optional[int] = None) -> dict:
    """The inverse of :func:`feature_specs` for its flags: ``{"mlm_only", "masked",
    "v2_feature_names", "max_sequences_per_pack"}`` of the layout whose features have these
    (stored) names.  ``pack_slots``: the length of ``next_sentence_positions``, which is the k of
    packed pair rows (packed MLM-only rows are the same for every k: 1 stands for it).  Whether
    the names are exactly such a layout is for the caller to check against ``feature_specs``."""
    names = set(names)
    canonical = {canonical_name(name) for name in names}
    return {"mlm_only": "segment_ids" not in canonical, "masked": "masked_lm_positions" in canonical,
            "v2_feature_names": V2_NAMES["input_ids"] in names,
            "max_sequences_per_pack": (pack_slots or 1) if "positions" in canonical else 0,
            "provenance": PROVENANCE_FEATURE_NAMES[0] in canonical, "word_starts": WORD_STARTS in canonical}


_CANONICAL_NAMES = {v2: canonical for canonical, v2 in V2_NAMES.items()}


def canonical_name(name: str) -> str:
    """``input_word_ids`` -> ``input_ids`` and ``input_type_ids`` -> ``segment_ids``; other names
    are canonical already."""
    return _CANONICAL_NAMES.get(name, name)


def packed_predictions(max_predictions_per_seq: int, max_sequences_per_pack: int) -> int:
    """Prediction slots of a packed row: one instance's budget plus one per instance, as
    Graphcore's layout has them (per-instance rounding up of ``masked_lm_prob * length`` adds at
    most one prediction an instance).  The packer never lets a row's predictions exceed it."""
    return max_predictions_per_seq + max_sequences_per_pack


def is_packed(specs) -> bool:
    """Whether a layout holds packed rows (several instances a row)."""
    return any(spec.name == "positions" for spec in specs)


def tf_feature_description(max_seq_length: int, max_predictions_per_seq: int, specs=None):
    """``tf.io.parse_single_example`` spec, identical to Google's run_pretraining.py input_fn
    (or to the given layout, e.g. a manifest's ``specs``).

    Imports TensorFlow, so only verification and tf.data loading call it.
    """
    import tensorflow as tf

    dtypes = {INT64: tf.int64, FLOAT32: tf.float32}
    specs = specs if specs is not None else feature_specs(max_seq_length, max_predictions_per_seq)
    return {spec.name: tf.io.FixedLenFeature([spec.length], dtypes[spec.dtype]) for spec in specs}
