"""Parquet files: units of whole row groups, read a column at a time in batches."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from .. import fs
from ..errors import InputError
from .base import Batch, Unit, check_column, column_batches, one_line
from .holes import check_no_hole


def plan_parquet(path: str, unit_rows: int, column: str | None = None) -> list[dict[str, Any]]:
    """Units of whole row groups, up to ``unit_rows`` rows each (a larger group is a unit alone).

    Reads the footer only. With ``column`` (``input.column``), the file's schema must hold it
    once (:func:`~rmlprep.readers.base.check_column`), so a file of a glob that lacks it stops
    the run while it is planned, not after the other files' units did their work.

    Raises:
        InputError: a footer that cannot be read; ``column`` named twice.
        ConfigError: no ``column``.
    """
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(fs.arrow_source(path))
        md = pf.metadata
        groups = [md.row_group(g).num_rows for g in range(md.num_row_groups)]
        names = pf.schema_arrow.names if column is not None else []
    except Exception as e:  # noqa: BLE001 - pyarrow raises OSError, ArrowInvalid, ...
        raise InputError(f"{path}: not a readable Parquet file (damaged or truncated footer?): "
                         f"{one_line(e)}", path=path) from None
    if column is not None:
        check_column(path, names, column)
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


def parquet_file(path: str):
    """``pq.ParquetFile`` of ``path``, with Parquet's JSON-annotated columns read as Arrow's
    ``arrow.json`` extension type (pyarrow >= 19), which the readers decode
    (:func:`rmlprep.readers.base.column_batches`): the annotation says the strings are JSON
    texts, as a ``datasets`` ``Json`` feature written with ``to_parquet`` is.

    Pages that carry a CRC-32 (parquet-mr / Spark write them; pyarrow with
    ``write_page_checksum=True``) are verified as they are read (``page_checksum_verification``):
    a flipped byte in an uncompressed page otherwise reads as other text, silently, as pyarrow
    reads it by default. Pages without one read as before, at no cost."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(fs.arrow_source(path), arrow_extensions_enabled=True, page_checksum_verification=True)
    except TypeError:  # pyarrow < 19 has no such option: JSON columns read as strings
        return pq.ParquetFile(fs.arrow_source(path), page_checksum_verification=True)


def read_parquet(unit: Unit, column: str, batch_rows: int) -> Iterator[Batch]:
    import pyarrow.parquet as pq

    try:
        pf = parquet_file(unit.path)
        names = pf.schema_arrow.names
    except Exception as e:  # noqa: BLE001 - pyarrow raises OSError, ArrowInvalid, ...
        raise InputError(f"{unit.path}: not a readable Parquet file (damaged or truncated footer?): "
                         f"{one_line(e)}", path=unit.path) from None
    check_column(unit.path, names, column)
    groups = list(range(unit.start, unit.stop))
    if not groups:
        return
    try:
        rows = sum(pf.metadata.row_group(g).num_rows for g in groups)
        it = pf.iter_batches(batch_size=batch_rows, row_groups=groups, columns=[column])
    except Exception as e:  # noqa: BLE001
        raise InputError(f"{unit.path}: row groups [{unit.start}, {unit.stop}) cannot be read: {one_line(e)}",
                         path=unit.path) from None

    floors = _group_floors(pf, groups, column)

    def checked():
        at = 0  # rows of the unit read so far
        while True:
            try:
                rb = next(it)
            except StopIteration:
                return
            except Exception as e:  # noqa: BLE001 - corrupt pages: OSError, ArrowInvalid, ...
                raise InputError(f"{unit.path}: corrupt data in row groups [{unit.start}, {unit.stop}): "
                                 f"{one_line(e)}", path=unit.path) from None
            _check_empty_below_min(rb.column(0), at, floors, unit, column)
            at += rb.num_rows
            yield rb

    seen = 0
    for b in column_batches(checked(), column, unit.first_row, unit.path, unit.nbytes, rows):
        seen += len(b.rows) + len(b.errors)
        yield b
    if seen != rows:
        raise InputError(f"{unit.path}: row groups [{unit.start}, {unit.stop}) hold {seen} rows, the footer "
                         f"says {rows}", path=unit.path)


