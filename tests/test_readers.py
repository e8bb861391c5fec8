"""Readers: every format in ../shared/corpora/formats, CSV, JSONL line splitting, units."""

from __future__ import annotations

import gzip
import zlib
import shutil
import json
import re
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
    with pytest.raises(ConfigError, match=r"^input.split: 'nope' is not a split of .*chat_hh.hf_datasetdict; its splits: test$"):
        plan_units(inp([FORMATS / "chat_hh.hf_datasetdict"], split="nope"))


def _dataset_dict(tmp_path, splits: dict[str, list[str]]):
    datasets = pytest.importorskip("datasets")
    p = tmp_path / "dd"
    datasets.DatasetDict({k: datasets.Dataset.from_dict({"text": v}) for k, v in splits.items()}).save_to_disk(str(p))
    return p


def test_datasetdict_unset_split_is_logged(tmp_path):
    """input.split unset: a DatasetDict with train and test reads train (its rows, not test's)
    and says so in one line naming the splits; a one-split dict names its only split."""
    p = _dataset_dict(tmp_path, {"train": ["a", "b"], "test": ["c"]})
    logs: list[str] = []
    values = read_all(plan_units(inp([p]), log=logs.append), "text")[0]
    assert values == ["a", "b"]
    assert logs == [f"input: {p} is a DatasetDict; reading split 'train' of 'train', 'test' "
                    "(input.split is unset; set it to read another)"]
    logs.clear()
    assert read_all(plan_units(inp([p], split="test"), log=logs.append), "text")[0] == ["c"] and logs == []
    q = _dataset_dict(tmp_path / "one", {"validation": ["v"]})
    assert read_all(plan_units(inp([q]), log=logs.append), "text")[0] == ["v"]
    assert logs == [f"input: {q} is a DatasetDict; reading its only split 'validation' (input.split is unset)"]


def test_datasetdict_without_train_is_refused_with_its_splits(tmp_path):
    p = _dataset_dict(tmp_path, {"validation": ["a"], "test": ["c"]})
    with pytest.raises(ConfigError, match=r"^input.split: .* is a DatasetDict with splits validation, test and none "
                                          r"is 'train'; name the one to read, e\.g\. input.split = \"validation\"$"):
        plan_units(inp([p]))


def test_split_with_no_datasetdict_is_refused(tmp_path):
    """input.split would be ignored by a JSONL file or a Dataset folder (read whole): refused,
    so a run never reads everything while the config says one split."""
    datasets = pytest.importorskip("datasets")
    j = tmp_path / "a.jsonl"
    j.write_text('{"text": "x"}\n')
    ds = tmp_path / "ds"
    datasets.Dataset.from_dict({"text": ["y"]}).save_to_disk(str(ds))
    with pytest.raises(ConfigError, match=r"^input.split = 'test': .* names none \(only JSONL, read whole\)"):
        plan_units(inp([j], split="test"))
    with pytest.raises(ConfigError, match=r"names none \(only JSONL, a Dataset folder or .arrow file, read whole\)"):
        plan_units(inp([j, ds], split="test"))
    dd = _dataset_dict(tmp_path, {"train": ["a"], "test": ["c"]})
    assert read_all(plan_units(inp([dd, j], split="test")), "text")[0] == ["c", "x"]


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
    assert reasons[3] == "line is a JSON array, not an object"  # JSON's name, not Python's "list"
    assert "no 'text' field" in reasons[4]
    assert "not valid UTF-8" in reasons[5]


