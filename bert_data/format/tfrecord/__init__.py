"""TFRecord output: framed ``tf.train.Example`` records, as Google's ``create_pretraining_data.py``
writes them and TensorFlow, Google's ``run_pretraining.py`` and Cerebras read them.

``records`` frames and reads the record stream (CRC32C, gzip/zlib), ``example_codec`` encodes
and decodes ``tf.train.Example`` bytes without TensorFlow, ``example_proto`` parses records
that are not in the canonical layout (through protobuf, optional), ``shards`` holds the
format's writer and reader (``format.output_formats``), ``splicing`` the shards made of
segments (gzip members, zlib streams spliced) and where each record's frame begins.  The framing API is
re-exported here: ``bert_data.format.tfrecord.iter_records`` and friends are public.
"""

from .records import *  # noqa: F401,F403
from .records import __all__  # noqa: F401
