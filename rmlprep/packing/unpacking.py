"""From packed rows back to documents, and the padding of the one-example-per-row baseline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import PackingError
from .arrays import EMPTY_I64, cumsum0, gather_index, to_numpy
from .common import UNIT_COLUMN as UNIT, Unpacked, check_seq_len, flat_offsets

def naive_padding_ratio(lengths: Any, seq_len: int) -> float:
    """Padding ratio of one example per row, each truncated to ``seq_len`` (the baseline).

    Args:
        lengths: int [n], example lengths (a numpy array, a sequence, or a list array whose
            row lengths are used).
        seq_len: row length, 1 to 2**24.

    Returns:
        ``1 - sum(min(length, seq_len)) / (n * seq_len)``; 0.0 for no examples.

    Raises:
        PackingError: seq_len not an int from 1 to 2**24, or a negative length.
    """
    seq_len = check_seq_len(seq_len)
    if isinstance(lengths, (pa.Array, pa.ChunkedArray)) and (
        pa.types.is_list(lengths.type) or pa.types.is_large_list(lengths.type)
    ):
        lengths = np.diff(flat_offsets(lengths)[1])
    lens = np.asarray(lengths, dtype=np.int64)
    if not len(lens):
        return 0.0
    if lens.min() < 0:
        raise PackingError(f"lengths[{int(np.argmax(lens < 0))}] is negative")
    return 1.0 - float(np.minimum(lens, seq_len).sum()) / (len(lens) * seq_len)


def _table(rows: Any) -> pa.Table:
    if isinstance(rows, pa.RecordBatch):
        return pa.Table.from_batches([rows])
    if isinstance(rows, pa.Table):
        return rows
    if isinstance(rows, Sequence) and rows and all(
        isinstance(r, (pa.RecordBatch, pa.Table)) for r in rows
    ):
        tables = [_table(r) for r in rows]
        runs = {h for t in tables if (h := (t.schema.metadata or {}).get(b"rmlprep.config_hash")) is not None}
        if len(runs) > 1:
            # two runs' shards share unit numbers (each run's first is unit 0): (unit, example_index)
            # would join a document of one with a document of the other
            raise PackingError(
                f"unpack: the tables are shards of {len(runs)} runs (rmlprep.config_hash "
                f"{', '.join(sorted(h.decode(errors='replace')[:12] for h in runs)[:4])}): each run numbers its "
                "shards from unit 0, so their documents of the same unit and example_index would be joined: "
                "unpack each run's shards on their own"
            )
        units = sorted({u for t in tables if (u := (t.schema.metadata or {}).get(b"rmlprep.unit")) is not None})
        if len(units) > 1 and not all(UNIT in t.column_names for t in tables):
            # shards written before the unit column: each numbers its documents from 0
            raise PackingError(
                f"unpack: the tables are {len(units)} shards of a run (rmlprep.unit "
                f"{', '.join(u.decode(errors='replace') for u in units[:4])}{', ...' if len(units) > 4 else ''}), "
                f"not all with a {UNIT!r} column; example_index numbers each shard's documents from 0, so their "
                "documents would be joined: unpack each shard on its own"
            )
        try:
            return pa.concat_tables(tables)
        except pa.ArrowInvalid as e:
            raise PackingError(
                f"unpack: the tables have different columns, e.g. {tables[0].column_names} and "
                f"{next(t.column_names for t in tables if not t.schema.equals(tables[0].schema, check_metadata=False))} "
                f"(shards of another version or pipeline?): unpack each on its own ({str(e).splitlines()[0]})"
            ) from None
    hint = " (a datasets.Dataset: pass ds.with_format('arrow')[:])" if hasattr(rows, "with_format") else ""
    raise PackingError(
        f"unpack: expected a RecordBatch, a Table or a list of them, got {type(rows).__name__}{hint}"
    )


def _row_units(table: pa.Table) -> np.ndarray | None:
    """int64 [rows]: each row's ``unit`` column (the shard it came from), or None without one."""
    if UNIT not in table.column_names:
        return None
    col = table.column(UNIT)
    if not pa.types.is_integer(col.type) or col.null_count:
        raise PackingError(
            f"unpack: the {UNIT!r} column must be integers without nulls (the shard's unit number), "
            f"got {col.type}{f' with {col.null_count} nulls' if col.null_count else ''}"
        )
    return to_numpy(col).astype(np.int64) if len(col) else EMPTY_I64


