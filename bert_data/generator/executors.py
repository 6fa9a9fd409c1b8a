"""Run the generator's tasks on a Dask cluster through Dask's ``concurrent.futures`` executor.

The pipeline is the same: ``runner.generate`` takes any executor, and Dask's ``Client`` provides
one.  Workers read inputs and write their shard pieces to paths they all reach (a shared file
system); the client appends the pieces to the shards in unit order and writes the manifest, so
the output is byte-identical to a local run.  A worker lost mid-run has its tasks rerun by Dask
elsewhere; every task is a pure function of its inputs, so a rerun writes the same bytes.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional, Tuple

from ..config import ConfigError


@contextlib.contextmanager
def dask_executor(scheduler: Optional[str], n_workers: int) -> Iterator[Tuple[object, int]]:
    """Yield (executor, number of tasks the cluster runs at once).

    ``scheduler``: address of a running scheduler (``tcp://host:8786``), or None for a local
    cluster of ``n_workers`` single-threaded worker processes.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ConfigError("--scheduler and --dask need Dask: pip install -e \".[dask]\"") from None

    cluster = None
    try:
        if scheduler:
            try:
                client = Client(scheduler)  # waits distributed.comm.timeouts.connect
            except (OSError, TimeoutError) as error:
                raise ConfigError(f"--scheduler {scheduler}: cannot connect: {error}") from None
        else:
            # One thread per worker process: tokenizers and spaCy parallelise by process.
            cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None)
            client = Client(cluster)
        with client:
            workers = client.scheduler_info().get("workers", {})
            parallelism = max(1, sum(info.get("nthreads", 1) for info in workers.values()))
            # pure=False: tasks are not deduplicated by hashing their (large) arguments.
            yield client.get_executor(pure=False), parallelism
    finally:
        if cluster is not None:
            cluster.close()
