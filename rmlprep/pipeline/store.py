"""The output folder on an object store (``output.dir = "s3://bucket/prefix"``, any remote URI of
:mod:`rmlprep.fs`): :class:`OutputFolder`'s primitives over ``pyarrow.fs``, same rules.

``OutputFolder(uri)`` returns an :class:`ObjectStoreFolder`; everything built on the primitives
(done markers, verification, sweeping, reports) is shared with the local folder.

**Write, then commit.** An object store has no rename, and an upload that fails half way can
still leave an object behind (pyarrow completes a multipart upload when its stream is closed,
also on an error). So :meth:`ObjectStoreFolder.commit` writes the whole file to a local
temporary first (its sha256 taken there), uploads it as ``<name>.tmp-<host>-<pid>``, and then
copies it server-side to ``<name>`` (``FileSystem.move``: S3 ``CopyObject`` + delete). A copy
is atomic on the store: a reader, or a rerun, sees the complete object under its name or none.
A unit's files are committed in the same order as on disk (shard, rejects, done marker), and a
store with read-after-write consistency (S3 since 2020, GCS) shows the marker only after the
shard. Single objects up to 5 GB (S3's ``CopyObject`` limit; a unit's shard is far smaller).

**One run at a time.** ``flock`` does not exist on a store. On S3 (with ``boto3`` installed,
``pip install 'rmlprep[s3]'``) the lock is a lease: ``.rmlprep.lock`` is created with a
conditional put (``If-None-Match: *``), so of two runs starting together exactly one gets it;
the holder rewrites it every :data:`REFRESH_S` seconds with ``If-Match`` on its own ETag; a
lock whose last write is older than :data:`LEASE_S` seconds (by the store's clock, so host
clocks do not matter), or that names a process of this host which no longer runs (a run killed
here), belongs to a killed run and is taken over, again with ``If-Match``, so two runs cannot
both take it over. A run that finds its lease taken over (it stalled for over
a minute) commits nothing more: each commit first checks that the lock object holds the run's
token (:func:`fence`, a GET), so a run waking after another took the folder over fails and
leaves that run's files alone (it once wrote its remaining units and manifest over them). AWS S3, MinIO and moto support
conditional writes; a store that answers ``NotImplemented`` falls back to the best-effort lock
below, with a warning. Without boto3, and on other stores, the lock is best effort: a run
refuses a lock object younger than the lease, then writes its own and reads it back; two runs
started within the same second can both proceed (their units are still committed atomically
and verified on resume, but their reports may mix). Temporaries are removed under the lock.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import IO, Any

from .. import fs
from ..errors import OutputError
from .output import LOCK_NAME, OutputFolder

__all__ = ["ObjectStoreFolder", "LEASE_S", "REFRESH_S", "fence", "still_held"]

#: seconds after its last refresh that a lock object counts as left by a killed run
LEASE_S = 60.0
#: seconds between two refreshes of the lock object by the run that holds it
REFRESH_S = 15.0
_SPOOL = 8 << 20  # bytes kept in memory before the local temporary goes to disk


def _store_error(what: str, e: BaseException) -> OutputError:
    msg = " ".join(str(e).split())[:300] or type(e).__name__
    return OutputError(f"{what}: {msg}; check the bucket, the credentials (AWS_* variables) and "
                       "AWS_ENDPOINT_URL, then rerun (done units are kept)", path=what)


class ObjectStoreFolder(OutputFolder):
    """An output folder under an object-store URI (see the module docstring).

    Args:
        path: the folder's URI, e.g. ``s3://bucket/runs/x`` (no trailing ``/`` needed).
    Attributes:
        path: the URI (a string, not a :class:`~pathlib.Path`).
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path).rstrip("/")  # type: ignore[assignment]
        self._fs, self._root = fs.filesystem(self.path)
        self._lease: _Lease | None = None
        self._fence = ""
        self.lock_note = ""

    def __repr__(self) -> str:
        return f"OutputFolder({self.path!r})"

    def _key(self, name: str) -> str:
        return f"{self._root}/{name}"

    def _uri(self, name: str) -> str:
        return f"{self.path}/{name}"

    # -- primitives ---------------------------------------------------------------------------
    def create(self) -> None:
        """Check that the bucket is there (a store has no folders to create).

        Raises:
            OutputError: the bucket does not exist or cannot be reached.
        """
        import pyarrow.fs as pafs

        bucket = self._root.split("/", 1)[0]
        try:
            info = self._fs.get_file_info(bucket)
            if info.type == pafs.FileType.NotFound:
                raise OutputError(f"output.dir {self.path}: the bucket {bucket!r} does not exist (rmlprep does not "
                                  "create buckets); create it or choose another --output", path=self.path)
            if not isinstance(self._fs, pafs.S3FileSystem) and not isinstance(self._fs, getattr(pafs, "GcsFileSystem", ())):
                self._fs.create_dir(self._root, recursive=True)
        except OSError as e:
            raise _store_error(f"output.dir {self.path}", e) from None

    def exists(self, name: str) -> bool:
        import pyarrow.fs as pafs

        try:
            return self._fs.get_file_info(self._key(name)).type == pafs.FileType.File
        except OSError as e:
            raise _store_error(self._uri(name), e) from None

    def entries(self) -> list[str]:
        """The folder's top-level names: its objects' first ``/`` segments, sorted."""
        return sorted({name.split("/", 1)[0] for name in self.list("**/*")})

    def list(self, pattern: str) -> list[str]:
        """Names (relative to the folder, ``/``-separated) matching a glob pattern, sorted
        (``*`` stays inside one ``/`` segment, as in :meth:`pathlib.Path.glob`)."""
        import pyarrow.fs as pafs

        try:
            infos = self._fs.get_file_info(pafs.FileSelector(self._root, recursive=True, allow_not_found=True))
        except OSError as e:
            raise _store_error(f"output.dir {self.path}", e) from None
        pat = pattern.split("/")
        out = []
        for info in infos:
            if info.type != pafs.FileType.File:
                continue
            rel = info.path[len(self._root):].strip("/")
            if fs._match(rel.split("/"), pat):
                out.append(rel)
        return sorted(out)

    def remove(self, name: str) -> None:
        import pyarrow.fs as pafs

        try:
            if self._fs.get_file_info(self._key(name)).type == pafs.FileType.File:
                self._fs.delete_file(self._key(name))
        except OSError as e:
            raise _store_error(self._uri(name), e) from None

    def remove_empty_folder(self, name: str) -> None:
        """Remove the empty ``name/`` marker object pyarrow's S3 client leaves when it deletes the
        last object under ``name`` (explorer5 X8). Never raises: a marker left is harmless."""
        import pyarrow.fs as pafs

        key = self._key(name)
        try:
            if (self._fs.get_file_info(key).type == pafs.FileType.Directory
                    and not self._fs.get_file_info(pafs.FileSelector(key, recursive=True))):
                self._fs.delete_dir(key)
        except OSError:
            pass

    def move(self, name: str, to: str) -> None:
        """Copy ``name`` to ``to`` server-side and delete it (``FileSystem.move``).

        Raises:
            OutputError: the copy or the delete failed.
        """
        try:
            self._fs.move(self._key(name), self._key(to))
        except OSError as e:
            raise _store_error(self._uri(name), e) from None

    def read_bytes(self, name: str) -> bytes:
        with self._fs.open_input_stream(self._key(name)) as f:
            return f.read()

    def open_input(self, name: str) -> IO[bytes]:
        """See :meth:`OutputFolder.open_input`: ranged reads of the object (``open_input_file``),
        buffered, never the whole object at once."""
        try:
            return io.BufferedReader(self._fs.open_input_file(self._key(name)), 1 << 20)
        except OSError as e:
            raise _store_error(self._uri(name), e) from None

    def sha256(self, name: str) -> str:
        h = hashlib.sha256()
        try:
            with self._fs.open_input_stream(self._key(name)) as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
        except OSError as e:
            raise _store_error(self._uri(name), e) from None
        return h.hexdigest()

    def stage(self, name: str, write: Callable[[IO[bytes]], None], *, digest: bool = False) -> tuple[Any, str | None]:
        """Write a file locally and upload it whole under a temporary key, for :meth:`publish`.

        Returns:
            (the temporary key, the sha256 hex of the bytes uploaded with ``digest=True``, else None).
        Raises:
            OutputError: the local write (TMPDIR) or the upload failed; the temporary is removed when possible.
        """
        tmp = self._key(f"{name}.tmp-{socket.gethostname()}-{os.getpid()}")
        with tempfile.SpooledTemporaryFile(max_size=_SPOOL) as local:
            try:
                write(local)
            except OSError as e:  # the local temporary's (a full TMPDIR), not the input's: it was "reading FILE"
                raise OutputError(f"{self._uri(name)}: writing its local temporary in {tempfile.gettempdir()}: {e.strerror or e}; "
                                  "free space there or set TMPDIR to a roomier disk, then rerun", path=self._uri(name)) from None
            local.seek(0)
            h = hashlib.sha256() if digest else None
            try:
                with self._fs.open_output_stream(tmp) as out:
                    while chunk := local.read(1 << 20):
                        if h is not None:
                            h.update(chunk)
                        out.write(chunk)
            except BaseException as e:
                self.discard(tmp)
                if isinstance(e, OSError):
                    raise _store_error(self._uri(name), e) from None
                raise
        return tmp, (h.hexdigest() if h is not None else None)

    def check_held(self) -> None:
        """Raises OutputError when fenced (:func:`fence`) and the lock object holds another run's token, or none."""
        try:
            token = json.loads(self.read_bytes(LOCK_NAME)).get("token") if self._fence else None
        except (FileNotFoundError, ValueError, AttributeError):  # gone, or no lock of ours: not this run's
            token = None
        except OSError as e:  # the store out of reach is no takeover
            raise _store_error(self._uri(LOCK_NAME), e) from None
        if self._fence and token != self._fence:
            raise OutputError(f"output.dir {self.path}: another run took this folder's lock over while this run held it "
                              f"(this run stalled for over {LEASE_S:.0f} s): this run commits nothing more; rerun once that run is done", path=self.path)

    def publish(self, tmp: Any, name: str) -> None:
        """Copy a temporary of :meth:`stage` to ``name`` server-side (atomic: the name appears
        whole), once :meth:`check_held` passes. Raises OutputError: the copy failed, or the folder
        is another run's; nothing new is under ``name`` and the temporary is removed when possible."""
        try:
            self.check_held()
            self._fs.move(tmp, self._key(name))
        except BaseException as e:
            self.discard(tmp)
            if isinstance(e, OSError):
                raise _store_error(self._uri(name), e) from None
            raise

    def discard(self, tmp: Any) -> None:
        """Remove a temporary of :meth:`stage` if it is there (never raises)."""
        try:
            self._fs.delete_file(tmp)
        except OSError:
            pass  # never created, or the store is out of reach: check() removes it later

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the folder for one run (a lease on :data:`~.output.LOCK_NAME`, see the module
        docstring) and probe that an object can be committed.

        Raises:
            OutputError: another live run holds the lease (its pid and host named); the bucket is
                missing or cannot be written; the lease was taken over during the run.
        """
        self.create()
        lease = _Lease(self)
        lease.acquire()
        self._lease = lease
        self.lock_note = lease.note
        try:
            self.commit(".rmlprep.probe", lambda f: f.write(b"rmlprep can write here\n"))  # writability, up front
            self.remove(".rmlprep.probe")
            yield
            lease.check()
        finally:
            lease.release()
            self._lease = None


OutputFolder.remote_class = ObjectStoreFolder


def fence(out: OutputFolder, token: str | None = None) -> str:
    """Have ``out`` commit only while the lock object holds ``token`` (None: its own lease's); returns it ("" on a disk)."""
    if isinstance(out, ObjectStoreFolder):
        out._fence = (out._lease.token if out._lease else "") if token is None else token
    return getattr(out, "_fence", "")


def still_held(out: OutputFolder) -> bool:
    """Whether the run ``out`` is fenced for still holds the folder (always, on a disk): one that
    lost it must not clean up, the files being another run's."""
    with suppress(OutputError):
        return out.check_held() is None if isinstance(out, ObjectStoreFolder) else True
    return False


class _Lease:
    """The lock object of an :class:`ObjectStoreFolder` and the thread that refreshes it."""

    def __init__(self, folder: ObjectStoreFolder):
        self.folder = folder
        self.key = folder._key(LOCK_NAME)
        self.bucket, _, self.object_key = self.key.partition("/")
        self.token = uuid.uuid4().hex
        self.etag: str | None = None
        self.lost: str | None = None
        self.note = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._s3 = self._client()

    def _client(self):
        import pyarrow.fs as pafs

        if not isinstance(self.folder._fs, pafs.S3FileSystem):
            return None
        try:
            import boto3  # optional (rmlprep[s3]): conditional writes, which pyarrow does not expose
        except ImportError:
            self.note = "boto3 is not installed (pip install 'rmlprep[s3]'): best-effort lock"
            return None
        return boto3.client("s3")

    def _body(self) -> bytes:
        return json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "token": self.token,
                           "time": time.time()}).encode()

    def _holder(self, body: bytes) -> str:
        try:
            d = json.loads(body)
            return f"pid {d['pid']} on {d['host']}"
        except (ValueError, KeyError, TypeError):
            return "an unknown run"

    def _in_use(self, body: bytes, age: float) -> OutputError:
        return OutputError(f"output.dir {self.folder.path}: in use by another rmlprep run ({self._holder(body)}, "
                           f"lock refreshed {age:.0f} s ago); wait for it to finish or choose another --output "
                           f"(a lock older than {LEASE_S:.0f} s is taken over)", path=self.folder.path)

    # -- S3 with conditional writes ------------------------------------------------------------
    def acquire(self) -> None:
        if self._s3 is not None:
            try:
                self._acquire_conditional()
            except _NoConditionalWrites:
                self._s3 = None
                self.note = "the store refuses conditional writes: best-effort lock"
            else:
                self._thread = threading.Thread(target=self._refresh, name="rmlprep-lease", daemon=True)
                self._thread.start()
                return
        self._acquire_best_effort()

    def _acquire_conditional(self) -> None:
        from botocore.exceptions import ClientError

        for _ in range(3):
            try:
                r = self._s3.put_object(Bucket=self.bucket, Key=self.object_key, Body=self._body(), IfNoneMatch="*")
                self.etag = r["ETag"]
                return
            except ClientError as e:
                code = _code(e)
                if code in ("NotImplemented", "501"):
                    raise _NoConditionalWrites() from None
                if code not in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"):
                    raise _store_error(self.folder._uri(LOCK_NAME), e) from None
            try:  # held: by a live run, or left by a killed one
                head = self._s3.get_object(Bucket=self.bucket, Key=self.object_key)
            except ClientError as e:
                if _code(e) in ("NoSuchKey", "404"):
                    continue  # released meanwhile: try to create it again
                raise _store_error(self.folder._uri(LOCK_NAME), e) from None
            body = head["Body"].read()
            age = _server_age(head)
            if age < LEASE_S and not _dead_here(body):
                raise self._in_use(body, age)
            try:
                r = self._s3.put_object(Bucket=self.bucket, Key=self.object_key, Body=self._body(),
                                        IfMatch=head["ETag"])
                self.etag = r["ETag"]
                self.note = f"took over the lock of a run that stopped refreshing it {age:.0f} s ago ({self._holder(body)})"
                return
            except ClientError as e:
                if _code(e) in ("NotImplemented", "501"):
                    raise _NoConditionalWrites() from None
                if _code(e) not in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409", "NoSuchKey", "404"):
                    raise _store_error(self.folder._uri(LOCK_NAME), e) from None
                # another run took it over first: loop, and find it live
        raise OutputError(f"output.dir {self.folder.path}: the lock keeps changing hands; is another run starting? "
                          "rerun", path=self.folder.path)

    def _refresh(self) -> None:
        from botocore.exceptions import ClientError

        while not self._stop.wait(REFRESH_S):
            try:
                r = self._s3.put_object(Bucket=self.bucket, Key=self.object_key, Body=self._body(), IfMatch=self.etag)
                self.etag = r["ETag"]
            except ClientError as e:
                if _code(e) in ("PreconditionFailed", "412", "NoSuchKey", "404"):
                    self.lost = "another run took the lock over while this one held it"
                    return
            except Exception:  # noqa: BLE001 - a network hiccup: the lease allows missed refreshes
                continue

    # -- anything else: best effort ------------------------------------------------------------
    def _acquire_best_effort(self) -> None:
        folder = self.folder
        if folder.exists(LOCK_NAME):
            body = folder.read_bytes(LOCK_NAME)
            try:
                age = time.time() - float(json.loads(body)["time"])
            except (ValueError, KeyError, TypeError):
                age = LEASE_S
            if age < LEASE_S and not _dead_here(body):
                raise self._in_use(body, age)
        body = self._body()
        folder.commit(LOCK_NAME, lambda f: f.write(body))
        if folder.read_bytes(LOCK_NAME) != body:
            raise self._in_use(folder.read_bytes(LOCK_NAME), 0.0)
        self._thread = threading.Thread(target=self._refresh_best_effort, name="rmlprep-lease", daemon=True)
        self._thread.start()

    def _refresh_best_effort(self) -> None:
        while not self._stop.wait(REFRESH_S):
            try:
                self.folder.commit(LOCK_NAME, lambda f: f.write(self._body()))
            except Exception:  # noqa: BLE001 - a hiccup: the lease allows missed refreshes
                continue

    # -- both ----------------------------------------------------------------------------------
    def check(self) -> None:
        """Raises: OutputError: the lease was taken over during the run."""
        if self.lost:
            raise OutputError(f"output.dir {self.folder.path}: {self.lost} (this run stalled for over "
                              f"{LEASE_S:.0f} s); rerun to verify every unit", path=self.folder.path)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self.lost:
            return
        try:
            if self._s3 is not None:
                from botocore.exceptions import ClientError

                try:
                    head = self._s3.head_object(Bucket=self.bucket, Key=self.object_key)
                    if head["ETag"] == self.etag:
                        self._s3.delete_object(Bucket=self.bucket, Key=self.object_key)
                except ClientError:
                    pass
            elif self.folder.exists(LOCK_NAME) and self.token.encode() in self.folder.read_bytes(LOCK_NAME):
                self.folder.remove(LOCK_NAME)
        except (OSError, OutputError):
            pass  # the store is out of reach: the lease runs out by itself


def _dead_here(body: bytes) -> bool:
    """Whether the lock was written by a process of this host that no longer runs (a run killed
    here just now: its lease need not run out before a rerun takes over)."""
    try:
        d = json.loads(body)
        if d["host"] != socket.gethostname() or int(d["pid"]) == os.getpid():
            return False
        os.kill(int(d["pid"]), 0)
    except ProcessLookupError:
        return True
    except (ValueError, KeyError, TypeError, OSError):
        return False
    return False


class _NoConditionalWrites(Exception):
    pass


def _code(e) -> str:
    err = getattr(e, "response", {}).get("Error", {})
    return str(err.get("Code") or getattr(e, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode", ""))


def _server_age(resp: dict[str, Any]) -> float:
    """Seconds since the object was last written, by the store's clock (its Date header)."""
    from email.utils import parsedate_to_datetime

    try:
        now = parsedate_to_datetime(resp["ResponseMetadata"]["HTTPHeaders"]["date"])
        return (now - resp["LastModified"]).total_seconds()
    except (KeyError, TypeError, ValueError):
        return 0.0
