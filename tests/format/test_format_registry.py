"""The output formats have one registry (``bert_data.format.output_formats.FORMATS``), and
``bert_data/format`` stands on its own: no other table of formats there, no import of a stage,
of the orchestration, the commands, the loaders or the tools; every registered format's writer
and reader load, have the common methods, and mirror each other (what a writer writes its
reader gives back)."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bert_data.format.layout import feature_specs
from bert_data.format.output_formats import FORMATS, Reader, ShardOptions, Writer, format_of_path, get_format
from tests.architecture.test_import_cycles import PACKAGE, import_graph

FORMAT_DIR = PACKAGE / "format"
REGISTRY = "bert_data/format/output_formats.py"
FORMAT_CONSTANTS = {"TFRECORD", "HDF5", "PARQUET", "MDS", "MEGATRON"}
FORBIDDEN = ("bert_data.pipeline", "bert_data.run", "bert_data.cli", "bert_data.load", "bert_data.tools")


def format_tables(path: Path):
    """Module-level dicts of ``path`` keyed by two or more format names (or their constants)."""
    names = set(FORMATS) | FORMAT_CONSTANTS
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Dict):
            keys = {key.value if isinstance(key, ast.Constant) else getattr(key, "id", None) for key in value.keys}
            if len(keys & names) >= 2:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                yield from (getattr(target, "id", "?") for target in targets)


def test_the_format_folder_has_exactly_one_registry():
    found = {f"{path.relative_to(PACKAGE.parent).as_posix()}:{name}"
             for path in sorted(FORMAT_DIR.rglob("*.py")) for name in format_tables(path)}
    assert found == {f"{REGISTRY}:FORMATS"}


def test_the_table_check_finds_a_second_table(tmp_path):
    planted = tmp_path / "other.py"
    planted.write_text('KINDS = {TFRECORD: ".tfrecords", HDF5: ".hdf5"}\nSIZES: dict = {"mds": 1, "parquet": 2}\n'
                       'FINE = {"tfrecord": 1}\n')
    assert list(format_tables(planted)) == ["KINDS", "SIZES"]


def test_the_format_folder_imports_no_stage_nor_what_uses_it():
    graph = import_graph()
    crossing = sorted(f"{module} -> {target}" for module, targets in graph.items()
                      if module.startswith("bert_data.format") for target in targets if target.startswith(FORBIDDEN))
    assert any(module.startswith("bert_data.format.") for module in graph)
    assert crossing == []


def test_the_declarations_import_no_numpy():
    """``create_tfrecords --help`` lists the formats: the registry and the file names must be
    importable without numpy (the writers and readers are imported when a format is used)."""
    code = ("import sys, bert_data.format.dataset_layout, bert_data.format.output_formats as f\n"
            "assert not {'numpy', 'h5py', 'pyarrow'} & set(sys.modules), sorted(sys.modules)\n")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_format_has_a_writer_and_a_reader_with_the_common_methods(name):
    fmt = get_format(name)
    writer, reader = fmt.writer_class(), fmt.reader_class()
    assert issubclass(writer, Writer) and not inspect.isabstract(writer)
    assert issubclass(reader, Reader) and not inspect.isabstract(reader)
    options = ShardOptions(tuple(feature_specs(16, 3)))
    for method in ("encode_segment", "write_shard", "write_split_files"):
        assert callable(getattr(fmt.make_writer(options), method))
    assert callable(fmt.make_reader(options).read_columns)
    assert fmt.suffix in fmt.read_suffixes and fmt.read_suffixes[0] == fmt.suffix
    assert all(format_of_path(f"dir/x-1{suffix}") is fmt for suffix in fmt.read_suffixes)


def test_a_name_no_format_claims_is_tfrecord_and_capabilities_are_declared():
    assert format_of_path("shard-00001-of-00010").name == "tfrecord"
    assert [name for name, fmt in FORMATS.items() if fmt.framed_records] == ["tfrecord"]
    assert [name for name, fmt in FORMATS.items() if fmt.appendable] == ["tfrecord"]
    assert [name for name, fmt in FORMATS.items() if not fmt.instances] == ["megatron"]
    with pytest.raises(ValueError, match="unknown output format 'hdf9'"):
        get_format("hdf9")


def instances(n: int = 7, msl: int = 16, mpp: int = 3, seed: int = 0):
    """Padded canonical columns of ``n`` NSP instances, masked as the generator masks them."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(6, msl + 1, n)
    real = np.arange(msl) < lengths[:, None]
    columns = {"input_ids": np.where(real, rng.integers(5, 100, (n, msl)), 0),
               "input_mask": real.astype(np.int64),
               "segment_ids": np.where(real & (np.arange(msl) >= lengths[:, None] // 2), 1, 0)}
    positions = np.zeros((n, mpp), np.int64)
    for i, length in enumerate(lengths):
        positions[i, :2] = np.sort(rng.choice(np.arange(1, length), 2, replace=False))
    weights = (positions > 0).astype(np.float32)
    columns.update(masked_lm_positions=positions, masked_lm_ids=np.where(weights > 0, rng.integers(5, 100, (n, mpp)), 0),
                   masked_lm_weights=weights, next_sentence_labels=rng.integers(0, 2, (n, 1)))
    return {name: column.astype(np.float32 if name == "masked_lm_weights" else np.int64)
            for name, column in columns.items()}


@pytest.mark.parametrize("name", [name for name, fmt in FORMATS.items() if fmt.instances])
def test_what_a_writer_writes_its_reader_gives_back(tmp_path, name):
    fmt = get_format(name)
    options = ShardOptions(tuple(feature_specs(16, 3)), fmt.compressions[0] if fmt.compressions else None)
    batches = [instances(seed=0), instances(n=4, seed=1)]
    shard = tmp_path / f"x-1{fmt.suffix_for(options.compression)}"
    entry = fmt.make_writer(options).write_shard(batches, str(shard), shard.name)
    assert entry["samples"] == 11
    read = list(fmt.make_reader(options).read_columns(str(shard), batch_size=5))
    assert [len(batch["input_ids"]) for batch in read] == [5, 5, 1]
    for column, expected in {name: np.concatenate([b[name] for b in batches]) for name in batches[0]}.items():
        assert np.array_equal(np.concatenate([batch[column] for batch in read]), expected), column
    assert fmt.make_writer(options).write_split_files(str(tmp_path), [entry]) == \
        [str(tmp_path / split_file) for split_file in fmt.split_files]


def test_the_corpus_writer_takes_what_its_reader_gives(tmp_path):
    from bert_data.format.megatron import IndexedWriter, read_documents

    fmt = get_format("megatron")
    documents = [[np.array([5, 6, 7]), np.array([8])], [np.array([9, 10])], [np.array([11]), np.array([12, 13])]]
    source = IndexedWriter(str(tmp_path / "a.bin"), np.uint16)
    for document in documents:
        source.add_document(np.concatenate(document), [len(sentence) for sentence in document])
    source.finish()
    batches = list(fmt.make_reader().read_columns(str(tmp_path / "a.bin"), batch_size=2))
    assert [batch["document_sentences"].tolist() for batch in batches] == [[2, 1], [2]]
    assert fmt.make_writer(None).write_shard(batches, str(tmp_path / "b.bin"), "b.bin") == {"path": "b.bin",
                                                                                              "samples": 5}
    for suffix in (".bin", ".idx"):
        assert (tmp_path / f"b{suffix}").read_bytes() == (tmp_path / f"a{suffix}").read_bytes()
    assert [[s.tolist() for s in document] for document in read_documents(str(tmp_path / "b.bin"))] == \
        [[s.tolist() for s in document] for document in documents]
