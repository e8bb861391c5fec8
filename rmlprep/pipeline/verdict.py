"""Whether a finished run is a success, from its manifest: a run with no document (every row
rejected, or no row at all) is not, nor one whose rejects pass ``run.max_reject_fraction`` of
the rows read (:func:`run_verdict`; ``rmlprep run`` and :func:`rmlprep.cli.run_exit_status`
exit 2 with its line); and the rejects' breakdown by stage that the summary and that line give
(:func:`rejects_by_stage`, :func:`reject_line`), and by kind in the manifest (:func:`rejects_by_kind`);
and a successful run's warnings (:func:`drop_warning`: ``pack.overflow = "drop"`` left out a large share;
:func:`rejected_files_warning`: an input file none of whose rows is in the shards;
:func:`reject_share_warning`: one whose share of rejects passes ``run.max_reject_fraction``).
"""

from __future__ import annotations

import json
from typing import Any

from .. import fs
from ..config import RunConfig
from ..reject_kinds import KINDS
from .stages import REJECT_STAGES

__all__ = ["rejects_by_stage", "rejects_by_kind", "reject_line", "run_verdict", "drop_warning",
           "rejected_files_warning", "reject_share_warning"]


def rejects_by_stage(recs: list[dict[str, Any]]) -> dict[str, int] | None:
    """The rejects per stage (``read``, ``validate``, ``format``, ``tokenize``, ``pack``: the
    stage that found them, in that order; a stage with none is absent), summed over the done
    markers' ``rejects_by_stage``; None (not known) when a kept marker with rejects predates
    the key (a resumed run; ``--overwrite`` counts again)."""
    return _summed(recs, "rejects_by_stage", REJECT_STAGES)


def rejects_by_kind(recs: list[dict[str, Any]]) -> dict[str, int] | None:
    """The rejects per ``kind`` (:data:`rmlprep.reject_kinds.KINDS`, in that order; a kind with
    none is absent), summed over the done markers' ``rejects_by_kind``; None (not known) when a
    kept marker with rejects predates the key (a resumed run; ``--overwrite`` counts again)."""
    return _summed(recs, "rejects_by_kind", KINDS)


def _summed(recs: list[dict[str, Any]], key: str, order) -> dict[str, int] | None:
    """The markers' ``key`` counts summed, in ``order``; None when a marker with rejects lacks the key."""
    if any(r["rejects"] and key not in r for r in recs):
        return None
    out: dict[str, int] = {}
    for r in recs:
        for k, n in r.get(key, {}).items():
            out[k] = out.get(k, 0) + n
    return {k: out[k] for k in order if k in out}


def _breakdown(manifest: dict[str, Any], count: int | None = None) -> str:
    """``90.0% of rows read: read 60, validate 30`` (the stages' counts, when known), the share
    being ``count``'s; given, the ``pack`` stage is left out (the documents ``pack.overflow =
    "drop"`` left out, :func:`run_verdict`)."""
    t = manifest["totals"]
    by = manifest["rejects"].get("by_stage")
    if by is not None and count is not None:
        by = {k: n for k, n in by.items() if k != "pack"}
    stages = ", ".join(f"{k} {n:,}" for k, n in by.items()) if by is not None else "stages not known"
    count = t["rejects"] if count is None else count
    return (f"{count / t['rows_read']:.1%} of rows read: " if t.get("rows_read") else "") + stages


def reject_line(manifest: dict[str, Any]) -> str:
    """The summary's rejects: the count, its share of the rows read and the count per stage
    (``90 (90.0% of rows read: read 60, validate 30; see DIR/rejects/)``); ``0`` for none."""
    t = manifest["totals"]
    if not t["rejects"]:
        return "0"
    return f"{t['rejects']:,} ({_breakdown(manifest)}; see {fs.join(manifest['config']['output']['dir'], 'rejects')}/)"


def _first_reject(out_dir: str, manifest: dict[str, Any], skip_pack: bool = False) -> str:
    """``; the first: FILE row N: REASON`` from the first rejects file ("" when it cannot be read:
    the count is the message, the reason a help); ``skip_pack``: the first of another stage than
    ``pack`` (not a document ``pack.overflow = "drop"`` left out), among the first
    :data:`_SCAN_REJECTS` records."""
    try:
        seen = 0
        for name in manifest["rejects"]["files"]:
            with fs.open(fs.join(out_dir, name)) as f:
                for line in f:
                    r = json.loads(line)
                    if not (skip_pack and r["stage"] == "pack"):
                        return f"; the first: {r['source']} row {r['row']}: {r['reason']}"
                    seen += 1
                    if seen >= _SCAN_REJECTS:
                        return ""
        return ""
    except (OSError, ValueError, KeyError, IndexError):
        return ""


#: reject records :func:`_first_reject` reads at most looking past the pack stage's
_SCAN_REJECTS = 10_000