def test_csv(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text('id,text\n1,"hello, world"\n2,"two\nlines"\n3,123\n4,\n', encoding="utf-8")
    values, rows, errors = read_all(plan_units(inp([p])), "text")
    assert values == ["hello, world", "two\nlines", "123", None]  # an empty field: None, as datasets reads it
    assert rows == [0, 1, 2, 3] and not errors


def test_a_file_named_like_a_glob(tmp_path):
    """An explorer finding (n8): "a[1].jsonl" is a file, but as a glob it matches "a1.jsonl",
    which the run read instead, exit 0 (and with no a1.jsonl it said "matches no file" of a file
    that exists). Both are refused, naming the escaped form (glob.escape: "a[[]1].jsonl"),
    which then reads the file."""
    named = tmp_path / "a[1].jsonl"
    named.write_text(json.dumps({"text": "the bracket file"}) + "\n")
    with pytest.raises(ConfigError, match=r"names a file but reads as a glob .*matches no file.*a\[\[\]1\]\.jsonl"):
        plan_units(inp([named]))
    (tmp_path / "a1.jsonl").write_text(json.dumps({"text": "another file"}) + "\n")
    with pytest.raises(ConfigError, match=r"names a file but reads as a glob .*matches .*a1\.jsonl"):
        plan_units(inp([named]))
    escaped = str(tmp_path / "a[[]1].jsonl")
    assert read_all(plan_units(inp([escaped])), "text")[0] == ["the bracket file"]


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
        (tmp_path / "x.dat").write_text("x")
        plan_units(inp([tmp_path / "x.dat"]))


def test_stdlib_is_deterministic():
    root, files = stdlib_files(300_000)
    assert files == sorted(files) and sum(n for _, n in files) >= 300_000
    assert stdlib_files(300_000) == (root, files)
    units = plan_units(inp(["<stdlib>"], format="stdlib", max_bytes=300_000, unit_bytes=100_000))
    values, _, errors = read_all(units, "text")
    assert len(values) == len(files) and not errors
    assert all(not f.startswith(("test/", "site-packages/")) for f, _ in files)


# -- trust: every fault is a reject with its row, or one InputError line naming the file -------
import io  # noqa: E402
import os  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import zstandard  # noqa: E402

from rmlprep.readers import base as readers_base  # noqa: E402
from rmlprep.errors import InputError, RmlprepError  # noqa: E402


def read_full(units, column="text", batch_rows=256):
    """values, rows, errors, blank of every unit in order (one source file)."""
    values, rows, errors, blank = [], [], [], 0
    for u in units:
        for b in read_unit(u, column, batch_rows):
            values.extend(b.values.to_pylist() if hasattr(b.values, "to_pylist") else b.values)
            rows.extend(b.rows.tolist())
            errors.extend(b.errors)
            blank += b.blank
            assert len(b.rows) == len(b.values) <= batch_rows
    return values, rows, errors, blank


def read_path(path, column="text", **kw):
    return read_full(plan_units(inp([path], **kw)), column)


def one_line_error(excinfo, path):
    msg = str(excinfo.value)
    assert "\n" not in msg and str(path) in msg
    return msg


def forty_docs() -> bytes:
    """The issue's file: 40 JSONL documents of a few hundred bytes."""
    return b"".join(json.dumps({"text": f"document {i} " + "lorem ipsum " * (20 + i)}).encode() + b"\n"
                    for i in range(40))


def zstd_frames_of(data: bytes, cuts) -> bytes:
    """Independent zstd frames (like pzstd or concatenated .zst files) cut at byte offsets."""
    out, prev = b"", 0
    for c in list(cuts) + [len(data)]:
        if c > prev:
            out += zstandard.ZstdCompressor(write_checksum=True).compress(data[prev:c])
            prev = c
    return out


def test_zstd_stream_reader_alone_reads_a_truncated_frame_as_a_clean_end():
    """The hazard behind the issue: zstandard's stream_reader on a .zst cut to 50% returns
    fewer bytes (here none) and no error, so a reader built on it alone loses data silently."""
    c = zstandard.ZstdCompressor().compress(forty_docs())
    got = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(c[: len(c) // 2])).read()
    assert len(got) < len(forty_docs())


@pytest.mark.parametrize("fraction", [pytest.param(0.5, id="50pct"), pytest.param(0.1, id="10pct")])
def test_truncated_jsonl_zst_is_a_file_error(tmp_path, fraction):
    whole = tmp_path / "whole.jsonl.zst"
    whole.write_bytes(zstandard.ZstdCompressor().compress(forty_docs()))
    assert len(read_path(whole)[0]) == 40
    cut = tmp_path / "cut.jsonl.zst"
    data = whole.read_bytes()
    cut.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(InputError, match="truncated zstd data") as ei:
        read_path(cut)
    msg = one_line_error(ei, cut)
    assert f"file ends at byte {int(len(data) * fraction)}" in msg
    assert ei.value.offset == int(len(data) * fraction)


def test_truncated_multi_frame_zst_is_refused_at_plan(tmp_path):
    data = forty_docs()
    p = tmp_path / "m.jsonl.zst"
    full = zstd_frames_of(data, range(500, len(data), 500))
    p.write_bytes(full[:-7])  # the last frame loses its checksum and part of a block
    with pytest.raises(InputError, match="truncated zstd data") as ei:
        plan_units(inp([p], unit_bytes=1000))
    one_line_error(ei, p)


def test_random_bytes_inside_a_zst(tmp_path):
    data = forty_docs()
    c = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(data))
    mid = len(c) // 2
    c[mid:mid + 16] = bytes(range(37, 37 + 16 * 7, 7))
    p = tmp_path / "noise.jsonl.zst"
    p.write_bytes(bytes(c))
    with pytest.raises(InputError, match="zstd data") as ei:
        read_path(p)
    one_line_error(ei, p)


def test_not_zstd_at_all(tmp_path):
    p = tmp_path / "plain.jsonl.zst"
    p.write_bytes(forty_docs())
    with pytest.raises(InputError, match=r"is named \.zst but holds no zstd data: it is plain text") as ei:
        plan_units(inp([p]))  # found while the run is planned (careless-user U2), not when the unit decodes it
    one_line_error(ei, p)


@pytest.mark.parametrize("damage", ["truncated", "flipped", "not-gzip", "trailing-garbage"])
def test_broken_gz_is_a_file_error(tmp_path, damage):
    data = forty_docs()
    good = gzip.compress(data)
    if damage == "truncated":
        bad, match = good[: len(good) // 2], "truncated gzip data"
    elif damage == "flipped":
        b = bytearray(good)
        b[len(b) // 2] ^= 0xFF
        bad, match = bytes(b), "corrupt gzip data"
    elif damage == "not-gzip":  # now found while the run is planned: test_a_file_that_is_not_what_it_is_named
        bad, match = data, r"is named \.gz but holds no gzip data: it is plain text"
    else:
        bad, match = good + b"garbage!", "corrupt gzip data"
    p = tmp_path / "x.jsonl.gz"
    p.write_bytes(good)
    assert len(read_path(p)[0]) == 40
    p.write_bytes(bad)
    with pytest.raises(InputError, match=match) as ei:
        read_path(p)
    one_line_error(ei, p)


@pytest.mark.parametrize("suffix,compress", [(".bz2", __import__("bz2").compress), (".xz", __import__("lzma").compress)])
def test_bz2_xz_read_and_truncation(tmp_path, suffix, compress):
    p = tmp_path / ("x.jsonl" + suffix)
    c = compress(forty_docs())
    p.write_bytes(c)
    values, rows, errors, _ = read_path(p)
    assert rows == list(range(40)) and not errors
    p.write_bytes(c[: len(c) // 2])
    with pytest.raises(InputError, match="truncated") as ei:
        read_path(p)
    one_line_error(ei, p)


def _jsonl_with_faults(n=300) -> bytes:
    """n lines: mostly documents, with blank, bad-JSON and no-field lines at fixed places."""
    out = []
    for i in range(n):
        if i % 17 == 5:
            out.append(b"")
        elif i % 29 == 7:
            out.append(b"{not json")
        elif i % 31 == 3:
            out.append(json.dumps({"other": i}).encode())
        else:
            out.append(json.dumps({"text": f"line {i} " + "x" * (i * 7 % 90)}).encode())
    return b"\n".join(out) + b"\n"


@pytest.mark.parametrize("frame_bytes", [7, 100, 997, 4096])
@pytest.mark.parametrize("unit_bytes", [1, 500, 3000, 10**9])
def test_multi_frame_zst_units_read_exactly_the_plain_file(tmp_path, frame_bytes, unit_bytes):
    """Frames cut anywhere (mid-line, on a newline, inside a frame without newline): the units
    together give every line once, with its true line number, like the plain file."""
    data = _jsonl_with_faults()
    plain = tmp_path / "p.jsonl"
    plain.write_bytes(data)
    want = read_path(plain)
    z = tmp_path / "p.jsonl.zst"
    z.write_bytes(zstd_frames_of(data, range(frame_bytes, len(data), frame_bytes)))
    units = plan_units(inp([z], unit_bytes=unit_bytes))
    assert read_full(units) == want
    if unit_bytes <= 3000 and frame_bytes < 3000:
        assert len(units) > 1
    if unit_bytes == 10**9:
        assert len(units) == 1
    # each unit alone: its rows are a contiguous block of the file's rows
    firsts = []
    for u in units:
        _, rows, errors, _ = read_full([u])
        rows += [e[0] for e in errors]
        if rows:
            firsts.append(min(rows))
            assert min(rows) >= u.first_row
    assert firsts == sorted(firsts)


def test_multi_frame_zst_with_skippable_frames_and_frame_ending_on_newline(tmp_path):
    lines = [json.dumps({"text": f"t{i}"}).encode() + b"\n" for i in range(50)]
    skippable = (0x184D2A50).to_bytes(4, "little") + (5).to_bytes(4, "little") + b"seek!"
    blob = skippable
    for i in range(0, 50, 5):
        blob += zstandard.ZstdCompressor().compress(b"".join(lines[i:i + 5])) + skippable
    p = tmp_path / "s.jsonl.zst"
    p.write_bytes(blob)
    units = plan_units(inp([p], unit_bytes=60))
    assert len(units) > 3
    values, rows, errors, _ = read_full(units)
    assert values == [f"t{i}" for i in range(50)] and rows == list(range(50)) and not errors


def test_zst_frame_needing_a_dictionary(tmp_path):
    samples = [json.dumps({"text": f"sample {i} " + "word " * (i % 13)}).encode() for i in range(2000)]
    d = zstandard.train_dictionary(4096, samples)
    p = tmp_path / "d.jsonl.zst"
    p.write_bytes(zstandard.ZstdCompressor(dict_data=d, write_dict_id=True).compress(forty_docs()))
    assert zstandard.get_frame_parameters(p.read_bytes()[:18]).dict_id == d.dict_id()
    with pytest.raises(InputError, match="dictionary") as ei:
        read_path(p)
    one_line_error(ei, p)


# -- CSV -----------------------------------------------------------------------------------------
def test_csv_unterminated_quote_is_not_merged_silently(tmp_path):
    """The issue's file: `1,good` / `2,"unterminated` / `3,good`. pyarrow alone reads record 1's
    text as 'unterminated\\n3,good\\n' (the quote runs to the end of the file) and no error; the
    reader refuses the file and names record 1 (0-based, the header not counted)."""
    import pyarrow.csv as pcsv

    body = b'id,text\n1,good\n2,"unterminated\n3,good\n'
    alone = pcsv.read_csv(io.BytesIO(body)).column("text").to_pylist()
    assert alone == ["good", "unterminated\n3,good\n"]  # the silent merge the reader must catch
    p = tmp_path / "u.csv"
    p.write_bytes(body)
    with pytest.raises(InputError, match=r"record 1 \(from line 3\) opens a quoted value that is never closed") as ei:
        read_path(p)
    one_line_error(ei, p)


@pytest.mark.parametrize("body,record,line,closes", [
    pytest.param(b'text\n"good"\n"unterminated\n"good again"\n', 1, 3, 4, id="closed-by-a-later-quote"),
    pytest.param(b'id,text\n1,good\n2,"unterminated\n3,"good"\n4,x\n', 1, 3, 4, id="issue-file-closed-later"),
    pytest.param(b'id,text\n1,"x" y\n2,z\n', 0, 2, 2, id="text-after-a-closing-quote"),
    pytest.param(b'id,text\n1,a\n2,"b"\r\n3,"c" \n', 2, 4, 4, id="space-after-a-closing-quote"),
])
def test_csv_stray_quote_is_not_merged_silently(tmp_path, body, record, line, closes):
    """A quote opened on one line and closed by the next quote, which is followed by more text:
    in RFC 4180 a closing quote is followed by a delimiter, a line break or the end of the file,
    so the file is malformed. pyarrow alone reads the first example's lines 3-4 as one value
    ('unterminated\ngood again"') and no error; the reader names the record and its first line."""
    import pyarrow.csv as pcsv

    if record == 1 and body.startswith(b"text"):
        alone = pcsv.read_csv(io.BytesIO(body), parse_options=pcsv.ParseOptions(newlines_in_values=True))
        merged = alone.column("text").to_pylist()
        assert len(merged) == 2 and merged[1].startswith("unterminated\ngood again")  # the silent merge
    p = tmp_path / "s.csv"
    p.write_bytes(body)
    with pytest.raises(InputError, match=rf"CSV record {record} \(from line {line}\) has a quoted value that "
                                         rf"closes on line {closes} and goes on with more text") as ei:
        read_path(p)
    one_line_error(ei, p)


def test_csv_quotes_that_are_fine(tmp_path):
    """Quoted line breaks and delimiters, "" inside quotes, an empty quoted value (None, as
    datasets reads it), a quote inside an unquoted value (literal, as in Python's csv and
    pyarrow), CRLF after a closing quote."""
    p = tmp_path / "q.csv"
    p.write_bytes(b'id,text\r\n1,"a\r\nb, ""c"""\r\n2,""\r\n3,5" floppy\r\n4,"x"\r\n5,"""q"""\n')
    values, rows, errors, _ = read_path(p)
    assert values == ['a\r\nb, "c"', None, '5" floppy', "x", '"q"'] and rows == [0, 1, 2, 3, 4] and not errors


@pytest.mark.parametrize("body", [
    pytest.param(b'text\ngood\n"unterminated\ngood\n', id="one-column"),
    pytest.param(b'id,text\n1,good\n"2,unterminated\n3,good\n', id="quote-in-other-column"),
    pytest.param(b'id,text\n1,good\n2,"unterminated', id="no-final-newline"),
    pytest.param(b'id,text\n1,good\n2,"ends with an escaped quote""\n', id="escaped-quote-at-eof"),
])
def test_csv_unterminated_quote_variants(tmp_path, body):
    p = tmp_path / "u.csv"
    p.write_bytes(body)
    with pytest.raises(InputError, match="never closed") as ei:
        read_path(p)
    one_line_error(ei, p)


def test_csv_quoted_newlines_at_end_are_fine(tmp_path):
    p = tmp_path / "q.csv"
    p.write_bytes(b'id,text\n1,good\n2,"two\nlines, ""quoted"""\n3,"last\nrecord"')
    values, rows, errors, _ = read_path(p)
    assert values == ["good", 'two\nlines, "quoted"', "last\nrecord"] and rows == [0, 1, 2] and not errors


def test_csv_bad_rows_are_rejects_with_record_numbers(tmp_path):
    """Records (0-based, header excluded, blank lines skipped, a quoted record may span lines):
    0 '1,good'  1 '2,x,y' (3 fields)  2 '3,good'  3 '4,"a\\nb"'  4 '5,z,w' (3 fields)  5 '6,ok'."""
    p = tmp_path / "bad.csv"
    p.write_bytes(b'id,text\n1,good\n2,x,y\n3,good\n4,"a\nb"\n5,z,w\n\n6,ok\n')
    values, rows, errors, _ = read_path(p)
    assert values == ["good", "good", "a\nb", "ok"]
    assert rows == [0, 2, 3, 5]
    assert [r for r, _ in errors] == [1, 4]
    assert "3 fields, the header has 2" in errors[0][1] and "2,x,y" in errors[0][1]


def test_csv_bad_row_past_the_first_megabyte(tmp_path):
    n = 20_000  # ~2.2 MB: the bad record sits in the third 1 MB block
    rows_in = [b"%d,row %d %s" % (i, i, b"y" * 100) for i in range(n)]
    rows_in[15_000] = b"15000,bad,extra,fields"
    p = tmp_path / "big.csv"
    p.write_bytes(b"id,text\n" + b"\n".join(rows_in) + b"\n")
    assert p.stat().st_size > 2_000_000
    values, rows, errors, _ = read_path(p)
    assert len(values) == n - 1 and [r for r, _ in errors] == [15_000]
    assert rows == [i for i in range(n) if i != 15_000]
    assert values[14_999] == "row 14999 " + "y" * 100 and values[15_000] == "row 15001 " + "y" * 100


def test_csv_record_larger_than_a_block(tmp_path):
    big = "x\n" * 1_500_000  # 3 MB in one quoted value: pyarrow's 1 MB block must grow
    p = tmp_path / "big.csv"
    p.write_bytes(b'id,text\n0,a\n1,"' + big.encode() + b'"\n2,b,extra\n3,c\n')
    values, rows, errors, _ = read_path(p)
    assert values == ["a", big, "c"] and rows == [0, 1, 3] and [r for r, _ in errors] == [2]


def test_csv_unterminated_quote_in_a_big_file(tmp_path):
    p = tmp_path / "u.csv"
    p.write_bytes(b'id,text\n0,a\n1,"' + b"x\n" * 1_500_000 + b"2,b\n")
    with pytest.raises(InputError, match="never closed") as ei:
        read_path(p)
    one_line_error(ei, p)


def test_csv_record_over_the_row_limit(tmp_path, monkeypatch):
    """Neither a line nor a value may make the reader hold more than MAX_ROW_BYTES (here 2 MB)."""
    monkeypatch.setattr(readers_base, "MAX_ROW_BYTES", 1 << 21)
    p = tmp_path / "big.csv"
    p.write_bytes(b'id,text\n0,a\n1,"' + b"x" * (5 << 20) + b'"\n')  # one 5 MB line
    with pytest.raises(InputError, match="byte 12: more than 2 MB without a line break") as ei:
        read_path(p)
    one_line_error(ei, p)
    p.write_bytes(b'id,text\n0,a\n1,"' + b"x\n" * (3 << 20) + b'"\n')  # a 6 MB value on short lines
    with pytest.raises(InputError, match=r"record 1 \(from line 3\) holds a value over the 2 MB limit") as ei:
        read_path(p)
    one_line_error(ei, p)


def test_csv_missing_column_is_one_line(tmp_path):
    p = tmp_path / "m.csv"
    p.write_bytes(b"id,body\n1,x\n")
    with pytest.raises(ConfigError, match=r"has no column 'text'; columns: \['id', 'body'\]") as ei:
        read_path(p)
    one_line_error(ei, p)


@pytest.mark.parametrize("name,body,hint", [
    pytest.param("x.csv", b"sep=,\nid,text\n1,a\n", r"columns: \['sep=', ''\]; its first line, 'sep=,', is Excel's "
                 r"separator line, not the header: remove it \(tail -n \+2 FILE > NEW\.csv\)$", id="excel-sep-line"),
    pytest.param("x.csv", b"sep=;\nid;text\n1;a\n", r"columns: \['sep=;'\]; its first line, 'sep=;', is Excel's separator line.*\(tail -n \+2 FILE \| "
                 r"python3 -c .*delimiter=';'\)\)\" > NEW\.csv\)$", id="excel-sep-semicolon"),
    pytest.param("x.csv", b"id;text\n1;a, b\n", r"columns: \['id;text'\]; the header reads as one column holding "
                 r"semicolons: a semicolon-separated file\? .*delimiter=';'\)\)\" < FILE > NEW\.csv\)$", id="semicolons"),
    pytest.param("x.csv", b"id\ttext\n1\ta\n", r"columns: \['id\\ttext'\]; the header reads as one column holding tabs: a "
                 r"tab-separated file\? name it \.tsv$",
                 id="tabs-named-csv"),
    pytest.param("x.csv", b"id, text\n1, a\n", r"columns: \['id', ' text'\]; ' text' is 'text' with spaces around it: "
                 r"rename that column$", id="space-after-comma"),
    pytest.param("x.csv", b"id,Text\n1,a\n", r"columns: \['id', 'Text'\]; 'Text' differs only in case: set input.column = 'Text' if it is that "
                 r"column$", id="other-case"),
])
def test_a_csv_header_missing_the_column_says_what_it_looks_like(tmp_path, name, body, hint):
    """Files made by Excel and by hand: Excel's ``sep=,`` first line (which Excel reads as no row;
    Python's csv, pandas and ``datasets`` read it as the header), a semicolon-separated export
    (Excel in locales with a decimal comma), a TSV named .csv, ``id, text`` typed by hand, a
    ``Text`` column. Each was refused with only its column list (``['sep=', '']``); the line now
    says what the header is and the fix."""
    p = tmp_path / name
    p.write_bytes(body)
    with pytest.raises(ConfigError, match=r"has no column 'text'; " + hint) as ei:
        read_path(p)
    one_line_error(ei, p)


def test_a_struct_field_named_by_a_dotted_column_says_to_flatten(tmp_path):
    """``input.column = "meta.text"`` over a Parquet file whose ``meta`` column is a struct with a
    ``text`` field was refused with "columns: ['meta']"; the line now says rmlprep reads top-level
    columns and how to flatten (pyarrow's ``Table.flatten`` names the field's column
    ``meta.text``, which then reads)."""
    t = pa.table({"meta": pa.array([{"text": "one", "id": 1}])})
    pq.write_table(t, tmp_path / "s.parquet")
    with pytest.raises(ConfigError, match=r"has no column 'meta.text'; columns: \['meta'\]; 'meta' is a column: rmlprep "
                                          r"reads a top-level column, not a field inside one; flatten it first "
                                          r"\(pyarrow: table.flatten\(\), which names the field's column 'meta.text'\)$"):
        read_path(tmp_path / "s.parquet", column="meta.text")
    pq.write_table(t.flatten(), tmp_path / "f.parquet")
    assert read_path(tmp_path / "f.parquet", column="meta.text")[0] == ["one"]


@pytest.mark.parametrize("name,body,want", [
    pytest.param("bom.csv", b"\xef\xbb\xbfid,text\n1,first\n2,second\n", ["first", "second"], id="utf8-bom"),
    pytest.param("crlf.csv", b"id,text\r\n1,a\r\n2,b\r\n", ["a", "b"], id="crlf"),
    pytest.param("t.tsv", b"id\ttext\n1\ta, b\n2\tc\n", ["a, b", "c"], id="tsv"),
    pytest.param("empty.csv", b"", [], id="empty"),
    pytest.param("blank.csv", b"\n\n\r\n", [], id="blank-lines"),
    pytest.param("header.csv", b"id,text\n", [], id="header-only"),
])
def test_csv_small_cases(tmp_path, name, body, want):
    p = tmp_path / name
    p.write_bytes(body)
    values, rows, errors, _ = read_path(p)
    assert values == want and rows == list(range(len(want))) and not errors


@pytest.mark.parametrize("second", [b"", b"\xef\xbb\xbf"], ids=["plain", "bom"])
def test_csv_header_repeated_is_a_reject(tmp_path, second):
    """Two CSV files concatenated (``cat a.csv b.csv``): b's header line ``id,text`` became
    record 2, its ``text`` a document reading "text" (as ``datasets`` reads it). A record whose
    every field is the header's name is now a reject of its own kind, record 2 (0-based after
    the header: '1,hello' 0, '2,world' 1, 'id,text' 2, '3,more' 3); b's byte-order mark, when
    it had one, is before the name and no text. A record holding only some of the names
    ('id,x') stays a row (the names in another order: the test below)."""
    p = tmp_path / "cat.csv"
    p.write_bytes(b"id,text\n1,hello\n2,world\n" + second + b"id,text\n3,more\nid,x\n")
    values, rows, errors, _ = read_path(p)
    assert values == ["hello", "world", "more", "x"] and rows == [0, 1, 3, 4]
    assert errors == [(2, "CSV record repeats the header's column names ('id,text'): files concatenated with "
                          "their headers?")]
    assert errors[0][1].kind == "csv_repeated_header"
    p.write_bytes(b"text,id\nhello,1\n" + second + b"text,id\nmore,2\n")  # the text column first
    values, rows, errors, _ = read_path(p)
    assert values == ["hello", "more"] and rows == [0, 2] and [r for r, _ in errors] == [1]


@pytest.mark.parametrize("second", [b"", b"\xef\xbb\xbf"], ids=["plain", "bom"])
def test_csv_header_in_another_order_is_a_file_fault(tmp_path, second):
    """``cat a.csv e.csv`` where a's header is ``id,text`` and e's ``text,id`` (trial19): e's
    header became record 2 with text "id", and every record of e after it was read with its
    text in the id column: 31 junk documents ('id', '0'...'29'), e's texts lost, exit 0. A
    record holding exactly the header's names in another order is a file fault naming the
    record and its line (record 2, line 4: the header is line 1)."""
    p = tmp_path / "ae.csv"
    p.write_bytes(b"id,text\n1,hello\n2,world\n" + second + b"text,id\nmore,3\n")
    with pytest.raises(InputError, match=r"ae.csv: CSV record 2 \(line 4\) holds the header's column names in "
                                         r"another order \('text,id' under the header 'id,text'\)"):
        read_path(p)
    p.write_bytes(b"a,text,b\n1,x,2\nb,text,a\n3,y,4\n")  # the text column in place, the others swapped
    with pytest.raises(InputError, match="record 1 \\(line 3\\) holds the header's column names in another order"):
        read_path(p)


def test_csv_header_in_another_order_with_its_mark_on_the_text_field_is_a_file_fault(tmp_path):
    """The text column first (``text,id``) and a file ``id,text`` with a byte-order mark
    concatenated: its header's first field, read as the text, is ``\ufeffid``, another name than
    the header's first's with the mark; it was a document, and 'more' was read as an id and '3'
    as the text. Record 2, line 4, as without the mark."""
    p = tmp_path / "te.csv"
    p.write_bytes(b"text,id\nhello,1\nworld,2\n\xef\xbb\xbfid,text\n3,more\n")
    with pytest.raises(InputError, match=r"te.csv: CSV record 2 \(line 4\) holds the header's column names in "
                                         r"another order \('id,text' under the header 'text,id'\)"):
        read_path(p)


def test_csv_value_not_utf8_is_a_reject(tmp_path):
    p = tmp_path / "u.csv"
    p.write_bytes(b"id,text\n1,ok\n2,\xff\xfe bad\n3,fine\n")
    values, rows, errors, _ = read_path(p)
    assert values == ["ok", "fine"] and rows == [0, 2]
    assert errors == [(1, "text is not valid UTF-8 (invalid start byte at byte 0)")]


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
def test_compressed_csv(tmp_path, suffix):
    body = b'id,text\n1,"a\nb"\n2,c,extra\n3,d\n'
    c = gzip.compress(body) if suffix == ".gz" else zstandard.ZstdCompressor().compress(body)
    p = tmp_path / ("t.csv" + suffix)
    p.write_bytes(c)
    values, rows, errors, _ = read_path(p)
    assert values == ["a\nb", "d"] and rows == [0, 2] and [r for r, _ in errors] == [1]
    p.write_bytes(c[: len(c) - 6])
    with pytest.raises(InputError, match="truncated") as ei:
        read_path(p)
    one_line_error(ei, p)


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_csv_cut_in_its_last_record_is_not_read_as_complete(tmp_path, suffix):
    """A CSV file cut short (an interrupted download) ends inside its last record, without a
    line break. Cut before the last field, that record has fewer fields than the header: it was a
    reject and the run exited 0, the file counted complete (explorer6); it is now a file fault, as
    a JSONL file's cut last line is. A short record with its line break, or before the last
    record, stays a reject; a cut in the last field cannot be told from a complete record (the
    plan warns: test_plan_warns_of_a_csv_without_a_final_line_break)."""
    body = b"id,text,source\n1,first,web\n2,x\n3,third,web\n"  # record 1 is short, with its line break
    p = tmp_path / ("t.csv" + suffix)
    for cut in (body[:-8], body[:-11]):  # "3,th" / "3": the last record cut in its 2nd / 1st field
        p.write_bytes(gzip.compress(cut) if suffix else cut)
        with pytest.raises(InputError, match=r"CSV record 2 \(from line 4\), the last, has [12] of the header's 3 "
                                             r"fields and no line break at the end: the file looks truncated") as ei:
            read_path(p)
        one_line_error(ei, p)
    for whole in (body, body[:-1], body[:-12] + b"3,x\n"):  # complete; no final line break; short, with one
        p.write_bytes(gzip.compress(whole) if suffix else whole)
        values, rows, errors, _ = read_path(p)
        assert values[0] == "first" and [r for r, _ in errors] == ([1, 2] if whole.endswith(b"3,x\n") else [1])


def test_plan_warns_of_a_csv_without_a_final_line_break(tmp_path):
    """Cut in its last value, a CSV file reads as complete: ``id,text`` cut at ``99,document 99 wo``
    gave a last document "document 99 wo", exit 0, no word (explorer6). The plan says so of a
    plain file that does not end with a line break (Google Sheets writes such files, so it is a
    warning, not a refusal)."""
    (tmp_path / "cut.csv").write_bytes(b"id,text\n1,first\n2,document 2 wo")
    (tmp_path / "whole.csv").write_bytes(b"id,text\n1,first\r\n")
    (tmp_path / "z.csv.gz").write_bytes(gzip.compress(b"id,text\n1,first"))  # the decoder's to judge
    logs: list[str] = []
    plan_units(inp([tmp_path / "*.csv*"], column="text"), log=logs.append)
    assert logs == [f"warning: input: {tmp_path / 'cut.csv'} does not end with a line break: its last CSV record is "
                    "read as complete, though a file cut short (an interrupted download or copy) ends so too, with "
                    "its last value cut"]


def test_jsonl_byte_order_marks_of_files_joined_with_cat_are_named(tmp_path):
    """``cat a.jsonl b.jsonl`` of files that each start with a UTF-8 byte-order mark puts the mark
    at the start of a later line: that row was a reject "line is not valid JSON (Unexpected UTF-8
    BOM (decode using utf-8-sig) at column 1)" (explorer6). Still a reject (only the file's own
    start may hold the mark), with a reason that says where the mark came from and how to remove it."""
    one = b'\xef\xbb\xbf{"text": "a"}\n'
    p = tmp_path / "joined.jsonl"
    p.write_bytes(one + one.replace(b'"a"', b'"b"'))
    values, rows, errors, _ = read_path(p)
    assert values == ["a"] and [r for r, _ in errors] == [1]
    assert errors[0][1].startswith("line is not valid JSON: it starts with a UTF-8 byte-order mark, which only a "
                                   "file's first line may (files joined with cat, each starting with one?)")
    assert errors[0][1].kind == "not_json"


# -- JSONL rows --------------------------------------------------------------------------------
@pytest.mark.parametrize("suffix", ["", ".gz", ".zst"])
def test_jsonl_utf8_bom_keeps_the_first_row(tmp_path, suffix):
    body = b'\xef\xbb\xbf{"text": "first"}\n{"text": "second"}\n'
    p = tmp_path / ("b.jsonl" + suffix)
    p.write_bytes(gzip.compress(body) if suffix == ".gz" else
                  zstandard.ZstdCompressor().compress(body) if suffix == ".zst" else body)
    values, rows, errors, _ = read_path(p)
    assert values == ["first", "second"] and rows == [0, 1] and not errors


def test_jsonl_hostile_rows_are_rejects(tmp_path):
    """Line 1 nests 100,000 '[' (json would raise RecursionError), line 2 holds a 5,000-digit
    integer (ValueError past Python's 4,300-digit limit), line 3 nests 100,001 levels inside an
    object, line 4 keeps 200 '[' inside a string (not nesting): rows 0, 4 and 5 are read."""
    p = tmp_path / "h.jsonl"
    p.write_bytes(b'{"text": "a"}\n' + b"[" * 100_000 + b"\n"
                  + b'{"text": "b", "n": ' + b"9" * 5000 + b"}\n"
                  + b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b', "text": "c"}\n'
                  + b'{"text": "' + b"[" * 200 + b'\\"{"}\n'
                  + b'{"text": "d", "deep": [[[[1]]]]}\n')
    values, rows, errors, _ = read_path(p)
    assert values == ["a", "[" * 200 + '"{', "d"] and rows == [0, 4, 5]
    reasons = dict(errors)
    assert reasons[1] == "JSON nested 100000 levels deep (the limit is 100)"
    assert "4300 digits" in reasons[2]
    assert reasons[3] == "JSON nested 100001 levels deep (the limit is 100)"


def test_jsonl_line_over_the_row_limit_is_a_reject(tmp_path, monkeypatch):
    monkeypatch.setattr(readers_base, "MAX_ROW_BYTES", 1000)
    p = tmp_path / "long.jsonl"
    p.write_bytes(b'{"text": "a"}\n{"text": "' + b"y" * 5000 + b'"}\n{"text": "b"}\n')
    values, rows, errors, _ = read_path(p)
    assert values == ["a", "b"] and rows == [0, 2]
    # the line: '{"text": "' (10 bytes) + 5000 'y' + '"}' + newline = 5013 bytes
    assert errors == [(1, "line of 5013 bytes is longer than the 1000 byte limit (not read)")]


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_jsonl_over_long_last_line_cut_short_is_a_file_fault(tmp_path, monkeypatch, gz):
    """An over-long line is skipped unread, so a file cut inside it (an interrupted download of a
    one-document-per-line dump) was read as complete with one 'longer than the limit' reject.
    A JSON object line ends with '}': the unread last line of 3,010 bytes that ends in 'y' with no
    newline is cut short, and the file is refused; one that ends with '}' is a reject as before."""
    monkeypatch.setattr(readers_base, "MAX_ROW_BYTES", 1000)
    head = b'{"text": "a"}\n{"text": "' + b"y" * 3000
    p = tmp_path / ("cut.jsonl.gz" if gz else "cut.jsonl")
    p.write_bytes(gzip.compress(head) if gz else head)
    with pytest.raises(InputError, match="the last line .* is cut short") as ei:
        read_path(p)
    one_line_error(ei, p)
    whole = head + b'"}'  # complete, only without its final newline: 3,012 bytes
    p.write_bytes(gzip.compress(whole) if gz else whole)
    values, rows, errors, _ = read_path(p)
    assert values == ["a"] and errors == [(1, "line of 3012 bytes is longer than the 1000 byte limit (not read)")]


def test_jsonl_gz_with_crlf_lines(tmp_path):
    p = tmp_path / "crlf.jsonl.gz"
    p.write_bytes(gzip.compress(b'{"text": "a"}\r\n{"text": "b\\r\\n"}\r\n\r\n{"text": "c"}\r\n'))
    values, rows, errors, blank = read_path(p)
    assert values == ["a", "b\r\n", "c"] and rows == [0, 1, 3] and not errors and blank == 1


@pytest.mark.parametrize("name,body,match", [
    pytest.param("a.json", b'[{"text": "a"}, {"text": "b"}]\n', "starts with a JSON array", id="array-one-line"),
    pytest.param("a.json", b'[\n  {"text": "a"},\n  {"text": "b"}\n]\n', "starts with a JSON array", id="array-pretty"),
    pytest.param("o.json", b'{\n  "text": "a"\n}\n', "pretty-printed JSON object", id="pretty-object"),
    pytest.param("w.jsonl", '{"text": "a"}\n'.encode("utf-16"), "UTF-16-LE", id="utf16"),
    pytest.param("a.json.gz", gzip.compress(b'\n[{"text": "a"}]'), "starts with a JSON array", id="array-gz"),
])
def test_json_documents_are_not_jsonl(tmp_path, name, body, match):
    p = tmp_path / name
    p.write_bytes(body)
    with pytest.raises(InputError, match=match) as ei:
        read_path(p)
    one_line_error(ei, p)


@pytest.mark.parametrize("name,compress", [("cut.jsonl", None), ("cut.jsonl.gz", gzip.compress),
                                           ("cut.jsonl.zst", lambda b: zstandard.ZstdCompressor().compress(b)),
                                           ("cut-frames.jsonl.zst", lambda b: zstd_frames_of(b, range(500, len(b), 500)))])
def test_jsonl_last_line_cut_short_is_a_file_error(tmp_path, name, compress):
    """forty_docs() cut 7 bytes before its end (a copy that stopped mid-line): the last line has
    no newline and is not JSON. Read as a reject, the file would count as complete with its tail
    missing; it is a file fault naming the line's first byte (plain: the file's byte; compressed:
    the decoded byte, counted from the file's start also when the file is frames of 500 bytes
    read as several units, whose last unit starts at a later frame). The same file without its
    final newline (complete) reads all 40 rows."""
    data = forty_docs()
    last = data.rstrip(b"\n").rfind(b"\n") + 1  # where line 39 starts
    p = tmp_path / name
    p.write_bytes(compress(data[:-7]) if compress else data[:-7])
    with pytest.raises(InputError, match="the last line is cut short") as ei:
        read_path(p, unit_bytes=1000)  # plain: several units; only the last one fails
    msg = one_line_error(ei, p)
    assert f"byte {last}:" in msg and ("decoded byte" in msg) == (compress is not None)
    whole = tmp_path / ("whole-" + name)
    whole.write_bytes(compress(data[:-1]) if compress else data[:-1])
    values, rows, errors, _ = read_path(whole, unit_bytes=1000)
    assert len(values) == 40 and rows == list(range(40)) and not errors


def _holed(data: bytes, at: int, n: int) -> bytes:
    """``data`` with ``n`` bytes from ``at`` overwritten by zeros, as a hole leaves them."""
    return data[:at] + b"\x00" * n + data[at + n:]


def _forty_csv() -> bytes:
    """forty_docs()'s texts as a CSV file with an id column (~19 KB, lines of 250-710 bytes)."""
    return b"id,text\n" + b"".join(f"{i},{json.loads(line)['text']}\n".encode()
                                    for i, line in enumerate(forty_docs().splitlines()))


@pytest.mark.parametrize("name,make,at", [
    pytest.param("h.jsonl", lambda: _holed(forty_docs(), 4096, 4096), "byte 4096", id="jsonl"),
    pytest.param("h.jsonl.gz", lambda: gzip.compress(_holed(forty_docs(), 4096, 4096)), "decoded byte 4096", id="jsonl-gz"),
    pytest.param("h.jsonl.zst", lambda: zstd_frames_of(_holed(forty_docs(), 15360, 512), range(500, 19000, 500)),
                 "decoded byte 15360", id="jsonl-zst-frames"),
    pytest.param("h.jsonl", lambda: _holed(forty_docs(), 0, 512), "byte 0", id="jsonl-at-start"),
    pytest.param("h.csv", lambda: _holed(_forty_csv(), 4096, 4096), "byte 4096", id="csv"),
    pytest.param("h.csv", lambda: _holed(_forty_csv(), 8192 - 8, 16), "byte 8184", id="csv-across-reads"),
    pytest.param("h.csv.gz", lambda: gzip.compress(_holed(_forty_csv(), 12288, 512)), "decoded byte 12288", id="csv-gz"),
])
def test_a_hole_of_zeros_is_a_file_fault(tmp_path, name, make, at):
    """A run of NUL bytes where text should be (a download into a preallocated file that stopped,
    aria2c's unfinished segments, a crash before the data reached the disk: whole sectors or
    blocks of zeros) is a file fault naming its first byte. It was read as rows: the 4 KiB hole
    at byte 4096 of forty_docs() covers the ends of lines 12-21 (which start at bytes 3962 ..
    8075), so they read as one line, a single not_json reject: 30 rows and 1 reject of 40, 9
    lines gone without a trace (in a 5,000-line file, a 64 KiB hole: ~440 lines gone, "rejects
    1 (0.0%)", exit 0). The same hole in _forty_csv() read as 31 records and no reject, one text
    of 4,536 characters holding the zeros (tokenized as NUL tokens), 9 records gone (pandas, so
    ``datasets``, reads that CSV the same way). The CSV
    reader reads 8192 bytes at a time: a run across two reads (8 zeros at the end of the first,
    8 at the start of the second) is found too. A zstd file of 500-byte frames read in units of
    1000 bytes names the decoded byte from the file's start."""
    p = tmp_path / name
    p.write_bytes(make())
    with pytest.raises(InputError, match="a run of NUL bytes where text should be") as ei:
        read_path(p, unit_bytes=1000)
    msg = one_line_error(ei, p)
    assert msg.startswith(f"{p}: {at}: ")


def test_a_hole_at_the_end_of_a_plain_jsonl_is_refused_by_the_plan(tmp_path):
    """Zeros at the end (a preallocated download that stopped) are named as a hole while the
    run is planned, at their first byte: forty_docs() with its last 1024 bytes zeroed."""
    data = forty_docs()
    p = tmp_path / "t.jsonl"
    p.write_bytes(_holed(data, len(data) - 1024, 1024))
    with pytest.raises(InputError, match="a run of NUL bytes where text should be") as ei:
        plan_units(inp([p], column="text"))
    assert f"byte {len(data) - 1024}: " in one_line_error(ei, p)


def test_a_compressed_utf16_csv_without_a_mark_is_named(tmp_path):
    """A CSV saved as UTF-16-LE without a byte-order mark (Excel's "Unicode text" as .csv), then
    gzipped: the plan's first-bytes check sees gzip's, and the plan said only "has no column
    'text'; columns: ['t\\x00e\\x00x\\x00t\\x00']". It now names the encoding and the iconv line,
    as for the same file uncompressed."""
    p = tmp_path / "u.csv.gz"
    p.write_bytes(gzip.compress("text\nfirst\nsecond\n".encode("utf-16-le")))
    with pytest.raises(InputError, match=rf"{p}: the file is UTF-16-LE \(.*\) once decompressed; rmlprep reads UTF-8: "
                                         r"convert it with iconv -f UTF-16LE -t UTF-8"):
        plan_units(inp([p], column="text"))


@pytest.mark.parametrize("fmt", ["auto", "parquet"])
def test_a_parquet_summary_file_matched_by_a_glob_is_named(tmp_path, fmt):
    """A Dask-style folder (parts, and pyarrow's write_metadata: ``_common_metadata``, the schema;
    ``_metadata``, the parts' row groups): ``dir/*`` said "cannot tell the format of
    _common_metadata; set input.format", and with input.format = "parquet" read
    ``_common_metadata`` as 0 rows and failed on ``_metadata`` as "corrupt data in row groups
    [0, 2): Couldn't deserialize thrift" (its row groups point into the parts). Both are named
    as summary files at plan; ``dir/*.parquet`` reads the 100 rows."""
    t = pa.table({"text": [f"doc {i}" for i in range(100)]})
    collected = []
    for i in range(2):
        pq.write_table(t.slice(i * 50, 50), tmp_path / f"part.{i}.parquet", metadata_collector=collected)
        collected[-1].set_file_path(f"part.{i}.parquet")
    pq.write_metadata(t.schema, tmp_path / "_common_metadata")
    pq.write_metadata(t.schema, tmp_path / "_metadata", metadata_collector=collected)
    with pytest.raises(ConfigError, match=rf"input.paths: {tmp_path}/_common_metadata is a Parquet dataset's summary "
                                          r"file .*; leave it out of the glob \(name the parts: 'dir/\*.parquet'\)"):
        plan_units(inp([f"{tmp_path}/*"], format=fmt))
    assert len(read_full(plan_units(inp([f"{tmp_path}/*.parquet"])))[0]) == 100


def _delta_table(root, versions, prefix=""):
    """A Delta Lake table as the Delta protocol lays it out (PROTOCOL.md: ``_delta_log/<version
    padded to 20 digits>.json``, one action per line), each version an overwrite: it adds its own
    file and removes the previous version's, which stays in the folder until VACUUM."""
    log = root / "_delta_log"
    log.mkdir(parents=True)
    schema = json.dumps({"type": "struct", "fields": [{"name": "text", "type": "string", "nullable": True, "metadata": {}}]})
    for v, texts in enumerate(versions):
        name = f"{prefix}part-00000-{v:08x}-0000-0000-0000-000000000000-c000.snappy.parquet"
        (root / name).parent.mkdir(exist_ok=True)
        pq.write_table(pa.table({"text": texts}), root / name)
        actions = [{"add": {"path": name, "partitionValues": {}, "size": (root / name).stat().st_size,
                            "modificationTime": 0, "dataChange": True}}]
        if v == 0:
            actions = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                       {"metaData": {"id": "0", "format": {"provider": "parquet", "options": {}},
                                     "schemaString": schema, "partitionColumns": [], "configuration": {}}}] + actions
        else:
            prev = f"{prefix}part-00000-{v - 1:08x}-0000-0000-0000-000000000000-c000.snappy.parquet"
            actions.append({"remove": {"path": prev, "deletionTimestamp": 0, "dataChange": True}})
        (log / f"{v:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


@pytest.mark.parametrize("prefix", ["", "Xq/"], ids=["plain", "random-prefix"])
def test_the_parquet_files_of_a_delta_table_are_refused(tmp_path, prefix):
    """A Delta Lake table of 10 rows overwritten by 10 others: the first file stays until VACUUM,
    and ``table/*.parquet`` read 20 rows, the old version's with the new. The files of a table
    are the log's, not the folder's: refused, naming the table; a folder without _delta_log/
    (the same files copied out) reads. A table with ``delta.randomizeFilePrefixes`` (or column
    mapping on partitions) writes each file under a random 2-character folder (``table/Xq/``,
    delta-spark's DelayedCommitProtocol), where the check looked for _delta_log/ beside the files
    only: ``table/*/*.parquet`` read both versions."""
    _delta_table(tmp_path / "table", [[f"old {i}" for i in range(10)], [f"new {i}" for i in range(10)]], prefix)
    glob_ = f"{tmp_path}/table/{'*/' if prefix else ''}*.parquet"
    where = r" \(above its random file prefix folder \S+/table/Xq\)" if prefix else ""
    with pytest.raises(InputError, match=r"matches 2 Parquet files of the Delta Lake table \S+/table" + where
                                         + r": its _delta_log/ says which files are the table"):
        plan_units(inp([glob_]))
    shutil.rmtree(tmp_path / "table" / "_delta_log")
    assert len(read_full(plan_units(inp([glob_])))[0]) == 20


@pytest.mark.parametrize("hint,hashed", [("version-hint.text", ""), ("v2.metadata.json", ""),
                                         ("v2.metadata.json", "Kd8Fsw")], ids=["hint", "metadata", "object-storage"])
def test_the_parquet_files_of_an_iceberg_table_are_refused(tmp_path, hint, hashed):
    """An Apache Iceberg table (Iceberg spec: data files under ``<table>/data/``, partition
    folders below; ``<table>/metadata/`` holds ``v<N>.metadata.json`` and, in a Hadoop catalog,
    ``version-hint.text``): an overwrite leaves the old data files until their snapshot expires,
    so ``table/data/**/*.parquet`` read both versions (20 rows of 10). Refused, naming the table;
    a ``data/`` folder without a table's ``metadata/`` beside it reads. A table written with
    ``write.object-storage.enabled`` (Iceberg's ObjectStoreLocationProvider: ``data/<murmur3 hash,
    base64url>/<partition>/<file>``) was read: its files are not in a folder named data."""
    table = tmp_path / "t"
    for v in range(2):
        part = table / "data" / hashed / "lang=en"
        part.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"text": [f"v{v} {i}" for i in range(10)]}), part / f"0000{v}-0-{v:08x}.parquet")
    (table / "metadata").mkdir()
    (table / "metadata" / hint).write_text("2" if hint == "version-hint.text" else "{}")
    with pytest.raises(InputError, match=r"matches 2 Parquet files of the Apache Iceberg table .*/t: its metadata/ says "
                                         r"which data files are the table"):
        plan_units(inp([f"{table}/data/**/*.parquet"]))
    shutil.rmtree(table / "metadata")
    assert len(read_full(plan_units(inp([f"{table}/data/**/*.parquet"])))[0]) == 20


def _hudi_table(root, partitioned=True):
    """A copy-on-write Apache Hudi table laid out as hudi-rs's test table
    ``crates/test/data/sample_table/cow/v6_simplekeygen_nonhivestyle`` is (written by Hudi 0.14):
    ``.hoodie/`` with ``hoodie.properties`` and one ``<instant>.commit`` per commit, a partition
    folder ``10/`` with its ``.hoodie_partition_metadata`` (``partitionDepth=1``), and the second
    commit's update of the file group ``97de74b1-...-0`` written as a new base file beside the
    first commit's (``<file id>_<write token>_<instant>.parquet``), which stays until the cleaner
    runs. The table is the newest version: 2 rows; the folder holds 4."""
    (root / ".hoodie").mkdir(parents=True)
    (root / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=t\nhoodie.table.type=COPY_ON_WRITE\n")
    part = root / "10" if partitioned else root
    part.mkdir(exist_ok=True)
    (part / ".hoodie_partition_metadata").write_text(
        f"#partition metadata\ncommitTime=20240418172802262\npartitionDepth={int(partitioned)}\n")
    for instant, token, texts in (("20240418172802262", "1-98-142", ["Alice", "Carol"]),
                                  ("20240418172804498", "0-119-166", ["Alice B.", "Carol"])):
        (root / ".hoodie" / f"{instant}.commit").write_text("{}")
        pq.write_table(pa.table({"name": texts}),
                       part / f"97de74b1-2a8e-4bb7-874c-0a74e1f42a77-0_{token}_{instant}.parquet")


@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
def test_the_base_files_of_a_hudi_table_are_refused(tmp_path, partitioned):
    """An Apache Hudi table's folder holds every version of a file group's base file until the
    cleaner removes it (and a merge-on-read table's updates in hidden log files): ``t/*/*.parquet``
    over hudi-rs's 4-row sample table read 6 rows, Alice and Carol twice (exit 0). Refused, naming
    the table; the same files copied out without ``.hoodie/`` are refused too, by their names (one
    file group in two versions); the newest version alone reads its 2 rows."""
    table = tmp_path / "t"
    _hudi_table(table, partitioned)
    glob_ = f"{table}/*/*.parquet" if partitioned else f"{table}/*.parquet"
    with pytest.raises(InputError, match=r"matches 2 Parquet files of the Apache Hudi table .*/t: its .hoodie/ says "
                                         r"which file versions are the table"):
        plan_units(inp([glob_], column="name"))
    shutil.rmtree(table / ".hoodie")
    with pytest.raises(InputError, match=r"matches 2 versions of the Apache Hudi file group "
                                         r"97de74b1-2a8e-4bb7-874c-0a74e1f42a77-0 in .*: each holds"):
        plan_units(inp([glob_], column="name"))
    newest = plan_units(inp([glob_.replace("*.parquet", "*_20240418172804498.parquet")], column="name"))
    assert read_full(newest, column="name")[0] == ["Alice B.", "Carol"]


def test_a_checksum_file_matched_by_a_glob_is_named(tmp_path):
    """``dir/*`` over a Parquet file and its visible checksum (``x.parquet.crc``; ``x.parquet.sha256``)
    said "cannot tell the format of x.parquet.crc; set input.format", whose fix would read the
    checksum as data; it now says what the file is and to leave it out of the glob."""
    pq.write_table(pa.table({"text": ["a"]}), tmp_path / "x.parquet")
    (tmp_path / "x.parquet.crc").write_bytes(b"crc\x00\x00\x02\x00")
    with pytest.raises(ConfigError, match=rf"input.paths: {tmp_path}/x.parquet.crc is a checksum file beside the data, "
                                          r"not data; leave it out of the glob \(name the data's suffix"):
        plan_units(inp([f"{tmp_path}/*"]))
    assert len(plan_units(inp([f"{tmp_path}/*.parquet"]))) == 1


@pytest.mark.parametrize("name", ["notes.txt", "README.md", "a.text"])
def test_plain_text_given_as_input_says_how_to_make_json_lines(tmp_path, name):
    """A folder of ``.txt`` documents said "cannot tell the format ...; set input.format to one of
    jsonl, ...", and input.format = "jsonl" then read each line as a not_json reject. The line
    now says plain text is not read and gives the jq lines (``-c``: one object per line, since a
    pretty-printed object is refused) that make JSON Lines of it."""
    p = tmp_path / name
    p.write_text("line one\nline two\n")
    with pytest.raises(ConfigError) as ei:
        plan_units(inp([p], column="text"))
    assert str(ei.value) == (f"input.paths: {p} is plain text, which rmlprep does not read: it takes one document per "
                             "row, as JSON Lines; make one: jq -Rsc '{text: .}' FILE > FILE.jsonl (the file one "
                             "document) or jq -Rc '{text: .}' FILE > FILE.jsonl (each line one)")


def test_json_lines_named_txt_says_to_set_input_format(tmp_path):
    """A JSON Lines file named ``train.txt`` (with or without gzip) was told it is plain text and
    given ``jq -Rc '{text: .}'``, whose output is rows whose text is the JSON line itself
    (``{"text": "{\\"text\\": \\"a\\"}"}``): trained on silently. Its first byte being ``{``, the
    line now says to set input.format = "jsonl", with which the same file reads its 2 rows."""
    for name, data in (("train.txt", b'{"text": "a"}\n{"text": "b"}\n'),
                       ("train.txt.gz", gzip.compress(b'\n  {"text": "a"}\n{"text": "b"}\n'))):
        p = tmp_path / name
        p.write_bytes(data)
        with pytest.raises(ConfigError, match=r"is named as plain text but its first line starts a JSON object: if "
                                              r"it is JSON Lines, set input.format = \"jsonl\""):
            plan_units(inp([p], column="text"))
        assert read_full(plan_units(inp([p], column="text", format="jsonl")))[0] == ["a", "b"]


_HTML = (b'<!DOCTYPE html>\n<html class="">\n<head>\n<meta charset="utf-8" />\n<title>data/train.jsonl \xc2\xb7 '
         b'org/name at main</title>\n</head>\n<body>\n<pre>{"text": "a"}</pre>\n</body>\n</html>\n')
_S3_DENIED = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied'
              b'</Message><RequestId>4442587FB7D0A2F9</RequestId></Error>')


@pytest.mark.parametrize("name,body,what", [
    pytest.param("t.jsonl", _HTML, "an HTML page", id="html-jsonl"),
    pytest.param("t.csv", _HTML, "an HTML page", id="html-csv"),
    pytest.param("t.parquet", _HTML, "an HTML page", id="html-parquet"),
    pytest.param("t.arrow", b"\xef\xbb\xbf  \n" + _HTML.upper(), "an HTML page", id="html-arrow-bom-upper"),
    pytest.param("t.parquet", _S3_DENIED, r"an object store's XML error response \(AccessDenied\)", id="s3-error"),
])
def test_a_web_page_saved_as_the_file_is_named_at_plan(tmp_path, name, body, what):
    """The page a Hub link with /blob/ shows (wget of the link the browser had), or the XML an
    object store answers a request without credentials with, saved in place of the file: a JSONL
    glob read its lines as not_json rejects (one such file among many: exit 0 and a warning), a
    CSV file named '<!DOCTYPE html>' as its column, a Parquet or Arrow file had a damaged footer.
    The plan now names what the file is."""
    p = tmp_path / name
    p.write_bytes(body)
    with pytest.raises(InputError, match=rf"{p}: is {what}.*, not an? \w+ file; fetch the file itself"):
        plan_units(inp([p], column="text"))


def _tar_of(name: str, data: bytes) -> bytes:
    """A tar archive (Python's tarfile, POSIX format) holding one member ``name``."""
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.parametrize("name,pack,kind", [
    pytest.param("t.jsonl", lambda b: b, "", id="jsonl"),
    pytest.param("t.jsonl.gz", gzip.compress, " (gzip-compressed)", id="jsonl-gz"),
    pytest.param("t.jsonl.zst", lambda b: zstandard.ZstdCompressor().compress(b), " (zstd-compressed)", id="jsonl-zst"),
    pytest.param("t.csv.gz", gzip.compress, " (gzip-compressed)", id="csv-gz"),
])
def test_a_tar_archive_named_as_jsonl_or_csv_is_named_a_tar(tmp_path, name, pack, kind):
    """A tar holding forty_docs() (``tar czf t.jsonl.gz data.jsonl``, a common slip) was refused
    as "a hole of zeros" at decoded byte 10 (the NUL padding of its header's 100-byte name
    field): the line now says it is a tar archive, its first member, and to extract it. Its
    header's ``ustar`` at byte 257 (POSIX) is what tells it; a plain file's is seen by the plan."""
    p = tmp_path / name
    p.write_bytes(pack(_tar_of("data.jsonl", forty_docs())))
    with pytest.raises(InputError, match="is a tar archive") as ei:
        read_path(p)
    assert one_line_error(ei, p) == (
        f"{p}: is a tar archive{kind}, not JSON Lines or CSV (its first member: 'data.jsonl'); rmlprep reads the "
        f"files a tar holds, not the archive: extract it (tar xf {p} -C DIR) and give those files "
        '(input.paths = ["DIR/*.jsonl"])')


def test_json_lines_holding_ustar_at_byte_257_are_not_a_tar(tmp_path):
    """A tar header is told by ``ustar`` at byte 257 and its checksum (bytes 148-155: the sum of
    the header's 512 bytes with that field read as spaces, in octal; POSIX ustar, as Python's
    tarfile checks it). A JSON Lines file whose first line holds "ustar" at byte 257 (a corpus
    about archives) was refused as a tar archive: the magic alone is text a document may hold.
    Its 2 rows are read; a real tar (test above) is still named one."""
    first = '{"text": "' + "x" * (257 - 10) + 'ustar archives are POSIX"}'
    assert first.index("ustar") == 257
    for name, pack in (("u.jsonl", lambda b: b), ("u.jsonl.gz", gzip.compress)):
        p = tmp_path / name
        p.write_bytes(pack((first + '\n{"text": "b"}\n').encode()))
        assert read_path(p)[0] == [json.loads(first)["text"], "b"]


@pytest.mark.parametrize("name,archive,how", [
    *[(n, "tar", "tar xf {p} -C DIR") for n in ("d.tar", "d.tar.gz", "d.tgz", "d.tar.zst", "d.tar.xz")],
    ("d.zip", "zip", "unzip {p} -d DIR"), ("d.jsonl.zip", "zip", "unzip {p} -d DIR"), ("d.7z", "7z", "7z x {p} -oDIR"),
    ("d.rar", "rar", "unrar x {p} DIR/")])
def test_an_archive_given_as_input_is_named_an_archive(tmp_path, name, archive, how):
    """A ``.tar`` (compressed or not), ``.zip``, ``.7z`` or ``.rar`` given as input said only
    "cannot tell the format ...; set input.format": it now says it is an archive and how to
    extract it."""
    p = tmp_path / name
    p.write_bytes(b"x")
    with pytest.raises(ConfigError) as ei:
        plan_units(inp([p], column="text"))
    assert str(ei.value) == (f"input.paths: {p} is a {archive} archive; rmlprep reads the files an archive holds, not "
                             f"the archive: extract it ({how.format(p=p)}) and give those files "
                             '(input.paths = ["DIR/*.jsonl"])')


def test_fewer_nul_bytes_than_a_hole_stay_a_row_reject(tmp_path):
    """15 NUL bytes in a row (one short of ``NUL_RUN``) are a bad line, not a hole: that line is
    a reject (raw control bytes are not JSON) and the other 39 rows are read. (A guard on the
    threshold: the refusal above must not take a stray NUL for a hole.)"""
    assert readers_base.NUL_RUN == b"\x00" * 16
    data = forty_docs()
    third = data.index(b"\n", data.index(b"\n") + 1) + 1  # line 2 starts here
    p = tmp_path / "n.jsonl"
    p.write_bytes(_holed(data, third + 12, 15))  # inside line 2's text
    values, rows, errors, _ = read_path(p)
    assert len(values) == 39 and [r for r, _ in errors] == [2]


def _arrow_stream(path, table) -> None:
    """``table`` as an Arrow IPC stream file, as ``datasets`` writes its ``.arrow`` files."""
    with pa.ipc.new_stream(str(path), table.schema) as w:
        w.write_table(table)


@pytest.mark.parametrize("name,kind", [("t.parquet", None), ("t.arrow", None), ("d.arrow", "dictionary"),
                                       ("v.arrow", "string_view")])
@pytest.mark.parametrize("zeros,refused", [(16, True), (15, False)], ids=["16-nul", "15-nul"])
def test_a_text_holding_a_run_of_nul_bytes_refuses_a_parquet_or_arrow_file(tmp_path, name, kind, zeros, refused):
    """Parquet and Arrow data carry no checksum: a hole of zeros in such a file reads without an
    error, as texts holding the zeros and, in Parquet, texts read as empty (the next test). The
    text of row 7 holding 16 NUL bytes names the file and the row, also in batches of 3 rows
    (the Arrow file's batch of rows 6-8 is a slice of its column at array offset 6), and in a
    dictionary or string_view column, read as Python values; 15 are read as text."""
    texts = [f"text {i}" for i in range(20)]
    texts[7] = "before" + "\x00" * zeros + "after"
    p = tmp_path / name
    table = pa.table({"text": texts})
    if kind is not None:  # text not in one data buffer: read as Python values
        table = pa.table({"text": pa.array(texts).dictionary_encode() if kind == "dictionary"
                          else pa.array(texts, pa.string_view())})
    if name.endswith(".parquet"):
        pq.write_table(table, p)  # snappy, pyarrow's default
    else:
        _arrow_stream(p, table)
    if not refused:
        assert read_path(p)[0] == texts
        return
    for batch_rows in (256, 3):  # row 7 in the first batch, or the second row of a sliced one
        with pytest.raises(InputError, match="row 7: 'text' holds a run of NUL bytes: a hole of zeros") as ei:
            read_full(plan_units(inp([p])), batch_rows=batch_rows)
        one_line_error(ei, p)


@pytest.mark.parametrize("zeros,refused", [(32, True), (15, False)], ids=["32-nul", "15-nul"])
def test_a_hole_in_a_conversation_column_is_refused(tmp_path, zeros, refused):
    """40 conversations (a list of message structs, as an sft Parquet file holds them),
    uncompressed PLAIN: ``zeros`` bytes zeroed inside row 20's answer, "answer 20 lorem ...".
    pyarrow reads every row, row 20's content holding the zeros; read as rows it was rendered
    and trained on. 32 NUL bytes in a nested text refuse the file as in a text column; 15 are
    read as text (the rule of :data:`rmlprep.readers.holes.NUL_RUN`)."""
    rows = [[{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i} " + "lorem " * 12}]
            for i in range(40)]
    p = tmp_path / "c.parquet"
    pq.write_table(pa.table({"messages": rows}), p, compression="none", use_dictionary=False)
    data = p.read_bytes()
    p.write_bytes(_holed(data, data.index(b"answer 20 ") + 16, zeros))
    got = pq.read_table(p)["messages"].to_pylist()
    assert "\x00" * zeros in got[20][1]["content"] and got[:20] == rows[:20] and got[21:] == rows[21:]  # read silently
    if not refused:
        assert read_path(p, column="messages")[0] == got
        return
    with pytest.raises(InputError, match="row 20: 'messages' holds a run of NUL bytes: a hole of zeros") as ei:
        read_path(p, column="messages")
    one_line_error(ei, p)


def test_a_hole_over_many_short_texts_in_a_conversation_column_is_refused(tmp_path):
    """40 conversations in an Arrow stream (as ``datasets`` writes them): the roles' bytes lie
    side by side, "userassistantuser...", so 40 zero bytes from the start of row 10's role
    leave no text with 16 NULs ("\\0\\0\\0\\0", "\\0" * 9, ...) and pyarrow reads every row;
    the run of zeros in the roles' buffer refuses the file, naming the first row holding a NUL."""
    rows = [[{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
            for i in range(40)]
    table = pa.table({"messages": rows})
    p = tmp_path / "c.arrow"
    _arrow_stream(p, table)
    data = p.read_bytes()
    p.write_bytes(_holed(data, data.index(b"userassistant" * 40) + 13 * 10, 40))
    got = pa.ipc.open_stream(str(p)).read_all()["messages"].to_pylist()
    assert got[10][0]["role"] == "\x00" * 4 and all("\x00" * 16 not in m["role"] for r in got for m in r)  # read silently
    with pytest.raises(InputError, match="row 10: 'messages' holds a run of NUL bytes: a hole of zeros") as ei:
        read_path(p, column="messages")
    one_line_error(ei, p)


def test_a_hole_beside_text_that_is_not_utf8_is_refused(tmp_path):
    """A hole's edges cut multi-byte characters, so its batch also holds rows that are not
    UTF-8 (rejects, read one by one): the zeros in row 7 still refuse the file. Row 3 is
    b"caf\\xc3" (a character cut after its first byte)."""
    vals = [f"t{i}".encode() for i in range(10)]
    vals[3], vals[7] = b"caf\xc3", b"x" + b"\x00" * 16 + b"y"
    offsets = np.cumsum([0] + [len(v) for v in vals]).astype(np.int32)
    col = pa.Array.from_buffers(pa.string(), len(vals), [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(vals))])
    p = tmp_path / "u.arrow"
    _arrow_stream(p, pa.table({"text": col}))
    with pytest.raises(InputError, match="row 7: 'text' holds a run of NUL bytes"):
        read_path(p)


def test_a_parquet_page_failing_its_crc_is_refused(tmp_path):
    """A Parquet file whose pages carry a CRC-32 (parquet-mr and Spark write them; pyarrow with
    write_page_checksum=True), uncompressed, with one byte of a text changed ('document 1500'
    -> 'document 1501', a flipped bit): pyarrow reads the other text without a word unless
    asked to verify; rmlprep verifies and refuses the file naming the CRC."""
    texts = [f"document {i} " + "lorem ipsum " * 10 for i in range(3000)]
    p = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": texts}), p, compression="none", use_dictionary=False, row_group_size=1000,
                   write_page_checksum=True)
    data = p.read_bytes()
    at = data.index(b"document 1500 ") + len(b"document 150")
    p.write_bytes(data[:at] + b"1" + data[at + 1:])
    assert pq.read_table(p)["text"][1500].as_py().startswith("document 1501 ")  # what a reader without the check takes
    with pytest.raises(InputError, match="CRC checksum verification failed") as ei:
        read_path(p)
    one_line_error(ei, p)


def test_a_hole_in_an_uncompressed_parquet_file_is_refused(tmp_path):
    """The measured case: 3,000 texts of 134-139 bytes, uncompressed PLAIN Parquet in row groups
    of 1,000, 4 KiB zeroed at a third of the file. pyarrow reads 3,000 rows of which 993 are
    empty (each zeroed 4-byte length prefix is a value of length 0 until the page's count of
    values is reached) and one holds the zeros; rmlprep refuses the file on that one."""
    texts = [f"document {i} " + "lorem ipsum " * 10 for i in range(3000)]
    p = tmp_path / "h.parquet"
    pq.write_table(pa.table({"text": texts}), p, compression="none", row_group_size=1000, use_dictionary=False)
    data = p.read_bytes()
    p.write_bytes(_holed(data, len(data) // 3, 4096))
    got = pq.read_table(p)["text"].to_pylist()
    assert len(got) == 3000 and sum(t == "" for t in got) == 993  # what a reader without the check takes
    with pytest.raises(InputError, match="holds a run of NUL bytes"):
        read_path(p)


@pytest.mark.parametrize("dictionary", [True, False], ids=["dictionary-page", "data-page"])
def test_a_hole_ending_where_a_value_starts_reads_as_empty_texts_and_is_refused(tmp_path, dictionary):
    """500 distinct texts "document K lorem ipsum ..." repeated to 3,000 rows, one uncompressed
    row group (no CRC: pyarrow's default), the PLAIN values zeroed from the 4-byte length prefix
    of "document 10 ..." up to that of "document 40 ...": every zeroed prefix is a value of
    length 0, the values after the hole start where a value starts, so no text holds a zero and
    pyarrow reads 3,000 rows without an error, many of them empty (2,940 through the
    dictionary page, 663 in the data page, and the rest shifted). The footer's minimum for the
    row group is "document 0 ...", which no empty text can be under a working writer."""
    texts = [f"document {i % 500} " + "lorem ipsum " * (i % 500 % 7 + 3) for i in range(3000)]
    p = tmp_path / "h.parquet"
    pq.write_table(pa.table({"text": texts}), p, compression="none", row_group_size=3000, use_dictionary=dictionary)
    data = p.read_bytes()
    start, end = data.index(b"document 10 ") - 4, data.index(b"document 40 ") - 4
    p.write_bytes(_holed(data, start, end - start))
    got = pq.read_table(p)["text"].to_pylist()
    assert len(got) == 3000 and sum(t == "" for t in got) == (2940 if dictionary else 663)  # read silently
    with pytest.raises(InputError, match=r"row 10: 'text' is empty, but the footer says the smallest value of row "
                                         r"group 0 is 'document 0 lorem ipsum lorem ipsum lorem': the page is "
                                         r"damaged") as ei:
        read_path(p)
    one_line_error(ei, p)


def test_a_hole_over_dictionary_indices_reads_as_the_first_entry_and_is_refused(tmp_path):
    """1,000 distinct texts in one dictionary-encoded row group (pyarrow's default encoding;
    uncompressed here, as snappy, LZ4 and zstd store the incompressible indices as they are):
    512 zero bytes over the data page's RLE/bit-packed indices read, with no error, as 409
    rows holding entry 0, the first text. The entries those rows held are then used by no
    row, which a writer building the dictionary from the rows never leaves."""
    texts = [f"document {i} " + "lorem ipsum " * (i % 5) for i in range(1000)]
    p = tmp_path / "d.parquet"
    pq.write_table(pa.table({"text": texts}), p, compression="none", row_group_size=1000)
    data = p.read_bytes()
    chunk = pq.ParquetFile(p).metadata.row_group(0).column(0)
    end = chunk.dictionary_page_offset + chunk.total_compressed_size  # the indices end the chunk's data page
    p.write_bytes(_holed(data, end - 612, 512))
    got = pq.read_table(p)["text"].to_pylist()
    assert len(got) == 1000 and got.count(texts[0]) == 410  # what a reader without the check takes
    with pytest.raises(InputError, match=r"row group 0: entry \d+ of the column 'text''s dictionary \('document \d+ "
                                         r".*'\) is used by no row, though a writer builds the dictionary") as ei:
        read_path(p)
    one_line_error(ei, p)


def test_a_hole_over_the_dictionary_indices_of_conversation_contents_is_refused(tmp_path):
    """400 conversations (list<struct<role, content>>), dictionary-encoded, uncompressed: 256
    zero bytes over the indices of the contents' data page read, with no error, as 204 more
    contents "question 0" (the first entry); the entries they held are used by no row. The roles'
    leaf ("user", "assistant": every entry used) is checked on its own and passes."""
    rows = [[{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
            for i in range(400)]
    p = tmp_path / "c.parquet"
    pq.write_table(pa.table({"messages": rows}), p, compression="none")
    md = pq.ParquetFile(p).metadata.row_group(0)
    chunk = next(md.column(j) for j in range(md.num_columns) if md.column(j).path_in_schema.endswith("content"))
    end = chunk.dictionary_page_offset + chunk.total_compressed_size
    p.write_bytes(_holed(p.read_bytes(), end - 356, 256))
    got = [m["content"] for r in pq.read_table(p)["messages"].to_pylist() for m in r]
    assert len(got) == 800 and got.count("question 0") == 205  # what a reader without the check takes
    with pytest.raises(InputError, match=r"row group 0: entry \d+ of the column 'messages''s dictionary "
                                         r"\(messages\.list\.element\.content\) \('(question|answer) \d+'\) is used by no "
                                         r"row") as ei:
        read_path(p, column="messages")
    one_line_error(ei, p)


def test_dictionaries_with_entries_no_row_uses_on_purpose(tmp_path):
    """A dictionary that fell back to PLAIN (a page limit of 2,000 bytes: the reader's
    dictionary then grows with the plain rows) reads whole, and so does a column written from
    an Arrow dictionary with an unused entry (a pandas categorical's unused category), whose
    Arrow schema says so. Without that schema (store_schema=False) the entry cannot be told
    from damage: refused, the message saying to cast the column to strings."""
    texts = [f"text {i} " + "x" * (i % 50) for i in range(3000)]
    p = tmp_path / "f.parquet"
    pq.write_table(pa.table({"text": texts}), p, dictionary_pagesize_limit=2000, row_group_size=3000)
    assert read_full(plan_units(inp([p])), batch_rows=100)[0] == texts
    cat = pa.DictionaryArray.from_arrays(pa.array([0, 2, 2, 0], pa.int32()), pa.array(["a", "unused", "c"]))
    pq.write_table(pa.table({"text": cat}), p)
    assert read_path(p)[0] == ["a", "c", "c", "a"]
    pq.write_table(pa.table({"text": cat}), p, store_schema=False)
    with pytest.raises(InputError, match=r"entry 1 of the column 'text''s dictionary \('unused'\) is used by no row.*"
                                         r"cast the column to strings"):
        read_path(p)


def test_a_hole_ending_where_a_message_content_starts_is_refused(tmp_path):
    """40 conversations (list<struct<role, content>>), uncompressed PLAIN: the contents' leaf
    holds "question 0", "answer 0", "question 1", ... with their 4-byte length prefixes. Zeroed
    from the prefix of "question 10" to that of "question 20", the contents read with no error
    and no NUL: the zeroed prefixes are empty contents and the rest shifted. The footer's
    minimum of that leaf ("answer 0 ...") is not empty, so row 10's empty content refuses it."""
    rows = [[{"role": "user", "content": f"question {i} " + "lorem " * 4}, {"role": "assistant", "content": f"answer {i}"}]
            for i in range(40)]
    p = tmp_path / "c.parquet"
    pq.write_table(pa.table({"messages": rows}), p, compression="none", use_dictionary=False)
    data = p.read_bytes()
    start, end = data.index(b"question 10 ") - 4, data.index(b"question 20 ") - 4
    p.write_bytes(_holed(data, start, end - start))
    got = [m["content"] for r in pq.read_table(p)["messages"].to_pylist() for m in r]
    assert "" in got and not any("\x00" in c for c in got)  # what a reader without the check takes
    with pytest.raises(InputError, match=r"row 10: 'messages' holds an empty text at messages\.list\.element\.content, "
                                         r"but the footer says the smallest value of that leaf in row group 0 is "
                                         r"'answer 0'") as ei:
        read_path(p, column="messages")
    one_line_error(ei, p)


@pytest.mark.parametrize("name, column", [("duckdb_enum_roles", "messages"), ("duckdb_enum_text", "text"),
                                          ("fastparquet_categorical", "text")])
def test_writers_that_write_unused_dictionary_entries_are_read(name, column):
    """Healthy files whose dictionary pages hold entries no row uses, written by DuckDB (an
    ENUM's whole type is its dictionary: conversations whose role ENUM('system', 'user',
    'assistant', 'tool') holds only 'user' and 'assistant') and fastparquet (a categorical's
    unused category 'zz'), neither with an Arrow schema saying so (fixtures/writers,
    tools/make_writer_fixtures.py): read whole, as pyarrow reads them. The test first shows
    the dictionary does hold an entry no row uses, so it cannot pass for want of one."""
    p = Path(__file__).resolve().parents[1] / "fixtures" / "writers" / f"{name}.parquet"
    pf = pq.ParquetFile(p)
    assert not pf.metadata.created_by.startswith(("parquet-cpp", "parquet-mr"))
    leaf = next(pf.metadata.row_group(0).column(j).path_in_schema for j in range(pf.metadata.num_columns)
                if pf.metadata.row_group(0).column(j).path_in_schema.endswith(("role", "text")))
    col = pq.ParquetFile(p, read_dictionary=[leaf]).read(columns=[leaf]).column(0).combine_chunks()
    while not pa.types.is_dictionary(col.type):  # list<struct<role, ...>> down to the role leaf
        col = col.field(0) if pa.types.is_struct(col.type) else col.flatten()
    assert len(set(col.indices.drop_null().to_pylist())) < len(col.dictionary)  # an entry no row uses
    assert read_path(p, column=column)[0] == pq.read_table(p)[column].to_pylist()


@pytest.mark.parametrize("kind", ["string", "dictionary", "string_view", "large_string"])
def test_real_empty_texts_beside_row_groups_without_them_are_read(tmp_path, kind):
    """Row groups of 7 rows read in batches of 10 (a batch spans two groups): group 1 (rows
    7-13) holds two real empty texts, so its minimum is empty; the groups around it have none,
    and their non-empty minimum must not be held against group 1's rows."""
    texts = [f"t{i}" for i in range(40)]
    texts[8] = texts[13] = ""
    arr = pa.array(texts, pa.large_string() if kind == "large_string" else pa.string())
    if kind == "dictionary":
        arr = arr.dictionary_encode()
    elif kind == "string_view":
        arr = arr.cast(pa.string_view())
    p = tmp_path / "e.parquet"
    pq.write_table(pa.table({"text": arr}), p, row_group_size=7)
    assert pq.ParquetFile(p).metadata.row_group(2).column(0).statistics.min == "t14"
    assert read_full(plan_units(inp([p])), batch_rows=10)[0] == texts


@pytest.mark.parametrize("tail,cut", [
    pytest.param(b'{"text": "lorem ips', True, id="inside-a-string"),
    pytest.param(b'{"text": "a"', True, id="before-the-brace"),
    pytest.param(b'{"txt": "a"}', True, id="no-such-field"),
    pytest.param(b'{"text": "a"}', False, id="complete"),
    pytest.param(b'{"text": "a"}  ', False, id="complete-trailing-space"),
    pytest.param(b"   ", False, id="blank"),
    pytest.param(b'{"text": "' + b"y" * 1500, True, id="over-long"),
    pytest.param(b'{"text": "' + b"y" * 1500 + b'"}', False, id="over-long-complete"),
])
@pytest.mark.parametrize("bom", [False, True], ids=["", "bom-one-line"])
def test_a_plain_jsonl_cut_short_is_refused_by_the_plan(tmp_path, monkeypatch, tail, cut, bom):
    """With ``input.column`` (a run always gives it) the plan reads a plain file's last line when
    it has no newline and applies the reader's rule to it, so the cut is found before any unit
    starts (a rerun over a truncated file then never touches the output folder): the plan's line
    is the reader's, word for word, and a file the reader takes is planned as before. (The reader
    gave a first line over the row limit after a BOM 3 bytes less of it, and refused that line,
    complete or not, as cut short.)"""
    monkeypatch.setattr(readers_base, "MAX_ROW_BYTES", 1000)
    body = (b"\xef\xbb\xbf" if bom else forty_docs()) + tail
    p = tmp_path / "c.jsonl"
    p.write_bytes(body)
    if not cut:
        assert plan_units(inp([p], unit_bytes=1000, column="text"))
        read_path(p, unit_bytes=1000)  # and the reader takes it (a BOM took 3 bytes of its row limit)
        return
    with pytest.raises(InputError, match="the last line.* is cut short") as planned:
        plan_units(inp([p], unit_bytes=1000, column="text"))
    with pytest.raises(InputError) as read:
        read_path(p, unit_bytes=1000)  # no column: the plan leaves it to the reader
    assert str(planned.value) == str(read.value) and planned.value.offset == read.value.offset
    one_line_error(planned, p)


def test_two_files_concatenated_without_a_final_newline(tmp_path):
    """``cat a.jsonl.gz b.jsonl.gz`` where a's last line has no newline: a's last row and b's
    first share a line. The reader cannot tell where one ends without guessing, so the line is
    one reject, and its reason says what happened (column 14: after '{"text": "a"}')."""
    p = tmp_path / "cat.jsonl.gz"
    p.write_bytes(gzip.compress(b'{"text": "z"}\n{"text": "a"}') + gzip.compress(b'{"text": "b"}\n{"text": "c"}\n'))
    values, rows, errors, _ = read_path(p)
    assert values == ["z", "c"] and rows == [0, 2]
    assert errors == [(1, "line holds two JSON objects, the second at column 14 (files concatenated without a "
                          "newline at the end of the first?)")]


def test_jsonl_with_lone_cr_line_endings_is_a_file_error(tmp_path):
    """Classic Mac line endings: the file has no ``\\n``, so it would be one line and one reject
    for all its documents. Refused at plan time, naming the first lone CR (byte 13 here: the
    first line is 13 bytes)."""
    p = tmp_path / "mac.jsonl"
    p.write_bytes(b'{"text": "a"}\r{"text": "b"}\r{"text": "c"}\r')
    with pytest.raises(InputError, match="lone carriage return") as ei:
        plan_units(inp([p]))
    assert "byte 13:" in one_line_error(ei, p)
    g = tmp_path / "mac.jsonl.gz"  # compressed: found when the first line is read
    g.write_bytes(gzip.compress(p.read_bytes()))
    with pytest.raises(InputError, match="lone carriage return"):
        read_path(g)


def test_a_named_pipe_is_refused_not_read_forever(tmp_path):
    """A FIFO (or /dev/stdin, or bash's <(zcat ...)) has no size and cannot be hashed or read
    twice: refused at plan time instead of blocking on open until a writer comes."""
    f = tmp_path / "stream.jsonl"
    os.mkfifo(f)
    with pytest.raises(ConfigError, match="not a regular file"):
        plan_units(inp([f]))
    with pytest.raises(ConfigError, match="not a regular file"):
        plan_units(inp([tmp_path / "*.jsonl"]))


@pytest.mark.parametrize("body,blank", [(b"", 0), (b"\n\n  \n\r\n", 4)])
def test_empty_and_blank_jsonl(tmp_path, body, blank):
    p = tmp_path / "e.jsonl"
    p.write_bytes(body)
    units = plan_units(inp([p]))
    assert len(units) == 1
    assert read_full(units) == ([], [], [], blank)


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_form_feed_and_vertical_tab_lines_are_rows(tmp_path, gz):
    """A blank line is JSON whitespace only (space, tab, CR, LF; RFC 8259). A line holding only
    form feeds or vertical tabs was skipped as blank (bytes.isspace takes them for
    whitespace), neither a row nor a reject, though JSON refuses them (json.loads("\\x0c")
    raises) and the same bytes around an object make the line a reject (explorer G7). Now
    each is a row: a read reject with its reason, so every line is a row, a reject or blank."""
    p = tmp_path / ("f.jsonl.gz" if gz else "f.jsonl")
    body = b'{"text": "a"}\n\x0c\n\x0b\n \x0c\t\r\n\t \r\n{"text": "b"}\n'
    p.write_bytes(gzip.compress(body) if gz else body)
    values, rows, errors, blank = read_full(plan_units(inp([p])))
    why = "line holds only whitespace JSON does not allow (form feed \\x0c or vertical tab \\x0b), not a JSON object"
    assert values == ["a", "b"] and rows == [0, 5] and errors == [(1, why), (2, why), (3, why)] and blank == 1


# -- Parquet, datasets folders -------------------------------------------------------------------
def _parquet(path, n=100):
    pq.write_table(pa.table({"text": [f"row {i}" for i in range(n)]}), path, row_group_size=10)


@pytest.mark.parametrize("damage", ["footer", "header", "truncated", "empty"])
def test_damaged_parquet_is_a_file_error(tmp_path, damage):
    p = tmp_path / "d.parquet"
    _parquet(p)
    data = bytearray(p.read_bytes())
    if damage == "footer":
        data[-8:-4] = b"\xff\xff\xff\x7f"  # the footer length
    elif damage == "header":
        data[4:200] = bytes(196)  # the first column chunk's page header and data
    elif damage == "truncated":
        data = data[: len(data) // 2]
    else:
        data = b""
    p.write_bytes(bytes(data))
    with pytest.raises(InputError) as ei:
        read_path(p, unit_rows=30)
    one_line_error(ei, p)


def _hf_folder(tmp_path, n=30):
    import datasets

    d = tmp_path / "hf"
    datasets.Dataset.from_dict({"text": [f"t{i}" for i in range(n)]}).save_to_disk(str(d))
    return d


@pytest.mark.parametrize("content,match", [
    pytest.param(b"{not json", "state.json is not valid JSON", id="not-json"),
    pytest.param(b'{"_fingerprint": "x"}', 'no "_data_files" list', id="no-data-files"),
    pytest.param(b'{"_data_files": [{"name": "x"}]}', 'no plain "filename"', id="no-filename"),
    pytest.param(b'{"_data_files": [{"filename": "../../etc/passwd"}]}', 'no plain "filename"', id="escapes"),
    pytest.param(b'{"_data_files": [{"filename": "gone.arrow"}]}', "which is not in", id="missing-file"),
    pytest.param(b"[1, 2]", 'no "_data_files" list', id="a-list"),
])
def test_damaged_hf_state_json(tmp_path, content, match):
    d = _hf_folder(tmp_path)
    (d / "state.json").write_bytes(content)
    with pytest.raises(InputError, match=match) as ei:
        read_path(d)
    one_line_error(ei, d)


@pytest.mark.parametrize("content,match", [
    pytest.param(b"\x00\x01", "dataset_dict.json is not valid JSON", id="binary"),
    pytest.param(b'{"split": ["train"]}', 'no "splits" list', id="no-splits"),
    pytest.param(b'{"splits": ["../x"]}', "has no folder", id="escapes"),
])
def test_damaged_hf_dataset_dict_json(tmp_path, content, match):
    d = _hf_folder(tmp_path)
    (d / "dataset_dict.json").write_bytes(content)
    with pytest.raises(InputError, match=match) as ei:
        read_path(d)
    one_line_error(ei, d)


def test_truncated_hf_arrow_file(tmp_path):
    d = _hf_folder(tmp_path, n=2000)
    assert len(read_path(d)[0]) == 2000
    arrow = next(d.glob("*.arrow"))
    arrow.write_bytes(arrow.read_bytes()[: arrow.stat().st_size * 2 // 3])
    with pytest.raises(InputError, match="not a readable Arrow file") as ei:
        read_path(d)
    one_line_error(ei, arrow)


def _stream_file(path: Path, n: int, batch_rows: int, legacy: bool = False) -> Path:
    import pyarrow as pa

    t = pa.table({"text": [f"t{i}" for i in range(n)]})
    opts = pa.ipc.IpcWriteOptions(use_legacy_format=legacy)
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(f, t.schema, options=opts) as w:
        for b in t.to_batches(max_chunksize=batch_rows):
            w.write_batch(b)
    return path


@pytest.mark.parametrize("legacy", [False, True], ids=["eos", "legacy-eos"])
def test_arrow_stream_cut_at_a_batch_boundary_is_refused(tmp_path, legacy):
    """A closed stream writer ends the file with the end-of-stream marker (ff ff ff ff 00 00 00 00;
    four zero bytes in the pre-0.15 format). Cut right after the 2nd of 4 record batches, the
    stream is still readable and pyarrow reads it as a complete 20-row file; it must be refused
    instead (it was planned and read as 20 of the 40 rows with no error)."""
    whole = _stream_file(tmp_path / "whole.arrow", n=40, batch_rows=10, legacy=legacy)
    units = plan_units(inp([whole]))
    values, rows, errors, _ = read_full(units)
    assert values == [f"t{i}" for i in range(40)] and not errors
    data = whole.read_bytes()
    eos = 4 if legacy else 8
    import pyarrow as pa

    src = pa.BufferReader(data)
    ends = []
    while src.tell() < len(data) - eos:
        pa.ipc.read_message(src)
        ends.append(src.tell())
    assert len(ends) == 5  # the schema and 4 batches
    cut = tmp_path / "cut.arrow"
    cut.write_bytes(data[: ends[2]])  # the schema and 2 whole batches: 20 rows
    assert pa.ipc.open_stream(cut.read_bytes()).read_all().num_rows == 20  # pyarrow alone sees no fault
    with pytest.raises(InputError, match="without its end-of-stream marker") as ei:
        plan_units(inp([cut]))
    one_line_error(ei, cut)
    cut.write_bytes(data[: ends[2]] + data[-eos:])  # the marker restored: a whole 20-row stream
    assert read_full(plan_units(inp([cut])))[0] == [f"t{i}" for i in range(20)]


def _stream_bytes(texts) -> bytes:
    table = pa.table({"text": texts})
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as w:
        for b in table.to_batches(max_chunksize=500):
            w.write_batch(b)
    return sink.getvalue()


def test_arrow_streams_joined_with_cat_are_refused(tmp_path):
    """cat a.arrow b.arrow (100 rows each): pyarrow's stream reader stops at a's end-of-stream
    marker and reads 100 rows as the file; the bytes after the marker refuse it. Zeros after
    the marker (a preallocated tail) are no data: that file reads whole."""
    a, b = [f"a{i}" for i in range(100)], [f"b{i}" for i in range(100)]
    p = tmp_path / "cat.arrow"
    p.write_bytes(_stream_bytes(a) + _stream_bytes(b))
    assert pa.ipc.open_stream(str(p)).read_all().num_rows == 100  # what a reader without the check takes
    with pytest.raises(InputError, match=r"byte \d+: the stream's end-of-stream marker is followed by \d+ more bytes "
                                         r"\(data from byte \d+: streams joined with cat") as ei:
        plan_units(inp([p]))
    one_line_error(ei, p)
    p.write_bytes(_stream_bytes(a) + b"\x00" * 64)
    assert read_path(p)[0] == a


def test_a_hole_of_zeros_at_an_arrow_message_start_is_refused(tmp_path):
    """1,000 texts in two batches; 512 zero bytes from the start of the second batch's message:
    pyarrow takes the zeros for the legacy end-of-stream marker (a zero length) and reads 500
    rows; the plan walked on into them and stopped with a bare EOFError (a traceback)."""
    texts = [f"doc {i}" for i in range(1000)]
    data = _stream_bytes(texts)
    src, starts = pa.BufferReader(data), []
    for _ in range(3):  # the schema, then the two batches
        starts.append(src.tell())
        pa.ipc.read_message(src)
    p = tmp_path / "h.arrow"
    p.write_bytes(_holed(data, starts[2], 512))
    assert pa.ipc.open_stream(str(p)).read_all().num_rows == 500  # what a reader without the check takes
    with pytest.raises(InputError, match=rf"byte {starts[2]}: zeros stand where the next message should start") as ei:
        plan_units(inp([p]))
    one_line_error(ei, p)


def test_arrow_stream_cut_after_the_plan_is_refused_by_the_reader(tmp_path):
    """The reader checks the marker too: a file cut between the plan and the read."""
    f = _stream_file(tmp_path / "a.arrow", n=40, batch_rows=10)
    units = plan_units(inp([f]))
    f.write_bytes(f.read_bytes()[:-8])
    with pytest.raises(InputError, match="without its end-of-stream marker"):
        read_full(units)


def _write_table(t, f: Path, kind: str) -> None:
    """``t`` as an Arrow IPC stream (``kind`` "arrow", as ``datasets`` writes) or a Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if kind == "arrow":
        with pa.OSFile(str(f), "wb") as out, pa.ipc.new_stream(out, t.schema) as w:
            w.write_table(t)
    else:
        pq.write_table(t, f)


def _json_column(texts):
    import pyarrow as pa

    return pa.ExtensionArray.from_storage(pa.json_(), pa.array(texts, pa.string()))


@pytest.mark.parametrize("kind", ["arrow", "parquet"])
def test_json_extension_column_is_decoded(tmp_path, kind):
    """A column of Arrow's ``arrow.json`` type (``datasets`` >= 5 writes its ``Json`` feature so
    when rows mix shapes; a Parquet JSON-annotated column reads as it) holds JSON texts: the row
    '"Third\\ndocument."' is the string "Third\ndocument.", as ``datasets`` decodes it. It was read
    as its text, quotes and backslash included; a text that is not JSON is a reject."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pa.table({"text": _json_column(['"First document."', '["a", "list"]', '"Third\\ndocument."', None,
                                        "not json"])})
    f = tmp_path / f"a.{kind}"
    _write_table(t, f, kind)
    values, rows, errors, _ = read_full(plan_units(inp([f])))
    assert values == ["First document.", ["a", "list"], "Third\ndocument.", None]
    assert rows == [0, 1, 2, 3]
    assert len(errors) == 1 and errors[0][0] == 4 and "arrow.json" in errors[0][1] and "not valid JSON" in errors[0][1]


def test_json_extension_inside_a_struct_is_decoded(tmp_path):
    """Tool definitions whose ``properties`` differ between rows: ``datasets`` types that one
    field ``Json`` inside the struct. The nested JSON text decodes to its object."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    props = _json_column(['{"city": {"type": "string"}}', '{"query": {"type": "string"}, "n": {"type": "integer"}}'])
    params = pa.StructArray.from_arrays([pa.array(["object", "object"]), props], names=["type", "properties"])
    tools = pa.ListArray.from_arrays(pa.array([0, 1, 2], pa.int32()), params)
    f = tmp_path / "tools.parquet"
    pq.write_table(pa.table({"tools": tools}), f)
    values, _, errors, _ = read_full(plan_units(inp([f])), column="tools")
    assert not errors
    assert values == [[{"type": "object", "properties": {"city": {"type": "string"}}}],
                      [{"type": "object", "properties": {"query": {"type": "string"}, "n": {"type": "integer"}}}]]


@pytest.mark.parametrize("kind", ["arrow", "parquet"])
def test_two_columns_with_the_input_column_name(tmp_path, kind):
    """pyarrow and DuckDB write tables with two columns of one name; which one input.column means
    cannot be known: one InputError line (it was a KeyError traceback)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pa.Table.from_arrays([pa.array(["first a"]), pa.array(["second a"])], names=["text", "text"])
    f = tmp_path / f"dup.{kind}"
    _write_table(t, f, kind)
    with pytest.raises(InputError, match="2 columns are named 'text'") as ei:
        read_full(plan_units(inp([f])))
    one_line_error(ei, f)


# -- which files are input ---------------------------------------------------------------------
def test_output_folder_inside_a_recursive_glob_is_never_input(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl").write_text('{"text": "a"}\n')
    out = tmp_path / "data" / "out"
    (out / "rejects").mkdir(parents=True)
    (out / "rejects" / "rejects-00000.jsonl").write_text('{"text": "reject"}\n')
    units = plan_units(inp([tmp_path / "data" / "**" / "*.jsonl"]))
    assert len(units) == 2  # without exclude the rejects would be read back
    units = plan_units(inp([tmp_path / "data" / "**" / "*.jsonl"]), exclude=[out])
    assert [Path(u.path).name for u in units] == ["a.jsonl"]
    with pytest.raises(ConfigError, match="inside the output folder") as ei:
        plan_units(inp([out / "rejects" / "rejects-00000.jsonl"]), exclude=[out])
    one_line_error(ei, out)


@pytest.mark.parametrize("owner", [".rmlprep.folder.json", ".rmlprep.lock"])
def test_another_runs_output_folder_under_a_glob_is_refused(tmp_path, owner):
    """A corpus folder holding an earlier run's output (``data/tok/``, written with another
    ``output.dir`` than this run's): ``data/**/*.jsonl`` read its ``rejects/rejects-00001.jsonl``
    as rows (each a missing_field reject: exit 0, a warning), ``data/**/*`` refused its
    ``README.md`` as plain text with the jq line. Refused, naming the folder; the same names in a
    folder rmlprep did not write (a dataset's own ``train-00000.parquet``) are read."""
    data = tmp_path / "data"
    (data / "tok" / "rejects").mkdir(parents=True)
    (data / "a.jsonl").write_text('{"text": "a"}\n')
    (data / "tok" / owner).write_text("{}")
    (data / "tok" / "rejects" / "rejects-00001.jsonl").write_text('{"source": "a.jsonl", "row": 1, "kind": "not_json"}\n')
    (data / "tok" / "README.md").write_text("# rmlprep output\n")
    with pytest.raises(InputError, match=r"matches 1 file of \S+/data/tok, the output folder of another rmlprep run "
                                         r"\(rejects-00001.jsonl\): its shards, rejects and reports are not corpus files"):
        plan_units(inp([data / "**" / "*.jsonl"]))
    with pytest.raises(InputError, match=r"matches 2 files of \S+/data/tok, the output folder of another rmlprep run "
                                         r"\(README.md ...\)"):
        plan_units(inp([data / "**" / "*"]))
    (data / "tok" / owner).unlink()
    (data / "tok" / "README.md").unlink()
    pq.write_table(pa.table({"text": ["t"]}), data / "tok" / "train-00000.parquet")
    assert sorted(Path(u.path).name for u in plan_units(inp([data / "**" / "*.parquet"]))) == ["train-00000.parquet"]


@pytest.mark.parametrize("name", ["train.jsonl.part", "train.jsonl.crdownload", "train.parquet.incomplete",
                                  "train.csv_.gstmp"])
def test_a_download_still_being_written_is_refused(tmp_path, name):
    """``input.paths = ["data/*"]`` with ``input.format = "jsonl"`` while a browser still wrote
    ``train.jsonl.part`` (Firefox; Chrome ``.crdownload``, huggingface_hub ``.incomplete``, gsutil
    ``_.gstmp``): the partial file was read as JSONL (its lines so far, exit 0 when it ended on a
    line break); without input.format, "cannot tell the format". Refused by its name, either way."""
    (tmp_path / "a.jsonl").write_text('{"text": "a"}\n')
    (tmp_path / name).write_text('{"text": "b"}\n')
    for fmt in ("jsonl", "auto"):
        with pytest.raises(ConfigError, match=rf"input.paths: \S+/{re.escape(name)} is named as a download or copy still "
                                              r"being written \(its name ends in \S+: the temporary name"):
            plan_units(inp([tmp_path / "*"], format=fmt))
    assert len(plan_units(inp([tmp_path / "*.jsonl"]))) == 1


def test_glob_matching_directories_and_a_datasets_folder(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "sub.jsonl").mkdir()  # a directory whose name looks like a file
    (tmp_path / "c" / "a.jsonl").write_text('{"text": "a"}\n')
    _hf_folder(tmp_path / "c", n=5)
    units = plan_units(inp([tmp_path / "c" / "*"]))
    assert sorted((u.format, Path(u.path).name) for u in units) == [
        ("hf", "data-00000-of-00001.arrow"), ("jsonl", "a.jsonl")]
    units = plan_units(inp([tmp_path / "c" / "**"]))  # also matches the folder's own files
    assert sorted(u.format for u in units) == ["hf", "jsonl"]
    with pytest.raises(ConfigError, match="matches no corpus file"):
        plan_units(inp([f"{tmp_path}/c/*.jsonl/"]))  # only the directory sub.jsonl matches


def test_a_glob_over_a_save_to_disk_folders_files_says_to_give_the_folder(tmp_path):
    """``save_to_disk`` of 30 rows in 3 shards, then of 10 rows in 1 into the same folder
    (datasets 4.x leaves the earlier shards beside the new one; state.json names only the new):
    the folder reads its 10 rows; ``ds/*.arrow`` said "(4 matches: directories or datasets
    metadata)", of the shards. The line now says they are the folder's files and to give the
    folder."""
    import datasets

    d = tmp_path / "ds"
    datasets.Dataset.from_dict({"text": [f"row {i}" for i in range(30)]}).save_to_disk(str(d), num_shards=3)
    datasets.Dataset.from_dict({"text": [f"new {i}" for i in range(10)]}).save_to_disk(str(d), num_shards=1)
    assert len(list(d.glob("*.arrow"))) == 4
    with pytest.raises(ConfigError, match=rf"matches no corpus file \(4 matches: files of the datasets save_to_disk "
                                          rf"folder {re.escape(str(d))}, which is read as a whole, by its state.json .*: "
                                          rf"give the folder itself, input.paths = \['{re.escape(str(d))}'\]\)$"):
        plan_units(inp([f"{d}/*.arrow"]))
    assert read_full(plan_units(inp([d])))[0] == [f"new {i}" for i in range(10)]


def test_a_glob_over_a_train_and_an_eval_split_is_refused(tmp_path):
    """A Hub dataset's folder (``data/train-00000-of-00002.parquet``, ``-00001-``,
    ``data/test-00000-of-00001.parquet``, ``data/validation-00000-of-00001.parquet``, 5 rows each):
    ``data/*.parquet`` read all 20 rows into the shards, the test and validation rows trained on,
    exit 0; ``datasets.load_dataset`` of the folder gives three splits (its split keywords: train,
    test, validation/valid/dev/val, ...). Refused, naming a file of each; each split as its own
    entry reads; a glob whose fixed part names a split (``training/*``) is not judged by it."""
    d = tmp_path / "data"
    d.mkdir()
    for split, n in (("train", 2), ("test", 1), ("validation", 1)):
        for i in range(n):
            pq.write_table(pa.table({"text": [f"{split} {i} {j}" for j in range(5)]}), d / f"{split}-{i:05d}-of-{n:05d}.parquet")
    with pytest.raises(InputError, match=rf"the glob '{re.escape(str(d))}/\*.parquet' matches files of the train split "
                                         r"and of the test split \(\S+/train-00000-of-00002.parquet, \S+/test-00000-of-"
                                         r"00001.parquet\), as datasets tells splits by file and folder names: read as "
                                         r"one dataset, the test rows would be trained on"):
        plan_units(inp([f"{d}/*.parquet"]))
    assert len(read_full(plan_units(inp([f"{d}/train-*", f"{d}/test-*", f"{d}/validation-*"])))[0]) == 20
    assert len(read_full(plan_units(inp([f"{d}/train-*"])))[0]) == 10
    (tmp_path / "training" / "dev").mkdir(parents=True)
    (tmp_path / "training" / "a.jsonl").write_text('{"text": "a"}\n')
    (tmp_path / "training" / "dev" / "b.jsonl").write_text('{"text": "b"}\n')
    with pytest.raises(InputError, match=r"train split and of the validation split"):
        plan_units(inp([f"{tmp_path}/**/*.jsonl"]))
    assert len(plan_units(inp([f"{tmp_path}/training/**/*.jsonl"]))) == 2


def test_a_glob_leaves_out_a_dataset_card_as_datasets_does(tmp_path):
    """``repo/*`` over a Hub dataset repository (``README.md``, ``dataset_infos.json``,
    ``train.jsonl``) was refused: README.md "is plain text ... make one: jq -Rsc '{text: .}' FILE >
    FILE.jsonl", a fix that trains on the dataset card. datasets' data_files patterns leave those
    names out (FILES_TO_IGNORE) unless the pattern names one; so does a glob now, and the log says
    so. Named as a path, README.md is still refused as plain text."""
    (tmp_path / "README.md").write_text("---\nlicense: mit\n---\n# My dataset\n")
    (tmp_path / "dataset_infos.json").write_text('{"default": {}}')
    (tmp_path / "train.jsonl").write_text('{"text": "a"}\n{"text": "b"}\n')
    logs: list[str] = []
    units = plan_units(inp([tmp_path / "*"]), log=logs.append)
    assert [Path(u.path).name for u in units] == ["train.jsonl"]
    assert logs == [f"input: the glob '{tmp_path}/*' leaves out {tmp_path}/README.md, {tmp_path}/dataset_infos.json: "
                    "a dataset card or metadata, which datasets never reads as data"]
    with pytest.raises(ConfigError, match=r"README.md is plain text, which rmlprep does not read"):
        plan_units(inp([tmp_path / "README.md"]))


def _hub_shards(folder, present, total=4):
    """``folder/data/train-0000K-of-0000N.parquet`` for K in ``present``: 100 rows each, as
    ``datasets``' ``push_to_hub`` names a split's shards."""
    (folder / "data").mkdir(parents=True)
    for k in present:
        pq.write_table(pa.table({"text": [f"row {k * 100 + i}" for i in range(100)]}),
                       folder / "data" / f"train-{k:05d}-of-{total:05d}.parquet")


@pytest.mark.parametrize("glob", ["data/train-*.parquet", "**/*.parquet", "data/*"])
def test_a_glob_over_a_shard_set_missing_a_file_is_refused(tmp_path, glob):
    """Shards 0, 1 and 3 of train-N-of-00004 (shard 2 never downloaded): a glob that would
    match train-00002-of-00004.parquet read 300 of the 400 rows as the dataset. The name counts
    the set, so the plan refuses, naming the missing file."""
    _hub_shards(tmp_path, [0, 1, 3])
    with pytest.raises(InputError, match=r"matches 3 of the 4 files train-N-of-00004\.parquet in .*/data; it would "
                                         r"match the others too, but train-00002-of-00004\.parquet is missing"):
        plan_units(inp([f"{tmp_path}/{glob}"]))


def test_a_shard_set_read_in_part_on_purpose_is_read(tmp_path):
    """What a user leaves out is not missing: a glob that cannot match shard 2 (a sample of the
    first two), the files named one by one, and the whole set all read as they say."""
    _hub_shards(tmp_path, [0, 1, 3])
    assert len(read_full(plan_units(inp([f"{tmp_path}/data/train-0000[01]-of-*.parquet"])))[0]) == 200
    named = [tmp_path / "data" / f"train-{k:05d}-of-00004.parquet" for k in (0, 3)]
    assert len(read_full(plan_units(inp(named)))[0]) == 200
    _hub_shards(tmp_path / "whole", [0, 1, 2, 3])
    assert read_full(plan_units(inp([f"{tmp_path}/whole/data/train-*.parquet"])))[0] == [f"row {i}" for i in range(400)]


def test_a_shard_set_numbered_from_1_is_whole_with_its_last_number(tmp_path):
    """Some writers number a set from 1 (model-00001-of-00002.safetensors): 1, 2, 3 and 4 of
    4 are the whole set, read; 1, 2 and 3 of 4 lack number 4, refused naming it."""
    _hub_shards(tmp_path, [1, 2, 3, 4])
    assert len(read_full(plan_units(inp([f"{tmp_path}/data/*.parquet"])))[0]) == 400
    (tmp_path / "data" / "train-00004-of-00004.parquet").unlink()
    with pytest.raises(InputError, match=r"but train-00004-of-00004\.parquet is missing"):
        plan_units(inp([f"{tmp_path}/data/*.parquet"]))


def test_a_shard_set_named_with_each_shards_fingerprint_is_whole(tmp_path):
    """datasets 2.x push_to_hub named a split's shards
    ``{split}-{index:05d}-of-{num_shards:05d}-{shard._fingerprint}.parquet``, the fingerprint
    (16 hex digits) one per shard, as many datasets on the Hub still hold them: the two files
    train-00000-of-00002-6a8e3d5b0f9c1e2a and train-00001-of-00002-b1c2d3e4f5a6b7c8 are the
    whole set, read (200 rows); the first alone lacks shard 1, refused naming it with its
    fingerprint unknown (``-*``)."""
    (tmp_path / "data").mkdir()
    for k, fp in enumerate(["6a8e3d5b0f9c1e2a", "b1c2d3e4f5a6b7c8"]):
        pq.write_table(pa.table({"text": [f"row {k * 100 + i}" for i in range(100)]}),
                       tmp_path / "data" / f"train-{k:05d}-of-00002-{fp}.parquet")
    assert read_full(plan_units(inp([f"{tmp_path}/data/train-*.parquet"])))[0] == [f"row {i}" for i in range(200)]
    (tmp_path / "data" / "train-00001-of-00002-b1c2d3e4f5a6b7c8.parquet").unlink()
    with pytest.raises(InputError, match=r"matches 1 of the 2 files train-N-of-00002-\*\.parquet in .*; it would "
                                         r"match the others too, but train-00001-of-00002-\*\.parquet is missing"):
        plan_units(inp([f"{tmp_path}/data/train-*.parquet"]))


def test_a_glob_over_a_datasets_cache_folder_with_map_results_is_refused(tmp_path):
    """load_dataset("json", ..., cache_dir) of 100 rows, then .map(): the cache folder holds
    json-train.arrow and a cache-<hash>.arrow of the mapped rows beside dataset_info.json. A
    glob over the folder read both, every text twice; it is refused naming the cache file. A
    glob of the cache files alone, and the split file named, read what they name."""
    datasets = pytest.importorskip("datasets")
    src = tmp_path / "src.jsonl"
    src.write_text("".join(json.dumps({"text": f"row {i}"}) + "\n" for i in range(100)))
    ds = datasets.load_dataset("json", data_files=str(src), cache_dir=str(tmp_path / "c"))["train"]
    ds.map(lambda r: {"n": len(r["text"])})
    with pytest.raises(InputError, match=r"matches, in the datasets cache folder .*, its file json-train\.arrow and 1 "
                                         r"cache file of \.map\(\) or \.filter\(\) results \(cache-[0-9a-f]{16}\.arrow\)"):
        plan_units(inp([f"{tmp_path}/c/**/*.arrow"]))
    assert len(read_full(plan_units(inp([f"{tmp_path}/c/**/cache-*.arrow"])))[0]) == 100
    (split,) = (tmp_path / "c").rglob("json-train.arrow")
    assert len(read_full(plan_units(inp([split])))[0]) == 100


def test_a_glob_over_two_revisions_in_the_hub_cache_is_refused(tmp_path):
    """The Hub's cache after a dataset was updated: snapshots/<old>/data/train-00000-of-00001.parquet
    and snapshots/<new>/data/... (blobs/ holding both versions, each snapshot file a link to
    one). A glob over snapshots/* read both versions' rows; one revision's folder reads alone."""
    repo = tmp_path / "hub" / "datasets--org--name"
    for rev, texts in (("a" * 40, ["old 0", "old 1"]), ("b" * 40, ["new 0", "new 1", "new 2"])):
        blob = repo / "blobs" / rev
        blob.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"text": texts}), blob)
        link = repo / "snapshots" / rev / "data" / "train-00000-of-00001.parquet"
        link.parent.mkdir(parents=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    with pytest.raises(InputError, match=r"matches files of 2 revisions of .*/datasets--org--name in the Hub's cache "
                                         r"\(snapshots/a{40}, b{40}\)"):
        plan_units(inp([f"{repo}/snapshots/*/data/*.parquet"]))
    assert read_full(plan_units(inp([f"{repo}/snapshots/{'b' * 40}/data/*.parquet"])))[0] == ["new 0", "new 1", "new 2"]


_JOB = "0f9a1b2c-3d4e-5f60-7182-93a4b5c6d7e8"


def _spark_out(folder, *, parts=3, marker=True, crc=False, temporary=False):
    """A Spark SQL output folder as Hadoop's FileOutputCommitter leaves it: parts
    ``part-0000K-<job uuid>-c000.snappy.parquet`` of 10 rows, ``_SUCCESS`` once the job commits,
    ``_temporary/0/_temporary/attempt_.../`` while it runs (a killed job leaves it), a hidden
    ``.<name>.crc`` beside each file on a local disk (Hadoop's ChecksumFileSystem)."""
    folder.mkdir(parents=True)
    for k in range(parts):
        name = f"part-{k:05d}-{_JOB}-c000.snappy.parquet"
        pq.write_table(pa.table({"text": [f"row {k * 10 + i}" for i in range(10)]}), folder / name)
        if crc:
            (folder / f".{name}.crc").write_bytes(b"crc\0")
    if marker:
        (folder / "_SUCCESS").write_bytes(b"")
    if temporary:
        attempt = folder / "_temporary" / "0" / "_temporary" / "attempt_202612041350_0001_m_000003_3"
        attempt.mkdir(parents=True)
        pq.write_table(pa.table({"text": ["partial"]}), attempt / f"part-00003-{_JOB}-c000.snappy.parquet")


def test_a_spark_output_folder_still_holding_temporary_is_refused(tmp_path):
    """A Spark job killed mid-write leaves ``_temporary/`` (its abort would remove it) and only
    the parts committed so far: ``out/*.parquet`` read their 30 rows as the dataset, exit 0, and
    ``out/**/*.parquet`` read a task attempt's file too (31 rows). Both are refused; so is a
    ``partitionBy`` folder's glob (``out/year=2024/``: the markers are in ``out``)."""
    _spark_out(tmp_path / "out", marker=False, temporary=True)
    with pytest.raises(InputError, match=r"matches 3 part files of the output folder .*/out, which holds _temporary/: "
                                         r"the Spark or Hadoop job writing it has not committed"):
        plan_units(inp([f"{tmp_path}/out/*.parquet"]))
    with pytest.raises(InputError, match=r"matches .*/out/_temporary/0/_temporary/attempt_\S+/part-00003-\S+, a task "
                                         r"attempt's file under the _temporary folder of a Spark or Hadoop job's output"):
        plan_units(inp([f"{tmp_path}/out/**/*.parquet"]))
    (tmp_path / "p" / "_temporary").mkdir(parents=True)
    _spark_out(tmp_path / "p" / "year=2024", marker=False)
    with pytest.raises(InputError, match=r"of the output folder .*/p \(above its partition folder .*/p/year=2024\), "
                                         r"which holds _temporary/"):
        plan_units(inp([f"{tmp_path}/p/*/*.parquet"]))


def test_spark_parts_without_success_are_refused_in_place_and_warned_of_elsewhere(tmp_path):
    """Parts with their ``.crc`` (written in place on a local disk) and no ``_SUCCESS``: a job
    that never committed (a failed algorithm-2 job keeps the tasks it committed): refused. The
    same parts without ``.crc`` (copied, an object store) are read with a warning; with
    ``_SUCCESS`` they are read without one, and so are parts of other names (the Hub's, Dask's)."""
    _spark_out(tmp_path / "a", marker=False, crc=True)
    with pytest.raises(InputError, match=r"written in place by a Spark or Hadoop job \(each beside its \.crc, .*\) that "
                                         r"never committed: it has no _SUCCESS.* touch .*/a/_SUCCESS"):
        plan_units(inp([f"{tmp_path}/a/*.parquet"]))
    _spark_out(tmp_path / "b", marker=False)
    logs: list[str] = []
    assert len(plan_units(inp([f"{tmp_path}/b/*.parquet"]), log=logs.append)) == 3
    assert logs == [f"warning: input: {tmp_path}/b holds Spark's part files (part-00000-{_JOB}-c000.snappy.parquet "
                    "...) but no _SUCCESS, which Spark writes when the job commits: if the job failed, parts are "
                    "missing; a copy that left the marker out is fine"]
    _spark_out(tmp_path / "c", crc=True)
    logs.clear()
    assert len(plan_units(inp([f"{tmp_path}/c/*.parquet"]), log=logs.append)) == 3 and logs == []
    (tmp_path / "d").mkdir()
    pq.write_table(pa.table({"text": ["x"]}), tmp_path / "d" / "part-00000.parquet")
    assert len(plan_units(inp([f"{tmp_path}/d/*.parquet"]), log=logs.append)) == 1 and logs == []


def test_the_parts_of_a_spark_streaming_file_sink_are_refused_by_its_log(tmp_path):
    """A Structured Streaming file sink (Spark's ``FileStreamSink``) writes each batch's parts in
    place, with their ``.crc`` on a local disk, and never a ``_SUCCESS``; ``_spark_metadata/<batch>``
    lists the files of each committed batch (a ``v1`` line, then one JSON line per file), and
    ``spark.read`` of the folder reads only those. Here batch 0 committed one part of 10 rows and
    batch 1 failed after writing one of 10: ``out/*.parquet`` read 20 rows. It was refused as a
    job that never committed, with ``touch out/_SUCCESS`` as the fix, after which the glob read
    the 20 rows; it is now refused naming the sink's log, in place or on a store (no ``.crc``)."""
    out = tmp_path / "out"
    (out / "_spark_metadata").mkdir(parents=True)
    names = [f"part-00000-{v:08x}-0000-0000-0000-000000000000-c000.snappy.parquet" for v in range(2)]
    for v, name in enumerate(names):
        pq.write_table(pa.table({"text": [f"batch {v} row {i}" for i in range(10)]}), out / name)
        (out / f".{name}.crc").write_bytes(b"crc\x00")
    (out / "_spark_metadata" / "0").write_text(
        "v1\n" + json.dumps({"path": f"file://{out}/{names[0]}", "size": (out / names[0]).stat().st_size,
                             "isDir": False, "modificationTime": 0, "blockReplication": 1, "blockSize": 33554432,
                             "action": "add"}) + "\n")
    for crc in (True, False):
        if not crc:
            for name in names:
                (out / f".{name}.crc").unlink()
        with pytest.raises(InputError, match=r"matches 2 files of the output folder .*/out of a Spark Structured "
                                             r"Streaming file sink: its _spark_metadata/ says which files"):
            plan_units(inp([f"{out}/*.parquet"]))


def test_a_dangling_symlink_in_a_glob_says_so(tmp_path):
    """A link whose target is gone was named "not a regular file (a named pipe, socket or
    device?)"; the line now says it is a link and names the missing target."""
    (tmp_path / "a.jsonl").write_text('{"text": "a"}\n')
    (tmp_path / "b.jsonl").symlink_to("gone.jsonl")
    with pytest.raises(ConfigError, match=r"b\.jsonl is a symbolic link to gone\.jsonl, which does not exist"):
        plan_units(inp([f"{tmp_path}/*.jsonl"]))


def test_a_compressed_parquet_file_is_refused_as_one(tmp_path):
    """x.parquet.gz (a gzip of a whole Parquet file) was refused as "not a readable Parquet
    file (damaged or truncated footer?)", sending the user to fetch it again; the line now says
    it is compressed and how to decompress it."""
    buf = io.BytesIO()
    pq.write_table(pa.table({"text": ["a"]}), buf)
    p = tmp_path / "x.parquet.gz"
    p.write_bytes(gzip.compress(buf.getvalue()))
    with pytest.raises(InputError, match=r"a gzip-compressed Parquet file: .*decompress it \(gunzip -k FILE\)"):
        plan_units(inp([p]))


def test_same_file_twice_is_read_once(tmp_path):
    """Read once, and the log says so: a user listing a file twice to upsample it learned that
    it was read once only from the row counts. Worked example: ``*.jsonl`` over a.jsonl and the
    symlink link.jsonl -> a.jsonl, then a.jsonl again: 3 paths, 1 unit, one line naming
    link.jsonl (as a.jsonl) and the second a.jsonl."""
    (tmp_path / "a.jsonl").write_text('{"text": "a"}\n')
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "a.jsonl")
    logs: list[str] = []
    units = plan_units(inp([tmp_path / "*.jsonl", tmp_path / "a.jsonl"]), log=logs.append)
    assert len(units) == 1
    a, link = tmp_path / "a.jsonl", tmp_path / "link.jsonl"
    assert logs == [f"input: 2 of the 3 paths input.paths expands to name a file already listed, and each file is "
                    f"read once (naming a file twice does not repeat its rows): {link} = {a}; {a} again"], logs
    logs.clear()
    plan_units(inp([tmp_path / "a.jsonl"]), log=logs.append)
    assert logs == []


def test_a_hard_link_to_an_input_is_read_once(tmp_path):
    """A hard link is the same file under a second name (one inode): read twice, every
    document went into the shards twice (a careless-user trial: 'rows read 100' for a 50-row
    file named with a symlink, './', and a hard link). Worked example: a.jsonl and its hard
    link b.jsonl are one unit, as a.jsonl and a symlink to it are."""
    (tmp_path / "a.jsonl").write_text('{"text": "a"}\n')
    os.link(tmp_path / "a.jsonl", tmp_path / "b.jsonl")
    assert len(plan_units(inp([tmp_path / "a.jsonl", tmp_path / "b.jsonl"]))) == 1
    assert len(plan_units(inp([tmp_path / "*.jsonl"]))) == 1


def test_every_file_fault_message_is_one_line(tmp_path):
    """Each InputError above names its file; none carries a newline (pyarrow's multi-line
    messages are folded)."""
    p = tmp_path / "x.parquet"
    p.write_bytes(b"PAR1" + b"\n\n" * 20 + b"PAR1")
    with pytest.raises(RmlprepError) as ei:
        read_path(p)
    one_line_error(ei, p)


# -- first bytes: what a file really is ------------------------------------------------------
LFS = b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"ab" * 32 + b"\nsize 1234\n"


@pytest.mark.parametrize("name", ["c.jsonl", "c.parquet", "c.csv", "c.jsonl.gz"])
def test_git_lfs_pointer_instead_of_data(tmp_path, name):
    p = tmp_path / name
    p.write_bytes(LFS)
    with pytest.raises(InputError, match="is a Git LFS pointer, not the data.*git lfs pull") as ei:
        plan_units(inp([p]))
    one_line_error(ei, p)


@pytest.mark.parametrize("target", ["data-00000-of-00001.arrow", "state.json"])
def test_git_lfs_pointer_in_a_datasets_folder(tmp_path, target):
    d = _hf_folder(tmp_path)
    (d / target).write_bytes(LFS)
    with pytest.raises(InputError, match="Git LFS pointer") as ei:
        plan_units(inp([d]))
    one_line_error(ei, d / target)


@pytest.mark.parametrize("name,data,match", [
    pytest.param("x.jsonl", gzip.compress(b'{"text": "a"}\n'), r"is gzip-compressed but its name does not say so; "
                 r"rename it to x.jsonl.gz", id="gzip-named-jsonl"),
    pytest.param("x.csv", zstandard.ZstdCompressor().compress(b"text\na\n"), r"rename it to x.csv.zst", id="zstd-named-csv"),
    pytest.param("x.jsonl.gz", zstandard.ZstdCompressor().compress(b'{"text": "a"}\n'),
                 r"holds zstd data, not gzip; rename it to end in .zst", id="zstd-named-gz"),
    pytest.param("x.jsonl.gz", b"", r"is empty, but a gzip file is never 0 bytes", id="empty-gz"),
    pytest.param("x.jsonl.zst", b"", r"is empty, but a zstd file is never 0 bytes", id="empty-zst"),
])
def test_compression_that_the_name_does_not_tell(tmp_path, name, data, match):
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(InputError, match=match) as ei:
        plan_units(inp([p]))
    one_line_error(ei, p)


def _parquet_bytes() -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table({"text": ["a", "b"]}), buf)
    return buf.getvalue()


@pytest.mark.parametrize("name,data,match", [
    pytest.param("x.jsonl", _parquet_bytes(), r": is a Parquet file \(magic PAR1 at byte 0\), not JSONL; rename it to "
                 r"end in \.parquet or set input\.format = \"parquet\"$", id="parquet-named-jsonl"),
    pytest.param("x.csv", _parquet_bytes(), r": is a Parquet file \(magic PAR1 at byte 0\), not CSV", id="parquet-named-csv"),
    pytest.param("x.jsonl", b"PK\x03\x04\x14\x00\x00\x00", r"is a zip archive \(magic PK at byte 0\), not JSONL; rmlprep "
                 r"reads the files an archive holds, not the archive: extract it \(unzip \S+ -d DIR\)", id="zip-named-jsonl"),
    pytest.param("x.jsonl.gz", b'{"text": "a"}\n' * 3, r": is named \.gz but holds no gzip data: it is plain text "
                 r"\('\{\"text\": \"a\"\}\\n\{\"text\": \"'\.\.\.\); rename it without the \.gz \(a "
                 r"download saved decompressed\?\)$", id="plain-named-gz"),
    pytest.param("x.jsonl.zst", b'{"text": "a"}\n', r"is named \.zst but holds no zstd data: it is plain text",
                 id="plain-named-zst"),
    pytest.param("x.csv.bz2", b"text\na\n", r"is named \.bz2 but holds no bzip2 data: it is plain text", id="plain-named-bz2"),
    pytest.param("x.jsonl.xz", _parquet_bytes(), r"is named \.xz but holds no xz data: it is a Parquet file", id="parquet-named-xz"),
    pytest.param("x.csv", "text\nhello\n".encode("utf-16"), r": the file is UTF-16-LE \(byte-order mark at byte 0\); "
                 r"rmlprep reads UTF-8: convert it with iconv -f UTF-16LE -t UTF-8$", id="utf16-bom-csv"),
    pytest.param("x.csv", "text\nhello\n".encode("utf-16-be"), r": the file is UTF-16-BE \(no byte-order mark, a NUL "
                 r"byte before each ASCII character\); .*iconv -f UTF-16BE -t UTF-8$", id="utf16be-csv"),
    pytest.param("x.jsonl", '{"text": "hi"}\n'.encode("utf-16-le"), r": the file is UTF-16-LE \(no byte-order mark, a "
                 r"NUL byte after each ASCII character\); .*iconv -f UTF-16LE -t UTF-8$", id="utf16le-jsonl"),
])
def test_a_file_that_is_not_what_it_is_named(tmp_path, name, data, match):
    """Careless-user trial U1-U3: a Parquet file named .jsonl was "cut short" (its last line
    had no newline), plain JSONL named .jsonl.gz failed only when its unit ran ("corrupt gzip
    data"), a UTF-16 CSV was "not valid UTF-8 in a column name". The plan's first-bytes check
    now names what the file holds (a magic number, a byte-order mark, NUL bytes between ASCII
    characters) before any work; iconv's names (UTF-16LE, not UTF-16-LE, which it refuses).
    A zstd file starting with a skippable frame (pzstd's) and an empty bzip2 stream still plan."""
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(InputError, match=match) as ei:
        plan_units(inp([p]))
    one_line_error(ei, p)
    skippable = b"\x50\x2a\x4d\x18\x04\x00\x00\x00abcd" + zstandard.ZstdCompressor().compress(b'{"text": "a"}\n')
    (tmp_path / "s.jsonl.zst").write_bytes(skippable)
    (tmp_path / "e.jsonl.bz2").write_bytes(__import__("bz2").compress(b""))
    assert len(plan_units(inp([tmp_path / "s.jsonl.zst", tmp_path / "e.jsonl.bz2"]))) == 2


#: ``printf '{"text": "a"}\n' | lz4 -c`` (lz4 1.9.4; ``-l``: the legacy format): the LZ4 frame format's magic
#: number 0x184D2204 little-endian, the legacy one 0x184C2102
_LZ4 = bytes.fromhex("04224d186440a70e0000807b2274657874223a202261227d0a0000000055cda389")
_LZ4_LEGACY = bytes.fromhex("02214c180f000000e07b2274657874223a202261227d0a")


def _orc_bytes() -> bytes:
    import pyarrow.orc

    buf = io.BytesIO()
    pyarrow.orc.write_table(pa.table({"text": ["a", "b"]}), buf)
    return buf.getvalue()


_ORC = _orc_bytes()


def _xlsx_bytes() -> bytes:
    """A zip holding an Office Open XML workbook's first parts (what an .xlsx is; no Excel
    writer is installed here): its magic is a zip's, its name tells it."""
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        z.writestr("xl/workbook.xml", "<workbook/>")
    return buf.getvalue()


_XLSX = _xlsx_bytes()


@pytest.mark.parametrize("name,data,fmt,match", [
    pytest.param("x.jsonl.lz4", _LZ4, None, r"^input.paths: \S+: is lz4-compressed \(its name ends in \.lz4\), which "
                 r"rmlprep does not read \(it reads gzip, zstd, bzip2 and xz, named \.gz, \.zst, \.bz2, \.xz\): "
                 r"decompress it \(lz4 -d FILE; a Spark or Hadoop part file's: hadoop fs -text FILE > OUT\) and give "
                 r"that file, or recompress it with zstd$", id="lz4-by-name"),
    pytest.param("part-00000.json.deflate", zlib.compress(b'{"text": "a"}\n'), None, r"is zlib \(deflate\)-compressed "
                 r"\(its name ends in \.deflate\)", id="spark-deflate-by-name"),
    pytest.param("x.jsonl", zlib.compress(b'{"text": "a"}\n'), None, r"is zlib \(deflate\)-compressed \(magic number "
                 r"78 9c at byte 0\)", id="zlib-named-jsonl"),
    pytest.param("x.jsonl.lz4", _LZ4, "jsonl", r"is lz4-compressed \(magic number 04 22 4d 18 at byte 0\)",
                 id="lz4-as-jsonl"),
    pytest.param("x.jsonl", _LZ4_LEGACY, None, r"is lz4 \(legacy format\)-compressed", id="lz4-legacy-named-jsonl"),
    pytest.param("x.jsonl.gz", _LZ4, None, r"is lz4-compressed", id="lz4-named-gz"),
    pytest.param("x.csv.br", b"\x8b\x03\x80text\na\n\x03", None, r"is Brotli-compressed \(its name ends in \.br\)",
                 id="brotli-by-name"),
    pytest.param("x.orc", _ORC, None, r"^input.paths: \S+: is an ORC file \(its name ends in \.orc\), which rmlprep "
                 r"does not read \(it reads JSON Lines, CSV, Parquet and Arrow files\): convert it to Parquet: python3 -c "
                 r"\"import pyarrow.orc as o, pyarrow.parquet as p; p.write_table\(o.read_table\('FILE'\), "
                 r"'OUT.parquet'\)\"$", id="orc-by-name"),
    pytest.param("x.orc", _ORC, "parquet", r"is an ORC file \(magic number 4f 52 43 at byte 0\)", id="orc-as-parquet"),
    pytest.param("x.jsonl", _ORC, None, r"is an ORC file \(magic number 4f 52 43 at byte 0\)", id="orc-named-jsonl"),
    pytest.param("x.xlsx", _XLSX, "csv", r"is a spreadsheet workbook \(a zip of XML\) \(its name ends in \.xlsx\), .*"
                 r"convert it to CSV: save it as \"CSV UTF-8\"", id="xlsx-as-csv"),
    pytest.param("x.csv", bytes.fromhex("d0cf11e0a1b11ae1") + bytes(504), None, r"is an Excel 97-2003 workbook \(an "
                 r"OLE2 file\) \(magic number d0 cf 11 e0 at byte 0\)", id="xls-named-csv"),
    pytest.param("x.jsonl.br", b'{"text": "a"}\n', "jsonl", r"is Brotli-compressed \(its name ends in \.br\)",
                 id="brotli-as-jsonl"),
    pytest.param("x.avro", b"Obj\x01\x04\x14avro.codec", None, r"is an Avro object container file \(its name ends in "
                 r"\.avro\), .*convert it to JSON Lines: avro-tools tojson FILE > OUT.jsonl$", id="avro-by-name"),
])
def test_a_compression_rmlprep_does_not_read_is_named(tmp_path, name, data, fmt, match):
    """A ``.jsonl.lz4`` said "cannot tell the format; set input.format", and with
    ``input.format = "jsonl"`` (or the same bytes named ``.jsonl``) "the last line is cut short
    ... the file looks truncated (an interrupted download or copy?); fetch it again": a wrong
    cause. An lz4 file (or Snappy's framing format, lzip, lzop, compress(1): their magic numbers;
    Brotli, which has none: its ``.br``) is now named as such with the command that decompresses
    it; Spark's ``compression="deflate"`` (``part-00000.json.deflate``, zlib) too. So are ORC and
    Avro files (ORC read as JSONL was "cut short" too; by name, "cannot tell
    the format"), with the conversion to a format rmlprep reads; a CSV whose header starts with
    ``ORC`` (``ORCID,text``) is text, and reads. A spreadsheet (``.xlsx``, a zip: "extract it",
    which gives XML; ``.xls``, an OLE2 file) and a ``.br`` under ``input.format`` are named too."""
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(RmlprepError, match=match):
        plan_units(inp([p], **({"format": fmt} if fmt else {})))
    (tmp_path / "orcid.csv").write_bytes(b"ORCID,text\n0000-0002,hello\n")
    assert read_path(tmp_path / "orcid.csv")[0] == ["hello"]


@pytest.mark.parametrize("header", ["PAR1_id", "ARROW1 score", "PK"])
def test_a_csv_whose_first_column_name_spells_a_magic_number_is_read(tmp_path, header):
    """``PAR1`` and ``ARROW1`` are text: a CSV whose first column is named ``PAR1_id`` was
    refused as "a Parquet file (magic PAR1 at byte 0)". A file format is named only when the
    bytes after its magic do not read as text (a real Parquet file: its page header's control
    bytes, as test_a_file_that_is_not_what_it_is_named shows)."""
    p = tmp_path / "x.csv"
    p.write_text(f"{header},text\n1,hello world\n2,foo bar\n")
    values, rows, errors, _ = read_path(p)
    assert values == ["hello world", "foo bar"] and errors == []


def test_latin1_text_gets_an_encoding_hint(tmp_path):
    """Careless-user trial U3: Latin-1 rows were rejected as "not valid UTF-8 (invalid
    continuation byte at byte 13)" alone. Still rejects (rmlprep reads UTF-8 only), now naming
    the text as Windows-1252 reads it and the iconv line. Worked example: b'{"text": "caf\\xe9
    cr\\xe8me"}': byte 13 is 0xE9 ('é' in Windows-1252), which would start a 3-byte UTF-8
    sequence that ' ' does not continue. No hint for binary bytes, nor for a UTF-8 line ('né')
    with a bad byte after its valid UTF-8."""
    row = '{"text": "café crème"}\n'.encode("latin-1")
    (tmp_path / "l.jsonl").write_bytes(row + b'{"text": "\xff\xfe\x00\x01"}\n' + '{"text": "né \xe9"}\n'.encode()[:15] + b'\n')
    values, rows, errors, _ = read_path(tmp_path / "l.jsonl")
    assert values == [] and [r for r, _ in errors] == [0, 1, 2]
    hint = ("; read as Windows-1252 (Latin-1) it is '\"text\": \"café crème\"}': if the file is so encoded, convert it "
            "with iconv -f CP1252 -t UTF-8")
    assert errors[0][1] == f"line is not valid UTF-8 (invalid continuation byte at byte 13{hint})"
    assert "Windows-1252" not in errors[1][1] and "Windows-1252" not in errors[2][1], errors
    (tmp_path / "l.csv").write_bytes("text\nna\u00efve\n".encode("latin-1"))
    values, rows, errors, _ = read_path(tmp_path / "l.csv")
    assert errors == [(0, "text is not valid UTF-8 (invalid continuation byte at byte 2; read as Windows-1252 "
                          "(Latin-1) it is 'naïve': if the file is so encoded, convert it with iconv -f CP1252 -t UTF-8)")]


def test_a_lone_arrow_file_of_the_datasets_cache(tmp_path):
    """The datasets cache keeps Arrow stream files without state.json; one can be input directly."""
    d = _hf_folder(tmp_path, n=25)
    arrow = next(d.glob("*.arrow"))
    units = plan_units(inp([arrow], unit_rows=10))
    assert [(u.format, u.start, u.stop) for u in units] == [("hf", 0, 10), ("hf", 10, 20), ("hf", 20, 25)]
    values, rows, errors, _ = read_full(units)
    assert values == [f"t{i}" for i in range(25)] and rows == list(range(25)) and not errors


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_jsonl_object_with_a_key_twice_is_a_reject(tmp_path, suffix):
    """A careless-user trial: json.loads keeps the last value of a key given twice, so
    '{"text": "first", "text": "second"}' was the document "second", silently. Any object of the
    line holding a key twice (at any depth, in the column or not) makes the row a reject naming
    the key and the object's JSONPath, as an Arrow map holding a key twice is. A last line without
    its newline so written is whole JSON: a reject, not a file cut short (plan: plain; reader: .gz)."""
    p = tmp_path / f"d{suffix}"
    data = (b'{"text": "first", "text": "second"}\n'
            b'{"text": "ok", "meta": {"tags": [{"k": 1}, {"k": 1, "k": 2}]}}\n'
            b'{"text": "fine", "meta": {"k": 1}, "k": 2}\n'
            b'{"text": "x", "text": "y"}')
    p.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
    values, rows, errors, _ = read_path(p)
    assert values == ["fine"] and rows == [2]
    twice = "a JSON object holds the key {} twice (the object at {}): which value is meant is not knowable"
    assert errors == [(0, twice.format("'text'", "$")), (1, twice.format("'k'", "$.meta.tags[1]")),
                      (3, twice.format("'text'", "$"))]


def test_json_extension_column_with_a_key_twice_is_a_reject(tmp_path):
    """An ``arrow.json`` value holding an object with a key twice is a reject naming the key,
    as a JSONL line so written is (json.loads, as ``datasets`` decodes it, kept the last)."""
    import pyarrow as pa

    f = tmp_path / "a.arrow"
    _write_table(pa.table({"text": _json_column(['"ok"', '{"a": {"b": 1, "b": 2}}'])}), f, "arrow")
    values, rows, errors, _ = read_full(plan_units(inp([f])))
    assert values == ["ok"] and rows == [0]
    assert errors == [(1, "text holds JSON text (Arrow's arrow.json type) in which a JSON object holds the key 'b' "
                          "twice (the object at $.a): which value is meant is not knowable")]


def test_json_reject_reasons_read_as_sentences():
    """Worked example: json's messages end in "at" where a position follows, so the reason is
    "Invalid control character at column 12" (a raw U+0001 inside the string: '{"text": "a'
    is 11 characters, so it is the 12th), and a line without a value is "Expecting value at column 1" — never "at, column"."""
    from rmlprep.readers.jsonl import _parse_row

    ok, reason = _parse_row(b'{"text": "a\x01b"}', "text")
    assert not ok and reason == "line is not valid JSON (Invalid control character at column 12)"
    ok, reason = _parse_row(b'{"text": "cut', "text")
    assert not ok and reason == "line is not valid JSON (Unterminated string starting at column 10)"
    ok, reason = _parse_row(b"nope", "text")
    assert not ok and reason == "line is not valid JSON (Expecting value at column 1)"


def test_a_cut_line_reads_as_cut_not_as_a_control_character():
    """A line cut inside a string, with its newline: '{"text": "cut' then "\n". The reader hands
    json the line with its newline, and json called that newline, inside the open string, an
    "Invalid control character at column 14" (a fresh-user trial's truncated file). Worked
    example: the string opens at column 10 (the quote after '{"text": '), so the reason is the
    one the line without its end gives, "Unterminated string starting at column 10"; a raw
    control character before the end is still named."""
    from rmlprep.readers.jsonl import _parse_row

    for end in (b"\n", b"\r\n"):
        ok, reason = _parse_row(b'{"text": "cut' + end, "text")
        assert not ok and reason == "line is not valid JSON (Unterminated string starting at column 10)"
    ok, reason = _parse_row(b'{"text": "a\x01b"}\n', "text")
    assert not ok and reason == "line is not valid JSON (Invalid control character at column 12)"


def test_a_cut_gzip_does_not_claim_a_huge_size(tmp_path):
    """A .gz cut short ends in arbitrary bytes, not its ISIZE trailer (RFC 1952): the size
    estimate (progress only) must not believe a ratio deflate cannot reach (1032:1)."""
    import random

    rnd = random.Random(7)
    data = "".join(json.dumps({"text": "".join(rnd.choice("abcdefgh ") for _ in range(200))}) + "\n"
                   for _ in range(200)).encode()
    whole = gzip.compress(data)
    p = tmp_path / "whole.jsonl.gz"
    p.write_bytes(whole)
    assert readers_base.decoded_size_estimate(str(p)) == len(data)
    for cut in range(100, len(whole) - 4, 97):
        p.write_bytes(whole[:cut])
        assert readers_base.decoded_size_estimate(str(p)) <= 1032 * cut


def test_a_gzip_s_trailer_is_believed_only_when_its_first_bytes_bear_it_out(tmp_path):
    """ISIZE (a .gz file's last 4 bytes, RFC 1952) is the last member's size: bytes after the
    last member (a fresh-user trial: a 2.7 MB file read as 555.8 MB in the plan line) or an
    empty last member (bgzip) say nothing of the file. The estimate (progress and the plan
    line, never an allocation) must stay within a factor of 2 of the decoded size; a clean
    single-member file keeps its exact ISIZE. The run still refuses the garbage (its reader)."""
    import random

    rnd = random.Random(3)
    words = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 9))) for _ in range(5000)]
    data = "".join(json.dumps({"text": " ".join(rnd.choice(words) for _ in range(300))}) + "\n"
                   for _ in range(600)).encode()
    whole = gzip.compress(data)
    assert len(whole) > 8 << 16  # the plan inflates 64 KB of it: a small part
    p = tmp_path / "c.jsonl.gz"
    p.write_bytes(whole)
    assert readers_base.decoded_size_estimate(str(p)) == len(data)  # its ISIZE, borne out
    garbage = bytes(rnd.randrange(256) for _ in range(3996)) + (555_800_000).to_bytes(4, "little")
    members = b"".join(gzip.compress(data[i:i + 65536]) for i in range(0, len(data), 65536)) + gzip.compress(b"")
    for body in (whole + garbage, members):
        p.write_bytes(body)
        est = readers_base.decoded_size_estimate(str(p))
        assert len(data) / 2 <= est <= 2 * len(data), (len(body), est)
        (unit,) = plan_units(inp([p]))
        assert unit.nbytes == est
    small = gzip.compress(data[:5000])  # a file inside the sample is inflated whole: exact
    p.write_bytes(small + garbage)
    assert readers_base.decoded_size_estimate(str(p)) == 5000


