"""``load_dataset`` (tf.data) resumes mid-epoch through TensorFlow's own iterator checkpoints
(``tf.train.Checkpoint(iterator=...)``): stopped at a random batch, saved, restored into an
iterator of a freshly built dataset, it yields exactly the batches the uninterrupted iterator
would have (records, order and load-time masks), and over an epoch every record exactly once."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from bert_data.load import read_batches
from bert_data.load.dynamic_masks import original_tokens
from bert_data.run.resolve import generate

from tests.helpers.corpus import corpus_config, make_corpus

tf = pytest.importorskip("tensorflow")

from bert_data.load import load_dataset  # noqa: E402

BATCH = 8


@pytest.fixture(scope="module")
def unmasked(tmp_path_factory):
    """MLM-only unmasked data in 3 shards, for load-time masks."""
    root = tmp_path_factory.mktemp("tf_resume")
    corpus = make_corpus(root / "corpus", n_docs=12, min_sentences=6, max_sentences=14)
    out = root / "data"
    generate(corpus_config(corpus, out, mlm_only=True, disable_masking=True, dupe_factor=1, num_output_files=3,
                           max_seq_length=32, max_predictions_per_seq=5), progress=False)
    return out


def stop_points(n: int, below: int):
    """Batches to stop after: drawn at random (seeded, so a failure can be replayed)."""
    return sorted(np.random.default_rng(30).choice(np.arange(1, below), size=n, replace=False).tolist())


def batches(iterator, n):
    return [{name: value.numpy() for name, value in next(iterator).items()} for _ in range(n)]


def assert_same(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert sorted(a) == sorted(b)
        for name in b:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.parametrize("stop", stop_points(2, 12))
def test_training_stream_resumes_from_a_checkpoint(unmasked, tmp_path, stop):
    def build():  # shuffled shards, interleaved, a shuffle buffer, repeated; masks at load time
        return load_dataset(str(unmasked), batch_size=BATCH, is_training=True, seed=11, shuffle_buffer=40,
                            num_cpu_threads=2, mask={"seed": 5, "strategy": "whole_word", "rate": 0.3})

    iterator = iter(build())
    batches(iterator, stop)
    path = tf.train.Checkpoint(iterator=iterator).save(str(tmp_path / "ckpt"))
    expected = batches(iterator, 40)  # past an epoch: the repeat and reshuffle are resumed too

    fresh = iter(build())
    tf.train.Checkpoint(iterator=fresh).restore(path).assert_consumed()
    assert_same(batches(fresh, 40), expected)


@pytest.mark.parametrize("stop", stop_points(2, 8))
def test_an_epoch_resumed_yields_each_remaining_record_once(unmasked, tmp_path, stop):
    def build():
        return load_dataset(str(unmasked), batch_size=BATCH, is_training=True, seed=3, shuffle_buffer=25,
                            repeat=False, drop_remainder=False, mask={"seed": 2}, canonical_names=True)

    whole = [batch for batch in build().as_numpy_iterator()]
    iterator = iter(build())
    before = batches(iterator, stop)
    path = tf.train.Checkpoint(iterator=iterator).save(str(tmp_path / "ckpt"))
    del iterator
    fresh = iter(build())
    tf.train.Checkpoint(iterator=fresh).restore(path)
    after = [{name: value.numpy() for name, value in batch.items()} for batch in fresh]
    assert_same(before + after, whole)  # the same records, order and masks as without the stop
    # ... and the epoch is every record of the dataset, once (its tokens before the masks).
    records = next(read_batches(str(unmasked), batch_size=100_000, canonical_names=True))["input_ids"]
    seen = np.concatenate([original_tokens(batch)["input_ids"] for batch in before + after])
    assert sorted(map(tuple, seen.tolist())) == sorted(map(tuple, records.tolist()))


def test_evaluation_and_transformers_streams_resume_too(unmasked, tmp_path):
    def build():
        return load_dataset(str(unmasked), batch_size=BATCH, is_training=False, mask={"seed": 9},
                            format="transformers")

    whole = list(build().as_numpy_iterator())
    stop = stop_points(1, len(whole))[0]
    iterator = iter(build())
    before = batches(iterator, stop)
    path = tf.train.Checkpoint(iterator=iterator).save(str(tmp_path / "ckpt"))
    fresh = iter(build())
    tf.train.Checkpoint(iterator=fresh).restore(path)
    assert_same(before + [{k: v.numpy() for k, v in batch.items()} for batch in fresh], whole)
