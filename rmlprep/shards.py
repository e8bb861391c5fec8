"""Shard files: atomic Parquet writes, key-value metadata, done markers, rejects, verification.

Layout of an output directory::

    shard-00000.parquet        packed rows of unit 0 (metadata: see SHARD_METADATA_KEYS)
    shard-00000.done.json      done marker: written last, after the shard and its rejects
    rejects/rejects-00000.jsonl  bad rows of unit 0 (only when there are any)
    manifest.json  stats.json  lengths.png

Every file is written to ``<name>.tmp-<pid>`` and renamed, so a reader (or a rerun after
SIGKILL) sees either the complete file or none. A unit counts as done only when its marker
exists, names the same config hash, and the shard's sha256 matches the marker; anything else
is redone from scratch. The bytes of a shard depend only on (unit, config, tokenizer): no
time, host, path or worker count goes into it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = [
    "SHARD_METADATA_KEYS",
    "shard_name",
    "marker_name",
    "rejects_name",
    "write_shard",
    "write_json_atomic",
    "write_done",
    "read_done",
    "verify_done",
    "sha256_file",
    "read_shard_metadata",
]

SHARD_METADATA_KEYS = ("rmlprep.version", "rmlprep.tokenizer_fingerprint", "rmlprep.config_hash",
                       "rmlprep.unit", "rmlprep.pipeline", "rmlprep.seq_len")


def shard_name(index: int) -> str:
    return f"shard-{index:05d}.parquet"


def marker_name(index: int) -> str:
    return f"shard-{index:05d}.done.json"


def rejects_name(index: int) -> str:
    return f"rejects/rejects-{index:05d}.jsonl"


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _tmp(path: Path) -> Path:
    return path.with_name(f"{path.name}.tmp-{os.getpid()}")


def write_shard(path: str | os.PathLike, table: pa.Table, metadata: dict[str, str], *,
                compression: str = "zstd", row_group_rows: int = 4096) -> str:
    """Write ``table`` as Parquet to ``path`` atomically; return the file's sha256 hex.

    Args:
        table: the packed rows (list columns, see :mod:`rmlprep.packing`).
        metadata: string key-value pairs stored in the Parquet footer (schema metadata).
        compression: Parquet codec ("zstd", "snappy", "none", ...).
        row_group_rows: rows per row group.
    """
    path = Path(path)
    tmp = _tmp(path)
    meta = dict(table.schema.metadata or {})
    meta.update({k.encode(): v.encode() for k, v in metadata.items()})
    table = table.replace_schema_metadata(meta)
    pq.write_table(table, tmp, compression=compression, row_group_size=row_group_rows,
                   use_dictionary=False, write_statistics=False, store_schema=True)
    digest = sha256_file(tmp)
    os.replace(tmp, path)
    return digest


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON, via a temporary file and rename."""
    path = Path(path)
    tmp = _tmp(path)
    tmp.write_text(json.dumps(obj, indent=1, ensure_ascii=False, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def write_lines_atomic(path: str | os.PathLike, records: list[dict[str, Any]]) -> None:
    """Write JSON lines atomically (one object per line)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp(path)
    with open(tmp, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def write_done(out_dir: Path, index: int, record: dict[str, Any]) -> None:
    """Write the done marker of unit ``index`` (last step of a unit)."""
    write_json_atomic(out_dir / marker_name(index), record)


def read_done(out_dir: Path, index: int) -> dict[str, Any] | None:
    """The done marker of unit ``index``, or None when absent or unreadable."""
    p = out_dir / marker_name(index)
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def verify_done(out_dir: Path, index: int, config_hash: str) -> tuple[dict[str, Any] | None, str]:
    """Check that unit ``index`` is done for this config.

    Returns:
        (marker, "") when the marker exists, names ``config_hash`` and the shard's sha256
        matches; else (None, reason) with the reason the unit must be redone.
    """
    m = read_done(out_dir, index)
    if m is None:
        return None, "no done marker"
    if m.get("config_hash") != config_hash:
        return None, "done marker is for another config"
    shard = out_dir / shard_name(index)
    if not shard.exists():
        return None, "shard file missing"
    if sha256_file(shard) != m.get("sha256"):
        return None, "shard sha256 differs from its done marker"
    if m.get("rejects") and not (out_dir / rejects_name(index)).exists():
        return None, "rejects file missing"
    return m, ""


def read_shard_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The ``rmlprep.*`` key-value metadata of a shard."""
    md = pq.read_schema(path).metadata or {}
    return {k.decode(): v.decode() for k, v in md.items() if k.startswith(b"rmlprep.")}
