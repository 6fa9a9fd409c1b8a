"""A well-mixed, leak-free dataset: shards are samples of the whole corpus, splits never share a
document, the held-out set depends on --val_seed only, and each split's manifest tells its own
counts."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import tensorflow as tf

from bert_data.config import GeneratorConfig
from bert_data.format.layout import tf_feature_description
from bert_data.run.resolve import generate

from tests.helpers.corpus import file_hashes, make_corpus
from tests.helpers.interruptions import interrupted_at_append

MSL, MPP = 64, 10
N_SOURCES, DOCS_PER_SOURCE = 4, 200


@pytest.fixture(scope="module")
def sourced_corpus(tmp_path_factory):
    """800 short documents listed source by source (4 sources of 200): each document makes about
    one instance, so records are close to independent draws of documents."""
    return make_corpus(tmp_path_factory.mktemp("sourced"), n_docs=N_SOURCES * DOCS_PER_SOURCE, min_sentences=2,
                       max_sentences=4, words_per_doc=6)


BOOK = 100  # the document of source 0 made a hundred times longer than the others: a "book"


@pytest.fixture(scope="module")
def sourced_corpus_with_a_book(tmp_path_factory):
    """The sourced corpus with one document four hundred times its length: about a fifth of all
    records, all from one document of source 0, as a large book is among short articles."""
    corpus = make_corpus(tmp_path_factory.mktemp("book"), n_docs=N_SOURCES * DOCS_PER_SOURCE, min_sentences=2,
                         max_sentences=4, words_per_doc=6)
    book = corpus.root / list(corpus.documents)[BOOK]
    book.write_text("\n\n".join([book.read_text()] * 400))
    return corpus


def config(corpus, output, **options):
    settings = dict(metadata_files=[str(corpus.metadata)], input_files_prefix=str(corpus.root),
                    vocab_file=str(corpus.vocab), do_lower_case=True, max_seq_length=MSL,
                    max_predictions_per_seq=MPP, dupe_factor=1, split_num=40, num_output_files=2,
                    output_dir=str(output), num_workers=1, seed=5)
    settings.update(options)
    return GeneratorConfig(**settings)


def read_shard(path):
    """The shard's records parsed by TensorFlow with Google's feature spec, a batch at a time
    (record by record, parsing took longer than generating)."""
    spec = tf_feature_description(MSL, MPP)
    rows = []
    for records in tf.data.TFRecordDataset([str(path)]).batch(1024):
        columns = {k: v.numpy() for k, v in tf.io.parse_example(records, spec).items()}
        rows += [{k: column[i] for k, column in columns.items()} for i in range(len(records))]
    return rows


def vocabulary(corpus):
    return corpus.vocab.read_text(encoding="utf-8").split("\n")


def documents_of_segment_a(row, tokens, corpus):
    """The documents the A segment of a record comes from (masked positions put back)."""
    ids = row["input_ids"].copy()
    for position, original, weight in zip(row["masked_lm_positions"], row["masked_lm_ids"], row["masked_lm_weights"]):
        if weight:
            ids[position] = original
    a_end = int(np.argmax(row["segment_ids"])) - 1 if row["segment_ids"].any() else int(row["input_mask"].sum()) - 1
    return corpus.document_of([tokens[i] for i in ids[1:a_end]])


def source_of(row, tokens, corpus, labels):
    (label,) = documents_of_segment_a(row, tokens, corpus)
    return labels.index(label) // DOCS_PER_SOURCE


def chi_square_quantile(dof: int, alpha: float) -> float:
    """The (1 - alpha) quantile of chi-square with ``dof`` degrees of freedom, by Wilson and
    Hilferty's cube-root normal approximation (within 1% of the exact value from 9 degrees of
    freedom and alpha 0.0005)."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1 - alpha)
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


def chi_square_bound(dof: int, alpha: float) -> float:
    """The (1 - alpha) quantile of chi-square with 3 degrees of freedom (survival function
    erfc(sqrt(x/2)) + sqrt(2x/pi) exp(-x/2)), by bisection."""
    assert dof == 3

    def survival(x):
        return math.erfc(math.sqrt(x / 2)) + math.sqrt(2 * x / math.pi) * math.exp(-x / 2)

    low, high = 0.0, 200.0
    for _ in range(100):
        middle = (low + high) / 2
        low, high = (middle, high) if survival(middle) > alpha else (low, middle)
    return high


