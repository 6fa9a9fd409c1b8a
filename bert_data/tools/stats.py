"""``bert-data stats``: what the records hold, in numbers (and optionally a PNG of histograms).

Computed over every record (or the first ``limit``), vectorised over decoded batches:

* tokens per instance (``input_mask`` sum, with [CLS] and the [SEP]s): histogram, mean,
  quantiles, the fraction of padded (shorter than ``max_seq_length``) and of short (at most half
  of ``max_seq_length``) instances; lengths of segments A and B (NSP layouts);
* predictions per instance (``masked_lm_weights`` sum) and how the predicted positions were
  corrupted: replaced by [MASK], kept, or replaced by a random token (masked layouts);
* next-sentence balance (label 1 = B is a random sentence; NSP layouts);
* the fill rate: tokens that are not padding over all slots of the records, and for packed rows
  (``--pack_sequences``) the instances a record holds; every other statistic is then about
  the instances, split out of their rows;
* MLM-only layouts: document separators inside the sequences (cross-document windows);
* the [UNK] rate and the most frequent tokens of the original text (masked positions restored
  from ``masked_lm_ids``; [CLS]/[SEP] and document separators not counted);
* with ``mixing`` tokens, how well mixed the shards are: the share of records holding one of
  them in each window (tenth) of each shard against the shard's share (``mixing_stats``).

Every layout and compression the generator writes is read (from the manifest, else the first
record and first bytes); statistics about features a layout lacks are None (JSON null)
and left out of the text.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np

from ..format.dataset import describe_layout, shard_set_info, shard_sets
from ..format.manifest import describe_removed
from ..format.output_formats import format_of_path
from ..load.stages import decoded_chunks
from ._common import guess_cls_sep
from .mixing_stats import DEFAULT_WINDOWS, MixingStats, ShardMixing, format_mixing, records_holding, token_ids_of, \
    window_gaps
from .packed_checks import instance_rows
from ..config import default_of

# The generator's default, for data whose manifest does not say.
SEPARATOR = default_of("document_separator_token")

__all__ = ["DatasetStats", "compute_stats", "format_stats", "plot_stats", "check_plotting"]


@dataclass
class DatasetStats:
    name: str
    files: List[str]
    max_seq_length: int
    max_predictions_per_seq: int
    n_records: int = 0
    length_hist: np.ndarray = None  # [msl + 1] counts of tokens per instance
    predictions_hist: np.ndarray = None  # [mpp + 1]
    a_hist: np.ndarray = None  # [msl + 1] tokens in segment A (without specials)
    b_hist: np.ndarray = None
    n_mask: int = 0
    n_kept: int = 0
    n_random: int = 0
    nsp_random: int = 0
    token_counts: np.ndarray = None  # by id, original text tokens without [CLS]/[SEP]
    unk_id: Optional[int] = None
    mask_id: Optional[int] = None
    tokens: Optional[tuple] = None
    notes: List[str] = field(default_factory=list)
    # The layout: which statistics exist.
    feature_names: List[str] = field(default_factory=list)
    has_segments: bool = True
    masked: bool = True
    has_nsp: bool = True
    sentence_order: bool = False  # the label is ALBERT's sentence order (1: swapped), not BERT's
    mlm_only: bool = False
    v2_feature_names: bool = False
    compression: Optional[str] = None
    layout: str = ""
    separator_id: Optional[int] = None  # MLM-only: the document separator
    n_separators: int = 0  # separators inside the sequences
    n_cross_document: int = 0  # instances with at least one
    mixing: Optional[MixingStats] = None  # with mixing tokens: per-window shares of each shard
    # Records as stored: packed rows hold several instances (n_records counts instances then).
    packed: bool = False
    n_rows: int = 0
    row_tokens: int = 0  # tokens of the records that are not padding
    instances_hist: np.ndarray = None  # [k + 1] records by instances held (packed)
    documents_removed: Optional[dict] = None  # the manifest's (--dedup, --decontaminate)

    @property
    def fill_rate(self) -> float:
        """Tokens that are not padding over all the records' slots (max_seq_length each)."""
        return self.row_tokens / (self.n_rows * self.max_seq_length) if self.n_rows else 0.0

    # -- derived
    @property
    def n_tokens(self) -> int:
        return int(self.token_counts.sum()) if self.token_counts is not None else 0

    @property
    def n_predictions(self) -> int:
        return self.n_mask + self.n_kept + self.n_random

    def mean(self, hist: np.ndarray) -> float:
        total = hist.sum()
        return float((hist * np.arange(len(hist))).sum() / total) if total else 0.0

    def quantile(self, hist: np.ndarray, q: float) -> int:
        total = hist.sum()
        if not total:
            return 0
        return int(np.searchsorted(np.cumsum(hist), q * total))

    def token_name(self, token_id: int) -> str:
        if self.tokens is not None and token_id < len(self.tokens):
            return self.tokens[token_id]
        return f"id {token_id}"

    def top_tokens(self, k: int = 20):
        if self.token_counts is None or not self.token_counts.any():
            return []
        order = np.argsort(-self.token_counts, kind="stable")[:k]
        total = self.n_tokens
        return [(int(i), self.token_name(int(i)), int(self.token_counts[i]), self.token_counts[i] / total)
                for i in order if self.token_counts[i]]

    def to_dict(self, top: int = 20) -> dict:
        n = max(self.n_records, 1)
        npred = max(self.n_predictions, 1)
        lengths = self.length_hist
        masked = self.masked
        return {
            "name": self.name,
            "files": len(self.files),
            "records": self.n_rows,
            "instances": self.n_records,
            "fill_rate": self.fill_rate,
            "packed": {"instances_per_record": self.n_records / max(self.n_rows, 1),
                       "histogram": self.instances_hist.tolist()} if self.packed else None,
            "max_seq_length": self.max_seq_length,
            "max_predictions_per_seq": self.max_predictions_per_seq,
            "layout": {"features": list(self.feature_names), "mlm_only": self.mlm_only, "masked": self.masked,
                       "v2_feature_names": self.v2_feature_names, "compression": self.compression},
            "tokens_per_instance": {
                "mean": self.mean(lengths),
                "min": int(np.flatnonzero(lengths)[0]) if lengths.any() else 0,
                "p10": self.quantile(lengths, 0.10), "median": self.quantile(lengths, 0.5),
                "p90": self.quantile(lengths, 0.90),
                "max": int(np.flatnonzero(lengths)[-1]) if lengths.any() else 0,
                "histogram": lengths.tolist(),
            },
            "fraction_full": float(lengths[self.max_seq_length] / n),
            "fraction_padded": float(lengths[: self.max_seq_length].sum() / n),
            "fraction_short": float(lengths[: self.max_seq_length // 2 + 1].sum() / n),
            "segment_a_mean": self.mean(self.a_hist) if self.has_segments else None,
            "segment_b_mean": self.mean(self.b_hist) if self.has_segments else None,
            "predictions_per_instance": {
                "mean": self.mean(self.predictions_hist),
                "histogram": self.predictions_hist.tolist(),
            } if masked else None,
            "fraction_at_max_predictions": float(self.predictions_hist[-1] / n) if masked else None,
            "masking": None if self.mask_id is None or not masked else {
                "mask": self.n_mask / npred, "kept": self.n_kept / npred, "random": self.n_random / npred,
            },
            "nsp_random_next": self.nsp_random / n if self.has_nsp else None,
            "sentence_order": self.sentence_order,
            "document_separators": {
                "per_instance": self.n_separators / n,
                "fraction_cross_document": self.n_cross_document / n,
            } if self.mlm_only and self.separator_id is not None else None,
            "unk_rate": None if self.unk_id is None else (
                float(self.token_counts[self.unk_id] / max(self.n_tokens, 1))
                if self.unk_id < len(self.token_counts) else 0.0),
            "text_tokens": self.n_tokens,
            "distinct_tokens": int((self.token_counts > 0).sum()) if self.token_counts is not None else 0,
            "top_tokens": [{"id": i, "token": t, "count": c, "fraction": float(f)}
                           for i, t, c, f in self.top_tokens(top)],
            "mixing": self.mixing.to_dict() if self.mixing is not None else None,
            "documents_removed": self.documents_removed,
            "notes": self.notes,
        }


def _accumulate(st: DatasetStats, cols: Dict[str, np.ndarray]) -> None:
    ids = cols["input_ids"]
    mask = cols["input_mask"]
    n, msl = ids.shape
    length = np.clip(mask.sum(axis=1), 0, msl)
    st.n_records += n
    st.length_hist += np.bincount(length, minlength=msl + 1)[: msl + 1]
    r = np.arange(n)
    text = mask.astype(bool)
    text[:, 0] = False  # [CLS]
    text[r, np.clip(length - 1, 0, msl - 1)] = False  # final [SEP]

    if st.has_segments:
        seg = cols["segment_ids"]
        n_b = np.where(mask == 1, seg, 0).sum(axis=1)  # B tokens + its [SEP]
        a_len = np.clip(length - n_b - 2, 0, msl)
        b_len = np.clip(n_b - 1, 0, msl)
        st.a_hist += np.bincount(a_len, minlength=msl + 1)[: msl + 1]
        st.b_hist += np.bincount(b_len, minlength=msl + 1)[: msl + 1]
        text[r, np.clip(a_len + 1, 0, msl - 1)] = False  # [SEP] after A
    if st.has_nsp:
        st.nsp_random += int((cols["next_sentence_labels"][:, 0] == 1).sum())

    restored = ids.copy()
    if st.masked:
        pos = cols["masked_lm_positions"]
        lab = cols["masked_lm_ids"]
        w = cols["masked_lm_weights"]
        mpp = len(st.predictions_hist) - 1  # an instance split out of a packed row has the row's slots
        k = np.clip((w > 0).sum(axis=1), 0, mpp)
        st.predictions_hist += np.bincount(k, minlength=mpp + 1)[: mpp + 1]
        active = (w > 0) & (pos >= 0) & (pos < msl)
        rows = np.broadcast_to(np.arange(n)[:, None], pos.shape)
        shown = ids[rows[active], pos[active]]
        original = lab[active]
        if st.mask_id is not None:
            is_mask = shown == st.mask_id
            kept = ~is_mask & (shown == original)
            st.n_mask += int(is_mask.sum())
            st.n_kept += int(kept.sum())
            st.n_random += int((~is_mask & ~kept).sum())
        else:
            st.n_kept += int((shown == original).sum())
        restored[rows[active], pos[active]] = original

    if st.mlm_only and st.separator_id is not None:
        separators = text & (restored == st.separator_id)
        per_row = separators.sum(axis=1)
        st.n_separators += int(per_row.sum())
        st.n_cross_document += int((per_row > 0).sum())
        text &= ~separators
    values = restored[text]
    values = values[values >= 0]
    counts = np.bincount(values)
    if len(counts) > len(st.token_counts):
        st.token_counts = np.concatenate([st.token_counts, np.zeros(len(counts) - len(st.token_counts), np.int64)])
    st.token_counts[: len(counts)] += counts


def compute_stats(paths, vocab_file: Optional[str] = None, limit: Optional[int] = None,
                  compression="auto", mixing: Sequence[str] = (),
                  windows: int = DEFAULT_WINDOWS) -> List[DatasetStats]:
    """Statistics per dataset (one per output directory or train/val split) under ``paths``.

    Layout and compression come from each dataset's manifest; for files without one, from the
    first record and ``compression`` ("auto": the first bytes of each file).  ``mixing``:
    tokens of the vocabulary whose share of records is compared window by window
    (``windows`` a shard) with each shard's (a ValueError without a vocabulary)."""
    from ..tokenizers import load_vocabulary

    out = []
    for shard_set in shard_sets(paths):
        if shard_set.files and not format_of_path(shard_set.files[0]).instances:
            continue  # a tokenized corpus, not instances: see tools.corpus_view
        info = shard_set_info(shard_set, compression)
        specs, compressions = info.specs, info.compressions
        msl, mpp = info.max_seq_length, info.max_predictions_per_seq
        flags = info.flags
        st = DatasetStats(shard_set.name, list(shard_set.files), msl, mpp)
        st.feature_names = [spec.name for spec in specs]
        st.mlm_only, st.masked, st.v2_feature_names = flags["mlm_only"], flags["masked"], flags["v2_feature_names"]
        st.has_segments = st.has_nsp = not flags["mlm_only"]
        st.sentence_order = shard_set.manifest is not None and shard_set.manifest.sentence_order_prediction
        st.documents_removed = shard_set.manifest.documents_removed if shard_set.manifest is not None else None
        st.compression = next(iter(set(compressions.values())), None) if len(set(compressions.values())) == 1 else "mixed"
        st.layout = describe_layout(specs)
        st.length_hist = np.zeros(msl + 1, np.int64)
        st.predictions_hist = np.zeros(mpp + 1, np.int64)
        st.a_hist = np.zeros(msl + 1, np.int64)
        st.b_hist = np.zeros(msl + 1, np.int64)
        st.token_counts = np.zeros(0, np.int64)
        source = info.tokenizer_source(vocab_file)
        vocab = load_vocabulary(source) if source else None
        separator_token = (shard_set.manifest.option("document_separator_token", SEPARATOR) if shard_set.manifest
                           else SEPARATOR)
        if vocab is not None:
            st.unk_id, st.mask_id, st.tokens = vocab.unk_id, vocab.mask_id, vocab.tokens
            st.token_counts = np.zeros(vocab.size, np.int64)
            st.separator_id = vocab.token_to_id.get(separator_token) if st.mlm_only else None
        else:
            what = ", [MASK] id taken as the most frequent id at masked positions" if st.masked else ""
            st.notes.append(f"no vocabulary (pass --vocab_file): token ids shown as numbers{what}, no [UNK] rate")
        mixing_ids = None
        if mixing:
            if vocab is None:
                raise ValueError(f"--mixing needs the vocabulary of {shard_set.name}: pass --vocab_file")
            mixing_ids = token_ids_of(mixing, vocab)
            st.mixing = MixingStats(list(mixing), windows)
        guess_pending = vocab is None
        st.packed = flags["packed"]
        width = (flags["max_sequences_per_pack"] or int(msl)) if st.packed else 1
        st.instances_hist = np.zeros(width + 1, np.int64)
        for path in shard_set.files:  # a file at a time: the mixing statistic is per shard
            holding = []  # per record: does it hold a --mixing token
            for cols in decoded_chunks([path], specs, verify_crc=False, compressions=compressions):
                if limit is not None:
                    room = limit - st.n_rows
                    if room <= 0:
                        break
                    if room < len(cols["input_ids"]):
                        cols = {k: v[:room] for k, v in cols.items()}
                if guess_pending:
                    st.mask_id = _guess_mask_id(cols) if st.masked else None
                    if st.mlm_only and separator_token == "[SEP]":
                        st.separator_id = guess_cls_sep(cols)[1]
                    guess_pending = False
                st.n_rows += len(cols["input_ids"])
                st.row_tokens += int((cols["input_mask"] != 0).sum())
                if st.packed:
                    per_row = cols["input_mask"].max(axis=1, initial=0)
                    st.instances_hist += np.bincount(per_row, minlength=width + 1)[: width + 1]
                    cols = instance_rows(cols, np.arange(len(per_row)))[0]
                _accumulate(st, cols)
                if mixing_ids is not None:
                    holding.append(records_holding([cols], mixing_ids))
            if mixing_ids is not None and holding:
                shard_flags = np.concatenate(holding)
                st.mixing.shards.append(ShardMixing(os.path.basename(path), len(shard_flags),
                                                    *window_gaps(shard_flags, windows)))
            if limit is not None and st.n_rows >= limit:
                break
        if limit is not None and st.n_rows >= limit:
            st.notes.append(f"first {st.n_rows:,} records only (--limit)")
        out.append(st)
    return out


def _guess_mask_id(cols) -> Optional[int]:
    """[MASK] without a vocabulary: the most common token at the masked positions."""
    pos, w, ids = cols["masked_lm_positions"], cols["masked_lm_weights"], cols["input_ids"]
    active = w > 0
    if not active.any():
        return None
    rows = np.broadcast_to(np.arange(len(ids))[:, None], pos.shape)
    shown = ids[rows[active], np.clip(pos[active], 0, ids.shape[1] - 1)]
    return int(np.bincount(shown[shown >= 0]).argmax())


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def format_stats(st: DatasetStats, top: int = 20) -> str:
    d = st.to_dict(top)
    t = d["tokens_per_instance"]
    compression = f", {st.compression} shards" if st.compression else ""
    lines = [
        f"{st.name}: {st.n_rows:,} records in {len(st.files)} file(s){compression}, "
        f"max_seq_length {st.max_seq_length}, max_predictions_per_seq {st.max_predictions_per_seq}",
        f"  layout                {st.layout}",
        f"  fill rate             {_pct(st.fill_rate)} of the records' tokens are not padding"
        + (f"   ({st.n_records:,} instances, {d['packed']['instances_per_record']:.2f} a record)"
           if st.packed else ""),
        f"  tokens per instance   mean {t['mean']:.1f}  min {t['min']}  p10 {t['p10']}  median {t['median']}  "
        f"p90 {t['p90']}  max {t['max']}",
        f"  full length           {_pct(d['fraction_full'])}   padded (< {st.max_seq_length}) "
        f"{_pct(d['fraction_padded'])}   short (<= {st.max_seq_length // 2}) {_pct(d['fraction_short'])}",
    ]
    # One line per statistic the layout has (alike in shape only: each formats its own numbers).
    if d["segment_a_mean"] is not None:
        lines.append(f"  segment A / B         mean {d['segment_a_mean']:.1f} / {d['segment_b_mean']:.1f} tokens")
    if d["document_separators"] is not None:
        sep = d["document_separators"]
        lines.append(f"  document separators   {sep['per_instance']:.2f} per instance   cross-document instances "
                     f"{_pct(sep['fraction_cross_document'])}")
    if d["predictions_per_instance"] is not None:
        lines.append(f"  predictions/instance  mean {d['predictions_per_instance']['mean']:.2f}  "
                     f"at max ({st.max_predictions_per_seq}) {_pct(d['fraction_at_max_predictions'])}")
    else:
        lines.append("  predictions/instance  none stored: unmasked records, masks are drawn at load time")
    if d["masking"]:
        m = d["masking"]
        lines.append(f"  masked positions      [MASK] {_pct(m['mask'])}  kept {_pct(m['kept'])}  "
                     f"random {_pct(m['random'])}  ({st.n_predictions:,} predictions)")
    if d["nsp_random_next"] is not None:
        if d["sentence_order"]:
            lines.append(f"  sentence order        swapped (or random B) {_pct(d['nsp_random_next'])}  in order "
                         f"{_pct(1 - d['nsp_random_next'])}")
        else:
            lines.append(f"  next sentence         random {_pct(d['nsp_random_next'])}  actual "
                         f"{_pct(1 - d['nsp_random_next'])}")
    if d["unk_rate"] is not None:
        n_unk = int(round(d["unk_rate"] * d["text_tokens"]))
        lines.append(f"  [UNK] rate            {100 * d['unk_rate']:.4f}% ({n_unk:,} of {d['text_tokens']:,} text "
                     f"tokens, {d['distinct_tokens']:,} distinct)")
    lines.append("  length histogram (tokens per instance):")
    lines.extend("    " + row for row in _text_histogram(st.length_hist))
    if d["top_tokens"]:
        lines.append(f"  top {len(d['top_tokens'])} tokens:")
        cells = [f"{x['token']} {100 * x['fraction']:.2f}%" for x in d["top_tokens"]]
        for i in range(0, len(cells), 5):
            lines.append("    " + "   ".join(cells[i:i + 5]))
    if st.mixing is not None:
        lines.extend(format_mixing(st.mixing))
    if st.documents_removed is not None:
        lines.append(f"  removed before use    {describe_removed(st.documents_removed)}")
    for note in st.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines)


def _text_histogram(hist: np.ndarray, bins: int = 8, width: int = 40) -> List[str]:
    msl = len(hist) - 1
    step = max(1, msl // bins)
    edges = np.array([min(i * step, msl) for i in range(bins)] + [msl + 1])  # last bin ends at msl
    total = max(int(hist.sum()), 1)
    sums = [int(hist[edges[i]:edges[i + 1]].sum()) for i in range(bins)]
    peak = max(max(sums), 1)
    rows = []
    for i, s in enumerate(sums):
        label = f"{edges[i]:>4}-{edges[i + 1] - 1:<4}"
        rows.append(f"{label} {'#' * int(round(width * s / peak)):<{width}} {100 * s / total:5.1f}%")
    return rows


def check_plotting() -> None:
    """RuntimeError, with what to install, when matplotlib is missing (``--plot`` checks it first)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise RuntimeError("--plot needs matplotlib: pip install 'bert_data[plot]' (or matplotlib)") from None


def plot_stats(stats: List[DatasetStats], path: str) -> None:
    """Write a PNG: tokens per instance, segment lengths, predictions per instance, masking and NSP."""
    check_plotting()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(stats), 4, figsize=(18, 3.8 * len(stats)), squeeze=False)
    for row, st in zip(axes, stats):
        msl, mpp = st.max_seq_length, st.max_predictions_per_seq
        title = os.path.basename(os.path.normpath(st.name)) or st.name
        ax = row[0]
        ax.bar(np.arange(msl + 1), st.length_hist, width=1.0, color="tab:blue")
        ax.set(title=f"{title}: tokens per instance", xlabel="tokens (incl. [CLS]/[SEP])",
               ylabel="instances (log scale)")
        ax.set_yscale("log")
        ax = row[1]
        if st.has_segments:
            ax.step(np.arange(msl + 1), st.a_hist, where="mid", label="segment A", color="tab:green")
            ax.step(np.arange(msl + 1), st.b_hist, where="mid", label="segment B", color="tab:orange")
            ax.set(title="segment lengths (without [CLS]/[SEP])", xlabel="tokens", ylabel="instances")
            ax.legend()
        else:
            _empty_panel(ax, "segment lengths", "MLM-only records: one segment")
        ax = row[2]
        if st.masked:
            ax.bar(np.arange(mpp + 1), st.predictions_hist, width=0.8, color="tab:purple")
            ax.set(title="predictions per instance", xlabel="masked positions", ylabel="instances (log scale)")
            ax.set_yscale("log")
        else:
            _empty_panel(ax, "predictions per instance", "unmasked records:\nmasks are drawn at load time")
        ax = row[3]
        npred = max(st.n_predictions, 1)
        n = max(st.n_records, 1)
        labels, values, colors = [], [], []
        if st.masked:
            labels += ["[MASK]", "kept", "random"]
            values += [st.n_mask / npred, st.n_kept / npred, st.n_random / npred]
            colors += ["tab:red", "tab:gray", "tab:olive"]
        if st.has_nsp:
            labels += ["NSP\nrandom", "NSP\nactual"]
            values += [st.nsp_random / n, 1 - st.nsp_random / n]
            colors += ["tab:cyan", "tab:blue"]
        if st.mlm_only and st.separator_id is not None:
            labels += ["cross-\ndocument"]
            values += [st.n_cross_document / n]
            colors += ["tab:brown"]
        if labels:
            ax.bar(labels, values, color=colors)
            ax.set(title="masking split / NSP balance", ylabel="fraction", ylim=(0, 1))
        else:
            _empty_panel(ax, "masking split / NSP balance", "no masks and no NSP labels stored")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _empty_panel(ax, title: str, text: str) -> None:
    ax.set(title=title, xticks=[], yticks=[])
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="gray")
