"""Warnings the library prints on stderr while it works, under the name of the program running it.

Library code must not name a command it may not be running under: it says ``bert_data:
warning: ...`` unless a command has said its own name (``use_program_name("create_tfrecords")``
in its ``main``), so that a command's own messages and the library's read alike.
"""

from __future__ import annotations

import sys

from . import storage

_program = "bert_data"


def use_program_name(name: str) -> None:
    """Name the program in the library's warnings from now on (a command's ``main`` calls it)."""
    global _program
    _program = name


def warn(message: str) -> None:
    """(Credentials of URLs in the message are redacted.)"""
    print(storage.redact(f"{_program}: warning: {message}"), file=sys.stderr)


def note(message: str) -> None:
    """Something worth knowing that changes nothing in the output (e.g. a faster way to run)."""
    print(storage.redact(f"{_program}: note: {message}"), file=sys.stderr)
