"""python_random.py: Python's Mersenne Twister as functions on arrays, which the compiled pairing
kernels draw from.  It must give random.Random's draws, draw for draw (random(), and the set bits
of getrandbits(k) for k from 0 to past several words), and hand the state back exactly."""

import random

import numpy as np
import pytest

from bert_data.pipeline.python_random import WORDS, ones_of_bits, restore, state_of, uniform


@pytest.mark.parametrize("seed", [0, 1, 7, 12345, 2**32 + 5, 2**100 + 3, "text seed"])
def test_random_and_getrandbits_match_draw_for_draw_and_the_state_goes_back(seed):
    replica_rng, python = random.Random(seed), random.Random(seed)
    words, state = state_of(replica_rng)
    choose = random.Random(hash(str(seed)) & 0xFFFF)  # which draw comes next: mixed, as in pairing
    draws = 0
    while draws < 3 * WORDS:  # several twists of the 624 words
        if choose.random() < 0.4:
            assert uniform(words) == python.random()
            draws += 2
        else:
            k = choose.randint(0, 300)
            assert ones_of_bits(words, k) == bin(python.getrandbits(k)).count("1"), k
            draws += (k + 31) // 32
    restore(replica_rng, words, state)
    assert replica_rng.getstate() == python.getstate()
    assert replica_rng.random() == python.random() and replica_rng.getrandbits(77) == python.getrandbits(77)


def test_every_width_of_getrandbits_from_0_to_300():
    python = random.Random(99)
    words, _ = state_of(random.Random(99))
    for k in range(301):
        assert ones_of_bits(words, k) == bin(python.getrandbits(k)).count("1"), k


def test_a_state_read_in_the_middle_of_the_words_and_the_cached_gaussian_are_kept():
    python = random.Random(3)
    for _ in range(1000):
        python.random()
    python.gauss(0.0, 1.0)  # caches a second Gaussian in the state, which the replica must keep
    copy = random.Random()
    copy.setstate(python.getstate())
    words, state = state_of(copy)
    assert 0 < words[WORDS] < WORDS
    for _ in range(700):
        assert uniform(words) == python.random()
    restore(copy, words, state)
    assert copy.getstate() == python.getstate()
    assert copy.gauss(0.0, 1.0) == python.gauss(0.0, 1.0)


def test_restoring_a_changed_state_is_seen():
    """The comparison above can fail: a state one draw behind is not the same state."""
    rng = random.Random(5)
    words, state = state_of(rng)
    uniform(words)
    unchanged = random.Random(5)
    restore(rng, words, state)
    assert rng.getstate() != unchanged.getstate()
    unchanged.random()
    assert rng.getstate() == unchanged.getstate()
    assert words.dtype == np.int64 and len(words) == WORDS + 1
    assert (words >= 0).all() and (words < 2**32).all()
