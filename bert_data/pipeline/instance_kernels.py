"""The pairing loops of instances.py as compiled kernels (compiled.py): the same pairs and windows,
drawn from the same Python random stream (python_random.py replicates it), at array speed.

Each kernel follows its reference in instances.py line for line (``create_pairs`` with
``add_pairs_from_document``, ``create_windows`` with ``add_windows``); those stay the fallback and
the test oracle.  A pool's sentence bounds come flat: ``bounds[offsets[d]:offsets[d + 1]]`` are
document ``d``'s (``TokenPool.bounds[d]``).  The kernels fill preallocated int32 columns and
return how many rows they wrote, or a negative code when they stop early: ``FULL`` (the columns
are too short: the caller retries with longer ones, from the same random state) or
``NO_SENTENCE`` (a random next sentence was to come from a document without sentences, where the
reference raises: the caller runs the reference, which raises the same error).  ``words`` is
the random state (python_random.state_of), advanced in place.
"""

from __future__ import annotations

from ..compiled import helper, kernel
from .python_random import ones_of_bits, uniform

FULL = -1
NO_SENTENCE = -2


@helper
def _bisect_left(values, base, x, lo, hi):
    """bisect.bisect_left(values[base:], x, lo, hi) - base: on one document's bounds."""
    while lo < hi:
        middle = (lo + hi) // 2
        if values[base + middle] < x:
            lo = middle + 1
        else:
            hi = middle
    return lo


@kernel
def pair_ranges(bounds, offsets, dupe_factor, max_num_tokens, short_seq_prob, short_min, per_chunk, sentence_order,
                words, a_starts, a_lengths, b_starts, b_lengths, labels):
    """create_pairs over flat bounds: rows written to the five columns, or FULL / NO_SENTENCE."""
    n_documents = len(offsets) - 1
    short_range = max_num_tokens - short_min + 1
    capacity = len(a_starts)
    count = 0
    for _ in range(dupe_factor):
        for document in range(n_documents):
            base = offsets[document]
            n_sentences = offsets[document + 1] - base - 1
            target_length = max_num_tokens
            if uniform(words) < short_seq_prob:
                target_length = short_min + int(uniform(words) * short_range)
            chunk_first = 0
            while chunk_first < n_sentences:
                i = _bisect_left(bounds, base, bounds[base + chunk_first] + target_length, chunk_first + 1,
                                 n_sentences) - 1
                chunk_size = i - chunk_first + 1
                a_end = chunk_first + 1
                if chunk_size >= 2:
                    a_end = chunk_first + 1 + int(uniform(words) * (chunk_size - 1))
                a_start = bounds[base + chunk_first]
                len_a = bounds[base + a_end] - a_start

                if chunk_size == 1 or (not sentence_order and uniform(words) < 0.5):
                    is_random = 1
                    random_index = document
                    for _try in range(10):
                        random_index = int(uniform(words) * n_documents)
                        if random_index != document:
                            break
                    random_base = offsets[random_index]
                    last_sentence = offsets[random_index + 1] - random_base - 2
                    first = int(uniform(words) * (last_sentence + 1))
                    if last_sentence < 0:
                        return NO_SENTENCE
                    b_start = bounds[random_base + first]
                    last = _bisect_left(bounds, random_base, b_start + target_length - len_a, first + 1,
                                        last_sentence + 1) - 1
                    len_b = bounds[random_base + last + 1] - b_start
                    i = a_end - 1
                else:
                    is_random = 0
                    b_start = bounds[base + a_end]
                    len_b = bounds[base + i + 1] - b_start
                    if sentence_order and uniform(words) < 0.5:
                        is_random = 1
                        a_start, len_a, b_start, len_b = b_start, len_b, a_start, len_a

                excess = len_a + len_b - max_num_tokens
                if excess > 0:
                    remove_a = 0
                    remove_b = 0
                    if len_a > len_b:
                        remove_a = min(excess, len_a - len_b)
                        excess -= remove_a
                    elif len_b > len_a:
                        remove_b = min(excess, len_b - len_a)
                        excess -= remove_b
                    remove_b += (excess + 1) >> 1
                    remove_a += excess >> 1
                    if remove_a:
                        a_start += ones_of_bits(words, remove_a)
                        len_a -= remove_a
                    if remove_b:
                        b_start += ones_of_bits(words, remove_b)
                        len_b -= remove_b

                if count == capacity:
                    return FULL
                a_starts[count] = a_start
                a_lengths[count] = len_a
                b_starts[count] = b_start
                b_lengths[count] = len_b
                labels[count] = is_random
                count += 1
                chunk_first = i + 1
                if per_chunk:
                    target_length = max_num_tokens
                    if uniform(words) < short_seq_prob:
                        target_length = short_min + int(uniform(words) * short_range)
    return count


@kernel
def window_ranges(starts, ends, dupe_factor, max_num_tokens, overlap, short_seq_prob, short_min, words,
                  a_starts, a_lengths):
    """create_windows over ranges [starts[r], ends[r]) (documents, or the whole pool): rows written,
    or FULL."""
    short_range = max_num_tokens - short_min + 1
    capacity = len(a_starts)
    count = 0
    for _ in range(dupe_factor):
        for r in range(len(starts)):
            start = starts[r]
            end = ends[r]
            at = start
            length = max_num_tokens
            if uniform(words) < short_seq_prob:
                length = short_min + int(uniform(words) * short_range)
            while at + length <= end:
                if count == capacity:
                    return FULL
                a_starts[count] = at
                a_lengths[count] = length
                count += 1
                at += length - overlap
                length = max_num_tokens
                if uniform(words) < short_seq_prob:
                    length = short_min + int(uniform(words) * short_range)
            if end > at and (at == start or end - at > overlap):
                if count == capacity:
                    return FULL
                a_starts[count] = at
                a_lengths[count] = end - at
                count += 1
    return count
