"""What a run tells: progress while it runs; manifest.json, stats.json, lengths.png and the
summary table at the end, all computed from the units' done records."""

from __future__ import annotations

import io
import math
import platform
import sys
import time
from collections.abc import Callable, Collection
from typing import Any

import multiprocess
import numpy as np
import pyarrow as pa

from .._version import __version__
from ..config import RunConfig
from ..readers import Unit
from ..shards import rejects_name
from .card import dataset_card
from .chat_stages import CHAT_COUNTS
from .framing import framing
from .late_keys import late_counts
from .megatron import data_args
from .output import OutputFolder, json_bytes
from .reports_chat import _not_known, chat_count_lines
from .pack import HIST_BINS_PER_OCTAVE, hist_edges, length_hist, unfilled_tokens
from .store import fence
from .verdict import (drop_warning, reject_line, reject_share_warning, rejected_files_warning, rejects_by_kind,
                      rejects_by_stage)

__all__ = ["HIST_BINS_PER_OCTAVE", "hist_edges", "length_hist", "Progress", "write_reports", "summary_table"]

_TOTAL_KEYS = ("rows", "short_rows", "documents", "rejects", "blank_lines", "lone_surrogate_rows", "tokens",
               "written_tokens", "pad_tokens", "unfilled_tokens", "bytes", "dropped_documents", "dropped_tokens", "truncated_tokens",
               "over_long", "empty_documents")
_SHARD_KEYS = ("shard", "source", "sha256", "rows", "short_rows", "documents", "tokens", "pad_tokens",
               "unfilled_tokens", "padding_ratio", "rejects", "bytes")


# -- while running ------------------------------------------------------------------------------
class Progress:
    """A tqdm bar on a terminal (``run.progress = "bar"``), else one log line per unit
    (``"log"``), or nothing (``"none"``); ``"auto"`` picks bar or log."""

    def __init__(self, mode: str, total_bytes: int, n_units: int, log: Callable[[str], None]):
        if mode == "auto":
            mode = "bar" if sys.stderr.isatty() else "log"
        self.bar = None
        if mode == "bar":
            from tqdm import tqdm  # here: importing tqdm costs ~17 ms of CPU (its version lookup), a log run needs none

            self.bar = tqdm(total=total_bytes, unit="B", unit_scale=True, unit_divisor=1000,
                            desc="rmlprep", dynamic_ncols=True, file=sys.stderr)
        self.mode = mode
        self.log = log
        self.total_bytes = total_bytes
        self.n_units = n_units
        self.t0 = time.perf_counter()
        self.bytes = self.docs = self.tokens = self.done = 0

    def unit_done(self, rec: dict[str, Any], skipped: bool = False) -> None:
        self.done += 1
        if skipped:
            self.total_bytes -= rec.get("bytes", 0)
            if self.bar is not None:
                self.bar.total = self.total_bytes
                self.bar.refresh()
            return
        self.bytes += rec["bytes"]
        self.docs += rec["documents"]
        self.tokens += rec["tokens"]
        dt = max(time.perf_counter() - self.t0, 1e-9)
        rates = f"{self.docs / dt:,.0f} docs/s, {self.bytes / dt / 1e6:.2f} MB/s, {tokens_rate(self.tokens / dt)}"
        if self.bar is not None:
            self.bar.update(rec["bytes"])
            self.bar.set_postfix_str(f"{self.docs / dt:,.0f} docs/s, {self.tokens / dt / 1e3:,.0f}k tok/s")
        elif self.mode == "log":
            left = self.total_bytes - self.bytes
            eta = left / (self.bytes / dt) if self.bytes else float("nan")
            self.log(f"[{self.done}/{self.n_units}] {rec['shard']}: {rec['documents']:,} docs, "
                     f"{rec['tokens']:,} tokens, {rec['rejects']} reject{'' if rec['rejects'] == 1 else 's'} | {rates}, ETA {eta:.0f}s")

    def say(self, msg: str) -> None:
        """``log(msg)``, with the bar, while it is drawn, cleared first and drawn again after it
        (tqdm's ``external_write_mode``): a line logged under the bar was glued to it
        (``rmlprep:   0%|          | 0.00/41.6k [...]pack: every document ends with eos ...``)."""
        if self.bar is None:
            self.log(msg)
            return
        with self.bar.external_write_mode(file=sys.stderr):
            self.log(msg)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


