"""The packer and the packed layout (bert_data.pipeline.packing), without the generator: rows hold what
they should, unpack to their instances, and a BERT sees no instance from another."""

import numpy as np
import pytest

from bert_data.format.dataset import describe_layout, layout_flags
from bert_data.format.layout import feature_specs, is_packed
from bert_data.format.packed_rows import packed_from_rows, packed_to_rows
from bert_data.pipeline.packing import (block_diagonal_mask, cu_seqlens, fill_rate, pack_columns, pack_instances,
                                        pack_split, packed_predictions, plan_rows, row_members, unpack_rows)


def instances(lengths, width, seed=0, masked=True):
    """Masked NSP instances of the given lengths (ids from 10 on; [CLS] 1, [SEP] 2)."""
    rng = np.random.default_rng(seed)
    n = len(lengths)
    ids = np.zeros((n, width), dtype=np.int32)
    segments = np.zeros((n, width), dtype=np.int32)
    positions = np.zeros((n, 4), dtype=np.int32)
    labels = np.zeros((n, 4), dtype=np.int32)
    weights = np.zeros((n, 4), dtype=np.float32)
    for i, length in enumerate(lengths):
        ids[i, :length] = rng.integers(10, 100, length)
        ids[i, 0] = 1
        ids[i, length - 1] = 2
        segments[i, length // 2:length] = 1
        chosen = np.sort(rng.choice(np.arange(1, length - 1), size=min(2, length - 2), replace=False))
        positions[i, :len(chosen)] = chosen
        labels[i, :len(chosen)] = ids[i, chosen]
        weights[i, :len(chosen)] = 1.0
    columns = {"input_ids": ids, "segment_ids": segments, "next_sentence_labels": rng.integers(0, 2, (n, 1))}
    if masked:
        columns.update(masked_lm_positions=positions, masked_lm_ids=labels, masked_lm_weights=weights)
    return columns


def best_fit_rows(lengths, capacity, max_per_pack):
    """The oracle: best-fit decreasing instance by instance (longest first, each into the open
    row with the least room that takes it, else a new row): the number of rows."""
    rooms = []
    for length in sorted(lengths, reverse=True):
        fits = [(room, r) for r, (room, n) in enumerate(rooms) if room >= length and n < max_per_pack]
        if fits:
            _, r = min(fits)
            rooms[r] = (rooms[r][0] - length, rooms[r][1] + 1)
        else:
            rooms.append((capacity - length, 1))
    return len(rooms)


def test_histogram_packing_fills_rows_as_best_fit_and_keeps_every_instance_once():
    rng = np.random.default_rng(1)
    lengths = np.concatenate([np.full(300, 64), rng.integers(5, 64, 700)])
    rng.shuffle(lengths)
    order, sizes = pack_instances(lengths, np.ones_like(lengths), 64, 100, 3)
    assert sorted(order.tolist()) == list(range(len(lengths)))
    assert sizes.sum() == len(lengths) and sizes.max() <= 3 and sizes.min() >= 1
    row_of = np.repeat(np.arange(len(sizes)), sizes)
    per_row = np.bincount(row_of, weights=lengths[order])
    assert per_row.max() <= 64
    # Within a row instances keep their order; rows come in the order of their first instance.
    members = [order[row_members(sizes, [r])] for r in range(len(sizes))]
    assert all(list(m) == sorted(m) for m in members)
    firsts = [m[0] for m in members]
    assert firsts == sorted(firsts)
    assert len(sizes) == best_fit_rows(lengths.tolist(), 64, 3)
    again = pack_instances(lengths, np.ones_like(lengths), 64, 100, 3)
    assert np.array_equal(again[0], order) and np.array_equal(again[1], sizes)


@pytest.mark.parametrize("seed", range(40))
def test_the_histogram_plan_makes_as_few_rows_as_best_fit_instance_by_instance(seed):
    rng = np.random.default_rng(seed)
    capacity, max_per_pack = int(rng.integers(8, 40)), int(rng.integers(2, 7))
    lengths = rng.integers(1, capacity + 1, int(rng.integers(1, 300)))
    order, sizes = pack_instances(lengths, np.ones_like(lengths), capacity, 100, max_per_pack)
    assert len(sizes) == best_fit_rows(lengths.tolist(), capacity, max_per_pack)
    assert sorted(order.tolist()) == list(range(len(lengths))) and sizes.max() <= max_per_pack
    row_of = np.repeat(np.arange(len(sizes)), sizes)
    assert np.bincount(row_of, weights=lengths[order]).max() <= capacity


def test_the_plan_is_a_histogram_of_kinds_not_of_instances():
    # A million instances of three kinds: the plan has a handful of pack groups.
    plan = plan_rows([400, 100, 12], [60, 15, 2], [500_000, 300_000, 200_000], 512, 79, 3)
    assert len(plan) < 10
    assert sum(count * len(kinds) for kinds, count in plan) == 1_000_000
    lengths = np.array([400, 100, 12])
    assert all(lengths[list(kinds)].sum() <= 512 and len(kinds) <= 3 for kinds, _ in plan)


def test_the_prediction_budget_caps_a_row():
    lengths = np.full(6, 10)
    order, sizes = pack_instances(lengths, np.full(6, 5), 64, 10, 6)
    assert sizes.tolist() == [2, 2, 2]  # tokens would allow 6 a row, predictions only 2
    with pytest.raises(ValueError, match="lengths"):
        pack_instances([65], [1], 64, 10, 3)


def test_row_members_follow_the_rows_asked_for():
    sizes = np.array([2, 1, 3])
    assert row_members(sizes, [2, 0]).tolist() == [3, 4, 5, 0, 1]
    assert row_members(sizes, []).tolist() == []


def test_packed_columns_are_graphcores_layout_and_unpack_to_the_instances():
    lengths = np.array([7, 5, 9, 12])
    columns = instances(lengths, 16)
    packed = pack_columns(columns, lengths, np.array([3, 1]), 24, 3, packed_predictions(4, 3))
    mask, positions = packed["input_mask"], packed["positions"]
    assert mask[0].tolist() == [1] * 7 + [2] * 5 + [3] * 9 + [0] * 3
    assert positions[0].tolist() == list(range(7)) + list(range(5)) + list(range(9)) + [0] * 3
    assert mask[1].tolist() == [1] * 12 + [0] * 12
    assert packed["next_sentence_positions"].tolist() == [[0, 7, 12], [0, 0, 0]]
    assert packed["next_sentence_weights"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert packed["next_sentence_labels"][0].tolist() == columns["next_sentence_labels"][:3, 0].tolist()
    assert packed["masked_lm_positions"].shape == (2, 7)
    # The [CLS] of each instance is where next_sentence_positions says.
    assert (packed["input_ids"][0][packed["next_sentence_positions"][0]] == 1).all()
    # Weights hold the instance index of each prediction; ids are those at the positions.
    weights = packed["masked_lm_weights"][0]
    assert weights.tolist() == [1, 1, 2, 2, 3, 3, 0]
    row = packed["masked_lm_positions"][0][weights > 0]
    assert (mask[0][row] == weights[weights > 0]).all()
    unpacked = [instance for row in unpack_rows(packed) for instance in row]
    assert len(unpacked) == 4
    for i, instance in enumerate(unpacked):
        assert instance["input_ids"].tolist() == columns["input_ids"][i, :lengths[i]].tolist()
        assert instance["segment_ids"].tolist() == columns["segment_ids"][i, :lengths[i]].tolist()
        keep = columns["masked_lm_weights"][i] > 0
        assert instance["masked_lm_positions"].tolist() == columns["masked_lm_positions"][i][keep].tolist()
        assert instance["masked_lm_ids"].tolist() == columns["masked_lm_ids"][i][keep].tolist()
        assert instance["next_sentence_label"] == columns["next_sentence_labels"][i, 0]
    assert fill_rate(mask) == (7 + 5 + 9 + 12) / 48


def test_rows_that_overflow_are_refused():
    lengths = np.array([10, 10])
    with pytest.raises(ValueError, match="tokens"):
        pack_columns(instances(lengths, 16), lengths, np.array([2]), 16, 3)
    with pytest.raises(ValueError, match="instances"):
        pack_columns(instances(lengths, 16), lengths, np.array([2]), 32, 1)


def test_attention_helpers():
    mask = np.array([[1, 1, 2, 2, 2, 0], [1, 1, 1, 1, 1, 1]])
    blocks = block_diagonal_mask(mask)
    assert blocks.shape == (2, 1, 6, 6) and blocks.dtype == bool
    assert blocks[0, 0, 0].tolist() == [True, True, False, False, False, False]
    assert blocks[0, 0, 3].tolist() == [False, False, True, True, True, False]
    assert not blocks[0, 0, :, 5].any()
    assert blocks[1].all()
    assert cu_seqlens(mask).tolist() == [0, 2, 5, 6, 12]


def test_packed_layouts_are_recognised():
    specs = feature_specs(128, 23, max_sequences_per_pack=3)
    assert is_packed(specs) and not is_packed(feature_specs(128, 20))
    flags = layout_flags(specs)
    assert flags["packed"] and flags["max_sequences_per_pack"] == 3 and flags["max_predictions_per_seq"] == 23
    assert "packed (up to 3 a row)" in describe_layout(specs)
    mlm = feature_specs(128, 23, mlm_only=True, max_sequences_per_pack=2)
    assert [s.name for s in mlm] == ["input_ids", "input_mask", "positions", "masked_lm_positions", "masked_lm_ids",
                                     "masked_lm_weights"]
    assert layout_flags(mlm)["packed"] and layout_flags(mlm)["max_sequences_per_pack"] is None


def test_no_cross_contamination_in_a_tiny_bert():
    """The masked-LM logits of a packed row, with its position ids and block-diagonal mask, are
    those of each instance run alone; without the mask they are not."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64)
    model = transformers.BertForMaskedLM(config).eval()
    lengths = np.array([11, 6, 14, 20, 9])
    columns = instances(lengths, 24, seed=3)
    packed = pack_columns(columns, lengths, np.array([3, 2]), 32, 3)

    def tensor(array):
        return torch.as_tensor(np.asarray(array), dtype=torch.long)

    with torch.no_grad():
        logits = model(input_ids=tensor(packed["input_ids"]), token_type_ids=tensor(packed["segment_ids"]),
                       position_ids=tensor(packed["positions"]),
                       attention_mask=torch.as_tensor(block_diagonal_mask(packed["input_mask"]))).logits
        leaky = model(input_ids=tensor(packed["input_ids"]), token_type_ids=tensor(packed["segment_ids"]),
                      attention_mask=tensor(packed["input_mask"] > 0)).logits
        i = 0
        for row, size in enumerate([3, 2]):
            start = 0
            for _ in range(size):
                length = lengths[i]
                alone = model(input_ids=tensor(columns["input_ids"][i:i + 1, :length]),
                              token_type_ids=tensor(columns["segment_ids"][i:i + 1, :length])).logits[0]
                torch.testing.assert_close(logits[row, start:start + length], alone, atol=1e-5, rtol=1e-4)
                start += length
                i += 1
    assert (leaky[0, :11] - logits[0, :11]).abs().max() > 1e-3


def test_transformers_rows_of_packed_columns_round_trip():
    lengths = np.array([7, 5, 9, 12, 6])
    packed = pack_columns(instances(lengths, 16), lengths, np.array([3, 2]), 24, 3)
    rows = packed_to_rows(packed, "sentence_order_label")
    assert "attention_mask" not in rows
    assert rows["offsets"].tolist() == [0, 21, 39]
    assert rows["instance_offsets"].tolist() == [0, 3, 5]
    assert rows["position_ids"][:8].tolist() == list(range(7)) + [0]
    cut = lambda name, offsets="offsets": [rows[name][a:b] for a, b in zip(rows[offsets], rows[offsets][1:])]  # noqa
    lists = {name: cut(name) for name in ("input_ids", "token_type_ids", "position_ids", "labels")}
    lists.update({name: cut(name, "instance_offsets") for name in ("sentence_order_label", "next_sentence_positions")})
    back = packed_from_rows(lists, 24, 7, 3)
    assert set(back) == set(packed)
    for name, value in packed.items():
        assert np.array_equal(back[name], value), name


def test_a_split_packs_across_units_each_row_in_the_block_of_its_first_instance():
    rng = np.random.default_rng(3)
    # Unit 0 has only long instances, unit 2 only short ones: their rows need each other.
    units = [rng.integers(40, 64, 200), rng.integers(5, 64, 300), rng.integers(3, 12, 250)]
    budgets = [np.ones_like(lengths) for lengths in units]
    blocks = pack_split(units, budgets, 64, 100, 4)
    seen = []
    for unit, block in enumerate(blocks):
        assert len(block.member_units) == len(block.members) == block.sizes.sum()
        if not len(block.sizes):  # (every instance of the unit went to rows of units before it)
            continue
        starts = np.concatenate([[0], np.cumsum(block.sizes)[:-1]])
        assert (block.member_units[starts] == unit).all() and (block.member_units >= unit).all()
        tokens = np.array([units[u][i] for u, i in zip(block.member_units, block.members)])
        assert np.add.reduceat(tokens, starts).max() <= 64 and block.sizes.max() <= 4
        seen += list(zip(block.member_units.tolist(), block.members.tolist()))
    assert sorted(seen) == [(u, i) for u, lengths in enumerate(units) for i in range(len(lengths))]
    assert any((block.member_units > unit).any() for unit, block in enumerate(blocks))
    everything = np.concatenate(units)
    n_rows = sum(len(block.sizes) for block in blocks)
    assert n_rows == len(pack_instances(everything, np.ones_like(everything), 64, 100, 4)[1])
    assert n_rows < sum(len(pack_instances(x, np.ones_like(x), 64, 100, 4)[1]) for x in units)
    again = pack_split(units, budgets, 64, 100, 4)
    assert all(np.array_equal(a.members, b.members) and np.array_equal(a.sizes, b.sizes)
               for a, b in zip(blocks, again))
