"""The stages, run as two kinds of task:

``tokenize_slice``: documents -> sentences -> token ids, for one slice of a unit.  Slices are
small, so every core stays busy even when a unit's documents are few and large.

``build_unit``: token ids -> pairs -> masked instances -> encoded examples -> a piece file, for
one unit, from its tokenized slices.

Both are pure functions of the configuration and their input: the random streams come from
(seed, unit index, split), so the bytes written do not depend on which worker runs a task,
when, or how many workers there are.  A unit's piece file holds, for each split and output
shard, that shard's records contiguously; the orchestrator appends pieces to the shards in unit
order.  Nothing here imports TensorFlow.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from itertools import chain
from typing import Dict, List, Sequence, Tuple

import numpy as np

from . import documents as docs_mod
from .config import GeneratorConfig
from .documents import TRAIN, VAL, Skip, Source, Unit
from .example_codec import encode_examples
from .features import feature_specs
from .instances import TokenPool, create_pairs, gather_instances
from .masking import mask_instances
from .tfrecord import frame_records

# Rows masked and encoded together: large enough for numpy to pay, small enough to keep a
# worker's temporary arrays to a few MB.
CHUNK_ROWS = 2048
# Sentences tokenized in one call.
TOKENIZE_BATCH = 4096
SPLIT_CODES = {TRAIN: 0, VAL: 1}


class UnitError(RuntimeError):
    """A failure inside a task, naming the document being processed."""


# ---------------------------------------------------------------------------- worker context

class _WorkerContext:
    """Per-process objects that are costly to build (vocabulary, tokenizer, sentence splitter)."""

    _cached: Dict[tuple, "_WorkerContext"] = {}

    def __init__(self, config: GeneratorConfig):
        from .sentences import make_sentence_splitter
        from .tokenization import WordPieceTokenizer, force_single_thread

        # One worker process, one tokenizer thread: parallelism comes from processes.
        force_single_thread()
        self.tokenizer = WordPieceTokenizer(config.vocab_file, config.do_lower_case)
        self.vocab = self.tokenizer.vocab
        self.splitter = make_sentence_splitter(config.single_sentence_per_line, config.spacy_model)
        self.token_dtype = np.uint16 if self.vocab.size <= np.iinfo(np.uint16).max + 1 else np.int32

    @classmethod
    def get(cls, config: GeneratorConfig) -> "_WorkerContext":
        key = (config.vocab_file, config.do_lower_case, config.single_sentence_per_line, config.spacy_model)
        if key not in cls._cached:
            cls._cached[key] = cls(config)
        return cls._cached[key]


# ---------------------------------------------------------------------------- tokenize_slice

@dataclass
class TokenizedSlice:
    """The documents of one slice as token ids: compact, cheap to send between processes."""

    labels: List[str]
    tokens: np.ndarray  # every token of every kept document, end to end
    sentence_lengths: np.ndarray  # tokens per sentence, all documents end to end
    sentences_per_doc: np.ndarray
    skips: List[Skip] = field(default_factory=list)
    n_bytes: int = 0  # characters of text read
    n_replaced: int = 0

    @property
    def n_docs_seen(self) -> int:
        return len(self.labels) + len(self.skips)


def tokenize_slice(sources: Sequence[Source], config: GeneratorConfig) -> TokenizedSlice:
    context = _WorkerContext.get(config)
    skips: List[Skip] = []
    labels: List[str] = []
    seen: List[str] = []
    counts = {"bytes": 0, "replaced": 0}
    token_parts: List[np.ndarray] = []
    sentence_lengths: List[int] = []
    sentences_per_doc: List[int] = []

    def texts():
        for document in docs_mod.read_documents(sources, config.separator_line,
                                                config.multiple_docs_in_single_file, skips):
            counts["bytes"] += len(document.text)
            counts["replaced"] += document.n_replaced
            seen.append(document.label)
            yield document.text

    pending: List[Tuple[str, List[str]]] = []

    def flush():
        batch = [sentence for _, sentences in pending for sentence in sentences]
        ids = context.tokenizer.encode_ids(batch) if batch else []
        position = 0
        for label, sentences in pending:
            # Sentences with no token (only characters the normaliser drops) are dropped, and a
            # document left with no sentence is skipped, as the reference does.
            kept = [sentence for sentence in ids[position : position + len(sentences)] if sentence]
            position += len(sentences)
            if not kept:
                skips.append(Skip(docs_mod.NO_SENTENCE, label))
                continue
            labels.append(label)
            lengths = [len(sentence) for sentence in kept]
            sentence_lengths.extend(lengths)
            sentences_per_doc.append(len(kept))
            token_parts.append(np.fromiter(chain.from_iterable(kept), dtype=context.token_dtype, count=sum(lengths)))
        pending.clear()

    try:
        n_pending = 0
        for index, sentences in enumerate(context.splitter.split(texts())):
            pending.append((seen[index], sentences))
            n_pending += len(sentences)
            if n_pending >= TOKENIZE_BATCH:
                flush()
                n_pending = 0
        flush()
    except Exception as error:  # name the document: the first thing a user needs to know
        where = seen[-1] if seen else (sources[0].label if sources else "?")
        raise UnitError(f"{where}: {type(error).__name__}: {error}") from error

    return TokenizedSlice(
        labels=labels,
        tokens=np.concatenate(token_parts) if token_parts else np.zeros(0, dtype=context.token_dtype),
        sentence_lengths=np.asarray(sentence_lengths, dtype=np.int32),
        sentences_per_doc=np.asarray(sentences_per_doc, dtype=np.int32),
        skips=skips,
        n_bytes=counts["bytes"],
        n_replaced=counts["replaced"],
    )


# ---------------------------------------------------------------------------- build_unit

@dataclass
class Segment:
    """Where one output shard's records from one unit lie in the unit's piece file."""

    split: str
    shard: int
    offset: int
    length: int
    n_records: int


@dataclass
class UnitResult:
    unit_index: int
    piece_path: str
    segments: List[Segment] = field(default_factory=list)
    n_docs: Dict[str, int] = field(default_factory=lambda: {TRAIN: 0, VAL: 0})
    n_instances: Dict[str, int] = field(default_factory=lambda: {TRAIN: 0, VAL: 0})
    n_sentences: int = 0
    n_tokens: int = 0
    n_bytes: int = 0
    n_replaced: int = 0
    skips: List[Skip] = field(default_factory=list)


def unit_random_streams(seed: int, unit_index: int, split: str) -> Tuple[random.Random, np.random.Generator]:
    """Independent streams for pairing (Python's, fast per draw) and masking (numpy's, fast per batch)."""
    pairing_seq, masking_seq = np.random.SeedSequence([seed, unit_index, SPLIT_CODES[split]]).spawn(2)
    pairing_seed = int.from_bytes(pairing_seq.generate_state(4, np.uint32).tobytes(), "little")
    return random.Random(pairing_seed), np.random.Generator(np.random.PCG64(masking_seq))


def split_pools(unit: Unit, slices: Sequence[TokenizedSlice], config: GeneratorConfig) -> Dict[str, TokenPool]:
    """The unit's documents as one token pool per split (train, and validation if any)."""
    parts: Dict[str, List[np.ndarray]] = {TRAIN: [], VAL: []}
    bounds: Dict[str, List[List[int]]] = {TRAIN: [], VAL: []}
    sizes = {TRAIN: 0, VAL: 0}
    for piece in slices:
        sentence_ends = np.cumsum(piece.sentence_lengths)
        first_sentence = 0
        for label, n_sentences in zip(piece.labels, piece.sentences_per_doc.tolist()):
            if unit.split_mode == docs_mod.SPLIT_BY_HASH:
                split = VAL if docs_mod.is_validation_document(label, config.seed, config.val_fraction) else TRAIN
            else:
                split = unit.split_mode
            start = int(sentence_ends[first_sentence - 1]) if first_sentence else 0
            ends = sentence_ends[first_sentence : first_sentence + n_sentences]
            offset = sizes[split] - start
            bounds[split].append([start + offset] + (ends + offset).tolist())
            parts[split].append(piece.tokens[start : int(ends[-1])])
            sizes[split] += int(ends[-1]) - start
            first_sentence += n_sentences
    dtype = slices[0].tokens.dtype if slices else np.int32
    return {
        split: TokenPool(np.concatenate(parts[split]) if parts[split] else np.zeros(0, dtype), bounds[split])
        for split in (TRAIN, VAL)
    }