# -- at the end ---------------------------------------------------------------------------------
def _versions(engine: str) -> dict[str, str]:
    v = {"rmlprep": __version__, "python": platform.python_version(), "pyarrow": pa.__version__,
         "numpy": np.__version__}
    if engine == "ray":
        import ray  # optional dependency, present when the Ray engine ran

        v["ray"] = ray.__version__
    v["multiprocess"] = multiprocess.__version__
    return v


def _with_room(rec: dict[str, Any], seq_len: int) -> dict[str, Any]:
    """A done marker's record with ``unfilled_tokens`` and ``padding_ratio`` from its ``rows`` and
    ``written_tokens`` (:func:`~.pack.unfilled_tokens`). A pretraining marker written before
    rmlprep counted the room of a unit's short last row says 0 there; it is kept on resume (its
    shard is what this version writes), so its count is worked out again here rather than read."""
    if "written_tokens" not in rec:
        return rec
    room = unfilled_tokens(rec["rows"], rec["written_tokens"], seq_len)
    if room == rec.get("unfilled_tokens"):
        return rec
    return {**rec, "unfilled_tokens": room, "padding_ratio": room / (rec["rows"] * seq_len) if rec["rows"] else 0.0}


def write_reports(cfg: RunConfig, tokenizer, units: list[Unit], records: dict[int, dict[str, Any]],
                  parity: dict[str, Any], timings: dict[str, float], workers: int, processed: Collection[int],
                  log: Callable[[str], None], holder: str = "") -> dict[str, Any]:
    """Commit stats.json, lengths.png (with ``run.histogram``), README.md (the dataset card; Megatron:
    megatron-data-args.txt; a run without a document: a README saying so) and manifest.json as
    one set (:func:`commit_together`), log the summary table, and return the manifest.
    ``processed``: the units this run wrote (the others were skipped as done); the throughput is
    theirs over ``timings["process"]``. ``holder``: the run's lease token on an object store
    (:func:`.store.fence`): no report is committed once the lock holds another.

    Raises:
        OutputError: a report cannot be written (the folder keeps the previous set, or none).
    """
    out = OutputFolder(cfg.output_dir)
    fence(out, holder)
    seq_len = cfg["pack"]["seq_len"]
    recs = [_with_room(records[u.index], seq_len) for u in units]
    totals = {k: int(sum(r.get(k, 0) for r in recs)) for k in _TOTAL_KEYS}
    totals["padding_ratio"] = totals["unfilled_tokens"] / (totals["rows"] * seq_len) if totals["rows"] else 0.0
    # counted by the readers (markers of an older version: documents + rejects, which it checked)
    totals["rows_read"] = int(sum(r.get("rows_read", r["documents"] + r["rejects"]) for r in recs))
    # the rows' Arrow size, the card's split num_bytes: None while a kept marker of version 2 lacks it
    totals["arrow_bytes"] = int(sum(r["arrow_bytes"] for r in recs)) if all("arrow_bytes" in r for r in recs) else None
    if cfg.pipeline == "sft":  # what the chat stage counted (rmlprep.arrow.TokenizeChat.stats)
        totals.update({k: int(sum(r.get(k, 0) for r in recs)) for k in CHAT_COUNTS})
        totals["untrained_chunks"] = int(sum(r.get("untrained_chunks", 0) for r in recs))  # split chunks (.untrained)
        # fragments starting on an assistant token (first label -100): a kept marker without the key
        # is of a config that writes none (late_keys.marker_needs has the others redone), so 0 is exact
        totals["first_labels_masked"] = int(sum(r.get("first_labels_masked", 0) for r in recs))
    for k, possible in late_counts(cfg).items():
        if possible and not all(k in r for r in recs):
            totals[k] = None  # a kept marker predates the count, and this config can count some
    hist = np.sum([r["length_hist"] for r in recs], axis=0).astype(np.int64)
    wall = timings.get("process", 0.0)
    manifest = {
        "rmlprep_version": __version__,
        "config": cfg.to_dict(),  # config_from_dict takes it back
        "config_file": cfg.source,
        "config_hash": cfg.config_hash,
        "tokenizer": {"fingerprint": tokenizer.fingerprint, "name": tokenizer.spec.name,
                      "vocab_size": tokenizer.vocab_size,
                      "framing": framing(cfg, tokenizer).tokens(tokenizer)},  # the ids pack adds, named
        "parity": parity,
        "tail_rule": ("pretrain: the leftover of each unit (< seq_len tokens) is the last, short row of "
                      "that unit's shard" if cfg.pipeline == "pretrain" else
                      "sft: best-fit-decreasing per unit; rows hold at most seq_len tokens"),
        "totals": totals,
        "shards": [_shard_entry(u, r) for u, r in zip(units, recs)],
        "rejects": {"count": totals["rejects"], "by_stage": rejects_by_stage(recs), "by_kind": rejects_by_kind(recs),
                    "files": [rejects_name(r["unit"]) for r in recs if r["rejects"]]},
        "timings": {k: round(v, 3) for k, v in timings.items()},
        "engine": cfg["run"]["engine"],
        "workers": workers,
        "units_processed": len(processed),
        "units_skipped": len(units) - len(processed),
        "versions": _versions(cfg["run"]["engine"]),
    }
    edges = hist_edges()
    done = {k: sum(records[i][k] for i in processed) for k in ("documents", "bytes", "tokens")}  # by this run
    rate = bool(wall and processed)  # a run that skipped every unit measured nothing
    stats = {
        "totals": totals,
        "throughput": {  # of the units this run wrote (a resumed run: not the skipped ones)
            "seconds": round(wall, 3),
            "units": len(processed),
            "documents_per_s": done["documents"] / wall if rate else None,
            "mb_per_s": done["bytes"] / 1e6 / wall if rate else None,
            "tokens_per_s": done["tokens"] / wall if rate else None,
        },
        "document_tokens": {
            "max": max((r["max_document_tokens"] for r in recs), default=0),
            "mean": totals["tokens"] / totals["documents"] if totals["documents"] else 0.0,
            "hist_bins_per_octave": HIST_BINS_PER_OCTAVE,
            "hist": {f"{math.ceil(edges[b])}-{math.ceil(edges[b + 1]) - 1}": int(hist[b]) for b in np.flatnonzero(hist)},
        },
    }
    files = [("stats.json", json_bytes(stats))]
    asked = cfg["run"]["histogram"]
    png = _histogram_png(hist, log, asked=asked is True) if asked else None
    if png is not None:
        files.append(("lengths.png", png))
    if cfg["output"].get("format") == "megatron" and totals["documents"]:
        files.append(("megatron-data-args.txt", data_args(str(cfg.output_dir), recs).encode()))
    else:  # a folder without a document says so in README.md, whatever the format (no data args to train on)
        files.append(("README.md", dataset_card(manifest, cfg.pipeline)))
    files.append(("manifest.json", json_bytes(manifest)))  # last: the commit point of the set
    commit_together(out, files)
    log(summary_table(manifest, stats))
    return manifest


