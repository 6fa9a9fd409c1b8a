"""``tasks.keep_freed_heap``: in a process that runs only bert_data, a chunk's arrays reuse the
last chunk's memory (no page fault a 4 KB page each chunk); a library caller's process keeps its
allocator's own policy.  Each case runs in a fresh interpreter (the policy is process-wide)."""

import os
import subprocess
import sys

import pytest

CHUNKS = """
import resource
import numpy as np
from bert_data import compiled
from bert_data.run import tasks

if {claim}:
    compiled.claim_process()
kept = tasks.keep_freed_heap()


def chunk():  # arrays the size of a chunk's, alive together, then freed
    arrays = [np.ones((2048, 128), dtype=np.int32) for _ in range(6)] + [np.random.default_rng(0).random((2048, 128))]
    return sum(int(a[-1, -1]) for a in arrays)


chunk()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    chunk()
print(kept, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
"""


def _faults_a_chunk(claim: bool):
    env = dict(os.environ)
    for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_"):
        env.pop(name, None)  # the allocator's defaults, whatever the caller's environment says
    out = subprocess.run([sys.executable, "-c", CHUNKS.format(claim=claim)], capture_output=True, text=True, env=env,
                         check=True).stdout.split()
    return out[0] == "True", float(out[1])


@pytest.mark.skipif(not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"), reason="glibc's mallopt")
def test_a_claimed_process_reuses_its_freed_heap_and_a_library_caller_is_left_alone():
    kept, faults = _faults_a_chunk(claim=True)
    assert kept and faults < 50
    left_alone, default_faults = _faults_a_chunk(claim=False)
    # glibc's default: the freed top of the heap goes back to the system, every chunk faults in again
    assert not left_alone and default_faults > 1000
