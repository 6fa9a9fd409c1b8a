"""--output_format megatron: the tokenized corpus as Megatron-LM's indexed ``.bin``/``.idx``
pairs, read with megatron-core's own ``IndexedDataset``: every sentence a sequence, every
document a range of sequences, documents in the listed order across the shards, as Megatron's
``preprocess_data.py --split-sentences`` writes them; same bytes for any number of workers."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from bert_data.format.manifest import Manifest
from bert_data.format.megatron import read_documents
from bert_data.run.resolve import generate

from tests.helpers.corpus import corpus_config, make_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("megatron") / "corpus", n_docs=12, seed=4)


def megatron_config(corpus, out, **options):
    return corpus_config(corpus, out, output_format="megatron", split_num=4, **options)


def expected_documents(corpus, labels):
    """Each listed document's sentences as token ids, from the corpus's own tokens."""
    vocab = {token: i for i, token in enumerate(corpus.vocab.read_text(encoding="utf-8").split("\n"))}
    return [[[vocab[token] for token in sentence] for sentence in corpus.documents[label]] for label in labels]


def indexed_documents(prefixes):
    """Documents through megatron-core's IndexedDataset, shard after shard."""
    indexed_dataset = pytest.importorskip("megatron.core.datasets.indexed_dataset")
    documents = []
    for prefix in prefixes:
        dataset = indexed_dataset.IndexedDataset(str(prefix))
        bounds = dataset.document_indices
        assert bounds[0] == 0 and bounds[-1] == len(dataset)
        for first, last in zip(bounds[:-1], bounds[1:]):
            documents.append([dataset[i].tolist() for i in range(first, last)])
        assert dataset[0].dtype == np.uint16  # Megatron's optimal_dtype for a small vocabulary
    return documents


def test_indexed_dataset_reads_every_sentence_of_every_document_in_listed_order(corpus, tmp_path):
    out = tmp_path / "out"
    summary = generate(megatron_config(corpus, out, num_output_files=3), progress=False)
    assert sorted(path.name for path in out.iterdir()) == [
        "data_params.json", "examples-1.bin", "examples-1.idx", "examples-2.bin", "examples-2.idx", "examples-3.bin",
        "examples-3.idx"]
    labels = corpus.metadata.read_text().split()
    expected = expected_documents(corpus, labels)
    assert indexed_documents([out / f"examples-{i}" for i in (1, 2, 3)]) == expected
    # Our reader, the mirror of the writer, reads the same.
    ours = [[sentence.tolist() for sentence in document] for i in (1, 2, 3)
            for document in read_documents(str(out / f"examples-{i}.bin"))]
    assert ours == expected
    manifest = Manifest.read(str(out))
    assert manifest.options["output_format"] == "megatron"
    assert manifest.n_docs == len(labels) == summary.manifests["train"]["n_docs"]
    assert manifest.n_examples == sum(len(document) for document in expected)  # a sentence is a sequence
    assert sum(manifest.examples_per_file.values()) == manifest.n_examples
    tokens = [sum(len(s) for s in document) for document in expected]
    assert manifest.n_tokens == sum(tokens)
    # Shards of neighbouring documents, of about equal tokens.
    shard_tokens = [(out / f"examples-{i}.bin").stat().st_size // 2 for i in (1, 2, 3)]
    assert sum(shard_tokens) == sum(tokens) and max(shard_tokens) - min(shard_tokens) <= 2 * max(tokens)


def test_a_validation_split_has_its_own_pairs(corpus, tmp_path):
    out = tmp_path / "out"
    generate(megatron_config(corpus, out, num_output_files=2, val_fraction=0.3), progress=False)
    labels = corpus.metadata.read_text().split()

    def key(document):
        return tuple(tuple(sentence) for sentence in document)

    label_of = {key(document): label for document, label in zip(expected_documents(corpus, labels), labels)}
    found = {}
    for split in ("train", "val"):
        documents = indexed_documents([out / split / f"examples-{i}" for i in (1, 2)])
        found[split] = [label_of[key(document)] for document in documents]
        assert found[split] == sorted(found[split])  # listed order within the split
    assert found["val"] and sorted(found["train"] + found["val"]) == labels


def test_same_bytes_with_two_workers_and_shards_sized_by_sentences(corpus, tmp_path):
    generate(megatron_config(corpus, tmp_path / "one", num_output_files=3), progress=False)
    generate(megatron_config(corpus, tmp_path / "two", num_output_files=3, num_workers=2), progress=False)

    def hashes(directory: Path):
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.iterdir() if p.suffix != ".json"}

    assert hashes(tmp_path / "one") == hashes(tmp_path / "two")
    generate(megatron_config(corpus, tmp_path / "sized", records_per_file=100), progress=False)
    manifest = Manifest.read(str(tmp_path / "sized"))
    assert len(manifest.examples_per_file) == max(1, round(manifest.n_examples / 100))
