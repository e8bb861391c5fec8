"""rmlprep.chat_unit_sample: which rows each worker's live chat check compares."""

from __future__ import annotations

import bisect
import math

import numpy as np
import pytest

from rmlprep.chat_unit_sample import UnitSample, row_keys

M64 = (1 << 64) - 1


def splitmix64(x: int) -> int:
    """Vigna's splitmix64.c, ``next()`` with state ``x`` before the increment, in Python ints: an
    independent computation of :func:`row_keys`."""
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def test_row_keys_are_splitmix64():
    """splitmix64's first two outputs from state 0 (Vigna's splitmix64.c; java.util.SplittableRandom
    with seed 0): 0xE220A8397B1DCDAF, then 0x6E789E6AA1B965F4 — the finalizer of states
    0x9E3779B97F4A7C15 and twice it, which row_keys gives rows 0 and 0x9E3779B97F4A7C15 (as int64)."""
    golden = np.array([0x9E3779B97F4A7C15], dtype=np.uint64).view(np.int64)[0]
    got = row_keys(np.array([0, golden], dtype=np.int64))
    assert got.dtype == np.uint64 and got.tolist() == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4]
    assert row_keys(np.arange(500, dtype=np.int64)).tolist() == [splitmix64(r) for r in range(500)]


def _taken(rows: int, k: int, batch: int, first: int = 0) -> list[int]:
    s = UnitSample(k)
    got: list[int] = []
    for lo in range(first, first + rows, batch):
        r = np.arange(lo, min(first + rows, lo + batch), dtype=np.int64)
        got += [int(r[i]) for i in s.take(r)]
    return got


def _records(rows: range, k: int) -> list[int]:
    """The rule, computed apart: row r is compared when fewer than k of the rows before it have
    a lower key (its key is among the k lowest so far)."""
    seen: list[int] = []
    out = []
    for r in rows:
        key = splitmix64(r)
        if bisect.bisect_left(seen, key) < k:
            out.append(r)
        bisect.insort(seen, key)
    return out


@pytest.mark.parametrize("rows,k", [pytest.param(1000, 20, id="1000-rows-k20"),
                                    pytest.param(5000, 300, id="5000-rows-k300"),
                                    pytest.param(650, 1000, id="650-rows-default-k")])
def test_unit_sample_is_the_lowest_keys_so_far_whatever_the_batches(rows, k):
    """The rows compared are those whose key is among the k lowest so far, computed here apart
    (Python splitmix64, a sorted list), the same whatever the batch size (so whatever
    input.batch_rows, worker count or engine), in row order; the k rows of lowest key of the
    whole unit (sorted by the independent keys) are among them; a unit of k rows or fewer is
    compared whole (650 rows, the default 1000: all 650)."""
    want = _records(range(rows), k)
    for batch in (1, 7, 64, 1024):
        assert _taken(rows, k, batch) == want, batch
    lowest = sorted(range(rows), key=splitmix64)[:k]
    assert set(lowest) <= set(want)
    if rows <= k:
        assert want == list(range(rows))


def test_unit_sample_grows_as_the_log_of_the_unit():
    """A unit of n > k rows compares about k·(1 + ln(n/k)) rows (row j with chance min(1, k/(j+1)):
    k + k·(H_n − H_k)), spread over it. k = 100, n = 20,000 (a unit of the second file starting at
    row 20,000 too): 100·(1 + ln 200) = 630; within a fifth of it, in every tenth of the unit."""
    for first in (0, 20_000):
        got = _taken(20_000, 100, 512, first=first)
        assert got == _records(range(first, first + 20_000), 100)
        assert abs(len(got) - 100 * (1 + math.log(200))) < 126, len(got)
        assert {(r - first) // 2000 for r in got} == set(range(10))
