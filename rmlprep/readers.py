"""Corpus readers: plan units of work, then stream each unit as bounded batches of rows.

A **unit** is one input file or one part of a large file; it is planned once from the config and
the files (never from the number of workers), numbered in a stable order (paths sorted, then
offsets), and read on its own, so any worker can process any unit.

===========  ========================================  =======================================
format       files                                     units
===========  ========================================  =======================================
jsonl        ``.jsonl``/``.json``/``.ndjson``          plain: byte ranges of ~``unit_bytes``
             (+ ``.gz``, ``.zst``, ``.bz2``, ``.xz``)  cut after a ``\\n``; multi-frame zstd:
                                                       runs of whole frames of ~``unit_bytes``
                                                       decoded; gz/bz2/xz, one-frame zstd: 1
parquet      ``.parquet``                              row groups gathered up to ``unit_rows``
csv          ``.csv``/``.tsv`` (+ compression)         one unit per file (quoted newlines)
hf           a ``datasets`` ``save_to_disk`` folder     row ranges of ``unit_rows`` per arrow
             (Dataset, or DatasetDict + ``split``), or file
             an ``.arrow`` file (e.g. of the cache)
stdlib       the running interpreter's stdlib ``.py``  files gathered up to ``unit_bytes``
             files (demo input; ``paths`` ignored)
===========  ========================================  =======================================

**Faults.** One rule: a fault in one row is reported in :attr:`Batch.errors` with the row number
and the reason (the pipeline writes it to ``rejects/``); a fault of the file as a whole (truncated
or corrupt compression, a damaged Parquet footer, a CSV quote never closed, broken ``datasets``
JSON) raises :class:`~rmlprep.errors.InputError` with one line naming the file and, where known,
the byte offset. A partial file is never read as a complete one. The plan reads every file's
first bytes: a Git LFS pointer (a clone without ``git lfs pull``), a 0-byte ``.gz``/``.zst`` (no
compressor writes one), or compression the name does not tell is refused before any work.

**Row numbers** (``Batch.rows``, reject records) are 0-based positions in the source file: the
line number for JSONL (blank lines count), the data record number for CSV (the header and blank
lines do not count; a record may span lines), the row number for Parquet and for each Arrow file
of a ``datasets`` folder.

**JSONL.** Lines are split on ``b"\\n"`` only (binary ``readline``): real documents contain
U+2028, U+0085 and lone ``\\r`` inside JSON strings, which ``str.splitlines()`` would cut; a
``\\r\\n`` ending is JSON whitespace. A UTF-8 byte-order mark at byte 0 of the (decompressed)
file is skipped. Blank lines are counted in :attr:`Batch.blank`. Row faults: not UTF-8, not JSON,
not an object, no such field, a number over Python's 4300-digit limit, nesting deeper than
:data:`MAX_JSON_DEPTH` (checked before parsing, so the parser never recurses that deep), a line
over :data:`MAX_ROW_BYTES` (skipped unread). File faults: a UTF-16/32 byte-order mark; a first line
that is a JSON array or the ``{``/``[`` of a pretty-printed document (not JSON Lines).

**Compressed files** are decoded by :mod:`rmlprep.compressed`, which checks every zstd frame's
extent before decoding it (zstd's stream reader treats a truncated frame as a clean end) and
turns the stdlib decoders' ``EOFError``/``OSError`` into :class:`InputError`. A file of several
independent zstd frames (``pzstd``, the seekable format, concatenated ``.zst`` files) is cut into
units at frame boundaries; the plan decodes it once to count lines, so every unit knows its first
line number and where its first whole line starts (a line that crosses a frame boundary belongs to
the unit it starts in, which reads on into the next frame to finish it). gzip, bzip2, xz and
single-frame zstd cannot be entered mid-stream without decoding everything before the cut point,
so such a file is **one unit**, read as a stream in 1 MB pieces: the reader's memory is bounded by
the batch, whatever the file size (to get several units from a big file, recompress it with
``pzstd`` or ``zstd --format=zstd -B``... or split it).

**CSV** is read with the standard library's ``csv`` module in strict mode (RFC 4180: a field
is quoted only from its first character, ``""`` is a quote inside a quoted value, and a closing
quote must be followed by the delimiter, a line break or the end of the file), from a UTF-8
text stream (a byte-order mark at byte 0 skipped). A record whose field count differs from the
header's, or whose value is not UTF-8, is a row fault (reject). A quote that is never closed,
or a stray quote closed by a later one (``"good"`` / ``"unterminated`` / ``"good again"``: a
lenient parser, like ``pyarrow.csv``, reads lines 2-3 as one value), is a file fault naming the
record and its first line: once quoting is broken, where the record ends cannot be known, so
no later record can be trusted. A physical line or a value over :data:`MAX_ROW_BYTES` is a file
fault too (found as the bytes are decoded, so no line is ever held whole past the limit).
``.tsv`` uses a tab delimiter; quoting is the same. Speed, CPU time on a 50 MB CSV of long
texts: ~140 MB/s (``csv`` alone ~175 MB/s; ``pyarrow.csv``, which is not strict, ~800 MB/s;
tokenizing runs at ~10-20 MB/s per core), measured by ``bench/bench_readers.py --csv``.

Every batch holds at most ``batch_rows`` rows, so a reader's memory is bounded by the batch and
the largest single row, whatever the file size; the pipeline after it streams too (a worker's
peak RSS is measured in :mod:`rmlprep.pipeline`).
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import os
import re
import sys
import sysconfig
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from . import fs
from .compressed import COMPRESSED_SUFFIXES, compression_of, open_decompressed, zstd_chunks, zstd_frames
from .errors import ConfigError, InputError

__all__ = ["Unit", "Batch", "plan_units", "read_unit", "detect_format", "stdlib_files",
           "MAX_ROW_BYTES", "MAX_JSON_DEPTH"]

_JSONL_EXT = (".jsonl", ".json", ".ndjson")
_COMPRESSED = COMPRESSED_SUFFIXES

#: A JSONL line or CSV record longer than this is a row fault (JSONL: skipped unread) or, for CSV,
#: a file fault: no single row may make a reader hold more than this in memory.
MAX_ROW_BYTES = 64 << 20
#: JSON nesting deeper than this (arrays and objects) is a row fault, found before parsing.
MAX_JSON_DEPTH = 100

_BOM = b"\xef\xbb\xbf"
_WIDE_BOMS = ((b"\x00\x00\xfe\xff", "UTF-32-BE"), (b"\xff\xfe\x00\x00", "UTF-32-LE"),
              (b"\xfe\xff", "UTF-16-BE"), (b"\xff\xfe", "UTF-16-LE"))


@dataclass(frozen=True, slots=True)
class Unit:
    """One unit of work.

    Attributes:
        index: position in the plan; the shard is ``train-{index:05d}.parquet``.
        format: jsonl | parquet | csv | hf | stdlib.
        path: the input file (stdlib: the stdlib directory).
        start, stop: jsonl: byte range ``[start, stop)`` of the file (plain: lines that start
            inside it; zstd: whole frames; stop -1 = end of file); parquet: row-group range; hf:
            row range; csv: 0, -1.
        first_row: the source row number (0-based line number for jsonl) of the unit's first
            row, used in reject records.
        nbytes: input bytes the unit covers (for progress and MB/s): decoded bytes for zstd
            units, an estimate from the trailer for gzip, else file bytes.
        files: stdlib: the relative paths of the files in this unit.
        dstart, dstop: multi-frame zstd: the unit's lines are those that start at decoded byte
            offsets ``[dstart, dstop)`` counted from the frame at ``start`` (dstop -1 = to the
            end of the file). Bytes before ``dstart`` end a line of the previous unit; the last
            line may run on past ``stop`` into the next frames.
    """

    index: int
    format: str
    path: str
    start: int = 0
    stop: int = -1
    first_row: int = 0
    nbytes: int = 0
    files: tuple[str, ...] = ()
    dstart: int = 0
    dstop: int = -1

    def describe(self) -> str:
        if self.format == "stdlib":
            return f"stdlib[{self.files[0]} .. {self.files[-1]}]" if self.files else "stdlib[]"
        if self.format in ("jsonl",) and (self.start or self.stop != -1):
            what = "zstd frames at bytes" if compression_of(self.path) == "zstd" else "bytes"
            return f"{self.path} {what} [{self.start}, {self.stop if self.stop >= 0 else 'end'})"
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
            missing field, wrong number of CSV fields); they are not in ``values``.
        blank: blank lines skipped (jsonl).
    """

    values: Any
    rows: np.ndarray
    nbytes: int
    errors: list[tuple[int, str]] = field(default_factory=list)
    blank: int = 0


