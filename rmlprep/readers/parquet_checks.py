"""Checks of a Parquet file's rows against what its footer and its writer promise: a hole of zeros
in a page without a CRC (pyarrow and pandas write none by default) reads without an error, as empty
texts (:func:`check_empty_below_min`) or as a dictionary's first entry (:func:`check_dictionary_use`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from .. import fs
from ..errors import InputError
from .base import Unit
from .holes import check_no_hole

__all__ = ["group_floors", "check_empty_below_min", "check_dictionary_use", "DICTIONARY_FROM_ROWS"]

#: ``created_by`` prefixes of the writers whose dictionary pages hold only entries the rows of
#: their column chunk use: Arrow C++ (``parquet-cpp-arrow``: pyarrow, pandas, ``datasets``; an
#: Arrow dictionary written as one is told by the column's Arrow type) and parquet-mr (Spark,
#: Hive: the page holds the entries of the dictionary-encoded pages, ``lastUsedDictionarySize``).
DICTIONARY_FROM_ROWS = ("parquet-cpp", "parquet-mr")


def group_floors(pf, groups: list[int], column: str) -> list[tuple[int, int, int, Any]]:
    """(row group, its first row in the unit, its rows, floor) for each of ``groups``: the bounds
    :func:`check_empty_below_min` holds the rows to. For a top-level text column the floor is
    the footer's minimum when that is not empty, else None; for a nested column (a list of
    messages) it is (its leaves' count, {leaf position: (leaf path, minimum)}) for its text
    leaves whose minimum is not empty (the roles', the contents')."""
    md, out, first = pf.metadata, [], 0
    paths = [md.row_group(0).column(j).path_in_schema for j in range(md.num_columns)] if md.num_row_groups else []
    nested = [j for j, p in enumerate(paths) if p.startswith(column + ".")]
    for g in groups:
        rg = md.row_group(g)
        if column in paths:
            floor = _minimum(rg.column(paths.index(column)))
        else:
            leaf = {k: (paths[j], m) for k, j in enumerate(nested) if (m := _minimum(rg.column(j))) is not None}
            floor = (len(nested), leaf) if leaf else None
        out.append((g, first, rg.num_rows, floor))
        first += rg.num_rows
    return out


def _minimum(chunk) -> bytes | None:
    """A BYTE_ARRAY column chunk's footer minimum when the footer holds one and it is not empty."""
    st = chunk.statistics
    if st is not None and st.has_min_max and st.physical_type == "BYTE_ARRAY" and st.min_raw:
        return bytes(st.min_raw)
    return None


def _empty_mask(col: pa.Array) -> np.ndarray | None:
    """bool per value of ``col``: an empty text (nulls are not); None for a type without texts."""
    import pyarrow.compute as pc

    if pa.types.is_dictionary(col.type):
        lens = pc.binary_length(col.dictionary)
        codes = np.flatnonzero(lens.fill_null(1).to_numpy(zero_copy_only=False) == 0)
        empty = pc.is_in(col.indices, pa.array(codes, col.indices.type)).fill_null(False) if len(codes) else None
        return np.zeros(len(col), dtype=bool) if empty is None else empty.to_numpy(zero_copy_only=False)
    if pa.types.is_string_view(col.type) or pa.types.is_binary_view(col.type):
        col = col.cast(pa.large_binary())
    elif not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or pa.types.is_binary(col.type)
              or pa.types.is_large_binary(col.type)):
        return None
    return pc.equal(pc.binary_length(col), 0).fill_null(False).to_numpy(zero_copy_only=False)


def _leaf_arrays(col: pa.Array) -> list[pa.Array]:
    """The leaf arrays of ``col`` within its rows, depth first, in the order of the Parquet
    schema's leaves under it (struct fields in order; a map's keys, then its values)."""
    t = col.type
    if pa.types.is_struct(t):  # StructArray.field: the child within the struct's offset and length
        return [leaf for i in range(t.num_fields) for leaf in _leaf_arrays(col.field(i))]
    if pa.types.is_map(t):  # MapArray.keys and .items: the whole child, indexed by the offsets
        lo, hi = (int(col.offsets[0].as_py()), int(col.offsets[-1].as_py())) if len(col) else (0, 0)
        return _leaf_arrays(col.keys.slice(lo, hi - lo)) + _leaf_arrays(col.items.slice(lo, hi - lo))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaf_arrays(col.flatten())
    return [col]


