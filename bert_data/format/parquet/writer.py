"""Writes a Parquet shard: one row an instance, columns in ``transformers``' names:

=========================  ==============  ================================================
column                     type            holds
=========================  ==============  ================================================
input_ids                  list<int64>     the tokens, masked as the run masks (unpadded)
token_type_ids             list<int64>     0 for ``[CLS]`` A ``[SEP]``, 1 for B ``[SEP]`` (pairs)
attention_mask             list<int64>     1 per token (the padding collator adds the 0s)
labels                     list<int64>     the original token at each masked position, -100
                                           elsewhere (masked data)
next_sentence_label        int64           1 when B is a random next sentence (BERT)
sentence_order_label       int64           1 when A and B are swapped (ALBERT's SOP)
source_index               int64           with --record_provenance: the source's place in --sources
document_index             int64           with --record_provenance: the document's place in its source
word_starts                list<int64>     with --store_word_starts: 1 where a token starts a word
=========================  ==============  ================================================

MLM-only data has no ``token_type_ids`` and no pair label, unmasked data (``--disable_masking``,
masked at load time by ``DataCollatorForLanguageModeling``) no ``labels``.  Compression is
Parquet's own (``--compression snappy``, ``zstd`` or ``gzip``); rows go out in row groups of
``ROW_GROUP_ROWS`` instances.  Every page carries its CRC-32 (``write_page_checksum``; pyarrow
15 or later), which :class:`~bert_data.format.parquet.reader.ParquetReader` checks.

Packed rows (``--pack_sequences``): one row a pack, in ``packed_rows.packed_to_rows``' model, for
transformers' packed training: ``input_ids``, ``token_type_ids``, ``labels`` as above but for
all the pack's instances one after the other, ``position_ids`` (list<int64>, from 0 at each
instance's ``[CLS]``: ``DataCollatorWithFlattening``'s convention), and for pairs the pair label
and ``next_sentence_positions`` (the row position of each instance's ``[CLS]``) as
list<int64>, one value an instance.  No ``attention_mask``: a mask of 1s would let the
instances attend to each other.
"""

from __future__ import annotations

from typing import Iterable

from ..columns import pair_label_name, to_rows
from ..layout import PROVENANCE_FEATURE_NAMES, WORD_STARTS
from ..output_formats import Writer
from ..packed_rows import packed_to_rows

ROW_GROUP_ROWS = 16384
LIST_COLUMNS = ("input_ids", "token_type_ids", "attention_mask", "labels", "position_ids", WORD_STARTS)
# Packed rows' per-instance lists (cut by ``instance_offsets``): the pair label and [CLS] positions.
INSTANCE_COLUMNS = ("next_sentence_label", "sentence_order_label", "next_sentence_positions")


def schema_for(options):
    import pyarrow as pa

    widths = options.widths
    packed = options.packed
    fields = [pa.field("input_ids", pa.list_(pa.int64()))]
    if "segment_ids" in widths:
        fields.append(pa.field("token_type_ids", pa.list_(pa.int64())))
    fields.append(pa.field("position_ids" if packed else "attention_mask", pa.list_(pa.int64())))
    if "masked_lm_positions" in widths:
        fields.append(pa.field("labels", pa.list_(pa.int64())))
    if "next_sentence_labels" in widths:
        label = pair_label_name(options.sentence_order)
        if packed:
            fields += [pa.field(label, pa.list_(pa.int64())), pa.field("next_sentence_positions", pa.list_(pa.int64()))]
        else:
            fields.append(pa.field(label, pa.int64()))
    fields += [pa.field(name, pa.int64()) for name in PROVENANCE_FEATURE_NAMES if name in widths]
    if WORD_STARTS in widths:
        fields.append(pa.field(WORD_STARTS, pa.list_(pa.int64())))
    return pa.schema(fields)


def _table(batch, schema, options):
    import pyarrow as pa

    label = pair_label_name(options.sentence_order)
    rows = packed_to_rows(batch, label) if options.packed else to_rows(batch, options.sentence_order)
    offsets = pa.array(rows["offsets"], type=pa.int32())
    arrays = []
    for field in schema:
        if field.name in LIST_COLUMNS:
            arrays.append(pa.ListArray.from_arrays(offsets, pa.array(rows[field.name], type=pa.int64())))
        elif field.name in INSTANCE_COLUMNS and options.packed:
            instance_offsets = pa.array(rows["instance_offsets"], type=pa.int32())
            arrays.append(pa.ListArray.from_arrays(instance_offsets, pa.array(rows[field.name], type=pa.int64())))
        else:
            arrays.append(pa.array(rows[field.name], type=pa.int64()))
    return pa.Table.from_arrays(arrays, schema=schema)


class ParquetWriter(Writer):
    def write_shard(self, batches: Iterable[dict], path: str, name: str) -> dict:
        """Rows gathered into row groups of ``ROW_GROUP_ROWS``."""
        return _write(batches, path, name, self.options)


def _write(batches, path: str, name: str, options) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = schema_for(options)
    n, pending = 0, []
    # Page CRCs (Parquet's own per-page checksums): readers that ask (the reader here) refuse a damaged page.
    with pq.ParquetWriter(path, schema, compression=options.compression or "none", write_page_checksum=True) as writer:
        def flush():
            if pending:
                writer.write_table(pa.concat_tables(pending), row_group_size=ROW_GROUP_ROWS)
                pending.clear()

        for batch in batches:
            pending.append(_table(batch, schema, options))
            n += len(batch["input_ids"])
            if sum(len(table) for table in pending) >= ROW_GROUP_ROWS:
                flush()
        flush()
    return {"path": name, "samples": n}