def _shard_entry(unit: Unit, rec: dict[str, Any]) -> dict[str, Any]:
    """A unit's entry in the manifest's ``shards``: its number ``unit`` (the rows' ``unit``
    column; manifests written before it hold none, ``shards[N]`` being unit N), its marker's
    counts, and ``first_row``, the source row (0-based, as reject records number rows) where the
    unit's input starts: the key that joins ``example_index`` to input rows (README, "What you get")."""
    entry = {k: rec[k] for k in _SHARD_KEYS}
    # the input rows the unit read (a marker of an older version: documents + rejects, as the
    # totals take it) and the documents pack.overflow = "drop" left out: a file's share of bad
    # rows (verdict.reject_share_warning)
    entry["rows_read"] = rec.get("rows_read", rec["documents"] + rec["rejects"])
    entry["dropped_documents"] = rec.get("dropped_documents", 0)
    return {"shard": entry.pop("shard"), "unit": unit.index, "source": entry.pop("source"),
            "first_row": unit.first_row, **entry}


def _histogram_png(hist: np.ndarray, log: Callable[[str], None], asked: bool = False) -> bytes | None:
    """lengths.png's bytes, or None (no document, or no matplotlib: said in the log when ``asked``,
    ``run.histogram = true``; the default ``"auto"`` draws it when matplotlib is there and says
    nothing otherwise: the ``live`` extra brings no matplotlib, and every such run said it)."""
    try:
        import matplotlib  # optional dependency (rmlprep[plot])

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        if asked:
            log("histogram: matplotlib is not installed (pip install 'rmlprep[plot]'); lengths.png skipped")
        return None
    edges = hist_edges() + 1
    nz = np.flatnonzero(hist)
    if not len(nz):
        return None
    lo, hi = nz[0], nz[-1] + 1
    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    try:
        ax.stairs(hist[lo:hi], edges[lo:hi + 1], fill=True)
        ax.set_xscale("log")
        ax.set_xlabel("document length (tokens + 1, log scale)")
        ax.set_ylabel("documents")
        ax.set_title(f"Document lengths: {int(hist.sum()):,} documents")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()
    finally:
        plt.close(fig)