def _one_line(e: BaseException | str, limit: int = 300) -> str:
    s = " ".join(str(e).split()) or type(e).__name__
    return s if len(s) <= limit else s[: limit - 3] + "..."


# -- planning ----------------------------------------------------------------------------------
def detect_format(path: str) -> str:
    """The reader for one path, from its name (or, for a directory, its ``datasets`` files).

    Raises:
        ConfigError: the kind cannot be told; set ``input.format``.
    """
    if fs.isdir(path):
        if _is_hf_dir(path):
            return "hf"
        raise ConfigError(
            f"input.paths: {path} is a directory but not a datasets save_to_disk folder "
            "(no dataset_dict.json or state.json); give files or a glob like 'dir/*.jsonl'"
        )
    name = path.rstrip("/").rsplit("/", 1)[-1].lower()
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
    if name.endswith(".arrow") and not path.rstrip("/").rsplit("/", 1)[-1].lower().endswith(_COMPRESSED):
        return "hf"  # one Arrow file of a datasets cache or save_to_disk folder
    raise ConfigError(
        f"input.paths: cannot tell the format of {path}; set input.format to one of "
        "jsonl, parquet, csv, hf (a datasets folder or an .arrow file; compressed: .gz, .zst, .bz2, .xz "
        "after the format's suffix)"
    )


def _is_hf_dir(p: str) -> bool:
    return fs.isfile(fs.join(p, "dataset_dict.json")) or fs.isfile(fs.join(p, "state.json"))


def _inside(path: str, dirs: list[str]) -> bool:
    rp = fs.realpath(path)
    return any(rp == d or rp.startswith(d.rstrip(os.sep) + os.sep) for d in dirs)


