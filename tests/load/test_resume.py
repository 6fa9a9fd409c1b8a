"""Loaders that resume mid-epoch (``resumable=True``): stopped at a random batch and resumed, the
numpy reader and ``TorchDataset`` yield exactly the records not yet seen, with the masks of the
uninterrupted epoch: in the same order under the same layout, each once under another world size,
batch size or number of DataLoader workers (also through torchdata's ``StatefulDataLoader``)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from bert_data.load import merged_state, read_batches
from tests.helpers.corpus import corpus_config, make_corpus

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from bert_data.load.torch_data import TorchDataset  # noqa: E402

MASK = {"seed": 3}  # the generator's masks drawn anew at load time
SHUFFLE = 40  # windows of 40 positions: several per shard, so windows straddle shards


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from bert_data.run.resolve import generate

    root = tmp_path_factory.mktemp("resume")
    corpus = make_corpus(root / "corpus", n_docs=24)
    generate(corpus_config(corpus, root / "out", num_output_files=3))
    return str(root / "out")


def rows(batches):
    """Each record of the batches as one hashable tuple of all its features (masks included)."""
    out = []
    for batch in batches:
        batch = {name: np.asarray(value) for name, value in batch.items()}
        names = sorted(batch)
        for i in range(len(batch[names[0]])):
            out.append(tuple(np.concatenate([batch[name][i].ravel().astype(np.float64) for name in names])))
    return out


def numpy_reader(dataset, batch_size, **options):
    return read_batches(dataset, batch_size, resumable=True, mask=MASK, seed=5, **options)


@pytest.fixture(scope="module")
def epoch(dataset):
    """The uninterrupted epoch (world size 1), shuffled, and its records."""
    records = rows(numpy_reader(dataset, 6, shuffle_buffer=SHUFFLE))
    assert len(set(records)) == len(records) > 300  # every record tells itself apart
    return records


def test_one_order_per_seed_and_epoch(dataset, epoch):
    unshuffled = rows(numpy_reader(dataset, 6))
    # Masks are keyed by the record, not its place: shuffling moves records with their masks.
    assert unshuffled != epoch and Counter(unshuffled) == Counter(epoch)
    # Without shuffling and masks: the records in file order, as the plain reader gives them.
    assert rows(read_batches(dataset, 6, resumable=True)) == rows(read_batches(dataset, 6))
    # The order and the masks do not depend on the batch size; another epoch: another order and masks.
    assert rows(numpy_reader(dataset, 11, shuffle_buffer=SHUFFLE)) == epoch
    other = rows(numpy_reader(dataset, 6, shuffle_buffer=SHUFFLE, epoch=1))
    assert other != epoch and len(other) == len(epoch)


@pytest.mark.parametrize("shuffle_buffer", [0, SHUFFLE])
def test_numpy_resume_same_layout(dataset, shuffle_buffer):
    batch_size = 6
    whole = list(numpy_reader(dataset, batch_size, shuffle_buffer=shuffle_buffer))
    stop = int(np.random.default_rng(shuffle_buffer).integers(1, len(whole) - 1))
    reader = numpy_reader(dataset, batch_size, shuffle_buffer=shuffle_buffer)
    seen = [next(reader) for _ in range(stop)]
    state = reader.state_dict()
    assert state["consumed"] == stop * batch_size
    rest = list(numpy_reader(dataset, batch_size, shuffle_buffer=shuffle_buffer, state=state))
    assert rows(seen + rest) == rows(whole)
    # load_state_dict on a used reader does the same.
    reader.load_state_dict(state)
    assert rows(reader) == rows(rest)


def run_ranks(reader_of, world_size, stop):
    """Each rank reads ``stop`` batches (None: to the end); the records and the state of rank 0."""
    readers = [reader_of(rank) for rank in range(world_size)]
    seen = []
    for reader in readers:
        seen += rows(list(reader) if stop is None else [next(reader) for _ in range(stop)])
    states = [reader.state_dict() for reader in readers]
    if stop is not None:
        assert all(state == states[0] for state in states)  # every rank stands at the same place
    return seen, states[0]


@pytest.mark.parametrize("before, after", [((1, 6), (2, 5)), ((2, 4), (3, 7))])
def test_numpy_resume_other_world_size(dataset, epoch, before, after):
    (world, batch), (new_world, new_batch) = before, after
    stop = int(np.random.default_rng(world).integers(1, len(epoch) // (world * batch)))
    seen, state = run_ranks(lambda rank: numpy_reader(dataset, batch, shuffle_buffer=SHUFFLE, rank=rank,
                                                      world_size=world), world, stop)
    rest, _ = run_ranks(lambda rank: numpy_reader(dataset, new_batch, shuffle_buffer=SHUFFLE, rank=rank,
                                                  world_size=new_world, state=state), new_world, None)
    assert len(seen) == stop * world * batch
    assert Counter(seen + rest) == Counter(epoch)  # each record once, with its mask of the whole epoch
    assert set(seen) == set(epoch[:len(seen)])  # what was consumed: the first positions of the epoch


def torch_rows(loader):
    return rows({name: value.numpy() for name, value in batch.items()} for batch in loader)


def test_torch_resume_other_num_workers(dataset, epoch):
    """Stopped with num_workers=0, resumed with 2 workers: the DataLoader's round robin hands the
    workers' steps out in order, so the rest is the uninterrupted epoch's, in order."""
    options = dict(batch_size=6, shuffle_buffer=SHUFFLE, seed=5, mask=MASK, resumable=True)
    assert torch_rows(DataLoader(TorchDataset(dataset, **options), batch_size=None, num_workers=2)) == epoch
    first = TorchDataset(dataset, **options)
    batches = iter(DataLoader(first, batch_size=None, num_workers=0))
    stop = int(np.random.default_rng(7).integers(1, len(epoch) // 6))
    seen = torch_rows(next(batches) for _ in range(stop))
    state = first.state_dict()
    second = TorchDataset(dataset, **options)
    second.load_state_dict(state)
    rest = torch_rows(DataLoader(second, batch_size=None, num_workers=2))
    assert seen + rest == epoch


def test_torch_resume_other_world_size(dataset, epoch):
    options = dict(shuffle_buffer=SHUFFLE, seed=5, mask=MASK, resumable=True)
    stop = int(np.random.default_rng(11).integers(1, len(epoch) // 8))

    def loader(rank, world_size, batch_size, state=None):
        ds = TorchDataset(dataset, batch_size=batch_size, rank=rank, world_size=world_size, **options)
        if state is not None:
            ds.load_state_dict(state)
        return ds

    firsts = [loader(rank, 2, 4) for rank in range(2)]
    seen = []
    for ds in firsts:
        batches = iter(ds)
        seen += torch_rows(next(batches) for _ in range(stop))
    state = firsts[0].state_dict()
    assert firsts[1].state_dict() == state
    rest = []
    for rank in range(3):
        rest += torch_rows(DataLoader(loader(rank, 3, 5, state), batch_size=None, num_workers=2 if rank else 0))
    assert Counter(seen + rest) == Counter(epoch)


def test_stateful_dataloader(dataset, epoch):
    """torchdata's StatefulDataLoader keeps each worker's state: resumed with as many workers, the
    rest in order; its state merged (merge_state) resumes with another number of workers."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    options = dict(batch_size=6, shuffle_buffer=SHUFFLE, seed=5, mask=MASK, resumable=True)
    stop = int(np.random.default_rng(13).integers(2, len(epoch) // 6))
    loader = StatefulDataLoader(TorchDataset(dataset, **options), batch_size=None, num_workers=2)
    batches = iter(loader)
    seen = torch_rows(next(batches) for _ in range(stop))
    state = loader.state_dict()
    del batches
    same = StatefulDataLoader(TorchDataset(dataset, **options), batch_size=None, num_workers=2)
    same.load_state_dict(state)
    assert seen + torch_rows(same) == epoch
    fewer = TorchDataset(dataset, **options)
    fewer.load_state_dict(merged_state(state))
    assert seen + torch_rows(DataLoader(fewer, batch_size=None, num_workers=0)) == epoch


def test_skipping_decodes_only_the_rest(dataset, epoch, monkeypatch):
    """Resuming reads the shard sizes from the manifest and decodes only the records left."""
    import bert_data.format.dataset as format_dataset
    import bert_data.load.resumable as resumable

    reader = numpy_reader(dataset, 6, shuffle_buffer=SHUFFLE)
    stop = len(epoch) // 6 - 3
    for _ in range(stop):
        next(reader)
    state = reader.state_dict()
    decoded = []
    decode = format_dataset.decode_records
    monkeypatch.setattr(format_dataset, "decode_records",
                        lambda records, *args: decoded.append(len(records)) or decode(records, *args))
    monkeypatch.setattr(resumable, "_count_records", lambda *args: pytest.fail("counted a listed shard"))
    rest = rows(numpy_reader(dataset, 6, shuffle_buffer=SHUFFLE, state=state))
    assert rest == epoch[stop * 6:]
    assert sum(decoded) == len(rest)


def test_refuses_another_order(dataset):
    reader = numpy_reader(dataset, 6, shuffle_buffer=SHUFFLE)
    next(reader)
    state = reader.state_dict()
    with pytest.raises(ValueError, match="seed=5"):
        read_batches(dataset, 6, resumable=True, seed=6, shuffle_buffer=SHUFFLE, state=state)
    with pytest.raises(ValueError, match="resumable=True"):
        TorchDataset(dataset, batch_size=6).state_dict()
    with pytest.raises(ValueError, match="batch_size"):
        TorchDataset(dataset, resumable=True)


@pytest.fixture(scope="module")
def packed_parquet(tmp_path_factory):
    """Packed rows in Parquet: shards read as columns (not framed records), masked instance by instance."""
    from bert_data.run.resolve import generate

    root = tmp_path_factory.mktemp("resume-parquet")
    corpus = make_corpus(root / "corpus", n_docs=16, seed=2)
    generate(corpus_config(corpus, root / "out", output_format="parquet", pack_sequences=True, num_output_files=2),
             progress=False)
    return str(root / "out")


def test_resume_packed_parquet(packed_parquet):
    assert rows(read_batches(packed_parquet, 5, resumable=True)) == rows(read_batches(packed_parquet, 5))
    whole = rows(numpy_reader(packed_parquet, 4, shuffle_buffer=16))
    assert len(set(whole)) == len(whole) > 20
    stop = int(np.random.default_rng(17).integers(1, len(whole) // 4))
    reader = numpy_reader(packed_parquet, 4, shuffle_buffer=16)
    seen = rows([next(reader) for _ in range(stop)])
    state = reader.state_dict()
    assert seen + rows(numpy_reader(packed_parquet, 4, shuffle_buffer=16, state=state)) == whole
    rest, _ = run_ranks(lambda rank: numpy_reader(packed_parquet, 3, shuffle_buffer=16, rank=rank, world_size=2,
                                                  state=state), 2, None)
    assert Counter(seen + rest) == Counter(whole)


def test_state_after_batches_of_a_plain_dataloader(dataset, epoch):
    """A plain DataLoader's workers keep their places to themselves: the main process's dataset
    gives the state after the batches the trainer counted."""
    options = dict(batch_size=6, shuffle_buffer=SHUFFLE, seed=5, mask=MASK, resumable=True)
    stop = int(np.random.default_rng(19).integers(1, len(epoch) // 6))
    first = TorchDataset(dataset, **options)
    batches = iter(DataLoader(first, batch_size=None, num_workers=2))
    seen = torch_rows(next(batches) for _ in range(stop))
    del batches
    state = first.state_after(stop)
    assert state["consumed"] == stop * 6
    second = TorchDataset(dataset, **options)
    second.load_state_dict(state)
    assert seen + torch_rows(DataLoader(second, batch_size=None, num_workers=0)) == epoch


def test_resumed_reader_checks_shard_checksums(dataset, tmp_path):
    """A damaged shard is refused by a resumed reader too, before any of its records."""
    import shutil

    from bert_data.format.checksums import ChecksumError

    copy = tmp_path / "copy"
    shutil.copytree(dataset, copy)
    reader = read_batches(str(copy), 6, resumable=True)
    next(reader)
    state = reader.state_dict()
    last = sorted(copy.glob("*.tfrecord*"))[-1]
    data = bytearray(last.read_bytes())
    data[len(data) // 2] ^= 0xFF
    last.write_bytes(bytes(data))
    with pytest.raises(ChecksumError):
        list(read_batches(str(copy), 6, resumable=True, state=state))
