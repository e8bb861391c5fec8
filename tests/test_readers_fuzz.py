"""Fuzzing the readers: mutated and truncated JSONL, CSV, Parquet, Arrow, .gz, .zst, .bz2 inputs.

Property: planning and reading every unit either yields batches or raises an rmlprep error
(``RmlprepError``), within 2 s (Hypothesis ``deadline``) and 500 MB of resident memory
(:func:`fuzzlimits.within`). When it yields, the accounting holds: no row number is reported
twice, and for plain JSONL every line is a value, a reject or a blank line, exactly once.

Inputs start from a small valid file of the format, then get one to three mutations: cut at a
byte, bytes overwritten, bytes inserted, a span duplicated. Seeds that found bugs stay below as
regular tests. ``RMLPREP_FUZZ_EXAMPLES=N`` runs N fresh random examples per test instead.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import os
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzzlimits import within
from rmlprep.errors import RmlprepError
from rmlprep.readers import plan_units, read_unit

# CI runs the same 60 examples per test; RMLPREP_FUZZ_EXAMPLES=5000 explores new ones locally.
_N = int(os.environ.get("RMLPREP_FUZZ_EXAMPLES", "0"))
FUZZ = settings(max_examples=_N or 60, deadline=2000, derandomize=not _N,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


def inp(path, **kw):
    d = {"paths": [str(path)], "format": "auto", "split": None, "unit_bytes": 300, "unit_rows": 7,
         "batch_rows": 5, "max_bytes": 1}
    d.update(kw)
    return d


def read_everything(path: Path, column: str = "text", **kw):
    """(values, rows, error rows, blank) of the file, or the RmlprepError it raised."""
    try:
        values, rows, errs, blank = [], [], [], 0
        for u in plan_units(inp(path, **kw)):
            for b in read_unit(u, column, 5):
                n = len(b.values)
                assert n == len(b.rows) and n <= 5
                values.extend(b.values.to_pylist() if hasattr(b.values, "to_pylist") else b.values)
                rows.extend(b.rows.tolist())
                errs.extend(r for r, _ in b.errors)
                assert all(isinstance(why, str) and why and "\n" not in why for _, why in b.errors)
                blank += b.blank
        return values, rows, errs, blank
    except RmlprepError as e:
        assert "\n" not in str(e), f"multi-line message: {e!r}"
        return e


def no_row_twice(res) -> None:
    if isinstance(res, RmlprepError):
        return
    _, rows, errs, _ = res
    every = rows + errs
    assert len(set(every)) == len(every), "a row number is reported twice"


@st.composite
def mutated(draw, base: bytes) -> bytes:
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["cut", "overwrite", "insert", "duplicate"]))
        at = draw(st.integers(0, len(data)))
        if kind == "cut":
            data = data[:at]
        elif kind == "overwrite":
            chunk = draw(st.binary(min_size=1, max_size=8))
            data[at:at + len(chunk)] = chunk
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            n = draw(st.integers(1, 64))
            data[at:at] = data[at:at + n]
    return bytes(data)


def _jsonl(draw) -> bytes:
    rows = draw(st.lists(st.one_of(
        TEXT.map(lambda t: {"text": t}),
        st.fixed_dictionaries({"text": TEXT, "n": st.integers()}),
        st.just({"other": 1}),
        st.just(""),  # a blank line
    ), min_size=1, max_size=30))
    return b"".join((json.dumps(r, ensure_ascii=draw(st.booleans())).encode() if r != "" else b"") + b"\n"
                    for r in rows)


def _compress(draw, data: bytes, kind: str) -> bytes:
    if kind == "gz":
        return gzip.compress(data)
    if kind == "bz2":
        return bz2.compress(data)
    if kind == "zst":
        cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=4)))
        out, prev = b"", 0
        for c in cuts + [len(data)]:
            out += zstandard.ZstdCompressor(write_checksum=draw(st.booleans())).compress(data[prev:c])
            prev = c
        return out
    return data


@st.composite
def jsonl_files(draw):
    kind = draw(st.sampled_from(["", "gz", "zst", "bz2"]))
    clean = _jsonl(draw)
    data = _compress(draw, clean, kind)
    if draw(st.booleans()):
        return kind, draw(mutated(data)), None
    return kind, data, clean


@given(jsonl_files(), st.sampled_from([1, 60, 300, 10**6]))
@FUZZ
def test_fuzz_jsonl(case, unit_bytes):
    """Mutated: values/rejects or an RmlprepError. Not mutated: a compressed file (multi-frame
    zstd cut into units of unit_bytes) reads exactly like its plain text."""
    kind, data, clean = case
    with tempfile.TemporaryDirectory() as d, within(500):
        p = Path(d) / ("f.jsonl" + (f".{kind}" if kind else ""))
        p.write_bytes(data)
        res = read_everything(p, unit_bytes=unit_bytes)
        no_row_twice(res)
        if kind == "" and not isinstance(res, RmlprepError):
            values, rows, errs, blank = res
            lines = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
            assert len(rows) + len(errs) + blank == lines  # every line accounted once
        if clean is not None:
            plain = Path(d) / "plain.jsonl"
            plain.write_bytes(clean)
            want = read_everything(plain, unit_bytes=unit_bytes)
            if isinstance(want, RmlprepError):
                assert type(res) is type(want)
            else:
                assert res == want


@st.composite
def csv_files(draw):
    field = st.text(st.sampled_from('ab ,"\n\r\té'), max_size=12)
    rows = draw(st.lists(st.tuples(st.integers(0, 99), field), max_size=25))
    buf = io.StringIO()
    w = csv.writer(buf, delimiter=draw(st.sampled_from([","])), lineterminator=draw(st.sampled_from(["\n", "\r\n"])))
    w.writerow(["id", "text"])
    w.writerows(rows)
    data = buf.getvalue().encode()
    kind = draw(st.sampled_from(["", "gz", "zst"]))
    data = _compress(draw, data, kind)
    if draw(st.booleans()):
        data = draw(mutated(data))
    return kind, data


@given(csv_files())
@FUZZ
def test_fuzz_csv(case):
    kind, data = case
    with tempfile.TemporaryDirectory() as d, within(500):
        p = Path(d) / ("f.csv" + (f".{kind}" if kind else ""))
        p.write_bytes(data)
        no_row_twice(read_everything(p))


def _parquet_bytes(n: int, groups: int) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table({"text": [f"row {i} " + "x" * (i % 9) for i in range(n)],
                             "n": np.arange(n)}), buf, row_group_size=max(1, n // groups))
    return buf.getvalue()


@given(st.integers(1, 40), st.integers(1, 4), st.data())
@FUZZ
def test_fuzz_parquet(n, groups, data):
    blob = data.draw(mutated(_parquet_bytes(n, groups)))
    with tempfile.TemporaryDirectory() as d, within(500):
        p = Path(d) / "f.parquet"
        p.write_bytes(blob)
        no_row_twice(read_everything(p))


def _arrow_stream_bytes(n: int) -> bytes:
    sink = io.BytesIO()
    t = pa.table({"text": [f"t{i}" for i in range(n)]})
    with pa.ipc.new_stream(sink, t.schema) as w:
        for b in t.to_batches(max_chunksize=3):
            w.write_batch(b)
    return sink.getvalue()


@given(st.integers(0, 20), st.data())
@FUZZ
def test_fuzz_hf_arrow_file(n, data):
    blob = data.draw(mutated(_arrow_stream_bytes(n)))
    with tempfile.TemporaryDirectory() as d, within(500):
        root = Path(d) / "ds"
        root.mkdir()
        (root / "data-00000-of-00001.arrow").write_bytes(blob)
        (root / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
        no_row_twice(read_everything(root))


@given(st.binary(max_size=200))
@FUZZ
def test_fuzz_hf_state_json(blob):
    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "ds"
        root.mkdir()
        (root / "data-00000-of-00001.arrow").write_bytes(_arrow_stream_bytes(3))
        (root / "state.json").write_bytes(blob)
        no_row_twice(read_everything(root))


# -- seeds that found bugs ----------------------------------------------------------------------
def _fault(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    res = read_everything(p)
    assert isinstance(res, RmlprepError), res
    return str(res)


def test_seed_csv_header_not_utf8(tmp_path):
    """Found by test_fuzz_csv: pyarrow raised UnicodeDecodeError reading the column names."""
    assert "CSV header is not valid UTF-8" in _fault(tmp_path, "h.csv", b"\x00\x00\x80text\n")


def test_seed_csv_bad_row_not_utf8(tmp_path, capfd):
    """Found by test_fuzz_csv: a record with a wrong field count and non-UTF-8 bytes could not
    reach pyarrow's invalid_row_handler ('Exception ignored' and a traceback on stderr). It is a
    reject like any record with the wrong field count, its text shown with U+FFFD."""
    p = tmp_path / "r.csv"
    p.write_bytes(b"id,text\n1,a\n2,\xc5x,y\n3,b\n")
    res = read_everything(p)
    assert res[0] == ["a", "b"] and res[1] == [0, 2]
    assert res[2] == [1] and "Exception ignored" not in capfd.readouterr().err


def test_seed_parquet_string_not_utf8(tmp_path):
    """Found by test_fuzz_parquet: Parquet does not check UTF-8 on read, so a damaged string came
    back in a pa.string array and to_pylist() raised UnicodeDecodeError downstream. Row 1's
    bytes 'xbad' are patched to '\\x80bad' after writing: row 1 is a reject, rows 0 and 2 read."""
    p = tmp_path / "u.parquet"
    pq.write_table(pa.table({"text": ["ok", "xbad", "fine"]}), p)
    p.write_bytes(p.read_bytes().replace(b"xbad", b"\x80bad"))
    values, rows, errs, _ = read_everything(p)
    assert values == ["ok", "fine"] and rows == [0, 2] and errs == [1]


def test_seed_arrow_string_not_utf8(tmp_path):
    """The same fault in a datasets folder's Arrow file (Arrow IPC does not check UTF-8 either),
    inside a list<struct> column like SFT messages: row 1 is a reject."""
    root = tmp_path / "ds"
    root.mkdir()
    msgs = [[{"role": "user", "content": c}] for c in ("ok", "xbad", "fine")]
    sink = io.BytesIO()
    t = pa.table({"messages": msgs})
    with pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    (root / "data-00000-of-00001.arrow").write_bytes(sink.getvalue().replace(b"xbad", b"\x80bad"))
    (root / "state.json").write_text(json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}))
    values, rows, errs, _ = read_everything(root, column="messages")
    assert [m[0]["content"] for m in values] == ["ok", "fine"] and rows == [0, 2] and errs == [1]
