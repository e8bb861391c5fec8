"""Where the committed fixtures are (parity ids, chat renders, the demo's fallback tokenizer)."""

from __future__ import annotations

import os
from pathlib import Path


def fixtures_root() -> Path:
    """The ``fixtures/`` folder of the rmlprep source tree.

    Looked for, in order: ``$RMLPREP_FIXTURES``; beside the package (a clone, or an editable
    install); ``./fixtures`` (a regular ``pip install .`` run from the clone, as the README
    does). When none exists, the first candidate is returned so messages name a real place.
    """
    env = os.environ.get("RMLPREP_FIXTURES")
    candidates = [Path(env)] if env else []
    candidates += [Path(__file__).resolve().parents[1] / "fixtures", Path.cwd() / "fixtures"]
    return next((c for c in candidates if c.is_dir()), candidates[0])
