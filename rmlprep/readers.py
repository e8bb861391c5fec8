"""Corpus readers: plan units of work, then stream each unit as bounded batches of rows.

A **unit** is one input file or one row range of a large file; it is planned once from the
config and the files' sizes (never from the number of workers), numbered in a stable order
(paths sorted, then offsets), and read on its own, so any worker can process any unit.

===========  ========================================  =======================================
format       files                                     units
===========  ========================================  =======================================
jsonl        ``.jsonl``/``.json``/``.ndjson``          plain: byte ranges of ~``unit_bytes``
             (+ ``.gz``, ``.zst``)                     cut after a ``\\n``; compressed: 1/file
parquet      ``.parquet``                              row groups gathered up to ``unit_rows``
csv          ``.csv`` (+ ``.gz``)                      one unit per file (quoted newlines)
hf           a ``datasets`` ``save_to_disk`` folder     row ranges of ``unit_rows`` per arrow
             (Dataset, or DatasetDict + ``split``)     file
stdlib       the running interpreter's stdlib ``.py``  files gathered up to ``unit_bytes``
             files (demo input; ``paths`` ignored)
===========  ========================================  =======================================

JSONL lines are split on ``b"\\n"`` only (binary ``readline``): real documents contain
U+2028, U+0085 and lone ``\\r`` inside JSON strings, which ``str.splitlines()`` would cut.
Blank lines are skipped (counted in :attr:`Batch.blank`); a line that is not valid UTF-8 or
JSON, or not a JSON object, is reported in :attr:`Batch.errors` with its row number.

Every batch holds at most ``batch_rows`` rows, so memory per worker is bounded by the batch and
the largest single document, whatever the file size.
"""

from __future__ import annotations

import glob as _glob
import gzip
import io
import json
import os
import sys
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from .errors import ConfigError

__all__ = ["Unit", "Batch", "plan_units", "read_unit", "detect_format", "stdlib_files"]

_JSONL_EXT = (".jsonl", ".json", ".ndjson")
_COMPRESSED = (".gz", ".zst", ".zstd")


@dataclass(frozen=True, slots=True)
class Unit:
    """One unit of work.

    Attributes:
        index: position in the plan; the shard is ``shard-{index:05d}.parquet``.
        format: jsonl | parquet | csv | hf | stdlib.
        path: the input file (stdlib: the stdlib directory).
        start, stop: jsonl: byte range ``[start, stop)`` (lines that start inside it; stop -1 =
            end of file); parquet: row-group range; hf: row range; csv: 0, -1.
        first_row: the source-file row number (0-based line number for jsonl) of the unit's
            first row, used in reject records.
        nbytes: input bytes the unit covers (for progress and MB/s).
        files: stdlib: the relative paths of the files in this unit.
    """

    index: int
    format: str
    path: str
    start: int = 0
    stop: int = -1
    first_row: int = 0
    nbytes: int = 0
    files: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.format == "stdlib":
            return f"stdlib[{self.files[0]} .. {self.files[-1]}]" if self.files else "stdlib[]"
        if self.format in ("jsonl",) and (self.start or self.stop != -1):
            return f"{self.path} bytes [{self.start}, {self.stop if self.stop >= 0 else 'end'})"
        if self.format in ("parquet", "hf") and (self.start or self.stop != -1):
            what = "row groups" if self.format == "parquet" else "rows"
            return f"{self.path} {what} [{self.start}, {self.stop})"
        return self.path


@dataclass(slots=True)
class Batch:
    """At most ``batch_rows`` rows of one unit.

    Attributes:
        values: the column's values: a ``pa.Array`` (string columns) or a Python list.
        rows: int64 [len(values)], source row number of each value.
        nbytes: input bytes these rows took (JSON line lengths, or Arrow buffer sizes).
        errors: ``(row, reason)`` for rows that could not even be read (bad JSON, bad UTF-8,
            missing column); they are not in ``values``.
        blank: blank lines skipped (jsonl).
    """

    values: Any
    rows: np.ndarray
    nbytes: int
    errors: list[tuple[int, str]] = field(default_factory=list)
    blank: int = 0


# -- planning ----------------------------------------------------------------------------------
def detect_format(path: str) -> str:
    """The reader for one path, from its name (or, for a directory, its ``datasets`` files).

    Raises:
        ConfigError: the kind cannot be told; set ``input.format``.
    """
    p = Path(path)
    if p.is_dir():
        if (p / "dataset_dict.json").exists() or (p / "state.json").exists():
            return "hf"
        raise ConfigError(
            f"input.paths: {path} is a directory but not a datasets save_to_disk folder "
            "(no dataset_dict.json or state.json); give files or a glob like 'dir/*.jsonl'"
        )
    name = p.name.lower()
    for c in _COMPRESSED:
        if name.endswith(c):
            name = name[: -len(c)]
            break
    if name.endswith(_JSONL_EXT):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith((".csv", ".tsv")):
        return "csv"
    raise ConfigError(
        f"input.paths: cannot tell the format of {path}; set input.format to one of "
        "jsonl, parquet, csv, hf"
    )


