"""Loading the records for training: numpy, tf.data and PyTorch readers, and load-time masking."""
