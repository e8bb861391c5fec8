"""The main job's peak memory per worker for one large unit: ``rmlprep run`` on one file that is
a single unit (``.jsonl.gz``, ``.csv.gz``, one-frame ``.jsonl.zst``) of N MB of text, on one
JSONL row holding a single document of N MB, and (sft) on one ``.jsonl.gz`` of the chat corpora
of ``../shared/corpora/chat`` repeated K times.

    python bench/bench_unit_memory.py [--sizes 60,240] [--doc-mb 50] [--formats jsonl.gz,csv.gz]
                                      [--sft-copies 8,16]

Corpus: the first N MB of ``~/.cache/rmlprep-corpus/pretrain.jsonl`` (or
``../shared/corpora/text-multilingual.jsonl`` repeated). Tokenizers from
``~/.cache/rmlprep-real-tokenizers``: GPT-2 (tiktoken rank file) for the units, Gemma (256k
vocab, tokenizer.json) for the single document, Qwen2.5 with its chat format for sft (the
default row groups and BFD windows of ``input.unit_rows`` = 50,000 conversations). Each run is a fresh ``python -c`` process with
one worker (so the unit runs in that process): pretrain, seq_len 2048, eos, row groups of 1024
rows, batches of 512 rows, parity off. Printed: the peak resident memory of the process
(``VmHWM``), the resident memory after the tokenizer is loaded (``base``), and the seconds. A
worker whose memory is bounded shows the same peak for every size. Memory is measured here,
never asserted in a test.
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
REAL = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS", Path.home() / ".cache" / "rmlprep-real-tokenizers"))

CHILD = r"""
import json, sys, time
from rmlprep.config import config_from_dict
from rmlprep.pipeline import load_run_tokenizer, run
def mb(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(key + ":")) / 1024
inp, out, tok, name = sys.argv[1:5]
if name == "sft":
    cfg = config_from_dict({
        "pipeline": "sft", "input": {"paths": [inp], "batch_rows": 256},
        "tokenizer": {"path": tok}, "chat": {"format": "qwen2.5"},
        "parity": {"require": False, "live_sample": 0, "chat": False},
        "pack": {"seq_len": 2048, "overflow": "truncate"}, "output": {"dir": out},
        "run": {"workers": 1, "progress": "none", "histogram": False}})
else:
    cfg = config_from_dict({
        "input": {"paths": [inp], "batch_rows": 512},
        "tokenizer": {"path": tok, **({"name": name} if name else {})},
        "parity": {"require": False, "live_sample": 0},
        "pack": {"seq_len": 2048, "eos": True},
        "output": {"dir": out, "row_group_rows": 1024},
        "run": {"workers": 1, "progress": "none", "histogram": False}})
tokenizer = load_run_tokenizer(cfg, log=lambda s: None)[0]
base = mb("VmRSS")
t = time.perf_counter()
m = run(cfg, tokenizer=tokenizer, log=lambda s: None)
print(json.dumps({"seconds": time.perf_counter() - t, "base_mb": base, "peak_mb": mb("VmHWM"),
                  "units": len(m["shards"]), "tokens": m["totals"]["tokens"]}))
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


def write_input(d: Path, fmt: str, mb: int) -> Path:
    lines = text_lines(mb)
    if fmt == "jsonl.gz":
        p = d / "t.jsonl.gz"
        p.write_bytes(gzip.compress(b"".join(lines), 1))
    elif fmt == "jsonl.zst":
        import zstandard

        p = d / "t.jsonl.zst"
        p.write_bytes(zstandard.ZstdCompressor(level=3).compress(b"".join(lines)))
    elif fmt == "csv.gz":
        p = d / "t.csv.gz"
        with gzip.open(p, "wt", newline="", encoding="utf-8", compresslevel=1) as f:
            w = csv.writer(f)
            w.writerow(["id", "text"])
            for i, line in enumerate(lines):
                w.writerow([i, json.loads(line)["text"]])
    elif fmt == "sft":
        p = d / "chat.jsonl.gz"
        chat = b"".join(f.read_bytes() for f in sorted((ROOT.parent / "shared" / "corpora" / "chat").glob("*.jsonl")))
        p.write_bytes(gzip.compress(chat * mb, 1))
    elif fmt == "one document":
        p = d / "doc.jsonl"
        text = "\n\n".join(json.loads(line)["text"] for line in lines)
        p.write_text(json.dumps({"text": text}, ensure_ascii=False) + "\n", encoding="utf-8")
    else:
        raise SystemExit(f"unknown format {fmt!r}")
    return p


def measure(path: Path, out: Path, tok: Path, name: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", CHILD, str(path), str(out), str(tok), name], env=env,
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stderr)
    return json.loads(r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="60,240", help="MB of text per unit")
    ap.add_argument("--formats", default="jsonl.gz,csv.gz,jsonl.zst")
    ap.add_argument("--doc-mb", type=int, default=50, help="MB of the single document (0: skip)")
    ap.add_argument("--sft-copies", default="", help="copies of the chat corpora in the sft unit, e.g. 8,16")
    args = ap.parse_args()
    gpt2, gemma, qwen = REAL / "gpt2" / "gpt2.tiktoken", REAL / "hf" / "gemma", REAL / "hf" / "qwen2.5"
    cases = [(fmt, int(mb), gpt2, "gpt2") for mb in args.sizes.split(",") for fmt in args.formats.split(",")]
    if args.doc_mb:
        cases.append(("one document", args.doc_mb, gemma, ""))
    cases += [("sft", int(k), qwen, "sft") for k in args.sft_copies.split(",") if k]
    print(f"{'input':14} {'tokenizer':10} {'MB|x':>5} {'tokens':>11} {'s':>6} {'base MB':>8} {'peak MB':>8}")
    for fmt, mb, tok, name in cases:
        if not tok.exists():
            print(f"{fmt:14} skipped: {tok} is absent (bash ../shared/real-tokenizers/get.sh)")
            continue
        with tempfile.TemporaryDirectory() as td:
            r = measure(write_input(Path(td), fmt, mb), Path(td) / "out", tok, name)
        print(f"{fmt:14} {(tok.stem if tok.is_file() else tok.name):10} {mb:5d} {r['tokens']:11,d} {r['seconds']:6.1f} "
              f"{r['base_mb']:8.0f} {r['peak_mb']:8.0f}")


if __name__ == "__main__":
    main()
