"""Everything decided and checked before any work: the units of work, the vocabulary, the
sentence model, the documents that are missing, and the run's fingerprint (what a ``--resume``
must match).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ..config import ConfigError
from ..notices import warn
import numpy as np

from ..pipeline.documents import planner
from ..pipeline.documents.listing import list_documents
from ..pipeline.decontamination import evaluation_digests
from ..pipeline.documents.reading import read_documents
from ..format.dataset_layout import SPLIT_OF_CODE, TRAIN, TRAIN_CODE, VAL, VAL_CODE
from ..pipeline.documents.types import CorpusPlan, InputError, InputSpec, ReadingSpec, Slice
from ..pipeline.mixing import CorpusOrder, region_size
from .run_record import input_stamps, run_record
from .source_plan import SourcePlan, document_origins
from .specs import RunSpec
from .units import SliceTable, UnitWork


class SplitDocuments:
    """One split's documents: their corpus positions (``split[places]``: those at ``places`` of
    the split, int64; ascending, but in a list ``--sources`` made: a pass per copy), without an
    array of them all where the corpus says it in less.  A corpus of short documents has
    hundreds of millions (C4: 365 M, whose positions would take 2.9 GB of the parent's memory at
    8 bytes each): a split that holds every document is a count; one that holds most of them
    (training, beside a validation fraction) is the others' positions, its ``k``-th document
    found by rank; only a split that holds at most half of the documents (or a list ``--sources``
    made) is listed."""

    def __init__(self, n: int, listed: Optional[np.ndarray] = None, others: Optional[np.ndarray] = None):
        self.n, self.listed = int(n), listed
        # The ``j``-th other's position less ``j``: the members before it.  The ``k``-th member
        # comes after every other with at most ``k`` members before it, so that many others
        # lie before it, and it is at ``k`` plus their count.
        self.members_before_others = None if others is None else others - np.arange(len(others), dtype=np.int64)

    @classmethod
    def of(cls, codes: np.ndarray, code: int) -> "SplitDocuments":
        """The documents whose ``codes`` entry (``CorpusPlan.doc_splits``) is ``code``."""
        members = codes == code
        n = int(np.count_nonzero(members))
        if n == len(codes):
            return cls(n)
        if 2 * n <= len(codes):
            return cls(n, listed=np.flatnonzero(members))
        return cls(n, others=np.flatnonzero(~members))

    @classmethod
    def listing(cls, positions: np.ndarray) -> "SplitDocuments":
        return cls(len(positions), listed=np.asarray(positions, dtype=np.int64))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, places) -> np.ndarray:
        places = np.asarray(places, dtype=np.int64)
        if self.listed is not None:
            return self.listed[places]
        if places.size and (int(places.min()) < 0 or int(places.max()) >= self.n):
            raise IndexError(f"a place outside a split of {self.n:,} documents")
        if self.members_before_others is None:
            return places.copy()
        return places + np.searchsorted(self.members_before_others, places, side="right")


@dataclass
class PlannedUnit:
    """A unit as the scheduler sees it: its split, its place in the split's order, how many
    listed documents it holds, and the range of slices its documents lie in (it can be paired
    once those are tokenized, and they can go once no later unit needs them)."""

    index: int
    split: str
    local_index: int
    n_docs: int
    first_slice: int
    last_slice: int


@dataclass
class Plan:
    corpus: CorpusPlan
    units: List[PlannedUnit]
    orders: Dict[str, CorpusOrder]  # per split: the seeded order its documents are taken in
    split_docs: Dict[str, SplitDocuments]  # per split: the corpus positions of its documents
    split_num: int
    n_listed: Dict[str, int]  # per split: documents listed (missing files included)
    missing: list = field(default_factory=list)  # (MetadataEntry, reason, split), with --skip_missing
    excluded_as_validation: int = 0  # documents of --metadata_files also in --val_metadata_files
    vocab: object = None
    fingerprint: str = ""
    record: dict = field(default_factory=dict)  # what the run was started with (run_record): explains the fingerprint
    # --dedup / --decontaminate: the corpus positions removed (ascending) and the report, set by
    # ``screening.screen_corpus`` once every slice is tokenized (None until then, or unscreened).
    removed: Optional[np.ndarray] = None
    removal_report: object = None
    input_stamps: list = field(default_factory=list)  # each listed file's size and time (run_record.input_stamps)
    sources: Optional[SourcePlan] = None  # --sources: where each source's documents are, their copies
    provenance: bool = False  # units carry each document's source and place (--record_provenance)

    @property
    def units_pending(self) -> bool:
        """Budgets and shares wait for every document's tokens: the units are dealt then."""
        return self.sources is not None and self.sources.copies is None

    @property
    def slices(self) -> List[Slice]:
        return self.corpus.slices

    def unit_work(self, unit: PlannedUnit) -> UnitWork:
        places = self.orders[unit.split].unit_documents(unit.local_index, self.split_num)
        docs = self.split_docs[unit.split][places]
        if self.removed is not None and len(self.removed):  # left out as documents without text are
            docs = docs[~np.isin(docs, self.removed)]
        origins = None
        if self.sources is not None or self.provenance:
            starts = self.sources.starts if self.sources is not None else np.asarray([0, self.corpus.n_docs])
            origins = document_origins(starts, docs)
        return UnitWork(unit.index, unit.split, docs, origins)


