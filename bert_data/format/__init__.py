"""The dataset format: record layout, tf.train.Example codec, TFRecord framing, manifest, finding
shards, and the output formats' one registry (``output_formats``). Shared by the generator, the
loaders and the tools; it imports none of them."""
