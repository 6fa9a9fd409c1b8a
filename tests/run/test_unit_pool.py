"""A unit's token pool: gathered a slice at a time with numpy (``unit_pool``) it is exactly the
pool of the reference that reads a table row at a time (``_pool_by_rows``): the same tokens,
sentence bounds, documents kept and replaced-character count, on generated slices with
documents split over several slices, documents skipped, listed twice, and the MLM separator."""

from __future__ import annotations

import os

import numpy as np
import pytest

from bert_data import compiled
from bert_data.pipeline.gathering import copy_runs
from bert_data.pipeline.tokens import TABLE_COLUMNS
from bert_data.run import units
from bert_data.run.run_files import slice_paths
from bert_data.run import scratch
from bert_data.run.scratch import _wanted_rows, save_array, slice_rows
from bert_data.run.units import SliceTable, UnitWork, unit_pool


def _write_slices(work_dir, rng: np.random.Generator, n_docs: int):
    """Documents 0 .. n_docs - 1 over slices; some have no text (no row), some continue in the
    next slice (a row in each, in order).  Returns the slice table."""
    slices, current = [], {"rows": [], "tokens": [], "sentences": []}
    first_docs, parts = [0], [False]

    def close():
        slices.append(current.copy())

    for doc in range(n_docs):
        if rng.random() < 0.1:  # skipped: no row
            continue
        pieces = 2 if rng.random() < 0.15 else 1
        for piece in range(pieces):
            n_sentences = int(rng.integers(0, 4)) if piece else int(rng.integers(1, 5))
            lengths = rng.integers(0, 9, n_sentences)
            token_start, sentence_start = len(current["tokens"]), len(current["sentences"])
            current["tokens"].extend(rng.integers(100, 30000, int(lengths.sum())).tolist())
            current["sentences"].extend(lengths.tolist())
            current["rows"].append([doc, token_start, len(current["tokens"]), sentence_start,
                                    len(current["sentences"]), int(rng.integers(0, 3))])
            if piece < pieces - 1 or rng.random() < 0.08:  # a new slice (its first row maybe a later part)
                close()
                current = {"rows": [], "tokens": [], "sentences": []}
                first_docs.append(doc if piece < pieces - 1 else doc + 1)
                parts.append(piece < pieces - 1)
    close()
    for number, data in enumerate(slices):
        paths = slice_paths(str(work_dir), number)
        save_array(np.asarray(data["rows"], np.int64).reshape(-1, TABLE_COLUMNS), paths["docs"])
        save_array(np.asarray(data["tokens"], np.int32), paths["tokens"])
        save_array(np.asarray(data["sentences"], np.int32), paths["sentences"])
    return SliceTable(np.asarray(first_docs, np.int64), np.asarray(parts, bool))


def _reference(unit, table, work_dir, path, separator_id, kept):
    first, last = table.slices_of(unit.docs)
    numbers = np.unique(np.concatenate([np.arange(a, b + 1) for a, b in zip(first, last)])).astype(int)
    found = slice_rows([slice_paths(str(work_dir), n) for n in numbers.tolist()], np.unique(unit.docs), 0,
                       lambda row: ((row[1], row[2]), (row[3], row[4])))
    hits = [(n, hit) for n, hit in zip(numbers.tolist(), found) if hit is not None]
    return units._pool_by_rows(unit, hits, path, separator_id, kept)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("separator_id", [None, 7])
@pytest.mark.parametrize("compiled_on", [True, False])  # runs copied by ``gathering.copy_runs``, or by index arrays
@pytest.mark.parametrize("in_memory", [True, False])  # gathered in memory and written, or in a map of its file
@pytest.mark.parametrize("at_once", [True, False])  # all the unit's slices searched as one, or a slice at a time
def test_unit_pool_is_the_row_by_row_pool(tmp_path, monkeypatch, seed, separator_id, compiled_on, in_memory, at_once):
    monkeypatch.setenv(compiled.DISABLE_VARIABLE, "1" if compiled_on else "0")
    monkeypatch.setattr(units, "SEARCH_SLICES_AT_ONCE", at_once)
    if not in_memory:
        monkeypatch.setattr(units, "POOL_IN_MEMORY", 0)
    assert compiled.kernels_enabled() == compiled_on
    rng = np.random.default_rng(seed)
    n_docs = 300
    table = _write_slices(tmp_path, rng, n_docs)
    for index in range(4):
        docs = rng.choice(n_docs, int(rng.integers(1, 120)), replace=bool(index % 2))  # twice, at times
        unit = UnitWork(index, "train", docs.astype(np.int64))
        kept, kept_reference = [], []
        pool, replaced = unit_pool(unit, table, str(tmp_path), str(tmp_path / f"pool-{index}.npy"),
                                   separator_id, kept)
        expected, replaced_expected = _reference(unit, table, tmp_path, str(tmp_path / f"ref-{index}.npy"),
                                                 separator_id, kept_reference)
        assert np.array_equal(np.asarray(pool.tokens), np.asarray(expected.tokens))
        assert pool.tokens.dtype == expected.tokens.dtype
        assert len(pool) == len(expected)  # (before the bounds are made as lists)
        flat, offsets = pool.flat_bounds()
        expected_flat, expected_offsets = expected.flat_bounds()
        assert np.array_equal(flat, expected_flat) and np.array_equal(offsets, expected_offsets)
        assert (kept, replaced) == (kept_reference, replaced_expected)
        assert pool.bounds == expected.bounds and len(pool) == len(expected)  # (made from the flat bounds, asked for)
        # The file the encode tasks read: the same bytes, its header included.
        assert (tmp_path / f"pool-{index}.npy").read_bytes() == (tmp_path / f"ref-{index}.npy").read_bytes()
        del pool, expected


