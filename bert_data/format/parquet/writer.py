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
=========================  ==============  ================================================

MLM-only data has no ``token_type_ids`` and no pair label, unmasked data (``--disable_masking``,
masked at load time by ``DataCollatorForLanguageModeling``) no ``labels``.  Compression is
Parquet's own (``--compression snappy``, ``zstd`` or ``gzip``); rows go out in row groups of
``ROW_GROUP_ROWS`` instances.
"""

from __future__ import annotations


from ..columns import pair_label_name, to_rows

ROW_GROUP_ROWS = 16384
LIST_COLUMNS = ("input_ids", "token_type_ids", "attention_mask", "labels")


def schema_for(options):
    import pyarrow as pa

    widths = options.widths
    fields = [pa.field("input_ids", pa.list_(pa.int64()))]
    if "segment_ids" in widths:
        fields.append(pa.field("token_type_ids", pa.list_(pa.int64())))
    fields.append(pa.field("attention_mask", pa.list_(pa.int64())))
    if "masked_lm_positions" in widths:
        fields.append(pa.field("labels", pa.list_(pa.int64())))
    if "next_sentence_labels" in widths:
        fields.append(pa.field(pair_label_name(options.sentence_order), pa.int64()))
    return pa.schema(fields)


def _table(batch, schema, options):
    import pyarrow as pa

    rows = to_rows(batch, options.sentence_order)
    offsets = pa.array(rows["offsets"], type=pa.int32())
    arrays = []
    for field in schema:
        if field.name in LIST_COLUMNS:
            arrays.append(pa.ListArray.from_arrays(offsets, pa.array(rows[field.name], type=pa.int64())))
        else:
            arrays.append(pa.array(rows[field.name], type=pa.int64()))
    return pa.Table.from_arrays(arrays, schema=schema)


def write_shard(batches, path: str, name: str, options) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = schema_for(options)
    n, pending = 0, []
    with pq.ParquetWriter(path, schema, compression=options.compression or "none") as writer:
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
