"""Encode throughput of rmlprep and the exact peers on the same real corpora, in one run.

    python -m bench                    # everything: this table, the main job, the README section
    python -m bench encode             # this table only
    python -m bench encode --tokenizers gpt2,llama3 --corpora multilingual --reps 3

Peers: tiktoken, Hugging Face ``tokenizers``, sentencepiece (the references), and the fast
exact tokenizers fastokens and gigatoken (``pip install -e .[bench]``). A peer that is not
installed, or cannot load a tokenizer, is reported as such and left out.

Protocol (the one of issue 14): a fresh process per (corpus, tokenizer, library, mode); the
texts are read before the clock starts; the tokenizer load is timed apart. Single thread: one
``encode`` call per document (rmlprep ``encode(t, parse_special=False)``, tiktoken
``encode_ordinary``, ``tokenizers`` / fastokens ``encode(t, add_special_tokens=False)``,
gigatoken ``encode``, sentencepiece ``encode``); rmlprep twice: ``encode`` (a list of int, as
tiktoken, fastokens, ``tokenizers`` and sentencepiece return) and ``encode_to_numpy`` (a numpy
uint32 array, as gigatoken returns), so each compares like with like. Batch on 2 threads: rmlprep
``encode_batch_flat(num_threads=2)``, tiktoken ``encode_ordinary_batch(num_threads=2)``,
fastokens ``encode_batch_flat`` / gigatoken ``encode_batch`` on a 2-thread rayon pool
(``RAYON_NUM_THREADS=2``); rmlprep's batch is also run on 1 thread (its scaling). Cold = the
first pass over text the process has never seen; warm = the best of the passes after it. MB/s
of UTF-8. The reference libraries ``tokenizers`` and sentencepiece (0.5-5 MB/s) get one pass
(cold) and no batch row (the default run: GPT-2, Llama 3, Qwen2.5, o200k, Llama 2 on both
corpora; batch rows for GPT-2 and Llama 3).

One thread means one core: every 1-thread process (the per-document rows and rmlprep's 1-thread
batch) is pinned to the same CPU (``sched_setaffinity``, the mask Rust's ``available_parallelism``
and so rayon's and fastokens' default pool sizes read) and told so by each library's own setting:
``RAYON_NUM_THREADS=1`` (tiktoken, gigatoken, fastokens' rayon pool), ``FASTOKENS_BPE_THREADS=1``
(fastokens splits one large ``encode`` across a pool of that many threads, all cores by default),
``TOKENIZERS_PARALLELISM=false``, ``OMP_NUM_THREADS=1``; ``--pin none`` drops the pinning, the
settings stay. Each pass's CPU time (all threads, ``time.process_time``) and the calling
thread's (``RUSAGE_THREAD``) are recorded beside its wall time, so a library that still used a
second thread shows it (CPU above wall, a share of the CPU off the calling thread); the 2-thread
pass's CPU is shown per worker.

Every row, of every library and both thread counts, is the median of ``--procs`` (3) fresh
processes of ``--reps`` (2) passes each: cold = the median of their cold passes, warm = the median
of each process's best warm pass. The processes run in rounds, each round every row of one
(corpus, tokenizer) in turn (rmlprep's 1- and 2-thread batches next to each other), so a change of
the machine's load falls on every library alike; one cold pass per row moved 10-40% between two
runs of this bench. The reference libraries (``tokenizers``, sentencepiece: 0.5-5 MB/s, one cold
pass of 3-20 s, never the fastest peer) get ``--slow-procs`` (1) processes, which keeps the default
run near 7 minutes on 2 cores.

Same ids: every library's ids are hashed per document and compared with rmlprep's (in the same
special-token mode: tiktoken and sentencepiece with ``parse_special=False``; ``tokenizers``,
fastokens and gigatoken parse special-token text, like ``parse_special=True``); a difference is
printed with the number of documents that differ.

Corpora (:mod:`bench.corpora`): 16.5 MB sampled from the Debian-built corpus
(``~/.cache/rmlprep-corpus/pretrain.jsonl``) and ``../shared/corpora/text-multilingual.jsonl``.
Results go to ``bench/results/encode-<time>.json``; :mod:`bench.report` turns them into the
README tables. Speed is measured here, never asserted in tests.
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

from bench.corpora import CORPORA, corpus_file, read_texts  # noqa: E402

REAL = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS", Path.home() / ".cache" / "rmlprep-real-tokenizers"))
RESULTS = ROOT / "bench" / "results"

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
                  r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

#: name -> rmlprep's file (and load_tokenizer kwargs), then each peer's source
TOKENIZERS: dict[str, dict] = {
    "gpt2": {"label": "GPT-2", "rmlprep": ("gpt2/gpt2.tiktoken", {"name": "gpt2"}),
             "tiktoken": ("gpt2/gpt2.tiktoken", GPT2_PATTERN, {"<|endoftext|>": 50256}),
             "hf": "hf/gpt2"},
    "llama3": {"label": "Llama 3", "rmlprep": ("llama3/llama3.tiktoken", {"name": "llama3"}),
               "tiktoken": ("llama3/llama3.tiktoken", LLAMA3_PATTERN, {"<|begin_of_text|>": 128000}),
               "hf": "hf/llama3"},
    "qwen2.5": {"label": "Qwen2.5", "rmlprep": ("hf/qwen2.5/tokenizer.json", {}), "hf": "hf/qwen2.5"},
    "o200k": {"label": "o200k (GPT-4o)", "rmlprep": ("hf/gpt-4o/tokenizer.json", {}), "hf": "hf/gpt-4o"},
    "llama2": {"label": "Llama 2 (SentencePiece)", "rmlprep": ("llama2/tokenizer.model", {}),
               "sentencepiece": "llama2/tokenizer.model"},
    "gemma": {"label": "Gemma (SentencePiece, 256k)", "rmlprep": ("hf/gemma/tokenizer.json", {}),
              "hf": "hf/gemma"},
}

#: display order of the columns
LIBS = ("rmlprep", "rmlprep-numpy", "tiktoken", "fastokens", "gigatoken", "tokenizers", "sentencepiece")
#: rmlprep's own rows (never a peer): ``encode`` (a list) and ``encode_to_numpy`` (a uint32 array)
OURS = ("rmlprep", "rmlprep-numpy")
#: what each library's per-document call returns (printed under the table)
RETURNS = {"rmlprep": "list of int", "rmlprep-numpy": "numpy uint32 array", "tiktoken": "list of int",
           "fastokens": "list of int", "gigatoken": "numpy uint32 array", "tokenizers": "list of int",
           "sentencepiece": "list of int"}
#: the default run (the issue's table; under 10 minutes on 2 cores): Gemma's 256k vocab on request
DEFAULT_TOKENIZERS = ("gpt2", "llama3", "qwen2.5", "o200k", "llama2")
#: the batch rows of the default run
DEFAULT_BATCH_TOKENIZERS = ("gpt2", "llama3")
#: libraries in the batch rows (the references are far slower and have their own table rows)
BATCH_LIBS = ("rmlprep", "tiktoken", "fastokens", "gigatoken")
#: 0.5-5 MB/s: one pass (cold) only, else they alone would take most of the run
SLOW_LIBS = ("tokenizers", "sentencepiece")
#: libraries that parse special-token text in their plain encode (compared with parse_special=True)
PARSES_SPECIALS = {"tokenizers", "fastokens", "gigatoken"}


def libs_for(tok: str) -> list[str]:
    spec = TOKENIZERS[tok]
    out = ["rmlprep", "rmlprep-numpy"]
    if "tiktoken" in spec:
        out.append("tiktoken")
    if "hf" in spec:
        out += ["fastokens", "gigatoken", "tokenizers"]
    if "sentencepiece" in spec:
        out += ["gigatoken", "sentencepiece"]
    return out


# -- one measurement, in a fresh process ----------------------------------------------------------


def _load(lib: str, tok: str, threads: int):
    """(encode_one, encode_batch) for a library and tokenizer; each returns id sequences."""
    spec = TOKENIZERS[tok]
    if lib in OURS:
        import rmlprep

        path, kw = spec["rmlprep"]
        t = rmlprep.load_tokenizer(REAL / path, **kw)
        one = ((lambda s: t.encode(s, parse_special=False)) if lib == "rmlprep"
               else (lambda s: t.encode_to_numpy(s, parse_special=False)))
        return (one, (lambda texts: _Rows(*t.encode_batch_flat(texts, parse_special=False, num_threads=threads))),
                t if lib == "rmlprep" else None)
    if lib == "tiktoken":
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe

        path, pattern, specials = spec["tiktoken"]
        enc = tiktoken.Encoding(tok, pat_str=pattern, mergeable_ranks=load_tiktoken_bpe(str(REAL / path)),
                                special_tokens=specials)
        return enc.encode_ordinary, (lambda texts: enc.encode_ordinary_batch(texts, num_threads=threads)), None
    if lib == "tokenizers":
        from tokenizers import Tokenizer

        hf = Tokenizer.from_file(str(REAL / spec["hf"] / "tokenizer.json"))
        return ((lambda s: hf.encode(s, add_special_tokens=False).ids),
                (lambda texts: [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]), None)
    if lib == "fastokens":
        import fastokens
        import numpy as np

        ft = fastokens.Tokenizer.from_file(str(REAL / spec["hf"] / "tokenizer.json"))

        def batch(texts):
            ids, off = ft.encode_batch_flat(texts)
            return _Rows(np.frombuffer(ids, np.uint32), np.frombuffer(off, np.uint64).astype(np.int64))

        return (lambda s: ft.encode(s).ids), batch, None
    if lib == "gigatoken":
        import gigatoken as gt
        import numpy as np  # here, untimed: gigatoken imports numpy in its first encode, which put 30-70 ms
        # and 1,800 page faults into its cold pass (GPT-2, multilingual: 0.155 s against 0.124 s with numpy
        # imported first, eighteenth sitting); rmlprep imports numpy with its own import

        if "hf" in spec:
            g = gt.Tokenizer(str(REAL / spec["hf"]))
        else:
            g = gt.Tokenizer.from_sentencepiece(REAL / spec["sentencepiece"])

        def batch(texts):
            import awkward as ak

            arr = g.encode_batch(texts, parallel=threads > 1)
            counts = ak.num(arr).to_numpy().astype(np.int64)
            offsets = np.zeros(len(counts) + 1, np.int64)
            np.cumsum(counts, out=offsets[1:])
            return _Rows(ak.flatten(arr).to_numpy(), offsets)

        return g.encode, batch, None
    if lib == "sentencepiece":
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(REAL / spec["sentencepiece"]))
        return sp.encode, (lambda texts: sp.encode(texts, num_threads=threads)), None
    raise SystemExit(f"unknown library {lib}")


class _Rows:
    """Rows of a flat id array, iterable like a list of lists."""

    def __init__(self, flat, offsets):
        self.flat, self.offsets = flat, offsets

    def __len__(self):
        return len(self.offsets) - 1

    def __iter__(self):
        o = self.offsets
        for i in range(len(o) - 1):
            yield self.flat[o[i]:o[i + 1]]


def _digest_or_refused(rml, text: str) -> str | None:
    """The digest of rmlprep's parse_special=True ids of one text, None where it refuses the text
    (a SentencePiece .model read alone: control-token text has no reference, rmlprep.spm_special)."""
    from rmlprep.errors import TokenizeError

    try:
        return _digests([rml.encode(text)])[0]
    except TokenizeError:
        return None


def _digests(rows) -> list[str]:
    """Per-document 64-bit blake2b of the ids as little-endian uint32."""
    import hashlib

    import numpy as np

    return [hashlib.blake2b(np.asarray(r, dtype="<u4").tobytes(), digest_size=8).hexdigest() for r in rows]


#: what holds each library to one thread in the 1-thread rows, besides the pinned CPU (printed in the table)
ONE_THREAD = {"rmlprep": "one thread (its `encode`)", "rmlprep-numpy": "one thread (its `encode_to_numpy`)",
              "tiktoken": "RAYON_NUM_THREADS=1",
              "fastokens": "FASTOKENS_BPE_THREADS=1, RAYON_NUM_THREADS=1", "gigatoken": "RAYON_NUM_THREADS=1",
              "tokenizers": "TOKENIZERS_PARALLELISM=false", "sentencepiece": "one thread (its `encode`)"}


def _run_queue_wait() -> float:
    """Seconds the calling thread has waited runnable for a CPU since it started (the second field of
    /proc/thread-self/schedstat); 0.0 where the kernel does not say."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _cpu_now() -> tuple[float, float, int, float, float]:
    """(CPU seconds of the whole process, of the calling thread, minor faults of the process, system CPU
    seconds of the process, seconds the calling thread has waited for a CPU)."""
    import resource

    me, whole = resource.getrusage(resource.RUSAGE_THREAD), resource.getrusage(resource.RUSAGE_SELF)
    return time.process_time(), me.ru_utime + me.ru_stime, whole.ru_minflt, whole.ru_stime, _run_queue_wait()


