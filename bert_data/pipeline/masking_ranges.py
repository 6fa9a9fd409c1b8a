"""The default masking (single tokens) of many ranges of rows, each range with its own PCG64
generator, in one compiled call: what ``masking.mask_token_ranges`` loops over in Python, range
by range (an encode task's output shards, a few hundred rows each; a unit of short documents
has thousands of such ranges, and per-call costs were most of their masking's time).

For each range, from its generator's state, the kernel draws what the reference draws, in its
order: the keys ``rng.random((rows, width))`` and the choice they make
(:func:`masking_kernels.single_token_positions_drawn`'s: the keys past a row's real tokens
jumped over), then the replacement draws of
``masking._replacement_draws``: ``rng.random((rows, slots))``, then
``rng.integers(0, ordinary, size=(rows, slots))``.  numpy makes those integers (int64, a range
below 2**32) with Lemire's bounded 32-bit draw on ``next_uint32`` (``random_bounded_uint64_fill``
and ``buffered_bounded_lemire_uint32`` in numpy/random/src/distributions/distributions.c),
rejection loop included; PCG64's ``next_uint32`` hands out the upper half of a 64-bit output on
the next call (``has_uint32``/``uinteger`` in ``bit_generator.state``; ``random`` leaves them
alone), carried in from and out to each generator.  Each generator is left in exactly numpy's
state afterwards.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..compiled import helper, kernel
from .masking_kernels import (_REGISTERING, _pcg64_double, _pcg64_jumps, _pcg64_output, _pcg64_step, _register_pcg64,
                              _row_by_keys, _row_keys_drawn)

__all__ = ["token_ranges_masked_compiled", "pcg64_states", "set_pcg64_states", "pcg64_state_dict", "LARGEST_32"]

# A generator's state is a row of ``uint64[6]``: the 128-bit state and increment (high and low
# halves each), has_uint32 and uinteger (the buffered upper half of an output).
LARGEST_32 = 0xFFFFFFFF  # numpy's largest 32-bit range (``high - 1 - low``): next_uint32 itself
_ALL_32 = np.uint64(LARGEST_32)
_MASK64 = (1 << 64) - 1


@kernel
def token_ranges_masked(input_ids, lengths, is_special, bounds, states, budget, largest, positions, counts, draw,
                        random_index):
    """Per range k (rows ``bounds[k]:bounds[k + 1]``) from ``states[k]`` (advanced past the
    draws): the choice (``positions``, ``counts``; TIE for rows the caller chooses with the
    reference), the 80/10/10 draws (``draw``) and the random-token indices in ``[0, largest]``
    (``random_index``; ``largest`` as numpy's ``rng``: ordinary ids - 1, at most 2**32 - 1)."""
    width = input_ids.shape[1]
    slots = positions.shape[1]
    is_candidate = np.empty(width, np.bool_)
    below = np.empty(width, np.float64)
    chosen = np.empty(width, np.int64)
    row_keys = np.empty(width, np.float64)
    jumps = _pcg64_jumps(width)
    every_value = largest == _ALL_32  # (numpy's Lemire cannot take it: next_uint32 as it is)
    excluded = largest + np.uint64(1)  # (32-bit values: the product fits in 64 bits)
    threshold = np.uint64(0)
    if largest > np.uint64(0) and not every_value:
        threshold = (_ALL_32 - largest) % excluded  # 2**32 mod excluded: the biased low products
    for k in range(states.shape[0]):
        high, low = states[k, 0], states[k, 1]
        increment_high, increment_low = states[k, 2], states[k, 3]
        has_half, half = states[k, 4], states[k, 5]
        first, end = bounds[k], bounds[k + 1]
        for i in range(first, end):
            high, low = _row_keys_drawn(high, low, increment_high, increment_low, jumps, lengths[i], row_keys)
            counts[i] = _row_by_keys(input_ids, lengths, is_special, row_keys, budget, positions, i, is_candidate,
                                     below, chosen)
        for i in range(first, end):
            for slot in range(slots):
                high, low = _pcg64_step(high, low, increment_high, increment_low)
                draw[i, slot] = _pcg64_double(high, low)
        for i in range(first, end):
            for slot in range(slots):
                value = np.uint64(0)
                if largest > np.uint64(0):  # (a single ordinary id: numpy draws nothing)
                    value, high, low, has_half, half = _pcg64_next_uint32(high, low, increment_high, increment_low,
                                                                          has_half, half)
                    if not every_value:
                        scaled = value * excluded
                        if (scaled & _ALL_32) < excluded:  # (excluded bounds the threshold)
                            while (scaled & _ALL_32) < threshold:
                                value, high, low, has_half, half = _pcg64_next_uint32(
                                    high, low, increment_high, increment_low, has_half, half)
                                scaled = value * excluded
                        value = scaled >> np.uint64(32)
                random_index[i, slot] = np.int64(value)
        states[k, 0], states[k, 1], states[k, 4], states[k, 5] = high, low, has_half, half


@helper(inline=True)
def _pcg64_next_uint32(high, low, increment_high, increment_low, has_half, half):
    """numpy's ``pcg64_next32``: the buffered upper half when there is one, else the lower half
    of the next output, its upper half buffered.  Returns (value, high, low, has_half, half)."""
    if has_half != np.uint64(0):
        return half, high, low, np.uint64(0), half
    high, low = _pcg64_step(high, low, increment_high, increment_low)
    output = _pcg64_output(high, low)
    return output & _ALL_32, high, low, np.uint64(1), output >> np.uint64(32)


def token_ranges_masked_compiled():
    """:func:`token_ranges_masked` compiled (the 128-bit step registered first), or None when
    kernels are off."""
    compiled = token_ranges_masked()
    if compiled is not None:
        with _REGISTERING:
            _register_pcg64()
    return compiled


def pcg64_states(generators: Sequence) -> Optional[np.ndarray]:
    """The generators' PCG64 states (``uint64[len, 6]``, :func:`token_ranges_masked`'s rows), or
    None when one is not a ``numpy.random.Generator`` on PCG64."""
    rows = []
    for generator in generators:
        bit_generator = getattr(generator, "bit_generator", None)
        if type(bit_generator).__name__ != "PCG64" or not isinstance(generator, np.random.Generator):
            return None
        full = bit_generator.state
        value, increment = full["state"]["state"], full["state"]["inc"]
        rows.append((value >> 64, value & _MASK64, increment >> 64, increment & _MASK64, full["has_uint32"],
                     full["uinteger"]))
    return np.array(rows, dtype=np.uint64).reshape(len(rows), 6)


def pcg64_state_dict(row: np.ndarray) -> dict:
    """A row of :func:`pcg64_states` as ``bit_generator.state`` spells it."""
    return {"bit_generator": "PCG64",
            "state": {"state": int(row[0]) << 64 | int(row[1]), "inc": int(row[2]) << 64 | int(row[3])},
            "has_uint32": int(row[4]), "uinteger": int(row[5])}


def set_pcg64_states(generators: Sequence, states: np.ndarray) -> None:
    """Each generator put at its row of ``states`` (as if it had made the draws in between)."""
    for generator, row in zip(generators, states.tolist()):  # (Python's integers, not numpy's: cheaper)
        generator.bit_generator.state = pcg64_state_dict(row)