def make_plan(spec: RunSpec, skip_missing: bool = False, check_case: bool = True,
              allow_case_mismatch: bool = False) -> Plan:
    """Everything about the inputs that can be checked before any work (the options and the
    vocabulary were, by :func:`~.resolve.resolve`); then the corpus cut into slices and its
    documents dealt into units.

    A vocabulary whose case disagrees with ``do_lower_case`` stops the run (ConfigError) unless
    ``allow_case_mismatch``, which turns it into a warning."""
    from ..tokenizers import WORDPIECE

    inputs, mixing, vocab = spec.inputs, spec.mixing, spec.vocab
    outside = spec.control.allow_paths_outside_prefix
    source_inputs = [source.inputs for source in spec.sources.sources] if spec.sources else [inputs]
    groups, listed_entries, missing, excluded = [], [], [], []
    for source_input in source_inputs:
        entries, val_entries, source_missing, source_excluded, split_code = list_inputs(
            source_input, skip_missing, outside, spec.control.read_path_lists_as_text)
        groups.append((entries, split_code, val_entries, source_input.reading.text_field))
        listed_entries += entries + val_entries
        missing += source_missing
        excluded += source_excluded
    for entry, reason, _ in missing:
        warn(f"{entry.metadata_file}:{entry.line_number}: skipped: {reason}: {entry.path}")

    reading = inputs.reading
    if spec.sources is None:
        entries, split_code, val_entries, _ = groups[0]
        corpus = planner.plan_corpus(entries, split_code, val_entries,
                                     multiple_docs_in_single_file=reading.multiple_docs_in_single_file,
                                     separator_line=reading.separator_line, text_field=reading.text_field,
                                     encoding=reading.encoding)
        starts = [0, corpus.n_docs]
    else:
        corpus, starts = planner.plan_corpus_groups(groups, reading.multiple_docs_in_single_file,
                                                    reading.separator_line, reading.encoding)
    if not corpus.n_docs or not corpus.n_bytes:
        listed = [entry.label for entry in listed_entries]
        named = [name for source_input in source_inputs for name in source_input.named_files]
        raise InputError(f"no document with any text in {', '.join(named)}: "
                         f"{some_of(listed)} {'is' if len(listed) == 1 else 'are'} empty or white space only; "
                         "name files that hold text")
    if check_case and spec.tokenizer.kind == WORDPIECE:  # the check measures WordPiece's [UNK] rate
        check_vocabulary_case(spec.tokenizer.do_lower_case, inputs.reading, vocab, corpus.slices, allow_case_mismatch)
    split_docs = {split: SplitDocuments.of(corpus.doc_splits, code) for code, split in SPLIT_OF_CODE.items()}
    for index, source_input in enumerate(source_inputs):  # each source's split (without sources: the corpus)
        codes = corpus.doc_splits[starts[index]:starts[index + 1]]
        warn_about_split_sizes(source_input, int(np.sum(codes == TRAIN_CODE)), int(np.sum(codes == VAL_CODE)))
    n_listed = {split: len(docs) + sum(1 for *_, s in missing if s == split) for split, docs in split_docs.items()}
    excluded_docs = sum(corpus.docs_per_path.get(path, 0) for path in {entry.path for entry in excluded})
    decontamination = spec.screening.decontamination if spec.screening is not None else None
    stamps = input_stamps(listed_entries)
    record = run_record(spec.options, vocab, listed_entries, stamps,
                        evaluation_digests(decontamination.paths) if decontamination is not None else None)
    sources = SourcePlan(spec.sources, np.asarray(starts, dtype=np.int64)) if spec.sources is not None else None
    plan = Plan(corpus, [], {}, split_docs, mixing.split_num, n_listed, missing, excluded_docs, vocab,
                run_fingerprint(record), record, input_stamps=stamps, sources=sources, provenance=spec.provenance)
    if sources is None or not sources.spec.needs_token_counts:
        deal_units(plan, spec, None)  # else once every document's tokens are counted (runner)
    return plan