def _group_floors(pf, groups: list[int], column: str) -> list[tuple[int, int, int, bytes | None]]:
    """(row group, its first row in the unit, its rows, its footer minimum when that is not
    empty, else None) for each of ``groups``: the bound :func:`_check_empty_below_min` holds
    the rows to. A column that is not a top-level leaf (a list of messages) has no floor."""
    md, out, first = pf.metadata, [], 0
    leaf = next((j for j in range(md.num_columns) if md.row_group(0).column(j).path_in_schema == column), None) \
        if md.num_row_groups else None
    for g in groups:
        rg = md.row_group(g)
        floor = None
        if leaf is not None:
            st = rg.column(leaf).statistics
            if st is not None and st.has_min_max and st.physical_type == "BYTE_ARRAY" and st.min_raw:
                floor = bytes(st.min_raw)
        out.append((g, first, rg.num_rows, floor))
        first += rg.num_rows
    return out


def _check_empty_below_min(col: pa.Array, at: int, floors, unit: Unit, column: str) -> None:
    """Refuse a text read as empty from a row group whose footer says its smallest text is not.

    A hole of zeros (a crash, a copy or download that stopped) in an uncompressed page that
    carries no CRC (pyarrow and pandas write none by default) reads without an error: each zeroed
    4-byte length prefix of a PLAIN page (a data page, or the dictionary page of a
    dictionary-encoded column) is a value of length 0, and when the hole ends where a value
    starts, no text holds its zeros (:func:`rmlprep.readers.holes.check_no_hole` sees nothing).
    Worked example: 500 distinct texts "document K lorem ipsum ..." repeated to 3,000 rows, one
    row group, dictionary-encoded, uncompressed, the dictionary page zeroed from the length
    prefix of "document 10 ..." to that of "document 40 ..." (2,652 bytes): pyarrow reads 3,000
    rows, 2,940 of them empty, and the run wrote them as empty documents (exit 0). The footer's
    statistics (pyarrow and parquet-mr / Spark write them by default) hold each row group's minimum; the empty text is below any order's
    minimum, so a minimum that is not empty proves those rows are not what was written, whatever
    order a writer sorted by. A column with real empty texts has an empty minimum: not checked.

    ``at``: the unit's rows read before ``col``. ``col``: a string, binary or dictionary array.

    Raises:
        InputError: the first such row, with its row group and the footer's minimum.
    """
    import pyarrow.compute as pc

    n = len(col)
    if not n or not any(f is not None and first < at + n and at < first + rows for _, first, rows, f in floors):
        return
    if pa.types.is_dictionary(col.type):
        lens = pc.binary_length(col.dictionary)
        codes = np.flatnonzero(lens.fill_null(1).to_numpy(zero_copy_only=False) == 0)
        if not len(codes):
            return
        empty = pc.is_in(col.indices, pa.array(codes, col.indices.type)).fill_null(False)
    elif pa.types.is_string_view(col.type) or pa.types.is_binary_view(col.type):
        empty = pc.equal(pc.binary_length(col.cast(pa.large_binary())), 0).fill_null(False)
    elif pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or pa.types.is_binary(col.type) \
            or pa.types.is_large_binary(col.type):
        empty = pc.equal(pc.binary_length(col), 0).fill_null(False)
    else:
        return
    empty = empty.to_numpy(zero_copy_only=False)
    for g, first, rows, floor in floors:
        lo, hi = max(first - at, 0), min(first + rows - at, n)
        if floor is None or lo >= hi or not empty[lo:hi].any():
            continue
        i = lo + int(np.argmax(empty[lo:hi]))
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):  # a hole's zeros in a row
            check_no_hole(col.slice(0, i), np.arange(i) + unit.first_row + at, column, unit.path)  # before: named
        raise InputError(
            f"{unit.path}: row {unit.first_row + at + i}: {column!r} is empty, but the footer says the smallest "
            f"value of row group {g} is {floor[:40].decode(errors='replace')!r}: the page is damaged (a hole of "
            "zeros reads as empty texts, and Parquet pages carry no checksum unless the writer added one); fetch "
            "the file again", path=unit.path)
