"""Python's own random stream (``random.Random``, the Mersenne Twister MT19937) as plain functions
on arrays, so that a compiled kernel draws exactly what the pairing loop's ``random.Random``
would draw, and hands the generator back in the state the Python loop would leave it in.

The pairing loop follows Google's, which draws from Python's generator; a kernel that drew from
another generator would give other records.  These functions copy CPython's ``_randommodule.c``:
``genrand_uint32`` (the twist and the tempering), ``random()`` (53 bits from two words) and
``getrandbits(k)`` (``ceil(k/32)`` words, least significant first, the last one shifted right by
``32 - k % 32`` unless k is a multiple of 32: on a little-endian machine, as CPython fills them).  The kernels only need
how many bits of ``getrandbits(k)`` are set, so that is what :func:`ones_of_bits` returns.

The state travels as one int64 array: the 624 words, then the position of the next word
(int64: the arithmetic stays in range without unsigned types, whose mixing rules differ between
Python and numba; one array, not two: each array a compiled call takes costs reference counting);
:func:`state_of` reads it from a ``random.Random`` and :func:`restore` writes it back.

The functions are ``@helper``s (compiled.py): plain Python when called from Python (the tests
compare them with ``random.Random`` draw for draw), compiled into the kernels that call them.
``next_word`` is inlined where it is called (a compiled call per word made drawing 3-4x slower);
the twist, once every 624 words, stays a call.
"""

from __future__ import annotations

import random
from typing import Tuple

import numpy as np

from ..compiled import helper

__all__ = ["state_of", "restore", "next_word", "uniform", "ones_of_bits", "WORDS"]

WORDS = 624  # N of MT19937
_SHIFT = 397  # M
_MATRIX_A = 0x9908B0DF
_UPPER = 0x80000000
_LOWER = 0x7FFFFFFF
_WORD = 0xFFFFFFFF


def state_of(rng: random.Random) -> Tuple[np.ndarray, tuple]:
    """The generator's words and position as one array, and its whole state (for :func:`restore`)."""
    state = rng.getstate()
    return np.array(state[1], dtype=np.int64), state


def restore(rng: random.Random, words: np.ndarray, state: tuple) -> None:
    """Put ``words`` (and the position after them) back into ``rng``; the rest of ``state`` (the
    version, and the cached Gaussian of ``random.gauss``, which no kernel draws) unchanged."""
    rng.setstate((state[0], tuple(words.tolist()), state[2]))


@helper
def _twist(words):
    for k in range(WORDS - _SHIFT):
        y = (words[k] & _UPPER) | (words[k + 1] & _LOWER)
        words[k] = words[k + _SHIFT] ^ (y >> 1) ^ (_MATRIX_A if y & 1 else 0)
    for k in range(WORDS - _SHIFT, WORDS - 1):
        y = (words[k] & _UPPER) | (words[k + 1] & _LOWER)
        words[k] = words[k + _SHIFT - WORDS] ^ (y >> 1) ^ (_MATRIX_A if y & 1 else 0)
    y = (words[WORDS - 1] & _UPPER) | (words[0] & _LOWER)
    words[WORDS - 1] = words[_SHIFT - 1] ^ (y >> 1) ^ (_MATRIX_A if y & 1 else 0)
    words[WORDS] = 0  # the position


@helper(inline=True)
def next_word(words):
    """genrand_uint32: the next 32-bit word (as an int64)."""
    if words[WORDS] >= WORDS:
        _twist(words)
    y = words[words[WORDS]]
    words[WORDS] += 1
    y ^= y >> 11
    y ^= (y << 7) & 0x9D2C5680
    y ^= (y << 15) & 0xEFC60000
    y ^= y >> 18
    return y & _WORD


@helper
def uniform(words):
    """random.random(): 27 + 26 bits of two words, in [0, 1)."""
    high = next_word(words) >> 5
    low = next_word(words) >> 6
    return (high * 67108864.0 + low) * (1.0 / 9007199254740992.0)


@helper
def _ones32(value):
    value = value - ((value >> 1) & 0x55555555)
    value = (value & 0x33333333) + ((value >> 2) & 0x33333333)
    value = (value + (value >> 4)) & 0x0F0F0F0F
    return ((value * 0x01010101) & _WORD) >> 24


@helper
def ones_of_bits(words, k):
    """How many bits of random.getrandbits(k) are set (draws the same words: none for k = 0)."""
    ones = 0
    while k > 0:
        word = next_word(words)
        if k < 32:  # the last word keeps its k most significant bits
            word >>= 32 - k
        ones += _ones32(word)
        k -= 32
    return ones
