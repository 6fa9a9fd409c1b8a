"""The TensorFlow reader: :func:`load_dataset`, the input pipeline of Google's
``run_pretraining.py`` (``input_fn_builder``) over any layout and compression this tool writes.
TensorFlow is imported when it is called."""

from __future__ import annotations

from typing import Optional

from ..format.dataset import Paths, dataset_info
from ..format.layout import WORD_STARTS, canonical_name
from .dynamic_masks import masker_for
from .stages import IGNORE_INDEX, check_format, output_names, postprocess, sequence_label_name, to_transformers

__all__ = ["load_dataset"]

_TF_COMPRESSION = {None: "", "gzip": "GZIP", "zlib": "ZLIB"}


def import_tensorflow(what: str):
    """TensorFlow, or an ImportError that says which extra installs it (it is optional).

    Imported here first, TensorFlow's C++ INFO messages are off unless the environment says
    otherwise (``TF_CPP_MIN_LOG_LEVEL``): every ``TFRecordDataset`` logs one about its read
    buffer, whatever ``buffer_size`` it is given, which users take for a problem.  Warnings and
    errors still show."""
    import os
    import sys

    if "tensorflow" not in sys.modules:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    try:
        import tensorflow as tf
    except ImportError as error:
        raise ImportError(f"{what} needs TensorFlow, which is not installed ({error}): "
                          "pip install 'bert_data[tf]' (or tensorflow)") from error
    return tf


