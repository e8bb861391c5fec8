"""The driver: a config end to end — tokenizer, plan, parity, output folder, engine, reports."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from ..chat_resolve import check_chat_markers, resolve_chat_config
from ..chat_unit_sample import unit_sample_size
from ..chat.encode import refuse_chat_before_corpus
from ..config import RunConfig
from ..config_paths import tidy_paths
from ..errors import ConfigError, OutputError, ParityError, RmlprepError
from ..load import open_tokenizer
from ..readers import Unit
from ..parity import run_parity_stage
from .engines import cores, open_engine
from .late_keys import marker_needs, unit_needs
from .output import PREVIOUS, OutputFolder
from .owner import check_owner, check_shards, claim
from .previous import discard_previous, previous_complete, restore_previous, sweep
from .card import incomplete_card
from .framing import framing, missing_bos
from .plan import PlannedUnit, plan
from .ray_engine import probe_ray_address, require_ray
from .renumber import adopt_moved, renumbered_line
from .reports import Progress, write_reports
from .store import fence, still_held
from .tools_column import check_named_columns
from .unit import work_unit
from .writers import writer_for

__all__ = ["run", "load_run_tokenizer"]


def load_run_tokenizer(cfg: RunConfig, log: Callable[[str], None] = print):
    """Load the config's tokenizer.

    ``tokenizer.path`` is anything :func:`rmlprep.load_tokenizer` reads (``name`` passed for
    tiktoken rank files), ``demo:gpt2`` (see :mod:`rmlprep.demo`), or a ``*.spec.json`` file
    holding ``TokenizerSpec.to_dict()`` (see :func:`rmlprep.load.open_tokenizer`).

    Returns:
        (tokenizer, the file whose sha256 identifies it for parity fixtures, or None).
    Raises:
        ConfigError: the file is missing. LoaderError: it cannot be read.
    """
    return open_tokenizer(cfg["tokenizer"]["path"], name=cfg["tokenizer"]["name"], log=log)


def run(cfg: RunConfig, *, resume: bool = False, overwrite: bool = False, tokenizer=None,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run a config end to end and return the manifest.

    The output folder is locked for the whole run (a second run into it fails at once). A rerun
    into the same folder (with or without ``resume``) skips every unit whose done marker names
    this config and this unit's input identity and whose shard's sha256 matches it; other
    units are redone, and files of units that are no longer in the plan are removed. The files
    a rerun replaces are set aside until its manifest is written; a rerun that raises puts a
    complete previous run's folder back as it was (:mod:`.previous`),
    while one stopped by Ctrl-C or SIGTERM keeps the units it finished for a resume.
    Units run in a local process pool, or as Ray tasks with ``run.engine = "ray"``; the
    engine changes neither the bytes nor the config hash.

    Args:
        cfg: a validated :class:`RunConfig`.
        resume: say explicitly that a previous run is continued (logged; same behaviour).
        overwrite: replace shards of a different config in the output directory (every unit is
            then written again); in a folder rmlprep did not write, write beside files whose
            names rmlprep does not use (:mod:`.owner`: files under its names are never
            replaced). With ``resume`` too: a folder holding only this config's units (and
            tokenizer's) is continued as with ``resume`` alone; any other is replaced.
        tokenizer: use this tokenizer instead of loading ``tokenizer.path`` (tests, libraries).
        log: where the run's lines go (the summary table last).
    Returns:
        The manifest (``manifest.json``'s content), also for a run whose shards hold no
        document (every row rejected, or no row read): ``manifest["totals"]["documents"] == 0``
        is no success, and ``rmlprep run`` and the scripts in ``pipelines/`` exit 2 for it; it
        is returned, not raised, so a caller can read the counts and the rejects it names. A
        caller that wants those exit rules calls :func:`rmlprep.cli.run_exit_status` instead.
    Raises:
        ConfigError, LoaderError: bad config or tokenizer; Ray missing or its cluster out of
        reach; an error about a path that does not exist says how the config's relative path
        was resolved (:meth:`~rmlprep.config.RunConfig.relative_note`: against the current
        directory). InputError: an input file unreadable as a whole. ParityError: the parity
        stage failed (nothing is processed). OutputError: the folder is not empty and was not
        written by rmlprep (:mod:`.owner`), another run holds it, or it cannot be written (the
        run stops at the first such fault). RmlprepError: units failed in a way that is not a
        bad row (every failed unit is named).
    """
    tidy = tidy_paths(cfg)  # '/p/sub/../data/x.jsonl' shows as '/p/data/x.jsonl' (display only)
    try:
        try:
            return _run(cfg, resume=resume, overwrite=overwrite, tokenizer=tokenizer, log=lambda m: log(tidy(m)))
        except ConfigError as e:
            note = cfg.relative_note(e.path)
            if not note:
                raise
            raise ConfigError(f"{e}{note}", path=e.path) from None
    except RmlprepError as e:
        if (len(e.args) == 1 and isinstance(e.args[0], str) and type(e).__str__ is BaseException.__str__
                and not getattr(e, "paths_as_hashed", False)):  # a config change shows the paths compared
            e.args = (tidy(e.args[0]),)  # the same error (class, path), its message as the log shows paths
        raise


