"""Global mixing, part one: which documents make up each unit.

A unit (the grain of pairing, of randomness and of ``--resume``) is ``split_num`` documents of
one split, and the pool random next sentences come from.  Reading a unit must cost what its
bytes cost, whatever the size of the documents, so a unit is not ``split_num`` documents drawn
one by one from all over the corpus (gathering them from the tokenized slices costs a read per
document: 500,000 short documents took three times as long as keeping the listed order), but
a few *regions*: runs of ``region_size`` neighbouring documents of the split (``split_num /
REGIONS_PER_UNIT``, rounded up), each read as one contiguous range.  The regions are put in a
seeded random order and unit ``u`` takes places ``u * split_num`` to ``(u + 1) * split_num - 1``
of the documents in that order: about ``REGIONS_PER_UNIT`` regions from as many places of the
corpus.  So the random-next pool spans that many regions of the corpus (Google's spans the
file given to one run), and every unit is a coarse sample of the whole split.

The fine mixing comes at the end (``shard_shuffle``): every shard is written once more in a
seeded random order, so any stretch of it is a sample of the whole split, however unlike each
other the units are.

The region order is a pseudo-random *permutation* computed on demand, never stored: a small
Feistel network over the next power of four above the number of regions, with "cycle walking"
(a value that falls outside ``[0, n)`` is permuted again until it falls inside, which keeps it
a permutation of ``[0, n)``).  The last ``n mod region_size`` documents (less than a region)
keep their place at the end.  The key is the seed and a document's *position* in the listed
corpus (never its path): the same documents in the same order give the same units whatever the
input format.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import compiled
from ..compiled import kernel


@dataclass(frozen=True)
class MixingSpec:
    """How the corpus is mixed into units: ``split_num`` documents a unit, in a seeded order
    (``seed``), or in listed order (``keep_corpus_order``: units of neighbouring documents, and
    no final shuffle)."""

    seed: int
    split_num: int
    keep_corpus_order: bool


_ROUNDS = 6
# Regions a unit is made of: the places of the corpus its random-next pool spans.  More cost a
# read each; fewer make units less alike (which the final shard shuffle evens out anyway).
REGIONS_PER_UNIT = 16
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def mix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a bijective, well-avalanched 64-bit hash (numpy, wrapping
    arithmetic): every bit moves.  The mixing's permutation and dedup's hashes use it."""
    with np.errstate(over="ignore"):
        z = values.astype(np.uint64, copy=True)
        z ^= z >> np.uint64(30)
        z *= np.uint64(0xBF58476D1CE4E5B9)
        z ^= z >> np.uint64(27)
        z *= np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
        return z


def region_size(split_num: int) -> int:
    """Neighbouring documents read together for a unit of ``split_num``."""
    return -(-split_num // REGIONS_PER_UNIT)


class CorpusOrder:
    """A seeded random order of ``n`` documents in regions of ``region_size`` neighbours:
    ``order.documents_at(places)`` gives the documents (positions in the listed corpus) at
    those places of the shuffled order.  ``region_size=1`` shuffles single documents.

    ``shuffle=False`` keeps the listed order (``documents_at`` is the identity).  ``seed``: an int
    or a list of them (e.g. seed, split, shard).
    """

    def __init__(self, n: int, seed, shuffle: bool = True, region_size: int = 1):
        if n < 0:
            raise ValueError(f"n must be non-negative, got {n}")
        if region_size < 1:
            raise ValueError(f"region_size must be at least 1, got {region_size}")
        self.n = int(n)
        self.shuffle = shuffle
        self.region_size = int(region_size)
        self.n_regions = self.n // self.region_size  # whole regions; the rest keep their place at the end
        half_bits = 1
        while (1 << (2 * half_bits)) < self.n_regions:
            half_bits += 1
        self._half_bits = np.uint64(half_bits)
        self._half_mask = np.uint64((1 << half_bits) - 1)
        # One key a round, derived from the seed (SeedSequence spreads any seed over 64 bits).
        seeds = [int(value) for value in seed] if isinstance(seed, (list, tuple)) else [int(seed)]
        keys = np.random.SeedSequence([*seeds, 0x6D6978]).generate_state(_ROUNDS, np.uint64)
        self._keys = [np.uint64(k) for k in keys]

    def _feistel(self, values: np.ndarray) -> np.ndarray:
        left = values >> self._half_bits
        right = values & self._half_mask
        with np.errstate(over="ignore"):
            for key in self._keys:
                left, right = right, left ^ (mix64(right ^ key) & self._half_mask)
        return (left << self._half_bits) | right

    def documents_at(self, places) -> np.ndarray:
        """The documents at ``places`` (ints in ``[0, n)``) of the shuffled order, as int64."""
        places = np.asarray(places, dtype=np.int64)
        if places.size and (places.min() < 0 or places.max() >= self.n):
            raise IndexError(f"places must lie in [0, {self.n})")
        if not self.shuffle:
            return places.copy()
        # Compiled once numba runs (the final shuffle's orders; a plan's, before the first
        # kernels, is not worth starting it for): a place at a time, no temporary arrays a round.
        walk = _feistel_documents() if compiled.started() else None
        if walk is not None:
            documents = np.empty(places.size, dtype=np.int64)
            walk(np.ascontiguousarray(places).ravel(), self.region_size, self.n_regions, self._half_bits,
                 self._half_mask, np.array(self._keys, dtype=np.uint64), documents)
            return documents.reshape(places.shape)
        regions, offsets = np.divmod(places, self.region_size)
        whole = regions < self.n_regions
        values = regions[whole].astype(np.uint64)
        outside = np.ones(values.shape, dtype=bool)
        while outside.any():  # cycle walking: at most a few rounds, the domain is < 4n
            values[outside] = self._feistel(values[outside])
            outside = values >= np.uint64(self.n_regions)
        documents = places.copy()
        documents[whole] = values.astype(np.int64) * self.region_size + offsets[whole]
        return documents

    def unit_documents(self, unit: int, split_num: int) -> np.ndarray:
        """The documents of unit ``unit``: places ``unit * split_num`` onward, at most
        ``split_num`` of them."""
        first = unit * split_num
        return self.documents_at(np.arange(first, min(first + split_num, self.n)))

    def n_units(self, split_num: int) -> int:
        return -(-self.n // split_num)


@kernel
def _feistel_documents(places, region_size, n_regions, half_bits, half_mask, keys, out):
    """:meth:`CorpusOrder.documents_at` of non-negative ``places`` into ``out``: the same
    Feistel rounds (``mix64`` of the right half and a round's key), cycle walking and regions,
    in wrapping 64-bit arithmetic, a place at a time (the numpy path is the reference)."""
    shift = np.uint64(half_bits)
    low = np.uint64(half_mask)
    size = np.int64(region_size)
    whole = np.int64(n_regions)
    for i in range(places.shape[0]):
        place = np.int64(places[i])
        region = place // size
        if region >= whole:  # (the last documents, less than a region, keep their place)
            out[i] = place
            continue
        value = np.uint64(region)
        while True:
            left = value >> shift
            right = value & low
            for k in range(keys.shape[0]):
                z = right ^ keys[k]
                z ^= z >> np.uint64(30)
                z *= np.uint64(0xBF58476D1CE4E5B9)
                z ^= z >> np.uint64(27)
                z *= np.uint64(0x94D049BB133111EB)
                z ^= z >> np.uint64(31)
                left, right = right, left ^ (z & low)
            value = (left << shift) | right
            if value < np.uint64(whole):
                break
        out[i] = np.int64(value) * size + (place - region * size)
