"""Shard files: names, metadata, checksums (reading an output folder)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from rmlprep.pipeline.output import OutputFolder
from rmlprep.pipeline.writers import ParquetWriter
from rmlprep.shards import SHARD_METADATA_KEYS, marker_name, read_shard_metadata, rejects_name, sha256_file, shard_name


def test_names():
    assert (shard_name(3), marker_name(3), rejects_name(3)) == (
        "train-00003.parquet", "shard-00003.done.json", "rejects/rejects-00003.jsonl")
    assert "rmlprep.config_hash" in SHARD_METADATA_KEYS


def test_metadata_and_sha256(tmp_path):
    files = ParquetWriter().write(OutputFolder(tmp_path), 3, pa.table({"input_ids": pa.array([[1, 2]], pa.list_(pa.uint32()))}),
                                  {"rmlprep.config_hash": "abc"})
    p = tmp_path / shard_name(3)
    assert files == {p.name: sha256_file(p)}
    assert read_shard_metadata(p) == {"rmlprep.config_hash": "abc"}
    assert pq.read_table(p).column("input_ids").to_pylist() == [[1, 2]]