def check_empty_below_min(col: pa.Array, at: int, floors, unit: Unit, column: str) -> None:
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
    statistics (pyarrow and parquet-mr / Spark write them by default) hold each row group's
    minimum; the empty text is below any order's minimum, so a minimum that is not empty proves
    those rows are not what was written, whatever order a writer sorted by. A column with real
    empty texts has an empty minimum: not checked. A nested column's text leaves (a message's
    role and content) are held to their own minimums alike.

    ``at``: the unit's rows read before ``col``. ``col``: a string, binary, dictionary or nested
    array.

    Raises:
        InputError: the first such row, with its row group and the footer's minimum.
    """
    n = len(col)
    if not n or not any(f is not None and first < at + n and at < first + rows for _, first, rows, f in floors):
        return
    if pa.types.is_nested(col.type):
        _check_nested(col, at, floors, unit, column)
        return
    empty = _empty_mask(col)
    if empty is None:
        return
    for g, first, rows, floor in floors:
        lo, hi = max(first - at, 0), min(first + rows - at, n)
        if floor is None or lo >= hi or not empty[lo:hi].any():
            continue
        i = lo + int(np.argmax(empty[lo:hi]))
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):  # a hole's zeros in a row
            check_no_hole(col.slice(0, i), np.arange(i) + unit.first_row + at, column, unit.path)  # before: named
        raise _below(unit, unit.first_row + at + i, column, "", g, floor)


def _check_nested(col: pa.Array, at: int, floors, unit: Unit, column: str) -> None:
    """:func:`check_empty_below_min` for a nested column: each text leaf against its minimum."""
    n = len(col)
    for g, first, rows, floor in floors:
        lo, hi = max(first - at, 0), min(first + rows - at, n)
        if floor is None or lo >= hi:
            continue
        count, leaves = floor
        arrays = _leaf_arrays(col.slice(lo, hi - lo))
        if len(arrays) != count:
            return  # the Arrow and Parquet leaves do not pair up: no judgement
        for k, (path, minimum) in leaves.items():
            empty = _empty_mask(arrays[k])
            if empty is None or not empty.any():
                continue
            i = next(i for i in range(lo, hi) if _empty_mask(_leaf_arrays(col.slice(i, 1))[k]).any())
            raise _below(unit, unit.first_row + at + i, column, path, g, minimum)


def _below(unit: Unit, row: int, column: str, where: str, g: int, minimum: bytes) -> InputError:
    return InputError(
        f"{unit.path}: row {row}: {column!r} {f'holds an empty text at {where}' if where else 'is empty'}, but the "
        f"footer says the smallest value of {'that leaf in ' if where else ''}row group {g} is "
        f"{minimum[:40].decode(errors='replace')!r}: the page is damaged (a hole of zeros reads as "
        "empty texts, and Parquet pages carry no checksum unless the writer added one); fetch the file again",
        path=unit.path)


def check_dictionary_use(unit: Unit, groups: list[int], column: str, batch_rows: int,
                         arrow_type: pa.DataType) -> None:
    """Refuse a row group whose dictionary page holds an entry no row of it uses.

    A writer builds a column chunk's dictionary from the values it writes (pyarrow, parquet-mr:
    the dictionary page holds the entries its dictionary-encoded pages use), so every entry is
    some row's. A hole of zeros over the RLE/bit-packed indices of a data page (incompressible,
    so snappy, LZ4 and zstd store them as they are) reads without an error, each row of it as
    entry 0, the row group's first value. Worked example: 3,000 texts ``"document K ..."`` (K =
    row mod 700) in row groups of 1,000, dictionary-encoded, snappy: 7 of ~1,000 hole positions
    (512 bytes) read ~410 rows as ``"document 0 ..."`` (0.7%; /tmp/e20b/t12_holesweep.py); the
    entries those rows held are then used by none. The text leaves of a nested column (a
    conversation's roles and contents) are checked alike, each on its own.

    Reads only each leaf's dictionary-encoded pages again, with ``read_dictionary``, until the
    reader's dictionary grows past the page's (the writer fell back to PLAIN: rows after it use
    no entry of the page's dictionary): memory is the dictionary page and one batch. Skipped for
    a column whose ``arrow_type`` (its type as the file is read without ``read_dictionary``)
    holds a dictionary: written from one (a pandas categorical), its unused entries are its own.
    Skipped too for a file whose footer's ``created_by`` names a writer not known to build the
    dictionary from the rows (:data:`DICTIONARY_FROM_ROWS`): DuckDB writes an ENUM column's whole
    type as the dictionary (a role ENUM('system', 'user', 'assistant', 'tool') of conversations
    without a system turn), fastparquet a pandas categorical's every category in each row group,
    both without an Arrow schema saying so (duckdb 2.0.1, fastparquet 2026.9.0).

    Raises:
        InputError: the row group, the leaf and its first unused entry.
    """
    import pyarrow.parquet as pq

    if _holds_dictionary(arrow_type) or not (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
                                             or pa.types.is_nested(arrow_type)):
        return
    try:
        md = pq.ParquetFile(fs.arrow_source(unit.path)).metadata
        if not (md.created_by or "").startswith(DICTIONARY_FROM_ROWS):
            return
        leaves = [j for j in range(md.num_columns) if md.num_row_groups and md.row_group(0).column(j).physical_type
                  == "BYTE_ARRAY" and (md.row_group(0).column(j).path_in_schema == column
                                       or md.row_group(0).column(j).path_in_schema.startswith(column + "."))]
        for j in leaves:
            path = md.row_group(0).column(j).path_in_schema
            pf = pq.ParquetFile(fs.arrow_source(unit.path), read_dictionary=[path], page_checksum_verification=True)
            for g in groups:
                if md.row_group(g).column(j).has_dictionary_page:
                    _check_leaf(pf, g, path, batch_rows, unit, column)
    except InputError:
        raise
    except Exception:  # noqa: BLE001 - the reader proper names what it cannot read
        return


def _check_leaf(pf, g: int, path: str, batch_rows: int, unit: Unit, column: str) -> None:
    """:func:`check_dictionary_use` for the leaf ``path`` of row group ``g``."""
    used, n0, dictionary = None, 0, None
    for rb in pf.iter_batches(batch_size=batch_rows, row_groups=[g], columns=[path]):
        col = next(_dictionaries(rb.column(0)), None)
        if col is None:
            return
        if used is None:
            n0, dictionary = len(col.dictionary), col.dictionary
            used = np.zeros(n0, dtype=bool)
        idx = col.indices.drop_null().to_numpy(zero_copy_only=False)
        used[idx[idx < n0]] = True
        if len(col.dictionary) > n0:
            break  # PLAIN pages from here on
    if used is not None and not used.all():
        k = int(np.argmin(used))
        leaf = "" if path == column else f" ({path})"
        raise InputError(
            f"{unit.path}: row group {g}: entry {k} of the column {column!r}'s dictionary{leaf} "
            f"({str(dictionary[k].as_py())[:40]!r}) is used by no row, though a writer builds the dictionary from the "
            "rows: their dictionary indices are damaged (a hole of zeros reads as entry 0, repeated), and Parquet "
            "pages carry no checksum unless the writer added one; fetch the file again (a file written from a "
            "categorical column with unused categories and without its Arrow schema: cast the column to strings)",
            path=unit.path)


def _dictionaries(col: pa.Array):
    """The dictionary arrays inside ``col``, depth first (list values, struct fields)."""
    t = col.type
    if pa.types.is_dictionary(t):
        yield col
    elif pa.types.is_struct(t):
        for i in range(t.num_fields):
            yield from _dictionaries(col.field(i))
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        yield from _dictionaries(col.flatten())
    elif pa.types.is_map(t):
        yield from _dictionaries(col.keys)
        yield from _dictionaries(col.items)


def _holds_dictionary(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return True
    if pa.types.is_struct(t):
        return any(_holds_dictionary(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _holds_dictionary(t.value_type)
    if pa.types.is_map(t):
        return _holds_dictionary(t.key_type) or _holds_dictionary(t.item_type)
    return False
