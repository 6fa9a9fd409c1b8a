"""--pack_sequences packs each split as a whole, across its units (issue 30): fill at least 99%
for any seed on a corpus with enough short instances, rows that take instances of several units,
the same bytes for one and two workers and after --resume wherever the run stopped, and
``bert-data stats`` reporting the fill."""

import numpy as np
import pytest

from bert_data.cli.bert_data_cli import main as bert_data_main
from bert_data.format.manifest import Manifest
from bert_data.pipeline.instances import PairArrays
from bert_data.run import split_packing
from bert_data.run.resolve import generate
from bert_data.run.run_files import pairs_path, pool_path
from bert_data.run.split_packing import PairSources, gather_pairs, save_unit_pairs

from tests.helpers.corpus import corpus_config, file_hashes, make_corpus
from tests.helpers.interruptions import interrupted_at_append

OPTIONS = dict(max_seq_length=128, max_predictions_per_seq=19, split_num=10, dupe_factor=2, num_output_files=3)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    # 300 documents of 4 to 30 short sentences: about 2,000 instances, many shorter than a row.
    return make_corpus(tmp_path_factory.mktemp("split_packing"), n_docs=300, min_sentences=4, max_sentences=30,
                       words_per_doc=8)


def run(corpus, output, **options):
    generate(corpus_config(corpus, output, **dict(OPTIONS, pack_sequences=True, **options)), progress=False)
    return Manifest.read(str(output / "train" if options.get("val_fraction") else output))


@pytest.fixture
def packed_blocks(monkeypatch):
    """Each split's blocks as the run packs them: {unit: (member units, rows)}."""
    seen = {}
    blocks = split_packing.SplitPacker.blocks

    def spy(self, split):
        result = blocks(self, split)
        for unit, (rows, _) in result.items():
            seen[unit] = None if rows is None else (rows.sources.member_units.copy(), rows.pack_sizes.copy())
        return result

    monkeypatch.setattr(split_packing.SplitPacker, "blocks", spy)
    return seen


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_packed_split_fills_at_least_99_percent_for_any_seed(corpus, tmp_path, seed, packed_blocks, capsys):
    manifest = run(corpus, tmp_path / "packed", seed=seed)
    assert manifest.n_instances > 1500
    assert manifest.fill_rate >= 0.99
    # Rows take instances of several units: the first unit's, then later ones'.
    crossing = 0
    for unit, block in packed_blocks.items():
        if block is None:
            continue
        member_units, sizes = block
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        assert (member_units[starts] == unit).all() and (member_units >= unit).all()
        crossing += int((np.maximum.reduceat(member_units, starts) > unit).sum())
    assert crossing > 0
    assert bert_data_main(["stats", str(tmp_path / "packed")]) == 0
    assert f"{100 * manifest.fill_rate:.1f}% of the records' tokens are not padding" in capsys.readouterr().out


def test_whole_split_packing_fills_more_than_packing_each_unit(corpus, tmp_path):
    from bert_data.pipeline.masking import num_to_predict
    from bert_data.pipeline.packing import pack_instances

    lengths = {}
    original = split_packing.SplitPacker.add

    def keep(self, unit, unit_lengths):
        lengths[unit] = np.asarray(unit_lengths)
        return original(self, unit, unit_lengths)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(split_packing.SplitPacker, "add", keep)
        manifest = run(corpus, tmp_path / "packed", seed=3)
    k = manifest.max_sequences_per_pack
    per_unit_rows = sum(len(pack_instances(x, num_to_predict(x, 0.15, 19), 128, 19 + k, k)[1])
                        for x in lengths.values() if len(x))
    assert manifest.n_examples < per_unit_rows


def test_same_bytes_for_one_and_two_workers_with_a_validation_split(corpus, tmp_path):
    run(corpus, tmp_path / "one", val_fraction=0.2)
    run(corpus, tmp_path / "two", val_fraction=0.2, num_workers=2)
    assert file_hashes(tmp_path / "one") == file_hashes(tmp_path / "two")
    for split in ("train", "val"):
        assert Manifest.read(str(tmp_path / "one" / split)).fill_rate > 0.95


@pytest.mark.parametrize("stop_at, after", [(1, False), (3, True), (9, True)])
def test_resume_anywhere_gives_the_bytes_of_an_uninterrupted_run(corpus, tmp_path, stop_at, after):
    options = dict(val_fraction=0.2, records_per_file=300)
    run(corpus, tmp_path / "reference", **options)
    with interrupted_at_append(stop_at, after=after), pytest.raises(KeyboardInterrupt):
        run(corpus, tmp_path / "out", **options)
    run(corpus, tmp_path / "out", resume=True, **options)
    assert file_hashes(tmp_path / "out") == file_hashes(tmp_path / "reference")


def test_gathered_pairs_hold_the_tokens_of_their_units_pools(tmp_path):
    pools = {0: np.arange(100, 200, dtype=np.uint16), 1: np.arange(500, 540, dtype=np.uint16)}
    units_pairs = {0: PairArrays(np.array([1, 40, 70]), np.array([5, 10, 3]), np.array([20, 60, 90]),
                                 np.array([4, 0, 7]), np.array([False, True, False])),
                   1: PairArrays(np.array([0, 10]), np.array([8, 2]), np.array([30, 15]), np.array([5, 9]),
                                 np.array([True, False]))}
    for unit in pools:
        np.save(pool_path(str(tmp_path), unit), pools[unit])
        save_unit_pairs(units_pairs[unit], pairs_path(str(tmp_path), unit))
    member_units, members = np.array([1, 0, 0, 1, 0]), np.array([1, 2, 0, 0, 1])
    tokens, pairs = gather_pairs(PairSources(str(tmp_path), member_units, members))
    for i, (unit, member) in enumerate(zip(member_units, members)):
        source = units_pairs[int(unit)]
        pool = pools[int(unit)]
        a = pool[source.a_start[member]:source.a_start[member] + source.a_length[member]]
        b = pool[source.b_start[member]:source.b_start[member] + source.b_length[member]]
        assert tokens[pairs.a_start[i]:pairs.a_start[i] + pairs.a_length[i]].tolist() == a.tolist()
        assert tokens[pairs.b_start[i]:pairs.b_start[i] + pairs.b_length[i]].tolist() == b.tolist()
        assert pairs.is_random_next[i] == source.is_random_next[member]
