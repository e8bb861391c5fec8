"""Benchmark ``datasets.map(batched=True)`` with rmlprep's map function vs the HF fast tokenizer.

    python bench/bench_map.py                  # all corpora, num_proc 1 and 2, 3 runs each
    python bench/bench_map.py --reps 1 --corpora text --num-proc 1

Corpora (real, from ``../shared/corpora``):

- ``text``: every document of ``text-multilingual.jsonl`` (UDHR in 387 languages, web text,
  C4, Wikipedia, speeches; 855 long documents);
- ``chat-contents``: every message content of ``chat/*.messages.jsonl`` as one text row
  (about 100k short rows: the per-row overhead case);
- ``chat``: the conversations themselves, rmlprep ``tokenize_chat`` (ChatML on GPT-2; the HF
  fast tokenizer has no chat path, so this row has no peer).

Contenders, both GPT-2, both producing the same ``input_ids`` list<uint32> column:

- ``rmlprep``: ``tokenize_text(load_tokenizer(gpt2.tiktoken, name="gpt2"))``;
- ``hf``: ``tokenizers.Tokenizer.from_file(hf/gpt2/tokenizer.json).encode_batch`` on the batch's
  strings, ids flattened with ``array('I')`` + offsets into the same object-array output (so
  the conversion to Arrow is as fast as rmlprep's and only the tokenizers differ). Its Rayon
  threads are left at the library default (``hf``) and also pinned to one (``hf-1thread``).

Each measurement runs in a fresh subprocess (cold caches, no thread settings leaking): the
time is the wall time of ``Dataset.map`` alone (in-memory dataset, nothing cached), the best of
``--reps`` runs. MB/s counts the UTF-8 bytes of the tokenized text. The ids of rmlprep and HF are
compared once per corpus (a mismatch count is printed; GPT-2 in both is exact on this corpus
except where tokenizer.json and tiktoken differ). Results go to
``bench/results/map-<time>.json``. Speed is measured here, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "corpora"
REAL = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS", Path.home() / ".cache" / "rmlprep-real-tokenizers"))
GPT2_TIKTOKEN = REAL / "gpt2" / "gpt2.tiktoken"
GPT2_HF = REAL / "hf" / "gpt2" / "tokenizer.json"
BATCH_SIZE = 1000


# -- corpora ---------------------------------------------------------------------------------
def _jsonl(path: Path):
    with open(path, encoding="utf-8", newline="\n") as f:  # split on "\n" only (README)
        for line in f.read().split("\n"):
            if line.strip():
                yield json.loads(line)


def load_rows(corpus: str) -> tuple[list[dict], int]:
    """Rows for ``corpus`` and the UTF-8 bytes of the text they hold."""
    if corpus == "text":
        texts = [r["text"] for r in _jsonl(SHARED / "text-multilingual.jsonl")]
        return [{"text": t} for t in texts], sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    convs = [r["messages"] for p in sorted((SHARED / "chat").glob("*.messages.jsonl")) for r in _jsonl(p)]
    if corpus == "chat-contents":
        texts = [m["content"] for c in convs for m in c if isinstance(m.get("content"), str)]
        return [{"text": t} for t in texts], sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    if corpus == "chat":
        n = sum(len(m["content"].encode("utf-8", "surrogatepass")) for c in convs for m in c
                if isinstance(m.get("content"), str))
        # one schema for Arrow: role and content as strings (tool-call payloads json-encoded)
        rows = [{"messages": [{"role": str(m.get("role")), "content": m["content"] if isinstance(m.get("content"), str)
                               else json.dumps(m.get("content"))} for m in c]} for c in convs]
        return rows, n
    raise SystemExit(f"unknown corpus {corpus!r}: use text, chat-contents or chat")


# -- map functions ---------------------------------------------------------------------------
def hf_map_function(path: Path):
    """HF fast tokenizer as a batched map function with the same output as rmlprep's."""
    from array import array
    from itertools import chain

    import numpy as np
    from tokenizers import Tokenizer as HFTokenizer

    hf = HFTokenizer.from_file(str(path))

    def fn(batch):
        encs = hf.encode_batch(batch["text"], add_special_tokens=False)
        id_lists = [e.ids for e in encs]
        lengths = np.fromiter(map(len, id_lists), dtype=np.int64, count=len(id_lists))
        flat = np.frombuffer(array("I", chain.from_iterable(id_lists)), dtype=np.uint32)
        off = np.zeros(len(id_lists) + 1, dtype=np.int64)
        np.cumsum(lengths, out=off[1:])
        parts = np.split(flat, off[1:-1]) if len(id_lists) else []
        return {"input_ids": np.array(parts + [None], dtype=object)[:-1], "length": lengths.astype(np.int32)}

    return fn


def make_function(impl: str, corpus: str):
    if impl == "rmlprep":
        from rmlprep import load_tokenizer
        from rmlprep.arrow import tokenize_chat, tokenize_text

        tok = load_tokenizer(GPT2_TIKTOKEN, name="gpt2")
        if corpus == "chat":
            return tokenize_chat(tok, "chatml", on_error="record")
        return tokenize_text(tok, on_error="record")
    return hf_map_function(GPT2_HF)


