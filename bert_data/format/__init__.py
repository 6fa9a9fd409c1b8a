"""The dataset format: record layout, tf.train.Example codec, TFRecord framing, manifest and
finding shards. Shared by the generator, the loaders and the tools."""
