"""The final pass of global mixing (bert_data.run.shard_shuffle): each shard written again
in a seeded random order, compressed then; Google's --output_file files shuffled together;
an interrupted pass resumed shard by shard."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from bert_data.config import GeneratorConfig
from bert_data.format.tfrecord import frame_records, iter_records
from bert_data.format.tfrecord.splicing import record_offsets
from bert_data.run.resolve import generate
from bert_data.run.shard_shuffle import ShuffleTask, publish_shuffled, run_shuffle_task

from tests.helpers.corpus import file_hashes, make_corpus


def shuffle(task):
    """One task of the final pass, as the runner does it: written beside, then put in place."""
    keys = list(run_shuffle_task(task))
    publish_shuffled(task)
    return keys


def write_records(path, records):
    path.write_bytes(frame_records(records))


def records(n, prefix=b"r"):
    return [prefix + str(i).encode() * (1 + i % 7) for i in range(n)]


def test_record_offsets_find_every_frame_and_refuse_a_cut_one(tmp_path):
    data = frame_records(records(5))
    offsets = record_offsets(data)
    assert offsets[0] == 0 and offsets[-1] == len(data) and len(offsets) == 6
    with pytest.raises(ValueError, match="past the end"):
        record_offsets(data[:-3])


def test_a_shard_is_its_records_in_an_order_keyed_on_its_seed(tmp_path):
    original = records(1000)
    write_records(tmp_path / "a.tmp", original)
    outputs = {}
    for name, seed in (("one", [5, 0, 1, 0]), ("again", [5, 0, 1, 0]), ("other shard", [5, 0, 1, 1])):
        source = tmp_path / f"{name}.tmp"
        source.write_bytes((tmp_path / "a.tmp").read_bytes())
        assert shuffle(ShuffleTask(["train/0"], [str(source)], [str(tmp_path / name)], seed)) == ["train/0"]
        outputs[name] = list(iter_records(str(tmp_path / name)))
    assert sorted(outputs["one"]) == sorted(original) and outputs["one"] != original
    assert outputs["one"] == outputs["again"] and outputs["one"] != outputs["other shard"]
    # Neighbours in the shard as written are far apart after: no stretch of it survives.
    places = {record: place for place, record in enumerate(outputs["one"])}
    neighbours = sum(abs(places[a] - places[b]) == 1 for a, b in zip(original, original[1:]))
    assert neighbours < 10


@pytest.mark.parametrize("compression,wbits", [("gzip", 31), ("zlib", 15)])
def test_the_shuffled_shard_is_compressed_as_one_stream(tmp_path, compression, wbits):
    write_records(tmp_path / "plain.tmp", records(300))
    write_records(tmp_path / "packed.tmp", records(300))
    shuffle(ShuffleTask(["train/0"], [str(tmp_path / "plain.tmp")], [str(tmp_path / "plain")], [1]))
    shuffle(ShuffleTask(["train/0"], [str(tmp_path / "packed.tmp")], [str(tmp_path / "packed")], [1],
                               compression))
    packed = (tmp_path / "packed").read_bytes()
    engine = zlib.decompressobj(wbits)
    assert engine.decompress(packed) == (tmp_path / "plain").read_bytes() and engine.eof and not engine.unused_data


def test_files_shuffled_together_put_record_k_of_the_run_in_file_k_mod_n(tmp_path):
    """Google's --output_file: the run's records (file i mod 3 holds record i) in one seeded
    order of the whole run, record k to file k mod 3: the same order a single file gets."""
    run = records(100)
    write_records(tmp_path / "all.tmp", run)
    shuffle(ShuffleTask(["train/0"], [str(tmp_path / "all.tmp")], [str(tmp_path / "all")], [3, 0, 2]))
    sources = [tmp_path / f"part-{j}.tmp" for j in range(3)]
    for j, source in enumerate(sources):
        write_records(source, run[j::3])
    targets = [str(tmp_path / f"part-{j}") for j in range(3)]
    shuffle(ShuffleTask([f"train/{j}" for j in range(3)], list(map(str, sources)), targets, [3, 0, 2]))
    whole = list(iter_records(str(tmp_path / "all")))
    parts = [list(iter_records(target)) for target in targets]
    assert [len(part) for part in parts] == [34, 33, 33]
    assert all(parts[k % 3][k // 3] == record for k, record in enumerate(whole))
    assert whole != run


def config(corpus, output, **options):
    settings = dict(metadata_files=[str(corpus.metadata)], input_files_prefix=str(corpus.root),
                    vocab_file=str(corpus.vocab), do_lower_case=True, max_seq_length=32, max_predictions_per_seq=5,
                    dupe_factor=2, split_num=5, num_output_files=3, output_dir=str(output), num_workers=1, seed=3,
                    compression="zlib")
    settings.update(options)
    return GeneratorConfig(**settings)


def test_an_interrupted_final_pass_resumes_with_the_shards_not_yet_shuffled(tmp_path, monkeypatch):
    import bert_data.run.final_shuffle as runner

    corpus = make_corpus(tmp_path / "c", n_docs=16, min_sentences=5, max_sentences=12)
    generate(config(corpus, tmp_path / "reference"), progress=False)
    real, calls = runner.run_shuffle_task, []

    def shuffle_then_stop(task):
        if len(calls) == 1:
            raise KeyboardInterrupt  # as Ctrl-C would, after the first shard
        calls.append(task.keys)
        return real(task)

    monkeypatch.setattr(runner, "run_shuffle_task", shuffle_then_stop)
    with pytest.raises(KeyboardInterrupt):
        generate(config(corpus, tmp_path / "out"), progress=False)
    names = sorted(path.name for path in (tmp_path / "out").iterdir() if path.is_file())
    # Shards keep their names in progress until the run is finished; those not yet shuffled are
    # still their units' pieces, kept in the work directory (``kept_pieces``).
    assert names == ["examples-1.tfrecords.tmp"]

    calls.clear()
    monkeypatch.setattr(runner, "run_shuffle_task", lambda task: calls.append(task.keys) or real(task))
    generate(config(corpus, tmp_path / "out", resume=True), progress=False)
    assert calls == [["train/1"], ["train/2"]]  # only the shards not yet shuffled
    assert file_hashes(tmp_path / "out") == file_hashes(tmp_path / "reference")
    assert not [path for path in (tmp_path / "out").rglob("*") if path.name.endswith((".tmp", ".shuffling"))]


@pytest.mark.parametrize("as_files", [False, True], ids=["output_dir", "output_file"])
def test_hdf5_shards_hold_the_shuffled_tfrecord_instances_in_the_same_order(tmp_path, as_files):
    """HDF5 (as Parquet and MDS) shards are written from their bodies in the final shuffle's order:
    per shard, or with Google's --output_file the files together (record k of the run to file k mod N)."""
    import h5py

    from bert_data.format.dataset import decode_records, infer_specs

    corpus = make_corpus(tmp_path / "c", n_docs=16, min_sentences=5, max_sentences=12)
    ids = {}
    for fmt, suffix in (("tfrecord", "tfrecord"), ("hdf5", "hdf5")):
        out = tmp_path / fmt
        files = [str(out / f"part-{j}.{suffix}") for j in range(3)] if as_files else []
        generate(config(corpus, out, output_format=fmt, compression=None, output_files=files,
                        output_dir=str(out) if not as_files else None), progress=False)
        paths = files or [str(out / f"examples-{j + 1}.{'tfrecords' if fmt == 'tfrecord' else 'hdf5'}") for j in range(3)]
        if fmt == "tfrecord":
            ids[fmt] = [decode_records(list(iter_records(p)), infer_specs(p))["input_ids"].tolist() for p in paths]
        else:
            ids[fmt] = []
            for p in paths:
                with h5py.File(p, "r") as handle:
                    ids[fmt].append(handle["input_ids"][:].tolist())
    assert ids["hdf5"] == ids["tfrecord"] and all(len(shard) > 5 for shard in ids["hdf5"])


