"""Stage 8: pairs -> instances -> masked (and packed) instances as padded canonical columns,
what every output format is written from (``format/columns.py`` names the columns and each
format encodes them)."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from .instances import InstanceSpec, PairArrays, gather_instances
from .masking import MaskingSpec, mask_token_ranges, mask_tokens
from .packing import PackingSpec, pack_columns
from .tokens import split_word_starts


def instance_columns(tokens: np.ndarray, pairs: PairArrays, instances: InstanceSpec, vocab,
                     masking: Optional[MaskingSpec], rng: np.random.Generator,
                     packing: Optional[PackingSpec] = None, pack_sizes: Optional[np.ndarray] = None,
                     provenance: bool = False, word_starts: bool = False) -> dict:
    """A chunk of pairs (token ranges into ``tokens``) -> masked, padded canonical columns (with
    ``pack_sizes``: instances masked one by one, then packed as ``packing`` says, that many a
    record; with ``provenance``: each instance's ``source_index`` and ``document_index``, from
    the pairs' origins; with ``word_starts``: the ids of ``tokens`` carry their word starts
    (``tokens.WORD_START_BIT``), which masks use and the ``word_starts`` column keeps)."""
    gathered = gather_instances(tokens, pairs, instances.max_seq_length, vocab.cls_id, vocab.sep_id,
                                single_segment=instances.mlm_only)
    starts = None
    if word_starts:
        gathered.input_ids, starts = split_word_starts(gathered.input_ids)
    columns = record_columns(gathered, instances.mlm_only, vocab, masking, rng, starts)
    if pack_sizes is not None:
        columns = pack_columns(columns, gathered.lengths, pack_sizes, packing.max_seq_length,
                               packing.max_sequences_per_pack, packing.prediction_slots)
    if provenance:
        columns["source_index"] = pairs.origin[:, :1].astype(np.int64)
        columns["document_index"] = pairs.origin[:, 1:].astype(np.int64)
    return columns


def range_columns(tokens: np.ndarray, pairs: PairArrays, instances: InstanceSpec, vocab,
                  masking: Optional[MaskingSpec], rngs: Sequence[np.random.Generator], bounds: Sequence[int],
                  provenance: bool = False, word_starts: bool = False) -> dict:
    """:func:`instance_columns` (unpacked) of each range of pairs ``bounds[k]:bounds[k + 1]``
    with its own generator ``rngs[k]``, as one batch: the rows of each range are the rows
    ``instance_columns`` gives for that range and generator (gathering, word starts and
    provenance are row by row; each range's masks are drawn from its generator alone,
    ``mask_token_ranges``)."""
    gathered = gather_instances(tokens, pairs, instances.max_seq_length, vocab.cls_id, vocab.sep_id,
                                single_segment=instances.mlm_only)
    starts = None
    if word_starts:
        gathered.input_ids, starts = split_word_starts(gathered.input_ids)
    columns = record_columns(gathered, instances.mlm_only, vocab, masking, rngs, starts, bounds)
    if provenance:
        columns["source_index"] = pairs.origin[:, :1].astype(np.int64)
        columns["document_index"] = pairs.origin[:, 1:].astype(np.int64)
    return columns


def record_columns(instances, mlm_only: bool, vocab, masking: Optional[MaskingSpec],
                   rng, word_starts: Optional[np.ndarray] = None,
                   bounds: Optional[Sequence[int]] = None) -> dict:
    """The feature columns of a chunk of instances, by canonical feature name, masked as
    ``masking`` says (None: left to the loader); ``word_starts``: each token's, stored and used
    by the masks.  ``rng``: a generator, or with ``bounds`` one a range of rows
    (``mask_token_ranges``)."""
    columns = {"input_ids": instances.input_ids, "input_mask": instances.input_mask}
    if not mlm_only:
        columns["segment_ids"] = instances.segment_ids
        columns["next_sentence_labels"] = instances.is_random_next.astype(np.int32).reshape(-1, 1)
    if word_starts is not None:
        columns["word_starts"] = word_starts
    if masking is not None:
        masked = mask_tokens(instances.input_ids, instances.lengths, masking, vocab, rng, word_starts) \
            if bounds is None else \
            mask_token_ranges(instances.input_ids, instances.lengths, masking, vocab, rng, bounds, word_starts)
        columns.update(input_ids=masked.input_ids, masked_lm_positions=masked.masked_lm_positions,
                       masked_lm_ids=masked.masked_lm_ids, masked_lm_weights=masked.masked_lm_weights)
    return columns
