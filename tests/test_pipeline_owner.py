"""Whose output folder: rmlprep writes only into a new or empty folder, or one it wrote
(rmlprep.pipeline.owner); it never replaces or deletes a file it did not write."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from rmlprep import cli
from rmlprep.errors import OutputError
from rmlprep.pipeline import run
from rmlprep.pipeline.owner import OWNER_NAME, check_owner, rmlprep_name
from rmlprep.pipeline.output import LOCK_NAME, OutputFolder

from test_pipeline_trust import TINY, folder, lines, make_cfg, quiet, write_toml

pytestmark = pytest.mark.skipif(not TINY.exists(), reason=f"{TINY} is absent")


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` (hidden ones too), byte for byte."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def corpus(tmp_path: Path, n: int = 60) -> Path:
    inp = tmp_path / "c.jsonl"
    inp.write_bytes(b"".join(lines(n)))
    return inp


def foreign(out: Path) -> dict[str, bytes]:
    """The careless-user trial's folder: a user's README.md, stats.json and a stray shard."""
    out.mkdir()
    (out / "README.md").write_text("# My project\n")
    (out / "stats.json").write_text('{"mine": 1}\n')
    (out / "train-00007.parquet").write_bytes(b"not rmlprep's")
    return snapshot(out)


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_folder_rmlprep_did_not_write_is_refused_and_left_as_it_was(tmp_path, overwrite):
    """Before: the reports were replaced and train-00007.parquet removed as 'not in this plan'.
    Files under rmlprep's names are never replaced, --overwrite or not; nothing is created."""
    out = tmp_path / "o"
    before = foreign(out)
    with pytest.raises(OutputError, match=rf"output.dir: {out} was not written by rmlprep .*it holds README.md, "
                                          r"stats.json, train-00007.parquet, under names rmlprep writes; .*even "
                                          r"with --overwrite: choose an empty or new folder"):
        run(make_cfg(corpus(tmp_path), out), overwrite=overwrite, log=quiet)
    assert snapshot(out) == before  # no lock file, no marker, no shard


