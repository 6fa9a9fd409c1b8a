"""What the tools share: the special token ids guessed from the data when there is no vocabulary."""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np


def _most_common(ids: np.ndarray) -> Optional[int]:
    ids = ids[ids >= 0]
    return int(np.bincount(ids).argmax()) if ids.size else None


def guess_cls_sep(columns: Dict[str, np.ndarray]) -> Tuple[Optional[int], Optional[int]]:
    """``(cls_id, sep_id)`` without a vocabulary: the most common first and last real token of
    the rows of ``columns`` (canonical names), so that one bad record does not decide; None when
    there is nothing to count."""
    ids = columns["input_ids"]
    if not len(ids):
        return None, None
    length = np.clip(columns["input_mask"].sum(axis=1), 1, ids.shape[1])
    return _most_common(ids[:, 0]), _most_common(ids[np.arange(len(ids)), length - 1])
