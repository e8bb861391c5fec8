"""Columnar packing of token-id documents into fixed-length rows.

Two strategies, both pure numpy over flat values + offsets (no Python loop per token):

- :func:`pack_concat` (pretraining): concatenate documents, each framed by an optional bos and
  eos, and cut the stream into rows of ``seq_len``. A document may continue into the next row.
- :func:`pack_bfd` (SFT): best-fit-decreasing bin packing; an example is never split across
  rows unless ``overflow="split"``. The only Python loop is one cheap step per example (the bin
  choice: a bisect over the sorted distinct remaining capacities plus a heap per capacity).

Every output row keeps its document boundaries, so padding-free attention (flash-attention
varlen, TRL ``padding_free``) never lets one document attend to another:

===============  ==================  ==============================================================
column           type                meaning
===============  ==================  ==============================================================
input_ids        list<uint32>        token ids; every full row has exactly ``seq_len`` values
labels           list<int64>         (BFD, if given) aligned with input_ids; -100 = ignored
assistant_masks  list<uint8>         (BFD, if given) aligned with input_ids; 1 = assistant token
position_ids     list<int32>         0, 1, 2, ... restarting at the start of every fragment
seq_lengths      list<int32>         lengths of the fragments in the row; they sum to its length
example_index    list<int64>         per fragment: which input row it came from (-1 = pad run)
===============  ==================  ==============================================================

A *fragment* is the part of one document that lies in one row. **position_ids restart at 0 at
every fragment**, including a document continued from the previous row (the TRL "wrapped"
choice): a row is then self-contained, positions never exceed ``seq_len - 1``, and the
flash-attention rule "a new sequence starts where position_ids == 0" holds for every row. Which
fragments belong together is recorded in ``example_index`` instead, and :func:`unpack` uses it
to rebuild the documents.

The lists use 32-bit offsets; a batch with more than 2**31 - 1 values in one column gets
``large_list`` columns instead (one Arrow limit, nothing else changes).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pyarrow as pa

from .errors import PackingError

__all__ = [
    "IGNORE_INDEX",
    "PackStats",
    "PackResult",
    "Unpacked",
    "flat_offsets",
    "naive_padding_ratio",
    "pack_concat",
    "pack_bfd",
    "unpack",
]

IGNORE_INDEX = -100
"""Label value that the loss ignores (PyTorch ``CrossEntropyLoss(ignore_index=-100)``)."""

_UINT32_MAX = 2**32 - 1
_INT32_MAX = 2**31 - 1
_CONCAT_OVERFLOW = ("wrap", "truncate", "drop")
_BFD_OVERFLOW = ("truncate", "split", "drop")
_EMPTY_I64 = np.zeros(0, dtype=np.int64)


# --------------------------------------------------------------------------------------------
# stats and results


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
            to the next batch or write as a short last row (always 0 rows for BFD).
        stats: counts for this batch.
        dropped: int64 [k], indices of the documents left out (overflow="drop"), ascending.
        over_long: int64 [m], indices of the documents longer than ``seq_len``, ascending.
        empty: int64 [e], indices of the documents that had no tokens, ascending.
    """

    rows: pa.RecordBatch
    tail: pa.RecordBatch
    stats: PackStats
    dropped: np.ndarray = field(default_factory=lambda: _EMPTY_I64)
    over_long: np.ndarray = field(default_factory=lambda: _EMPTY_I64)
    empty: np.ndarray = field(default_factory=lambda: _EMPTY_I64)


@dataclass(frozen=True)
class Unpacked:
    """Documents rebuilt by :func:`unpack`.

    Attributes:
        index: int64 [n], the ``example_index`` of each rebuilt document, ascending.
        values: flat values of all documents, in ``index`` order (dtype of the column).
        offsets: int64 [n + 1]; document i is ``values[offsets[i]:offsets[i + 1]]``.
    """

    index: np.ndarray
    values: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    def to_dict(self) -> dict[int, list[int]]:
        """``{example_index: list of values}``."""
        return {int(k): self[i].tolist() for i, k in enumerate(self.index)}


# --------------------------------------------------------------------------------------------
# input normalisation


