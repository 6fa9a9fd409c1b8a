"""Masked-LM masks drawn at load time, for unmasked (``--disable_masking``) data.

:class:`DynamicMasking` applies :func:`bert_data.pipeline.masking.mask_tokens` (the generator's own
masking) to batches of columns, deterministically from a seed and a key per batch;
:func:`dynamic_masking` builds one with the dataset's masking options
(:func:`masking_spec`); :func:`masker_for` turns a reader's
``mask=`` option into one.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from ..format.layout import WORD_STARTS, canonical_name
from ..config import default_of

# The generator's default, for data whose manifest does not say.
SEPARATOR = default_of("document_separator_token")

__all__ = ["DynamicMasking", "dynamic_masking", "masker_for", "original_tokens", "Remasking", "STRATEGIES",
           "RecordKeys", "RowStreams"]

MASK_OUTPUTS = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


class DynamicMasking:
    """Masks drawn at load time, with the generator's rules (:func:`bert_data.pipeline.masking.mask_tokens`):
    ``masked_lm_prob`` of each row's tokens (rounded, at least 1, at most
    ``max_predictions_per_seq``), never [CLS], [SEP] or the document separator; 80% [MASK], 10%
    kept, 10% a random ordinary token (the shares settable); whole words, n-gram spans or
    SpanBERT's spans when asked (``spec.strategy``).

    ``masking(batch, key=None)`` maps ``{"input_ids" (or its v2 name): (n, L), "input_mask":
    (n, L), ...}`` (numpy; ``input_mask`` 1 for tokens) to a new dict: the same entries with the
    token ids masked (int32), plus ``masked_lm_positions`` and ``masked_lm_ids`` (int32) and
    ``masked_lm_weights`` (float32), each ``(n, max_predictions_per_seq)``.

    Deterministic: the masks of a batch depend only on ``(seed, *key)`` and the batch.  The
    readers pass ``key=(batch_number,)`` (numbered from 0 in read order), so the numpy readers
    and ``load_dataset`` give identical masks for the same seed and batches.  Without ``key``, calls
    are numbered 0, 1, 2... by the object.  ``seed=None`` draws a seed (kept in ``.seed``).
    ``spec`` (a :class:`bert_data.pipeline.masking.MaskingSpec`) replaces the separate options.
    """

    def __init__(self, vocab, masked_lm_prob: Optional[float] = None, max_predictions_per_seq: Optional[int] = None,
                 whole_word: bool = False, max_ngram_size: int = 1, seed: Optional[int] = None,
                 document_separator_token: str = SEPARATOR, spec=None):
        import numpy as np

        if spec is None:  # (None: the generator's defaults, as create_tfrecords has them)
            spec = masking_spec(None, vocab, document_separator_token, masked_lm_prob=masked_lm_prob,
                                max_predictions_per_seq=max_predictions_per_seq, whole_word=whole_word,
                                max_ngram_size=max_ngram_size)
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(2, np.uint64)[0] >> np.uint64(1))
        if isinstance(seed, bool) or int(seed) < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.vocab = vocab
        self.spec = spec
        self.seed = int(seed)
        self.document_separator_token = document_separator_token
        # Packed rows (input_mask holds instance indices): the most instances a row holds, else 0.
        self.max_sequences_per_pack = 0
        self._calls = 0

    # The settings, as the spec holds them.
    masked_lm_prob = property(lambda self: self.spec.masked_lm_prob)
    max_predictions_per_seq = property(lambda self: self.spec.max_predictions_per_seq)
    whole_word = property(lambda self: self.spec.whole_word)
    max_ngram_size = property(lambda self: self.spec.max_ngram_size)
    special_ids = property(lambda self: list(self.spec.special_ids))

    def __repr__(self) -> str:
        return (f"DynamicMasking(vocab={self.vocab.path!r}, masked_lm_prob={self.masked_lm_prob}, "
                f"max_predictions_per_seq={self.max_predictions_per_seq}, whole_word={self.whole_word}, "
                f"max_ngram_size={self.max_ngram_size}, strategy={self.spec.strategy!r}, "
                f"mask_token_share={self.spec.mask_token_share}, random_token_share={self.spec.random_token_share}, "
                f"seed={self.seed}, "
                f"document_separator_token={self.document_separator_token!r})")

    def rng(self, key: Sequence[int]):
        import numpy as np

        if isinstance(key, RecordKeys):
            return RowStreams([np.random.default_rng([self.seed, *(int(k) for k in row)]) for row in key])
        return np.random.default_rng([self.seed, *(int(k) for k in key)])

    def arrays(self, input_ids, input_mask, key: Sequence[int], word_starts=None):
        """``(input_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights)`` for a batch.
        ``word_starts``: the records' stored word starts (``--store_word_starts``), which whole
        words then follow instead of the pieces' marks."""
        import numpy as np

        from ..pipeline.masking import mask_tokens

        if word_starts is None and self.vocab.word_boundary is None and self.spec.strategy != "token":
            raise ValueError(f"{self.spec.strategy} masks need word starts, and the pieces of {self.vocab.path} show "
                             "none and the records store none: make the data with --store_word_starts")
        if word_starts is not None:
            word_starts = np.asarray(word_starts)
        if self.max_sequences_per_pack:
            return self._packed_arrays(np.asarray(input_ids), np.asarray(input_mask), key, word_starts)
        lengths = np.asarray(input_mask).sum(axis=1)
        out = mask_tokens(np.asarray(input_ids), lengths, self.spec, self.vocab, self.rng(key), word_starts)
        return (out.input_ids.astype(np.int32, copy=False), out.masked_lm_positions.astype(np.int32, copy=False),
                out.masked_lm_ids.astype(np.int32, copy=False), out.masked_lm_weights.astype(np.float32, copy=False))

    @property
    def prediction_slots(self) -> int:
        """Prediction slots of a row: ``max_predictions_per_seq``, plus one per instance for
        packed rows (their layout's)."""
        from ..pipeline.packing import packed_predictions

        if not self.max_sequences_per_pack:
            return self.max_predictions_per_seq
        return packed_predictions(self.max_predictions_per_seq, self.max_sequences_per_pack)

    def _packed_arrays(self, input_ids, input_mask, key, word_starts=None):
        """Packed rows are masked instance by instance, with the rules and budget of an unpacked
        instance, and the predictions laid out as the generator packs them."""
        import numpy as np

        from ..pipeline.masking import mask_tokens
        from ..pipeline.packing import instance_lengths, pack_columns

        n, width = input_ids.shape
        per_row = instance_lengths(input_mask, self.max_sequences_per_pack)
        sizes = (per_row > 0).sum(axis=1)
        lengths = per_row[per_row > 0]
        rows = np.repeat(np.arange(n), sizes)
        offsets = (np.cumsum(per_row, axis=1) - per_row)[per_row > 0]
        columns = np.arange(width)[None, :]
        inside = columns < lengths[:, None]
        source = np.where(inside, offsets[:, None] + columns, 0)
        ids = np.where(inside, input_ids[rows[:, None], source], 0)
        starts = None if word_starts is None else np.where(inside, word_starts[rows[:, None], source], 0)
        rng = self.rng(key)
        if isinstance(rng, RowStreams):  # each instance draws from its record's stream, in order
            rng = rng.rows(rows)
        out = mask_tokens(ids, lengths, self.spec, self.vocab, rng, starts)
        packed = pack_columns({"input_ids": out.input_ids, "masked_lm_positions": out.masked_lm_positions,
                               "masked_lm_ids": out.masked_lm_ids, "masked_lm_weights": out.masked_lm_weights},
                              lengths, sizes, width, self.max_sequences_per_pack, self.prediction_slots)
        return (packed["input_ids"], packed["masked_lm_positions"], packed["masked_lm_ids"],
                packed["masked_lm_weights"])

    def __call__(self, batch: Dict[str, "np.ndarray"], key: Optional[Sequence[int]] = None) -> Dict[str, "np.ndarray"]:
        if key is None:
            key = (self._calls,)
            self._calls += 1
        name = next((name for name in batch if canonical_name(name) == "input_ids"), None)
        if name is None or "input_mask" not in batch:
            raise ValueError(f"load-time masking needs input_ids and input_mask, got {sorted(batch)}")
        present = [n for n in MASK_OUTPUTS if n in batch]
        if present:
            raise ValueError(f"the batch is already masked (it has {present[0]})")
        ids, positions, labels, weights = self.arrays(batch[name], batch["input_mask"], key, batch.get(WORD_STARTS))
        out = dict(batch)
        out[name] = ids
        out.update(masked_lm_positions=positions, masked_lm_ids=labels, masked_lm_weights=weights)
        return out


