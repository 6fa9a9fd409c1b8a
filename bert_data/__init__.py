"""bert_data: BERT pretraining data (TFRecords) from raw text, fast, parallel and deterministic.

The generation path (``bert_data.runner.generate``) never imports TensorFlow; the loaders do.
"""

__version__ = "0.1.0"

__all__ = ["GeneratorConfig", "generate", "__version__"]


def __getattr__(name):
    # Lazy, so that `import bert_data` (and `create_tfrecords --help`) stays instant.
    if name == "GeneratorConfig":
        from .config import GeneratorConfig

        return GeneratorConfig
    if name == "generate":
        from .runner import generate

        return generate
    raise AttributeError(f"module 'bert_data' has no attribute {name!r}")
