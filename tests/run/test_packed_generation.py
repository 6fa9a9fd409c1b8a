"""--pack_sequences end to end: a packed run holds exactly the pairs of the unpacked run of the
same options and seed, arranged in rows; same bytes for any number of workers; resume; the
manifest records the packing; bad options are refused."""

from collections import Counter

import numpy as np
import pytest

from bert_data.config import ConfigError
from bert_data.format.manifest import Manifest
from bert_data.run.resolve import generate
from bert_data.load import read_batches
from bert_data.pipeline.packing import unpack_rows

from tests.helpers.corpus import corpus_config, file_hashes, make_corpus
from tests.helpers.interruptions import interrupted_at_append


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    # Short documents and a short target now and then: many instances shorter than a row.
    return make_corpus(tmp_path_factory.mktemp("packed_corpus"), n_docs=24, min_sentences=4, max_sentences=14)


def run(corpus, output, **options):
    options = dict(dict(max_seq_length=48, max_predictions_per_seq=8, short_seq_prob=0.3, split_num=8,
                        num_output_files=2), **options)
    generate(corpus_config(corpus, output, **options), progress=False)
    return Manifest.read(str(output))


def originals(batch):
    """input_ids with the masked positions given back their original ids."""
    ids = np.array(batch["input_ids"])
    if "masked_lm_positions" in batch:
        rows = np.arange(len(ids))[:, None].repeat(batch["masked_lm_positions"].shape[1], axis=1)
        used = batch["masked_lm_weights"] > 0
        ids[rows[used], batch["masked_lm_positions"][used]] = batch["masked_lm_ids"][used]
    return ids


def instance_pairs(output):
    """Every instance of a dataset as (A ids, B ids, label), unmasked, packed or not."""
    found = Counter()
    for batch in read_batches(str(output), batch_size=64, canonical_names=True):
        if "positions" in batch:
            instances = [instance for row in unpack_rows(batch) for instance in row]
            for instance in instances:
                ids = instance["input_ids"].copy()
                ids[instance["masked_lm_positions"]] = instance["masked_lm_ids"]
                found[key(ids, instance.get("segment_ids"), instance.get("next_sentence_label"))] += 1
        else:
            ids = originals(batch)
            for r in range(len(ids)):
                real = batch["input_mask"][r] > 0
                segments = batch["segment_ids"][r][real] if "segment_ids" in batch else None
                label = int(batch["next_sentence_labels"][r][0]) if "next_sentence_labels" in batch else None
                found[key(ids[r][real], segments, label)] += 1
    return found


def key(ids, segments, label):
    if segments is None:
        return tuple(ids.tolist()), label
    return tuple(ids[segments == 0].tolist()), tuple(ids[segments == 1].tolist()), label


@pytest.mark.parametrize("options", [{}, {"sentence_order_prediction": True},
                                     {"mlm_only": True, "short_seq_prob": 0.5, "min_short_seq_length": 20}])