def test_the_cli_refusal_is_one_line_and_exit_2(tmp_path, capsys):
    out = tmp_path / "o"
    before = foreign(out)
    assert cli.main(["run", str(write_toml(tmp_path / "c.toml", corpus(tmp_path), out))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"rmlprep: error: output.dir: {out} was not written by rmlprep")
    assert "README.md" in err[-1] and "parity" not in " ".join(err)  # refused before the parity stage
    assert snapshot(out) == before


def test_unrelated_files_need_overwrite_and_are_kept(tmp_path):
    """A folder holding only names rmlprep never writes: refused without --overwrite; with it the
    run writes beside them, keeps them byte for byte, and the folder is rmlprep's from then on."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    (out / "src").mkdir()
    (out / "src" / "x.py").write_text("print(1)\n")
    inp = corpus(tmp_path)
    with pytest.raises(OutputError, match=r"it holds notes.txt, src; .*pass --overwrite to write the shards beside"):
        run(make_cfg(inp, out), log=quiet)
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "src"]
    m = run(make_cfg(inp, out), overwrite=True, log=quiet)
    assert m["totals"]["documents"] == 60 and (out / OWNER_NAME).exists()
    assert (out / "notes.txt").read_text() == "mine\n" and (out / "src" / "x.py").exists()
    run(make_cfg(inp, out, seq_len=64), overwrite=True, log=quiet)  # --overwrite of its own shards: still kept
    assert (out / "notes.txt").read_text() == "mine\n" and (out / "src" / "x.py").exists()
    logs: list[str] = []
    run(make_cfg(inp, out, seq_len=64), log=logs.append)  # claimed: a plain rerun resumes
    assert any("already done and verified" in x for x in logs)


def test_an_empty_existing_folder_is_used(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    assert run(make_cfg(corpus(tmp_path), out), log=quiet)["totals"]["documents"] == 60
    assert json.loads((out / OWNER_NAME).read_text())["written_by"] == "rmlprep"


def test_a_folder_holding_only_placeholders_is_empty_and_they_are_kept(tmp_path):
    """An ``out/`` kept in git by a ``.gitkeep`` (or left a ``.DS_Store`` by a file browser) was
    refused as foreign without --overwrite (a fresh-user trial); it is empty for the run, and the
    placeholders stay as they were. A real file beside them still makes the folder foreign."""
    out = tmp_path / "o"
    out.mkdir()
    (out / ".gitkeep").write_bytes(b"")
    (out / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    assert run(make_cfg(corpus(tmp_path), out), log=quiet)["totals"]["documents"] == 60
    assert (out / ".gitkeep").read_bytes() == b"" and (out / ".DS_Store").read_bytes() == b"\x00\x00\x00\x01Bud1"
    other = tmp_path / "p"
    other.mkdir()
    (other / ".gitkeep").write_bytes(b"")
    (other / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="notes.txt"):
        run(make_cfg(corpus(tmp_path), other), log=quiet)


def test_a_first_run_killed_early_resumes(tmp_path):
    """The marker is committed as soon as the run holds the folder, so a first run killed after
    its first unit (no manifest, no report: only the marker, the lock, a shard and a temporary)
    is resumed, not refused, and gives a fresh run's bytes."""
    inp = corpus(tmp_path, 300)
    ref = tmp_path / "ref"
    run(make_cfg(inp, ref), log=quiet)
    out = tmp_path / "o"
    m = run(make_cfg(inp, out), log=quiet)
    assert len(m["shards"]) >= 3
    for p in out.iterdir():  # as a SIGKILL after unit 0 leaves it
        if p.name not in (OWNER_NAME, LOCK_NAME, "train-00000.parquet", "shard-00000.done.json"):
            p.unlink()
    (out / "train-00001.parquet.tmp-4242").write_bytes(b"half")
    m = run(make_cfg(inp, out), resume=True, log=quiet)
    assert m["units_skipped"] == 1 and folder(out) == folder(ref)


@pytest.mark.parametrize("keep", [["shard-*.done.json", "train-*"], ["manifest.json", "train-*"], [LOCK_NAME]])
def test_a_folder_of_an_earlier_version_without_the_marker_is_rmlprep_s(tmp_path, keep):
    """Folders written before the marker existed are known by what earlier versions always wrote:
    their lock file, a manifest or a done marker; the rerun claims them."""
    inp = corpus(tmp_path)
    out = tmp_path / "o"
    run(make_cfg(inp, out), log=quiet)
    for p in out.iterdir():
        if not any(p.match(g) for g in keep):
            p.unlink() if p.is_file() else None
    if keep == [LOCK_NAME]:  # earlier versions left it after every run; this one removes it
        (out / LOCK_NAME).write_text("4242 elsewhere\n")
    assert not (out / OWNER_NAME).exists()
    assert run(make_cfg(inp, out), log=quiet)["totals"]["documents"] == 60
    assert (out / OWNER_NAME).exists()


def test_a_manifest_or_marker_of_another_shape_does_not_make_a_folder_rmlprep_s(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "manifest.json").write_text('{"files": ["a", "b"]}\n')  # some other tool's manifest
    (out / "shard-00000.done.json").write_text("done\n")
    with pytest.raises(OutputError, match="it holds manifest.json, shard-00000.done.json, under names rmlprep"):
        check_owner(OutputFolder(out), overwrite=True)


def test_rmlprep_names():
    assert all(rmlprep_name(n) for n in ("README.md", "stats.json", "manifest.json", "lengths.png", "rejects",
                                         "train-00007.parquet", "shard-00000.bin", "shard-00001.done.json",
                                         ".rmlprep.lock", OWNER_NAME, "stats.json.tmp-12"))
    assert not any(rmlprep_name(n) for n in ("notes.txt", "src", "readme.md", "data-00000.parquet", ".git"))


def test_a_folder_with_the_marker_is_not_listed(tmp_path, monkeypatch):
    """The marker is looked up first: on an object store, listing a large output folder takes a
    request per thousand objects, the marker one."""
    inp = corpus(tmp_path)
    out = tmp_path / "o"
    n = len(run(make_cfg(inp, out), log=quiet)["shards"])

    def no_listing(self):
        raise AssertionError("listed")

    monkeypatch.setattr(OutputFolder, "entries", no_listing)
    check_owner(OutputFolder(out), overwrite=False)
    assert run(make_cfg(inp, out), log=quiet)["units_skipped"] == n


def test_the_lock_file_is_removed_when_the_run_ends(tmp_path):
    """.rmlprep.lock stayed in every finished folder (a careless-user check): a run that ends,
    done or failed (every row a reject: exit 2), removes it; a second run while one holds the
    folder is still refused, and the one after it finds no lock file and runs."""
    inp = corpus(tmp_path)
    out = tmp_path / "o"
    run(make_cfg(inp, out), log=quiet)
    assert not (out / LOCK_NAME).exists() and (out / OWNER_NAME).exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"body": "no text field"}\n')
    assert cli.main(["run", str(write_toml(tmp_path / "b.toml", bad, tmp_path / "b"))]) == 2
    assert (tmp_path / "b" / OWNER_NAME).exists() and not (tmp_path / "b" / LOCK_NAME).exists()
    holder = OutputFolder(out)
    with holder.lock():
        assert (out / LOCK_NAME).exists()
        with pytest.raises(OutputError, match="in use by another rmlprep run"):
            run(make_cfg(inp, out), log=quiet)
    assert not (out / LOCK_NAME).exists()
    assert run(make_cfg(inp, out), log=quiet)["units_skipped"] == len(list(out.glob("shard-*.done.json")))


