"""A run's configuration resolved once, before any work, into what the stages need.

:func:`resolve` is the only place a :class:`~bert_data.config.GeneratorConfig` is validated and
the only place the tokenizer, the masks and the record layout are derived from it.  The tasks
receive the :class:`RunSettings` it makes and re-derive nothing: the scheduler hands the same
small object to every task, and a worker builds its tokenizer from ``settings.tokenizer``
(with files at URLs fetched once per process, :meth:`RunSettings.local_tokenizer`).

``generate`` resolves a configuration itself; a command that must check its options before it
starts anything costly (a Dask cluster) resolves them first and hands ``generate`` the result.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional, Tuple

from .. import storage
from ..config import ConfigError, GeneratorConfig
from ..format.layout import FeatureSpec
from ..format.output_formats import ShardOptions
from ..pipeline.masking import MaskingSpec
from ..notices import warn
from ..tokenizers import TokenizerSource, load_vocabulary
from .locations import forget_local_copies, local_copy


@dataclass(frozen=True)
class RunSettings:
    """What the stages need, resolved once from a validated configuration.

    ``config``: the options as given (files at URLs stay URLs: the manifest and the ``--resume``
    fingerprint record them) for the plain values the stages read (lengths, probabilities,
    seed...); ``tokenizer``: which tokenizer, from the files as named; ``masking``: the masks the
    encode tasks draw (None with ``--disable_masking``: drawn at load time); ``features``: the
    record layout written.  ``vocab``: the vocabulary planning loaded, for the parent (the
    manifest's hash and size, the shard-size sample); it is not sent with tasks (a worker builds
    its own tokenizer, vocabulary and all), so it is None in a worker.
    """

    config: GeneratorConfig
    tokenizer: TokenizerSource
    masking: Optional[MaskingSpec]
    features: Tuple[FeatureSpec, ...]
    vocab: object = field(default=None, compare=False, repr=False)

    @property
    def shard_options(self) -> ShardOptions:
        """What the output format's shard writer needs: the layout, compression and pair task."""
        return ShardOptions(self.features, self.config.compression, self.config.sentence_order_prediction)

    def local_tokenizer(self) -> TokenizerSource:
        """``tokenizer`` with its files at URLs replaced by this machine's copies (fetched once per
        process): what a tokenizer, which opens paths, is built from."""
        source = self.tokenizer
        local = {name: local_copy(getattr(source, name)) for name in ("path", "vocab_file")
                 if storage.is_url(getattr(source, name))}
        return dataclasses.replace(source, **local) if local else source

    def __getstate__(self):
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "vocab"}

    def __setstate__(self, state) -> None:
        for name, value in dict(state, vocab=None).items():
            object.__setattr__(self, name, value)


def resolve(config: GeneratorConfig) -> RunSettings:
    """Validate ``config`` (raise ConfigError on the first bad option) and resolve it; load the
    vocabulary and check what depends on it before any work: the document separator, whether
    the tokenizer can show word starts to whole-word masks, the masking budget, the sentence model.
    ``config`` itself is normalised in place by validation (e.g. Google's ``--output_file`` paths)."""
    config.validate()
    check_file_options(config)
    forget_local_copies()  # a URL's vocabulary is fetched afresh for each run
    source = TokenizerSource.from_config(config)
    settings = RunSettings(config, source, None, tuple(config.feature_specs()))
    vocab = load_vocabulary(settings.local_tokenizer())
    # Checked here with the option's name: windows that cross documents need the token with
    # masking disabled too.
    if config.mlm_only and config.document_separator_token not in vocab.token_to_id:
        raise ConfigError(f"--document_separator_token {config.document_separator_token} is not in "
                          f"{vocab.path}")
    masking = None
    if not config.disable_masking:
        try:  # e.g. whole words with a tokenizer whose pieces do not show where words start
            masking = MaskingSpec.from_config(config, vocab)
        except ValueError as error:
            raise ConfigError(f"{source.option} {source.path}: {error}") from None
    check_masking_budget(config)
    if config.spacy_model and not config.single_sentence_per_line:
        from ..pipeline.sentences import make_sentence_splitter

        make_sentence_splitter(False, config.spacy_model)  # fails now, with advice, if missing
    return dataclasses.replace(settings, masking=masking, vocab=vocab)


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
