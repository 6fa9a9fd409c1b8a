"""The default masking of many ranges of rows in one compiled call
(``masking_kernels.token_ranges_masked``, ``masking._token_ranges_compiled``) against the per-range
reference (``mask_token_ranges``' loop of ``_choice`` and ``_replacement_draws``, numpy's own
draws): the same masks, draws and random-token indices, and every generator's full
``bit_generator.state`` (state, increment, the buffered 32-bit half) the same afterwards: ranges
of 0 and 1 rows, rows of length 0 and without candidates, ordinary-id counts at which Lemire's
bounded draw rejects often, generators that come in with a buffered half, equal keys, and the
cases that keep the loop (a generator given twice, another bit generator, kernels off)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from bert_data import compiled
from bert_data.pipeline import masking, masking_kernels, pcg64_states
from bert_data.pipeline.masking import MaskingSpec, mask_token_ranges

from tests.pipeline.test_masking import VOCAB
from tests.pipeline.test_masking_kernels import CLS, FIELDS, SEP, SEPARATOR, batch

SPEC = MaskingSpec(0.15, 20, special_ids=(CLS, SEP, SEPARATOR))


def generators(count, seed=7, pending_half=()):
    """``count`` generators (PCG64), those in ``pending_half`` after one bounded draw, which
    leaves the upper half of an output buffered for the next one."""
    made = [np.random.default_rng([seed, k]) for k in range(count)]
    for k in pending_half:
        made[k].integers(0, 7, size=1)
        assert made[k].bit_generator.state["has_uint32"] == 1
    return made


def states(rngs):
    return [rng.bit_generator.state for rng in rngs]


def loop_draws(ids, lengths, spec, vocab, rngs, bounds, monkeypatch):
    """The reference: each range's choice and replacement draws, numpy alone (kernels off)."""
    monkeypatch.setenv(compiled.DISABLE_VARIABLE, "0")
    n, slots = len(ids), spec.max_predictions_per_seq
    out = (np.zeros((n, slots), np.int32), np.zeros(n, np.int64), np.zeros((n, slots)), np.zeros((n, slots), np.int64))
    for rng, a, b in zip(rngs, bounds[:-1], bounds[1:]):
        out[0][a:b], out[1][a:b] = masking._choice(ids[a:b], lengths[a:b], spec, vocab, rng, None)
        out[2][a:b], out[3][a:b] = masking._replacement_draws(b - a, slots, vocab, rng)
    monkeypatch.setenv(compiled.DISABLE_VARIABLE, "1")
    return out


def batched_draws(ids, lengths, spec, vocab, rngs, bounds, monkeypatch):
    monkeypatch.setenv(compiled.DISABLE_VARIABLE, "1")
    assert compiled.kernels_enabled()  # numba is a dev dependency: the kernel must run
    drawn = masking._token_ranges_compiled(ids, lengths, spec, vocab, rngs, bounds)
    assert drawn is not None  # (the batched path ran: these tests are not passed by the loop)
    return drawn


def assert_same_draws(ours, theirs):
    for name, mine, reference in zip(("positions", "counts", "draw", "random_index"), ours, theirs):
        assert mine.dtype == reference.dtype and mine.shape == reference.shape, name
        np.testing.assert_array_equal(mine, reference, err_msg=name)


def uneven_bounds(n, seed):
    """Range ends over ``n`` rows: ranges of 0 and 1 rows among uneven ones."""
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.integers(0, n + 1, size=12))
    return [0, 0, 1, 1, *(int(c) for c in cuts if c > 1), n, n]


@pytest.mark.parametrize("width,slots,seed", [(128, 20, 0), (128, 20, 1), (16, 3, 2), (64, 1, 3), (128, 128, 4),
                                              (8, 8, 5), (1, 1, 6)])
