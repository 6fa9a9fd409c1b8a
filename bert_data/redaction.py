"""No secret leaves the process through what it prints: everything written to stdout and
stderr (messages, warnings, progress bars, log records, tracebacks of storage libraries) passes
through ``storage.redact``, which replaces the credentials of URLs (``user:password@``,
``X-Amz-Signature=``, ``token=`` ...) with ***.

The commands run under ``redacted_output`` (``@redacting``); worker processes that are not
forked from a command (a Dask cluster's) call ``redact_this_process``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sys
import traceback
from typing import Iterator, TextIO

from . import storage


class RedactingStream:
    """A text stream that redacts what is written to it, then writes it to ``stream``.  Text is
    passed on a line at a time (a URL split across two writes is still redacted whole); what
    follows the last line break waits for the next write, a flush or the end."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.pending = ""

    def write(self, text: str) -> int:
        self.pending += text
        cut = max(self.pending.rfind("\n"), self.pending.rfind("\r"))
        if cut >= 0:
            done, self.pending = self.pending[: cut + 1], self.pending[cut + 1 :]
            self.stream.write(storage.redact(done))
        return len(text)

    def flush(self) -> None:
        if self.pending:
            self.stream.write(storage.redact(self.pending))
            self.pending = ""
        self.stream.flush()

    def __getattr__(self, name):  # isatty, fileno, encoding ...: the stream's own
        return getattr(self.stream, name)


def _redacting_excepthook(kind, value, trace) -> None:
    text = "".join(traceback.format_exception(kind, value, trace))
    sys.__stderr__.write(storage.redact(text))
    sys.__stderr__.flush()


def _redacting_record_factory(make_record):
    """A log record factory that redacts each record's message (and its traceback) when made:
    whichever handler writes it, to whatever stream, writes it redacted."""

    def redacted_record(*args, **kwargs):
        record = make_record(*args, **kwargs)
        record.msg = storage.redact(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = storage.redact("".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
        return record

    redacted_record.redacts = True
    return redacted_record


def redact_this_process() -> None:
    """From now on, for the rest of this process: stdout, stderr, log records and uncaught
    tracebacks redacted (a worker process of a Dask cluster calls it when it starts)."""
    if not isinstance(sys.stdout, RedactingStream):
        sys.stdout = RedactingStream(sys.stdout)
    if not isinstance(sys.stderr, RedactingStream):
        sys.stderr = RedactingStream(sys.stderr)
    sys.excepthook = _redacting_excepthook
    if not getattr(logging.getLogRecordFactory(), "redacts", False):
        logging.setLogRecordFactory(_redacting_record_factory(logging.getLogRecordFactory()))


@contextlib.contextmanager
def redacted_output() -> Iterator[None]:
    """While a command runs: stdout and stderr redacted, log records redacted when they are
    made (whichever handler writes them, to whatever stream), and an uncaught exception's
    traceback redacted."""
    saved = sys.stdout, sys.stderr, sys.excepthook, logging.getLogRecordFactory()
    make_record = saved[3]
    sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    sys.excepthook = _redacting_excepthook
    if not getattr(make_record, "redacts", False):
        logging.setLogRecordFactory(_redacting_record_factory(make_record))
    leaving_with_an_exception = False
    try:
        yield
    except BaseException:
        # Its traceback is printed after this returns, by sys.excepthook: keep the redacting one.
        leaving_with_an_exception = True
        raise
    finally:
        for stream in (sys.stdout, sys.stderr):
            if isinstance(stream, RedactingStream):
                stream.flush()
        sys.stdout, sys.stderr = saved[:2]
        if not leaving_with_an_exception:
            sys.excepthook = saved[2]
        logging.setLogRecordFactory(make_record)


def redacting(main):
    """A command's ``main``, run under ``redacted_output``."""

    @functools.wraps(main)
    def run(*args, **kwargs):
        with redacted_output():
            return main(*args, **kwargs)

    return run
