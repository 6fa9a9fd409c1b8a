"""One configuration object for a generation run, validated once, before any work.

The command line builds a :class:`GeneratorConfig`; the library API takes one directly.  The
resolve step (:mod:`bert_data.run.resolve`) validates it once and turns it into the small specs
the stages and the run use: nothing past that step sees this object, and no stage re-checks
options.  The fields' defaults are the only place defaults are written: the command line, the
compatibility layer for Google's and ALBERT's command lines and the loaders read theirs with
:func:`default_of`.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import InitVar, dataclass, field
from typing import List, Optional

from . import storage
from .format import layout


class ConfigError(ValueError):
    """An option value that cannot work; the message is one line naming the option (credentials
    in URLs redacted)."""

    def __init__(self, message: str):
        super().__init__(storage.redact(message))


def decode_separator(text: str) -> str:
    r"""Command lines cannot easily carry a newline: ``\n`` typed literally means newline."""
    return text.replace("\\n", "\n")


def separator_line_of(multiple_docs_separator: str) -> Optional[str]:
    """The text of the line that separates documents (``--multiple_docs_separator``), or None when
    documents are separated by blank lines."""
    text = decode_separator(multiple_docs_separator).strip()
    return text or None


def check_input_options(multiple_docs_in_single_file: bool, multiple_docs_separator: str,
                        text_field: Optional[str]) -> None:
    """The options that say how documents are read, which ``create_tfrecords`` and ``bert-data
    build-vocab`` share; raise ConfigError on the first problem."""
    if not multiple_docs_separator:
        raise ConfigError("--multiple_docs_separator must not be empty (\\n means a blank line)")
    separator_line = separator_line_of(multiple_docs_separator)
    if separator_line is not None and "\n" in separator_line:
        raise ConfigError(
            "--multiple_docs_separator must fit on one line: documents are separated by a line "
            f"that holds it, got {multiple_docs_separator!r}"
        )
    if text_field is not None:
        if not isinstance(text_field, str) or not text_field:
            raise ConfigError(f"--text_field must be a non-empty key or column name, got {text_field!r}")
        if multiple_docs_in_single_file:
            raise ConfigError(
                "--text_field and --multiple_docs_in_single_file contradict each other: given, --text_field reads "
                "every file that is not a table as JSON Lines, which always holds one document a line"
            )


def input_encoding_of(value) -> str:
    """``--input_encoding``: a text encoding Python knows, by its canonical name (``latin-1`` ->
    ``iso8859-1``: one name a codec, in the manifest and the ``--resume`` fingerprint), or ``auto``
    (needs charset-normalizer); raise ConfigError otherwise."""
    import codecs
    import importlib.util

    if value == "auto":
        if importlib.util.find_spec("charset_normalizer") is None:
            raise ConfigError("--input_encoding auto needs charset-normalizer: pip install 'bert_data[encoding]' "
                              "(or pip install charset-normalizer), or name the encoding (e.g. latin-1)")
        return value
    try:
        info = codecs.lookup(value) if isinstance(value, str) and value else None
    except LookupError:
        info = None
    if info is None or not getattr(info, "_is_text_encoding", True):
        raise ConfigError(f"--input_encoding must be a text encoding Python knows (utf-8, latin-1, cp1252, utf-16, "
                          f"shift_jis, ...) or auto, got {value!r}")
    return info.name


# --pack_sequences: the most instances a row holds unless --max_sequences_per_pack says (issue 30).
# Graphcore's 3 caps the fill when a split has many short instances (83% at 512 tokens on the
# benchmark corpus at seed 3): rows of three short ones; 16 packs them (99.8%), and the trainer
# pays k slots of next_sentence_* and P + k prediction slots a row.  (Manifests that do not
# record k were written with format.layout.DEFAULT_SEQUENCES_PER_PACK, 3.)
SEQUENCES_PER_PACK = 16

# Options that say how a run is carried out, never what it writes: the one list.  They are kept
# out of the manifest and the --resume fingerprint, and become the run's ``RunControl``.
RUN_CONTROL_OPTIONS = ("num_workers", "overwrite", "resume", "work_dir", "allow_paths_outside_prefix",
                       "read_path_lists_as_text")


@dataclass
class GeneratorConfig:
    # The documents: metadata files listing them, or --input_files paths and globs (or both).
    metadata_files: List[str] = field(default_factory=list)
    vocab_file: str = ""  # WordPiece vocab.txt; with spm_model_file, the ids' file (optional)
    input_files_prefix: str = ""
    do_lower_case: bool = False
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    min_short_seq_length: Optional[int] = None  # see short_min
    dupe_factor: int = 10
    mask_whole_word: bool = False
    multiple_docs_in_single_file: bool = False
    multiple_docs_separator: str = "\n"
    single_sentence_per_line: bool = False
    # The text's key in JSON Lines and its column in tables (None: "text").  Given, every file
    # that is not a table is read as JSON Lines, whatever its extension.
    text_field: Optional[str] = None
    # Read metadata entries that resolve outside input_files_prefix (.., absolute paths, URLs,
    # symbolic links leading out): refused by default.
    allow_paths_outside_prefix: bool = False
    # The encoding of text files (a Python codec's name, or "auto": detected per file); UTF-8 files
    # starting with a UTF-16/UTF-32 byte-order mark are read as such.
    input_encoding: str = "utf-8"
    # Read an --input_files file whose lines are all paths of existing files as text (by default
    # refused: a metadata file given to the wrong option).
    read_path_lists_as_text: bool = False
    spacy_model: Optional[str] = None
    split_num: int = 1000
    output_dir: str = "./tfrecords/"
    num_output_files: int = 10
    # Shards sized by content instead of counted (the count is then set during the run).
    records_per_file: Optional[int] = None
    megabytes_per_file: Optional[float] = None
    name: str = "examples"
    seed: int = 0
    num_workers: Optional[int] = None
    val_fraction: float = 0.0
    val_metadata_files: List[str] = field(default_factory=list)
    val_seed: int = 0  # chooses the --val_fraction documents; --seed never moves them
    keep_corpus_order: bool = False  # units of neighbouring documents instead of a mixed corpus
    short_seq_draw: str = "document"  # when the short target length is drawn: per document or chunk
    overwrite: bool = False
    resume: bool = False
    # Recipes after BERT (issue: MLM-only, n-gram masking, formats).
    mlm_only: bool = False
    allow_cross_document_examples: bool = False
    document_separator_token: str = "[SEP]"
    overlap_size: Optional[int] = None
    disable_masking: bool = False
    max_ngram_size: int = 1
    # SpanBERT's span masking: geometric spans of whole words (bert_data.pipeline.span_masking).
    span_masking: bool = False
    # Each token's word start stored with the records (a word_starts feature), as the tokenizer
    # splits words: for load-time whole-word/span masks with pieces that carry no word marks.
    # Turned on by the resolve step when whole-word masks at generation need it.
    store_word_starts: bool = False
    v2_feature_names: bool = False
    compression: Optional[str] = None
    # The trainer's own format (issue 20): tfrecord, hdf5, parquet, mds or megatron (see
    # bert_data.format.output_formats).
    output_format: str = "tfrecord"
    # Documents named directly (paths or globs, relative to input_files_prefix), as Google's
    # --input_file and our --input_files give them.
    input_files: List[str] = field(default_factory=list)
    # Google's --output_file: the shards are exactly these files (one directory), instead of
    # OUTPUT_DIR/NAME-i.tfrecords; output_dir is then their directory.
    output_files: List[str] = field(default_factory=list)
    # Other tokenizers and ALBERT's sentence order (issue 13): see bert_data.tokenizers.
    tokenizer_file: Optional[str] = None  # a Hugging Face tokenizer.json
    spm_model_file: Optional[str] = None  # a SentencePiece model, tokenized as ALBERT does
    pad_token: Optional[str] = None  # special tokens: None = the tokenizer's own, else BERT's
    unk_token: Optional[str] = None
    cls_token: Optional[str] = None
    sep_token: Optional[str] = None
    mask_token: Optional[str] = None
    sentence_order_prediction: bool = False
    # Packed sequences (issue 21, Graphcore's packed BERT): instances packed into rows of
    # max_seq_length, at most max_sequences_per_pack (None: SEQUENCES_PER_PACK, or as many of
    # the shortest instances as fit) a row.
    pack_sequences: bool = False
    max_sequences_per_pack: Optional[int] = None
    # Where data lives (issue 14): the directory or URL tasks exchange intermediate data through
    # (default: the output directory's work directory, see run.run_files; with a Dask cluster
    # and a URL output, the output's).
    work_dir: Optional[str] = None
    # Corpus recipes (issue 29): documents repeating one listed before them removed (exact: equal
    # normalized text; near: MinHash/LSH Jaccard similarity of word shingles at least the
    # threshold), and documents (or with decontaminate_mode passages, lines) sharing a word n-gram
    # with an evaluation set (see bert_data.pipeline.dedup and .decontamination).
    dedup: Optional[str] = None
    dedup_threshold: float = 0.8
    dedup_shingle_size: int = 5
    decontaminate: List[str] = field(default_factory=list)
    decontamination_ngram: int = 13
    decontaminate_mode: str = "documents"
    # Corpus recipes (issue 29): a TOML or JSON file of sources, each with its inputs and a
    # weight, a token budget or a share of the run's tokens (see run/sources_file.py), instead of
    # --metadata_files/--input_files; and every record's source and document (provenance).
    sources: Optional[str] = None
    record_provenance: bool = False
    # The former name of text_field, still accepted by the constructor.
    jsonl_text_key: InitVar[Optional[str]] = None

    def __post_init__(self, jsonl_text_key: Optional[str]) -> None:
        if jsonl_text_key is not None:
            if self.text_field is not None and self.text_field != jsonl_text_key:
                raise ConfigError(f"text_field {self.text_field!r} and its former name jsonl_text_key "
                                  f"{jsonl_text_key!r} disagree: give one")
            self.text_field = jsonl_text_key

    # ------------------------------------------------------------------ derived values
    @property
    def max_num_tokens(self) -> int:
        """Room for tokens in a pair: ``[CLS] A [SEP] B [SEP]`` takes three special tokens;
        an MLM-only ``[CLS] tokens [SEP]`` two."""
        return self.max_seq_length - (2 if self.mlm_only else 3)

    @property
    def short_min(self) -> int:
        """The shortest target length: --min_short_seq_length, by default 2 (Google), or for
        MLM-only windows the overlap + 2 (Cerebras), so that a short window still moves on."""
        if self.min_short_seq_length is not None:
            return self.min_short_seq_length
        return min(self.window_overlap + 2, self.max_num_tokens) if self.mlm_only else 2

    @property
    def window_overlap(self) -> int:
        """MLM-only: tokens a window shares with the one before (Cerebras: max_seq_length / 4)."""
        return self.overlap_size if self.overlap_size is not None else self.max_seq_length // 4

    @property
    def sequences_per_pack(self) -> int:
        """The most instances a record holds: 0 for unpacked records (one instance each)."""
        if not self.pack_sequences:
            return 0
        if self.max_sequences_per_pack is None:
            return min(SEQUENCES_PER_PACK, max(2, self.max_seq_length // self.shortest_instance))
        return self.max_sequences_per_pack

    @property
    def shortest_instance(self) -> int:
        """The shortest instance: [CLS] x [SEP] (MLM-only) or [CLS] a [SEP] b [SEP]."""
        return 3 if self.mlm_only else 5

    @property
    def separator_line(self) -> Optional[str]:
        """The text of a separator line, or None when documents are separated by blank lines."""
        return separator_line_of(self.multiple_docs_separator)

    @property
    def sizes_shards(self) -> bool:
        """Shards sized by records or megabytes: their count per split is set during the run."""
        return self.records_per_file is not None or self.megabytes_per_file is not None

    @property
    def has_validation(self) -> bool:
        return self.val_fraction > 0 or bool(self.val_metadata_files)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def feature_specs(self) -> List[layout.FeatureSpec]:
        """The record layout this configuration writes: what the writer encodes and the manifest
        records."""
        predictions = self.max_predictions_per_seq
        if self.pack_sequences:
            predictions = layout.packed_predictions(predictions, self.sequences_per_pack)
        return layout.feature_specs(self.max_seq_length, predictions, mlm_only=self.mlm_only,
                                    masked=not self.disable_masking, v2_feature_names=self.v2_feature_names,
                                    max_sequences_per_pack=self.sequences_per_pack,
                                    provenance=self.record_provenance, word_starts=self.store_word_starts)

    # ------------------------------------------------------------------ validation
    def validate(self) -> "GeneratorConfig":
        """Check every option on its own and against the others; raise ConfigError on the first
        problem.  Files are checked later, by the planner, which can name the metadata line."""
        for name in ("metadata_files", "val_metadata_files", "input_files", "output_files", "decontaminate"):
            if isinstance(getattr(self, name), str):
                setattr(self, name, [getattr(self, name)])
        if self.sources is not None:
            if not isinstance(self.sources, str) or not self.sources:
                raise ConfigError(f"--sources must name a TOML or JSON file, got {self.sources!r}")
            if self.metadata_files or self.input_files or self.val_metadata_files:
                raise ConfigError("--sources lists the documents: give the inputs in the sources file, not also "
                                  "--metadata_files, --input_files or --val_metadata_files")
        elif not self.metadata_files and not self.input_files:
            raise ConfigError("no documents: give --metadata_files (files listing them), --input_files (paths or "
                              "globs), Google's --input_file or --sources (a file of sources)")
        self._validate_tokenizer()

        def integer(name, minimum, maximum=None, why=""):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"--{name} must be a whole number, got {value!r}")
            if value < minimum or (maximum is not None and value > maximum):
                upper = f" and at most {maximum}" if maximum is not None else ""
                raise ConfigError(f"--{name} must be at least {minimum}{upper}{why}, got {value}")

        integer("max_seq_length", 6, why=" ([CLS] A [SEP] B [SEP] with room for a short pair)")
        integer(
            "max_predictions_per_seq", 1, self.max_seq_length, why=" (it cannot exceed --max_seq_length)"
        )
        if self.min_short_seq_length is not None:
            integer(
                "min_short_seq_length",
                2,
                self.max_seq_length - 4,
                why=f" (allowed range is [2, max_seq_length - 3) = [2, {self.max_seq_length - 3}))",
            )
        integer("dupe_factor", 1)
        integer("split_num", 1)
        integer("num_output_files", 1)
        if self.records_per_file is not None:
            integer("records_per_file", 1)
        if self.megabytes_per_file is not None:
            if isinstance(self.megabytes_per_file, bool) or not isinstance(self.megabytes_per_file, (int, float)) \
                    or not self.megabytes_per_file > 0:
                raise ConfigError(f"--megabytes_per_file must be a positive number, got {self.megabytes_per_file!r}")
            if self.records_per_file is not None:
                raise ConfigError("--records_per_file and --megabytes_per_file contradict each other: size shards "
                                  "by one of them")
        integer("seed", 0, 2**63 - 1)
        integer("val_seed", 0, 2**63 - 1)
        if self.short_seq_draw not in ("document", "chunk"):
            raise ConfigError(f"--short_seq_draw must be document or chunk, got {self.short_seq_draw!r}")
        if self.num_workers is not None:
            integer("num_workers", 1)

        def probability(name, low_open: bool, high_open: bool):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"--{name} must be a number, got {value!r}")
            low_ok = value > 0 if low_open else value >= 0
            high_ok = value < 1 if high_open else value <= 1
            if not (low_ok and high_ok):
                interval = ("(" if low_open else "[") + "0, 1" + (")" if high_open else "]")
                # 15 for 15%: say how a fraction is written.
                percent = f" (a fraction: {value / 100:g} for {value:g}%)" if 1 < value <= 100 else ""
                raise ConfigError(f"--{name} must be in {interval}, got {value}{percent}")

        probability("masked_lm_prob", low_open=True, high_open=False)
        probability("short_seq_prob", low_open=False, high_open=False)
        probability("val_fraction", low_open=False, high_open=True)
        if self.val_fraction > 0 and self.val_metadata_files:
            raise ConfigError(
                "--val_fraction and --val_metadata_files contradict each other: choose validation "
                "documents by hash or list them, not both"
            )
        check_input_options(self.multiple_docs_in_single_file, self.multiple_docs_separator, self.text_field)
        self.input_encoding = input_encoding_of(self.input_encoding)
        if not self.name or os.sep in self.name or (os.altsep and os.altsep in self.name):
            raise ConfigError(f"--name must be a plain file name prefix, got {self.name!r}")
        self._validate_recipes(integer)
        self._validate_packing(integer)
        self._validate_screening(integer)
        if self.overwrite and self.resume:
            raise ConfigError("--overwrite and --resume contradict each other: start again or continue, not both")
        if any("://" in path for path in self.output_files):  # (issue 14) a URL output is a directory
            raise ConfigError("--output_file names local files; to write to a URL give --output_dir s3://... (or gs://)")
        if self.output_files:
            self._validate_output_files()
        if not self.output_dir:
            raise ConfigError("--output_dir must not be empty")
        return self

    def _validate_tokenizer(self) -> None:
        if self.tokenizer_file and self.spm_model_file:
            raise ConfigError("--tokenizer_file and --spm_model_file contradict each other: choose one tokenizer")
        if self.tokenizer_file and self.vocab_file:
            raise ConfigError("--tokenizer_file and --vocab_file contradict each other: a tokenizer.json holds its "
                              "own vocabulary")
        if self.tokenizer_file and self.do_lower_case:
            raise ConfigError("--do_lower_case does not apply to --tokenizer_file: the tokenizer's own normalizer "
                              "decides the case")
        if not (self.vocab_file or self.tokenizer_file or self.spm_model_file):
            raise ConfigError("--vocab_file is required (or --tokenizer_file, or --spm_model_file)")
        for role in ("pad", "unk", "cls", "sep", "mask"):
            value = getattr(self, f"{role}_token")
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ConfigError(f"--{role}_token must be a token of the vocabulary, got {value!r}")
        if self.sentence_order_prediction and self.mlm_only:
            raise ConfigError("--sentence_order_prediction needs sentence pairs: drop --mlm_only or it")

    def _validate_screening(self, integer) -> None:
        from .pipeline.decontamination import DECONTAMINATE_MODES, MAX_EVAL_SETS
        from .pipeline.dedup import DEDUP_MODES

        if self.dedup is not None and self.dedup not in DEDUP_MODES:
            raise ConfigError(f"--dedup must be {' or '.join(DEDUP_MODES)}, got {self.dedup!r}")
        threshold = self.dedup_threshold
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
            raise ConfigError(f"--dedup_threshold must be a Jaccard similarity in (0, 1], got {threshold!r}")
        integer("dedup_shingle_size", 1, 64)
        integer("decontamination_ngram", 1, 1000)
        if self.decontaminate_mode not in DECONTAMINATE_MODES:
            raise ConfigError(f"--decontaminate_mode must be {' or '.join(DECONTAMINATE_MODES)}, got "
                              f"{self.decontaminate_mode!r}")
        if len(self.decontaminate) > MAX_EVAL_SETS:
            raise ConfigError(f"--decontaminate takes at most {MAX_EVAL_SETS} evaluation sets, got "
                              f"{len(self.decontaminate)}; join some into one file")
        if len(set(self.decontaminate)) != len(self.decontaminate):
            raise ConfigError("--decontaminate names an evaluation set twice")

    def _validate_packing(self, integer) -> None:
        if self.max_sequences_per_pack is None:
            return
        if not self.pack_sequences:
            raise ConfigError("--max_sequences_per_pack applies to --pack_sequences only; add --pack_sequences or "
                              "drop it")
        integer("max_sequences_per_pack", 2, max(2, self.max_seq_length // self.shortest_instance),
                why=" (2 or more instances a row; no more than the shortest instances fit)")

    def _validate_output_files(self) -> None:
        """Google's --output_file: the named files are the shards, so they set the output
        directory and the number of shards."""
        paths = [os.path.abspath(path) for path in self.output_files]
        directories = sorted({os.path.dirname(path) for path in paths})
        if len(directories) > 1:
            raise ConfigError(f"--output_file: the files must be in one directory (the manifest lists them by name), "
                              f"got {directories[0]} and {directories[1]}")
        names = [os.path.basename(path) for path in paths]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ConfigError(f"--output_file names {repeated[0]} more than once")
        for path in paths:
            if os.path.isdir(path):
                raise ConfigError(f"--output_file {path} is a directory; name the file to write")
        if self.has_validation:
            raise ConfigError("--output_file writes one dataset: for a validation split (--val_fraction, "
                              "--val_metadata_files) use --output_dir")
        self.output_files = paths
        self.output_dir = directories[0]
        self.num_output_files = len(paths)

    def _validate_output_format(self) -> None:
        from .format.output_formats import FORMATS

        fmt = FORMATS.get(self.output_format)
        if fmt is None:
            raise ConfigError(f"--output_format must be one of {', '.join(FORMATS)}, got {self.output_format!r}")
        if self.compression is not None and self.compression not in fmt.compressions:
            if not fmt.compressions:
                raise ConfigError(f"--output_format {self.output_format} has no --compression, got "
                                  f"{self.compression!r}")
            names = " or ".join([", ".join(fmt.compressions[:-1]), fmt.compressions[-1]] if len(fmt.compressions) > 1
                                else fmt.compressions)
            raise ConfigError(f"--compression must be {names} for --output_format {self.output_format}, got "
                              f"{self.compression!r}")
        if self.v2_feature_names and not fmt.layout_names:
            raise ConfigError("--v2_feature_names names TFRecord features; --output_format "
                              f"{self.output_format} has its own names")
        if self.pack_sequences and not fmt.instances:
            raise ConfigError(f"--pack_sequences packs instances (TFRecord, HDF5, Parquet, MDS); --output_format "
                              f"{self.output_format} holds the tokenized corpus")
        if self.record_provenance and not fmt.instances:
            raise ConfigError(f"--record_provenance marks records; --output_format {self.output_format} holds the "
                              "tokenized corpus, its documents in listed order (the manifest's sources give each "
                              "source's range): drop --record_provenance")
        if self.store_word_starts and not fmt.instances:
            raise ConfigError(f"--store_word_starts stores a column of records; --output_format {self.output_format} "
                              "holds the tokenized corpus: drop --store_word_starts")
        if self.record_provenance and self.pack_sequences:
            raise ConfigError("--record_provenance marks each record with one document, and a packed row holds "
                              "several: drop --pack_sequences or --record_provenance")
        if self.output_files and not fmt.single_file_shards:
            raise ConfigError(f"--output_file names single files: --output_format {self.output_format} writes a "
                              "directory (use --output_dir)")

    def _validate_recipes(self, integer) -> None:
        integer("max_ngram_size", 1, 10)
        if self.span_masking and self.max_ngram_size > 1:
            raise ConfigError("--span_masking and --max_ngram_size are two ways of masking spans: choose one")
        self._validate_output_format()
        if not self.mlm_only:
            for flag, value in (("--allow_cross_document_examples", self.allow_cross_document_examples),
                                ("--overlap_size", self.overlap_size is not None),
                                ("--disable_masking", self.disable_masking)):
                if value:
                    raise ConfigError(f"{flag} applies to --mlm_only data only; add --mlm_only or drop {flag}")
            return
        if self.overlap_size is not None:
            integer("overlap_size", 0, self.max_num_tokens - 1,
                    why=" (a window must move on: less than max_seq_length - 2)")
        if self.short_seq_prob > 0 and self.short_min <= self.window_overlap:
            raise ConfigError(
                f"--min_short_seq_length {self.min_short_seq_length} must exceed the window overlap "
                f"{self.window_overlap} (--overlap_size, default max_seq_length / 4) with --short_seq_prob > 0"
            )
        if not self.document_separator_token.strip():
            raise ConfigError("--document_separator_token must be a vocabulary token, e.g. [SEP]")
        if self.disable_masking:
            if self.dupe_factor != 1:
                raise ConfigError("--disable_masking writes unmasked records (masks are drawn at load time): "
                                  "use --dupe_factor 1")
            if self.mask_whole_word or self.max_ngram_size > 1 or self.span_masking:
                raise ConfigError("--mask_whole_word, --max_ngram_size and --span_masking choose masks: with "
                                  "--disable_masking "
                                  "they belong to the loader's masking function")


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, which a container or ``taskset``
    may narrow), else the machine's."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # (not on every platform)
        return os.cpu_count() or 1


def default_of(option: str):
    """The default of a :class:`GeneratorConfig` option (its field's default): the parser's help,
    its defaults and those the compatibility layer applies all come from here."""
    spec = {f.name: f for f in dataclasses.fields(GeneratorConfig)}[option]
    return spec.default_factory() if spec.default is dataclasses.MISSING else spec.default
