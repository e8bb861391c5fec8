"""Object stores: ``rmlprep run`` from and to ``s3://`` against a real S3 server on localhost.

The server is moto's (``moto[server]``, in the ``test`` extra), started in this process on a free
loopback port for the module; the AWS variables point boto3 and pyarrow at it. Every comparison
is byte for byte against a run on local disk: the shards and rejects of a local-input run are the
same whether they are written to disk or to S3; an S3-input run's files are the same on disk
and on S3 (its config hash differs from the local-input run's only because the input paths
differ, which the shards' tables show: same rows, same ids).
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from rmlprep import fs
from rmlprep.config import config_from_dict
from rmlprep.errors import OutputError
from rmlprep.pipeline import run
from rmlprep.pipeline.output import OutputFolder

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "fixtures" / "tokenizers" / "bl_gpt2_digits.json"
TEXT = ROOT.parent / "shared" / "corpora" / "text-multilingual.jsonl"
BUCKET = "rmlprep-test"

pytestmark = pytest.mark.skipif(not TINY.exists(), reason=f"{TINY} is absent")


def quiet(_msg: str) -> None:
    pass


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on 127.0.0.1 (a free port) for the module, with one bucket; yields its URL."""
    server_mod = pytest.importorskip("moto.server", reason="moto[server] is not installed (pip install -e '.[test]')")
    boto3 = pytest.importorskip("boto3", reason="boto3 is not installed (pip install -e '.[test]')")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log on stderr
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
                                           "AWS_ENDPOINT_URL", "AWS_SESSION_TOKEN", "AWS_PROFILE")}
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1",
                      AWS_ENDPOINT_URL=url)
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.pop("AWS_PROFILE", None)
    fs._FS_CACHE.clear()
    boto3.client("s3").create_bucket(Bucket=BUCKET)
    yield url
    server.stop()
    fs._FS_CACHE.clear()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def corpus(s3, tmp_path_factory) -> tuple[Path, str]:
    """300 real documents (cut to 3,000 characters) and two bad rows, on disk and on S3."""
    lines: list[bytes] = []
    if TEXT.exists():
        with open(TEXT, "rb") as f:
            for line in f:
                lines.append(json.dumps({"text": json.loads(line)["text"][:3000]}, ensure_ascii=False).encode())
                if len(lines) == 300:
                    break
    else:
        lines = [json.dumps({"text": f"Document {i}: " + "word " * (i % 97)}).encode() for i in range(300)]
    lines[10:10] = [b'{"text": null}']
    lines[150:150] = [b"{broken"]
    body = b"\n".join(lines) + b"\n"
    local = tmp_path_factory.mktemp("corpus") / "c.jsonl"
    local.write_bytes(body)
    import boto3

    boto3.client("s3").put_object(Bucket=BUCKET, Key="corpus/part-0.jsonl", Body=body)
    return local, f"s3://{BUCKET}/corpus/*.jsonl"


def make_cfg(inp, out, *, engine: str = "local", workers: int = 2):
    return config_from_dict({
        "input": {"paths": [str(inp)], "unit_bytes": 60_000, "batch_rows": 64},
        "tokenizer": {"path": str(TINY)},
        "pack": {"seq_len": 256},
        "output": {"dir": str(out)},
        "run": {"workers": workers, "progress": "none", "histogram": False, "engine": engine},
    })


def outputs(out) -> dict[str, bytes]:
    """Every shard and rejects file of an output folder (local or S3), byte for byte."""
    o = OutputFolder(out)
    return {n: o.read_bytes(n) for n in o.list("train-*.parquet") + o.list("rejects/*")}


def markers(out) -> dict[str, dict]:
    o = OutputFolder(out)
    res = {}
    for n in o.list("shard-*.done.json"):
        m = json.loads(o.read_bytes(n))
        m.pop("seconds")
        res[n] = m
    return res


