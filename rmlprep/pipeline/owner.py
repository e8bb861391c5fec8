"""Whose folder ``output.dir`` is, and whose shards it holds: rmlprep writes only into a folder
that is new, empty, or its own (:func:`check_owner`, :func:`claim`), and replaces the shards of
another config or tokenizer only with ``--overwrite`` (:func:`check_shards`).

A rerun replaces reports, removes the files of units that left the plan and, with
``--overwrite``, the shards of another config: all of which would destroy or mix a user's files
if ``output.dir`` named a folder rmlprep did not write (a project folder with its own
``README.md``, a dataset with its own ``train-00007.parquet``). So before it takes the lock, a
run looks at the folder (:func:`check_owner`, reading only):

- absent or empty (or holding only :data:`PLACEHOLDERS`: ``.gitkeep``, ``.DS_Store``): the run's;
- holding :data:`OWNER_NAME` (committed by :func:`claim` as soon as a run holds the folder,
  before any unit or report): rmlprep's, so a first run killed after any of its files were
  written is resumed like any other;
- holding what an earlier rmlprep wrote before the marker existed (its ``.rmlprep.lock``, a
  ``manifest.json`` or a done marker with a config hash): rmlprep's, and claimed;
- inside another run's output folder (one above it holds :data:`OWNER_NAME`): refused, as is a
  folder holding one under ``--overwrite``, since one tree of two runs' shards reads as one dataset;
- anything else is refused, one :class:`~rmlprep.errors.OutputError` line naming the folder and
  files it holds. When every such file has a name rmlprep never writes (``notes.txt``, ``src/``),
  ``--overwrite`` lets the run write beside them, and they are kept as they are; when one has a
  name rmlprep writes (``README.md``, ``stats.json``, ``train-*``, ``shard-*``, ``rejects``,
  ...), the run is refused even with ``--overwrite``: rmlprep never replaces or deletes a file
  it did not write.

In a folder rmlprep owns, its file names are its own: a ``train-00007.parquet`` there that no
unit of the plan writes is removed as stale (:func:`.previous.sweep`).
"""

from __future__ import annotations

import fnmatch
import json
import time
from typing import Any

from .. import fs
from .._version import __version__
from ..config import RunConfig
from ..errors import ConfigError, OutputError
from ..shards import LEGACY_SHARD_GLOB, shard_name
from .config_diff import config_change
from .output import LOCK_NAME, PREVIOUS, REPORT_FILES, UNIT_GLOBS, OutputFolder
from .previous import previous_complete, set_aside_all

__all__ = ["OWNER_NAME", "check_owner", "claim", "check_shards", "rmlprep_name"]

