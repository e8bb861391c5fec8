"""What every reader shares: the :class:`Unit` and :class:`Batch` types, the row limits, the
first-bytes check of the plan (:func:`sniff`), the batches of an Arrow column, and how Arrow
values become Python values (:func:`arrow_values`: a struct's null fields are absent)."""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from .. import fs, json_rows
from ..compressed import compression_of, zstd_frames
from ..encoding_hints import layout_hint  # noqa: F401 (re-exported: jsonl's missing-field reason)
from ..errors import ConfigError, InputError, RowError
from ..reject_kinds import Reason
from .sniff import LFS_POINTER, sniff  # noqa: F401 (re-exported: the plan's first-bytes check)
# NUL_RUN and hole_fault re-exported: the JSONL and CSV readers use them as base.*
from .holes import NUL_RUN, check_no_hole, check_no_hole_in_values, hole_fault  # noqa: F401

#: A JSONL line or CSV record longer than this is a row fault (JSONL: skipped unread) or, for CSV,
#: a file fault: no single row may make a reader hold more than this in memory.
MAX_ROW_BYTES = 64 << 20


#: JSON nesting deeper than this (arrays and objects) is a row fault, found before parsing.
MAX_JSON_DEPTH = 100

_NOT_JSON_WHITESPACE = re.compile(rb"[^ \t\r\n]")


def is_blank_line(line: bytes) -> bool:
    """Whether a JSONL line is blank: JSON whitespace only (space, tab, CR, LF; RFC 8259 §2), so
    no row. A line of form feeds or vertical tabs (which ``bytes.isspace`` and ``strip`` take
    for whitespace) is a row, and a bad one. The line is scanned, not copied."""
    return _NOT_JSON_WHITESPACE.search(line) is None


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
            units, an estimate for gzip (:func:`decoded_size_estimate`), else file bytes.
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

    @staticmethod
    def described_path(text: str) -> str:
        """The path of a unit's :meth:`describe` text: its part's words (``bytes [0, 10)``,
        ``row groups [2, 4)``, ...) taken off; a ``stdlib[...]`` text comes back as it is.
        Read from manifest ``source`` strings (the resume line's new-file test)."""
        return _PART.sub("", text)


#: the suffix :meth:`Unit.describe` gives a unit of part of a file
_PART = re.compile(r" (?:zstd frames at bytes|bytes|row groups|rows) \[\d+, (?:\d+|end)\)$")


@dataclass(slots=True)
class Batch:
    """At most ``batch_rows`` rows of one unit.

    Attributes:
        values: the column's values: a ``pa.Array`` (string columns) or a Python list (from
            Arrow: :func:`arrow_values`, a struct's null fields left out).
        rows: int64 [len(values)], source row number of each value.
        nbytes: input bytes these rows took (JSON line lengths, or Arrow buffer sizes).
        errors: ``(row, reason)`` for rows that could not even be read (bad JSON, bad UTF-8,
            missing field, wrong number of CSV fields); they are not in ``values``.
        blank: blank lines skipped (jsonl).
        watched: jsonl read with ``watch`` fields: source row -> the watched field the row holds
            (with a value that is not null or empty); the row is in ``values`` as usual.
    """

    values: Any
    rows: np.ndarray
    nbytes: int
    errors: list[tuple[int, str]] = field(default_factory=list)
    blank: int = 0
    watched: dict[int, str] = field(default_factory=dict)


