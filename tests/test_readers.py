"""Readers: every format in ../shared/corpora/formats, CSV, JSONL line splitting, units."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from rmlprep.errors import ConfigError
from rmlprep.readers import plan_units, read_unit, stdlib_files

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
FORMATS = SHARED / "corpora" / "formats"
needs_shared = pytest.mark.skipif(not FORMATS.is_dir(), reason=f"{FORMATS} is absent (the shared corpora are not checked out)")


def inp(paths, **kw):
    d = {"paths": [str(p) for p in paths], "format": "auto", "split": None, "unit_bytes": 16_000_000,
         "unit_rows": 50_000, "batch_rows": 256, "max_bytes": 4_000_000}
    d.update(kw)
    return d


def read_all(units, column):
    values, rows, errors = [], [], []
    for u in units:
        for b in read_unit(u, column, 256):
            values.extend(b.values.to_pylist() if hasattr(b.values, "to_pylist") else b.values)
            rows.extend(b.rows.tolist())
            errors.extend(b.errors)
            assert len(b.rows) <= 256
    return values, rows, errors


@needs_shared
@pytest.mark.parametrize("name", ["chat_hh.jsonl.gz", "chat_hh.jsonl.zst", "chat_hh.parquet", "chat_hh.hf_datasetdict"])
def test_every_shared_format(name):
    units = plan_units(inp([FORMATS / name], unit_rows=500))
    values, rows, errors = read_all(units, "messages")
    assert len(values) == 2312 and not errors
    assert rows == list(range(2312))
    assert all(isinstance(m, list) and {"role", "content"} <= set(m[0]) for m in values)
    if name.endswith(("parquet", "datasetdict")):
        assert len(units) > 1  # row-range units


@needs_shared
def test_formats_agree():
    a = read_all(plan_units(inp([FORMATS / "chat_hh.jsonl.gz"])), "messages")[0]
    b = read_all(plan_units(inp([FORMATS / "chat_hh.jsonl.zst"])), "messages")[0]
    assert a == b
    c = read_all(plan_units(inp([FORMATS / "chat_hh.parquet"])), "messages")[0]
    assert sorted(json.dumps(x) for x in a) == sorted(json.dumps(x) for x in c)


@needs_shared
def test_datasetdict_split_errors():
    with pytest.raises(ConfigError, match="input.split"):
        plan_units(inp([FORMATS / "chat_hh.hf_datasetdict"], split="nope"))


def test_jsonl_splits_on_newline_only(tmp_path):
    texts = ["a\u2028b", "c\u0085d\re", "f\r\n", "plain", "\x0c"]
    p = tmp_path / "t.jsonl"
    # ensure_ascii=False keeps U+2028 / U+0085 / CR as raw characters in the file
    p.write_bytes("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts).encode())
    values, rows, errors = read_all(plan_units(inp([p])), "text")
    assert values == texts and rows == [0, 1, 2, 3, 4] and not errors
    assert len(p.read_text(encoding="utf-8").splitlines()) > len(texts)  # what splitlines() would do


def test_jsonl_byte_range_units_cover_every_line_once(tmp_path):
    p = tmp_path / "big.jsonl"
    lines = [json.dumps({"text": f"doc {i} " + "x" * (i % 50)}) for i in range(2000)]
    p.write_text("\n".join(lines) + "\n")
    units = plan_units(inp([p], unit_bytes=5_000))
    assert len(units) > 5
    values, rows, _ = read_all(units, "text")
    assert rows == list(range(2000))
    assert values == [json.loads(x)["text"] for x in lines]
    assert units[1].first_row == rows[sum(1 for _ in read_all([units[0]], "text")[1])]


def test_jsonl_bad_lines_reported(tmp_path):
    p = tmp_path / "bad.jsonl.gz"
    with gzip.open(p, "wb") as f:
        f.write(b'{"text": "ok"}\n{not json}\n\n[1, 2]\n{"other": 1}\n\xff\xfe\n{"text": null}\n')
    values, rows, errors = read_all(plan_units(inp([p])), "text")
    assert values == ["ok", None] and rows == [0, 6]
    reasons = dict(errors)
    assert "not valid JSON" in reasons[1]
    assert "not an object" in reasons[3]
    assert "no 'text' field" in reasons[4]
    assert "not valid UTF-8" in reasons[5]


def test_csv(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text('id,text\n1,"hello, world"\n2,"two\nlines"\n3,123\n4,\n', encoding="utf-8")
    values, rows, errors = read_all(plan_units(inp([p])), "text")
    assert values == ["hello, world", "two\nlines", "123", ""]
    assert rows == [0, 1, 2, 3] and not errors


def test_glob_and_missing(tmp_path):
    for i in (2, 1):
        (tmp_path / f"p{i}.jsonl").write_text(json.dumps({"text": str(i)}) + "\n")
    units = plan_units(inp([tmp_path / "p*.jsonl"]))
    assert [Path(u.path).name for u in units] == ["p1.jsonl", "p2.jsonl"]
    with pytest.raises(ConfigError, match="matches no file"):
        plan_units(inp([tmp_path / "q*.jsonl"]))
    with pytest.raises(ConfigError, match="does not exist"):
        plan_units(inp([tmp_path / "none.jsonl"]))
    with pytest.raises(ConfigError, match="cannot tell the format"):
        (tmp_path / "x.txt").write_text("x")
        plan_units(inp([tmp_path / "x.txt"]))


def test_stdlib_is_deterministic():
    root, files = stdlib_files(300_000)
    assert files == sorted(files) and sum(n for _, n in files) >= 300_000
    assert stdlib_files(300_000) == (root, files)
    units = plan_units(inp(["<stdlib>"], format="stdlib", max_bytes=300_000, unit_bytes=100_000))
    values, _, errors = read_all(units, "text")
    assert len(values) == len(files) and not errors
    assert all(not f.startswith(("test/", "site-packages/")) for f, _ in files)