def _expand(paths: list[str], exclude: Sequence[str | os.PathLike] = ()) -> list[str]:
    """Files and ``datasets`` folders named by ``paths`` (globs expanded, sorted), deduplicated.

    A glob skips directories that are not ``datasets`` folders (their files are matched or not by
    the glob itself), files inside a ``datasets`` folder (the folder is the input), and anything
    under ``exclude``. An explicit path under ``exclude`` is an error.
    """
    ex = [fs.realpath(str(d)) for d in exclude]
    out: list[str] = []
    for pat in paths:
        if any(ch in pat for ch in "*?["):
            hits = fs.glob(pat, recursive=True)
            if not hits:
                raise ConfigError(f"input.paths: the glob {pat!r} matches no file")
            hf_dirs = [fs.realpath(h) for h in hits if fs.isdir(h) and _is_hf_dir(h)]
            kept = []
            for h in hits:
                if ex and _inside(h, ex):
                    continue  # the run's own output folder is never input
                if fs.isdir(h):
                    if fs.realpath(h) in hf_dirs:
                        kept.append(h)
                    continue
                if _inside(fs.dirname(h), hf_dirs) or _is_hf_dir(fs.dirname(h)):
                    continue  # state.json, data-*.arrow of a datasets folder
                kept.append(h)
            if not kept:
                raise ConfigError(f"input.paths: the glob {pat!r} matches no corpus file "
                                  f"({len(hits)} matches: directories, datasets metadata or the output folder)")
            out.extend(kept)
        else:
            if not fs.exists(pat):
                raise ConfigError(f"input.paths: {pat} does not exist")
            if ex and _inside(pat, ex):
                raise ConfigError(f"input.paths: {pat} is inside the output folder {exclude[0]}; "
                                  "a run never reads its own output")
            out.append(pat)
    seen: set[str] = set()
    uniq = []
    for p in out:
        key = fs.realpath(p)
        if key not in seen:
            seen.add(key)
            uniq.append(p)
    return uniq


def plan_units(inp: dict[str, Any], *, exclude: Sequence[str | os.PathLike] = ()) -> list[Unit]:
    """Cut the config's ``[input]`` into units, in a stable order.

    Args:
        inp: the validated ``[input]`` section (see :mod:`rmlprep.config`).
        exclude: directories whose files are never input (the run's output folder): glob matches
            under them are skipped, an explicit path under them is refused.
    Raises:
        ConfigError: a path that does not exist, a glob matching nothing, an unknown format.
        InputError: a file that is unreadable as a whole (a damaged Parquet footer, a truncated
            zstd frame, broken ``datasets`` JSON, a JSON document that is not JSON Lines).
    """
    specs: list[dict[str, Any]] = []
    if inp["format"] == "stdlib":
        root, files = stdlib_files(inp["max_bytes"])
        group: list[str] = []
        size = 0
        for rel, n in files:
            group.append(rel)
            size += n
            if size >= inp["unit_bytes"]:
                specs.append(dict(format="stdlib", path=root, nbytes=size, files=tuple(group)))
                group, size = [], 0
        if group:
            specs.append(dict(format="stdlib", path=root, nbytes=size, files=tuple(group)))
    else:
        for path in _expand(inp["paths"], exclude):
            fmt = inp["format"] if inp["format"] != "auto" else detect_format(path)
            if fmt != "hf" and fs.isdir(path):
                raise ConfigError(f"input.paths: {path} is a directory; input.format = {fmt!r} reads files")
            if fs.isfile(path):
                _sniff(path, fmt)
            if fmt == "jsonl":
                specs.extend(_plan_jsonl(path, inp["unit_bytes"]))
            elif fmt == "parquet":
                specs.extend(_plan_parquet(path, inp["unit_rows"]))
            elif fmt == "csv":
                specs.append(dict(format="csv", path=path, nbytes=_decoded_size_estimate(path)))
            elif fmt == "hf":
                specs.extend(_plan_hf(path, inp.get("split"), inp["unit_rows"]))
            else:  # pragma: no cover - config validates formats
                raise ConfigError(f"input.format: unknown format {fmt!r}")
    return [Unit(i, **s) for i, s in enumerate(specs)]


def _decoded_size_estimate(path: str) -> int:
    """Bytes after decompression, for progress only (never sizes an allocation)."""
    size = fs.getsize(path)
    kind = compression_of(path)
    if kind == "gzip" and size >= 18:
        with fs.open(path, "rb") as f:  # ISIZE: the last member's size mod 2**32 (RFC 1952)
            f.seek(-4, os.SEEK_END)
            isize = int.from_bytes(f.read(4), "little")
        return max(isize, size)
    if kind == "zstd":
        try:
            with fs.open(path, "rb") as f:
                sizes = [fr.content_size for fr in zstd_frames(f, path) if not fr.skippable]
            if sizes and None not in sizes:
                return sum(sizes)
        except InputError:
            pass  # reported when the unit is read
    return size


_MAGIC = ((b"\x1f\x8b", "gzip", ".gz"), (b"\x28\xb5\x2f\xfd", "zstd", ".zst"), (b"\xfd7zXZ\x00", "xz", ".xz"))
_LFS_POINTER = b"version https://git-lfs.github.com/spec/"


