"""The signals that stop a command as Ctrl-C does: SIGTERM and SIGHUP.

SIGTERM (``kill``, ``docker stop``, a scheduler's time limit) and SIGHUP (the terminal or SSH
session closed; ``kill -HUP``) raise :class:`Stopped` where the run is, so that it unwinds as
Ctrl-C does: the pool is stopped, temporaries removed, the lock released, and the command
exits ``128 + signal`` (143, 129) with one line. SIGHUP's default action ended a run on the
spot: exit 129, a ``train-NNNNN.parquet.tmp-PID`` and the folder's lock left behind. A SIGHUP
that is ignored when the command starts (``nohup``) stays ignored. Pool workers ignore both
(:mod:`rmlprep.pipeline.engines`): a terminal's hangup signals the whole process group.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Stopped", "signals_unwind", "STOP_SIGNALS", "stopped_by"]

#: the signals :func:`signals_unwind` turns into :class:`Stopped`, with the line's words
STOP_SIGNALS: dict[int, str] = {signal.SIGTERM: "terminated (SIGTERM)"}
if hasattr(signal, "SIGHUP"):  # not on Windows
    STOP_SIGNALS[signal.SIGHUP] = "hung up (SIGHUP: the terminal or session closed)"


#: the first stop signal that raised :class:`Stopped` in this process, or None. The command then
#: unwinds, says its one line and exits ``128 + signum``; a stop signal after the block (the
#: handlers put back: the console script's :func:`rmlprep.console._terminated`) is ignored
#: there, so that a closed terminal's second SIGHUP adds no second line.
stopped_by: int | None = None


class Stopped(KeyboardInterrupt):
    """A stop signal (:data:`STOP_SIGNALS`) raised where the command is.

    Attributes:
        signum: the signal's number; ``128 + signum`` is the exit status, as a shell reports a
            process the signal ended.
        words: what stopped it, for the command's one line (``terminated (SIGTERM)``).
    """

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = int(signum)
        self.words = STOP_SIGNALS.get(self.signum, f"stopped by signal {self.signum}")


def _raise(signum, frame) -> None:
    # From the first stop signal on, the others are ignored until signals_unwind puts the previous
    # handlers back: a second one raised Stopped again inside the unwinding (a closed terminal
    # signals twice: the shell passes its SIGHUP on to its jobs, the kernel sends one as the shell
    # exits), cutting the pool's terminate short, so a worker it had not killed yet kept running
    # and the command hung at exit joining it.
    global stopped_by
    for s in STOP_SIGNALS:
        if signal.getsignal(s) is _raise:
            signal.signal(s, signal.SIG_IGN)
    if stopped_by is None:
        stopped_by = signum
    raise Stopped(signum)


@contextmanager
def signals_unwind() -> Iterator[None]:
    """Each of :data:`STOP_SIGNALS` raises :class:`Stopped` while the block runs (the main
    thread only, where signal handlers live; elsewhere nothing changes); the previous handlers
    come back after it. A SIGHUP ignored on entry (``nohup``) is left ignored. Once one has
    stopped the block, the others are ignored until it ends, so the unwinding (the pool
    terminated, temporaries removed, the lock released) is not cut short by a second one."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in STOP_SIGNALS:
        if signum != signal.SIGTERM and signal.getsignal(signum) == signal.SIG_IGN:
            continue  # nohup asked for the run to outlive its terminal
        previous[signum] = signal.signal(signum, _raise)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)  # None: set outside Python
