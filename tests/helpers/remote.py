"""Bytes that live off this machine, as the tests stand them in: a web server on 127.0.0.1, and
the shards in a bucket (the moto S3 server of the ``s3_endpoint`` fixture)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import socket
import struct
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


class Cuttable:
    """A TCP relay on 127.0.0.1 in front of a server (``port``: the server's): the endpoint a
    run is given.  ``cut()`` resets every connection through it and stops listening (the
    endpoint is gone: new connections are refused at once, nothing hangs); ``restore()``
    listens again on the same port, in front of the same server (its state kept)."""

    def __init__(self, port: int):
        self.target = ("127.0.0.1", port)
        self.port = 0
        self.listener = None
        self.connections = set()
        self.lock = threading.Lock()
        self.restore()

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port, self.listener = listener.getsockname()[1], listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.connections |= {client, upstream}
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._relay, args=(source, target), daemon=True).start()

    def _relay(self, source, target) -> None:
        try:
            while True:
                data = source.recv(1 << 16)
                if not data:
                    break
                target.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, target):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self.listener.close()
        with self.lock:
            connections, self.connections = self.connections, set()
        for end in connections:  # reset, as a server that went away
            with contextlib.suppress(OSError):
                end.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def close(self) -> None:
        self.cut()
