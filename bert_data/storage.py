"""Where bytes live: local paths, or any ``fsspec`` URL (``s3://``, ``gs://``, ``hf://``,
``https://``, ``memory://`` ...).  The one place that knows the difference.

Local paths keep going through ``open`` and ``os`` (no fsspec import, no cost); a URL goes
through ``fsspec.core.url_to_fs``, so each protocol's library brings its own credentials and
settings from its usual environment and configuration (``AWS_*`` variables and
``~/.aws/config`` for s3fs, Application Default Credentials for gcsfs, ``HF_TOKEN`` for
``hf://``), and fsspec's own configuration applies (e.g. ``FSSPEC_S3_ENDPOINT_URL`` for an S3
endpoint other than AWS's: every worker process of a cluster inherits it).

Object stores have no rename and no append: a write here is one whole object (an upload is
visible only once complete), which is what the callers rely on.
"""

from __future__ import annotations

import errno
import functools
import os
import posixpath
import re
import stat as stat_module
import sys
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*(::[A-Za-z][A-Za-z0-9+.\-]*)*://")


class StorageError(OSError):
    """A URL that cannot be used; the message is one line naming it (credentials redacted)."""

    def __init__(self, message: str):
        super().__init__(redact(message))


# ---------------------------------------------------------------------------- secrets

REDACTED = "***"
# user:password@ (or a bare token@) after a scheme: what a URL carries as credentials.
# A password may hold a "/" (an unencoded AWS secret key): after "user:", up to the "@".
_URL_CREDENTIALS = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/@\s?#'\"]+(?::[^@\s'\"]*)?)@")
# Query-string parameters that are credentials: presigned URLs (S3, GCS), SAS tokens (Azure),
# API keys and tokens of web servers.
_SECRET_PARAMETERS = re.compile(
    r"(?i)(?P<name>[?&;](?:x-amz-signature|x-amz-credential|x-amz-security-token|awsaccesskeyid|signature|"
    r"x-goog-signature|x-goog-credential|sig|token|access_token|auth|api_key|apikey|key|password|secret)=)"
    r"(?P<value>[^&#\s'\"]+)")


def redact(text):
    """``text`` with the credentials of any URL in it replaced by ***: ``user:password@`` and
    query parameters such as ``X-Amz-Signature=``, ``sig=``, ``token=``.  Anything not a str is
    returned as it is.  Applied wherever a URL is stored or printed: no secret leaves the
    process (the manifest, messages, logs, tracebacks)."""
    if not isinstance(text, str) or "://" not in text and "=" not in text:
        return text
    text = _URL_CREDENTIALS.sub(lambda match: match["scheme"] + REDACTED + "@", text)
    return _SECRET_PARAMETERS.sub(lambda match: match["name"] + REDACTED, text)


def redact_data(value):
    """``redact`` over JSON-like data (dicts, lists, strings), returning a copy."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_data(key): redact_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_data(item) for item in value]
    return value


def is_url(path) -> bool:
    """``scheme://...`` (also fsspec's chained ``simplecache::s3://...``); a local path otherwise."""
    return isinstance(path, str) and "://" in path and bool(_URL.match(path))  # (a path: no regex, ~8 a document)


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def filesystem(url: str):
    """(fsspec file system, path within it) for a URL; a one-line StorageError when the
    protocol's library is missing."""
    try:
        import fsspec.core
    except ImportError:
        raise StorageError(f"{url}: URLs need fsspec (and s3fs / gcsfs for s3:// / gs://): "
                           "pip install 'bert_data[cloud]'") from None
    try:
        return fsspec.core.url_to_fs(url)
    except ImportError as error:
        raise StorageError(f"{url}: {_one_line(error)}") from None
    except ValueError as error:
        raise StorageError(f"{url}: not a URL fsspec knows ({_one_line(error)})") from None


