"""What both pack functions share: the result types (:class:`PackStats`, :class:`PackResult`,
:class:`Unpacked`), the normalisation of a column of documents (:func:`flat_offsets`) and the
checks of their arguments."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import PackingError
from .arrays import EMPTY_I64, UINT32_MAX, to_numpy

IGNORE_INDEX = -100
"""Label value that the loss ignores (PyTorch ``CrossEntropyLoss(ignore_index=-100)``)."""

UNIT_COLUMN = "unit"
"""The int32 column a run's Parquet shards hold besides the packed ones: the shard's unit number
on every row (:data:`rmlprep.pipeline.writers.UNIT_FIELD`); :func:`.unpacking.unpack` keys
documents by it and ``example_index``."""


@dataclass(frozen=True, slots=True)
class PackStats:
    """Counts for one packed batch; add two with ``+`` (or :meth:`merge`) to total a run.

    Attributes:
        seq_len: the row length the batch was packed to (0 = not set, e.g. an empty total).
        documents: input documents (rows of ``input_ids``) seen, including dropped and empty ones.
        tokens: input tokens seen (document contents, without added bos/eos).
        packed_tokens: tokens written to full rows, bos/eos included, pad excluded.
        rows: full output rows (the concat tail is not a row).
        pad_tokens: ``rows * seq_len - packed_tokens``; counted whether or not the rows are
            physically padded.
        truncated_tokens: tokens cut off over-long documents (overflow="truncate"; for concat
            this includes an eos that was cut with the rest).
        dropped_documents: over-long documents left out (overflow="drop").
        dropped_tokens: input tokens of the dropped documents.
        over_long: documents longer than ``seq_len`` (with bos/eos for concat), whatever
            happened to them.
        split_examples: examples cut into ``seq_len`` chunks (BFD overflow="split").
        empty_documents: documents with no tokens to pack; they produce no fragment.
        tail_tokens: tokens left in the concat tail (returned in :attr:`PackResult.tail`).
    """

    seq_len: int = 0
    documents: int = 0
    tokens: int = 0
    packed_tokens: int = 0
    rows: int = 0
    pad_tokens: int = 0
    truncated_tokens: int = 0
    dropped_documents: int = 0
    dropped_tokens: int = 0
    over_long: int = 0
    split_examples: int = 0
    empty_documents: int = 0
    tail_tokens: int = 0

    @property
    def padding_ratio(self) -> float:
        """``pad_tokens / (rows * seq_len)``; 0.0 when there are no rows."""
        cells = self.rows * self.seq_len
        return self.pad_tokens / cells if cells else 0.0

    def merge(self, other: PackStats) -> PackStats:
        """Sum of two batches' stats.

        Raises:
            PackingError: the two batches were packed to different ``seq_len``.
        """
        if self.seq_len and other.seq_len and self.seq_len != other.seq_len:
            raise PackingError(
                f"cannot merge PackStats for seq_len {self.seq_len} and {other.seq_len}; "
                "merge only batches packed to the same seq_len"
            )
        values = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        values["seq_len"] = self.seq_len or other.seq_len
        return PackStats(**values)

    def __add__(self, other: PackStats) -> PackStats:
        if not isinstance(other, PackStats):
            return NotImplemented
        return self.merge(other)

    def __radd__(self, other: Any) -> PackStats:
        # lets sum(list_of_stats) start from 0
        if other == 0:
            return self
        return NotImplemented

    def as_dict(self) -> dict[str, int | float]:
        """All counts plus ``padding_ratio``, for a stats file."""
        out: dict[str, int | float] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["padding_ratio"] = self.padding_ratio
        return out


@dataclass(frozen=True)
class PackResult:
    """What a pack function returns.

    Attributes:
        rows: the packed rows, columns as in the module docstring.
        tail: same schema, 0 or 1 row shorter than ``seq_len``: the concat leftover, to prepend
            to the next batch or write as a short last row (always 0 rows for BFD);
            :attr:`all_rows` is ``rows`` with it.
        stats: counts for this batch.
        dropped: int64 [k], indices of the documents left out (overflow="drop"), ascending.
        over_long: int64 [m], indices of the documents longer than ``seq_len``, ascending.
        empty: int64 [e], indices of the documents that had no tokens, ascending.
    """

    rows: pa.RecordBatch
    tail: pa.RecordBatch
    stats: PackStats
    dropped: np.ndarray = field(default_factory=lambda: EMPTY_I64)
    over_long: np.ndarray = field(default_factory=lambda: EMPTY_I64)
    empty: np.ndarray = field(default_factory=lambda: EMPTY_I64)

    @property
    def all_rows(self) -> pa.RecordBatch:
        """``rows`` then ``tail`` in one batch: every packed token, the last row shorter than
        ``seq_len`` when there is a tail (what a shard of a run holds). ``rows`` alone leaves
        the tail's tokens out (careless-user trial U10): use this for the last (or only) batch,
        and carry ``tail`` into the next call otherwise."""
        if not self.tail.num_rows:
            return self.rows
        table = pa.Table.from_batches([self.rows, self.tail]).combine_chunks()  # pa.concat_batches: pyarrow 19+
        return table.to_batches()[0]


@dataclass(frozen=True)
class Unpacked:
    """Documents rebuilt by :func:`unpack`.

    Attributes:
        index: int64 [n], the ``example_index`` of each rebuilt document, ascending (within
            each unit when ``unit`` is given).
        values: flat values of all documents, in document order (dtype of the column).
        offsets: int64 [n + 1]; document i is ``values[offsets[i]:offsets[i + 1]]``.
        unit: int64 [n], the shard (``unit`` column, :data:`UNIT_COLUMN`) of each document,
            ascending, when the rows had that column; else None. Document i is document
            ``index[i]`` of shard ``unit[i]``.
    """

    index: np.ndarray
    values: np.ndarray
    offsets: np.ndarray
    unit: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int) -> np.ndarray:
        """Document ``i`` (by position; negative counts from the end).

        Raises:
            PackingError: ``i`` is not an integer (``unpack(t)["input_ids"]``: an Unpacked is
                one column's documents; numpy said only "only integers, slices ... are valid").
            IndexError: ``i`` out of range (what ends iteration).
        """
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            hint = (f"; it holds one column's documents: unpack(rows, column={i!r}) rebuilds that column"
                    if isinstance(i, str) else "")
            raise PackingError(f"Unpacked[{i!r}]: documents are indexed by position, unpacked[0] is the first "
                               f"(index[0] its example_index){hint}")
        n = len(self.index)
        j = int(i) + n if i < 0 else int(i)  # offsets[-1:0] would be an empty document, not the last
        if not 0 <= j < n:
            raise IndexError(f"Unpacked[{i}]: out of range ({n} documents)")
        return self.values[self.offsets[j] : self.offsets[j + 1]]

    def to_dict(self) -> dict[int, list[int]]:
        """``{example_index: list of values}``.

        Raises:
            PackingError: the documents come from several shards (``unit`` holds more than one
                number), whose example_index overlap: iterate, or key by ``(unit[i], index[i])``.
        """
        if self.unit is not None and len(self.unit) and self.unit[0] != self.unit[-1]:
            raise PackingError(
                f"Unpacked.to_dict: the documents come from {len(np.unique(self.unit))} shards (unit column), "
                "whose example_index overlap: key them by (unit[i], index[i]) instead"
            )
        return {int(k): self[i].tolist() for i, k in enumerate(self.index)}


def flat_offsets(documents: Any, *, name: str = "input_ids") -> tuple[np.ndarray, np.ndarray]:
    """Normalise a column of documents to ``(values, offsets)``.

    Args:
        documents: one of
            - ``pa.ListArray`` / ``pa.LargeListArray`` (or a ``ChunkedArray`` of them) of
              integers, possibly sliced;
            - a tuple ``(values, offsets)`` of numpy arrays, offsets int [n + 1], ascending;
              offsets need not start at 0 (they are rebased);
            - a sequence of integer sequences (converted with ``pa.array``), except a tuple of
              two lists, which is refused: it reads as two documents or as ``(values,
              offsets)`` alike (``([5, 6, 7, 8], [1, 3])`` was one document ``[6, 7]``).
        name: the column name used in error messages.

    Returns:
        values: the integers as a 1-D numpy array (dtype as given; int64 for Python lists),
            exactly ``offsets[-1]`` long.
        offsets: int64 [n + 1], starting at 0; document i is ``values[offsets[i]:offsets[i+1]]``.

    Raises:
        PackingError: a null document or value, a non-integer type, bad offsets, or a tuple of
            two lists.
    """
    if isinstance(documents, tuple) and len(documents) == 2 and any(isinstance(d, (list, tuple)) for d in documents):
        raise PackingError(f"{name}: a tuple of two lists reads either as two documents or as (values, offsets); pass "
                           "the documents as a list ([doc_a, doc_b]), or (values, offsets) as numpy arrays")
    if isinstance(documents, tuple) and len(documents) == 2:
        values = np.asarray(documents[0])
        offsets = np.asarray(documents[1])
        if values.ndim != 1 or offsets.ndim != 1 or len(offsets) < 1:
            raise PackingError(
                f"{name}: expected (values 1-D, offsets 1-D of length n + 1), got shapes "
                f"{values.shape} and {offsets.shape}"
            )
        if not np.issubdtype(offsets.dtype, np.integer):
            raise PackingError(f"{name}: offsets must be integers, got {offsets.dtype}")
        offsets = offsets.astype(np.int64, copy=False)
        steps = np.diff(offsets)
        if len(steps) and steps.min() < 0:
            bad = int(np.argmax(steps < 0))
            raise PackingError(f"{name}: offsets decrease at document {bad}; offsets must ascend")
        if offsets[0] < 0 or offsets[-1] > len(values):
            raise PackingError(
                f"{name}: offsets span [{offsets[0]}, {offsets[-1]}] but values has "
                f"{len(values)} entries"
            )
        values = values[offsets[0] : offsets[-1]]
        offsets = offsets - offsets[0]
    else:
        arr = documents
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        elif not isinstance(arr, pa.Array):
            if isinstance(arr, (str, bytes)) or not isinstance(arr, Sequence):
                raise PackingError(
                    f"{name}: expected a pyarrow list array, (values, offsets) numpy arrays or "
                    f"a list of lists, got {type(documents).__name__}"
                )
            arr = _int_lists(arr, name)
        if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
            raise PackingError(
                f"{name}: expected list<int> or large_list<int>, got {arr.type}"
            )
        if arr.null_count:
            bad = int(np.flatnonzero(np.asarray(arr.is_null()))[0])
            raise PackingError(
                f"{name}[{bad}] is null; fill or filter null rows before packing"
            )
        offsets = to_numpy(arr.offsets).astype(np.int64)
        offsets = offsets - offsets[0]
        flat = arr.flatten()  # honours slicing, unlike .values
        if flat.null_count:
            pos = int(np.flatnonzero(np.asarray(flat.is_null()))[0])
            row = int(np.searchsorted(offsets, pos, side="right") - 1)
            raise PackingError(f"{name}[{row}] contains a null value; ids must all be set")
        values = to_numpy(flat)
        if len(values) != offsets[-1]:  # pragma: no cover - arrow guarantees this
            raise PackingError(f"{name}: {len(values)} values for offsets ending at {offsets[-1]}")
    if values.dtype == np.bool_:
        values = values.astype(np.uint8)
    if not np.issubdtype(values.dtype, np.integer):
        raise PackingError(f"{name}: values must be integers, got dtype {values.dtype}")
    return values, offsets


def _int_lists(documents: Sequence, name: str) -> pa.Array:
    """A sequence of integer sequences as a list array. pyarrow converts a Python float to an
    int64 by truncating it (``pa.array([[1.5]], type=pa.list_(pa.int64()))`` is ``[[1]]``, no
    error), which gave ids no tokenizer produced; so the type is inferred first and floating
    values are refused, as a float numpy array is. Integer rows keep the inferred type (int64, or
    uint64 past 2**63, refused later by the range check with the value named). Rows that infer
    no single type (a ``Decimal``, a float among ints of another row's type) are checked value
    by value: a value that is not an integer (:func:`operator.index`) is refused.

    Raises:
        PackingError: floats, or values that are not integers (or not 64-bit ones).
    """
    try:
        arr = pa.array(documents)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        arr = None  # mixed types, or an int past 64 bits: the typed conversion below names it
    if arr is not None and (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
        if pa.types.is_floating(arr.type.value_type):
            # inferred as floats: some value is one, but pyarrow's inference turned the ints beside
            # it into floats too ([[1, 2], [3.0]] is list<double>), so the first float is found in
            # the rows themselves (the value check below raises at it)
            _refuse_non_integers(documents, name)
            raise PackingError(f"{name}: values must be integers, got floats (pyarrow would truncate "
                               "them); convert them to int first")
        if pa.types.is_integer(arr.type.value_type):
            return arr
    # mixed or other types: pyarrow's int64 conversion truncates a Decimal or a float among ints
    # too (pa.array([[Decimal("1.5"), 2]], type=list<int64>) is [[1, 2]]), so each value must be an
    # integer (operator.index: int, numpy integers; bool is refused by pyarrow below)
    _refuse_non_integers(documents, name)
    try:
        return pa.array(documents, type=pa.list_(pa.int64()))
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
        raise PackingError(f"{name}: cannot read as lists of integers: {exc}") from exc


def _refuse_non_integers(documents: Sequence, name: str) -> None:
    """Raise PackingError at the first value (row order, then position) that is not an integer
    (:func:`operator.index`: int, numpy integers pass; None and bool are left to pyarrow)."""
    for row_i, row in enumerate(documents):
        for v in row if isinstance(row, Sequence | np.ndarray) else ():
            if v is not None and not isinstance(v, bool):
                try:
                    operator.index(v)
                except TypeError:
                    raise PackingError(f"{name}[{row_i}] holds {v!r}: values must be integers, got "
                                       f"{type(v).__name__} (pyarrow would truncate it); convert them to "
                                       "int first") from None


def row_of(offsets: np.ndarray, pos: int) -> int:
    return int(np.searchsorted(offsets, pos, side="right") - 1)


def check_range(values: np.ndarray, offsets: np.ndarray, name: str, lo: int, hi: int) -> None:
    if not len(values):
        return
    if values.dtype.itemsize <= 4 and values.dtype.kind == "u" and lo <= 0 and hi >= UINT32_MAX:
        return
    vmin, vmax = int(values.min()), int(values.max())
    if vmin >= lo and vmax <= hi:
        return
    pos = int(np.argmax((values < lo) | (values > hi)))
    raise PackingError(
        f"{name}[{row_of(offsets, pos)}] holds {int(values[pos])}, outside [{lo}, {hi}]; "
        + ("token ids must fit uint32" if name == "input_ids" else f"check the {name} column")
    )


def checked_ids(input_ids: Any) -> tuple[np.ndarray, np.ndarray]:
    values, offsets = flat_offsets(input_ids, name="input_ids")
    check_range(values, offsets, "input_ids", 0, UINT32_MAX)
    return values.astype(np.uint32, copy=False), offsets


def aligned(column: Any, name: str, ids_offsets: np.ndarray) -> np.ndarray:
    values, offsets = flat_offsets(column, name=name)
    n_ids, n = len(ids_offsets) - 1, len(offsets) - 1
    if n != n_ids:
        raise PackingError(f"{name} has {n} rows but input_ids has {n_ids}; pass one per example")
    if not np.array_equal(offsets, ids_offsets):
        lens, ids_lens = np.diff(offsets), np.diff(ids_offsets)
        bad = int(np.argmax(lens != ids_lens))
        raise PackingError(
            f"{name}[{bad}] has {int(lens[bad])} values but input_ids[{bad}] has "
            f"{int(ids_lens[bad])}; {name} must be aligned token by token with input_ids"
        )
    return values


#: The largest ``seq_len`` the pack functions (and the run config's ``pack.seq_len``) take:
#: 16,777,216 tokens, above every released context length. A row (and an SFT row padded to it)
#: is allocated at ``seq_len``, so a mistyped 2_000_000_000 is refused instead of asking numpy
#: for 15 GiB per column.
MAX_SEQ_LEN = 1 << 24


def check_seq_len(seq_len: Any) -> int:
    """``seq_len`` as an int.

    Raises:
        PackingError: not an int (a bool, a float), or outside 1 .. :data:`MAX_SEQ_LEN`.
    """
    if isinstance(seq_len, bool) or not isinstance(seq_len, (int, np.integer)):
        raise PackingError(f"seq_len must be an int, got {type(seq_len).__name__}")
    if not 1 <= seq_len <= MAX_SEQ_LEN:
        raise PackingError(f"seq_len must be from 1 to {MAX_SEQ_LEN:,} (2**24), got {int(seq_len):,}")
    return int(seq_len)


def check_overflow(overflow: str, allowed: tuple[str, ...], fn: str) -> None:
    if overflow not in allowed:
        raise PackingError(
            f"{fn}: unknown overflow={overflow!r}; use one of {', '.join(map(repr, allowed))}"
        )


def check_token(value: int | None, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise PackingError(f"{name} must be an int or None, got {type(value).__name__}")
    if not 0 <= value <= UINT32_MAX:
        raise PackingError(f"{name}={value} does not fit uint32 (0 <= id < 2**32)")
    return int(value)
