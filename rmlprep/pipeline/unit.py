"""One unit of work, start to finish: the function every engine runs.

:func:`process_unit` is the list of stage calls; the stages live in :mod:`.stages` (read,
validate, tokenize), :mod:`.pack`, :mod:`.writers` and :mod:`.output` (write, commit). It is a
pure function of (unit, config, tokenizer) apart from the files it commits, so any worker, in
any process or on any node, gives the same bytes.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar


from .._version import __version__
from ..config import RunConfig
from ..errors import OutputError, ParityError, RmlprepError
from ..readers import Unit
from ..readers.rules import READ_RULES
from ..reject_kinds import KINDS
from ..shards import rejects_name
from .output import MARKER_VERSION, OutputFolder
from .pack import Packed, pack_conversations, pack_documents, unfilled_tokens
from .plan import check_unchanged, input_identity
from .chat_stages import format_and_tokenize, validate_conversations
from .late_keys import chat_rules
from .stages import REJECT_STAGES, Tally, read, tokenize_texts, validate_texts
from .store import fence
from .writers import shard_schema, writer_for

__all__ = ["process_unit", "work_unit", "StageClock"]

T = TypeVar("T")

#: pipeline → (validate, tokenize, pack)
_STAGES = {
    "pretrain": (validate_texts, tokenize_texts, pack_documents),
    "sft": (validate_conversations, format_and_tokenize, pack_conversations),
}


def process_unit(unit: Unit, cfg: RunConfig, tokenizer, holder: str = "") -> dict[str, Any]:
    """Run read → validate → (format +) tokenize → pack → write → commit for one unit.

    Args:
        unit: a planned unit (:class:`.plan.PlannedUnit`, whose input identity goes into the
            marker), or a bare :class:`~rmlprep.readers.Unit` (its identity is computed here).
        holder: on an object store, the lease token of the run (:func:`.store.fence`): each file
            is committed only while the folder's lock holds it ("": no check).
    Returns:
        the done-marker record (also committed as ``shard-NNNNN.done.json``): counts, sha256,
        the input identity, the document-length histogram and per-stage seconds.
    Raises:
        ConfigError: the tokenizer lacks an id the ``[pack]`` section asks for.
        InputError: the input file is unreadable as a whole, or changed since it was planned.
        OutputError: a file could not be written, or another run holds the folder now (nothing
            of the unit looks done then).
    """
    validate, tokenize, pack = _STAGES[cfg.pipeline]
    out = OutputFolder(cfg.output_dir)
    fence(out, holder)
    clock = StageClock()
    tally = Tally(unit)
    identity = getattr(unit, "identity", None) or input_identity(unit)
    check_unchanged(unit)
    try:
        batches = clock.timed("read", read(unit, cfg, tally))
        rows = clock.timed("validate", validate(batches, cfg, tally))
        docs = clock.timed("tokenize", tokenize(rows, cfg, tokenizer, tally))
        packed = pack(docs, cfg, tokenizer, tally)
        with clock.stage("write"):  # the writer pulls the rows through every stage as it writes them
            files = writer_for(cfg, tokenizer).write(out, unit.index, _then_checked(clock.timed("pack", packed), unit,
                                                                                 packed, tally),
                                                     shard_metadata(unit, cfg, tokenizer), schema=packed.schema)
            rejects = (out.commit(rejects_name(unit.index), tally.write_rejects, digest=True)
                       if tally.n_rejects else None)
    finally:
        tally.close()
    record = unit_record(unit, cfg, packed, tally, files, identity, clock.seconds(), rejects)
    record["tokenizer"] = tokenizer.fingerprint  # resume redoes a unit made with another tokenizer
    out.write_done(unit.index, record)  # commit: last, after every file it vouches for
    return record


def _then_checked(pieces: Iterator[T], unit: Unit, packed: Packed, tally: Tally) -> Iterator[T]:
    """``pieces``, then, before the shard is committed, checks that what was read is what was
    planned and that every row read is a document or a reject.

    Raises:
        InputError: an input file changed since the plan.
        RmlprepError: rows were lost between the reader and the packer (a bug; the unit is not
            committed, so a rerun does it again).
    """
    yield from pieces
    check_unchanged(unit)
    if packed.documents + tally.n_rejects != tally.rows_read:
        raise RmlprepError(f"{unit.describe()}: {tally.rows_read} rows read, but {packed.documents} documents + "
                           f"{tally.n_rejects} rejects: rows were lost between the stages (a bug in rmlprep "
                           f"{__version__}: please report it); the unit is not committed")


def work_unit(unit: Unit, cfg: RunConfig, tokenizer, holder: str = "") -> dict[str, Any]:
    """:func:`process_unit` as an engine runs it: a unit that fails on purpose (RmlprepError) or
    on an input file the system cannot read (OSError) comes back as ``{"unit": i, "kind":
    "InputError", "error": "...", "fatal": False}`` so the run can report every failed unit;
    ``"fatal"`` is True for an :class:`~rmlprep.errors.OutputError` (the run stops: no other unit
    can be written either) and a :class:`~rmlprep.errors.ParityError` (a conversation of the unit
    that the tokenizer's chat template writes otherwise than ``chat.format``: the config is at
    fault, not the unit, so the run stops rather than write the other units).
    Any other exception is a bug and propagates."""
    try:
        return process_unit(unit, cfg, tokenizer, holder)
    except RmlprepError as e:
        return {"unit": unit.index, "kind": type(e).__name__, "error": str(e),
                "fatal": isinstance(e, (OutputError, ParityError))}
    except OSError as e:  # reading an input file: permission, I/O error (writes raise OutputError)
        return {"unit": unit.index, "kind": "InputError", "fatal": False,
                "error": f"{e.filename or unit.path}: {e.strerror or e} (reading {unit.describe()})"}


def shard_metadata(unit: Unit, cfg: RunConfig, tokenizer) -> dict[str, str]:
    """The ``rmlprep.*`` key-value metadata of a unit's shard (:data:`rmlprep.shards.SHARD_METADATA_KEYS`)."""
    return {
        "rmlprep.version": __version__,
        "rmlprep.tokenizer_fingerprint": tokenizer.fingerprint,
        "rmlprep.config_hash": cfg.config_hash,
        "rmlprep.unit": str(unit.index),
        "rmlprep.pipeline": cfg.pipeline,
        "rmlprep.seq_len": str(cfg["pack"]["seq_len"]),
    }


