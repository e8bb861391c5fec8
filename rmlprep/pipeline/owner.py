"""Whose folder ``output.dir`` is: rmlprep writes only into a folder that is new, empty, or its own.

A rerun replaces reports, removes the files of units that left the plan and, with
``--overwrite``, the shards of another config: all of which would destroy or mix a user's files
if ``output.dir`` named a folder rmlprep did not write (a project folder with its own
``README.md``, a dataset with its own ``train-00007.parquet``). So before it takes the lock, a
run looks at the folder (:func:`check_owner`, reading only):

- absent or empty: the run's;
- holding :data:`OWNER_NAME` (committed by :func:`claim` as soon as a run holds the folder,
  before any unit or report): rmlprep's, so a first run killed after any of its files were
  written is resumed like any other;
- holding what an earlier rmlprep wrote before the marker existed (its ``.rmlprep.lock``, a
  ``manifest.json`` or a done marker with a config hash): rmlprep's, and claimed;
- anything else is refused, one :class:`~rmlprep.errors.OutputError` line naming the folder and
  files it holds. When every such file has a name rmlprep never writes (``notes.txt``, ``src/``),
  ``--overwrite`` lets the run write beside them, and they are kept as they are; when one has a
  name rmlprep writes (``README.md``, ``stats.json``, ``train-*``, ``shard-*``, ``rejects``,
  ...), the run is refused even with ``--overwrite``: rmlprep never replaces or deletes a file
  it did not write.

In a folder rmlprep owns, its file names are its own: a ``train-00007.parquet`` there that no
unit of the plan writes is removed as stale (:meth:`~.output.OutputFolder.sweep`).
"""

from __future__ import annotations

import fnmatch
import json
import time
from typing import Any

from .._version import __version__
from ..errors import OutputError
from .output import LOCK_NAME, REPORT_FILES, OutputFolder

__all__ = ["OWNER_NAME", "check_owner", "claim", "rmlprep_name"]

#: The marker that says rmlprep owns the folder (hidden: ``datasets`` reads no file starting with ".").
OWNER_NAME = ".rmlprep.folder.json"
#: top-level names rmlprep writes (besides its reports), as globs
_OWN_GLOBS = ("train-*", "shard-*", "rejects", ".rmlprep.*")


def rmlprep_name(name: str) -> bool:
    """Whether a top-level entry of a folder has a name rmlprep writes (a report, a unit file,
    ``rejects``, its lock, marker or probe, or a temporary of one of them)."""
    base = name.split(".tmp-", 1)[0]
    return base in REPORT_FILES or any(fnmatch.fnmatchcase(base, g) for g in _OWN_GLOBS)


def _written_by_rmlprep(out: OutputFolder, names: list[str]) -> bool:
    """The folder holds rmlprep's marker, or what an earlier rmlprep wrote before there was one."""
    if OWNER_NAME in names or LOCK_NAME in names:  # the lock: every run since the lock existed made it
        return True
    m = out.read_json("manifest.json") if "manifest.json" in names else None
    if isinstance(m, dict) and "config_hash" in m and "rmlprep_version" in m:
        return True
    markers = out.list("shard-*.done.json")
    m = out.read_json(markers[0]) if markers else None
    return isinstance(m, dict) and "config_hash" in m


def _some(names: list[str], k: int = 3) -> str:
    return ", ".join(names[:k]) + (f" and {len(names) - k} more" if len(names) > k else "")


def check_owner(out: OutputFolder, *, overwrite: bool) -> None:
    """Refuse a folder rmlprep did not write (see the module docstring); reads only, so a refused
    run leaves the folder as it was (no lock file, no marker).

    Raises:
        OutputError: the folder holds files rmlprep did not write, and either ``overwrite`` is
            not given or one of them has a name rmlprep writes (the line names the folder and
            the files).
    """
    names = out.entries()
    if not names or _written_by_rmlprep(out, names):
        return
    clash = [n for n in names if rmlprep_name(n)]
    why = (f"output.dir: {out.path} was not written by rmlprep (no {OWNER_NAME}, manifest or done marker) "
           f"and is not empty")
    if clash:
        raise OutputError(f"{why}: it holds {_some(clash)}, under names rmlprep writes; rmlprep never replaces "
                          "or deletes files it did not write, even with --overwrite: choose an empty or new "
                          "folder (--output), or move those files away", path=str(out.path))
    if not overwrite:
        raise OutputError(f"{why}: it holds {_some(names)}; choose an empty or new folder (--output), or pass "
                          "--overwrite to write the shards beside those files (kept as they are)",
                          path=str(out.path))


def claim(out: OutputFolder) -> None:
    """Mark the folder as rmlprep's (commit :data:`OWNER_NAME`) if it is not yet; call it holding
    the lock, after :func:`check_owner`, before any unit or report is written.

    Raises:
        OutputError: the marker cannot be written.
    """
    if out.exists(OWNER_NAME):
        return
    record: dict[str, Any] = {
        "written_by": "rmlprep",
        "rmlprep_version": __version__,
        "claimed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "note": "an rmlprep output folder: reruns replace or remove the files under rmlprep's names "
                "(shards, markers, rejects/, reports), never other files",
    }
    data = (json.dumps(record, indent=1) + "\n").encode()
    out.commit(OWNER_NAME, lambda f: f.write(data))