def commit_together(out: OutputFolder, files: list[tuple[str, bytes]]) -> None:
    """Commit the reports as one set, the last file (``manifest.json``) being its commit point:
    every file is written to its temporary first (:meth:`OutputFolder.stage`); only then is the
    old commit point removed and the temporaries renamed in order (:meth:`OutputFolder.publish`),
    the commit point last. A write that fails (a full disk) leaves the folder's reports as they
    were, the old set; a rename that fails leaves no ``manifest.json`` (the next run, skipping
    every done unit, writes the set again). No temporary is left either way, and a
    ``manifest.json`` always has the reports committed with it beside it.

    Args:
        files: (name, content) pairs, the commit point last.
    Raises:
        OutputError: a write, the removal or a rename failed.
    """
    staged: list[tuple[Any, str]] = []
    try:
        for name, data in files:
            staged.append((out.stage(name, lambda f, data=data: f.write(data))[0], name))
        out.remove(files[-1][0])  # no old commit point beside new reports, should a rename fail
        for tmp, name in staged:
            out.publish(tmp, name)
    except BaseException:
        for tmp, _ in staged:
            out.discard(tmp)  # the published ones are not there any more: nothing to do
        raise


def _tokens_line(manifest: dict[str, Any]) -> str:
    """The summary's tokens: the documents' own tokens, and what the rows hold when that differs
    (the bos/eos framing the pretrain pipeline adds, less what ``overflow = "truncate"`` cut;
    documents ``overflow = "drop"`` left out are rejects, not documents)."""
    t = manifest["totals"]
    docs, written = t["tokens"], t.get("written_tokens", t["tokens"])
    where = "in the .bin files" if manifest["config"]["output"].get("format") == "megatron" else "in rows"
    if written == docs:
        return f"{docs:,} (all {where})"
    cut = t.get("truncated_tokens", 0)
    framing = written - docs + cut
    pack = manifest["config"]["pack"]
    added = manifest.get("tokenizer", {}).get("framing") or {}
    names = "/".join(f"{n} {added[n]['token']}" if n in added else n for n in ("bos", "eos") if pack.get(n)) \
        if manifest["config"]["pipeline"] == "pretrain" else ""
    parts = [f"{docs:,} in documents"]
    if framing:
        parts.append(f"+ {framing:,} {names or 'framing'}")
    if cut:
        parts.append(f"- {cut:,} cut (over-long)")
    return " ".join(parts) + f" = {written:,} {where}"


def _padding_line(manifest: dict[str, Any]) -> tuple[str, str]:
    """The room rows leave below seq_len (``unfilled_tokens``, the packers' padding ratio): pad
    ids in the rows with ``pack.pad = true`` (``pad_tokens``, sft), else the rows are just
    shorter (whatever the counts: a run without rows too). Pretrain rows are never padded;
    their room is the short last row of each shard (concat packing fills every other row)."""
    t = manifest["totals"]
    room = f"{t['unfilled_tokens']:,} tokens ({100 * t['padding_ratio']:.2f}%)"
    cfg = manifest["config"]
    if cfg.get("pipeline") == "pretrain":
        return "unfilled", room + " left below seq_len in the short last row of each shard; rows are not padded"
    if not cfg["pack"].get("pad") or (t["unfilled_tokens"] and not t["pad_tokens"]):
        return "unfilled", room + " left below seq_len; rows are not padded (pack.pad = false)"
    return "padding", room


def _rows_lines(manifest: dict[str, Any]) -> list[tuple[str, str]]:
    """The packed rows and the room they leave; for ``output.format = "megatron"`` what the
    .bin/.idx hold instead: documents, each one sequence (the rows it was packed into on the way
    are no output, so their count and room would describe nothing written; explorer5 X6)."""
    t = manifest["totals"]
    if manifest["config"]["output"].get("format") == "megatron":
        return [("megatron", "each document one sequence of shard-NNNNN.bin/.idx, framed as [pack] says (Megatron "
                             "packs them at training time, with its own sequence length)")]
    return [("packed rows", f"{t['rows']:,} x {manifest['config']['pack']['seq_len']} ({t['short_rows']} short)"),
            _padding_line(manifest)]


