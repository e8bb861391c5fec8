"""The BPE merge loop (pure Python reference; the native extension mirrors it).

A word starts as one symbol per unit (one byte for byte-level BPE, one code point for
SentencePiece BPE). Symbols form a linked list over positions; every adjacent pair that can
merge goes into a min-heap keyed by ``(priority, left position)``. A popped candidate merges
only if it is still current (the left symbol and its right neighbour still hold the ids that
were queued; ids only ever grow longer, so equal ids mean an unchanged pair), else it is
stale. A merge grows the left symbol, unlinks the right one and queues the two new
neighbour pairs. Lowest priority first, leftmost on ties.

Source: tokenizers ``models/bpe/word.rs`` (``merge_all``), sentencepiece ``bpe_model.cc``
(``Model::SampleEncode`` agenda, higher score first, leftmost on ties), tiktoken
``src/lib.rs`` (``byte_pair_merge``: lowest rank of the merged bytes, leftmost on ties).
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heapify, heappop, heappush

__all__ = ["merge_loop"]

#: Looks up a pair of symbol ids -> (priority, merged id), or None when they do not merge.
PairLookup = Callable[[int, int], "tuple[float, int] | None"]


def merge_loop(symbols: list[int], pair: PairLookup) -> list[int]:
    """Apply merges to ``symbols`` until none applies; returns the final ids.

    Args:
        symbols: initial symbol ids, left to right (every entry a valid id).
        pair: ``pair(left_id, right_id) -> (priority, merged_id) | None``; lower priority
            merges first (merge rank, or minus the merged token's score).
    Returns:
        The ids after all merges (a new list; ``symbols`` is not modified).
    """
    n = len(symbols)
    if n < 2:
        return list(symbols)
    sym = list(symbols)
    nxt = list(range(1, n + 1))
    nxt[-1] = -1
    prv = list(range(-1, n - 1))
    heap = []
    for i in range(n - 1):
        p = pair(sym[i], sym[i + 1])
        if p is not None:
            heap.append((p[0], i, sym[i], sym[i + 1], p[1]))
    if not heap:
        return sym
    heapify(heap)
    while heap:
        _prio, i, a, b, merged = heappop(heap)
        j = nxt[i]
        if j < 0 or sym[i] != a or sym[j] != b:
            continue  # stale
        sym[i] = merged
        sym[j] = -1
        k = nxt[j]
        nxt[i] = k
        if k >= 0:
            prv[k] = i
            p = pair(merged, sym[k])
            if p is not None:
                heappush(heap, (p[0], i, merged, sym[k], p[1]))
        h = prv[i]
        if h >= 0:
            p = pair(sym[h], merged)
            if p is not None:
                heappush(heap, (p[0], h, sym[h], merged, p[1]))
    out = []
    i = 0
    while i >= 0:
        out.append(sym[i])
        i = nxt[i]
    return out
