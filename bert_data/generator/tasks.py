"""The stages, run as three kinds of task:

``tokenize_slice``: documents -> sentences -> token ids, for one slice of a unit.  Slices are
small, so every core stays busy even when a unit's documents are few and large.

``pair_unit``: token ids -> shuffled next-sentence pairs, for one unit (the pool that random
next sentences come from), from its tokenized slices.  Pairs are token ranges: small to send.

``encode_shards``: pairs -> masked instances -> encoded, framed examples, for one unit and some
of the output shards, into a piece file.

All are pure functions of the configuration and their input: every random stream comes from
(seed, unit, split, purpose[, shard]), so the bytes written do not depend on which worker runs a
task, when, or how many workers there are.  A piece file holds each of its shards' records
contiguously; the orchestrator appends pieces to the shards in unit order.  Nothing here
imports TensorFlow.
"""

from __future__ import annotations

import os
import random
import threading
import uuid
from dataclasses import dataclass, field
from itertools import chain
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import documents as docs_mod
from ..config import GeneratorConfig
from .documents import TRAIN, VAL, Skip, Source, Unit
from ..format.example_codec import encode_examples
from .assembly import Segment, SegmentCompressor
from ..format.layout import canonical_name
from .instances import PairArrays, TokenPool, create_pairs, create_windows, gather_instances
from ..masking import MaskingSpec, mask_tokens
from ..format.tfrecord import frame_records

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

    def __init__(self, config: GeneratorConfig):
        from .sentences import make_sentence_splitter
        from ..tokenization import WordPieceTokenizer, force_single_thread

        # One worker process, one tokenizer thread: parallelism comes from processes.
        force_single_thread()
        self.tokenizer = WordPieceTokenizer(config.vocab_file, config.do_lower_case)
        self.vocab = self.tokenizer.vocab
        self.splitter = make_sentence_splitter(config.single_sentence_per_line, config.spacy_model)
        self.token_dtype = np.uint16 if self.vocab.size <= np.iinfo(np.uint16).max + 1 else np.int32
        self.document_separator_id = self.vocab.token_to_id.get(config.document_separator_token)

    @classmethod
    def get(cls, config: GeneratorConfig) -> "_WorkerContext":
        # Per thread too: a Dask worker may run several tasks at once in threads.
        key = (threading.get_ident(), config.vocab_file, config.do_lower_case, config.single_sentence_per_line,
               config.spacy_model)
        if key not in cls._cached:
            cls._cached[key] = cls(config)
        return cls._cached[key]


# ---------------------------------------------------------------------------- tokenize_slice

def private_temporary(path: str) -> str:
    """A temporary name for ``path`` that no other run of the same task shares: a task that runs
    twice (a cluster worker thought lost) writes the same bytes, and the copies replace each
    other atomically with ``os.replace``."""
    return f"{path}.{os.getpid()}.{uuid.uuid4().hex}.tmp"


def save_array(array: np.ndarray, path: str) -> None:
    temporary = private_temporary(path)
    with open(temporary, "wb") as handle:
        np.save(handle, array, allow_pickle=False)
    os.replace(temporary, path)


def load_array(path: str) -> np.ndarray:
    # Memory-mapped: the pages are shared and reclaimable, whatever the document sizes.
    return np.load(path, mmap_mode="r", allow_pickle=False)


@dataclass
class TokenizedSlice:
    """The documents of one slice: token ids in a file of the work directory (tasks on any
    machine read it; the orchestrator never carries them), the rest here."""

    labels: List[str]
    tokens_path: str  # every token of every kept document, end to end (.npy)
    n_tokens: int
    sentence_lengths: np.ndarray  # tokens per sentence, all documents end to end
    sentences_per_doc: np.ndarray
    continues: List[bool] = field(default_factory=list)  # per document: a later part of the one before
    skips: List[Skip] = field(default_factory=list)
    n_bytes: int = 0  # characters of text read
    n_replaced: int = 0

    @property
    def n_docs_seen(self) -> int:
        return len(self.labels) - sum(self.continues) + len(self.skips)


