"""Writers: a unit's packed rows → its output file(s) in the output folder, committed atomically.

A writer is anything with :class:`Writer`'s two members. It gets the unit's packed rows as a
stream of ``pa.Table`` pieces (:data:`rmlprep.pipeline.pack.SCHEMAS`; a format that stores
documents rather than rows gets them back with :func:`rmlprep.packing.unpack`) and the shard
metadata, and commits every file it writes through :meth:`OutputFolder.commit`, so no file ever
exists under its final name half written. It returns each committed file's sha256; the done
marker, committed after it, vouches for them.

**Streaming.** The rows are written as they arrive: the writer pulls pieces from the pack
stage (which pulls from tokenize, validate and read) inside the commit's write, so a unit's
memory is a few row groups and one batch, whatever the unit's size; the file is renamed to its
name only once the last row is written. A fault upstream (an input file that turns out
truncated, a file changed since the plan) is raised as itself, never as an
:class:`~rmlprep.errors.OutputError`, and leaves no file under the shard's name.

=================  =================================  ======================================
writer             files of unit N                    notes
=================  =================================  ======================================
``ParquetWriter``  ``train-NNNNN.parquet``            metadata in the Parquet footer; adds the
                                                      ``unit`` column (:data:`UNIT_FIELD`)
``MegatronWriter`` ``shard-NNNNN.bin``, ``.idx``      documents, Megatron-LM's indexed dataset
                                                      (:mod:`.megatron`)
=================  =================================  ======================================
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import IO, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..config import RunConfig
from ..packing.arrays import from_numpy
from ..packing.common import UNIT_COLUMN
from ..shards import shard_name
from .megatron import MegatronWriter
from .output import OutputFolder, committing, from_stream

__all__ = ["Writer", "ParquetWriter", "writer_for", "row_groups", "UNIT_FIELD", "shard_schema"]

#: What a writer is given: one table, or the unit's rows as a stream of tables in row order.
Rows = pa.Table | Iterable[pa.Table]

#: The column :class:`ParquetWriter` adds after the pack stage's: the unit's number (the ``N`` of
#: ``train-N.parquet``, its ``rmlprep.unit`` metadata) on every row. ``example_index`` numbers
#: each unit's documents from 0, and a table of several shards' rows (``datasets.load_dataset``
#: of the folder, which keeps no ``rmlprep.*`` metadata; ``pq.read_table`` of several paths)
#: tells them apart only by it: :func:`rmlprep.packing.unpack` keys documents by (unit,
#: example_index). Dictionary-encoded, so it costs ~220 bytes a row group whatever the codec
#: (a footer entry, a one-value dictionary and a run-length page); renumbering a unit rewrites it.
UNIT_FIELD = pa.field(UNIT_COLUMN, pa.int32())


def shard_schema(schema: pa.Schema) -> pa.Schema:
    """A Parquet shard's columns: the pack stage's (``schema``) and then :data:`UNIT_FIELD`."""
    return schema.append(UNIT_FIELD)


class Writer(Protocol):
    def files(self, index: int) -> list[str]:
        """The names of unit ``index``'s files, the first being its shard."""

    def write(self, out: OutputFolder, index: int, rows: Rows, metadata: dict[str, str], *,
              schema: pa.Schema | None = None) -> dict[str, str]:
        """Commit unit ``index``'s files; return ``{name: sha256 hex}`` in :meth:`files` order.

        Args:
            rows: a table, or the rows as tables in order (each with ``schema``), iterated once.
            schema: the rows' schema (needed when ``rows`` is not a table: a unit may have none).
        Raises:
            OutputError: a file could not be written or renamed (nothing is left under its name).
            Any error of the stream ``rows`` (InputError, ...), as itself.
        """


