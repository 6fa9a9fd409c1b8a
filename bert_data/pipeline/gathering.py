"""Compiled loop of :func:`.instances.gather_instances`: each row's ``[CLS] A [SEP] B [SEP]``
copied from the token pool in one pass, zero padded, with its ``input_mask`` and
``segment_ids`` rows written in the same pass (the numpy gather in ``gather_instances`` and
``InstanceArrays``' properties are the reference, and run when kernels are off: see
``bert_data.compiled``)."""

from __future__ import annotations

import numpy as np

from ..compiled import kernel

__all__ = ["copy_runs", "gather_rows"]


@kernel
def gather_rows(pool, a_start, a_length, b_start, b_length, max_seq_length, cls_id, sep_id, single_segment):
    """``(input_ids, input_mask, segment_ids)``, ``(n, max_seq_length)`` int32 each: ``[CLS]``,
    ``pool[a_start:a_start + a_length]``, ``[SEP]``, then (unless ``single_segment``)
    ``pool[b_start:b_start + b_length]`` and ``[SEP]``; zeros after; the mask 1 on those
    tokens, the segment ids 1 on B and its [SEP] (``single_segment``: no segment ids, an
    ``(n, 0)`` array).  Every element is written once (no zero-filled allocation first)."""
    n = a_start.shape[0]
    width = max_seq_length
    out = np.empty((n, width), dtype=np.int32)
    mask = np.empty((n, width), dtype=np.int32)
    segments = np.empty((n, 0 if single_segment else width), dtype=np.int32)
    for i in range(n):
        row = out[i]
        row[0] = cls_id
        first = a_start[i]
        a = a_length[i]
        for t in range(a):
            row[1 + t] = pool[first + t]
        row[1 + a] = sep_id
        end = a + 2  # where B starts, or the row's end
        if not single_segment:
            first = b_start[i]
            b = b_length[i]
            for t in range(b):
                row[end + t] = pool[first + t]
            row[end + b] = sep_id
            segment = segments[i]
            for j in range(end):
                segment[j] = 0
            for j in range(end, end + b + 1):
                segment[j] = 1
            end += b + 1
            for j in range(end, width):
                segment[j] = 0
        for j in range(end, width):
            row[j] = 0
        mask_row = mask[i]
        for j in range(end):
            mask_row[j] = 1
        for j in range(end, width):
            mask_row[j] = 0
    return out, mask, segments


@kernel
def copy_runs(out, out_starts, source, source_starts, counts):
    """``out[out_starts[i]:out_starts[i] + counts[i]] = source[source_starts[i]:...]`` for each
    ``i``, in order (1-D arrays; ``out`` takes ``source``'s values as numpy's assignment casts
    them): runs of a token pool copied with no index array a token (a unit's pool is gathered
    from slices so).  False, before copying it, at the first run that does not lie inside both
    arrays (the caller's numpy copy then says what is wrong)."""
    for i in range(counts.shape[0]):
        count, at, begin = counts[i], out_starts[i], source_starts[i]
        if count < 0 or at < 0 or begin < 0 or at + count > out.shape[0] or begin + count > source.shape[0]:
            return False
        for k in range(count):
            out[at + k] = source[begin + k]
    return True