@pytest.mark.parametrize("options", [{}, {"compression": None}, {"val_fraction": 0.3}],
                         ids=["zlib", "uncompressed", "validation"])
def test_shuffled_shards_are_hashed_as_they_are_written_not_read_again(tmp_path, monkeypatch, options):
    """The manifest's SHA-256 of a shard the final shuffle wrote comes from the shuffle task (a
    worker, as the bytes go by): the parent does not read the shards again to hash them."""
    import hashlib
    import json

    from bert_data.format import checksums

    corpus = make_corpus(tmp_path / "c", n_docs=16, min_sentences=5, max_sentences=12)
    hashed = []
    real = checksums.file_digest
    monkeypatch.setattr(checksums, "file_digest", lambda path: hashed.append(path) or real(path))
    generate(config(corpus, tmp_path / "out", **options), progress=False)
    assert not [path for path in hashed if ".tfrecords" in path]
    manifests = list((tmp_path / "out").rglob("data_params.json"))
    assert len(manifests) == (2 if options.get("val_fraction") else 1)
    for manifest in manifests:
        digests = json.loads(manifest.read_text())["sha256_per_file"]
        assert len(digests) == 3
        for name, digest in digests.items():
            assert hashlib.sha256((manifest.parent / name).read_bytes()).hexdigest() == digest


