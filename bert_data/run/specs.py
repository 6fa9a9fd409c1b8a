"""A run's configuration as the run uses it: small, named, frozen specs, made once by the
resolve step (:func:`bert_data.run.resolve.resolve`) from a validated
:class:`~bert_data.config.GeneratorConfig`, which nothing past that step sees.

Each stage's spec lives with its stage (``InstanceSpec``, ``MaskingSpec``, ``PackingSpec``,
``MixingSpec``, ``SentenceSpec``, ``InputSpec`` in :mod:`bert_data.pipeline`); this module holds
what belongs to the run: where and how the dataset is written (:class:`OutputSpec`), what does
not change the bytes (:class:`RunControl`), what each kind of task receives
(:class:`TokenizeSpec`, :class:`PairSpec`, :class:`EncodeSpec`: only what it needs travels),
and the whole resolved run (:class:`RunSpec`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from .. import storage
from ..format import dataset_layout
from ..format.layout import FeatureSpec
from ..format.output_formats import OutputFormat, ShardOptions, get_format
from ..pipeline.documents.types import InputSpec, ReadingSpec
from ..pipeline.instances import InstanceSpec
from ..pipeline.masking import MaskingSpec
from ..pipeline.mixing import MixingSpec
from ..pipeline.packing import PackingSpec
from ..pipeline.screening import ScreeningSpec
from ..pipeline.sentences import SentenceSpec
from ..pipeline.sources import SourcesSpec
from ..tokenizers import TokenizerSource


@dataclass(frozen=True)
class OutputSpec:
    """Where and how the dataset is written.

    ``directory``: the output directory or URL (with Google's ``--output_file``, the files'
    directory); ``files``: Google's ``--output_file`` paths, the shards exactly (else empty:
    shards are ``NAME-i<suffix>`` in each split's directory); ``format``: the output format's
    name; ``num_output_files``, ``records_per_file``, ``megabytes_per_file``: how many shards (a
    count, or sized by content and counted during the run); ``features``: the record layout;
    ``shuffle_seed``: the key of the records' final order, None when the corpus order is kept.
    """

    directory: str
    files: Tuple[str, ...]
    name: str
    format: str
    compression: Optional[str]
    num_output_files: int
    records_per_file: Optional[int]
    megabytes_per_file: Optional[float]
    has_validation: bool
    features: Tuple[FeatureSpec, ...]
    sentence_order: bool
    shuffle_seed: Optional[int]

    def staged_at(self, directory: str) -> "OutputSpec":
        """The same output assembled in a local staging directory (an output at a URL is
        assembled locally and uploaded when finished; see ``locations``)."""
        return dataclasses.replace(self, directory=directory)

    @property
    def kind(self) -> OutputFormat:
        return get_format(self.format)

    @property
    def is_url(self) -> bool:
        return storage.is_url(self.directory)

    @property
    def sizes_shards(self) -> bool:
        """Shards sized by records or megabytes: their count per split is set during the run."""
        return self.records_per_file is not None or self.megabytes_per_file is not None

    @property
    def shuffles_shards(self) -> bool:
        """Shards written once more, in their final order, when every unit is in: shards of
        framed records (TFRecord: the final shuffle moves records whole by their frames); other
        formats are written in that order from their bodies (``shard_shuffle.shuffled_batches``)."""
        return self.shuffle_seed is not None and self.kind.framed_records

    @property
    def segment_compression(self) -> Optional[str]:
        """How an encode task compresses its segments: as the shard is, when segments appended
        in unit order are the shard (TFRecord, not shuffled at the end); else not at all (the
        format compresses when the shard is written, the final shuffle when it rewrites it)."""
        return self.compression if self.kind.appendable and not self.shuffles_shards else None

    @property
    def shard_options(self) -> ShardOptions:
        """What the output format's shard writer needs: the layout, compression and pair task."""
        return ShardOptions(self.features, self.compression, self.sentence_order)

    def split_dirs(self) -> Dict[str, str]:
        """The directory (or URL) of each split."""
        return dataset_layout.split_dirs(self.directory, self.has_validation, storage.join)


