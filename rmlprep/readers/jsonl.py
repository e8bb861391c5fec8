"""JSON Lines, plain or compressed: the plan (byte ranges, zstd frames) and the reader.

**JSONL.** Lines are split on ``b"\\n"`` only (binary ``readline``): real documents contain
U+2028, U+0085 and lone ``\\r`` inside JSON strings, which ``str.splitlines()`` would cut; a
``\\r\\n`` ending is JSON whitespace. A UTF-8 byte-order mark at byte 0 of the (decompressed)
file is skipped. Blank lines (JSON whitespace only: :func:`~rmlprep.readers.base.is_blank_line`)
are counted in :attr:`Batch.blank`; a line of form feeds or vertical tabs is a row fault. Row
faults: not UTF-8, not JSON,
not an object, an object holding a key twice (:mod:`rmlprep.json_rows`), no such field, a number over Python's 4300-digit limit, nesting deeper than
:data:`MAX_JSON_DEPTH` (checked before parsing, so the parser never recurses that deep), a line
over :data:`MAX_ROW_BYTES` (skipped unread). File faults: a UTF-16/32 byte-order mark; a first line
that is a JSON array or the ``{``/``[`` of a pretty-printed document (not JSON Lines); lines ended
by a lone ``\r`` (classic Mac: the whole file would be one bad row); a last line cut short (no
newline at the end and not valid JSON: the file was truncated, and its last row would otherwise
be a reject that looks like any bad row while the file is counted complete); a run of
:data:`~rmlprep.readers.holes.NUL_RUN` NUL bytes (a hole of zeros, whose lines would read as one
bad row: :func:`~rmlprep.readers.holes.hole_fault`; looked for only in a line that is not JSON,
which every line holding a NUL byte is, so good lines cost nothing).

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
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .. import fs, json_rows
from ..compressed import compression_of, open_decompressed, zstd_chunks, zstd_frames
from ..encoding_hints import not_utf8_hint, wide_encoding
from ..reject_kinds import Reason
from ..errors import InputError, RowError
from . import base
from .base import MAX_JSON_DEPTH, Batch, Unit, decoded_size_estimate, layout_hint, one_line

_BOM = b"\xef\xbb\xbf"
EMPTY_VALUES = (None, [], {}, "")  # a watched field holding one of these holds nothing


_CR_ONLY = re.compile(rb"\}[ \t]*\r[ \t\r]*\{")  # one object, a lone CR, the next object


#: JSON's names of the values json.loads returns (a reject reason says "null", not "NoneType")
_JSON_TYPES = {type(None): "null", str: "string", int: "number", float: "number", bool: "boolean", list: "array"}


def _check_jsonl_head(path: str, head: bytes) -> None:
    """File faults visible in the first bytes: a UTF-16/32 byte-order mark, a JSON document."""
    wide = wide_encoding(head)
    if wide is not None:
        raise InputError(f"{path}: the file is {wide[0]} ({wide[2]}); rmlprep reads UTF-8: convert it with "
                         f"iconv -f {wide[1]} -t UTF-8", path=path, offset=0)
    if head.startswith(_BOM):
        head = head[3:]
    stripped = head.lstrip()
    if not stripped:
        return
    cr = _CR_ONLY.search(stripped) if b"\n" not in stripped else None
    if cr:
        at = len(head) - len(stripped) + cr.start() + 1  # the first lone CR (after a BOM)
        raise InputError(f"{path}: byte {at}: lines end with a lone carriage return (\\r, classic Mac line "
                         "endings), so the file is one line; convert it, e.g. tr '\\r' '\\n' < FILE > FILE.jsonl",
                         path=path, offset=at)
    first = stripped.split(b"\n", 1)[0].strip()
    offset = len(head) - len(stripped)
    if first.startswith(b"[") or first == b"{":
        kind = "a JSON array" if first.startswith(b"[") else "a pretty-printed JSON object"
        raise InputError(
            f"{path}: byte {offset}: the file starts with {kind}, not JSON Lines (one object per line); "
            f"convert it, e.g. jq -c '.[]' FILE > FILE.jsonl (array) or jq -c . FILE > FILE.jsonl",
            path=path, offset=offset)


def _cut(path: str, line_at: int, reason: str, kind: str | None) -> InputError:
    """The file fault of a last line cut short (no newline, not a row: ``reason``)."""
    where = f"byte {line_at}" if kind is None else f"decoded byte {line_at}"
    return InputError(f"{path}: {where}: the last line is cut short (no newline at the end, and {reason}): the "
                      "file looks truncated (an interrupted download or copy?); fetch it again, or end the file "
                      "before that line to keep the rest", path=path, offset=line_at if kind is None else None)


def _cut_long(path: str, line_at: int, n: int, kind: str | None) -> InputError:
    """The file fault of a last line over :data:`~.base.MAX_ROW_BYTES` (``n`` bytes) that does not end a JSON object."""
    where = f"byte {line_at}" if kind is None else f"decoded byte {line_at}"
    return InputError(f"{path}: {where}: the last line ({n} bytes, over the {base.MAX_ROW_BYTES} byte limit) is cut "
                      "short (no newline at the end, and it does not end a JSON object): the file looks truncated "
                      "(an interrupted download or copy?); fetch it again, or end the file before that line to keep "
                      "the rest", path=path, offset=line_at if kind is None else None)


def _check_jsonl_tail(path: str, size: int, column: str | None) -> None:
    """A plain file's last line cut short, found while the run is planned by the reader's own
    rule (:func:`read_jsonl`: no newline at the end, and not a row of ``column``; over
    :data:`~.base.MAX_ROW_BYTES`, not ending in ``}``), so a rerun over a truncated file stops
    before any work and leaves the output folder as it was. Reads back from the end to the last
    line's start only (the plan hashes every byte anyway); ``column`` None: left to the reader."""
    if size == 0 or column is None:
        return
    with fs.open(path, "rb") as f:
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        end = b""  # the line's last bytes, up to the row limit + 1
        line_at = pos = size
        while pos > 0:
            step = min(pos, 1 << 20)
            pos -= step
            f.seek(pos)
            chunk = f.read(step)
            nl = chunk.rfind(b"\n")
            line_at = pos + nl + 1 if nl >= 0 else pos
            if len(end) <= base.MAX_ROW_BYTES:
                end = chunk[nl + 1:] + end
            if nl >= 0:
                break
    if line_at == 0 and end.startswith(_BOM):
        line_at, end = 3, end[3:]
    n = size - line_at
    if n > base.MAX_ROW_BYTES:
        if not end.rstrip().endswith(b"}"):
            raise _cut_long(path, line_at, n, None)
        return
    if end.isspace():
        return  # a blank or form-feed line: the reader's, as any line
    if (hole := end.find(base.NUL_RUN)) >= 0:  # zeros at the end: a preallocated download that stopped
        raise base.hole_fault(path, line_at + hole, False)
    ok, reason, _ = _parse_line(end, column)
    if not ok and not reason.startswith(json_rows.DUPLICATE_KEY):  # a key twice: whole JSON, a reject
        raise _cut(path, line_at, reason, None)


