"""Deduplication's pure core: normalized words, a document's *signature* (an exact digest and a
MinHash over word shingles), and the deterministic global step that decides, in listed order,
which documents repeat one kept before them (``--dedup exact`` or ``near``).

Normalization (shared with decontamination): Unicode NFKC, case folded (``str.casefold``),
every character that is neither a word character nor white space removed (punctuation and
symbols: ``"Don't!"`` -> ``dont``), then split on white space.  Two documents are *exact*
duplicates when their normalized words are equal (compared by a 64-bit keyed BLAKE2b digest).

*Near* duplicates: each document's set of word shingles (``shingle_size`` consecutive
normalized words; a document shorter than that is one shingle) is summarised by ``NUM_PERM``
MinHash values (32 bits each: 512 bytes a document), the fraction of equal values estimating
the sets' Jaccard similarity.  Locality-sensitive hashing cuts the signature into bands; two
documents are compared only when a band is equal, and are duplicates when the estimate reaches
``threshold``.  The bands and rows are chosen for the threshold (the split minimising the
expected false positives and negatives, as datasketch's ``MinHashLSH`` does).

Every hash is keyed by a fixed constant, never Python's salted ``hash()``: the same documents
give the same signatures on every machine, in every run, whatever ``--seed`` (which moves masks
and order, not what a corpus holds).
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

EXACT = "exact"
NEAR = "near"
DEDUP_MODES = (EXACT, NEAR)
NUM_PERM = 128  # MinHash values a document (uint32): 512 bytes
_KEY = b"bert_data dedup v1"  # the hashes' key: fixed, so signatures never depend on the run
_NOT_WORD = re.compile(r"[^\w\s]+")
_WORD_CACHE_LIMIT = 1 << 20  # words whose hashes a process remembers (memory bounded)
_MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class DedupSpec:
    """``mode``: ``exact`` or ``near``; ``threshold``: the Jaccard similarity from which two
    documents are near duplicates; ``shingle_size``: words a shingle."""

    mode: str
    threshold: float = 0.8
    shingle_size: int = 5

    @property
    def near(self) -> bool:
        return self.mode == NEAR

    @property
    def columns(self) -> int:
        """Columns of a signature row (``SIGNATURE_*``, then the MinHash as uint64 pairs)."""
        return SIGNATURE_MINHASH + (NUM_PERM // 2 if self.near else 0)


# A slice's signature table (uint64, a row per document or part of one read in the slice).
SIGNATURE_POSITION, SIGNATURE_DIGEST, SIGNATURE_CONTAMINATION, SIGNATURE_MINHASH = range(4)


def normalized_words(text: str) -> List[str]:
    """The words deduplication and decontamination compare (see the module's docstring)."""
    return _NOT_WORD.sub("", unicodedata.normalize("NFKC", text).casefold()).split()


def digest64(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, key=_KEY).digest(), "little")


def exact_digest(words: Sequence[str]) -> int:
    """A 64-bit digest of the normalized words (equal words, equal digest)."""
    return digest64(" ".join(words).encode("utf-8"))


_word_hashes: Dict[str, int] = {}


def word_hashes(words: Sequence[str]) -> np.ndarray:
    """A 64-bit hash of each word (uint64), remembered for the process's most common words."""
    cache = _word_hashes
    if len(cache) > _WORD_CACHE_LIMIT:
        cache.clear()
    out = np.empty(len(words), dtype=np.uint64)
    for index, word in enumerate(words):
        value = cache.get(word)
        if value is None:
            value = cache[word] = digest64(word.encode("utf-8"))
        out[index] = value
    return out


def mix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on uint64 values (wrapping arithmetic): every bit moves."""
    with np.errstate(over="ignore"):
        z = values.astype(np.uint64, copy=True)
        z ^= z >> np.uint64(30)
        z *= np.uint64(0xBF58476D1CE4E5B9)
        z ^= z >> np.uint64(27)
        z *= np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
        return z


def ngram_hashes(hashes: np.ndarray, n: int) -> np.ndarray:
    """A 64-bit hash of every run of ``n`` consecutive words (from their hashes; order counts)."""
    count = len(hashes) - n + 1
    if count <= 0:
        return np.zeros(0, dtype=np.uint64)
    with np.errstate(over="ignore"):
        combined = hashes[:count].copy()
        for offset in range(1, n):
            combined = mix64(combined * np.uint64(0x9E3779B97F4A7C15)) ^ hashes[offset:offset + count]
        return mix64(combined ^ np.uint64(n))


def shingle_hashes(words: Sequence[str], shingle_size: int) -> np.ndarray:
    """The distinct shingles' hashes (a document shorter than a shingle is one)."""
    hashes = word_hashes(words)
    if 0 < len(hashes) < shingle_size:
        return ngram_hashes(hashes, len(hashes))
    return np.unique(ngram_hashes(hashes, shingle_size))


