"""Loading for training: the numpy, tf.data and PyTorch readers, load-time masks, format="transformers", recipes."""
