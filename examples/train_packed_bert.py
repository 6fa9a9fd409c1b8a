"""Train the same tiny BERT on packed and on unpacked records of one run, on CPU, side by side.

    # one corpus, the same options, with and without --pack_sequences
    create_tfrecords --metadata_files examples/sample/metadata.txt --input_files_prefix examples/sample \\
        --vocab_file vocab/vocab.txt --do_lower_case --max_seq_length 128 --output_dir unpacked --overwrite
    create_tfrecords --metadata_files examples/sample/metadata.txt --input_files_prefix examples/sample \\
        --vocab_file vocab/vocab.txt --do_lower_case --max_seq_length 128 --output_dir packed --overwrite \\
        --pack_sequences
    python examples/train_packed_bert.py --unpacked_dir unpacked --packed_dir packed --steps 100

Both runs hold the same instances; the packed one puts up to three in a row, each attending to
itself only (a block-diagonal ``attention_mask`` and ``position_ids`` restarting at 0 in each
instance, as ``bert_data``'s ``format="transformers"`` gives them).  A row costs the same compute
packed or not, so the packed run reads more text per second: the table shows the text tokens
processed per second (not padding), the instances per step, and the masked-LM loss per predicted
token and next-sentence loss per instance.  The model is ``BertForPreTraining``; its encoder and
heads are called directly, because its own next-sentence head reads position 0 only, and a packed
row has a [CLS] per instance (at ``next_sentence_positions``).  MLM-only data trains the masked LM
only.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from transformers import BertConfig, BertForPreTraining

from bert_data.load import TorchDataset
from bert_data.format.dataset import dataset_info


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--unpacked_dir", required=True, help="create_tfrecords output without --pack_sequences")
    parser.add_argument("--packed_dir", required=True, help="the same run with --pack_sequences")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch_size", type=int, default=16, help="records (rows) a step, for both runs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    return parser.parse_args(argv)


def tiny_model(info, seed: int) -> BertForPreTraining:
    torch.manual_seed(seed)  # the same initial weights for both runs
    return BertForPreTraining(BertConfig(vocab_size=info.manifest.vocab_size, hidden_size=128, num_hidden_layers=2,
                                         num_attention_heads=2, intermediate_size=512,
                                         max_position_embeddings=info.max_seq_length))


def losses(model: BertForPreTraining, batch):
    """(masked-LM loss summed over predicted tokens, predictions, pair loss summed over
    instances, instances) of one batch, packed or not."""
    hidden = model.bert(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                        token_type_ids=batch.get("token_type_ids"), position_ids=batch.get("position_ids"),
                        ).last_hidden_state
    labels = batch["labels"]
    mlm = F.cross_entropy(model.cls.predictions(hidden).flatten(0, 1), labels.flatten(), reduction="sum")
    pair_labels = batch.get("next_sentence_label")
    if pair_labels is None:  # MLM-only data
        instances = int(batch["position_ids"].eq(0).logical_and(batch["input_ids"].ne(0)).sum()) \
            if "position_ids" in batch else len(labels)
        return mlm, int((labels != -100).sum()), torch.zeros(()), instances
    if pair_labels.dim() == 1:  # unpacked: one [CLS] a row, at position 0
        pair_labels, positions = pair_labels[:, None], torch.zeros_like(pair_labels)[:, None]
    else:
        positions = batch["next_sentence_positions"]
    cls = hidden.gather(1, positions[..., None].expand(-1, -1, hidden.size(-1)))
    pooled = model.bert.pooler.activation(model.bert.pooler.dense(cls))
    pair = F.cross_entropy(model.cls.seq_relationship(pooled).flatten(0, 1), pair_labels.flatten(),
                           reduction="sum", ignore_index=-100)
    return mlm, int((labels != -100).sum()), pair, int((pair_labels != -100).sum())


def train(directory: str, args) -> dict:
    info = dataset_info(directory)
    model = tiny_model(info, args.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
    dataset = TorchDataset(directory, batch_size=args.batch_size, shuffle_buffer=1000,
                                          seed=args.seed, drop_remainder=True, format="transformers")
    totals = dict(tokens=0, instances=0, mlm=0.0, predictions=0, pair=0.0, seconds=0.0, steps=0)
    epoch = 0
    while totals["steps"] < args.steps:
        dataset.set_epoch(epoch)
        for batch in torch.utils.data.DataLoader(dataset, batch_size=None):
            started = time.perf_counter()
            mlm, predictions, pair, instances = losses(model, batch)
            loss = mlm / max(predictions, 1) + pair / max(instances, 1)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            totals["seconds"] += time.perf_counter() - started
            totals["tokens"] += int((batch["input_ids"] != 0).sum())  # text, not padding ([PAD] is 0)
            totals["instances"] += instances
            totals["mlm"] += mlm.item()
            totals["predictions"] += predictions
            totals["pair"] += pair.item()
            totals["steps"] += 1
            if totals["steps"] >= args.steps:
                break
        epoch += 1
    return totals


def main(argv=None):
    args = parse_args(argv)
    results = {"unpacked": train(args.unpacked_dir, args), "packed": train(args.packed_dir, args)}
    print(f"{'':32}{'unpacked':>14}{'packed':>14}")
    rows = [
        ("steps of %d records" % args.batch_size, lambda r: f"{r['steps']}"),
        ("instances per step", lambda r: f"{r['instances'] / r['steps']:.1f}"),
        ("text tokens per second", lambda r: f"{r['tokens'] / r['seconds']:,.0f}"),
        ("masked-LM loss per token", lambda r: f"{r['mlm'] / max(r['predictions'], 1):.3f}"),
        ("pair loss per instance", lambda r: f"{r['pair'] / max(r['instances'], 1):.3f}"),
    ]
    for name, value in rows:
        print(f"{name:32}{value(results['unpacked']):>14}{value(results['packed']):>14}")
    return results


if __name__ == "__main__":
    main()