def _sniff(path: str, fmt: str) -> None:
    """File faults visible in a file's first bytes, found at plan time.

    Raises:
        InputError: the file cannot be opened; it is a Git LFS pointer (a clone without
            ``git lfs pull``); a compressed name on a 0-byte file (no compressor writes one: an
            interrupted download) or on another compression's data; plain-text JSONL/CSV that
            is in fact compressed (a download saved without its suffix).
    """
    try:
        with fs.open(path, "rb") as f:
            head = f.read(64)
    except OSError as e:
        raise InputError(f"{path}: cannot be read ({e.strerror or e})", path=path) from None
    if head.startswith(_LFS_POINTER):
        raise InputError(f"{path}: is a Git LFS pointer, not the data (the repository was cloned without "
                         "its LFS files); fetch them with: git lfs pull", path=path, offset=0)
    magic = next(((name, suffix) for m, name, suffix in _MAGIC if head.startswith(m)), None)
    if magic is None and head.startswith(b"BZh") and head[4:10] == b"1AY&SY":
        magic = ("bzip2", ".bz2")
    kind = compression_of(path)
    if kind is not None:
        if not head:
            raise InputError(f"{path}: is empty, but a {kind} file is never 0 bytes (an interrupted download "
                             "or copy?); fetch the file again", path=path, offset=0)
        if magic is not None and magic[0] != kind:
            raise InputError(f"{path}: holds {magic[0]} data, not {kind}; rename it to end in {magic[1]}",
                             path=path, offset=0)
    elif magic is not None and fmt in ("jsonl", "csv"):
        raise InputError(f"{path}: is {magic[0]}-compressed but its name does not say so; rename it to "
                         f"{Path(path).name}{magic[1]}", path=path, offset=0)


def _check_jsonl_head(path: str, head: bytes) -> None:
    """File faults visible in the first bytes: a UTF-16/32 byte-order mark, a JSON document."""
    for bom, name in _WIDE_BOMS:
        if head.startswith(bom):
            raise InputError(f"{path}: the file is {name} (byte-order mark at byte 0); rmlprep reads "
                             f"UTF-8: convert it with iconv -f {name} -t UTF-8", path=path, offset=0)
    if head.startswith(_BOM):
        head = head[3:]
    stripped = head.lstrip()
    if not stripped:
        return
    first = stripped.split(b"\n", 1)[0].strip()
    offset = len(head) - len(stripped)
    if first.startswith(b"[") or first == b"{":
        kind = "a JSON array" if first.startswith(b"[") else "a pretty-printed JSON object"
        raise InputError(
            f"{path}: byte {offset}: the file starts with {kind}, not JSON Lines (one object per line); "
            f"convert it, e.g. jq -c '.[]' FILE > FILE.jsonl (array) or jq -c . FILE > FILE.jsonl",
            path=path, offset=offset)


def _plan_jsonl(path: str, unit_bytes: int) -> list[dict[str, Any]]:
    size = fs.getsize(path)
    kind = compression_of(path)
    if kind == "zstd":
        return _plan_zstd_jsonl(path, unit_bytes)
    if kind is not None:
        return [dict(format="jsonl", path=path, nbytes=_decoded_size_estimate(path))]
    with fs.open(path, "rb") as f:
        _check_jsonl_head(path, f.read(1 << 16))
    if size <= unit_bytes:
        return [dict(format="jsonl", path=path, nbytes=size)]
    out = []
    with fs.open(path, "rb") as f:
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
                if not chunk:
                    raise InputError(f"{path}: the file shrank while it was planned (byte {stop - left})",
                                     path=path, offset=stop - left)
                n += chunk.count(b"\n")
                left -= len(chunk)
            out.append(dict(format="jsonl", path=path, start=start, stop=stop, first_row=line,
                            nbytes=stop - start))
            line += n
            start = stop
    return out


def _plan_zstd_jsonl(path: str, unit_bytes: int) -> list[dict[str, Any]]:
    """Units of whole zstd frames, ~``unit_bytes`` of decoded text each.

    One frame (the ``zstd`` tool's output): one unit. Several frames: decode each once, recording
    its decoded length, its newline count, the offset of its first newline and whether it ends
    with one; then gather frames and compute each unit's first line number and ``dstart``.
    """
    with fs.open(path, "rb") as f:
        frames = [fr for fr in zstd_frames(f, path) if not fr.skippable]
    size = fs.getsize(path)
    declared = [fr.content_size for fr in frames]
    if len(frames) <= 1 or (None not in declared and sum(declared) <= unit_bytes):
        return [dict(format="jsonl", path=path,
                     nbytes=sum(declared) if frames and None not in declared else size)]
    stats = _zstd_frame_lines(path, frames)
    cum = [0]
    for s in stats:
        cum.append(cum[-1] + s[0])
    out: list[dict[str, Any]] = []
    lines_before = 0  # newlines in frames before the group
    i = 0
    n = len(frames)
    while i < n:
        a = i
        acc = 0
        while i < n and (acc == 0 or acc < unit_bytes):
            acc += stats[i][0]
            i += 1
        # where the group's first whole line starts (relative to frame a's first decoded byte)
        if a == 0 or stats[a - 1][3]:
            skip = 0
        else:
            skip = -1
            for j in range(a, i):
                if stats[j][2] >= 0:
                    skip = cum[j] - cum[a] + stats[j][2] + 1
                    break
        group_len = cum[i] - cum[a]
        nl = sum(s[1] for s in stats[a:i])
        if skip < 0 or skip >= group_len:
            # no line starts in these frames: they finish the previous unit's last line
            prev = out[-1]
            prev["stop"] = frames[i - 1].end
            prev["dstop"] = prev["dstop"] + group_len if prev["dstop"] >= 0 else -1
            prev["nbytes"] += group_len
        else:
            out.append(dict(format="jsonl", path=path, start=frames[a].start, stop=frames[i - 1].end,
                            first_row=lines_before + (1 if skip else 0), nbytes=group_len,
                            dstart=skip, dstop=group_len))
        lines_before += nl
    out[-1]["dstop"] = -1  # the last unit reads to the end of the file
    if len(out) == 1:
        out[0].update(start=0, stop=-1, dstart=0)
    return out


