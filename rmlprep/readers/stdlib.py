"""The demo input: the running interpreter's standard-library ``.py`` files."""

from __future__ import annotations

import os
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..reject_kinds import Reason
from .base import Batch, Unit

_STDLIB_SKIP = {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__"}


def stdlib_files(max_bytes: int) -> tuple[str, list[tuple[str, int]]]:
    """The running interpreter's standard-library ``.py`` files, sorted by relative path.

    Test suites and installed packages are left out; files are taken in order until
    ``max_bytes`` is reached (the last one included). Deterministic for one interpreter.

    Returns:
        (stdlib directory, [(relative path, size in bytes), ...]).
    """
    root = sysconfig.get_paths()["stdlib"]
    found: list[tuple[str, int]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _STDLIB_SKIP and not d.startswith("."))
        for name in filenames:
            if name.endswith(".py"):
                full = os.path.join(dirpath, name)
                found.append((os.path.relpath(full, root).replace(os.sep, "/"), os.path.getsize(full)))
    found.sort()
    out, total = [], 0
    for rel, n in found:
        if total >= max_bytes:
            break
        out.append((rel, n))
        total += n
    return root, out


def read_stdlib(unit: Unit, batch_rows: int) -> Iterator[Batch]:
    values: list[str] = []
    rows: list[int] = []
    errors: list[tuple[int, str]] = []
    nbytes = 0
    for i, rel in enumerate(unit.files):
        data = Path(unit.path, rel).read_bytes()
        nbytes += len(data)
        try:
            values.append(data.decode("utf-8"))
            rows.append(i)
        except UnicodeDecodeError as e:
            errors.append((i, Reason(f"{rel}: not valid UTF-8 ({e.reason} at byte {e.start})", "not_utf8")))
        if len(values) + len(errors) >= batch_rows:
            yield Batch(values, np.asarray(rows, dtype=np.int64), nbytes, errors)
            values, rows, errors, nbytes = [], [], [], 0
    if values or errors:
        yield Batch(values, np.asarray(rows, dtype=np.int64), nbytes, errors)
