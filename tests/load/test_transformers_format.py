"""format="transformers": every reader hands out the inputs of Hugging Face transformers' models,
equal on every record to the Google-layout fields converted by hand, and a tiny BERT trains on them."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

import bert_data
from bert_data.run.resolve import generate
from bert_data.load import read_batches, read_examples

from tests.helpers.corpus import corpus_config, make_corpus

MSL, MPP = 64, 10
BATCH = 16
SEED = {"seed": 5}
# name: generator options, mask= for reading
LAYOUTS = {
    "nsp": (dict(), None),
    "nsp_v2": (dict(v2_feature_names=True), None),
    "mlm_only": (dict(mlm_only=True), None),
    "dynamic": (dict(mlm_only=True, disable_masking=True, dupe_factor=1), SEED),
}
READERS = ("numpy", "torch", "tf")


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """layout -> output directory, made by the generator from a small synthetic corpus; plus
    "sop": the NSP data with a manifest saying it was made with sentence-order prediction."""
    root = tmp_path_factory.mktemp("transformers_format")
    corpus = make_corpus(root / "corpus", n_docs=20, seed=3)
    out = {}
    for layout, (options, _) in LAYOUTS.items():
        out[layout] = root / layout
        generate(corpus_config(corpus, out[layout], max_seq_length=MSL, max_predictions_per_seq=MPP, **options),
                 progress=False)
    out["sop"] = root / "sop"
    shutil.copytree(out["nsp"], out["sop"])
    set_manifest_option(out["sop"], sentence_order_prediction=True)
    return out


def set_manifest_option(directory, **options):
    path = directory / "data_params.json"
    manifest = json.loads(path.read_text())
    manifest.update(options)
    path.write_text(json.dumps(manifest))


def expected_names(layout, sequence_label="next_sentence_label"):
    if layout in ("mlm_only", "dynamic"):
        return {"input_ids", "attention_mask", "labels"}
    return {"input_ids", "attention_mask", "token_type_ids", "labels", sequence_label}


def labels_by_hand(record):
    """One record's Google-layout masked-LM fields as a label per position, the obvious way."""
    labels = [-100] * len(record["input_ids"])
    for position, token, weight in zip(record["masked_lm_positions"], record["masked_lm_ids"],
                                       record["masked_lm_weights"]):
        if weight > 0:
            labels[int(position)] = int(token)
    return labels


def read(reader, directory, format, mask=None):
    """Every record of ``directory`` through ``reader``, as ``{name: numpy column}``: the same
    batches for both formats (so that masks drawn at load time are the same too)."""
    if reader == "numpy":
        batches = list(read_batches(directory, batch_size=BATCH, mask=mask, canonical_names=True, format=format))
    elif reader == "torch":
        dataset = bert_data.TorchDataset(directory, batch_size=BATCH, mask=mask, canonical_names=True, format=format)
        batches = [{name: value.numpy() for name, value in batch.items()} for batch in dataset]
    else:
        dataset = bert_data.load_dataset(directory, batch_size=BATCH, is_training=False, int32=False, mask=mask,
                                         canonical_names=True, format=format) if format == "google" else \
            bert_data.load_dataset(directory, batch_size=BATCH, is_training=False, mask=mask, format=format)
        batches = list(dataset.as_numpy_iterator())
    return {name: np.concatenate([batch[name] for batch in batches]) for name in batches[0]}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_fields_equal_google_layout_converted_by_hand(datasets, layout, reader):
    mask = LAYOUTS[layout][1]
    google = read(reader, datasets[layout], "google", mask)
    got = read(reader, datasets[layout], "transformers", mask)
    n = len(google["input_ids"])
    assert set(got) == expected_names(layout) and n > 50
    for name, value in got.items():
        assert value.dtype == np.int64, name
        assert len(value) == n, name
    predicted = 0
    for i in range(n):
        record = {name: column[i] for name, column in google.items()}
        assert got["labels"][i].tolist() == labels_by_hand(record), f"record {i}"
        predicted += int((got["labels"][i] != -100).sum())
        np.testing.assert_array_equal(got["input_ids"][i], record["input_ids"])  # masked, as stored
        np.testing.assert_array_equal(got["attention_mask"][i], record["input_mask"])
        if "token_type_ids" in got:
            np.testing.assert_array_equal(got["token_type_ids"][i], record["segment_ids"])
            assert got["next_sentence_label"][i] == record["next_sentence_labels"][0]
    # Not vacuous: every real prediction of the data became a label.
    assert predicted == int((google["masked_lm_weights"] > 0).sum()) > n