def _measure(args) -> dict:
    if args.cpu is not None:  # before any library builds a thread pool sized by the affinity mask
        os.sched_setaffinity(0, {args.cpu})
    texts = read_texts(Path(args.corpus))
    nbytes = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    t0 = time.perf_counter()
    one, batch, rml = _load(args.lib, args.tok, args.threads)
    load_s = time.perf_counter() - t0
    if args.mode == "doc":
        def run(tx):
            return [one(t) for t in tx]
    else:
        def run(tx):
            return batch(tx)
    times, cpu, cpu_main, faults, sys_s, waited, first = [], [], [], [], [], [], None
    for rep in range(args.reps):
        ids = None  # the previous pass's result is freed here, not inside this pass's timing
        # --warm-new-str: a warm pass reads new str objects of the same text (made untimed), so no
        # library reads what its cold pass left in the strs (PyUnicode_AsUTF8AndSize keeps their UTF-8)
        tx = [(t + ".")[:-1] for t in texts] if rep and args.warm_new_str else texts
        c0, m0, f0, s0, q0 = _cpu_now()
        t0 = time.perf_counter()
        ids = run(tx)
        times.append(time.perf_counter() - t0)
        c1, m1, f1, s1, q1 = _cpu_now()
        cpu.append(c1 - c0)
        cpu_main.append(m1 - m0)
        faults.append(f1 - f0)
        sys_s.append(s1 - s0)
        waited.append(q1 - q0)
        if first is None:
            first = ids
    out = {"lib": args.lib, "tok": args.tok, "mode": args.mode, "threads": args.threads, "bytes": nbytes,
           "warm_new_str": bool(args.warm_new_str),
           "docs": len(texts), "tokens": int(sum(len(r) for r in first)), "load_s": load_s, "times": times,
           "cpu": cpu, "cpu_main": cpu_main, "faults": faults, "sys": sys_s, "waited_main": waited,
           "pinned": args.cpu,
           "digests": _digests(first)}
    if rml is not None:  # rmlprep's ids in the peers' special-token mode, untimed
        out["digests_specials"] = [_digest_or_refused(rml, t) for t in texts]
    return out


