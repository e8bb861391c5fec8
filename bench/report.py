"""Markdown tables from bench results, and the README's speed section rewritten from them.

    python -m bench readme     # the latest bench/results/{encode,job}-*.json into README.md

The README section lies between ``<!-- bench:start -->`` and ``<!-- bench:end -->``; nothing
else of the README is touched.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"

LIB_LABEL = {"rmlprep": "rmlprep", "rmlprep-numpy": "rmlprep `encode_to_numpy`", "tiktoken": "tiktoken", "fastokens": "fastokens", "gigatoken": "gigatoken",
             "tokenizers": "HF tokenizers", "sentencepiece": "sentencepiece"}


def _speeds(r: dict) -> tuple[float, float]:
    mb = r["bytes"] / 1e6
    warm = mb / min(r["times"][1:]) if len(r["times"]) > 1 else float("nan")
    return mb / r["times"][0], warm


def _same(r: dict, ours: dict | None) -> str:
    """'' when r's ids equal rmlprep's in r's special-token mode, else a note."""
    if ours is None or r["lib"] == "rmlprep":
        return ""  # rmlprep-numpy is compared with the list row: the same ids
    from bench.run import PARSES_SPECIALS

    ref = ours.get("digests_specials") if r["lib"] in PARSES_SPECIALS else ours.get("digests")
    if ref is None:
        return ""
    diff = sum(a != b for a, b in zip(r["digests"], ref) if b is not None) + abs(len(r["digests"]) - len(ref))
    refused = sum(b is None for b in ref)  # special-token text rmlprep refuses (a .model read alone)
    moved = " (ids differ between its processes)" if r.get("unstable_ids") or ours.get("unstable_ids") else ""
    return ((f" (ids differ in {diff} docs)" if diff else "")
            + (f" ({refused} docs with special-token text rmlprep refuses, not compared)" if refused else "") + moved)


def _fmt(x: float) -> str:
    if x != x:  # one pass only (a slow reference library): no warm figure
        return "—"
    return f"{x:.0f}" if x >= 20 else f"{x:.1f}"


def _held_row(doc: dict, libs: list[str]) -> str:
    """The single-thread table's last row: how each library was held to one thread."""
    from bench.run import ONE_THREAD

    held = doc.get("one_thread")
    if held is None:  # results from before the pinning: RAYON_NUM_THREADS=1 only
        return "| held to one thread by | " + " | ".join("unpinned; RAYON_NUM_THREADS=1 only" for _ in libs) + " | |"
    cpu = doc.get("pinned_cpu")
    where = f"CPU {cpu}; " if cpu is not None else "unpinned; "
    return ("| held to one thread by | " + " | ".join(where + held.get(lib, ONE_THREAD.get(lib, "?")) for lib in libs)
            + " | |")


def _cpu_table(doc: dict, by: dict, corpora: list[str], toks: list[str], libs: list[str]) -> list[str]:
    """Single thread, cold: MB per CPU second (every thread's CPU), CPU ÷ wall, the other threads' share."""
    from bench.run import OURS, TOKENIZERS

    rows = []
    for c in corpora:
        for t in toks:
            ours = by.get((c, t, "rmlprep", "doc", 1))
            if ours is None or "error" in ours or not ours.get("cpu"):
                continue
            cells, peers, mine = [], [], {}
            for lib in libs:
                r = by.get((c, t, lib, "doc", 1))
                if r is None or "error" in r or not r.get("cpu"):
                    cells.append("")
                    continue
                cpu = _cold(r, "cpu")
                per = r.get("runs") or [r]  # CPU ÷ wall and the off-thread share process by process, then the median
                ratio_w = statistics.median(x["cpu"][0] / x["times"][0] for x in per)
                other = statistics.median(max(0.0, x["cpu"][0] - x["cpu_main"][0]) / x["cpu"][0] if x["cpu"][0] > 0
                                          else 0.0 for x in per)
                mbc = r["bytes"] / 1e6 / cpu if cpu > 0 else float("nan")
                cells.append(f"{_fmt(mbc)} ({ratio_w:.2f}, {other:.0%})")
                if lib in OURS:
                    mine[lib] = mbc
                else:
                    peers.append(mbc)
            ratio = " ; ".join(f"{mine[lib] / max(peers):.2f}×" for lib in OURS if lib in mine) if peers else ""
            rows.append(f"| {c}, {TOKENIZERS[t]['label']} | " + " | ".join(cells) + f" | {ratio} |")
    if not rows:
        return []
    return ["", "The same cold passes in CPU time: MB per CPU second of every thread of the process (CPU ÷ wall, "
            "the share of the CPU off the calling thread; each the median over the row's processes); above 1.00 "
            "or above 0% a library used another thread:", "",
            "| corpus, tokenizer | " + " | ".join(LIB_LABEL[lib] for lib in libs) + f" | {_ours_head(libs)} |",
            "|---|" + "---:|" * (len(libs) + 1)] + rows


