"""Masks drawn at load time (``dynamic_masking``, ``mask=`` in every reader): the generator's
statistics and rules, determinism, options from the manifest, the same masks in every reader.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from bert_data.load import DynamicMasking, dynamic_masking, load_dataset, read_batches, read_examples
from bert_data.tokenizers.vocab import load_vocab

# The datasets and their fixtures (datasets, vocab_path: pytest finds them imported here).
from tests.helpers.layout_datasets import (
    MPP, MSL, N_RECORDS, datasets, joined, make_columns, vocab_path, write_dataset,
)


def unmasked_batch(vocab, n=3000, seed=1):
    cols = make_columns(vocab, "unmasked", n, seed)
    return {"input_ids": cols["input_ids"], "input_mask": cols["input_mask"]}


def test_dynamic_masking_statistics(vocab_path):
    vocab = load_vocab(vocab_path)
    batch = unmasked_batch(vocab)
    ids, lengths = batch["input_ids"], batch["input_mask"].sum(axis=1)
    masker = dynamic_masking(vocab_file=str(vocab_path), max_predictions_per_seq=MPP, seed=0)
    out = masker(batch)
    assert set(out) == {"input_ids", "input_mask", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights"}
    assert out["input_ids"].dtype == np.int32 and out["masked_lm_positions"].dtype == np.int32
    assert out["masked_lm_ids"].dtype == np.int32 and out["masked_lm_weights"].dtype == np.float32
    assert out["masked_lm_positions"].shape == (len(ids), MPP)
    k = out["masked_lm_weights"].sum(axis=1).astype(int)
    # Exactly round(15%) of the tokens, at least 1, capped by max_predictions_per_seq.
    np.testing.assert_array_equal(k, np.minimum(MPP, np.maximum(1, np.rint(lengths * 0.15))))
    assert (k == MPP).any() and (k < MPP).any()
    rows = np.repeat(np.arange(len(ids)), MPP).reshape(len(ids), MPP)
    active = out["masked_lm_weights"] > 0
    pos, lab = out["masked_lm_positions"], out["masked_lm_ids"]
    np.testing.assert_array_equal(lab[active], ids[rows[active], pos[active]])  # labels: the original tokens
    assert (pos[~active] == 0).all() and (lab[~active] == 0).all()
    assert (np.diff(pos, axis=1)[active[:, 1:]] > 0).all()  # ascending (weights are 1s then 0s)
    special = {vocab.cls_id, vocab.sep_id, vocab.pad_id}
    assert not np.isin(lab[active], list(special)).any()  # never [CLS], [SEP] (= the separator here)
    assert (pos[active] > 0).all() and (pos[active] < lengths[rows[active]] - 1).all()
    shown = out["input_ids"][rows[active], pos[active]]
    n_pred = active.sum()
    assert abs((shown == vocab.mask_id).sum() / n_pred - 0.8) < 0.02
    kept = (shown == lab[active]).sum() / n_pred
    assert abs(kept - 0.1) < 0.015
    randoms = shown[(shown != vocab.mask_id) & (shown != lab[active])]
    assert abs(len(randoms) / n_pred - 0.1) < 0.015 and np.isin(randoms, vocab.ordinary_ids).all()
    untouched = np.ones_like(ids, dtype=bool)
    untouched[rows[active], pos[active]] = False
    np.testing.assert_array_equal(out["input_ids"][untouched], ids[untouched])
    np.testing.assert_array_equal(out["input_mask"], batch["input_mask"])


@pytest.mark.parametrize("options", [{"whole_word": True}, {"max_ngram_size": 3}])
def test_dynamic_masking_never_splits_a_word(vocab_path, options):
    vocab = load_vocab(vocab_path)
    batch = unmasked_batch(vocab, n=600, seed=2)
    ids = batch["input_ids"]
    out = dynamic_masking(vocab_file=str(vocab_path), max_predictions_per_seq=8, seed=4, **options)(batch)
    chosen = np.zeros(ids.shape, dtype=bool)
    active = out["masked_lm_weights"] > 0
    rows = np.broadcast_to(np.arange(len(ids))[:, None], active.shape)
    chosen[rows[active], out["masked_lm_positions"][active]] = True
    cont = vocab.is_continuation[ids] & (batch["input_mask"] == 1)
    # A ## piece is chosen exactly when the token before it is (they are one word).  (A piece
    # right after a document separator joins the word before the separator, as in Google's code.)
    cont[:, 1:] &= ids[:, :-1] != vocab.sep_id
    pieces = np.argwhere(cont)
    assert len(pieces) > 100
    assert (chosen[pieces[:, 0], pieces[:, 1]] == chosen[pieces[:, 0], pieces[:, 1] - 1]).all()
    assert (active.sum(axis=1) <= 8).all() and chosen[cont].any()
    assert not np.isin(out["masked_lm_ids"][active], [vocab.cls_id, vocab.sep_id]).any()


def test_dynamic_masking_separator_token(vocab_path):
    vocab = load_vocab(vocab_path)
    batch = unmasked_batch(vocab, n=400, seed=3)
    separator = vocab.token_to_id["[unused0]"]
    batch["input_ids"][:, 3] = separator
    out = dynamic_masking(vocab_file=str(vocab_path), seed=1, masked_lm_prob=0.5, max_predictions_per_seq=MSL,
                          document_separator_token="[unused0]")(batch)
    active = out["masked_lm_weights"] > 0
    assert not (out["masked_lm_positions"][active] == 3).any()
    np.testing.assert_array_equal(out["input_ids"][:, 3], separator)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        dynamic_masking(vocab_file=str(vocab_path), document_separator_token="[NOPE]")


def test_dynamic_masking_is_deterministic(vocab_path):
    vocab = load_vocab(vocab_path)
    batch = unmasked_batch(vocab, n=50)
    a = dynamic_masking(vocab_file=str(vocab_path), seed=7)
    b = dynamic_masking(vocab_file=str(vocab_path), seed=7)
    first, second = a(batch), a(batch)  # calls numbered 0, 1
    assert not np.array_equal(first["input_ids"], second["input_ids"])
    for name in first:
        np.testing.assert_array_equal(first[name], b(batch, key=(0,))[name])
        np.testing.assert_array_equal(second[name], b(batch, key=(1,))[name])
    other = dynamic_masking(vocab_file=str(vocab_path), seed=8)(batch, key=(0,))
    assert not np.array_equal(other["masked_lm_positions"], first["masked_lm_positions"])
    assert isinstance(a, DynamicMasking) and "seed=7" in repr(a)
    assert dynamic_masking(vocab_file=str(vocab_path)).seed >= 0  # a seed is drawn and kept
    with pytest.raises(ValueError, match="already masked"):
        a(first)


def test_masking_options_from_the_manifest(tmp_path, vocab_path, datasets):
    directory = tmp_path / "data"
    write_dataset(directory, vocab_path, "unmasked", None, masked_lm_prob=0.3, max_predictions_per_seq=7,
                  mask_whole_word=True, document_separator_token="[unused1]")
    masker = dynamic_masking(dataset=directory, seed=0)
    assert (masker.masked_lm_prob, masker.max_predictions_per_seq, masker.whole_word) == (0.3, 7, True)
    assert masker.document_separator_token == "[unused1]"
    assert load_vocab(vocab_path).token_to_id["[unused1]"] in masker.special_ids
    assert dynamic_masking(dataset=directory, masked_lm_prob=0.2).masked_lm_prob == 0.2  # arguments win
    batch = next(read_batches(directory, batch_size=10, mask={"seed": 0}))
    assert batch["masked_lm_positions"].shape == (10, 7) and batch["masked_lm_ids"].dtype == np.int64
    # A vocabulary that is not the data's is refused.
    other = tmp_path / "other.txt"
    other.write_text(Path(vocab_path).read_text() + "extra\n")
    with pytest.raises(ValueError, match="not the one the data was made with"):
        dynamic_masking(vocab_file=str(other), dataset=directory)
    # Masked data is masked anew from its original tokens (the static masks restored first).
    static = next(read_batches(datasets["mlm", None][0], batch_size=64))
    again = next(read_batches(datasets["mlm", None][0], batch_size=64, mask={"seed": 5, "rate": 0.3}))
    assert not np.array_equal(again["masked_lm_positions"], static["masked_lm_positions"])
    for batch in (static, again):
        restored = batch["input_ids"].copy()
        used = batch["masked_lm_weights"] > 0
        rows = np.broadcast_to(np.arange(len(restored))[:, None], used.shape)
        restored[rows[used], batch["masked_lm_positions"][used]] = batch["masked_lm_ids"][used]
        batch["restored"] = restored
    np.testing.assert_array_equal(again["restored"], static["restored"])
    manifest = json.loads((directory / "data_params.json").read_text())
    manifest["vocab_file"] = str(tmp_path / "gone.txt")
    (directory / "data_params.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="does not exist, pass vocab_file="):
        dynamic_masking(dataset=directory)


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_load_time_masks_identical_in_tf_data_and_numpy(datasets, compression):
    directory, written = datasets["unmasked", compression]
    numpy_batches = list(read_batches(directory, batch_size=6, int32=True, mask={"seed": 11}))
    d = load_dataset(directory, batch_size=6, is_training=False, mask={"seed": 11})
    tf_batches = list(d.as_numpy_iterator())
    assert len(tf_batches) == len(numpy_batches) == 7
    spec = d.element_spec
    assert spec["input_ids"].shape.as_list() == [None, MSL]
    assert spec["masked_lm_positions"].shape.as_list() == [None, MPP]
    assert spec["masked_lm_weights"].dtype.name == "float32" and spec["masked_lm_ids"].dtype.name == "int32"
    for mine, theirs in zip(numpy_batches, tf_batches):
        assert set(mine) == set(theirs)
        for name in mine:
            assert mine[name].dtype == theirs[name].dtype, name
            np.testing.assert_array_equal(mine[name], theirs[name], err_msg=name)
    got = joined(numpy_batches)
    restored = got["input_ids"].copy()
    active = got["masked_lm_weights"] > 0
    rows = np.broadcast_to(np.arange(len(restored))[:, None], active.shape)
    restored[rows[active], got["masked_lm_positions"][active]] = got["masked_lm_ids"][active]
    np.testing.assert_array_equal(restored, written["input_ids"])  # the masks hide the original tokens
    assert active.any(axis=1).all()
    # Training pipelines: static shapes (full batches), masks keyed by batch number.
    d = load_dataset(directory, batch_size=4, is_training=True, seed=1, mask={"seed": 2})
    assert d.element_spec["masked_lm_positions"].shape.as_list() == [4, MPP]
    assert d.element_spec["input_ids"].shape.as_list() == [4, MSL]
    batch = next(iter(d))
    assert int(batch["masked_lm_weights"].numpy().sum()) > 0


def test_load_time_masks_in_readers_and_torch(datasets):
    from bert_data.load.torch_data import TorchDataset

    directory, written = datasets["unmasked", "zlib"]
    rows = list(read_examples(directory, mask={"seed": 3}))
    whole = next(read_batches(directory, batch_size=4096, mask={"seed": 3}))
    np.testing.assert_array_equal(np.stack([r["input_ids"] for r in rows]), whole["input_ids"])
    assert rows[0]["masked_lm_positions"].shape == (MPP,)
    ds = TorchDataset(directory, batch_size=8, mask={"seed": 3})
    first = [b["input_ids"].numpy() for b in ds]
    again = [b["input_ids"].numpy() for b in ds]
    ds.set_epoch(1)
    epoch1 = [b["input_ids"].numpy() for b in ds]
    assert all(np.array_equal(x, y) for x, y in zip(first, again))
    assert not all(np.array_equal(x, y) for x, y in zip(first, epoch1))
    assert sum(len(b) for b in first) == sum(N_RECORDS)
    batch = next(iter(TorchDataset(directory, batch_size=8, mask={"seed": 3}, int32=True)))
    assert str(batch["masked_lm_ids"].dtype) == "torch.int32" and str(batch["masked_lm_weights"].dtype) == "torch.float32"
