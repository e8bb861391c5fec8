"""What a rerun replaces is set aside, not removed, until the rerun completes; a rerun that fails
puts a complete previous run's folder back, file for file.

A rerun removes the files of units it redoes or that left the plan, and the reports, which
describe the old shards. Removed up front, a rerun that then failed (an input file replaced by a
cut copy, found only when its unit decodes it) turned a complete folder into a partial one with
no manifest. So :func:`sweep` moves them into :data:`~.output.PREVIOUS` (``.rmlprep.previous/``:
hidden, so ``datasets`` never reads it; renames on a disk, server-side moves on a store), as
``--overwrite`` does with another config's files (:func:`.owner.check_shards`). Then:

- the run completes (its manifest committed): :func:`discard_previous`;
- it fails, and what was set aside is a complete run's folder (its ``manifest.json`` among it:
  :func:`previous_complete`): :func:`restore_previous` removes what this run wrote and moves the
  set-aside files back, ``manifest.json`` last, so a restore cut short leaves no manifest and no
  folder mixing two inputs' shards ever looks complete;
- it fails and the previous folder was itself partial, or it is stopped (Ctrl-C, SIGTERM): the
  set-aside files are dropped and the units this run finished stay, for a resume;
- it is killed (SIGKILL): the next run drops what is left (the driver logs it).
"""

from __future__ import annotations

from contextlib import suppress

from ..errors import OutputError
from .output import PREVIOUS, REPORT_FILES, UNIT_GLOBS, OutputFolder

__all__ = ["sweep", "set_aside", "set_aside_all", "previous_complete", "restore_previous",
           "discard_previous"]


def _markers_first(names: list[str]) -> list[str]:
    return sorted(names, key=lambda n: not n.endswith(".done.json"))  # nothing vouches for a file moving


def sweep(out: OutputFolder, keep: set[int], redo: set[int]) -> list[str]:
    """Make the folder hold nothing stale before units are (re)done: set aside every file of a
    unit not in ``keep`` (not in the plan: the input shrank, or the plan changed) or in ``redo``,
    and the previous run's reports when anything is set aside or redone, reports first
    (:func:`set_aside_all`). A redone unit's shard goes too: were the redo interrupted, a shard
    of the old input left in the folder would be loaded by ``datasets`` beside the new ones, with
    no marker to say so.

    Returns:
        the names set aside.
    Raises:
        OutputError: a file cannot be moved (what was moved is moved back first).
    """
    names = [name for index, files in sorted(out.unit_files().items())
             if index not in keep or index in redo for name in files]
    return set_aside_all(out, names, reports=bool(names or redo))


def set_aside_all(out: OutputFolder, names: list[str], *, reports: bool) -> list[str]:
    """Set aside the reports (when ``reports``; ``manifest.json`` first), then the unit files
    ``names`` (markers first). The manifest goes first so that no moment, a SIGKILL's included,
    leaves it beside fewer shards than it names: a folder with a manifest reads as complete. A
    move that fails puts back what this call moved, in reverse order (``manifest.json`` last),
    so the folder is as it was; should that fail too, the set-aside manifest is dropped, so that
    nothing puts it back over a folder missing its shards.

    Returns:
        the names set aside.
    Raises:
        OutputError: a file cannot be moved.
    """
    order = [n for n in sorted(REPORT_FILES, key=lambda n: n != "manifest.json") if reports and out.exists(n)]
    order += _markers_first(names)
    moved: list[str] = []
    try:
        for name in order:
            set_aside(out, name)
            moved.append(name)
    except OutputError:
        try:
            for name in reversed(moved):
                out.move(f"{PREVIOUS}/{name}", name)
        except OutputError:
            with suppress(OutputError):
                out.remove(f"{PREVIOUS}/manifest.json")
        raise
    return moved


def set_aside(out: OutputFolder, name: str) -> None:
    """Move a unit file or report into :data:`~.output.PREVIOUS`, out of the names ``datasets``
    and a resume read.

    Raises:
        OutputError: it cannot be moved.
    """
    out.move(name, f"{PREVIOUS}/{name}")


def _previous_files(out: OutputFolder) -> list[str]:
    """The files in :data:`~.output.PREVIOUS`, by their names in the folder."""
    n = len(PREVIOUS) + 1
    return [name[n:] for g in (*UNIT_GLOBS, *REPORT_FILES) for name in out.list(f"{PREVIOUS}/{g}")]


def previous_complete(out: OutputFolder) -> bool:
    """Whether what was set aside is a complete run's folder (its ``manifest.json`` is among it)."""
    return out.exists(f"{PREVIOUS}/manifest.json")


def restore_previous(out: OutputFolder, keep: set[int]) -> list[str]:
    """Undo a failed rerun: remove the reports and every unit file whose unit is not in ``keep``
    (what this run wrote), then move back what was set aside, each unit's marker after its files
    and ``manifest.json`` last.

    Args:
        keep: the units whose files this run left as they were (done and verified).
    Returns:
        the names moved back.
    Raises:
        OutputError: a file cannot be removed or moved back (what is left of the previous run
            stays in :data:`~.output.PREVIOUS` until the next run removes it).
    """
    for name in REPORT_FILES:  # any here are this run's (a report the previous run had not, too)
        out.remove(name)
    for index, names in sorted(out.unit_files().items()):
        if index not in keep:
            for name in _markers_first(names):
                out.remove(name)
    back = sorted(_previous_files(out), key=lambda n: (n == "manifest.json", n in REPORT_FILES,
                                                       n.endswith(".done.json"), n))
    for name in back:
        out.move(f"{PREVIOUS}/{name}", name)
    out.remove_empty_folder("rejects")  # this run's rejects removed, the previous run had none
    out.remove_empty_folder(f"{PREVIOUS}/rejects")
    out.remove_empty_folder(PREVIOUS)
    return back


def discard_previous(out: OutputFolder) -> list[str]:
    """Remove what was set aside. Returns the names removed.

    Raises:
        OutputError: one exists and cannot be removed.
    """
    names = _previous_files(out)
    for name in _markers_first(names):
        out.remove(f"{PREVIOUS}/{name}")
    out.remove_empty_folder(f"{PREVIOUS}/rejects")
    out.remove_empty_folder(PREVIOUS)
    return names
