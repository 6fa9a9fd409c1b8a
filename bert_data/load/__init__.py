"""Loading the records for training: numpy (:mod:`.arrays`), tf.data (:mod:`.tf_data`) and
PyTorch (:mod:`.torch_data`) readers built from the shared stages of :mod:`.stages`, and masks
drawn at load time (:mod:`.dynamic_masks`: not named after its function ``dynamic_masking``,
which the module would shadow as an attribute of this package).  Each name is imported on first
use, so that TensorFlow and torch are imported only by the reader that needs them."""

# TorchDataset is not in __all__: `from bert_data.load import *` must work without torch.
__all__ = ["load_dataset", "read_examples", "read_batches", "DynamicMasking", "dynamic_masking",
           "merged_state"]

_HOMES = {
    "read_batches": "arrays",
    "read_examples": "arrays",
    "load_dataset": "tf_data",
    "TorchDataset": "torch_data",
    "DynamicMasking": "dynamic_masks",
    "dynamic_masking": "dynamic_masks",
    "merged_state": "resumable",
}


def __getattr__(name):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
