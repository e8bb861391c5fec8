"""The lease of an :class:`~rmlprep.pipeline.store.ObjectStoreFolder`: the lock object
``.rmlprep.lock`` and the thread that refreshes it (the rules: :mod:`rmlprep.pipeline.store`'s
docstring, "One run at a time"), and the store's error with its fix (:func:`_store_error`).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from typing import Any

from ..errors import OutputError
from .output import LOCK_NAME

#: seconds after its last refresh that a lock object counts as left by a killed run
LEASE_S = 60.0
#: seconds between two refreshes of the lock object by the run that holds it
REFRESH_S = 15.0


def _store_error(what: str, e: BaseException) -> OutputError:
    msg = " ".join(str(e).split())[:300] or type(e).__name__
    return OutputError(f"{what}: {msg}; check the bucket, the credentials (AWS_* variables) and "
                       "AWS_ENDPOINT_URL, then rerun (done units are kept)", path=what)


class _Lease:
    """The lock object of an :class:`ObjectStoreFolder` and the thread that refreshes it."""

    def __init__(self, folder: "ObjectStoreFolder"):  # noqa: F821 (rmlprep.pipeline.store, which imports this module)
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
        """Take the folder's lock object ``.rmlprep.lock`` and start the thread that rewrites it
        every :data:`REFRESH_S` s. On S3 with boto3: a conditional create (``If-None-Match: *``),
        or a conditional overwrite (``If-Match`` its ETag) of a lock not refreshed for
        :data:`LEASE_S` s by the store's clock, or left by a dead process of this host (``note``
        says whose was taken over). Elsewhere, or where the store refuses conditional writes:
        best effort, the object read, written, then read back (``note`` says so).

        Raises:
            OutputError: the lock is held by a live run (its pid, host and age named); it
                changed hands three times; the store refused a request (the error with its fix).
        """
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
        """Stop the refresh thread (waiting up to 30 s) and delete the lock object if it is
        still this run's (the same ETag on S3, this lease's token in its body elsewhere); a lock
        another run took over (``lost``) is left to it. Never raises: a store out of reach keeps
        the object, and its lease runs out :data:`LEASE_S` s after the last refresh."""
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
