"""Packed rows through the readers: numpy, PyTorch and tf.data agree, format="transformers" gives
what packed training takes, and load-time masks of packed rows are drawn per instance."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from bert_data.run.resolve import generate
from bert_data.load import read_batches, read_examples
from bert_data.pipeline.packing import block_diagonal_mask, cu_seqlens, unpack_rows

from tests.helpers.corpus import corpus_config, make_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("packed_load_corpus"), n_docs=12, min_sentences=4, max_sentences=10)


@pytest.fixture(scope="module")
def packed(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("packed_nsp")
    generate(corpus_config(corpus, output, max_seq_length=48, max_predictions_per_seq=8, short_seq_prob=0.3,
                           num_output_files=2, pack_sequences=True), progress=False)
    return output


@pytest.fixture(scope="module")
def plain(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("plain_nsp")
    generate(corpus_config(corpus, output, max_seq_length=48, max_predictions_per_seq=8, short_seq_prob=0.3,
                           num_output_files=2), progress=False)
    return output


@pytest.fixture(scope="module")
def unmasked(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("packed_unmasked")
    generate(corpus_config(corpus, output, max_seq_length=48, max_predictions_per_seq=8, mlm_only=True,
                           disable_masking=True, dupe_factor=1, short_seq_prob=0.5, min_short_seq_length=14,
                           num_output_files=1, pack_sequences=True, max_sequences_per_pack=2), progress=False)
    return output


def google(path, **options):
    return next(read_batches(str(path), batch_size=10_000, canonical_names=True, **options))


def test_transformers_format_of_packed_rows(packed):
    stored = google(packed)
    batch = next(read_batches(str(packed), batch_size=10_000, format="transformers"))
    assert batch["input_ids"].shape == stored["input_ids"].shape
    assert np.array_equal(batch["position_ids"], stored["positions"])
    assert np.array_equal(batch["attention_mask"], block_diagonal_mask(stored["input_mask"]))
    assert np.array_equal(batch["next_sentence_positions"], stored["next_sentence_positions"])
    used = stored["next_sentence_weights"] > 0
    labels = batch["next_sentence_label"]
    assert labels.shape == (len(stored["input_ids"]), 9)  # the default k at 48 tokens: 48 // 5 instances of 5
    assert np.array_equal(labels[used], stored["next_sentence_labels"][used]) and (labels[~used] == -100).all()
    # Every instance's [CLS] sits where its pair label says.
    assert (batch["input_ids"][np.nonzero(used)[0], stored["next_sentence_positions"][used]] == 4).all()
    # One masked-LM label per prediction of every instance.
    assert (batch["labels"] != -100).sum() == (stored["masked_lm_weights"] > 0).sum()
    flash = next(read_batches(str(packed), batch_size=5, format="transformers", packed_attention="cu_seqlens"))
    assert "attention_mask" not in flash
    assert np.array_equal(flash["cu_seq_lens_q"], cu_seqlens(stored["input_mask"][:5]))
    assert flash["max_length_q"] == int(np.diff(flash["cu_seq_lens_q"]).max())
    records = list(read_examples(str(packed), format="transformers"))
    assert len(records) == len(stored["input_ids"])
    assert np.array_equal(records[3]["attention_mask"], batch["attention_mask"][3])
    with pytest.raises(ValueError, match="packed_attention"):
        next(read_batches(str(packed), format="transformers", packed_attention="diagonal"))
    with pytest.raises(ValueError, match="instance index"):
        next(read_batches(str(packed), invert_input_mask=True))


def test_torch_reader_gives_the_numpy_batches(packed):
    torch = pytest.importorskip("torch")
    from bert_data.load import TorchDataset

    expected = next(read_batches(str(packed), batch_size=10_000, format="transformers"))
    items = list(TorchDataset(str(packed), format="transformers"))
    assert len(items) == len(expected["input_ids"])
    batch = torch.utils.data.default_collate(items)
    for name, value in expected.items():
        assert np.array_equal(batch[name].numpy(), value), name
    batched = next(iter(TorchDataset(str(packed), batch_size=7, format="transformers")))
    assert batched["attention_mask"].shape == (7, 1, 48, 48) and batched["attention_mask"].dtype == torch.bool


def test_tf_data_gives_the_numpy_batches(packed):
    pytest.importorskip("tensorflow")
    from bert_data.load import load_dataset

    expected = next(read_batches(str(packed), batch_size=10_000, format="transformers"))
    dataset = load_dataset(str(packed), batch_size=10_000, is_training=False, format="transformers")
    got = next(iter(dataset.as_numpy_iterator()))
    for name, value in expected.items():
        assert np.array_equal(got[name], value), name
    plain = next(iter(load_dataset(str(packed), batch_size=10_000, is_training=False).as_numpy_iterator()))
    assert np.array_equal(plain["positions"], google(packed)["positions"])


def test_load_time_masks_of_packed_rows_are_drawn_per_instance(unmasked):
    stored = google(unmasked)
    assert "masked_lm_positions" not in stored and stored["input_mask"].max() == 2
    masked = google(unmasked, mask={"seed": 3})
    assert masked["masked_lm_positions"].shape[1] == 8 + 2
    again = google(unmasked, mask={"seed": 3})
    assert np.array_equal(masked["input_ids"], again["input_ids"])
    for row in unpack_rows(masked):
        for instance in row:
            assert len(instance["masked_lm_positions"]) == min(8, max(1, round(len(instance["input_ids"]) * 0.15)))
            assert 0 not in instance["masked_lm_positions"]  # never the instance's [CLS]
    # Unmasked ids come back at the predicted positions.
    original = masked["input_ids"].copy()
    used = masked["masked_lm_weights"] > 0
    original[np.nonzero(used)[0], masked["masked_lm_positions"][used]] = masked["masked_lm_ids"][used]
    assert np.array_equal(original, stored["input_ids"])


def test_the_packed_training_example_runs(packed, plain, capsys):
    """examples/train_packed_bert.py for two steps on each run (a smoke test, not a benchmark)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "train_packed_bert.py"
    spec = importlib.util.spec_from_file_location("train_packed_bert", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    results = example.main(["--unpacked_dir", str(plain), "--packed_dir", str(packed), "--steps", "2",
                            "--batch_size", "4"])
    out = capsys.readouterr().out
    assert "text tokens per second" in out and "masked-LM loss per token" in out
    assert results["packed"]["steps"] == results["unpacked"]["steps"] == 2
    assert results["unpacked"]["instances"] == 8 and results["packed"]["instances"] > 8
    assert results["packed"]["tokens"] > results["unpacked"]["tokens"]
