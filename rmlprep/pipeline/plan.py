"""Planning: the config's ``[input]`` → the run's units of work, each with its input identity.

The per-format planning (byte ranges of JSONL, row groups of Parquet, ...) is
:func:`rmlprep.readers.plan_units`; a plan never depends on the number of workers or the engine.
The output folder is never input, even when a recursive glob reaches into it.

**Input identity.** Every unit carries what it will read (:class:`PlannedUnit`.identity): its
file(s) and an xxh3-128 hash of the bytes it covers — its byte range for plain JSONL, the whole
file for the other formats (a compressed stream, a Parquet or Arrow file is read through its
own index; one hash per file, computed once however many units it has), every file for the
stdlib demo. The identity goes into the unit's done marker; on a rerun a unit is done only if
the current plan gives the same identity, so an input that changed (a line prepended, a file
truncated, rewritten in place with its size and mtime kept) is redone, never reused, while the
units of a file that was only appended to keep their shards. It is content, not time: a file
touched but unchanged is not redone. The hash costs one read of the input at ~1.4 GB/s (xxh3
from the page cache on this machine), well under 1% of tokenizing it.

**While planning**, each file's size and ``mtime_ns`` are taken when its units are cut (before its
first bytes are read) and again when it is hashed: a file replaced or appended to in between (the
units of a large input list are cut minutes before the last files are hashed) stops the plan
instead of being read through ranges or row groups cut on its earlier version.

**During the run** a worker checks that its files' sizes and ``mtime_ns`` (:attr:`PlannedUnit.stat`,
taken when the plan hashed them) are unchanged before and after reading them
(:func:`check_unchanged`): a file changed mid-run fails its unit (InputError) instead of giving a
shard that matches neither version.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import xxhash

from .. import fs
from ..compressed import compression_of, open_decompressed
from ..config import RunConfig
from ..errors import ConfigError, InputError, RmlprepError
from ..readers import Unit, plan_units

__all__ = ["PlannedUnit", "plan", "input_identity", "check_unchanged", "same_bytes", "same_text"]

_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class PlannedUnit(Unit):
    """A :class:`~rmlprep.readers.Unit` with its input identity.

    Attributes:
        identity: ``{"files": [[path, size], ...], "range": [start, stop] | None, "xxh3_128":
            hex}``, JSON-ready (it is written into the done marker and compared on resume).
        stat: ``[[path, size, mtime_ns], ...]`` of its files when they were hashed.
    """

    identity: dict[str, Any] = field(default_factory=dict, compare=False)
    stat: tuple = field(default=(), compare=False)


def plan(cfg: RunConfig, log: Callable[[str], None] | None = None) -> list[PlannedUnit]:
    """The run's units (``unit.index`` = position = shard number), with their identities.

    Raises:
        ConfigError: a path that does not exist, a glob matching nothing, an unknown format,
            or no input rows at all.
        InputError: a file unreadable as a whole (see :func:`rmlprep.readers.plan_units`), one
            that vanished while being hashed, or one whose size or mtime changed after its units
            were cut (before it was hashed).
    """
    seen: dict[str, tuple[int, int]] = {}
    units = plan_units(cfg["input"], exclude=[cfg.output_dir], log=log, seen=seen)
    if not units:
        raise ConfigError("input.paths: no input rows to process")
    file_hashes: dict[str, str] = {}
    planned = []
    for u in units:
        stat = tuple(_stat(p) for p in _files(u))
        for path, size, mtime_ns in stat:
            if seen.get(path, (size, mtime_ns)) != (size, mtime_ns):
                # the units were cut (byte ranges, row groups, lines counted) on what the file was:
                # read as it is now they would miss rows or cut lines, and the hash would vouch for it
                raise InputError(f"{path}: changed while the run was planned (size {seen[path][0]} -> {size}, "
                                 f"mtime_ns {seen[path][1]} -> {mtime_ns}), after its units were cut; rerun once "
                                 "it is complete", path=path)
        planned.append(PlannedUnit(**{f.name: getattr(u, f.name) for f in dataclasses.fields(u)},
                                   identity=input_identity(u, file_hashes), stat=stat))
    if log is not None:
        said = set()
        for later, earlier, digest in same_bytes(planned):
            said.add(later)
            log(f"warning: input: {later} holds the same bytes as {earlier} (xxh3-128 {digest[:12]}...): both "
                "are read, so their rows are in the shards twice; leave one out of input.paths (or its glob) "
                "unless that is meant")
        for later, earlier, whole in same_text(planned, said):
            what = ("the same text as" if whole else f"the same first {_HEAD >> 10} KiB of text as")
            how = ("in another compression" if compression_of(later) != compression_of(earlier)
                   else "compressed twice, e.g. with another time or name in its header")
            log(f"warning: input: {later} holds {what} {earlier} once decompressed ("
                + ("" if whole else "likely ") + f"the same data {how}): both are read, so "
                "their rows are in the shards twice" + ("" if whole else " if the rest matches too")
                + "; leave one out of input.paths (or its glob) unless that is meant")
        for later, earlier in same_stem(planned, said):
            log(f"warning: input: {later} and {earlier} have one name in two formats, likely one dataset saved "
                "twice (a repository's train.jsonl beside its train.parquet): both are read, so their rows may be in "
                "the shards twice; leave one out of input.paths (or its glob) unless they differ")
    return planned


#: the suffixes of a corpus file's name that say its format (after any compression suffix)
_FORMAT_SUFFIXES = (".jsonl", ".json", ".ndjson", ".csv", ".tsv", ".parquet", ".arrow")


def same_stem(units: list[PlannedUnit], said: set[str] = frozenset()) -> list[tuple[str, str]]:
    """(file, an earlier file of the plan) for each input file named as another in the same folder
    but for its format suffix (``data/train.parquet`` after ``data/train.jsonl``, compressed or
    not): one dataset saved in two formats, whose rows a glob such as ``data/*`` reads twice.
    Files of one format are :func:`same_bytes`' and :func:`same_text`'s (``a.jsonl`` beside
    ``a.jsonl.gz``); those already named there (``said``) are left out. Names only: no read.

    Worked example: ``d/train.jsonl``, ``d/train.parquet``, ``d/test.jsonl`` give
    ``[("d/train.parquet", "d/train.jsonl")]``.
    """
    first: dict[tuple[str, str], tuple[str, str]] = {}
    out = []
    for path in dict.fromkeys(u.path for u in units if u.format != "stdlib"):
        folder, _, name = path.rstrip("/").rpartition("/")
        low = name.lower()
        kind = compression_of(path)
        if kind is not None:
            low = low.rsplit(".", 1)[0]
        suffix = next((x for x in _FORMAT_SUFFIXES if low.endswith(x)), None)
        if suffix is None:
            continue
        key = (folder, low[: -len(suffix)])
        if key not in first:
            first[key] = (path, suffix)
        elif first[key][1] != suffix and path not in said:
            out.append((path, first[key][0]))
    return out


def same_bytes(units: list[PlannedUnit]) -> list[tuple[str, str, str]]:
    """(file, an earlier file of the plan with the same bytes, their xxh3-128) for each input
    file whose content, as the units' identities hash it, is another's: a copy under a
    recursive glob (``data/**/*.jsonl`` reaching ``data/backup/``), a file given under two
    names that are not one file (a symlink or hard link is one file and read once:
    :func:`rmlprep.readers.units._expand`). Empty files are left out. Read from the hashes
    the plan takes anyway: no extra read.

    Worked example: ``a.jsonl`` and ``backup/a.jsonl``, both the 2 lines ``{"text": "x"}``,
    (28 bytes) are one unit each, range [0, 28) with the same hash: ``[("backup/a.jsonl", "a.jsonl", h)]``.
    """
    files: dict[str, list] = {}  # path -> [format, (start, stop, hash) per byte range or (size, hash)]
    for u in units:
        if u.format == "stdlib":
            continue
        ident = u.identity
        part = ((*ident["range"], ident["xxh3_128"]) if ident.get("range")  # plain JSONL: each unit's range
                else (ident["files"][0][1], ident["xxh3_128"]))  # the whole file's, the same for each unit
        got = files.setdefault(u.path, [u.format])
        if part not in got:
            got.append(part)
    first: dict[tuple, str] = {}
    out = []
    for path, got in files.items():
        size = sum(p[1] - p[0] if len(p) == 3 else p[0] for p in got[1:])
        if not size:
            continue
        key = tuple(got)
        if key in first:
            out.append((path, first[key], got[-1][-1]))
        else:
            first[key] = path
    return out


#: decompressed bytes :func:`same_text` compares at the head of each file
_HEAD = 1 << 16


def same_text(units: list[PlannedUnit], said: set[str] = frozenset()) -> list[tuple[str, str, bool]]:
    """(file, an earlier file of the plan, whether their whole text is compared) for each JSONL
    or CSV input whose decompressed head, its first :data:`_HEAD` bytes (or all of it, when
    shorter), is another's in another compression: ``a.jsonl`` beside ``a.jsonl.gz`` (or
    ``.zst``) is read twice, and :func:`same_bytes`, which compares the files' own bytes, cannot
    see it; nor two gzips of one file made at different times (``gzip`` writes the time, and
    the file's name, into its header), so compressed files are compared with each other too.
    Only a plan that holds files of two or more compressions (plain counted as one), or two or
    more compressed files, reads the heads, so a corpus of plain files costs nothing; then a
    64 KiB read per file (beside the whole-file hash the plan takes anyway). Two plain files
    are never paired here (:func:`same_bytes` compares them whole). Files in ``said`` (already
    named by :func:`same_bytes`), empty ones and ones whose head cannot be read (the reader
    names the fault) are left out.

    Worked example: ``a.jsonl`` (the 2 lines ``{"text": "x"}``) and ``a.jsonl.gz`` (gzip of the
    same 28 bytes): ``[("a.jsonl.gz", "a.jsonl", True)]``; ``b.jsonl.gz`` and ``c.jsonl.gz``,
    gzips of those bytes with mtime 1 and 2 in their headers: ``[("c.jsonl.gz", "b.jsonl.gz", True)]``.
    """
    paths: dict[str, str | None] = {}
    for u in units:
        if u.format in ("jsonl", "csv"):
            paths.setdefault(u.path, compression_of(u.path))
    if len(set(paths.values())) < 2 and sum(k is not None for k in paths.values()) < 2:
        return []
    first: dict[tuple[str, bool], str] = {}
    out = []
    for path, kind in paths.items():
        head = _head(path)
        if not head:
            continue
        key = (xxhash.xxh3_128(head[:_HEAD]).hexdigest(), len(head) > _HEAD)
        earlier = first.setdefault(key, path)
        if earlier != path and (paths[earlier] != kind or kind is not None) and path not in said:
            out.append((path, earlier, not key[1]))
    return out


def _head(path: str) -> bytes:
    """The first ``_HEAD + 1`` decompressed bytes of ``path`` (fewer at its end), or b"" when
    they cannot be read. Read from the raw stream, not its 1 MB buffer."""
    got = bytearray()
    try:
        with open_decompressed(path) as f:
            raw = getattr(f, "raw", f)
            while len(got) <= _HEAD and (chunk := raw.read(_HEAD + 1 - len(got))):
                got += chunk
    except (OSError, RmlprepError, ValueError, EOFError):
        return b""
    return bytes(got)


def _files(unit: Unit) -> list[str]:
    if unit.format == "stdlib":
        return [os.path.join(unit.path, rel) for rel in unit.files]
    return [unit.path]


def _stat(path: str) -> list[Any]:
    st = fs.stat(path)
    return [path, st.st_size, st.st_mtime_ns]


def _hash_range(h, path: str, start: int, stop: int) -> None:
    with fs.open(path, "rb") as f:
        f.seek(start)
        left = stop - start
        while left > 0:
            chunk = f.read(min(left, _CHUNK))
            if not chunk:
                raise InputError(f"{path}: shorter than planned ({stop - left} of {stop} bytes); it changed "
                                 "while the run was planning: rerun", path=path)
            h.update(chunk)
            left -= len(chunk)


def input_identity(unit: Unit, file_hashes: dict[str, str] | None = None) -> dict[str, Any]:
    """The identity of what ``unit`` reads (see the module docstring).

    Args:
        file_hashes: a cache of whole-file hashes by path, shared by the units of one plan.
    Raises:
        InputError: a file vanished or shrank while being hashed.
    """
    cache = {} if file_hashes is None else file_hashes
    try:
        files = [[p, fs.getsize(p)] for p in _files(unit)]
        if unit.format == "jsonl" and compression_of(unit.path) is None:  # plain: the unit's own bytes
            stop = unit.stop if unit.stop >= 0 else files[0][1]
            h = xxhash.xxh3_128()
            _hash_range(h, unit.path, unit.start, stop)
            return {"files": [[unit.path]], "range": [unit.start, stop], "xxh3_128": h.hexdigest()}
        digests = []
        for path, size in files:
            if path not in cache:
                h = xxhash.xxh3_128()
                _hash_range(h, path, 0, size)
                cache[path] = h.hexdigest()
            digests.append(cache[path])
    except OSError as e:
        raise InputError(f"{e.filename or unit.path}: cannot be read ({e.strerror or e})", path=unit.path) from None
    digest = digests[0] if len(digests) == 1 else xxhash.xxh3_128("".join(digests).encode()).hexdigest()
    return {"files": files, "range": None, "xxh3_128": digest}


def check_unchanged(unit: Unit) -> None:
    """Check that a planned unit's files still have the size and mtime they had when planned.

    Raises:
        InputError: a file changed (or vanished) since the plan; rerun to plan it again.
    """
    for path, size, mtime_ns in getattr(unit, "stat", ()):
        try:
            now = _stat(path)
        except OSError as e:
            raise InputError(f"{path}: vanished during the run ({e.strerror or e}); rerun", path=path) from None
        if now[1:] != [size, mtime_ns]:
            raise InputError(f"{path}: changed during the run (size {size} -> {now[1]}, mtime_ns {mtime_ns} -> "
                             f"{now[2]}); rerun to plan it again", path=path)