def test_column_names_without_reading_rows(tmp_path):
    """rmlprep.readers.units.column_names: a Parquet or Arrow schema and a CSV header are every
    column (True); a JSONL file's first object only its own keys that hold something (False: rows
    may differ; the first row's ``"messages": []`` holds nothing and is left out, as
    ``"tools": []`` is); a first line that is not an object tells nothing (None)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rmlprep.readers.units import column_names

    t = pa.table({"messages": ["[]"], "tools": ["[]"]})
    pq.write_table(t, tmp_path / "a.parquet")
    with pa.OSFile(str(tmp_path / "a.arrow"), "wb") as f, pa.ipc.new_stream(f, t.schema) as w:
        w.write_table(t)
    (tmp_path / "a.tsv").write_text("\n\"messages\"\ttools\n[]\t[]\n")
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(b"\n\xef\xbb\xbf{\"messages\": [], \"id\": 1}\n{\"tools\": 1}\n"))
    (tmp_path / "b.jsonl").write_text("1\n")
    got = {p.name: column_names(u) for p in sorted(tmp_path.iterdir()) for u in plan_units(inp([p]))}
    assert got == {"a.parquet": (["messages", "tools"], True), "a.arrow": (["messages", "tools"], True),
                   "a.tsv": (["messages", "tools"], True), "a.jsonl.gz": (["id"], False),
                   "b.jsonl": None}


def test_drop_struct_nulls_only_in_structs():
    """Worked example (drop_struct_nulls): a struct's null fields are left out at any depth
    (Arrow pads a struct to the union of all rows' keys); a null that is not a struct field
    (a list item, a JSON string's ``null``) is kept."""
    import pyarrow as pa

    from rmlprep.readers.base import arrow_values, drop_struct_nulls

    rows = [{"calls": [{"name": "a", "args": {"city": "Paris"}}], "note": '{"x": null}', "ids": [1, None]},
            {"calls": [{"name": "b", "args": {"query": "cats"}}], "note": None, "ids": None}]
    col = pa.Table.from_pylist(rows).to_batches()[0].to_struct_array()
    assert col.to_pylist()[0]["calls"][0]["args"] == {"city": "Paris", "query": None}  # the padding
    assert arrow_values(col) == [{"calls": [{"name": "a", "args": {"city": "Paris"}}], "note": '{"x": null}',
                                  "ids": [1, None]},
                                 {"calls": [{"name": "b", "args": {"query": "cats"}}]}]
    assert arrow_values(pa.chunked_array([col])) == arrow_values(col)
    assert drop_struct_nulls([{"a": 1, "b": None}], pa.string()) == [{"a": 1, "b": None}]
    assert drop_struct_nulls([{"a": 1, "b": None}], pa.struct([("a", pa.int64()), ("b", pa.int64())])) == [{"a": 1}]


def test_extension_types_are_cleaned_as_their_storage():
    """Worked example: a registered extension type whose Python values are its storage's (no
    scalar or array class of its own) is cleaned of struct padding as its storage, also nested
    in a struct; ``arrow.uuid`` (its own scalar, no struct in storage) and ``arrow.json`` (JSON
    text) are left as they read. Before, ``arrow_values`` kept ``"query": None`` under any
    extension type."""
    import pyarrow as pa

    from rmlprep.readers.base import arrow_values

    class Wrapped(pa.ExtensionType):
        def __init__(self, storage):
            super().__init__(storage, "rmlprep-test.readers-wrapped")

        def __arrow_ext_serialize__(self):
            return b""

        @classmethod
        def __arrow_ext_deserialize__(cls, storage, serialized):
            return cls(storage)

    plain = pa.array([{"city": "Paris"}, {"query": "cats"}])
    assert plain.to_pylist()[0] == {"city": "Paris", "query": None}  # the padding
    ext = pa.ExtensionArray.from_storage(Wrapped(plain.type), plain)
    assert arrow_values(ext) == arrow_values(pa.chunked_array([ext])) == [{"city": "Paris"}, {"query": "cats"}]
    nested = pa.StructArray.from_arrays([ext, pa.array([1, None])], ["args", "n"])
    assert arrow_values(nested) == [{"args": {"city": "Paris"}, "n": 1}, {"args": {"query": "cats"}}]
    uuid = pa.array([b"\x00" * 16], pa.uuid())
    assert arrow_values(uuid) == uuid.to_pylist()
    js = pa.array(['{"a": null}'], pa.json_())
    assert arrow_values(js) == ['{"a": null}']


def test_prompt_completion_layout_is_named(tmp_path):
    """An explorer finding (n9): TRL's prompt-completion rows (``{"prompt": [...], "completion":
    [...]}``) were refused as "no 'messages' field" only; the reason now names the layout and
    the join it needs, for a JSONL row and for a Parquet file at plan time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    row = {"prompt": [{"role": "user", "content": "Hi"}], "completion": [{"role": "assistant", "content": "Yo"}]}
    p = tmp_path / "pc.jsonl"
    p.write_text(json.dumps(row) + "\n")
    values, rows, errors = read_all(plan_units(inp([p])), "messages")
    assert values == [] and len(errors) == 1 and "prompt-completion layout" in str(errors[0])
    pq.write_table(pa.Table.from_pylist([row]), tmp_path / "pc.parquet")
    with pytest.raises(ConfigError, match=r"has no column 'messages'.*prompt-completion layout.*prompt \+ completion"):
        plan_units(inp([tmp_path / "pc.parquet"], column="messages"))


@pytest.mark.parametrize("kw, text", [
    ({"format": "jsonl", "path": "/d/a b.jsonl"}, "/d/a b.jsonl"),
    ({"format": "jsonl", "path": "/d/a.jsonl", "start": 10, "stop": 20}, "/d/a.jsonl bytes [10, 20)"),
    ({"format": "jsonl", "path": "/d/a.jsonl", "start": 10, "stop": -1}, "/d/a.jsonl bytes [10, end)"),
    ({"format": "jsonl", "path": "/d/a.jsonl.zst", "start": 0, "stop": 9}, "/d/a.jsonl.zst zstd frames at bytes [0, 9)"),
    ({"format": "parquet", "path": "/d/rows [1, 2).parquet", "start": 2, "stop": 4},
     "/d/rows [1, 2).parquet row groups [2, 4)"),
    ({"format": "hf", "path": "/d/ds", "start": 0, "stop": 100}, "/d/ds rows [0, 100)"),
])
def test_a_units_path_is_read_back_from_its_description(kw, text):
    """The resume line names a unit whose file is not in the last complete run's manifest, whose
    ``source`` strings are :meth:`Unit.describe` texts: :meth:`Unit.described_path` must give
    each back its path, whatever part words describe wrote (one regex in readers/base.py beside
    describe, no longer a copy of its wording in the driver). Worked examples: the texts here
    are describe's own words, checked first."""
    from rmlprep.readers import Unit

    u = Unit(index=0, **kw)
    assert u.describe() == text
    assert Unit.described_path(text) == kw["path"]


def test_a_file_name_that_is_not_utf8_is_refused_naming_its_bytes(tmp_path):
    """A glob matching a Latin-1 file name (``caf\\xe9.jsonl``: byte 0xE9 is not UTF-8) gave
    the path as Python decodes it (surrogateescape, ``'caf\\udce9.jsonl'``), and the manifest
    and rejects recorded that escape as the input's name, exit 0 (review14). Now refused in one
    line naming the key and the name's bytes, as an output folder of such a name already is;
    a UTF-8 non-ASCII name (``thé.jsonl``) is read."""
    d = tmp_path / "data"
    d.mkdir()
    with open(os.path.join(os.fsencode(d), b"caf\xe9.jsonl"), "wb") as f:
        f.write(b'{"text": "hello"}\n')
    (d / "th\u00e9.jsonl").write_text('{"text": "world"}\n')
    with pytest.raises(ConfigError, match=r"input\.paths\[0\]: .* names a file whose name is not UTF-8: "
                                          r"b'.*caf\\xe9\.jsonl'"):
        plan_units(inp([str(d / "*.jsonl")]))
    units = plan_units(inp([str(d / "th*.jsonl")]))
    assert [Path(u.path).name for u in units] == ["th\u00e9.jsonl"]
