"""Planning: the config's ``[input]`` → the run's units of work, in a stable order.

The per-format planning (byte ranges of JSONL, row groups of Parquet, ...) is
:func:`rmlprep.readers.plan_units`; a plan never depends on the number of workers or the engine.
"""

from __future__ import annotations

from ..config import RunConfig
from ..errors import ConfigError
from ..readers import Unit, plan_units

__all__ = ["plan"]


def plan(cfg: RunConfig) -> list[Unit]:
    """The run's units (``unit.index`` = position = shard number).

    Raises:
        ConfigError: a path that does not exist, a glob matching nothing, an unknown format,
            or no input rows at all.
    """
    units = plan_units(cfg["input"])
    if not units:
        raise ConfigError("input.paths: no input rows to process")
    return units
