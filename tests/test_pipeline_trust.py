"""The run never loses, mixes or reuses data silently: input identity on resume, stale files,
the output-folder lock, environment faults, the commit order, empty shards, lone surrogates."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from rmlprep import cli
from rmlprep.config import config_from_dict
from rmlprep.errors import InputError, OutputError, RmlprepError
from rmlprep.load import open_tokenizer
from rmlprep.packing import unpack
from rmlprep.pipeline import output as output_mod
from rmlprep.pipeline import run
from rmlprep.pipeline import writers as writers_mod
from rmlprep.pipeline.output import OutputFolder
from rmlprep.pipeline.owner import claim

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "fixtures" / "tokenizers" / "bl_gpt2_digits.json"
TEXT = ROOT.parent / "shared" / "corpora" / "text-multilingual.jsonl"

pytestmark = pytest.mark.skipif(not TINY.exists(), reason=f"{TINY} is absent")


def quiet(_msg: str) -> None:
    pass


def lines(n: int, start: int = 0) -> list[bytes]:
    """n JSONL documents: real text when ../shared is there, else synthetic."""
    out: list[bytes] = []
    if TEXT.exists():
        with open(TEXT, "rb") as f:
            for i, line in enumerate(f):
                if i >= start:
                    out.append(json.dumps({"text": json.loads(line)["text"][:1500]}, ensure_ascii=False).encode() + b"\n")
                if len(out) == n:
                    break
    else:
        out = [json.dumps({"text": f"Document {i}: " + "word " * (i % 97)}).encode() + b"\n" for i in range(start, start + n)]
    return out


def make_cfg(inp, out: Path, *, workers: int = 1, seq_len: int = 128, **extra):
    d = {
        "input": {"paths": [str(p) for p in (inp if isinstance(inp, list) else [inp])], "unit_bytes": 20_000,
                  "batch_rows": 64},
        "tokenizer": {"path": str(TINY)},
        "pack": {"seq_len": seq_len},
        "output": {"dir": str(out)},
        "run": {"workers": workers, "progress": "none", "histogram": False},
    }
    for k, v in extra.items():
        d.setdefault(k, {}).update(v) if isinstance(v, dict) else d.__setitem__(k, v)
    if d.get("pipeline") == "sft":  # TINY's vocabulary has no <|im_end|> or </s>: markers as text
        d.setdefault("chat", {}).setdefault("text_markers", True)
    return config_from_dict(d)


def folder(out: Path) -> dict[str, bytes]:
    """Every unit file (shards, rejects) byte for byte; markers without their timings."""
    res = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.glob("train-*.parquet"))}
    res.update({str(p.relative_to(out)): p.read_bytes() for p in sorted(out.glob("rejects/*"))})
    for p in sorted(out.glob("shard-*.done.json")):
        m = json.loads(p.read_text())
        m.pop("seconds")
        m["input"]["files"] = [[Path(f[0]).name, *f[1:]] for f in m["input"]["files"]]  # not the folder
        res[p.name] = json.dumps(m, sort_keys=True).encode()
    return res


def assert_consistent(out: Path, manifest: dict) -> None:
    """The folder holds exactly the manifest's shards, markers and rejects, nothing stale; each
    shard entry's ``unit`` is its position, its file's number and its rows' ``unit`` column."""
    names = {s["shard"] for s in manifest["shards"]}
    assert [s["unit"] for s in manifest["shards"]] == list(range(len(manifest["shards"])))
    for s in manifest["shards"]:
        assert s["shard"] == f"train-{s['unit']:05d}.parquet"
        assert set(pq.read_table(out / s["shard"], columns=["unit"]).column("unit").to_pylist()) <= {s["unit"]}
    assert {p.name for p in out.glob("train-*.parquet")} == names
    assert {p.name for p in out.glob("shard-*.done.json")} == {n.replace("train-", "shard-").replace(".parquet", ".done.json") for n in names}
    assert {f"rejects/{p.name}" for p in out.glob("rejects/*")} == set(manifest["rejects"]["files"])
    assert not list(out.rglob("*.tmp-*"))


def fresh(cfg_inp, tmp_path: Path, name: str, **kw) -> dict[str, bytes]:
    run(make_cfg(cfg_inp, tmp_path / name, **kw), log=quiet)
    return folder(tmp_path / name)


# -- resume never reuses stale work --------------------------------------------------------------
def chat_lines(docs: list[bytes]) -> list[bytes]:
    """Conversations made of documents: the first 40 characters asked, the rest answered."""
    out = []
    for line in docs:
        text = json.loads(line)["text"]
        msgs = [{"role": "user", "content": text[:40]}, {"role": "assistant", "content": text[40:] or "ok"}]
        out.append(json.dumps({"messages": msgs}, ensure_ascii=False).encode() + b"\n")
    return out


@pytest.mark.parametrize("fmt", ["parquet", "megatron", "sft"])
def test_a_file_added_that_sorts_first_renumbers_the_done_units_without_redoing_them(tmp_path, fmt):
    """A glob that gains a file sorting before the done ones gives every later unit a new
    number. Their shards were redone (all of them, for one small file added); a unit's files
    name their unit only in the names, the shard's rmlprep.unit, the rejects' "unit" and the
    marker, so they are renumbered instead: only the new file's unit is processed, the folder is
    a fresh run's byte for byte (rejects with their new unit number included), and the log says
    so. A rerun after that skips every unit."""
    d = tmp_path / "in"
    d.mkdir()
    bad = b'{"text": 7}\n{"text": ["\\u00e9\\ud800", 1.5, null, {"k": "\\n"}]}\n'  # rejects whose values round-trip
    docs = chat_lines if fmt == "sft" else (lambda x: x)
    if fmt == "sft":
        bad = bad.replace(b'"text"', b'"messages"')
    (d / "b.jsonl").write_bytes(b"".join(docs(lines(40))) + bad)
    (d / "c.jsonl").write_bytes(b"".join(docs(lines(40, start=40))))
    out = tmp_path / "o"
    extra = {"megatron": {"output": {"format": "megatron"}}, "parquet": {},
             "sft": {"pipeline": "sft", "input": {"column": "messages"}, "chat": {"format": "chatml"},
                     "pack": {"overflow": "truncate"}}}[fmt]
    first = run(make_cfg(str(d / "*.jsonl"), out, **extra), log=quiet)
    assert len(first["shards"]) >= 3 and first["totals"]["rejects"] >= 2
    (d / "a.jsonl").write_bytes(b"".join(docs(lines(10, start=80))))
    logs: list[str] = []
    m = run(make_cfg(str(d / "*.jsonl"), out, **extra), log=logs.append)
    assert m["units_processed"] == 1 and len(m["shards"]) == len(first["shards"]) + 1
    n = len(first["shards"])
    # the log says which units were kept, renumbered and redone: it said "0 of 4 units already
    # done and verified ...; 4 to process (input changed since the unit was done: 3)" before
    # the renumber line, for the units that were then renumbered, and "input changed" of the
    # new file's unit
    assert (f"resume: 0 of {n + 1} units already done and verified (input and sha256); {n} renumbered; 1 to process "
            "(a new input file, not in the last complete run: 1 (unit 0))") in logs
    assert any(x.startswith(f"resume: {n} done units renumbered, not redone: 0..{n - 1} -> 1..{n} (an input file")
               for x in logs)
    fresh_out = tmp_path / "fresh"
    run(make_cfg(str(d / "*.jsonl"), fresh_out, **extra), log=quiet)
    assert everything_units(out) == everything_units(fresh_out)
    assert [(s["unit"], s["shard"].split("-")[1][:5]) for s in m["shards"]] == [(i, f"{i:05d}") for i in range(n + 1)]
    if fmt != "megatron":
        assert folder(out) == folder(fresh_out)
        assert_consistent(out, m)
    again = run(make_cfg(str(d / "*.jsonl"), out, **extra), log=quiet)
    assert again["units_skipped"] == len(again["shards"])


def test_a_file_removed_that_sorted_first_renumbers_the_done_units_and_says_why(tmp_path):
    """The other way round: a file that sorted first leaves the glob, and every later unit's
    number goes down by its units. They are renumbered as for a file added (the folder is a
    fresh run's, byte for byte), and the log names the cause: it said "an input file added before
    them" for a file removed."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl").write_bytes(b"".join(lines(10, start=80)))
    (d / "b.jsonl").write_bytes(b"".join(lines(40)) + b'{"text": 7}\n')
    (d / "c.jsonl").write_bytes(b"".join(lines(40, start=40)))
    out = tmp_path / "o"
    first = run(make_cfg(str(d / "*.jsonl"), out), log=quiet)
    (d / "a.jsonl").unlink()
    logs: list[str] = []
    m = run(make_cfg(str(d / "*.jsonl"), out), log=logs.append)
    n = len(first["shards"]) - 1
    assert m["units_processed"] == 0 and len(m["shards"]) == n
    assert f"resume: 0 of {n} units already done and verified (input and sha256); {n} renumbered; 0 to process" in logs
    assert (f"resume: {n} done units renumbered, not redone: 1..{n} -> 0..{n - 1} (an input file added or removed "
            "before them") in "\n".join(logs)
    assert folder(out) == fresh(str(d / "*.jsonl"), tmp_path, "fresh")
    assert_consistent(out, m)


def test_the_resume_line_says_a_new_file_is_new_not_changed(tmp_path):
    """A file added to the glob was named "input changed since the unit was done" (sorting
    before done files) or "no done marker" (after them): a new file is not a changed one. One
    file per unit (unit_bytes 20,000): b.jsonl, c.jsonl done; then a.jsonl (first) and d.jsonl
    (last) are added: units 0 and 3 read "a new input file" (neither is in the last complete
    run's manifest), units 1, 2 are renumbered. A file whose bytes changed (d.jsonl) keeps "input
    changed". In a folder without a manifest (a stopped run's), a file added first: its unit
    number's marker names another file ("other input at this unit number")."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "b.jsonl").write_bytes(b"".join(lines(8)))
    (d / "c.jsonl").write_bytes(b"".join(lines(8, start=8)))
    out = tmp_path / "o"
    run(make_cfg(str(d / "*.jsonl"), out), log=quiet)
    (d / "a.jsonl").write_bytes(b"".join(lines(8, start=16)))
    (d / "d.jsonl").write_bytes(b"".join(lines(8, start=24)))
    logs: list[str] = []
    run(make_cfg(str(d / "*.jsonl"), out), log=logs.append)
    assert ("resume: 0 of 4 units already done and verified (input and sha256); 2 renumbered; 2 to process (a new "
            "input file, not in the last complete run: 2 (units 0, 3))") in logs, logs
    (d / "d.jsonl").write_bytes(b"".join(lines(8, start=40)))
    logs.clear()
    run(make_cfg(str(d / "*.jsonl"), out), log=logs.append)
    assert ("resume: 3 of 4 units already done and verified (input and sha256); 1 to process (input changed since "
            "the unit was done: 1 (unit 3))") in logs, [x for x in logs if x.startswith("resume")]
    (out / "manifest.json").unlink()  # as a stopped run leaves the folder
    (d / "0.jsonl").write_bytes(b"".join(lines(8, start=32)))
    logs.clear()
    run(make_cfg(str(d / "*.jsonl"), out), log=logs.append)
    assert ("resume: 0 of 5 units already done and verified (input and sha256); 4 renumbered; 1 to process (other "
            "input at this unit number (an input file added or removed before it): 1 (unit 0))") in logs, \
        [x for x in logs if x.startswith("resume")]


def test_a_unit_never_done_is_said_to_have_no_marker_after_renumbering(tmp_path):
    """A stopped run (no manifest) whose unit 1 was not done (no marker, no shard: its worker
    was killed) while 0, 2, 3... were; then a file added first moves every unit up by one. Unit 2
    now reads old unit 1's input, never done, and the marker at number 2 is old unit 2's (the
    same file, the next byte range: renumbered to 3). The log said "input changed since the unit
    was done: 1 (unit 2)"; nothing changed, it was never done: "no done marker". The folder is
    then a fresh run's, byte for byte. A unit whose file's bytes changed keeps "input changed"
    (test_the_resume_line_says_a_new_file_is_new_not_changed)."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "b.jsonl").write_bytes(b"".join(lines(40)))
    out = tmp_path / "o"
    first = run(make_cfg(str(d / "*.jsonl"), out), log=quiet)
    n = len(first["shards"])
    assert n >= 3 and all(s["source"].startswith(str(d / "b.jsonl")) for s in first["shards"])
    for name in ("shard-00001.done.json", "train-00001.parquet", "manifest.json"):  # as the kill left them
        (out / name).unlink()
    (d / "a.jsonl").write_bytes(b"".join(lines(5, start=80)))
    logs: list[str] = []
    m = run(make_cfg(str(d / "*.jsonl"), out), log=logs.append)
    assert (f"resume: 0 of {n + 1} units already done and verified (input and sha256); {n - 1} renumbered; 2 to "
            "process (other input at this unit number (an input file added or removed before it): 1 (unit 0); no done "
            "marker: 1 (unit 2))") in logs, [x for x in logs if x.startswith("resume")]
    assert folder(out) == fresh(str(d / "*.jsonl"), tmp_path, "fresh")
    assert_consistent(out, m)


def test_the_resume_lines_name_the_units_as_runs():
    """Worked example: units 1, 2 were 0, 1 and unit 5 was 3 (a file added before the first two,
    another removed before the last): two runs of old -> new numbers. Units to process are
    named as runs of numbers, four at most and how many more."""
    from rmlprep.pipeline.driver import _unit_list
    from rmlprep.pipeline.renumber import renumbered_line

    assert renumbered_line({1: 0, 2: 1, 5: 3}).startswith(
        "resume: 3 done units renumbered, not redone: 0..1 -> 1..2, 3 -> 5 (an input file added or removed before them")
    assert renumbered_line({4: 3}).startswith("resume: 1 done unit renumbered, not redone: 3 -> 4 (an input file "
                                              "added or removed before it moved its input")
    assert _unit_list([0]) == "unit 0" and _unit_list([7, 0, 1, 2, 9]) == "units 0..2, 7, 9"
    assert _unit_list([0, 2, 4, 6, 8, 10]) == "units 0, 2, 4, 6, and 2 more runs"


def test_overwrite_rewrites_the_units_an_added_file_moved_instead_of_renumbering_them(tmp_path):
    """``--overwrite`` rewrites every unit: a marker written before a count existed
    (``untrained_chunks``) is replaced by one that holds it, as the summary's "--overwrite writes
    them again and counts" says. Renumbering, which copies the old marker, ran under
    ``--overwrite`` too, so the units an added file moved were renumbered, not rewritten, while
    those that kept their number were rewritten."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "b.jsonl").write_bytes(b"".join(lines(40)))
    (d / "c.jsonl").write_bytes(b"".join(lines(40, start=40)))
    out = tmp_path / "o"
    first = run(make_cfg(str(d / "*.jsonl"), out), log=quiet)
    (d / "a.jsonl").write_bytes(b"".join(lines(10, start=80)))
    logs: list[str] = []
    m = run(make_cfg(str(d / "*.jsonl"), out), overwrite=True, log=logs.append)
    assert m["units_processed"] == len(m["shards"]) == len(first["shards"]) + 1
    assert not [x for x in logs if "renumbered" in x]
    assert folder(out) == fresh(str(d / "*.jsonl"), tmp_path, "fresh")
    assert_consistent(out, m)


def test_a_rerun_that_renumbers_and_then_fails_puts_the_previous_folder_back(tmp_path):
    """The file added first is a cut .gz: the done units were renumbered (their files rewritten
    under new numbers) before it failed; the previous folder comes back file for file."""
    import gzip

    from rmlprep.errors import RmlprepError

    d = tmp_path / "in"
    d.mkdir()
    (d / "b.jsonl").write_bytes(b"".join(lines(40)) + b'{"text": 7}\n')
    out = tmp_path / "o"
    cfg = make_cfg(str(d / "*"), out)
    run(cfg, log=quiet)
    before = everything(out)
    (d / "a.jsonl.gz").write_bytes(gzip.compress(b"".join(lines(10, start=80)))[:-12])
    logs: list[str] = []
    with pytest.raises(RmlprepError, match="a.jsonl.gz"):
        run(cfg, log=logs.append)
    assert any(" renumbered, not redone" in x for x in logs)
    assert everything(out) == before


def everything_units(out: Path) -> dict[str, bytes]:
    """Every unit file (shards of either writer, rejects) byte for byte, and the markers without
    their timings and folder."""
    res = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.glob("train-*.parquet"))}
    res.update({p.name: p.read_bytes() for p in sorted(out.glob("shard-*.bin")) + sorted(out.glob("shard-*.idx"))})
    res.update({str(p.relative_to(out)): p.read_bytes() for p in sorted(out.glob("rejects/*"))})
    for p in sorted(out.glob("shard-*.done.json")):
        mk = json.loads(p.read_text())
        mk.pop("seconds")
        mk["input"]["files"] = [[Path(f[0]).name, *f[1:]] for f in mk["input"]["files"]]
        res[p.name] = json.dumps(mk, sort_keys=True).encode()
    return res