class RecordKeys(tuple):
    """A ``key=`` of one key per row: row ``i`` is masked from ``(seed, *keys[i])`` alone, whatever
    else the batch holds (the resumable readers key each record by its epoch and index)."""


class RowStreams:
    """The random draws of :func:`bert_data.pipeline.masking.mask_tokens` (every one shaped
    ``(rows, ...)``) taken row by row, each row from its own generator: a row's masks do not depend
    on the rows beside it, and the batch is still masked in one vectorised call."""

    def __init__(self, generators):
        self.generators = list(generators)

    def rows(self, owners) -> "RowStreams":
        """Rows drawing from the generators of ``owners`` (shared: a record's instances draw in turn)."""
        return RowStreams([self.generators[int(i)] for i in owners])

    def _stacked(self, draw, shape, dtype):
        import numpy as np

        if not self.generators:
            return np.zeros(shape, dtype=dtype)
        return np.stack([draw(g) for g in self.generators])

    def random(self, shape):
        return self._stacked(lambda g: g.random(tuple(shape[1:])), shape, "float64")

    def integers(self, low, high, size):
        return self._stacked(lambda g: g.integers(low, high, size=tuple(size[1:])), size, "int64")


def _manifest_of(dataset):
    """``(manifest, manifest_path)`` of a DatasetInfo, a Manifest (or its JSON dict) or paths."""
    from ..format.dataset import DatasetInfo, dataset_info
    from ..format.manifest import Manifest

    if dataset is None:
        return None, None
    if isinstance(dataset, DatasetInfo):
        return dataset.manifest, dataset.manifest_path
    if isinstance(dataset, Manifest):
        return dataset, None
    if isinstance(dataset, dict):
        return Manifest.from_json(dataset), None
    info = dataset_info(dataset)
    return info.manifest, info.manifest_path


