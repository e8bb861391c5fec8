"""Shard files as a reader of an output folder sees them: names, metadata, checksums.

Layout of an output folder::

    train-00000.parquet          packed rows of unit 0 (metadata: see SHARD_METADATA_KEYS)
    shard-00000.done.json        done marker: written last, after the shard and its rejects
    rejects/rejects-00000.jsonl  bad rows of unit 0 (only when there are any)
    manifest.json  stats.json  lengths.png  README.md (dataset card)

The shards are named as the Hugging Face Hub names a ``train`` split's files (``datasets``'
split patterns, ``datasets.data_files.DEFAULT_PATTERNS_SPLIT_IN_FILENAME``): with one file
name matching ``train-*``, ``datasets.load_dataset("parquet", data_dir=OUTPUT)`` reads only
the files so named, never the markers, the reports or ``rejects/``. No other file of the folder
may match a split pattern (``train``, ``test``, ``validation``, ``dev``, ``eval``... between
``-``/``_``/``.``/digits). Earlier versions named the shards ``shard-NNNNN.parquet``
(:data:`LEGACY_SHARD_GLOB`): such a folder is refused, not resumed (see
:func:`rmlprep.pipeline.owner.check_shards`).

Writing them (atomically, in that order) is :mod:`rmlprep.pipeline.output` and
:mod:`rmlprep.pipeline.writers`. The bytes of a shard depend only on (unit, config,
tokenizer): no time, host, path or worker count goes into it.
"""

from __future__ import annotations

import hashlib
import os

import pyarrow.parquet as pq

__all__ = [
    "SHARD_METADATA_KEYS",
    "LEGACY_SHARD_GLOB",
    "shard_name",
    "marker_name",
    "rejects_name",
    "sha256_file",
    "read_shard_metadata",
]

#: Parquet key-value metadata of every shard (all values are strings).
SHARD_METADATA_KEYS = ("rmlprep.version", "rmlprep.tokenizer_fingerprint", "rmlprep.config_hash",
                       "rmlprep.unit", "rmlprep.pipeline", "rmlprep.seq_len")


#: The Parquet shards of an output folder written before the ``train-NNNNN.parquet`` names.
LEGACY_SHARD_GLOB = "shard-*.parquet"


def shard_name(index: int) -> str:
    """Unit ``index``'s Parquet shard: ``train-{index:05d}.parquet`` (the Hub's split name)."""
    return f"train-{index:05d}.parquet"


def marker_name(index: int) -> str:
    return f"shard-{index:05d}.done.json"


def rejects_name(index: int) -> str:
    return f"rejects/rejects-{index:05d}.jsonl"


def sha256_file(path: str | os.PathLike) -> str:
    """The sha256 hex of a file's bytes, read in 1 MB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_shard_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The ``rmlprep.*`` key-value metadata of a shard."""
    md = pq.read_schema(path).metadata or {}
    return {k.decode(): v.decode() for k, v in md.items() if k.startswith(b"rmlprep.")}