def test_prepend_a_line_then_resume_redoes_every_shifted_unit(tmp_path):
    """The issue's case: some units done (here: all but the last two, as after a kill), one line
    prepended to the input, rerun with --resume: the result is a fresh run's, rows_read = 421."""
    inp = tmp_path / "c.jsonl"
    body = lines(420)
    inp.write_bytes(b"".join(body))
    out = tmp_path / "o"
    m0 = run(make_cfg(inp, out), log=quiet)
    n = len(m0["shards"])
    assert n >= 6
    for i in (n - 2, n - 1):  # killed before its last units
        (out / f"shard-{i:05d}.done.json").unlink()
    (out / "manifest.json").unlink()
    inp.write_bytes(json.dumps({"text": "A new first line."}).encode() + b"\n" + b"".join(body))
    logs: list[str] = []
    m = run(make_cfg(inp, out), resume=True, log=logs.append)
    assert m["totals"]["rows_read"] == 421 and m["totals"]["documents"] == 421
    assert folder(out) == fresh(inp, tmp_path, "fresh")
    assert_consistent(out, m)
    assert any("input changed since the unit was done" in x for x in logs)


def test_input_shrank_then_plain_rerun_leaves_no_orphans(tmp_path):
    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b"".join(lines(420)))
    out = tmp_path / "o"
    n_before = len(run(make_cfg(inp, out), log=quiet)["shards"])
    inp.write_bytes(b"".join(lines(150)))
    logs: list[str] = []
    m = run(make_cfg(inp, out), log=logs.append)
    assert len(m["shards"]) < n_before
    assert m["totals"]["rows_read"] == 150
    assert folder(out) == fresh(inp, tmp_path, "fresh")
    assert_consistent(out, m)
    assert any("not in this plan" in x for x in logs)


def test_a_file_changed_during_the_run_is_named_once(tmp_path):
    """Careless-user trial U8: a file of 18 units touched once the run had started failed each
    unit, and the error said "unit N failed: FILE: changed during the run (...)" for 5 of them,
    then "(and 13 more units)". The same error is said once, naming the units it failed."""
    from rmlprep.errors import RmlprepError

    inp = tmp_path / "a.jsonl"
    inp.write_bytes(b"".join(lines(200)))
    cfg = make_cfg(inp, tmp_path / "o")

    def touch_when_running(msg: str) -> None:
        if msg.startswith("run:"):  # planned, no unit started
            st = inp.stat()
            os.utime(inp, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))

    with pytest.raises(RmlprepError) as e:
        run(cfg, log=touch_when_running)
    msg = str(e.value)
    assert re.fullmatch(rf"units 0\.\.(\d+) failed: {re.escape(str(inp))}: changed during the run \(size \d+ -> \d+, "
                        r"mtime_ns \d+ -> \d+\); rerun to plan it again", msg), msg
    assert int(re.match(r"units 0\.\.(\d+)", msg).group(1)) > 1  # the file is several units


def test_a_file_replaced_after_its_units_were_cut_stops_the_plan(tmp_path, monkeypatch):
    """The plan cuts every file's units (JSONL byte ranges at line ends, lines counted) before it
    stats and hashes them, minutes apart for a large input list. A file replaced in between (a
    download moved into place; here 200 lines, then 300 longer ones) was read through the first
    version's ranges: lines cut at the old range ends were not_json rejects, and the rows past the
    old size were never read (rows_read 252 of 300 in explore22's try, 4 rejects, exit 0), with
    the new version's hash vouching for the shards. The plan now stops, naming the file."""
    import importlib

    plan_mod = importlib.import_module("rmlprep.pipeline.plan")
    inp = tmp_path / "a.jsonl"
    inp.write_bytes(b"".join(lines(200)))
    cut = plan_mod.plan_units

    def cut_then_replace(*a, **kw):
        units = cut(*a, **kw)
        inp.write_bytes(b"".join(x.replace(b'"}', b' and more"}') for x in lines(300)))
        return units

    monkeypatch.setattr(plan_mod, "plan_units", cut_then_replace)
    with pytest.raises(InputError, match=rf"^{re.escape(str(inp))}: changed while the run was planned \(size \d+ -> "
                                         r"\d+, mtime_ns \d+ -> \d+\), after its units were cut; rerun once it is "
                                         r"complete$"):
        run(make_cfg(inp, tmp_path / "o"), log=quiet)
    monkeypatch.setattr(plan_mod, "plan_units", cut)
    assert run(make_cfg(inp, tmp_path / "o"), log=quiet)["totals"]["rows_read"] == 300


def test_same_size_same_mtime_rewrite_is_caught_by_the_hash(tmp_path):
    """A byte changed in place with size and mtime restored (cp -p, rsync -a would do that): the
    xxh3 of the unit's byte range differs, so that unit (and only it) is redone."""
    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b"".join(lines(300)))
    out = tmp_path / "o"
    run(make_cfg(inp, out), log=quiet)
    st = inp.stat()
    data = bytearray(inp.read_bytes())
    k = data.index(b'"text": "') + 9
    data[k:k + 1] = b"Z" if data[k:k + 1] != b"Z" else b"Y"
    inp.write_bytes(bytes(data))
    os.utime(inp, ns=(st.st_atime_ns, st.st_mtime_ns))
    m = run(make_cfg(inp, out), log=quiet)
    assert m["units_processed"] == 1
    assert folder(out) == fresh(inp, tmp_path, "fresh")


def test_appended_input_keeps_the_units_before(tmp_path):
    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b"".join(lines(300)))
    out = tmp_path / "o"
    n = len(run(make_cfg(inp, out), log=quiet)["shards"])
    with open(inp, "ab") as f:
        f.write(b"".join(lines(100, start=300)))
    m = run(make_cfg(inp, out), log=quiet)
    assert m["units_skipped"] == n - 1  # the last unit's range grew; the others' bytes are the same
    assert folder(out) == fresh(inp, tmp_path, "fresh")
    assert_consistent(out, m)


def test_stale_rejects_file_of_a_redone_unit_is_removed(tmp_path):
    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b'{"text": "a"}\n{"text": null}\n{"text": "b"}\n')
    out = tmp_path / "o"
    assert run(make_cfg(inp, out), log=quiet)["rejects"]["files"] == ["rejects/rejects-00000.jsonl"]
    inp.write_bytes(b'{"text": "a"}\n{"text": "c"}\n{"text": "b"}\n')
    m = run(make_cfg(inp, out), log=quiet)
    assert m["totals"]["rejects"] == 0 and not list(out.glob("rejects/*"))
    assert_consistent(out, m)


def everything(out: Path) -> dict[str, bytes]:
    """Every file of the folder, hidden ones too, byte for byte (the lock file aside)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and p.name != ".rmlprep.lock"}


def test_a_redo_that_fails_leaves_the_previous_complete_folder_as_it_was(tmp_path):
    """A unit whose input changed is redone; when the redo fails (here b.jsonl.gz was replaced by
    a cut copy: an incomplete gzip stream, found only by decoding it), the rerun removed the
    unit's shards and the reports before failing: a complete folder became a partial one with no
    manifest (and, before that, kept an old shard ``datasets`` loaded beside the new ones). The
    files a rerun replaces are set aside until it completes, and a failed rerun puts them back:
    the folder is the previous run's, file for file (manifest, card, markers), nothing mixed, no
    set-aside folder left. The input fixed, the next rerun redoes b's units only."""
    import gzip

    from rmlprep.errors import RmlprepError

    a, b = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    a.write_bytes(gzip.compress(b"".join(lines(40))))
    whole = gzip.compress(b"".join(lines(40, start=40)))
    b.write_bytes(whole)
    out = tmp_path / "o"
    cfg = make_cfg(str(tmp_path / "*.jsonl.gz"), out)
    m = run(cfg, log=quiet)
    assert len(m["shards"]) == 2
    before = everything(out)
    b.write_bytes(gzip.compress(b"".join(lines(39, start=41)))[:-20])  # another content, cut
    logs: list[str] = []
    with pytest.raises(RmlprepError, match="b.jsonl.gz") as ei:
        run(cfg, log=logs.append)
    assert everything(out) == before and "done stay" not in str(ei.value)
    assert any("the previous run's folder is back as it was" in x for x in logs)
    b.write_bytes(gzip.compress(b"".join(lines(39, start=41))))
    m2 = run(cfg, log=quiet)
    assert (m2["units_skipped"], m2["units_processed"]) == (1, 1)
    assert folder(out) == fresh(str(tmp_path / "*.jsonl.gz"), tmp_path, "fresh") and not (out / ".rmlprep.previous").exists()
    assert_consistent(out, m2)


