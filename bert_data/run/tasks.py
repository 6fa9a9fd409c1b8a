"""The stages, run as three kinds of task:

``tokenize_slice``: documents -> sentences -> token ids, for one slice of the listed corpus
(neighbouring documents).  Slices are small, so every core stays busy even when documents are
few and large.  Its tokens and a table of its documents stay in the work directory.

``pair_unit``: token ids -> shuffled next-sentence pairs, for one unit: a few runs of
neighbouring documents from all over the corpus (see ``mixing``), read from the slices that
hold them; the pool random next sentences come from.  Pairs are token ranges: small to send.

``encode_shards``: pairs -> masked instances -> encoded, framed examples, for one unit and some
of the output shards, into a piece file.

Each task receives the run's ``settings.RunSettings`` (the configuration resolved once, in
planning; not imported here, so that the settings may use the run's places) and re-derives
nothing from it.  All are pure functions of the settings and their input: every random stream
comes from (seed, unit, split, purpose[, shard]), so the bytes written do not depend on which
worker runs a task, when, or how many workers there are.  A piece file holds each of its shards' records
contiguously; the orchestrator appends pieces to the shards in unit order (and then, unless
the listed order is kept, shuffles each shard: ``shard_shuffle``).  Nothing here imports
TensorFlow.
"""

from __future__ import annotations

import dataclasses
import os
import random
import tempfile
import threading
from dataclasses import dataclass, field
from itertools import chain
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import storage
from ..config import GeneratorConfig
from ..pipeline.documents.reading import read_documents
from ..format.dataset_layout import TRAIN, VAL
from ..pipeline.documents.types import NO_SENTENCE, Document, InputError, Skip, Slice
from .pieces import Segment
from ..format.output_formats import get_format
from ..format.tfrecord.splicing import SegmentCompressor
from .shard_shuffle import shuffles_shards
from ..pipeline.instances import PairArrays, TokenPool, create_pairs, create_windows, gather_instances
from ..pipeline.masking import MaskingSpec, mask_tokens, num_to_predict
from ..pipeline.packing import pack_columns, pack_instances, packed_predictions, row_members
from ..tokenizers import make_tokenizer
from .run_files import piece_path, pool_path, slice_paths
# Where tasks hand each other data (a local directory or a URL); re-exported for callers here.
from .scratch import (PieceWriter, load_array, load_json, new_array_file, private_temporary, save_array,  # noqa: F401
                      save_json, slice_rows)

# Rows masked and encoded together: large enough for numpy to pay, small enough to keep a
# worker's temporary arrays to a few MB.
CHUNK_ROWS = 2048
# Sentences tokenized in one call, and at most about this many characters (the ids come back as
# Python lists: a huge document must not become one huge list).
TOKENIZE_BATCH = 4096
TOKENIZE_CHARS = 1_000_000
SPLIT_CODES = {TRAIN: 0, VAL: 1}


class UnitError(RuntimeError):
    """A failure inside a task, naming the document being processed."""


# ---------------------------------------------------------------------------- worker context

class _WorkerContext:
    """Per-process objects that are costly to build (vocabulary, tokenizer, sentence splitter)."""

    _cached: Dict[tuple, "_WorkerContext"] = {}

    def __init__(self, settings: RunSettings):
        from ..pipeline.sentences import make_sentence_splitter
        from ..tokenizers.wordpiece import force_single_thread

        config = settings.config
        # One worker process, one tokenizer thread: parallelism comes from processes.
        force_single_thread()
        self.tokenizer = make_tokenizer(settings.local_tokenizer())
        self.vocab = self.tokenizer.vocab
        self.splitter = make_sentence_splitter(config.single_sentence_per_line, config.spacy_model)
        self.token_dtype = np.uint16 if self.vocab.size <= np.iinfo(np.uint16).max + 1 else np.int32
        self.document_separator_id = self.vocab.token_to_id.get(config.document_separator_token)

    @classmethod
    def get(cls, settings: RunSettings) -> "_WorkerContext":
        # Per thread too: a Dask worker may run several tasks at once in threads.
        config = settings.config
        key = (threading.get_ident(), settings.tokenizer, config.single_sentence_per_line, config.spacy_model)
        if key not in cls._cached:
            cls._cached[key] = cls(settings)
        return cls._cached[key]


