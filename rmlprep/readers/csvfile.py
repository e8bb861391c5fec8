"""CSV and TSV, plain or compressed, read strictly.

**CSV** is read with the standard library's ``csv`` module in strict mode (RFC 4180: a field
is quoted only from its first character, ``""`` is a quote inside a quoted value, and a closing
quote must be followed by the delimiter, a line break or the end of the file), from a UTF-8
text stream (a byte-order mark at byte 0 skipped). A record whose field count differs from the
header's, or whose value is not UTF-8, is a row fault (reject), and so is a record whose
every field is the header's column name (the header again: CSV files concatenated with their
headers, ``cat a.csv b.csv``, whose second header ``datasets`` reads as a row, ``text`` becoming a
document; kind ``csv_repeated_header``; a byte-order mark before it is no text). A quote that is never closed,
or a stray quote closed by a later one (``"good"`` / ``"unterminated`` / ``"good again"``: a
lenient parser, like ``pyarrow.csv``, reads lines 2-3 as one value), is a file fault naming the
record and its first line: once quoting is broken, where the record ends cannot be known, so
no later record can be trusted. A physical line or a value over :data:`MAX_ROW_BYTES` is a file
fault too (found as the bytes are decoded, so no line is ever held whole past the limit), and so
are :data:`~.holes.NUL_RUN` NUL bytes in a row (a hole of zeros that would merge the records it
overwrote into one, with the zeros as text: :func:`~.holes.hole_fault`; looked for in the same
pass over the bytes, also across two reads), and so
is a last record with fewer fields than the header and no line break at the end: the file was
cut short (a cut in the last field reads as a complete record; the plan warns of a plain file
that does not end with a line break).
An empty value (``a,,b`` or ``a,"",b``) is a null, as ``datasets`` (pandas) reads a CSV
file (``None`` for both): the pipeline rejects it as it rejects a JSONL null (kind ``null``),
where it was an empty document, eos only. Only an empty value: ``NA``, ``null``, ``None``,
``nan`` (which pandas' default ``na_values`` make None in ``datasets``) are kept as the text they
are, since a document or answer reading ``None`` or ``NA`` is text (decided 2026-12-03). ``.tsv`` uses a tab delimiter; quoting is the same. Speed, CPU time on a 50 MB CSV of long
texts: ~140 MB/s (``csv`` alone ~175 MB/s; ``pyarrow.csv``, which is not strict, ~800 MB/s;
tokenizing runs at ~10-20 MB/s per core), measured by ``bench/bench_readers.py --csv``.
"""

from __future__ import annotations

import codecs
import csv
import io
import re
from collections.abc import Iterator

import numpy as np

from ..compressed import COMPRESSED_SUFFIXES, compression_of, open_decompressed
from ..encoding_hints import not_utf8_hint
from ..errors import InputError
from ..reject_kinds import Reason
from . import base
from .base import Batch, Unit

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
        self.cut = False  # the stream ended, and not with a line break
        self._tail = b""  # the last bytes of the previous chunk: a NUL run across two chunks
        self.compressed = compression_of(path) is not None  # a fault then names a decoded byte

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self.inner.readinto(b)
        if not n:  # the end, asked for only once the text before it is used up
            self.cut = self.count > 0 and self._since_break > 0
        if n:
            chunk = bytes(memoryview(b)[:n])
            at = chunk.find(base.NUL_RUN)
            if at >= 0:
                at += self.count
            elif (seam := (self._tail + chunk[:len(base.NUL_RUN)]).find(base.NUL_RUN)) >= 0:
                at = self.count - len(self._tail) + seam  # a run across the two chunks
            if at >= 0:  # a hole of zeros, whose records would merge silently (base.hole_fault)
                raise base.hole_fault(self.path, at, self.compressed)
            self._tail = (chunk if n >= len(base.NUL_RUN) else self._tail + chunk)[1 - len(base.NUL_RUN):]
            last = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
            self._since_break = n - 1 - last if last >= 0 else self._since_break + n
            self.count += n
            if self._since_break > base.MAX_ROW_BYTES:
                at = self.count - self._since_break
                raise InputError(f"{self.path}: byte {at}: more than {base.MAX_ROW_BYTES >> 20} MB without a line break: "
                                 "not a CSV file, or a line over the CSV line limit", path=self.path, offset=at)
        return n

    def close(self) -> None:
        self.inner.close()
        super().close()


def _not_utf8(value: str) -> str:
    """Why a value decoded with surrogateescape is not UTF-8, as the strict decoder says it."""
    data = value.encode("utf-8", "surrogateescape")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"{e.reason} at byte {e.start}{not_utf8_hint(data, e.start, e.reason)}"
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
        what = (f"holds a value over the {base.MAX_ROW_BYTES >> 20} MB limit (up to line {line}): a quote that is "
                "never closed, or a value that large")
    else:
        what = f"cannot be read as CSV (line {line}): {msg}"
    return InputError(f"{path}: CSV record {record} (from line {first_line}) {what}", path=path)