def run_verdict(cfg: RunConfig, manifest: dict[str, Any]) -> str | None:
    """Why the finished run is no success (one line, for ``rmlprep: error: ...``), or None.

    - No document: every row was rejected (a wrong ``input.column`` in JSONL, chat data given to
      the pretrain pipeline), or the input holds no rows.
    - More rejects than ``run.max_reject_fraction`` of the rows read (default 0.1): a share of
      bad rows that more likely means a wrong column, encoding or file among the inputs than a
      few damaged rows. The output is written and committed as usual (a rerun with a higher
      fraction finds every unit done and succeeds); the line gives the count per stage and the
      first reject. Documents ``pack.overflow = "drop"`` left out (``dropped_documents``) are
      rejects, written aside and counted, but not bad rows: the config asked for them to be
      left out (it is not the default), so they do not count toward the fraction; the line
      names them when it fails for the others. A run they leave without a document still fails
      (above).
    """
    out_dir = str(cfg.output_dir)
    t = manifest["totals"]
    n = t["rejects"]
    if not t["documents"] and not n:
        units = len(manifest["shards"])
        return (f"the input holds no rows ({units} unit{'s' if units != 1 else ''} read, each empty or blank lines "
                "only): no document in the shards; check input.paths")
    rejects = f"{fs.join(out_dir, 'rejects')}/"
    if not t["documents"]:
        return (f"every row was rejected ({n:,} row{'s' if n != 1 else ''}, no document in the shards)"
                f"{_first_reject(out_dir, manifest)}; every row's reason is in {rejects} (check input.column and "
                "pipeline against the data)")
    limit = cfg["run"]["max_reject_fraction"]
    dropped = t.get("dropped_documents") or 0  # left out as pack.overflow = "drop" asks: not bad rows
    bad = n - dropped
    if t["rows_read"] and bad / t["rows_read"] > limit:
        but = (f", not counting the {dropped:,} document{'s' if dropped != 1 else ''} longer than pack.seq_len that "
               "pack.overflow = \"drop\" left out" if dropped else "")
        first = _first_reject(out_dir, manifest, skip_pack=bool(dropped))
        return (f"{bad:,} of {t['rows_read']:,} rows were rejected ({_breakdown(manifest, bad if dropped else None)}"
                f"{but}), more than run.max_reject_fraction = {limit:g}{first}; every row's reason is in "
                f"{rejects} (the shards and manifest are written: if these rejects are expected, rerun with "
                f"--max-reject-fraction {min(1.0, _ceil2(bad / t['rows_read'])):g} or set run.max_reject_fraction)")
    return None


def drop_warning(manifest: dict[str, Any], *, brief: bool = False) -> str | None:
    """One line (for ``rmlprep: warning: ...`` and the summary) when ``pack.overflow = "drop"``
    left out more than ``run.max_reject_fraction`` of the rows read, else None.

    Such drops do not fail the run (:func:`run_verdict`: the config asked for them), but a share
    that large more likely means a ``pack.seq_len`` too short for the data than a few outliers:
    a run that kept 5 of 100 documents exited 0 with no word beyond the summary's count. The
    line gives the counts, the share, the limit and the options that keep such documents
    (``brief``: the share, the limit and the options, for the summary, whose ``over-long`` line
    gives the counts). A run left without a document has no warning: its verdict fails it.
    """
    t = manifest["totals"]
    dropped, read = t.get("dropped_documents") or 0, t.get("rows_read") or 0
    limit = manifest["config"]["run"]["max_reject_fraction"]
    if not dropped or not read or not t["documents"] or dropped / read <= limit:
        return None
    pack = manifest["config"]["pack"]
    keep = ('pack.overflow = "truncate" or "split"' if manifest["config"].get("pipeline") == "sft"
            else 'pack.overflow = "wrap" or "truncate"')
    over = (f"more than run.max_reject_fraction = {limit:g}, which drops do not count toward: a longer "
            f"pack.seq_len or {keep} keeps them")
    if brief:
        return f"{dropped / read:.1%} of the rows read dropped as longer than pack.seq_len, {over}"
    return (f"pack.overflow = \"drop\" left out {dropped:,} of the {read:,} rows read ({dropped / read:.1%}) as longer "
            f"than pack.seq_len = {pack['seq_len']:,} ({t.get('dropped_tokens') or 0:,} tokens; written to "
            f"{fs.join(manifest['config']['output']['dir'], 'rejects')}/), {over}")