@pytest.mark.parametrize("compression", [None, "gzip"])
@pytest.mark.parametrize("n_files", [1, 3, 7])
def test_compiled_copies_write_the_references_bytes(tmp_path, monkeypatch, n_files, compression):
    """The records gathered by the compiled copies into one reused buffer, or joined from views
    (the reference, ``BERT_DATA_COMPILED=0``): the same shards and the same digests, whatever
    the batches (a batch cut inside the order's lookups, a record longer than a batch)."""
    from bert_data.compiled import DISABLE_VARIABLE
    from bert_data.format.tfrecord import record_kernels
    from bert_data.run import shard_shuffle

    run = [bytes([i % 251]) * (1 + (i * 37) % 900) for i in range(1000)] + [b"long" * 2000]
    results = {}
    for name, compiled, batch_bytes, order_places in (("reference", "0", 4 << 20, 1 << 16),
                                                       ("compiled", "1", 4 << 20, 1 << 16),
                                                       ("compiled, small batches", "1", 3000, 97)):
        monkeypatch.setenv(DISABLE_VARIABLE, compiled)
        monkeypatch.setattr(shard_shuffle, "BATCH_BYTES", batch_bytes)
        monkeypatch.setattr(shard_shuffle, "ORDER_PLACES", order_places)
        assert (record_kernels.copy_ranges() is not None) == (compiled == "1")
        out = tmp_path / name.replace(" ", "_").replace(",", "")
        out.mkdir()
        sources = [out / f"part-{j}.tmp" for j in range(n_files)]
        for j, source in enumerate(sources):
            write_records(source, run[j::n_files])
        targets = [str(out / f"part-{j}") for j in range(n_files)]
        digests = run_shuffle_task(ShuffleTask([f"train/{j}" for j in range(n_files)], list(map(str, sources)),
                                               targets, [7, 0, 2], compression))
        publish_shuffled(ShuffleTask([], [], targets, []))
        results[name] = (digests, [open(target, "rb").read() for target in targets])
    assert results["compiled"] == results["reference"] == results["compiled, small batches"]
    if compression is None:
        shuffled = [record for target in targets for record in iter_records(target)]
        assert sorted(shuffled) == sorted(run) and shuffled != run


def test_a_write_failing_in_the_writer_thread_fails_the_task_and_leaves_the_sources(tmp_path, monkeypatch):
    """Batches are written by a thread of their own: its error (a full disk at the third batch)
    is the task's, nothing half-written is left beside the targets, the sources are whole."""
    import errno

    from bert_data.run import shard_shuffle

    run = records(3000)
    sources = [tmp_path / f"part-{j}.tmp" for j in range(2)]
    for j, source in enumerate(sources):
        write_records(source, run[j::2])
    before = [source.read_bytes() for source in sources]
    real_write, written = shard_shuffle._Target.write, []

    def write_to_a_full_disk(self, data):
        if len(written) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", self.temporary)
        written.append(len(data))
        real_write(self, data)

    monkeypatch.setattr(shard_shuffle, "BATCH_BYTES", 2000)
    monkeypatch.setattr(shard_shuffle._Target, "write", write_to_a_full_disk)
    targets = [str(tmp_path / f"part-{j}") for j in range(2)]
    with pytest.raises(OSError) as raised:
        run_shuffle_task(ShuffleTask(["train/0", "train/1"], list(map(str, sources)), targets, [1, 0, 2]))
    assert raised.value.errno == errno.ENOSPC and len(written) == 2
    assert sorted(path.name for path in tmp_path.iterdir()) == ["part-0.tmp", "part-1.tmp"]
    assert [source.read_bytes() for source in sources] == before