def _check_one_pretrain_shard(table: pa.Table, ex: np.ndarray, row_lens: np.ndarray,
                              frag_units: np.ndarray | None, row_units: np.ndarray | None) -> None:
    """Refuse rows marked as a pretrain shard (``rmlprep.pipeline`` metadata) that no single
    shard can hold: a shard is one concat stream of its documents in order, so its
    ``example_index`` never goes down and only its last row is shorter than ``seq_len``
    (:mod:`rmlprep.pipeline.pack`'s tail rule). ``pa.concat_tables`` of several shards keeps
    the first one's metadata and breaks both at each border after the first. With a ``unit``
    column the rows of each unit are checked on their own (several units are told apart by it;
    one unit twice, e.g. unit 0 of two runs, is not one shard).

    Rows without the metadata (``datasets.load_dataset`` keeps none) that have a ``unit``
    column and no ``labels`` are a run's pretrain shards too (sft shards hold labels): each
    unit's ``example_index`` must not go down there either, which rows shuffled or reordered
    (``ds.shuffle()``) break: a document continued into the next row would be joined in the
    wrong order. Not caught: a reordering that keeps example_index from going down (the rows of
    one long document swapped among themselves), nor rows left out (``ds.select``)."""
    md = table.schema.metadata or {}
    marked = md.get(b"rmlprep.pipeline") == b"pretrain"
    if not marked and not (row_units is not None and b"rmlprep.pipeline" not in md
                           and "labels" not in table.column_names):
        return
    by_unit = row_units is not None and len(row_units) > 0 and row_units.min() != row_units.max()
    # each unit's fragments (rows) in row order, units one after another (a stable sort by unit):
    # O(n log n) for a table of thousands of shards, not a pass per unit
    f_order = np.argsort(frag_units, kind="stable") if by_unit else None
    eu = ex if f_order is None else ex[f_order]
    same_f = np.ones(max(len(eu) - 1, 0), bool) if f_order is None else frag_units[f_order][1:] == frag_units[f_order][:-1]
    why, unit = "", None
    if len(eu) > 1 and (down := np.flatnonzero((np.diff(eu) < 0) & same_f)).size:
        why = f"example_index goes down from {int(eu[down[0]])} to {int(eu[down[0] + 1])}"
        unit = None if f_order is None else int(frag_units[f_order][down[0]])
    elif marked and (seq_len := md.get(b"rmlprep.seq_len", b"")).isdigit() and len(row_lens) > 1:
        r_order = np.argsort(row_units, kind="stable") if by_unit else np.arange(len(row_lens))
        lu = row_lens[r_order]
        not_last = np.ones(len(lu) - 1, bool) if not by_unit else row_units[r_order][1:] == row_units[r_order][:-1]
        if (short := np.flatnonzero((lu[:-1] < int(seq_len)) & not_last)).size:
            k = int(short[0])
            unit = int(row_units[r_order][k]) if by_unit else None
            n = int(np.count_nonzero(row_units == unit)) if by_unit else len(row_lens)
            first = int(np.flatnonzero(row_units[r_order] == unit)[0]) if by_unit else 0
            why = f"row {k - first} of {n} is shorter than seq_len {int(seq_len)}"
    if not why:
        return
    if unit is None and row_units is not None and len(row_units):
        unit = int(row_units[0])  # one unit
    if not marked:
        raise PackingError(
            f"unpack: the rows of unit {unit} are a run's pretrain shard (a 'unit' column, no labels) but {why} "
            "in row order, which a shard's rows in their order never have: the rows were shuffled or "
            "reordered (e.g. datasets' shuffle), so a document continued into the next row would be joined "
            "in the wrong order: unpack the rows in their shard's order (before shuffling)"
        )
    name = str(unit) if by_unit else md.get(b"rmlprep.unit", b"?").decode(errors="replace")
    raise PackingError(
        f"unpack: the rows are marked as one pretrain shard (rmlprep.unit {name}) but {why}, which one shard "
        "never has: they hold several shards (e.g. pa.concat_tables of them, or of two runs), whose "
        "example_index each start at 0, so their documents would be joined, or rows out of their shard's order "
        "(shuffled): unpack each shard on its own, its rows in order"
    )


