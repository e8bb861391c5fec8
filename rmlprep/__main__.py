"""``python -m rmlprep``: the ``rmlprep`` console script (:func:`rmlprep.console.entry`), for an
environment whose scripts folder is not on PATH. It printed "No module named rmlprep.__main__"
(exit 1), which is neither of the CLI's exit codes."""

from .console import entry

if __name__ == "__main__":
    entry()
