"""The main job end to end: ``rmlprep run`` against the gigatoken script, same files, same cores.

    python -m bench job [--reps 3] [--workers 2]

Input: the two bench corpora (:mod:`bench.corpora`: the Debian sample and
text-multilingual.jsonl, 30 MB of JSONL in 2 files); GPT-2; rows of 2048 tokens with an EOS
after every document; zstd Parquet. Each run is a fresh process timed from outside (interpreter
start-up and imports included), the tools interleaved run by run, the median reported:

- ``rmlprep run`` with 2 workers and the parity stage's fixture check (``parity.require``);
  its manifest gives the phases (tokenizer load, parity, processing);
- ``bench/gigatoken_job.py``: gigatoken ``encode_files`` on a 2-thread pool, naive packing and
  one Parquet write (no parity, rejects, resume or metadata: a floor);
- start-up: importing ``rmlprep.cli``, what ``rmlprep run`` imports before its first phase (a
  fresh interpreter with bytecode caches, minus a bare one; ``import rmlprep`` alone imports
  almost nothing since its names load on first use), plus the tokenizer load, plan and parity
  phases of the run;
- processing against the tokenizer alone: ``encode_batch_flat`` on the same texts with as many
  threads as workers, cold, in a fresh process; the run's processing phase over the same UTF-8
  bytes should reach 80% of it. The same in CPU seconds, which do not move with the machine's
  load: ``encode_batch_flat``'s (all its threads) against the units' summed from the done
  markers (read, tokenize, pack, write); their ratio is the share the processing phase would
  reach with every worker busy from start to end, and the workers' busy share is the rest.

Writes ``bench/results/job-<time>.json``. Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.corpora import corpus_file, read_texts  # noqa: E402

REAL = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS", Path.home() / ".cache" / "rmlprep-real-tokenizers"))
RESULTS = ROOT / "bench" / "results"
SEQ_LEN = 2048
GPT2_EOS = 50256

CONFIG = """pipeline = "pretrain"
[input]
paths = [{paths}]
column = "text"
[tokenizer]
path = "{tok}"
name = "gpt2"
add_special_tokens = false
parse_special = false
[parity]
require = true
live_sample = 0
[pack]
seq_len = {seq_len}
eos = true
overflow = "wrap"
[output]
dir = "{out}"
compression = "zstd"
[run]
workers = {workers}
progress = "log"
histogram = false
"""

_WRAP = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
         "print('MAXRSS_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
         "sys.exit(r.returncode)")

FLAT = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from bench.corpora import read_texts
import rmlprep
texts = [t for f in sys.argv[4:] for t in read_texts(f)]
nbytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
tok = rmlprep.load_tokenizer(sys.argv[2], name="gpt2")
t0, c0 = time.perf_counter(), time.process_time()
tok.encode_batch_flat(texts, parse_special=False, num_threads=int(sys.argv[3]))
print(json.dumps({"bytes": nbytes, "seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0}))
"""


def timed(cmd: list[str], env=None) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) of the largest process of the command's tree, stdout."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _WRAP, *cmd], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed: {p.stderr[-2000:]}")
    kb = int(p.stderr.rsplit("MAXRSS_KB", 1)[1].split()[0])
    return wall, kb / 1024, p.stdout


def unit_summary(out: Path, process_s: float, workers: int) -> dict:
    """What the done markers of a run say: how many units, the seconds of each stage summed over
    them (wall seconds inside the workers, and the CPU seconds of the workers' threads, which do
    not count the time a worker waited for a core), and the share of ``workers x process`` the units
    filled (1.0: every worker busy from the first unit to the last; the rest is idle tail,
    fork and hand-over)."""
    recs = [json.loads(p.read_text()) for p in sorted(out.glob("shard-*.done.json"))]
    stages: dict[str, float] = {}
    cpu: dict[str, float] = {}
    for r in recs:
        for k, v in r["seconds"].items():
            if k == "cpu":  # the CPU seconds of the worker's thread, stage by stage
                for c, w in v.items():
                    cpu[c] = cpu.get(c, 0.0) + w
            else:
                stages[k] = stages.get(k, 0.0) + v
    busy = stages.get("total", 0.0) / (workers * process_s) if process_s else float("nan")
    return {"count": len(recs), "busy": busy, "stages": stages, "cpu": cpu}


