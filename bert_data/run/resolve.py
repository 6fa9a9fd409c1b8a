"""The resolve step: a run's configuration validated and resolved once, before any work.

:func:`resolve` is the only place a :class:`~bert_data.config.GeneratorConfig` is validated and
turned into what the run uses: the narrow specs of :mod:`.specs` and of each stage, the tokenizer
source, the vocabulary (loaded once, for the parent), the masking spec, the record layout, the
options as recorded.  Past this module (and the command line, which builds the configuration),
no function sees a ``GeneratorConfig``: each takes the spec it needs.

:func:`generate` is the library's entry: resolve, then run (:func:`.runner.run`).  A command that
must check its options before it starts anything costly (a Dask cluster) resolves them first
and hands ``generate`` the resolved :class:`~.specs.RunSpec`.
"""

from __future__ import annotations

import concurrent.futures as cf
import time
from typing import Optional, Union

from .. import storage
from ..config import RUN_CONTROL_OPTIONS, ConfigError, GeneratorConfig
from ..notices import warn
from ..pipeline.documents.types import InputSpec, ReadingSpec
from ..pipeline.instances import InstanceSpec
from ..pipeline.masking import MaskingSpec, separator_token
from ..pipeline.mixing import MixingSpec
from ..pipeline.decontamination import PASSAGES, DecontaminationSpec
from ..pipeline.dedup import DedupSpec
from ..pipeline.packing import PackingSpec
from ..pipeline.screening import ScreeningSpec
from ..pipeline.sentences import SentenceSpec
from ..pipeline.sources import WEIGHT, SourceSpec, SourcesSpec
from ..tokenizers import HUGGINGFACE, SENTENCEPIECE, SPECIAL_ROLES, WORDPIECE, TokenizerSource, load_vocabulary
from .locations import check_output_url, forget_local_copies, local_tokenizer
from .runner import RunSummary, run
from .sources_file import load_sources, request_of
from .specs import OutputSpec, RunControl, RunSpec


def generate(config: Union[GeneratorConfig, RunSpec], executor: Optional[cf.Executor] = None, progress: bool = True,
             skip_missing: bool = False, parallelism: Optional[int] = None,
             allow_case_mismatch: bool = False, notes: bool = True) -> RunSummary:
    """Run the whole generator. Raises ConfigError/InputError/VocabError before any work,
    GenerationError for a failure during it, ``run_files.Interrupted`` (a KeyboardInterrupt)
    when interrupted (resumable).  A vocabulary whose case disagrees with ``do_lower_case`` is
    a ConfigError unless ``allow_case_mismatch``.

    ``config``: the options, validated and resolved here, or already resolved (a command that
    checks its options before starting a cluster).  ``executor``: any ``concurrent.futures``
    executor (default: a local process pool of ``--num_workers``); ``parallelism``: how many
    tasks it runs at once (default ``--num_workers``), which sets how many are kept in flight.
    ``progress``: the bars (on stderr); ``notes``: one line each for a faster way to run the same
    (the native tokenizer or the compiled kernels missing), whether or not stderr is a terminal.
    """
    started = time.perf_counter()
    spec = config if isinstance(config, RunSpec) else resolve(config)
    return run(spec, executor, progress=progress, skip_missing=skip_missing, parallelism=parallelism,
               allow_case_mismatch=allow_case_mismatch, started=started, notes=notes)