@dataclass(frozen=True)
class RunControl:
    """How a run is carried out, never what it writes: the options of
    ``config.RUN_CONTROL_OPTIONS`` (kept out of the manifest and the ``--resume`` fingerprint),
    by the same names."""

    num_workers: Optional[int]
    overwrite: bool
    resume: bool
    work_dir: Optional[str]
    allow_paths_outside_prefix: bool
    read_path_lists_as_text: bool

    @property
    def workers(self) -> int:
        """--num_workers, by default the cores this process may use."""
        from ..config import available_cores

        return self.num_workers if self.num_workers else available_cores()


@dataclass(frozen=True)
class TokenizeSpec:
    """What a ``tokenize_slice`` task needs: how to read, split and tokenize documents, and how
    to screen them (deduplication and decontamination; None: not at all)."""

    tokenizer: TokenizerSource
    sentences: SentenceSpec
    reading: ReadingSpec
    screening: Optional[ScreeningSpec] = None
    word_starts: bool = False  # --store_word_starts: each id carries its word start (tokens.WORD_START_BIT)


@dataclass(frozen=True)
class PairSpec:
    """What a ``pair_unit`` task needs: how instances are made (and packed) and the run's seed."""

    instances: InstanceSpec
    packing: Optional[PackingSpec]
    seed: int
    origins: bool = False  # each instance's source and document are kept (sources, provenance)


@dataclass(frozen=True)
class EncodeSpec:
    """What an ``encode_shards`` task needs: the tokenizer (for its vocabulary), how instances
    are laid out, masked and packed, the run's seed, and how the format encodes segments."""

    tokenizer: TokenizerSource
    instances: InstanceSpec
    masking: Optional[MaskingSpec]
    packing: Optional[PackingSpec]
    seed: int
    format: str
    shard_options: ShardOptions
    segment_compression: Optional[str]
    provenance: bool = False  # --record_provenance: each record's source_index and document_index
    word_starts: bool = False  # --store_word_starts: the pool's ids carry word starts, stored and used by masks


@dataclass(frozen=True)
class RunSpec:
    """A run, resolved: every stage's spec, the output, the run control, and ``options``, the
    options as recorded (the manifest's, and what the ``--resume`` fingerprint covers: every
    option but the run control, with the values left to defaults made explicit).

    ``vocab``: the vocabulary the resolve step loaded, for the parent (planning's checks, the
    manifest's hash and size, the shard-size sample); it never travels with a task (a worker
    builds its own tokenizer, vocabulary and all), so it is None after pickling."""

    inputs: InputSpec
    tokenizer: TokenizerSource
    sentences: SentenceSpec
    mixing: MixingSpec
    instances: InstanceSpec
    masking: Optional[MaskingSpec]
    packing: Optional[PackingSpec]
    output: OutputSpec
    control: RunControl
    options: Dict[str, object] = field(hash=False)
    vocab: object = field(default=None, compare=False, repr=False)
    screening: Optional[ScreeningSpec] = None  # --dedup, --decontaminate (None: neither)
    sources: Optional[SourcesSpec] = None  # --sources: the corpus as several sources (else ``inputs``)
    provenance: bool = False  # --record_provenance
    word_starts: bool = False  # --store_word_starts

    @property
    def tokenizing(self) -> TokenizeSpec:
        return TokenizeSpec(self.tokenizer, self.sentences, self.inputs.reading, self.screening, self.word_starts)

    @property
    def pairing(self) -> PairSpec:
        return PairSpec(self.instances, self.packing, self.mixing.seed,
                        origins=self.sources is not None or self.provenance)

    @property
    def encoding(self) -> EncodeSpec:
        return EncodeSpec(self.tokenizer, self.instances, self.masking, self.packing, self.mixing.seed,
                          self.output.format, self.output.shard_options, self.output.segment_compression,
                          self.provenance, self.word_starts)

    def __getstate__(self):
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "vocab"}

    def __setstate__(self, state) -> None:
        for name, value in dict(state, vocab=None).items():
            object.__setattr__(self, name, value)