def list_inputs(inputs: InputSpec, skip_missing: bool, outside: bool, read_as_text: bool):
    """One source's documents: (training entries, validation entries, [(entry, reason, split)]
    missing, entries left out of training because validation names them, split_code)."""
    entries, missing = list_documents(inputs.metadata_files, inputs.input_files, inputs.prefix, skip_missing, outside,
                                      read_as_text)
    val_entries, val_missing = [], []
    if inputs.val_metadata_files:
        val_entries, val_missing = list_documents(inputs.val_metadata_files, [], inputs.prefix, skip_missing, outside)
    # A document named for validation is never trained on: it leaves the training list.
    held_out = {entry.path for entry in val_entries}
    excluded = [entry for entry in entries if entry.path in held_out]
    entries = [entry for entry in entries if entry.path not in held_out]

    def split_code(label: str, position: int) -> int:
        if inputs.val_fraction > 0 and planner.is_validation_document(label, inputs.val_seed, inputs.val_fraction):
            return VAL_CODE
        return TRAIN_CODE

    split_code.same_for_all = None if inputs.val_fraction > 0 else TRAIN_CODE  # (see planner.SplitCode)
    missing = [(entry, reason, SPLIT_OF_CODE[split_code(entry.label, -1)]) for entry, reason in missing]
    missing += [(entry, reason, VAL) for entry, reason in val_missing]
    return entries, val_entries, missing, excluded, split_code


def deal_units(plan: Plan, spec: RunSpec, doc_tokens: Optional[np.ndarray]) -> None:
    """The documents dealt into units: each split's list (with sources, the training list holds
    each document as many times as its source's request gives it copies: ``pipeline.sources``),
    its seeded order, and the units.  ``doc_tokens``: every document's tokens (budgets and shares
    need them; None before tokenizing)."""
    mixing = spec.mixing
    if plan.sources is not None:
        plan.sources.realize(plan.corpus.doc_splits, kept_tokens(plan, doc_tokens))
        plan.split_docs[TRAIN] = SplitDocuments.listing(plan.sources.training_list(plan.corpus.doc_splits))
    plan.orders = {split: CorpusOrder(len(docs), mixing.seed, shuffle=not mixing.keep_corpus_order,
                                      region_size=region_size(mixing.split_num))
                   for split, docs in plan.split_docs.items()}
    plan.units = plan_units(plan.corpus, plan.split_docs, plan.orders, mixing.split_num)
    # A split's size is known once every slice is tokenized; the removals (--dedup,
    # --decontaminate) are decided then.
    if spec.output.sizes_shards or spec.screening is not None:
        for unit in plan.units:
            unit.last_slice = len(plan.corpus.slices) - 1


def kept_tokens(plan: Plan, doc_tokens: Optional[np.ndarray]) -> Optional[np.ndarray]:
    """Every document's tokens, none for a document --dedup or --decontaminate removed: a
    budget or share is met by documents that are written, and the report counts only those."""
    if doc_tokens is None or plan.removed is None or not len(plan.removed):
        return doc_tokens
    kept = np.array(doc_tokens, dtype=np.int64, copy=True)
    kept[np.asarray(plan.removed, dtype=np.int64)] = 0
    return kept


def warn_about_split_sizes(inputs, n_train: int, n_val: int) -> None:
    """A validation split that will be empty, or one that leaves training fewer documents than it
    holds out, is a warning before any work (the run goes on: the shards are still made)."""
    if not (inputs.val_fraction > 0 or inputs.val_metadata_files):
        return
    total = n_train + n_val
    if inputs.val_fraction > 0:
        given = f"--val_fraction {inputs.val_fraction:g}"
        if n_val == 0:
            enough = min(0.5, 5 / max(total, 1))
            warn(f"{given} holds out none of the {total:,} documents (about {total * inputs.val_fraction:.2g} "
                 f"expected): the validation shards will be empty; raise --val_fraction ({enough:.2g} holds out "
                 "about 5 documents) or name validation documents with --val_metadata_files")
        elif n_train < n_val:
            warn(f"{given} leaves {n_train:,} of the {total:,} documents for training ({n_val:,} held out for "
                 "validation); lower --val_fraction, the share held out (e.g. 0.05)")
    elif n_val == 0:
        warn("--val_metadata_files list no document with text: the validation shards will be empty; list the "
             "validation documents there")
    elif n_train < n_val:
        warn(f"--val_metadata_files hold out {n_val:,} of the {total:,} documents, leaving {n_train:,} for training; "
             "list fewer there")


