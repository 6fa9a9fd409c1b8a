"""Compiled kernels of :mod:`bert_data.pipeline.masking`: one pass per row instead of many
whole-batch numpy passes over ``(n, width)`` matrices.

Each kernel takes the random draws the reference takes (drawn by the caller, in the reference's
order: the keys ``(n, width)``, then the 80/10/10 draws and the random-token indices
``(n, max_predictions)``), so the bytes cannot depend on which path ran.  The token kernel can
also draw its keys itself (``single_token_positions_drawn``): numpy's PCG64 stepped in the
kernel, the same doubles as ``Generator.random`` in the same order, the generator then put where
that draw would have left it; ``token_ranges_masked`` draws the replacement draws too, for many
ranges of rows with a generator each, in one call.  They give exactly the reference's output;
where the reference's answer depends on how numpy orders equal keys (its sorts are not stable),
a kernel does not guess: it marks the row (``counts[i] = -1``) and the caller runs the
reference on the marked rows alone (about 2**-40 of the rows with real draws).

``is_special`` is indexed by token id up to the largest special id ([CLS], [SEP], a document
separator: never candidates), a table rather than a loop over the ids in the inner loop; a token
continues a word when ``is_continuation[marks[i, j]]`` (``marks``: the ids themselves, or the
stored word starts as 0/1, ``mask_tokens``' ``word_starts``).
The choice kernels write into arrays the caller allocates (``positions`` zeroed, ``counts``;
``apply_masks`` makes its own outputs, each row copied and masked in one pass), so that each is
an ordinary loop numba compiles once (``bert_data.compiled``; ``python_function`` runs
them uncompiled in tests).
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from ..compiled import helper, kernel

__all__ = ["single_token_positions", "single_token_positions_drawn_compiled", "token_ranges_masked_compiled",
           "whole_word_positions", "apply_masks", "LARGEST_32"]

TIE = -1  # counts[i] for a row the caller must choose with the reference


@kernel
def single_token_positions(input_ids, lengths, is_special, keys, budget, positions, counts):
    """Per row: the candidates with the ``take = min(budget, candidates)`` smallest keys,
    ascending, in ``positions[i, :counts[i]]`` (the reference's ``keys <= threshold``)."""
    n, width = input_ids.shape
    is_candidate = np.empty(width, np.bool_)
    below = np.empty(width, np.float64)
    chosen = np.empty(width, np.int64)
    for i in range(n):
        counts[i] = _row_by_keys(input_ids, lengths, is_special, keys[i], budget, positions, i, is_candidate, below,
                                 chosen)


@kernel
def single_token_positions_drawn(input_ids, lengths, is_special, state, budget, positions, counts):
    """:func:`single_token_positions` with the keys drawn here, row after row, as numpy's PCG64
    draws ``Generator.random((n, width))`` from ``state`` (``pcg64_states.pcg64_state``: the 128-bit
    state and increment, as two 64-bit halves each), which is left advanced past them: the
    same keys without writing ``(n, width)`` doubles to memory and reading them back (drawing
    them was a third of the masking's time), and the keys past a row's real tokens (never looked
    at) jumped over rather than drawn."""
    n, width = input_ids.shape
    is_candidate = np.empty(width, np.bool_)
    below = np.empty(width, np.float64)
    chosen = np.empty(width, np.int64)
    row_keys = np.empty(width, np.float64)
    jumps = _pcg64_jumps(width)
    high, low, increment_high, increment_low = state[0], state[1], state[2], state[3]
    for i in range(n):
        high, low = _row_keys_drawn(high, low, increment_high, increment_low, jumps, lengths[i], row_keys)
        counts[i] = _row_by_keys(input_ids, lengths, is_special, row_keys, budget, positions, i, is_candidate, below,
                                 chosen)
    state[0], state[1] = high, low


@helper(inline=True)
def _row_by_keys(input_ids, lengths, is_special, keys, budget, positions, i, is_candidate, below, chosen):
    """Row ``i``'s choice by its ``keys`` (``positions[i]``); its count, or TIE.

    The chosen are the candidates whose keys have fewer than ``take`` keys below them (the
    reference's ``keys <= threshold``, the take-th smallest key): they are looked for among the
    candidates with keys below a guess that holds about ``take + 2 sqrt(take) + 2`` of the row's
    uniform keys (``below``, their positions in ``chosen``, ascending), found in the same pass
    that finds the candidates; a guess that holds fewer than ``take`` is doubled until it holds
    enough (at 1 or more, every candidate, whatever the keys).  Equal keys across the boundary
    choose more than ``take``: TIE.  The loops have no data-dependent branches (they are most of
    a row's time when mispredicted)."""
    width = input_ids.shape[1]
    slots = positions.shape[1]
    length = min(max(lengths[i], 0), width)
    wanted = min(budget[i], slots)  # (the budget is at most max_predictions)
    if wanted <= 0 or length == 0:
        return 0
    # (any guess gives the same choice; this one about the [CLS] and two [SEP] of a pair's row)
    guess = (wanted + 2.0 * np.sqrt(wanted) + 2.0) / max(length - 3, 1)
    candidates = 0
    held = 0
    for j in range(length):
        token = input_ids[i, j]
        candidate = not (token < len(is_special) and is_special[token])
        is_candidate[j] = candidate
        candidates += candidate
        key = keys[j]
        below[held] = key
        chosen[held] = j
        held += candidate & (key <= guess)
    take = min(wanted, candidates)
    if take <= 0:
        return 0
    while held < take:
        guess *= 2.0
        everyone = guess >= 1.0  # (the widest guess holds every candidate, whatever the keys)
        held = 0
        for j in range(length):
            key = keys[j]
            below[held] = key
            chosen[held] = j
            held += is_candidate[j] & (everyone | (key <= guess))
    count = 0
    for a in range(held):
        key = below[a]
        smaller = 0
        for b in range(held):
            smaller += below[b] < key
        chosen[count] = chosen[a]  # (count <= a: a held position is read before it is overwritten)
        count += smaller < take
    for slot in range(min(count, slots)):
        positions[i, slot] = chosen[slot]
    return count if count == take else TIE  # equal keys across the take-th smallest


# numpy's PCG64 (``pcg_setseq_128_xsl_rr_64``): a 128-bit LCG stepped, then its XSL-RR output.
_PCG64_MULTIPLIER = 0x2360ED051FC65DA44385DF649FCCF645
_MASK64 = (1 << 64) - 1
_MULTIPLIER_HIGH, _MULTIPLIER_LOW = np.uint64(_PCG64_MULTIPLIER >> 64), np.uint64(_PCG64_MULTIPLIER & _MASK64)
LARGEST_32 = 0xFFFFFFFF  # numpy's largest 32-bit range (``high - 1 - low``): next_uint32 itself
_ALL_32 = np.uint64(LARGEST_32)


def _pcg64_step(high, low, increment_high, increment_low):
    """The LCG's next state (as halves): ``state * multiplier + increment`` modulo 2**128.
    Python's integers here (the uncompiled kernel); in kernels, one 128-bit multiply
    (``_register_pcg64``)."""
    value = ((int(high) << 64 | int(low)) * _PCG64_MULTIPLIER + (int(increment_high) << 64 | int(increment_low))) \
        & ((1 << 128) - 1)
    return np.uint64(value >> 64), np.uint64(value & _MASK64)


@helper(inline=True)
def _pcg64_output(high, low):
    """The 64 bits PCG64 outputs for state (high, low): XSL-RR (the halves xor-ed, rotated right
    by the top 6 bits)."""
    value = high ^ low
    rotation = high >> np.uint64(58)
    return (value >> rotation) | (value << ((np.uint64(64) - rotation) & np.uint64(63)))


@helper(inline=True)
def _pcg64_double(high, low):
    """The double ``Generator.random`` makes of the output of state (high, low): its top 53 bits
    over 2**53."""
    return (_pcg64_output(high, low) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@helper(inline=True)
def _row_keys_drawn(high, low, increment_high, increment_low, jumps, length, row_keys):
    """A row's keys as ``Generator.random`` draws ``width`` of them (``width``: ``jumps``' rows
    - 1): the first ``length`` into ``row_keys``, the rest, which no choice looks at, jumped
    over (:func:`_pcg64_jumps`: two 128-bit multiplies for up to ``width`` steps).  Returns the
    state past them all."""
    width = jumps.shape[0] - 1
    real = min(max(length, 0), width)
    for j in range(real):
        high, low = _pcg64_step(high, low, increment_high, increment_low)
        row_keys[j] = _pcg64_double(high, low)
    if real < width:
        jump = width - real
        added_high, added_low = _pcg64_multiply_add(increment_high, increment_low, jumps[jump, 2], jumps[jump, 3],
                                                    np.uint64(0), np.uint64(0))
        high, low = _pcg64_multiply_add(high, low, jumps[jump, 0], jumps[jump, 1], added_high, added_low)
    return high, low


@helper
def _pcg64_jumps(width):
    """``jumps[d]``: ``d`` steps of the LCG at once (uint64 halves: high, low of the multiplier,
    high, low of the increment's factor): ``state * multiplier**d + increment * (1 + multiplier
    + ... + multiplier**(d - 1))``, modulo 2**128, for d up to ``width``."""
    jumps = np.empty((width + 1, 4), np.uint64)
    power_high, power_low = np.uint64(0), np.uint64(1)
    total_high, total_low = np.uint64(0), np.uint64(0)
    for steps in range(width + 1):
        jumps[steps, 0], jumps[steps, 1] = power_high, power_low
        jumps[steps, 2], jumps[steps, 3] = total_high, total_low
        total_high, total_low = _pcg64_multiply_add(total_high, total_low, np.uint64(0), np.uint64(1), power_high,
                                                    power_low)
        power_high, power_low = _pcg64_multiply_add(power_high, power_low, _MULTIPLIER_HIGH, _MULTIPLIER_LOW,
                                                    np.uint64(0), np.uint64(0))
    return jumps


def _pcg64_multiply_add(a_high, a_low, b_high, b_low, c_high, c_low):
    """``a * b + c`` modulo 2**128, as halves: Python's integers here (the uncompiled kernel);
    in kernels, LLVM's 128-bit integers (``_register_pcg64``)."""
    value = ((int(a_high) << 64 | int(a_low)) * (int(b_high) << 64 | int(b_low)) + (int(c_high) << 64 | int(c_low))) \
        & ((1 << 128) - 1)
    return np.uint64(value >> 64), np.uint64(value & _MASK64)


_REGISTERING = threading.Lock()


def single_token_positions_drawn_compiled():
    """:func:`single_token_positions_drawn` compiled (its 128-bit step registered with numba
    first), or None when kernels are off."""
    return _with_pcg64(single_token_positions_drawn())


def _with_pcg64(compiled):
    if compiled is not None:
        with _REGISTERING:
            _register_pcg64()
    return compiled


@kernel
def token_ranges_masked(input_ids, lengths, is_special, bounds, states, budget, largest, positions, counts, draw,
                        random_index):
    """Per range k (rows ``bounds[k]:bounds[k + 1]``), from ``states[k]`` (``pcg64_states``'
    rows, advanced past the draws), ``mask_tokens``' draws in its order: the keys and their
    choice (:func:`single_token_positions_drawn`'s), ``rng.random((rows, slots))`` (``draw``),
    then ``rng.integers(0, largest + 1, (rows, slots))`` (``largest`` < 2**32): numpy's Lemire
    draw on ``next_uint32`` with its rejections (``buffered_bounded_lemire_uint32`` in
    numpy/random/src/distributions/distributions.c), PCG64's buffered upper half of an output
    (``has_uint32``, ``uinteger``; ``random`` leaves it alone) carried in and out."""
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
                        while (scaled & _ALL_32) < threshold:  # (numpy's first test, < excluded, is implied)
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
    """:func:`token_ranges_masked` compiled as :func:`single_token_positions_drawn_compiled` is."""
    return _with_pcg64(token_ranges_masked())


@functools.lru_cache(maxsize=None)
def _register_pcg64() -> None:
    """:func:`_pcg64_step` and :func:`_pcg64_multiply_add` in kernels: LLVM's 128-bit integers,
    one multiply and one add."""
    from llvmlite import ir
    from numba import types
    from numba.extending import intrinsic, overload

    i128, i64 = ir.IntType(128), ir.IntType(64)

    def multiply_add_codegen(multiplier=None):
        """(a * b + c) of halves (a_high, a_low, b_high, b_low, c_high, c_low), or with a constant
        ``multiplier``, (a * multiplier + c) of (a_high, a_low, c_high, c_low)."""
        def codegen(context, builder, signature, args):
            joined = [builder.or_(builder.shl(builder.zext(upper, i128), ir.Constant(i128, 64)),
                                  builder.zext(lower, i128)) for upper, lower in zip(args[::2], args[1::2])]
            if multiplier is not None:
                joined.insert(1, ir.Constant(i128, multiplier))
            value = builder.add(builder.mul(joined[0], joined[1]), joined[2])
            return context.make_tuple(builder, signature.return_type,
                                      [builder.trunc(builder.lshr(value, ir.Constant(i128, 64)), i64),
                                       builder.trunc(value, i64)])

        return codegen

    @intrinsic
    def multiply_add(typingctx, a_high, a_low, b_high, b_low, c_high, c_low):
        return types.UniTuple(types.uint64, 2)(*[types.uint64] * 6), multiply_add_codegen()

    @intrinsic
    def step(typingctx, high, low, increment_high, increment_low):
        return types.UniTuple(types.uint64, 2)(*[types.uint64] * 4), multiply_add_codegen(_PCG64_MULTIPLIER)

    @overload(_pcg64_multiply_add)
    def multiply_add_compiled(a_high, a_low, b_high, b_low, c_high, c_low):
        return lambda a_high, a_low, b_high, b_low, c_high, c_low: multiply_add(a_high, a_low, b_high, b_low, c_high,
                                                                                c_low)

    @overload(_pcg64_step)
    def step_compiled(high, low, increment_high, increment_low):
        return lambda high, low, increment_high, increment_low: step(high, low, increment_high, increment_low)


@helper
def _row_words(input_ids, marks, i, length, is_special, is_continuation, word_of, ends):
    """Row ``i``'s candidate tokens grouped into words (a continuation piece joins the candidate
    word before it): ``word_of[j]`` the word of token j (-1: not a candidate), ``ends[w]`` the
    tokens of the row's first w words; returns how many words."""
    words = 0
    ends[0] = 0
    for j in range(length):
        word_of[j] = -1
        token = input_ids[i, j]
        if token < len(is_special) and is_special[token]:
            continue
        if words == 0 or not is_continuation[marks[i, j]]:
            words += 1
            ends[words] = ends[words - 1]
        word_of[j] = words - 1
        ends[words] += 1
    return words


@helper
def _chosen_positions(word_of, chosen, length, positions, i):
    """The tokens of row ``i``'s chosen words (``chosen[word]``), ascending, in ``positions[i]``
    (as many as it holds); returns how many there are."""
    slots = positions.shape[1]
    count = 0
    for j in range(length):
        if word_of[j] >= 0 and chosen[word_of[j]]:
            if count < slots:
                positions[i, count] = j
            count += 1
    return count


@kernel
def whole_word_positions(input_ids, marks, lengths, is_special, is_continuation, keys, budget, positions, counts):
    """Per row, Google's whole-word choice: words (a continuation piece joins the candidate word
    before it) in the order of ``keys[i, :words]``, each taken while it fits in the budget and
    skipped when it would overflow; the chosen tokens ascending in ``positions[i, :counts[i]]``.

    Only the words whose keys are below a guess are ordered (about ``budget + 2 sqrt(budget) +
    2`` of them, more than the budget needs unless long words are skipped); when the greedy
    choice runs through them with budget left, all the row's words are."""
    n, width = input_ids.shape
    slots = positions.shape[1]
    word_of = np.empty(width, np.int64)  # -1: not a candidate
    ends = np.zeros(width + 1, np.int64)  # ends[w]: the tokens of the row's first w words
    taken = np.empty(width, np.bool_)
    below = np.empty(width, np.int64)  # words whose keys are below the guess
    order = np.empty(width, np.int64)
    for i in range(n):
        length = min(max(lengths[i], 0), width)
        words = _row_words(input_ids, marks, i, length, is_special, is_continuation, word_of, ends)
        for word in range(words):
            taken[word] = False
        wanted = min(budget[i], slots)  # (the budget is at most max_predictions)
        if words == 0 or wanted <= 0:
            counts[i] = 0
            continue
        guess = (wanted + 2.0 * np.sqrt(wanted) + 2.0) / words
        held = 0
        for word in range(words):
            below[held] = word
            held += keys[i, word] <= guess
        tie = False
        for attempt in range(2):
            if attempt == 1:  # the guess held too few words: order them all
                held = words
                for word in range(words):
                    below[word] = word
            # The rank of each held key is how many held keys are smaller; equal keys share a
            # rank and leave one unfilled (numpy's argsort may order them either way).
            for rank in range(held):
                order[rank] = -1
            for a in range(held):
                key = keys[i, below[a]]
                smaller = 0
                for b in range(held):
                    smaller += keys[i, below[b]] < key
                order[smaller] = below[a]
            for rank in range(held):
                tie |= order[rank] < 0
            if tie:
                break
            spent = 0
            for rank in range(held):
                word = order[rank]
                size = ends[word + 1] - ends[word]
                fits = spent + size <= wanted
                taken[word] = fits
                spent += fits * size
            if spent >= wanted or held == words:
                break  # every word has a token: nothing more fits
            for rank in range(held):
                taken[order[rank]] = False
        if tie:
            counts[i] = TIE
            continue
        counts[i] = _chosen_positions(word_of, taken, length, positions, i)


@kernel
def apply_masks(input_ids, positions, counts, draw, random_index, ordinary_ids, mask_id, mask_below, keep_below):
    """The 80/10/10 replacement of the chosen tokens: ``(masked, labels, weights)``, ``masked``
    each row of ``input_ids`` (int32) with [MASK] where ``draw < mask_below``, the token itself
    where ``draw < keep_below``, else ``ordinary_ids[random_index]``; ``labels`` the original
    tokens and ``weights`` 1.0 in the used slots, zero past them.  A row is copied, then masked,
    in one pass (no copy of the whole batch first)."""
    n, width = input_ids.shape
    slots = positions.shape[1]
    masked = np.empty((n, width), np.int32)
    labels = np.zeros((n, slots), np.int32)
    weights = np.zeros((n, slots), np.float32)
    for i in range(n):
        for j in range(width):
            masked[i, j] = input_ids[i, j]
        for slot in range(min(counts[i], slots)):
            position = positions[i, slot]
            original = input_ids[i, position]
            labels[i, slot] = original
            weights[i, slot] = 1.0
            chance = draw[i, slot]
            if chance < mask_below:
                masked[i, position] = mask_id
            elif chance < keep_below:
                masked[i, position] = original
            else:
                masked[i, position] = ordinary_ids[random_index[i, slot]]
    return masked, labels, weights


@helper
def _words_by_key(keys, i, words, order, filled):
    """Row ``i``'s first ``words`` words in ascending key order, into ``order``: a bucket sort
    (the keys are uniform: about one a bucket), then an insertion sort of what is left out of
    order (within buckets).  Returns whether two keys tie (the caller hands the row to the
    reference, whose unstable sort decides ties).  ``filled``: scratch, ``words + 1`` long."""
    for bucket in range(words + 1):
        filled[bucket] = 0
    for word in range(words):
        filled[min(max(int(keys[i, word] * words), 0), words - 1) + 1] += 1
    for bucket in range(words):
        filled[bucket + 1] += filled[bucket]
    for word in range(words):
        bucket = min(max(int(keys[i, word] * words), 0), words - 1)
        order[filled[bucket]] = word
        filled[bucket] += 1
    tie = False
    for rank in range(1, words):
        word = order[rank]
        key = keys[i, word]
        place = rank
        while place > 0 and keys[i, order[place - 1]] > key:
            order[place] = order[place - 1]
            place -= 1
        order[place] = word
        tie |= place > 0 and keys[i, order[place - 1]] == key
    return tie


@kernel
def ngram_positions(input_ids, marks, lengths, is_special, is_continuation, keys, size_draws, thresholds, budget,
                    positions, counts):
    """Per row, TF Model Garden's n-gram masking as the reference (``masking._choose_ngrams``)
    makes it: span starts (words, as whole-word masking groups them) in the order of
    ``keys[i, :words]``; the span at rank r has ``1 + #{k: size_draws[i, r] >= thresholds[m - 1, k]}``
    words (m: the sizes possible before the row's last word), shrunk to the longest that fits the
    budget; skipped when none fits or it touches a chosen word."""
    n, width = input_ids.shape
    largest = thresholds.shape[0]
    word_of = np.empty(width, np.int64)
    ends = np.zeros(width + 1, np.int64)  # ends[w]: the tokens of the row's first w words
    covered = np.zeros(width + largest, np.bool_)
    order = np.empty(width, np.int64)
    filled = np.empty(width + 1, np.int64)
    for i in range(n):
        length = min(max(lengths[i], 0), width)
        words = _row_words(input_ids, marks, i, length, is_special, is_continuation, word_of, ends)
        wanted = budget[i]
        if _words_by_key(keys, i, words, order, filled):
            counts[i] = TIE
            continue
        for word in range(words + largest):
            covered[word] = False
        taken = 0
        for rank in range(words):
            if taken >= wanted:
                break  # the reference accepts no span once the budget is spent
            start = order[rank]
            possible = min(max(words - start, 1), largest)
            drawn = 1
            for k in range(largest):
                drawn += size_draws[i, rank] >= thresholds[possible - 1, k]
            drawn = min(drawn, possible)
            size = 0  # the longest span of at most ``drawn`` words that fits the budget
            for span in range(1, drawn + 1):
                if taken + ends[min(start + span, words)] - ends[start] <= wanted:
                    size = span
            if size == 0:
                continue
            touching = False
            for k in range(size):
                touching |= covered[start + k]
            if touching:
                continue
            for k in range(size):
                covered[start + k] = True
            taken += ends[min(start + size, words)] - ends[start]
        counts[i] = _chosen_positions(word_of, covered, length, positions, i)


@kernel
def span_positions(candidates, starts, keys, length_draws, length_thresholds, budget, max_words, positions, counts):
    """Per row, SpanBERT's span masking as the reference (``span_masking.choose_spans``) makes it:
    words (``starts``: the candidates that start one) in the order of ``keys[i, :words]``, the
    span at rank r of ``1 + #{k: length_thresholds[k] <= length_draws[i, r]}`` words (numpy's
    ``searchsorted(..., side="right")``; fewer before the row's end), stopped before a chosen word
    and shrunk to the longest run of whole words that fits the budget."""
    n, width = candidates.shape
    word_of = np.empty(width, np.int64)
    ends = np.zeros(width + 1, np.int64)
    covered = np.zeros(width + max_words + 1, np.bool_)
    order = np.empty(width, np.int64)
    filled = np.empty(width + 1, np.int64)
    for i in range(n):
        words = 0
        for j in range(width):
            word_of[j] = -1
            if not candidates[i, j]:
                continue
            if starts[i, j]:
                words += 1
                ends[words] = ends[words - 1]
            if words > 0:  # (word_starts makes the first candidate after a gap a start: always so)
                word_of[j] = words - 1
                ends[words] += 1
        wanted = budget[i]
        if _words_by_key(keys, i, words, order, filled):
            counts[i] = TIE
            continue
        for word in range(words + max_words + 1):
            covered[word] = False
        taken = 0
        for rank in range(words):
            if taken >= wanted:
                break
            start = order[rank]
            drawn = 1
            for threshold in length_thresholds:
                drawn += threshold <= length_draws[i, rank]
            size = min(drawn, words - start)
            length = 0  # fits is true for a prefix of the sizes: its length is the span taken
            for span in range(1, max_words + 1):
                if covered[start + span - 1] or span > size:
                    break
                if taken + ends[min(start + span, words)] - ends[start] > wanted:
                    break
                length = span
            for k in range(length):
                covered[start + k] = True
            if length > 0:
                taken += ends[min(start + length, words)] - ends[start]
        counts[i] = _chosen_positions(word_of, covered, width, positions, i)