def test_packed_run_holds_the_pairs_of_the_unpacked_run(corpus, tmp_path, options):
    plain = run(corpus, tmp_path / "plain", **options)
    packed = run(corpus, tmp_path / "packed", pack_sequences=True, **options)
    assert instance_pairs(tmp_path / "packed") == instance_pairs(tmp_path / "plain")
    assert packed.n_instances == plain.n_instances == plain.n_examples
    assert packed.n_examples < plain.n_examples
    assert packed.fill_rate > plain.fill_rate
    # The default: 16 a row, or as many of the shortest instances as fit (5 tokens, MLM-only 3).
    k = min(16, 48 // (3 if options.get("mlm_only") else 5))
    assert packed.packed and packed.max_sequences_per_pack == k
    names = [spec.name for spec in packed.specs]
    assert "positions" in names and ("next_sentence_positions" in names) == (not options.get("mlm_only"))
    assert sum(packed.examples_per_file.values()) == packed.n_examples
    for batch in read_batches(str(tmp_path / "packed"), batch_size=1000):
        mask = batch["input_mask"]
        assert mask.max() <= k
        assert np.isclose((mask > 0).mean(), packed.fill_rate)
        # The predictions of a row point at tokens of the instance their weight names.
        weights = batch["masked_lm_weights"]
        rows = np.nonzero(weights > 0)[0]
        assert (mask[rows, batch["masked_lm_positions"][weights > 0]] == weights[weights > 0]).all()


def test_masks_follow_googles_budget_in_each_instance(corpus, tmp_path):
    run(corpus, tmp_path / "packed", pack_sequences=True, max_sequences_per_pack=4)
    for batch in read_batches(str(tmp_path / "packed"), batch_size=1000):
        for row in unpack_rows(batch):
            assert 1 <= len(row) <= 4
            for instance in row:
                expected = min(8, max(1, round(len(instance["input_ids"]) * 0.15)))
                assert len(instance["masked_lm_positions"]) == expected
                assert instance["input_ids"][0] == 4  # [CLS] (conftest's vocabulary)


def test_same_bytes_for_one_and_two_workers(corpus, tmp_path):
    run(corpus, tmp_path / "one", pack_sequences=True)
    run(corpus, tmp_path / "two", pack_sequences=True, num_workers=2)
    assert file_hashes(tmp_path / "one") == file_hashes(tmp_path / "two")
    run(corpus, tmp_path / "sized", pack_sequences=True, records_per_file=40)
    assert Manifest.read(str(tmp_path / "sized")).n_examples == Manifest.read(str(tmp_path / "one")).n_examples


def test_resume_gives_the_same_bytes(corpus, tmp_path):
    run(corpus, tmp_path / "reference", pack_sequences=True)
    with interrupted_at_append(1, after=True), pytest.raises(KeyboardInterrupt):
        run(corpus, tmp_path / "out", pack_sequences=True)
    resumed = run(corpus, tmp_path / "out", pack_sequences=True, resume=True)
    assert file_hashes(tmp_path / "out") == file_hashes(tmp_path / "reference")
    reference = Manifest.read(str(tmp_path / "reference")).to_json()
    assert {**resumed.to_json(), "output_dir": None} == {**reference, "output_dir": None}


@pytest.mark.parametrize("options, message", [
    ({"max_sequences_per_pack": 3}, "applies to --pack_sequences only"),
    ({"pack_sequences": True, "max_sequences_per_pack": 1}, "--max_sequences_per_pack must be at least 2"),
    ({"pack_sequences": True, "max_sequences_per_pack": 2.5}, "whole number"),
    ({"pack_sequences": True, "max_sequences_per_pack": 11}, "at most 9"),
])
def test_bad_packing_options_are_refused(corpus, tmp_path, options, message):
    with pytest.raises(ConfigError, match=message):
        corpus_config(corpus, tmp_path, max_seq_length=48, **options).validate()


def test_validation_split_and_googles_output_files_are_packed_too(corpus, tmp_path):
    options = dict(max_seq_length=48, max_predictions_per_seq=8, short_seq_prob=0.3, split_num=8)
    generate(corpus_config(corpus, tmp_path / "split", pack_sequences=True, val_fraction=0.3, **options),
             progress=False)
    for split in ("train", "val"):
        manifest = Manifest.read(str(tmp_path / "split" / split))
        assert manifest.packed and manifest.n_instances > manifest.n_examples > 0
        assert sum(manifest.examples_per_file.values()) == manifest.n_examples
    for name, packed in (("packed", True), ("plain", False)):
        files = [str(tmp_path / name / f"{shard}.tfrecord") for shard in "ab"]
        generate(corpus_config(corpus, tmp_path, pack_sequences=packed, output_files=files, **options),
                 progress=False)
    manifest = Manifest.read(str(tmp_path / "packed" / "a.tfrecord.data_params.json"))
    plain = Manifest.read(str(tmp_path / "plain" / "a.tfrecord.data_params.json"))
    assert manifest.n_instances == plain.n_instances > manifest.n_examples
    # Record i of the run goes to file i mod 2: the files differ by one record at most.
    counts = sorted(manifest.examples_per_file.values())
    assert counts[1] - counts[0] <= 1 and sum(counts) == manifest.n_examples
