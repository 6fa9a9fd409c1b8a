"""Every record layout and compression, through every reader (numpy, tf.data, PyTorch, against
TensorFlow's own parser), and datasets the generator writes with each layout option through
every reader and tool.  The datasets: ``tests/helpers/layout_datasets.py``.
"""

from __future__ import annotations

import json
import os
import shutil

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from bert_data.format.dataset import dataset_info
from bert_data.format.layout import canonical_name
from bert_data.load import load_dataset, read_batches, read_examples
from bert_data.tools.stats import compute_stats
from bert_data.format.tfrecord import CorruptRecordError, count_records, iter_records

from tests.helpers.cli_runs import run_tools as run
from tests.helpers.corpus import make_corpus

# The datasets and their fixtures (datasets, vocab_path: pytest finds them imported here).
from tests.helpers.layout_datasets import (
    ALL, COMPRESSIONS, MPP, MSL, N_RECORDS, datasets, joined, layout_specs, tf_reference,
    vocab_path,
)


@pytest.mark.parametrize("layout,compression", ALL)
def test_readers_agree_with_tensorflow(datasets, layout, compression):
    from bert_data.load.torch_data import TorchDataset

    directory, written = datasets[layout, compression]
    names = [spec.name for spec in layout_specs(layout)]
    raw, reference = tf_reference(directory)
    assert set(reference) == set(names)
    for name in names:
        np.testing.assert_array_equal(reference[name], written[name], err_msg=name)

    # Framing: our reader yields exactly TF's records, from the compressed files.
    files = [str(directory / f"examples-{i}.tfrecords") for i in (1, 2)]
    ours = [r for f in files for r in iter_records(f, compression=compression)]
    assert ours == raw
    assert [count_records(f, compression) for f in files] == list(N_RECORDS)

    info = dataset_info(directory)
    assert info.names == names and info.layout_source == "manifest"
    assert all(info.compression(f) == compression for f in info.files)

    rows = list(read_examples(directory))
    assert len(rows) == sum(N_RECORDS) and all(list(row) == names for row in rows)
    batches = list(read_batches(directory, batch_size=7))
    assert [len(b["input_mask"]) for b in batches] == [7] * 5 + [5]
    got = joined(batches)
    torch_rows = list(TorchDataset(directory, split_by="record"))
    d = load_dataset(directory, batch_size=9, is_training=False)
    tf_got = joined([{k: np.asarray(v) for k, v in b.items()} for b in d.as_numpy_iterator()])
    for name in names:
        np.testing.assert_array_equal(np.stack([r[name] for r in rows]), reference[name], err_msg=name)
        np.testing.assert_array_equal(got[name], reference[name], err_msg=name)
        np.testing.assert_array_equal(np.stack([r[name].numpy() for r in torch_rows]), reference[name],
                                      err_msg=name)
        np.testing.assert_array_equal(tf_got[name], reference[name], err_msg=name)
    assert set(tf_got) == set(names) and tf_got[names[0]].dtype == np.int32

    # Canonical names for code that reads any layout.
    canonical = next(read_batches(directory, batch_size=3, canonical_names=True))
    assert list(canonical) == [canonical_name(n) for n in names]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_files_without_manifest(datasets, tmp_path, compression):
    """Layout from the first record, compression from the first bytes (whatever the file name)."""
    directory, written = datasets["mlm_cross", compression]
    suffix = {None: ".tfrecords", "gzip": ".tfrecords.gz", "zlib": ".tfrecords"}[compression]
    lone = tmp_path / f"lone{suffix}"
    shutil.copy(directory / "examples-1.tfrecords", lone)
    info = dataset_info(lone)
    assert info.layout_source == "first record" and info.names == [s.name for s in layout_specs("mlm_cross")]
    assert info.compression(str(lone)) == compression
    got = joined(list(read_batches(lone, batch_size=100)))
    np.testing.assert_array_equal(got["input_ids"], written["input_ids"][:N_RECORDS[0]])
    # The directory form finds .tfrecords.gz files too.
    assert dataset_info(tmp_path).files == [str(lone)]
    if compression is not None:
        forced = list(read_batches(lone, batch_size=100, compression=compression))
        assert len(forced[0]["input_ids"]) == N_RECORDS[0]
        with pytest.raises(CorruptRecordError):
            list(read_batches(lone, batch_size=100, compression=None, max_seq_length=MSL,
                              max_predictions_per_seq=MPP))
    # Forcing a compression against the manifest is an error.
    other = "zlib" if compression != "zlib" else "gzip"
    with pytest.raises(ValueError, match="does not match the data"):
        dataset_info(directory, compression=other)