def test_run_from_and_to_s3_gives_the_local_bytes(corpus, tmp_path):
    local_in, s3_in = corpus
    t0 = time.perf_counter()
    run(make_cfg(local_in, tmp_path / "l2l"), log=quiet)
    t1 = time.perf_counter()
    run(make_cfg(local_in, f"s3://{BUCKET}/runs/l2s"), log=quiet)
    t2 = time.perf_counter()
    ref = outputs(tmp_path / "l2l")
    assert len(ref) >= 10 and "rejects/rejects-00000.jsonl" in ref
    assert outputs(f"s3://{BUCKET}/runs/l2s") == ref  # S3 output: the same bytes
    assert markers(f"s3://{BUCKET}/runs/l2s") == markers(tmp_path / "l2l")
    run(make_cfg(s3_in, tmp_path / "s2l"), log=quiet)
    logs: list[str] = []
    t3 = time.perf_counter()
    m = run(make_cfg(s3_in, f"s3://{BUCKET}/runs/s2s"), log=logs.append)
    t4 = time.perf_counter()
    s2s = outputs(f"s3://{BUCKET}/runs/s2s")
    assert s2s == outputs(tmp_path / "s2l") and s2s.keys() == ref.keys()
    assert markers(f"s3://{BUCKET}/runs/s2s") == markers(tmp_path / "s2l")
    for name in ref:  # S3 input: the same rows; only the hashed input paths differ
        if name.endswith(".parquet"):
            a = pq.read_table(tmp_path / "l2l" / name)
            b = pq.read_table(fs.open_arrow(f"s3://{BUCKET}/runs/s2s/{name}"))
            assert a.equals(b.replace_schema_metadata(a.schema.metadata))
    assert m["totals"]["rejects"] == 2 and m["shards"][0]["source"].startswith(f"s3://{BUCKET}/corpus/part-0.jsonl")
    assert any(x.startswith(f"output       s3://{BUCKET}/runs/s2s") for x in logs[-1].splitlines())
    o = OutputFolder(f"s3://{BUCKET}/runs/s2s")
    assert not o.list("*.tmp-*") and not o.exists(".rmlprep.lock")  # no temporaries, lock released
    print(f"\ns3 timings: local->local {t1 - t0:.2f} s, local->s3 {t2 - t1:.2f} s, s3->s3 {t4 - t3:.2f} s")


def test_ray_engine_from_and_to_s3(corpus, tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'rmlprep[ray]')")
    local_in, s3_in = corpus
    run(make_cfg(s3_in, tmp_path / "s2l"), log=quiet)
    m = run(make_cfg(s3_in, f"s3://{BUCKET}/runs/ray", engine="ray"), log=quiet)
    assert m["engine"] == "ray"
    assert outputs(f"s3://{BUCKET}/runs/ray") == outputs(tmp_path / "s2l")
    assert markers(f"s3://{BUCKET}/runs/ray") == markers(tmp_path / "s2l")


def test_resume_on_s3(corpus, tmp_path):
    """A missing marker, a missing shard and a damaged shard are redone; the rest is skipped."""
    _, s3_in = corpus
    out = f"s3://{BUCKET}/runs/resume"
    run(make_cfg(s3_in, out), log=quiet)
    ref = outputs(out)
    o = OutputFolder(out)
    o.remove("shard-00001.done.json")
    o.remove("train-00003.parquet")
    o.commit("train-00005.parquet", lambda f: f.write(b"garbage"))
    o.commit("train-00002.parquet.tmp-host-999", lambda f: f.write(b"left by a killed run"))
    m = run(make_cfg(s3_in, out), resume=True, log=quiet)
    assert m["units_processed"] == 3 and m["units_skipped"] == len(m["shards"]) - 3
    assert outputs(out) == ref and not o.list("*.tmp-*")


def test_a_failed_rerun_puts_the_previous_folder_back_on_s3(corpus, tmp_path):
    """On a store the files a rerun replaces are set aside by server-side moves, and a rerun that
    fails (its gzip input replaced by a cut copy) moves them back: every object is as it was."""
    import gzip

    from rmlprep.errors import RmlprepError

    local_in, _ = corpus
    inp = tmp_path / "c.jsonl.gz"
    whole = gzip.compress(local_in.read_bytes())
    inp.write_bytes(whole)
    out = f"s3://{BUCKET}/runs/put-back"
    run(make_cfg(inp, out), log=quiet)
    o = OutputFolder(out)
    before = {n: o.read_bytes(n) for n in o.list("**/*")}
    assert "manifest.json" in before
    inp.write_bytes(whole[:-10])
    with pytest.raises(RmlprepError, match="c.jsonl.gz"):
        run(make_cfg(inp, out), log=quiet)
    assert {n: o.read_bytes(n) for n in o.list("**/*")} == before