def test_ranges_in_one_call_are_the_loops_masks_and_states(monkeypatch, width, slots, seed):
    ids, lengths = batch(n=300, width=max(width, 8), seed=seed)
    ids, lengths = ids[:, :width], np.minimum(lengths, width)
    lengths[40:50] = 0  # rows of length 0
    spec = MaskingSpec(0.15 if slots < width else 1.0, slots, special_ids=(CLS, SEP, SEPARATOR))
    bounds = uneven_bounds(len(ids), seed)
    pending = range(0, len(bounds) - 1, 3)  # every third generator with a buffered half
    ours, theirs = generators(len(bounds) - 1, seed, pending), generators(len(bounds) - 1, seed, pending)
    assert_same_draws(batched_draws(ids, lengths, spec, VOCAB, ours, bounds, monkeypatch),
                      loop_draws(ids, lengths, spec, VOCAB, theirs, bounds, monkeypatch))
    assert states(ours) == states(theirs)


@pytest.mark.parametrize("ordinary", [1, 2, 999, 30_000, 2 ** 31 + 1, 3 * 2 ** 30 + 7, 2 ** 32 - 1, 2 ** 32])
def test_bounded_integers_are_numpys_lemire_rejections_and_buffered_half_included(monkeypatch, ordinary):
    """Random-token indices at ordinary-id counts where numpy's Lemire draw rejects about half
    (2**31 + 1) or a quarter (3 * 2**30 + 7) of its products, where its threshold is 1
    (2**32 - 1), where it draws next_uint32 as it is (2**32) and where it draws nothing (1);
    generators coming in with and without a buffered half (the first draw takes it)."""
    vocab = SimpleNamespace(ordinary_ids=np.broadcast_to(np.int32(10), (ordinary,)),  # (a length, no memory)
                            is_continuation=VOCAB.is_continuation)
    ids, lengths = batch(n=120, width=32, seed=ordinary % 1000)
    spec = MaskingSpec(0.15, 5, special_ids=(CLS, SEP, SEPARATOR))
    bounds = [0, 1, 1, 30, 77, 120]
    ours, theirs = generators(5, 3, pending_half=(0, 3)), generators(5, 3, pending_half=(0, 3))
    mine = batched_draws(ids, lengths, spec, vocab, ours, bounds, monkeypatch)
    assert_same_draws(mine, loop_draws(ids, lengths, spec, vocab, theirs, bounds, monkeypatch))
    assert states(ours) == states(theirs)
    if ordinary > 1:
        assert mine[3].max() >= ordinary // 2 and (mine[3] < ordinary).all()
    for later_ours, later_theirs in zip(ours, theirs):  # and both go on the same
        assert later_ours.integers(0, 1000, size=3).tolist() == later_theirs.integers(0, 1000, size=3).tolist()


def test_the_bounded_draws_reject_what_numpy_rejects():
    """The rejection loop itself: with 2**31 + 1 ordinary ids, the kernel's indices over many
    draws are numpy's ``integers``, a draw that numpy rejected included (the count of 32-bit
    outputs taken is larger than the count of indices)."""
    kernel = masking_kernels.token_ranges_masked_compiled()
    ids = np.zeros((4000, 1), np.int32)  # one special token a row: no keys matter, no choice
    rng, reference = np.random.default_rng(5), np.random.default_rng(5)
    state = pcg64_states.pcg64_states([rng])
    out = [np.zeros((4000, 1), np.int32), np.zeros(4000, np.int64), np.zeros((4000, 1)), np.zeros((4000, 1), np.int64)]
    kernel(ids, np.zeros(4000, np.int64), np.ones(1, np.bool_), np.array([0, 4000]), state, np.ones(4000, np.int64),
           np.uint64(2 ** 31), *out)
    reference.random((4000, 1)), reference.random((4000, 1))
    np.testing.assert_array_equal(out[3], reference.integers(0, 2 ** 31 + 1, size=(4000, 1)))
    assert pcg64_states.pcg64_state_dict(state[0]) == reference.bit_generator.state
    plain = np.random.default_rng(5)
    plain.random((8000, 1))
    for outputs_taken in range(1, 10_000):  # the 64-bit outputs the indices took
        plain.bit_generator.random_raw()
        if plain.bit_generator.state["state"] == reference.bit_generator.state["state"]:
            break
    assert 2000 + 500 < outputs_taken < 10_000 - 1  # 4000 indices, two an output, and about 4000 rejected


