"""Run by tests/helpers/streaming.py (``fetch_with_streaming``) with the interpreter of the
environment that has MosaicML ``streaming``: fetches each MDS split directory as a trainer
fetches a dataset from its remote, ``StreamingDataset(remote=SPLIT_DIR, local=CACHE,
validate_hash="sha256")``, which checks every shard against the hash ``index.json`` records,
and writes what happened to a JSON file: the samples read, and the error that stopped it.

usage: python validate_mds.py OUT_JSON CACHE_ROOT SPLIT_DIR [SPLIT_DIR ...]
"""

import json
import os
import sys

from read_mds import stand_in_for_torchvision


def fetch(split_dir: str, cache: str) -> dict:
    from streaming import StreamingDataset

    dataset = StreamingDataset(remote=split_dir, local=cache, shuffle=False, batch_size=1, validate_hash="sha256")
    read = 0
    try:
        # By index, as a sampler reads: each shard is fetched (and checked) in this thread, so
        # its error comes here (iterating fetches in a thread whose error only ends the epoch).
        for index in range(len(dataset)):
            dataset[index]
            read += 1
        return {"samples": read}
    except Exception as error:  # noqa: BLE001 -- what streaming raises is what the test looks at
        return {"samples": read, "error": f"{type(error).__name__}: {error}"}


def main(out_json: str, cache_root: str, split_dirs) -> None:
    stand_in_for_torchvision()
    results = {split_dir: fetch(split_dir, os.path.join(cache_root, f"cache-{number}"))
               for number, split_dir in enumerate(split_dirs)}
    with open(out_json, "w") as out:
        json.dump(results, out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