def test_a_file_fault_mid_run_keeps_the_done_units_for_the_rerun(tmp_path):
    """A first run over a glob whose second file holds a hole of zeros fails on that file's unit
    with "fetch the file again", and said nothing of the units it had written: they stay
    (verified by their markers), so the line says so and that a rerun after the fix keeps them.
    Checked here: the file fixed, the rerun keeps a's units and writes the folder a fresh run
    writes, byte for byte (markers without their timings). A failed rerun that puts a previous
    complete folder back says no such thing (test_a_redo_that_fails_leaves_...)."""
    from rmlprep.errors import RmlprepError

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_bytes(b"".join(lines(40)))
    good = b"".join(lines(40, start=40))
    b.write_bytes(good[:3000] + b"\x00" * 4096 + good[3000 + 4096:])
    out = tmp_path / "o"
    cfg = make_cfg(str(tmp_path / "*.jsonl"), out, input={"unit_bytes": 8000})
    with pytest.raises(RmlprepError) as ei:
        run(cfg, log=quiet)
    msg = str(ei.value)
    done = len(list(out.glob("shard-*.done.json")))
    assert f"{b}: byte 3000: a run of NUL bytes" in msg and done >= 2, (msg, done)
    assert msg.endswith(f"; the {done} units done stay in {out}: a rerun after the fix keeps them and does the "
                        "rest (the units of a file that changed are redone)"), msg
    b.write_bytes(good)
    m = run(cfg, log=quiet)
    assert m["units_skipped"] >= 1 and m["units_processed"] >= 1  # a's units kept, b's redone
    assert folder(out) == fresh(str(tmp_path / "*.jsonl"), tmp_path, "fresh", input={"unit_bytes": 8000})
    assert_consistent(out, m)