def test_a_generator_given_for_two_ranges_keeps_the_loop(monkeypatch):
    """The loop draws the second range from where the first left the generator: one call from
    states read before it would not, so the loop runs (the same bytes either way)."""
    ids, lengths = batch(n=200, seed=8)
    shared = np.random.default_rng(1)
    assert masking._token_ranges_compiled(ids, lengths, SPEC, VOCAB, [shared, np.random.default_rng(2), shared],
                                          [0, 50, 120, 200]) is None
    assert shared.bit_generator.state == np.random.default_rng(1).bit_generator.state  # nothing drawn


@pytest.mark.parametrize("case", ["philox", "whole_word", "bounds_past_rows", "decreasing_bounds", "huge_vocab",
                                  "empty_vocab", "kernels_off"])
def test_the_loop_runs_where_the_one_call_does_not_apply(monkeypatch, case):
    ids, lengths = batch(n=100, seed=9)
    spec, vocab, bounds = SPEC, VOCAB, [0, 40, 100]
    rngs = generators(2)
    if case == "philox":
        rngs = [rngs[0], np.random.Generator(np.random.Philox(3))]
    spec = MaskingSpec(0.15, 20, whole_word=True, special_ids=(CLS, SEP)) if case == "whole_word" else spec
    bounds = {"bounds_past_rows": [0, 40, 101], "decreasing_bounds": [0, 60, 40]}.get(case, bounds)
    if case in ("huge_vocab", "empty_vocab"):
        ordinary = 2 ** 32 + 1 if case == "huge_vocab" else 0
        vocab = SimpleNamespace(ordinary_ids=np.broadcast_to(np.int32(10), (ordinary,)))
    monkeypatch.setenv(compiled.DISABLE_VARIABLE, "0" if case == "kernels_off" else "1")
    before = repr(states(rngs))  # (Philox's state holds arrays)
    assert masking._token_ranges_compiled(ids, lengths, spec, vocab, rngs, bounds) is None
    assert repr(states(rngs)) == before


def test_the_one_call_and_the_loop_with_kernels_off_give_the_same_bytes(monkeypatch):
    """``mask_token_ranges`` whole (the replacement applied): the one call, the loop of compiled
    choices, and numpy alone (kernels off) give the same masked rows and leave the same states."""
    ids, lengths = batch(n=500, seed=10)
    bounds = uneven_bounds(len(ids), 10)
    runs = {}
    one_call = masking._token_ranges_compiled
    for name in ("one_call", "loop", "kernels_off"):
        monkeypatch.setenv(compiled.DISABLE_VARIABLE, "0" if name == "kernels_off" else "1")
        rngs = generators(len(bounds) - 1, 10, pending_half=(1, 2))
        calls = []
        monkeypatch.setattr(masking, "_token_ranges_compiled", lambda *args, loop=name != "one_call":
                            calls.append(1) or (None if loop else one_call(*args)))
        runs[name] = mask_token_ranges(ids, lengths, SPEC, VOCAB, rngs, bounds), states(rngs)
        assert calls == [1]
    for name in ("loop", "kernels_off"):
        for field in FIELDS:
            mine, theirs = getattr(runs["one_call"][0], field), getattr(runs[name][0], field)
            assert mine.dtype == theirs.dtype
            np.testing.assert_array_equal(mine, theirs, err_msg=f"{field} against {name}")
        assert runs["one_call"][1] == runs[name][1]
    assert runs["one_call"][0].masked_lm_weights.sum() > 1000


def test_rows_with_equal_keys_are_chosen_by_the_reference_from_their_ranges_keys(monkeypatch):
    """Rows the kernel marks TIE (equal keys: about 2**-40 of the rows with real draws; here
    marked on purpose, their positions scribbled over) are chosen by the reference from their
    own range's keys, drawn again from that range's generator as it came in."""
    ids, lengths = batch(n=300, seed=12)
    bounds = [0, 0, 1, 90, 91, 200, 300]
    kernel = masking_kernels.token_ranges_masked_compiled()
    marked = np.array([0, 5, 89, 90, 150, 199, 299])

    def marking(*args):
        kernel(*args)
        positions, counts = args[7], args[8]
        counts[marked], positions[marked] = masking_kernels.TIE, 7

    monkeypatch.setattr(masking, "token_ranges_masked_compiled", lambda: marking)
    ours, theirs = generators(len(bounds) - 1, 12, (1, 3)), generators(len(bounds) - 1, 12, (1, 3))
    assert_same_draws(batched_draws(ids, lengths, SPEC, VOCAB, ours, bounds, monkeypatch),
                      loop_draws(ids, lengths, SPEC, VOCAB, theirs, bounds, monkeypatch))
    assert states(ours) == states(theirs)