@pytest.mark.parametrize("compiled", ["1", "0"], ids=["compiled", "reference"])
def test_every_source_map_is_closed_at_the_end_of_the_task(tmp_path, monkeypatch, compiled):
    """The compiled copies read the maps through numpy views: none outlives the task, so each
    map closes when its source does (a map with a view left cannot: it would stay open until
    the garbage collector finds it)."""
    import mmap

    from bert_data.compiled import DISABLE_VARIABLE
    from bert_data.run import shard_shuffle

    monkeypatch.setenv(DISABLE_VARIABLE, compiled)
    real_close, closed = shard_shuffle._Source.close, []

    def close(self):
        real_close(self)
        closed.append(isinstance(self.data, mmap.mmap) and self.data.closed)

    monkeypatch.setattr(shard_shuffle._Source, "close", close)
    sources = [tmp_path / f"part-{j}.tmp" for j in range(2)]
    for j, source in enumerate(sources):
        write_records(source, records(400)[j::2])
    run_shuffle_task(ShuffleTask(["train/0", "train/1"], list(map(str, sources)),
                                 [str(tmp_path / "part-0"), str(tmp_path / "part-1")], [2, 0, 2]))
    assert closed == [True, True]


def shuffle_threads():
    import threading

    return [thread.name for thread in threading.enumerate() if thread.name.startswith("bert_data-shuffle-")
            and thread.name != "bert_data-shuffle-commit"]


def test_an_error_in_the_hash_thread_fails_the_task_and_leaves_the_sources(tmp_path, monkeypatch):
    """Batches are hashed (and compressed) by one thread and written by another: an error in the
    hash thread (at the third batch) is the task's; the batches after it are not written,
    nothing half-written is left beside the targets, both threads end, the sources are whole."""
    from bert_data.run import shard_shuffle

    run = records(3000)
    sources = [tmp_path / f"part-{j}.tmp" for j in range(2)]
    for j, source in enumerate(sources):
        write_records(source, run[j::2])
    before = [source.read_bytes() for source in sources]
    real_take, real_write, taken, written = shard_shuffle._Target.take, shard_shuffle._Target.write, [], []

    def take_failing(self, data):
        if len(taken) == 2:
            raise MemoryError("the hash stage ran out of memory")
        taken.append(len(data))
        return real_take(self, data)

    def write(self, data):
        written.append(len(data))
        real_write(self, data)

    monkeypatch.setattr(shard_shuffle, "BATCH_BYTES", 2000)
    monkeypatch.setattr(shard_shuffle._Target, "take", take_failing)
    monkeypatch.setattr(shard_shuffle._Target, "write", write)
    targets = [str(tmp_path / f"part-{j}") for j in range(2)]
    with pytest.raises(MemoryError, match="hash stage"):
        run_shuffle_task(ShuffleTask(["train/0", "train/1"], list(map(str, sources)), targets, [1, 0, 2], "gzip"))
    assert len(taken) == 2 and len(written) <= 2
    assert sorted(path.name for path in tmp_path.iterdir()) == ["part-0.tmp", "part-1.tmp"]
    assert [source.read_bytes() for source in sources] == before
    assert shuffle_threads() == []


def test_a_failing_task_drops_the_batches_not_yet_written(tmp_path, monkeypatch):
    """The task's own thread fails (at its third batch) while the first batch is being written:
    the writer is cancelled, the batch under way ends, the one queued behind it is dropped, both
    threads end and nothing is left beside the target."""
    import threading

    from bert_data.run import shard_shuffle

    write_records(tmp_path / "part-0.tmp", records(3000))
    real_gathered, real_write, real_cancel = shard_shuffle._Gather._gathered, shard_shuffle._Target.write, \
        shard_shuffle._Writer.cancel
    gathered, written, writing, released = [], [], threading.Event(), threading.Event()

    def gathered_failing(self, *args):
        if len(gathered) == 2:
            assert writing.wait(timeout=120)  # (the first batch is being written)
            raise RuntimeError("the gathering failed")
        gathered.append(1)
        return real_gathered(self, *args)

    def write(self, data):
        written.append(len(data))
        writing.set()
        assert released.wait(timeout=120)  # (held until the task is cancelled)
        real_write(self, data)

    def cancel(self):
        self._cancelled = True  # (before the write under way is let go: the next is dropped)
        released.set()
        real_cancel(self)

    monkeypatch.setattr(shard_shuffle, "BATCH_BYTES", 2000)
    monkeypatch.setattr(shard_shuffle._Gather, "_gathered", gathered_failing)
    monkeypatch.setattr(shard_shuffle._Target, "write", write)
    monkeypatch.setattr(shard_shuffle._Writer, "cancel", cancel)
    with pytest.raises(RuntimeError, match="gathering failed"):
        run_shuffle_task(ShuffleTask(["train/0"], [str(tmp_path / "part-0.tmp")], [str(tmp_path / "part-0")],
                                     [1, 0, 1, 0]))
    assert released.is_set() and len(written) == 1
    assert sorted(path.name for path in tmp_path.iterdir()) == ["part-0.tmp"]
    assert shuffle_threads() == []