def test_single_records_and_default_collation(datasets):
    import torch
    from torch.utils.data import DataLoader

    directory = datasets["nsp"]
    batch = next(read_batches(directory, batch_size=BATCH, format="transformers"))
    rows = list(read_examples(directory, format="transformers"))[:BATCH]
    assert np.ndim(rows[0]["next_sentence_label"]) == 0 and rows[0]["labels"].shape == (MSL,)
    np.testing.assert_array_equal(np.stack([r["labels"] for r in rows]), batch["labels"])
    collated = next(iter(DataLoader(bert_data.TorchDataset(directory, format="transformers"), batch_size=BATCH)))
    assert collated["next_sentence_label"].shape == (BATCH,) and collated["labels"].shape == (BATCH, MSL)
    assert all(value.dtype == torch.long for value in collated.values())
    for name, value in batch.items():
        np.testing.assert_array_equal(collated[name].numpy(), value, err_msg=name)


def test_padding_slots_never_set_a_label():
    """Padding slots point at position 0 with id 0: they must neither label [CLS] nor overwrite a
    real prediction at position 0 (which comes first, so a scatter of every slot would lose it)."""
    from bert_data.load.stages import masked_lm_labels
    from bert_data.load.tf_data import masked_lm_labels as tf_masked_lm_labels

    input_ids = np.arange(12, dtype=np.int64).reshape(2, 6)
    positions = np.array([[0, 3, 0, 0], [2, 0, 0, 0]])
    ids = np.array([[7, 9, 0, 0], [8, 0, 0, 0]])
    weights = np.array([[1, 1, 0, 0], [1, 0, 0, 0]], dtype=np.float32)
    expected = [[7, -100, -100, 9, -100, -100], [-100, -100, 8, -100, -100, -100]]
    assert masked_lm_labels(input_ids, positions, ids, weights).tolist() == expected
    assert tf_masked_lm_labels(input_ids, positions, ids, weights).numpy().tolist() == expected


@pytest.mark.parametrize("layout", ["nsp", "dynamic"])
def test_tensorflow_labels_equal_numpy_labels(datasets, layout):
    """The tf.data reader scatters with its own ops: the same labels as the numpy definition on
    every record (int32 columns, as load-time masks give them, included)."""
    from bert_data.load.stages import masked_lm_labels
    from bert_data.load.tf_data import masked_lm_labels as tf_masked_lm_labels

    google = read("numpy", datasets[layout], "google", LAYOUTS[layout][1])
    columns = [google[name] for name in ("input_ids", "masked_lm_positions", "masked_lm_ids", "masked_lm_weights")]
    np.testing.assert_array_equal(tf_masked_lm_labels(*columns).numpy(), masked_lm_labels(*columns))


def test_sentence_order_data_names_its_label(datasets, tmp_path):
    directory = datasets["sop"]
    nsp = next(read_batches(datasets["nsp"], batch_size=BATCH, format="transformers"))
    batch = next(read_batches(directory, batch_size=BATCH, format="transformers"))
    assert set(batch) == expected_names("sop", "sentence_order_label")
    np.testing.assert_array_equal(batch["sentence_order_label"], nsp["next_sentence_label"])
    assert "sentence_order_label" in next(iter(bert_data.TorchDataset(directory, format="transformers")))
    element = bert_data.load_dataset(directory, batch_size=4, is_training=False, format="transformers").element_spec
    assert set(element) == expected_names("sop", "sentence_order_label")
    # Without the option (older manifests), and with it False: next sentence.
    set_manifest_option(shutil.copytree(datasets["nsp"], tmp_path / "off"), sentence_order_prediction=False)
    assert "next_sentence_label" in next(read_batches(tmp_path / "off", batch_size=2, format="transformers"))
    files = [str(datasets["nsp"] / "examples-1.tfrecords"), str(directory / "examples-2.tfrecords")]
    with pytest.raises(ValueError, match="mix sentence-order and next-sentence"):
        bert_data.TorchDataset(files, format="transformers")