def plan_jsonl(path: str, unit_bytes: int, column: str | None = None) -> list[dict[str, Any]]:
    """The units of a JSONL file (byte ranges of a plain file, zstd frames, else the whole file).

    Args:
        unit_bytes: a unit's size in bytes (a plain file's ranges end at the newline after it).
        column: ``input.column``, for the cut-line check (None: that check is left to the reader).
    Returns:
        unit specs, in file order: ``format``, ``path``, ``nbytes`` (a compressed file's: its
        decoded bytes where known, else an estimate), and, where the file is cut into units,
        ``start``/``stop`` (byte offsets: a plain file's range, the zstd frames') and
        ``first_row`` (the 0-based line number of its first line; zstd units add ``dstart`` /
        ``dstop``, decoded offsets within the frames).
    Raises:
        InputError: a file fault visible in the first bytes (:func:`_check_jsonl_head`) or, in a
            plain file, a last line cut short (:func:`_check_jsonl_tail`, against ``column``), or
            a file that shrank while it was planned.
    """
    size = fs.getsize(path)
    kind = compression_of(path)
    if kind == "zstd":
        return _plan_zstd_jsonl(path, unit_bytes)
    if kind is not None:
        return [dict(format="jsonl", path=path, nbytes=decoded_size_estimate(path))]
    with fs.open(path, "rb") as f:
        _check_jsonl_head(path, f.read(1 << 16))
    _check_jsonl_tail(path, size, column)
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


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def _json_depth(line: bytes) -> int:
    """Deepest nesting of ``[``/``{`` in a JSON text, brackets inside strings not counted."""
    a = np.frombuffer(_JSON_STRING.sub(b'""', line), dtype=np.uint8)
    step = ((a == 0x5B) | (a == 0x7B)).astype(np.int32) - ((a == 0x5D) | (a == 0x7D)).astype(np.int32)
    return int(np.cumsum(step).max(initial=0))