def flat_offsets(documents: Any, *, name: str = "input_ids") -> tuple[np.ndarray, np.ndarray]:
    """Normalise a column of documents to ``(values, offsets)``.

    Args:
        documents: one of
            - ``pa.ListArray`` / ``pa.LargeListArray`` (or a ``ChunkedArray`` of them) of
              integers, possibly sliced;
            - a tuple ``(values, offsets)`` of numpy arrays, offsets int [n + 1], ascending;
              offsets need not start at 0 (they are rebased);
            - a sequence of integer sequences (converted with ``pa.array``).
        name: the column name used in error messages.

    Returns:
        values: the integers as a 1-D numpy array (dtype as given; int64 for Python lists),
            exactly ``offsets[-1]`` long.
        offsets: int64 [n + 1], starting at 0; document i is ``values[offsets[i]:offsets[i+1]]``.

    Raises:
        PackingError: a null document or value, a non-integer type, or bad offsets.
    """
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
            try:
                arr = pa.array(arr, type=pa.list_(pa.int64()))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
                raise PackingError(f"{name}: cannot read as lists of integers: {exc}") from exc
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


def _row_of(offsets: np.ndarray, pos: int) -> int:
    return int(np.searchsorted(offsets, pos, side="right") - 1)


def _check_range(values: np.ndarray, offsets: np.ndarray, name: str, lo: int, hi: int) -> None:
    if not len(values):
        return
    if values.dtype.itemsize <= 4 and values.dtype.kind == "u" and lo <= 0 and hi >= _UINT32_MAX:
        return
    vmin, vmax = int(values.min()), int(values.max())
    if vmin >= lo and vmax <= hi:
        return
    pos = int(np.argmax((values < lo) | (values > hi)))
    raise PackingError(
        f"{name}[{_row_of(offsets, pos)}] holds {int(values[pos])}, outside [{lo}, {hi}]; "
        + ("token ids must fit uint32" if name == "input_ids" else f"check the {name} column")
    )


def _ids(input_ids: Any) -> tuple[np.ndarray, np.ndarray]:
    values, offsets = flat_offsets(input_ids, name="input_ids")
    _check_range(values, offsets, "input_ids", 0, _UINT32_MAX)
    return values.astype(np.uint32, copy=False), offsets


def _aligned(column: Any, name: str, ids_offsets: np.ndarray) -> np.ndarray:
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


def _check_seq_len(seq_len: Any) -> int:
    if isinstance(seq_len, bool) or not isinstance(seq_len, (int, np.integer)):
        raise PackingError(f"seq_len must be an int, got {type(seq_len).__name__}")
    if seq_len < 1:
        raise PackingError(f"seq_len must be >= 1, got {seq_len}")
    return int(seq_len)


def _check_overflow(overflow: str, allowed: tuple[str, ...], fn: str) -> None:
    if overflow not in allowed:
        raise PackingError(
            f"{fn}: unknown overflow={overflow!r}; use one of {', '.join(map(repr, allowed))}"
        )


