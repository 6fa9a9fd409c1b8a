"""Every random stream of a run, derived from ``(seed, unit, split, purpose[, shard])``: never
from which worker runs a task, when, or how many there are, which is why any number of workers,
machines or resumptions gives the same bytes."""

from __future__ import annotations

import random

import numpy as np

from ..format.dataset_layout import SPLIT_CODES

# What a unit's stream is for.
PAIRING, SHUFFLING, MASKING, PACKING = 0, 1, 2, 3


def random_streams(seed: int, unit_index: int, split: str, *purpose: int) -> np.random.SeedSequence:
    """The seed sequence of one purpose of one unit (and shard, for masks)."""
    return np.random.SeedSequence([seed, unit_index, SPLIT_CODES[split], *purpose])


def python_random(sequence: np.random.SeedSequence) -> random.Random:
    """A ``random.Random`` seeded from a stream (the pairing loop follows Google's, which draws
    from Python's generator)."""
    return random.Random(int.from_bytes(sequence.generate_state(4, np.uint32).tobytes(), "little"))
