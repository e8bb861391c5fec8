"""The load cache's memo of file digests: a tokenizer file's sha256, remembered by the file's
identity and change time, so a cache hit (:mod:`rmlprep.cache`) hashes nothing.

Hashing is the cost a cache hit still paid: ~30 ms for Gemma 3's 33 MB tokenizer.json, ~60 ms
for walking the 152k-token key-values of Qwen2's GGUF (:func:`rmlprep.gguf.metadata_sha256`).
The memo is one small JSON file, ``index.json`` in the cache directory, mapping each file's
absolute path to its stat key and digest.

**When a remembered digest is trusted.** The worst outcome is a stale tokenizer: an entry
found by the digest of what the file *was*. A digest is returned only when the file's stat,
taken on the opened file (on NFS, the open revalidates the attributes: close-to-open), has the
same device, inode, size, mtime and **ctime** (nanoseconds) as when the file was hashed:

- An edit in place that restores the size and the mtime (``os.utime``, ``touch -d``,
  ``cp -p``, ``rsync -t``) still moves the ctime to the time of the edit: the kernel sets it on
  every write and every metadata change, and no system call sets it back (only changing the
  system clock does). So the edit is seen and the file is hashed again.
- A file replaced by another (``mv``, a new download) has a new inode or a new ctime.
- File times come from a coarse clock (one kernel tick, 1-10 ms), so a write in the same tick
  as the hash could leave every field equal. A digest is therefore remembered only when the
  file's mtime and ctime are at least :data:`SETTLED_NS` (2 s) older than the moment before it
  was read, and only if its stat did not change while it was read (as git treats "racily
  clean" index entries). A later write then lands in a later tick and moves the ctime. (This
  assumes the clock that stamps the file is not 2 s behind this machine's: a network file
  server's clock, or a clock set back.)
- The memo belongs to one rmlprep code digest (a changed GGUF walk is a new memo); a memo that
  cannot be read or parsed is empty; writes go to a temporary file renamed into place, so a
  concurrent writer loses an update (a later hash), never corrupts one.

Not trusted at all on Windows, where ``st_ctime`` is the creation time (an edit in place that
restores the mtime would go unseen there): every load hashes the file. Nor for a file whose
times are in the future (never "settled").
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

__all__ = ["Memo", "SETTLED_NS", "MAX_FILES", "stat_key"]

#: A digest is remembered only for a file unchanged for this long (ns) before it was read.
SETTLED_NS = 2_000_000_000
#: Files remembered (the most recently hashed are kept).
MAX_FILES = 64
_NAME = "index.json"
_TRUSTED = os.name != "nt"  # st_ctime is the creation time on Windows


def stat_key(st: os.stat_result) -> list[int]:
    """What identifies a file's contents without reading them (see the module docstring)."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


class Memo:
    """The digests remembered in ``folder/index.json`` for the rmlprep code digest ``code``."""

    def __init__(self, folder: Path, code: str):
        self.path = folder / _NAME
        self.code = code

    def _read(self) -> dict[str, list]:
        try:
            with open(self.path, encoding="utf-8") as f:
                d = json.load(f)
        except (OSError, ValueError):
            return {}
        if not isinstance(d, dict) or d.get("code") != self.code or not isinstance(d.get("files"), dict):
            return {}
        return d["files"]

    def get(self, path: str, st: os.stat_result) -> str | None:
        """The digest remembered for ``path`` if its stat ``st`` is the one it was hashed with."""
        if not _TRUSTED:
            return None
        rec = self._read().get(path)
        if not (isinstance(rec, list) and len(rec) == 6 and isinstance(rec[5], str)):
            return None
        return rec[5] if rec[:5] == stat_key(st) else None

    def put(self, path: str, started_ns: int, before: os.stat_result, after: os.stat_result, digest: str) -> None:
        """Remember ``digest`` for ``path``, hashed between the stats ``before`` and ``after``,
        ``before`` taken after ``time.time_ns()`` read ``started_ns``: if the file was settled
        then and unchanged while read (see the module docstring). Quietly nothing when the
        folder cannot be written."""
        key = stat_key(before)
        if not _TRUSTED or stat_key(after) != key:
            return
        if started_ns - max(before.st_mtime_ns, before.st_ctime_ns) < SETTLED_NS:
            return  # changed within the racy window: a write in the same clock tick would go unseen
        files = self._read()
        files.pop(path, None)
        files[path] = [*key, digest]  # dicts keep insertion order: the newest last
        files = dict(list(files.items())[-MAX_FILES:])
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump({"code": self.code, "files": files}, f)
                os.replace(tmp, self.path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            return
