"""What every worker of a Dask cluster does when it starts, installed as a worker plugin (this
module imports ``distributed``: only a Dask run imports it).

A cluster's workers are not forked from the command: its redacted output does not reach them.
A task that fails in a worker is logged there, with its arguments (which name files at URLs),
so each worker redacts its own output (``bert_data.redaction``).
"""

from __future__ import annotations

from distributed import WorkerPlugin


class RedactingWorker(WorkerPlugin):
    """Redacts the credentials of URLs in everything the worker process prints or logs."""

    name = "bert_data-redaction"

    def setup(self, worker) -> None:
        from ..redaction import redact_this_process

        redact_this_process()