def row_groups(pieces: Iterable[pa.Table], rows_per_group: int) -> Iterator[pa.Table]:
    """The rows of ``pieces`` regrouped into contiguous tables of exactly ``rows_per_group`` rows
    (the last one shorter): the row groups ``pq.write_table(whole, row_group_size=n)`` would cut
    from the whole table, while holding at most one group's pieces (a piece whose last rows
    start the next group stays alive until that group is written: one piece of the pack stage,
    ~``CHUNK_TOKENS`` tokens, more than the group itself; copying those rows out with
    ``Table.take`` cost more than the Parquet write and imported pandas in every worker)."""
    held: list[pa.Table] = []
    n = 0
    it = iter(pieces)
    while (box := [next(it, None)])[0] is not None:
        piece = box.pop()
        at = 0
        while at < piece.num_rows:
            take = min(rows_per_group - n, piece.num_rows - at)
            held.append(piece.slice(at, take))
            n += take
            at += take
            if n == rows_per_group:
                group = [pa.concat_tables(held).combine_chunks()]
                held, n = [], 0
                yield group.pop()
        piece = None
    if n:
        yield pa.concat_tables(held).combine_chunks()


class ParquetWriter:
    """One Parquet file per unit: the pack stage's columns and the ``unit`` column
    (:data:`UNIT_FIELD`, the only one dictionary-encoded), no statistics, the schema stored.

    Rows are written one row group at a time as they arrive (``pyarrow.parquet.ParquetWriter``
    on the commit's temporary file), cut every ``row_group_rows`` rows of the unit: the bytes are
    those of ``pq.write_table`` over the unit's whole table with its ``unit`` column.

    A unit without rows (every row rejected or blank) still gets its shard, with the schema and
    metadata and **no row group**: ``datasets.load_dataset("parquet")``, ``pyarrow.dataset`` and
    pandas read it as 0 rows (a 0-row row group makes ``datasets`` fail on the whole output).

    Args:
        compression: Parquet codec ("zstd", "snappy", "none", ...).
        row_group_rows: rows per row group.
    """

    def __init__(self, *, compression: str = "zstd", row_group_rows: int = 4096):
        self.compression = compression
        self.row_group_rows = row_group_rows

    def files(self, index: int) -> list[str]:
        return [shard_name(index)]

    def write(self, out: OutputFolder, index: int, rows: Rows, metadata: dict[str, str], *,
              schema: pa.Schema | None = None) -> dict[str, str]:
        if isinstance(rows, pa.Table):
            schema = schema or rows.schema
            rows = [rows]
        if schema is None:
            raise TypeError("ParquetWriter.write: give the schema of a stream of rows")
        meta = dict(schema.metadata or {})
        meta.update({k.encode(): v.encode() for k, v in metadata.items()})
        schema = shard_schema(schema).with_metadata(meta)

        def write(f: IO[bytes]) -> None:
            w = pq.ParquetWriter(f, schema, compression=self.compression, use_dictionary=[UNIT_FIELD.name],
                                 write_statistics=False, store_schema=True)
            try:
                for group in row_groups(from_stream(rows), self.row_group_rows):
                    unit = from_numpy(np.full(group.num_rows, index, dtype=np.int32))  # pa.array imports pandas
                    w.write_table(group.append_column(UNIT_FIELD, unit), row_group_size=self.row_group_rows)
            except BaseException:
                try:
                    w.close()  # the temporary is removed by the commit; the first error is the one raised
                except Exception:  # noqa: BLE001
                    pass
                raise
            w.close()

        name = shard_name(index)
        with committing():
            return {name: out.commit(name, write, digest=True)}


def writer_for(cfg: RunConfig, tokenizer=None) -> Writer:
    """The writer ``output.format`` asks for: Parquet, or Megatron's indexed dataset (which needs
    the tokenizer's vocab size for its dtype)."""
    out = cfg["output"]
    if out.get("format") == "megatron":
        return MegatronWriter(tokenizer.vocab_size)
    return ParquetWriter(compression=out["compression"], row_group_rows=out["row_group_rows"])