@pytest.mark.parametrize("compression", [None, "gzip", "zlib"])
@pytest.mark.parametrize("n_files", [1, 4])
def test_each_digest_is_of_its_files_bytes_and_compression_wraps_the_same_records(tmp_path, monkeypatch,
                                                                                    compression, n_files):
    """Small batches dealt to one target or several (Google's --output_file), hashed by one
    thread and written by another: each digest is the SHA-256 of its file as read back, and a
    compressed file holds, once decompressed, the bytes of the same task uncompressed."""
    import hashlib

    from bert_data.run import shard_shuffle

    monkeypatch.setattr(shard_shuffle, "BATCH_BYTES", 1500)
    run = records(2500)
    written = {}
    for name, chosen in (("plain", None), ("chosen", compression)):
        out = tmp_path / name
        out.mkdir()
        sources = [out / f"part-{j}.tmp" for j in range(n_files)]
        for j, source in enumerate(sources):
            write_records(source, run[j::n_files])
        targets = [str(out / f"part-{j}") for j in range(n_files)]
        task = ShuffleTask([f"train/{j}" for j in range(n_files)], list(map(str, sources)), targets,
                           [3, 0, 2] if n_files > 1 else [3, 0, 1, 0], chosen)
        digests = run_shuffle_task(task)
        publish_shuffled(task)
        files = [open(target, "rb").read() for target in targets]
        assert [digests[key] for key in task.keys] == [hashlib.sha256(data).hexdigest() for data in files]
        written[name] = files
    wbits = {None: None, "gzip": 31, "zlib": 15}[compression]
    unpacked = [zlib.decompress(data, wbits) if wbits else data for data in written["chosen"]]
    assert unpacked == written["plain"]
    assert sorted(record for data in written["plain"] for record in iter_records_of(data)) == sorted(run)


def iter_records_of(data):
    offsets = record_offsets(data)
    return [bytes(data[a + 12:b - 4]) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]