def tokenize_slice(sources: Sequence[Source], config: GeneratorConfig, tokens_path: str) -> TokenizedSlice:
    context = _WorkerContext.get(config)
    skips: List[Skip] = []
    # Documents as read (the splitter may read ahead of the sentences it yields) ...
    seen: List[str] = []
    seen_continues: List[bool] = []
    counts = {"bytes": 0, "replaced": 0}
    # ... documents split into sentences, waiting to be tokenized together ...
    pending: List[Tuple[str, List[str], bool]] = []
    # ... and documents kept, with their token ids.
    labels: List[str] = []
    continues: List[bool] = []
    token_parts: List[np.ndarray] = []
    sentence_lengths: List[int] = []
    sentences_per_doc: List[int] = []

    def texts():
        for document in docs_mod.read_documents(sources, config.separator_line,
                                                config.multiple_docs_in_single_file, skips):
            counts["bytes"] += len(document.text)
            counts["replaced"] += document.n_replaced
            seen.append(document.label)
            seen_continues.append(document.continues)
            yield document.text

    def flush():
        batch = [sentence for _, sentences, _ in pending for sentence in sentences]
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
        for label, sentences, is_continuation in pending:
            doc_lengths = lengths[first : first + len(sentences)]
            # Sentences with no token (only characters the normaliser drops) are dropped, and a
            # document left with no sentence is skipped, as the reference does.
            kept = doc_lengths[doc_lengths > 0]
            if not len(kept):
                skips.append(Skip(docs_mod.NO_SENTENCE, label))
            else:
                labels.append(label)
                continues.append(is_continuation)
                sentence_lengths.extend(kept.tolist())
                sentences_per_doc.append(len(kept))
                begin = int(ends[first - 1]) if first else 0
                token_parts.append(tokens[begin : int(ends[first + len(sentences) - 1])])
            first += len(sentences)
        pending.clear()

    try:
        n_pending = chars_pending = 0
        for index, sentences in enumerate(context.splitter.split(texts())):
            pending.append((seen[index], sentences, seen_continues[index]))
            n_pending += len(sentences)
            chars_pending += sum(map(len, sentences))
            if n_pending >= TOKENIZE_BATCH or chars_pending >= TOKENIZE_CHARS:
                flush()
                n_pending = chars_pending = 0
        flush()
    except Exception as error:  # name the document: the first thing a user needs to know
        where = seen[-1] if seen else (sources[0].label if sources else "?")
        raise UnitError(f"{where}: {type(error).__name__}: {error}") from error

    tokens = np.concatenate(token_parts) if token_parts else np.zeros(0, dtype=context.token_dtype)
    save_array(tokens, tokens_path)
    return TokenizedSlice(
        labels=labels,
        tokens_path=tokens_path,
        n_tokens=len(tokens),
        sentence_lengths=np.asarray(sentence_lengths, dtype=np.int32),
        sentences_per_doc=np.asarray(sentences_per_doc, dtype=np.int32),
        continues=continues,
        skips=skips,
        n_bytes=counts["bytes"],
        n_replaced=counts["replaced"],
    )


# ---------------------------------------------------------------------------- pair_unit

def random_streams(seed: int, unit_index: int, split: str, *purpose: int) -> np.random.SeedSequence:
    """Every random choice of a unit comes from (seed, unit, split, purpose), never from who runs it."""
    return np.random.SeedSequence([seed, unit_index, SPLIT_CODES[split], *purpose])


PAIRING, SHUFFLING, MASKING = 0, 1, 2


def python_random(sequence: np.random.SeedSequence) -> random.Random:
    return random.Random(int.from_bytes(sequence.generate_state(4, np.uint32).tobytes(), "little"))


@dataclass
class SplitPairs:
    """One split of one unit, paired and shuffled: what the encode tasks need."""

    tokens_path: str  # the split's token pool (.npy in the work directory)
    pairs: PairArrays  # token ranges into the pool, in output order


@dataclass
class UnitPairs:
    unit_index: int
    splits: Dict[str, SplitPairs] = field(default_factory=dict)
    n_docs: Dict[str, int] = field(default_factory=lambda: {TRAIN: 0, VAL: 0})
    n_instances: Dict[str, int] = field(default_factory=lambda: {TRAIN: 0, VAL: 0})
    n_sentences: int = 0
    n_tokens: int = 0
    n_bytes: int = 0
    n_replaced: int = 0
    skips: List[Skip] = field(default_factory=list)


