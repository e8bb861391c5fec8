"""Where files live: local paths and object-store URIs behind the few calls the readers need.

A path is **remote** when it is a URI whose scheme is not ``file``: ``s3://bucket/key``,
``gs://bucket/key``, ``hdfs://host/path``, or any other scheme ``fsspec`` knows (``abfs://``,
``memory://``, ...). S3, GCS and HDFS are reached through ``pyarrow.fs`` (its own C++ clients,
``FileSystem.from_uri``); other schemes through ``fsspec``, wrapped as a pyarrow filesystem
(``PyFileSystem(FSSpecHandler(...))``). Everything else is a local path, handled by the standard
library exactly as before (``open``, ``os.stat``, ``glob``), so local runs do not change.

The functions here mirror the standard ones they stand in for — :func:`open` (binary reading
only), :func:`getsize`, :func:`stat`, :func:`exists`, :func:`isdir`, :func:`isfile`,
:func:`glob`, :func:`join`, :func:`dirname`, :func:`realpath` — and raise the same
``OSError``/``FileNotFoundError`` for a missing file, so a reader uses them without a branch.

**Credentials and endpoints** come from the storage library's own configuration, never from the
run config (which is hashed and logged): for S3, the AWS environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``/``AWS_DEFAULT_REGION``, and
``AWS_ENDPOINT_URL`` for an S3-compatible server such as MinIO) or ``~/.aws/``; for GCS, the
Google application-default credentials. A URI is taken literally: pyarrow's
``?endpoint_override=...`` options are not read from it (they would put an endpoint into file
names and the config hash); set ``AWS_ENDPOINT_URL`` instead.

A remote file is read through a 1 MB buffer over ranged reads (``open_input_file``), so a
reader's seeks and line reads cost one request per megabyte, not per call.
"""

from __future__ import annotations

import builtins
import fnmatch
import glob as _glob
import io
import os
import threading
from dataclasses import dataclass
from typing import IO, Any

from .errors import ConfigError

__all__ = ["is_remote", "filesystem", "open", "open_arrow", "arrow_source", "stat", "getsize", "exists", "isdir",
           "isfile", "glob", "join", "dirname", "realpath", "FileStat"]

_BUFFER = 1 << 20
_PYARROW_SCHEMES = ("s3", "gs", "gcs", "hdfs", "viewfs")
_FS_CACHE: dict[tuple[str, str], Any] = {}
_FS_LOCK = threading.Lock()
os.register_at_fork(after_in_child=_FS_CACHE.clear)


