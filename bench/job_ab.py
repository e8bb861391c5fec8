"""The main job in paired runs of two (or more) trees, compared on CPU time.

    python -m bench.job_ab --pairs 8 /work/wt/before /work/wt/after
    python -m bench.job_ab --pairs 8 TREE "TREE@NUMPY_MADVISE_HUGEPAGE=0,MALLOC_TRIM_THRESHOLD_=1073741824"

Each argument is a checkout with its extension built (``PYTHONPATH`` points at it), optionally
followed by ``@NAME=VALUE,...``: environment variables for that variant. Every round runs
``rmlprep run`` once per variant on the job of :mod:`bench.job` (the two bench corpora, GPT-2,
seq_len 2048, 2 workers unless ``--workers`` says otherwise, the parity fixture check), the order reversed every other round
(A B, B A, ...). Per run: user and system CPU seconds and minor faults of the whole command
tree (``/usr/bin/time``), wall seconds, the manifest's phases and the units' stage CPU seconds
summed from the done markers. Printed: medians per variant and, against the first variant, the
median of the pair-by-pair ratios (on a shared machine CPU ratios are what to decide on; wall
moves with the other processes), and whether every pair wrote byte-identical shards.
Writes ``bench/results/job-ab-<time>.json``. Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.corpora import corpus_file  # noqa: E402
from bench.job import CONFIG, REAL, RESULTS, SEQ_LEN  # noqa: E402


def variant_env(variant: str) -> dict[str, str]:
    """The environment of ``TREE[@NAME=VALUE,...]``: PYTHONPATH at the tree, bytecode caches on."""
    tree, _, extra = variant.partition("@")
    env = {**os.environ, "PYTHONPATH": tree}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package: no compiling per run
    for kv in filter(None, extra.split(",")):
        name, _, value = kv.partition("=")
        env[name] = value
    return env


def one_run(variant: str, cfg: Path, out: Path) -> dict:
    p = subprocess.run(["/usr/bin/time", "-f", "TIME %U %S %e %R", sys.executable, "-m", "rmlprep.cli", "run",
                        str(cfg)], env=variant_env(variant), capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{variant}: rmlprep run failed:\n{p.stderr[-2000:]}")
    user, system, wall, minflt = [float(x) for x in
                                  [ln for ln in p.stderr.splitlines() if ln.startswith("TIME")][-1].split()[1:]]
    cpu: dict[str, float] = {}
    shards = {}
    for m in sorted(out.glob("shard-*.done.json")):
        rec = json.loads(m.read_text())
        shards[rec["shard"]] = rec["sha256"]
        for k, v in rec["seconds"].get("cpu", {}).items():
            cpu[k] = cpu.get(k, 0.0) + v
    timings = json.loads((out / "manifest.json").read_text())["timings"]
    return {"user": user, "sys": system, "wall": wall, "minflt": minflt, "unit_cpu": cpu, "shards": shards,
            "phases": {k: v for k, v in timings.items() if isinstance(v, (int, float))}}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="+", help="TREE or TREE@NAME=VALUE,...; the first is the baseline")
    ap.add_argument("--pairs", type=int, default=6, help="rounds (each runs every variant once)")
    ap.add_argument("--workers", type=int, default=2, help="run.workers (1: the units in the command's own process)")
    args = ap.parse_args(argv)
    files = [corpus_file("debian"), corpus_file("multilingual")]
    tok = REAL / "gpt2" / "gpt2.tiktoken"
    for v in args.variants:  # bytecode caches written before timing
        subprocess.run([sys.executable, "-c", "import rmlprep.cli"], env=variant_env(v), check=True)
    runs: dict[str, list[dict]] = {v: [] for v in args.variants}
    with tempfile.TemporaryDirectory() as d:
        for i in range(args.pairs):
            for v in args.variants if i % 2 == 0 else args.variants[::-1]:
                out = Path(d) / "out"
                cfg = Path(d) / "job.toml"
                cfg.write_text(CONFIG.format(paths=", ".join(f'"{f}"' for f in files), tok=tok, seq_len=SEQ_LEN,
                                             out=out, workers=args.workers))
                runs[v].append(one_run(v, cfg, out))
                shutil.rmtree(out)
    med = statistics.median
    for v, rs in runs.items():
        print(f"{v}\n  user {med(r['user'] for r in rs):.2f} s, system {med(r['sys'] for r in rs):.2f} s, "
              f"user+system {med(r['user'] + r['sys'] for r in rs):.2f} s, wall {med(r['wall'] for r in rs):.2f} s, "
              f"minor faults {med(r['minflt'] for r in rs):.0f}")
        stages = sorted({k for r in rs for k in r["unit_cpu"]})
        print("  units' CPU s: " + ", ".join(f"{k} {med(r['unit_cpu'].get(k, 0.0) for r in rs):.3f}" for k in stages))
        print("  phases (wall s): " + ", ".join(f"{k} {med(r['phases'][k] for r in rs):.3f}"
                                                for k in rs[0]["phases"] if all(k in r["phases"] for r in rs)))
    base = runs[args.variants[0]]
    for v in args.variants[1:]:
        pairs = list(zip(base, runs[v]))
        ratio = {name: med(f(b) / f(a) for a, b in pairs) for name, f in
                 (("user+system", lambda r: r["user"] + r["sys"]), ("user", lambda r: r["user"]),
                  ("units' CPU", lambda r: r["unit_cpu"]["total"]), ("wall", lambda r: r["wall"]))}
        same = all(a["shards"] == b["shards"] for a, b in pairs)
        print(f"{v} / {args.variants[0]}, median of {len(pairs)} pair ratios: "
              + ", ".join(f"{k} {x:.3f}" for k, x in ratio.items()) + f"; shards identical: {same}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"job-ab-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps({"variants": args.variants, "runs": runs}, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
