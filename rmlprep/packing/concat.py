"""Concat packing (pretraining): documents framed by bos/eos, concatenated, cut every seq_len."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from .arrays import EMPTY_I64, cumsum0, gather_index, make_batch, sorted_union
from .common import PackResult, PackStats, check_overflow, check_seq_len, check_token, checked_ids

_CONCAT_OVERFLOW = ("wrap", "truncate", "drop")


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
    breaks = sorted_union(row_bounds, inner)
    frag_starts = breaks[:-1]
    frag_lengths = np.diff(breaks)
    frag_offsets = np.searchsorted(frag_starts, row_bounds, side="left").astype(np.int64)
    # the document holding each fragment's first token (side="right" skips empty documents)
    frag_doc = doc_index[np.searchsorted(doc_bounds, frag_starts, side="right") - 1]
    return make_batch(
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
    :attr:`PackResult.tail`, never lost, and not in ``rows``: write
    :attr:`PackResult.all_rows` (``rows`` then ``tail``) for the last batch.

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
        seq_len: tokens per output row, 1 to 2**24 (:data:`~rmlprep.packing.common.MAX_SEQ_LEN`).
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
        PackingError: seq_len not an int from 1 to 2**24; unknown overflow; an id (or bos/eos)
            outside uint32; a null document.

    Source: Hugging Face ``run_clm.py`` ``group_texts`` and Megatron-LM's GPT dataset
    (concatenate, cut, keep the tail); TRL ``pack_dataset(strategy="wrapped")`` for the
    per-fragment ``position_ids`` and ``seq_lengths``.
    """
    seq_len = check_seq_len(seq_len)
    check_overflow(overflow, _CONCAT_OVERFLOW, "pack_concat")
    eos_id = check_token(eos_id, "eos_id")
    bos_id = check_token(bos_id, "bos_id")
    values, offsets = checked_ids(input_ids)
    n = len(offsets) - 1
    lengths = np.diff(offsets)
    b = int(bos_id is not None)
    e = int(eos_id is not None)
    framed = lengths + (b + e)

    over_long = np.flatnonzero(framed > seq_len).astype(np.int64)
    keep = np.arange(n, dtype=np.int64)
    dropped = EMPTY_I64
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
    doc_bounds = cumsum0(framed_k)
    total = int(doc_bounds[-1])

    # the content tokens that stay, in order: all of them unless something was cut or dropped
    if overflow == "drop" and len(dropped):
        cut_starts, cut_lens = offsets[:-1][dropped], lengths[dropped]
    elif overflow == "truncate" and len(over_long):
        cut_starts = offsets[:-1][over_long] + content[over_long]
        cut_lens = lengths[over_long] - content[over_long]
    else:
        cut_starts = cut_lens = EMPTY_I64
    if len(cut_lens):
        stay = np.ones(len(values), dtype=bool)
        stay[gather_index(cut_starts, cut_lens)] = False
        kept_values = values[stay]
    else:
        kept_values = values
    if b or e:
        special = np.zeros(total, dtype=bool)
        bos_at = doc_bounds[:-1] if b else EMPTY_I64
        eos_at = (doc_bounds[1:] - 1)[eos_k == 1] if e else EMPTY_I64
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
