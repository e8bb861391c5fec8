"""SFT truncation that trains nothing (used by :mod:`.pack`).

With ``pack.overflow = "truncate"`` a conversation keeps its first ``seq_len`` tokens; when no
assistant token is among them, the row it becomes has every label -100 and trains nothing, as
a conversation without an answer. Under ``chat.no_assistant = "reject"`` the pack stage finds
such conversations here (:func:`untrained_after_truncation`), rejects them with
:func:`untrained_reason` (stage ``pack``, with the conversation as read) and packs the rest
(:func:`without`).

With ``pack.overflow = "split"`` a conversation longer than ``seq_len`` becomes chunks of
``seq_len`` tokens, each its own example (position_ids restart, so no chunk sees another); a
chunk holding no assistant token after its first trains nothing and only takes row space (its
first label is -100: :func:`rmlprep.pack_bfd` masks every fragment's first label). Such chunks
are kept (each is part of its conversation, which still trains) and counted
(:func:`untrained_chunks`, ``untrained_chunks`` in the markers, manifest and summary).
"""

from __future__ import annotations

import numpy as np

__all__ = ["untrained_after_truncation", "untrained_chunks", "untrained_reason", "without"]


def untrained_after_truncation(masks: np.ndarray, offs: np.ndarray, seq_len: int) -> np.ndarray:
    """Indices of the conversations that hold assistant tokens but none in their first
    ``seq_len`` tokens: what ``pack.overflow = "truncate"`` keeps of them trains nothing.

    Args:
        masks: uint8 [total tokens], the conversations' assistant masks one after another.
        offs: int64 [n + 1], the conversations' offsets into ``masks``.

    >>> m = np.array([0, 0, 1, 1,  0, 1, 0,  0, 0], dtype=np.uint8)
    >>> untrained_after_truncation(m, np.array([0, 4, 7, 9]), 2).tolist()
    [0]
    """
    n = len(offs) - 1
    if not n:
        return np.zeros(0, dtype=np.int64)
    c = np.zeros(len(masks) + 1, dtype=np.int64)
    np.cumsum(masks != 0, out=c[1:])
    starts = offs[:-1]
    whole = c[offs[1:]] - c[starts]
    head = c[np.minimum(starts + seq_len, offs[1:])] - c[starts]
    return np.flatnonzero((whole > 0) & (head == 0))


def untrained_chunks(masks: np.ndarray, offs: np.ndarray, seq_len: int) -> int:
    """How many of the ``seq_len``-token chunks that ``pack.overflow = "split"`` cuts from the
    conversations longer than ``seq_len`` hold no assistant token after their first (whose
    label :func:`rmlprep.pack_bfd` writes -100), counted over the conversations that hold one
    (a conversation that trains nothing is ``chat.no_assistant``'s business, not the split's).

    Args: as :func:`untrained_after_truncation`.

    Worked example (``seq_len`` 2): the first conversation (7 tokens, assistant tokens at 4,
    5 and 6) is cut into [0, 2), [2, 4), [4, 6), [6, 7), of which three train nothing: two
    without an assistant token and [6, 7), whose only one is its first; the second is not
    over-long, the third trains nothing at all:

    >>> m = np.array([0, 0, 0, 0, 1, 1, 1,  0, 1,  0, 0, 0], dtype=np.uint8)
    >>> untrained_chunks(m, np.array([0, 7, 9, 12]), 2)
    3
    """
    n = len(offs) - 1
    if not n:
        return 0
    c = np.zeros(len(masks) + 1, dtype=np.int64)
    np.cumsum(masks != 0, out=c[1:])
    starts, ends = offs[:-1], offs[1:]
    long = np.flatnonzero((ends - starts > seq_len) & (c[ends] > c[starts]))
    if not len(long):
        return 0
    chunks = -(-(ends[long] - starts[long]) // seq_len)
    first = np.zeros(len(long), dtype=np.int64)
    np.cumsum(chunks[:-1], out=first[1:])
    k = np.arange(int(chunks.sum()), dtype=np.int64) - np.repeat(first, chunks)
    cs = np.repeat(starts[long], chunks) + k * seq_len
    ce = np.minimum(cs + seq_len, np.repeat(ends[long], chunks))
    return int(np.count_nonzero(c[ce] == c[cs + 1]))  # the first token's label is -100 (pack_bfd)


def untrained_reason(tokens: int, seq_len: int) -> str:
    """The reject reason of a conversation that truncation would leave with no trained token.

    >>> untrained_reason(70, 64)
    'conversation of 70 tokens has no assistant token in its first pack.seq_len = 64 tokens: truncated (pack.overflow = "truncate") it trains nothing (chat.no_assistant = "reject")'
    """
    return (f"conversation of {tokens:,} tokens has no assistant token in its first pack.seq_len = {seq_len} "
            'tokens: truncated (pack.overflow = "truncate") it trains nothing (chat.no_assistant = "reject")')


def without(gone: np.ndarray, ids: np.ndarray, labels: np.ndarray, masks: np.ndarray, lens: np.ndarray,
            src_rows: np.ndarray, first: int):
    """The window's conversations less those at indices ``gone``.

    Args:
        gone: int64 [k], indices of conversations to leave out.
        ids, labels, masks: [total tokens] each, the conversations one after another.
        lens, src_rows: int64 [n], each conversation's length and source row.
        first: the example_index of the window's first conversation.
    Returns:
        ``(ids, labels, masks, lens, src_rows, offs, index)`` of the kept conversations;
        ``offs`` int64 [m + 1] their offsets, ``index`` int64 [m] their example_index (a left-out
        conversation leaves its number unused).

    >>> w = without(np.array([1]), np.arange(5), np.arange(5), np.ones(5), np.array([2, 2, 1]), np.array([7, 8, 9]), 10)
    >>> [x.tolist() for x in w]
    [[0, 1, 4], [0, 1, 4], [1.0, 1.0, 1.0], [2, 1], [7, 9], [0, 2, 3], [10, 12]]
    """
    keep = np.ones(len(lens), dtype=bool)
    keep[gone] = False
    tok_keep = np.repeat(keep, lens)
    lens = lens[keep]
    offs = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offs[1:])
    return (ids[tok_keep], labels[tok_keep], masks[tok_keep], lens, src_rows[keep], offs,
            np.flatnonzero(keep) + first)