def test_a_repeated_csv_header_is_a_reject_and_older_csv_markers_are_redone(tmp_path):
    """Two CSV files concatenated: the second header's ``text`` was a document reading "text".
    It is now a reject (kind csv_repeated_header, counted in the manifest), so a CSV unit done
    before the reader knew it may hold it as a document: its marker, without ``csv_header_rows``,
    cannot vouch for it and the unit is redone on resume, saying why, and not renumbered when a
    file added before it moves it; a JSONL unit's marker needs no such key and is kept."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "b.csv").write_bytes(b"id,text\n1,hello\n2,world\nid,text\n3,more\n")
    (d / "c.jsonl").write_bytes(b"".join(lines(20)))
    out = tmp_path / "o"
    cfg = make_cfg(str(d / "*"), out)
    m = run(cfg, log=quiet)
    assert m["rejects"]["by_kind"] == {"csv_repeated_header": 1} and m["shards"][0]["documents"] == 3
    recs = [json.loads(x) for x in (out / "rejects" / "rejects-00000.jsonl").read_text().splitlines()]
    assert [(r["row"], r["kind"]) for r in recs] == [(2, "csv_repeated_header")]

    def strip():  # as markers written before the key existed
        p = out / "shard-00000.done.json"
        mk = json.loads(p.read_text())
        del mk["csv_header_rows"]
        p.write_text(json.dumps(mk))

    strip()
    logs: list[str] = []
    m = run(cfg, log=logs.append)
    assert (m["units_processed"], m["units_skipped"]) == (1, len(m["shards"]) - 1)  # c.jsonl's kept
    assert any("done marker predates a CSV record of the header's column names being a reject" in x and "(unit 0)"
               in x for x in logs), logs
    strip()
    (d / "a.jsonl").write_bytes(b"".join(lines(3, start=20)))  # sorts first: every unit's number + 1
    logs.clear()
    m = run(cfg, log=logs.append)
    n = len(m["shards"])  # a.jsonl's and b.csv's units done, c.jsonl's renumbered
    assert m["units_processed"] == 2 and any(f"renumbered, not redone: 1..{n - 2} -> 2..{n - 1} " in x
                                             for x in logs), logs
    assert folder(out) == fresh(str(d / "*"), tmp_path, "fresh")


def test_a_rerun_over_a_jsonl_cut_mid_line_is_refused_before_any_work(tmp_path):
    """A plain JSONL file cut inside its last line (no final newline, the line not JSON) is found
    while the run is planned, by the reader's own rule, so a rerun stops before the parity stage
    and never touches the folder (it removed the unit's shards and the reports, then failed); the
    line names the file and the cut line's first byte. A file that only lacks its final newline
    is complete, and is read."""
    inp = tmp_path / "c.jsonl"
    data = b"".join(lines(60))
    inp.write_bytes(data)
    out = tmp_path / "o"
    cfg = make_cfg(inp, out)
    run(cfg, log=quiet)
    before = everything(out)
    inp.write_bytes(data[:-9])
    logs: list[str] = []
    with pytest.raises(InputError, match="the last line is cut short") as ei:
        run(cfg, log=logs.append)
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    assert f"{inp}: byte {last}: " in str(ei.value) and not [x for x in logs if x.startswith(("run:", "parity"))]
    assert everything(out) == before
    inp.write_bytes(data[:-1])
    m = run(cfg, log=quiet)
    assert m["units_skipped"] == len(m["shards"]) - 1 and m["totals"]["rejects"] == 0


def test_a_failed_rerun_of_a_grown_input_removes_its_new_units_too(tmp_path):
    """The input grew (a new file that sorts last: its units are new numbers) and one changed
    file fails: the new units' shards and rejects, written before the failure, are removed with the
    rest of what the rerun wrote, so the restored manifest and card describe every shard in the
    folder, and a previous folder without rejects gets no empty ``rejects/`` back (the README:
    "only when there are any"; the restore left one)."""
    import gzip

    from rmlprep.errors import RmlprepError

    d = tmp_path / "in"
    d.mkdir()
    (d / "a.jsonl.gz").write_bytes(gzip.compress(b"".join(lines(40))))
    out = tmp_path / "o"
    cfg = make_cfg(str(d / "*"), out)
    run(cfg, log=quiet)
    before = everything(out)
    (d / "a.jsonl.gz").write_bytes(gzip.compress(b"".join(lines(30)))[:-30])
    (d / "b.jsonl").write_bytes(b"".join(lines(40, start=40)) + b'{"text": 7}\n')  # several units, one reject
    with pytest.raises(RmlprepError, match="a.jsonl.gz"):
        run(cfg, log=quiet)
    assert everything(out) == before
    assert not (out / "rejects").exists()  # the previous run had none: no empty rejects/ left either


def test_a_rerun_whose_reports_fail_puts_the_previous_folder_back(tmp_path, monkeypatch):
    """The units are redone but a report's rename fails (an I/O error after stats.json and the
    card were renamed): the previous run's units and reports come back, and none of this run's
    reports is left beside them."""
    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b"".join(lines(60)))
    out = tmp_path / "o"
    cfg = make_cfg(inp, out)
    run(cfg, log=quiet)
    before = everything(out)
    inp.write_bytes(b"".join(lines(60)) + b"".join(lines(5, start=60)))  # appended: the last unit changes
    real = OutputFolder.publish

    def publish(self, tmp, name):
        if name == "manifest.json":
            self.discard(tmp)
            raise OutputError(f"{self.path / name}: Input/output error; check the output folder and rerun")
        real(self, tmp, name)

    monkeypatch.setattr(OutputFolder, "publish", publish)
    with pytest.raises(OutputError, match="Input/output error"):
        run(cfg, log=quiet)
    assert everything(out) == before


def test_overwrite_that_fails_puts_the_other_config_s_folder_back(tmp_path):
    """``--overwrite`` replaces another config's shards; when the run then fails, they are back
    as they were (it removed them first: a failed overwrite lost the previous dataset)."""
    import gzip

    from rmlprep.errors import RmlprepError

    inp = tmp_path / "c.jsonl.gz"
    whole = gzip.compress(b"".join(lines(40)))
    inp.write_bytes(whole)
    out = tmp_path / "o"
    run(make_cfg(inp, out), log=quiet)
    before = everything(out)
    inp.write_bytes(whole[:-10])
    with pytest.raises(RmlprepError, match="c.jsonl.gz"):
        run(make_cfg(inp, out, seq_len=64), overwrite=True, log=quiet)
    assert everything(out) == before
    inp.write_bytes(whole)
    m = run(make_cfg(inp, out, seq_len=64), overwrite=True, log=quiet)
    assert folder(out) == fresh(inp, tmp_path, "fresh", seq_len=64)
    assert_consistent(out, m)


@pytest.mark.parametrize("overwrite", [False, True])
def test_setting_aside_never_leaves_the_manifest_beside_fewer_shards(tmp_path, monkeypatch, overwrite):
    """The set-aside moved the unit files first and the reports last: a move that failed half
    way (a store's copy, a folder it cannot create) left manifest.json in place naming
    train-00000.parquet, whose files the failed run then dropped (the manifest not set aside,
    the previous folder did not count as complete), so ``datasets`` loaded 7 of 8 shards of a
    folder that read as complete; a SIGKILL between the moves left the same. The manifest is set
    aside first, and a move that fails puts back what was moved: the folder is as it was. At
    every move the folder either has no manifest or holds every shard it names."""
    from rmlprep.errors import OutputError

    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b"".join(lines(80)))
    out = tmp_path / "o"
    cfg = make_cfg(inp, out)
    run(cfg, log=quiet)
    before = everything(out)
    inp.write_bytes(b"".join(lines(80, start=5)))  # every unit changes
    real = OutputFolder.move
    calls = []

    def move(self, name, to):
        if (out / "manifest.json").exists():
            named = {s["shard"] for s in json.loads((out / "manifest.json").read_text())["shards"]}
            assert named <= {p.name for p in out.glob("train-*.parquet")}
        calls.append(name)
        if len(calls) == 4:
            raise OutputError(f"cannot move {name}")
        real(self, name, to)

    monkeypatch.setattr(OutputFolder, "move", move)
    with pytest.raises(OutputError, match="cannot move"):
        run(make_cfg(inp, out, seq_len=64) if overwrite else cfg, overwrite=overwrite, log=quiet)
    monkeypatch.setattr(OutputFolder, "move", real)
    assert everything(out) == before


def test_a_stopped_rerun_keeps_its_done_units_and_the_next_resumes(tmp_path, monkeypatch):
    """Ctrl-C (or SIGTERM) is not a failure: the units the rerun finished stay (the README's
    "the done units stay and --resume continues"), the files it set aside are dropped, and the
    folder has no manifest until a run completes. A set-aside folder a SIGKILL left behind is
    removed by the next run, which says so."""
    from rmlprep.pipeline import driver

    inp = tmp_path / "c.jsonl"
    data = b"".join(lines(60))
    inp.write_bytes(data)
    out = tmp_path / "o"
    cfg = make_cfg(inp, out)
    run(cfg, log=quiet)
    inp.write_bytes(b"".join(lines(60, start=1)))  # every unit changes

    real = driver.write_reports

    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(driver, "write_reports", stop)
    with pytest.raises(KeyboardInterrupt):
        run(cfg, log=quiet)
    monkeypatch.setattr(driver, "write_reports", real)
    assert not (out / "manifest.json").exists() and not (out / ".rmlprep.previous").exists()
    done = {p.name for p in out.glob("shard-*.done.json")}
    assert done
    (out / ".rmlprep.previous").mkdir()
    (out / ".rmlprep.previous" / "train-00000.parquet").write_bytes(b"left by a SIGKILL")
    logs: list[str] = []
    m = run(cfg, log=logs.append)
    assert m["units_skipped"] == len(done) and not (out / ".rmlprep.previous").exists()
    assert any("removed 1 file of an earlier run" in x for x in logs)
    assert folder(out) == fresh(inp, tmp_path, "fresh")


#: A rerun in a child process that SIGKILLs itself in the final removal of the set-aside folder,
#: after its manifest is committed: before its ``KILL_AT``-th removal (-1: before the last;
#: "folder": all files removed, before the folder itself).
_KILLED_IN_DISCARD = """
import json, os, signal, sys
from pathlib import Path
from rmlprep.config import config_from_dict
from rmlprep.pipeline import run
from rmlprep.pipeline.output import PREVIOUS, OutputFolder

cfg = config_from_dict(json.loads(Path(sys.argv[1]).read_text()))
kill_at = json.loads(sys.argv[2])
real_remove, real_rmdir = OutputFolder.remove, OutputFolder.remove_empty_folder
seen = []

def remove(self, name):
    if name.startswith(PREVIOUS + "/"):
        assert (self.path / "manifest.json").exists()  # only the final removal touches it in this run
        if not seen:
            seen.append(sum(1 for p in (self.path / PREVIOUS).rglob("*") if p.is_file()))
        if kill_at != "folder" and len(seen) - 1 == (kill_at if kill_at >= 0 else seen[0] + kill_at):
            os.kill(os.getpid(), signal.SIGKILL)
        seen.append(name)
    real_remove(self, name)

def rmdir(self, name):
    if kill_at == "folder" and name == PREVIOUS and seen:  # not the start's check for a leftover
        os.kill(os.getpid(), signal.SIGKILL)
    real_rmdir(self, name)

OutputFolder.remove, OutputFolder.remove_empty_folder = remove, rmdir
run(cfg, log=lambda m: None)
"""


@pytest.mark.parametrize("kill_at", [0, 1, 4, -1, "folder"])
def test_a_rerun_killed_while_it_removes_the_set_aside_files_leaves_a_complete_folder(tmp_path, kill_at):
    """A rerun commits its manifest, then removes what it set aside (``.rmlprep.previous``). A
    SIGKILL there leaves the old run's files in that hidden folder in some state: all of them
    (the old manifest among them), the markers removed but not the shards, only the reports (the
    old manifest last but one), or the empty folder. Whatever the state, the folder is the
    rerun's, complete and consistent (``datasets`` skips the hidden folder), and the next run
    removes the leftover first and says so, then keeps every unit. It must not be taken for this
    run's set-aside: here that run fails (b.jsonl.gz cut) and puts the previous folder back,
    which is the killed rerun's, without c's old shard (c.jsonl.gz left the input between the two
    runs, so its shard was in the leftover)."""
    import gzip

    from rmlprep.errors import RmlprepError

    d = tmp_path / "in"
    d.mkdir()
    for name, start in (("a", 0), ("b", 30), ("c", 60)):
        (d / f"{name}.jsonl.gz").write_bytes(gzip.compress(b"".join(lines(30, start=start)) + b'{"text": 7}\n'))
    out = tmp_path / "o"
    cfg = make_cfg(str(d / "*.jsonl.gz"), out)
    first = run(cfg, log=quiet)
    assert len(first["shards"]) == 3
    (d / "c.jsonl.gz").unlink()
    b = gzip.compress(b"".join(lines(29, start=31)))
    (d / "b.jsonl.gz").write_bytes(b)
    (tmp_path / "cfg.json").write_text(json.dumps(cfg.to_dict()))
    child = subprocess.run([sys.executable, "-c", _KILLED_IN_DISCARD, str(tmp_path / "cfg.json"), json.dumps(kill_at)],
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
    assert child.returncode == -9, child.stderr
    assert (out / ".rmlprep.previous").is_dir()
    left = sorted(str(p.relative_to(out / ".rmlprep.previous")) for p in (out / ".rmlprep.previous").rglob("*")
                  if p.is_file())
    assert ("manifest.json" in left) == (kill_at in (0, 1, 4)) and bool(left) == (kill_at != "folder")
    m = json.loads((out / "manifest.json").read_text())
    assert_consistent(out, m)
    new = fresh(str(d / "*.jsonl.gz"), tmp_path, "fresh")
    assert folder(out) == new
    (d / "b.jsonl.gz").write_bytes(b[:-20])  # a run that fails: the killed rerun's folder comes back
    logs: list[str] = []
    with pytest.raises(RmlprepError, match="b.jsonl.gz"):
        run(cfg, log=logs.append)
    n = len(left)
    assert any(f"output: removed {n} file{'s' if n != 1 else ''} of an earlier run" in x for x in logs) == bool(n)
    assert folder(out) == new and not (out / ".rmlprep.previous").exists()
    assert_consistent(out, json.loads((out / "manifest.json").read_text()))
    (d / "b.jsonl.gz").write_bytes(b)
    m = run(cfg, log=quiet)
    assert m["units_processed"] == 0 and folder(out) == new and not (out / ".rmlprep.previous").exists()


#: An --overwrite run in a child process that SIGKILLs itself once its first unit is committed.
_KILLED_OVERWRITE = """
import json, os, signal, sys
from pathlib import Path
from rmlprep.config import config_from_dict
from rmlprep.pipeline import run
from rmlprep.pipeline.output import OutputFolder

real = OutputFolder.write_done

def write_done(self, index, record):
    real(self, index, record)
    os.kill(os.getpid(), signal.SIGKILL)

OutputFolder.write_done = write_done
run(config_from_dict(json.loads(Path(sys.argv[1]).read_text())), overwrite=True, log=lambda m: None)
"""


def test_a_rerun_after_a_killed_overwrite_refuses_before_removing_the_set_aside_run(tmp_path):
    """Careless-user trial U5: config A's complete folder, then ``--overwrite`` with config B
    (another seq_len), SIGKILLed after its first unit: A's files are set aside in
    ``.rmlprep.previous`` (its manifest among them), B's first unit is in the folder. A rerun
    with config A removed that set-aside folder (A's complete output) first and then refused the
    folder as another config's, so nothing was left of A. It now refuses before removing
    anything, and says where A's folder is; ``--overwrite`` then replaces both, as asked."""
    from rmlprep.errors import ConfigError

    inp = tmp_path / "a.jsonl"
    inp.write_bytes(b"".join(lines(120)))
    out = tmp_path / "o"
    cfg_a, cfg_b = make_cfg(inp, out), make_cfg(inp, out, seq_len=64)
    assert len(run(cfg_a, log=quiet)["shards"]) > 1
    a_files = folder(out)
    (tmp_path / "b.json").write_text(json.dumps(cfg_b.to_dict()))
    child = subprocess.run([sys.executable, "-c", _KILLED_OVERWRITE, str(tmp_path / "b.json")],
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
    assert child.returncode == -9, child.stderr
    prev = out / ".rmlprep.previous"
    files = lambda: sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name != ".rmlprep.lock")  # noqa: E731
    before = files()
    assert (prev / "manifest.json").exists() and not (out / "manifest.json").exists()
    assert folder(prev) == a_files  # A's complete folder, set aside
    with pytest.raises(ConfigError, match=r"holds shards of a different config .*; \.rmlprep\.previous/ holds a "
                                          r"complete run's folder that a killed rerun set aside"):
        run(cfg_a, log=quiet)
    assert files() == before, before  # nothing removed
    assert folder(prev) == a_files
    logs: list[str] = []
    m = run(cfg_a, overwrite=True, log=logs.append)
    assert folder(out) == a_files and m["units_processed"] == len(m["shards"]) and not prev.exists()


#: An --overwrite run in a child process that SIGKILLs itself once it has set the folder aside,
#: before it writes any unit (the resume check runs right after check_shards set everything aside).
_KILLED_BEFORE_A_UNIT = """
import json, os, signal, sys
from pathlib import Path
from rmlprep.config import config_from_dict
from rmlprep.pipeline import driver, run

def die(*args, **kw):
    os.kill(os.getpid(), signal.SIGKILL)

driver._done_units = die
run(config_from_dict(json.loads(Path(sys.argv[1]).read_text())), overwrite=True, log=lambda m: None)
"""


def test_a_rerun_after_an_overwrite_killed_before_its_first_unit_keeps_the_set_aside_run(tmp_path):
    """An ``--overwrite`` run (config B) SIGKILLed after it set config A's complete folder aside
    in ``.rmlprep.previous`` but before it committed a unit leaves no unit in the folder. A rerun
    with config A removed that set-aside folder and wrote every unit again (the same bytes, all
    the work redone); it now puts it back and keeps its verified units. A rerun with config B
    still discards it and writes B's units."""
    inp = tmp_path / "a.jsonl"
    inp.write_bytes(b"".join(lines(120)))
    out = tmp_path / "o"
    cfg_a, cfg_b = make_cfg(inp, out), make_cfg(inp, out, seq_len=64)
    n = len(run(cfg_a, log=quiet)["shards"])
    assert n > 1
    a_files = folder(out)

    def killed_overwrite() -> None:
        (tmp_path / "b.json").write_text(json.dumps(cfg_b.to_dict()))
        child = subprocess.run([sys.executable, "-c", _KILLED_BEFORE_A_UNIT, str(tmp_path / "b.json")],
                               env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
        assert child.returncode == -9, child.stderr
        assert (out / ".rmlprep.previous" / "manifest.json").exists() and not list(out.glob("train-*.parquet"))

    killed_overwrite()
    logs: list[str] = []
    m = run(cfg_a, log=logs.append)
    assert m["units_processed"] == 0 and folder(out) == a_files, logs
    assert any("put back" in x and "not redone" in x for x in logs), logs
    assert not (out / ".rmlprep.previous").exists()
    killed_overwrite()
    m = run(cfg_b, log=quiet)  # the overwrite's own config: what it set aside is discarded, as before
    assert m["units_processed"] == len(m["shards"]) and not (out / ".rmlprep.previous").exists()


def test_resume_overwrite_over_another_configs_folder_says_what_it_replaces(tmp_path):
    """Careless-user trial U4: ``--resume --overwrite`` over another config's complete folder
    logged "resume: nothing done yet", as if the folder were empty: --overwrite had set its
    units aside first. It now says how many units it set aside and that every unit is written
    again; on an empty folder "nothing done yet" is still what --resume says."""
    inp = tmp_path / "a.jsonl"
    inp.write_bytes(b"".join(lines(120)))
    out = tmp_path / "o"
    n = len(run(make_cfg(inp, out), log=quiet)["shards"])
    logs: list[str] = []
    run(make_cfg(inp, out, seq_len=64), resume=True, overwrite=True, log=logs.append)
    assert f"output: --overwrite: the {n} units in {out} set aside (removed once this run completes) and every unit " \
           "written again" in logs, logs
    assert not any("nothing done yet" in x for x in logs), logs
    logs.clear()
    run(make_cfg(inp, tmp_path / "new", seq_len=64), resume=True, overwrite=True, log=logs.append)
    assert any(x.startswith("resume: nothing done yet in ") for x in logs) and not any("--overwrite:" in x for x in logs)


def test_resume_overwrite_continues_a_folder_of_this_config(tmp_path):
    """review21: README documents ``--resume --overwrite`` as "a folder of the same config
    continues, another config's units are set aside and every unit written again", but
    ``rmlprep.run(resume=True, overwrite=True)`` (which the CLI calls) wrote every unit again
    over a folder of its own config. It now keeps them, saying so; ``overwrite`` alone still
    writes every unit again, and another config's folder is still replaced (the test above)."""
    inp = tmp_path / "a.jsonl"
    inp.write_bytes(b"".join(lines(120)))
    out = tmp_path / "o"
    n = run(make_cfg(inp, out), log=quiet)["units_processed"]
    assert n > 1
    logs: list[str] = []
    m = run(make_cfg(inp, out), resume=True, overwrite=True, log=logs.append)
    assert (m["units_processed"], m["units_skipped"]) == (0, n)
    assert (f"output: --resume with --overwrite: {out} holds no trained unit of another config or tokenizer: continued "
            "as --resume alone continues it, nothing set aside") in logs
    assert not any(x.startswith("output: --overwrite:") for x in logs), logs  # nothing set aside
    m = run(make_cfg(inp, out), overwrite=True, log=quiet)
    assert (m["units_processed"], m["units_skipped"]) == (n, 0)


def test_output_folder_inside_a_recursive_glob(tmp_path):
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "sub" / "a.jsonl").write_bytes(b"".join(lines(50)) + b'{"text": null}\n')
    out = data / "out"
    cfg = make_cfg(str(data / "**" / "*.jsonl"), out)
    m1 = run(cfg, log=quiet)
    assert list(out.glob("rejects/*.jsonl"))  # a .jsonl inside the glob's reach
    m2 = run(cfg, log=quiet)
    assert m2["totals"]["rows_read"] == m1["totals"]["rows_read"] == 51
    assert m2["units_skipped"] == len(m2["shards"]) == len(m1["shards"])


# -- one run per folder ---------------------------------------------------------------------------
def cli_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def write_toml(path: Path, inp: Path, out: Path, seq_len: int = 128) -> Path:
    path.write_text(f'[input]\npaths = ["{inp}"]\nunit_bytes = 20000\n[tokenizer]\npath = "{TINY}"\n'
                    f'[pack]\nseq_len = {seq_len}\n[output]\ndir = "{out}"\n'
                    '[run]\nworkers = 1\nprogress = "none"\nhistogram = false\n')
    return path


def test_second_run_into_a_held_folder_stops_with_the_holders_pid(tmp_path):
    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b"".join(lines(40)))
    out = tmp_path / "o"
    toml = write_toml(tmp_path / "c.toml", inp, out)
    holder = OutputFolder(out)
    with holder.lock():
        claim(holder)  # as a run does once it holds the folder (its lock file goes when it ends)
        planted = out / "train-00000.parquet.tmp-424242"  # a live run's temporary
        planted.write_bytes(b"half")
        r = subprocess.run([sys.executable, "-m", "rmlprep.cli", "run", str(toml)], env=cli_env(),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2, r.stderr
        assert r.stderr.count("\n") == 1 and f"in use by another rmlprep run (pid {os.getpid()} on " in r.stderr
        assert "Traceback" not in r.stderr
        assert planted.exists()  # not deleted under the live run
        with pytest.raises(OutputError, match=f"pid {os.getpid()}"):
            run(make_cfg(inp, out), log=quiet)
    m = run(make_cfg(inp, out), log=quiet)  # released: the next run takes it and cleans up
    assert not planted.exists()
    assert_consistent(out, m)


def test_two_runs_started_together_never_mix_configs(tmp_path):
    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b"".join(lines(400)))
    out = tmp_path / "o"
    a = subprocess.Popen([sys.executable, "-m", "rmlprep.cli", "run", str(write_toml(tmp_path / "a.toml", inp, out, 128))],
                         env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    b = subprocess.Popen([sys.executable, "-m", "rmlprep.cli", "run", str(write_toml(tmp_path / "b.toml", inp, out, 64))],
                         env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ea, eb = a.communicate(timeout=180)[1], b.communicate(timeout=180)[1]
    assert sorted([a.returncode, b.returncode]) == [0, 2], (ea, eb)
    loser = ea if a.returncode else eb
    assert "Traceback" not in loser and ("in use by another rmlprep run" in loser or "different config" in loser)
    manifest = json.loads((out / "manifest.json").read_text())
    hashes = {json.loads(p.read_text())["config_hash"] for p in out.glob("shard-*.done.json")}
    assert hashes == {manifest["config_hash"]}
    assert_consistent(out, manifest)


def test_a_folder_of_an_earlier_version_is_refused_not_resumed(tmp_path, capsys):
    """Earlier versions named the shards shard-NNNNN.parquet (their markers say so). Resuming
    such a folder would mix the two namings and datasets would read only the new files, so a
    rerun stops with exit 2 and one line naming the old file and --overwrite, and changes
    nothing; --overwrite rewrites it as a fresh run, with no old-named shard left."""
    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b"".join(lines(200)))
    out = tmp_path / "o"
    toml = write_toml(tmp_path / "c.toml", inp, out)
    assert cli.main(["run", str(toml)]) == 0
    for shard in sorted(out.glob("train-*.parquet")):  # the same run, as an earlier version left it
        old = shard.name.replace("train-", "shard-")
        shard.rename(out / old)
        marker = out / old.replace(".parquet", ".done.json")
        marker.write_text(json.dumps({**json.loads(marker.read_text()), "shard": old}))
    (out / "shard-00001.done.json").unlink()  # and it was killed before its last marker
    before = {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file() and p.name != ".rmlprep.lock"}
    n = sum(1 for p in before if p.name.endswith(".parquet"))
    capsys.readouterr()
    assert cli.main(["run", str(toml)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert [x for x in err if x.startswith("rmlprep: error")] == err[-1:] == [
        f"rmlprep: error: output.dir: {out} holds {n} shards named by an earlier rmlprep (e.g. shard-00000.parquet; "
        "shards are now train-00000.parquet, ..., the names datasets.load_dataset reads); pass --overwrite to rewrite "
        "them or choose another --output"], err
    assert {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file() and p.name != ".rmlprep.lock"} == before
    m = run(make_cfg(inp, out), overwrite=True, log=quiet)
    assert not list(out.glob("shard-*.parquet")) and folder(out) == fresh(inp, tmp_path, "fresh")
    assert_consistent(out, m)


# -- environment faults ---------------------------------------------------------------------------
def test_read_only_output_is_refused_before_parity(tmp_path, monkeypatch, capsys):
    """Simulated (root ignores chmod): the lock's probe cannot create a file → exit 2, one line,
    before the parity stage logs anything."""
    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b"".join(lines(40)))
    toml = write_toml(tmp_path / "c.toml", inp, tmp_path / "o")
    real_open = os.open

    def read_only(path, flags, *a, **k):
        if str(path).startswith(str(tmp_path / "o")) and flags & os.O_CREAT:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *a, **k)

    monkeypatch.setattr(output_mod.os, "open", read_only)
    assert cli.main(["run", str(toml)]) == 2
    err = capsys.readouterr().err
    assert "Read-only file system; the file system is read-only: choose another --output" in err
    assert "parity:" not in err and "Traceback" not in err
    assert not list((tmp_path / "o").glob("train-*")) + list((tmp_path / "o").glob("shard-*"))


@pytest.mark.parametrize("out_rel,message", [
    pytest.param("taken", "output.dir {out} is a file, not a folder; the output is a folder of shards: choose a new "
                          "folder (or one an earlier run wrote) with --output or output.dir", id="the-folder"),
    pytest.param("taken/sub/o", "output.dir {out} cannot be made: {taken} is a file, not a folder", id="a-parent"),
])
def test_output_that_is_a_file_says_so(tmp_path, capsys, out_rel, message):
    """--output naming an existing file (or a path under one): one line saying what is wrong and
    what to do, not the system's bare "File exists" / "Not a directory"."""
    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b"".join(lines(5)))
    taken = tmp_path / "taken"
    taken.write_text("my notes\n")
    out = tmp_path / out_rel
    assert cli.main(["run", str(write_toml(tmp_path / "c.toml", inp, tmp_path / "o")), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message.format(out=out, taken=taken) in err, err
    assert "File exists" not in err and "Not a directory" not in err
    assert taken.read_text() == "my notes\n"


def test_a_lone_tokenizer_json_has_no_eos_and_the_error_says_why(tmp_path, capsys):
    """A tokenizer.json names no bos/eos: Hugging Face keeps them in the tokenizer_config.json
    beside it (tokenizers' own Tokenizer has no eos either). Copied alone, pack.eos = true (the
    default) is refused before any work with that reason; with the config beside it, the run
    frames every document with its eos_token."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers

    ref = tokenizers.Tokenizer(models.BPE(vocab={"a": 0, "b": 1, "ab": 2, "</s>": 3}, merges=[("a", "b")]))
    ref.pre_tokenizer = pre_tokenizers.Metaspace()
    ref.add_special_tokens(["</s>"])
    d = tmp_path / "model"
    d.mkdir()
    ref.save(str(d / "tokenizer.json"))
    inp = tmp_path / "c.jsonl"
    inp.write_text('{"text": "ab"}\n')
    toml = tmp_path / "c.toml"
    toml.write_text(f'[input]\npaths = ["{inp}"]\n[tokenizer]\npath = "{d / "tokenizer.json"}"\n[pack]\nseq_len = 8\n'
                    f'[output]\ndir = "{tmp_path / "o"}"\n[parity]\nrequire = false\n'
                    '[run]\nworkers = 1\nprogress = "none"\nhistogram = false\n')
    assert cli.main(["run", str(toml)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rmlprep: error: pack.eos: the tokenizer has no eos id: ")
    assert f"{d / 'tokenizer.json'} names none, and no tokenizer_config.json" in err
    assert "copy the model's tokenizer_config.json there, or set pack.eos = false" in err
    assert not (tmp_path / "o").exists()
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "</s>"}))
    assert cli.main(["run", str(toml)]) == 0
    capsys.readouterr()
    docs = unpack(pq.read_table(tmp_path / "o" / "train-00000.parquet"))
    assert [x.tolist() for x in docs] == [ref.encode("ab").ids + [3]]


def half_then_fail(exc: OSError):
    """A Parquet writer that writes a row group to disk, then fails: half a shard on disk."""
    real = writers_mod.pq.ParquetWriter.write_table

    def write_table(self, table, row_group_size=None):
        real(self, table, row_group_size=row_group_size)
        raise exc

    return write_table


def test_simulated_disk_full_exit_2_and_nothing_looks_done(tmp_path, monkeypatch, capsys):
    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b"".join(lines(200)))
    out = tmp_path / "o"
    toml = write_toml(tmp_path / "c.toml", inp, out)
    monkeypatch.setattr(writers_mod.pq.ParquetWriter, "write_table",
                        half_then_fail(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))))
    assert cli.main(["run", str(toml)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len([x for x in err if x.startswith("rmlprep: error")]) == 1
    assert "No space left on device; the disk is full" in err[-1] and re.search(r"train-\d{5}\.parquet", err[-1])
    assert not list(out.glob("train-*")) + list(out.glob("shard-*")) and not list(out.rglob("*.tmp-*"))
    assert not (out / "manifest.json").exists()
    monkeypatch.undo()
    m = run(make_cfg(inp, out), log=quiet)  # space back: the rerun completes
    assert folder(out) == fresh(inp, tmp_path, "fresh")
    assert_consistent(out, m)


def _namespace_prefix() -> list[str] | None:
    """A command prefix that runs a shell in a private mount namespace, or None."""
    for prefix in (["unshare", "--user", "--map-root-user", "--mount"], ["unshare", "--mount"]):
        try:
            r = subprocess.run(prefix + ["sh", "-c", "mount -t tmpfs -o size=1m none /mnt 2>/dev/null || "
                                         "mount -t tmpfs -o size=1m none \"$TMPDIR\""],
                               capture_output=True, timeout=20, env={**os.environ, "TMPDIR": "/tmp"})
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0:
            return prefix
    return None


def test_real_full_disk_on_a_3mb_tmpfs(tmp_path):
    """A real ENOSPC: the output on a 3 MB tmpfs (in a private mount namespace), input ~4x that."""
    prefix = _namespace_prefix()
    if prefix is None:
        pytest.skip("cannot mount a tmpfs here (no unshare / mount namespaces for this user)")
    inp = tmp_path / "c.jsonl"
    body = lines(2000) if TEXT.exists() else lines(20000)
    inp.write_bytes(b"".join(body))
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    out = mnt / "o"
    toml = tmp_path / "c.toml"
    toml.write_text(f'[input]\npaths = ["{inp}"]\nunit_bytes = 200000\n[tokenizer]\npath = "{TINY}"\n'
                    f'[pack]\nseq_len = 256\n[output]\ndir = "{out}"\ncompression = "none"\n'
                    '[run]\nworkers = 2\nprogress = "none"\nhistogram = false\n')
    check = tmp_path / "check.py"
    check.write_text(
        "import json, sys, pathlib\nimport pyarrow.parquet as pq\nfrom rmlprep.shards import sha256_file\n"
        f"out = pathlib.Path({str(out)!r})\nres = {{'tmp': [str(p) for p in out.rglob('*.tmp-*')], 'bad': []}}\n"
        "for m in out.glob('shard-*.done.json'):\n"
        "    rec = json.loads(m.read_text()); s = out / rec['shard']\n"
        "    if not s.exists() or sha256_file(s) != rec['sha256']: res['bad'].append(m.name)\n"
        "    else: pq.read_table(s)\n"
        "res['markers'] = len(list(out.glob('shard-*.done.json')))\n"
        "res['shards'] = len(list(out.glob('train-*.parquet')))\n"
        "for s in out.glob('train-*.parquet'): pq.read_metadata(s)\n"
        "print(json.dumps(res))\n")
    script = (f"mount -t tmpfs -o size=3m none {mnt} && "
              f"{sys.executable} -m rmlprep.cli run {toml} 2>{tmp_path}/err; echo $? > {tmp_path}/rc; "
              f"{sys.executable} {check}")
    r = subprocess.run(prefix + ["sh", "-c", script], env=cli_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rc = int((tmp_path / "rc").read_text())
    err = (tmp_path / "err").read_text()
    assert rc == 2, err
    assert err.strip().splitlines()[-1].startswith("rmlprep: error: ") and "No space left on device" in err
    assert "Traceback" not in err
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["tmp"] == [] and res["bad"] == []  # no half shard, every marker vouches for a whole shard
    assert res["shards"] >= res["markers"]  # a shard without a marker is redone on resume


def test_real_read_only_output(tmp_path):
    """A real read-only folder: chmod 555 for a normal user; for root (which ignores modes) a
    read-only tmpfs in a private mount namespace. Exit 2, one line, before parity."""
    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b"".join(lines(40)))
    ro = tmp_path / "ro"
    ro.mkdir()
    toml = write_toml(tmp_path / "c.toml", inp, ro / "o")
    cmd = [sys.executable, "-m", "rmlprep.cli", "run", str(toml)]
    if os.geteuid() != 0:
        ro.chmod(0o555)
        try:
            r = subprocess.run(cmd, env=cli_env(), capture_output=True, text=True, timeout=120)
        finally:
            ro.chmod(0o755)
        rc, err = r.returncode, r.stderr
    else:
        prefix = _namespace_prefix()
        if prefix is None:
            pytest.skip("running as root and cannot mount a read-only tmpfs (no mount namespaces)")
        script = f"mount -t tmpfs -o ro,size=1m none {ro} && {' '.join(cmd)} 2>{tmp_path}/err; echo $? > {tmp_path}/rc"
        subprocess.run(prefix + ["sh", "-c", script], env=cli_env(), timeout=120, check=True)
        rc, err = int((tmp_path / "rc").read_text()), (tmp_path / "err").read_text()
    assert rc == 2, err
    assert err.count("\n") == 1 and ("Read-only file system" in err or "Permission denied" in err), err
    assert "parity:" not in err and "Traceback" not in err


# -- the commit order (fault injection) -----------------------------------------------------------
def test_a_stalled_writer_never_shows_a_shard_under_its_final_name(tmp_path, monkeypatch):
    """The writer is stopped at every row group of every shard and the folder is looked at: no
    shard is under its final name and no marker exists for it until the writer is done."""
    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b"".join(lines(200)))
    out = tmp_path / "o"
    real = writers_mod.pq.ParquetWriter.write_table
    seen: list[tuple[str, bool, bool, bool]] = []

    def stalling(self, table, row_group_size=None):
        unit = int(self.schema.metadata[b"rmlprep.unit"])
        name = f"train-{unit:05d}.parquet"
        seen.append((name, (out / name).exists(), (out / f"shard-{unit:05d}.done.json").exists(),
                     bool(list(out.glob(f"{name}.tmp-*")))))
        real(self, table, row_group_size=row_group_size)

    monkeypatch.setattr(writers_mod.pq.ParquetWriter, "write_table", stalling)
    m = run(make_cfg(inp, out, output={"row_group_rows": 4}), log=quiet)
    assert len({name for name, *_ in seen}) == len(m["shards"]) >= 3
    assert len(seen) > len(m["shards"])  # several row groups per shard, each stalled on
    assert all(not shard and not marker and tmp for _, shard, marker, tmp in seen), seen
    monkeypatch.undo()
    assert folder(out) == fresh(inp, tmp_path, "fresh", output={"row_group_rows": 4})


def test_a_worker_stopped_mid_write_leaves_no_temporary(tmp_path, monkeypatch):
    """2 workers: unit 0's writer stalls after its first row group (its temporary is on disk) and
    unit 1's raises a bug (not an rmlprep error) once it sees that temporary. The pool is
    terminated with unit 0's worker mid-write; the run raises the bug and leaves no ``*.tmp-*``
    (the temporaries used to be removed only after failed units, not on an exception)."""
    import time

    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b"".join(lines(200)))
    out = tmp_path / "o"
    real = writers_mod.pq.ParquetWriter.write_table

    def stalling(self, table, row_group_size=None):
        unit = int(self.schema.metadata[b"rmlprep.unit"])
        real(self, table, row_group_size=row_group_size)
        if unit == 0:
            time.sleep(120)  # stopped here by the pool's terminate
        elif unit == 1:
            deadline = time.monotonic() + 60
            while not list(out.glob("train-00000.parquet.tmp-*")) and time.monotonic() < deadline:
                time.sleep(0.01)
            raise RuntimeError("a bug in a stage")

    monkeypatch.setattr(writers_mod.pq.ParquetWriter, "write_table", stalling)
    t = time.monotonic()
    with pytest.raises(RuntimeError, match="a bug in a stage"):
        run(make_cfg(inp, out, workers=2, output={"row_group_rows": 4}), log=quiet)
    assert time.monotonic() - t < 60  # the stalled worker was stopped, not waited for
    assert not list(out.rglob("*.tmp-*"))
    assert not list(out.glob("shard-00000.done.json"))


def test_rows_read_are_counted_by_the_reader_and_a_lost_row_stops_the_unit(tmp_path, monkeypatch, capsys):
    """``rows_read`` is the readers' count (it was documents + rejects, which cannot disagree with
    itself). 200 documents, a blank line and two bad rows: 202 rows read = 200 documents + 2
    rejects. Then a validate stage that drops the first row of every batch without a reject:
    the unit is refused before its shard is committed (exit 2, one line), no marker."""
    from rmlprep.pipeline import stages, unit as unit_mod

    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b"".join(lines(100)) + b"\n" + b'{"text": null}\n{broken\n' + b"".join(lines(100, 100)))
    m = run(make_cfg(inp, tmp_path / "ok"), log=quiet)
    assert (m["totals"]["rows_read"], m["totals"]["documents"], m["totals"]["rejects"]) == (202, 200, 2)
    marker = json.loads(next((tmp_path / "ok").glob("shard-*.done.json")).read_text())
    assert marker["rows_read"] == marker["documents"] + marker["rejects"]

    def lossy(batches, cfg, tally):
        for rows in stages.validate_texts(batches, cfg, tally):
            yield stages.Rows(rows.values[1:], rows.rows[1:])

    _, tokenize, pack = unit_mod._STAGES["pretrain"]
    monkeypatch.setitem(unit_mod._STAGES, "pretrain", (lossy, tokenize, pack))
    out = tmp_path / "lossy"
    toml = tmp_path / "c.toml"
    toml.write_text(f'[input]\npaths = ["{inp}"]\nunit_bytes = 20000\nbatch_rows = 64\n[tokenizer]\npath = "{TINY}"\n'
                    f'[pack]\nseq_len = 128\n[output]\ndir = "{out}"\n[run]\nworkers = 1\nprogress = "none"\n'
                    'histogram = false\n')
    assert cli.main(["run", str(toml)]) == 2
    err = capsys.readouterr().err
    assert "rows were lost between the stages" in err and "Traceback" not in err
    assert not list(out.glob("shard-*.done.json")) and not list(out.glob("train-*.parquet"))
    assert not list(out.rglob("*.tmp-*"))


def test_a_failed_rename_leaves_no_done_marker(tmp_path, monkeypatch):
    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b"".join(lines(200)))
    out = tmp_path / "o"
    real = output_mod.os.replace

    def failing(src, dst):
        if str(dst).endswith("train-00001.parquet"):
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(dst))
        return real(src, dst)

    monkeypatch.setattr(output_mod.os, "replace", failing)
    with pytest.raises(OutputError, match=r"train-00001.parquet: Input/output error"):
        run(make_cfg(inp, out), log=quiet)
    assert not (out / "shard-00001.done.json").exists() and not (out / "train-00001.parquet").exists()
    assert not list(out.rglob("*.tmp-*"))
    monkeypatch.undo()
    m = run(make_cfg(inp, out), resume=True, log=quiet)
    assert folder(out) == fresh(inp, tmp_path, "fresh")
    assert_consistent(out, m)


# -- every output loads ---------------------------------------------------------------------------
def test_a_unit_of_only_rejected_rows_loads_everywhere(tmp_path):
    """b.jsonl has only blank and null rows: its shard has no row group, and datasets,
    pyarrow.dataset and pandas all read the whole output (a 0-row row group breaks datasets)."""
    datasets = pytest.importorskip("datasets")
    pd = pytest.importorskip("pandas")
    import pyarrow.dataset as ds

    (tmp_path / "a.jsonl").write_bytes(b"".join(lines(30)))
    (tmp_path / "b.jsonl").write_bytes(b'{"text": null}\n\n{"text": 5}\n')
    out = tmp_path / "o"
    m = run(make_cfg([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], out, input={"unit_bytes": 10**6}), log=quiet)
    shards = sorted(str(p) for p in out.glob("train-*.parquet"))
    assert len(shards) == 2 and pq.ParquetFile(shards[1]).metadata.num_row_groups == 0
    rows = m["totals"]["rows"]
    cache = tmp_path / "hf-cache"
    assert len(datasets.load_dataset("parquet", data_files=shards, split="train", cache_dir=str(cache))) == rows
    assert ds.dataset(shards).to_table().num_rows == rows
    assert sum(len(pd.read_parquet(s)) for s in shards) == rows
    empty = ds.dataset(shards[1:]).to_table()  # alone (datasets refuses any empty split, by design)
    assert empty.num_rows == 0 and "input_ids" in empty.column_names and len(pd.read_parquet(shards[1])) == 0
    assert m["shards"][1]["rows"] == 0 and m["shards"][1]["rejects"] == 2


# -- lone surrogates ------------------------------------------------------------------------------
@pytest.mark.parametrize("workers", [1, 2])
def test_lone_surrogates_are_replaced_and_counted(tmp_path, workers):
    """JSON-escaped lone surrogates (``\\ud800`` alone) are kept as U+FFFD and counted; a pair
    escaped as two halves is one character, as json decodes it."""
    rows = [r'{"text": "lone \ud800 surrogate"}', r'{"text": "low \udfff end\ud83d"}', r'{"text": "pair \ud83d\ude00 ok"}',
            '{"text": "plain"}'] * 40
    inp = tmp_path / "s.jsonl"
    inp.write_text("\n".join(rows) + "\n")
    out = tmp_path / "o"
    m = run(make_cfg(inp, out, workers=workers, input={"unit_bytes": 1000}), log=quiet)
    assert m["totals"]["documents"] == 160 and m["totals"]["rejects"] == 0
    assert m["totals"]["lone_surrogate_rows"] == 80
    tok = open_tokenizer(str(TINY))[0]
    want = [tok.encode(t, parse_special=False) + [tok.eos_id]
            for t in ["lone \ufffd surrogate", "low \ufffd end\ufffd", "pair \U0001F600 ok", "plain"] * 40]
    got = []
    for p in sorted(out.glob("train-*.parquet")):
        docs = unpack(pq.read_table(p))
        got.extend(docs[i].tolist() for i in range(len(docs)))
    assert got == want


def test_lone_surrogates_in_conversations(tmp_path):
    rows = [json.dumps({"messages": [{"role": "user", "content": "hi \ud800"},
                                     {"role": "assistant", "content": "ok"}]}),
            json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]})]
    inp = tmp_path / "c.jsonl"
    inp.write_text("\n".join(rows) + "\n")
    m = run(make_cfg(inp, tmp_path / "o", pipeline="sft", chat={"format": "chatml"}, input={"column": "messages"},
                     pack={"overflow": "truncate"}, parity={"chat": False}), log=quiet)
    assert m["totals"]["documents"] == 2 and m["totals"]["lone_surrogate_rows"] == 1


def test_rejected_values_with_surrogates_stay_valid_json(tmp_path):
    inp = tmp_path / "c.jsonl"
    inp.write_text('{"text": ["\\ud800 in a list"]}\n{"text": "fine"}\n')
    out = tmp_path / "o"
    m = run(make_cfg(inp, out), log=quiet)
    assert m["totals"]["rejects"] == 1
    rec = json.loads((out / "rejects" / "rejects-00000.jsonl").read_bytes().decode("utf-8"))
    assert "list" in rec["reason"]
    np.testing.assert_equal(m["totals"]["documents"], 1)


# -- [pack] against the tokenizer, up front ---------------------------------------------------------
@pytest.mark.parametrize("field,pack,pipeline,message", [
    pytest.param("bos_id", "bos = true", "pretrain", "pack.bos: the tokenizer has no bos id", id="bos"),
    pytest.param("eos_id", "eos = true", "pretrain", "pack.eos: the tokenizer has no eos id", id="eos"),
    pytest.param("eos_id", "pad = true\noverflow = \"truncate\"", "sft",
                 "pack.pad: the tokenizer has neither a pad nor an eos id", id="pad"),
])
def test_pack_ids_the_tokenizer_lacks_are_refused_before_any_work(tmp_path, field, pack, pipeline, message):
    """A tokenizer without the id [pack] asks for: exit 2 and one line, before the plan (the
    input glob matches nothing, which the plan would report), parity and the output folder."""
    spec = open_tokenizer(str(TINY))[0].spec
    d = spec.to_dict()
    d[field] = None
    d["add_bos"] = d["add_eos"] = False  # (a spec that adds an id it lacks is refused when loaded)
    tok = tmp_path / "t.spec.json"
    tok.write_text(json.dumps(d))
    out = tmp_path / "o"
    toml = tmp_path / "c.toml"
    chat = '[chat]\nformat = "chatml"\n' if pipeline == "sft" else ""
    toml.write_text(f'pipeline = "{pipeline}"\n[input]\npaths = ["{tmp_path}/nothing-*.jsonl"]\n'
                    f'[tokenizer]\npath = "{tok}"\n{chat}[pack]\nseq_len = 64\n{pack}\n[output]\ndir = "{out}"\n')
    r = subprocess.run([sys.executable, "-m", "rmlprep.cli", "run", str(toml)], env=cli_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and message in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()


@pytest.mark.parametrize("flag,adds,message", [
    pytest.param("bos", "add_bos", "pack.bos: the tokenizer already adds its BOS (0)", id="bos"),
    pytest.param("eos", "add_eos", "pack.eos: the tokenizer already adds its EOS (1)", id="eos"),
])
def test_pack_framing_twice_is_refused_before_any_work(tmp_path, flag, adds, message):
    """pack.bos with tokenizer.add_special_tokens and a tokenizer that adds BOS itself (the tiny
    fixture's spec: add_bos, bos_id 0) would start every document with [0, 0, ...]: exit 2 and
    one line naming the flag to drop, before the plan and the output folder. With
    add_special_tokens = false the same [pack] is accepted (the bos comes from [pack] once)."""
    spec = open_tokenizer(str(TINY))[0].spec
    d = spec.to_dict()
    d["add_bos"] = d["add_eos"] = False
    d[adds] = True
    tok = tmp_path / "t.spec.json"
    tok.write_text(json.dumps(d))
    out = tmp_path / "o"
    toml = tmp_path / "c.toml"

    def write(add_special: str) -> None:
        toml.write_text(f'pipeline = "pretrain"\n[input]\npaths = ["{tmp_path}/nothing-*.jsonl"]\n'
                        f'[tokenizer]\npath = "{tok}"\nadd_special_tokens = {add_special}\n'
                        f'[pack]\nseq_len = 64\n{flag} = true\n[output]\ndir = "{out}"\n')

    write("true")
    r = subprocess.run([sys.executable, "-m", "rmlprep.cli", "run", str(toml)], env=cli_env(), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and message in r.stderr and f"set pack.{flag} = false" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not out.exists()
    write("false")
    r = subprocess.run([sys.executable, "-m", "rmlprep.cli", "run", str(toml)], env=cli_env(), capture_output=True,
                       text=True, timeout=120)
    assert "pack." not in r.stderr, r.stderr  # past the framing check (the empty glob is what stops it)


def test_pack_bos_once_with_add_special_tokens_in_process(tmp_path):
    """The same check in the library: framing() refuses pack.bos + add_special_tokens with a
    tokenizer that adds BOS, and gives bos 0 to the packer when add_special_tokens is off."""
    from rmlprep.errors import ConfigError
    from rmlprep.pipeline.pack import framing

    tok = open_tokenizer(str(TINY))[0]
    assert tok.spec.add_bos and tok.bos_id == 0
    cfg = make_cfg(tmp_path / "in.jsonl", tmp_path / "o", pack={"seq_len": 64, "bos": True},
                   tokenizer={"path": str(TINY), "add_special_tokens": True})
    with pytest.raises(ConfigError, match=r"^pack\.bos: the tokenizer already adds its BOS \(0\)"):
        framing(cfg, tok)
    cfg = make_cfg(tmp_path / "in.jsonl", tmp_path / "o", pack={"seq_len": 64, "bos": True},
                   tokenizer={"path": str(TINY), "add_special_tokens": False})
    assert framing(cfg, tok).bos == 0


def test_add_special_tokens_that_adds_nothing_is_refused(tmp_path):
    """``tokenizer.add_special_tokens = true`` with a tokenizer that adds no bos/eos changed
    nothing without a word: a Llama 2 ``tokenizer.model`` adds no BOS (sentencepiece's
    ``encode``: add_bos off unless asked) though the config comment promised "the spec's
    bos/eos" (a fresh-user trial found the same in ``rmlprep encode``). It is refused before any
    work, naming pack.bos, as ``pack.pad`` without effect is; with a tokenizer that adds BOS it
    is taken. The .model's ids with add_special_tokens are sentencepiece's default ones."""
    from rmlprep.errors import ConfigError
    from rmlprep.pipeline.pack import framing
    from rmlprep.tokenizer import Tokenizer

    tok = open_tokenizer(str(TINY))[0]
    cfg = make_cfg(tmp_path / "in.jsonl", tmp_path / "o", pack={"seq_len": 64, "bos": False},
                   tokenizer={"path": str(TINY), "add_special_tokens": True})
    assert framing(cfg, tok).bos is None  # TINY adds its BOS itself
    quiet = Tokenizer.create(tok.spec.replace(add_bos=False))
    with pytest.raises(ConfigError, match=r"^tokenizer\.add_special_tokens: this tokenizer adds no bos/eos .*pack\.bos"):
        framing(cfg, quiet)
    model = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS") or Path.home() / ".cache" / "rmlprep-real-tokenizers") \
        / "llama2" / "tokenizer.model"
    if model.is_file():
        spm = pytest.importorskip("sentencepiece")
        inp = tmp_path / "in.jsonl"
        inp.write_text(json.dumps({"text": "Hello world"}) + "\n")
        toml = tmp_path / "c.toml"
        toml.write_text(f'[input]\npaths = ["{inp}"]\n[tokenizer]\npath = "{model}"\nadd_special_tokens = true\n'
                        f'[pack]\nseq_len = 64\n[output]\ndir = "{tmp_path / "out"}"\n')
        r = subprocess.run([sys.executable, "-m", "rmlprep.cli", "run", str(toml)], env=cli_env(), capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 2 and "tokenizer.add_special_tokens: this tokenizer adds no bos/eos" in r.stderr
        assert r.stderr.count("\n") == 1 and not (tmp_path / "out" / "train-00000.parquet").exists()
        sp = spm.SentencePieceProcessor(model_file=str(model))
        assert sp.encode("Hello world") == Tokenizer.create(open_tokenizer(str(model))[0].spec).encode(
            "Hello world", add_special_tokens=True)


# -- pack.overflow = "drop": a dropped document is a reject, written aside ------------------------------
def _digits(n: int) -> str:
    """n digits. bl_gpt2_digits splits digits one by one (its fixture case "0123456789" is
    ids 18..27, from tokenizers), so the text is exactly n tokens, n + 1 with its eos."""
    return ("0123456789" * (n // 10 + 1))[:n]


def _drop_corpus(path: Path, repeats: int = 6) -> tuple[list[int], list[int]]:
    """Rows of short texts, bad rows and digit runs around seq_len 64 (with eos): 63 digits
    frame to 64 tokens and are kept whole, 64 digits frame to 65 and are dropped. Returns (the
    rows dropped, the rows rejected before packing)."""
    block = [json.dumps({"text": "short one"}), json.dumps({"text": _digits(64)}), '{"text": null}',
             json.dumps({"text": _digits(63)}), "{broken", json.dumps({"text": _digits(200)}),
             json.dumps({"text": "two words"})]
    path.write_text("".join(x + "\n" for x in block * repeats))
    n = len(block)
    return ([i * n + k for i in range(repeats) for k in (1, 5)], [i * n + k for i in range(repeats) for k in (2, 4)])


def test_overflow_drop_writes_each_dropped_document_to_rejects(tmp_path):
    tok = open_tokenizer(str(TINY))[0]
    assert len(tok.encode(_digits(64))) == 64  # the worked example of _digits
    inp = tmp_path / "in.jsonl"
    dropped, bad = _drop_corpus(inp)
    out = tmp_path / "o"
    m = run(make_cfg(inp, out, seq_len=64, pack={"overflow": "drop"}, input={"batch_rows": 3}), log=quiet)
    t = m["totals"]
    assert t["rows_read"] == 42 and t["dropped_documents"] == len(dropped) == 12
    assert t["rejects"] == len(dropped) + len(bad) and t["documents"] == 42 - t["rejects"]
    kept = len(tok.encode("short one")) + 63 + len(tok.encode("two words"))
    assert t["dropped_tokens"] == 6 * (64 + 200) and t["tokens"] == 6 * kept
    recs = [json.loads(x) for x in (out / "rejects" / "rejects-00000.jsonl").read_text().splitlines()]
    assert [r["row"] for r in recs] == sorted(dropped + bad)  # source-row order, both kinds merged
    by_row = {r["row"]: r for r in recs}
    assert by_row[1]["reason"] == ('document of 65 tokens with its eos is longer than pack.seq_len = 64 '
                                   '(pack.overflow = "drop")')
    assert by_row[5]["reason"].startswith("document of 201 tokens with its eos")
    assert all(by_row[r]["source"] == str(inp) for r in dropped)
    # each record names its stage; a dropped document carries its text as read, as the earlier
    # stages' rejects carry theirs (a line that is not JSON, or a null, has no value)
    assert [(by_row[r]["stage"], by_row[r].get("value")) for r in (1, 2, 4, 5)] == [
        ("pack", _digits(64)), ("validate", None), ("read", None), ("pack", _digits(200))]
    assert all(by_row[r]["stage"] == "pack" and by_row[r]["value"] in (_digits(64), _digits(200)) for r in dropped)
    docs = [d.tolist() for p in sorted(out.glob("train-*.parquet")) for d in unpack(pq.read_table(p))]
    assert len(docs) == t["documents"] and max(map(len, docs)) == 64  # the 63 digits + eos, whole
    assert "written to rejects/" in cli_summary(out)


def test_example_index_joins_to_input_rows_as_the_readme_says(tmp_path):
    """The README's recipe: document k of shard N is the k-th row of unit N's input from the
    manifest's ``shards[N].first_row`` on (blank lines are not rows), once the rows its rejects
    file names with a stage before ``pack`` are left out; the pack stage's rejects leave their
    number unused. Checked on every piece of every shard of a run of several units, with
    blank lines, rows rejected by the reader and by validation, and dropped documents."""
    tok = open_tokenizer(str(TINY))[0]
    inp = tmp_path / "in.jsonl"
    _drop_corpus(inp, repeats=12)
    lines = inp.read_text().splitlines()
    for i in range(3, len(lines), 9):
        lines[i] += "\n"  # a blank line after some rows: it is a line (rows count it), not a row
    inp.write_text("".join(x + "\n" for x in lines))
    lines = inp.read_text().split("\n")[:-1]
    out = tmp_path / "o"
    m = run(make_cfg(inp, out, seq_len=64, pack={"overflow": "drop"}, input={"unit_bytes": 1500, "batch_rows": 4}),
            log=quiet)
    assert len(m["shards"]) > 2 and m["totals"]["dropped_documents"] > 0
    starts = [s["first_row"] for s in m["shards"]] + [len(lines)]
    assert starts[0] == 0 and starts == sorted(starts)
    checked = gaps = 0
    for n, shard in enumerate(m["shards"]):
        recs = [json.loads(x) for x in (out / "rejects" / f"rejects-{n:05d}.jsonl").read_text().splitlines()]
        before_pack = {r["row"] for r in recs if r["stage"] != "pack"}
        docs = [r for r in range(starts[n], starts[n + 1]) if lines[r].strip() and r not in before_pack]
        pieces: dict[int, list[int]] = {}
        for row in pq.read_table(out / shard["shard"]).to_pylist():
            pos = 0
            for k, length in zip(row["example_index"], row["seq_lengths"]):
                pieces.setdefault(k, []).extend(row["input_ids"][pos:pos + length])
                pos += length
        for k, ids in pieces.items():
            assert tok.decode(ids[:-1]) == json.loads(lines[docs[k]])["text"]  # less its eos
            checked += 1
        dropped = {r["row"] for r in recs if r["stage"] == "pack"}
        assert {docs[k] for k in range(len(docs)) if k not in pieces} == dropped  # the gaps
        gaps += len(dropped)
    assert checked == m["totals"]["documents"] and gaps == m["totals"]["dropped_documents"]


def cli_summary(out: Path) -> str:
    from rmlprep.pipeline.reports import summary_table

    return summary_table(json.loads((out / "manifest.json").read_text()), json.loads((out / "stats.json").read_text()))


def test_overflow_drop_rejects_same_bytes_for_workers_chunks_and_resume(tmp_path, monkeypatch):
    inp = tmp_path / "in.jsonl"
    _drop_corpus(inp, repeats=60)
    kw = dict(seq_len=64, pack={"overflow": "drop"}, input={"unit_bytes": 4000, "batch_rows": 5})
    one = fresh(inp, tmp_path, "w1", **kw)
    assert len([k for k in one if k.startswith("rejects/")]) > 2
    assert fresh(inp, tmp_path, "w2", workers=2, **kw) == one
    from rmlprep.pipeline import pack as pack_mod

    monkeypatch.setattr(pack_mod, "CHUNK_TOKENS", 50)  # many packing chunks per unit, in process
    assert fresh(inp, tmp_path, "chunks", **kw) == one
    monkeypatch.undo()
    # resume: a unit redone beside units kept gives the same bytes
    out = tmp_path / "w1"
    (out / "shard-00001.done.json").unlink()
    m = run(make_cfg(inp, out, **kw), log=quiet)
    assert m["units_processed"] == 1 and folder(out) == one
    # a marker of an earlier version (marker version 0: dropped documents counted, not in rejects/) is redone
    marker = out / "shard-00002.done.json"
    old = json.loads(marker.read_text())
    del old["marker_version"]
    marker.write_text(json.dumps(old))
    m = run(make_cfg(inp, out, **kw), log=quiet)
    assert m["units_processed"] == 1 and folder(out) == one


def test_overflow_drop_sft_conversations_are_rejects(tmp_path):
    talk = lambda n: json.dumps({"messages": [{"role": "user", "content": _digits(n)},  # noqa: E731
                                              {"role": "assistant", "content": "ok"}]})
    rows = [talk(5), talk(300), '{"messages": null}', talk(10), talk(400), talk(3), talk(2)]
    inp = tmp_path / "c.jsonl"
    inp.write_text("".join(r + "\n" for r in rows))
    out = tmp_path / "o"
    m = run(make_cfg(inp, out, pipeline="sft", seq_len=64, chat={"format": "chatml"}, input={"unit_rows": 2},
                     pack={"overflow": "drop"}, parity={"chat": False}), log=quiet)
    t = m["totals"]
    assert t["rows_read"] == 7 and t["dropped_documents"] == 2 and t["rejects"] == 3 and t["documents"] == 4
    recs = [json.loads(x) for x in (out / "rejects" / "rejects-00000.jsonl").read_text().splitlines()]
    assert [r["row"] for r in recs] == [1, 2, 4]
    assert [r["stage"] for r in recs] == ["pack", "validate", "pack"]
    assert [r.get("value") for r in recs] == [json.loads(rows[1])["messages"], None, json.loads(rows[4])["messages"]]
    assert re.fullmatch(r'document of \d+ tokens is longer than pack\.seq_len = 64 \(pack\.overflow = "drop"\)',
                        recs[0]["reason"])
    assert int(recs[0]["reason"].split()[2]) > 300  # the 300 digits, one token each, and the template


# -- plan-time input checks --------------------------------------------------------------------
def _files_of_a_glob(tmp_path: Path, kind: str, bad: str) -> Path:
    """Three files of one glob, the middle one bad: ``bad`` "missing" (its text column is named
    ``body``) or "twice" (two columns named ``text``). Returns the folder."""
    import pyarrow as pa

    d = tmp_path / "in"
    d.mkdir()
    for i, name in enumerate(["a", "b", "c"]):
        texts = pa.array([f"Document {name}{j}: " + "word " * j for j in range(30)])
        names = ["text"]
        if i == 1:
            names = ["body"] if bad == "missing" else ["text", "text"]
        t = pa.Table.from_arrays([texts] * len(names), names=names)
        f = d / f"{name}.{kind}"
        if kind == "arrow":
            with pa.OSFile(str(f), "wb") as out, pa.ipc.new_stream(out, t.schema) as w:
                w.write_table(t)
        elif kind == "parquet":
            pq.write_table(t, f)
        else:
            header = ",".join(names)
            f.write_text(header + "\n" + "".join(f'"{v}"' + f',"{v}"' * (len(names) - 1) + "\n"
                                                 for v in texts.to_pylist()))
    return d


def test_unpack_refuses_the_sft_shards_of_two_runs_together(tmp_path):
    """Every run numbers its shards from unit 0, and unpack keys documents by (unit,
    example_index): unit 0 of two sft runs, given together, gave one run's count of documents,
    each two conversations joined, without a word (the pretrain checks, example_index going
    down or a short row inside a shard, never fire on sft rows). Shards whose rmlprep.config_hash
    metadata differ are refused, naming both; one run's shards together still unpack. Not
    caught: two runs of one config (the same hash), or tables whose metadata is gone."""
    from rmlprep.errors import PackingError

    tables = []
    for name, start in (("a", 0), ("b", 20)):
        (tmp_path / f"{name}.jsonl").write_bytes(b"".join(chat_lines(lines(20, start=start))))
        run(make_cfg(tmp_path / f"{name}.jsonl", tmp_path / name, pipeline="sft", input={"column": "messages"},
                     chat={"format": "chatml"}, pack={"overflow": "truncate"}), log=quiet)
        tables.append(pq.read_table(tmp_path / name / "train-00000.parquet"))
    with pytest.raises(PackingError, match=r"unpack: the tables are shards of 2 runs \(rmlprep\.config_hash "):
        unpack(tables)
    assert len(unpack([tables[0], tables[0].slice(0, 0)]).index) == len(unpack(tables[0]).index) > 0


def test_an_empty_csv_field_is_a_null_reject_as_datasets_reads_it(tmp_path):
    """An empty CSV field (``2,`` or ``3,""``) was an empty document, eos only, in the shards;
    ``datasets.load_dataset("csv")`` (pandas) reads both as None, and the run rejects a JSONL
    null (kind ``null``). Worked example, records 0-based: 0 ``1,hello``, 1 ``2,`` (empty),
    2 ``3,""`` (empty, quoted), 3 ``4," "`` (a space: text), 4 ``5,world``: records 1 and 2 are
    validate rejects of kind null, saying why; 3 documents, one eos each. When datasets is
    installed, it gives None for exactly those records."""
    p = tmp_path / "e.csv"
    p.write_text('id,text\n1,hello\n2,\n3,""\n4," "\n5,world\n', encoding="utf-8")
    m = run(make_cfg(p, tmp_path / "out", run={"max_reject_fraction": 1}), log=quiet)
    recs = [json.loads(x) for f in sorted((tmp_path / "out" / "rejects").glob("*")) for x in f.read_text().splitlines()]
    assert [(r["row"], r["stage"], r["kind"]) for r in recs] == [(1, "validate", "null"), (2, "validate", "null")]
    assert recs[0]["reason"] == "text is null (an empty CSV field, which datasets reads as None)"
    assert (m["totals"]["documents"], m["totals"]["rejects"], m["totals"]["empty_documents"]) == (3, 2, 0)
    try:
        import datasets
    except ImportError:
        return
    ds = datasets.load_dataset("csv", data_files=str(p), split="train", cache_dir=str(tmp_path / "hf"))
    assert [i for i, v in enumerate(ds["text"]) if v is None] == [1, 2]


def test_csv_words_pandas_reads_as_missing_stay_text(tmp_path):
    """Decision (2026-12-03): only an empty CSV field is a null. datasets' CSV reader (pandas'
    default na_values) also reads NA, null, None and nan as None, which would drop documents
    and answers that say "None" or "NA"; rmlprep keeps them as the text they are. Worked example:
    the five records NA, null, None, nan, hello are five documents, no reject. When datasets is
    installed it gives None for the first four, the divergence this test pins."""
    p = tmp_path / "w.csv"
    p.write_text("id,text\n1,NA\n2,null\n3,None\n4,nan\n5,hello\n", encoding="utf-8")
    m = run(make_cfg(p, tmp_path / "out"), log=quiet)
    assert (m["totals"]["documents"], m["totals"]["rejects"]) == (5, 0)
    try:
        import datasets
    except ImportError:
        return
    ds = datasets.load_dataset("csv", data_files=str(p), split="train", cache_dir=str(tmp_path / "hf"))
    assert ds["text"] == [None, None, None, None, "hello"]


@pytest.mark.parametrize("kind", ["parquet", "arrow", "csv"])
@pytest.mark.parametrize("bad", ["missing", "twice"])
def test_a_file_of_a_glob_without_the_column_stops_the_run_before_any_unit(tmp_path, capsys, kind, bad):
    """One file of a glob lacks input.column (or names it twice): its schema (a CSV file's
    header) is read while the run is planned, so the run stops before any unit starts, exit 2,
    one line naming that file, and no unit of the good files is written. Before, the other
    files' units ran first, then the run exited 2."""
    d = _files_of_a_glob(tmp_path, kind, bad)
    out = tmp_path / "o"
    toml = write_toml(tmp_path / "c.toml", d / f"*.{kind}", out)
    assert cli.main(["run", str(toml)]) == 2
    err = capsys.readouterr().err
    want = (f"input.column: {d / f'b.{kind}'} has no column 'text'; columns: ['body']" if bad == "missing"
            else f"{d / f'b.{kind}'}: 2 columns are named 'text'")
    assert err.count("\n") == 1 and want in err, err
    assert "unit" not in err and "Traceback" not in err
    assert not list(out.glob("train-*")) and not list(out.glob("shard-*"))


def test_documents_without_the_bos_the_tokenizer_adds_are_warned(tmp_path):
    """trial20: a pretrain run's defaults (``pack.bos = false``, ``tokenizer.add_special_tokens =
    false``) packed Gemma documents without the ``<bos>`` (id 2) its tokenizer.json's
    post-processor puts first (transformers' ``tokenizer(text)``, ``rmlprep.tokenize_text``), and
    the log named only the eos. Worked example on the tiny fixture, whose spec adds BOS id 0
    (``'!'``): the run logs one warning naming the token and ``pack.bos``; with ``pack.bos =
    true``, or a tokenizer that adds no BOS, there is none. The shards are unchanged by it."""
    from rmlprep.pipeline.framing import missing_bos

    inp = tmp_path / "in.jsonl"
    inp.write_text('{"text": "hello 123"}\n')
    tok = open_tokenizer(str(TINY))[0]
    assert tok.spec.add_bos and tok.bos_id == 0
    logs: list[str] = []
    run(make_cfg(inp, tmp_path / "a"), log=logs.append)
    warned = [x for x in logs if "documents get no bos" in x]
    assert len(warned) == 1 and warned[0].startswith("warning: pack:"), logs
    assert f"{tok.id_to_token(0)!r} (id 0)" in warned[0] and "pack.bos = true" in warned[0]
    logs.clear()
    run(make_cfg(inp, tmp_path / "b", pack={"seq_len": 128, "bos": True}), log=logs.append)
    assert not [x for x in logs if "no bos" in x], logs
    from rmlprep.tokenizer import Tokenizer
    quiet = Tokenizer.create(tok.spec.replace(add_bos=False))
    assert missing_bos(make_cfg(inp, tmp_path / "c"), quiet) == ""
    assert missing_bos(make_cfg(inp, tmp_path / "c", tokenizer={"path": str(TINY), "add_special_tokens": True}),
                       tok) == ""


def test_a_unit_read_under_older_read_rules_is_read_again(tmp_path, monkeypatch):
    """A done marker records its input format's read rules (``read_rules``). A Parquet text
    holding 16 NUL bytes (a hole of zeros, refused since 97152b0) was read as text by an older
    rmlprep, whose marker has no ``read_rules``; the input's hash is the same, so a resume used
    to keep the unit and exit 0 over a file this reader refuses. The unit is now read again, the
    log saying why, and the run fails naming the hole. A marker of the current rules on a good
    file is kept; one of other rules (0) is read again too."""
    import pyarrow as pa

    from rmlprep.readers import holes
    from rmlprep.readers.rules import READ_RULES

    texts = [json.loads(x)["text"] for x in lines(30)]
    bad = list(texts)
    bad[7] = bad[7][:5] + "\x00" * 16 + bad[7][5:]
    inp = tmp_path / "d.parquet"
    pq.write_table(pa.table({"text": bad}), inp)
    out = tmp_path / "o"
    cfg = make_cfg(inp, out)
    with pytest.raises(RmlprepError, match="a run of NUL bytes"):
        run(cfg, log=quiet)  # today's reader
    monkeypatch.setattr(holes, "check_no_hole", lambda *a, **k: None)  # an older reader's: no NUL check
    import rmlprep.readers.base as base_mod
    import rmlprep.readers.parquet_checks as checks_mod
    monkeypatch.setattr(base_mod, "check_no_hole", lambda *a, **k: None)
    monkeypatch.setattr(checks_mod, "check_no_hole", lambda *a, **k: None)
    run(cfg, log=quiet)
    monkeypatch.undo()
    marker = out / "shard-00000.done.json"
    mk = json.loads(marker.read_text())
    assert mk["read_rules"] == READ_RULES["parquet"] == 1
    del mk["read_rules"]  # as a marker written before the key
    marker.write_text(json.dumps(mk))
    logs: list[str] = []
    with pytest.raises(RmlprepError, match=rf"{inp}: row 7: 'text' holds a run of NUL bytes"):
        run(cfg, log=logs.append)
    assert any("done marker was not written under this rmlprep's read rules 1 of parquet files (read_rules "
               "missing)" in x for x in logs), logs

    pq.write_table(pa.table({"text": texts}), inp)  # a good file: its marker of today's rules is kept
    run(cfg, log=quiet)
    m = run(cfg, log=quiet)
    assert (m["units_processed"], m["units_skipped"]) == (0, 1)
    mk = json.loads(marker.read_text())
    mk["read_rules"] = 0
    marker.write_text(json.dumps(mk))
    logs.clear()
    m = run(cfg, log=logs.append)
    assert (m["units_processed"], m["units_skipped"]) == (1, 0)
    assert any("(read_rules 0)" in x for x in logs), logs


def test_a_stdlib_unit_done_before_the_read_rules_key_is_kept(tmp_path):
    """review21: the stdlib reader (the demo's input) did not change before ``read_rules`` existed
    (rules version 1, "no change"), yet its markers written before the key were read again on
    resume. Such a marker is now kept (RULES_BEFORE_KEY); one naming other rules (0) is still
    read again, the log saying why."""
    from rmlprep.readers.rules import READ_RULES, RULES_BEFORE_KEY

    assert READ_RULES["stdlib"] == RULES_BEFORE_KEY["stdlib"] == 1
    out = tmp_path / "o"
    cfg = make_cfg("<stdlib>", out, input={"format": "stdlib", "max_bytes": 30_000, "unit_bytes": 10_000})
    first = run(cfg, log=quiet)
    n = first["units_processed"]
    assert n >= 2
    for marker in out.glob("shard-*.done.json"):  # as markers written before the key
        mk = json.loads(marker.read_text())
        assert mk["read_rules"] == 1
        del mk["read_rules"]
        marker.write_text(json.dumps(mk))
    m = run(cfg, log=quiet)
    assert (m["units_processed"], m["units_skipped"]) == (0, n)
    marker = out / "shard-00000.done.json"
    mk = json.loads(marker.read_text())
    mk["read_rules"] = 0
    marker.write_text(json.dumps(mk))
    logs: list[str] = []
    m = run(cfg, log=logs.append)
    assert (m["units_processed"], m["units_skipped"]) == (1, n - 1)
    assert any("read rules 1 of stdlib files (read_rules 0)" in x for x in logs), logs


def test_a_written_pack_bos_false_is_not_warned_and_keeps_the_hash(tmp_path):
    """polish21: the no-bos warning (test_documents_without_the_bos_the_tokenizer_adds_are_warned)
    showed on every run of a Gemma or Mistral config, also one whose author wrote ``pack.bos =
    false`` on purpose. The config now records the keys the TOML wrote (``RunConfig.given``,
    kept by ``with_overrides``): written false, no warning;
    defaulted, the warning, which says how to silence it. ``given`` is not hashed, so a folder
    written under the defaulted key resumes under the written one with every unit done."""
    from rmlprep.config import load_config
    from rmlprep.pipeline.framing import missing_bos

    inp = tmp_path / "in.jsonl"
    inp.write_text('{"text": "hello 123"}\n')
    tok = open_tokenizer(str(TINY))[0]
    toml = (f'[input]\npaths = ["{inp}"]\n[tokenizer]\npath = "{TINY}"\n[pack]\nseq_len = 128\n{{}}'
            f'[output]\ndir = "{tmp_path / "o"}"\n[run]\nworkers = 1\nprogress = "none"\nhistogram = false\n')
    (tmp_path / "default.toml").write_text(toml.format(""))
    (tmp_path / "written.toml").write_text(toml.format("bos = false\n"))
    default, written = load_config(tmp_path / "default.toml"), load_config(tmp_path / "written.toml")
    assert "pack.bos" in written.given and "pack.bos" not in default.given and "pack.seq_len" in default.given
    assert "write pack.bos = false" in missing_bos(default, tok)
    assert missing_bos(written, tok) == "" and missing_bos(written.with_overrides(workers=2), tok) == ""
    assert written.config_hash == default.config_hash and written.to_dict() == default.to_dict()
    run(default, log=quiet)
    logs: list[str] = []
    run(written, resume=True, log=logs.append)
    assert any("1 of 1 units already done" in x for x in logs), logs
    assert not [x for x in logs if "no bos" in x], logs