def tokens_rate(per_s: float) -> str:
    """Tokens per second as the summary writes them: millions from 0.1 M up ("1.23 M tokens/s"),
    plain below it ("5,120 tokens/s"), so a small sft run does not read "0.00 M tokens/s"."""
    return f"{per_s / 1e6:.2f} M tokens/s" if per_s >= 1e5 else f"{per_s:,.0f} tokens/s"


def _units(n: int) -> str:
    return f"{n} unit{'s' if n != 1 else ''}"


def summary_table(manifest: dict[str, Any], stats: dict[str, Any]) -> str:
    """A plain-text summary of a run."""
    t = manifest["totals"]
    th = stats["throughput"]
    lines = [
        ("output", manifest["config"]["output"]["dir"]),
        ("shards", f"{len(manifest['shards'])} ({manifest['units_processed']} written, "
                   f"{manifest['units_skipped']} skipped as done)"),
        ("rows read", f"{t['rows_read']:,}"),
        ("documents", f"{t['documents']:,}"),
        ("rejects", reject_line(manifest)),
        ("tokens", _tokens_line(manifest)),
        *_rows_lines(manifest),
    ]
    if (warn := rejected_files_warning(manifest, brief=True)) is not None:
        lines.append(("warning", warn))
    if (warn := reject_share_warning(manifest, brief=True)) is not None:
        lines.append(("warning", warn))
    if t["lone_surrogate_rows"]:
        lines.append(("surrogates", f"{t['lone_surrogate_rows']:,} rows had lone surrogates, kept with U+FFFD"))
    if t["dropped_documents"]:
        lines.append(("over-long", f"{t['dropped_documents']:,} documents longer than seq_len dropped, "
                                   f"written to rejects/ ({t['dropped_tokens']:,} tokens)"))
        if (warn := drop_warning(manifest, brief=True)) is not None:
            lines.append(("warning", warn))
    if t["empty_documents"] is None:
        lines.append(_not_known("empty", "documents of no token (empty text, and no bos/eos framing)"))
    if t["empty_documents"]:
        n = t["empty_documents"]
        lines.append(("empty", f"{n:,} document{'s have' if n != 1 else ' has'} no token (empty text, and no "
                               "bos/eos framing): counted as documents, in no row"))
    if t["truncated_tokens"]:
        lines.append(("over-long", f"{t['over_long']:,} documents longer than seq_len truncated "
                                   f"({t['truncated_tokens']:,} tokens cut)"))
    if t.get("untrained_chunks", 0) is None:
        lines.append(_not_known("over-long", "chunks that pack.overflow = \"split\" cut from longer conversations and "
                                             "that hold no assistant token after their first"))
    if t.get("untrained_chunks"):
        n = t["untrained_chunks"]
        lines.append(("over-long", f"{n:,} chunk{'s' if n != 1 else ''} that pack.overflow = \"split\" cut from longer "
                                   f"conversations hold{'' if n != 1 else 's'} no assistant token after the first "
                                   f"(whose label is -100): kept, but train{'' if n != 1 else 's'} nothing (row space "
                                   "only; each chunk is its own example)"))
    lines += chat_count_lines(manifest, t)
    lines.append(("input", f"{t['bytes'] / 1e6:.2f} MB"))
    if th["mb_per_s"] is not None:
        lines.append(("speed", f"{th['documents_per_s']:,.0f} docs/s, {th['mb_per_s']:.2f} MB/s, "
                               f"{tokens_rate(th['tokens_per_s'])} ({th['seconds']:.2f} s, "
                               f"{manifest['workers']} worker{'s' if manifest['workers'] != 1 else ''}"
                               + (f", engine {manifest['engine']}" if manifest["engine"] != "local" else "")
                               + (f"; of the {_units(manifest['units_processed'])} written, not the "
                                  f"{manifest['units_skipped']} skipped" if manifest["units_skipped"] else "")
                               + ")"))
    w = max(len(k) for k, _ in lines)
    return "\n".join(["summary", "-" * 60] + [f"{k:<{w}}  {v}" for k, v in lines])