def split_pools(unit: Unit, slices: Sequence[TokenizedSlice], config: GeneratorConfig,
                pool_paths: Dict[str, str], separator_id: Optional[int] = None) -> Dict[str, TokenPool]:
    """The unit's documents as one token pool per split (train, and validation if any), each
    written to its file in ``pool_paths`` and memory-mapped from there.  With ``separator_id``
    (MLM-only windows that cross documents) that token stands between documents."""
    chosen: Dict[str, List[Tuple[int, int, int]]] = {TRAIN: [], VAL: []}  # (slice, first, end token)
    bounds: Dict[str, List[List[int]]] = {TRAIN: [], VAL: []}
    sizes = {TRAIN: 0, VAL: 0}
    last_label = {TRAIN: None, VAL: None}
    for number, piece in enumerate(slices):
        sentence_ends = np.cumsum(piece.sentence_lengths)
        first_sentence = 0
        for label, n_sentences, continues in zip(piece.labels, piece.sentences_per_doc.tolist(),
                                                 piece.continues or [False] * len(piece.labels)):
            if unit.split_mode == docs_mod.SPLIT_BY_HASH:
                split = VAL if docs_mod.is_validation_document(label, config.seed, config.val_fraction) else TRAIN
            else:
                split = unit.split_mode
            start = int(sentence_ends[first_sentence - 1]) if first_sentence else 0
            ends = sentence_ends[first_sentence : first_sentence + n_sentences]
            joined = continues and last_label[split] == label  # a later part of a large document
            if separator_id is not None and bounds[split] and not joined:
                chosen[split].append((-1, 0, 1))  # the separator, between two documents
                sizes[split] += 1
            offset = sizes[split] - start  # where this document starts in its split's pool
            if joined:
                bounds[split][-1] += (ends + offset).tolist()
            else:
                bounds[split].append([start + offset] + (ends + offset).tolist())
            last_label[split] = label
            chosen[split].append((number, start, int(ends[-1])))
            sizes[split] += int(ends[-1]) - start
            first_sentence += n_sentences

    pools = {}
    sources = [load_array(piece.tokens_path) for piece in slices]
    dtype = sources[0].dtype if sources else np.int32
    for split in (TRAIN, VAL):
        if not bounds[split]:
            pools[split] = TokenPool(np.zeros(0, dtype), [])
            continue
        temporary = private_temporary(pool_paths[split])
        pool = np.lib.format.open_memmap(temporary, mode="w+", dtype=dtype, shape=(sizes[split],))
        position = 0
        for number, start, end in chosen[split]:
            pool[position : position + end - start] = sources[number][start:end] if number >= 0 else separator_id
            position += end - start
        pool.flush()
        del pool
        os.replace(temporary, pool_paths[split])
        pools[split] = TokenPool(load_array(pool_paths[split]), bounds[split])
    return pools


def pool_path(work_dir: str, unit_index: int, split: str) -> str:
    return os.path.join(work_dir, f"unit-{unit_index + 1:07d}-{split}.pool.npy")  # numbered from 1