def resolve(config: GeneratorConfig) -> RunSpec:
    """Validate ``config`` (raise ConfigError on the first bad option) and resolve it; load the
    vocabulary and check what depends on it before any work: the document separator, whether
    the tokenizer can show word starts to whole-word masks, the masking budget, the sentence
    model.  ``config`` itself is normalised in place by validation (e.g. Google's
    ``--output_file`` paths)."""
    config.validate()
    check_output_url(config.output_dir, config.work_dir)
    check_file_options(config)
    forget_local_copies()  # a URL's vocabulary is fetched afresh for each run
    source = tokenizer_source(config)
    vocab = load_vocabulary(local_tokenizer(source))
    # Checked here with the option's name: windows that cross documents need the token with
    # masking disabled too.
    if config.mlm_only and config.document_separator_token not in vocab.token_to_id:
        raise ConfigError(f"--document_separator_token {config.document_separator_token} is not in "
                          f"{vocab.path}")
    if needs_stored_word_starts(config, vocab):
        config.store_word_starts = True  # (before the options are recorded: the manifest says it)
    masking = None
    if not config.disable_masking:
        try:  # e.g. whole words with a tokenizer whose pieces do not show where words start
            masking = masking_spec(config, vocab)
        except ValueError as error:
            raise ConfigError(f"{source.option} {source.path}: {error}") from None
    check_masking_budget(config)
    if config.spacy_model and not config.single_sentence_per_line:
        from ..pipeline.sentences import make_sentence_splitter

        make_sentence_splitter(False, config.spacy_model)  # fails now, with advice, if missing
    cross_document = config.mlm_only and config.allow_cross_document_examples
    instances = InstanceSpec(
        max_seq_length=config.max_seq_length, mlm_only=config.mlm_only,
        dupe_factor=config.dupe_factor, short_seq_prob=config.short_seq_prob, short_min=config.short_min,
        window_overlap=config.window_overlap, per_chunk=config.short_seq_draw == "chunk",
        sentence_order=config.sentence_order_prediction,
        separator_id=vocab.token_to_id[config.document_separator_token] if cross_document else None)
    packing = PackingSpec(config.max_seq_length, config.sequences_per_pack, config.masked_lm_prob,
                          config.max_predictions_per_seq) if config.pack_sequences else None
    reading = ReadingSpec(config.multiple_docs_in_single_file, config.separator_line, config.text_field,
                          config.input_encoding)
    inputs = InputSpec(tuple(config.metadata_files), tuple(config.input_files), config.input_files_prefix,
                       tuple(config.val_metadata_files), config.val_fraction, config.val_seed, reading)
    sources_file = load_sources(config.sources) if config.sources is not None else None
    sources = sources_spec(config, sources_file, reading) if sources_file is not None else None
    options = recorded_options(config)
    if sources_file is not None:  # the file's content, not only its name: it shapes the output
        options["sources"] = {"path": config.sources, **sources_file}
    return RunSpec(
        inputs=inputs, sources=sources, provenance=config.record_provenance, tokenizer=source,
        sentences=SentenceSpec(config.single_sentence_per_line, config.spacy_model),
        mixing=MixingSpec(config.seed, config.split_num, config.keep_corpus_order),
        instances=instances, masking=masking, packing=packing, output=output_spec(config, sources),
        control=RunControl(**{name: getattr(config, name) for name in RUN_CONTROL_OPTIONS}),
        options=options, vocab=vocab, screening=screening_spec(config), word_starts=config.store_word_starts)


def screening_spec(config: GeneratorConfig) -> Optional[ScreeningSpec]:
    """--dedup and --decontaminate, or None when neither is asked for (the run is then as
    before: no signature is computed)."""
    dedup = DedupSpec(config.dedup, float(config.dedup_threshold), config.dedup_shingle_size) if config.dedup else None
    decontamination = DecontaminationSpec(tuple(config.decontaminate), config.decontamination_ngram,
                                          config.decontaminate_mode == PASSAGES) if config.decontaminate else None
    if dedup is None and decontamination is None:
        return None
    return ScreeningSpec(dedup, decontamination)




def sources_spec(config: GeneratorConfig, sources_file: dict, reading: ReadingSpec) -> SourcesSpec:
    """The checked sources file (``sources_file.load_sources``) as the planner takes it: each
    source's inputs an ``InputSpec`` (the run's reading options, its own text field and
    validation options where it gives them)."""
    specs = []
    for source in sources_file["source"]:
        request, amount = request_of(source)
        if request != WEIGHT or amount != 1:
            if not config.output_format or not _holds_instances(config.output_format):
                raise ConfigError(f"--sources {config.sources}: source {source['name']!r}: --output_format "
                                  f"{config.output_format} writes the tokenized corpus once, in listed order; give "
                                  "every source weight = 1")
        own_reading = ReadingSpec(reading.multiple_docs_in_single_file, reading.separator_line,
                                  source.get("text_field", reading.text_field), reading.encoding)
        if own_reading.text_field is not None and reading.multiple_docs_in_single_file:
            raise ConfigError(f"--sources {config.sources}: source {source['name']!r}: text_field reads JSON Lines, "
                              "one document a line; drop --multiple_docs_in_single_file or the text_field")
        inputs = InputSpec(tuple(source["metadata_files"]), tuple(source["input_files"]),
                           source["input_files_prefix"], tuple(source["val_metadata_files"]),
                           source.get("val_fraction", config.val_fraction), source.get("val_seed", config.val_seed),
                           own_reading)
        specs.append(SourceSpec(source["name"], inputs, request, amount))
    return SourcesSpec(tuple(specs), sources_file["total_tokens"], config.seed)


