"""Benchmark rmlprep's encoder against its peers on the same real corpus, in the same run.

    python -m bench                 # or: python bench/run.py
    python -m bench --mb 10 --reps 3 --only gpt2,llama2

For each tokenizer (GPT-2, Llama 3, Qwen2.5, Llama 2, Mistral, Gemma) it runs rmlprep (``encode``
per document / ``encode_batch`` returning lists, like the peers, and ``encode_batch_flat``
returning the flat uint32 arrays the pipeline uses) and the reference libraries (tiktoken, tokenizers, sentencepiece) over the same texts, several
repetitions each in a fresh subprocess (so thread settings do not leak), single core and 2
workers, checks that the ids agree, and prints MB/s, tokens/s and rmlprep's ratio to each peer
(min and median over repetitions). Results go to ``bench/results/encode-<time>.json`` and a
bar chart PNG (matplotlib, when installed).

Corpus: ``~/.cache/rmlprep-corpus/pretrain.jsonl`` when ``make_text_corpus.sh`` has built it
(the Debian-built corpus: handbook in 26 languages, man pages, Python docs, code), else the
texts of ``../shared/corpora/text-multilingual.jsonl`` and the chat sets' message contents;
cut to ``--mb`` megabytes, documents in file order. Speed is measured here, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
REAL = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS", Path.home() / ".cache" / "rmlprep-real-tokenizers"))
CORPUS_CACHE = Path.home() / ".cache" / "rmlprep-bench"

#: name -> (rmlprep load_tokenizer args, peers: list of (library, how to build))
TOKENIZERS = {
    "gpt2": {"path": "gpt2/gpt2.tiktoken", "kw": {"name": "gpt2"},
             "peers": [("tiktoken", "gpt2/gpt2.tiktoken"), ("tokenizers", "hf/gpt2/tokenizer.json")]},
    "llama3": {"path": "llama3/llama3.tiktoken", "kw": {"name": "llama3"},
               "peers": [("tiktoken", "llama3/llama3.tiktoken"), ("tokenizers", "hf/llama3/tokenizer.json")]},
    "qwen2.5": {"path": "hf/qwen2.5/tokenizer.json", "kw": {},
                "peers": [("tokenizers", "hf/qwen2.5/tokenizer.json")]},
    "llama2": {"path": "llama2/tokenizer.model", "kw": {},
               "peers": [("sentencepiece", "llama2/tokenizer.model")]},
    "mistral": {"path": "mistral/tokenizer.model.v1", "kw": {},
                "peers": [("sentencepiece", "mistral/tokenizer.model.v1"),
                          ("tokenizers", "hf/mistral-7b-v0.1/tokenizer.json")]},
    "gemma": {"path": "hf/gemma/tokenizer.json", "kw": {},
              "peers": [("tokenizers", "hf/gemma/tokenizer.json")]},
}

TIKTOKEN_PATTERNS = {
    "gpt2": r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    "llama3": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
}


# -- corpus ------------------------------------------------------------------------------------
def build_corpus(mb: float) -> Path:
    """Write the benchmark texts (a JSON list of str) once; returns its path."""
    CORPUS_CACHE.mkdir(parents=True, exist_ok=True)
    debian = Path.home() / ".cache" / "rmlprep-corpus" / "pretrain.jsonl"
    src = debian if debian.exists() else None
    out = CORPUS_CACHE / f"texts-{'debian' if src else 'shared'}-{mb:g}MB.json"
    if out.exists():
        return out
    limit = int(mb * 1e6)
    texts: list[str] = []
    size = 0

    def take(text):
        nonlocal size
        if isinstance(text, str) and text and size < limit:
            texts.append(text)
            size += len(text.encode("utf-8", "surrogatepass"))

    files = [src] if src else [SHARED / "corpora" / "text-multilingual.jsonl",
                               *sorted((SHARED / "corpora" / "chat").glob("*.jsonl"))]
    for path in files:
        with open(path, encoding="utf-8", newline="\n") as f:
            for line in f.read().split("\n"):
                if not line.strip() or size >= limit:
                    continue
                row = json.loads(line)
                if "text" in row:
                    take(row["text"])
                for m in row.get("messages") or []:
                    take(m.get("content"))
    out.write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
    return out


# -- one measurement, in a subprocess --------------------------------------------------------
def _measure(args) -> dict:
    """Run inside a fresh process: encode all texts with one library, return timings."""
    texts = json.loads(Path(args.texts).read_text(encoding="utf-8"))
    nbytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    lib, workers, real = args.lib, args.workers, REAL
    spec = TOKENIZERS[args.tok]
    if lib == "rmlprep":
        sys.path.insert(0, str(ROOT))
        import rmlprep

        tok = rmlprep.load_tokenizer(real / spec["path"], **spec["kw"])
        if workers == 1:
            def run():
                return [tok.encode(t, parse_special=False) for t in texts]
        else:
            batch = getattr(tok, "encode_batch", None)

            def run():
                return batch(texts, parse_special=False, num_threads=workers) if _takes_threads(batch) else \
                    _pool_encode(tok, texts, workers)
    elif lib == "rmlprep-flat":
        sys.path.insert(0, str(ROOT))
        import rmlprep

        tok = rmlprep.load_tokenizer(real / spec["path"], **spec["kw"])

        def run():  # Arrow-ready uint32 ids + int64 offsets, what the pipeline and arrow.py use
            flat, offsets = tok.encode_batch_flat(texts, parse_special=False, num_threads=workers)
            return _Rows(flat, offsets)
    elif lib == "tiktoken":
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        path = real / dict(spec["peers"])["tiktoken"]
        ranks = load_tiktoken_bpe(str(path))
        specials = {"<|endoftext|>": 50256} if args.tok == "gpt2" else {"<|begin_of_text|>": 128000}
        enc = tiktoken.Encoding(args.tok, pat_str=TIKTOKEN_PATTERNS[args.tok], mergeable_ranks=ranks,
                                special_tokens=specials)

        def run():
            if workers == 1:
                return [enc.encode_ordinary(t) for t in texts]
            return enc.encode_ordinary_batch(texts, num_threads=workers)
    elif lib == "tokenizers":
        from tokenizers import Tokenizer as HFTokenizer

        hf = HFTokenizer.from_file(str(real / dict(spec["peers"])["tokenizers"]))

        def run():
            return [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    elif lib == "sentencepiece":
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(real / dict(spec["peers"])["sentencepiece"]))

        def run():
            return sp.encode(texts, num_threads=workers)
    else:
        raise SystemExit(f"unknown library {lib}")
    times = []
    ids = None
    for _ in range(args.reps):
        t0 = time.perf_counter()
        ids = run()
        times.append(time.perf_counter() - t0)
    digest = _digest(ids)
    return {"tok": args.tok, "lib": lib, "workers": workers, "bytes": nbytes,
            "tokens": sum(len(x) for x in ids), "times": times, "ids_sha": digest}


class _Rows:
    """Rows of a flat id array, iterable like a list of lists (for the digest and counts)."""

    def __init__(self, flat, offsets):
        self.flat, self.offsets = flat, offsets

    def __len__(self):
        return len(self.offsets) - 1

    def __iter__(self):
        o = self.offsets
        for i in range(len(o) - 1):
            yield self.flat[o[i]:o[i + 1]]


def _takes_threads(fn) -> bool:
    import inspect

    try:
        return fn is not None and "num_threads" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _pool_encode(tok, texts, workers):
    from multiprocess import Pool

    chunks = [texts[i::workers] for i in range(workers)]
    with Pool(workers) as pool:
        parts = pool.map(lambda ch: [tok.encode(t, parse_special=False) for t in ch], chunks)
    out = [None] * len(texts)
    for w, part in enumerate(parts):
        out[w::workers] = part
    return out


def _digest(ids) -> str:
    import hashlib

    h = hashlib.sha256()
    for row in ids:
        h.update(len(row).to_bytes(4, "little"))
        h.update(_as_u32(row))
    return h.hexdigest()


def _as_u32(row) -> bytes:
    import numpy as np

    return np.asarray(row, dtype="<u4").tobytes()


def measure(tok, lib, workers, texts_path, reps) -> dict | None:
    env = dict(os.environ)
    env["RAYON_NUM_THREADS"] = str(workers)  # tokenizers' thread pool
    env["TOKENIZERS_PARALLELISM"] = "true" if workers > 1 else "false"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_measure", "--tok", tok, "--lib", lib,
           "--workers", str(workers), "--texts", str(texts_path), "--reps", str(reps)]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"  {tok}/{lib}/{workers}: failed: {p.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description="rmlprep vs tiktoken / tokenizers / sentencepiece")
    ap.add_argument("--mb", type=float, default=20.0, help="corpus size in MB (default 20)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated tokenizer names")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--_measure", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tok"), ap.add_argument("--lib"), ap.add_argument("--texts")
    args = ap.parse_args(argv)
    if args._measure:
        args.workers = int(args.workers)
        print(json.dumps(_measure(args)))
        return
    names = [n for n in (args.only.split(",") if args.only else TOKENIZERS) if n]
    texts_path = build_corpus(args.mb)
    print(f"corpus: {texts_path}")
    results = []
    for name in names:
        spec = TOKENIZERS[name]
        if not (REAL / spec["path"]).exists():
            print(f"{name}: {REAL / spec['path']} missing (run ../shared/real-tokenizers/get.sh)")
            continue
        for workers in [int(w) for w in args.workers.split(",")]:
            row = {"tok": name, "workers": workers}
            ours = measure(name, "rmlprep", workers, texts_path, args.reps)
            if ours is None:
                continue
            row["rmlprep"] = ours
            flat = measure(name, "rmlprep-flat", workers, texts_path, args.reps)
            if flat is not None:
                row["rmlprep-flat"] = flat
            for lib, _path in spec["peers"]:
                peer = measure(name, lib, workers, texts_path, args.reps)
                if peer is not None:
                    row[lib] = peer
            results.append(row)
            report(row)
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = out_dir / f"encode-{stamp}.json"
    out.write_text(json.dumps({"corpus": str(texts_path), "results": results}, indent=1))
    print(f"wrote {out}")
    chart(results, out.with_suffix(".png"))


def _mbps(m):
    return [m["bytes"] / 1e6 / t for t in m["times"]]


def report(row) -> None:
    ours = row["rmlprep"]
    o = _mbps(ours)
    line = (f"{row['tok']:8s} w={row['workers']} rmlprep {max(o):6.2f} MB/s "
            f"{ours['tokens'] / min(ours['times']) / 1e6:5.2f} Mtok/s")
    if "rmlprep-flat" in row:
        f = row["rmlprep-flat"]
        same = "same ids" if f["ids_sha"] == ours["ids_sha"] else "IDS DIFFER"
        line += f" (flat arrays {max(_mbps(f)):6.2f} MB/s, {same})"
    for lib in ("tiktoken", "tokenizers", "sentencepiece"):
        if lib in row:
            p = _mbps(row[lib])
            same = "same ids" if row[lib]["ids_sha"] == ours["ids_sha"] else "IDS DIFFER"
            line += (f" | {lib} {max(p):6.2f} MB/s x{max(o) / max(p):4.2f} (median "
                     f"x{statistics.median(o) / statistics.median(p):4.2f}, {same})")
    print(line, flush=True)


def chart(results, path: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no chart")
        return
    labels, series = [], {}
    for row in results:
        labels.append(f"{row['tok']}\nw={row['workers']}")
        for lib in ("rmlprep", "rmlprep-flat", "tiktoken", "tokenizers", "sentencepiece"):
            series.setdefault(lib, []).append(max(_mbps(row[lib])) if lib in row else 0)
    fig, ax = plt.subplots(figsize=(max(6, len(labels) * 1.2), 4))
    width = 0.16
    for k, (lib, vals) in enumerate(series.items()):
        ax.bar([i + k * width for i in range(len(labels))], vals, width, label=lib)
    ax.set_xticks([i + 2 * width for i in range(len(labels))], labels, fontsize=8)
    ax.set_ylabel("MB/s (best of reps)")
    ax.set_title("encode throughput, same corpus, same run")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
