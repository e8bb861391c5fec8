"""Readers alone: peak resident memory and time to plan and read every unit, by format and size.

    python bench/bench_readers.py [--sizes 15,60,240] [--batch-rows 1024]
    python bench/bench_readers.py --csv [--sizes 50]

Corpus: the first N MB of ``~/.cache/rmlprep-corpus/pretrain.jsonl`` (or
``../shared/corpora/text-multilingual.jsonl`` repeated), written as plain JSONL, ``.jsonl.gz``,
single-frame ``.jsonl.zst`` (the ``zstd`` tool's output), multi-frame ``.jsonl.zst`` (1 MB
frames, like ``pzstd``), ``.csv`` and ``.csv.gz``. Each measurement runs in a fresh subprocess
that imports rmlprep, records its RSS, then plans (``unit_bytes`` 16 MB) and reads every unit
with ``read_unit``; it reports the peak RSS (``VmHWM``: unlike ``ru_maxrss``, it is not inherited
from the parent across fork + exec) minus the RSS after imports. A
bounded reader shows the same growth for every size. Memory and speed are measured here, never
asserted in a test.

``--csv``: CPU seconds to read the text column of an N MB CSV (one process, best of 3), as MB/s:
rmlprep's CSV reader (the standard library's ``csv``, strict), ``csv.reader(strict=True)``
alone, and ``pyarrow.csv.open_csv`` alone (not strict: the reader it replaced).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("RMLPREP_CORPUS", Path.home() / ".cache" / "rmlprep-corpus")) / "pretrain.jsonl"
SHARED = ROOT.parent / "shared" / "corpora" / "text-multilingual.jsonl"

CHILD = r"""
import json, sys, time
from rmlprep.readers import plan_units, read_unit
def status_kb(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(key + ":"))
base = status_kb("VmRSS")
t = time.perf_counter()
inp = {"paths": [sys.argv[1]], "format": "auto", "split": None, "unit_bytes": 16_000_000,
       "unit_rows": 50_000, "batch_rows": int(sys.argv[3]), "max_bytes": 1}
units = plan_units(inp)
rows = 0
for u in units:
    for b in read_unit(u, sys.argv[2], int(sys.argv[3])):
        rows += len(b.rows)
print(json.dumps({"units": len(units), "rows": rows, "seconds": time.perf_counter() - t,
                  "base_mb": base / 1024, "peak_mb": status_kb("VmHWM") / 1024}))
"""


def text_lines(mb: int) -> list[bytes]:
    src = CORPUS if CORPUS.is_file() else SHARED
    out, size = [], 0
    while size < mb * 1_000_000:
        with open(src, "rb") as f:
            for line in f:
                out.append(line if line.endswith(b"\n") else line + b"\n")
                size += len(out[-1])
                if size >= mb * 1_000_000:
                    break
    return out


def write_inputs(d: Path, mb: int) -> dict[str, Path]:
    import zstandard

    lines = text_lines(mb)
    data = b"".join(lines)
    files = {"jsonl": d / "t.jsonl", "jsonl.gz": d / "t.jsonl.gz", "jsonl.zst (1 frame)": d / "t.jsonl.zst",
             "jsonl.zst (1 MB frames)": d / "t.frames.jsonl.zst", "csv": d / "t.csv", "csv.gz": d / "t.csv.gz"}
    files["jsonl"].write_bytes(data)
    files["jsonl.gz"].write_bytes(gzip.compress(data, 6))
    files["jsonl.zst (1 frame)"].write_bytes(zstandard.ZstdCompressor(level=3).compress(data))
    with open(files["jsonl.zst (1 MB frames)"], "wb") as f:
        for i in range(0, len(data), 1 << 20):
            f.write(zstandard.ZstdCompressor(level=3).compress(data[i:i + (1 << 20)]))
    with open(files["csv"], "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "text"])
        for i, line in enumerate(lines):
            w.writerow([i, json.loads(line)["text"]])
    files["csv.gz"].write_bytes(gzip.compress(files["csv"].read_bytes(), 6))
    return files


CSV_CHILD = r"""
import csv, io, json, sys, time
import pyarrow as pa, pyarrow.csv as pcsv
from rmlprep.readers import plan_units, read_unit
path = sys.argv[1]
def rmlprep_reader():
    inp = {"paths": [path], "format": "auto", "split": None, "unit_bytes": 1 << 30, "unit_rows": 50_000,
           "batch_rows": 1024, "max_bytes": 1}
    return sum(len(b.rows) for u in plan_units(inp) for b in read_unit(u, "text", 1024))
def stdlib_csv():
    csv.field_size_limit(1 << 26)
    with open(path, newline="", encoding="utf-8") as f:
        r = csv.reader(f, strict=True)
        next(r)
        return sum(1 for row in r if row)
def pyarrow_csv():
    r = pcsv.open_csv(path, read_options=pcsv.ReadOptions(block_size=1 << 20, use_threads=False),
                      parse_options=pcsv.ParseOptions(newlines_in_values=True),
                      convert_options=pcsv.ConvertOptions(include_columns=["text"], column_types={"text": pa.binary()}))
    return sum(b.column(0).cast(pa.string()).__len__() for b in r)
out = {}
for fn in (rmlprep_reader, stdlib_csv, pyarrow_csv):
    best = 1e9
    for _ in range(3):
        t = time.process_time()
        rows = fn()
        best = min(best, time.process_time() - t)
    out[fn.__name__] = {"seconds": best, "rows": rows}
print(json.dumps(out))
"""


def csv_speed(sizes: list[int], env: dict[str, str]) -> None:
    print(f"{'CSV reader (CPU time, best of 3)':34} {'MB':>5} {'rows':>8} {'MB/s':>7}")
    for mb in sizes:
        with tempfile.TemporaryDirectory() as td:
            path = write_inputs(Path(td), mb)["csv"]
            size = path.stat().st_size / 1e6
            out = subprocess.run([sys.executable, "-c", CSV_CHILD, str(path)], env=env, capture_output=True,
                                 text=True, check=True)
            for name, r in json.loads(out.stdout).items():
                print(f"{name:34} {size:5.0f} {r['rows']:8d} {size / r['seconds']:7.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="15,60,240", help="MB of text per input")
    ap.add_argument("--batch-rows", type=int, default=1024)
    ap.add_argument("--csv", action="store_true", help="CSV reading speed: rmlprep vs csv vs pyarrow.csv")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if args.csv:
        csv_speed([int(x) for x in args.sizes.split(",")], env)
        return
    print(f"{'input':26} {'MB':>5} {'units':>5} {'rows':>8} {'s':>6} {'MB/s':>6} {'RSS growth MB':>14}")
    for mb in (int(x) for x in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as td:
            for name, path in write_inputs(Path(td), mb).items():
                col = "text"
                out = subprocess.run([sys.executable, "-c", CHILD, str(path), col, str(args.batch_rows)],
                                     env=env, capture_output=True, text=True, check=True)
                r = json.loads(out.stdout)
                print(f"{name:26} {mb:5d} {r['units']:5d} {r['rows']:8d} {r['seconds']:6.2f} "
                      f"{mb / r['seconds']:6.1f} {r['peak_mb'] - r['base_mb']:14.0f}")


if __name__ == "__main__":
    main()
