"""Compiled loop of :func:`.instances.gather_instances`: each row's ``[CLS] A [SEP] B [SEP]``
copied from the token pool in one pass, zero padded (the numpy gather in ``gather_instances``
is the reference, and runs when kernels are off: see ``bert_data.compiled``)."""

from __future__ import annotations

import numpy as np

from ..compiled import kernel

__all__ = ["gather_rows"]


@kernel
def gather_rows(pool, a_start, a_length, b_start, b_length, max_seq_length, cls_id, sep_id, single_segment):
    """``(n, max_seq_length)`` int32 rows: ``[CLS]``, ``pool[a_start:a_start + a_length]``,
    ``[SEP]``, then (unless ``single_segment``) ``pool[b_start:b_start + b_length]`` and
    ``[SEP]``; zeros after."""
    n = a_start.shape[0]
    out = np.zeros((n, max_seq_length), dtype=np.int32)
    for i in range(n):
        row = out[i]
        row[0] = cls_id
        q = 1
        first = a_start[i]
        for t in range(a_length[i]):
            row[q] = pool[first + t]
            q += 1
        row[q] = sep_id
        q += 1
        if not single_segment:
            first = b_start[i]
            for t in range(b_length[i]):
                row[q] = pool[first + t]
                q += 1
            row[q] = sep_id
    return out
