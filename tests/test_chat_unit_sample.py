"""rmlprep.chat_unit_sample: the unit sample of the live chat check (which rows each worker renders)."""

from __future__ import annotations

import numpy as np

from rmlprep.chat_unit_sample import UnitSample, row_keys


def test_row_keys_are_splitmix64():
    """splitmix64's first two outputs from state 0 (Vigna's splitmix64.c; java.util.SplittableRandom
    with seed 0): 0xE220A8397B1DCDAF, then 0x6E789E6AA1B965F4 — the finalizer of states
    0x9E3779B97F4A7C15 and twice it, which row_keys gives rows 0 and 0x9E3779B97F4A7C15 (as int64)."""
    golden = np.array([0x9E3779B97F4A7C15], dtype=np.uint64).view(np.int64)[0]
    got = row_keys(np.array([0, golden], dtype=np.int64))
    assert got.dtype == np.uint64 and got.tolist() == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4]


def _sample(rows: int, k: int, batch: int) -> list[int]:
    s = UnitSample(k)
    for lo in range(0, rows, batch):
        r = np.arange(lo, min(rows, lo + batch), dtype=np.int64)
        s.offer(r, [f"conv {i}" for i in r], None)
    taken = s.taken()
    assert [m for _, m, _ in taken] == [f"conv {r}" for r, _, _ in taken] and all(t is None for *_, t in taken)
    return [r for r, _, _ in taken]


def test_unit_sample_is_spread_and_independent_of_the_batches():
    """20 of 1,000 rows: the same rows whatever the batch size (so whatever input.batch_rows),
    in row order, not the head: they fall in most tenths of the unit. A unit of fewer rows than
    asked gives them all."""
    rows = _sample(1000, 20, 1000)
    assert len(rows) == 20 == len(set(rows)) and rows == sorted(rows)
    assert _sample(1000, 20, 7) == rows == _sample(1000, 20, 64)
    assert len({r // 100 for r in rows}) >= 6 and max(rows) >= 500, rows
    assert _sample(12, 20, 5) == list(range(12))
