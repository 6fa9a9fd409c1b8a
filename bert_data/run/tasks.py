"""The tasks: thin glue that runs the pipeline's stages on the work directory's files.

``tokenize_slice``: documents -> sentences -> token ids (:mod:`bert_data.pipeline.tokens`), for one
slice of the listed corpus (neighbouring documents).  Slices are small, so every core stays busy
even when documents are few and large.  Its tokens and a table of its documents stay in the work
directory.

``pair_unit``: token ids -> shuffled instances (:mod:`bert_data.pipeline.instances`), for one
unit: a few runs of neighbouring documents from all over the corpus (see
:mod:`bert_data.pipeline.mixing`), gathered from the slices that hold them into the unit's pool,
where its random next sentences come from.  Pairs are token ranges: small to send.  With
``--pack_sequences`` they wait in the work directory until the whole split is packed
(``split_packing``).

``encode_shards``: pairs -> masked instances -> columns (:mod:`bert_data.pipeline.columns`) ->
the output format's segments, for one unit and some of the output shards, into a piece file.

Each task receives only its spec (:class:`~.specs.TokenizeSpec`, :class:`~.specs.PairSpec`,
:class:`~.specs.EncodeSpec`, resolved once) and its input, never the configuration.  All are pure
functions of those: every random stream comes from (seed, unit, split, purpose[, shard])
(:mod:`bert_data.pipeline.streams`), so the bytes written do not depend on which worker runs a
task, when, or how many workers there are.  Nothing here imports TensorFlow.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np

from .. import storage
from ..compiled import long_lived
from ..format.dataset_layout import TRAIN
from ..format.output_formats import get_format
from ..format.tfrecord.splicing import SegmentCompressor
from ..pipeline.columns import instance_columns, range_columns
from ..pipeline.documents.reading import Undecoded, read_documents
from ..pipeline.documents.types import InputError, Skip, Slice
from ..pipeline.instances import create_instances
from ..pipeline.decontamination import eval_ngrams
from ..pipeline.screening import DocumentScreen, LineRemoval
from ..pipeline.sentences import SentenceSpec
from ..pipeline.streams import MASKING, PAIRING, SHUFFLING, python_random, random_streams
from ..pipeline.tokens import DocumentTokenizer, id_dtype
from ..tokenizers import TokenizerSource, make_tokenizer
from .locations import local_tokenizer
from .pieces import Segment
from .run_files import pairs_path, piece_path, pool_path, slice_paths
from .scratch import PieceWriter, load_array, load_json, save_array, save_json
from .specs import EncodeSpec, PairSpec, TokenizeSpec
from .split_packing import gather_pairs, save_unit_pairs
from .work_checks import crc32c
from .units import SliceTable, SplitPairs, UnitPairs, UnitWork, EncodeTask, record_slices, unit_pool

# Rows masked and encoded together: large enough for numpy to pay, small enough to keep a
# worker's temporary arrays to a few MB.
CHUNK_ROWS = 2048


class UnitError(RuntimeError):
    """A failure inside a task, naming the document being processed."""


# ---------------------------------------------------------------------------- a worker's tools

# Costly to build (a vocabulary, a tokenizer, a spaCy pipeline): once per process and thread (a
# Dask worker may run several tasks at once in threads).
_tokenizers: Dict[tuple, object] = {}
_splitters: Dict[tuple, object] = {}


def worker_tokenizer(source: TokenizerSource):
    key = (threading.get_ident(), source)
    if key not in _tokenizers:
        from ..tokenizers.wordpiece import force_single_thread

        force_single_thread()  # one worker process, one tokenizer thread: parallelism comes from processes
        with long_lived():  # (kept by the process: out of its garbage collections, see compiled.long_lived)
            _tokenizers[key] = make_tokenizer(local_tokenizer(source))
    return _tokenizers[key]


def worker_splitter(spec: SentenceSpec):
    key = (threading.get_ident(), spec)
    if key not in _splitters:
        with long_lived():  # spaCy's pipeline: some 10^5 objects a collection would walk again
            _splitters[key] = spec.splitter()
    return _splitters[key]


# ---------------------------------------------------------------------------- tokenize_slice

@dataclass
class SliceSummary:
    """What the orchestrator keeps of a tokenized slice (its tokens stay in the work directory,
    where tasks on any machine read them).  Saved beside them, last: a slice with a summary is
    complete, and ``--resume`` does not tokenize it again."""

    index: int
    n_tokens: int = 0
    n_bytes: int = 0  # characters of text read
    skips: List[Skip] = field(default_factory=list)
    kept_in_parts: List[int] = field(default_factory=list)  # positions of kept documents read in parts
    undecoded: Undecoded = field(default_factory=Undecoded)  # documents with bytes not in their encoding
    lines_removed: List[LineRemoval] = field(default_factory=list)  # --decontaminate_mode passages

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)
        data["skips"] = [dataclasses.astuple(skip) for skip in self.skips]
        data["lines_removed"] = [removal.to_json() for removal in self.lines_removed]
        return data

    @classmethod
    def from_json(cls, data: dict) -> "SliceSummary":
        return cls(data["index"], data["n_tokens"], data["n_bytes"], [Skip(*skip) for skip in data["skips"]],
                   list(data["kept_in_parts"]), Undecoded(**data.get("undecoded", {})),
                   [LineRemoval(*removal) for removal in data.get("lines_removed", [])])

    @classmethod
    def load(cls, work_dir: str, index: int) -> Optional["SliceSummary"]:
        data = load_json(slice_paths(work_dir, index)["summary"])
        return None if data is None else cls.from_json(data)


def tokenize_slice(slice_: Slice, spec: TokenizeSpec, work_dir: str) -> SliceSummary:
    """Documents -> sentences -> token ids, for one slice; writes its tokens, sentence lengths and
    document table to the work directory."""
    tokenizer = worker_tokenizer(spec.tokenizer)
    stage = DocumentTokenizer(worker_splitter(spec.sentences), tokenizer,
                              id_dtype(tokenizer.vocab.size, spec.word_starts), spec.word_starts)
    skips: List[Skip] = []
    reading = spec.reading
    undecoded = Undecoded()
    screen = None
    try:
        # JSON Lines a line a sentence: a slice at a time, blocks of lines as columns.
        read_whole = spec.screening is None and hasattr(stage.splitter, "split_batch") and all(
            source.text_field is not None and not source.table and not source.in_parts for source in slice_.sources)
        documents = undecoded.counted(read_documents(slice_.sources, reading.separator_line,
                                                     reading.multiple_docs_in_single_file, skips, columns=read_whole))
        if spec.screening is not None:
            decontamination = spec.screening.decontamination
            screen = DocumentScreen(spec.screening, eval_ngrams(decontamination) if decontamination else None)
            documents = screen.screen(documents)
        tokenized = stage.tokenize_read(documents, skips) if read_whole else stage.tokenize(documents, skips)
    except Exception as error:  # name the document: the first thing a user needs to know
        last = stage.last_read
        where = last.label if last is not None else (slice_.sources[0].label if slice_.sources else "?")
        url = storage.unreachable(error)
        if url is not None:  # storage gone, not the document's fault: the run keeps its work
            raise storage.Unreachable(url) from None
        if isinstance(error, InputError):  # (its message names the file already)
            raise UnitError(str(error)) from error
        raise UnitError(f"{where}: {type(error).__name__}: {error}") from error
    paths = slice_paths(work_dir, slice_.index)
    # Made durable together with the summary (save_json's vouching_for): one fsync a file, one of the directory.
    checksums = {"tokens": save_array(tokenized.tokens, paths["tokens"]),
                 "sentences": save_array(tokenized.sentence_lengths, paths["sentences"]),
                 "docs": save_array(tokenized.table, paths["docs"])}
    if screen is not None:
        checksums["screen"] = save_array(screen.table(), paths["screen"])
    summary = SliceSummary(slice_.index, len(tokenized.tokens), tokenized.n_chars, tokenized.skips,
                           tokenized.kept_in_parts, undecoded, screen.lines_removed if screen is not None else [])
    # Written last (a slice with a summary is complete), with its files' checksums: ``--resume``
    # checks them before it reuses the slice.
    save_json(dict(summary.to_json(), checksums=checksums), paths["summary"], [paths[kind] for kind in checksums])
    return summary


# ---------------------------------------------------------------------------- pair_unit

def pair_unit(unit: UnitWork, table: SliceTable, spec: PairSpec, work_dir: str) -> UnitPairs:
    """Token ids -> shuffled pairs (or MLM-only windows) for one unit: its documents are the pool
    random next sentences come from."""
    instances = spec.instances
    result = UnitPairs(unit.index, unit.split)
    path = pool_path(work_dir, unit.index)
    kept: List[int] = []
    pool, result.n_replaced = unit_pool(unit, table, work_dir, path, instances.separator_id, kept)
    result.n_docs = len(pool)
    if not len(pool):
        return result
    flat, offsets = pool.flat_bounds()  # (each document's bounds: its start, then its sentences' ends)
    result.n_tokens = int((flat[offsets[1:] - 1] - flat[offsets[:-1]]).sum())
    result.n_sentences = int(offsets[-1]) - len(pool)
    # Validation data gets one mask per instance: evaluation needs no duplicates.
    passes = instances.dupe_factor if unit.split == TRAIN else 1
    pairs = create_instances(pool, passes, instances,
                             python_random(random_streams(spec.seed, unit.index, unit.split, PAIRING)))
    if spec.origins and unit.origins is not None:  # each instance's source and document travel with it
        pairs = pairs.with_origins(pool, unit.origins[kept])
        counts = np.bincount(pairs.origin[:, 0], minlength=int(unit.origins[:, 0].max()) + 1)
        result.source_instances = counts.tolist()
    # Instances are shuffled within a unit, itself a sample of the whole corpus (the reference
    # shuffles all instances at the end, in memory).
    shuffling = np.random.default_rng(random_streams(spec.seed, unit.index, unit.split, SHUFFLING))
    pairs = pairs.take(shuffling.permutation(len(pairs)))
    lengths = instances.lengths(pairs)
    result.n_instances = result.n_records = len(pairs)
    result.n_record_tokens = int(lengths.sum())
    if spec.packing is not None:  # packed with the whole split's (run.split_packing): the pairs wait here
        save_unit_pairs(pairs, pairs_path(work_dir, unit.index))
        result.lengths = lengths.astype(np.int32)
        return result
    result.pairs = SplitPairs(path, pairs)
    return result


# ---------------------------------------------------------------------------- encode_shards

def encode_shards(task: EncodeTask, spec: EncodeSpec, work_dir: str, batched: bool = True) -> List[Segment]:
    """Mask and encode one split's records for some output shards, in the output format's
    segment encoding (framed records for TFRecord, column batches for the others), into one
    piece file.

    Each shard's records are masked from its own stream in chunks of at most ``CHUNK_ROWS``.
    ``batched`` (unpacked records): neighbouring chunks of several shards (a unit of short
    documents gives each shard a few hundred records) are gathered, masked and encoded
    together, each chunk's masks still drawn from its shard's stream as a chunk of its own
    (``range_columns``): the same bytes as a chunk at a time (``batched=False``, the
    reference), with the per-call costs paid once a batch."""
    vocab = worker_tokenizer(spec.tokenizer).vocab
    writer = get_format(spec.format).make_writer(spec.shard_options)
    path = piece_path(work_dir, task.unit_index, task.split, task.shards[0])
    # Packed with the split: a chunk's instances are gathered from their units' pools.
    tokens = load_array(task.tokens_path) if task.sources is None else None
    loaded: Dict[str, np.ndarray] = {}  # (packed: the pools and pairs read so far)
    segments = []
    shards: Dict[int, _ShardSegment] = {}
    batched = batched and tokens is not None and task.pack_sizes is None
    with PieceWriter(path) as piece_file:
        for group in _chunk_groups(task, CHUNK_ROWS if batched else 0):
            for shard, *_ in group:
                if shard not in shards:
                    shards[shard] = _ShardSegment(np.random.default_rng(
                        random_streams(spec.seed, task.unit_index, task.split, MASKING, task.shards[shard])),
                        spec.segment_compression)
            if len(group) > 1:
                first, end = group[0][1].start, group[-1][1].stop
                bounds = [0, *(rows.stop - first for _, rows, _, _ in group)]
                columns = range_columns(tokens, task.pairs.take(slice(first, end)), spec.instances, vocab,
                                        spec.masking, [shards[shard].rng for shard, *_ in group], bounds,
                                        spec.provenance, spec.word_starts)
                encoded = writer.encode_segments(columns, bounds)
            else:
                ((shard, rows, pack_sizes, _),) = group
                chunk_tokens, pairs = (tokens, task.pairs.take(rows)) if tokens is not None else \
                    gather_pairs(task.sources.take(rows), loaded)
                encoded = [writer.encode_segment(instance_columns(
                    chunk_tokens, pairs, spec.instances, vocab, spec.masking, shards[shard].rng, spec.packing,
                    pack_sizes, spec.provenance, spec.word_starts))]
            for (shard, _, _, size), data in zip(group, encoded):
                segment = shards[shard]
                if segment.offset is None:
                    segment.offset = piece_file.tell()
                piece_file.write(segment.add(data))
                if size:  # the shard's last chunk
                    data = segment.compressor.flush()  # (nothing, uncompressed)
                    if data:
                        piece_file.write(data)
                        segment.crc = crc32c(data, segment.crc)
                    segments.append(Segment(task.split, task.shards[shard], path, segment.offset,
                                            piece_file.tell() - segment.offset, size, segment.compressor.adler32,
                                            segment.compressor.raw_length, segment.crc))
    return segments


@dataclass
class _ShardSegment:
    """One output shard's segment of an encode task, as its chunks are written: its masking
    stream, compressor, running CRC-32C and where it starts in the piece."""

    rng: np.random.Generator
    compression: Optional[str]
    offset: Optional[int] = None
    crc: int = 0

    def __post_init__(self):
        self.compressor = SegmentCompressor(self.compression)

    def add(self, data) -> bytes:
        data = self.compressor.compress(data)
        self.crc = crc32c(data, self.crc)
        return data


def _chunk_groups(task: EncodeTask, batch_rows: int):
    """The task's chunks, ``(shard's place in the task, rows, pack sizes, the shard's records
    if it is the shard's last chunk else 0)``, in the order they are written, in groups of
    neighbouring chunks of at most ``batch_rows`` rows together (0: a chunk a group)."""
    group: list = []
    rows_in_group = first_row = 0
    for shard, size in enumerate(task.shard_sizes):
        chunks = list(record_slices(task.pack_sizes, first_row, first_row + size, CHUNK_ROWS))
        first_row += size
        for c, (rows, pack_sizes) in enumerate(chunks):
            n = rows.stop - rows.start
            if group and rows_in_group + n > batch_rows:
                yield group
                group, rows_in_group = [], 0
            group.append((shard, rows, pack_sizes, size if c == len(chunks) - 1 else 0))
            rows_in_group += n
    if group:
        yield group


def record_bytes(pairs, spec: EncodeSpec, vocab, compression: Optional[str], segment_rows: int,
                 sample: int = 2048) -> float:
    """Bytes a record takes in the shards (for TFRecord: framed, and compressed as ``compression``
    says; for the other formats: in a shard of the sample, as the format writes it), from the
    first ``sample`` pairs encoded exactly as ``encode_shards`` does (the masks of a throwaway
    stream: they change a record's size by a byte or two at most).  Compressed, each unit's part
    of a TFRecord shard is a segment of its own (a gzip member, a flushed deflate block), so the
    sample is compressed in segments of ``segment_rows`` records: small segments compress less
    well.  ``pairs``: a unit's ``SplitPairs`` or packed ``PackedRows``.  ``vocab``: the parent's
    (it encodes here, not in a worker)."""
    n = min(sample, pairs.n_records)
    if not n:
        return 0.0
    fmt = get_format(spec.format)
    writer = fmt.make_writer(spec.shard_options)
    tokens, sample_pairs, pack_sizes = pairs.first_records(n)
    columns = instance_columns(tokens, sample_pairs, spec.instances, vocab,
                               spec.masking, np.random.default_rng(0), spec.packing, pack_sizes, spec.provenance,
                               spec.word_starts)
    if not fmt.appendable:  # HDF5, Parquet, MDS: a sample shard, written (and compressed) as theirs are
        with tempfile.TemporaryDirectory() as directory:
            written = os.path.join(directory, "sample")
            writer.write_shard([columns], written, "sample")
            return os.path.getsize(written) / n
    size, step = 0, max(1, segment_rows)
    for start in range(0, n, step):
        compressor = SegmentCompressor(compression)  # as the shard is compressed, in the end
        part = {name: column[start:start + step] for name, column in columns.items()}
        size += len(compressor.compress(writer.encode_segment(part))) + len(compressor.flush())
    return size / n
