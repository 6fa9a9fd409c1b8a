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
from ..pipeline.documents.types import CorpusPlan, InputError, ReadingSpec, Slice
from ..pipeline.mixing import CorpusOrder, region_size
from .run_record import run_record
from .specs import RunSpec
from .units import SliceTable, UnitWork


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
    split_docs: Dict[str, np.ndarray]  # per split: the corpus positions of its documents, ascending
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

    @property
    def slices(self) -> List[Slice]:
        return self.corpus.slices

    def unit_work(self, unit: PlannedUnit) -> UnitWork:
        places = self.orders[unit.split].unit_documents(unit.local_index, self.split_num)
        docs = self.split_docs[unit.split][places]
        if self.removed is not None and len(self.removed):  # left out as documents without text are
            docs = docs[~np.isin(docs, self.removed)]
        return UnitWork(unit.index, unit.split, docs)


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
    entries, missing = list_documents(inputs.metadata_files, inputs.input_files, inputs.prefix, skip_missing, outside,
                                      spec.control.read_path_lists_as_text)
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

    missing = [(entry, reason, SPLIT_OF_CODE[split_code(entry.label, -1)]) for entry, reason in missing]
    missing += [(entry, reason, VAL) for entry, reason in val_missing]
    for entry, reason, _ in missing:
        warn(f"{entry.metadata_file}:{entry.line_number}: skipped: {reason}: {entry.path}")

    corpus = planner.plan_corpus(entries, split_code, val_entries,
                                 multiple_docs_in_single_file=inputs.reading.multiple_docs_in_single_file,
                                 separator_line=inputs.reading.separator_line, text_field=inputs.reading.text_field,
                                 encoding=inputs.reading.encoding)
    if not corpus.n_docs or not corpus.n_bytes:
        listed = [entry.label for entry in entries + val_entries]
        raise InputError(f"no document with any text in {', '.join(inputs.named_files)}: "
                         f"{some_of(listed)} {'is' if len(listed) == 1 else 'are'} empty or white space only; "
                         "name files that hold text")
    if check_case and spec.tokenizer.kind == WORDPIECE:  # the check measures WordPiece's [UNK] rate
        check_vocabulary_case(spec.tokenizer.do_lower_case, inputs.reading, vocab, corpus.slices, allow_case_mismatch)
    split_docs = {split: np.flatnonzero(corpus.doc_splits == code)
                  for code, split in SPLIT_OF_CODE.items()}
    warn_about_split_sizes(inputs, len(split_docs[TRAIN]), len(split_docs[VAL]))
    orders = {split: CorpusOrder(len(docs), mixing.seed, shuffle=not mixing.keep_corpus_order,
                                 region_size=region_size(mixing.split_num))
              for split, docs in split_docs.items()}
    units = plan_units(corpus, split_docs, orders, mixing.split_num)
    # A split's size is known once every slice is tokenized; the removals are decided then.
    if spec.output.sizes_shards or spec.screening is not None:
        for unit in units:
            unit.last_slice = len(corpus.slices) - 1
    n_listed = {split: len(docs) + sum(1 for *_, s in missing if s == split) for split, docs in split_docs.items()}
    excluded_docs = sum(corpus.docs_per_path.get(path, 0) for path in {entry.path for entry in excluded})
    decontamination = spec.screening.decontamination if spec.screening is not None else None
    record = run_record(spec.options, vocab, entries + val_entries,
                        evaluation_digests(decontamination.paths) if decontamination is not None else None)
    return Plan(corpus, units, orders, split_docs, mixing.split_num, n_listed, missing, excluded_docs, vocab,
                run_fingerprint(record), record)


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


def plan_units(corpus: CorpusPlan, split_docs: Dict[str, np.ndarray], orders: Dict[str, CorpusOrder],
               split_num: int) -> List[PlannedUnit]:
    """Train units, then validation units, each ``split_num`` documents taken in its split's
    order, with the slices they need."""
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