def test_format_errors(datasets):
    directory = datasets["nsp"]
    for make in (lambda **kw: next(read_batches(directory, **kw)), lambda **kw: next(read_examples(directory, **kw)),
                 lambda **kw: bert_data.TorchDataset(directory, **kw),
                 lambda **kw: bert_data.load_dataset(directory, **kw)):
        with pytest.raises(ValueError, match="format must be one of 'google', 'transformers', got 'hf'"):
            make(format="hf")
        with pytest.raises(ValueError, match="int32=True does not apply"):
            make(format="transformers", int32=True)
        with pytest.raises(ValueError, match="invert_input_mask=True does not apply"):
            make(format="transformers", invert_input_mask=True)
    with pytest.raises(ValueError, match="records are unmasked.*pass mask="):
        bert_data.TorchDataset(datasets["dynamic"], format="transformers")
    # The default is Google's layout, unchanged: int32 in tf.data, int64 in numpy.
    import tensorflow as tf

    spec = bert_data.load_dataset(directory, batch_size=4).element_spec
    assert spec["input_ids"].dtype == tf.int32 and "masked_lm_positions" in spec
    assert "masked_lm_positions" in next(read_batches(directory, batch_size=4))


# ------------------------------------------------------------------------------- the models


def tiny_config(config_class, vocab_size, **extra):
    return config_class(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=MSL, **extra)


def vocab_size(directory):
    return json.loads((directory / "data_params.json").read_text())["vocab_size"]


@pytest.mark.parametrize("layout, model_name", [("nsp", "BertForPreTraining"), ("sop", "AlbertForPreTraining"),
                                                ("mlm_only", "BertForMaskedLM"), ("dynamic", "BertForMaskedLM")])
def test_each_model_takes_a_batch_whole(datasets, layout, model_name):
    """``model(**batch)`` gives the loss: the names are the models' own, all of them used."""
    transformers = pytest.importorskip("transformers")
    import torch

    config_class = transformers.AlbertConfig if model_name.startswith("Albert") else transformers.BertConfig
    extra = dict(embedding_size=16) if model_name.startswith("Albert") else {}
    torch.manual_seed(0)
    model = getattr(transformers, model_name)(tiny_config(config_class, vocab_size(datasets[layout]), **extra))
    mask = LAYOUTS.get(layout, (None, None))[1]
    batch = next(iter(bert_data.TorchDataset(datasets[layout], batch_size=4, mask=mask, format="transformers")))
    loss = model(**batch).loss
    assert loss is not None and torch.isfinite(loss)


def test_tiny_bert_learns(datasets):
    """A few dozen steps of a tiny BertForPreTraining on format="transformers" batches lower its
    loss on a held-out batch (a shard it never trains on)."""
    transformers = pytest.importorskip("transformers")
    import torch
    from torch.utils.data import DataLoader

    directory = datasets["nsp"]
    torch.manual_seed(0)
    model = transformers.BertForPreTraining(tiny_config(transformers.BertConfig, vocab_size(directory)))
    held_out = next(iter(bert_data.TorchDataset(directory / "examples-3.tfrecords", batch_size=64,
                                                format="transformers")))

    def held_out_loss():
        model.eval()
        with torch.no_grad():
            return model(**held_out).loss.item()

    train = bert_data.TorchDataset([str(directory / f"examples-{i}.tfrecords") for i in (1, 2)], batch_size=BATCH,
                                   shuffle_buffer=500, seed=0, drop_remainder=True, format="transformers")
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)

    def batches():  # epochs on end, a new shuffle each
        for epoch in itertools.count():
            train.set_epoch(epoch)
            yield from DataLoader(train, batch_size=None)

    before = held_out_loss()
    model.train()
    for batch in itertools.islice(batches(), 40):
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    after = held_out_loss()
    assert after < before, (before, after)


def test_bert_data_never_imports_transformers(datasets):
    code = ("import sys, bert_data\n"
            f"next(bert_data.read_batches({str(datasets['nsp'])!r}, batch_size=2, format='transformers'))\n"
            f"next(iter(bert_data.TorchDataset({str(datasets['nsp'])!r}, format='transformers')))\n"
            "print('transformers' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