def _parse_row(line: bytes, column: str) -> tuple[bool, Any]:
    """(True, value) or (False, reason) for one non-blank JSONL line."""
    ok, v, _ = _parse_line(line, column)
    return ok, v


def _parse_line(line: bytes, column: str) -> tuple[bool, Any, dict | None]:
    """(True, value, the row's object) or (False, reason, None) for one non-blank JSONL line."""
    if line.count(b"[") + line.count(b"{") > MAX_JSON_DEPTH:
        depth = _json_depth(line)
        if depth > MAX_JSON_DEPTH:
            return False, Reason(f"JSON nested {depth} levels deep (the limit is {MAX_JSON_DEPTH})", "too_deep"), None
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        hint = not_utf8_hint(line, e.start, e.reason)  # Latin-1 text: named
        return False, Reason(f"line is not valid UTF-8 ({e.reason} at byte {e.start}{hint})", "not_utf8"), None
    try:
        obj = json_rows.loads(text)
    except RowError as e:  # an object holding a key twice
        return False, Reason(str(e), "duplicate_key"), None
    except json.JSONDecodeError as e:
        if text.endswith("\n"):  # the line's own end inside a string read as "Invalid control character":
            try:                  # a cut line's error is what the text before it lacks
                json.loads(text.rstrip("\r\n"))
            except json.JSONDecodeError as e2:
                e = e2
            except (RecursionError, ValueError):
                pass
        if e.msg.startswith("Unexpected UTF-8 BOM"):  # U+FEFF before the object, not at the file's start
            return False, Reason("line is not valid JSON: it starts with a UTF-8 byte-order mark, which only a file's "
                                 "first line may (files joined with cat, each starting with one?); remove the marks, "
                                 "e.g. sed '1!s/^\\xEF\\xBB\\xBF//' FILE", "not_json"), None
        if e.msg == "Extra data" and text[e.pos:].lstrip().startswith("{"):
            return False, Reason(f"line holds two JSON objects, the second at column {e.colno} (files concatenated "
                                 "without a newline at the end of the first?)", "two_json_objects"), None
        # json's messages end in "at" when a position follows ("Invalid control character at")
        where = "column" if e.msg.endswith(" at") else "at column"
        return False, Reason(f"line is not valid JSON ({e.msg} {where} {e.colno})", "not_json"), None
    except RecursionError:
        return False, Reason("JSON nested too deep for the parser", "too_deep"), None
    except ValueError as e:  # e.g. an integer over sys.get_int_max_str_digits() digits
        return False, Reason(f"line holds a value Python cannot convert ({one_line(str(e).split(';')[0], 120)})",
                             "unconvertible_value"), None
    if not isinstance(obj, dict):
        return False, Reason(f"line is a JSON {_JSON_TYPES.get(type(obj), type(obj).__name__)}, not an object",
                             "not_an_object"), None
    if column not in obj:
        return False, Reason(f"no {column!r} field (fields: {sorted(obj)[:8]}){layout_hint(column, obj)}",
                             "missing_field"), None
    return True, obj[column], obj


def _decoded_before(unit: Unit, kind: str | None) -> int:
    """Decoded bytes of a multi-frame zstd file before ``unit``'s first frame: the reader counts
    a zstd unit's bytes from that frame, and a file fault names the decoded byte from the file's
    start (``zstdcat FILE | tail -c +N``). 0 for other files. Read only on that error path.

    Worked example: ``forty_docs()`` in zstd frames of 500 bytes, read in units of ~1000: the
    last unit starts at frame 38 (decoded byte 19000), so its line at the unit's byte 217 is at
    the file's decoded byte 19217 (``tests/test_readers.py``).
    """
    if kind != "zstd" or not unit.start:
        return 0
    return sum(len(piece) for _, piece in zstd_chunks(unit.path, 0, unit.start))