def unit_record(unit: Unit, cfg: RunConfig, packed: Packed, tally: Tally, files: dict[str, str],
                identity: dict[str, Any], seconds: dict[str, Any],
                rejects_sha256: str | None = None) -> dict[str, Any]:
    """The done-marker record of a unit: what was read, rejected, tokenized, packed and written
    (``packed`` after its rows were written; ``rejects_sha256``: of the rejects file committed,
    None when there is none)."""
    seq_len = cfg["pack"]["seq_len"]
    rows, real = packed.rows, packed.written_tokens
    # room below seq_len: sft, what BFD leaves in its rows (its padding ratio); pretrain, the
    # unit's short last row (concat packing fills every other row)
    unfilled = unfilled_tokens(rows, real, seq_len)
    pad_tokens = unfilled if cfg["pack"]["pad"] else 0  # pad ids written into the rows (sft only)
    shard, digest = next(iter(files.items()))  # the shard is the writer's first file
    return {
        "marker_version": MARKER_VERSION,  # what the marker vouches for (output.MARKER_VERSION)
        "unit": unit.index,
        "source": unit.describe(),
        "shard": shard,
        "sha256": digest,
        **({"files": files} if len(files) > 1 else {}),  # every file the marker vouches for
        # a Parquet shard's columns: with the unit column since the key exists (late_keys.marker_needs)
        **({"columns": shard_schema(packed.schema).names} if cfg["output"]["format"] == "parquet" else {}),
        # sft: chat text encoded with a .model's '▁' per text after a special token (late_keys.marker_needs)
        **({"chat_text_prefix": "per_text"} if cfg.pipeline == "sft" else {}),
        # sft: a tools column's [] read as no tools by chat.json_tools (late_keys.marker_needs)
        **({"json_tools_empty": "no_tools"} if cfg.pipeline == "sft" else {}),
        # CSV: a record of the header's column names is a reject, not a document (late_keys.unit_needs)
        **({"csv_header_rows": "rejected"} if unit.format == "csv" else {}),
        # the rules version of the reader of the unit's format (readers.rules, late_keys.unit_needs)
        **({"read_rules": READ_RULES[unit.format]} if unit.format in READ_RULES else {}),
        # sft: the rules version of the chat format that wrote the rows (late_keys.chat_rules)
        **({"chat_rules": rules} if (rules := chat_rules(cfg)) is not None else {}),
        "config_hash": cfg.config_hash,
        "input": identity,
        "rows_read": tally.rows_read,
        "rows": rows,
        "short_rows": packed.short_rows,
        "documents": packed.documents,
        "rejects": tally.n_rejects,
        **({"rejects_sha256": rejects_sha256, "rejects_bytes": tally.rejects_bytes,
            "rejects_by_stage": {k: tally.by_stage[k] for k in REJECT_STAGES if k in tally.by_stage},
            "rejects_by_kind": {k: tally.by_kind[k] for k in KINDS if k in tally.by_kind}}
           if tally.n_rejects else {}),
        "blank_lines": tally.blank,
        "lone_surrogate_rows": tally.surrogate_rows,
        "tokens": packed.tokens,
        "written_tokens": real,
        "arrow_bytes": packed.arrow_bytes(cfg["output"]["row_group_rows"]),  # the card's num_bytes
        "pad_tokens": pad_tokens,
        "unfilled_tokens": unfilled,
        "padding_ratio": unfilled / (rows * seq_len) if rows else 0.0,
        "bytes": tally.nbytes,
        "max_document_tokens": packed.max_document_tokens,
        **packed.stats,
        **tally.counts,
        "length_hist": packed.length_hist.tolist(),
        "seconds": seconds,
    }