def _run(cfg: RunConfig, *, resume: bool = False, overwrite: bool = False, tokenizer=None,
         log: Callable[[str], None] = print) -> dict[str, Any]:
    """:func:`run` without the note on relative paths."""
    engine_name = cfg["run"]["engine"]
    if engine_name == "ray":
        require_ray()  # before any work: a missing Ray fails with the pip line
        if cfg["run"]["ray_address"]:
            probe_ray_address(cfg["run"]["ray_address"])  # and a cluster out of reach in seconds, not minutes
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    tok_file = None
    if tokenizer is None:
        tokenizer, tok_file = load_run_tokenizer(cfg, log=log)
    timings["load_tokenizer"] = time.perf_counter() - t_start
    added = framing(cfg, tokenizer).describe(tokenizer)  # [pack] against the tokenizer: before any corpus work
    no_bos = missing_bos(cfg, tokenizer)  # a Gemma document packed without the <bos> its tokenizer adds
    cfg = resolve_chat_config(cfg, tokenizer, log=log)  # sft: chat.format "auto" → the proved format
    out = OutputFolder(cfg.output_dir)
    check_owner(out, overwrite=overwrite)  # a folder rmlprep did not write: refused, left as it was
    t = time.perf_counter()
    units = plan(cfg, log=log)
    timings["plan"] = time.perf_counter() - t
    check_named_columns(cfg, units, log=log)  # sft: a tools, system or media column the config does not name is refused
    with out.lock():  # one run per folder, writable: checked before any corpus work
        holder = fence(out)  # on a store: nothing is committed once another run took the lease over
        claim(out)  # the folder is rmlprep's from here on: a killed first run resumes
        if getattr(out, "lock_note", ""):  # an object store's lock (see store.py)
            log(f"output: {out.lock_note}")
        if resume and overwrite:  # the pair: continue a folder of this config, else replace (README "Resume")
            overwrite = not _resumable(out, cfg, tokenizer, log)
        if not overwrite:  # another config's folder is refused before a killed rerun's set-aside files are removed:
            # they may be the complete run it was replacing (careless-user trial U5); and before the parity
            # stage, which an sft run spends seconds on (a trial waited through it for this refusal)
            empty = check_shards(out, cfg.config_hash, overwrite=False, tokenizer=tokenizer.fingerprint, config=cfg)
        t = time.perf_counter()
        parity = run_parity_stage(cfg, tokenizer, tok_file, units, log=log)
        timings["parity"] = time.perf_counter() - t
        check_chat_markers(cfg, tokenizer)  # sft: after parity, whose refusal names the right format
        refuse_chat_before_corpus(cfg, tokenizer)  # sft on a .model read alone: a render no reference gives
        back = [] if overwrite else _take_back_set_aside(out, cfg.config_hash, tokenizer.fingerprint)
        if back:
            log(f"output: a rerun killed before it wrote any unit had set this config's complete folder aside in "
                f"{PREVIOUS}: put back ({len(back)} files), its units kept, not redone")
        leftover = discard_previous(out)  # a killed rerun's: its done units stay, as a stopped run's do
        if leftover:
            log(f"output: removed {len(leftover)} file{'s' if len(leftover) != 1 else ''} of an earlier run that "
                f"a rerun killed mid-way had set aside in {PREVIOUS}")
        kept: set[int] = set()  # the units whose files this run leaves as they are
        try:
            replaced = len(out.unit_files()) if overwrite else 0
            if overwrite:  # sets every file aside: after the leftover is gone
                empty = check_shards(out, cfg.config_hash, overwrite=True, tokenizer=tokenizer.fingerprint, config=cfg)
                if replaced:  # said, whatever config they were of (careless-user U4: "nothing done yet")
                    log(f"output: --overwrite: the {replaced} unit{'s' if replaced != 1 else ''} in {out.path} set aside "
                        "(removed once this run completes) and every unit written again")
            if empty:
                log(f"output: {empty} unit{'s' if empty != 1 else ''} of another config or tokenizer "
                    f"hold{'s' if empty == 1 else ''} no document "
                    "(every row rejected, or none read): redone without --overwrite")
            records, todo, why = _done_units(out, units, cfg.config_hash, tokenizer.fingerprint, marker_needs(cfg, tokenizer))
            _name_new_inputs(out, todo, why, units)
            kept.update(records)
            planned = {u.index for u in units}
            stale = sorted(i for i in out.unit_files() if i not in planned)
            sweep(out, keep=planned, redo={u.index for u in todo})
            # moved, not changed; --overwrite rewrites every unit (and counts what old markers lack)
            adopted = {} if overwrite else adopt_moved(out, todo, cfg, tokenizer, writer_for(cfg, tokenizer))
            records.update({i: rec for i, (_, rec) in adopted.items()})
            todo = [u for u in todo if u.index not in adopted]
            _log_resume(out, len(units), len(kept), {i: old for i, (old, _) in adopted.items()}, todo, why,
                        resume and not replaced, log)  # what --overwrite set aside is not resumed: said above
            if stale:
                log(f"output: removed the files of {len(stale)} unit{'s' if len(stale) != 1 else ''} that are not in "
                    f"this plan (the input shrank or is planned differently): units {stale[0]}..{stale[-1]}")
            if todo and cfg["output"]["format"] == "parquet" and not out.exists("manifest.json"):
                # until its manifest is written the folder holds part of the data: a card no
                # datasets load takes for the whole (a failed, stopped or killed run leaves it)
                card = incomplete_card(str(out.path))
                out.commit("README.md", lambda f: f.write(card))
            workers = cfg["run"]["workers"] or cores()
            workers = max(1, min(workers, len(todo))) if todo else 1
            total_bytes = sum(u.nbytes for u in units)
            prog = Progress(cfg["run"]["progress"], total_bytes, len(units), log)
            log = prog.say  # a bar on the terminal from here on: lines are written above it, not glued to it
            for rec in records.values():
                prog.unit_done(rec, skipped=True)
            if no_bos:
                log(no_bos)
            if added:  # the ids the pack stage adds, named (an instruct folder's eos is its turn end)
                log(added)
            how = ("every unit done, nothing to process" if not todo else "engine ray" if engine_name == "ray"
                   else f"{workers} worker{'s' if workers != 1 else ''}")  # a pool starts only for units to do
            log(f"run: {len(units)} unit{'s' if len(units) != 1 else ''}, {total_bytes / 1e6:.1f} MB, {how}, "
                f"tokenizer {tokenizer.fingerprint[:12]}, output {out.path}")
            errors: list[dict[str, Any]] = []
            # largest units first balances the workers; the output does not depend on order
            order = sorted(todo, key=lambda u: (-u.nbytes, u.index))
            t = time.perf_counter()
            try:
                if todo:
                    with open_engine(engine_name, workers=workers, ray_address=cfg["run"]["ray_address"],
                                     log=log) as engine:
                        if engine_name == "ray":
                            timings["engine_start"] = engine.startup_seconds
                        workers = engine.workers
                        t = prog.t0 = time.perf_counter()  # rates and ETA from the first unit on
                        results = engine.imap_unordered(work_unit, order, (cfg, tokenizer, holder))
                        try:
                            for rec in results:
                                if "error" in rec:
                                    errors.append(rec)
                                    if rec.get("fatal"):  # e.g. the output folder is unusable: stop every unit
                                        break
                                    continue
                                records[rec["unit"]] = rec
                                prog.unit_done(rec)
                        finally:
                            results.close()  # stops the pool / cancels the tasks still queued
                        timings["process"] = time.perf_counter() - t
                        t = time.perf_counter()
                    if engine_name == "ray":
                        timings["engine_stop"] = time.perf_counter() - t
            finally:
                prog.close()
                # on every way out (done, a fatal error that terminated the pool, an exception, Ctrl-C):
                # the temporaries of units whose worker was stopped or killed mid-write (a Ray worker
                # killed by its memory monitor leaves one even when the retried task succeeds); the lock
                # is held and the engine is closed, so each is this run's and nothing will rename it
                try:
                    if still_held(out, log, "this run's temporaries stay (the next run removes them)"):  # else
                        # they are the run that took the folder over's
                        out.remove_temporaries()
                except OutputError:
                    pass  # the folder refuses it: the next run removes them (owner.check_shards)
            timings.setdefault("process", time.perf_counter() - t)
            if errors:  # the units done stay unless the previous complete folder comes back (_put_back)
                raise _unit_errors(errors, done=0 if previous_complete(out) else len(records), where=out.path)
            _units_live_line(cfg, parity, records, {u.index for u in todo}, log, unit_sample_size(cfg, tokenizer) > 0)
            timings["total"] = time.perf_counter() - t_start
            manifest = write_reports(cfg, tokenizer, units, records, parity, timings, workers, {u.index for u in todo},
                                     log, holder)
        except Exception:  # a failed unit, a full disk, a bug: the previous complete run comes back
            if still_held(out, log, f"output: what this run set aside in {PREVIOUS}/ is not put back (a complete "
                          "previous run's files: move them back by hand before the next run, which may drop them)"):
                _put_back(out, kept, log)  # else a run that lost its lease leaves the folder to the one holding it
            raise
        except BaseException:  # Ctrl-C, SIGTERM: the done units stay and --resume continues
            with suppress(OutputError):
                if still_held(out, log, f"output: what this run set aside in {PREVIOUS}/ stays (the next run drops it)"):
                    discard_previous(out)
            raise
        with suppress(OutputError):  # the manifest is committed: the run is done whatever happens here
            discard_previous(out)
        return manifest