def test_unmasked_first_record_layout(datasets, tmp_path):
    directory, _ = datasets["unmasked", "gzip"]
    lone = tmp_path / "u.tfrecords"
    shutil.copy(directory / "examples-2.tfrecords", lone)
    info = dataset_info(lone)
    assert info.names == ["input_ids", "input_mask"] and not info.masked and info.mlm_only


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """Small datasets made by the generator with its layout and compression options."""
    from bert_data.config import GeneratorConfig
    from bert_data.run.resolve import generate

    root = tmp_path_factory.mktemp("layouts_e2e")
    corpus = make_corpus(root / "corpus", n_docs=8, min_sentences=6, max_sentences=15)
    options = {
        "unmasked_gzip": dict(mlm_only=True, disable_masking=True, dupe_factor=1, compression="gzip",
                              allow_cross_document_examples=True),
        "mlm_zlib_v2": dict(mlm_only=True, compression="zlib", v2_feature_names=True, mask_whole_word=True),
        "nsp_v2_gzip": dict(v2_feature_names=True, compression="gzip"),
    }
    out = {}
    for name, extra in options.items():
        directory = root / name
        generate(GeneratorConfig(
            metadata_files=[str(corpus.metadata)], input_files_prefix=str(corpus.root), vocab_file=str(corpus.vocab),
            do_lower_case=True, max_seq_length=48, max_predictions_per_seq=7, output_dir=str(directory),
            num_workers=1, num_output_files=2, **{"dupe_factor": 2, **extra}), progress=False)
        out[name] = directory
    return out


@pytest.mark.parametrize("name", ["unmasked_gzip", "mlm_zlib_v2", "nsp_v2_gzip"])
def test_generated_datasets_through_every_tool(generated, name, capsys):
    directory = generated[name]
    manifest = json.loads((directory / "data_params.json").read_text())
    code, out, _ = run(["verify", directory], capsys)
    assert code == 0, out
    raw, reference = tf_reference(directory)
    assert len(raw) == manifest["n_examples"] > 0
    got = joined(list(read_batches(directory, batch_size=50)))
    assert list(got) == list(manifest["features"])
    for feature in got:
        np.testing.assert_array_equal(got[feature], reference[feature], err_msg=feature)
    tf_got = joined(list(load_dataset(directory, batch_size=50, is_training=False, int32=False).as_numpy_iterator()))
    for feature in got:
        np.testing.assert_array_equal(tf_got[feature], reference[feature], err_msg=feature)
    st, = compute_stats(directory)
    assert st.n_records == manifest["n_examples"] and st.compression == manifest["compression"]
    assert run(["stats", directory], capsys)[0] == 0
    code, out, _ = run(["inspect", directory, "-n", "2"], capsys)
    assert code == 0 and len([line for line in out.splitlines() if " record " in line]) == 2
    if manifest["disable_masking"]:
        numpy_masked = list(read_batches(directory, batch_size=16, int32=True, mask={"seed": 0}))
        tf_masked = list(load_dataset(directory, batch_size=16, is_training=False, mask={"seed": 0})
                         .as_numpy_iterator())
        for mine, theirs in zip(numpy_masked, tf_masked):
            for feature in mine:
                np.testing.assert_array_equal(mine[feature], theirs[feature], err_msg=feature)
        assert st.to_dict()["document_separators"]["per_instance"] > 0  # cross-document windows
