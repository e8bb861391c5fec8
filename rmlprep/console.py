"""The ``rmlprep`` console script.

Loading :mod:`rmlprep.cli` imports pyarrow and numpy (~0.3 s); a Ctrl-C in that window would
print a ``KeyboardInterrupt`` traceback from inside ``import pyarrow``, before
:func:`rmlprep.cli.main` could turn it into its one line. This module imports nothing heavy, so
the script's entry point catches an interrupt there too: ``rmlprep: interrupted``, exit 130
(128 + SIGINT, as :func:`rmlprep.cli.main` exits on one during a run).

SIGTERM in that window (a scheduler's time limit, ``docker stop`` right after a start) ended the
process silently, with no line to say it had been stopped, since :func:`rmlprep.cli.main`
installs its handler only once it runs: :func:`_terminated` says it and exits 143 there too
(SIGHUP, a closed terminal: 129, unless ``nohup`` ignores it).
"""

from __future__ import annotations

import os
import signal
import sys


def _terminated(signum, frame) -> None:
    """SIGTERM or SIGHUP outside a command (while rmlprep.cli loads, before or after
    :func:`rmlprep.cli.main` handles it): nothing of a run is being written, so say so and exit
    128 + the signal (143, 129) at once. After a command a stop signal has already stopped
    (:data:`rmlprep.cli_signals.stopped_by`), it is ignored: that command has said its line and is
    exiting with its status (a closed terminal signals twice: the shell's SIGHUP, then the
    kernel's, which could come after the handlers were put back and printed a second line)."""
    if getattr(sys.modules.get("rmlprep.cli_signals"), "stopped_by", None) is not None:
        return
    hup = signum != signal.SIGTERM
    try:
        sys.stderr.write("rmlprep: hung up (SIGHUP)\n" if hup else "rmlprep: terminated (SIGTERM)\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # a hung-up terminal takes no more
        pass
    os._exit(128 + signum)


def entry() -> None:
    """Import :mod:`rmlprep.cli` and run :func:`rmlprep.cli.entry` (which exits with its status)."""
    signal.signal(signal.SIGTERM, _terminated)  # main replaces it while a command runs, then restores it
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:  # nohup: stays ignored
        signal.signal(signal.SIGHUP, _terminated)
    try:
        from .cli import entry as run
    except KeyboardInterrupt:
        sys.stderr.write("rmlprep: interrupted\n")
        sys.exit(130)
    run()