def _holds_instances(output_format: str) -> bool:
    from ..format.output_formats import get_format

    return get_format(output_format).instances


def output_spec(config: GeneratorConfig, sources: Optional[SourcesSpec] = None) -> OutputSpec:
    source_validation = sources is not None and any(
        source.inputs.val_fraction > 0 or source.inputs.val_metadata_files for source in sources.sources)
    return OutputSpec(
        directory=config.output_dir, files=tuple(config.output_files), name=config.name,
        format=config.output_format, compression=config.compression, num_output_files=config.num_output_files,
        records_per_file=config.records_per_file, megabytes_per_file=config.megabytes_per_file,
        has_validation=config.has_validation or source_validation, features=tuple(config.feature_specs()),
        sentence_order=config.sentence_order_prediction,
        shuffle_seed=None if config.keep_corpus_order else config.seed)


def recorded_options(config: GeneratorConfig) -> dict:
    """The options a dataset records (its manifest) and a ``--resume`` must match (the
    fingerprint): all but the run control, with the effective values of options left to
    their defaults."""
    options = {key: value for key, value in config.as_dict().items() if key not in RUN_CONTROL_OPTIONS}
    options["min_short_seq_length"] = config.short_min
    options["overlap_size"] = config.window_overlap if config.mlm_only else None  # windows only
    options["max_sequences_per_pack"] = config.sequences_per_pack or None  # as packed, when packed
    return options


def tokenizer_source(config: GeneratorConfig) -> TokenizerSource:
    """Which tokenizer the options name, from the files as named (URLs stay URLs: the manifest
    and the fingerprint record them)."""
    specials = tuple(getattr(config, f"{role}_token") for role in SPECIAL_ROLES)
    if config.spm_model_file:
        return TokenizerSource(SENTENCEPIECE, config.spm_model_file, config.vocab_file or None,
                               bool(config.do_lower_case), specials)
    if config.tokenizer_file:
        return TokenizerSource(HUGGINGFACE, config.tokenizer_file, None, False, specials)
    return TokenizerSource(WORDPIECE, config.vocab_file, None, bool(config.do_lower_case), specials)


def needs_stored_word_starts(config: GeneratorConfig, vocab) -> bool:
    """Whether whole-word, n-gram or span masks drawn at generation need the tokenizer's word
    starts stored with the ids, its pieces showing none (``Vocab.word_boundary`` None)."""
    words = config.mask_whole_word or config.max_ngram_size > 1 or config.span_masking
    return bool(words and not config.disable_masking and vocab.word_boundary is None
                and _holds_instances(config.output_format))


def masking_spec(config: GeneratorConfig, vocab) -> MaskingSpec:
    """The masks the encode tasks draw (``--masked_lm_prob`` and the rest)."""
    return MaskingSpec.for_vocab(vocab, separator_token(config.mlm_only, config.document_separator_token),
                                 stored_word_starts=config.store_word_starts,
                                 masked_lm_prob=config.masked_lm_prob,
                                 max_predictions_per_seq=config.max_predictions_per_seq,
                                 whole_word=config.mask_whole_word, max_ngram_size=config.max_ngram_size,
                                 span=config.span_masking)


def check_file_options(config: GeneratorConfig) -> None:
    """The vocabulary, tokenizer and SentencePiece model are regular files (a FIFO or a device
    would block or never end when opened): checked with os.stat, before anything opens them.
    (A missing one is left to its loader, whose message says what the file should be.)"""
    for option in ("vocab_file", "tokenizer_file", "spm_model_file"):
        path = getattr(config, option)
        reason = storage.not_a_regular_file(path) if path else ""
        if reason and reason != storage.FILE_NOT_FOUND:
            raise ConfigError(f"--{option} {path}: {reason}")


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
