"""Standard streams that a closed pipe does not turn into a stopped run.

``rmlprep run ... | head`` (or ``2>&1 | head``): the run's progress, summary and ``shards:``
line are reports, and their reader leaving must not stop the run halfway, as a
``BrokenPipeError`` from a ``print`` did (part of the shards, no manifest, exit 0).
:func:`reports_never_stop_a_run` makes writes after that go nowhere (the recipe of Python's
``signal`` documentation: the descriptor is pointed at ``os.devnull``, so the interpreter's last
flush does not fail either) while the run goes on.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["reports_never_stop_a_run"]


class _PipeSafe:
    """A text stream whose writes after its reader left (``rmlprep run ... | head``) go nowhere
    instead of raising: the file descriptor is pointed at os.devnull (the recipe of Python's
    ``signal`` docs, so the interpreter's last flush does not fail either)."""

    def __init__(self, stream):
        self._stream = stream

    def _call(self, name, *a):
        try:
            return getattr(self._stream, name)(*a)
        except BrokenPipeError:
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, self._stream.fileno())
                os.close(devnull)
            except (OSError, ValueError):  # no descriptor (a test's capture): just stop writing
                pass
            self._stream = open(os.devnull, "w", encoding="utf-8")
            return getattr(self._stream, name)(*a)

    def write(self, text):
        return self._call("write", text)

    def flush(self):
        return self._call("flush")

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextmanager
def reports_never_stop_a_run() -> Iterator[None]:
    """``rmlprep run``'s progress, summary and ``shards:`` line are reports: a closed pipe on
    stdout or stderr must not stop the run halfway (it did, and exited 0 with part of the
    shards and no manifest). The streams are put back afterwards."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _PipeSafe(sys.stdout), _PipeSafe(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
