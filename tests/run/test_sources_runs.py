"""Runs with ``--sources``: weights and budgets realized to the document, reported per source in
the manifest; the same bytes for any number of workers, after ``--resume`` and on Dask; and a run
without ``--sources`` and ``--record_provenance`` unchanged."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bert_data.run.resolve import generate
from bert_data.run.run_files import Interrupted

from tests.helpers.corpus import corpus_config, file_hashes
from tests.helpers.interruptions import interrupted_at_append
from tests.helpers.sources import sources_file, two_sources


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    return two_sources(root / "corpus", n_docs=60, first=24, min_sentences=6, max_sentences=20, words_per_doc=20)


def source_config(corpus, path, output, **overrides):
    synthetic, _ = corpus
    options = dict(metadata_files=[], input_files_prefix="", sources=str(path), split_num=8, num_output_files=3)
    options.update(overrides)
    return corpus_config(synthetic, output, **options)


def doc_tokens(corpus, lists):
    """Every listed document's tokens, per source, from the corpus's expected tokens."""
    return [[sum(len(sentence) for sentence in corpus.documents[label]) for label in metadata.read_text().split()]
            for metadata in lists]


def test_weights_repeat_documents_as_asked(corpus, tmp_path):
    synthetic, lists = corpus
    path = sources_file(tmp_path / "sources.toml", synthetic, lists, {"weight": 2.0}, {"weight": 0.25})
    summary = generate(source_config(corpus, path, tmp_path / "out"), progress=False)
    report = summary.manifests["train"]["per_source"]
    tokens = doc_tokens(synthetic, lists)
    assert [entry["name"] for entry in report] == ["first", "second"]
    assert report[0]["realized"]["documents"] == 48 and report[0]["realized"]["tokens"] == 2 * sum(tokens[0])
    assert report[1]["realized"]["documents"] == round(0.25 * 36)  # 9 of 36, a seeded subset
    assert report[1]["realized"]["tokens"] < sum(tokens[1])
    assert sum(entry["realized"]["instances"] for entry in report) == summary.manifests["train"]["n_instances"]
    assert summary.manifests["train"]["n_docs"] == 48 + 9
    assert summary.manifests["train"]["sources"]["source"][1]["weight"] == 0.25  # the file's content recorded


def test_budgets_and_shares_are_realized_within_one_document(corpus, tmp_path):
    synthetic, lists = corpus
    tokens = doc_tokens(synthetic, lists)
    budget = int(1.5 * sum(tokens[0])) + 7
    path = sources_file(tmp_path / "sources.toml", synthetic, lists, {"tokens": budget}, {"share": 0.25})
    summary = generate(source_config(corpus, path, tmp_path / "out", num_workers=2), progress=False)
    first, second = summary.manifests["train"]["per_source"]
    assert first["requested"]["tokens"] == budget
    assert abs(first["realized"]["tokens"] - budget) <= max(tokens[0])
    # The share is of the run: what the budget source realized over the 75% it leaves.
    wanted = 0.25 * first["realized"]["tokens"] / 0.75
    assert second["requested"]["tokens"] == pytest.approx(wanted)
    assert abs(second["realized"]["tokens"] - wanted) <= max(tokens[1])
    assert first["realized"]["instances"] > 0 and second["realized"]["instances"] > 0


def test_the_same_bytes_for_one_and_two_workers_and_after_resume(corpus, tmp_path):
    synthetic, lists = corpus
    path = sources_file(tmp_path / "sources.toml", synthetic, lists, {"tokens": 3000}, {"weight": 1.5})
    generate(source_config(corpus, path, tmp_path / "one"), progress=False)
    reference = file_hashes(tmp_path / "one")
    assert reference
    generate(source_config(corpus, path, tmp_path / "two", num_workers=2), progress=False)
    assert file_hashes(tmp_path / "two") == reference

    with interrupted_at_append(3), pytest.raises(Interrupted):
        generate(source_config(corpus, path, tmp_path / "resumed"), progress=False)
    summary = generate(source_config(corpus, path, tmp_path / "resumed", resume=True), progress=False)
    assert summary.resumed_from_unit == 2
    assert file_hashes(tmp_path / "resumed") == reference
    manifest = json.loads((tmp_path / "resumed" / "data_params.json").read_text())
    original = json.loads((tmp_path / "one" / "data_params.json").read_text())
    assert manifest["per_source"] == original["per_source"]


def test_a_changed_sources_file_is_not_resumed(corpus, tmp_path):
    synthetic, lists = corpus
    path = sources_file(tmp_path / "sources.toml", synthetic, lists, {"weight": 1.0}, {"weight": 1.0})
    with interrupted_at_append(2), pytest.raises(Interrupted):
        generate(source_config(corpus, path, tmp_path / "out"), progress=False)
    sources_file(path, synthetic, lists, {"weight": 1.0}, {"weight": 2.0})
    from bert_data.config import ConfigError

    with pytest.raises(ConfigError, match=r"--sources: source 2 \(second\) weight was 1.0, now 2.0"):
        generate(source_config(corpus, path, tmp_path / "out", resume=True), progress=False)


def test_a_source_of_weight_one_gives_the_bytes_of_its_plain_run(corpus, tmp_path):
    """One source, weight 1: the same documents in the same order as --metadata_files give."""
    synthetic, lists = corpus
    path = sources_file(tmp_path / "sources.toml", synthetic, [synthetic.metadata], {"weight": 1.0})
    generate(source_config(corpus, path, tmp_path / "sources"), progress=False)
    generate(corpus_config(synthetic, tmp_path / "plain", split_num=8, num_output_files=3), progress=False)
    assert file_hashes(tmp_path / "sources") == file_hashes(tmp_path / "plain")


def test_validation_is_drawn_per_source(corpus, tmp_path):
    synthetic, lists = corpus
    path = sources_file(tmp_path / "sources.toml", synthetic, lists, {"weight": 3.0, "val_fraction": 0.2},
                        {"weight": 1.0})
    summary = generate(source_config(corpus, path, tmp_path / "out"), progress=False)
    first, second = summary.manifests["val"]["per_source"]
    assert first["listed"]["val_documents"] > 0 and second["listed"]["val_documents"] == 0
    # Validation documents are made once, whatever the weight.
    assert first["realized"]["val_documents"] == first["listed"]["val_documents"]
    assert first["realized"]["documents"] == 3 * first["listed"]["train_documents"]
    assert summary.manifests["val"]["n_docs"] == first["listed"]["val_documents"]


def test_dask_gives_the_bytes_of_a_local_run(corpus, tmp_path):
    pytest.importorskip("distributed")
    from distributed import Client, LocalCluster

    synthetic, lists = corpus
    path = sources_file(tmp_path / "sources.toml", synthetic, lists, {"tokens": 2500}, {"weight": 0.5})
    generate(source_config(corpus, path, tmp_path / "local"), progress=False)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        generate(source_config(corpus, path, tmp_path / "dask"), executor=client.get_executor(pure=False),
                 parallelism=2, progress=False)
    assert file_hashes(tmp_path / "dask") == file_hashes(tmp_path / "local")
    assert np.all([len(name) for name in file_hashes(tmp_path / "local")])


def test_a_run_stopped_after_tokenizing_resumes_to_the_same_bytes(corpus, tmp_path, monkeypatch):
    """Budgets wait for every slice to be tokenized; stopped there (before any unit is dealt),
    the resumed run reuses the slices and gives the bytes of an uninterrupted run."""
    import bert_data.run.runner as runner

    synthetic, lists = corpus
    path = sources_file(tmp_path / "sources.toml", synthetic, lists, {"tokens": 2000}, {"share": 0.5})
    generate(source_config(corpus, path, tmp_path / "whole"), progress=False)
    real_deal = runner.deal_units

    def stopped(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "deal_units", stopped)
    with pytest.raises(Interrupted):
        generate(source_config(corpus, path, tmp_path / "resumed"), progress=False)
    monkeypatch.setattr(runner, "deal_units", real_deal)
    generate(source_config(corpus, path, tmp_path / "resumed", resume=True), progress=False)
    assert file_hashes(tmp_path / "resumed") == file_hashes(tmp_path / "whole")


def test_shards_sized_by_records_count_repeated_documents(corpus, tmp_path):
    synthetic, lists = corpus
    path = sources_file(tmp_path / "sources.toml", synthetic, lists, {"weight": 3.0}, {"weight": 3.0})
    summary = generate(source_config(corpus, path, tmp_path / "out", num_output_files=10, records_per_file=100),
                       progress=False)
    records = summary.manifests["train"]["examples_per_file"].values()
    assert 60 <= sum(records) / len(records) <= 160  # about 100 a shard, the copies counted


def test_documents_removed_by_dedup_are_reported_per_source(corpus, tmp_path):
    """--dedup with --sources: a copy in the second source of a document of the first is removed
    (the first occurrence, in the sources' order, is kept) and the report names the source."""
    synthetic, lists = corpus
    first_label = lists[0].read_text().split()[0]
    copy = synthetic.root / "copies" / "copy-of-first.txt"
    copy.parent.mkdir(exist_ok=True)
    copy.write_bytes((synthetic.root / first_label).read_bytes())
    second = tmp_path / "second.txt"
    second.write_text(lists[1].read_text() + "copies/copy-of-first.txt\n")
    try:
        path = sources_file(tmp_path / "sources.toml", synthetic, [lists[0], second], {"weight": 1.0}, {"weight": 1.0})
        summary = generate(source_config(corpus, path, tmp_path / "out", dedup="exact"), progress=False)
    finally:
        copy.unlink()
    removed = summary.manifests["train"]["documents_removed"]
    assert removed["documents"] == 1 and removed["exact_duplicates"] == 1
    assert removed["by_file"] == {"copies/copy-of-first.txt": {"documents": 1, "exact_duplicates": 1,
                                                               "near_duplicates": 0}}
    assert removed["by_source"] == {"second": {"documents": 1, "exact_duplicates": 1, "near_duplicates": 0}}
    assert summary.manifests["train"]["n_docs"] == 60


def test_a_budget_is_met_by_documents_dedup_keeps(corpus, tmp_path):
    """--dedup with a token budget: removals are decided before the budget is realized, so the
    copies dedup removes count for nothing and the kept documents make up the budget (before,
    the budget counted them and the run came out short by what was removed)."""
    synthetic, lists = corpus
    first_labels = lists[0].read_text().split()[:6]
    copies_dir = synthetic.root / "budget-copies"
    copies_dir.mkdir(exist_ok=True)
    second = tmp_path / "second.txt"
    names = []
    for number, label in enumerate(first_labels):
        (copies_dir / f"copy-{number}.txt").write_bytes((synthetic.root / label).read_bytes())
        names.append(f"budget-copies/copy-{number}.txt")
    second.write_text("\n".join(names) + "\n" + lists[1].read_text())  # the copies first: drawn often
    tokens = doc_tokens(synthetic, lists)
    budget = int(0.8 * sum(tokens[1]))
    try:
        path = sources_file(tmp_path / "sources.toml", synthetic, [lists[0], second], {"weight": 1.0},
                            {"tokens": budget})
        summary = generate(source_config(corpus, path, tmp_path / "out", dedup="exact"), progress=False)
    finally:
        for number in range(len(first_labels)):
            (copies_dir / f"copy-{number}.txt").unlink()
        copies_dir.rmdir()
    manifest = summary.manifests["train"]
    assert manifest["documents_removed"]["by_source"]["second"]["documents"] >= 1
    first, second_report = manifest["per_source"]
    # Realized counts only written documents, and the budget is met by them.
    assert first["realized"]["documents"] + second_report["realized"]["documents"] == manifest["n_docs"]
    assert abs(second_report["realized"]["tokens"] - budget) <= max(tokens[1] + tokens[0])