def _zstd_frame_lines(path: str, frames) -> list[tuple[int, int, int, bool]]:
    """Per frame: (decoded bytes, newlines, offset of the first newline or -1, ends with one)."""
    stats = {fr.start: [0, 0, -1, False] for fr in frames}
    for fr, chunk in zstd_chunks(path, frames=frames, size=1 << 20):
        s = stats[fr.start]
        if s[2] < 0:
            k = chunk.find(b"\n")
            if k >= 0:
                s[2] = s[0] + k
        s[1] += chunk.count(b"\n")
        s[0] += len(chunk)
        s[3] = chunk.endswith(b"\n")
    return [tuple(stats[fr.start]) for fr in frames]


def _plan_parquet(path: str, unit_rows: int) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    try:
        md = pq.ParquetFile(fs.arrow_source(path)).metadata
        groups = [md.row_group(g).num_rows for g in range(md.num_row_groups)]
    except Exception as e:  # noqa: BLE001 - pyarrow raises OSError, ArrowInvalid, ...
        raise InputError(f"{path}: not a readable Parquet file (damaged or truncated footer?): "
                         f"{_one_line(e)}", path=path) from None
    out = []
    g, row = 0, 0
    size = fs.getsize(path)
    total = sum(groups) or 1
    while g < len(groups):
        first, rows = g, 0
        while g < len(groups) and (rows == 0 or rows + groups[g] <= unit_rows):
            rows += groups[g]
            g += 1
        out.append(dict(format="parquet", path=path, start=first, stop=g, first_row=row,
                        nbytes=size * rows // total))
        row += rows
    if not out:
        out.append(dict(format="parquet", path=path, start=0, stop=0))
    return out


def _read_json_file(path: str, what: str) -> Any:
    try:
        with fs.open(path, "rb") as f:
            data = f.read(1 << 24)
            if f.read(1):
                raise InputError(f"{path}: {what} is over 16 MB; this is not a datasets file", path=str(path))
        if data.startswith(_LFS_POINTER):
            _sniff(str(path), "hf")
        return json.loads(data.decode("utf-8-sig"))
    except InputError:
        raise
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise InputError(f"{path}: {what} is not valid JSON ({_one_line(e, 120)}); the datasets folder "
                         "is damaged: save it again with save_to_disk", path=str(path)) from None


def _hf_files(path: str, split: str | None) -> list[str]:
    p = path
    if fs.exists(fs.join(p, "dataset_dict.json")):
        dd = _read_json_file(fs.join(p, "dataset_dict.json"), "dataset_dict.json")
        splits = dd.get("splits") if isinstance(dd, dict) else None
        if not isinstance(splits, list) or not splits or not all(isinstance(s, str) for s in splits):
            raise InputError(f"{fs.join(p, 'dataset_dict.json')}: no \"splits\" list of names; the datasets folder "
                             "is damaged: save it again with save_to_disk", path=fs.join(p, "dataset_dict.json"))
        if split is None:
            split = splits[0] if len(splits) == 1 else ("train" if "train" in splits else None)
            if split is None:
                raise ConfigError(f"input.split: {path} is a DatasetDict with splits {splits}; name one")
        if split not in splits:
            raise ConfigError(f"input.split: {split!r} is not a split of {path}; splits: {splits}")
        if "/" in split or "\\" in split or split in (".", "..") or not fs.isdir(fs.join(p, split)):
            raise InputError(f"{fs.join(p, 'dataset_dict.json')}: split {split!r} has no folder {fs.join(p, split)}",
                             path=fs.join(p, "dataset_dict.json"))
        p = fs.join(p, split)
    state = _read_json_file(fs.join(p, "state.json"), "state.json")
    files = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(files, list):
        raise InputError(f"{fs.join(p, 'state.json')}: no \"_data_files\" list; the datasets folder is damaged: "
                         "save it again with save_to_disk", path=fs.join(p, "state.json"))
    out = []
    for i, d in enumerate(files):
        name = d.get("filename") if isinstance(d, dict) else None
        if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
            raise InputError(f"{fs.join(p, 'state.json')}: _data_files[{i}] has no plain \"filename\" ({d!r:.80}); "
                             "the datasets folder is damaged", path=fs.join(p, "state.json"))
        if not fs.isfile(fs.join(p, name)):
            raise InputError(f"{fs.join(p, 'state.json')}: _data_files[{i}] names {name}, which is not in {p}",
                             path=fs.join(p, "state.json"))
        _sniff(fs.join(p, name), "hf")
        out.append(fs.join(p, name))
    return out


def _open_arrow(path: str):
    try:
        src = fs.open_arrow(path)
    except (OSError, pa.ArrowException) as e:
        raise InputError(f"{path}: cannot open: {_one_line(e)}", path=path) from None
    try:
        return pa.ipc.open_stream(src)
    except pa.ArrowInvalid:
        pass
    try:
        return pa.ipc.open_file(src)
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{path}: not a readable Arrow file (truncated or damaged?): {_one_line(e)}",
                         path=path) from None


def _arrow_rows(path: str) -> int:
    try:
        r = _open_arrow(path)
        if isinstance(r, pa.ipc.RecordBatchFileReader):
            return sum(r.get_batch(i).num_rows for i in range(r.num_record_batches))
        return sum(b.num_rows for b in r)
    except InputError:
        raise
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{path}: not a readable Arrow file (truncated or damaged?): {_one_line(e)}",
                         path=path) from None


