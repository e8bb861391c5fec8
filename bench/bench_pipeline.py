"""The main job end to end: ``rmlprep run`` vs ``datasets.map`` pipelines on the same corpus.

    python bench/bench_pipeline.py [--reps 3] [--workers 1,2]

Corpus: the PERF-NOTES one, 45.5 MB of JSONL (Debian handbook in 26 languages, Python docs,
754 language samples: parts handbook, pydocs, gflanguages of ``make_text_corpus.sh``, read
from ``~/.cache/rmlprep-corpus/parts``); GPT-2 in every tool. Each measurement runs in a fresh
subprocess: wall time (includes interpreter start-up and imports) and the peak RSS of the
largest process of the tree (``RUSAGE_CHILDREN`` max RSS):

- ``rmlprep run`` (pretrain: tokenize, eos between documents, pack into rows of 2048, Parquet
  shards, manifest), workers 1 and 2;
- ``datasets.map`` + the Hugging Face fast tokenizer (``tokenizers``, tokenizer.json) +
  ``group_texts`` (concatenate, cut into 2048) + ``to_parquet``, num_proc 1 and 2 (the usual
  recipe of the Hugging Face examples);
- the same with tiktoken instead of the fast tokenizer (the fastest peer in PERF-NOTES).

Prints MB/s, the ratio of rmlprep to the best peer at the same worker count, and writes
``bench/results/pipeline-<time>.json``. Speed is measured here, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS", Path.home() / ".cache" / "rmlprep-real-tokenizers"))
PARTS_DIR = Path(os.environ.get("RMLPREP_CORPUS", Path.home() / ".cache" / "rmlprep-corpus")) / "parts"
PARTS = ("handbook", "pydocs", "gflanguages")
SEQ_LEN = 2048

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
[run]
workers = {workers}
progress = "log"
histogram = false
"""

PEER = r'''
import sys, time, json
from datasets import load_dataset, disable_caching
disable_caching()
kind, num_proc, out, tok_path, ranks_path, seq_len = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
files = sys.argv[7:]
t0 = time.perf_counter()
ds = load_dataset("json", data_files=files, split="train")
if kind == "hf":
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_path)
    eos = tok.token_to_id("<|endoftext|>")
    def encode(batch):
        return {"input_ids": [e.ids + [eos] for e in tok.encode_batch(batch["text"], add_special_tokens=False)]}
else:
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    pat = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    enc = tiktoken.Encoding("gpt2", pat_str=pat, mergeable_ranks=load_tiktoken_bpe(ranks_path),
                            special_tokens={"<|endoftext|>": 50256})
    def encode(batch):
        return {"input_ids": [ids + [50256] for ids in enc.encode_ordinary_batch(batch["text"], num_threads=1)]}
ds = ds.map(encode, batched=True, num_proc=num_proc, remove_columns=ds.column_names)
def group_texts(batch):
    flat = [i for ids in batch["input_ids"] for i in ids]
    n = len(flat) // seq_len * seq_len
    return {"input_ids": [flat[i:i + seq_len] for i in range(0, n, seq_len)]}
ds = ds.map(group_texts, batched=True, batch_size=1000, num_proc=num_proc)
ds.to_parquet(out + "/train.parquet")
print(json.dumps({"rows": len(ds), "wall": time.perf_counter() - t0}))
'''


def corpus(paths: list[str] | None = None) -> tuple[list[Path], int]:
    files = [Path(p).expanduser().resolve() for p in paths] if paths else [PARTS_DIR / f"{p}.jsonl" for p in PARTS]
    missing = [f for f in files if not f.exists()]
    if missing:
        raise SystemExit(f"missing {missing}: build it with `PARTS=\"{' '.join(PARTS)}\" bash "
                         "../shared/corpora/make_text_corpus.sh`")
    return files, sum(f.stat().st_size for f in files)


_WRAP = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
         "print('MAXRSS_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); "
         "sys.exit(r.returncode)")


def timed(cmd: list[str], env=None) -> tuple[float, float, str]:
    """Wall seconds, peak RSS (MB) of the largest process of the command's tree, stdout.

    A fresh wrapper process runs the command, so its RUSAGE_CHILDREN covers this run only."""
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _WRAP, *cmd], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed: {p.stderr[-2000:]}")
    kb = int(p.stderr.rsplit("MAXRSS_KB", 1)[1].split()[0])
    return wall, kb / 1024, p.stdout


def run_rmlprep(files, workers: int, tmp: Path) -> tuple[float, float]:
    out = tmp / f"rml-{workers}-{time.monotonic_ns()}"
    cfg = tmp / f"cfg-{workers}.toml"
    cfg.write_text(CONFIG.format(paths=", ".join(f'"{f}"' for f in files), tok=REAL / "gpt2" / "gpt2.tiktoken",
                                 seq_len=SEQ_LEN, out=out, workers=workers))
    wall, rss, _ = timed([sys.executable, "-m", "rmlprep.cli", "run", str(cfg)],
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    return wall, rss


def run_peer(kind: str, files, workers: int, tmp: Path) -> tuple[float, float]:
    out = tmp / f"{kind}-{workers}-{time.monotonic_ns()}"
    out.mkdir()
    env = {**os.environ, "RAYON_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    wall, rss, _ = timed([sys.executable, "-c", PEER, kind, str(workers), str(out),
                          str(REAL / "hf" / "gpt2" / "tokenizer.json"), str(REAL / "gpt2" / "gpt2.tiktoken"),
                          str(SEQ_LEN), *map(str, files)], env=env)
    return wall, rss


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--files", nargs="*", help="JSONL files with a text column (default: the PERF-NOTES parts)")
    args = ap.parse_args(argv)
    files, nbytes = corpus(args.files)
    mb = nbytes / 1e6
    print(f"corpus: {mb:.1f} MB in {len(files)} files; GPT-2, seq_len {SEQ_LEN}; min wall of {args.reps} runs")
    results = []
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for workers in [int(w) for w in args.workers.split(",")]:
            tools = [("rmlprep run", lambda: run_rmlprep(files, workers, tmp))]
            if not args.skip_peers:
                tools += [("datasets.map + HF fast tokenizer", lambda: run_peer("hf", files, workers, tmp)),
                          ("datasets.map + tiktoken", lambda: run_peer("tiktoken", files, workers, tmp))]
            row = {"workers": workers}
            for name, fn in tools:
                runs = [fn() for _ in range(args.reps)]
                wall = min(r[0] for r in runs)
                row[name] = {"wall": wall, "mbps": mb / wall, "peak_rss_mb": max(r[1] for r in runs),
                             "walls": [r[0] for r in runs]}
                print(f"  workers={workers} {name:34s} {wall:7.2f} s {mb / wall:7.2f} MB/s "
                      f"largest process peak RSS {row[name]['peak_rss_mb']:.0f} MB", flush=True)
            peers = [v["mbps"] for k, v in row.items() if k not in ("workers", "rmlprep run")]
            if peers:
                row["ratio_to_best_peer"] = row["rmlprep run"]["mbps"] / max(peers)
                print(f"  workers={workers} rmlprep / best peer: x{row['ratio_to_best_peer']:.2f}")
            results.append(row)
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / f"pipeline-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"corpus_mb": mb, "files": [str(f) for f in files], "results": results}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
