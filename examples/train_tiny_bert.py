"""Pretrain a tiny BERT from scratch on bert_data's output with Hugging Face transformers, on CPU.

    create_tfrecords --metadata_files examples/sample/metadata.txt --input_files_prefix examples/sample \\
        --vocab_file vocab/vocab.txt --do_lower_case --output_dir ./tfrecords --overwrite   # README quick start
    pip install -e ".[torch,transformers]"
    python examples/train_tiny_bert.py --data_dir tfrecords --steps 300

``TorchDataset(..., format="transformers")`` yields batches whose names are the model's own
arguments (``input_ids``, ``attention_mask``, ``token_type_ids``, ``labels``,
``next_sentence_label``), so ``model(**batch)`` returns the loss: the data plumbing is a
``TorchDataset``, a ``DataLoader`` and ``set_epoch`` (marked below).  The model follows the data's
layout:

* NSP data (the default): ``BertForPreTraining``, masked LM + next sentence;
* sentence-order data (ALBERT's task): the pair label is named ``sentence_order_label``, the
  argument of ``AlbertForPreTraining``, which is used instead;
* MLM-only data (``--mlm_only``): ``BertForMaskedLM`` (``BertForPreTraining`` computes no loss
  without a pair label); unmasked data (``--disable_masking``) gets its masks at load time.

Prints the training loss and masked-LM accuracy (over the steps since the last line).
"""

from __future__ import annotations

import argparse
import itertools
import time

import torch
from torch.utils.data import DataLoader
from transformers import (AlbertConfig, AlbertForPreTraining, BertConfig, BertForMaskedLM,
                          BertForPreTraining)

import bert_data
from bert_data.format.dataset import dataset_info


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data_dir", default="tfrecords", help="an output directory of create_tfrecords")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0, help="model initialisation, shuffling, load-time masks")
    parser.add_argument("--log_every", type=int, default=25)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    return parser.parse_args(argv)


def tiny_model(info, pair_label):
    """A small model from scratch: 2 layers, hidden size 128, 2 heads, the data's vocabulary."""
    manifest = info.manifest
    if manifest is None or not manifest.vocab_size:
        raise SystemExit(f"{info.files[0]}: no data_params.json with vocab_size next to the shards")
    sizes = dict(vocab_size=manifest.vocab_size, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=512, max_position_embeddings=info.max_seq_length)
    if pair_label == "sentence_order_label":
        return AlbertForPreTraining(AlbertConfig(embedding_size=64, **sizes))
    if pair_label is None:
        return BertForMaskedLM(BertConfig(**sizes))
    return BertForPreTraining(BertConfig(**sizes))


def epochs(dataset, loader):
    """Batches without end: each epoch a new shuffle (and new load-time masks)."""
    for epoch in itertools.count():
        dataset.set_epoch(epoch)
        yield from loader


def main(argv=None):
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    info = dataset_info(args.data_dir)
    if info.mlm_only:
        pair_label = None
    elif info.manifest is not None and info.manifest.option("sentence_order_prediction", False):
        pair_label = "sentence_order_label"
    else:
        pair_label = "next_sentence_label"
    model = tiny_model(info, pair_label)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    print(f"{type(model).__name__}, {sum(p.numel() for p in model.parameters()):,} parameters, "
          f"{info.manifest.n_examples:,} records of {info.max_seq_length} tokens in {args.data_dir}")

    # The data plumbing: shuffled batches in the model's own names, new order (and masks) each epoch.
    dataset = bert_data.TorchDataset(args.data_dir, batch_size=args.batch_size, shuffle_buffer=10_000, seed=args.seed,
                                     drop_remainder=True, format="transformers",
                                     mask=None if info.masked else {"seed": args.seed})
    loader = DataLoader(dataset, batch_size=None)  # items are already batches
    batches = itertools.islice(epochs(dataset, loader), args.steps)

    model.train()
    started = time.perf_counter()
    losses, correct, predicted = [], 0, 0
    for step, batch in enumerate(batches, start=1):
        out = model(**batch)  # the batch's names are the model's arguments: out.loss is the loss
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        # Masked-LM accuracy: the argmax at the positions with a label (-100 elsewhere).
        logits = out.prediction_logits if hasattr(out, "prediction_logits") else out.logits
        scored = batch["labels"] != -100
        correct += int((logits.argmax(-1)[scored] == batch["labels"][scored]).sum())
        predicted += int(scored.sum())
        losses.append(out.loss.item())
        if step == 1 or step % args.log_every == 0 or step == args.steps:
            print(f"step {step:4d}  loss {sum(losses) / len(losses):6.3f}  mlm_accuracy {correct / predicted:.3f}  "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
            losses, correct, predicted = [], 0, 0


if __name__ == "__main__":
    main()