#: The marker that says rmlprep owns the folder (hidden: ``datasets`` reads no file starting with ".").
OWNER_NAME = ".rmlprep.folder.json"
#: top-level names rmlprep writes (besides its reports), as globs
_OWN_GLOBS = ("train-*", "shard-*", "rejects", ".rmlprep.*")
#: files that keep a folder in git or that a file browser leaves: a folder holding only these is
#: empty for the run (they are kept as they are; rmlprep never writes these names)
PLACEHOLDERS = frozenset({".gitkeep", ".keep", ".gitignore", ".DS_Store", "Thumbs.db", "desktop.ini"})


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
            the files); it is inside another rmlprep run's output folder, or (with ``overwrite``)
            holds one: the two runs' shards would be one tree (``load_dataset("parquet",
            data_dir=...)`` of the outer folder read both: explore22's try, 2 rows of 1).
    """
    if (above := _owner_above(str(out.path))) is not None:
        raise OutputError(f"output.dir: {out.path} is inside {above}, the output folder of another rmlprep run (it "
                          f"holds {OWNER_NAME}): the two runs' shards would be one tree, which "
                          "load_dataset(\"parquet\", data_dir=...) or a **/*.parquet glob reads as one dataset; "
                          "choose a folder outside it (a sibling)", path=str(out.path))
    if out.exists(OWNER_NAME):  # one request on a store, where listing a large folder takes many
        return
    names = out.entries()
    if overwrite and (inner := next((n for n in names if n not in PLACEHOLDERS and not rmlprep_name(n)
                                     and fs.exists(fs.join(str(out.path), n, OWNER_NAME))), None)):
        raise OutputError(f"output.dir: {out.path} holds {inner}/, the output folder of another rmlprep run (it holds "
                          f"{OWNER_NAME}): written beside it, the two runs' shards would be one tree, which "
                          "load_dataset(\"parquet\", data_dir=...) or a **/*.parquet glob reads as one dataset; "
                          "choose another folder", path=str(out.path))
    if not [n for n in names if n not in PLACEHOLDERS] or _written_by_rmlprep(out, names):
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


def _owner_above(path: str) -> str | None:
    """The nearest folder above ``path`` holding :data:`OWNER_NAME`, or None: one question per
    level (a request each on an object store), asked once per run."""
    here = fs.realpath(path) if not fs.is_remote(path) else path.rstrip("/")
    while (up := fs.dirname(here)) and up.rstrip("/") != here.rstrip("/"):
        if fs.exists(fs.join(up, OWNER_NAME)):
            return up
        here = up
    return None


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


def _markers(n: int) -> str:
    return f"{n} done marker{'s' if n != 1 else ''}"


def check_shards(out: OutputFolder, config_hash: str, *, overwrite: bool, tokenizer: str | None = None,
                 config: RunConfig | None = None) -> int:
    """Before a run: refuse a folder holding another config's or another tokenizer's shards
    (``tokenizer``: the run's fingerprint; markers that name none are not compared), or Parquet shards
    under the names of earlier versions (``shard-NNNNN.parquet``, :data:`LEGACY_SHARD_GLOB`),
    or, with ``overwrite``, set every unit file and report aside (:mod:`.previous`:
    removed when the run completes, put back when it fails and they are a complete run's folder);
    remove the temporaries a killed run left. Units of another config or tokenizer that hold no
    document (every row rejected, or none read) are not refused: nothing was trained on them, and
    the run redoes them.

    Returns:
        the number of such units without a document.
    Raises:
        ConfigError: done markers of another config, or old-named shards, and no ``overwrite``.
    """
    legacy = out.list(LEGACY_SHARD_GLOB)
    if legacy and not overwrite:
        raise ConfigError(
            f"output.dir: {out.path} holds {len(legacy)} shards named by an earlier rmlprep (e.g. {legacy[0]}; "
            f"shards are now {shard_name(0)}, ..., the names datasets.load_dataset reads); pass --overwrite to "
            "rewrite them or choose another --output"
        )
    other, other_tok, empty = [], [], 0
    kept = (f"; {PREVIOUS}/ holds a complete run's folder that a killed rerun set aside (its manifest.json "
            "among it), left as it is: move its files back into the folder to keep that run, or --overwrite "
            "replaces both") if previous_complete(out) and not overwrite else ""
    for name in out.list("shard-*.done.json"):
        m = out.read_json(name)
        if not isinstance(m, dict):
            continue
        if m.get("documents") == 0 and (m.get("config_hash") != config_hash or tokenizer is not None
                                        and m.get("tokenizer") not in (None, tokenizer)):
            empty += 1
        elif m.get("config_hash") != config_hash:
            other.append(name)
        elif tokenizer is not None and m.get("tokenizer") not in (None, tokenizer):
            other_tok.append((name, m["tokenizer"]))
    if other_tok and not overwrite:
        name, fp = other_tok[0]
        raise ConfigError(
            f"output.dir: {out.path} holds shards made with another tokenizer ({_markers(len(other_tok))}, "
            f"e.g. {name}: tokenizer {str(fp)[:12]}, this run's {tokenizer[:12]}; the tokenizer files changed "
            "under the same config, or the demo ran on its offline fallback tokenizer); pass --overwrite to replace them or choose another --output"
            + kept)
    if other and not overwrite:
        m = out.read_json(other[0])
        change = (config_change(out.read_json("manifest.json"), config, m.get("config_hash"))
                  if config is not None and isinstance(m, dict) else "")
        e = ConfigError(
            f"output.dir: {out.path} holds shards of a different config ({_markers(len(other))}, e.g. "
            f"{other[0]}" + (f"; this config changes {change}" if change else "")
            + "); pass --overwrite to replace them or choose another --output" + kept)
        e.paths_as_hashed = True  # type: ignore[attr-defined]  # run's display tidying leaves its paths as written
        raise e
    if overwrite:  # set aside, not removed: a run that then fails puts them back (driver._put_back)
        set_aside_all(out, [n for g in UNIT_GLOBS for n in out.list(g)], reports=True)  # the manifest first
    out.remove_temporaries()  # a killed run's (never renamed): only under the lock, never a live run's
    return empty
