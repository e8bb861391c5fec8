"""The numpy and Arrow helpers of the pack functions: runs of indices and positions, zero-copy
conversions, and the output batch built from flat values and offsets."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

UINT32_MAX = 2**32 - 1
INT32_MAX = 2**31 - 1
EMPTY_I64 = np.zeros(0, dtype=np.int64)


def gather_index(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
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


def fragment_positions(frag_lengths: np.ndarray, total: int) -> np.ndarray:
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


def sorted_union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sorted distinct values of two 1-D arrays: ``np.union1d(a, b)``, same dtype and values.

    ``np.union1d`` (through ``np.unique``) imports ``numpy.ma`` on its first call: ~16 ms of CPU
    in every worker process that packs a unit, more than the union of a unit's bounds costs.
    """
    both = np.concatenate((a, b))
    both.sort()
    keep = np.empty(len(both), dtype=bool)
    keep[:1] = True
    np.not_equal(both[1:], both[:-1], out=keep[1:])
    return both[keep]


def cumsum0(lengths: np.ndarray) -> np.ndarray:
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


def list_values(arr: pa.Array) -> np.ndarray:
    """A numpy view of the values of a list array's rows (its slice's, unlike ``.values``), for
    list arrays without null rows. ``ListArray.flatten`` gives the same but imports
    ``pyarrow.compute`` on its first call (~0.04 s of CPU in every worker process)."""
    offsets = to_numpy(arr.offsets)
    if len(offsets) == 0:
        return to_numpy(arr.values)[:0]
    return to_numpy(arr.values)[offsets[0]:offsets[-1]]


def list_array(values: np.ndarray, offsets: np.ndarray, value_type: pa.DataType) -> pa.Array:
    """Arrow list column from flat values and int64 offsets (large_list past 2**31 - 1)."""
    child = from_numpy(values, value_type)
    if offsets[-1] > INT32_MAX:
        return pa.LargeListArray.from_arrays(from_numpy(offsets.astype(np.int64)), child)
    return pa.ListArray.from_arrays(from_numpy(offsets.astype(np.int32)), child)


TYPES = {
    "input_ids": pa.uint32(),
    "labels": pa.int32(),
    "assistant_masks": pa.uint8(),
    "position_ids": pa.int32(),
    "seq_lengths": pa.int32(),
    "example_index": pa.int64(),
}


def make_batch(
    token_columns: dict[str, np.ndarray],
    row_offsets: np.ndarray,
    frag_lengths: np.ndarray,
    frag_offsets: np.ndarray,
    frag_index: np.ndarray,
) -> pa.RecordBatch:
    """Build the output batch; position_ids are derived from the fragment lengths."""
    positions = fragment_positions(frag_lengths, int(row_offsets[-1]))
    arrays, names = [], []
    for name in ("input_ids", "labels", "assistant_masks"):
        if name in token_columns:
            arrays.append(list_array(token_columns[name], row_offsets, TYPES[name]))
            names.append(name)
    arrays.append(list_array(positions, row_offsets, TYPES["position_ids"]))
    arrays.append(list_array(frag_lengths.astype(np.int32), frag_offsets, TYPES["seq_lengths"]))
    arrays.append(list_array(frag_index.astype(np.int64), frag_offsets, TYPES["example_index"]))
    names += ["position_ids", "seq_lengths", "example_index"]
    return pa.RecordBatch.from_arrays(arrays, names=names)