def some_of(labels: List[str], shown: int = 3) -> str:
    """``a.txt, b.txt, c.txt and 5 more``: the first few of many names, for a message."""
    more = len(labels) - shown
    return ", ".join(labels[:shown]) + (f" and {more:,} more" if more > 0 else "")


# Places a batch of units maps at once: the order's numpy holds a few dozen bytes a place while
# it maps them (1 << 20 held 84 MB at the peak of planning a million short documents, 1 << 16
# 9 MB, and took 0.22 s rather than 0.32: the smaller arrays stay in the CPU's caches).
UNIT_BATCH_PLACES = 1 << 16


def plan_units(corpus: CorpusPlan, split_docs: Dict[str, SplitDocuments], orders: Dict[str, CorpusOrder],
               split_num: int) -> List[PlannedUnit]:
    """Train units, then validation units, each ``split_num`` documents taken in its split's
    order, with the slices they need."""
    table = SliceTable.of(corpus.slices)
    units: List[PlannedUnit] = []
    # Units in batches of about UNIT_BATCH_PLACES places (the order's numpy once a batch, not
    # a call a unit: a corpus of short documents has a unit every thousand of them).
    batch = max(1, UNIT_BATCH_PLACES // max(1, split_num))
    for split in (TRAIN, VAL):
        order = orders[split]
        n_units = order.n_units(split_num)
        for start in range(0, n_units, batch):
            stop = min(n_units, start + batch)
            places = np.arange(start * split_num, min(stop * split_num, order.n))
            docs = split_docs[split][order.documents_at(places)]
            bounds = np.arange(0, len(docs), split_num)  # each unit's first place in the batch
            lows, highs = np.minimum.reduceat(docs, bounds), np.maximum.reduceat(docs, bounds)
            first, _ = table.slices_of(lows)
            _, last = table.slices_of(highs)
            sizes = np.diff(np.append(bounds, len(docs)))
            for local, n_docs, first_slice, last_slice in zip(range(start, stop), sizes.tolist(), first.tolist(),
                                                              last.tolist()):
                units.append(PlannedUnit(len(units), split, local, n_docs, first_slice, last_slice))
    return units


def plan_units_one_by_one(corpus: CorpusPlan, split_docs: Dict[str, SplitDocuments], orders: Dict[str, CorpusOrder],
                          split_num: int) -> List[PlannedUnit]:
    """``plan_units`` a unit at a time: the reference."""
    table = SliceTable.of(corpus.slices)
    units: List[PlannedUnit] = []
    for split in (TRAIN, VAL):
        order = orders[split]
        for local in range(order.n_units(split_num)):
            docs = split_docs[split][order.unit_documents(local, split_num)]
            first, last = table.slices_of(np.asarray([docs.min(), docs.max()]))
            units.append(PlannedUnit(len(units), split, local, len(docs), int(first[0]), int(last[1])))
    return units


def check_vocabulary_case(do_lower_case: bool, reading: ReadingSpec, vocab, slices: List[Slice],
                          allow_mismatch: bool = False, sample_chars: int = 200_000) -> None:
    """Refuse a lower-case vocabulary with cased text and no --do_lower_case (or a cased one
    with it), with the [UNK] rates measured on the first documents: the most common silent
    mistake in BERT data.  With ``allow_mismatch``, a warning instead."""
    from ..tokenizers.wordpiece import measure_case_mismatch, vocab_is_lowercase

    if vocab_is_lowercase(vocab) == do_lower_case:
        return
    texts, size = [], 0
    sources = [source for slice_ in slices[:8] for source in slice_.sources]
    for document in read_documents(sources, reading.separator_line, reading.multiple_docs_in_single_file, []):
        texts += [line for line in document.text[: sample_chars - size].split("\n") if line.strip()]
        size += len(document.text)
        if size >= sample_chars:
            break
    mismatch = measure_case_mismatch(vocab, do_lower_case, texts)
    if mismatch is None or not mismatch.changes_tokens:
        return  # the sample reads the same either way (e.g. no capitals): nothing is lost
    fix = "drop --do_lower_case (--do_lower_case=false)" if do_lower_case else "add --do_lower_case"
    if allow_mismatch:
        warn(f"{mismatch.describe()} (--allow_case_mismatch)")
        return
    raise ConfigError(f"{mismatch.describe()}; {fix}, or pass --allow_case_mismatch to run anyway")


def run_fingerprint(record: dict) -> str:
    """What must not change between a run and its --resume: a digest of its record
    (``run_record``: the options that shape the output, credentials redacted, the vocabulary's
    hash, the package version and the list of documents).  New credentials resume the same run;
    the record itself lets a refused resume say what changed."""
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()
