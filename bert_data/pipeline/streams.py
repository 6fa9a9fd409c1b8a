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


# Keys a source's subset stream apart from every unit's (a unit's sequence starts with the seed,
# then the unit's index; this one with the seed, then this tag, which no unit index reaches).
_SOURCE_TAG = 0x736F75726365  # "source"


def source_rng(seed: int, source_index: int) -> np.random.Generator:
    """The stream that chooses a source's subset of documents (``pipeline.sources``)."""
    return np.random.default_rng(np.random.SeedSequence([seed, _SOURCE_TAG, source_index]))
