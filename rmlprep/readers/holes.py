"""Holes of zeros in input files: a run of :data:`NUL_RUN` NUL bytes where text should be (a
download into a preallocated file that stopped, a crash before the data reached the disk) is a
file fault, never rows: read as rows, the rows around it merge or read as empty texts, silently.
JSONL and CSV look for it in their bytes (:func:`hole_fault`), Parquet and Arrow in a string
column's values (:func:`check_no_hole`, :func:`hole_in_column`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..compressed import compression_of, open_decompressed
from ..encoding_hints import extract_advice, tar_member
from ..errors import InputError

__all__ = ["NUL_RUN", "NUL_TEXT", "hole_fault", "tar_archive", "check_no_hole", "check_no_hole_in_values", "hole_in_column"]

#: A run of NUL bytes this long in a JSONL or CSV file (once decompressed) is a file fault, not a
#: row's: text holds no NUL (JSON escapes it as ``\u0000``), and a run of them is a hole of zeros
#: where lines were (a download into a preallocated file that stopped, aria2c's segments, a crash
#: before the data reached the disk: whole 512-byte sectors or 4 KiB blocks), whose line breaks
#: are gone, so the rows around it merge (see :func:`hole_fault`).
NUL_RUN = b"\x00" * 16


def hole_fault(path: str, at: int, compressed: bool) -> InputError:
    """The file fault of a run of :data:`NUL_RUN` NUL bytes starting at byte ``at`` (the
    decoded byte for a compressed file).

    Read as rows, such a hole lost its rows silently: 64 KiB of zeros in a JSONL file of
    160-byte lines merged ~440 lines into one, read as a single ``not_json`` reject (0.0% of
    the rows read, exit 0); in a CSV file, the zeros became text of one record, tokenized, and
    the records they overwrote were gone without a reject. ``datasets`` (pandas) reads that CSV
    the same way; refusing names the place instead.
    """
    if at < 512 and (member := _tar_member(path)) is not None:
        return tar_archive(path, member, compressed)
    where = f"decoded byte {at}" if compressed else f"byte {at}"
    return InputError(f"{path}: {where}: a run of NUL bytes where text should be: a hole of zeros (a download "
                      "into a preallocated file that stopped, or a crash before the data reached the disk), "
                      "whose lines cannot be told apart; fetch the file again",
                      path=path, offset=None if compressed else at)


def tar_archive(path: str, member: str, compressed: bool) -> InputError:
    """The file fault of a tar archive given as a JSONL or CSV file (its header's NUL padding
    read as a hole of zeros), naming its first member and the fix."""
    kind = f" ({compression_of(path)}-compressed)" if compressed else ""
    return InputError(f"{path}: is a tar archive{kind}, not JSON Lines or CSV (its first member: {member!r}); "
                      + extract_advice(path, "tar", "a tar"), path=path, offset=0)


def _tar_member(path: str) -> str | None:
    """:func:`rmlprep.encoding_hints.tar_member` of the file's first 512 decoded bytes; None when
    they cannot be read (the reader says what is wrong). Read only on the error path."""
    try:
        with open_decompressed(path) as f:
            return tar_member(f.read(512))
    except Exception:  # noqa: BLE001 - a hint only: the hole fault stands
        return None


def check_no_hole(col: pa.Array, rows: np.ndarray, column: str, where: str) -> None:
    """Refuse a string column holding :data:`NUL_RUN` NUL bytes in a row: in a Parquet or Arrow
    file, a hole of zeros (a crash or an interrupted copy), which neither format's data can
    reveal otherwise (no checksum; pyarrow reads it without an error).

    Worked example: 3,000 texts of ~140 bytes in an uncompressed Parquet file (PLAIN, row groups
    of 1,000) with 4 KiB zeroed at a third of the file read as 3,000 rows: 993 empty texts (each
    zeroed 4-byte length prefix a value of length 0, until the page's value count was reached)
    and one holding the zeros; in a ``datasets`` Arrow file, 32 texts holding them. One such text
    names the hole; the empty ones beside it cannot be told from real empty texts, so the file
    is refused (InputError), not the row. Text holds no run of 16 NULs; see :func:`hole_fault`.

    Raises:
        InputError: the first row holding the run, with the file.
    """
    if not len(col) or col.buffers()[2] is None:
        return
    width = 8 if pa.types.is_large_string(col.type) else 4
    offsets = np.frombuffer(col.buffers()[1], dtype=f"<i{width}", count=len(col) + 1, offset=col.offset * width)
    lo, hi = int(offsets[0]), int(offsets[-1])
    # one search over the batch's bytes (a copy and a memmem: ~10x faster than a per-value match);
    # a run across two texts is a hole too, named at the row where it starts
    at = memoryview(col.buffers()[2])[lo:hi].tobytes().find(NUL_RUN)
    if at < 0:
        return
    i = int(np.searchsorted(offsets, lo + at, side="right")) - 1
    raise hole_in_column(where, int(rows[i]), column)


NUL_TEXT = NUL_RUN.decode()


def check_no_hole_in_values(values: list, rows: np.ndarray, column: str, where: str,
                            col: pa.Array | None = None) -> None:
    """:func:`check_no_hole` for a column read as Python values (a dictionary or string_view
    column, whose text is not in one buffer; a batch holding rows that are not UTF-8, read one
    by one; a nested column, such as a conversation's list of message structs, whose texts are
    searched at any depth, in lists, struct fields and map keys and values); ``rows[i]`` is
    ``values[i]``'s row. With ``col``, the Arrow column the values come from, its string leaves
    are searched first, in their buffers, and the values only when one holds the run.

    Worked example: 2,000 two-message conversations in an uncompressed Parquet file (row groups
    of 1,000), 512 bytes zeroed at byte 67,735: pyarrow reads every row, the user content of row
    414 as ``"q414 sit "`` followed by NUL bytes, and 585 other rows shifted or emptied; read as
    rows, they were rendered and trained on.

    Raises:
        InputError: the first value holding :data:`NUL_TEXT`, with its row and the file.
    """
    found = None if col is None else _leaves_hold_run(col)
    if found is False:
        return
    hole = next((i for i, v in enumerate(values) if _holds(v, NUL_TEXT)), None)
    if hole is None and found:
        # the run spans several short texts, side by side in a leaf's buffer (a hole over many roles,
        # "us\0\0", "\0\0\0\0\0\0\0\0\0", ...): the first row holding a NUL byte
        hole = next((i for i, v in enumerate(values) if _holds(v, "\x00")), None)
    if hole is not None:
        raise hole_in_column(where, int(rows[hole]), column)


def _holds(v, text: str) -> bool:
    """``v`` (a Python value read from Arrow) holds ``text`` in a string (or its bytes in a
    bytes value) at any depth: in lists, dict keys and dict values."""
    if isinstance(v, str):
        return text in v
    if isinstance(v, (bytes, bytearray)):
        return text.encode() in v
    if isinstance(v, dict):
        return any(_holds(k, text) or _holds(x, text) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return any(_holds(x, text) for x in v)
    return False


def _leaves_hold_run(col: pa.Array) -> bool | None:
    """Whether a string or binary leaf of ``col`` (at any depth) holds :data:`NUL_RUN` in its
    bytes, searched within the rows of ``col`` (a slice reads its own rows' bytes, not the whole
    buffer; a map's entries may be searched whole); None when a leaf's type is not searched here
    (``string_view``: its values are searched instead)."""
    t = col.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        if not len(col) or col.buffers()[2] is None:
            return False
        width = 8 if pa.types.is_large_string(t) or pa.types.is_large_binary(t) else 4
        offsets = np.frombuffer(col.buffers()[1], dtype=f"<i{width}", count=len(col) + 1, offset=col.offset * width)
        return memoryview(col.buffers()[2])[int(offsets[0]):int(offsets[-1])].tobytes().find(NUL_RUN) >= 0
    if pa.types.is_struct(t):  # StructArray.field: the child within the struct's offset and length
        children = [_leaves_hold_run(col.field(i)) for i in range(t.num_fields)]
    elif pa.types.is_map(t):  # MapArray.keys and .items: the whole child, indexed by the offsets
        lo, hi = (int(col.offsets[0].as_py()), int(col.offsets[-1].as_py())) if len(col) else (0, 0)
        children = [_leaves_hold_run(col.keys.slice(lo, hi - lo)), _leaves_hold_run(col.items.slice(lo, hi - lo))]
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        children = [_leaves_hold_run(col.flatten())]
    elif pa.types.is_dictionary(t):
        children = [_leaves_hold_run(col.dictionary)]
    else:
        return False if (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
                         or pa.types.is_null(t) or pa.types.is_temporal(t) or pa.types.is_decimal(t)) else None
    return True if True in children else (None if None in children else False)


def hole_in_column(where: str, row: int, column: str) -> InputError:
    return InputError(f"{where}: row {row}: {column!r} holds a run of NUL bytes: a hole of zeros in the file "
                      "(a crash, or a copy or download that stopped, left zeros where data was), and Parquet and "
                      "Arrow data carry no checksum, so the rows around it may be wrong too (texts read as empty); "
                      "fetch the file again", path=where)