def build_unit(unit: Unit, slices: Sequence[TokenizedSlice], config: GeneratorConfig, work_dir: str) -> UnitResult:
    context = _WorkerContext.get(config)
    vocab = context.vocab
    result = UnitResult(unit.index, os.path.join(work_dir, f"unit-{unit.index:07d}.piece"))
    for piece in slices:
        result.skips += piece.skips
        result.n_bytes += piece.n_bytes
        result.n_replaced += piece.n_replaced
        result.n_sentences += len(piece.sentence_lengths)
        result.n_tokens += len(piece.tokens)
    pools = split_pools(unit, slices, config)
    specs = feature_specs(config.max_seq_length, config.max_predictions_per_seq)
    shards = config.num_output_files

    with open(result.piece_path + ".tmp", "wb") as piece_file:
        for split in (TRAIN, VAL):
            pool = pools[split]
            result.n_docs[split] = len(pool)
            if not len(pool):
                continue
            pairing_rng, masking_rng = unit_random_streams(config.seed, unit.index, split)
            # Validation data gets one mask per instance: evaluation needs no duplicates.
            passes = config.dupe_factor if split == TRAIN else 1
            pairs = create_pairs(pool, passes, config.max_num_tokens, config.short_seq_prob,
                                 config.min_short_seq_length, pairing_rng)
            result.n_instances[split] = len(pairs)
            order = masking_rng.permutation(len(pairs))  # instances are shuffled within a unit
            for shard in range(shards):
                # Record j of the unit goes to shard (unit + j) mod N: balanced shards, and the
                # rotation spreads each unit's remainder over different shards.
                rows = order[(shard - unit.index) % shards :: shards]
                offset = piece_file.tell()
                for start in range(0, len(rows), CHUNK_ROWS):
                    instances = gather_instances(pool.tokens, pairs.take(rows[start : start + CHUNK_ROWS]),
                                                 config.max_seq_length, vocab.cls_id, vocab.sep_id)
                    batch = mask_instances(
                        instances, masking_rng, config.masked_lm_prob, config.max_predictions_per_seq,
                        vocab.mask_id, vocab.ordinary_ids, vocab.is_continuation, config.mask_whole_word,
                    )
                    piece_file.write(frame_records(encode_examples(batch.columns(), specs)))
                if len(rows):
                    result.segments.append(Segment(split, shard, offset, piece_file.tell() - offset, len(rows)))
    os.replace(result.piece_path + ".tmp", result.piece_path)
    return result
