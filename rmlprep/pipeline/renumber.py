"""Units that only moved: a done unit whose input now has another unit number is renumbered,
not redone (:func:`adopt_moved`).

Units are numbered in input order (a glob's files sorted by name), so an input file added (or
removed) that sorts before the done ones gives every later unit a new number. A unit's files name their unit:
the file names, the shard's ``rmlprep.unit`` metadata and ``unit`` column, each reject record's
``unit`` and the done marker's. Nothing else in them depends on the number (``example_index`` counts documents within
the unit; a reject's ``row`` is the file's), so the files unit ``i`` would get under number
``j`` are unit ``i``'s with those five things rewritten — byte for byte what a fresh run writes
as unit ``j`` (``tests/test_pipeline_trust.py`` compares them).

A unit is renumbered only from what :func:`.previous.sweep` set aside this run, and
only when its marker vouches for exactly what a redo would write: this marker version, this
config hash, this tokenizer fingerprint, the keys this config needs a marker to hold
(:func:`.late_keys.marker_needs`), this unit's input identity (files, byte range, xxh3),
and files whose sha256 match the marker. Anything else is redone as before, and so is every
unit with ``--overwrite`` (the driver does not call it then: an overwrite rewrites the folder).
The new files are committed like a unit's (shard, rejects, marker last); the set-aside files
stay where they are, so a run that fails still puts the previous folder back.
"""

from __future__ import annotations

import json
import shutil
from typing import Any, IO

import pyarrow.parquet as pq

from ..config import RunConfig
from ..shards import rejects_name
from .pack import SCHEMAS
from .late_keys import marker_needs, unit_needs, unmet
from .output import MARKER_VERSION, PREVIOUS, OutputFolder, json_line
from .plan import PlannedUnit
from .unit import shard_metadata
from .writers import ParquetWriter, Writer

__all__ = ["adopt_moved", "renumbered_line"]

#: bytes copied at a time when a Megatron file is renumbered (it is never read whole)
_CHUNK = 1 << 20


def _key(identity: Any) -> str:
    return json.dumps(identity, sort_keys=True)


def adopt_moved(out: OutputFolder, todo: list[PlannedUnit], cfg: RunConfig, tokenizer,
                writer: Writer) -> dict[int, tuple[int, dict[str, Any]]]:
    """Renumber the units of ``todo`` that a set-aside marker vouches for under another number.

    Returns:
        {unit number: (its number before, its new done marker)} for the units renumbered (done:
        not to process); the driver logs them (:func:`renumbered_line`).
    Raises:
        OutputError: a file cannot be read or written (the run then fails and puts the previous
            folder back).
    """
    by_input: dict[str, dict[str, Any]] = {}
    needs = marker_needs(cfg, tokenizer)  # keys a marker of this version must hold for this config
    for name in out.list(f"{PREVIOUS}/shard-*.done.json"):
        m = out.read_json(name)
        if (isinstance(m, dict) and m.get("marker_version") == MARKER_VERSION
                and m.get("config_hash") == cfg.config_hash and m.get("tokenizer") == tokenizer.fingerprint
                and isinstance(m.get("unit"), int) and isinstance(m.get("input"), dict)
                and not unmet(m, needs)):
            by_input[_key(m["input"])] = m
    adopted: dict[int, tuple[int, dict[str, Any]]] = {}
    for u in todo:
        m = by_input.get(_key(u.identity))
        if m is None or m["unit"] == u.index or unmet(m, unit_needs(u.format)) or not _vouched(out, m):
            continue  # the same number: it was redone for its files (a sha256 that differs, ...)
        adopted[u.index] = (m["unit"], _renumber(out, u, m, cfg, tokenizer, writer))
    return adopted


def renumbered_line(moves: dict[int, int]) -> str:
    """The log's line on the units renumbered ({new number: old number}), naming them as runs of
    old -> new numbers: ``resume: 7 done units renumbered, not redone: 0..6 -> 1..7 (...)``."""
    n = len(moves)
    runs: list[list[int]] = []  # [first new, first old, length]
    for new in sorted(moves):
        if runs and new == runs[-1][0] + runs[-1][2] and moves[new] == runs[-1][1] + runs[-1][2]:
            runs[-1][2] += 1
        else:
            runs.append([new, moves[new], 1])
    shown = [f"{o} -> {w}" if k == 1 else f"{o}..{o + k - 1} -> {w}..{w + k - 1}" for w, o, k in runs[:4]]
    more = f", and {len(runs) - 4} more runs" if len(runs) > 4 else ""
    return (f"resume: {n} done unit{'s' if n != 1 else ''} renumbered, not redone: {', '.join(shown)}{more} (an input "
            f"file added or removed before {'them' if n != 1 else 'it'} moved {'their' if n != 1 else 'its'} input to "
            "another unit number; the shard's unit number is rewritten, its rows are the same)")


def _files(m: dict[str, Any]) -> dict[str, str]:
    return m.get("files") or {m["shard"]: m["sha256"]}


def _vouched(out: OutputFolder, m: dict[str, Any]) -> bool:
    """The set-aside files of marker ``m`` are there and match it (sha256), rejects included."""
    for name, digest in _files(m).items():
        if not out.exists(f"{PREVIOUS}/{name}") or out.sha256(f"{PREVIOUS}/{name}") != digest:
            return False
    rejects = f"{PREVIOUS}/{rejects_name(m['unit'])}"
    if m.get("rejects"):
        return out.exists(rejects) and out.sha256(rejects) == m.get("rejects_sha256")
    return not out.exists(rejects)


def _renumber(out: OutputFolder, u: PlannedUnit, m: dict[str, Any], cfg: RunConfig, tokenizer,
              writer: Writer) -> dict[str, Any]:
    """Commit unit ``m["unit"]``'s set-aside files as unit ``u.index``'s (shard, rejects, marker)."""
    old = _files(m)
    if isinstance(writer, ParquetWriter):
        (shard,) = old
        with out.open_input(f"{PREVIOUS}/{shard}") as src:  # one row group at a time, on a store too
            pf = pq.ParquetFile(src)
            schema = SCHEMAS[cfg.pipeline]  # the pack stage's, as a unit writes it (Parquet reads a list's
            groups = (pf.read_row_group(k, columns=schema.names).cast(schema)  # field as "element"); the
                      for k in range(pf.num_row_groups))  # writer adds the unit column with the new number
            files = writer.write(out, u.index, groups, shard_metadata(u, cfg, tokenizer), schema=schema)
    else:  # Megatron's .bin/.idx hold no unit number: the same bytes under the new names, copied in chunks
        files = {}
        for (name, _), new in zip(old.items(), writer.files(u.index)):
            with out.open_input(f"{PREVIOUS}/{name}") as src:
                files[new] = out.commit(new, lambda f, src=src: shutil.copyfileobj(src, f, _CHUNK), digest=True)
    rec = dict(m)
    rec.update(unit=u.index, source=u.describe(), shard=next(iter(files)), sha256=next(iter(files.values())))
    if "files" in m:
        rec["files"] = files
    if m.get("rejects"):
        size = 0

        def write(f: IO[bytes]) -> None:  # line by line: a unit's rejects hold whole rows
            nonlocal size
            size = 0
            with out.open_input(f"{PREVIOUS}/{rejects_name(m['unit'])}") as src:
                for line in src:
                    data = json_line({**json.loads(line), "unit": u.index})
                    f.write(data)
                    size += len(data)

        rec["rejects_sha256"] = out.commit(rejects_name(u.index), write, digest=True)
        rec["rejects_bytes"] = size
    out.write_done(u.index, rec)
    return rec
