"""Best-fit-decreasing packing (SFT): whole examples into rows of at most seq_len tokens."""

from __future__ import annotations

import bisect
import heapq
from typing import Any

import numpy as np

from .arrays import EMPTY_I64, cumsum0, gather_index, make_batch
from .common import (IGNORE_INDEX, PackResult, PackStats, aligned, check_overflow, check_range, check_seq_len,
                     check_token, checked_ids)

_BFD_OVERFLOW = ("truncate", "split", "drop")


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
            (-100 = ignored by the loss), each from -2**31 to 2**31 - 1. The first label of
            every fragment is written -100 (of every example, and of every chunk of
            ``overflow="split"``): see the module docstring.
        seq_len: row capacity, 1 to 2**24 (:data:`~rmlprep.packing.common.MAX_SEQ_LEN`).
        overflow: what to do with an example longer than ``seq_len``:
            - ``"truncate"``: keep its first ``seq_len`` tokens (``stats.truncated_tokens``
              counts the rest);
            - ``"split"``: cut it into ``seq_len`` chunks, each packed as its own example
              (same example_index; position_ids restart in each chunk; its first label -100);
            - ``"drop"``: leave it out; its index is in :attr:`PackResult.dropped`.
        pad_id: when given, every row is padded to ``seq_len``: input_ids with pad_id, labels
            with -100, assistant_masks with 0. The pad run is a fragment of its own: it is the
            last entry of seq_lengths, has example_index -1, and its position_ids run 0, 1, ...
            (so varlen attention keeps it apart from the real examples). When None (default)
            rows are not padded (padding-free).
        assistant_masks: optional list<0/1> per example, aligned with input_ids.

    Returns:
        PackResult whose ``rows`` has columns input_ids list<uint32>, labels list<int32> (if
        given), assistant_masks list<uint8> (if given), position_ids list<int32> (restart at
        every example), seq_lengths list<int32>, example_index list<int64>; each row holds at
        most ``seq_len`` tokens (exactly ``seq_len`` when padded). ``tail`` has 0 rows.
        ``stats.padding_ratio`` = 1 - real tokens / (rows * seq_len), padded or not.
        Empty examples produce no fragment and are listed in :attr:`PackResult.empty`.

    Raises:
        PackingError: seq_len not an int from 1 to 2**24; unknown overflow; an id or pad_id
            outside uint32; a label outside int32; labels or assistant_masks not aligned with input_ids (the message
            names the first row that differs); a mask value other than 0/1; a null example.

    Source: TRL ``pack_dataset(strategy="bfd")`` (``trl/data_utils.py``): best-fit-decreasing,
    ``seq_lengths`` and per-example ``position_ids`` for padding-free training.
    """
    seq_len = check_seq_len(seq_len)
    check_overflow(overflow, _BFD_OVERFLOW, "pack_bfd")
    pad_id = check_token(pad_id, "pad_id")
    values, offsets = checked_ids(input_ids)
    columns = {"input_ids": values}
    if labels is not None:
        lab = aligned(labels, "labels", offsets)
        check_range(lab, offsets, "labels", -(2**31), 2**31 - 1)
        columns["labels"] = lab.astype(np.int32, copy=False)
    if assistant_masks is not None:
        mask = aligned(assistant_masks, "assistant_masks", offsets)
        check_range(mask, offsets, "assistant_masks", 0, 1)
        columns["assistant_masks"] = mask.astype(np.uint8, copy=False)

    n = len(offsets) - 1
    lengths = np.diff(offsets)
    over_long = np.flatnonzero(lengths > seq_len).astype(np.int64)
    empty = np.flatnonzero(lengths == 0).astype(np.int64)
    dropped = EMPTY_I64
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
            cumsum0(chunks)[:-1], chunks
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
    src = gather_index(item_start[placed], frag_len)
    packed = {name: col[src] for name, col in columns.items()}
    if "labels" in packed:  # every fragment's first label: see the module docstring (TRL, transformers)
        packed["labels"][cumsum0(frag_len)[:-1]] = IGNORE_INDEX
    real_tokens = int(frag_len.sum())

    if pad_id is None or n_rows == 0:
        row_offsets = cumsum0(row_len)
        frag_offsets = cumsum0(frags_per_row)
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
        frag_offsets = cumsum0(new_frags_per_row)
        pos_real = np.arange(len(frag_len), dtype=np.int64) + np.repeat(
            frag_offsets[:-1] - cumsum0(frags_per_row)[:-1], frags_per_row
        )
        new_len = np.zeros(int(frag_offsets[-1]), dtype=np.int64)
        new_ex = np.full(int(frag_offsets[-1]), -1, dtype=np.int64)
        new_len[pos_real] = frag_len
        new_ex[pos_real] = frag_ex
        pad_rows = np.flatnonzero(has_pad)
        new_len[frag_offsets[1:][pad_rows] - 1] = pad_len[pad_rows]
        frag_len, frag_ex = new_len, new_ex

    rows = make_batch(packed, row_offsets, frag_len, frag_offsets, frag_ex)
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