def test_a_file_added_first_renumbers_the_done_units_on_s3(corpus, tmp_path):
    """Renumbering on a store reads each set-aside shard by ranges, one row group at a time (it
    read the object whole into memory), and the rejects line by line: the objects are the bytes
    a fresh local run writes, rejects with their new unit number included."""
    local_in, _ = corpus
    d = tmp_path / "in"
    d.mkdir()
    (d / "b.jsonl").write_bytes(local_in.read_bytes())
    out = f"s3://{BUCKET}/runs/renumber"
    first = run(make_cfg(d / "*.jsonl", out), log=quiet)
    (d / "a.jsonl").write_bytes(b"".join(local_in.read_bytes().splitlines(keepends=True)[:5]))
    logs: list[str] = []
    m = run(make_cfg(d / "*.jsonl", out), log=logs.append)
    n = len(first["shards"])
    assert m["units_processed"] == 1 and any(x.startswith(f"resume: {n} done units renumbered") for x in logs)
    run(make_cfg(d / "*.jsonl", tmp_path / "fresh"), log=quiet)
    got = outputs(out)
    assert got == outputs(tmp_path / "fresh") and "rejects/rejects-00001.jsonl" in got
    import boto3  # the set-aside folder is gone, its "folder" marker too (explorer5 X8: pyarrow kept it)
    keys = [o["Key"] for o in boto3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="runs/renumber/")["Contents"]]
    assert not [k for k in keys if ".rmlprep.previous" in k], keys


