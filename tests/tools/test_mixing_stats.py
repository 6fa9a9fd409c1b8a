"""``bert-data stats --mixing``: the per-window statistic users run on their own data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bert_data.cli.bert_data_cli import main
from bert_data.config import GeneratorConfig
from bert_data.run.resolve import generate
from bert_data.tools.mixing_stats import window_gaps

from tests.helpers.corpus import make_corpus

N_SOURCES, DOCS_PER_SOURCE = 4, 100


def test_window_gaps_of_an_ordered_and_a_shuffled_shard():
    ordered = np.arange(2000) < 500  # the first quarter holds the token
    share, gap, sd = window_gaps(ordered)
    assert share == 0.25 and gap == pytest.approx(0.75) and sd > 20
    share, gap, sd = window_gaps(np.random.default_rng(0).permutation(ordered))
    assert share == 0.25 and gap < 0.06 and sd < 4
    assert window_gaps(np.zeros(0, bool)) == (0.0, 0.0, 0.0)
    assert window_gaps(np.ones(7, bool), windows=10)[1:] == (0.0, 0.0)  # fewer records than windows


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A corpus listed source by source, written mixed and with the listed order kept."""
    root = tmp_path_factory.mktemp("stats")
    corpus = make_corpus(root / "c", n_docs=N_SOURCES * DOCS_PER_SOURCE, min_sentences=2, max_sentences=4,
                         words_per_doc=6)
    outputs = {}
    for name, kept in (("mixed", False), ("kept", True)):
        outputs[name] = root / name
        generate(GeneratorConfig(metadata_files=[str(corpus.metadata)], input_files_prefix=str(corpus.root),
                                 vocab_file=str(corpus.vocab), do_lower_case=True, max_seq_length=64,
                                 max_predictions_per_seq=10, dupe_factor=1, split_num=40, num_output_files=2,
                                 output_dir=str(outputs[name]), num_workers=1, seed=5, keep_corpus_order=kept),
                 progress=False)
    # The words of the first source's documents: a "topic" of that source.
    first_source = [stem for label in list(corpus.documents)[:DOCS_PER_SOURCE]
                    for stem in {token for sentence in corpus.documents[label] for token in sentence
                                 if token in corpus.stem_owner}]
    return outputs, first_source


def mixing_of(output, tokens, capsys, *extra):
    assert main(["stats", str(output), "--json", "--mixing", *tokens, *extra]) == 0
    return json.loads(capsys.readouterr().out)["mixing"]


def test_stats_tells_a_mixed_dataset_from_one_in_listed_order(runs, capsys):
    outputs, topic = runs
    mixed, kept = (mixing_of(outputs[name], topic, capsys) for name in ("mixed", "kept"))
    for found in (mixed, kept):
        assert found["windows"] == 10 and len(found["shards"]) == 2
        # A quarter of the A segments, and of the random B segments when units are mixed.
        assert all(0.2 < shard["share"] < 0.45 for shard in found["shards"]), found["shards"]
    # Tenths of 34 records: a random order's gap has a standard deviation of about 0.08.
    assert mixed["worst_gap_sd"] < 4 and mixed["worst_gap"] < 0.25, mixed["shards"]
    assert kept["worst_gap_sd"] > 8 and kept["worst_gap"] > 0.5, kept["shards"]  # each shard walks the sources
    assert mixing_of(outputs["mixed"], topic, capsys, "--windows", "4")["windows"] == 4

    assert main(["stats", str(outputs["kept"]), "--mixing", *topic[:2]]) == 0
    text = capsys.readouterr().out
    assert "mixing" in text and "worst tenth of a shard off its shard's share by" in text


@pytest.mark.parametrize("argv,message", [
    (["--mixing", "no-such-token"], "--mixing: not in the vocabulary"),
    (["--mixing", "a", "--windows", "0"], "--windows must be at least 1"),
])
def test_stats_mixing_refuses_bad_values(runs, capsys, argv, message):
    outputs, _ = runs
    assert main(["stats", str(outputs["mixed"]), *argv]) != 0
    assert message in capsys.readouterr().err
