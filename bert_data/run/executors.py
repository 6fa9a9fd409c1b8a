"""Where the generator's tasks run: any ``concurrent.futures`` executor.

``default_executor``: in this process for one worker (no inter-process cost), else a local
process pool whose workers ignore Ctrl-C (the parent decides) and die with the parent.
``stop_executor`` stops such a pool at once.  ``dask_executor``: Dask's executor, for a cluster.

With Dask the pipeline is the same: workers read inputs and exchange their intermediate data
(token ids, slice tables, pools, shard pieces) through a work directory they all reach: a URL
(``--work_dir s3://...``, or by default the output URL's work directory, see ``run_files``) or a
shared file system; ``check_workers_see`` refuses a local work directory the workers cannot
see, before any work.  The client appends the pieces to the shards in unit order and writes the
manifest, so the output is byte-identical to a local run.  A worker lost mid-run has its tasks
rerun by Dask elsewhere; every task is a pure function of its inputs and every work file is
written whole (renamed into place, or one object), so a rerun writes the same bytes.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import signal
import sys
from typing import Iterator, Optional, Tuple

from ..compiled import claim_process, start_before_fork
from ..config import ConfigError, available_cores
from ..notices import warn


class InlineExecutor(cf.Executor):
    """Runs each task at submission, in this process: one worker without inter-process cost."""

    def submit(self, fn, /, *args, **kwargs):
        future: cf.Future = cf.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as error:  # handed to the caller through the future
            future.set_exception(error)
        return future


def _worker_init(parent_pid: int):
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    claim_process()  # a worker runs only bert_data's tasks (see compiled.claim_process)
    # Ctrl-C goes to the whole process group: the parent alone decides what happens.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # forked after the parent's handler: stop quietly
    _die_with_parent(parent_pid)


def _die_with_parent(parent_pid: int) -> None:
    """A parent killed with SIGKILL cannot stop its workers; on Linux the kernel can (no orphans)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(1)


def local_workers(requested: int) -> int:
    """How many worker processes to start on this machine for ``requested``: at most its cores,
    with a warning, since more only compete for them while each holds its own tokenizer and
    sentence model in memory (--num_workers 1000 on 2 cores would start a thousand)."""
    cores = available_cores()
    if requested > cores:
        warn(f"--num_workers {requested:,} is more than the cores this process may use ({cores}): "
             f"starting {cores} worker processes")
        return cores
    return requested


def default_executor(workers: int) -> cf.Executor:
    if workers == 1:
        return InlineExecutor()
    # fork: workers start at once and inherit what the parent imported (never TensorFlow), and
    # numba started (the pool forks at its first task).
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    if method == "fork":
        start_before_fork()
    return cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method), initializer=_worker_init,
                                  initargs=(os.getpid(),))


def shares_local_files(executor: Optional[cf.Executor]) -> bool:
    """Whether the executor's tasks run on this machine (our own pools), so see its files."""
    return executor is None or isinstance(executor, (InlineExecutor, cf.ProcessPoolExecutor, cf.ThreadPoolExecutor))


def check_workers_see(executor: Optional[cf.Executor], work_dir: str) -> None:
    """Before any work: every worker of a Dask cluster must reach a local work directory (a
    shared file system); a URL is reached through fsspec, with each worker's credentials."""
    from .. import storage

    client = getattr(executor, "_client", None)
    if client is None or storage.is_url(work_dir):
        return
    seen = client.run(os.path.isdir, work_dir)
    blind = sorted(worker for worker, sees in seen.items() if not sees)
    if blind:
        raise ConfigError(f"the work directory {work_dir} is not visible to Dask worker {blind[0]}"
                          f"{f' and {len(blind) - 1} more' if len(blind) > 1 else ''} (no shared file system): "
                          "give --work_dir a URL every worker reaches (e.g. s3://bucket/scratch), or an --output_dir "
                          "URL")


# How often a wait for tasks looks at the workers of our own pool (``wait_first``).
WATCH_SECONDS = 1.0


def wait_first(futures, executor: cf.Executor):
    """``concurrent.futures.wait(futures, return_when=FIRST_COMPLETED)``, watching the workers of
    our own pool while it waits.  A worker killed (by the out-of-memory killer, say) while it
    sent a result leaves part of a message in the pool's result pipe: the pool's manager thread
    then waits for the rest forever and never reports the pool broken, so the run would wait
    forever too.  A worker that has ended is that report: ``BrokenProcessPool``, with the signal
    that ended it as ``worker_signal``."""
    while True:
        done, pending = cf.wait(futures, timeout=WATCH_SECONDS, return_when=cf.FIRST_COMPLETED)
        if done:
            return done, pending
        processes = list((getattr(executor, "_processes", None) or {}).values())
        ended = [process.exitcode for process in processes if process.exitcode is not None]
        if ended:
            error = cf.process.BrokenProcessPool(f"a worker process ended (exit code {ended[0]}) while the pool "
                                                 "waited for its result")
            error.worker_signal = -ended[0] if ended[0] < 0 else None
            raise error


def dead_worker_signal(executor: cf.Executor) -> Optional[int]:
    """The signal that killed a worker of our own pool (after ``BrokenProcessPool``), if any: the
    pool ends the other workers with SIGTERM, so another signal is the cause."""
    manager = getattr(executor, "_executor_manager_thread", None)
    if manager is not None:  # it reaps every worker of a broken pool: then their exit codes are known
        manager.join(timeout=30)
    processes = list((getattr(executor, "_processes", None) or {}).values())
    codes = [process.exitcode for process in processes if process.exitcode is not None and process.exitcode < 0]
    causes = [-code for code in codes if -code != signal.SIGTERM] or [-code for code in codes]
    return causes[0] if causes else None


def stop_executor(executor: cf.Executor) -> None:
    """Cancel what has not started and stop the workers now: no orphans, no waiting."""
    processes, result_queue, manager = [], None, None
    if isinstance(executor, cf.ProcessPoolExecutor):  # shutdown() forgets them: taken first
        processes = list((executor._processes or {}).values())
        result_queue, manager = executor._result_queue, executor._executor_manager_thread
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join()
    # A worker stopped (or killed by the system) while it sent a result leaves part of a message in
    # the result pipe, and the pool's manager thread waits for the rest of it: forever, since this
    # process holds a write end too, and at exit Python joins that thread (the run had said what
    # happened and then never ended).  With every worker gone, closing this process's write end
    # gives the thread the end of the pipe instead, and it stops.
    writer = getattr(result_queue, "_writer", None)
    if processes and writer is not None and not any(process.is_alive() for process in processes):
        writer.close()
    if manager is not None:
        manager.join(timeout=30)


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
            from .dask_workers import RedactingWorker

            client.register_plugin(RedactingWorker())  # (workers log failed tasks, URLs and all)
            workers = client.scheduler_info().get("workers", {})
            parallelism = max(1, sum(info.get("nthreads", 1) for info in workers.values()))
            # pure=False: tasks are not deduplicated by hashing their (large) arguments.
            yield client.get_executor(pure=False), parallelism
    finally:
        if cluster is not None:
            cluster.close()