def _permutations() -> Tuple[np.ndarray, np.ndarray]:
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(0x5EED_DED0)))
    multipliers = rng.integers(1, 2**63, NUM_PERM, dtype=np.uint64) * np.uint64(2) + np.uint64(1)  # odd
    return multipliers, rng.integers(0, 2**63, NUM_PERM, dtype=np.uint64)


_MULTIPLIERS, _ADDENDS = _permutations()
_EMPTY_MINHASH = np.full(NUM_PERM, np.iinfo(np.uint32).max, dtype=np.uint32)


def minhash(shingles: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """``NUM_PERM`` MinHash values (uint32) of a set of shingle hashes: for each of the fixed
    hash functions ``mix64(a * h + b)``, the least, top 32 bits.  In chunks of shingles, so a
    huge document never makes a huge matrix."""
    result = _EMPTY_MINHASH.copy()
    with np.errstate(over="ignore"):
        for start in range(0, len(shingles), chunk):
            part = shingles[start:start + chunk]
            values = mix64(part[None, :] * _MULTIPLIERS[:, None] + _ADDENDS[:, None]) >> np.uint64(32)
            np.minimum(result, values.min(axis=1).astype(np.uint32), out=result)
    return result


def signature_row(position: int, words: Sequence[str], spec: DedupSpec, contamination: int = 0) -> np.ndarray:
    """A document's row of the signature table (or a part's: parts are merged by the global step)."""
    row = np.zeros(spec.columns, dtype=np.uint64)
    row[SIGNATURE_POSITION] = position
    row[SIGNATURE_DIGEST] = exact_digest(words)
    row[SIGNATURE_CONTAMINATION] = contamination
    if spec.near:
        row[SIGNATURE_MINHASH:] = minhash(shingle_hashes(words, spec.shingle_size)).view(np.uint64)
    return row


# ---------------------------------------------------------------------------- LSH

@functools.lru_cache(maxsize=None)
def lsh_bands(threshold: float, num_perm: int = NUM_PERM) -> Tuple[int, int]:
    """(bands, rows) with bands * rows <= num_perm minimising the probability mass of false
    positives below ``threshold`` plus false negatives above it (equal weights)."""
    grid = np.linspace(0.0, 1.0, 1001)
    step = grid[1] - grid[0]
    best, best_error = (1, num_perm), float("inf")
    for bands in range(1, num_perm + 1):
        for rows in range(1, num_perm // bands + 1):
            candidate = 1.0 - (1.0 - grid ** rows) ** bands
            below, above = grid < threshold, grid >= threshold
            error = (candidate[below].sum() + (1.0 - candidate[above]).sum()) * step
            if error < best_error - 1e-12:
                best, best_error = (bands, rows), error
    return best


def band_keys(minhashes: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """(documents, bands) uint64: a hash of each band of each signature (band index mixed in)."""
    n = len(minhashes)
    values = minhashes[:, : bands * rows].astype(np.uint64).reshape(n, bands, rows)
    with np.errstate(over="ignore"):
        keys = np.zeros((n, bands), dtype=np.uint64)
        for row in range(rows):
            keys = mix64(keys * np.uint64(0x9E3779B97F4A7C15) ^ values[:, :, row])
        return mix64(keys ^ np.arange(bands, dtype=np.uint64)[None, :])


# ---------------------------------------------------------------------------- the global step

REMOVED_EXACT, REMOVED_NEAR, REMOVED_CONTAMINATED = 1, 2, 3


def merge_parts(table: np.ndarray, columns: int) -> np.ndarray:
    """Signature rows of the same document (one a part, in corpus order: the slices in order)
    merged into one: digests chained, contamination or'ed, MinHash values the least (the
    MinHash of the union of the parts' shingles)."""
    if not len(table):
        return table.reshape(0, columns)
    order = np.argsort(table[:, SIGNATURE_POSITION], kind="stable")
    table = table[order]
    positions = table[:, SIGNATURE_POSITION]
    firsts = np.flatnonzero(np.r_[True, positions[1:] != positions[:-1]])
    if len(firsts) == len(table):
        return table
    merged = table[firsts].copy()
    ends = np.r_[firsts[1:], len(table)]
    for at, (first, end) in enumerate(zip(firsts, ends)):
        if end - first == 1:
            continue
        parts = table[first:end]
        merged[at, SIGNATURE_DIGEST] = digest64(parts[:, SIGNATURE_DIGEST].astype("<u8").tobytes())
        merged[at, SIGNATURE_CONTAMINATION] = np.bitwise_or.reduce(parts[:, SIGNATURE_CONTAMINATION])
        if columns > SIGNATURE_MINHASH:
            mins = parts[:, SIGNATURE_MINHASH:].copy().view(np.uint32).min(axis=0)
            merged[at, SIGNATURE_MINHASH:] = mins.view(np.uint64)
    return merged


@dataclass
class Removals:
    """The documents the global step removed: corpus positions (ascending), why
    (``REMOVED_*``), for duplicates the position of the document kept that they repeat (-1
    otherwise), and for contaminated ones the evaluation sets matched (a bit each)."""

    positions: np.ndarray
    reasons: np.ndarray
    kept_as: np.ndarray
    eval_sets: np.ndarray

    @classmethod
    def none(cls) -> "Removals":
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int8), np.zeros(0, np.int64), np.zeros(0, np.uint64))


def decide_removals(table: np.ndarray, dedup: Optional[DedupSpec], remove_contaminated: bool) -> Removals:
    """The global step, in listed order (corpus position): a contaminated document goes (when
    ``remove_contaminated``) and takes no part in deduplication; a document whose digest equals
    a kept one's is an exact duplicate; with ``near``, one whose estimated Jaccard similarity to
    a kept document sharing an LSH band reaches the threshold is a near duplicate.  The first
    occurrence is kept.  ``table``: every slice's signature rows (parts merged here).

    Memory: the signatures, plus for each kept document its digest and (near) its band keys
    in a dictionary."""
    columns = dedup.columns if dedup is not None else SIGNATURE_MINHASH
    table = merge_parts(table, columns)
    removed: List[Tuple[int, int, int, int]] = []
    contamination = table[:, SIGNATURE_CONTAMINATION]
    positions = table[:, SIGNATURE_POSITION].astype(np.int64)
    keep = np.ones(len(table), dtype=bool)
    if remove_contaminated:
        for at in np.flatnonzero(contamination):
            removed.append((int(positions[at]), REMOVED_CONTAMINATED, -1, int(contamination[at])))
        keep &= contamination == 0
    if dedup is not None:
        digests = table[:, SIGNATURE_DIGEST]
        minhashes = table[:, SIGNATURE_MINHASH:].copy().view(np.uint32) if dedup.near else None
        if dedup.near:
            bands, rows = lsh_bands(dedup.threshold)
            keys = band_keys(minhashes, bands, rows)
            buckets: List[Dict[int, object]] = [dict() for _ in range(bands)]
        first_of: Dict[int, int] = {}
        for at in np.flatnonzero(keep).tolist():
            digest = int(digests[at])
            earlier = first_of.get(digest)
            if earlier is not None:
                removed.append((int(positions[at]), REMOVED_EXACT, int(positions[earlier]), 0))
                continue
            if dedup.near:
                match = _near_match(at, keys[at].tolist(), buckets, minhashes, dedup.threshold)
                if match is not None:
                    removed.append((int(positions[at]), REMOVED_NEAR, int(positions[match]), 0))
                    continue
                for band, key in enumerate(keys[at].tolist()):
                    found = buckets[band].get(key)
                    if found is None:
                        buckets[band][key] = at
                    elif isinstance(found, list):
                        found.append(at)
                    else:
                        buckets[band][key] = [found, at]
            first_of[digest] = at
    if not removed:
        return Removals.none()
    removed.sort()
    columns_ = list(zip(*removed))
    return Removals(np.asarray(columns_[0], np.int64), np.asarray(columns_[1], np.int8),
                    np.asarray(columns_[2], np.int64), np.asarray(columns_[3], np.uint64))


def _near_match(at: int, keys: List[int], buckets: List[Dict[int, object]], minhashes: np.ndarray,
                threshold: float) -> Optional[int]:
    """The earliest kept document sharing a band with document ``at`` and similar enough."""
    candidates = set()
    for band, key in enumerate(keys):
        found = buckets[band].get(key)
        if found is None:
            continue
        if isinstance(found, list):
            candidates.update(found)
        else:
            candidates.add(found)
    for candidate in sorted(candidates):
        if np.count_nonzero(minhashes[candidate] == minhashes[at]) >= threshold * NUM_PERM:
            return candidate
    return None