def load_dataset(file_pattern: Paths, max_seq_length: Optional[int] = None,
                 max_predictions_per_seq: Optional[int] = None, batch_size: int = 32,
                 is_training: bool = True, num_cpu_threads: int = 4,
                 drop_remainder: Optional[bool] = None, repeat: Optional[bool] = None,
                 shuffle_buffer: int = 100, seed: Optional[int] = None,
                 int32: Optional[bool] = None, invert_input_mask: bool = False,
                 input_context=None, prefetch: bool = True, compression="auto", mask=None,
                 canonical_names: bool = False, format: str = "google", verify_checksums: bool = True):
    """A ``tf.data.Dataset`` of feature dicts, batched, as Google's ``run_pretraining.py`` builds it.

    Training (``is_training=True``), as Google's ``input_fn``: the shard list is repeated and
    shuffled, ``min(num_cpu_threads, n_shards)`` shards are read at once and interleaved
    (non-deterministically unless ``seed`` is given), records are shuffled in a buffer of
    ``shuffle_buffer`` and batches are full-size (``drop_remainder`` defaults to True).
    Evaluation: the shards are read in order, once (``repeat`` defaults to ``is_training``),
    ``drop_remainder`` defaults to False, so every record comes out exactly once in file order.

    Each element is ``{name: Tensor[batch, length]}`` for the features of the dataset's layout
    (its manifest's ``"features"``, else the first record's: Google's seven, MLM-only, unmasked,
    v2 names; ``canonical_names=True`` renames ``input_word_ids``/``input_type_ids`` to
    ``input_ids``/``segment_ids``), parsed with that spec; int64 features are cast to int32
    (``int32`` defaults to True, as Google's ``_decode_record`` does for TPUs).
    ``invert_input_mask=True`` gives 1 for padding and 0 for tokens, as Cerebras's BERT input
    pipeline expects.  ``input_context`` (a ``tf.distribute.InputContext``) shards the files
    across input pipelines.  Compressed shards are read with their ``compression_type``
    (``compression``: "auto" = the manifest's, else sniffed per file; or None, "gzip", "zlib").

    ``mask``: load-time masking of unmasked data, as in :func:`bert_data.read_batches` (True, a
    dict of :func:`bert_data.dynamic_masking` options, or a ``DynamicMasking``), applied to each
    batch with ``tf.numpy_function`` and keyed by the batch number (counted from 0 over the whole
    stream, so repeated epochs get new masks; with ``input_context`` the key is ``(pipeline_id,
    k)``): for the same seed and the same batches, the masks equal those of ``read_batches``.

    ``format="transformers"``: elements hold the inputs of Hugging Face transformers' models,
    under the names of ``bert_data.read_batches(..., format="transformers")`` (``input_ids``,
    ``attention_mask``, ``token_type_ids``, ``labels``, ``next_sentence_label`` or
    ``sentence_order_label``), all ``tf.int64`` (``int32`` defaults to False and may not be set,
    nor ``invert_input_mask``); the labels are scattered with TensorFlow ops
    (:func:`masked_lm_labels`), with the rules of the numpy readers.

    ``verify_checksums`` (default True): every shard's bytes are checked against the SHA-256 its
    manifest records before the dataset is built (TFRecord's per-record CRCs are checked as the
    records are read, as TensorFlow does); a damaged shard raises
    :class:`bert_data.format.checksums.ChecksumError` naming it.  False skips the check.

    Resuming mid-epoch: the pipeline is checkpointable as TensorFlow checkpoints iterators
    (``tf.train.Checkpoint(iterator=iter(dataset))``; the batch counter that keys the masks is
    saved with it): restored into an iterator of the same dataset built again (with ``seed``
    when training), it goes on with exactly the batches the uninterrupted one would have given.

    ``max_seq_length`` / ``max_predictions_per_seq`` may be omitted when the shards' manifest
    (or first record) tells them; when given, they are checked against the manifest.
    """
    tf = import_tensorflow("load_dataset")

    from ..format.checksums import check_shard
    from ..format.output_formats import format_of_path
    from ..format.layout import tf_feature_description

    info = dataset_info(file_pattern, max_seq_length, max_predictions_per_seq, compression)
    others = sorted({fmt.name for fmt in map(format_of_path, info.files) if not fmt.framed_records})
    if others:  # tf.data reads TFRecord files; the other formats have their trainers' readers
        raise ValueError(f"load_dataset reads TFRecord shards; these are {', '.join(others)}: read them with "
                         "bert_data.read_batches or bert_data.TorchDataset (or their trainers' own readers)")
    for path in info.files:  # before any record: tf.data's readers know nothing of the manifest
        check_shard(path, verify_checksums)
    masker = masker_for(mask, info)
    if int32 is None:
        int32 = format != "transformers"
    check_format(format, info, masker is not None, int32, invert_input_mask)
    sequence_label = sequence_label_name(info) if format == "transformers" else None
    if drop_remainder is None:
        drop_remainder = is_training
    if repeat is None:
        repeat = is_training
    description = tf_feature_description(info.max_seq_length, info.max_predictions_per_seq, specs=info.specs)
    files = list(info.files)
    types = [_TF_COMPRESSION[info.compression(f)] for f in files]
    autotune = tf.data.AUTOTUNE

    def read(path, compression_type):
        # TensorFlow's default read buffer: any other buffer_size prints a notice per file opened.
        return tf.data.TFRecordDataset(path, compression_type=compression_type)

    d = tf.data.Dataset.from_tensor_slices((tf.constant(files), tf.constant(types)))
    if input_context is not None:
        d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if is_training:
        if repeat:
            d = d.repeat()
        d = d.shuffle(buffer_size=len(files), seed=seed, reshuffle_each_iteration=True)
        cycle_length = max(1, min(num_cpu_threads, len(files)))
        # Google: parallel_interleave(sloppy=is_training); sloppy unless a seed asks for repeatability.
        d = d.interleave(read, cycle_length=cycle_length, block_length=1,
                         num_parallel_calls=cycle_length, deterministic=seed is not None)
        if shuffle_buffer and shuffle_buffer > 1:
            d = d.shuffle(buffer_size=shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    else:
        d = d.interleave(read, cycle_length=1, block_length=1)  # one shard after the other
        if repeat:
            d = d.repeat()

    key_prefix = [] if input_context is None else [int(input_context.input_pipeline_id)]
    mpp = getattr(masker, "prediction_slots", None) or info.max_predictions_per_seq
    rename = output_names(info, canonical_names)

    # Masked records are masked anew from their original tokens, which need their masks.
    static_masks = ["masked_lm_positions", "masked_lm_ids", "masked_lm_weights"] if info.masked else []
    # Stored word starts (--store_word_starts) go to the masker with the ids.
    static_masks += [WORD_STARTS] if WORD_STARTS in description else []

    def apply_mask(example, number):
        def run(ids, input_mask, number_np, *masks):
            batch = dict({"input_ids": ids, "input_mask": input_mask}, **dict(zip(static_masks, masks)))
            out = masker(batch, key=(*key_prefix, int(number_np)))
            return (out["input_ids"].astype("int32"), out["masked_lm_positions"].astype("int32"),
                    out["masked_lm_ids"].astype("int32"), out["masked_lm_weights"].astype("float32"))

        ids = example["input_ids"]
        outputs = tf.numpy_function(run, [ids, example["input_mask"], number] + [example[n] for n in static_masks],
                                    [tf.int32, tf.int32, tf.int32, tf.float32], stateful=False)
        outputs[0].set_shape(ids.shape)
        for tensor in outputs[1:]:
            tensor.set_shape([ids.shape[0], mpp or None])
        return dict(example, input_ids=outputs[0], masked_lm_positions=outputs[1], masked_lm_ids=outputs[2],
                    masked_lm_weights=outputs[3])

    def parse(serialized, number=None):
        parsed = tf.io.parse_example(serialized, description)
        example = {canonical_name(name): value for name, value in parsed.items()}
        if masker is not None:
            example = apply_mask(example, number)
        if sequence_label is not None:
            return to_transformers(example, sequence_label, labels=masked_lm_labels, cast=tf.cast)
        return postprocess(example, int32, invert_input_mask, rename, cast=tf.cast)

    d = d.batch(batch_size, drop_remainder=drop_remainder)
    if masker is not None:
        d = tf.data.Dataset.zip((d, tf.data.Dataset.counter()))
    deterministic = True if not is_training else seed is not None
    d = d.map(parse, num_parallel_calls=autotune, deterministic=deterministic)
    if prefetch:
        d = d.prefetch(autotune)
    return d


def masked_lm_labels(input_ids, positions, ids, weights):
    """:func:`bert_data.load.stages.masked_lm_labels` in TensorFlow ops, for ``tf.data`` graphs
    (no Python per batch, so the pipeline stays parallel and serialisable): the original id at
    each slot with weight > 0, ``IGNORE_INDEX`` elsewhere; padding slots set nothing.  The tests
    check it against the numpy one on every record."""
    import tensorflow as tf

    slots = tf.where(weights > 0)  # (k, 2): [row, slot] of each real prediction
    columns = tf.cast(tf.gather_nd(positions, slots), tf.int64)
    targets = tf.stack([slots[:, 0], columns], axis=1)
    labels = tf.fill(tf.shape(input_ids, out_type=tf.int64), tf.constant(IGNORE_INDEX, tf.int64))
    labels = tf.tensor_scatter_nd_update(labels, targets, tf.cast(tf.gather_nd(ids, slots), tf.int64))
    labels.set_shape(input_ids.shape)  # tf.fill of a dynamic shape forgets the static one
    return labels