class StageClock:
    """Seconds spent in each stage of a unit, exclusive: while a stage pulls from the one
    before it (generators), the time is charged to the inner stage.

    Wall seconds (``time.perf_counter``) and the CPU seconds of the calling thread
    (``time.thread_time``: user + system, the page faults included) are charged side by side: on
    a machine shared with other processes a unit's wall seconds include the time it waited for a
    core, its CPU seconds do not (``python -m bench job`` reports both).
    """

    def __init__(self) -> None:
        self.t0 = self._t = time.perf_counter()
        self.c0 = self._c = time.thread_time()
        self._stack: list[str] = []
        self._spent: dict[str, float] = {}
        self._cpu: dict[str, float] = {}

    def _charge(self) -> None:
        now, cpu = time.perf_counter(), time.thread_time()
        if self._stack:
            name = self._stack[-1]
            self._spent[name] = self._spent.get(name, 0.0) + now - self._t
            self._cpu[name] = self._cpu.get(name, 0.0) + cpu - self._c
        self._t, self._c = now, cpu

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        self._charge()
        self._stack.append(name)
        try:
            yield
        finally:
            self._charge()
            self._stack.pop()

    def timed(self, name: str, it: Iterator[T]) -> Iterator[T]:
        """Iterate ``it``, charging the time spent producing each item to stage ``name``."""
        it = iter(it)
        while True:
            with self.stage(name):
                try:
                    box = [next(it)]
                except StopIteration:
                    return
            yield box.pop()  # not kept here while the consumer works on it (a batch can be large)

    def seconds(self) -> dict[str, Any]:
        """``total`` and each stage's wall seconds, and under ``"cpu"`` the same in CPU seconds of
        this thread; rounded to 0.1 ms."""
        out: dict[str, Any] = {"total": round(time.perf_counter() - self.t0, 4)}
        out.update({k: round(v, 4) for k, v in self._spent.items()})
        cpu = {"total": round(time.thread_time() - self.c0, 4)}
        cpu.update({k: round(v, 4) for k, v in self._cpu.items()})
        out["cpu"] = cpu
        return out