def pair_unit(unit: Unit, slices: Sequence[TokenizedSlice], config: GeneratorConfig, work_dir: str) -> UnitPairs:
    result = UnitPairs(unit.index)
    # A blank part of a large document does not make the document blank, and a document read
    # in parts is skipped once, not once a part.
    in_parts = {source.label for source in unit.sources if source.continues}
    kept = {label for piece in slices for label in piece.labels if label in in_parts}
    seen_skips = set()
    for piece in slices:
        for skip in piece.skips:
            if skip.label in in_parts:
                if (skip.reason, skip.label) in seen_skips or (skip.reason != docs_mod.BINARY and skip.label in kept):
                    continue
                seen_skips.add((skip.reason, skip.label))
            result.skips.append(skip)
        result.n_bytes += piece.n_bytes
        result.n_replaced += piece.n_replaced
        result.n_sentences += len(piece.sentence_lengths)
        result.n_tokens += piece.n_tokens
    paths = {split: pool_path(work_dir, unit.index, split) for split in (TRAIN, VAL)}
    cross_document = config.mlm_only and config.allow_cross_document_examples
    separator = _WorkerContext.get(config).document_separator_id if cross_document else None
    pools = split_pools(unit, slices, config, paths, separator)
    for piece in slices:  # the pools hold these tokens now
        if os.path.exists(piece.tokens_path):
            os.remove(piece.tokens_path)
    for split, pool in pools.items():
        result.n_docs[split] = len(pool)
        if not len(pool):
            continue
        # Validation data gets one mask per instance: evaluation needs no duplicates.
        passes = config.dupe_factor if split == TRAIN else 1
        rng = python_random(random_streams(config.seed, unit.index, split, PAIRING))
        if config.mlm_only:
            pairs = create_windows(pool, passes, config.max_num_tokens, config.window_overlap, config.short_seq_prob,
                                   config.short_min, cross_document, rng)
        else:
            pairs = create_pairs(pool, passes, config.max_num_tokens, config.short_seq_prob, config.short_min, rng)
        # Instances are shuffled within a unit (the reference shuffles all of them at the end).
        order = np.random.default_rng(random_streams(config.seed, unit.index, split, SHUFFLING)).permutation(len(pairs))
        result.splits[split] = SplitPairs(paths[split], pairs.take(order))
        result.n_instances[split] = len(pairs)
    return result


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
    shard_sizes: List[int]


def make_encode_tasks(unit_index: int, split: str, data: SplitPairs, n_shards: int,
                      rotation: Optional[int] = None) -> List[EncodeTask]:
    rotation = unit_index if rotation is None else rotation
    tasks = []
    for shards in shard_groups(len(data.pairs), n_shards):
        rows = [shard_rows(len(data.pairs), rotation, shard, n_shards) for shard in shards]
        tasks.append(EncodeTask(unit_index, split, data.tokens_path, data.pairs.take(np.concatenate(rows)), shards,
                                [len(r) for r in rows]))
    return tasks


def encode_shards(task: EncodeTask, config: GeneratorConfig, work_dir: str) -> List[Segment]:
    """Mask, encode and frame one split's records for some output shards, into one piece file."""
    context = _WorkerContext.get(config)
    vocab = context.vocab
    specs = config.feature_specs()
    masking = None if config.disable_masking else MaskingSpec.from_config(config, vocab)
    path = os.path.join(work_dir, f"unit-{task.unit_index + 1:07d}-{task.split}-{task.shards[0]:05d}.piece")
    tokens = load_array(task.tokens_path)
    segments = []
    first_row = 0
    temporary = private_temporary(path)
    with open(temporary, "wb") as piece_file:
        for shard, size in zip(task.shards, task.shard_sizes):
            masking_rng = np.random.default_rng(random_streams(config.seed, task.unit_index, task.split, MASKING, shard))
            offset = piece_file.tell()
            compressor = SegmentCompressor(config.compression)
            for start in range(first_row, first_row + size, CHUNK_ROWS):
                rows = slice(start, min(start + CHUNK_ROWS, first_row + size))
                instances = gather_instances(tokens, task.pairs.take(rows), config.max_seq_length,
                                             vocab.cls_id, vocab.sep_id, single_segment=config.mlm_only)
                columns = record_columns(instances, config, vocab, masking, masking_rng)
                # The layout names the features (v2 names or not); the columns are its canonical ones.
                records = encode_examples({spec.name: columns[canonical_name(spec.name)] for spec in specs}, specs)
                piece_file.write(compressor.compress(frame_records(records)))
            piece_file.write(compressor.flush())
            first_row += size
            if size:
                segments.append(Segment(task.split, shard, path, offset, piece_file.tell() - offset, size,
                                        compressor.adler32, compressor.raw_length))
    os.replace(temporary, path)
    return segments


def record_columns(instances, config: GeneratorConfig, vocab, masking: Optional[MaskingSpec],
                   rng: np.random.Generator) -> dict:
    """The feature columns of a batch of instances, by canonical feature name, masked as
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
