"""Global mixing: which documents of the corpus make up each unit.

Google's tool shuffles all instances of the corpus at the end, in memory.  Here each unit (the
pool random next sentences come from, and the grain of output) is a uniform random sample of
the whole corpus instead of a run of neighbouring documents: documents are put in a seeded
random order, and unit ``u`` takes places ``u * split_num`` to ``(u + 1) * split_num - 1`` of it.
Units are then spread over the shards in turn, so any stretch of a shard is a sample of the
whole corpus too.

The order is a pseudo-random *permutation* computed on demand, never stored: a small Feistel
network over the next power of four above the number of documents, with "cycle walking" (a
value that falls outside ``[0, n)`` is permuted again until it falls inside, which keeps it a
permutation of ``[0, n)``).  So a task that builds unit ``u`` computes its ``split_num``
documents in microseconds and memory does not grow with the corpus.  The key is the seed and a
document's *position* in the listed corpus (never its path): the same documents in the same
order give the same units whatever the input format.
"""

from __future__ import annotations

import numpy as np

_ROUNDS = 6
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijective, well-avalanched 64-bit hash (numpy, wrapping)."""
    z = values.astype(np.uint64, copy=True)
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


class CorpusOrder:
    """A seeded random order of ``n`` documents: ``order.documents_at(places)`` gives the
    documents (positions in the listed corpus) at those places of the shuffled order.

    ``shuffle=False`` keeps the listed order (``documents_at`` is the identity).
    """

    def __init__(self, n: int, seed: int, shuffle: bool = True):
        if n < 0:
            raise ValueError(f"n must be non-negative, got {n}")
        self.n = int(n)
        self.shuffle = shuffle
        half_bits = 1
        while (1 << (2 * half_bits)) < self.n:
            half_bits += 1
        self._half_bits = np.uint64(half_bits)
        self._half_mask = np.uint64((1 << half_bits) - 1)
        # One key a round, derived from the seed (SeedSequence spreads any seed over 64 bits).
        keys = np.random.SeedSequence([int(seed), 0x6D6978]).generate_state(_ROUNDS, np.uint64)
        self._keys = [np.uint64(k) for k in keys]

    def _feistel(self, values: np.ndarray) -> np.ndarray:
        left = values >> self._half_bits
        right = values & self._half_mask
        with np.errstate(over="ignore"):
            for key in self._keys:
                left, right = right, left ^ (_mix64(right ^ key) & self._half_mask)
        return (left << self._half_bits) | right

    def documents_at(self, places) -> np.ndarray:
        """The documents at ``places`` (ints in ``[0, n)``) of the shuffled order, as int64."""
        places = np.asarray(places, dtype=np.int64)
        if places.size and (places.min() < 0 or places.max() >= self.n):
            raise IndexError(f"places must lie in [0, {self.n})")
        if not self.shuffle:
            return places.copy()
        values = places.astype(np.uint64)
        outside = np.ones(values.shape, dtype=bool)
        while outside.any():  # cycle walking: at most a few rounds, the domain is < 4n
            values[outside] = self._feistel(values[outside])
            outside = values >= np.uint64(self.n)
        return values.astype(np.int64)

    def unit_documents(self, unit: int, split_num: int) -> np.ndarray:
        """The documents of unit ``unit``: places ``unit * split_num`` onward, at most
        ``split_num`` of them."""
        first = unit * split_num
        return self.documents_at(np.arange(first, min(first + split_num, self.n)))

    def n_units(self, split_num: int) -> int:
        return -(-self.n // split_num)