def check_column(path: str, names: list[str], column: str) -> None:
    """Refuse a file whose columns (a Parquet or Arrow schema's names, a CSV header) lack
    ``column`` or name it more than once: which of two it means is not knowable (pyarrow and
    DuckDB write such tables; pandas, and so ``datasets``' CSV builder, would take the first).

    Called on every such file while the run is planned (their schema is read there anyway) and
    again by its reader.

    Raises:
        ConfigError: no such column (the message lists the first 20 columns).
        InputError: ``column`` names more than one column.
    """
    if column not in names:
        more = f" and {len(names) - 20} more" if len(names) > 20 else ""
        raise ConfigError(f"input.column: {path} has no column {column!r}; columns: "
                          f"{[n[:40] for n in names[:20]]}{more}{layout_hint(column, names)}")
    if names.count(column) > 1:
        raise InputError(f"{path}: {names.count(column)} columns are named {column!r}; rename all but one "
                         "(which one input.column means is not knowable)", path=path)


def one_line(e: BaseException | str, limit: int = 300) -> str:
    s = " ".join(str(e).split()) or type(e).__name__
    return s if len(s) <= limit else s[: limit - 3] + "..."


#: compressed bytes of a .gz file inflated at plan time to judge its ISIZE trailer (~0.7 ms of CPU)
_GZIP_SAMPLE = 1 << 16


def _inflate_head(head: bytes, whole: bool) -> tuple[int, int, bool] | None:
    """Inflate the first bytes of a gzip file, member after member (pigz, bgzip and ``cat a.gz
    b.gz`` write several).

    Returns:
        (decoded bytes, compressed bytes they came from, whether that is the whole file's
        content: ``whole`` (``head`` is the file) and its members end cleanly, or are followed
        by bytes that start no member); None when the bytes are not gzip.
    """
    d = zlib.decompressobj(31)
    produced = fed = 0
    pos = 0
    try:
        while pos < len(head):
            chunk = head[pos:pos + 4096]  # deflate expands at most 1032:1: ~4 MB at a time
            pos += len(chunk)
            fed += len(chunk)
            produced += len(d.decompress(chunk))
            if d.eof:
                rest = d.unused_data + head[pos:]
                fed -= len(d.unused_data)
                if not rest.startswith(b"\x1f\x8b"):  # the end, or bytes after the last member
                    return produced, fed, whole
                d, head, pos = zlib.decompressobj(31), rest, 0
    except zlib.error:
        return None
    return produced, fed, False


def _gzip_size_estimate(path: str, size: int) -> int:
    """A .gz file's decoded size, estimated cheaply: its ISIZE trailer when the first
    :data:`_GZIP_SAMPLE` bytes bear it out, else the sample's ratio over the whole file.

    ISIZE (the last 4 bytes, RFC 1952) is the *last member's* size mod 2**32, and a file with
    bytes after its last member (a download's padding, garbage appended) ends in something else
    entirely: a 2 MB file once read as 555.8 MB. So the first bytes are inflated
    (:func:`_inflate_head`): a file that fits in them is measured exactly; else ISIZE (taken
    with the multiple of 2**32 nearest the sample's ratio, for files over 4 GiB decoded) is kept
    only within a factor of 2 of ``size`` x the sample's ratio, which is used otherwise (a
    bgzip file's empty last member says 0). A file whose first bytes do not inflate is damaged:
    its size is returned, and the reader reports the damage.
    """
    with fs.open(path, "rb") as f:
        head = f.read(_GZIP_SAMPLE)
        f.seek(-4, os.SEEK_END)
        isize = int.from_bytes(f.read(4), "little")
    got = _inflate_head(head, len(head) >= size)
    if got is None or not got[1]:
        return size
    produced, fed, whole = got
    if whole:
        return produced
    ratio_estimate = produced * size // fed
    claim = isize + (max(0, round((ratio_estimate - isize) / 2**32)) << 32)
    return claim if ratio_estimate / 2 <= claim <= min(ratio_estimate * 2, 1032 * size) else ratio_estimate


