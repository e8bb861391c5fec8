"""The output folder and the writers: atomic commits, done markers and their verification."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from rmlprep.errors import ConfigError, OutputError
from rmlprep.pipeline.output import MARKER_VERSION, OutputFolder
from rmlprep.pipeline.owner import check_shards
from rmlprep.pipeline.writers import ParquetWriter
from rmlprep.shards import read_shard_metadata, rejects_name, sha256_file, shard_name


def _table():
    return pa.table({"input_ids": pa.array([[1, 2, 3], [4]], type=pa.list_(pa.uint32()))})


def test_parquet_writer_commits_atomically_with_metadata(tmp_path):
    out = OutputFolder(tmp_path)
    files = ParquetWriter().write(out, 3, _table(), {"rmlprep.config_hash": "abc", "rmlprep.version": "0.1.0"})
    p = tmp_path / shard_name(3)
    assert files == {"train-00003.parquet": sha256_file(p)}
    assert [x.name for x in tmp_path.iterdir()] == [p.name]  # no temporary left behind
    assert read_shard_metadata(p) == {"rmlprep.config_hash": "abc", "rmlprep.version": "0.1.0"}
    assert pq.read_table(p).column("input_ids").to_pylist() == [[1, 2, 3], [4]]


def test_same_input_same_bytes(tmp_path):
    a = ParquetWriter().write(OutputFolder(tmp_path / "a"), 0, _table(), {"k": "v"})
    b = ParquetWriter().write(OutputFolder(tmp_path / "b"), 0, _table(), {"k": "v"})
    assert a == b


def test_failed_write_leaves_nothing(tmp_path):
    out = OutputFolder(tmp_path)

    def half(f):
        f.write(b"PAR1 half a shard")
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputError, match="No space left on device; the disk is full"):
        out.commit("train-00000.parquet", half)
    assert list(tmp_path.iterdir()) == []


def test_verify_done(tmp_path):
    out = OutputFolder(tmp_path)
    digest = ParquetWriter().write(out, 0, _table(), {})[shard_name(0)]
    assert out.verify_done(0, "h") == (None, "no done marker")
    out.write_done(0, {"sha256": digest, "config_hash": "h", "rejects": 0, "marker_version": MARKER_VERSION})
    m, why = out.verify_done(0, "h")
    assert m is not None and why == ""
    assert out.verify_done(0, "other")[1] == "done marker is for another config"
    p = tmp_path / shard_name(0)
    p.write_bytes(p.read_bytes()[:-5] + b"xxxxx")
    assert out.verify_done(0, "h")[1] == "shard sha256 differs from its done marker"
    p.unlink()
    assert out.verify_done(0, "h")[1] == "shard file missing"
    out.write_done(0, {"sha256": digest, "config_hash": "h", "rejects": 2, "marker_version": MARKER_VERSION})
    ParquetWriter().write(out, 0, _table(), {})
    assert out.verify_done(0, "h")[1] == "rejects file missing"


def test_verify_done_checks_the_rejects_file_by_sha256(tmp_path):
    """The marker vouches for the rejects file as for the shard: by its sha256. A rejects file
    of another run (two records instead of one: a stale or mixed file) redoes the unit; so does
    one beside a marker that records no rejects."""
    out = OutputFolder(tmp_path)
    digest = ParquetWriter().write(out, 0, _table(), {})[shard_name(0)]
    out.write_lines(rejects_name(0), [{"row": 1, "reason": "text is null"}])
    rej = tmp_path / rejects_name(0)
    marker = {"sha256": digest, "config_hash": "h", "rejects": 1, "rejects_sha256": sha256_file(rej),
              "marker_version": MARKER_VERSION}
    out.write_done(0, marker)
    assert out.verify_done(0, "h")[1] == ""
    out.write_lines(rejects_name(0), [{"row": 1, "reason": "text is null"}, {"row": 3, "reason": "text is null"}])
    assert out.verify_done(0, "h")[1] == "rejects file sha256 differs from its done marker"
    out.write_done(0, {**marker, "rejects": 0, "rejects_sha256": None})
    assert out.verify_done(0, "h")[1] == "a rejects file the done marker does not vouch for"
    rej.unlink()
    assert out.verify_done(0, "h")[1] == ""


def test_a_version_2_marker_is_accepted_only_without_rejects(tmp_path):
    """Version 3 adds the rejects file's sha256 to the marker and, for pretraining, nothing else
    to what a marker vouches for: a version-2 marker of a unit with no rejects is kept (its shard
    is still checked); one with rejects cannot vouch for their content and is redone. (sft: see
    the next test.)"""
    assert MARKER_VERSION == 3
    out = OutputFolder(tmp_path)
    digest = ParquetWriter().write(out, 0, _table(), {})[shard_name(0)]
    out.write_done(0, {"sha256": digest, "config_hash": "h", "rejects": 0, "marker_version": 2})
    assert out.verify_done(0, "h")[1] == ""
    out.write_lines(rejects_name(0), [{"row": 1, "reason": "text is null"}])
    out.write_done(0, {"sha256": digest, "config_hash": "h", "rejects": 1, "marker_version": 2})
    assert out.verify_done(0, "h")[1] == "done marker of marker version 2 (this rmlprep writes 3)"
    out.write_done(0, {"sha256": "0" * 64, "config_hash": "h", "rejects": 0, "marker_version": 1})
    assert out.verify_done(0, "h")[1] == "done marker of marker version 1 (this rmlprep writes 3)"


def test_a_version_2_sft_marker_is_redone_even_without_rejects(tmp_path):
    """Version 3 also changed what sft shards hold (a tool definition keeps its JSON nulls; an
    Arrow struct's missing keys are absent, not null), so a version-2 marker of an sft unit,
    known by the chat counts every sft marker carries (``no_assistant``), is redone even with
    no rejects and an intact shard; the same marker without them (pretraining) is kept."""
    out = OutputFolder(tmp_path)
    digest = ParquetWriter().write(out, 0, _table(), {})[shard_name(0)]
    v2 = {"sha256": digest, "config_hash": "h", "rejects": 0, "marker_version": 2}
    out.write_done(0, {**v2, "no_assistant": 0, "reasoning_dropped": 0})
    assert out.verify_done(0, "h")[1] == "done marker of marker version 2 (this rmlprep writes 3)"
    out.write_done(0, v2)
    assert out.verify_done(0, "h")[1] == ""


def test_a_marker_of_another_marker_version_is_redone(tmp_path):
    """Whatever an earlier marker lacks, one version number says it: a marker without one
    (version 0, before markers were numbered) or of another version is redone, with one reason,
    before its shard is hashed (here: there is no shard at all)."""
    out = OutputFolder(tmp_path)
    out.write_done(0, {"config_hash": "h", "rejects": 0})
    assert out.verify_done(0, "h") == (None, f"done marker of marker version 0 (this rmlprep writes {MARKER_VERSION})")
    out.write_done(0, {"config_hash": "h", "rejects": 0, "marker_version": MARKER_VERSION + 1})
    assert out.verify_done(0, "h")[1] == (f"done marker of marker version {MARKER_VERSION + 1} "
                                          f"(this rmlprep writes {MARKER_VERSION})")
    out.write_done(0, {"config_hash": "h", "rejects": 0, "marker_version": MARKER_VERSION})
    assert out.verify_done(0, "h")[1] == "shard file missing"


def test_verify_done_and_check_compare_the_tokenizer(tmp_path):
    out = OutputFolder(tmp_path)
    digest = ParquetWriter().write(out, 0, _table(), {})[shard_name(0)]
    out.write_done(0, {"sha256": digest, "config_hash": "h", "rejects": 0, "tokenizer": "a" * 64,
                       "marker_version": MARKER_VERSION})
    assert out.verify_done(0, "h", None, "a" * 64)[1] == ""
    assert out.verify_done(0, "h", None, "b" * 64)[1] == "done marker is for another tokenizer"
    with pytest.raises(ConfigError, match=f"another tokenizer .*tokenizer {'a' * 12}, this run's {'b' * 12}"):
        check_shards(out, "h", overwrite=False, tokenizer="b" * 64)
    check_shards(out, "h", overwrite=False, tokenizer="a" * 64)
    out.write_done(0, {"sha256": digest, "config_hash": "h", "rejects": 0})  # an earlier rmlprep's marker
    check_shards(out, "h", overwrite=False, tokenizer="b" * 64)  # not refused: the unit is redone instead
    assert out.verify_done(0, "h", None, "b" * 64)[1] == "done marker is for another tokenizer"


def test_check_refuses_another_config_and_overwrite_clears(tmp_path):
    out = OutputFolder(tmp_path)
    ParquetWriter().write(out, 0, _table(), {})
    out.write_done(0, {"config_hash": "old"})
    out.write_lines("rejects/rejects-00000.jsonl", [{"row": 1}])
    (tmp_path / "train-00001.parquet.tmp-999").write_bytes(b"left by a killed run")
    with pytest.raises(ConfigError, match="--overwrite"):
        check_shards(out, "new", overwrite=False)
    check_shards(out, "old", overwrite=False)
    assert not (tmp_path / "train-00001.parquet.tmp-999").exists()
    check_shards(out, "new", overwrite=True)
    assert out.list("train-*") == out.list("shard-*") == out.list("rejects/*") == []


def test_check_replaces_another_config_s_units_without_a_document(tmp_path):
    """Markers of another config (or tokenizer) whose units hold no document (every row rejected)
    are not refused: nothing was trained on them. One unit with a document among them is."""
    out = OutputFolder(tmp_path)
    out.write_done(0, {"config_hash": "old", "documents": 0, "rejects": 3})
    out.write_done(1, {"config_hash": "new", "documents": 0, "tokenizer": "a" * 64})
    assert check_shards(out, "new", overwrite=False, tokenizer="b" * 64) == 2
    out.write_done(2, {"config_hash": "old", "documents": 5})
    with pytest.raises(ConfigError, match=r"different config \(1 done marker, e.g. shard-00002.done.json"):
        check_shards(out, "new", overwrite=False, tokenizer="b" * 64)