def _units_live_line(cfg: RunConfig, parity: dict[str, Any], records: dict[int, dict[str, Any]],
                     processed: set[int], log: Callable[[str], None], expected: bool = False) -> None:
    """sft: what the workers' live chat checks compared (``chat_live_compared`` of the markers this
    run wrote: :mod:`rmlprep.chat_unit_sample`) goes into the manifest as ``parity.chat.live_units``
    (``{"units", "compared", "written"}``, ``written`` the conversations the format wrote in them) and a
    log line; nothing when no unit compared any. When this process could render the template (``expected``) and a unit's worker did not (a Ray node
    without jinja2), a warning names how many units went unchecked: it said nothing."""
    skipped = [i for i in sorted(processed) if i in records and "chat_live_compared" not in records[i]]
    if expected and skipped:
        log(f"warning: parity: {len(skipped)} of the {len(processed)} units processed were not compared live with the "
            f"chat template (from unit {skipped[0]}): their worker could not render it (jinja2 is not installed "
            "there; pip install jinja2 on every node)")
    done = [i for i in sorted(processed) if "chat_live_compared" in records.get(i, {})]
    chat = parity.get("chat")
    if not done or not isinstance(chat, dict):
        return
    got = sum(records[i]["chat_live_compared"] for i in done)
    written = sum(records[i].get("chat_live_written", 0) for i in done)
    chat["live_units"] = {"units": len(done), "compared": got, "written": written}
    k = cfg["parity"]["chat_live_sample"]
    units = f"{len(done)} unit{'s' if len(done) != 1 else ''}"
    log(f"parity: {got:,} of the {written:,} conversations written by the {units} processed (every one of a unit of "
        f"up to {k:,}, of a larger one about {k:,}·(1 + ln(rows/{k:,})) spread over it) rendered with the tokenizer's "
        f"chat template match format {cfg['chat']['format']!r}")


