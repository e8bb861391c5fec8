"""The output folder: every file a run writes, checks or removes goes through :class:`OutputFolder`.

Layout (names from :mod:`rmlprep.shards`)::

    train-00000.parquet          packed rows of unit 0 (a writer's files, see writers.py;
                                 Megatron: shard-00000.bin + shard-00000.idx)
    shard-00000.done.json        done marker: written last, after the shard and its rejects
    rejects/rejects-00000.jsonl  bad rows of unit 0 (only when there are any)
    manifest.json  stats.json  lengths.png  README.md
    .rmlprep.lock  .rmlprep.folder.json   the lock; the marker that the folder is rmlprep's (owner.py)
    .rmlprep.previous/           while a rerun runs: the files it replaces (:data:`PREVIOUS`)

**Write, then commit.** Every file is written to ``<name>.tmp-<pid>`` and renamed to its name
(:meth:`OutputFolder.commit`), so a reader, or a rerun after SIGKILL, sees the complete file or
none; a write that fails removes its temporary. A unit's files are committed in a fixed order —
shard, rejects, done marker — so a done marker is never on disk before the files it vouches for.

**Done.** A unit counts as done only when its marker exists, names the same config hash, the same
tokenizer fingerprint (the config names the tokenizer only by path) and the same input identity
(file sizes, mtimes and content hash, see :mod:`.plan`), and the shard's sha256 and its rejects
file's match the marker (:meth:`OutputFolder.verify_done`); anything else is redone from scratch.
Files of units that are not in the run's plan (the input shrank) or are redone, and the previous
reports, are set aside until the run completes, and put back when it fails (:mod:`.previous`): a
manifest always describes the folder it is in. A folder holding Parquet shards under the names of
earlier versions (``shard-NNNNN.parquet``) is refused (:func:`.owner.check_shards`): resuming it
would mix two namings, and ``datasets`` would read only the new one.

**One run at a time.** :meth:`OutputFolder.lock` holds an exclusive ``flock`` on ``.rmlprep.lock``
for the whole run (released by the kernel on any exit, SIGKILL included); a second run into the
same folder stops at once with the holder's pid. The file is removed as the run ends (before the
lock is released: see :meth:`OutputFolder.lock`), so a finished folder holds no lock file.
Temporaries are only removed under the lock, so a run never deletes another live run's files.

**Environment faults** (not writable, disk full, ...) raise :class:`~rmlprep.errors.OutputError`
naming the file and the cause; the folder's writability is probed when the lock is taken, before
any work.

File-system access is kept to a few primitives (:meth:`~OutputFolder.stage` and
:meth:`~OutputFolder.publish`, which :meth:`~OutputFolder.commit` is, :meth:`~OutputFolder.exists`,
:meth:`~OutputFolder.entries`, :meth:`~OutputFolder.list`, :meth:`~OutputFolder.remove`,
:meth:`~OutputFolder.remove_empty_folder`, :meth:`~OutputFolder.read_bytes`,
:meth:`~OutputFolder.sha256`, :meth:`~OutputFolder.lock`); :mod:`.store` implements them on an
object store (``output.dir = "s3://..."``).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import socket
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any, TypeVar

from .. import fs
from ..errors import OutputError
from ..shards import marker_name, sha256_file
from .markers import ACCEPTED_MARKERS, MARKER_VERSION, verify_marker

__all__ = ["OutputFolder", "MARKER_VERSION", "ACCEPTED_MARKERS", "REPORT_FILES", "LOCK_NAME", "PREVIOUS", "UNIT_GLOBS",
           "json_line", "json_bytes", "StreamError", "from_stream", "committing"]

T = TypeVar("T")

#: The run's report files (rewritten at the end of every run).
REPORT_FILES = ("manifest.json", "stats.json", "lengths.png", "README.md", "megatron-data-args.txt")
#: The lock file: holds the pid and host of the run that has the folder.
LOCK_NAME = ".rmlprep.lock"
#: Where a rerun sets aside the files it replaces until it completes (:mod:`.previous`):
#: hidden, so ``datasets`` never reads it.
PREVIOUS = ".rmlprep.previous"
#: the unit number in a unit file's name (train-N.parquet, shard-N.done.json / .bin / .idx, rejects)
_UNIT_FILE = re.compile(r"(?:rejects/rejects|shard|train)-(\d+)\.")
#: the names a unit file may have, as globs (listing, --overwrite)
UNIT_GLOBS = ("train-*", "shard-*", "rejects/rejects-*")
_FIX = {errno.ENOSPC: "the disk is full: free space (done units are kept) and rerun",
        errno.EDQUOT: "the disk quota is exhausted: free space (done units are kept) and rerun",
        errno.EROFS: "the file system is read-only: choose another --output",
        errno.EACCES: "no permission to write there: choose another --output",
        errno.EPERM: "no permission to write there: choose another --output",
        **dict.fromkeys((errno.ENOLCK, errno.EOPNOTSUPP), "the file system takes no file locks (some NFS, SMB or "
                        "FUSE mounts): choose an --output on a local disk, or an object store (s3://...)")}


def _utf8(text: str) -> bytes:
    """JSON text as UTF-8, a lone surrogate (a reject's value or reason) as its JSON escape ``\\udXXX``."""
    return text.encode("utf-8", "backslashreplace")


class StreamError(Exception):
    """An error raised by the stream a commit's write function consumes (reading, tokenizing,
    packing: not the output's fault), carried through :meth:`OutputFolder.commit` so that it is
    not taken for a write error; the writer raises :attr:`error` again (:func:`committing`)."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


def from_stream(items: Iterable[T]) -> Iterator[T]:
    """``items`` for a commit's write function: an error raised while producing one becomes a
    :class:`StreamError`; no reference to an item is kept once the next is asked for."""
    it = iter(items)
    while True:
        try:
            box = [next(it)]
        except StopIteration:
            return
        except Exception as e:  # noqa: BLE001 - any upstream error, raised as itself by committing()
            raise StreamError(e) from e
        yield box.pop()


@contextmanager
def committing() -> Iterator[None]:
    """Around a writer's commits: a :class:`StreamError` is raised as the error it carries."""
    try:
        yield
    except StreamError as e:
        raise e.error from None


def json_line(record: dict[str, Any]) -> bytes:
    """One JSON line (UTF-8, ``\n``-terminated) as the folder's ``.jsonl`` files hold it."""
    return _utf8(json.dumps(record, ensure_ascii=False) + "\n")


def json_bytes(obj: Any) -> bytes:
    """Indented JSON (UTF-8, ``\n``-terminated) as the folder's ``.json`` files hold it."""
    return _utf8(json.dumps(obj, indent=1, ensure_ascii=False, sort_keys=False) + "\n")


def _output_error(what: str, e: OSError) -> OutputError:
    fix = _FIX.get(e.errno, "check the output folder and rerun")
    return OutputError(f"{what}: {e.strerror or e}; {fix}", path=what)


@contextmanager
def discarding(folder: "OutputFolder", tmp: Any, what: str,
               fault: Callable[[str, OSError], OutputError]) -> Iterator[None]:
    """Around a commit's steps on its temporary ``tmp``: on any error (Ctrl-C too) the temporary
    is removed (``folder.discard``), and an OSError is raised as ``fault(what, e)`` (an
    OutputError naming ``what`` and the fix), others as themselves; no file is left half-written
    under a temporary name."""
    try:
        yield
    except BaseException as e:
        folder.discard(tmp)
        if isinstance(e, OSError):
            raise fault(what, e) from None
        raise


def _same_file(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is the file now at ``path``."""
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


class OutputFolder:
    """One run's output folder (``output.dir``).

    ``OutputFolder(uri)`` for an object-store URI (``s3://bucket/prefix``, see :mod:`rmlprep.fs`)
    gives an :class:`~rmlprep.pipeline.store.ObjectStoreFolder`: the same folder, its primitives
    over ``pyarrow.fs``.

    Args:
        path: the folder; created by :meth:`create`.
    """

    #: the class of a folder under a URI (:class:`~rmlprep.pipeline.store.ObjectStoreFolder`,
    #: which registers itself here when ``rmlprep.pipeline`` is imported)
    remote_class: type | None = None

    def __new__(cls, path: str | os.PathLike):
        if cls is OutputFolder and fs.is_remote(os.fspath(path)) and OutputFolder.remote_class is not None:
            return super().__new__(OutputFolder.remote_class)
        return super().__new__(cls)

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"OutputFolder({str(self.path)!r})"

    # -- primitives: the only methods that touch the file system --------------------------------
    def create(self) -> None:
        """Create the folder (and its parents).

        Raises:
            OutputError: it cannot be created (read-only file system, no permission, a file
                where the folder or one of its parents should be).
        """
        for p in (self.path, *self.path.parents):  # the nearest that exists must be a folder
            if p.exists() or p.is_symlink():
                if not p.is_dir():
                    what = "a file" if p.exists() else "a broken symbolic link"
                    where = f"is {what}" if p == self.path else f"cannot be made: {p} is {what}"
                    raise OutputError(f"output.dir {self.path} {where}, not a folder; the output is a folder of "
                                      "shards: choose a new folder (or one an earlier run wrote) with --output or "
                                      "output.dir", path=str(self.path))
                break
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise _output_error(f"output.dir {self.path}", e) from None
        if not self.path.is_dir():
            raise OutputError(f"output.dir {self.path}: not a directory; choose another --output", path=str(self.path))

    def exists(self, name: str) -> bool:
        return (self.path / name).exists()

    def entries(self) -> list[str]:
        """The folder's top-level names (files and folders, hidden ones too), sorted; [] when
        there is no folder."""
        try:
            return sorted(p.name for p in self.path.iterdir())
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as e:
            raise _output_error(f"output.dir {self.path}", e) from None

    def list(self, pattern: str) -> list[str]:
        """Names (relative to the folder, ``/``-separated) matching a glob pattern, sorted."""
        if not self.path.is_dir():
            return []
        return sorted(p.relative_to(self.path).as_posix() for p in self.path.glob(pattern))

    def remove(self, name: str) -> None:
        """Remove a file (absent is fine).

        Raises:
            OutputError: it exists and cannot be removed.
        """
        try:
            (self.path / name).unlink(missing_ok=True)
        except OSError as e:
            raise _output_error(str(self.path / name), e) from None

    def remove_empty_folder(self, name: str) -> None:
        """Remove the subfolder ``name`` if it is there and empty (never raises: one that holds
        files, or cannot be removed, stays)."""
        with suppress(OSError):
            (self.path / name).rmdir()

    def move(self, name: str, to: str) -> None:
        """Rename the file ``name`` to ``to`` (its folder created; an existing ``to`` replaced).

        Raises:
            OutputError: the rename failed (``name`` is then where it was).
        """
        try:
            (self.path / to).parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.path / name, self.path / to)
        except OSError as e:
            raise _output_error(str(self.path / name), e) from None

    def read_bytes(self, name: str) -> bytes:
        return (self.path / name).read_bytes()

    def open_input(self, name: str) -> IO[bytes]:
        """``name`` opened for reading: binary, buffered, seekable (``pyarrow.parquet`` reads one
        row group at a time from it), iterable by lines. Raises OutputError if it cannot be."""
        try:
            return open(self.path / name, "rb")
        except OSError as e:
            raise _output_error(str(self.path / name), e) from None

    def sha256(self, name: str) -> str:
        return sha256_file(self.path / name)

    def stage(self, name: str, write: Callable[[IO[bytes]], None], *, digest: bool = False) -> tuple[Any, str | None]:
        """Write a file's whole content under its temporary name (``<name>.tmp-<pid>``).

        Returns:
            (the temporary, its sha256 hex with ``digest=True`` (read back: what is on disk), else None).
        Raises:
            OutputError: the write failed (disk full, read-only, ...); the temporary is removed.
        """
        final = self.path / name
        tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
        with discarding(self, tmp, str(final), _output_error):
            final.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as f:
                write(f)
            return tmp, (sha256_file(tmp) if digest else None)

    def publish(self, tmp: Any, name: str) -> None:
        """Rename a temporary of :meth:`stage` to ``name`` (atomic: the old file, or the new one).

        Raises:
            OutputError: the rename failed; the temporary is removed.
        """
        with discarding(self, tmp, str(self.path / name), _output_error):
            os.replace(tmp, self.path / name)

    def discard(self, tmp: Any) -> None:
        """Remove a temporary of :meth:`stage` if it is there (never raises: a folder gone or
        read-only has no temporary either)."""
        with suppress(OSError):
            Path(tmp).unlink(missing_ok=True)

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the folder for one run: create it, take an exclusive lock on :data:`LOCK_NAME`
        (pid and host written in it) and probe that a file can be committed. The lock file is
        removed when the run ends, however it ends (a SIGKILL leaves it: the kernel still
        releases the lock, and the next run takes it). Removing it is safe: it is removed while
        still locked, and a lock taken on a file no longer at the path (opened just before its
        removal) is taken again, else that run would hold an unlinked file while a third creates
        a new one. Raises OutputError: another run holds the lock (its pid and host named); the
        folder cannot be created, written or locked (a file system without flock)."""
        self.create()
        path = self.path / LOCK_NAME
        while True:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                raise _output_error(f"output.dir {self.path}", e) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
                os.close(fd)
                who = f"pid {holder[0]} on {holder[1]}" if len(holder) >= 2 else "an unknown pid"
                raise OutputError(f"output.dir {self.path}: in use by another rmlprep run ({who}); wait for it "
                                  "to finish or choose another --output", path=str(self.path)) from None
            except OSError as e:  # ENOLCK, EOPNOTSUPP: a file system without flock (was a bare strerror)
                os.close(fd)
                raise _output_error(f"output.dir {self.path}: cannot lock {LOCK_NAME}", e) from None
            if _same_file(fd, path):
                break
            os.close(fd)  # the run that held it removed it as it ended: lock the file at the path
        try:
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
            except OSError as e:
                raise _output_error(str(path), e) from None
            self.commit(".rmlprep.probe", lambda f: f.write(b"rmlprep can write here\n"))  # writability, up front
            self.remove(".rmlprep.probe")
            yield
        finally:
            try:
                os.unlink(path)  # still locked: see the docstring
            except OSError:
                pass  # a folder that refuses it keeps the file; it blocks nothing once released
            os.close(fd)  # releases the lock

    # -- built on the primitives ----------------------------------------------------------------
    def commit(self, name: str, write: Callable[[IO[bytes]], None], *, digest: bool = False) -> str | None:
        """Write a file under a temporary name, then rename it to ``name`` (atomic).

        Args:
            name: the file's name in the folder (``rejects/...`` creates the subfolder).
            write: writes the whole content to the binary file object it is given.
            digest: also return the sha256 hex of the bytes committed (read back before the
                rename, so it is what is on disk).
        Returns:
            the sha256 hex with ``digest=True``, else None.
        Raises:
            OutputError: the write or the rename failed (disk full, read-only, ...); no file
                exists under ``name`` then (an older complete one is left as it was) and the
                temporary is removed.
        """
        tmp, h = self.stage(name, write, digest=digest)
        self.publish(tmp, name)
        return h

    def write_json(self, name: str, obj: Any) -> None:
        """Commit ``obj`` as indented JSON."""
        data = json_bytes(obj)
        self.commit(name, lambda f: f.write(data))

    def write_lines(self, name: str, records: list[dict[str, Any]]) -> None:
        """Commit JSON lines (one object per line, :func:`json_line`)."""
        def write(f: IO[bytes]) -> None:
            for r in records:
                f.write(json_line(r))

        self.commit(name, write)

    def read_json(self, name: str) -> Any | None:
        """A JSON file's content, or None when it is absent or unreadable."""
        try:
            return json.loads(self.read_bytes(name).decode("utf-8"))
        except (OSError, ValueError):
            return None

    def write_done(self, index: int, record: dict[str, Any]) -> None:
        """Commit unit ``index``'s done marker (the last file of a unit)."""
        self.write_json(marker_name(index), record)

    def read_done(self, index: int) -> dict[str, Any] | None:
        """Unit ``index``'s done marker, or None when absent or unreadable."""
        m = self.read_json(marker_name(index))
        return m if isinstance(m, dict) else None

    def verify_done(self, index: int, config_hash: str, input_identity: dict[str, Any] | None = None,
                    tokenizer: str | None = None, needs: dict[str, Any] | None = None,
                    ) -> tuple[dict[str, Any] | None, str]:
        """Whether unit ``index`` is done for this config (and this input and tokenizer).

        Args:
            input_identity: the unit's input identity in the plan, as the marker must hold (None: not checked).
            tokenizer: the run's tokenizer fingerprint; the marker must name the same (None: not
                checked). The config names the tokenizer by path, so the same config over a
                tokenizer file that changed (or a fallback tokenizer one run, the real one the
                next) hashes the same: only the fingerprint tells the shards apart.
            needs: keys the marker must hold (or values: ``chat_rules``), with the reason it is
                redone without one (:func:`.late_keys.marker_needs`, :func:`.late_keys.unmet`).
        Returns:
            (marker, "") when the marker exists, names ``config_hash``, the input identity and
            the tokenizer, is of :data:`MARKER_VERSION` (or accepted by :data:`ACCEPTED_MARKERS`),
            the shard's sha256 matches, and so does its rejects file's (``rejects_sha256``; a
            unit without rejects has no rejects file); else (None, the reason the unit is redone):
            :func:`.markers.verify_marker`.
        """
        return verify_marker(self, index, config_hash, input_identity, tokenizer, needs)

    def remove_temporaries(self) -> list[str]:
        """Remove every ``*.tmp-*`` file (a commit's temporary never renamed: its writer died),
        and ``rejects/`` when it holds nothing. Only call it holding the lock, when no worker of
        this run is writing.

        Returns:
            the names removed.
        Raises:
            OutputError: one exists and cannot be removed.
        """
        names = self.list("*.tmp-*") + self.list("rejects/*.tmp-*")
        for name in names:
            self.remove(name)
        self.remove_empty_folder("rejects")  # a redo that wrote none, after a sweep removed the old ones
        return names

    def unit_files(self) -> dict[int, list[str]]:
        """The unit files in the folder (shards, markers, rejects, whatever the writer), by unit."""
        found: dict[int, list[str]] = {}
        for name in [n for pattern in UNIT_GLOBS for n in self.list(pattern)]:
            m = _UNIT_FILE.match(name)
            if m and ".tmp-" not in name:
                found.setdefault(int(m.group(1)), []).append(name)
        return found
