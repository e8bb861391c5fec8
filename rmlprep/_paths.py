"""Where the committed fixtures are (parity ids, chat renders, the demo's fallback tokenizer)."""

from __future__ import annotations

import os
from pathlib import Path


def fixtures_root() -> Path:
    """The ``fixtures/`` folder of the rmlprep source tree.

    Looked for, in order: ``$RMLPREP_FIXTURES``; beside the package (a clone, or an editable
    install); ``rmlprep/_fixtures`` (the copy a regular ``pip install .`` puts in the wheel);
    ``./fixtures``. When none exists, the first candidate is returned.
    """
    env = os.environ.get("RMLPREP_FIXTURES")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[1] / "fixtures")
    installed = Path(__file__).resolve().parent / "_fixtures"  # the wheel's copy (pyproject)
    candidates += [installed, Path.cwd() / "fixtures"]
    return next((c for c in candidates if c.is_dir()), candidates[0])