def decoded_size_estimate(path: str) -> int:
    """Bytes after decompression, for progress and the plan line only (never sizes an
    allocation): gzip, see :func:`_gzip_size_estimate`; zstd, the frames' content sizes when
    every frame declares one; else the file's size."""
    size = fs.getsize(path)
    kind = compression_of(path)
    if kind == "gzip" and size >= 18:
        return _gzip_size_estimate(path, size)
    if kind == "zstd":
        try:
            with fs.open(path, "rb") as f:
                sizes = [fr.content_size for fr in zstd_frames(f, path) if not fr.skippable]
            if sizes and None not in sizes:
                return sum(sizes)
        except InputError:
            pass  # reported when the unit is read
    return size


def _json_decoder(t: pa.DataType) -> Callable[[Any], Any] | None:
    """A function turning a Python value of Arrow type ``t`` into the value it stands for, where
    ``t`` holds JSON text anywhere inside: the canonical extension type ``arrow.json``, which
    ``datasets`` >= 5 writes for its ``Json`` feature (a column whose rows mix shapes, e.g.
    message content as a string in one row and a list of parts in another) and which a Parquet
    column annotated JSON reads as. ``to_pylist`` gives such a value's storage, its JSON text;
    ``datasets`` decodes it with ``json.loads`` before a map function sees it, and so does this
    (refusing an object with a key twice, which json.loads would keep the last of).
    None when ``t`` holds no JSON text.

    The function raises ValueError on a value that is not valid JSON, RowError (a ValueError) on
    one holding an object with a key twice (:func:`rmlprep.json_rows.loads`).
    """
    if isinstance(t, pa.BaseExtensionType):
        if t.extension_name == "arrow.json":
            return lambda v: None if v is None else json_rows.loads(v)
        return _json_decoder(t.storage_type)
    if pa.types.is_struct(t):
        subs = {t.field(i).name: _json_decoder(t.field(i).type) for i in range(t.num_fields)}
        subs = {k: f for k, f in subs.items() if f is not None}
        if not subs:
            return None
        return lambda v: None if v is None else {k: (subs[k](x) if k in subs else x) for k, x in v.items()}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) \
            or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        sub = _json_decoder(t.value_type)
        if sub is None:
            return None
        return lambda v: None if v is None else [sub(x) for x in v]
    if pa.types.is_map(t):
        ks, vs = _json_decoder(t.key_type), _json_decoder(t.item_type)
        if ks is None and vs is None:
            return None
        ks = ks or (lambda x: x)
        vs = vs or (lambda x: x)
        return lambda v: None if v is None else (
            {ks(a): vs(b) for a, b in v.items()} if isinstance(v, dict) else [(ks(a), vs(b)) for a, b in v])
    return None


def _decoded(values: list, decode, rows: np.ndarray, column: str) -> tuple[list, list[int], list[tuple[int, str]]]:
    """``values`` decoded by ``decode`` (:func:`_json_decoder`): (values, kept positions, rejects)."""
    out, keep, errors = [], [], []
    for i, v in enumerate(values):
        try:
            out.append(decode(v))
            keep.append(i)
        except RowError as e:  # a key twice
            errors.append((int(rows[i]), Reason(f"{column} holds JSON text (Arrow's arrow.json type) in which {e}",
                                                "duplicate_key")))
        except (ValueError, TypeError) as e:
            errors.append((int(rows[i]), Reason(f"{column} holds JSON text (Arrow's arrow.json type) that is not "
                                                f"valid JSON ({one_line(e)})", "bad_json_text")))
    return out, keep, errors


def _has_struct(t: pa.DataType) -> bool:
    """Whether type ``t`` holds a struct anywhere (through lists, maps and extension storage)."""
    if isinstance(t, pa.BaseExtensionType):
        return _has_struct(t.storage_type)
    if pa.types.is_struct(t):
        return True
    if pa.types.is_map(t):
        return _has_struct(t.key_type) or _has_struct(t.item_type)
    return hasattr(t, "value_type") and _has_struct(t.value_type)


