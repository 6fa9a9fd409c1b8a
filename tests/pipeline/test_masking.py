"""Masked LM as Google's ``create_masked_lm_predictions`` (bert_data/pipeline/masking.py): how many positions,
which ones (uniform over candidates, whole words together), the 80/10/10 replacement split with
ordinary random tokens, and the same masks for the same seed."""

import random
from types import SimpleNamespace

import numpy as np

from bert_data.pipeline.instances import PairBatch, gather_instances
from bert_data.pipeline.masking import MaskingSpec, candidate_mask, mask_tokens, num_to_predict

CLS, SEP, MASK = 2, 3, 4
VOCAB_SIZE = 1000
ORDINARY = np.arange(10, VOCAB_SIZE, dtype=np.int32)
# Ids 500..999 are "##" continuation pieces.
IS_CONTINUATION = np.zeros(VOCAB_SIZE, dtype=bool)
IS_CONTINUATION[500:] = True


def random_instances(n, max_seq_length=128, seed=0, continuation_rate=0.0):
    rng = random.Random(seed)
    pairs = PairBatch()
    tokens = []
    for _ in range(n):
        total = rng.randint(2, max_seq_length - 3)
        len_a = rng.randint(1, total - 1)
        len_b = total - len_a

        def piece():
            if rng.random() < continuation_rate:
                return rng.randint(500, 999)
            return rng.randint(10, 499)

        pairs.a_start.append(len(tokens))
        pairs.a_length.append(len_a)
        tokens += [piece() for _ in range(len_a)]
        pairs.b_start.append(len(tokens))
        pairs.b_length.append(len_b)
        tokens += [piece() for _ in range(len_b)]
        pairs.is_random_next.append(rng.random() < 0.5)
    return gather_instances(np.asarray(tokens), pairs.arrays(), max_seq_length, CLS, SEP)


VOCAB = SimpleNamespace(mask_id=MASK, ordinary_ids=ORDINARY, is_continuation=IS_CONTINUATION)


def run(instances, seed=0, whole_word=False, prob=0.15, max_predictions=20):
    spec = MaskingSpec(prob, max_predictions, whole_word, special_ids=(CLS, SEP))
    return mask_tokens(instances.input_ids, instances.lengths, spec, VOCAB, np.random.default_rng(seed))


def test_num_to_predict_rounds_like_python():
    lengths = np.arange(0, 400)
    expected = [min(20, max(1, int(round(n * 0.15)))) for n in lengths]
    assert num_to_predict(lengths, 0.15, 20).tolist() == expected


def test_masks_respect_structure_and_counts():
    instances = random_instances(3000)
    batch = run(instances)
    budget = num_to_predict(instances.lengths, 0.15, 20)
    candidates = candidate_mask(instances.input_ids, instances.lengths, (CLS, SEP))
    n_real = batch.masked_lm_weights.sum(axis=1).astype(int)
    assert (n_real == np.minimum(budget, candidates.sum(axis=1))).all()
    for row in range(len(instances)):
        k = n_real[row]
        positions = batch.masked_lm_positions[row]
        assert (np.diff(positions[:k]) > 0).all()  # ascending, distinct
        assert (positions[k:] == 0).all() and (batch.masked_lm_ids[row, k:] == 0).all()
        assert candidates[row, positions[:k]].all()  # never [CLS], [SEP] or padding
        assert (batch.masked_lm_ids[row, :k] == instances.input_ids[row, positions[:k]]).all()
    # Unmasked positions are unchanged.
    changed = batch.input_ids != instances.input_ids
    rows, cols = np.nonzero(changed)
    masked = np.zeros_like(changed)
    for row in range(len(instances)):
        masked[row, batch.masked_lm_positions[row, : n_real[row]]] = True
    assert masked[rows, cols].all()


def test_replacement_split_is_80_10_10_and_random_tokens_are_ordinary():
    instances = random_instances(4000, seed=1)
    batch = run(instances, seed=3)
    weights = batch.masked_lm_weights.astype(bool)
    rows = np.broadcast_to(np.arange(len(instances))[:, None], weights.shape)[weights]
    positions = batch.masked_lm_positions[weights]
    now = batch.input_ids[rows, positions]
    original = batch.masked_lm_ids[weights]
    total = len(now)
    mask_share = (now == MASK).mean()
    kept_share = (now == original).mean()
    random_share = 1 - mask_share - kept_share
    assert abs(mask_share - 0.8) < 0.01
    assert abs(kept_share - 0.1) < 0.01  # random draws equal to the original are rare (1/990)
    assert abs(random_share - 0.1) < 0.01
    replaced = now[(now != MASK) & (now != original)]
    assert np.isin(replaced, ORDINARY).all()
    assert total > 35_000  # enough for the 0.01 tolerances above (about 7 sigma)


