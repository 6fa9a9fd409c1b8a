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
from .listing import list_documents

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


def make_plan(config: GeneratorConfig, skip_missing: bool = False, check_case: bool = True,
              allow_case_mismatch: bool = False) -> Plan:
    """Everything that can be checked before any work: inputs, vocabulary, sentence model.

    A vocabulary whose case disagrees with ``do_lower_case`` stops the run (ConfigError) unless
    ``allow_case_mismatch``, which turns it into a warning."""
    from ..tokenization import load_vocab

    vocab = load_vocab(config.vocab_file)
    # Checked here, not only by MaskingSpec.from_config in the workers: windows that cross
    # documents need the token with masking disabled too, and a user needs the option's name.
    if config.mlm_only and config.document_separator_token not in vocab.token_to_id:
        raise ConfigError(f"--document_separator_token {config.document_separator_token} is not in "
                          f"{config.vocab_file}")
    check_masking_budget(config)
    if config.spacy_model and not config.single_sentence_per_line:
        from .sentences import make_sentence_splitter

        make_sentence_splitter(False, config.spacy_model)  # fails now, with advice, if missing

    entries, missing = list_documents(config.metadata_files, config.input_files, config.input_files_prefix,
                                      skip_missing)
    val_entries = []
    if config.val_metadata_files:
        val_entries, val_missing = list_documents(config.val_metadata_files, [], config.input_files_prefix,
                                                  skip_missing)
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
        named = config.metadata_files + config.input_files + config.val_metadata_files
        raise InputError("no document with any text in " + ", ".join(named))
    if check_case:
        check_vocabulary_case(config, vocab, units, allow_case_mismatch)
    return Plan(units, len(entries) + len(val_entries) + len(missing), missing, vocab,
                run_fingerprint(config, vocab, entries + val_entries))


def check_masking_budget(config: GeneratorConfig) -> None:
    """Warn when --max_predictions_per_seq caps masking well below --masked_lm_prob (e.g.
    max_seq_length 1024 with the default 20 predictions masks at most 2% of a full instance):
    Google's advice is max_predictions_per_seq = max_seq_length * masked_lm_prob."""
    candidates = config.max_num_tokens  # the tokens of a full-length instance ([CLS]/[SEP] never masked)
    wanted = max(1, round(candidates * config.masked_lm_prob))
    if config.max_predictions_per_seq >= 0.9 * wanted:
        return
    effective = config.max_predictions_per_seq / candidates
    advised = max(wanted, round(config.max_seq_length * config.masked_lm_prob))
    warn(f"--max_predictions_per_seq {config.max_predictions_per_seq} caps masking at {effective:.1%} of a full "
         f"{config.max_seq_length:,}-token instance, well below --masked_lm_prob {config.masked_lm_prob:g}; use "
         f"--max_predictions_per_seq {advised} (max_seq_length * masked_lm_prob, as Google advises)")


def check_vocabulary_case(config: GeneratorConfig, vocab, units: List[Unit], allow_mismatch: bool = False,
                          sample_chars: int = 200_000) -> None:
    """Refuse a lower-case vocabulary with cased text and no --do_lower_case (or a cased one
    with it), with the [UNK] rates measured on the first documents: the most common silent
    mistake in BERT data.  With ``allow_mismatch``, a warning instead."""
    from ..tokenization import measure_case_mismatch, vocab_is_lowercase

    if vocab_is_lowercase(vocab) == config.do_lower_case:
        return
    texts, size = [], 0
    for document in docs_mod.read_documents(units[0].sources, config.separator_line,
                                            config.multiple_docs_in_single_file, []):
        texts += [line for line in document.text[: sample_chars - size].split("\n") if line.strip()]
        size += len(document.text)
        if size >= sample_chars:
            break
    mismatch = measure_case_mismatch(vocab, config.do_lower_case, texts)
    if mismatch is None or not mismatch.changes_tokens:
        return  # the sample reads the same either way (e.g. no capitals): nothing is lost
    fix = "drop --do_lower_case (--do_lower_case=false)" if config.do_lower_case else "add --do_lower_case"
    if allow_mismatch:
        warn(f"{mismatch.describe()} (--allow_case_mismatch)")
        return
    raise ConfigError(f"{mismatch.describe()}; {fix}, or pass --allow_case_mismatch to run anyway")


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