def child(impl: str, corpus: str, num_proc: int, ids_out: str | None) -> dict:
    """One measurement (run in a fresh process)."""
    import datasets

    datasets.disable_progress_bars()
    datasets.disable_caching()
    rows, nbytes = load_rows(corpus)
    ds = datasets.Dataset.from_list(rows)
    t0 = time.perf_counter()
    fn = make_function(impl, corpus)
    setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = ds.map(fn, batched=True, batch_size=BATCH_SIZE, num_proc=num_proc if num_proc > 1 else None,
                 remove_columns=ds.column_names)
    wall = time.perf_counter() - t0
    tokens = int(sum(out.data.column("length").to_pylist()))
    errors = 0
    if "error" in out.column_names:
        from rmlprep.arrow import count_errors

        errors = count_errors(out)
    if ids_out:
        import pyarrow.parquet as pq

        pq.write_table(out.data.table.select(["input_ids"]), ids_out)
    native = None
    if impl == "rmlprep":  # which encoder ran (the compiled one, when built, or pure Python)
        native = getattr(fn.tokenizer, "_native", None) is not None
    return {"impl": impl, "corpus": corpus, "num_proc": num_proc, "rows": len(rows), "bytes": nbytes,
            "rmlprep_native": native,
            "tokens": tokens, "errors": errors, "setup_s": setup, "map_s": wall,
            "type": str(out.data.schema.field("input_ids").type)}


def run_child(impl: str, corpus: str, num_proc: int, ids_out: str | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    label = impl
    if impl == "hf-1thread":
        env["RAYON_NUM_THREADS"] = "1"
        impl = "hf"
    cmd = [sys.executable, __file__, "--child", impl, corpus, str(num_proc)] + ([ids_out] if ids_out else [])
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"{label} {corpus} num_proc={num_proc} failed:\n{r.stderr[-3000:]}")
    res = json.loads(r.stdout.strip().splitlines()[-1])
    res["impl"] = label
    return res


def compare_ids(a: str, b: str) -> tuple[int, int]:
    """(rows that differ, rows) between two saved input_ids columns."""
    import pyarrow.parquet as pq

    x = pq.read_table(a).column(0).to_pylist()
    y = pq.read_table(b).column(0).to_pylist()
    return sum(1 for p, q in zip(x, y) if p != q) + abs(len(x) - len(y)), max(len(x), len(y))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--corpora", default="text,chat-contents,chat")
    ap.add_argument("--num-proc", default="1,2")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        impl, corpus, num_proc = args.child[:3]
        print(json.dumps(child(impl, corpus, int(num_proc), args.child[3] if len(args.child) > 3 else None)))
        return
    for p in (GPT2_TIKTOKEN, GPT2_HF):
        if not p.exists():
            raise SystemExit(f"missing {p}: the real GPT-2 tokenizer files are needed (RMLPREP_REAL_TOKENIZERS)")
    results_dir = ROOT / "bench" / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    procs = [int(x) for x in args.num_proc.split(",")]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    report = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()}, "commit": commit,
              "batch_size": BATCH_SIZE, "reps": args.reps, "rows": []}
    print(f"datasets.map(batched=True, batch_size={BATCH_SIZE}), GPT-2, best of {args.reps} fresh-process runs")
    print(f"{'corpus':14} {'impl':11} {'num_proc':>8} {'MB':>7} {'rows':>7} {'tokens':>9} {'map s':>7} {'MB/s':>7} {'x hf':>6}")
    for corpus in args.corpora.split(","):
        impls = ["rmlprep"] if corpus == "chat" else ["rmlprep", "hf", "hf-1thread"]
        if corpus != "chat":
            ra, hb = str(results_dir / "_ids_rmlprep.parquet"), str(results_dir / "_ids_hf.parquet")
            run_child("rmlprep", corpus, 1, ra)
            run_child("hf", corpus, 1, hb)
            diff, total = compare_ids(ra, hb)
            os.remove(ra)
            os.remove(hb)
            print(f"{corpus}: rmlprep vs HF ids differ in {diff} of {total} rows")
            report["rows"].append({"corpus": corpus, "id_rows_differing": diff, "id_rows": total})
        for num_proc in procs:
            best: dict[str, dict] = {}
            for impl in impls:
                runs = [run_child(impl, corpus, num_proc) for _ in range(args.reps)]
                res = min(runs, key=lambda r: r["map_s"])
                res["mb_s"] = res["bytes"] / 1e6 / res["map_s"]
                res["runs_s"] = [r["map_s"] for r in runs]
                best[impl] = res
            for impl, res in best.items():
                ratio = res["mb_s"] / best["hf"]["mb_s"] if "hf" in best else None
                res["ratio_vs_hf"] = ratio
                report["rows"].append(res)
                note = {True: " (native)", False: " (pure Python)"}.get(res.get("rmlprep_native"), "")
                print(f"{corpus:14} {impl:11} {num_proc:>8} {res['bytes'] / 1e6:7.2f} {res['rows']:>7} "
                      f"{res['tokens']:>9} {res['map_s']:7.2f} {res['mb_s']:7.2f} "
                      f"{'' if ratio is None else f'{ratio:6.2f}'}{note}")
    out = results_dir / f"map-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
