"""One unit of work through every stage: documents -> sentences -> token ids -> pairs ->
masked instances -> encoded examples -> shard pieces.

``process_unit`` is what a worker runs (a local process, or a Dask worker).  It is a pure
function of the configuration and the unit: its random streams come from (seed, unit index,
split), so the bytes it writes do not depend on which worker runs it, when, or how many run.
It writes one *piece* file per unit holding, for each split and output shard, that shard's
records contiguously; the orchestrator appends pieces to the shards in unit order.

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from . import documents as docs_mod
from .config import GeneratorConfig
from .documents import TRAIN, VAL, Skip, Unit
from .example_codec import encode_examples
from .features import feature_specs
from .instances import create_pairs, to_arrays
from .masking import mask_instances
from .tfrecord import frame_records

# Rows masked and encoded together: large enough for numpy to pay, small enough to keep a
# worker's temporary arrays to a few MB.
CHUNK_ROWS = 2048
# Sentences tokenized in one call.
TOKENIZE_BATCH = 4096
SPLIT_CODES = {TRAIN: 0, VAL: 1}


class UnitError(RuntimeError):
    """A failure inside a unit, naming the document being processed."""


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

    @classmethod
    def get(cls, config: GeneratorConfig) -> "_WorkerContext":
        key = (config.vocab_file, config.do_lower_case, config.single_sentence_per_line, config.spacy_model)
        if key not in cls._cached:
            cls._cached[key] = cls(config)
        return cls._cached[key]


def unit_random_streams(seed: int, unit_index: int, split: str) -> Tuple[random.Random, np.random.Generator]:
    """Independent streams for pairing (Python's, fast per draw) and masking (numpy's, fast per batch)."""
    pairing_seq, masking_seq = np.random.SeedSequence([seed, unit_index, SPLIT_CODES[split]]).spawn(2)
    pairing_seed = int.from_bytes(pairing_seq.generate_state(4, np.uint32).tobytes(), "little")
    return random.Random(pairing_seed), np.random.Generator(np.random.PCG64(masking_seq))


def tokenized_documents(unit: Unit, config: GeneratorConfig, context: _WorkerContext, result: UnitResult):
    """The unit's documents as (label, [[ids of sentence] ...]); empty ones recorded as skips."""
    documents = docs_mod.read_unit_documents(
        unit, config.separator_line, config.multiple_docs_in_single_file, result.skips
    )
    pending: List[Tuple[str, List[str]]] = []
    pending_sentences = 0

    def flush():
        texts = [sentence for _, sentences in pending for sentence in sentences]
        ids = context.tokenizer.encode_ids(texts) if texts else []
        position = 0
        for label, sentences in pending:
            doc_ids = [sentence for sentence in ids[position : position + len(sentences)] if sentence]
            position += len(sentences)
            if doc_ids:
                result.n_sentences += len(doc_ids)
                result.n_tokens += sum(map(len, doc_ids))
                yield label, doc_ids
            else:
                result.skips.append(Skip(docs_mod.NO_SENTENCE, label))
        pending.clear()

    def counted(stream):
        for document in stream:
            result.n_bytes += len(document.text)
            result.n_replaced += document.n_replaced
            labels.append(document.label)
            yield document.text

    labels: List[str] = []
    for index, sentences in enumerate(context.splitter.split(counted(documents))):
        pending.append((labels[index], sentences))
        pending_sentences += len(sentences)
        if pending_sentences >= TOKENIZE_BATCH:
            yield from flush()
            pending_sentences = 0
    yield from flush()


def process_unit(unit: Unit, config: GeneratorConfig, work_dir: str) -> UnitResult:
    context = _WorkerContext.get(config)
    vocab = context.vocab
    result = UnitResult(unit.index, os.path.join(work_dir, f"unit-{unit.index:07d}.piece"))

    pools: Dict[str, list] = {TRAIN: [], VAL: []}
    label = None
    try:
        for label, doc_ids in tokenized_documents(unit, config, context, result):
            if unit.split_mode == docs_mod.SPLIT_BY_HASH:
                split = VAL if docs_mod.is_validation_document(label, config.seed, config.val_fraction) else TRAIN
            else:
                split = unit.split_mode
            pools[split].append(doc_ids)
    except Exception as error:  # name the document: the first thing a user needs to know
        where = label or (unit.sources[0].label if unit.sources else f"unit {unit.index}")
        raise UnitError(f"while reading documents near {where}: {type(error).__name__}: {error}") from error

    specs = feature_specs(config.max_seq_length, config.max_predictions_per_seq)
    with open(result.piece_path + ".tmp", "wb") as piece:
        for split in (TRAIN, VAL):
            pool = pools[split]
            result.n_docs[split] = len(pool)
            if not pool:
                continue
            pairing_rng, masking_rng = unit_random_streams(config.seed, unit.index, split)
            # Validation data gets one mask per instance: evaluation needs no duplicates.
            passes = config.dupe_factor if split == TRAIN else 1
            pairs = create_pairs(
                pool, passes, config.max_num_tokens, config.short_seq_prob, config.min_short_seq_length,
                vocab.cls_id, vocab.sep_id, pairing_rng,
            )
            instances = to_arrays(pairs, config.max_seq_length)
            del pairs
            result.n_instances[split] = len(instances)
            order = masking_rng.permutation(len(instances))  # instances are shuffled within a unit
            for shard in range(config.num_output_files):
                # Record j of the unit goes to shard (unit + j) mod N: balanced shards, and the
                # rotation spreads each unit's remainder over different shards.
                first = (shard - unit.index) % config.num_output_files
                rows = order[first :: config.num_output_files]
                offset = piece.tell()
                for start in range(0, len(rows), CHUNK_ROWS):
                    batch = mask_instances(
                        instances.take(rows[start : start + CHUNK_ROWS]), masking_rng,
                        config.masked_lm_prob, config.max_predictions_per_seq, vocab.mask_id,
                        vocab.ordinary_ids, vocab.is_continuation, config.mask_whole_word,
                    )
                    piece.write(frame_records(encode_examples(batch.columns(), specs)))
                if len(rows):
                    result.segments.append(Segment(split, shard, offset, piece.tell() - offset, len(rows)))
    os.replace(result.piece_path + ".tmp", result.piece_path)
    return result