def pin_cpu(pin: str) -> int | None:
    """The CPU the 1-thread rows are pinned to: ``auto`` the highest one this process may use,
    ``none`` no pinning, else the number given."""
    if pin == "none" or not hasattr(os, "sched_getaffinity"):
        return None
    if pin == "auto":
        return max(os.sched_getaffinity(0))
    return int(pin)


def measure(lib: str, tok: str, corpus: Path, mode: str, threads: int, reps: int, cpu: int | None = None,
            warm_new_str: bool = False) -> dict:
    """Run one measurement in a fresh process (pinned to ``cpu`` when given); {"error": ...} when the
    library cannot run it."""
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), FASTOKENS_BPE_THREADS=str(threads),
               TOKENIZERS_PARALLELISM="true" if threads > 1 else "false", OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the load time includes the import: with bytecode caches, as installed
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [sys.executable, "-m", "bench.run", "--_measure", f.name, "--lib", lib, "--tok", tok,
               "--corpus", str(corpus), "--mode", mode, "--threads", str(threads), "--reps", str(reps)]
        if cpu is not None:
            cmd += ["--cpu", str(cpu)]
        if warm_new_str:
            cmd.append("--warm-new-str")
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
        if p.returncode != 0:
            lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
            return {"lib": lib, "tok": tok, "mode": mode, "threads": threads, "error": (lines or ["?"])[-1][:300]}
        return json.loads(Path(f.name).read_text())


