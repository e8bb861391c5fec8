"""Cold-process load time of GGUF tokenizers, against a peer loading the same vocabulary.

    python -m bench.bench_load_gguf [--reps 5]

Each measurement is a fresh ``python3 -c`` process timing, from before ``import rmlprep`` to a
ready tokenizer, ``load_tokenizer(<file>.gguf)``:

- ``ggml-vocab-qwen2.gguf`` (151,936 tokens, 151,387 merges) and the peer
  ``tokenizers.Tokenizer.from_file(hf/qwen2.5/tokenizer.json)`` (the same vocabulary and merges,
  an exact tokenizer), in alternating order so machine load hits both alike;
- ``SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB file, 49,152 tokens): the metadata only is read.

Prints min and median seconds and rmlprep's ratio to the peer. Speed is measured here, never
asserted in tests. Real files: ``bash ../shared/real-tokenizers/get.sh``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS", Path.home() / ".cache" / "rmlprep-real-tokenizers"))

_RMLPREP = "import time; t0 = time.perf_counter(); from rmlprep import load_tokenizer; " \
           "tok = load_tokenizer({path!r}); print(time.perf_counter() - t0)"
_TOKENIZERS = "import time; t0 = time.perf_counter(); import tokenizers; " \
              "tok = tokenizers.Tokenizer.from_file({path!r}); print(time.perf_counter() - t0)"


def _time(code: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode caches as an installed package has them
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return float(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args(argv)
    cases = {
        "qwen2 gguf (rmlprep)": _RMLPREP.format(path=str(REAL / "gguf" / "ggml-vocab-qwen2.gguf")),
        "qwen2.5 tokenizer.json (tokenizers)": _TOKENIZERS.format(path=str(REAL / "hf" / "qwen2.5" / "tokenizer.json")),
        "SmolLM2 gguf (rmlprep)": _RMLPREP.format(path=str(REAL / "gguf" / "SmolLM2-135M-Instruct.Q4_1.gguf")),
    }
    times: dict[str, list[float]] = {k: [] for k in cases}
    _time(cases["qwen2 gguf (rmlprep)"])  # warm the OS file cache (and any rmlprep cache)
    for _ in range(a.reps):
        for name, code in cases.items():
            times[name].append(_time(code))
    for name, ts in times.items():
        print(f"{name:40s} min {min(ts):.3f} s  median {statistics.median(ts):.3f} s  ({len(ts)} runs)")
    ours, peer = times["qwen2 gguf (rmlprep)"], times["qwen2.5 tokenizer.json (tokenizers)"]
    print(f"qwen2: rmlprep / tokenizers = {statistics.median(ours) / statistics.median(peer):.2f} (median), "
          f"{min(ours) / min(peer):.2f} (min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
