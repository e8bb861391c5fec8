"""Shard files: atomic writes, metadata, done markers and their verification."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from rmlprep.shards import (
    read_shard_metadata,
    sha256_file,
    shard_name,
    verify_done,
    write_done,
    write_shard,
)


def _table():
    return pa.table({"input_ids": pa.array([[1, 2, 3], [4]], type=pa.list_(pa.uint32()))})


def test_write_shard_atomic_with_metadata(tmp_path):
    p = tmp_path / shard_name(3)
    digest = write_shard(p, _table(), {"rmlprep.config_hash": "abc", "rmlprep.version": "0.1.0"})
    assert p.name == "shard-00003.parquet"
    assert digest == sha256_file(p)
    assert [x.name for x in tmp_path.iterdir()] == [p.name]  # no temporary left behind
    assert read_shard_metadata(p) == {"rmlprep.config_hash": "abc", "rmlprep.version": "0.1.0"}
    assert pq.read_table(p).column("input_ids").to_pylist() == [[1, 2, 3], [4]]


def test_same_input_same_bytes(tmp_path):
    a = write_shard(tmp_path / "a.parquet", _table(), {"k": "v"})
    b = write_shard(tmp_path / "b.parquet", _table(), {"k": "v"})
    assert a == b


def test_verify_done(tmp_path):
    p = tmp_path / shard_name(0)
    digest = write_shard(p, _table(), {})
    assert verify_done(tmp_path, 0, "h") == (None, "no done marker")
    write_done(tmp_path, 0, {"sha256": digest, "config_hash": "h", "rejects": 0})
    m, why = verify_done(tmp_path, 0, "h")
    assert m is not None and why == ""
    assert verify_done(tmp_path, 0, "other")[1] == "done marker is for another config"
    p.write_bytes(p.read_bytes()[:-5] + b"xxxxx")
    assert verify_done(tmp_path, 0, "h")[1] == "shard sha256 differs from its done marker"
    p.unlink()
    assert verify_done(tmp_path, 0, "h")[1] == "shard file missing"