def test_the_kernel_runs_uncompiled_too():
    """The loop in Python (Python's integers for the 128-bit step) draws and chooses what the
    compiled kernel does, with a buffered half and Lemire's rejections."""
    ids, lengths = batch(n=30, width=24, seed=13)
    outputs = []
    for kernel in (masking_kernels.token_ranges_masked.python_function,
                   masking_kernels.token_ranges_masked_compiled()):
        state = pcg64_states.pcg64_states(generators(3, 13, pending_half=(1,)))
        out = [np.zeros((30, 4), np.int32), np.zeros(30, np.int64), np.zeros((30, 4)), np.zeros((30, 4), np.int64)]
        kernel(ids, lengths.astype(np.int64), np.array([0, 0, 1, 1, 0, 1], np.bool_), np.array([0, 10, 11, 30]),
               state, np.full(30, 3, np.int64), np.uint64(2 ** 31), *out)
        outputs.append((out, state))
    for mine, theirs in zip(outputs[0][0], outputs[1][0]):
        np.testing.assert_array_equal(mine, theirs)
    np.testing.assert_array_equal(outputs[0][1], outputs[1][1])


@pytest.mark.parametrize("compiled_on", [True, False])
def test_keys_past_a_rows_real_tokens_are_jumped_over_as_numpy_advances(compiled_on):
    """The keys no choice looks at (past a row's length) are not drawn: the state jumps over
    them (``masking_kernels._row_keys_drawn``), to where numpy's ``PCG64.advance`` puts it, and
    the keys drawn are ``random``'s."""
    width = 40
    row_keys_drawn = masking_kernels._row_keys_drawn
    if compiled_on:
        import numba

        assert masking_kernels.token_ranges_masked_compiled() is not None  # (the helpers registered with numba)
        drawn = masking_kernels._row_keys_drawn
        row_keys_drawn = numba.njit(lambda high, low, increment_high, increment_low, jumps, length, keys:
                                    drawn(high, low, increment_high, increment_low, jumps, length, keys))
    jumps = masking_kernels._pcg64_jumps(width)
    for length in (-3, 0, 1, 17, width - 1, width, width + 5):
        rng = np.random.default_rng(length + 100)
        state = pcg64_states.pcg64_state(rng)
        keys = np.zeros(width)
        high, low = row_keys_drawn(state[0], state[1], state[2], state[3], jumps, length, keys)
        real = min(max(length, 0), width)
        np.testing.assert_array_equal(keys[:real], rng.random(real))
        rng.bit_generator.advance(width - real)
        assert (int(high) << 64 | int(low)) == rng.bit_generator.state["state"]["state"], length


def test_mask_tokens_draws_in_the_one_call_as_numpy_does(monkeypatch):
    """``mask_tokens`` (one chunk, one generator: the writer's unbatched chunks, load-time masks)
    takes the one call too: the bytes and the full state of numpy alone (kernels off)."""
    from bert_data.pipeline.masking import mask_tokens

    ids, lengths = batch(n=400, seed=14)
    calls = []
    one_call = masking._token_ranges_compiled
    monkeypatch.setattr(masking, "_token_ranges_compiled",
                        lambda *args: calls.append(one_call(*args)) or calls[-1])
    runs = []
    for on in ("1", "0"):
        monkeypatch.setenv(compiled.DISABLE_VARIABLE, on)
        rng = generators(1, 14, pending_half=(0,))[0]
        runs.append((mask_tokens(ids, lengths, SPEC, VOCAB, rng), rng.bit_generator.state))
    assert [drawn is not None for drawn in calls] == [True, False]  # (the one call, then numpy alone)
    assert runs[0][1] == runs[1][1]
    for field in FIELDS:
        np.testing.assert_array_equal(getattr(runs[0][0], field), getattr(runs[1][0], field), err_msg=field)