def _check_token(value: int | None, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise PackingError(f"{name} must be an int or None, got {type(value).__name__}")
    if not 0 <= value <= _UINT32_MAX:
        raise PackingError(f"{name}={value} does not fit uint32 (0 <= id < 2**32)")
    return int(value)


# --------------------------------------------------------------------------------------------
# array helpers


def _gather_index(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """int64 [sum(lengths)]: starts[0], starts[0]+1, ..., starts[1], ... (one range per run).

    Built as a running sum of steps (1 inside a run, a jump at each run start) in place: one
    fill, one scatter per run and one cumsum, instead of repeat + arange + add.
    """
    lengths = lengths.astype(np.int64, copy=False)
    starts = starts.astype(np.int64, copy=False)
    nonempty = lengths > 0
    if not nonempty.all():
        starts, lengths = starts[nonempty], lengths[nonempty]
    total = int(lengths.sum())
    out = np.ones(total, dtype=np.int64)
    if total:
        run_starts = np.cumsum(lengths) - lengths
        out[0] = starts[0]
        out[run_starts[1:]] = starts[1:] - (starts[:-1] + lengths[:-1] - 1)
        np.cumsum(out, out=out)
    return out


def _positions(frag_lengths: np.ndarray, total: int) -> np.ndarray:
    """int32 [total]: 0, 1, ... restarting at every fragment (a running sum reset per start)."""
    lengths = frag_lengths.astype(np.int64, copy=False)
    lengths = lengths[lengths > 0]
    out = np.ones(total, dtype=np.int32)
    if total:
        run_starts = np.cumsum(lengths) - lengths
        out[0] = 0
        out[run_starts[1:]] = 1 - lengths[:-1]
        np.cumsum(out, out=out)
    return out


def _cumsum0(lengths: np.ndarray) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def from_numpy(values: np.ndarray, value_type: pa.DataType | None = None) -> pa.Array:
    """A primitive Arrow array over a 1-D numpy array's buffer (no copy when contiguous), cast
    to ``value_type`` when given and different (a value out of its range raises, as
    ``pa.array`` does).

    ``pa.array(ndarray)`` imports pandas on its first call (0.3-0.5 s in every worker process
    that writes a shard); ``pa.Array.from_buffers`` does not.
    """
    arr = np.ascontiguousarray(values)
    if arr.dtype == np.bool_ or arr.ndim != 1:
        return pa.array(arr, type=value_type)
    t = pa.from_numpy_dtype(arr.dtype)
    out = pa.Array.from_buffers(t, len(arr), [None, pa.py_buffer(arr)])
    return out if value_type is None or value_type == t else out.cast(value_type)


_NUMPY_OF = {pa.int8(): np.int8, pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64,
             pa.uint8(): np.uint8, pa.uint16(): np.uint16, pa.uint32(): np.uint32, pa.uint64(): np.uint64,
             pa.float32(): np.float32, pa.float64(): np.float64}


def to_numpy(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A numpy view of an integer or float Arrow array without nulls (a copy for anything else,
    by ``to_numpy(zero_copy_only=False)``). ``Array.to_numpy`` imports pandas on its first call
    (0.3-0.5 s in every worker process); a view of the data buffer does not."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    dtype = _NUMPY_OF.get(arr.type)
    if dtype is None or arr.null_count:
        return arr.to_numpy(zero_copy_only=False)
    buf = arr.buffers()[1]
    if buf is None:
        return np.zeros(0, dtype)
    return np.frombuffer(buf, dtype)[arr.offset:arr.offset + len(arr)]


def _list(values: np.ndarray, offsets: np.ndarray, value_type: pa.DataType) -> pa.Array:
    """Arrow list column from flat values and int64 offsets (large_list past 2**31 - 1)."""
    child = from_numpy(values, value_type)
    if offsets[-1] > _INT32_MAX:
        return pa.LargeListArray.from_arrays(from_numpy(offsets.astype(np.int64)), child)
    return pa.ListArray.from_arrays(from_numpy(offsets.astype(np.int32)), child)


_TYPES = {
    "input_ids": pa.uint32(),
    "labels": pa.int64(),
    "assistant_masks": pa.uint8(),
    "position_ids": pa.int32(),
    "seq_lengths": pa.int32(),
    "example_index": pa.int64(),
}


def _batch(
    token_columns: dict[str, np.ndarray],
    row_offsets: np.ndarray,
    frag_lengths: np.ndarray,
    frag_offsets: np.ndarray,
    frag_index: np.ndarray,
) -> pa.RecordBatch:
    """Build the output batch; position_ids are derived from the fragment lengths."""
    positions = _positions(frag_lengths, int(row_offsets[-1]))
    arrays, names = [], []
    for name in ("input_ids", "labels", "assistant_masks"):
        if name in token_columns:
            arrays.append(_list(token_columns[name], row_offsets, _TYPES[name]))
            names.append(name)
    arrays.append(_list(positions, row_offsets, _TYPES["position_ids"]))
    arrays.append(_list(frag_lengths.astype(np.int32), frag_offsets, _TYPES["seq_lengths"]))
    arrays.append(_list(frag_index.astype(np.int64), frag_offsets, _TYPES["example_index"]))
    names += ["position_ids", "seq_lengths", "example_index"]
    return pa.RecordBatch.from_arrays(arrays, names=names)


# --------------------------------------------------------------------------------------------
# concat


def _cut(
    stream: np.ndarray,
    doc_bounds: np.ndarray,
    doc_index: np.ndarray,
    lo: int,
    hi: int,
    seq_len: int,
) -> pa.RecordBatch:
    """Rows of seq_len over stream[lo:hi) (the last may be shorter), split at document bounds."""
    row_bounds = np.append(np.arange(lo, hi, seq_len, dtype=np.int64), np.int64(hi))
    if hi == lo:
        row_bounds = row_bounds[:1]
    inner = doc_bounds[(doc_bounds > lo) & (doc_bounds < hi)]
    breaks = np.union1d(row_bounds, inner)
    frag_starts = breaks[:-1]
    frag_lengths = np.diff(breaks)
    frag_offsets = np.searchsorted(frag_starts, row_bounds, side="left").astype(np.int64)
    # the document holding each fragment's first token (side="right" skips empty documents)
    frag_doc = doc_index[np.searchsorted(doc_bounds, frag_starts, side="right") - 1]
    return _batch(
        {"input_ids": stream[lo:hi]},
        row_bounds - lo,
        frag_lengths,
        frag_offsets,
        frag_doc,
    )


def pack_concat(
    input_ids: Any,
    *,
    seq_len: int,
    eos_id: int | None = None,
    bos_id: int | None = None,
    overflow: str = "wrap",
) -> PackResult:
    """Concatenate documents and cut the stream into rows of exactly ``seq_len`` tokens.

    Each document is framed as ``[bos] + ids + [eos]`` (bos/eos only when given), the framed
    documents are concatenated in input order, and the stream is cut every ``seq_len`` tokens.
    The last ``len(stream) % seq_len`` tokens do not fill a row: they are returned as
    :attr:`PackResult.tail`, never lost.

    Worked example (``seq_len=4, eos_id=0``), documents ``[1,2,3], [4,5], [6,7,8,9]``::

        stream         1 2 3 0 | 4 5 0 6 | 7 8 9 0
        input_ids      [1,2,3,0]  [4,5,0,6]  [7,8,9,0]
        seq_lengths    [4]        [3,1]      [4]
        position_ids   [0,1,2,3]  [0,1,2,0]  [0,1,2,3]
        example_index  [0]        [1,2]      [2]
        tail           (no row)

    Args:
        input_ids: list<uint32> (any integer list type; ``ListArray``/``LargeListArray``,
            sliced or not, a ChunkedArray, ``(values, offsets)`` numpy arrays or a list of
            lists), one row per document.
        seq_len: tokens per output row, >= 1.
        eos_id: appended to every document when given.
        bos_id: prepended to every document when given.
        overflow: what to do with a document whose framed length (with bos/eos) exceeds
            ``seq_len``:
            - ``"wrap"``: nothing; it continues into the following rows.
            - ``"truncate"``: keep its first ``seq_len`` framed tokens (bos + the start of the
              content; the eos is cut with the rest, since the document did not end there).
              The cut tokens are counted in ``stats.truncated_tokens``.
            - ``"drop"``: leave it out; its index is in :attr:`PackResult.dropped`.
            In every mode :attr:`PackResult.over_long` lists such documents.

    Returns:
        PackResult whose ``rows`` has columns input_ids list<uint32> (every row exactly
        ``seq_len``), position_ids list<int32> (restart at 0 at every fragment, also for a
        document continued from the previous row), seq_lengths list<int32> (fragment lengths,
        summing to ``seq_len``), example_index list<int64> (input row of each fragment).
        ``tail`` has the same columns and 0 or 1 row shorter than ``seq_len``. A document with
        no tokens after framing (empty, no bos/eos) produces no fragment and is listed in
        :attr:`PackResult.empty`.

    Raises:
        PackingError: seq_len < 1; unknown overflow; an id (or bos/eos) outside uint32; a null
            document.

    Source: Hugging Face ``run_clm.py`` ``group_texts`` and Megatron-LM's GPT dataset
    (concatenate, cut, keep the tail); TRL ``pack_dataset(strategy="wrapped")`` for the
    per-fragment ``position_ids`` and ``seq_lengths``.
    """
    seq_len = _check_seq_len(seq_len)
    _check_overflow(overflow, _CONCAT_OVERFLOW, "pack_concat")
    eos_id = _check_token(eos_id, "eos_id")
    bos_id = _check_token(bos_id, "bos_id")
    values, offsets = _ids(input_ids)
    n = len(offsets) - 1
    lengths = np.diff(offsets)
    b = int(bos_id is not None)
    e = int(eos_id is not None)
    framed = lengths + (b + e)

    over_long = np.flatnonzero(framed > seq_len).astype(np.int64)
    keep = np.arange(n, dtype=np.int64)
    dropped = _EMPTY_I64
    content = lengths.copy()
    eos_flags = np.full(n, e, dtype=np.int64)
    truncated_tokens = 0
    if overflow == "drop" and len(over_long):
        dropped = over_long
        keep = np.flatnonzero(framed <= seq_len).astype(np.int64)
    elif overflow == "truncate" and len(over_long):
        truncated_tokens = int((framed[over_long] - seq_len).sum())
        content[over_long] = np.minimum(lengths[over_long], seq_len - b)
        eos_flags[over_long] = 0

    starts_k = offsets[:-1][keep]
    content_k = content[keep]
    eos_k = eos_flags[keep]
    framed_k = content_k + b + eos_k
    doc_bounds = _cumsum0(framed_k)
    total = int(doc_bounds[-1])

    # the content tokens that stay, in order: all of them unless something was cut or dropped
    if overflow == "drop" and len(dropped):
        cut_starts, cut_lens = offsets[:-1][dropped], lengths[dropped]
    elif overflow == "truncate" and len(over_long):
        cut_starts = offsets[:-1][over_long] + content[over_long]
        cut_lens = lengths[over_long] - content[over_long]
    else:
        cut_starts = cut_lens = _EMPTY_I64
    if len(cut_lens):
        stay = np.ones(len(values), dtype=bool)
        stay[_gather_index(cut_starts, cut_lens)] = False
        kept_values = values[stay]
    else:
        kept_values = values
    if b or e:
        special = np.zeros(total, dtype=bool)
        bos_at = doc_bounds[:-1] if b else _EMPTY_I64
        eos_at = (doc_bounds[1:] - 1)[eos_k == 1] if e else _EMPTY_I64
        special[bos_at] = True
        special[eos_at] = True
        stream = np.empty(total, dtype=np.uint32)
        stream[~special] = kept_values
        stream[bos_at] = bos_id if b else 0
        stream[eos_at] = eos_id if e else 0
    else:
        stream = kept_values

    full = total - total % seq_len
    rows = _cut(stream, doc_bounds, keep, 0, full, seq_len)
    tail = _cut(stream, doc_bounds, keep, full, total, seq_len)
    empty = keep[framed_k == 0]
    stats = PackStats(
        seq_len=seq_len,
        documents=n,
        tokens=int(lengths.sum()),
        packed_tokens=full,
        rows=full // seq_len,
        pad_tokens=0,
        truncated_tokens=truncated_tokens,
        dropped_documents=len(dropped),
        dropped_tokens=int(lengths[dropped].sum()),
        over_long=len(over_long),
        empty_documents=len(empty),
        tail_tokens=total - full,
    )
    return PackResult(rows, tail, stats, dropped=dropped, over_long=over_long, empty=empty)


# --------------------------------------------------------------------------------------------
# best-fit-decreasing


def _best_fit_decreasing(lengths: list[int], seq_len: int) -> list[int]:
    """Bin id of each item; items must come longest first, each 1 <= length <= seq_len.

    Each item goes to the open bin with the least remaining capacity that still fits it (the
    fullest bin it fits into), the lowest bin id among equals; else to a new bin. Open bins are
    kept as a sorted list of the distinct remaining capacities (at most seq_len entries) and a
    min-heap of bin ids per capacity, so one item costs a bisect and a heap operation.
    """
    caps: list[int] = []  # sorted distinct remaining capacities > 0 of open bins
    bins_at: dict[int, list[int]] = {}  # capacity -> heap of bin ids
    out: list[int] = []
    n_bins = 0
    bisect_left, insort, heappop, heappush = (
        bisect.bisect_left,
        bisect.insort,
        heapq.heappop,
        heapq.heappush,
    )
    for length in lengths:
        j = bisect_left(caps, length)
        if j == len(caps):
            bin_id = n_bins
            n_bins += 1
            rest = seq_len - length
        else:
            cap = caps[j]
            heap = bins_at[cap]
            bin_id = heappop(heap)
            if not heap:
                del bins_at[cap]
                del caps[j]
            rest = cap - length
        out.append(bin_id)
        if rest:
            heap = bins_at.get(rest)
            if heap is None:
                bins_at[rest] = [bin_id]
                insort(caps, rest)
            else:
                heappush(heap, bin_id)
    return out


def pack_bfd(
    input_ids: Any,
    labels: Any = None,
    *,
    seq_len: int,
    overflow: str = "truncate",
    pad_id: int | None = None,
    assistant_masks: Any = None,
) -> PackResult:
    """Best-fit-decreasing packing of SFT examples into rows of at most ``seq_len`` tokens.

    Examples are sorted by length, longest first (stable: equal lengths keep input order), and
    each goes into the fullest row it still fits into (lowest row number among equally full
    rows), else into a new row. An example is never split across rows unless
    ``overflow="split"``. Rows come out in the order they were opened; inside a row, examples
    in the order they were placed. The result is fully deterministic.

    Worked example (``seq_len=5``), examples ``[1,2,3], [4,5], [6,7,8,9], [10]``::

        order by length   #2 (4), #0 (3), #1 (2), #3 (1)
        #2 -> new row 0 (1 free); #0 -> new row 1 (2 free); #1 -> row 1 (fits exactly);
        #3 -> row 0
        input_ids      [6,7,8,9,10]  [1,2,3,4,5]
        seq_lengths    [4,1]         [3,2]
        position_ids   [0,1,2,3,0]   [0,1,2,0,1]
        example_index  [2,3]         [0,1]

    Args:
        input_ids: list<uint32> per example (same input forms as :func:`pack_concat`).
        labels: optional list<int> per example, aligned token by token with input_ids
            (-100 = ignored by the loss).
        seq_len: row capacity, >= 1.
        overflow: what to do with an example longer than ``seq_len``:
            - ``"truncate"``: keep its first ``seq_len`` tokens (``stats.truncated_tokens``
              counts the rest);
            - ``"split"``: cut it into ``seq_len`` chunks, each packed as its own example
              (same example_index; position_ids restart in each chunk);
            - ``"drop"``: leave it out; its index is in :attr:`PackResult.dropped`.
        pad_id: when given, every row is padded to ``seq_len``: input_ids with pad_id, labels
            with -100, assistant_masks with 0. The pad run is a fragment of its own: it is the
            last entry of seq_lengths, has example_index -1, and its position_ids run 0, 1, ...
            (so varlen attention keeps it apart from the real examples). When None (default)
            rows are not padded (padding-free).
        assistant_masks: optional list<0/1> per example, aligned with input_ids.

    Returns:
        PackResult whose ``rows`` has columns input_ids list<uint32>, labels list<int64> (if
        given), assistant_masks list<uint8> (if given), position_ids list<int32> (restart at
        every example), seq_lengths list<int32>, example_index list<int64>; each row holds at
        most ``seq_len`` tokens (exactly ``seq_len`` when padded). ``tail`` has 0 rows.
        ``stats.padding_ratio`` = 1 - real tokens / (rows * seq_len), padded or not.
        Empty examples produce no fragment and are listed in :attr:`PackResult.empty`.

    Raises:
        PackingError: seq_len < 1; unknown overflow; an id or pad_id outside uint32; labels or
            assistant_masks not aligned with input_ids (the message names the first row that
            differs); a mask value other than 0/1; a null example.

    Source: TRL ``pack_dataset(strategy="bfd")`` (``trl/data_utils.py``): best-fit-decreasing,
    ``seq_lengths`` and per-example ``position_ids`` for padding-free training.
    """
    seq_len = _check_seq_len(seq_len)
    _check_overflow(overflow, _BFD_OVERFLOW, "pack_bfd")
    pad_id = _check_token(pad_id, "pad_id")
    values, offsets = _ids(input_ids)
    columns = {"input_ids": values}
    if labels is not None:
        lab = _aligned(labels, "labels", offsets)
        _check_range(lab, offsets, "labels", -(2**63), 2**63 - 1)
        columns["labels"] = lab.astype(np.int64, copy=False)
    if assistant_masks is not None:
        mask = _aligned(assistant_masks, "assistant_masks", offsets)
        _check_range(mask, offsets, "assistant_masks", 0, 1)
        columns["assistant_masks"] = mask.astype(np.uint8, copy=False)

    n = len(offsets) - 1
    lengths = np.diff(offsets)
    over_long = np.flatnonzero(lengths > seq_len).astype(np.int64)
    empty = np.flatnonzero(lengths == 0).astype(np.int64)
    dropped = _EMPTY_I64
    truncated_tokens = 0
    split_examples = 0

    # items: (start in values, length, example index), in input order
    item_ex = np.flatnonzero(lengths > 0).astype(np.int64)
    if overflow == "drop":
        dropped = over_long
        item_ex = np.flatnonzero((lengths > 0) & (lengths <= seq_len)).astype(np.int64)
        item_start, item_len = offsets[:-1][item_ex], lengths[item_ex]
    elif overflow == "truncate":
        item_start = offsets[:-1][item_ex]
        item_len = np.minimum(lengths[item_ex], seq_len)
        truncated_tokens = int((lengths[over_long] - seq_len).sum())
    else:  # split
        split_examples = len(over_long)
        chunks = -(-lengths[item_ex] // seq_len)  # ceil
        chunk_no = np.arange(int(chunks.sum()), dtype=np.int64) - np.repeat(
            _cumsum0(chunks)[:-1], chunks
        )
        item_ex = np.repeat(item_ex, chunks)
        item_start = offsets[:-1][item_ex] + chunk_no * seq_len
        item_len = np.minimum(offsets[1:][item_ex] - item_start, seq_len)

    order = np.argsort(-item_len, kind="stable")
    bins = np.asarray(_best_fit_decreasing(item_len[order].tolist(), seq_len), dtype=np.int64)
    # rows in opening order, items inside a row in placement order
    placed = order[np.argsort(bins, kind="stable")]
    row_of_item = np.sort(bins, kind="stable")
    n_rows = int(bins.max()) + 1 if len(bins) else 0
    frag_len = item_len[placed]
    frag_ex = item_ex[placed]
    row_len = np.bincount(row_of_item, weights=frag_len, minlength=n_rows).astype(np.int64)
    frags_per_row = np.bincount(row_of_item, minlength=n_rows).astype(np.int64)
    src = _gather_index(item_start[placed], frag_len)
    packed = {name: col[src] for name, col in columns.items()}
    real_tokens = int(frag_len.sum())

    if pad_id is None or n_rows == 0:
        row_offsets = _cumsum0(row_len)
        frag_offsets = _cumsum0(frags_per_row)
    else:
        pad_len = seq_len - row_len
        fill = {"input_ids": pad_id, "labels": IGNORE_INDEX, "assistant_masks": 0}
        # real tokens sit at the start of each seq_len slot: a bool mask, not an index array
        real = (np.arange(seq_len, dtype=np.int64)[None, :] < row_len[:, None]).ravel()
        for name, col in packed.items():
            out = np.full(n_rows * seq_len, fill[name], dtype=col.dtype)
            out[real] = col
            packed[name] = out
        row_offsets = np.arange(n_rows + 1, dtype=np.int64) * seq_len
        # append one pad fragment (length pad_len, example_index -1) to each row that needs it
        has_pad = (pad_len > 0).astype(np.int64)
        new_frags_per_row = frags_per_row + has_pad
        frag_offsets = _cumsum0(new_frags_per_row)
        pos_real = np.arange(len(frag_len), dtype=np.int64) + np.repeat(
            frag_offsets[:-1] - _cumsum0(frags_per_row)[:-1], frags_per_row
        )
        new_len = np.zeros(int(frag_offsets[-1]), dtype=np.int64)
        new_ex = np.full(int(frag_offsets[-1]), -1, dtype=np.int64)
        new_len[pos_real] = frag_len
        new_ex[pos_real] = frag_ex
        pad_rows = np.flatnonzero(has_pad)
        new_len[frag_offsets[1:][pad_rows] - 1] = pad_len[pad_rows]
        frag_len, frag_ex = new_len, new_ex

    rows = _batch(packed, row_offsets, frag_len, frag_offsets, frag_ex)
    stats = PackStats(
        seq_len=seq_len,
        documents=n,
        tokens=int(lengths.sum()),
        packed_tokens=real_tokens,
        rows=n_rows,
        pad_tokens=n_rows * seq_len - real_tokens,
        truncated_tokens=truncated_tokens,
        dropped_documents=len(dropped),
        dropped_tokens=int(lengths[dropped].sum()),
        over_long=len(over_long),
        split_examples=split_examples,
        empty_documents=len(empty),
    )
    return PackResult(
        rows, rows.slice(0, 0), stats, dropped=dropped, over_long=over_long, empty=empty
    )


# --------------------------------------------------------------------------------------------
# stats and unpacking


def naive_padding_ratio(lengths: Any, seq_len: int) -> float:
    """Padding ratio of one example per row, each truncated to ``seq_len`` (the baseline).

    Args:
        lengths: int [n], example lengths (a numpy array, a sequence, or a list array whose
            row lengths are used).
        seq_len: row length, >= 1.

    Returns:
        ``1 - sum(min(length, seq_len)) / (n * seq_len)``; 0.0 for no examples.

    Raises:
        PackingError: seq_len < 1 or a negative length.
    """
    seq_len = _check_seq_len(seq_len)
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
        return pa.concat_tables([_table(r) for r in rows])
    raise PackingError(
        f"unpack: expected a RecordBatch, a Table or a list of them, got {type(rows).__name__}"
    )


def unpack(rows: Any, column: str = "input_ids") -> Unpacked:
    """Rebuild the packed documents of ``column`` from ``seq_lengths`` and ``example_index``.

    Fragments with the same example_index are joined in row order (the order both pack
    functions write them in); pad runs (example_index -1) are skipped. Documents come back as
    they were packed: with the bos/eos that :func:`pack_concat` added, truncated where the
    overflow mode truncated; dropped and empty documents are absent.

    Args:
        rows: the ``rows`` of a :class:`PackResult`, a Table, or a list of batches/tables
            (e.g. ``[result.rows, result.tail]``).
        column: which token column to rebuild (input_ids, labels, assistant_masks,
            position_ids).

    Returns:
        Unpacked with one document per distinct example_index, ascending.

    Raises:
        PackingError: a missing column, or seq_lengths that do not sum to the row lengths.
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
    row_sums = np.diff(_cumsum0(seq)[frag_offsets])
    row_lens = np.diff(row_offsets)
    if len(row_sums) != len(row_lens) or not np.array_equal(row_sums, row_lens):
        bad = int(np.argmax(row_sums != row_lens)) if len(row_sums) == len(row_lens) else 0
        raise PackingError(
            f"unpack: row {bad}: seq_lengths sum to {int(row_sums[bad])} but {column} has "
            f"{int(row_lens[bad])} values; the rows were not made by pack_concat / pack_bfd"
        )
    frag_starts = _cumsum0(seq)[:-1]
    real = ex >= 0
    frag_starts, seq, ex = frag_starts[real], seq[real], ex[real].astype(np.int64)
    order = np.argsort(ex, kind="stable")
    out_values = values[_gather_index(frag_starts[order], seq[order])]
    index, first = np.unique(ex[order], return_index=True)
    doc_lens = np.add.reduceat(seq[order], first) if len(first) else _EMPTY_I64
    return Unpacked(index=index, values=out_values, offsets=_cumsum0(doc_lens))
