"""Memory bound for fuzz examples (the time bound is Hypothesis's ``deadline``).

``within(megabytes)`` samples the process's resident set every 5 ms in a thread (a budget-sized
allocation takes far longer than that to touch) and fails the example when the peak grows past
``megabytes`` over the RSS at entry.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:  # not Linux: no sampling, the time bound still holds
        return 0


@contextmanager
def within(megabytes: int = 500):
    base = rss_bytes()
    peak = [base]
    stop = threading.Event()

    def sample():
        while not stop.wait(0.005):
            peak[0] = max(peak[0], rss_bytes())

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()
        peak[0] = max(peak[0], rss_bytes())
    grew = (peak[0] - base) / 1e6
    assert grew < megabytes, f"the example grew the resident set by {grew:.0f} MB (budget {megabytes} MB)"