def records_sources(output, corpus):
    """For each shard, in order: the source (0-3) of each record, and whether it is the book's."""
    tokens, labels = vocabulary(corpus), list(corpus.documents)
    shards = []
    for path in sorted(output.glob("*.tfrecords")):
        documents = [documents_of_segment_a(row, tokens, corpus) for row in read_shard(path)]
        assert all(len(found) == 1 for found in documents)
        positions = [labels.index(next(iter(found))) for found in documents]
        shards.append((np.asarray(positions) // DOCS_PER_SOURCE, np.asarray(positions) == BOOK))
    return shards


def tenths_statistics(output, corpus):
    """Pearson's chi-square of each tenth of each shard: its records' counts by source against
    the corpus-wide shares of records by source."""
    shards = [sources for sources, _ in records_sources(output, corpus)]
    everything = np.bincount(np.concatenate(shards), minlength=N_SOURCES)
    shares = everything / everything.sum()
    statistics = []
    for sources in shards:
        for window in np.array_split(np.asarray(sources), 10):
            observed = np.bincount(window, minlength=N_SOURCES)
            expected = shares * len(window)
            statistics.append(float(((observed - expected) ** 2 / expected).sum()))
    return statistics, everything


def test_every_tenth_of_every_shard_is_a_sample_of_the_whole_corpus(sourced_corpus_with_a_book, tmp_path):
    """The statistic: for each of the 20 windows (tenths of 2 shards), Pearson's chi-square of its
    source counts against the corpus-wide shares, 3 degrees of freedom; each must stay below
    the 1 - 0.001/20 quantile (a 0.1% test, Bonferroni over the windows).  Deterministic for the
    seed.  The corpus holds a book (a fifth of the records, all of source 0): shards made of
    units one after the other, however well each unit is drawn, put the book's unit in one
    stretch of each shard, and that stretch fails.  The same statistic rejects every window of a
    run that keeps the listed order, so the test can fail."""
    corpus = sourced_corpus_with_a_book
    bound = chi_square_bound(3, 0.001 / 20)
    generate(config(corpus, tmp_path / "mixed"), progress=False)
    mixed, counts = tenths_statistics(tmp_path / "mixed", corpus)
    assert counts.min() > 100 and len(mixed) == 20
    assert max(mixed) < bound, (max(mixed), bound)

    generate(config(corpus, tmp_path / "ordered", keep_corpus_order=True), progress=False)
    ordered, _ = tenths_statistics(tmp_path / "ordered", corpus)
    assert sum(statistic > bound for statistic in ordered) >= 16  # the listed order shows through


def test_the_records_of_one_book_are_spread_over_every_shard_evenly(sourced_corpus_with_a_book, tmp_path):
    """Records of all units interleaved, not appended block after block: in each shard, the
    book's records fall in its ten tenths as uniform draws would (Pearson's chi-square against
    equal counts, 9 degrees of freedom, below its 0.1% bound with Bonferroni over the two
    shards).  Shards made of units one after the other put all of them in one or two tenths."""
    corpus = sourced_corpus_with_a_book
    generate(config(corpus, tmp_path / "out", num_workers=2), progress=False)
    bound = chi_square_quantile(9, 0.001 / 2)
    for sources, of_the_book in records_sources(tmp_path / "out", corpus):
        counts = np.asarray([window.sum() for window in np.array_split(of_the_book, 10)])
        expected = counts.sum() / 10
        assert expected > 8, counts
        statistic = float(((counts - expected) ** 2 / expected).sum())
        assert statistic < bound, (counts, statistic, bound)


def test_the_same_bytes_for_any_number_of_workers_and_units_across_files(sourced_corpus, tmp_path):
    one = generate(config(sourced_corpus, tmp_path / "one", num_workers=1), progress=False)
    two = generate(config(sourced_corpus, tmp_path / "two", num_workers=2), progress=False)
    assert file_hashes(tmp_path / "one") == file_hashes(tmp_path / "two")
    assert one.manifests["train"]["n_units"] == 20 == two.manifests["train"]["n_units"]


def records_documents(directory, corpus):
    tokens = vocabulary(corpus)
    found = set()
    for path in sorted(directory.glob("*.tfrecords")):
        for row in read_shard(path):
            ids = row["input_ids"].copy()
            for position, original, weight in zip(row["masked_lm_positions"], row["masked_lm_ids"],
                                                  row["masked_lm_weights"]):
                if weight:
                    ids[position] = original
            found |= corpus.document_of([tokens[i] for i in ids[: int(row["input_mask"].sum())]])
    return found


def test_documents_named_for_validation_are_never_trained_on(tmp_path):
    corpus = make_corpus(tmp_path / "c", n_docs=40, min_sentences=6, max_sentences=12)
    labels = list(corpus.documents)
    held_out = labels[5:15]
    val_metadata = tmp_path / "val.txt"
    val_metadata.write_text("\n".join(held_out) + "\n")
    summary = generate(config(corpus, tmp_path / "out", val_metadata_files=[str(val_metadata)], split_num=8,
                              dupe_factor=2), progress=False)
    train, val = summary.manifests["train"], summary.manifests["val"]
    assert train["n_docs"] == 30 and train["n_docs_held_out"] == 10 and val["n_docs"] == 10
    assert records_documents(tmp_path / "out" / "train", corpus) == set(labels) - set(held_out)
    assert records_documents(tmp_path / "out" / "val", corpus) == set(held_out)


def val_documents(directory, corpus):
    return records_documents(directory / "val", corpus)


def test_the_held_out_set_moves_with_val_seed_never_with_seed(tmp_path):
    corpus = make_corpus(tmp_path / "c", n_docs=60, min_sentences=6, max_sentences=12)
    runs = {}
    for name, seed, val_seed in (("a", 1, 0), ("b", 2, 0), ("c", 1, 9)):
        generate(config(corpus, tmp_path / name, val_fraction=0.3, seed=seed, val_seed=val_seed, split_num=8),
                 progress=False)
        runs[name] = val_documents(tmp_path / name, corpus)
    assert 5 < len(runs["a"]) < 35
    assert runs["a"] == runs["b"]  # --seed: other masks and pairs, the same held-out documents
    assert file_hashes(tmp_path / "a" / "val") != file_hashes(tmp_path / "b" / "val")
    assert runs["a"] != runs["c"]  # --val_seed chooses them


def manifest(directory):
    return json.loads((directory / "data_params.json").read_text())


def test_each_split_manifest_tells_its_own_counts_and_options(tmp_path):
    corpus = make_corpus(tmp_path / "c", n_docs=50, min_sentences=6, max_sentences=12)
    whole = generate(config(corpus, tmp_path / "whole", split_num=8), progress=False).manifests["train"]
    generate(config(corpus, tmp_path / "split", val_fraction=0.3, split_num=8, dupe_factor=3), progress=False)
    train, val = manifest(tmp_path / "split" / "train"), manifest(tmp_path / "split" / "val")
    for key in ("n_docs", "n_sentences", "n_tokens", "n_docs_listed"):
        assert train[key] + val[key] == whole[key], key
        assert 0 < val[key] < train[key], key
    assert train["n_units"] == -(-train["n_docs_listed"] // 8) and val["n_units"] == -(-val["n_docs_listed"] // 8)
    assert train["dupe_factor"] == 3 and val["dupe_factor"] == 1  # validation instances are made once
    for split in (train, val):
        assert split["n_examples"] == sum(split["examples_per_file"].values())
        assert split["min_short_seq_length"] == 2  # the effective value, not null
        assert split["overlap_size"] is None  # windows only (--mlm_only)
    windows = generate(config(corpus, tmp_path / "windows", mlm_only=True), progress=False).manifests["train"]
    assert windows["overlap_size"] == MSL // 4 and windows["min_short_seq_length"] == MSL // 4 + 2


def short_share(directory, threshold):
    lengths = []
    for path in sorted(directory.glob("*.tfrecords")):
        lengths += [int(row["input_mask"].sum()) for row in read_shard(path)]
    return float(np.mean(np.asarray(lengths) <= threshold)), len(lengths)


def test_short_targets_drawn_per_chunk_do_not_depend_on_document_sizes(tmp_path):
    """One document holds most of the corpus.  Drawn per document (Google), its single draw
    decides for most instances: with seed 0 it draws a short target (about one seed in five
    does) and short instances jump from about 9% to over 30%; drawn per chunk, the share stays
    near its usual value whatever the seed."""
    corpus = make_corpus(tmp_path / "c", n_docs=20, min_sentences=4, max_sentences=8)
    big = corpus.root / "docs" / "doc000.txt"
    big.write_text("\n\n".join([big.read_text()] * 150))
    shares = {}
    for draw in ("document", "chunk"):
        for seed in (0, 7):
            output = tmp_path / f"{draw}-{seed}"
            generate(config(corpus, output, short_seq_draw=draw, short_seq_prob=0.2, seed=seed, split_num=20),
                     progress=False)
            shares[draw, seed], n = short_share(output, MSL // 2)
            assert n > 250
    assert shares["document", 7] < 0.1 and shares["document", 0] > 0.3, shares
    assert all(0.06 < shares["chunk", seed] < 0.13 for seed in (0, 7)), shares
    assert abs(shares["chunk", 0] - shares["chunk", 7]) < 0.05, shares


def test_resume_reuses_the_slices_tokenized_before_an_interruption(tmp_path, monkeypatch):
    import bert_data.pipeline.documents.planner as planner
    import bert_data.run.scheduler as scheduler

    corpus = make_corpus(tmp_path / "c", n_docs=40, min_sentences=4, max_sentences=8)
    original_plan, original_tokenize = planner.plan_corpus, scheduler.tokenize_slice
    monkeypatch.setattr(planner, "plan_corpus", lambda *a, **k: original_plan(*a, slice_docs=4, **k))
    generate(config(corpus, tmp_path / "reference", split_num=8), progress=False)
    calls = []

    def tokenize_then_stop(slice_, *args):
        if len(calls) == 6:
            raise KeyboardInterrupt  # as Ctrl-C would, after six of the ten slices
        calls.append(slice_.index)
        return original_tokenize(slice_, *args)

    monkeypatch.setattr(scheduler, "tokenize_slice", tokenize_then_stop)
    with pytest.raises(KeyboardInterrupt):
        generate(config(corpus, tmp_path / "out", split_num=8), progress=False)
    assert calls == list(range(6)) and not list((tmp_path / "out").rglob("*.tfrecords"))

    calls.clear()
    monkeypatch.setattr(scheduler, "tokenize_slice", lambda slice_, *args: calls.append(slice_.index) or
                        original_tokenize(slice_, *args))
    generate(config(corpus, tmp_path / "out", split_num=8, resume=True), progress=False)
    assert calls == list(range(6, 10))  # only the slices not yet tokenized
    assert file_hashes(tmp_path / "out") == file_hashes(tmp_path / "reference")


# ---------------------------------------------------------------------------- shard sizing

@pytest.mark.parametrize("keep_corpus_order", [False, True])
def test_shards_sized_by_records(sourced_corpus, tmp_path, keep_corpus_order):
    summary = generate(config(sourced_corpus, tmp_path / "one", records_per_file=100, val_fraction=0.2,
                              keep_corpus_order=keep_corpus_order), progress=False)
    for split, n_shards_at_least in (("train", 4), ("val", 1)):
        manifest = summary.manifests[split]
        counts = list(manifest["examples_per_file"].values())
        assert manifest["num_output_files"] == len(counts) >= n_shards_at_least
        assert len(list((tmp_path / "one" / split).glob("*.tfrecords"))) == len(counts)
        # The count comes from an estimate made on the first unit: each shard within 15% of 100.
        assert all(85 <= n <= 115 for n in counts), counts
        assert sum(counts) == manifest["n_examples"] == sum(len(read_shard(p))
                                                            for p in (tmp_path / "one" / split).glob("*.tfrecords"))
    generate(config(sourced_corpus, tmp_path / "two", records_per_file=100, val_fraction=0.2, num_workers=2,
                    keep_corpus_order=keep_corpus_order), progress=False)
    assert file_hashes(tmp_path / "one") == file_hashes(tmp_path / "two")


def test_shards_sized_by_megabytes_compressed(sourced_corpus, tmp_path):
    target = 0.02  # 20 KB: a small corpus
    # Units of 200 documents: the size of a record is estimated on the first unit's records
    # compressed as one stream (as each shard is), and a tiny sample compresses less well.
    summary = generate(config(sourced_corpus, tmp_path, megabytes_per_file=target, compression="gzip",
                              split_num=200), progress=False)
    sizes = list(summary.manifests["train"]["bytes_per_file"].values())
    assert len(sizes) >= 3 and all(0.85 * target * 1e6 <= size <= 1.15 * target * 1e6 for size in sizes), sizes
    with pytest.raises(Exception, match="contradict"):
        generate(config(sourced_corpus, tmp_path / "x", megabytes_per_file=1, records_per_file=5), progress=False)


def test_sized_shards_resume_to_the_same_bytes(sourced_corpus, tmp_path):
    generate(config(sourced_corpus, tmp_path / "reference", records_per_file=150, split_num=20), progress=False)
    # As Ctrl-C would, after eight units.
    with interrupted_at_append(9), pytest.raises(KeyboardInterrupt):
        generate(config(sourced_corpus, tmp_path / "out", records_per_file=150, split_num=20), progress=False)
    generate(config(sourced_corpus, tmp_path / "out", records_per_file=150, split_num=20, resume=True),
             progress=False)
    assert file_hashes(tmp_path / "out") == file_hashes(tmp_path / "reference")
