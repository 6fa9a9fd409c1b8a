"""The manifest of a dataset split: ``data_params.json``, its only owner.

Every output directory (or each of ``train/`` and ``val/``) holds one.  It is written last, so a
directory without it is not a finished dataset, and it tells readers everything they need:
the record layout, the compression, the vocabulary, the masking options (for load-time
masking) and the counts of that split.  The writer builds a :class:`Manifest`; the loaders and
the tools read one with :meth:`Manifest.read`; no other module knows the file's name or keys.

The JSON is flat, as Cerebras's ``data_params.json`` is: the generator's options (every field of
:class:`bert_data.config.GeneratorConfig` but the run-control ones) side by side with the
counts.  Manifests written by earlier versions lack some keys; reading fills them as those
versions behaved.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Optional

from .. import storage
from .layout import DEFAULT_SEQUENCES_PER_PACK, FeatureSpec, feature_specs, packed_predictions
from .output_formats import DEFAULT_FORMAT, TFRECORD

MANIFEST_NAME = "data_params.json"


@dataclass
class SkippedDocuments:
    count: int = 0
    by_reason: Dict[str, int] = field(default_factory=dict)
    first: List[dict] = field(default_factory=list)  # [{"path", "reason"}], the first few


@dataclass
class Manifest:
    """One split of a dataset, as its ``data_params.json`` records it."""

    options: Dict[str, Any]  # the generator options the split was made with
    n_examples: int = 0
    n_docs: int = 0
    split: str = "train"  # (the fields' order is the JSON's: as the writer has always written it)
    examples_per_file: Dict[str, int] = field(default_factory=dict)  # shard name -> records, in order
    bytes_per_file: Dict[str, int] = field(default_factory=dict)
    # Every file of the split (shards, their companions, files beside them such as MDS's
    # index.json) -> the SHA-256 of its bytes (format/checksums.py); empty in manifests of
    # versions before it was recorded.
    sha256_per_file: Dict[str, str] = field(default_factory=dict)
    features: List[FeatureSpec] = field(default_factory=list)
    n_docs_listed: Optional[int] = None
    n_sentences: Optional[int] = None
    n_tokens: Optional[int] = None
    n_units: Optional[int] = None
    invalid_utf8_replaced: int = 0
    documents_skipped: SkippedDocuments = field(default_factory=SkippedDocuments)
    # Documents of --metadata_files left out of train because --val_metadata_files names them.
    n_docs_held_out: int = 0
    vocab_sha256: Optional[str] = None
    # The vocabulary's absolute path, beside its hash: the options keep the path as typed, which
    # tools run from another directory cannot resolve.
    vocab_path: Optional[str] = None
    # The same for a --tokenizer_file or --spm_model_file (None for a WordPiece vocab.txt).
    tokenizer_path: Optional[str] = None
    vocab_size: Optional[int] = None
    bert_data_version: Optional[str] = None
    # Instances in the records (more than n_examples, the records, when rows are packed), and the
    # records' tokens that are not padding over all their slots (max_seq_length a record).
    n_instances: Optional[int] = None
    fill_rate: Optional[float] = None
    # --dedup / --decontaminate (None without them): the split's documents removed, by reason, per
    # evaluation set and per input file ("by_file"); see run/screening.py and describe_removed.
    documents_removed: Optional[Dict[str, Any]] = None
    # With --sources: each source's request and what was made of it (documents, tokens and
    # instances requested, listed and realized; run/source_plan.py); absent otherwise.
    per_source: Optional[List[dict]] = None

    # ------------------------------------------------------------------ options readers use
    def option(self, name: str, default=None):
        """An option as recorded, else ``default`` (a switch the manifest lacks was off)."""
        value = self.options.get(name)
        return default if value is None else value

    @property
    def max_seq_length(self) -> int:
        return int(self.options["max_seq_length"])

    @property
    def max_predictions_per_seq(self) -> int:
        return int(self.options["max_predictions_per_seq"])

    @property
    def mlm_only(self) -> bool:
        return bool(self.option("mlm_only", False))

    @property
    def masked(self) -> bool:
        """False for ``--disable_masking`` data (masks are drawn at load time)."""
        return not self.option("disable_masking", False)

    @property
    def packed(self) -> bool:
        """Records are packed rows of several instances (``--pack_sequences``)."""
        return bool(self.option("pack_sequences", False))

    @property
    def max_sequences_per_pack(self) -> int:
        """The most instances a record holds (1 when records are not packed)."""
        if not self.packed:
            return 1
        return int(self.option("max_sequences_per_pack", DEFAULT_SEQUENCES_PER_PACK))

    @property
    def v2_feature_names(self) -> bool:
        return bool(self.option("v2_feature_names", False))

    @property
    def output_format(self) -> str:
        """The format of the shards (``tfrecord`` for manifests before there were others)."""
        return self.option("output_format") or DEFAULT_FORMAT

    @property
    def compression(self) -> Optional[str]:
        """None, "gzip" or "zlib" (TFRecord); ``ValueError`` when the manifest records anything
        else.  Other formats compress inside their files as the format does: the recorded name."""
        from .tfrecord import normalize_compression

        recorded = self.option("compression")
        if self.output_format != TFRECORD:
            return recorded
        compression = normalize_compression(recorded)
        if compression == "auto":
            raise ValueError(f"compression {recorded!r} is not null, gzip or zlib")
        return compression

    @property
    def vocab_file(self) -> Optional[str]:
        """The vocabulary path as recorded (see :meth:`find_vocab_file`)."""
        return self.option("vocab_file")

    @property
    def tokenizer_file(self) -> Optional[str]:
        """The Hugging Face ``tokenizer.json`` the data was made with, as recorded (or None)."""
        return self.option("tokenizer_file")

    @property
    def spm_model_file(self) -> Optional[str]:
        """The SentencePiece model the data was made with, as recorded (or None)."""
        return self.option("spm_model_file")

    @property
    def do_lower_case(self) -> bool:
        return bool(self.option("do_lower_case", False))

    @property
    def special_token_options(self) -> tuple:
        """``--pad_token --unk_token --cls_token --sep_token --mask_token`` as given (None: the
        tokenizer's own, else BERT's)."""
        return tuple(self.option(f"{role}_token") for role in ("pad", "unk", "cls", "sep", "mask"))

    @property
    def sentence_order_prediction(self) -> bool:
        """True when ``next_sentence_labels`` holds ALBERT's sentence-order label (1: A and B
        swapped) rather than BERT's next-sentence label (1: B is random)."""
        return bool(self.option("sentence_order_prediction", False))

    @property
    def specs(self) -> List[FeatureSpec]:
        """The record layout: the ``features`` table, else (older manifests) the one the options
        imply."""
        if self.features:
            return list(self.features)
        return self.implied_specs

    @property
    def implied_specs(self) -> List[FeatureSpec]:
        """The record layout the options imply (what the generator writes for them)."""
        k = self.max_sequences_per_pack if self.packed else 0
        predictions = packed_predictions(self.max_predictions_per_seq, k) if k else self.max_predictions_per_seq
        return feature_specs(self.max_seq_length, predictions, mlm_only=self.mlm_only, masked=self.masked,
                             v2_feature_names=self.v2_feature_names, max_sequences_per_pack=k,
                             provenance=bool(self.option("record_provenance", False)),
                             word_starts=bool(self.option("store_word_starts", False)))

    def find_vocab_file(self, manifest_path: Optional[str] = None) -> Optional[str]:
        """The vocabulary file this manifest names, if it exists: its absolute path
        (``vocab_path``), else the path as recorded (absolute, or relative to the current
        directory), else relative to the manifest's directory."""
        if self.vocab_path and os.path.isfile(self.vocab_path):
            return self.vocab_path
        return self.find_file(self.vocab_file, manifest_path)

    def find_tokenizer_file(self, manifest_path: Optional[str] = None) -> Optional[str]:
        """The ``tokenizer_file`` or ``spm_model_file`` this manifest names, if it exists: its
        absolute path (``tokenizer_path``), else as recorded, else beside the manifest."""
        if self.tokenizer_path and os.path.isfile(self.tokenizer_path):
            return self.tokenizer_path
        return self.find_file(self.spm_model_file or self.tokenizer_file, manifest_path)

    @staticmethod
    def find_file(path: Optional[str], manifest_path: Optional[str] = None) -> Optional[str]:
        """A file the manifest records, if it exists: as recorded (absolute, or relative to the
        current directory), else relative to the manifest's directory."""
        if not path:
            return None
        if os.path.isfile(path):
            return path
        if manifest_path and not os.path.isabs(path):
            beside = os.path.join(os.path.dirname(manifest_path), path)
            if os.path.isfile(beside):
                return beside
        return None

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict:
        data = dict(self.options)  # as the run records them (run/resolve.py: recorded_options)
        for item in fields(self):
            if item.name == "options" or (item.name == "per_source" and self.per_source is None):
                continue
            value = getattr(self, item.name)
            if item.name == "features":
                value = {spec.name: {"dtype": spec.dtype, "length": spec.length} for spec in value}
            elif isinstance(value, SkippedDocuments):
                value = {"count": value.count, "by_reason": dict(sorted(value.by_reason.items())),
                         "first": list(value.first)}
            data[item.name] = value
        return storage.redact_data(data)  # no credentials of URLs in a file

    @classmethod
    def from_json(cls, data: dict) -> "Manifest":
        if not isinstance(data, dict):
            raise ValueError(f"a manifest is a JSON object, got {type(data).__name__}")
        known = {item.name for item in fields(cls)} - {"options"}
        values: Dict[str, Any] = {key: data[key] for key in known if key in data}
        if "features" in values:
            values["features"] = [FeatureSpec(name, entry["dtype"], int(entry["length"]))
                                  for name, entry in (values["features"] or {}).items()]
        if "documents_skipped" in values:
            skipped = values["documents_skipped"] or {}
            values["documents_skipped"] = SkippedDocuments(int(skipped.get("count", 0)),
                                                           dict(skipped.get("by_reason", {})),
                                                           list(skipped.get("first", [])))
        options = {key: value for key, value in data.items() if key not in known}
        return cls(options=options, **values)

    # ------------------------------------------------------------------ files
    # A directory may be a URL (s3://, gs://, ...): the manifest is then one object there.
    @staticmethod
    def path_in(directory: str, name: str = MANIFEST_NAME) -> str:
        return storage.join(directory, name)

    @classmethod
    def exists_in(cls, directory: str, name: str = MANIFEST_NAME) -> bool:
        if storage.is_url(directory):
            return storage.exists(cls.path_in(directory, name))
        return os.path.isfile(cls.path_in(directory, name))

    @staticmethod
    def name_for_files(first_file: str) -> str:
        """The manifest of a run that wrote named files (Google's ``--output_file``) is named
        after the first of them (``x.tfrecord`` -> ``x.tfrecord.data_params.json``), so that
        runs writing other files into the same directory each keep their own."""
        return f"{os.path.basename(first_file)}.{MANIFEST_NAME}"

    @staticmethod
    def is_run_manifest_name(name: str) -> bool:
        """A manifest named after a run's first file (see :meth:`name_for_files`)."""
        return name.endswith("." + MANIFEST_NAME) and len(name) > len(MANIFEST_NAME) + 1

    @classmethod
    def read(cls, path: str) -> "Manifest":
        """The manifest at ``path`` (a ``data_params.json`` or the directory holding one).
        Raises ``ValueError`` naming the file when it is not a manifest."""
        if storage.is_url(path) and not path.endswith(".json"):
            path = cls.path_in(path)
        elif os.path.isdir(path):
            path = cls.path_in(path)
        try:
            if storage.is_url(path):
                data = json.loads(storage.read_bytes(path))
            else:
                with open(path, encoding="utf-8") as handle:
                    data = json.load(handle)
            return cls.from_json(data)
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"{path}: not a bert_data manifest ({error})") from None

    def write(self, directory: str, name: str = MANIFEST_NAME) -> str:
        """Write atomically into ``directory`` (a reader never sees half a manifest; at a URL it is
        one object, complete or absent)."""
        path = self.path_in(directory, name)
        if storage.is_url(path):
            storage.write_bytes(path, (json.dumps(self.to_json(), indent=2) + "\n").encode("utf-8"))
        else:
            write_json_atomic(path, self.to_json())
        return path

    @staticmethod
    def is_manifest_file(name: str) -> bool:
        """``data_params.json`` or its temporary: files of a run's output."""
        return name in (MANIFEST_NAME, MANIFEST_NAME + ".tmp")


def describe_removed(removed: Dict[str, Any]) -> str:
    """A manifest's ``documents_removed`` on one line: ``14 documents removed (6 exact
    duplicates; 5 near duplicates; contaminated: squad.jsonl 2, glue.jsonl 1)``."""
    parts = []
    for key, name in (("exact_duplicates", "exact duplicates"), ("near_duplicates", "near duplicates")):
        if removed.get(key):
            parts.append(f"{removed[key]:,} {name}")
    if removed.get("contaminated") is not None:
        parts.append("contaminated: " + ", ".join(f"{name} {count:,}" for name, count in removed["contaminated"].items()))
    if removed.get("contaminated_lines") is not None:
        parts.append("lines removed: " + ", ".join(
            f"{name} {entry['lines']:,} lines of {entry['documents']:,} documents"
            for name, entry in removed["contaminated_lines"].items()))
    return f"{removed.get('documents', 0):,} documents removed ({'; '.join(parts) or 'none found'})"


def write_json_atomic(path: str, data: dict, sync: bool = True) -> None:
    """Write JSON through a temporary file and a rename; ``sync`` makes it durable first."""
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)
        handle.write("\n")
        handle.flush()
        if sync:
            os.fsync(handle.fileno())
    os.replace(path + ".tmp", path)
