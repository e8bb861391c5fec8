"""Writers: a unit's packed table → its output file(s) in the output folder, committed atomically.

A writer is anything with :class:`Writer`'s two members. It gets the unit's packed table
(:data:`rmlprep.pipeline.pack.SCHEMAS`; a format that stores documents rather than rows gets
them back with :func:`rmlprep.packing.unpack`) and the shard metadata, and commits every file it
writes through :meth:`OutputFolder.commit`, so no file ever exists under its final name half
written. It returns each committed file's sha256; the done marker, committed after it, vouches
for them.

=================  =================================  ======================================
writer             files of unit N                    notes
=================  =================================  ======================================
``ParquetWriter``  ``shard-NNNNN.parquet``            metadata in the Parquet footer
``MegatronWriter`` ``shard-NNNNN.bin``, ``.idx``      documents, Megatron-LM's indexed dataset
                                                      (:mod:`.megatron`)
=================  =================================  ======================================
"""

from __future__ import annotations

from typing import IO, Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from ..config import RunConfig
from ..shards import shard_name
from .megatron import MegatronWriter
from .output import OutputFolder

__all__ = ["Writer", "ParquetWriter", "writer_for"]


class Writer(Protocol):
    def files(self, index: int) -> list[str]:
        """The names of unit ``index``'s files, the first being its shard."""

    def write(self, out: OutputFolder, index: int, table: pa.Table, metadata: dict[str, str]) -> dict[str, str]:
        """Commit unit ``index``'s files; return ``{name: sha256 hex}`` in :meth:`files` order.

        Raises:
            OutputError: a file could not be written or renamed (nothing is left under its name).
        """


class ParquetWriter:
    """One Parquet file per unit: no dictionary encoding, no statistics, the schema stored.

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

    def write(self, out: OutputFolder, index: int, table: pa.Table, metadata: dict[str, str]) -> dict[str, str]:
        meta = dict(table.schema.metadata or {})
        meta.update({k.encode(): v.encode() for k, v in metadata.items()})
        table = table.replace_schema_metadata(meta)

        def write(f: IO[bytes]) -> None:
            if table.num_rows:
                pq.write_table(table, f, compression=self.compression, row_group_size=self.row_group_rows,
                               use_dictionary=False, write_statistics=False, store_schema=True)
            else:
                pq.ParquetWriter(f, table.schema, compression=self.compression, use_dictionary=False,
                                 write_statistics=False, store_schema=True).close()

        name = shard_name(index)
        return {name: out.commit(name, write, digest=True)}


def writer_for(cfg: RunConfig, tokenizer=None) -> Writer:
    """The writer ``output.format`` asks for: Parquet, or Megatron's indexed dataset (which needs
    the tokenizer's vocab size for its dtype)."""
    out = cfg["output"]
    if out.get("format") == "megatron":
        return MegatronWriter(tokenizer.vocab_size)
    return ParquetWriter(compression=out["compression"], row_group_rows=out["row_group_rows"])