def _ours_head(libs: list[str]) -> str:
    """The ratio column's heading: rmlprep's list row (and its array row, when run) ÷ the fastest peer."""
    if "rmlprep-numpy" in libs:
        return "rmlprep ÷ fastest peer (`encode` ; `encode_to_numpy`)"
    return "rmlprep ÷ fastest peer"


def _cold(r: dict, key: str) -> float:
    """The cold pass's ``key`` (times, cpu, cpu_main, sys, waited_main): the median over the row's fresh processes."""
    return statistics.median(x[key][0] for x in r["runs"]) if r.get("runs") else r[key][0]


def _scaling_range(one: dict, two: dict) -> str:
    """' (a-b×)': the scaling process by process (the i-th 1-thread run against the i-th n-thread one)."""
    if not one.get("runs") or not two.get("runs"):
        return ""
    r = sorted(a["times"][0] / b["times"][0] for a, b in zip(one["runs"], two["runs"]))
    return f" ({r[0]:.2f}-{r[-1]:.2f}×)" if len(r) > 1 else ""


def _worker_cpu(one: dict, two: dict) -> str:
    """'0.19 / 0.10 + 0.10 (1.90×); sys 0.01 / 0.02, wait 0.000 / 0.004': CPU s of the cold pass, 1 thread /
    the calling thread + the other workers, the scaling that CPU allows; then (results that hold them) the
    system part of each CPU figure and the seconds each calling thread waited runnable for a CPU (another
    process on its core: the 1-thread row, pinned, leaves the other core to it, the n-thread call cannot)."""
    if not one.get("cpu") or not two.get("cpu"):
        return ""

    main, whole = _cold(two, "cpu_main"), _cold(two, "cpu")
    n = two["threads"]
    bound = f" ({n * _cold(one, 'cpu') / whole:.2f}×)" if whole > 0 else ""
    more = ""
    if all("sys" in x for x in one.get("runs", [one]) + two.get("runs", [two])):
        more = f"; sys {_cold(one, 'sys'):.2f} / {_cold(two, 'sys'):.2f}"
        if all("waited_main" in x for x in one.get("runs", [one]) + two.get("runs", [two])):
            more += f", wait {_cold(one, 'waited_main'):.3f} / {_cold(two, 'waited_main'):.3f}"
    return f"{_cold(one, 'cpu'):.2f} / {main:.2f} + {max(0.0, whole - main):.2f}{bound}{more}"


def _procs_note(doc: dict) -> str:
    """How many fresh processes each single-thread row is the median of."""
    if "procs" not in doc:  # results from before the rounds: one process per row
        return "; one fresh process per row"
    n, slow = doc["procs"], doc.get("slow_procs", 1)
    passes = doc.get("reps", 2)
    warm = (f", warm the median of each process's best of {passes - 1} warm passes" if passes > 2
            else ", warm the median of each process's warm pass" if passes == 2 else "")
    if warm and doc.get("warm_new_str"):
        warm += " (over new str objects of the same texts: `--warm-new-str`)"
    refs = (f"; the reference libraries (HF tokenizers, sentencepiece: 0.5-5 MB/s, cold only) "
            f"{slow} process{'es' if slow != 1 else ''}" if slow != n else "")
    return (f"; each row the median of {n} fresh processes run in rounds (every library in turn), "
            f"cold the median cold pass{warm}{refs}")


