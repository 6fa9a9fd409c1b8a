"""--output_format parquet trains Hugging Face models with no code of ours: ``load_dataset("parquet")``
and a collator of ``transformers`` (``DataCollatorForTokenClassification`` pads the inputs and
pads ``labels`` with -100; ``DataCollatorForLanguageModeling`` pads and masks unmasked data at
load time) feed ``BertForPreTraining`` and ``BertForMaskedLM``: finite losses and gradients."""

from __future__ import annotations

import pytest

from tests.helpers.format_runs import MSL, make_runs, shard_files


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    layouts = {"nsp": dict(), "unmasked": dict(mlm_only=True, disable_masking=True, dupe_factor=1)}
    return make_runs(tmp_path_factory.mktemp("parquet_training"), layouts=layouts, formats={"parquet": "snappy"})


def train_a_few_steps(model, loader, steps: int = 3):
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for step, batch in zip(range(steps), loader):
        output = model(**batch)
        output.loss.backward()
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        assert grads and all(torch.isfinite(g).all() for g in grads)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(output.loss.item())
    assert len(losses) == steps and all(torch.isfinite(torch.tensor(losses)))
    return losses


def tiny(config_class, vocab_size):
    return config_class(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=MSL)


@pytest.mark.parametrize("layout", ["nsp", "unmasked"])
def test_load_dataset_and_a_transformers_collator_train_a_tiny_bert(runs, layout, tmp_path):
    datasets = pytest.importorskip("datasets")
    transformers = pytest.importorskip("transformers")
    import torch

    corpus = runs["corpus"]
    # The vocabulary's directory, as a user loads a tokenizer saved beside a model.
    tokenizer = transformers.BertTokenizerFast.from_pretrained(str(corpus.vocab.parent), do_lower_case=True)
    assert len(tokenizer) == len(corpus.vocab.read_text().split())
    files = [str(path) for path in shard_files(runs[layout]["parquet"], "parquet")]
    # What a user writes: the dataset as torch tensors' source, a collator of transformers.
    dataset = datasets.load_dataset("parquet", data_files=files, split="train", cache_dir=str(tmp_path / "hf"))
    if layout == "nsp":
        collator = transformers.DataCollatorForTokenClassification(tokenizer)
        model = transformers.BertForPreTraining(tiny(transformers.BertConfig, len(tokenizer)))
    else:
        collator = transformers.DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
        model = transformers.BertForMaskedLM(tiny(transformers.BertConfig, len(tokenizer)))
    torch.manual_seed(0)
    loader = torch.utils.data.DataLoader(dataset, batch_size=8, shuffle=True, collate_fn=collator)
    batch = next(iter(loader))
    expected = {"input_ids", "attention_mask", "labels"} | ({"token_type_ids", "next_sentence_label"}
                                                            if layout == "nsp" else set())
    assert set(batch) == expected
    assert batch["input_ids"].shape == batch["labels"].shape
    if layout == "nsp":  # padding is ignored by the loss
        assert (batch["labels"][batch["attention_mask"] == 0] == -100).all()
    train_a_few_steps(model, loader)