def _plan_hf(path: str, split: str | None, unit_rows: int) -> list[dict[str, Any]]:
    out = []
    files = [path] if fs.isfile(path) else _hf_files(path, split)
    for f in files:
        n = _arrow_rows(f)
        size = fs.getsize(f)
        for a in range(0, max(n, 1), unit_rows):
            b = min(n, a + unit_rows)
            out.append(dict(format="hf", path=f, start=a, stop=b, first_row=a,
                            nbytes=size * (b - a) // max(n, 1)))
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
    """Stream a unit's ``column`` as :class:`Batch` objects of at most ``batch_rows`` rows.

    Raises:
        InputError: a file fault (see the module docstring); the unit must not be counted done.
        ConfigError: the file has no ``column`` (Parquet, CSV, Arrow).
    """
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


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def _json_depth(line: bytes) -> int:
    """Deepest nesting of ``[``/``{`` in a JSON text, brackets inside strings not counted."""
    a = np.frombuffer(_JSON_STRING.sub(b'""', line), dtype=np.uint8)
    step = ((a == 0x5B) | (a == 0x7B)).astype(np.int32) - ((a == 0x5D) | (a == 0x7D)).astype(np.int32)
    return int(np.cumsum(step).max(initial=0))


def _parse_row(line: bytes, column: str) -> tuple[bool, Any]:
    """(True, value) or (False, reason) for one non-blank JSONL line."""
    if line.count(b"[") + line.count(b"{") > MAX_JSON_DEPTH:
        depth = _json_depth(line)
        if depth > MAX_JSON_DEPTH:
            return False, f"JSON nested {depth} levels deep (the limit is {MAX_JSON_DEPTH})"
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        return False, f"line is not valid UTF-8 ({e.reason} at byte {e.start})"
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        return False, f"line is not valid JSON ({e.msg}, column {e.colno})"
    except RecursionError:
        return False, "JSON nested too deep for the parser"
    except ValueError as e:  # e.g. an integer over sys.get_int_max_str_digits() digits
        return False, f"line holds a value Python cannot convert ({_one_line(str(e).split(';')[0], 120)})"
    if not isinstance(obj, dict):
        return False, f"line is a JSON {type(obj).__name__}, not an object"
    if column not in obj:
        return False, f"no {column!r} field (fields: {sorted(obj)[:8]})"
    return True, obj[column]


def _read_jsonl(unit: Unit, column: str, batch_rows: int) -> Iterator[Batch]:
    kind = compression_of(unit.path)
    if kind is None:
        f = fs.open(unit.path, "rb", buffering=1 << 20)
        if unit.start:
            f.seek(unit.start)
        pos, stop = unit.start, unit.stop
    elif kind == "zstd":
        f = open_decompressed(unit.path, start=unit.start)  # runs on past unit.stop to end a line
        pos, stop = 0, unit.dstop
    else:
        f = open_decompressed(unit.path)
        pos, stop = 0, -1
    at_file_start = unit.start == 0 and unit.dstart == 0
    with f:
        if unit.dstart:
            left = unit.dstart
            while left:
                got = len(f.read(min(left, 1 << 20)))
                if not got:
                    raise InputError(f"{unit.path}: the file changed since it was planned (the frame at "
                                     f"byte {unit.start} decodes to fewer bytes)", path=unit.path,
                                     offset=unit.start)
                left -= got
            pos = unit.dstart
        row = unit.first_row
        values: list[Any] = []
        rows: list[int] = []
        errors: list[tuple[int, str]] = []
        nbytes = 0
        blank = 0
        first = at_file_start  # the next non-blank line is the file's first
        while stop < 0 or pos < stop:
            line = f.readline(MAX_ROW_BYTES + 1)
            if not line:
                break
            if at_file_start:
                at_file_start = False
                if line.startswith(_BOM):
                    pos += 3
                    nbytes += 3
                    line = line[3:]
            r = row
            row += 1
            if len(line) > MAX_ROW_BYTES and not line.endswith(b"\n"):
                n = len(line)
                while True:  # skip the rest of the line unread
                    more = f.readline(1 << 20)
                    n += len(more)
                    if not more or more.endswith(b"\n"):
                        break
                pos += n
                nbytes += n
                errors.append((r, f"line of {n} bytes is longer than the {MAX_ROW_BYTES} byte limit (not read)"))
            else:
                pos += len(line)
                nbytes += len(line)
                if line.isspace():  # (no copy of a long line, as strip() would make)
                    blank += 1
                    continue
                if first:  # a JSON document (array, pretty-printed object) is a file fault
                    first = False
                    _check_jsonl_head(unit.path, line[:4096])
                ok, v = _parse_row(line, column)
                if ok:
                    values.append(v)
                    rows.append(r)
                else:
                    errors.append((r, v))
            if len(values) + len(errors) >= batch_rows:
                out = [Batch(values, np.asarray(rows, dtype=np.int64), nbytes, errors, blank)]
                values, rows, errors, nbytes, blank, line = [], [], [], 0, 0, b""
                yield out.pop()  # the suspended frame keeps no reference to the batch or its last line
        if values or errors or blank or nbytes:
            out = [Batch(values, np.asarray(rows, dtype=np.int64), nbytes, errors, blank)]
            values = []
            yield out.pop()


def _column_batches(batches: Iterator[pa.RecordBatch], column: str, first_row: int, where: str,
                    total_bytes: int, total_rows: int) -> Iterator[Batch]:
    """Batches of one Arrow column. Parquet and Arrow files are not UTF-8-checked when read, so
    every column is validated in full (``Array.validate(full=True)``): a row whose strings are not
    UTF-8 becomes a reject; a structural fault (offsets out of range) is an :class:`InputError`."""
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
        is_str = pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
        try:
            col.validate(full=True)
        except pa.ArrowInvalid as e:
            if "utf8" not in str(e).lower() and "utf-8" not in str(e).lower():
                raise InputError(f"{where}: corrupt Arrow data in rows [{rows[0]}, {rows[-1] + 1}): "
                                 f"{_one_line(e)}", path=where) from None
            values, keep, errors = [], [], []
            for i in range(n):
                try:
                    values.append(col.slice(i, 1).to_pylist()[0])
                    keep.append(i)
                except UnicodeDecodeError as u:
                    errors.append((int(rows[i]), f"{column} is not valid UTF-8 ({u.reason} at byte {u.start})"))
            kept = rows[keep]
            yield Batch(pa.array(values, type=col.type) if is_str else values, kept, nbytes, errors)
            continue
        if is_str:
            yield Batch(col, rows, nbytes)
        else:
            yield Batch(col.to_pylist(), rows, nbytes)


def _read_parquet(unit: Unit, column: str, batch_rows: int) -> Iterator[Batch]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(fs.arrow_source(unit.path))
        names = pf.schema_arrow.names
    except Exception as e:  # noqa: BLE001 - pyarrow raises OSError, ArrowInvalid, ...
        raise InputError(f"{unit.path}: not a readable Parquet file (damaged or truncated footer?): "
                         f"{_one_line(e)}", path=unit.path) from None
    if column not in names:
        raise ConfigError(f"input.column: {unit.path} has no column {column!r}; columns: {names[:20]}")
    groups = list(range(unit.start, unit.stop))
    if not groups:
        return
    try:
        rows = sum(pf.metadata.row_group(g).num_rows for g in groups)
        it = pf.iter_batches(batch_size=batch_rows, row_groups=groups, columns=[column])
    except Exception as e:  # noqa: BLE001
        raise InputError(f"{unit.path}: row groups [{unit.start}, {unit.stop}) cannot be read: {_one_line(e)}",
                         path=unit.path) from None

    def checked():
        while True:
            try:
                rb = next(it)
            except StopIteration:
                return
            except Exception as e:  # noqa: BLE001 - corrupt pages: OSError, ArrowInvalid, ...
                raise InputError(f"{unit.path}: corrupt data in row groups [{unit.start}, {unit.stop}): "
                                 f"{_one_line(e)}", path=unit.path) from None
            yield rb

    seen = 0
    for b in _column_batches(checked(), column, unit.first_row, unit.path, unit.nbytes, rows):
        seen += len(b.rows) + len(b.errors)
        yield b
    if seen != rows:
        raise InputError(f"{unit.path}: row groups [{unit.start}, {unit.stop}) hold {seen} rows, the footer "
                         f"says {rows}", path=unit.path)


# -- CSV ---------------------------------------------------------------------------------------
_SURROGATE = re.compile("[\udc80-\udcff]")  # bytes that are not UTF-8, as surrogateescape decodes them
_BAD_UTF8 = [0]  # bytes the CSV decoder escaped so far (in this process)


def _escape_counted(e: UnicodeError) -> tuple[str, int]:
    """``surrogateescape``, counting: a CSV row is searched for escaped bytes only once some
    were seen, as the decoder runs ahead of the rows it returns."""
    _BAD_UTF8[0] += 1
    return codecs.lookup_error("surrogateescape")(e)


codecs.register_error("rmlprep.surrogateescape", _escape_counted)


class _LineBounded(io.RawIOBase):
    """The bytes of a (decompressed) CSV stream, counted, refusing a run of more than
    :data:`MAX_ROW_BYTES` bytes without a line break (checked per chunk as the text decoder
    reads them, so a file without line breaks never sits in memory whole)."""

    def __init__(self, inner: io.BufferedReader, path: str):
        super().__init__()
        self.inner, self.path = inner, path
        self.count = 0  # bytes read so far
        self._since_break = 0  # bytes since the last \n or \r

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self.inner.readinto(b)
        if n:
            chunk = bytes(memoryview(b)[:n])
            last = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
            self._since_break = n - 1 - last if last >= 0 else self._since_break + n
            self.count += n
            if self._since_break > MAX_ROW_BYTES:
                at = self.count - self._since_break
                raise InputError(f"{self.path}: byte {at}: more than {MAX_ROW_BYTES >> 20} MB without a line break: "
                                 "not a CSV file, or a line over the CSV line limit", path=self.path, offset=at)
        return n

    def close(self) -> None:
        self.inner.close()
        super().close()


def _not_utf8(value: str) -> str:
    """Why a value decoded with surrogateescape is not UTF-8, as the strict decoder says it."""
    try:
        value.encode("utf-8", "surrogateescape").decode("utf-8")
    except UnicodeDecodeError as e:
        return f"{e.reason} at byte {e.start}"
    return "not UTF-8"  # pragma: no cover - only called for values holding an escaped byte


def _csv_fault(path: str, e: csv.Error, record: int, first_line: int, line: int) -> InputError:
    """One line for a CSV fault the strict parser found in the record that starts on ``first_line``."""
    msg = str(e)
    if "unexpected end of data" in msg:
        what = ("opens a quoted value that is never closed: the file ends inside the quotes, so every line "
                "after it would become part of that value; close the quote (a quote inside a quoted value "
                'is written "")')
    elif "expected after" in msg:
        what = (f"has a quoted value that closes on line {line} and goes on with more text (RFC 4180: a closing "
                "quote is followed by a delimiter, a line break or the end of the file): a stray or unescaped "
                'quote, which would merge the lines up to the next quote into one value; write a quote inside '
                'a quoted value as "" or remove the stray one')
    elif "field larger than field limit" in msg:
        what = (f"holds a value over the {MAX_ROW_BYTES >> 20} MB limit (up to line {line}): a quote that is "
                "never closed, or a value that large")
    else:
        what = f"cannot be read as CSV (line {line}): {msg}"
    return InputError(f"{path}: CSV record {record} (from line {first_line}) {what}", path=path)


def _read_csv(unit: Unit, column: str, batch_rows: int) -> Iterator[Batch]:
    """CSV through the standard library's ``csv`` module, strict (RFC 4180; see the module
    docstring for the fault rules)."""
    path = unit.path
    low = path.lower()
    for c in _COMPRESSED:
        low = low.removesuffix(c)
    delim = "\t" if low.endswith(".tsv") else ","
    csv.field_size_limit(MAX_ROW_BYTES)  # the value limit (process-wide; the default is 128 KB)
    raw = _LineBounded(open_decompressed(path), path)
    bad_at_start = _BAD_UTF8[0]
    with io.TextIOWrapper(io.BufferedReader(raw, 1 << 20), encoding="utf-8-sig", errors="rmlprep.surrogateescape",
                          newline="") as text:
        reader = csv.reader(text, delimiter=delim, quotechar='"', doublequote=True, strict=True)
        counted = 0  # raw.count at the last batch
        record = 0
        first_line = 1

        def next_row() -> list[str] | None:
            nonlocal first_line
            first_line = reader.line_num + 1
            try:
                return next(reader)
            except StopIteration:
                return None
            except csv.Error as e:
                raise _csv_fault(path, e, record, first_line, reader.line_num) from None

        while (header := next_row()) == []:
            pass  # blank lines before the header
        if header is None:
            return  # an empty or blank file
        if any(_SURROGATE.search(h) for h in header):
            bad = next(h for h in header if _SURROGATE.search(h))
            raise InputError(f"{path}: the CSV header is not valid UTF-8 ({_not_utf8(bad)} in a column name)",
                             path=path)
        if column not in header:
            raise ConfigError(f"input.column: {path} has no column {column!r}; columns: "
                              f"{[n[:40] for n in header[:20]]}")
        col, width = header.index(column), len(header)
        values: list[str] = []
        rows: list[int] = []
        errors: list[tuple[int, str]] = []
        while (row := next_row()) is not None:
            if not row:
                continue  # a blank line is no record
            if len(row) != width:
                line = delim.join(row)
                snippet = line if len(line) <= 80 else line[:77] + "..."
                if _SURROGATE.search(snippet):
                    snippet = snippet.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                errors.append((record, f"CSV record has {len(row)} fields, the header has {width} ({snippet!r})"))
            else:
                v = row[col]
                if _BAD_UTF8[0] != bad_at_start and _SURROGATE.search(v):
                    errors.append((record, f"{column} is not valid UTF-8 ({_not_utf8(v)})"))
                else:
                    values.append(v)
                    rows.append(record)
            record += 1
            if len(values) + len(errors) >= batch_rows:
                out = [Batch(values, np.asarray(rows, dtype=np.int64), raw.count - counted, errors)]
                values, rows, errors, counted, row = [], [], [], raw.count, None
                yield out.pop()  # (no reference kept while the batch is worked on)
        if values or errors or raw.count > counted:
            yield Batch(values, np.asarray(rows, dtype=np.int64), raw.count - counted, errors)


def _read_hf(unit: Unit, column: str, batch_rows: int) -> Iterator[Batch]:
    r = _open_arrow(unit.path)
    try:
        table = r.read_all()  # memory-mapped: no copy of the buffers
    except (pa.ArrowException, OSError) as e:
        raise InputError(f"{unit.path}: not a readable Arrow file (truncated or damaged?): {_one_line(e)}",
                         path=unit.path) from None
    if column not in table.schema.names:
        raise ConfigError(f"input.column: {unit.path} has no column {column!r}; columns: {table.schema.names}")
    if table.num_rows < unit.stop:
        raise InputError(f"{unit.path}: holds {table.num_rows} rows, the plan expected {unit.stop}; "
                         "the file changed since the plan", path=unit.path)
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