def _struct_cleaner(t: pa.DataType):
    """A function that drops the null fields of every struct in a value of type ``t`` (None: ``t``
    holds no struct, nothing to do). It returns the value itself when nothing is dropped (most
    rows of a column without padding), else new containers: the input is never changed.

    An Arrow extension type (a registered ``pa.ExtensionType``: ``datasets``' own, one a user
    registers) reads in Python as its storage does unless it brings its own scalar or array
    class, so it is cleaned as its storage: the same rows give the same values from JSONL, from
    Parquet with the type registered, and from Parquet without (then Arrow reads the storage
    type itself). ``arrow.json`` holds JSON text, whose nulls are real: nothing to clean.

    Raises:
        InputError: an extension type with its own Python scalar or array class (``as_py`` /
            ``to_pylist`` may give anything) whose storage holds a struct: its padding could not
            be told from its values, so it is refused rather than read otherwise than JSONL.
    """
    if isinstance(t, pa.BaseExtensionType):
        if t.extension_name == "arrow.json" or not _has_struct(t.storage_type):
            return None if t.extension_name == "arrow.json" else _struct_cleaner(t.storage_type)
        scalar = getattr(t, "__arrow_ext_scalar_class__", lambda: pa.ExtensionScalar)()
        array = getattr(t, "__arrow_ext_class__", lambda: pa.ExtensionArray)()
        if scalar is not pa.ExtensionScalar or array is not pa.ExtensionArray:
            own = (scalar if scalar is not pa.ExtensionScalar else array).__name__
            raise InputError(f"Arrow extension type {t.extension_name!r} has a struct in its storage and reads in "
                             f"Python through its own class ({own}), so rmlprep cannot tell Arrow's struct padding "
                             "from its values; cast the column to its storage type (or store it as JSON text) first")
        return _struct_cleaner(t.storage_type)
    if pa.types.is_struct(t):
        subs = [(t.field(i).name, _struct_cleaner(t.field(i).type)) for i in range(t.num_fields)]
        subs = [(k, f) for k, f in subs if f is not None]

        def clean(v):
            if not isinstance(v, dict):
                return v
            out = v
            for k, f in subs:
                x = v.get(k)
                if x is not None and (y := f(x)) is not x:
                    if out is v:
                        out = dict(v)
                    out[k] = y
            return {k: x for k, x in out.items() if x is not None} if None in out.values() else out
        return clean
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or \
            getattr(pa.types, "is_list_view", lambda _: False)(t) or \
            getattr(pa.types, "is_large_list_view", lambda _: False)(t):
        sub = _struct_cleaner(t.value_type)
        if sub is None:
            return None

        def clean_list(v):
            if not isinstance(v, list):
                return v
            ys = [sub(x) for x in v]
            return v if all(y is x for y, x in zip(ys, v)) else ys
        return clean_list
    if pa.types.is_map(t):
        sub = _struct_cleaner(t.item_type)

        def to_dict(v):
            if not isinstance(v, list) or not all(isinstance(p, tuple) and len(p) == 2 for p in v):
                return v  # not pairs as to_pylist gives them (an extension type's own Python class)
            pairs = [(k, sub(x) if sub is not None and x is not None else x) for k, x in v]
            try:
                d = dict(pairs)
            except TypeError:  # an unhashable key (a struct or list key): no dict can hold it
                return MapPairs(pairs, "an Arrow map whose keys are not strings or numbers")
            if len(d) == len(pairs):
                return d
            seen: set = set()
            dup = next(k for k, _ in pairs if k in seen or seen.add(k))
            return MapPairs(pairs, f"an Arrow map with the key {dup!r} twice")
        return to_dict
    return None


class MapPairs(list):
    """An Arrow map value that is no dict (a key twice, or a key a dict cannot hold): its
    ``(key, value)`` pairs as Arrow gives them, with ``arrow_map_note`` saying why, which the
    messages schema check names instead of "got list"."""

    def __init__(self, pairs, note: str):
        super().__init__(pairs)
        self.arrow_map_note = note