def rejected_files_warning(manifest: dict[str, Any], *, brief: bool = False) -> str | None:
    """One line (for ``rmlprep: warning: ...`` and the summary) naming the input files whose
    every row was a reject, when the run holds documents (else :func:`run_verdict` fails it).

    Such a file is most often one of another layout or encoding among the inputs (its text
    under another key than ``input.column``, Latin-1, chat data), which the run's share of
    rejects need not show: one file of 50 rows keyed ``content`` beside 1,000 rows keyed
    ``text`` was "rejects 50 (4.8% ...)", exit 0, under ``run.max_reject_fraction`` = 0.1. The
    line names up to 3 files with their row counts, and the first reject of the first file
    (read from its first unit's rejects file; left out when that cannot be read). The run
    still exits 0: its rows are counted and written aside, as every reject is.
    """
    from ..readers import Unit

    if not manifest["totals"]["documents"]:
        return None
    files: dict[str, list[int]] = {}  # path -> [documents, rejects, first unit]
    for s in manifest["shards"]:
        if s.get("documents") is None or s.get("rejects") is None:
            return None  # a manifest written before the counts
        got = files.setdefault(Unit.described_path(s["source"]), [0, 0, s.get("unit", -1)])
        got[0] += s["documents"]
        got[1] += s["rejects"]
    bad = [(path, n, unit) for path, (docs, n, unit) in files.items() if not docs and n]
    if not bad:
        return None
    named = ", ".join(f"{path} ({n:,} row{'s' if n != 1 else ''})" for path, n, _ in bad[:3])
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    what = f"every row of {len(bad)} input file{'s' if len(bad) != 1 else ''} was rejected: {named}{more}"
    if brief:
        return what
    rejects = fs.join(manifest["config"]["output"]["dir"], "rejects")
    r = _unit_first_reject(rejects, bad[0][2])
    first = f"; the first: row {r['row']}: {r['reason']}" if r else ""
    return (f"{what}{first}; a file of another layout or encoding than the others (input.column, UTF-8)? "
            f"its rows are in {rejects}/")


def reject_share_warning(manifest: dict[str, Any], *, brief: bool = False) -> str | None:
    """One line (for ``rmlprep: warning: ...`` and the summary) naming the input files some of
    whose rows are documents but whose share of rejects passes ``run.max_reject_fraction`` (the
    run's own limit), else None. Files whose every row was rejected are
    :func:`rejected_files_warning`'s.

    The run's share hides such a file among larger ones: a glob of 1,000 good rows and a file of
    100 whose 40 lines are Latin-1 gave "rejects 40 (3.6% of rows read ...)", exit 0, with
    nothing naming the file that lost 40% of its rows. The share counts a file's rows read
    (the shards' ``rows_read``), not the documents ``pack.overflow = "drop"`` left out (asked
    for, not bad rows; :func:`drop_warning` has them), as :func:`run_verdict` counts. The line
    names up to 3 files with their counts and share (``brief``: no more, for the summary) and
    the first reject of the first (from the first of its units with rejects). The exit code is
    unchanged: the rows are counted and written aside, as every reject is. A manifest whose
    shards lack ``rows_read`` (written before it) gives None.
    """
    from ..readers import Unit

    t = manifest["totals"]
    limit = manifest["config"]["run"]["max_reject_fraction"]
    if not t["documents"] or limit >= 1:
        return None
    files: dict[str, list[int]] = {}  # path -> [documents, bad rows, rows read, first unit with rejects]
    for s in manifest["shards"]:
        if any(s.get(k) is None for k in ("documents", "rejects", "rows_read", "dropped_documents")):
            return None  # a manifest written before the counts
        got = files.setdefault(Unit.described_path(s["source"]), [0, 0, 0, -1])
        got[0] += s["documents"]
        got[1] += s["rejects"] - s["dropped_documents"]
        got[2] += s["rows_read"]
        if got[3] < 0 and s["rejects"] > s["dropped_documents"]:
            got[3] = s.get("unit", -1)
    over = [(path, bad, read, unit) for path, (docs, bad, read, unit) in files.items()
            if docs and read and bad / read > limit]
    if not over:
        return None
    named = ", ".join(f"{path} ({bad:,} of {read:,} rows, {bad / read:.1%})" for path, bad, read, _ in over[:3])
    more = f" and {len(over) - 3} more" if len(over) > 3 else ""
    n = len(over)
    what = (f"{n} input file{'s' if n != 1 else ''} had more than run.max_reject_fraction = {limit:g} of "
            f"{'their' if n != 1 else 'its'} rows rejected: {named}{more}")
    if brief:
        return what
    rejects = fs.join(manifest["config"]["output"]["dir"], "rejects")
    r = _unit_first_reject(rejects, over[0][3])
    first = f"; the first{f' of {over[0][0]}' if n > 1 else ''}: row {r['row']}: {r['reason']}" if r else ""
    share = f" ({(t['rejects'] - (t.get('dropped_documents') or 0)) / t['rows_read']:.1%})" if t.get("rows_read") else ""
    return f"{what}{first}; the run's share{share} is under it, so the run succeeds; the rows are in {rejects}/"


def _unit_first_reject(rejects: str, unit: int) -> dict[str, Any] | None:
    """The first record of ``unit``'s rejects file that is a row's (not a document the pack stage
    left out), or None when it cannot be read (a warning then names no row); the file warnings'
    own, where :func:`_first_reject` reads the run's first rejects file."""
    try:
        with fs.open(fs.join(rejects, f"rejects-{unit:05d}.jsonl")) as f:
            for line in f:
                r = json.loads(line)
                if r["stage"] != "pack":
                    return {"row": r["row"], "reason": r["reason"]}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _ceil2(x: float) -> float:
    """x rounded up to 2 decimals (the fraction a rerun needs to accept these rejects: the
    verdict fails a share *over* the limit, so the value given must be >= x): 0.100049 -> 0.11
    (rounding x * 10000 first gave 0.1, the default the run had just failed at), 0.66 -> 0.66."""
    c = round(x, 2)
    return c if c >= x else round(c + 0.01, 2)