def dynamic_masking(vocab_file: Optional[str] = None, masked_lm_prob: Optional[float] = None,
                    max_predictions_per_seq: Optional[int] = None, whole_word: Optional[bool] = None,
                    max_ngram_size: Optional[int] = None, seed: Optional[int] = None,
                    document_separator_token: Optional[str] = None, dataset=None, *,
                    rate: Optional[float] = None, strategy: Optional[str] = None,
                    max_predictions: Optional[int] = None, mask_token_share: Optional[float] = None,
                    random_token_share: Optional[float] = None) -> DynamicMasking:
    """A :class:`DynamicMasking` (a callable ``batch -> masked batch``) for unmasked data.

    ``rate`` (or its generator name ``masked_lm_prob``): the share of each row's tokens to
    predict.  The prediction budget follows it: when a rate is given and no ``max_predictions``
    (or ``max_predictions_per_seq``), it is ``ceil(rate * max_seq_length)`` of the dataset, so
    that ``round(rate * tokens)`` is never capped (without ``dataset=``, pass ``max_predictions``).
    ``strategy``: ``"token"`` (Google's BERT), ``"whole_word"``, ``"ngram"`` (TF Model Garden's;
    ``max_ngram_size``, default 3) or ``"span"`` (SpanBERT's, :mod:`bert_data.pipeline.span_masking`);
    whole words come from the tokenizer's marks (WordPiece ``##``, SentencePiece ``▁``,
    byte-level BPE ``Ġ``), or from the records' ``word_starts`` when they store them
    (``--store_word_starts``: for tokenizers whose pieces carry no mark).
    ``mask_token_share`` / ``random_token_share``: the shares of the
    chosen tokens that become [MASK] and a random ordinary token (default 0.8 and 0.1; the
    rest keep their token).

    Each option left None comes from ``dataset``'s manifest when there is one (``dataset``: a
    directory or shard paths, a :class:`~bert_data.format.dataset.DatasetInfo` or a
    :class:`~bert_data.format.manifest.Manifest`): ``vocab_file``, ``masked_lm_prob``,
    ``max_predictions_per_seq``, ``mask_whole_word``, ``max_ngram_size``,
    ``document_separator_token``; else ``create_tfrecords``' defaults (``config.default_of``:
    0.15, 20, False, 1, ``"[SEP]"``), and ``vocab_file`` is required.  The vocabulary is the tokenizer's the data was made with
    (``vocab_file``, ``tokenizer_file`` or ``spm_model_file``, with its special tokens: see
    :class:`bert_data.tokenizers.TokenizerSource`); ``vocab_file=`` may name any of the three
    kinds of file.  A vocabulary whose SHA-256 differs from the manifest's ``vocab_sha256`` is an
    error: the ids would mean other tokens.
    """
    from ..tokenizers import TokenizerSource, load_vocabulary

    manifest, manifest_path = _manifest_of(dataset)
    source, missing = TokenizerSource.from_manifest(manifest, manifest_path, override=vocab_file)
    if source is None:
        raise ValueError(f"load-time masking needs the vocabulary: {missing}, pass vocab_file=" if missing else
                         "load-time masking needs the vocabulary: pass vocab_file=")
    vocab = load_vocabulary(source)
    vocab_file = source.vocab_file or source.path
    if manifest is not None and manifest.vocab_sha256 and manifest.vocab_sha256 != vocab.sha256:
        raise ValueError(f"vocabulary {vocab_file} (sha256 {vocab.sha256[:12]}...) is not the one the data was "
                         f"made with (manifest: sha256 {manifest.vocab_sha256[:12]}...)")
    separator = document_separator_token or (manifest.option("document_separator_token", SEPARATOR)
                                             if manifest is not None else SEPARATOR)
    masked_lm_prob = _one_of("rate", rate, "masked_lm_prob", masked_lm_prob)
    max_predictions_per_seq = _one_of("max_predictions", max_predictions, "max_predictions_per_seq",
                                      max_predictions_per_seq)
    if masked_lm_prob is not None and max_predictions_per_seq is None:
        max_predictions_per_seq = _budget_of_rate(masked_lm_prob, _max_seq_length_of(dataset, manifest))
    choice = _strategy_options(strategy, whole_word, max_ngram_size)
    shares = {name: value for name, value in (("mask_token_share", mask_token_share),
                                              ("random_token_share", random_token_share)) if value is not None}
    spec = masking_spec(manifest, vocab, document_separator_token, masked_lm_prob=masked_lm_prob,
                        max_predictions_per_seq=max_predictions_per_seq, **choice, **shares)
    masking = DynamicMasking(vocab, seed=seed, document_separator_token=separator, spec=spec)
    if manifest is not None and manifest.packed:
        masking.max_sequences_per_pack = manifest.max_sequences_per_pack
    return masking