@pytest.mark.parametrize("compiled_on", [True, False])
def test_copy_runs_copies_runs_and_refuses_one_out_of_bounds(monkeypatch, compiled_on):
    monkeypatch.setenv(compiled.DISABLE_VARIABLE, "1" if compiled_on else "0")
    copy = copy_runs() if compiled_on else copy_runs.python_function
    assert copy is not None
    source = np.arange(100, 120, dtype=np.int32)
    out = np.zeros(12, np.int64)
    starts, froms, counts = (np.asarray(values, np.int64) for values in ([0, 3, 10], [5, 0, 18], [3, 0, 2]))
    assert copy(out, starts, source, froms, counts)
    assert out.tolist() == [105, 106, 107, 0, 0, 0, 0, 0, 0, 0, 118, 119]
    bad_cases = [([0, 3, 11], [5, 0, 18]),  # the last run past out's end
                 ([0, 3, 10], [5, 0, 19]),  # past source's end
                 ([-1, 3, 10], [5, 0, 18])]  # a negative start
    for bad_starts, bad_froms in bad_cases:
        out[:] = 0
        assert not copy(out, np.asarray(bad_starts, np.int64), source, np.asarray(bad_froms, np.int64), counts)
        assert out[10:].tolist() == [0, 0]  # (the last run, or all: nothing past the bad run is copied)


def test_a_unit_without_text_gives_an_empty_pool(tmp_path):
    table = _write_slices(tmp_path, np.random.default_rng(0), 50)
    docs = np.asarray([10_000, 10_001], np.int64)  # past every slice's documents: no rows
    kept = []
    pool, replaced = unit_pool(UnitWork(0, "train", docs), table, str(tmp_path), str(tmp_path / "p.npy"), None, kept)
    assert (len(pool), len(pool.tokens), replaced, kept) == (0, 0, 0, [])


def test_wanted_rows_is_isin():
    rng = np.random.default_rng(3)
    for _ in range(50):
        column = rng.integers(0, 60, int(rng.integers(0, 40)))
        wanted = np.unique(rng.integers(0, 60, int(rng.integers(0, 20))))
        assert np.array_equal(_wanted_rows(column, wanted), np.flatnonzero(np.isin(column, wanted)))


@pytest.mark.parametrize("in_order", [True, False])
def test_rows_of_a_mapped_table_are_wanted_rows(tmp_path, in_order):
    """A slice's table mapped once and searched by bisection (its positions in order) or as
    ``_wanted_rows`` (not in order): the same rows, in the same order."""
    rng = np.random.default_rng(5)
    for trial in range(30):
        column = np.sort(rng.integers(0, 80, int(rng.integers(0, 50)))) if in_order else \
            rng.integers(0, 80, int(rng.integers(0, 50)))
        table = np.zeros((len(column), TABLE_COLUMNS), np.int64)
        table[:, 0] = column
        path = str(tmp_path / f"docs-{trial}.npy")
        save_array(table, path)
        entry = scratch._mapped_array(path, 0)
        assert entry.sorted_column == bool(np.all(np.diff(column) >= 0))
        wanted = np.unique(rng.integers(0, 80, int(rng.integers(0, 25))))
        assert np.array_equal(scratch._rows_in(entry, wanted), np.flatnonzero(np.isin(column, wanted)))
    scratch.forget_mapped()


def test_a_slice_written_again_is_read_again(tmp_path):
    """A slice file replaced at the same path (a damaged slice tokenized again, another run in
    the same work directory) is read anew, never served from the mapping of the one before."""
    paths = slice_paths(str(tmp_path), 0)
    for value in (1, 2, 3):
        save_array(np.asarray([[5, 0, 2, 0, 1, 0]], np.int64), paths["docs"])
        save_array(np.full(2, value, np.int32), paths["tokens"])
        save_array(np.asarray([2], np.int32), paths["sentences"])
        (rows, tokens, sentences), = slice_rows([paths], np.asarray([5]), 0, None)
        assert tokens.tolist() == [value, value]
    assert scratch._mapped  # kept between calls ...
    scratch.forget_mapped()
    assert not scratch._mapped  # ... until the run ends