def read_jsonl(unit: Unit, column: str, batch_rows: int, watch: Sequence[str] = ()) -> Iterator[Batch]:
    """The unit's ``column`` in batches; a row whose object holds a ``watch`` field with a
    value (not null, not empty) is named in :attr:`Batch.watched`."""
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
        watched: dict[int, str] = {}
        nbytes = 0
        blank = 0
        first = at_file_start  # the next non-blank line is the file's first
        while stop < 0 or pos < stop:
            line = f.readline(base.MAX_ROW_BYTES + 1)
            if not line:
                break
            if at_file_start:
                at_file_start = False
                if line.startswith(_BOM):
                    pos += 3
                    nbytes += 3
                    line = line[3:]
                    if len(line) == base.MAX_ROW_BYTES - 2 and not line.endswith(b"\n"):
                        line += f.readline(3)  # readline stopped at the limit, 3 bytes of it the BOM's
            r = row
            row += 1
            if len(line) > base.MAX_ROW_BYTES and not line.endswith(b"\n"):
                if (hole := line.find(base.NUL_RUN)) >= 0:  # a hole larger than a row: not a long row
                    raise base.hole_fault(unit.path, pos + hole + _decoded_before(unit, kind), kind is not None)
                n = len(line)
                tail = line[-64:]
                while True:  # skip the rest of the line unread
                    more = f.readline(1 << 20)
                    n += len(more)
                    if more:
                        tail = (tail + more)[-64:]
                    if not more or more.endswith(b"\n"):
                        break
                if not tail.endswith(b"\n") and not tail.rstrip().endswith(b"}"):
                    # the file's last line, unread: a JSON object line ends with '}', so one that
                    # ends elsewhere with no newline is cut short, as a short cut line is above
                    raise _cut_long(unit.path, pos + _decoded_before(unit, kind), n, kind)
                pos += n
                nbytes += n
                errors.append((r, Reason(f"line of {n} bytes is longer than the {base.MAX_ROW_BYTES} byte limit (not read)",
                                          "line_too_long")))
            else:
                line_at = pos
                pos += len(line)
                nbytes += len(line)
                if line.isspace():  # one C scan; a row's line fails it at its first byte
                    if base.is_blank_line(line):  # JSON whitespace only: no row
                        blank += 1
                    else:  # \x0b, \x0c: a row the reader cannot parse, never a skipped line
                        errors.append((r, Reason("line holds only whitespace JSON does not allow (form feed \\x0c "
                                                 "or vertical tab \\x0b), not a JSON object", "bad_whitespace")))
                    continue
                if first:  # a JSON document (array, pretty-printed object) is a file fault
                    first = False
                    _check_jsonl_head(unit.path, line[:4096])
                ok, v, obj = _parse_line(line, column)
                if watch and ok:
                    for k in watch:
                        if obj.get(k) not in EMPTY_VALUES and k != column:
                            watched[r] = k
                            break
                obj = None
                if not ok and (hole := line.find(base.NUL_RUN)) >= 0:  # never JSON: the error path only
                    raise base.hole_fault(unit.path, line_at + hole + _decoded_before(unit, kind), kind is not None)
                if not ok and not line.endswith(b"\n") and not v.startswith(json_rows.DUPLICATE_KEY):
                    # only the file's last line lacks a newline
                    raise _cut(unit.path, line_at + _decoded_before(unit, kind), v, kind)
                if ok:
                    values.append(v)
                    rows.append(r)
                else:
                    errors.append((r, v))
            if len(values) + len(errors) >= batch_rows:
                out = [Batch(values, np.asarray(rows, dtype=np.int64), nbytes, errors, blank, watched)]
                values, rows, errors, watched, nbytes, blank, line = [], [], [], {}, 0, 0, b""
                yield out.pop()  # the suspended frame keeps no reference to the batch or its last line
        if values or errors or blank or nbytes:
            out = [Batch(values, np.asarray(rows, dtype=np.int64), nbytes, errors, blank, watched)]
            values = []
            yield out.pop()
