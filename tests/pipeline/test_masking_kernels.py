"""The compiled masking kernels (bert_data/pipeline/masking_kernels.py) against the reference
(numpy, ``BERT_DATA_COMPILED=0``): the same MaskedTokens, array for array, dtype for dtype, for
every way of choosing positions, rows without candidates, budgets at max_predictions_per_seq,
other 80/10/10 shares, equal keys (which the reference's unstable sorts order), and the same
draws left in the generator afterwards."""

from __future__ import annotations

import numpy as np
import pytest

from bert_data import compiled
from bert_data.pipeline import masking_kernels, pcg64_states
from bert_data.pipeline.masking import MaskingSpec, candidate_mask, mask_tokens, num_to_predict

from tests.pipeline.test_masking import CLS, IS_CONTINUATION, SEP, VOCAB, random_instances

SEPARATOR = 5  # a document separator: special, never masked
FIELDS = ("input_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


def batch(n=600, width=128, seed=0, continuation_rate=0.3):
    """Random rows with short and empty rows, rows of special tokens only, separators inside
    rows and the longest rows (budgets at max_predictions_per_seq)."""
    instances = random_instances(n, max_seq_length=width, seed=seed, continuation_rate=continuation_rate)
    ids, lengths = instances.input_ids.copy(), instances.lengths.copy()
    rng = np.random.default_rng(seed)
    ids[rng.random(ids.shape) < 0.02] = SEPARATOR
    lengths[:5] = 0  # nothing real
    ids[5:10, :4] = [CLS, SEP, SEPARATOR, SEP]
    lengths[5:10] = 4  # real tokens, none a candidate
    lengths[10:15] = 1
    ids[15:20, 1:] = rng.integers(500, 1000, size=(5, width - 1))  # one long word (continuations)
    lengths[15:20] = width
    lengths[20:40] = width
    return ids, lengths


def masked(ids, lengths, spec, rng, monkeypatch, compiled_on, word_starts=None):
    monkeypatch.setenv(compiled.DISABLE_VARIABLE, "1" if compiled_on else "0")
    assert compiled.kernels_enabled() == compiled_on  # numba is a dev dependency: the kernels must run
    return mask_tokens(ids, lengths, spec, VOCAB, rng, word_starts=word_starts)


def assert_same(kernel_out, reference_out):
    for name in FIELDS:
        ours, theirs = getattr(kernel_out, name), getattr(reference_out, name)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, name
        np.testing.assert_array_equal(ours, theirs, err_msg=name)


SPECS = [
    dict(),
    dict(whole_word=True),
    dict(max_predictions_per_seq=3),  # budgets hit max_predictions_per_seq
    dict(whole_word=True, max_predictions_per_seq=3),
    dict(masked_lm_prob=1.0, max_predictions_per_seq=128),  # every candidate, slots past the width's half
    dict(whole_word=True, masked_lm_prob=0.5, max_predictions_per_seq=80),
    dict(mask_token_share=0.5, random_token_share=0.5),
    dict(whole_word=True, mask_token_share=0.0, random_token_share=1.0),
    dict(mask_token_share=1.0, random_token_share=0.0),
    dict(max_ngram_size=3),
    dict(span=True),
]


@pytest.mark.parametrize("options", SPECS, ids=[",".join(f"{k}={v}" for k, v in o.items()) or "token" for o in SPECS])
@pytest.mark.parametrize("width", [128, 16])
def test_kernels_give_the_reference_masks(monkeypatch, options, width):
    options = {"masked_lm_prob": 0.15, "max_predictions_per_seq": min(20, width), **options}
    options["max_predictions_per_seq"] = min(options["max_predictions_per_seq"], width)
    spec = MaskingSpec(special_ids=(CLS, SEP, SEPARATOR), **options)
    for seed in range(3):
        ids, lengths = batch(width=width, seed=seed)
        first, second = np.random.default_rng(seed), np.random.default_rng(seed)
        ours = masked(ids, lengths, spec, first, monkeypatch, True)
        theirs = masked(ids, lengths, spec, second, monkeypatch, False)
        assert_same(ours, theirs)
        assert first.random() == second.random()  # the same draws taken, no more, no fewer
    assert ours.masked_lm_weights.sum() > 0


def test_other_id_types_and_an_empty_batch(monkeypatch):
    ids, lengths = batch(200, seed=4)
    for spec in (MaskingSpec(0.15, 20, special_ids=(CLS, SEP)), MaskingSpec(0.15, 20, True, special_ids=(CLS, SEP)),
                 MaskingSpec(0.15, 20, special_ids=())):
        for as_ids, as_lengths in ((np.int64, np.int64), (np.int32, np.int32), (np.uint16, np.int16)):
            ours = masked(ids.astype(as_ids), lengths.astype(as_lengths), spec, np.random.default_rng(1), monkeypatch, True)
            theirs = masked(ids.astype(as_ids), lengths.astype(as_lengths), spec, np.random.default_rng(1),
                            monkeypatch, False)
            assert_same(ours, theirs)
        empty = [masked(ids[:0], lengths[:0], spec, np.random.default_rng(1), monkeypatch, on) for on in (True, False)]
        assert_same(*empty)


class CoarseKeys:
    """A generator whose first draw (the keys that order the candidates) is coarse, so that
    equal keys are everywhere; the later draws are the generator's own."""

    def __init__(self, seed, levels):
        self.rng = np.random.default_rng(seed)
        self.levels = levels
        self.first = True

    def random(self, shape):
        if self.first:
            self.first = False
            return self.rng.integers(0, self.levels, size=shape) / self.levels
        return self.rng.random(shape)

    def integers(self, low, high, size):
        return self.rng.integers(low, high, size=size)


@pytest.mark.parametrize("options", [dict(), dict(whole_word=True), dict(max_ngram_size=3), dict(span=True)],
                         ids=["token", "whole_word", "ngram", "span"])
def test_equal_keys_are_ordered_as_the_reference_orders_them(monkeypatch, options):
    ids, lengths = batch(400, seed=5)
    spec = MaskingSpec(0.15, 20, special_ids=(CLS, SEP, SEPARATOR), **options)
    for levels in (4, 64, 4096):
        ours = masked(ids, lengths, spec, CoarseKeys(levels, levels), monkeypatch, True)
        theirs = masked(ids, lengths, spec, CoarseKeys(levels, levels), monkeypatch, False)
        assert_same(ours, theirs)


def positions_by_kernel(kernel, ids, lengths, spec, keys):
    is_special = np.zeros(max(spec.special_ids) + 1, dtype=bool)
    is_special[list(spec.special_ids)] = True
    budget = num_to_predict(lengths, spec.masked_lm_prob, spec.max_predictions_per_seq)
    positions = np.zeros((len(ids), spec.max_predictions_per_seq), dtype=np.int32)
    counts = np.zeros(len(ids), dtype=np.int64)
    if spec.whole_word:  # (the ids are their own marks)
        kernel()(ids, ids, lengths.astype(np.int64), is_special, IS_CONTINUATION, keys, budget, positions, counts)
    else:
        kernel()(ids, lengths.astype(np.int64), is_special, keys, budget, positions, counts)
    return positions, counts


@pytest.mark.parametrize("kernel", [masking_kernels.single_token_positions, masking_kernels.whole_word_positions])
def test_kernels_hand_rows_with_equal_keys_to_the_reference_and_choose_the_rest(kernel):
    """The equal-keys test above is not passed by the reference alone: the kernels choose most
    rows of coarse keys themselves and mark the others, and their choice honours the budget."""
    ids, lengths = batch(400, seed=6)
    spec = MaskingSpec(0.15, 20, kernel is masking_kernels.whole_word_positions, special_ids=(CLS, SEP, SEPARATOR))
    coarse = np.random.default_rng(6).integers(0, 4096, size=ids.shape) / 4096
    positions, counts = positions_by_kernel(kernel, ids, lengths, spec, coarse)
    tied = counts == masking_kernels.TIE
    assert 0 < tied.sum() < 0.9 * len(ids)
    _, fine = positions_by_kernel(kernel, ids, lengths, spec, np.random.default_rng(6).random(ids.shape))
    assert not (fine == masking_kernels.TIE).any()
    candidates = candidate_mask(ids, lengths, spec.special_ids)
    budget = num_to_predict(lengths, spec.masked_lm_prob, spec.max_predictions_per_seq)
    for row in np.flatnonzero(~tied):
        chosen = positions[row, :counts[row]]
        assert counts[row] <= budget[row] and (np.diff(chosen) > 0).all() and candidates[row, chosen].all()


def test_the_token_kernel_chooses_as_the_reference_when_its_guess_holds_too_few_keys():
    """The token kernel looks for the chosen among the keys below a guess (about take + 2
    sqrt(take) keys of uniform draws); rows whose small keys are few, or all at the top, make
    it widen the guess, and equal keys that end exactly at the take-th smallest (a choice the
    reference makes without ranking) are chosen, not handed over."""
    from bert_data.pipeline.masking import _single_tokens_by_keys

    ids, lengths = batch(300, seed=11)
    spec = MaskingSpec(0.15, 20, special_ids=(CLS, SEP, SEPARATOR))
    rng = np.random.default_rng(11)
    keys = rng.random(ids.shape)
    keys[40:80] = 0.9 + keys[40:80] / 10  # no key below any first guess
    keys[80:120] = np.where(rng.random((40, ids.shape[1])) < 0.05, keys[80:120] / 100, 0.5 + keys[80:120] / 2)
    budget = num_to_predict(lengths, spec.masked_lm_prob, spec.max_predictions_per_seq)
    candidates = candidate_mask(ids, lengths, spec.special_ids)
    for row in range(120, 160):  # the take smallest keys: two equal keys at ranks take-2 and take-1
        order = np.flatnonzero(candidates[row])[np.argsort(keys[row][candidates[row]])]
        take = min(budget[row], len(order))
        if take >= 2:
            keys[row, order[take - 1]] = keys[row, order[take - 2]]
    positions, counts = positions_by_kernel(masking_kernels.single_token_positions, ids, lengths, spec, keys)
    assert not (counts == masking_kernels.TIE).any()
    chosen = _single_tokens_by_keys(candidates, budget, spec.max_predictions_per_seq, keys)
    for row in range(len(ids)):
        np.testing.assert_array_equal(positions[row, :counts[row]], np.flatnonzero(chosen[row]), err_msg=str(row))


def test_the_kernels_run_uncompiled_too():
    """The loops themselves (numba's compilation aside) choose what the compiled kernels choose."""
    ids, lengths = batch(60, seed=7)
    keys = np.random.default_rng(7).random(ids.shape)
    for kernel in (masking_kernels.single_token_positions, masking_kernels.whole_word_positions):
        spec = MaskingSpec(0.15, 20, kernel is masking_kernels.whole_word_positions, special_ids=(CLS, SEP, SEPARATOR))
        plain = lambda kernel=kernel: kernel.python_function  # noqa: E731
        np.testing.assert_array_equal(np.concatenate(positions_by_kernel(plain, ids, lengths, spec, keys), axis=None),
                                      np.concatenate(positions_by_kernel(kernel, ids, lengths, spec, keys), axis=None))


@pytest.mark.parametrize("options", [dict(), dict(whole_word=True), dict(max_ngram_size=3), dict(span=True)],
                         ids=["token", "whole_word", "ngram", "span"])
def test_with_real_draws_the_kernels_choose_every_row(monkeypatch, options):
    """The differential test above is not passed by handing rows to the reference: with real
    draws (no equal keys) no row is."""
    from bert_data.pipeline import masking

    handed = []
    packed = masking._packed
    monkeypatch.setattr(masking, "_packed", lambda chosen, slots: handed.append(len(chosen)) or packed(chosen, slots))
    ids, lengths = batch(seed=8)
    spec = MaskingSpec(0.15, 20, special_ids=(CLS, SEP, SEPARATOR), **options)
    out = masked(ids, lengths, spec, np.random.default_rng(8), monkeypatch, True)
    assert handed == [] and out.masked_lm_weights.sum() > 0.1 * lengths.sum()


@pytest.mark.parametrize("options", [dict(whole_word=True), dict(max_ngram_size=3), dict(span=True)],
                         ids=["whole_word", "ngram", "span"])
def test_stored_word_starts_give_the_reference_masks(monkeypatch, options):
    """Words from stored starts (--store_word_starts) rather than the pieces' marks."""
    ids, lengths = batch(300, seed=9)
    starts = np.random.default_rng(9).random(ids.shape) < 0.6
    spec = MaskingSpec(0.15, 20, special_ids=(CLS, SEP, SEPARATOR), **options)
    ours = masked(ids, lengths, spec, np.random.default_rng(9), monkeypatch, True, word_starts=starts)
    theirs = masked(ids, lengths, spec, np.random.default_rng(9), monkeypatch, False, word_starts=starts)
    assert_same(ours, theirs)
    by_marks = masked(ids, lengths, spec, np.random.default_rng(9), monkeypatch, True)
    assert not np.array_equal(ours.masked_lm_positions, by_marks.masked_lm_positions)  # the starts were used


def drawn_positions(kernel, ids, lengths, spec, state):
    is_special = np.zeros(max(spec.special_ids) + 1, dtype=bool)
    is_special[list(spec.special_ids)] = True
    budget = num_to_predict(lengths, spec.masked_lm_prob, spec.max_predictions_per_seq)
    positions = np.zeros((len(ids), spec.max_predictions_per_seq), dtype=np.int32)
    counts = np.zeros(len(ids), dtype=np.int64)
    kernel(ids, lengths.astype(np.int64), is_special, state, budget, positions, counts)
    return positions, counts


@pytest.mark.parametrize("pending_half", [False, True])
def test_keys_drawn_in_the_kernel_are_numpys_and_the_generator_goes_on_as_numpys(pending_half):
    """The token kernel that draws its own keys (numpy's PCG64, in the kernel) chooses what the
    kernel given ``rng.random((n, width))`` chooses, and leaves the generator where that draw
    leaves it, a buffered 32-bit half of an earlier ``integers`` draw included (``random``
    does not use it; the next bounded draw does)."""
    ids, lengths = batch(300, seed=8)
    spec = MaskingSpec(0.15, 20, False, special_ids=(CLS, SEP, SEPARATOR))
    for seed in range(3):
        ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
        if pending_half:
            ours.integers(0, 1000, size=3), theirs.integers(0, 1000, size=3)
            assert ours.bit_generator.state["has_uint32"] == 1
        state = pcg64_states.pcg64_state(ours)
        drawn = drawn_positions(masking_kernels.single_token_positions_drawn_compiled(), ids, lengths, spec, state)
        pcg64_states.advance_to(ours, state)
        given = positions_by_kernel(masking_kernels.single_token_positions, ids, lengths, spec,
                                    theirs.random(ids.shape))
        np.testing.assert_array_equal(np.concatenate(drawn, axis=None), np.concatenate(given, axis=None))
        assert ours.bit_generator.state == theirs.bit_generator.state
        assert ours.integers(0, 1000, size=5).tolist() == theirs.integers(0, 1000, size=5).tolist()


def test_the_drawing_kernel_runs_uncompiled_too():
    """The loop and the 128-bit step in Python's integers (the kernel uncompiled) draw and
    choose what the compiled kernel (LLVM's 128-bit multiply) does."""
    ids, lengths = batch(40, seed=9)
    spec = MaskingSpec(0.15, 20, False, special_ids=(CLS, SEP, SEPARATOR))
    states = [pcg64_states.pcg64_state(np.random.default_rng(9)) for _ in range(2)]
    plain = drawn_positions(masking_kernels.single_token_positions_drawn.python_function, ids, lengths, spec,
                            states[0])
    compiled_ = drawn_positions(masking_kernels.single_token_positions_drawn_compiled(), ids, lengths, spec, states[1])
    np.testing.assert_array_equal(np.concatenate(plain, axis=None), np.concatenate(compiled_, axis=None))
    np.testing.assert_array_equal(states[0], states[1])


def test_rows_with_equal_keys_get_the_keys_drawn_again():
    """The rows the kernel hands to the reference (equal keys) are chosen from the same keys,
    drawn again from the generator's state before the kernel drew them."""
    from bert_data.pipeline.masking import _ReplayedKeys

    rng = np.random.default_rng(10)
    rng.integers(0, 9)
    replayed = _ReplayedKeys(rng.bit_generator.state, (40, 16))
    np.testing.assert_array_equal(replayed[np.array([3, 17, 39])], rng.random((40, 16))[[3, 17, 39]])


def test_another_bit_generator_takes_the_given_keys_path(monkeypatch):
    """Only PCG64 is drawn in the kernel; with another bit generator (here Philox) the keys are
    drawn by numpy and given, with the reference's masks and draws all the same."""
    ids, lengths = batch(200, seed=11)
    spec = MaskingSpec(0.15, 20, False, special_ids=(CLS, SEP, SEPARATOR))
    first, second = (np.random.Generator(np.random.Philox(11)) for _ in range(2))
    assert pcg64_states.pcg64_state(first) is None
    assert_same(masked(ids, lengths, spec, first, monkeypatch, True), masked(ids, lengths, spec, second, monkeypatch, False))
    assert first.random() == second.random()


@pytest.mark.parametrize("options", SPECS, ids=[",".join(f"{k}={v}" for k, v in o.items()) or "token" for o in SPECS])
@pytest.mark.parametrize("compiled_on", [True, False])
@pytest.mark.parametrize("stored_starts", [False, True])
def test_ranges_masked_together_are_each_range_masked_alone(monkeypatch, options, compiled_on, stored_starts):
    """``mask_token_ranges`` (an encode task's shards masked in one batch, each from its own
    generator) gives each range's rows exactly what ``mask_tokens`` gives them alone, and takes
    the same draws from each generator."""
    from bert_data.pipeline.masking import mask_token_ranges

    spec = MaskingSpec(special_ids=(CLS, SEP, SEPARATOR), **{"masked_lm_prob": 0.15, "max_predictions_per_seq": 20,
                                                             **options})
    ids, lengths = batch(n=600, seed=4)
    starts = (np.random.default_rng(1).random(ids.shape) < 0.6).astype(np.int32) if stored_starts else None
    bounds = [0, 1, 40, 41, 300, 302, 600]  # a one-row range, ranges of the special rows, uneven sizes
    monkeypatch.setenv(compiled.DISABLE_VARIABLE, "1" if compiled_on else "0")
    together = [np.random.default_rng([7, k]) for k in range(len(bounds) - 1)]
    alone = [np.random.default_rng([7, k]) for k in range(len(bounds) - 1)]
    ours = mask_token_ranges(ids, lengths, spec, VOCAB, together, bounds, starts)
    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        theirs = mask_tokens(ids[a:b], lengths[a:b], spec, VOCAB, alone[k],
                             word_starts=None if starts is None else starts[a:b])
        for name in FIELDS:
            part = getattr(ours, name)[a:b]
            assert part.dtype == getattr(theirs, name).dtype, name
            np.testing.assert_array_equal(part, getattr(theirs, name), err_msg=f"{name}, rows {a}:{b}")
        assert together[k].random() == alone[k].random()  # the same draws taken from the range's generator
    assert ours.masked_lm_weights[:, 0].sum() > 500
