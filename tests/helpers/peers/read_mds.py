"""Run by tests/helpers/streaming.py with the interpreter of the environment that has MosaicML
``streaming`` (it cannot share ours: it pins numpy < 2.2 and transformers < 5; see
.ci/peer_envs).  Reads an MDS split directory with ``streaming.StreamingDataset`` exactly as a
trainer does (local directory, no shuffling) and writes every sample's fields to a JSON file.

usage: python read_mds.py OUT_JSON SPLIT_DIR [SPLIT_DIR ...]  (one interpreter for many: it
starts slowly)
"""

import json
import sys
import types


def stand_in_for_torchvision() -> None:
    """``import streaming`` imports its image datasets, which import torchvision.  PyPI's
    torchvision wheels are built for PyPI's CUDA torch and do not load with the CPU build of
    torch this environment has (no CPU build of torchvision is on PyPI); MDS reading never
    touches torchvision, so a stand-in module lets ``import streaming`` through."""
    try:
        import torchvision  # noqa: F401
        return
    except Exception:
        pass
    import importlib.machinery

    for name in ("torchvision", "torchvision.datasets", "torchvision.transforms",
                 "torchvision.transforms.functional"):
        module = types.ModuleType(name)
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)  # find_spec() asks for it
        sys.modules[name] = module
    sys.modules["torchvision.datasets"].VisionDataset = type("VisionDataset", (), {})
    sys.modules["torchvision.datasets"].CIFAR10 = type("CIFAR10", (), {})
    sys.modules["torchvision.transforms.functional"].to_tensor = None


def plain(sample: dict) -> dict:
    return {key: value.tolist() if hasattr(value, "tolist") else value for key, value in sample.items()}


def read(split_dir: str) -> dict:
    from streaming import StreamingDataset

    dataset = StreamingDataset(local=split_dir, shuffle=False, batch_size=1)
    samples = [plain(sample) for sample in dataset]
    # Random access too, as a sampler does: the last sample by index.
    last = plain(dataset[len(dataset) - 1]) if len(dataset) else None
    return {"length": len(dataset), "samples": samples, "last": last,
            "types": {key: type(value).__name__ for key, value in (samples[0].items() if samples else [])}}


def main(out_json: str, split_dirs) -> None:
    stand_in_for_torchvision()
    with open(out_json, "w") as out:
        json.dump({split_dir: read(split_dir) for split_dir in split_dirs}, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
