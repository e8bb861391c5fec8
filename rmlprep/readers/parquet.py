"""Parquet files: units of whole row groups, read a column at a time in batches."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .. import fs
from ..errors import InputError
from .base import Batch, Unit, check_column, column_batches, one_line
from .parquet_checks import check_dictionary_use, check_empty_below_min, group_floors


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

    floors = group_floors(pf, groups, column)
    check_dictionary_use(unit, groups, column, batch_rows, pf.schema_arrow.field(column).type)

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
            check_empty_below_min(rb.column(0), at, floors, unit, column)
            at += rb.num_rows
            yield rb

    seen = 0
    for b in column_batches(checked(), column, unit.first_row, unit.path, unit.nbytes, rows):
        seen += len(b.rows) + len(b.errors)
        yield b
    if seen != rows:
        raise InputError(f"{unit.path}: row groups [{unit.start}, {unit.stop}) hold {seen} rows, the footer "
                         f"says {rows}", path=unit.path)
