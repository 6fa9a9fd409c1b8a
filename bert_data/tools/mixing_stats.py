"""``bert-data stats --mixing TOKEN ...``: is every stretch of every shard a sample of the whole?

A trainer reads a shard front to back through a small shuffle buffer (Google's
``run_pretraining.py`` keeps 100 records), so what it sees over a stretch of steps is a window
of the shard.  The statistic: for each shard, the share of records that hold any of the given
tokens (the text as written, masked positions put back), in each of ``windows`` equal windows
(tenths by default) and over the whole shard; the report gives, per shard and over all shards,
the largest gap between a window's share and its shard's share.

For scale, each gap is also given in standard deviations of the gap a random order of the same
shard would show (hypergeometric: a window of ``L`` of the shard's ``m`` records, share ``p``:
``sqrt(p (1 - p) / L * (m - L) / (m - 1))``).  Google's tool, which shuffles every record in
memory, shows gaps of about one to three of those over ten windows; a shard in listed order (a
corpus listed source by source, not mixed) shows gaps of tens.  Pick tokens whose frequency
differs between the parts of your corpus (a topic word of one source, say).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Sequence

import numpy as np

__all__ = ["ShardMixing", "MixingStats", "window_gaps", "records_holding", "mixing_stats", "format_mixing"]

DEFAULT_WINDOWS = 10


@dataclass
class ShardMixing:
    name: str
    records: int
    share: float  # of the shard's records that hold a token
    worst_gap: float  # largest |window share - share|
    worst_sd: float  # that gap in standard deviations of a random order's gap (0 when undefined)


@dataclass
class MixingStats:
    tokens: List[str]
    windows: int
    shards: List[ShardMixing] = field(default_factory=list)

    @property
    def worst_gap(self) -> float:
        return max((shard.worst_gap for shard in self.shards), default=0.0)

    @property
    def worst_sd(self) -> float:
        return max((shard.worst_sd for shard in self.shards), default=0.0)

    def to_dict(self) -> dict:
        return {"tokens": self.tokens, "windows": self.windows, "worst_gap": self.worst_gap,
                "worst_gap_sd": self.worst_sd,
                "shards": [{"file": s.name, "records": s.records, "share": s.share, "worst_gap": s.worst_gap,
                            "worst_gap_sd": s.worst_sd} for s in self.shards]}


def window_gaps(flags: np.ndarray, windows: int = DEFAULT_WINDOWS):
    """(share, worst gap, worst gap in random-order standard deviations) of one shard, whose
    records hold a token where ``flags`` is true: the shard cut into ``windows`` windows as
    ``numpy.array_split`` cuts it."""
    flags = np.asarray(flags, dtype=bool)
    m = len(flags)
    if not m:
        return 0.0, 0.0, 0.0
    share = float(flags.mean())
    worst = worst_sd = 0.0
    for window in np.array_split(flags, min(windows, m)):
        gap = abs(float(window.mean()) - share)
        size = len(window)
        variance = share * (1 - share) / size * (m - size) / (m - 1) if m > 1 else 0.0
        worst = max(worst, gap)
        if variance > 0:
            worst_sd = max(worst_sd, gap / math.sqrt(variance))
    return share, worst, worst_sd


def restored_ids(columns: Dict[str, np.ndarray]) -> np.ndarray:
    """``input_ids`` with the masked positions' original tokens put back (where stored)."""
    ids = columns["input_ids"].copy()
    if "masked_lm_positions" in columns:
        positions, originals, weights = (columns[name] for name in
                                         ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights"))
        active = (weights > 0) & (positions >= 0) & (positions < ids.shape[1])
        rows = np.broadcast_to(np.arange(len(ids))[:, None], positions.shape)
        ids[rows[active], positions[active]] = originals[active]
    return ids


def records_holding(chunks: Iterable[Dict[str, np.ndarray]], token_ids: Sequence[int]) -> np.ndarray:
    """One flag a record of ``chunks`` (decoded columns): does its text hold any of ``token_ids``."""
    flags = [np.isin(restored_ids(columns), np.asarray(token_ids)).any(axis=1) for columns in chunks]
    return np.concatenate(flags) if flags else np.zeros(0, dtype=bool)


def token_ids_of(tokens: Sequence[str], vocab) -> List[int]:
    """The vocabulary ids of ``tokens``, each looked up as given and lower-cased (a ValueError
    names those in neither form)."""
    ids, unknown = [], []
    for token in tokens:
        found = vocab.token_to_id.get(token, vocab.token_to_id.get(token.lower()))
        (unknown if found is None else ids).append(token if found is None else found)
    if unknown:
        raise ValueError(f"--mixing: not in the vocabulary (give single tokens of it): {', '.join(unknown)}")
    return ids


def mixing_stats(files: Sequence[str], specs, compressions, token_ids: Sequence[int], tokens: Sequence[str],
                 windows: int = DEFAULT_WINDOWS) -> MixingStats:
    """The statistic over one dataset's shard files (see the module's docstring)."""
    import os

    from ..load.stages import decoded_chunks

    stats = MixingStats(list(tokens), windows)
    for path in files:
        flags = records_holding(decoded_chunks([path], specs, verify_crc=False, compressions=compressions),
                                token_ids)
        share, worst, worst_sd = window_gaps(flags, windows)
        stats.shards.append(ShardMixing(os.path.basename(path), len(flags), share, worst, worst_sd))
    return stats


def format_mixing(stats: MixingStats) -> List[str]:
    records = sum(shard.records for shard in stats.shards)
    share = sum(shard.share * shard.records for shard in stats.shards) / max(records, 1)
    worst = max(stats.shards, key=lambda shard: shard.worst_gap, default=None)
    where = f" ({worst.name})" if worst is not None else ""
    return [f"  mixing                records holding {' or '.join(stats.tokens)}: {100 * share:.1f}%; worst "
            f"{_ordinal(stats.windows)} of a shard off its shard's share by {stats.worst_gap:.3f}{where}",
            f"                        in standard deviations of a random order's gap: {stats.worst_sd:.1f} at most "
            f"({len(stats.shards)} shard(s) of {stats.windows} windows; a random order shows 1 to 3)"]


def _ordinal(windows: int) -> str:
    return {2: "half", 3: "third", 4: "quarter", 10: "tenth", 100: "hundredth"}.get(windows, f"1/{windows}")