def join(base: str, *names: str) -> str:
    """``base/name/...`` for a URL (always ``/``), ``os.path.join`` for a local path."""
    if is_url(base):
        return "/".join([base.rstrip("/")] + [name.strip("/") for name in names]) if names else base
    return os.path.join(base, *names)


def resolve(prefix: str, name: str) -> str:
    """A path from a metadata file: a URL as it is; else relative to ``prefix`` (a directory or a
    URL).  Local results are absolute: workers may run in another directory."""
    if is_url(name):
        return name
    if is_url(prefix):
        return prefix.rstrip("/") + "/" + name.lstrip("/")
    return os.path.abspath(os.path.join(prefix, name) if prefix else name)


def basename(path: str) -> str:
    return posixpath.basename(path.rstrip("/")) if is_url(path) else os.path.basename(path)


def dirname(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[0] if is_url(path) else os.path.dirname(path)


class RealPaths:
    """``os.path.realpath`` of many local paths, each directory resolved once: a file then costs
    one ``lstat`` (is its own name a link?) instead of one a component of its path, in Python
    (a run checks every listed document: about 6 of its 10 system calls a document, and a
    tenth of a second before any work, on 2,333 documents).  Gives exactly what
    ``os.path.realpath`` gives."""

    def __init__(self):
        self.directories: Dict[str, str] = {}

    def __call__(self, path: str) -> str:
        directory, name = os.path.split(path)
        if name in ("", ".", ".."):
            return os.path.realpath(path)
        try:
            if stat_module.S_ISLNK(os.lstat(path).st_mode):
                return os.path.realpath(path)
        except FileNotFoundError:  # (realpath keeps a name that does not exist as it is)
            pass
        except OSError:  # e.g. a component that is a file: realpath's own way
            return os.path.realpath(path)
        real = self.directories.get(directory)
        if real is None:
            real = self.directories[directory] = os.path.realpath(directory)
        return os.path.join(real, name)


_FILE_KINDS = ((stat_module.S_ISDIR, "a directory"), (stat_module.S_ISFIFO, "a FIFO (named pipe)"),
               (stat_module.S_ISCHR, "a character device"), (stat_module.S_ISBLK, "a block device"),
               (stat_module.S_ISSOCK, "a socket"))


FILE_NOT_FOUND = "file not found"


def not_a_regular_file(path: str) -> str:
    """Why a local path cannot be read as a file ("" when it can, and for URLs), found with
    ``os.stat`` alone: opening a FIFO to look would block until something writes to it, and a
    device may never end."""
    return "" if is_url(path) else regular_file_status(path)[0]


def regular_file_status(path: str) -> Tuple[str, Optional[os.stat_result]]:
    """A local path's ``not_a_regular_file`` reason and its ``os.stat`` (None if it failed)."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return FILE_NOT_FOUND, None
    except OSError as error:
        return error.strerror or _one_line(error), None
    if stat_module.S_ISREG(found.st_mode):
        return "", found
    kind = next((name for test, name in _FILE_KINDS if test(found.st_mode)), "not a file")
    return f"not a regular file: {kind}", found


# ---------------------------------------------------------------------------- reading

def open_read(path: str):
    """A binary file object (seekable for local files and for fsspec's object-store files)."""
    if not is_url(path):
        return open(path, "rb")
    fs, inner = filesystem(path)
    return fs.open(inner, "rb")


def read_bytes(path: str, start: int = 0, end: Optional[int] = None) -> bytes:
    """Bytes ``start`` .. ``end`` (exclusive; None: to the end) of a file or object."""
    if not is_url(path):
        with open(path, "rb") as handle:
            handle.seek(start)
            return handle.read() if end is None else handle.read(max(0, end - start))
    fs, inner = filesystem(path)
    if not start and end is None:
        return fs.cat_file(inner)
    data = fs.cat_file(inner, start=start, end=end)
    if end is not None and len(data) > end - start:  # a web server that ignores byte ranges
        raise StorageError(f"{path}: the server ignored a byte-range request (bytes {start}-{end})")
    return data


def read_many(paths: Sequence[str], starts: Optional[Sequence[int]] = None,
              ends: Optional[Sequence[Optional[int]]] = None) -> List[bytes]:
    """Several reads at once: object stores answer them concurrently (one round trip's latency,
    not one per range).  All paths are URLs of one file system, or all local."""
    if not paths:
        return []
    starts = list(starts) if starts is not None else [0] * len(paths)
    ends = list(ends) if ends is not None else [None] * len(paths)
    if not is_url(paths[0]):
        return [read_bytes(p, s, e) for p, s, e in zip(paths, starts, ends)]
    fs, _ = filesystem(paths[0])
    inner = [filesystem(p)[1] if "::" in p else fs._strip_protocol(p) for p in paths]
    if all(e is None for e in ends) and not any(starts):
        found = fs.cat(inner, on_error="raise")
        return [found[p] for p in inner]
    return fs.cat_ranges(inner, starts, ends, on_error="raise")


class Unreachable(ConnectionError):
    """Object storage that cannot be reached (its URL, redacted, in ``url``): raised in place of
    the storage library's error where that would not cross a process boundary whole."""

    def __init__(self, url: str):
        super().__init__(f"cannot reach {url}")
        self.url = url

    def __reduce__(self):
        return Unreachable, (self.url,)


# Errors of the storage libraries (botocore, aiohttp, urllib3, requests) that say the endpoint
# could not be reached or went away mid-request, by name: none of them need be installed.
_UNREACHABLE = {"EndpointConnectionError", "ConnectTimeoutError", "ConnectionClosedError", "ReadTimeoutError",
                "ClientConnectorError", "ServerDisconnectedError", "ClientOSError", "NewConnectionError",
                "MaxRetryError", "ProxyConnectionError"}


def unreachable(error: Optional[BaseException]) -> Optional[str]:
    """If ``error`` (or one it was raised from or while handling) says object storage could not
    be reached: its URL, redacted (the endpoint's, as the library names it), else None."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, Unreachable):
            return error.url
        if type(error).__name__ in _UNREACHABLE:
            url = (getattr(error, "kwargs", None) or {}).get("endpoint_url")
            if not url:
                found = re.search(r"(?:https?|s3|gs|az)://[^\s\"']+", str(error))
                host = getattr(error, "host", None)  # (aiohttp's)
                url = found.group(0) if found else (f"{host}:{getattr(error, 'port', '')}" if host else "object storage")
            return redact(url.split("?")[0])  # (a listing's query says nothing to the user)
        error = error.__cause__ or error.__context__
    return None


def info(path: str) -> Dict:
    """``{"type": "file"|"directory", "size": int}``; FileNotFoundError if absent."""
    if not is_url(path):
        stat = os.stat(path)
        return {"type": "directory" if os.path.isdir(path) else "file", "size": stat.st_size}
    fs, inner = filesystem(path)
    found = fs.info(inner)
    return {"type": found.get("type", "file"), "size": int(found.get("size") or 0), "version": _version(found)}


def _version(found: Dict) -> str:
    """What changes when an object is replaced (its ETag, else its modification time)."""
    for key in ("ETag", "etag", "md5Hash", "generation", "LastModified", "mtime", "updated", "last_modified"):
        if found.get(key):
            return str(found[key])
    return ""


def stamp(path: str) -> str:
    """A file's identity now (size and version): a cached reader of an older file is not reused."""
    if not is_url(path):
        stat = os.stat(path)
        return f"{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ino}"
    found = info(path)
    return f"{found['size']}:{found['version']}"


def size(path: str) -> int:
    return os.path.getsize(path) if not is_url(path) else info(path)["size"]


def exists(path: str) -> bool:
    if not is_url(path):
        return os.path.exists(path)
    fs, inner = filesystem(path)
    return fs.exists(inner)


def stat_files(paths: Sequence[str]) -> Dict[str, Optional[Dict]]:
    """``info`` of many URLs, by listing their folders (one request a folder, not one a file);
    None for a path that does not exist.  Falls back to one request a file where listing is
    not possible (``https://``)."""
    found: Dict[str, Optional[Dict]] = {}
    by_folder: Dict[str, List[str]] = {}
    for path in paths:
        by_folder.setdefault(dirname(path), []).append(path)
    for folder, members in by_folder.items():
        listing = None
        if len(members) > 1:
            try:
                fs, inner = filesystem(folder)
                listing = {fs._strip_protocol(entry["name"]).rstrip("/"): entry
                           for entry in fs.ls(inner, detail=True)}
            except Exception:  # noqa: BLE001 - not listable: ask file by file
                listing = None
        for path in members:
            if listing is not None:
                fs, inner = filesystem(path)
                entry = listing.get(inner.rstrip("/"))
                # Else asked directly: a listing (an HTTP page's links) may be partial or lack sizes.
                if entry is not None and entry.get("size") is not None:
                    found[path] = {"type": entry.get("type", "file"), "size": int(entry["size"]),
                                   "version": _version(entry)}
                    continue
            try:
                found[path] = info(path)
            except FileNotFoundError:
                found[path] = None
    return found


def glob(pattern: str) -> List[str]:
    """URLs matching an fsspec glob (``s3://bucket/c4/*.parquet``), sorted."""
    fs, inner = filesystem(pattern)
    protocol = pattern.split("://", 1)[0]
    found = fs.glob(inner, detail=True)
    return sorted(f"{protocol}://{path}" for path, entry in found.items() if entry.get("type", "file") == "file")


def listdir(path: str) -> List[str]:
    """Names in a folder ([] if it does not exist)."""
    if not is_url(path):
        return sorted(os.listdir(path)) if os.path.isdir(path) else []
    fs, inner = filesystem(path)
    try:
        entries = fs.ls(inner, detail=False, refresh=True)
    except FileNotFoundError:
        return []
    return sorted(posixpath.basename(entry.rstrip("/")) for entry in entries if entry.rstrip("/") != inner.rstrip("/"))


# ---------------------------------------------------------------------------- writing

def write_bytes(path: str, data: bytes) -> None:
    """One whole object (a URL), or a local file written through a temporary and a rename: a
    reader never sees part of it."""
    if not is_url(path):
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "wb") as handle:
            handle.write(data)
        os.replace(temporary, path)
        return
    fs, inner = filesystem(path)
    fs.pipe_file(inner, data)


def upload(local_path: str, url: str) -> None:
    """A local file to a URL: the object appears only once the upload is complete (a multipart
    upload is committed at its end), so readers never see part of it."""
    fs, inner = filesystem(url)
    fs.put_file(local_path, inner)


def download(url: str, local_path: str) -> None:
    fs, inner = filesystem(url)
    fs.get_file(inner, local_path)


def remove(path: str) -> None:
    """Remove a file or object; absent is fine."""
    if not is_url(path):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        return
    fs, inner = filesystem(path)
    try:
        fs.rm_file(inner)
    except FileNotFoundError:
        pass


def remove_many(paths: Iterable[str]) -> None:
    paths = list(paths)
    if not paths:
        return
    if not is_url(paths[0]):
        for path in paths:
            remove(path)
        return
    fs, _ = filesystem(paths[0])
    try:
        fs.rm([fs._strip_protocol(path) for path in paths])
    except FileNotFoundError:
        pass


class BackgroundRemovals:
    """Files removed, and blocks of files given back (:func:`release_blocks`), by a thread of
    their own, in the order given (``remove``, ``release``), while the caller goes on: unlinking
    a large file can wait for the file system's journal, which other threads' fsyncs keep busy.
    ``close`` waits for them all and raises the first error met."""

    def __init__(self):
        import queue
        import threading

        self._work: "queue.SimpleQueue" = queue.SimpleQueue()
        self.error: Optional[BaseException] = None
        self.releasing = True  # (False once the file system said it cannot: not asked again)
        self._thread = threading.Thread(target=self._run, name="bert_data-removals", daemon=True)
        self._thread.start()

    def remove(self, paths: Iterable[str]) -> None:
        self._work.put(("remove", list(paths)))

    def release(self, ranges: Iterable[Tuple[str, List[Tuple[int, int]]]]) -> None:
        """Each ``(path, [(offset, length), ...])``: the blocks wholly inside those bytes given
        back (:func:`release_blocks`), once the removals asked before are done."""
        if self.releasing:
            self._work.put(("release", list(ranges)))

    def _run(self) -> None:
        while True:
            item = self._work.get()
            if item is None:
                return
            kind, work = item
            try:
                if kind == "remove":
                    remove_many(work)
                    continue
                for path, ranges in work:
                    if self.releasing and not release_blocks(path, ranges):
                        self.releasing = False
            except BaseException as error:  # noqa: BLE001 - raised by ``close``, in the caller's thread
                self.error = self.error or error

    def close(self, quietly: bool = False) -> None:
        """Every removal asked done; the first error raised (not ``quietly``: the caller is
        failing already)."""
        self._work.put(None)
        self._thread.join()
        if self.error is not None and not quietly:
            raise self.error


_PUNCH_HOLE = 0x02 | 0x01  # linux/falloc.h: FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
_CANNOT_PUNCH = {getattr(errno, name) for name in ("EOPNOTSUPP", "ENOTSUP", "ENOSYS", "EINVAL") if hasattr(errno, name)}


@functools.lru_cache(maxsize=None)
def linux_call(name: str, *argtypes: str):
    """The C library's ``name`` on Linux, for a call Python's ``os`` has no binding for, its
    arguments of ctypes' type names (``"c_int"``...), returning an int, errno kept; None
    elsewhere, or where the library lacks it."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        function = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    function.argtypes = [getattr(ctypes, kind) for kind in argtypes]
    function.restype = ctypes.c_int
    return function


def _fallocate():
    """Linux's ``fallocate`` (``os.posix_fallocate`` cannot punch a hole)."""
    return linux_call("fallocate", "c_int", "c_int", "c_int64", "c_int64")


def release_blocks(path: str, ranges: Iterable[Tuple[int, int]]) -> bool:
    """The blocks of a local file that lie wholly inside ``(offset, length)`` byte ranges given
    back to the file system (a hole punched: they read as zeros from then on, and take no disk
    nor page cache); the file keeps its size, and the bytes outside the ranges, even those
    sharing a block with one, are neither changed nor rewritten.  False where the platform or
    the file system cannot (nothing changed; ask no more); a file gone is fine."""
    function = _fallocate()
    if function is None:
        return False
    try:
        handle = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        return True
    try:
        block = max(os.fstat(handle).st_blksize, _page_size())
        for offset, length in ranges:
            begin, end = -(-offset // block) * block, (offset + length) // block * block
            if end > begin and function(handle, _PUNCH_HOLE, begin, end - begin) != 0:
                import ctypes

                code = ctypes.get_errno()
                if code in _CANNOT_PUNCH:
                    return False
                raise OSError(code, f"{os.strerror(code)}: giving back the blocks of {path}")
    finally:
        os.close(handle)
    return True


def _page_size() -> int:
    import mmap

    return mmap.PAGESIZE


def remove_tree(path: str) -> None:
    """A folder and everything under it; absent is fine."""
    if not is_url(path):
        import shutil

        shutil.rmtree(path, ignore_errors=True)
        return
    fs, inner = filesystem(path)
    try:
        fs.rm(inner, recursive=True)
    except FileNotFoundError:
        pass


def makedirs(path: str) -> None:
    """Local folders; object stores need none (keys are created with their objects)."""
    if not is_url(path):
        os.makedirs(path, exist_ok=True)