def drop_struct_nulls(values: list, type: pa.DataType) -> list:
    """``values`` (Python values of an Arrow column of ``type``, e.g. its ``to_pylist()``) with
    the null fields of every Arrow struct left out, at any depth; values that were not structs
    (strings holding JSON, lists of scalars, mappings of a ``string`` column decoded by
    ``datasets``' ``Json`` feature) are returned as they are, nulls and all.

    Why: Arrow gives a column one struct type, the union of every row's keys, so a key a row
    does not have reads as null (``{"city": "Paris", "query": None}`` for a call that only has
    ``city``, when another row's call has ``query``). A null in a struct cannot be told apart
    from such padding: it reads as absent. JSON keeps its nulls (``"default": null`` in a tool's
    schema), so store tools or arguments as JSON strings to keep them.

    An Arrow map (Spark and Delta write Python dicts as ``map<string, string>``) becomes the dict
    it is: ``to_pylist`` gives its ``(key, value)`` pairs, which the messages schema would refuse
    as "got list"; its keys are the row's own, so its null values are real and kept. A map with
    a key twice (or a key no dict holds) stays its pairs, as a :class:`MapPairs` naming that.

    Example: ``drop_struct_nulls([{"a": 1, "b": None}], pa.struct([("a", pa.int64()),
    ("b", pa.int64())]))`` is ``[{"a": 1}]``; with type ``pa.string()`` the values are returned
    unchanged; ``drop_struct_nulls([[("role", "user"), ("content", None)]], pa.map_(pa.string(),
    pa.string()))`` is ``[{"role": "user", "content": None}]``.
    """
    clean = _struct_cleaner(type)
    return values if clean is None else [clean(v) for v in values]


def arrow_values(col: pa.Array | pa.ChunkedArray) -> list:
    """An Arrow column's values as Python values, null struct fields left out
    (:func:`drop_struct_nulls`)."""
    return drop_struct_nulls(col.to_pylist(), col.type)


def column_batches(batches: Iterator[pa.RecordBatch], column: str, first_row: int, where: str,
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
        decode = _json_decoder(col.type)
        try:
            _struct_cleaner(col.type)  # an extension type it cannot clean is refused before any row
        except InputError as e:
            raise InputError(f"{where}: column {column!r}: {e}", path=where) from None
        try:
            col.validate(full=True)
        except pa.ArrowInvalid as e:
            if "utf8" not in str(e).lower() and "utf-8" not in str(e).lower():
                raise InputError(f"{where}: corrupt Arrow data in rows [{rows[0]}, {rows[-1] + 1}): "
                                 f"{one_line(e)}", path=where) from None
            values, keep, errors = [], [], []
            for i in range(n):
                try:
                    values.append(arrow_values(col.slice(i, 1))[0])
                    keep.append(i)
                except UnicodeDecodeError as u:
                    errors.append((int(rows[i]), Reason(f"{column} is not valid UTF-8 ({u.reason} at byte {u.start})",
                                                        "not_utf8")))
            kept = rows[keep]
            # a hole's edges cut characters (not UTF-8: those rows are rejects), its zeros are valid
            check_no_hole_in_values(values, kept, column, where)
            if decode is not None:
                values, keep2, more = _decoded(values, decode, kept, column)
                kept, errors = kept[keep2], sorted(errors + more)
            yield Batch(pa.array(values, type=col.type) if is_str else values, kept, nbytes, errors)
            continue
        if is_str:
            check_no_hole(col, rows, column, where)
            yield Batch(col, rows, nbytes)
        elif decode is not None:  # struct padding first: a JSON text's own nulls are kept
            values, keep, errors = _decoded(arrow_values(col), decode, rows, column)
            yield Batch(values, rows[keep], nbytes, errors)
        else:
            values = arrow_values(col)  # text not in one buffer (dictionary, string_view) or nested
            check_no_hole_in_values(values, rows, column, where, col)
            yield Batch(values, rows, nbytes)
