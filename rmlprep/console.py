"""The ``rmlprep`` console script.

Loading :mod:`rmlprep.cli` imports pyarrow and numpy (~0.3 s); a Ctrl-C in that window would
print a ``KeyboardInterrupt`` traceback from inside ``import pyarrow``, before
:func:`rmlprep.cli.main` could turn it into its one line. This module imports nothing heavy, so
the script's entry point catches an interrupt there too: ``rmlprep: interrupted``, exit 130
(128 + SIGINT, as :func:`rmlprep.cli.main` exits on one during a run).
"""

from __future__ import annotations

import sys


def entry() -> None:
    """Import :mod:`rmlprep.cli` and run :func:`rmlprep.cli.entry` (which exits with its status)."""
    try:
        from .cli import entry as run
    except KeyboardInterrupt:
        sys.stderr.write("rmlprep: interrupted\n")
        sys.exit(130)
    run()
