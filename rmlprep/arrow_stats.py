"""``fn.stats`` of the map callables of :mod:`rmlprep.arrow`, and what it cannot count.

``datasets.map(fn, num_proc=N)`` pickles ``fn`` and calls a copy in each worker process: the
copies count, and their counts never come back, so the caller's ``fn.stats`` stays all zeros.
``datasets`` also pickles ``fn`` to hash it when ``num_proc`` is unset, but then calls the
caller's own object, whose counts grow. So an object that was pickled and has seen no batch
when its ``stats`` is read ran elsewhere (or not at all: ``datasets`` took the result from its
cache), and reading its ``stats`` warns once, saying where the counts are instead:
:func:`count_errors` counts the failed rows of the output, wherever they were made.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

__all__ = ["_LocalStats", "count_errors"]


class _LocalStats:
    """Mixin of :class:`~rmlprep.arrow_base._MapFunction`: ``stats`` read by the user; the
    callables count into ``_stats`` (reading it never warns)."""

    _stats: dict[str, int]
    _sent = False  # pickled from this object (__getstate__)
    _said = False  # the warning below was given

    @property
    def stats(self) -> dict[str, int]:
        """The counts of the calls made on this object in this process: ``batches``, ``rows``,
        ``errors``, ``tokens`` (ints) and the callable's own keys.

        Warns (``UserWarning``, once per object) when the object has been pickled and has seen no
        batch: ``datasets.map(num_proc=N)`` called copies in its workers, whose counts stay there;
        count the output instead (:func:`rmlprep.count_errors`, the ``length`` column).
        """
        s = self._stats
        if self._sent and not s["batches"] and not self._said:
            self._said = True
            name = re.sub(r"(?<!^)(?=[A-Z])", "_", type(self).__name__).lower()  # TokenizeText -> tokenize_text
            warnings.warn(
                f"{name}: fn.stats is all zeros: this callable was pickled and never called in this process "
                "(datasets.map(num_proc=N) calls a copy in each worker, whose counts stay there; or datasets took "
                "the result from its cache); count the output instead (rmlprep.count_errors(ds), the length column)",
                stacklevel=2)
        return s


def count_errors(data: Any, column: str = "error") -> int:
    """Count rows whose ``column`` holds an error (not null and not ``""``).

    Args:
        data: a ``datasets.Dataset``, ``pyarrow.Table`` / ``RecordBatch``, or a dict of columns
            (as returned by a map function with ``on_error="record"``).
        column: the error column's name.
    Returns:
        The number of failed rows; 0 when the column is absent.
    Raises:
        TypeError: ``data`` is none of those (a ``datasets.IterableDataset`` streams its rows:
            count them as they come, ``sum(1 for r in ds if r["error"])``).
    """
    if isinstance(data, (pa.Table, pa.RecordBatch)):
        if column not in data.schema.names:
            return 0
        col = data.column(column)
    elif isinstance(data, Mapping):
        if column not in data:
            return 0
        col = data[column]
        if not isinstance(col, (pa.Array, pa.ChunkedArray)):
            return sum(1 for e in col if e is not None and e != "")
    else:  # datasets.Dataset
        if not (hasattr(data, "column_names") and hasattr(getattr(data, "data", None), "column")):
            raise TypeError(f"count_errors: give a datasets.Dataset, a pyarrow Table or RecordBatch, or a dict of "
                            f"columns, not {type(data).__name__} (an IterableDataset: count its rows as they stream, "
                            f"sum(1 for r in ds if r[{column!r}]))")
        if column not in data.column_names:
            return 0
        col = data.data.column(column)
    if pa.types.is_null(col.type):
        return 0
    import pyarrow.compute as pc

    return int(pc.sum(pc.and_(pc.is_valid(col), pc.not_equal(col, ""))).as_py() or 0)