def run_job(reps: int = 3, workers: int = 2, log=print) -> dict:
    files = [corpus_file("debian"), corpus_file("multilingual")]
    text_bytes = sum(len(t.encode("utf-8", "surrogatepass")) for f in files for t in read_texts(f))
    nbytes = sum(f.stat().st_size for f in files)
    tok = REAL / "gpt2" / "gpt2.tiktoken"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAYON_NUM_THREADS": str(workers)}
    # bytecode caches as an installed package has them (pip compiles on install): without them
    # every run compiles rmlprep's ~60 modules, ~0.1 s that no user pays
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-c", "import rmlprep.cli"], env=env, check=True)
    log(f"main job: {nbytes / 1e6:.1f} MB of JSONL ({text_bytes / 1e6:.1f} MB of text) in {len(files)} files, "
        f"GPT-2, seq_len {SEQ_LEN}, {workers} workers, {reps} interleaved runs")
    walls: dict[str, list[float]] = {"rmlprep run": [], "gigatoken script": []}
    rss: dict[str, float] = {"rmlprep run": 0.0, "gigatoken script": 0.0}
    phases: dict[str, list[float]] = {}
    unit_runs: list[dict] = []  # per run: units, their stage seconds summed, the workers' busy share
    imports, flats = [], []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for rep in range(reps):
            out = tmp / f"rml-{rep}"
            cfg = tmp / f"job-{rep}.toml"
            cfg.write_text(CONFIG.format(paths=", ".join(f'"{f}"' for f in files), tok=tok, seq_len=SEQ_LEN,
                                         out=out, workers=workers))
            wall, mb, _ = timed([sys.executable, "-m", "rmlprep.cli", "run", str(cfg)], env=env)
            walls["rmlprep run"].append(wall)
            rss["rmlprep run"] = max(rss["rmlprep run"], mb)
            timings = json.loads((out / "manifest.json").read_text())["timings"]
            for k, v in timings.items():
                phases.setdefault(k, []).append(v)
            unit_runs.append(unit_summary(out, timings["process"], workers))
            wall, mb, _ = timed([sys.executable, str(ROOT / "bench" / "gigatoken_job.py"), str(REAL / "hf" / "gpt2"),
                                 str(GPT2_EOS), str(SEQ_LEN), str(tmp / f"gt-{rep}.parquet"), *map(str, files)], env=env)
            walls["gigatoken script"].append(wall)
            rss["gigatoken script"] = max(rss["gigatoken script"], mb)
            t_imp, _, _ = timed([sys.executable, "-c", "import rmlprep.cli"], env=env)
            t_bare, _, _ = timed([sys.executable, "-c", "pass"], env=env)
            imports.append(max(0.0, t_imp - t_bare))
            _, _, o = timed([sys.executable, "-c", FLAT, str(ROOT), str(tok), str(workers), *map(str, files)], env=env)
            flats.append(json.loads(o))
            log(f"  run {rep + 1}: rmlprep run {walls['rmlprep run'][-1]:.2f} s, gigatoken script "
                f"{walls['gigatoken script'][-1]:.2f} s")
    med = {k: statistics.median(v) for k, v in phases.items()}
    flat_mbps = statistics.median(f["bytes"] / f["seconds"] for f in flats) / 1e6
    flat_cpu = statistics.median(f["cpu"] for f in flats)
    units_cpu = statistics.median(u["cpu"].get("total", 0.0) for u in unit_runs)
    proc_mbps = text_bytes / med["process"] / 1e6 if med.get("process") else float("nan")
    startup = statistics.median(imports) + med.get("load_tokenizer", 0) + med.get("plan", 0) + med.get("parity", 0)
    doc = {"files": [str(f) for f in files], "bytes": nbytes, "text_bytes": text_bytes, "seq_len": SEQ_LEN,
           "workers": workers, "reps": reps,
           "rows": {k: {"wall": statistics.median(v), "walls": v, "rss_mb": rss[k]} for k, v in walls.items()},
           "rmlprep_phases": {k: med[k] for k in ("load_tokenizer", "plan", "parity", "process", "total") if k in med},
           "import_s": statistics.median(imports), "startup": startup,
           "units": {"count": unit_runs[0]["count"],
                     "busy": statistics.median(u["busy"] for u in unit_runs),
                     "stages": {k: statistics.median(u["stages"].get(k, 0.0) for u in unit_runs)
                                for k in unit_runs[0]["stages"]},
                     "cpu": {k: statistics.median(u["cpu"].get(k, 0.0) for u in unit_runs)
                             for k in unit_runs[0]["cpu"]}},
           "processing_vs_flat": {"processing_mbps": proc_mbps, "flat_mbps": flat_mbps,
                                  "ratio": proc_mbps / flat_mbps, "flat_cpu": flat_cpu, "units_cpu": units_cpu,
                                  "cpu_ratio": flat_cpu / units_cpu if units_cpu else float("nan")}}
    return doc


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    doc = run_job(args.reps, args.workers)
    from bench.report import job_table

    print(job_table(doc))
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"job-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
