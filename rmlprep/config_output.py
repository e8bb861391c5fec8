"""The ``[output]`` section of a run config: the format of the unit files and the Parquet
options, each refused where the format does not read it (:func:`check_output`)."""

from __future__ import annotations

from typing import Any

from .errors import ConfigError

__all__ = ["OUTPUT_FORMATS", "COMPRESSION", "PARQUET_ONLY", "check_output"]

OUTPUT_FORMATS = ("parquet", "megatron")
#: pyarrow's Parquet codecs (``pq.write_table(compression=...)``, case-insensitive)
COMPRESSION = ("zstd", "snappy", "gzip", "brotli", "lz4", "none")
#: the Parquet writer's options: a Megatron run writes no Parquet, so a value other than their
#: defaults (:data:`rmlprep.config.SCHEMA`) would be ignored, and is refused
PARQUET_ONLY = ("compression", "row_group_rows")


def check_output(out: dict[str, Any], pipeline: str, w: str, defaults: dict[str, Any]) -> None:
    """Validate ``[output]`` (``output.dir`` already resolved; ``w``: the config file's prefix
    for messages; ``defaults``: each key's default).

    Raises:
        ConfigError: naming ``output.KEY``: an unknown format or codec, a row group of no row,
            Megatron output for the sft pipeline, or a Parquet option (``compression``,
            ``row_group_rows``) set to other than its default with ``format = "megatron"``,
            whose .bin/.idx files it would not change (the default is accepted: a manifest's
            config holds every key).
    """
    if out["format"] not in OUTPUT_FORMATS:
        raise ConfigError(f"{w}output.format: must be one of {list(OUTPUT_FORMATS)}, got {out['format']!r}")
    if out["format"] == "megatron" and pipeline != "pretrain":
        raise ConfigError(f"{w}output.format = \"megatron\": Megatron indexed datasets hold pretraining documents; "
                          f"the {pipeline} pipeline writes parquet")
    if str(out["compression"]).lower() not in COMPRESSION:
        raise ConfigError(f"{w}output.compression: must be one of {list(COMPRESSION)}, got {out['compression']!r}")
    if out["row_group_rows"] < 1:
        raise ConfigError(f"{w}output.row_group_rows: must be >= 1, got {out['row_group_rows']}")
    if out["format"] == "megatron":
        for key in PARQUET_ONLY:
            value = out[key].lower() if isinstance(out[key], str) else out[key]
            if value != defaults[key]:
                raise ConfigError(f"{w}output.{key} = {out[key]!r}: only Parquet output reads it, and output.format = "
                                  "\"megatron\" writes .bin/.idx files (uncompressed token ids, no row groups), "
                                  f"which it would not change; remove output.{key}, or write Parquet")