def is_remote(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an object-store (or other non-local) URI: ``scheme://...`` with a
    scheme other than ``file`` (a Windows drive letter is not a scheme)."""
    s = os.fspath(path)
    if not isinstance(s, str) or "://" not in s:
        return False
    scheme = s.split("://", 1)[0]
    return len(scheme) > 1 and scheme.replace("+", "").replace("-", "").replace(".", "").isalnum() \
        and scheme.lower() != "file"


@dataclass(frozen=True, slots=True)
class _Uri:
    scheme: str
    netloc: str
    path: str  # without the leading "/"

    def with_path(self, path: str) -> str:
        return f"{self.scheme}://{self.netloc}/{path.lstrip('/')}"


def _split(uri: str) -> _Uri:
    """``scheme://netloc/path``, taken literally (``?`` and ``#`` are parts of keys and globs)."""
    scheme, rest = uri.split("://", 1)
    netloc, _, path = rest.partition("/")
    return _Uri(scheme.lower(), netloc, path)


def filesystem(uri: str):
    """The ``pyarrow.fs.FileSystem`` for a remote URI and the path in it.

    One filesystem object per (scheme, bucket or host) in a process (forgotten in a forked
    child: the AWS SDK's connections do not survive ``fork``).

    Returns:
        (pyarrow filesystem, path inside it: ``bucket/key`` for S3/GCS).
    Raises:
        ConfigError: an unknown scheme (neither pyarrow nor fsspec knows it, with fsspec's reason,
            which names the package to install); the caller names the config key.
    """
    u = _split(uri)
    key = (u.scheme, u.netloc)
    with _FS_LOCK:
        fs = _FS_CACHE.get(key)
    if fs is None:
        fs = _make_filesystem(u)
        with _FS_LOCK:
            fs = _FS_CACHE.setdefault(key, fs)
    if u.scheme in _PYARROW_SCHEMES and u.scheme not in ("hdfs", "viewfs"):
        return fs, f"{u.netloc}/{u.path}".rstrip("/")
    return fs, _fsspec_path(u)


def _fsspec_path(u: _Uri) -> str:
    if u.scheme in ("hdfs", "viewfs"):
        return "/" + u.path
    return f"{u.netloc}/{u.path}".rstrip("/") if u.netloc else u.path


#: How long the first request to a GCS bucket may retry before the bucket counts as unreachable
#: (:func:`_reach_gcs`), in seconds.
GCS_REACH_SECONDS = 4


def _make_filesystem(u: _Uri):
    import pyarrow.fs as pafs

    if u.scheme in _PYARROW_SCHEMES:
        if u.scheme in ("gs", "gcs"):
            _reach_gcs(u)
        return pafs.FileSystem.from_uri(f"{u.scheme}://{u.netloc}/")[0]
    try:
        import fsspec  # a dependency of datasets
    except ImportError:  # pragma: no cover - datasets always brings it
        raise ConfigError(f"{u.scheme}:// paths need fsspec: pip install fsspec") from None
    try:
        ffs = fsspec.filesystem(u.scheme)
    except (ImportError, ValueError) as e:
        raise ConfigError(f"{u.scheme}://{u.netloc}/{u.path}: {u.scheme}:// is not a filesystem pyarrow or "
                          f"fsspec can open here ({e})") from None
    return pafs.PyFileSystem(pafs.FSSpecHandler(ffs))


def _reach_gcs(u: _Uri) -> None:
    """Refuse a GCS bucket that cannot be reached at all (no network, no DNS, the endpoint
    refusing), in seconds: pyarrow's GCS client (google-cloud-cpp) retries such a request for
    15 minutes by default, so a run with no network hung that long before its first line. One
    request (the bucket's file info) on a client whose retries stop after
    :data:`GCS_REACH_SECONDS`; only its UNAVAILABLE status (the retry policy exhausted) refuses:
    an answer of any kind (not found, permission denied) is left to the real client, which keeps
    pyarrow's default retries for the transfers.

    Raises:
        ConfigError: the bucket cannot be reached, with the URI and the client's last error; the
            caller names the config key.
    """
    import datetime

    import pyarrow.fs as pafs

    probe = pafs.GcsFileSystem(retry_time_limit=datetime.timedelta(seconds=GCS_REACH_SECONDS))
    try:
        probe.get_file_info(u.netloc)
    except OSError as e:
        text = str(e)
        if "UNAVAILABLE" not in text:
            return
        last = text.split("last message of ", 1)[-1].split(" error_info=", 1)[0]
        if "underlying error message was: " in last:  # the OAuth2 token's request: its own error
            last = "no OAuth2 access token: " + last.split("underlying error message was: ", 1)[1]
        last = last.replace("PerformWork() - ", "").strip()
        raise ConfigError(f"{u.scheme}://{u.netloc}/{u.path}: Google Cloud Storage cannot be reached (no answer in "
                          f"{GCS_REACH_SECONDS} s of retries: {last[:200]}); check the network, a proxy and the "
                          "Google credentials") from None


def _info(path: str):
    import pyarrow.fs as pafs

    fs, p = filesystem(path)
    try:
        return fs.get_file_info(p), pafs.FileType
    except OSError as e:
        raise OSError(f"{path}: {e}") from None


def open(path: str | os.PathLike, mode: str = "rb", buffering: int = _BUFFER) -> IO[bytes]:
    """Open a file for binary reading: the builtin ``open`` for a local path; for a URI a
    buffered, seekable reader over the store's ranged reads.

    Raises:
        ValueError: a mode other than ``"rb"``.
        FileNotFoundError: no such file.
    """
    if mode != "rb":
        raise ValueError(f"rmlprep.fs.open reads only (mode 'rb'), got {mode!r}")
    path = os.fspath(path)
    if not is_remote(path):
        return builtins.open(path, "rb", buffering=buffering)
    info, ft = _info(path)
    if info.type != ft.File:
        raise FileNotFoundError(2, "No such file" if info.type == ft.NotFound else "Not a file", path)
    fs, p = filesystem(path)
    raw = fs.open_input_file(p)
    return io.BufferedReader(raw, max(buffering, io.DEFAULT_BUFFER_SIZE))  # type: ignore[arg-type]


def open_arrow(path: str | os.PathLike):
    """A random-access source for pyarrow readers (Parquet, Arrow IPC): a memory map of a local
    file, the store's ``RandomAccessFile`` for a URI."""
    import pyarrow as pa

    path = os.fspath(path)
    if not is_remote(path):
        return pa.memory_map(path)
    fs, p = filesystem(path)
    return fs.open_input_file(p)


def arrow_source(path: str | os.PathLike):
    """What pyarrow's file readers (``pq.ParquetFile``) take: the path itself when local, the
    store's ``RandomAccessFile`` for a URI."""
    path = os.fspath(path)
    if not is_remote(path):
        return path
    fs, p = filesystem(path)
    return fs.open_input_file(p)


@dataclass(frozen=True, slots=True)
class FileStat:
    """What :func:`stat` tells: size in bytes and modification time (ns since the epoch; an
    object store's last-modified time, which changes when the object is rewritten)."""

    st_size: int
    st_mtime_ns: int


def stat(path: str | os.PathLike) -> FileStat | os.stat_result:
    """``os.stat`` for a local path; size and mtime of a remote object.

    Raises:
        FileNotFoundError: no such file (or a remote directory).
    """
    path = os.fspath(path)
    if not is_remote(path):
        return os.stat(path)
    info, ft = _info(path)
    if info.type != ft.File:
        raise FileNotFoundError(2, "No such file", path)
    return FileStat(int(info.size), int(info.mtime_ns or 0))


def getsize(path: str | os.PathLike) -> int:
    return stat(path).st_size


def exists(path: str | os.PathLike) -> bool:
    path = os.fspath(path)
    if not is_remote(path):
        return os.path.exists(path)
    info, ft = _info(path)
    return info.type != ft.NotFound


def isdir(path: str | os.PathLike) -> bool:
    path = os.fspath(path)
    if not is_remote(path):
        return os.path.isdir(path)
    info, ft = _info(path)
    return info.type == ft.Directory


def isfile(path: str | os.PathLike) -> bool:
    path = os.fspath(path)
    if not is_remote(path):
        return os.path.isfile(path)
    info, ft = _info(path)
    return info.type == ft.File


def join(base: str | os.PathLike, *names: str) -> str:
    """``os.path.join`` for a local path; ``/``-joined keys for a URI."""
    base = os.fspath(base)
    if not is_remote(base):
        return os.path.join(base, *names)
    u = _split(base)
    return u.with_path("/".join([u.path.rstrip("/"), *(n.strip("/") for n in names)]).lstrip("/"))


def dirname(path: str | os.PathLike) -> str:
    path = os.fspath(path)
    if not is_remote(path):
        return os.path.dirname(path)
    u = _split(path)
    return u.with_path(u.path.rstrip("/").rpartition("/")[0])


def realpath(path: str | os.PathLike) -> str:
    """``os.path.realpath`` for a local path; a URI as it is (no trailing ``/``)."""
    path = os.fspath(path)
    if not is_remote(path):
        return os.path.realpath(path)
    u = _split(path)
    return u.with_path(u.path.rstrip("/"))


def _match(rel: list[str], pat: list[str]) -> bool:
    """Segment-wise glob match, ``**`` spanning any number of segments (``glob(recursive=True)``)."""
    if not pat:
        return not rel
    if pat[0] == "**":
        return any(_match(rel[i:], pat[1:]) for i in range(len(rel) + 1))
    return bool(rel) and fnmatch.fnmatchcase(rel[0], pat[0]) and _match(rel[1:], pat[1:])


def glob(pattern: str, *, recursive: bool = True) -> list[str]:
    """Paths matching a glob pattern, sorted: :func:`glob.glob` for a local pattern; for a URI,
    one recursive listing under the pattern's fixed prefix, matched segment by segment
    (``*`` stays inside one segment, ``**`` spans segments), files and directories alike.
    Hidden names (``.x``) match only a pattern segment that starts with a dot, as in
    :func:`glob.glob`."""
    if not is_remote(pattern):
        return sorted(_glob.glob(pattern, recursive=recursive))
    import pyarrow.fs as pafs

    u = _split(pattern)
    segs = u.path.split("/")
    fixed: list[str] = []
    for s in segs:
        if any(ch in s for ch in "*?["):
            break
        fixed.append(s)
    rest = segs[len(fixed):]
    if not rest:
        return [pattern] if exists(pattern) else []
    fs, root = filesystem(u.with_path("/".join(fixed)))
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    out = []
    for info in infos:
        rel = info.path[len(root):].strip("/").split("/")
        if any(r.startswith(".") and not p.startswith(".") for r, p in zip(rel, rest) if p != "**"):
            continue
        if _match(rel, rest) if recursive else (len(rel) == len(rest) and _match(rel, rest)):
            out.append(u.with_path("/".join([*fixed, *rel])))
    return sorted(out)
