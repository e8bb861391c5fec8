"""The ``[run]`` section of a run config: how a run goes (workers, progress, engine, Ray's
address) and when its rejects make it fail (``max_reject_fraction``); none of it changes the
output bytes, so none of it is in the config hash (:data:`rmlprep.config._NOT_HASHED`)."""

from __future__ import annotations

import importlib.util
from typing import Any

from .errors import ConfigError

__all__ = ["ENGINES", "check_run"]

ENGINES = ("local", "ray")
_PROGRESS = ("auto", "bar", "log", "none")


def _check_engine(engine: str, where: str) -> None:
    """Refuse an unknown engine, and engine "ray" when Ray is not installed (before any work)."""
    if engine not in ENGINES:
        raise ConfigError(f"{where}: must be one of {list(ENGINES)}, got {engine!r}")
    if engine == "ray":
        if importlib.util.find_spec("ray") is None:
            raise ConfigError(f"{where} = 'ray' needs Ray, which is not installed: pip install 'rmlprep[ray]'")


def check_reject_fraction(value: Any, where: str) -> float:
    """``run.max_reject_fraction`` (or ``--max-reject-fraction``) as a float from 0 to 1.

    Raises:
        ConfigError: not a number from 0 to 1.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigError(f"{where}: must be a number from 0 to 1 (a share of the rows read; 1 never fails the "
                          f"run), got {value!r}")
    return float(value)


def check_run(run: dict[str, Any], w: str) -> None:
    """Validate ``[run]`` in place (``w``: the config file's prefix for messages).

    Raises:
        ConfigError: naming ``run.KEY``.
    """
    if run["workers"] < 0:
        raise ConfigError(f"{w}run.workers: must be >= 0 (0 = all cores), got {run['workers']}")
    if run["histogram"] not in (True, False, "auto"):  # type-checked: no 0 or 1 gets here
        raise ConfigError(f"{w}run.histogram: must be true, false or \"auto\", got {run['histogram']!r}")
    if run["progress"] not in _PROGRESS:
        raise ConfigError(f"{w}run.progress: must be one of {list(_PROGRESS)}, got {run['progress']!r}")
    _check_engine(run["engine"], f"{w}run.engine")
    if run["ray_address"] is not None:
        if run["engine"] != "ray":
            raise ConfigError(f"{w}run.ray_address: only used with engine = \"ray\"; set run.engine = \"ray\" "
                              "or remove ray_address")
        if not run["ray_address"]:
            raise ConfigError(f"{w}run.ray_address: empty; leave it out to start a local Ray, or give "
                              "\"auto\" or \"ray://host:10001\"")
    run["max_reject_fraction"] = check_reject_fraction(run["max_reject_fraction"], f"{w}run.max_reject_fraction")