def _expand(paths: list[str]) -> list[str]:
    out: list[str] = []
    for pat in paths:
        if any(ch in pat for ch in "*?["):
            hits = sorted(_glob.glob(pat, recursive=True))
            if not hits:
                raise ConfigError(f"input.paths: the glob {pat!r} matches no file")
            out.extend(hits)
        else:
            if not os.path.exists(pat):
                raise ConfigError(f"input.paths: {pat} does not exist")
            out.append(pat)
    seen: set[str] = set()
    uniq = []
    for p in out:
        if p not in seen:
            seen.add(p)
            uniq.append(p)
    return uniq


def plan_units(inp: dict[str, Any]) -> list[Unit]:
    """Cut the config's ``[input]`` into units, in a stable order.

    Args:
        inp: the validated ``[input]`` section (see :mod:`rmlprep.config`).
    Raises:
        ConfigError: a path that does not exist, a glob matching nothing, an unknown format.
    """
    specs: list[tuple[str, str, int, int, int, int, tuple[str, ...]]] = []
    if inp["format"] == "stdlib":
        root, files = stdlib_files(inp["max_bytes"])
        group: list[str] = []
        size = 0
        for rel, n in files:
            group.append(rel)
            size += n
            if size >= inp["unit_bytes"]:
                specs.append(("stdlib", root, 0, -1, 0, size, tuple(group)))
                group, size = [], 0
        if group:
            specs.append(("stdlib", root, 0, -1, 0, size, tuple(group)))
    else:
        for path in _expand(inp["paths"]):
            fmt = inp["format"] if inp["format"] != "auto" else detect_format(path)
            if fmt == "jsonl":
                specs.extend(_plan_jsonl(path, inp["unit_bytes"]))
            elif fmt == "parquet":
                specs.extend(_plan_parquet(path, inp["unit_rows"]))
            elif fmt == "csv":
                specs.append(("csv", path, 0, -1, 0, os.path.getsize(path), ()))
            elif fmt == "hf":
                specs.extend(_plan_hf(path, inp.get("split"), inp["unit_rows"]))
            else:  # pragma: no cover - config validates formats
                raise ConfigError(f"input.format: unknown format {fmt!r}")
    return [Unit(i, *s) for i, s in enumerate(specs)]


def _plan_jsonl(path: str, unit_bytes: int):
    size = os.path.getsize(path)
    if path.lower().endswith(_COMPRESSED) or size <= unit_bytes:
        return [("jsonl", path, 0, -1, 0, size, ())]
    out = []
    with open(path, "rb") as f:
        start, line = 0, 0
        while start < size:
            cut = start + unit_bytes
            if cut >= size:
                stop = size
            else:
                f.seek(cut)
                f.readline()  # finish the line that straddles the cut
                stop = min(f.tell(), size)
            # count lines in [start, stop) so reject rows carry real line numbers
            f.seek(start)
            n, left = 0, stop - start
            while left > 0:
                chunk = f.read(min(left, 1 << 22))
                n += chunk.count(b"\n")
                left -= len(chunk)
            out.append(("jsonl", path, start, stop, line, stop - start, ()))
            line += n
            start = stop
    return out