def _delimiter(path: str) -> str:
    low = path.lower()
    for c in COMPRESSED_SUFFIXES:
        low = low.removesuffix(c)
    return "\t" if low.endswith(".tsv") else ","


def csv_header(path: str) -> list[str]:
    """The column names of a CSV/TSV file (its first non-blank record); [] for an empty file.

    Raises:
        csv.Error, InputError, UnicodeDecodeError: read as :func:`read_csv` would find them.
    """
    csv.field_size_limit(base.MAX_ROW_BYTES)
    with io.TextIOWrapper(io.BufferedReader(_LineBounded(open_decompressed(path), path), 1 << 20),
                          encoding="utf-8-sig", newline="") as text:
        for row in csv.reader(text, delimiter=_delimiter(path), quotechar='"', doublequote=True, strict=True):
            if row:
                return row
    return []


def read_csv(unit: Unit, column: str, batch_rows: int) -> Iterator[Batch]:
    """CSV through the standard library's ``csv`` module, strict (RFC 4180; see the module
    docstring for the fault rules)."""
    path = unit.path
    delim = _delimiter(path)
    csv.field_size_limit(base.MAX_ROW_BYTES)  # the value limit (process-wide; the default is 128 KB)
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
        base.check_column(path, header, column)
        col, width = header.index(column), len(header)
        heads = (column, "\ufeff" + column)  # the text field of a repeated header (a mark before the first)
        # a text field that may be a reordered header's: any name, the first with its file's mark
        in_head = set(header) | {"\ufeff" + h for h in header}
        sorted_head = sorted(header)
        names = delim.join(header)
        names = names if len(names) <= 80 else names[:77] + "..."
        values: list[str] = []
        rows: list[int] = []
        errors: list[tuple[int, str]] = []
        ahead: list[str] | None = None  # a record read ahead (below)
        while (row := next_row() if ahead is None else ahead) is not None:
            ahead = None
            if not row:
                continue  # a blank line is no record
            if len(row) < width and raw.cut:  # the stream ended without a line break: is this the last record?
                at = first_line
                if (ahead := next_row()) is None:  # it is: cut short, the file was truncated
                    raise InputError(f"{path}: CSV record {record} (from line {at}), the last, has {len(row)} of "
                                     f"the header's {width} fields and no line break at the end: the file looks "
                                     "truncated (an interrupted download or copy?); fetch it again, or end the file "
                                     "before that line to keep the rest", path=path)
            if len(row) != width:
                line = delim.join(row)
                snippet = line if len(line) <= 80 else line[:77] + "..."
                if _SURROGATE.search(snippet):
                    snippet = snippet.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                errors.append((record, Reason(f"CSV record has {len(row)} fields, the header has {width} ({snippet!r})",
                                               "csv_field_count")))
            else:
                v = row[col]
                if _BAD_UTF8[0] != bad_at_start and _SURROGATE.search(v):
                    errors.append((record, Reason(f"{column} is not valid UTF-8 ({_not_utf8(v)})", "not_utf8")))
                elif v in heads and row[1:] == header[1:] and row[0].removeprefix("\ufeff") == header[0]:
                    # the header again (CSV files concatenated, each with its header; the second's
                    # UTF-8 byte-order mark, if any, stays in its first name): no document
                    errors.append((record, Reason(f"CSV record repeats the header's column names ({names!r}): "
                                                  "files concatenated with their headers?", "csv_repeated_header")))
                elif (v in in_head and width > 1
                      and sorted(named := [row[0].removeprefix("\ufeff"), *row[1:]]) == sorted_head):
                    # the header in another column order: a file with other columns was concatenated
                    # here, and every record after this one would be read into the wrong columns
                    raise InputError(f"{path}: CSV record {record} (line {first_line}) holds the header's column "
                                     f"names in another order ({delim.join(named)!r} under the header {names!r}): CSV "
                                     "files with different column orders concatenated? Every record after it would be "
                                     "read into the wrong columns; split the file before that line and give the parts "
                                     "as separate inputs", path=path)
                else:
                    values.append(v if v else None)  # an empty field is a null, as datasets reads it
                    rows.append(record)
            record += 1
            if len(values) + len(errors) >= batch_rows:
                out = [Batch(values, np.asarray(rows, dtype=np.int64), raw.count - counted, errors)]
                values, rows, errors, counted, row = [], [], [], raw.count, None
                yield out.pop()  # (no reference kept while the batch is worked on)
        if values or errors or raw.count > counted:
            yield Batch(values, np.asarray(rows, dtype=np.int64), raw.count - counted, errors)
