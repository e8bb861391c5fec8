"""The output folder: every file a run writes, checks or removes goes through :class:`OutputFolder`.

Layout (names from :mod:`rmlprep.shards`)::

    shard-00000.parquet          packed rows of unit 0 (a writer's files, see writers.py)
    shard-00000.done.json        done marker: written last, after the shard and its rejects
    rejects/rejects-00000.jsonl  bad rows of unit 0 (only when there are any)
    manifest.json  stats.json  lengths.png

**Write, then commit.** Every file is written to ``<name>.tmp-<pid>`` and renamed to its name
(:meth:`OutputFolder.commit`), so a reader, or a rerun after SIGKILL, sees the complete file or
none; a write that fails removes its temporary. A unit's files are committed in a fixed order —
shard, rejects, done marker — so a done marker is never on disk before the files it vouches for.

**Done.** A unit counts as done only when its marker exists, names the same config hash, and
the shard's sha256 (and its rejects file) match the marker (:meth:`OutputFolder.verify_done`);
anything else is redone from scratch.

File-system access is kept to a few primitives (:meth:`~OutputFolder.commit`,
:meth:`~OutputFolder.exists`, :meth:`~OutputFolder.list`, :meth:`~OutputFolder.remove`,
:meth:`~OutputFolder.read_bytes`, :meth:`~OutputFolder.sha256`), so another filesystem can be
slotted in behind them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from ..errors import ConfigError
from ..shards import marker_name, rejects_name, sha256_file, shard_name

__all__ = ["OutputFolder", "REPORT_FILES"]

#: The run's report files (rewritten at the end of every run).
REPORT_FILES = ("manifest.json", "stats.json", "lengths.png")


class OutputFolder:
    """One run's output folder (``output.dir``), local for now.

    Args:
        path: the folder; created by :meth:`create`.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"OutputFolder({str(self.path)!r})"

    # -- primitives: the only methods that touch the file system --------------------------------
    def create(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)

    def exists(self, name: str) -> bool:
        return (self.path / name).exists()

    def list(self, pattern: str) -> list[str]:
        """Names (relative to the folder, ``/``-separated) matching a glob pattern, sorted."""
        if not self.path.is_dir():
            return []
        return sorted(p.relative_to(self.path).as_posix() for p in self.path.glob(pattern))

    def remove(self, name: str) -> None:
        """Remove a file (absent is fine)."""
        (self.path / name).unlink(missing_ok=True)

    def read_bytes(self, name: str) -> bytes:
        return (self.path / name).read_bytes()

    def sha256(self, name: str) -> str:
        return sha256_file(self.path / name)

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
            OSError: the write or the rename failed; no file exists under ``name`` then (an
                older complete one is left as it was) and the temporary is removed.
        """
        final = self.path / name
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
        try:
            with open(tmp, "wb") as f:
                write(f)
            h = sha256_file(tmp) if digest else None
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return h

    # -- built on the primitives ----------------------------------------------------------------
    def write_json(self, name: str, obj: Any) -> None:
        """Commit ``obj`` as indented JSON."""
        data = (json.dumps(obj, indent=1, ensure_ascii=False, sort_keys=False) + "\n").encode("utf-8")
        self.commit(name, lambda f: f.write(data))

    def write_lines(self, name: str, records: list[dict[str, Any]]) -> None:
        """Commit JSON lines (one object per line)."""
        def write(f: IO[bytes]) -> None:
            for r in records:
                f.write((json.dumps(r, ensure_ascii=False) + "\n").encode("utf-8"))

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

    def verify_done(self, index: int, config_hash: str) -> tuple[dict[str, Any] | None, str]:
        """Whether unit ``index`` is done for this config.

        Returns:
            (marker, "") when the marker exists, names ``config_hash``, the shard's sha256
            matches and its rejects file exists; else (None, the reason the unit is redone).
        """
        m = self.read_done(index)
        if m is None:
            return None, "no done marker"
        if m.get("config_hash") != config_hash:
            return None, "done marker is for another config"
        shard = shard_name(index)
        if not self.exists(shard):
            return None, "shard file missing"
        if self.sha256(shard) != m.get("sha256"):
            return None, "shard sha256 differs from its done marker"
        if m.get("rejects") and not self.exists(rejects_name(index)):
            return None, "rejects file missing"
        return m, ""

    def check(self, config_hash: str, *, overwrite: bool) -> None:
        """Before a run: refuse a folder holding another config's shards (or, with
        ``overwrite``, remove them); remove the temporaries a killed run left.

        Raises:
            ConfigError: done markers of another config and no ``overwrite``.
        """
        other = []
        for name in self.list("shard-*.done.json"):
            m = self.read_json(name)
            if isinstance(m, dict) and m.get("config_hash") != config_hash:
                other.append(name)
        if other and not overwrite:
            raise ConfigError(
                f"output.dir: {self.path} holds shards of a different config ({len(other)} done markers, e.g. "
                f"{other[0]}); pass --overwrite to replace them or choose another --output"
            )
        if overwrite:
            for name in self.list("shard-*") + self.list("rejects/*") + list(REPORT_FILES):
                self.remove(name)
        # temporaries of a killed run (never renamed): one run writes an output folder at a time
        for name in self.list("*.tmp-*") + self.list("rejects/*.tmp-*"):
            self.remove(name)