def test_kill_and_resume_on_s3(corpus, tmp_path):
    """SIGKILL mid-run (after two units), then a rerun: the same bytes as a clean run. The killed
    run's lock names a process of this host that is gone, so the rerun takes it over at once."""
    local_in, s3_in = corpus
    out = f"s3://{BUCKET}/runs/killed"
    toml = tmp_path / "c.toml"
    toml.write_text(f'[input]\npaths = ["{s3_in}"]\nunit_bytes = 20000\nbatch_rows = 32\n'
                    f'[tokenizer]\npath = "{TINY}"\n[pack]\nseq_len = 256\n'
                    f'[output]\ndir = "{out}"\n[run]\nworkers = 1\nprogress = "log"\nhistogram = false\n')
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "rmlprep.cli", "run", str(toml)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    o = OutputFolder(out)
    deadline = time.time() + 120
    while time.time() < deadline and len(o.list("*.done.json")) < 2 and proc.poll() is None:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(o.list("*.done.json"))
    assert proc.returncode == -signal.SIGKILL and not o.exists("manifest.json")  # it died mid-way
    assert o.exists(".rmlprep.lock")  # left behind by the killed run
    r = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    m = json.loads(o.read_bytes("manifest.json"))
    assert m["units_skipped"] >= done_before >= 2
    assert not o.list("*.tmp-*") and not o.exists(".rmlprep.lock")
    r = subprocess.run(cmd + ["--output", str(tmp_path / "clean")], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert outputs(out) == outputs(tmp_path / "clean") and len(outputs(out)) > done_before


def test_lock_on_s3(s3):
    """The lock is a conditional put: a second run is refused while the first holds it; a lock
    left by a process of this host that is gone, or not refreshed for the lease, is taken over."""
    import boto3

    out = f"s3://{BUCKET}/runs/lock"
    a = OutputFolder(out)
    with a.lock():
        body = json.loads(a.read_bytes(".rmlprep.lock"))
        assert body["pid"] == os.getpid()
        with pytest.raises(OutputError, match=rf"in use by another rmlprep run \(pid {os.getpid()} on "):
            with OutputFolder(out).lock():
                pass
    assert not a.exists(".rmlprep.lock")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    import socket

    left = {"pid": int(dead.stdout), "host": socket.gethostname(), "token": "x", "time": time.time()}
    boto3.client("s3").put_object(Bucket=BUCKET, Key="runs/lock/.rmlprep.lock", Body=json.dumps(left).encode())
    b = OutputFolder(out)
    with b.lock():
        assert "took over the lock" in b.lock_note
    other = dict(left, host="another-host")
    boto3.client("s3").put_object(Bucket=BUCKET, Key="runs/lock/.rmlprep.lock", Body=json.dumps(other).encode())
    with pytest.raises(OutputError, match="in use by another rmlprep run .*on another-host"):
        with OutputFolder(out).lock():
            pass


def test_a_run_that_lost_its_lease_commits_nothing_more(corpus):
    """Run A stalls past the lease (SIGSTOP, a suspended laptop) and run B takes the prefix over
    (here: the lock object rewritten with B's token as A starts its units). Before, A went on:
    it committed its units and its manifest over B's folder (explore19b, moto: A's manifest over
    5 of A's shards and B's unit 3, B having exited 0), then failed at the end. Now every commit
    checks the lock's token first: A commits no unit and no report, and does not clean up either
    (B's temporary stays), and fails naming the takeover."""
    import boto3

    _, s3_in = corpus
    out = f"s3://{BUCKET}/runs/lost-lease"
    b_lock = json.dumps({"pid": 1, "host": "b-host", "token": "b-token", "time": time.time()}).encode()

    def log(line: str) -> None:
        if line.startswith("run: "):  # units about to start: B takes over
            s3 = boto3.client("s3")
            s3.put_object(Bucket=BUCKET, Key="runs/lost-lease/.rmlprep.lock", Body=b_lock)
            s3.put_object(Bucket=BUCKET, Key="runs/lost-lease/train-00000.parquet.tmp-b-host-1", Body=b"B's")

    with pytest.raises(OutputError, match="another run took this folder's lock over while this run held it"):
        run(make_cfg(s3_in, out), log=log)
    o = OutputFolder(out)
    names = o.list("**/*")
    # a temporary of A's may stay (a worker stopped mid-upload when A stopped its pool): B, which
    # holds the folder, removes every *.tmp-* as it ends; nothing of A's is under a name
    assert not [n for n in names if n.startswith(("train-", "shard-", "rejects/", "manifest", "stats"))
                and ".tmp-" not in n], names
    assert o.read_bytes(".rmlprep.lock") == b_lock and o.read_bytes("train-00000.parquet.tmp-b-host-1") == b"B's"


def test_a_full_local_temporary_is_an_output_error_not_an_input_one(corpus, monkeypatch):
    """A shard bound for the store is written whole to a local temporary first (TMPDIR). When
    that disk filled up, the error was taken for the input's: every unit failed with
    ``c.jsonl: No space left on device (reading c.jsonl bytes [0, 404873))`` (explore19b), which
    sends the user to the input file, and the run went on through every unit. Now it is an
    OutputError naming the object, the local folder and TMPDIR, and it stops the run."""
    import errno
    import io
    import tempfile
    import types

    from rmlprep.pipeline import store

    class Full(io.BytesIO):
        def __init__(self, *a, **k):
            super().__init__()

        def write(self, b):  # room for the small files (the lock probe, the folder marker), not a shard
            if self.tell() + len(b) > 10_000:
                raise OSError(errno.ENOSPC, "No space left on device")
            return super().write(b)

    # store's own tempfile only: moto's server, in this process, spools request bodies with it too
    monkeypatch.setattr(store, "tempfile", types.SimpleNamespace(SpooledTemporaryFile=Full,
                                                                 gettempdir=tempfile.gettempdir))
    _, s3_in = corpus
    out = f"s3://{BUCKET}/runs/full-tmp"
    with pytest.raises(OutputError, match=rf"^{out}/train-\d{{5}}\.parquet: writing its local temporary in "
                                          rf"{tempfile.gettempdir()}: No space left on device; .*TMPDIR"):
        run(make_cfg(s3_in, out), log=quiet)
    assert not OutputFolder(out).list("train-*")


def test_a_lock_that_cannot_be_read_is_no_takeover(s3, monkeypatch):
    """The fence reads the lock object before each commit: a lock that is gone or holds another
    token means another run took the folder over, but a read that fails (the store out of reach
    for longer than pyarrow's retries) is the store's error, with its fix, not a false 'another
    run took this folder's lock over'."""
    from rmlprep.pipeline.store import fence

    o = OutputFolder(f"s3://{BUCKET}/runs/fence-read")
    fence(o, "my-token")
    with pytest.raises(OutputError, match="another run took this folder's lock over"):
        o.commit("a.json", lambda f: f.write(b"{}"))  # no lock object: not this run's folder
    real = o.read_bytes

    def unreachable(name):
        if name == ".rmlprep.lock":
            raise OSError("When reading information for key '.rmlprep.lock': AWS Error NETWORK_CONNECTION")
        return real(name)

    monkeypatch.setattr(o, "read_bytes", unreachable)
    with pytest.raises(OutputError, match=r"\.rmlprep\.lock: When reading .*NETWORK_CONNECTION; check the bucket"):
        o.commit("a.json", lambda f: f.write(b"{}"))
    assert o.list("*") == []


def test_still_held_says_why_when_the_lock_cannot_be_read(s3, monkeypatch, tmp_path):
    """still_held (the driver's check before it puts a replaced folder back, removes temporaries
    or drops what it set aside) counted a lock it could not read as taken over, so the put-back was
    skipped without a word, while check_held calls the same read the store's error (a1fc904). Both
    now agree it is no takeover: still_held still touches nothing (it cannot tell whose folder it
    is) but logs the store's error and what is left; a real takeover (the lock gone) stays silent,
    its own error being the run's."""
    from rmlprep.pipeline.store import fence, still_held

    o = OutputFolder(f"s3://{BUCKET}/runs/held-read")
    o.create()
    fence(o, "my-token")
    logged: list[str] = []
    assert still_held(o, logged.append, "left undone") is False and logged == []  # no lock object: taken over
    real = o.read_bytes

    def unreachable(name):
        if name == ".rmlprep.lock":
            raise OSError("When reading information for key '.rmlprep.lock': AWS Error NETWORK_CONNECTION")
        return real(name)

    monkeypatch.setattr(o, "read_bytes", unreachable)
    assert still_held(o, logged.append, "left undone") is False
    assert len(logged) == 1 and re.match(r"warning: left undone: this run cannot tell whether it still holds the "
                                         r"folder, whose lock could not be read \(.*NETWORK_CONNECTION; check the bucket",
                                         logged[0])
    assert still_held(OutputFolder(tmp_path), logged.append, "x") is True and len(logged) == 1


def test_commit_is_atomic_on_s3(s3):
    """A write that fails half way leaves nothing under the name (nor a temporary); an older
    complete object stays as it was. The failure is an OutputError, as on a disk (OutputFolder.stage):
    the write function's OSError is the local temporary's."""
    o = OutputFolder(f"s3://{BUCKET}/runs/atomic")

    def half(f):
        f.write(b"PAR1 half a shard")
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputError, match="No space"):
        o.commit("train-00000.parquet", half)
    assert o.list("*") == []
    digest = o.commit("train-00000.parquet", lambda f: f.write(b"complete"), digest=True)
    with pytest.raises(OutputError):
        o.commit("train-00000.parquet", half)
    assert o.read_bytes("train-00000.parquet") == b"complete" and o.list("*") == ["train-00000.parquet"]
    assert digest == o.sha256("train-00000.parquet")