def test_positions_are_uniform_over_candidates():
    instances = random_instances(4000, seed=5)
    batch = run(instances, seed=8)
    # Relative position of each prediction within its row's candidates: uniform on [0, 1).
    candidates = candidate_mask(instances.input_ids, instances.lengths, (CLS, SEP))
    rank = np.cumsum(candidates, axis=1) - 1
    weights = batch.masked_lm_weights.astype(bool)
    rows = np.broadcast_to(np.arange(len(instances))[:, None], weights.shape)[weights]
    relative = rank[rows, batch.masked_lm_positions[weights]] / candidates.sum(axis=1)[rows]
    histogram = np.histogram(relative, bins=10, range=(0, 1))[0] / len(relative)
    assert (np.abs(histogram - 0.1) < 0.01).all()


def test_whole_word_masking_never_splits_a_word():
    instances = random_instances(2000, seed=2, continuation_rate=0.4)
    batch = run(instances, seed=4, whole_word=True)
    budget = num_to_predict(instances.lengths, 0.15, 20)
    candidates = candidate_mask(instances.input_ids, instances.lengths, (CLS, SEP))
    empty_rows = 0
    for row in range(len(instances)):
        ids = instances.input_ids[row]
        chosen = set(batch.masked_lm_positions[row, : int(batch.masked_lm_weights[row].sum())].tolist())
        assert len(chosen) <= budget[row]
        # Group candidate positions into words the way the reference does.
        words = []
        for position in np.nonzero(candidates[row])[0]:
            if IS_CONTINUATION[ids[position]] and words:
                words[-1].append(position)
            else:
                words.append([position])
        for word in words:
            inside = [p in chosen for p in word]
            assert all(inside) or not any(inside), (row, word, chosen)
        empty_rows += not chosen  # every word longer than the budget: nothing fits
    assert empty_rows < 0.01 * len(instances)
    share = batch.masked_lm_weights.sum() / instances.lengths.sum()
    assert 0.12 < share < 0.16


def test_same_seed_same_masks_and_different_seed_differs():
    instances = random_instances(500)
    first, second, other = run(instances, seed=1), run(instances, seed=1), run(instances, seed=2)
    for name in ("input_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name))
    assert not np.array_equal(first.masked_lm_positions, other.masked_lm_positions)


def test_tiny_instances_get_one_prediction():
    pairs = PairBatch(a_start=[0], a_length=[1], b_start=[1], b_length=[1], is_random_next=[1])
    batch = run(gather_instances(np.array([11, 12]), pairs.arrays(), 8, CLS, SEP))
    assert batch.masked_lm_weights.sum() == 1
    assert batch.masked_lm_positions[0, 0] in (1, 3)


class _Keys:
    """A stand-in generator whose first draw is the given keys (the choice of positions)."""

    def __init__(self, keys):
        self.keys = keys

    def random(self, shape):
        assert shape == self.keys.shape
        return self.keys.copy()


def test_single_token_choice_is_the_ranking_of_the_smallest_keys_even_with_equal_keys():
    """The threshold path chooses what ranking the keys chooses; keys equal at a row's threshold
    (coarse keys here, about 2**-40 a row with real draws) go through the ranking itself."""
    from bert_data.pipeline.masking import _choose_single_tokens, _choose_single_tokens_ranked

    rng = np.random.default_rng(3)
    instances = random_instances(400, seed=3)
    candidates = candidate_mask(instances.input_ids, instances.lengths, (CLS, SEP))
    for max_predictions in (5, 20, 200):
        budget = num_to_predict(instances.lengths, 0.15, max_predictions)
        take = np.minimum(budget, candidates.sum(axis=1))
        for keys in (rng.random(candidates.shape), rng.integers(0, 8, candidates.shape) / 8.0):
            chosen = _choose_single_tokens(candidates, budget, max_predictions, _Keys(keys))
            masked = keys.copy()
            masked[~candidates] = np.inf
            assert (chosen == _choose_single_tokens_ranked(masked, candidates, take, max_predictions)).all()
            assert (chosen.sum(axis=1) == take).all() and not (chosen & ~candidates).any()