def test_a_write_cut_short_is_written_on_from_where_it_stopped(tmp_path):
    """A target's file takes each batch in a loop: a write that takes only part of it (a
    regular file rarely does) goes on with the rest."""
    from bert_data.run import shard_shuffle

    target = shard_shuffle._Target(str(tmp_path / "part-0"), None)
    real, calls = target.handle, []

    class Short:
        def write(self, data):
            calls.append(len(data))
            return real.write(data[:777])

        def fileno(self):
            return real.fileno()

        def close(self):
            real.close()

    target.handle = Short()
    data = bytes(range(256)) * 40
    target.write(target.take(np.frombuffer(data, dtype=np.uint8)))
    target.close()
    assert open(target.temporary, "rb").read() == data and len(calls) == -(-len(data) // 777)


def kept_pieces(tmp_path, n_units=3, n_shards=2, per_segment=40):
    """Pieces as encode tasks write them (a unit's piece: one segment a shard, end to end), each
    shard's rows of (piece, offset, length, records) in unit order, and each shard as the
    assembler would have made it (its segments end to end)."""
    pieces, rows, assembled = [], [[] for _ in range(n_shards)], [b"" for _ in range(n_shards)]
    for unit in range(n_units):
        data = b""
        for shard in range(n_shards):
            # (as many records in each shard's: with --output_file, record i of the run is file i mod N's)
            segment = frame_records(records(per_segment + unit, prefix=f"u{unit}s{shard}-".encode()))
            rows[shard].append([unit, len(data), len(segment), per_segment + unit])
            data += segment
            assembled[shard] += segment
        path = tmp_path / f"unit-{unit + 1:07d}-train-00000.piece"
        path.write_bytes(data)
        pieces.append(str(path))
    return pieces, [np.array(found, dtype=np.int64) for found in rows], assembled


@pytest.mark.parametrize("compiled", ["1", "0"], ids=["compiled", "reference"])
@pytest.mark.parametrize("compression", [None, "gzip"])
def test_shards_read_from_kept_pieces_shuffle_to_the_assembled_shards_bytes(tmp_path, monkeypatch, compiled,
                                                                            compression):
    """A shard that is its segments of kept pieces (``kept_pieces``: never assembled) is the
    same records in the same order as the assembled shard: the same shuffled bytes and digest,
    a shard at a time or files shuffled together; each piece is mapped once by the process
    however many shards read it, and unmapped by ``forget_pieces``."""
    from bert_data.compiled import DISABLE_VARIABLE
    from bert_data.run import shard_shuffle

    monkeypatch.setenv(DISABLE_VARIABLE, compiled)
    pieces, rows, assembled = kept_pieces(tmp_path)
    mapped, real_map = [], shard_shuffle._Mapped.__init__

    def map_once(self, path):
        mapped.append(path)
        real_map(self, path)

    monkeypatch.setattr(shard_shuffle._Mapped, "__init__", map_once)
    sources = []
    for shard, data in enumerate(assembled):
        sources.append(tmp_path / f"assembled-{shard}.tmp")
        sources[-1].write_bytes(data)
    for shard in range(2):
        seed = [7, 0, 1, shard]
        expected = run_shuffle_task(ShuffleTask(["train/0"], [str(sources[shard])], [str(tmp_path / "a")], seed,
                                                compression))
        got = run_shuffle_task(ShuffleTask(["train/0"], [str(sources[shard])], [str(tmp_path / "k")], seed, compression,
                                           [rows[shard]], pieces))
        assert got == expected
        assert (tmp_path / "k.shuffling").read_bytes() == (tmp_path / "a.shuffling").read_bytes()
    together = [str(tmp_path / f"t-{shard}") for shard in range(2)]
    expected = run_shuffle_task(ShuffleTask(["train/0", "train/1"], list(map(str, sources)), together, [7, 0, 2],
                                            compression))
    by_file = [(tmp_path / f"t-{shard}.shuffling").read_bytes() for shard in range(2)]
    got = run_shuffle_task(ShuffleTask(["train/0", "train/1"], list(map(str, sources)), together, [7, 0, 2], compression,
                                       rows, pieces))
    assert got == expected and [(tmp_path / f"t-{shard}.shuffling").read_bytes() for shard in range(2)] == by_file
    assert sorted(path for path in mapped if path.endswith(".piece")) == sorted(pieces)  # once each, for 4 tasks
    assert len(shard_shuffle._mapped_pieces) == 3
    shard_shuffle.forget_pieces()
    assert not shard_shuffle._mapped_pieces


def test_a_segment_whose_records_are_not_those_written_is_named(tmp_path):
    from bert_data.run.shard_shuffle import forget_pieces

    pieces, rows, _ = kept_pieces(tmp_path)
    rows[0][1, 3] += 1  # unit 2's segment of shard 0: one record more than it holds
    try:
        with pytest.raises(ValueError, match=r"unit-0000002-train-00000\.piece at 0: 41 records where 42 were written"):
            run_shuffle_task(ShuffleTask(["train/0"], ["x"], [str(tmp_path / "k")], [1], None, [rows[0]], pieces))
    finally:
        forget_pieces()
    assert not (tmp_path / "k.shuffling").exists()


def test_a_task_reading_more_pieces_than_the_cache_keeps_leaves_them_mapped_for_the_next(tmp_path, monkeypatch):
    """Shards of short documents each read every unit's piece, in unit order: a cache of the
    pieces smaller than that, trimmed before each task, would unmap the first ones each time and
    map them again.  The pieces a task read stay mapped for the next, however many."""
    from bert_data.run import shard_shuffle

    monkeypatch.setattr(shard_shuffle, "MAPPED_PIECES", 2)
    pieces, rows, _ = kept_pieces(tmp_path, n_units=5)
    mapped, real_map = [], shard_shuffle._Mapped.__init__

    def counted(self, path):
        mapped.append(path)
        real_map(self, path)

    monkeypatch.setattr(shard_shuffle._Mapped, "__init__", counted)
    try:
        for shard in range(2):
            run_shuffle_task(ShuffleTask(["train/0"], ["x"], [str(tmp_path / f"k{shard}")], [7, 0, 1, shard], None,
                                         [rows[shard]], pieces))
        assert sorted(mapped) == sorted(pieces)  # each once, for both tasks
        assert list(shard_shuffle._mapped_pieces) == pieces
    finally:
        shard_shuffle.forget_pieces()
    assert not shard_shuffle._mapped_pieces