def _take_back_set_aside(out: OutputFolder, config_hash: str, tokenizer: str) -> list[str]:
    """Put back what a killed rerun set aside when it is a complete folder of this very config
    and tokenizer (its ``manifest.json`` says so) and the folder holds no unit file since (the
    rerun died before committing one: a SIGKILLed ``--overwrite``): a rerun of the old config
    then keeps its verified units instead of removing them and writing every unit again. Any
    other leftover is discarded as before (:func:`.previous.discard_previous`). Returns the
    names put back ([] when nothing was)."""
    if not previous_complete(out) or out.unit_files():
        return []
    m = out.read_json(f"{PREVIOUS}/manifest.json")
    if (not isinstance(m, dict) or m.get("config_hash") != config_hash
            or not isinstance(m.get("tokenizer"), dict) or m["tokenizer"].get("fingerprint") != tokenizer):
        return []
    return restore_previous(out, set())


def _put_back(out: OutputFolder, kept: set[int], log: Callable[[str], None]) -> None:
    """After a run failed: when what it set aside (:func:`.previous.sweep`) is a
    complete run's folder (its manifest among it), put it back and remove what this run wrote, so
    a bad rerun (an input file cut short, a unit that fails) leaves the previous complete folder as
    it was, never a mix of two inputs' shards; else (the previous run was itself cut short, or
    nothing was set aside) drop it, as a stopped run does: the units done stay for a resume."""
    try:
        if previous_complete(out):
            back = restore_previous(out, kept)
            log(f"output: this run failed, so the previous run's folder is back as it was ({len(back)} files put "
                "back, the files this run wrote removed)")
        else:
            discard_previous(out)
    except OutputError as e:
        log(f"output: the previous run's files could not all be put back ({e}); what is left of them is in "
            f"{PREVIOUS}, which the next run removes")


