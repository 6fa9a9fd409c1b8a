"""Run by tests/helpers/streaming.py with the interpreter of the environment that has MosaicML
``streaming``: one interpreter for every read of a test session, since ``import streaming``
(torch, transformers) takes seconds each time.  Each line of stdin is a request, the command
line one of the peer scripts takes:

    {"script": "read_mds" | "validate_mds", "argv": [...], "tmpdir": DIR}

run as ``python SCRIPT.py ARGV...`` with ``TMPDIR=DIR`` would run it (its stderr in
``DIR/streaming.stderr``); the answer is one line on stdout, ``{"error": null}`` or
``{"error": the traceback and that stderr's end}``.  It ends when stdin does.
"""

import contextlib
import json
import os
import sys
import tempfile
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import read_mds  # noqa: E402
import validate_mds  # noqa: E402

SCRIPTS = {"read_mds": lambda argv: read_mds.main(argv[0], argv[1:]),
           "validate_mds": lambda argv: validate_mds.main(argv[0], argv[1], argv[2:])}


def serve() -> None:
    answers = sys.stdout
    read_mds.stand_in_for_torchvision()
    import streaming  # noqa: F401  (once, for every request)

    for line in sys.stdin:
        request = json.loads(line)
        os.environ["TMPDIR"] = request["tmpdir"]
        tempfile.tempdir = None  # gettempdir() reads TMPDIR again, as in a new process
        stderr = os.path.join(request["tmpdir"], "streaming.stderr")
        sys.stderr.flush()
        descriptor = os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(descriptor, 2)
        os.close(descriptor)
        try:
            with contextlib.redirect_stdout(sys.stderr):  # stdout carries the answers only
                SCRIPTS[request["script"]](request["argv"])
            answer = {"error": None}
        except BaseException:  # noqa: BLE001 -- the caller's test fails with it
            sys.stderr.flush()
            with open(stderr, encoding="utf-8", errors="replace") as written:
                answer = {"error": traceback.format_exc() + written.read()[-3000:]}
        sys.stderr.flush()
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


if __name__ == "__main__":
    serve()