# The masking options, by MaskingSpec's field names and by the generator's option names.
_MASKING_OPTIONS = {"masked_lm_prob": "masked_lm_prob", "max_predictions_per_seq": "max_predictions_per_seq",
                    "whole_word": "mask_whole_word", "max_ngram_size": "max_ngram_size", "span": "span_masking"}

STRATEGIES = ("token", "whole_word", "ngram", "span")
# TF Model Garden's and ALBERT's n-gram size, for strategy="ngram" without max_ngram_size.
DEFAULT_NGRAM = 3


def _one_of(name: str, value, legacy: str, legacy_value):
    """An option given under its name or its generator name (both: they must agree)."""
    if value is not None and legacy_value is not None and value != legacy_value:
        raise ValueError(f"{name}={value!r} and {legacy}={legacy_value!r} are the same option: give one")
    return value if value is not None else legacy_value


def _max_seq_length_of(dataset, manifest) -> Optional[int]:
    length = getattr(dataset, "max_seq_length", None)
    if length is None and manifest is not None:
        length = manifest.max_seq_length
    return None if length is None else int(length)


def _budget_of_rate(rate: float, max_seq_length: Optional[int]) -> int:
    """The prediction budget of a full row at ``rate``: ``ceil(rate * max_seq_length)``, so that
    ``round(rate * tokens)`` of any row fits (the float product rounded first: 0.15 * 20 is 3)."""
    import math

    if isinstance(rate, bool) or not 0 < float(rate) <= 1:
        raise ValueError(f"rate must be in (0, 1], got {rate!r}")
    if max_seq_length is None:
        raise ValueError("the prediction budget follows the rate times the sequence length, which is unknown "
                         "without dataset=: pass max_predictions= (or dataset=)")
    return max(1, math.ceil(round(float(rate) * max_seq_length, 9)))


def _strategy_options(strategy: Optional[str], whole_word: Optional[bool], max_ngram_size: Optional[int]) -> dict:
    """MaskingSpec's fields for a ``strategy`` (None: the options given, else the manifest's)."""
    if strategy is None:
        chosen = {"whole_word": whole_word, "max_ngram_size": max_ngram_size}
        # Either given: the manifest's span masking does not apply.
        return chosen if whole_word is None and max_ngram_size is None else dict(chosen, span=False)
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(map(repr, STRATEGIES))}, got {strategy!r}")
    ngram = DEFAULT_NGRAM if max_ngram_size is None else int(max_ngram_size)
    if (max_ngram_size is not None and strategy != "ngram") or (strategy == "ngram" and ngram < 2):
        raise ValueError(f"max_ngram_size={max_ngram_size} does not go with strategy={strategy!r}: "
                         "n-grams of 2 or more words are strategy='ngram'")
    if whole_word is not None and bool(whole_word) != (strategy == "whole_word"):
        raise ValueError(f"whole_word={whole_word} does not go with strategy={strategy!r}: give one of them")
    return {"whole_word": strategy == "whole_word", "max_ngram_size": ngram if strategy == "ngram" else 1,
            "span": strategy == "span"}


