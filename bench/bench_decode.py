"""CPU time of ``Tokenizer.decode`` on real tokenizer.json files, paired against a second tree
and against ``tokenizers.Tokenizer.decode`` in the same run.

    python -m bench.bench_decode [--against TREE] [--reps 5] [--n 1500000]

Id lists (made once per file, shared by every process): ``random``, ``--n`` ids drawn
uniformly from the whole vocabulary (seed 0; gap ids and special tokens included), and
``real``, the ids ``tokenizers`` gives for the rows of ``../shared/corpora/text-multilingual.jsonl``
(13.5 MB, repeated until ``--n`` ids). Each is decoded two ways: ``one`` (all ids in one
``decode`` call) and ``rows`` (one call per row of 512 ids for ``random``, per corpus row for
``real``), both with ``skip_special_tokens=True``.

Each measurement is a fresh process (this file with ``--child``) timing ``time.process_time``
around the decoding; with ``--against TREE`` the two trees run in turn (A B A B ...) and the
ratio is taken pair by pair (median printed). The peer (``tokenizers``) runs in the same
child as the tree under test. Every child compares rmlprep's text with the peer's (a difference is printed).
Speed is measured here, never asserted in tests.
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
REAL = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS", Path.home() / ".cache" / "rmlprep-real-tokenizers"))
CORPUS = ROOT.parent.parent / "shared" / "corpora" / "text-multilingual.jsonl"
if not CORPUS.exists():
    CORPUS = Path("/work/shared/corpora/text-multilingual.jsonl")

FILES = {
    "mistral": "hf/mistral-7b-v0.1/tokenizer.json",
    "gemma": "hf/gemma/tokenizer.json",
    "phi-3": "hf/phi-3-mini/tokenizer.json",
    "llama3": "hf/llama3/tokenizer.json",
    "gpt-4o": "hf/gpt-4o/tokenizer.json",
}


def _make_ids(name: str, n: int, out: Path) -> None:
    import random

    import tokenizers

    tok = tokenizers.Tokenizer.from_file(str(REAL / FILES[name]))
    v = tok.get_vocab_size(with_added_tokens=True)
    rng = random.Random(0)
    flat = [rng.randrange(v) for _ in range(n)]
    rows_random = [flat[k:k + 512] for k in range(0, n, 512)]
    texts = [json.loads(line)["text"] for line in CORPUS.open(encoding="utf-8")]
    rows_real: list[list[int]] = []
    total = 0
    while total < n:
        for enc in tok.encode_batch(texts, add_special_tokens=False):
            rows_real.append(enc.ids)
            total += len(enc.ids)
            if total >= n:
                break
    out.write_text(json.dumps({"random": rows_random, "real": rows_real}))


def _child(name: str, ids_path: Path) -> dict:
    import tokenizers

    from rmlprep import load_tokenizer

    path = str(REAL / FILES[name])
    tok = load_tokenizer(path)
    peer = tokenizers.Tokenizer.from_file(path)
    data = json.loads(ids_path.read_text())
    tok.decode([0, 1, 2])  # build the lazy tables outside the timing
    res = {}
    for kind, rows in data.items():
        flat = [i for r in rows for i in r]
        for how, calls in (("one", [flat]), ("rows", rows)):
            t0 = time.process_time()
            mine = [tok.decode(c, skip_special_tokens=True) for c in calls]
            t1 = time.process_time()
            theirs = peer.decode_batch(calls, skip_special_tokens=True) if how == "rows" else [
                peer.decode(flat, skip_special_tokens=True)]
            t2 = time.process_time()
            res[f"{kind}/{how}"] = (t1 - t0, t2 - t1, mine == theirs)
    return res


def _run(tree: Path, name: str, ids_path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree))
    r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", name, str(ids_path)],
                       capture_output=True, text=True, env=env, cwd=str(tree))
    if r.returncode:
        raise SystemExit(r.stderr or r.stdout)
    return json.loads(r.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", type=Path, help="a second tree (B), run in turn with this one (A)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--n", type=int, default=1_500_000)
    ap.add_argument("--files", default=",".join(FILES))
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(_child(a.child[0], Path(a.child[1]))))
        return 0
    trees = [ROOT] + ([a.against.resolve()] if a.against else [])
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.files.split(","):
            ids_path = Path(tmp) / f"{name}.json"
            _make_ids(name, a.n, ids_path)
            runs: list[list[dict]] = [[] for _ in trees]
            for _ in range(a.reps):
                for k, tree in enumerate(trees):
                    runs[k].append(_run(tree, name, ids_path))
            for case in runs[0][0]:
                a_cpu = [r[case][0] for r in runs[0]]
                peer = [r[case][1] for r in runs[0]]
                line = (f"{name:8} {case:12} A {statistics.median(a_cpu):.3f} s  "
                        f"tokenizers {statistics.median(peer):.3f} s  A/peer "
                        f"{statistics.median(x / y for x, y in zip(a_cpu, peer)):.2f}")
                if a.against:
                    b_cpu = [r[case][0] for r in runs[1]]
                    line += (f"  B {statistics.median(b_cpu):.3f} s  A/B (pairwise median) "
                             f"{statistics.median(x / y for x, y in zip(a_cpu, b_cpu)):.2f}")
                if not all(r[case][2] for rs in runs for r in rs):
                    line += "  TEXT DIFFERS from tokenizers'"
                print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
