"""Deduplication's pure core: normalized words, a document's *signature* (an exact digest and a
MinHash over word shingles), and the deterministic global step that decides, in listed order,
which documents repeat one kept before them (``--dedup exact`` or ``near``).

Normalization (shared with decontamination): Unicode NFKC, case folded (``str.casefold``),
every character that is neither a word character nor white space removed (punctuation and
symbols: ``"Don't!"`` -> ``dont``), white space collapsed to one space (a text of more than
64K characters is normalized in pieces cut at a space).  Two documents are *exact*
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
from typing import Dict, Iterator, List, Optional, Tuple

import numpy as np

from .mixing import mix64  # one owner of the 64-bit mixer: the corpus order uses it too

EXACT = "exact"
NEAR = "near"
DEDUP_MODES = (EXACT, NEAR)
NUM_PERM = 128  # MinHash values a document (uint32): 512 bytes
_KEY = b"bert_data dedup v1"  # the hashes' key: fixed, so signatures never depend on the run
_NOT_WORD = re.compile(r"[^\w\s]+")
_SPACES = re.compile(r"\s+")


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


# ASCII text (the common case) is normalized without NFKC (the identity there) or a regular
# expression: the characters the expression removes are deleted by a table.
_ASCII_DELETE = bytes(code for code in range(128)
                      if not (chr(code).isalnum() or chr(code) == "_" or chr(code).isspace()))
# Lower case, and the white space bytes.split() does not know (\x1c-\x1f) as a space.
_ASCII_TABLE = bytes.maketrans(bytes(range(65, 91)) + bytes(range(0x1c, 0x20)), bytes(range(97, 123)) + b"    ")
_ASCII_SPACES = re.compile(rb"[ \t\n\r\f\v]+")


_PIECE = 1 << 16  # characters normalized at once: Python's string functions copy (4 bytes a character)


def normalized_text(text: str) -> str:
    """The normalized words (see the module's docstring), one space between two.  A large text
    is normalized in pieces cut at a space, so the copies made on the way stay small."""
    if len(text) <= _PIECE:
        return _normalized(text)
    pieces, start = [], 0
    while start < len(text):
        end = min(len(text), start + _PIECE)
        if end < len(text):
            cut = text.rfind(" ", start, end)
            end = cut if cut > start else end
        pieces.append(_normalized(text[start:end]))
        start = end
    return " ".join(piece for piece in pieces if piece)


def _normalized(text: str) -> str:
    if text.isascii():  # in bytes: a byte a character, one table lower-cases and deletes
        data = text.encode("ascii").translate(_ASCII_TABLE, _ASCII_DELETE)
        return _ASCII_SPACES.sub(b" ", data).strip().decode("ascii")
    text = _NOT_WORD.sub("", unicodedata.normalize("NFKC", text).casefold())
    # (No list of words: a large document would cost some 50 bytes a word.)
    return _SPACES.sub(" ", text).strip()


def normalized_words(text: str) -> List[str]:
    """The words deduplication and decontamination compare."""
    return normalized_text(text).split()


def digest64(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, key=_KEY).digest(), "little")


def exact_digest(normalized: str) -> int:
    """A 64-bit digest of the normalized text (equal words, equal digest)."""
    return digest64(normalized.encode("utf-8"))


# A polynomial hash of byte ranges modulo 2**64 (an odd base, so it has an inverse): with the
# prefix sums of b[j] * BASE**j, the hash of any range is one subtraction and one product, so
# every n-gram of a document is hashed at once, in numpy, whatever n.
_BASE = 0x9E3779B97F4A7C15
_BASE_INVERSE = pow(_BASE, -1, 1 << 64)


_POWERS_KEPT = 1 << 18  # powers a process keeps (2 x 2 MB at most; a chunk of runs needs some 0.1 MB)
_powers_of: Dict[int, np.ndarray] = {}


def _powers(base: int, count: int) -> np.ndarray:
    """``base ** j`` (mod 2**64) for j < count, computed once a process up to ``_POWERS_KEPT``."""
    kept = _powers_of.get(base)
    if kept is None or len(kept) < count:
        size = max(count, min(_POWERS_KEPT, 2 * len(kept) if kept is not None else 1 << 16))
        with np.errstate(over="ignore"):
            powers = np.full(size, base, dtype=np.uint64)
            powers[0] = 1
            kept = np.cumprod(powers, dtype=np.uint64)
        if size <= _POWERS_KEPT:
            _powers_of[base] = kept
    return kept[:count]


def span_hash_chunks(normalized: str, n: int, chunk: int = 1 << 14) -> Iterator[np.ndarray]:
    """A 64-bit hash of every run of ``n`` consecutive words of a normalized text (in order;
    a hash of the run's bytes, wherever it is), ``chunk`` runs at a time: a large document
    never makes large arrays (the text's bytes and 4 bytes a word, besides a few MB)."""
    data = np.frombuffer(normalized.encode("utf-8"), dtype=np.uint8)
    if not len(data) or n < 1:
        return
    position = np.int64 if len(data) >= 2**31 else np.int32
    spaces = np.flatnonzero(data == 32).astype(position)
    count = len(spaces) + 1 - n + 1
    with np.errstate(over="ignore"):
        for first in range(0, max(count, 0), chunk):
            last = min(count, first + chunk)
            # Run r starts after space r - 1 (or at 0) and ends at space r + n - 1 (or the end).
            starts = np.zeros(last - first, dtype=np.int64)
            starts[first == 0:] = spaces[max(first - 1, 0):last - 1] + 1
            ends = np.full(last - first, len(data), dtype=np.int64)  # the last run ends with the text
            within = spaces[first + n - 1:last + n - 1]
            ends[:len(within)] = within
            low = int(starts[0])
            part = data[low:int(ends[-1])]
            prefix = np.zeros(len(part) + 1, dtype=np.uint64)
            np.cumsum(part.astype(np.uint64) * _powers(_BASE, len(part)), dtype=np.uint64, out=prefix[1:])
            begin = starts - low
            spans = (prefix[ends - low] - prefix[begin]) * _powers(_BASE_INVERSE, len(part))[begin]
            yield mix64(spans ^ (ends - starts).astype(np.uint64))


def span_hashes(normalized: str, n: int, chunk: int = 1 << 14) -> np.ndarray:
    """:func:`span_hash_chunks` in one array."""
    chunks = list(span_hash_chunks(normalized, n, chunk))
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.uint64)


def shingle_hashes(normalized: str, shingle_size: int) -> Iterator[np.ndarray]:
    """The shingles' hashes, a chunk at a time, repeats included (a MinHash of a set does not
    change with repeats: no sort); a document shorter than a shingle is one."""
    n_words = normalized.count(" ") + 1 if normalized else 0
    return span_hash_chunks(normalized, min(shingle_size, n_words))


def _permutations() -> Tuple[np.ndarray, np.ndarray]:
    """The MinHash functions' constants, from keyed BLAKE2b (not numpy's generators, whose
    streams may change between versions: every worker of a cluster must agree)."""
    multipliers = [digest64(b"multiplier %d" % index) | 1 for index in range(NUM_PERM)]  # odd
    addends = [digest64(b"addend %d" % index) for index in range(NUM_PERM)]
    return np.asarray(multipliers, dtype=np.uint64), np.asarray(addends, dtype=np.uint64)


_MULTIPLIERS, _ADDENDS = _permutations()


def minhash(shingles, chunk: int = 2048) -> np.ndarray:
    """``NUM_PERM`` MinHash values (uint32) of a set of (well mixed) shingle hashes (an array,
    or arrays of them): for each of the fixed multiply-add hash functions ``a * h + b`` (mod
    2**64), the top 32 bits of the least.  In chunks of shingles, so a huge document never
    makes a huge matrix."""
    least = np.full(NUM_PERM, np.iinfo(np.uint64).max, dtype=np.uint64)
    values = np.empty((NUM_PERM, chunk), dtype=np.uint64)
    arrays = [shingles] if isinstance(shingles, np.ndarray) else shingles
    with np.errstate(over="ignore"):
        for part in (array[start:start + chunk] for array in arrays for start in range(0, len(array), chunk)):
            out = values[:, : len(part)]
            np.multiply(_MULTIPLIERS[:, None], part[None, :], out=out)
            out += _ADDENDS[:, None]
            np.minimum(least, out.min(axis=1), out=least)
    return (least >> np.uint64(32)).astype(np.uint32)


def signature_row(position: int, normalized: str, spec: DedupSpec, contamination: int = 0) -> np.ndarray:
    """A document's row of the signature table (or a part's: parts are merged by the global
    step), from its normalized text."""
    row = np.zeros(spec.columns, dtype=np.uint64)
    row[SIGNATURE_POSITION] = position
    row[SIGNATURE_DIGEST] = exact_digest(normalized)
    row[SIGNATURE_CONTAMINATION] = contamination
    if spec.near:
        row[SIGNATURE_MINHASH:] = minhash(shingle_hashes(normalized, spec.shingle_size)).view(np.uint64)
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
