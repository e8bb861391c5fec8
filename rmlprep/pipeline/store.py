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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from .. import fs
from ..errors import OutputError
from .output import LOCK_NAME, OutputFolder, discarding
from .store_lease import LEASE_S, REFRESH_S, _Lease, _store_error

__all__ = ["ObjectStoreFolder", "LEASE_S", "REFRESH_S", "fence", "still_held"]

_SPOOL = 8 << 20  # bytes kept in memory before the local temporary goes to disk


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
            with discarding(self, tmp, self._uri(name), _store_error):
                with self._fs.open_output_stream(tmp) as out:
                    while chunk := local.read(1 << 20):
                        if h is not None:
                            h.update(chunk)
                        out.write(chunk)
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
            raise _taken_over(OutputError(f"output.dir {self.path}: another run took this folder's lock over while this run held it "
                              f"(this run stalled for over {LEASE_S:.0f} s): this run commits nothing more; rerun once that run is done", path=self.path))

    def publish(self, tmp: Any, name: str) -> None:
        """Copy a temporary of :meth:`stage` to ``name`` server-side (atomic: the name appears
        whole), once :meth:`check_held` passes. Raises OutputError: the copy failed, or the folder
        is another run's; nothing new is under ``name`` and the temporary is removed when possible."""
        with discarding(self, tmp, self._uri(name), _store_error):
            self.check_held()
            self._fs.move(tmp, self._key(name))

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


def _taken_over(e: OutputError) -> OutputError:
    e.taken_over = True  # type: ignore[attr-defined]  # still_held tells it from the store out of reach
    return e


def still_held(out: OutputFolder, log: Callable[[str], None] | None = None, undone: str = "") -> bool:
    """Whether the run ``out`` is fenced for still holds the folder (always, on a disk): one that
    lost it must not clean up, the files being another run's.

    A lock object that cannot be read (the store out of reach) proves neither: False too, since
    touching the folder then may touch another run's files, but it is no takeover (as
    :meth:`ObjectStoreFolder.check_held` raises it: the store's error), so ``log`` gets a warning
    with that error and what is left ``undone``; it was skipped without a word (a complete previous
    run then stayed set aside, for the next run to drop). A takeover needs none: it is the run's own error.
    """
    if not isinstance(out, ObjectStoreFolder):
        return True
    try:
        out.check_held()
    except OutputError as e:
        if not getattr(e, "taken_over", False) and log is not None and undone:
            log(f"warning: {undone}: this run cannot tell whether it still holds the folder, whose lock could "
                f"not be read ({e})")
        return False
    return True
