"""Everything decided and checked before any work: the units of work, the vocabulary, the
sentence model, the documents that are missing, and the run's fingerprint (what a ``--resume``
must match).
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, field
from typing import List

from .. import __version__
from ..config import ConfigError, GeneratorConfig
from . import documents as docs_mod
from .documents import InputError, Unit

# Options that change how the work is done, never what is written.
NOT_IN_FINGERPRINT = ("num_workers", "overwrite", "resume")


def warn(message: str) -> None:
    print(f"create_tfrecords: warning: {message}", file=sys.stderr)


@dataclass
class Plan:
    units: List[Unit]
    n_listed: int
    missing: list = field(default_factory=list)  # (MetadataEntry, reason), with --skip_missing
    vocab: object = None
    fingerprint: str = ""


def make_plan(config: GeneratorConfig, skip_missing: bool = False, check_case: bool = True) -> Plan:
    """Everything that can be checked before any work: inputs, vocabulary, sentence model."""
    from ..masking import MaskingSpec
    from ..tokenizers import TokenizerSource, load_vocabulary

    source = TokenizerSource.from_config(config)
    vocab = load_vocabulary(source)
    # Checked here, not only by MaskingSpec.from_config in the workers: windows that cross
    # documents need the token with masking disabled too, and a user needs the option's name.
    if config.mlm_only and config.document_separator_token not in vocab.token_to_id:
        raise ConfigError(f"--document_separator_token {config.document_separator_token} is not in "
                          f"{vocab.path}")
    if not config.disable_masking:
        try:  # e.g. whole words with a tokenizer whose pieces do not show where words start
            MaskingSpec.from_config(config, vocab)
        except ValueError as error:
            raise ConfigError(f"{source.option} {source.path}: {error}") from None
    if config.spacy_model and not config.single_sentence_per_line:
        from .sentences import make_sentence_splitter

        make_sentence_splitter(False, config.spacy_model)  # fails now, with advice, if missing

    entries = docs_mod.read_metadata(config.metadata_files, config.input_files_prefix)
    entries, missing = docs_mod.check_documents_exist(entries, skip_missing)
    val_entries = []
    if config.val_metadata_files:
        val_entries = docs_mod.read_metadata(config.val_metadata_files, config.input_files_prefix)
        val_entries, val_missing = docs_mod.check_documents_exist(val_entries, skip_missing)
        missing += val_missing
    for entry, reason in missing:
        warn(f"{entry.metadata_file}:{entry.line_number}: skipped: {reason}: {entry.path}")

    split_mode = docs_mod.SPLIT_BY_HASH if config.val_fraction > 0 else docs_mod.ALL_TRAIN
    plan_args = dict(
        split_num=config.split_num,
        multiple_docs_in_single_file=config.multiple_docs_in_single_file,
        separator_line=config.separator_line,
        jsonl_text_key=config.jsonl_text_key,
    )
    units = docs_mod.plan_units(entries, split_mode=split_mode, **plan_args)
    units += docs_mod.plan_units(val_entries, split_mode=docs_mod.ALL_VAL, first_index=len(units), **plan_args)
    if not units or not any(unit.n_bytes for unit in units):
        raise InputError("no document with any text in " + ", ".join(config.metadata_files + config.val_metadata_files))
    if check_case and source.kind == "wordpiece":  # the check measures WordPiece's [UNK] rate
        check_vocabulary_case(config, vocab, units)
    return Plan(units, len(entries) + len(val_entries) + len(missing), missing, vocab,
                run_fingerprint(config, vocab, entries + val_entries))


def check_vocabulary_case(config: GeneratorConfig, vocab, units: List[Unit], sample_chars: int = 200_000) -> None:
    """Warn when a lower-case vocabulary meets cased text (or the reverse), with the [UNK] rate
    measured on the first documents: the most common silent mistake in BERT data."""
    from ..tokenization import WordPieceTokenizer, check_case_mismatch, vocab_is_lowercase

    if vocab_is_lowercase(vocab) == config.do_lower_case:
        return
    texts, size = [], 0
    for document in docs_mod.read_documents(units[0].sources, config.separator_line,
                                            config.multiple_docs_in_single_file, []):
        texts += [line for line in document.text[: sample_chars - size].split("\n") if line.strip()]
        size += len(document.text)
        if size >= sample_chars:
            break
    message = check_case_mismatch(vocab, config.do_lower_case, texts, WordPieceTokenizer(vocab, config.do_lower_case))
    if message:
        warn(message)


def run_fingerprint(config: GeneratorConfig, vocab, entries) -> str:
    """What must not change between a run and its --resume: options that shape the output, the
    vocabulary, the list of documents and the package version."""
    options = {key: value for key, value in config.as_dict().items() if key not in NOT_IN_FINGERPRINT}
    digest = hashlib.sha256()
    digest.update(json.dumps(options, sort_keys=True).encode())
    digest.update(vocab.sha256.encode())
    digest.update(__version__.encode())
    for entry in entries:
        digest.update(entry.label.encode("utf-8", "surrogateescape") + b"\0")
    return digest.hexdigest()