def _plan_parquet(path: str, unit_rows: int):
    import pyarrow.parquet as pq

    try:
        md = pq.ParquetFile(path).metadata
    except Exception as e:  # noqa: BLE001 - pyarrow raises several kinds
        raise ConfigError(f"input.paths: {path} is not a readable Parquet file: {e}") from None
    out = []
    g, row = 0, 0
    size = os.path.getsize(path)
    total = md.num_rows or 1
    while g < md.num_row_groups:
        first, rows = g, 0
        while g < md.num_row_groups and (rows == 0 or rows + md.row_group(g).num_rows <= unit_rows):
            rows += md.row_group(g).num_rows
            g += 1
        out.append(("parquet", path, first, g, row, size * rows // total, ()))
        row += rows
    if not out:
        out.append(("parquet", path, 0, 0, 0, 0, ()))
    return out


def _hf_files(path: str, split: str | None) -> list[str]:
    p = Path(path)
    if (p / "dataset_dict.json").exists():
        splits = json.loads((p / "dataset_dict.json").read_text())["splits"]
        if split is None:
            split = splits[0] if len(splits) == 1 else ("train" if "train" in splits else None)
            if split is None:
                raise ConfigError(f"input.split: {path} is a DatasetDict with splits {splits}; name one")
        if split not in splits:
            raise ConfigError(f"input.split: {split!r} is not a split of {path}; splits: {splits}")
        p = p / split
    state = json.loads((p / "state.json").read_text())
    return [str(p / d["filename"]) for d in state["_data_files"]]


def _open_arrow(path: str):
    src = pa.memory_map(path)
    try:
        return pa.ipc.open_stream(src)
    except pa.ArrowInvalid:
        return pa.ipc.open_file(src)


def _arrow_rows(path: str) -> int:
    r = _open_arrow(path)
    if isinstance(r, pa.ipc.RecordBatchFileReader):
        return sum(r.get_batch(i).num_rows for i in range(r.num_record_batches))
    return sum(b.num_rows for b in r)


def _plan_hf(path: str, split: str | None, unit_rows: int):
    out = []
    for f in _hf_files(path, split):
        n = _arrow_rows(f)
        size = os.path.getsize(f)
        for a in range(0, max(n, 1), unit_rows):
            b = min(n, a + unit_rows)
            out.append(("hf", f, a, b, a, size * (b - a) // max(n, 1), ()))
    return out


_STDLIB_SKIP = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}


def stdlib_files(max_bytes: int) -> tuple[str, list[tuple[str, int]]]:
    """The running interpreter's standard-library ``.py`` files, sorted by relative path.

    Test suites and installed packages are left out; files are taken in order until
    ``max_bytes`` is reached (the last one included). Deterministic for one interpreter.

    Returns:
        (stdlib directory, [(relative path, size in bytes), ...]).
    """
    root = sysconfig.get_paths()["stdlib"]
    found: list[tuple[str, int]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _STDLIB_SKIP and not d.startswith("."))
        for name in filenames:
            if name.endswith(".py"):
                full = os.path.join(dirpath, name)
                found.append((os.path.relpath(full, root).replace(os.sep, "/"), os.path.getsize(full)))
    found.sort()
    out, total = [], 0
    for rel, n in found:
        if total >= max_bytes:
            break
        out.append((rel, n))
        total += n
    return root, out


# -- reading -----------------------------------------------------------------------------------
def read_unit(unit: Unit, column: str, batch_rows: int) -> Iterator[Batch]:
    """Stream a unit's ``column`` as :class:`Batch` objects of at most ``batch_rows`` rows."""
    if unit.format == "jsonl":
        yield from _read_jsonl(unit, column, batch_rows)
    elif unit.format == "parquet":
        yield from _read_parquet(unit, column, batch_rows)
    elif unit.format == "csv":
        yield from _read_csv(unit, column, batch_rows)
    elif unit.format == "hf":
        yield from _read_hf(unit, column, batch_rows)
    elif unit.format == "stdlib":
        yield from _read_stdlib(unit, batch_rows)
    else:  # pragma: no cover
        raise ConfigError(f"input.format: unknown format {unit.format!r}")


def _open_binary(path: str):
    low = path.lower()
    if low.endswith(".gz"):
        return gzip.open(path, "rb")
    if low.endswith((".zst", ".zstd")):
        try:
            import zstandard
        except ImportError:
            raise ConfigError(
                f"input.paths: {path} is zstd-compressed; install the reader with: pip install zstandard"
            ) from None
        raw = open(path, "rb")
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw, closefd=True), 1 << 20)
    return open(path, "rb")


def _read_jsonl(unit: Unit, column: str, batch_rows: int) -> Iterator[Batch]:
    with _open_binary(unit.path) as f:
        if unit.start:
            f.seek(unit.start)
        pos = unit.start
        stop = unit.stop
        row = unit.first_row
        values: list[Any] = []
        rows: list[int] = []
        errors: list[tuple[int, str]] = []
        nbytes = 0
        blank = 0
        while stop < 0 or pos < stop:
            line = f.readline()
            if not line:
                break
            pos += len(line)
            nbytes += len(line)
            r = row
            row += 1
            if not line.strip():
                blank += 1
                continue
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as e:
                errors.append((r, f"line is not valid UTF-8 ({e.reason} at byte {e.start})"))
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                errors.append((r, f"line is not valid JSON ({e.msg}, column {e.colno})"))
                continue
            if not isinstance(obj, dict):
                errors.append((r, f"line is a JSON {type(obj).__name__}, not an object"))
                continue
            if column not in obj:
                errors.append((r, f"no {column!r} field (fields: {sorted(obj)[:8]})"))
                continue
            values.append(obj[column])
            rows.append(r)
            if len(values) + len(errors) >= batch_rows:
                yield Batch(values, np.asarray(rows, dtype=np.int64), nbytes, errors, blank)
                values, rows, errors, nbytes, blank = [], [], [], 0, 0
        if values or errors or blank or nbytes:
            yield Batch(values, np.asarray(rows, dtype=np.int64), nbytes, errors, blank)


def _column_batches(batches: Iterator[pa.RecordBatch], column: str, first_row: int, where: str,
                    total_bytes: int, total_rows: int) -> Iterator[Batch]:
    row = first_row
    for rb in batches:
        n = rb.num_rows
        if n == 0:
            continue
        rows = np.arange(row, row + n, dtype=np.int64)
        row += n
        nbytes = total_bytes * n // max(total_rows, 1)
        if column not in rb.schema.names:
            raise ConfigError(f"input.column: {where} has no column {column!r}; columns: {rb.schema.names}")
        col = rb.column(column)
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            yield Batch(col, rows, nbytes)
        else:
            yield Batch(col.to_pylist(), rows, nbytes)


def _read_parquet(unit: Unit, column: str, batch_rows: int) -> Iterator[Batch]:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(unit.path)
    if column not in pf.schema_arrow.names:
        raise ConfigError(f"input.column: {unit.path} has no column {column!r}; columns: {pf.schema_arrow.names}")
    groups = list(range(unit.start, unit.stop))
    if not groups:
        return
    rows = sum(pf.metadata.row_group(g).num_rows for g in groups)
    it = pf.iter_batches(batch_size=batch_rows, row_groups=groups, columns=[column])
    yield from _column_batches(it, column, unit.first_row, unit.path, unit.nbytes, rows)


def _read_csv(unit: Unit, column: str, batch_rows: int) -> Iterator[Batch]:
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    delim = "\t" if unit.path.lower().removesuffix(".gz").endswith(".tsv") else ","
    try:
        reader = pcsv.open_csv(
            unit.path,
            read_options=pcsv.ReadOptions(block_size=1 << 20),
            parse_options=pcsv.ParseOptions(delimiter=delim, newlines_in_values=True),
            convert_options=pcsv.ConvertOptions(
                column_types={column: pa.string()}, include_columns=[column],
                strings_can_be_null=False,
            ),
        )
    except pa.ArrowInvalid as e:
        raise ConfigError(f"input.paths: {unit.path}: cannot read as CSV with column {column!r}: {e}") from None
    def batches():
        for rb in reader:
            for off in range(0, rb.num_rows, batch_rows):
                yield rb.slice(off, batch_rows)

    for b in _column_batches(batches(), column, 0, unit.path, 0, 1):
        # CSV rows carry no byte offsets: count the text bytes of the column
        b.nbytes = int(pc.sum(pc.binary_length(b.values)).as_py() or 0)
        yield b


def _read_hf(unit: Unit, column: str, batch_rows: int) -> Iterator[Batch]:
    r = _open_arrow(unit.path)
    if isinstance(r, pa.ipc.RecordBatchFileReader):
        table = r.read_all()
    else:
        table = r.read_all()  # memory-mapped: no copy of the buffers
    if column not in table.schema.names:
        raise ConfigError(f"input.column: {unit.path} has no column {column!r}; columns: {table.schema.names}")
    part = table.select([column]).slice(unit.start, unit.stop - unit.start)
    yield from _column_batches(iter(part.to_batches(max_chunksize=batch_rows)), column, unit.first_row,
                               unit.path, unit.nbytes, part.num_rows)


def _read_stdlib(unit: Unit, batch_rows: int) -> Iterator[Batch]:
    values: list[str] = []
    rows: list[int] = []
    errors: list[tuple[int, str]] = []
    nbytes = 0
    for i, rel in enumerate(unit.files):
        data = Path(unit.path, rel).read_bytes()
        nbytes += len(data)
        try:
            values.append(data.decode("utf-8"))
            rows.append(i)
        except UnicodeDecodeError as e:
            errors.append((i, f"{rel}: not valid UTF-8 ({e.reason} at byte {e.start})"))
        if len(values) + len(errors) >= batch_rows:
            yield Batch(values, np.asarray(rows, dtype=np.int64), nbytes, errors)
            values, rows, errors, nbytes = [], [], [], 0
    if values or errors:
        yield Batch(values, np.asarray(rows, dtype=np.int64), nbytes, errors)


def python_version() -> str:
    return sys.version.split()[0]
