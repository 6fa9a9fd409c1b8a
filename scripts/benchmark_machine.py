"""What ``scripts/benchmark.py`` measures besides its runs' records: the process tree of a run
(its wall and CPU time, its peak resident memory sampled every 20 ms, and of it the processes'
own), and the machine (what N processes of pure CPU work get over one, the ``parallel_ceiling``,
and how long its disk takes to write and sync as many bytes as a run's output)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path


def tree_rss(process) -> tuple:
    """The process tree's resident memory, and of it the processes' own (``rss`` less ``shared``:
    not pages of mapped files, which the kernel can drop and read again, such as the kept pieces
    a shard's shuffle maps, which grow with the shard)."""
    import psutil

    total = own = 0
    try:
        members = [process] + process.children(recursive=True)
    except psutil.Error:
        return 0, 0
    for member in members:
        try:
            info = member.memory_info()
        except psutil.Error:
            continue
        total += info.rss
        own += info.rss - getattr(info, "shared", 0)
    return total, own


def children_cpu_seconds() -> float:
    """User + system time of the children waited for so far (and of theirs: the workers)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_generator(arguments, env) -> dict:
    import psutil

    cpu_before = children_cpu_seconds()
    started = time.perf_counter()
    process = subprocess.Popen(arguments, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    watched = psutil.Process(process.pid)
    peak = peak_own = 0
    cpu_seen = {}  # pid -> its own CPU seconds when last sampled
    while process.poll() is None:
        resident, own = tree_rss(watched)
        peak, peak_own = max(peak, resident), max(peak_own, own)
        sample_tree_cpu(watched, cpu_seen)
        time.sleep(0.02)
    seconds = time.perf_counter() - started
    stdout, stderr = process.communicate()
    if process.returncode:
        sys.exit(f"benchmark: create_tfrecords failed:\n{stderr}")
    # CPU time: less sensitive than wall time to other work on a shared machine.  The children
    # waited for count in getrusage; worker processes a pool stops without waiting for them do
    # not, so the tree's sampled CPU time (short by the last 20 ms of each process) is taken
    # when it is the larger.
    waited = children_cpu_seconds() - cpu_before
    return {"seconds": seconds, "peak_rss_mb": peak / 1e6, "peak_own_mb": peak_own / 1e6,
            "cpu_seconds": max(waited, sum(cpu_seen.values()))}


# Pure CPU work, nothing shared (no file, no memory beyond the interpreter's): 0.7-1.3 s on one
# core of the development machine, whose cores ran the same loop at two speeds minutes apart.
CEILING_WORK = "x = 0\nfor i in range(6_000_000):\n    x += i * i\n"


def parallel_ceiling(workers: int, rounds: int = 5) -> float:
    """What ``workers`` processes get from this machine: ``workers`` x one copy's time of
    ``CEILING_WORK`` over that of ``workers`` copies at once, each the fastest of ``rounds``
    taken alternately (a pause of the machine's own lengthens one of them, never shortens it).
    ``speedup_vs_first`` cannot exceed it (2.0 on two idle cores; less when the cores are
    hyperthreads of one, or busy)."""
    def wall(copies: int) -> float:
        started = time.perf_counter()
        processes = [subprocess.Popen([sys.executable, "-I", "-S", "-c", CEILING_WORK]) for _ in range(copies)]
        for process in processes:
            process.wait()
        return time.perf_counter() - started

    times = [(wall(1), wall(workers)) for _ in range(rounds)]
    return round(workers * min(one for one, _ in times) / min(many for _, many in times), 2)


def disk_seconds(directory: Path, size: int, rounds: int = 2) -> float:
    """The least time this machine's disk takes to be given ``size`` bytes and make them durable
    (written a MB at a time, then fsync; the fastest of ``rounds``): what a run that writes and
    syncs an output of that size spends at least, however many workers it has (its shards are
    durable before its manifest)."""
    block = os.urandom(1 << 20)  # (random bytes: a disk that compresses gets no shortcut)
    path, best = directory / "disk-floor", float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        with open(path, "wb", buffering=0) as handle:
            written = 0
            while written < size:
                written += handle.write(block[:min(len(block), size - written)])
            os.fsync(handle.fileno())
        best = min(best, time.perf_counter() - started)
        path.unlink()
    return best


def sample_tree_cpu(root, cpu_seen: dict) -> None:
    import psutil

    try:
        members = [root] + root.children(recursive=True)
    except psutil.Error:
        return
    for member in members:
        try:
            times = member.cpu_times()
        except psutil.Error:
            continue
        cpu_seen[member.pid] = times.user + times.system
