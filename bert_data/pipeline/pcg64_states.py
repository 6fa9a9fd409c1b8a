"""numpy's PCG64 generators' states as the kernels of :mod:`bert_data.pipeline.masking_kernels`
take them (``uint64`` halves of the 128-bit state and increment, and for many generators the
buffered 32-bit half too), and put back afterwards: each generator left exactly where numpy's
own draws would have left it, ``bit_generator.state`` whole (state, inc, has_uint32, uinteger).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

__all__ = ["pcg64_state", "advance_to", "pcg64_states", "set_pcg64_states", "pcg64_state_dict"]

_MASK64 = (1 << 64) - 1


def pcg64_state(generator) -> Optional[np.ndarray]:
    """``generator``'s PCG64 state and increment as ``uint64[4]`` (high, low, high, low) for
    ``masking_kernels.single_token_positions_drawn``, or None for another bit generator (or not a
    ``numpy.random.Generator``)."""
    bit_generator = getattr(generator, "bit_generator", None)
    if type(bit_generator).__name__ != "PCG64" or not isinstance(generator, np.random.Generator):
        return None
    state = bit_generator.state["state"]
    value, increment = state["state"], state["inc"]
    return np.array([value >> 64, value & _MASK64, increment >> 64, increment & _MASK64], dtype=np.uint64)


def advance_to(generator, state: np.ndarray) -> None:
    """Put ``generator`` (PCG64) at ``state`` (:func:`pcg64_state`'s layout) as if it had drawn
    the doubles in between: its buffered 32-bit half (which ``Generator.random`` leaves alone)
    is kept."""
    bit_generator = generator.bit_generator
    full = bit_generator.state
    full["state"] = {"state": (int(state[0]) << 64) | int(state[1]), "inc": (int(state[2]) << 64) | int(state[3])}
    bit_generator.state = full


def pcg64_states(generators: Sequence) -> Optional[np.ndarray]:
    """The generators' PCG64 states, ``uint64[len, 6]`` (``masking_kernels.token_ranges_masked``'s
    rows: state and increment as high and low halves, has_uint32, uinteger), or None when one is
    not a ``numpy.random.Generator`` on PCG64."""
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