def test_a_prefix_rmlprep_did_not_write_is_refused_on_s3(s3, corpus):
    """The store's lock is removed at the end of a run, so its folder marker is what says a prefix
    is rmlprep's; a prefix holding someone else's objects is refused and left as it was."""
    import boto3

    local_in, _ = corpus
    boto3.client("s3").put_object(Bucket=BUCKET, Key="runs/foreign/data/README.md", Body=b"# mine\n")
    out = f"s3://{BUCKET}/runs/foreign"
    with pytest.raises(OutputError, match=r"was not written by rmlprep .*it holds data; .*pass --overwrite"):
        run(make_cfg(local_in, out), log=quiet)
    o = OutputFolder(out)
    assert o.list("**/*") == ["data/README.md"]
    run(make_cfg(local_in, out), overwrite=True, log=quiet)
    assert o.exists(".rmlprep.folder.json") and not o.exists(".rmlprep.lock")
    assert o.read_bytes("data/README.md") == b"# mine\n"
    assert run(make_cfg(local_in, out), log=quiet)["units_skipped"] > 0  # the marker, not the lock, says it is rmlprep's


def test_missing_bucket_is_one_line(s3, corpus):
    local_in, _ = corpus
    with pytest.raises(OutputError, match=r"the bucket 'no-such-bucket' does not exist"):
        run(make_cfg(local_in, "s3://no-such-bucket/out"), log=quiet)


def test_fs_functions_on_s3(s3, corpus):
    _, s3_in = corpus
    part = f"s3://{BUCKET}/corpus/part-0.jsonl"
    assert fs.is_remote(part) and not fs.is_remote("/tmp/x") and not fs.is_remote("C:\\x")
    assert fs.glob(s3_in) == [part] and fs.glob(f"s3://{BUCKET}/corpus/**/*.jsonl") == [part]
    assert fs.glob(f"s3://{BUCKET}/corpus/*.parquet") == []
    assert fs.exists(part) and fs.isfile(part) and fs.isdir(f"s3://{BUCKET}/corpus")
    assert not fs.exists(f"s3://{BUCKET}/nope.jsonl")
    assert fs.join(f"s3://{BUCKET}/corpus", "a", "b.json") == f"s3://{BUCKET}/corpus/a/b.json"
    assert fs.dirname(part) == f"s3://{BUCKET}/corpus"
    with fs.open(part) as f:
        f.seek(5)
        head = f.readline()
    assert head == Path(corpus[0]).read_bytes()[5:].split(b"\n", 1)[0] + b"\n"
    assert fs.getsize(part) == corpus[0].stat().st_size
    with pytest.raises(FileNotFoundError):
        fs.open(f"s3://{BUCKET}/nope.jsonl")