def encode_tables(doc: dict) -> str:
    from bench.run import LIBS, OURS, RETURNS, TOKENIZERS

    res = [r for r in doc["results"]]
    by = {}
    for r in res:
        by[(r["corpus"], r["tok"], r["lib"], r["mode"], r["threads"])] = r
    corpora = list(doc["corpora"])
    toks = [t for t in TOKENIZERS if any(r["tok"] == t for r in res)]
    libs = [lib for lib in LIBS if any(r["lib"] == lib for r in res)]
    took = f" The run took {doc['seconds'] / 60:.1f} minutes." if doc.get("seconds") else ""
    out = [f"Machine: {doc['machine']}. Versions: "
           + ", ".join(f"{k} {v}" for k, v in doc["versions"].items()) + "." + took]
    for c in corpora:
        out.append(f"- `{c}`: {doc['corpora'][c]['label']} ({doc['corpora'][c]['path'].split('/')[-1]})")
    out.append("")
    out.append("Single thread, one `encode` call per document, MB/s cold / warm (ids equal to rmlprep's "
               "unless noted)" + _procs_note(doc) + ":")
    out.append("")
    out.append("| corpus, tokenizer | " + " | ".join(LIB_LABEL[lib] for lib in libs)
               + f" | {_ours_head(libs)}, cold / warm |")
    out.append("|---|" + "---:|" * (len(libs) + 1))
    notes = []
    for c in corpora:
        for t in toks:
            ours = by.get((c, t, "rmlprep", "doc", 1))
            if ours is None:
                continue
            cells, peers_c, peers_w, mine = [], [], [], {}
            for lib in libs:
                r = by.get((c, t, lib, "doc", 1))
                if r is None:
                    cells.append("")
                elif "error" in r:
                    cells.append("fails")
                    notes.append(f"{LIB_LABEL[lib]} on {TOKENIZERS[t]['label']}: {r['error']}")
                else:
                    cold, warm = _speeds(r)
                    cells.append(f"{_fmt(cold)} / {_fmt(warm)}{_same(r, ours)}")
                    if lib in OURS:
                        mine[lib] = (cold, warm)
                    else:
                        peers_c.append(cold)
                        if warm == warm:
                            peers_w.append(warm)
            ratio = ""
            if peers_c:
                ratio = " ; ".join(f"{oc / max(peers_c):.2f}× / " + (f"{ow / max(peers_w):.2f}×" if peers_w else "—")
                                   for oc, ow in (mine[lib] for lib in OURS if lib in mine))
            out.append(f"| {c}, {TOKENIZERS[t]['label']} | " + " | ".join(cells) + f" | {ratio} |")
    out.append(_held_row(doc, libs))
    out.append("| returns | " + " | ".join(RETURNS.get(lib, "?") for lib in libs) + " | |")
    out += _cpu_table(doc, by, corpora, toks, libs)
    threads = sorted({r["threads"] for r in res if r["mode"] == "batch" and r["threads"] > 1})
    for n in threads:
        out.append("")
        out.append(f"Batch on {n} threads (rmlprep `encode_batch_flat`; each peer's batch call), MB/s cold / warm; "
                   f"rmlprep's 1-thread batch and its scaling:")
        out.append("")
        peer_libs = [lib for lib in libs if lib not in OURS]
        reps = doc.get("scaling_reps", 1)
        cpu_note = ("the scaling's range process by process beside it; the CPU seconds of the cold pass, "
                    "the calling thread + the other workers (1 thread pinned to one CPU), and in brackets the scaling "
                    "that CPU allows (n × the 1-thread CPU ÷ all workers' CPU: the wall ratio of a quiet machine "
                    "when the workers end together); after it the system CPU seconds of the two cold passes and the seconds "
                    "their calling threads waited runnable for a CPU (medians over the processes): system "
                    "time is mostly first touches of fresh memory, the wait another process on a core.")
        if "procs" in doc:
            out[-2] += (f" Every row (each library's) is the median cold pass of {doc['procs']} fresh processes "
                        "run in turn, " + cpu_note)
        elif reps > 1:
            out[-2] += (f" rmlprep's two are each the median cold pass of {reps} fresh processes run in turn "
                        "(the peers' one process each), " + cpu_note)
        out.append(f"| corpus, tokenizer | rmlprep, 1 thread | rmlprep, {n} threads | scaling "
                   f"| CPU s, 1 / {n} threads | " + " | ".join(LIB_LABEL[lib] for lib in peer_libs) + " | rmlprep ÷ fastest peer, cold |")
        out.append("|---|" + "---:|" * (len(peer_libs) + 5))
        for c in corpora:
            for t in toks:
                one, two = by.get((c, t, "rmlprep", "batch", 1)), by.get((c, t, "rmlprep", "batch", n))
                if one is None or two is None or "error" in one or "error" in two:
                    continue
                c1, w1 = _speeds(one)
                c2, w2 = _speeds(two)
                cells, peers = [], []
                for lib in peer_libs:
                    r = by.get((c, t, lib, "batch", n))
                    if r is None:
                        cells.append("")
                    elif "error" in r:
                        cells.append("fails")
                    else:
                        pc, pw = _speeds(r)
                        cells.append(f"{_fmt(pc)} / {_fmt(pw)}{_same(r, by.get((c, t, 'rmlprep', 'doc', 1)))}")
                        peers.append(pc)
                ratio = f"{c2 / max(peers):.2f}×" if peers else ""
                out.append(f"| {c}, {TOKENIZERS[t]['label']} | {_fmt(c1)} / {_fmt(w1)} | {_fmt(c2)} / {_fmt(w2)} "
                           f"| {c2 / c1:.2f}×{_scaling_range(one, two)} | {_worker_cpu(one, two)} | "
                           + " | ".join(cells) + f" | {ratio} |")
    loads = {}
    for r in res:
        if "error" not in r and r["mode"] == "doc":
            loads.setdefault((r["tok"], r["lib"]), []).append(r["load_s"])
    if loads:
        out.append("")
        out.append("Tokenizer load, seconds (median): " + "; ".join(
            f"{TOKENIZERS[t]['label']}: " + ", ".join(
                f"{LIB_LABEL[lib]} {statistics.median(loads[(t, lib)]):.2f}" for lib in libs if (t, lib) in loads)
            for t in toks) + ".")
    if notes:
        out.append("")
        out.extend(f"- {n}" for n in dict.fromkeys(notes))
    return "\n".join(out)