# -- the whole table ------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("tiktoken", "tokenizers", "sentencepiece", "fastokens", "gigatoken", "numpy", "pyarrow"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "not installed"
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True).stdout.strip()
    except OSError:
        rev = ""
    out["rmlprep"] = rev or "?"
    out["python"] = sys.version.split()[0]
    return out


def machine() -> str:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu or 'unknown CPU'}, {os.cpu_count()} cores"


def _merged(runs: list[dict]) -> dict:
    """One result from several fresh processes of the same measurement: the process whose cold pass
    is the median (its wall, CPU and faults), as the cold figure; as the warm figure the median over
    the processes of each one's best warm pass; every process's passes under ``runs``."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    mid = sorted(ok, key=lambda r: r["times"][0])[(len(ok) - 1) // 2]
    out = dict(mid)
    warm = [min(r["times"][1:]) for r in ok if len(r["times"]) > 1]
    out["times"] = [mid["times"][0]] + ([statistics.median(warm)] if warm else [])
    out["load_s"] = statistics.median(r["load_s"] for r in ok)
    out["runs"] = [{k: r[k] for k in ("times", "cpu", "cpu_main", "faults", "sys", "waited_main") if k in r}
                   for r in ok]
    if any(r["digests"] != mid["digests"] for r in ok):  # one library, one tokenizer: ids must not move
        out["unstable_ids"] = True
    return out


def cells_for(tok: str, threads: list[int], batch_tokenizers: list[str] | None) -> list[tuple[str, str, int]]:
    """(library, mode, threads) of every row one tokenizer gets on one corpus, in table order."""
    out = []
    for n in threads:
        if n == 1:
            out += [(lib, "doc", 1) for lib in libs_for(tok)]
        elif batch_tokenizers is None or tok in batch_tokenizers:
            out.append(("rmlprep", "batch", 1))  # rmlprep's own 1-thread batch: its scaling
            out += [(lib, "batch", n) for lib in libs_for(tok) if lib in BATCH_LIBS]
    return out


def run_encode(tokenizers: list[str], corpora: list[str], reps: int, threads: list[int], log=print,
               batch_tokenizers: list[str] | None = None, pin: str = "auto", procs: int = 3,
               slow_procs: int = 1, warm_new_str: bool = False) -> dict:
    """Every row the median of ``procs`` fresh processes (``slow_procs`` for the reference libraries),
    run in rounds: each round runs every row of a (corpus, tokenizer) once, in turn, so a change of
    the machine's load falls on every library alike."""
    cpu = pin_cpu(pin)
    results = []
    files = {c: corpus_file(c) for c in corpora}
    for c in corpora:
        log(f"corpus {c}: {files[c]}")
    for c in corpora:
        for tok in tokenizers:
            src = TOKENIZERS[tok]["rmlprep"][0]
            if not (REAL / src).exists():
                log(f"  {tok}: {REAL / src} missing (run ../shared/real-tokenizers/get.sh)")
                continue
            cells = cells_for(tok, threads, batch_tokenizers)
            runs: dict[tuple, list[dict]] = {cell: [] for cell in cells}
            for i in range(max(procs, slow_procs)):
                for lib, mode, k in cells:
                    if i >= (slow_procs if lib in SLOW_LIBS else procs):
                        continue
                    if runs[(lib, mode, k)] and "error" in runs[(lib, mode, k)][0]:
                        continue  # cannot load this tokenizer: once is enough
                    runs[(lib, mode, k)].append(measure(lib, tok, files[c], mode, k, 1 if lib in SLOW_LIBS else reps,
                                                        cpu if k == 1 else None, warm_new_str))
            for cell in cells:
                r = _merged(runs[cell])
                r["corpus"] = c
                results.append(r)
                log("  " + _line(r))
    return {"machine": machine(), "versions": versions(), "reps": reps, "pinned_cpu": cpu,
            "procs": procs, "slow_procs": slow_procs, "scaling_reps": procs, "one_thread": ONE_THREAD,
            "warm_new_str": warm_new_str,
            "corpora": {c: {"path": str(files[c]), "label": CORPORA[c]["label"]} for c in corpora},
            "results": results}