def unpack(rows: Any, column: str = "input_ids") -> Unpacked:
    """Rebuild the packed documents of ``column`` from ``seq_lengths`` and ``example_index``.

    Fragments with the same example_index are joined in row order (the order both pack
    functions write them in); pad runs (example_index -1) are skipped. Documents come back as
    they were packed: with the bos/eos that :func:`pack_concat` added, truncated where the
    overflow mode truncated, ``labels`` with the -100 that :func:`pack_bfd` writes as each
    fragment's first label (an ``overflow="split"`` example's at every ``seq_len``-th token);
    dropped and empty documents are absent.

    ``example_index`` numbers each shard's documents from 0. A run's Parquet shards also hold a
    ``unit`` column (the shard's number on every row, :data:`.common.UNIT_COLUMN`): when the rows
    have it, documents are keyed by (unit, example_index), so the rows of several shards read as
    one table unpack right, e.g. ``datasets.load_dataset(OUTPUT)["train"].with_format("arrow")[:]``
    (which keeps no ``rmlprep.*`` metadata), ``pq.read_table`` of several paths, a list of shards;
    :attr:`Unpacked.unit` then says each document's shard. Each shard's rows must keep their
    order (not shuffled): a document continued into the next row is joined in row order. Pretrain
    rows out of order are refused where a unit's ``example_index`` goes down (a run's pretrain
    shards: the ``rmlprep.pipeline`` metadata, or a ``unit`` column and no ``labels``, as
    ``datasets`` gives them); sft rows cannot be told so (BFD reorders indices itself).

    **Whole shards only.** A shard's rows from its first to its last unpack to its documents; a
    part of them (``table.slice``, one row group, ``Dataset.select``, a batch of a streamed
    dataset) gives the documents cut at its edges as the fragments it holds, undetected: position
    ids restart on every row and nothing in a row marks a fragment that continues one from the
    row before, so a document packed over rows 0 and 1 comes back from ``unpack(shard.slice(1))``
    as its part in row 1. Read whole shards (``pq.read_table(path)``) or whole datasets.

    Tables of two runs (their ``rmlprep.config_hash`` metadata differ) are refused: each run
    numbers its shards from unit 0, so unit 0 of both would be joined (sft rows have no order
    check to catch it). Not caught: two runs of one config, or tables whose metadata is gone.

    Shards written without the ``unit`` column (by earlier versions) must be unpacked one at a
    time: their documents that share a number would be joined. Refused for
    them: a list of tables of several shards (their ``rmlprep.unit`` metadata differ), and a table
    marked as a pretrain shard (``rmlprep.pipeline`` metadata, kept by ``pa.concat_tables`` from
    the first table) whose ``example_index`` goes down or whose rows other than the last are
    shorter than its ``rmlprep.seq_len``, which no pretrain shard has (with a ``unit`` column
    this is checked unit by unit: it catches unit 0 of two runs joined). Not detected for them:
    rows without the ``rmlprep.*`` metadata (``datasets.load_dataset`` of an old folder), and
    sft shards joined into one table (BFD rows legitimately repeat and reorder indices).

    Args:
        rows: the ``rows`` of a :class:`PackResult`, a Table, or a list of batches/tables
            (e.g. ``[result.rows, result.tail]``, or the shards of a run with their ``unit``
            column).
        column: which token column to rebuild (input_ids, labels, assistant_masks,
            position_ids).

    Returns:
        Unpacked with one document per distinct (unit, example_index), ascending; ``unit`` is
        None when the rows have no ``unit`` column.

    Raises:
        PackingError: a missing column, seq_lengths that do not sum to the row lengths, a
            ``unit`` column that is not integers without nulls, tables with different columns,
            tables of two runs, or old shards of a run together (as detected above).
    """
    table = _table(rows)
    for name in (column, "seq_lengths", "example_index"):
        if name not in table.column_names:
            raise PackingError(
                f"unpack: rows have no {name!r} column (columns: {table.column_names}); "
                "pass the rows of pack_concat / pack_bfd"
            )
    values, row_offsets = flat_offsets(table.column(column), name=column)
    seq, frag_offsets = flat_offsets(table.column("seq_lengths"), name="seq_lengths")
    ex, _ = flat_offsets(table.column("example_index"), name="example_index")
    seq = seq.astype(np.int64)
    row_sums = np.diff(cumsum0(seq)[frag_offsets])
    row_lens = np.diff(row_offsets)
    if len(row_sums) != len(row_lens) or not np.array_equal(row_sums, row_lens):
        bad = int(np.argmax(row_sums != row_lens)) if len(row_sums) == len(row_lens) else 0
        raise PackingError(
            f"unpack: row {bad}: seq_lengths sum to {int(row_sums[bad])} but {column} has "
            f"{int(row_lens[bad])} values; the rows were not made by pack_concat / pack_bfd"
        )
    row_units = _row_units(table)
    frag_units = None if row_units is None else np.repeat(row_units, np.diff(frag_offsets))
    _check_one_pretrain_shard(table, ex, row_lens, frag_units, row_units)
    frag_starts = cumsum0(seq)[:-1]
    real = ex >= 0
    frag_starts, seq, ex = frag_starts[real], seq[real], ex[real].astype(np.int64)
    if frag_units is None:
        order = np.argsort(ex, kind="stable")
        index, first = np.unique(ex[order], return_index=True)
        units = None
    else:
        frag_units = frag_units[real]
        order = np.lexsort((ex, frag_units))  # stable: a document's fragments stay in row order
        u, e = frag_units[order], ex[order]
        first = np.flatnonzero(np.concatenate([[True], (u[1:] != u[:-1]) | (e[1:] != e[:-1])])) if len(e) else EMPTY_I64
        index, units = e[first], u[first]
    out_values = values[gather_index(frag_starts[order], seq[order])]
    doc_lens = np.add.reduceat(seq[order], first) if len(first) else EMPTY_I64
    return Unpacked(index=index, values=out_values, offsets=cumsum0(doc_lens), unit=units)
