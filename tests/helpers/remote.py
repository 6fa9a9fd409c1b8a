"""Bytes that live off this machine, as the tests stand them in: a web server on 127.0.0.1, and
the shards in a bucket (the moto S3 server of the ``s3_endpoint`` fixture)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import threading
from contextlib import contextmanager
from typing import Dict, Iterator


@contextmanager
def serving(directory) -> Iterator[int]:
    """A web server on 127.0.0.1 serving ``directory`` while inside; yields its port.  It ignores
    credentials and queries in the URLs it is asked for."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def bucket_hashes(fs, url) -> Dict[str, str]:
    """The SHA-256 of every ``.tfrecords`` object under ``url``, by its name below ``url`` (as
    ``file_hashes`` gives them for a local folder), listed afresh."""
    prefix = url.split("://", 1)[1]
    fs.invalidate_cache()
    return {path[len(prefix) + 1:]: hashlib.sha256(fs.cat_file(path)).hexdigest()
            for path in fs.find(prefix) if path.endswith(".tfrecords")}