def _unit_errors(errors: list[dict[str, Any]], *, done: int = 0, where: object = "") -> RmlprepError:
    """One error for the failed units: the OutputError that stopped the run, else every unit's,
    then, when ``done`` units are done and stay in the folder ``where`` (no previous complete
    folder comes back in their place), that a rerun keeps them. A file fault (a hole of zeros, a
    cut gzip stream) said "fetch the file again" and nothing of the units written beside it:
    they stay, verified, and a rerun after the fix does only the rest, as a fresh run would
    (test_a_file_fault_mid_run_keeps_the_done_units_for_the_rerun)."""
    fatal = [e for e in errors if e.get("fatal")]
    if fatal:  # the one that stopped the run, as its own kind
        if fatal[0]["kind"] == "ParityError":  # a unit's live chat check (exit 3, as the parity stage's)
            kept = (f"\n  the {done} unit{'s' if done != 1 else ''} done before it stay{'s' if done == 1 else ''} in "
                    f"{where}: a rerun with parity.chat_live_sample = 0 keeps {'them' if done != 1 else 'it'} and "
                    "writes the rest in the format's text" if done else "")
            return ParityError("", 0, [], [], source="unit", message=fatal[0]["error"] + kept)
        kind = {"OutputError": OutputError, "ConfigError": ConfigError}.get(fatal[0]["kind"], RmlprepError)
        return kind(fatal[0]["error"])
    same: dict[str, list[int]] = {}  # one line per error, naming its units (a file changed under 18 units: once)
    for e in sorted(errors, key=lambda e: e["unit"]):
        same.setdefault(e["error"], []).append(e["unit"])
    msgs = [f"{_unit_list(units)} failed: {error}" for error, units in same.items()]
    kept = (f"; the {done} unit{'s' if done != 1 else ''} done stay{'s' if done == 1 else ''} in {where}: a rerun "
            "after the fix keeps them and does the rest (the units of a file that changed are redone)") if done else ""
    return RmlprepError("; ".join(msgs[:5]) + (f" (and {len(msgs) - 5} more errors)" if len(msgs) > 5 else "") + kept)


def _done_units(out: OutputFolder, units: list[PlannedUnit], config_hash: str, tokenizer: str | None = None,
                needs: dict[str, Any] | None = None,
                ) -> tuple[dict[int, dict[str, Any]], list[PlannedUnit], dict[int, str]]:
    """Split the plan into units already done (their verified markers) and units to process,
    with the reason each of those is (:meth:`.output.OutputFolder.verify_done`)."""
    records: dict[int, dict[str, Any]] = {}
    todo: list[PlannedUnit] = []
    why: dict[int, str] = {}
    for u in units:
        unit_keys = {**(needs or {}), **unit_needs(u.format)}  # the config's, and its input format's (CSV)
        m, reason = out.verify_done(u.index, config_hash, u.identity, tokenizer, unit_keys)
        if m is not None:
            records[u.index] = m
        else:
            todo.append(u)
            why[u.index] = reason
    return records, todo, why


#: :meth:`.output.OutputFolder.verify_done`'s reasons that :func:`_name_new_inputs` looks into
_CHANGED, _NO_MARKER = "input changed since the unit was done", "no done marker"