# ---------------------------------------------------------------------------- tokenize_slice

# Columns of a slice's document table (``run_files.slice_paths``): one row per document read in the
# slice (a document read in parts has a row in each of its slices).
DOC_POSITION, TOKEN_START, TOKEN_END, SENTENCE_START, SENTENCE_END, DOC_REPLACED = range(6)


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

    def to_json(self) -> dict:
        data = dataclasses.asdict(self)
        data["skips"] = [dataclasses.astuple(skip) for skip in self.skips]
        return data

    @classmethod
    def from_json(cls, data: dict) -> "SliceSummary":
        return cls(data["index"], data["n_tokens"], data["n_bytes"], [Skip(*skip) for skip in data["skips"]],
                   list(data["kept_in_parts"]))

    @classmethod
    def load(cls, work_dir: str, index: int) -> Optional["SliceSummary"]:
        data = load_json(slice_paths(work_dir, index)["summary"])
        return None if data is None else cls.from_json(data)


def tokenize_slice(slice_: Slice, settings: RunSettings, work_dir: str) -> SliceSummary:
    """Documents -> sentences -> token ids, for one slice; writes its tokens, sentence lengths and
    document table to the work directory."""
    config = settings.config
    context = _WorkerContext.get(settings)
    skips: List[Skip] = []
    # Documents as read (the splitter may read ahead of the sentences it yields) ...
    seen: List[Document] = []
    counts = {"bytes": 0}
    # ... documents split into sentences, waiting to be tokenized together ...
    pending: List[Tuple[Document, List[str]]] = []
    # ... and documents kept, with their token ids.
    rows: List[List[int]] = []
    kept_in_parts: List[int] = []
    token_parts: List[np.ndarray] = []
    sentence_lengths: List[int] = []
    position = {"tokens": 0}

    def texts():
        for document in read_documents(slice_.sources, config.separator_line,
                                       config.multiple_docs_in_single_file, skips):
            counts["bytes"] += len(document.text)
            seen.append(document)
            yield document.text
            document.text = ""  # the splitter has it; hold no second copy

    def flush():
        batch = [sentence for _, sentences in pending for sentence in sentences]
        lengths = np.zeros(len(batch), dtype=np.int64)
        parts: List[np.ndarray] = []
        # In bounded calls: the ids come back as Python objects, a few hundred bytes a token.
        start = 0
        while start < len(batch):
            end, chars = start, 0
            while end < len(batch) and end - start < TOKENIZE_BATCH and chars < TOKENIZE_CHARS:
                chars += len(batch[end])
                end += 1
            ids = context.tokenizer.encode_ids(batch[start:end])
            per_sentence = [len(sentence) for sentence in ids]
            lengths[start:end] = per_sentence
            parts.append(np.fromiter(chain.from_iterable(ids), dtype=context.token_dtype, count=sum(per_sentence)))
            del ids
            start = end
        tokens = np.concatenate(parts) if parts else np.zeros(0, dtype=context.token_dtype)
        ends = np.cumsum(lengths)
        first = 0
        for document, sentences in pending:
            doc_lengths = lengths[first : first + len(sentences)]
            # Sentences with no token (only characters the normaliser drops) are dropped, and a
            # document left with no sentence is skipped, as the reference does.
            kept = doc_lengths[doc_lengths > 0]
            if not len(kept):
                skips.append(Skip(NO_SENTENCE, document.label, document.corpus_doc, document.in_parts))
            else:
                begin = int(ends[first - 1]) if first else 0
                token_parts.append(tokens[begin : int(ends[first + len(sentences) - 1])])
                rows.append([document.corpus_doc, position["tokens"], position["tokens"] + len(token_parts[-1]),
                             len(sentence_lengths), len(sentence_lengths) + len(kept), document.n_replaced])
                position["tokens"] += len(token_parts[-1])
                sentence_lengths.extend(kept.tolist())
                if document.in_parts:
                    kept_in_parts.append(document.corpus_doc)
            first += len(sentences)
        pending.clear()

    try:
        n_pending = chars_pending = 0
        for index, sentences in enumerate(context.splitter.split(texts())):
            pending.append((seen[index], sentences))
            n_pending += len(sentences)
            chars_pending += sum(map(len, sentences))
            if n_pending >= TOKENIZE_BATCH or chars_pending >= TOKENIZE_CHARS:
                flush()
                n_pending = chars_pending = 0
        flush()
    except Exception as error:  # name the document: the first thing a user needs to know
        where = seen[-1].label if seen else (slice_.sources[0].label if slice_.sources else "?")
        if isinstance(error, InputError):  # (its message names the file already)
            raise UnitError(str(error)) from error
        raise UnitError(f"{where}: {type(error).__name__}: {error}") from error

    paths = slice_paths(work_dir, slice_.index)
    tokens = np.concatenate(token_parts) if token_parts else np.zeros(0, dtype=context.token_dtype)
    save_array(tokens, paths["tokens"])
    save_array(np.asarray(sentence_lengths, dtype=np.int32), paths["sentences"])
    save_array(np.asarray(rows, dtype=np.int64).reshape(-1, 6), paths["docs"])
    summary = SliceSummary(slice_.index, len(tokens), counts["bytes"], skips, kept_in_parts)
    save_json(summary.to_json(), paths["summary"])
    return summary