def test_a_lock_taken_on_a_removed_lock_file_is_taken_again(tmp_path, monkeypatch):
    """A run that opened .rmlprep.lock just before the run holding it removed it (as it ended)
    locks a file no longer at the path; it must drop that lock and take the file at the path,
    else a third run creating a new lock file would hold the folder beside it."""
    from rmlprep.pipeline import output as output_mod

    out = tmp_path / "o"
    out.mkdir()
    stale = output_mod.os.open(out / LOCK_NAME, output_mod.os.O_RDWR | output_mod.os.O_CREAT, 0o644)
    (out / LOCK_NAME).unlink()  # the ending run removed it after this one opened it
    real_open, calls = output_mod.os.open, []

    def first_open_is_the_stale_one(path, flags, *a, **k):
        if str(path).endswith(LOCK_NAME) and not calls:
            calls.append(path)
            return stale
        return real_open(path, flags, *a, **k)

    monkeypatch.setattr(output_mod.os, "open", first_open_is_the_stale_one)
    with OutputFolder(out).lock():
        assert calls and (out / LOCK_NAME).exists()  # it locked the file at the path
        with pytest.raises(OutputError, match="in use by another rmlprep run"):
            with OutputFolder(out).lock():  # a third run: refused
                pass


@pytest.mark.parametrize("code", [errno.ENOLCK, errno.EOPNOTSUPP], ids=["ENOLCK", "EOPNOTSUPP"])
def test_a_file_system_without_locks_is_one_line_naming_it(tmp_path, monkeypatch, code):
    """flock fails with ENOLCK or EOPNOTSUPP on file systems that take no locks (some NFS, SMB
    and FUSE mounts). The run said only ``rmlprep: error: No locks available`` (the bare
    strerror: no folder, no fix); now the line names the folder, the lock file and the way out,
    and the run exits 2 without a traceback, before any unit."""
    from rmlprep.pipeline import output as output_mod

    def no_locks(fd, op):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(output_mod.fcntl, "flock", no_locks)
    inp, out = corpus(tmp_path), tmp_path / "o"
    with pytest.raises(OutputError, match=rf"output.dir {out}: cannot lock \.rmlprep\.lock: {os.strerror(code)}; "
                                          r"the file system takes no file locks .*local disk, or an object store"):
        run(make_cfg(inp, out), log=quiet)
    assert not list(out.glob("train-*"))


def test_an_output_folder_inside_another_runs_is_refused(tmp_path):
    """A second run with ``output.dir = "out/sft"`` beside a first with ``"out"``: its shards were
    written inside the first run's folder, and ``datasets.load_dataset("parquet", data_dir="out")``
    read both runs' rows as one dataset (explore22: 2 rows, units [0, 0], of a 1-row folder).
    Refused before anything is written; so is ``--overwrite`` into a folder holding another
    run's output beside other files; a sibling folder is fine."""
    inp = corpus(tmp_path)
    run(make_cfg(inp, tmp_path / "out"), log=quiet)
    before = snapshot(tmp_path / "out")
    with pytest.raises(OutputError, match=rf"^output.dir: {tmp_path}/out/sft is inside {tmp_path}/out, the output "
                                          rf"folder of another rmlprep run \(it holds {OWNER_NAME}\): the two runs' "
                                          r"shards would be one tree"):
        run(make_cfg(inp, tmp_path / "out" / "sft"), log=quiet)
    assert snapshot(tmp_path / "out") == before
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "notes.txt").write_text("mine\n")
    (tmp_path / "out").rename(tmp_path / "proj" / "tok")
    with pytest.raises(OutputError, match=rf"^output.dir: {tmp_path}/proj holds tok/, the output folder of another "
                                          r"rmlprep run"):
        run(make_cfg(inp, tmp_path / "proj"), overwrite=True, log=quiet)
    assert run(make_cfg(inp, tmp_path / "sft"), log=quiet)["totals"]["documents"] == 60
