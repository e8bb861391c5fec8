"""Cold-process load time of real tokenizers, with and without the load-time cache, against
``tokenizers.Tokenizer.from_file`` in the same run.

    python -m bench.bench_load [--reps 5]

Each measurement is a fresh ``python3 -c`` process timing from before the import (``rmlprep``
or ``tokenizers``) to a ready tokenizer. Cases, run in alternating order so machine load hits
all alike:

- ``hf/llama3/tokenizer.json`` (128,256 tokens, 280,147 merges), ``hf/gemma3/tokenizer.json``
  (262,145 tokens, 514,906 merges): rmlprep ``load_tokenizer`` with the cache entry present
  (``cached``), with ``RMLPREP_TOKENIZER_CACHE=0`` (``parse``), and the peer on the same file;
- ``gguf/ggml-vocab-qwen2.gguf`` (151,936 tokens): rmlprep cached and parsed; the peer loads
  ``hf/qwen2.5/tokenizer.json`` (the same vocabulary and merges).

The cache goes to a temporary ``RMLPREP_CACHE`` filled by one load per file before timing (its
digest memo, :mod:`rmlprep.cache_memo`, remembers only files unchanged for 2 s, as the real
files are). Python's bytecode caches are written first, as ``pip install`` does.
Prints median and min seconds and rmlprep's ratio to the peer (median). Speed is measured
here, never asserted in tests. Real files: ``bash ../shared/real-tokenizers/get.sh``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS", Path.home() / ".cache" / "rmlprep-real-tokenizers"))

_RMLPREP = ("import time; t0 = time.perf_counter(); from rmlprep import load_tokenizer; "
            "tok = load_tokenizer({path!r}); print(time.perf_counter() - t0)")
_TOKENIZERS = ("import time; t0 = time.perf_counter(); import tokenizers; "
               "tok = tokenizers.Tokenizer.from_file({path!r}); print(time.perf_counter() - t0)")

#: name -> (rmlprep's file, the peer's file), relative to REAL
FILES = {
    "llama3": ("hf/llama3/tokenizer.json", "hf/llama3/tokenizer.json"),
    "gemma3": ("hf/gemma3/tokenizer.json", "hf/gemma3/tokenizer.json"),
    "qwen2 gguf": ("gguf/ggml-vocab-qwen2.gguf", "hf/qwen2.5/tokenizer.json"),
}


def _time(code: str, env: dict[str, str]) -> float:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as cache:
        base = dict(os.environ, PYTHONPATH=str(ROOT), RMLPREP_CACHE=cache)
        # bytecode caches as an installed package has them (pip compiles on install): without
        # them every run compiles the modules it imports, time no user pays
        base.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run([sys.executable, "-c", "import rmlprep.load, rmlprep.gguf, rmlprep.hf"], env=base, check=True)
        cached = dict(base, RMLPREP_TOKENIZER_CACHE="1")
        parse = dict(base, RMLPREP_TOKENIZER_CACHE="0")
        cases: dict[str, tuple[str, dict[str, str]]] = {}
        for name, (ours, peer) in FILES.items():
            if not (REAL / ours).is_file() or not (REAL / peer).is_file():
                print(f"{name}: {REAL / ours} or {REAL / peer} is absent; skipped")
                continue
            code = _RMLPREP.format(path=str(REAL / ours))
            _time(code, cached)  # writes the entry (and warms the OS file cache)
            cases[f"{name} rmlprep cached"] = (code, cached)
            cases[f"{name} rmlprep parse"] = (code, parse)
            cases[f"{name} tokenizers"] = (_TOKENIZERS.format(path=str(REAL / peer)), base)
        times: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(a.reps):
            for k, (code, env) in cases.items():
                times[k].append(_time(code, env))
    for k, ts in times.items():
        print(f"{k:32s} median {statistics.median(ts):.3f} s  min {min(ts):.3f} s  ({len(ts)} runs)")
    for name in FILES:
        peer = times.get(f"{name} tokenizers")
        if not peer:
            continue
        for how in ("cached", "parse"):
            ours = times[f"{name} rmlprep {how}"]
            print(f"{name}: rmlprep {how} / tokenizers = {statistics.median(ours) / statistics.median(peer):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