def masking_spec(manifest, vocab, document_separator_token: Optional[str], **given):
    """The masks the generator would have drawn for a dataset (``manifest``, or None for data
    without one): each option ``given`` (not None), else the manifest's, else the generator's
    default.  The document separator never masked: ``document_separator_token`` when given,
    else the manifest's in MLM-only data (see ``separator_token``), else the default."""
    from ..pipeline.masking import MaskingSpec, separator_token

    def option(field: str):
        name = _MASKING_OPTIONS[field]
        if given.get(field) is not None:
            return given[field]
        return manifest.option(name, default_of(name)) if manifest is not None else default_of(name)

    separator = document_separator_token
    if separator is None:
        separator = separator_token(manifest.mlm_only, manifest.option("document_separator_token", SEPARATOR)) \
            if manifest is not None else SEPARATOR
    shares = {name: given[name] for name in ("mask_token_share", "random_token_share") if given.get(name) is not None}
    stored = manifest is not None and any(spec.name == WORD_STARTS for spec in manifest.specs)
    return MaskingSpec.for_vocab(vocab, separator, stored_word_starts=stored,
                                 **{field: option(field) for field in _MASKING_OPTIONS}, **shares)


def masker_for(mask, info):
    """A reader's ``mask=`` option as a callable ``(batch, key) -> batch``, or None; ``info``:
    the :class:`~bert_data.format.dataset.DatasetInfo` being read.  Masked records are masked
    anew (:class:`Remasking`) from their original tokens."""
    if mask is None or mask is False:
        return None
    if mask is True:
        masker = dynamic_masking(dataset=info)
    elif isinstance(mask, dict):
        masker = dynamic_masking(dataset=info, **mask)
    elif callable(mask):
        masker = mask
    else:
        raise TypeError(f"mask= must be None, True, a dict of dynamic_masking options or a DynamicMasking, "
                        f"got {type(mask).__name__}")
    return Remasking(masker) if info.masked else masker


def original_tokens(batch: Dict[str, "np.ndarray"]) -> Dict[str, "np.ndarray"]:
    """A masked batch as it was before masking: the original token at every predicted position
    (``masked_lm_ids`` where ``masked_lm_weights > 0``; the masks hid nothing else), without the
    ``masked_lm_*`` columns."""
    import numpy as np

    name = next((name for name in batch if canonical_name(name) == "input_ids"), None)
    if name is None or "masked_lm_positions" not in batch or "masked_lm_ids" not in batch:
        raise ValueError("mask=: the records are masked and do not keep their original tokens (masked_lm_positions "
                         "and masked_lm_ids): make the data with --disable_masking (masks drawn at load time)")
    ids = np.array(batch[name], copy=True)
    used = np.asarray(batch["masked_lm_weights"]) > 0 if "masked_lm_weights" in batch else \
        np.asarray(batch["masked_lm_ids"]) != 0
    rows = np.broadcast_to(np.arange(len(ids))[:, None], used.shape)
    ids[rows[used], np.asarray(batch["masked_lm_positions"])[used]] = np.asarray(batch["masked_lm_ids"])[used]
    out = {key: value for key, value in batch.items() if key not in MASK_OUTPUTS}
    out[name] = ids
    return out


class Remasking:
    """Load-time masks for records the generator already masked: each batch's original tokens
    (:func:`original_tokens`) masked by ``masker`` (a :class:`DynamicMasking`), as if the data
    were unmasked; the static masks are dropped."""

    def __init__(self, masker):
        self.masker = masker

    def __getattr__(self, name):  # seed, spec, prediction_slots...: the masker's
        if name == "masker":
            raise AttributeError(name)
        return getattr(self.masker, name)

    def __repr__(self) -> str:
        return f"Remasking({self.masker!r})"

    def __call__(self, batch, key: Optional[Sequence[int]] = None):
        return self.masker(original_tokens(batch), key=key)
