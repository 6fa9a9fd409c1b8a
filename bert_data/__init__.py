"""bert_data: BERT pretraining data (TFRecords) from raw text, fast, parallel and deterministic.

The generation path (``bert_data.generate``: ``bert_data.run.resolve.generate``) never imports
TensorFlow; the loaders do.
"""

from .version import __version__

# TorchDataset is not in __all__: `from bert_data import *` must work without torch.
__all__ = ["GeneratorConfig", "generate", "load_dataset", "read_examples", "read_batches", "dynamic_masking",
           "WordPieceTokenizer", "__version__"]

# Readers and loaders (bert_data.load): TensorFlow / torch are imported only when used.
_LOADER_NAMES = ("load_dataset", "read_examples", "read_batches", "TorchDataset", "dynamic_masking")


def __getattr__(name):
    # Lazy, so that `import bert_data` (and `create_tfrecords --help`) stays instant.
    if name == "GeneratorConfig":
        from .config import GeneratorConfig

        return GeneratorConfig
    if name == "generate":
        from .run.resolve import generate

        return generate
    if name == "WordPieceTokenizer":
        from .tokenizers.wordpiece import WordPieceTokenizer

        return WordPieceTokenizer
    if name in _LOADER_NAMES:
        from . import load

        return getattr(load, name)
    raise AttributeError(f"module 'bert_data' has no attribute {name!r}")