def _name_new_inputs(out: OutputFolder, todo: list[PlannedUnit], why: dict[int, str],
                     units: list[PlannedUnit]) -> None:
    """Say what happened to the input of the units to redo whose marker holds other input or
    none: "input changed" named a file added to the glob as changed (a new file is not a changed
    one). A unit whose files are none of the last complete run's (the folder's manifest.json:
    its shards' sources) reads a new input file; one whose marker names other files than its own
    (no manifest: a stopped run's folder) reads other input at its number. A marker of the same
    files holding another planned unit's input (a file added or removed before them moved the
    units of a stopped run, one of which had no marker) leaves this unit's input with "no done
    marker": it said "input changed", of input never done. A marker of the same files with bytes
    no unit of the plan reads keeps "input changed". Reads the manifest, and a marker again only
    for a unit whose input changed."""
    asked = [u for u in todo if why[u.index] in (_CHANGED, _NO_MARKER) and u.format != "stdlib"]
    manifest = out.read_json("manifest.json") if asked else None
    before: set[str] | None = None
    planned: set[str] | None = None  # the plan's input identities, once one is asked for
    if isinstance(manifest, dict) and isinstance(manifest.get("shards"), list):
        before = {Unit.described_path(s["source"]) for s in manifest["shards"]
                  if isinstance(s, dict) and isinstance(s.get("source"), str)}
    for u in asked:
        paths = [f[0] for f in u.identity.get("files", [])]
        if before is not None and paths and not any(p in before for p in paths):
            why[u.index] = "a new input file, not in the last complete run"
        elif why[u.index] == _CHANGED:
            m = out.read_done(u.index)
            held = m.get("input") if isinstance(m, dict) else None
            if isinstance(held, dict) and [f[0] for f in held.get("files", []) if f] != paths:
                why[u.index] = "other input at this unit number (an input file added or removed before it)"
            elif isinstance(held, dict):
                if planned is None:
                    planned = {json.dumps(v.identity, sort_keys=True) for v in units}
                if json.dumps(held, sort_keys=True) in planned:  # another unit's input, moved: not this one's
                    why[u.index] = _NO_MARKER


def _resumable(out: OutputFolder, cfg: RunConfig, tokenizer, log: Callable[[str], None]) -> bool:
    """``resume`` and ``overwrite`` together: whether the folder holds nothing ``--overwrite`` would
    replace (no unit of another config or tokenizer, no shard under an earlier naming:
    :func:`.owner.check_shards` refuses none), so the run continues it as ``--resume`` alone does
    (said in the log); else ``--overwrite`` sets its units aside and writes every unit."""
    try:
        check_shards(out, cfg.config_hash, overwrite=False, tokenizer=tokenizer.fingerprint, config=cfg)
    except ConfigError:
        return False
    if out.unit_files():
        log(f"output: --resume with --overwrite: {out.path} holds no trained unit of another config or tokenizer: "
            "continued as --resume alone continues it, nothing set aside")
    return True


def _log_resume(out: OutputFolder, n_units: int, n_kept: int, moves: dict[int, int], todo: list[PlannedUnit],
                why: dict[int, str], resume: bool, log: Callable[[str], None]) -> None:
    """The log's resume lines: how many units are kept as done, renumbered ({new: old}) and to
    process, and why (its units named); a run with nothing done says so only with ``resume``."""
    redo: dict[str, list[int]] = {}
    for u in todo:
        redo.setdefault(why[u.index], []).append(u.index)
    if n_kept or moves or set(redo) - {"no done marker"}:
        log(f"resume: {n_kept} of {n_units} units already done and verified (input and sha256); "
            + (f"{len(moves)} renumbered; " if moves else "") + f"{len(todo)} to process"
            + (" (" + "; ".join(f"{w}: {len(ix)} ({_unit_list(ix)})" for w, ix in redo.items()) + ")" if redo else ""))
        if moves:
            log(renumbered_line(moves))
    elif resume:
        log(f"resume: nothing done yet in {out.path}; processing all {n_units} units")


def _unit_list(indices: list[int], most: int = 4) -> str:
    """Unit numbers as runs: ``unit 3``, ``units 0..6, 9``; past ``most`` runs, how many more."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    shown = [str(a) if a == b else f"{a}..{b}" for a, b in runs[:most]]
    more = f", and {len(runs) - most} more runs" if len(runs) > most else ""
    return f"unit{'s' if len(indices) != 1 else ''} {', '.join(shown)}{more}"