def job_table(doc: dict) -> str:
    rows = doc["rows"]
    mb = doc["bytes"] / 1e6
    out = [f"Main job: {mb:.1f} MB of JSONL in {len(doc['files'])} files "
           f"({', '.join(Path(f).name for f in doc['files'])}), GPT-2, seq_len {doc['seq_len']}, "
           f"{doc['workers']} workers, Parquet (zstd); whole command from a fresh process, median of "
           f"{doc['reps']} interleaved runs:", "",
           "| what | wall s | MB/s | peak RSS MB |", "|---|---:|---:|---:|"]
    for name, r in rows.items():
        out.append(f"| {name} | {r['wall']:.2f} | {mb / r['wall']:.1f} | {r.get('rss_mb', 0):.0f} |")
    ph = doc.get("rmlprep_phases")
    if ph:
        out.append("")
        out.append("rmlprep run, inside the command (median): " + ", ".join(f"{k} {v:.2f} s" for k, v in ph.items())
                   + ".")
    if doc.get("startup"):
        s = doc["startup"]
        out.append(f"Start-up (import of rmlprep.cli + tokenizer load + plan + parity with the fixture check): "
                   f"{s:.2f} s.")
    if doc.get("units"):
        u = doc["units"]
        st = u["stages"]
        out.append(f"Units: {u['count']}; the workers were busy {u['busy']:.0%} of the processing phase; "
                   f"unit seconds summed (inside the workers): " + ", ".join(
                       f"{k} {st[k]:.2f}" for k in ("read", "validate", "tokenize", "pack", "write", "total")
                       if k in st) + (
                       "; CPU seconds: " + ", ".join(f"{k} {u['cpu'][k]:.2f}" for k in
                                                     ("read", "validate", "tokenize", "pack", "write", "total")
                                                     if k in u["cpu"]) if u.get("cpu") else "") + ".")
    if doc.get("processing_vs_flat"):
        p = doc["processing_vs_flat"]
        out.append(f"Processing throughput {p['processing_mbps']:.1f} MB/s = {p['ratio']:.0%} of "
                   f"`encode_batch_flat` on the same texts and {doc['workers']} threads "
                   f"({p['flat_mbps']:.1f} MB/s).")
        if p.get("units_cpu"):  # results of bench/job.py before the CPU figures have none
            out.append(f"In CPU seconds (not moved by the machine's load): `encode_batch_flat` {p['flat_cpu']:.2f} s, "
                       f"the units {p['units_cpu']:.2f} s = {p['cpu_ratio']:.0%}: the share the processing phase "
                       f"would reach with the workers busy from start to end.")
    return "\n".join(out)


def latest(kind: str) -> dict | None:
    files = sorted(RESULTS.glob(f"{kind}-*.json"))
    return json.loads(files[-1].read_text()) if files else None


def write_readme(readme: Path = ROOT / "README.md") -> None:
    enc, job = latest("encode"), latest("job")
    if enc is None and job is None:
        raise SystemExit("no results in bench/results: run `python -m bench` first")
    parts = [START, "", "Generated by `python -m bench` (bench/report.py); rows where rmlprep is not "
             "first are kept.", ""]
    if enc:
        parts += [encode_tables(enc), ""]
    if job:
        parts += [job_table(job), ""]
    parts.append(END)
    text = readme.read_text(encoding="utf-8")
    block = "\n".join(parts)
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        marker = "## Speed\n"
        if marker not in text:
            raise SystemExit("README.md has no '## Speed' section to put the tables in")
        head, rest = text.split(marker, 1)
        para_end = rest.find("\n\n") + 2
        text = head + marker + rest[:para_end] + block + "\n\n" + rest[para_end:]
    readme.write_text(text, encoding="utf-8")
    print(f"wrote the speed section of {readme}")
