"""JSON Lines slices split a line a sentence and tokenized a slice at once
(``DocumentTokenizer.tokenize_read``, used when the splitter has ``split_batch``) against
documents tokenized as they are read (``tokenize``, the reference): the same files, manifests
(their lists of skipped documents, in order) and totals, on hostile lines (invalid JSON, blank
lines, texts that are not strings, empty texts, texts the tokenizer drops whole, escapes, lone
surrogates, long documents), with batches ending inside slices."""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from bert_data.pipeline import tokens as tokens_module
from bert_data.pipeline.documents import planner
from bert_data.pipeline.documents.types import INVALID_JSON, NO_SENTENCE
from bert_data.pipeline.sentences import LineSentenceSplitter
from bert_data.run.resolve import generate

from tests.helpers.corpus import corpus_config, make_corpus


def _lines(rng: random.Random, words, n: int):
    for d in range(n):
        kind = rng.random()
        if kind < 0.04:
            yield "{not json"
        elif kind < 0.07:
            yield ""
        elif kind < 0.09:
            yield json.dumps({"text": 5})
        elif kind < 0.11:
            yield json.dumps({"text": "  \n "})
        elif kind < 0.16:
            yield json.dumps({"text": "\u200b\n\u200b\u200b"})  # only a character the tokenizer drops
        elif kind < 0.18:
            yield '{"text": "lone \\ud800 surrogate\\nand ' + rng.choice(words) + '"}'
        else:
            sentences = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))
                         for _ in range(rng.randint(1, 60 if kind > 0.99 else 3))]
            record = {"id": d, "text": "\n".join(sentences) + rng.choice(["", "\n", "\r\n", "\n\n"])}
            yield json.dumps(record, ensure_ascii=rng.random() < 0.5)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    corpus = make_corpus(tmp_path_factory.mktemp("slice_batches"), n_docs=8)
    words = [line for line in corpus.vocab.read_text(encoding="utf-8").split("\n")
             if line and not line.startswith(("[", "##"))]
    rng = random.Random(3)
    (corpus.root / "short.jsonl").write_text("\n".join(_lines(rng, words, 1500)) + "\n", encoding="utf-8")
    corpus.metadata.write_text("short.jsonl\n", encoding="utf-8")
    return corpus


def output_hashes(directory) -> dict:
    """Every file the run wrote but ``data_params.json`` (it names the output directory)."""
    return {path.relative_to(directory).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(directory.rglob("*")) if path.is_file() and path.name != "data_params.json"}


@pytest.mark.parametrize("batch", [4096, 37])
def test_slices_read_first_write_the_reference_bytes(corpus, tmp_path, monkeypatch, batch):
    monkeypatch.setattr(tokens_module, "TOKENIZE_BATCH", batch)  # 37: batches end inside each slice
    plan_corpus = planner.plan_corpus  # slices of ~20 kB: several, as a large corpus has
    monkeypatch.setattr(planner, "plan_corpus", lambda *a, **k: plan_corpus(*a, **dict(k, slice_bytes=20_000)))
    calls = []
    tokenize_read = tokens_module.DocumentTokenizer.tokenize_read
    monkeypatch.setattr(tokens_module.DocumentTokenizer, "tokenize_read",
                        lambda self, *a: calls.append(1) or tokenize_read(self, *a))
    written = {}
    for fast in (True, False):
        if not fast:  # the splitter without its batch: documents tokenized as they are read
            monkeypatch.delattr(LineSentenceSplitter, "split_batch")
        output = tmp_path / str(fast)
        generate(corpus_config(corpus, output, text_field="text", single_sentence_per_line=True, split_num=150,
                               dupe_factor=1))
        params = json.loads((output / "data_params.json").read_text(encoding="utf-8"))
        params.pop("output_dir")  # (the manifest: it names the output directory)
        written[fast] = output_hashes(output), params
        if fast:
            assert calls  # the batch path ran
    assert written[True] == written[False]
    listed = {item["reason"] for item in written[True][1]["documents_skipped"]["first"]}
    assert {NO_SENTENCE, INVALID_JSON} <= listed  # the listed skips hold both kinds, in the reference's order
