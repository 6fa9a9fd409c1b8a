"""bert-data stats, verify and inspect on packed rows: the fill rate, statistics of the instances
(those of the unpacked run), every packing rule checked, rows shown instance by instance."""

import json
import shutil

import numpy as np
import pytest

from bert_data.cli.bert_data_cli import main
from bert_data.format.tfrecord.example_codec import encode_examples
from bert_data.format.manifest import Manifest
from bert_data.format.tfrecord import frame_records
from bert_data.run.resolve import generate
from bert_data.load import read_batches
from bert_data.tools.stats import compute_stats
from bert_data.tools.verify import verify

from tests.helpers.corpus import corpus_config, make_corpus

OPTIONS = dict(max_seq_length=48, max_predictions_per_seq=8, short_seq_prob=0.3, num_output_files=1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    corpus = make_corpus(tmp_path_factory.mktemp("packed_tools_corpus"), n_docs=10, min_sentences=4,
                         max_sentences=10)
    plain, packed = tmp_path_factory.mktemp("plain"), tmp_path_factory.mktemp("packed")
    generate(corpus_config(corpus, plain, **OPTIONS), progress=False)
    generate(corpus_config(corpus, packed, pack_sequences=True, **OPTIONS), progress=False)
    return plain, packed


def test_stats_show_the_fill_rate_and_the_instances(runs, capsys):
    plain, packed = runs
    (unpacked,), (rows,) = compute_stats(str(plain)), compute_stats(str(packed))
    manifest = Manifest.read(str(packed))
    assert rows.packed and not unpacked.packed
    assert rows.n_rows == manifest.n_examples and rows.n_records == unpacked.n_records == manifest.n_instances
    assert rows.fill_rate == pytest.approx(manifest.fill_rate)
    assert unpacked.fill_rate == pytest.approx(Manifest.read(str(plain)).fill_rate)
    assert unpacked.fill_rate < rows.fill_rate
    # The instances are the unpacked run's: same lengths, segments, predictions and labels.
    for name in ("length_hist", "a_hist", "b_hist", "predictions_hist", "token_counts"):
        assert np.array_equal(getattr(rows, name), getattr(unpacked, name)), name
    assert rows.nsp_random == unpacked.nsp_random
    assert rows.instances_hist.sum() == rows.n_rows and rows.instances_hist[2:].sum() > 0
    assert main(["stats", str(packed), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    data = data[0] if isinstance(data, list) else data
    assert data["fill_rate"] == pytest.approx(manifest.fill_rate) and data["instances"] == manifest.n_instances
    assert main(["stats", str(packed)]) == 0
    assert f"{100 * manifest.fill_rate:.1f}% of the records' tokens are not padding" in capsys.readouterr().out


def test_inspect_shows_a_packed_row_instance_by_instance(runs, capsys):
    _, packed = runs
    stored = next(read_batches(str(packed), batch_size=10_000))
    row = int(np.argmax(stored["input_mask"].max(axis=1)))
    count = int(stored["input_mask"][row].max())
    assert count >= 2
    assert main(["inspect", str(packed), "--start", str(row), "-n", "1"]) == 0
    out = capsys.readouterr().out
    assert f"packed row of {count} instance(s)" in out
    for index in range(1, count + 1):
        start = int(np.argmax(stored["input_mask"][row] == index))
        assert f"instance {index} (from position {start}):" in out
    assert out.count("  A: [CLS]") == count and out.count("next_sentence_label=") == count


def rewrite(source, target, change):
    """A copy of a packed dataset with ``change(columns)`` applied to its records."""
    shutil.copytree(source, target)
    manifest = Manifest.read(str(target))
    (name,) = manifest.examples_per_file
    columns = next(read_batches(str(target), batch_size=10_000))
    change(columns)
    (target / name).write_bytes(frame_records(encode_examples(columns, manifest.specs)))
    return target


@pytest.mark.parametrize("change, message", [
    (lambda c: c["positions"].__setitem__((0, 1), 7), "positions do not restart at 0"),
    (lambda c: c["input_mask"].__setitem__((0, 0), 2), "input_mask is not instance indices"),
    (lambda c: c["next_sentence_positions"].__setitem__((0, 0), 3), "next_sentence_positions"),
    (lambda c: c["next_sentence_weights"].__setitem__((0, 2), 1.0), "next_sentence_weights"),
    (lambda c: c["masked_lm_weights"].__setitem__((0, 0), 3.0), "do not name the instance"),
    (lambda c: c["input_ids"].__setitem__((0, 0), 7), "instance 1: input_ids[0]"),
])
def test_verify_checks_every_packing_rule(runs, tmp_path, change, message):
    _, packed = runs
    assert verify(str(packed)).ok
    broken = rewrite(packed, tmp_path / "broken", change)
    report = verify(str(broken))
    assert not report.ok and report.bad_records == 1
    assert any(message in problem.message for problem in report.problems), report.problems