def _line(r: dict) -> str:
    head = f"{r['corpus']:12s} {r['tok']:8s} {r['lib']:13s} {r['mode']:5s} t={r['threads']}"
    if "error" in r:
        return f"{head} failed: {r['error']}"
    mb = r["bytes"] / 1e6
    cold = mb / r["times"][0]
    warm = mb / min(r["times"][1:]) if len(r["times"]) > 1 else float("nan")
    cpu = f"  cold CPU/wall {r['cpu'][0] / r['times'][0]:.2f}" if r.get("cpu") else ""
    runs = f"  ({len(r['runs'])} processes)" if r.get("runs") else ""
    return f"{head} cold {cold:7.1f} warm {warm:7.1f} MB/s  load {r['load_s']:.2f} s{cpu}{runs}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokenizers", default=",".join(DEFAULT_TOKENIZERS), help=f"of {', '.join(TOKENIZERS)}")
    ap.add_argument("--batch-tokenizers", default=",".join(DEFAULT_BATCH_TOKENIZERS),
                    help="tokenizers that get the batch rows ('all': every one of --tokenizers)")
    ap.add_argument("--corpora", default=",".join(CORPORA))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=2, help="passes per process: 1 cold + warm ones (default 2)")
    ap.add_argument("--pin", default="auto",
                    help="CPU the 1-thread processes are pinned to: auto (the highest allowed), none, or a number")
    ap.add_argument("--procs", type=int, default=3,
                    help="fresh processes per row, every library alike, run in rounds (median; default 3)")
    ap.add_argument("--slow-procs", type=int, default=1,
                    help="fresh processes per row of the reference libraries tokenizers and sentencepiece "
                         "(0.5-5 MB/s, one cold pass each; default 1)")
    ap.add_argument("--warm-new-str", action="store_true",
                    help="warm passes over new str objects of the same texts (gigatoken's warm passes otherwise read "
                         "the UTF-8 its cold pass cached in each str; bench/README.md, twentieth sitting)")
    ap.add_argument("--_measure", help=argparse.SUPPRESS)
    ap.add_argument("--cpu", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--lib"), ap.add_argument("--tok"), ap.add_argument("--corpus"), ap.add_argument("--mode")
    args = ap.parse_args(argv)
    if args._measure:
        args.threads = int(args.threads)
        Path(args._measure).write_text(json.dumps(_measure(args)))
        return
    batch = None if args.batch_tokenizers == "all" else [t for t in args.batch_tokenizers.split(",") if t]
    t0 = time.perf_counter()
    doc = run_encode([t for t in args.tokenizers.split(",") if t], [c for c in args.corpora.split(",") if c],
                     args.reps, [int(t) for t in args.threads.split(",")], batch_tokenizers=batch, pin=args.pin,
                     procs=args.procs, slow_procs=args.slow_procs, warm_new_str=args.warm_new_str)
    doc["seconds"] = round(time.perf_counter() - t0, 1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"encode-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(doc, indent=1))
    from bench.report import encode_tables

    print(encode_tables(doc))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