# ---------------------------------------------------------------------------- pair_unit

def random_streams(seed: int, unit_index: int, split: str, *purpose: int) -> np.random.SeedSequence:
    """Every random choice of a unit comes from (seed, unit, split, purpose), never from who runs it."""
    return np.random.SeedSequence([seed, unit_index, SPLIT_CODES[split], *purpose])


PAIRING, SHUFFLING, MASKING, PACKING = 0, 1, 2, 3


def python_random(sequence: np.random.SeedSequence) -> random.Random:
    return random.Random(int.from_bytes(sequence.generate_state(4, np.uint32).tobytes(), "little"))


@dataclass
class SliceTable:
    """Where the documents are: the corpus position of each slice's first document, and whether
    the slice begins with a later part of a document (so a unit's task finds its documents
    among the tokenized slices without asking anyone)."""

    first_docs: np.ndarray  # int64, ascending
    starts_with_a_part: np.ndarray  # bool

    @classmethod
    def of(cls, slices: Sequence[Slice]) -> "SliceTable":
        return cls(np.asarray([slice_.first_doc for slice_ in slices], dtype=np.int64),
                   np.asarray([slice_.starts_with_a_part for slice_ in slices], dtype=bool))

    def slices_of(self, positions: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """For each document position: the first and the last slice that hold some of it."""
        positions = np.asarray(positions, dtype=np.int64)
        last = np.searchsorted(self.first_docs, positions, side="right") - 1
        first = last.copy()
        while True:  # back over the slices holding later parts of the document
            back = (first > 0) & (self.first_docs[np.maximum(first, 0)] == positions) & \
                self.starts_with_a_part[np.maximum(first, 0)]
            if not back.any():
                return first, last
            first[back] -= 1


@dataclass
class UnitWork:
    """One unit: its documents (corpus positions, in the unit's order) and their split."""

    index: int
    split: str
    docs: np.ndarray


@dataclass
class SplitPairs:
    """One unit, paired and shuffled: what the encode tasks need."""

    tokens_path: str  # the unit's token pool (.npy in the work directory)
    pairs: PairArrays  # token ranges into the pool, in output order
    # Packed records (--pack_sequences): instances of each record, the pairs being row after row.
    pack_sizes: Optional[np.ndarray] = None

    @property
    def n_records(self) -> int:
        return len(self.pairs) if self.pack_sizes is None else len(self.pack_sizes)


@dataclass
class UnitPairs:
    unit_index: int
    split: str
    pairs: Optional[SplitPairs] = None
    n_docs: int = 0  # documents with text
    n_instances: int = 0
    n_records: int = 0  # records written: instances, or packed rows
    n_record_tokens: int = 0  # tokens of the records that are not padding ([CLS] and [SEP]s included)
    n_sentences: int = 0
    n_tokens: int = 0
    n_replaced: int = 0


def unit_pool(unit: UnitWork, table: SliceTable, work_dir: str, path: str,
              separator_id: Optional[int] = None) -> Tuple[TokenPool, int]:
    """The unit's documents, gathered from the tokenized slices in the unit's order, as one token
    pool written to ``path`` and memory-mapped from there.  A document read in parts is joined
    again; a skipped document has no rows and is left out.  With ``separator_id`` (MLM-only
    windows that cross documents) that token stands between documents.  Also returns the count
    of characters of the documents that replaced invalid UTF-8."""
    first, last = table.slices_of(unit.docs)
    wanted = np.unique(unit.docs)
    rows: Dict[int, List[Tuple[int, np.ndarray]]] = {}  # position -> [(slice, row)] in slice order
    sentences: Dict[int, np.ndarray] = {}
    tokens: Dict[int, np.ndarray] = {}
    numbers = np.unique(np.concatenate([np.arange(a, b + 1) for a, b in zip(first, last)] or [[]])).astype(int)
    found = slice_rows([slice_paths(work_dir, number) for number in numbers.tolist()], wanted, DOC_POSITION,
                       lambda row: ((row[TOKEN_START], row[TOKEN_END]), (row[SENTENCE_START], row[SENTENCE_END])))
    for number, hit in zip(numbers.tolist(), found):
        if hit is None:
            continue
        table_hits, tokens[number], sentences[number] = hit
        for row in table_hits:
            rows.setdefault(int(row[DOC_POSITION]), []).append((number, row))

    size, bounds, copies, replaced = 0, [], [], 0
    for position in unit.docs.tolist():
        if position not in rows:
            continue
        if separator_id is not None and bounds:
            copies.append((-1, 0, 1))  # the separator, between two documents
            size += 1
        starts = [size]
        for number, row in rows[position]:
            lengths = sentences[number][row[SENTENCE_START]:row[SENTENCE_END]]
            starts += (size + np.cumsum(lengths)).tolist()
            copies.append((number, int(row[TOKEN_START]), int(row[TOKEN_END])))
            size += int(row[TOKEN_END] - row[TOKEN_START])
            replaced += int(row[DOC_REPLACED])
        bounds.append(starts)
    dtype = next(iter(tokens.values())).dtype if tokens else np.int32
    if not bounds:
        return TokenPool(np.zeros(0, dtype), []), 0
    remote = storage.is_url(path)  # built in memory and uploaded whole; else built in place
    temporary = None if remote else private_temporary(path)
    pool = np.empty(size, dtype) if remote else new_array_file(temporary, dtype, size)
    at = 0
    for number, start, end in copies:
        pool[at : at + end - start] = tokens[number][start:end] if number >= 0 else separator_id
        at += end - start
    if remote:
        save_array(pool, path)
        return TokenPool(pool, bounds), replaced
    pool.flush()
    del pool
    os.replace(temporary, path)
    return TokenPool(load_array(path), bounds), replaced


def pair_unit(unit: UnitWork, table: SliceTable, settings: RunSettings, work_dir: str) -> UnitPairs:
    """Token ids -> shuffled pairs (or MLM-only windows) for one unit: its documents are the pool
    random next sentences come from."""
    config = settings.config
    result = UnitPairs(unit.index, unit.split)
    cross_document = config.mlm_only and config.allow_cross_document_examples
    separator = _WorkerContext.get(settings).document_separator_id if cross_document else None
    path = pool_path(work_dir, unit.index)
    pool, result.n_replaced = unit_pool(unit, table, work_dir, path, separator)
    result.n_docs = len(pool)
    if not len(pool):
        return result
    result.n_tokens = int(sum(bounds[-1] - bounds[0] for bounds in pool.bounds))
    result.n_sentences = sum(len(bounds) - 1 for bounds in pool.bounds)
    # Validation data gets one mask per instance: evaluation needs no duplicates.
    passes = config.dupe_factor if unit.split == TRAIN else 1
    rng = python_random(random_streams(config.seed, unit.index, unit.split, PAIRING))
    if config.mlm_only:
        pairs = create_windows(pool, passes, config.max_num_tokens, config.window_overlap, config.short_seq_prob,
                               config.short_min, cross_document, rng)
    else:
        pairs = create_pairs(pool, passes, config.max_num_tokens, config.short_seq_prob, config.short_min, rng,
                             per_chunk=config.short_seq_draw == "chunk",
                             sentence_order=config.sentence_order_prediction)
    # Instances are shuffled within a unit, itself a sample of the whole corpus (the reference
    # shuffles all instances at the end, in memory).
    order = np.random.default_rng(random_streams(config.seed, unit.index, unit.split, SHUFFLING)).permutation(len(pairs))
    pairs = pairs.take(order)
    lengths = instance_lengths(pairs, config.mlm_only)
    result.n_instances = result.n_records = len(pairs)
    result.n_record_tokens = int(lengths.sum())
    result.pairs = SplitPairs(path, pairs)
    if config.pack_sequences:
        result.pairs = pack_pairs(pairs, lengths, path, config, unit)
        result.n_records = result.pairs.n_records
    return result


def instance_lengths(pairs: PairArrays, mlm_only: bool) -> np.ndarray:
    """Tokens of each instance, with its [CLS] and [SEP]s."""
    if mlm_only:
        return pairs.a_length.astype(np.int64) + 2
    return pairs.a_length.astype(np.int64) + pairs.b_length + 3


def pack_pairs(pairs: PairArrays, lengths: np.ndarray, tokens_path: str, config: GeneratorConfig,
               unit: UnitWork) -> SplitPairs:
    """A unit's instances (in their shuffled order) packed into rows (``--pack_sequences``), the
    rows in a random order of their own: best-fit over a group puts long instances in the
    first rows of each group, which a seeded permutation spreads out again."""
    # Unmasked rows too: load-time masks, drawn with the run's options, then fit the row's slots.
    budgets = num_to_predict(lengths, config.masked_lm_prob, config.max_predictions_per_seq)
    k = config.sequences_per_pack
    order, sizes = pack_instances(lengths, budgets, config.max_seq_length,
                                  packed_predictions(config.max_predictions_per_seq, k), k)
    rows = np.random.default_rng(random_streams(config.seed, unit.index, unit.split, PACKING)).permutation(len(sizes))
    return SplitPairs(tokens_path, pairs.take(order[row_members(sizes, rows)]), sizes[rows])


# ---------------------------------------------------------------------------- encode_shards

def shard_rows(n_records: int, rotation: int, shard: int, n_shards: int) -> np.ndarray:
    """Record j of a unit goes to shard (rotation + j) mod N.  The rotation is the unit's index
    (balanced shards: it spreads each unit's remainder over different shards), or with Google's
    --output_file the number of records before the unit (record i of the run to file i mod N)."""
    return np.arange((shard - rotation) % n_shards, n_records, n_shards)


@dataclass
class EncodeTask:
    """The records of one unit and split bound for some output shards: the pool's tokens, and
    the pairs of each shard one after the other (only what the task needs travels)."""

    unit_index: int
    split: str
    tokens_path: str
    pairs: PairArrays
    shards: List[int]
    shard_sizes: List[int]  # records
    pack_sizes: Optional[np.ndarray] = None  # packed: instances of each record, the pairs row after row


def make_encode_tasks(unit_index: int, split: str, data: SplitPairs, n_shards: int,
                      rotation: Optional[int] = None) -> List[EncodeTask]:
    rotation = unit_index if rotation is None else rotation
    tasks = []
    n_records = data.n_records
    for shards in shard_groups(n_records, n_shards):
        rows = np.concatenate([shard_rows(n_records, rotation, shard, n_shards) for shard in shards])
        sizes = [len(shard_rows(n_records, rotation, shard, n_shards)) for shard in shards]
        if data.pack_sizes is None:
            tasks.append(EncodeTask(unit_index, split, data.tokens_path, data.pairs.take(rows), shards, sizes))
        else:
            tasks.append(EncodeTask(unit_index, split, data.tokens_path,
                                    data.pairs.take(row_members(data.pack_sizes, rows)), shards, sizes,
                                    data.pack_sizes[rows]))
    return tasks


def record_slices(pack_sizes: Optional[np.ndarray], first: int, end: int, step: int):
    """Records ``first`` to ``end`` of a task in groups of ``step``: for each group, the pairs
    it takes (a slice) and the instances of each of its records (None: one each)."""
    if pack_sizes is None:
        for start in range(first, end, step):
            yield slice(start, min(start + step, end)), None
        return
    bounds = np.concatenate([[0], np.cumsum(pack_sizes)])
    for start in range(first, end, step):
        stop = min(start + step, end)
        yield slice(int(bounds[start]), int(bounds[stop])), pack_sizes[start:stop]


def encode_shards(task: EncodeTask, settings: RunSettings, work_dir: str) -> List[Segment]:
    """Mask and encode one split's records for some output shards, in the output format's
    segment encoding (framed records for TFRecord, column batches for the others), into one
    piece file."""
    config = settings.config
    vocab = _WorkerContext.get(settings).vocab
    writer, masking = get_format(config.output_format).make_writer(settings.shard_options), settings.masking
    path = piece_path(work_dir, task.unit_index, task.split, task.shards[0])
    tokens = load_array(task.tokens_path)
    segments = []
    first_row = 0
    with PieceWriter(path) as piece_file:
        for shard, size in zip(task.shards, task.shard_sizes):
            masking_rng = np.random.default_rng(random_streams(config.seed, task.unit_index, task.split, MASKING, shard))
            offset = piece_file.tell()
            compressor = segment_compressor(config)
            for rows, pack_sizes in record_slices(task.pack_sizes, first_row, first_row + size, CHUNK_ROWS):
                columns = instance_columns(tokens, task.pairs.take(rows), config, vocab, masking, masking_rng,
                                           pack_sizes)
                piece_file.write(compressor.compress(writer.encode_segment(columns)))
            piece_file.write(compressor.flush())
            first_row += size
            if size:
                segments.append(Segment(task.split, shard, path, offset, piece_file.tell() - offset, size,
                                        compressor.adler32, compressor.raw_length))
    return segments


def segment_compressor(config: GeneratorConfig) -> SegmentCompressor:
    """TFRecord segments are compressed as the shard is (gzip members, deflate blocks); the
    other formats compress in their own way when the shard is written."""
    # Shards shuffled at the end are compressed then, as one stream (see ``shard_shuffle``).
    appendable = get_format(config.output_format).appendable
    return SegmentCompressor(config.compression if appendable and not shuffles_shards(config) else None)


def record_bytes(pairs: SplitPairs, settings: RunSettings, segment_rows: int, sample: int = 2048) -> float:
    """Bytes a record takes in the shards (for TFRecord: framed, and compressed as the run
    compresses; for the other formats: in a shard of the sample, as the format writes it), from
    the first ``sample`` pairs encoded exactly as ``encode_shards`` does (the masks of a
    throwaway stream: they change a record's size by a byte or two at most).  Compressed, each
    unit's part of a TFRecord shard is a segment of its own (a gzip member, a flushed deflate
    block), so the sample is compressed in segments of ``segment_rows`` records: small segments
    compress less well."""
    n = min(sample, pairs.n_records)
    if not n:
        return 0.0
    config = settings.config
    fmt = get_format(config.output_format)
    writer = fmt.make_writer(settings.shard_options)
    rows, pack_sizes = next(record_slices(pairs.pack_sizes, 0, n, n))
    columns = instance_columns(load_array(pairs.tokens_path), pairs.pairs.take(rows), config, settings.vocab,
                               settings.masking, np.random.default_rng(0), pack_sizes)
    if not fmt.appendable:  # HDF5, Parquet, MDS: a sample shard, written (and compressed) as theirs are
        with tempfile.TemporaryDirectory() as directory:
            written = os.path.join(directory, "sample")
            writer.write_shard([columns], written, "sample")
            return os.path.getsize(written) / n
    size, step = 0, max(1, segment_rows)
    for start in range(0, n, step):
        compressor = SegmentCompressor(config.compression)  # as the shard is compressed, in the end
        part = {name: column[start:start + step] for name, column in columns.items()}
        size += len(compressor.compress(writer.encode_segment(part))) + len(compressor.flush())
    return size / n


def instance_columns(tokens: np.ndarray, pairs: PairArrays, config: GeneratorConfig, vocab,
                     masking: Optional[MaskingSpec], rng: np.random.Generator,
                     pack_sizes: Optional[np.ndarray] = None) -> dict:
    """Pairs -> instances -> masked, padded canonical columns: what every output format is
    written from (with ``pack_sizes``: instances masked one by one, then packed, that many a
    record)."""
    instances = gather_instances(tokens, pairs, config.max_seq_length, vocab.cls_id, vocab.sep_id,
                                 single_segment=config.mlm_only)
    columns = record_columns(instances, config, vocab, masking, rng)
    if pack_sizes is not None:
        columns = pack_columns(columns, instances.lengths, pack_sizes, config.max_seq_length,
                               config.sequences_per_pack,
                               packed_predictions(config.max_predictions_per_seq, config.sequences_per_pack))
    return columns


def record_columns(instances, config: GeneratorConfig, vocab, masking: Optional[MaskingSpec],
                   rng: np.random.Generator) -> dict:
    """The feature columns of a chunk of instances, by canonical feature name, masked as
    ``masking`` says (None: left to the loader)."""
    columns = {"input_ids": instances.input_ids, "input_mask": instances.input_mask}
    if not config.mlm_only:
        columns["segment_ids"] = instances.segment_ids
        columns["next_sentence_labels"] = instances.is_random_next.astype(np.int32).reshape(-1, 1)
    if masking is not None:
        masked = mask_tokens(instances.input_ids, instances.lengths, masking, vocab, rng)
        columns.update(input_ids=masked.input_ids, masked_lm_positions=masked.masked_lm_positions,
                       masked_lm_ids=masked.masked_lm_ids, masked_lm_weights=masked.masked_lm_weights)
    return columns


def shard_groups(n_records: int, n_shards: int, records_per_task: int = 8192) -> List[List[int]]:
    """Output shards grouped into encode tasks of about ``records_per_task`` records.  The
    grouping changes only how work is spread, never the bytes: each shard has its own stream."""
    n_tasks = max(1, min(n_shards, round(n_records / records_per_task)))
    return [list(range(n_shards))[task::n_tasks] for task in range(n_tasks)]