def test_slices_kept_mapped_are_bounded(tmp_path, monkeypatch):
    """The mappings kept between units stay under both bounds (bytes, and files: each holds a
    file descriptor), the least recently used going first."""
    monkeypatch.setattr(scratch, "MAPPED_FILES", 4)
    paths = []
    for number in range(10):
        path = str(tmp_path / f"a-{number}.npy")
        save_array(np.full(100, number, np.int32), path)
        paths.append(path)
        assert scratch._mapped_array(path).array[0] == number
        assert len(scratch._mapped) <= 4
    assert list(scratch._mapped) == paths[-4:]
    monkeypatch.setattr(scratch, "MAPPED_BYTES", 1000)  # two files of 528 bytes do not fit
    scratch._mapped_array(paths[0])
    assert list(scratch._mapped) == paths[:1]
    scratch.forget_mapped()


def test_a_table_out_of_order_is_searched_a_slice_at_a_time(tmp_path):
    """Slices whose positions are not in order (within a table, or one slice's before the
    previous one's) are not searched as one: the search a slice gives the reference's pool."""
    table = _write_slices(tmp_path, np.random.default_rng(11), 200)
    paths = slice_paths(str(tmp_path), 1)
    rows = np.load(paths["docs"])
    save_array(rows[::-1].copy(), paths["docs"])  # slice 1's rows in reverse
    scratch.forget_mapped()
    rng = np.random.default_rng(12)
    for index in range(3):
        unit = UnitWork(index, "train", rng.choice(200, 80, replace=False).astype(np.int64))
        kept, kept_reference = [], []
        pool, replaced = unit_pool(unit, table, str(tmp_path), str(tmp_path / f"pool-{index}.npy"), None, kept)
        expected, replaced_expected = _reference(unit, table, tmp_path, str(tmp_path / f"ref-{index}.npy"), None,
                                                 kept_reference)
        assert np.array_equal(np.asarray(pool.tokens), np.asarray(expected.tokens))
        assert pool.bounds == expected.bounds and (kept, replaced) == (kept_reference, replaced_expected)
        del pool, expected
    entries = scratch.mapped_slices(str(tmp_path), [0, 1], 0)
    assert units._pool_layout_at_once(np.arange(200), np.asarray([0, 1]), [entry for entry, _, _ in entries],
                                      False) is NotImplemented
    scratch.forget_mapped()


def test_slices_are_checked_once_a_run(tmp_path, monkeypatch):
    """Within one run (one ``SliceTable.generation``) a slice's files, checked once, are used
    without another ``stat``; a slice written again and read in another run (a resumed run, a
    worker serving a new run) is read anew, and a table without a generation is checked each time."""
    paths = slice_paths(str(tmp_path), 0)

    def write(value):
        save_array(np.asarray([[5, 0, 2, 0, 1, 0]], np.int64), paths["docs"])
        save_array(np.full(2, value, np.int32), paths["tokens"])
        save_array(np.asarray([2], np.int32), paths["sentences"])

    stats = []
    real_stat = os.stat
    monkeypatch.setattr(os, "stat", lambda path, *args, **kw: stats.append(path) or real_stat(path, *args, **kw))
    write(1)
    first_run, second_run = SliceTable.of([]), SliceTable.of([])
    assert first_run.generation != second_run.generation
    for generation, value in ((first_run.generation, 1), (second_run.generation, 2), (None, 3)):
        for _ in range(3):
            (_, tokens, _), = scratch.mapped_slices(str(tmp_path), [0], 0, generation)
            assert tokens.tolist() == [value, value]
        checked = [path for path in stats if str(path).startswith(str(tmp_path))]
        assert len(checked) == (3 if generation is not None else 9)  # each file once a run, or at every unit
        stats.clear()
        write(value + 1)
    scratch.forget_mapped()


@pytest.mark.parametrize("dtype", ["<i4", "<u2", "|u1", "<i8", "<f8", ">i4", "bool"])
def test_write_plain_array_writes_numpys_bytes(dtype):
    """A pool file's header written by hand: numpy's bytes for every size (its header's padding
    depends on the size's digits), and numpy's own writer for what is not a plain 1-D array."""
    import io

    for array in [np.arange(n).astype(dtype) for n in (0, 1, 9, 10, 12345, 10**6)] + \
            [np.zeros((3, 4), dtype), np.arange(20).astype(dtype)[::2]]:
        expected, written = io.BytesIO(), io.BytesIO()
        np.lib.format.write_array(expected, array, allow_pickle=False)
        scratch.write_plain_array(written, array)
        assert written.getvalue() == expected.getvalue()
