"""One unit's stages before packing: read → validate → (format +) tokenize.

Each stage is a generator over the previous one, so a unit streams through in bounded batches
(``input.batch_rows`` rows at a time) and only the packer holds more than one batch. Rows that
cannot be processed are recorded in the unit's :class:`Tally` (→ ``rejects/``) with their
source row and reason; the run goes on.

**Lone surrogates.** JSON text may escape half of a UTF-16 pair (``"\\ud800"``), which Python
decodes to a str that no UTF-8 encoder accepts. Validation replaces each lone surrogate with
U+FFFD, as tiktoken does before encoding (:func:`rmlprep.segment.replace_lone_surrogates`, the
one rule every encode path of rmlprep applies), and counts the rows where it happened
(``lone_surrogate_rows`` in the done marker and the manifest): the row is kept, and no id
sequence ever encodes bytes that are not UTF-8. The tokenizer then finds nothing left to
replace (its check is the native scan :func:`rmlprep.native.surrogate_rows`).

=============  ====================================================================
stage          what it does
=============  ====================================================================
:func:`read`   the unit's rows as :class:`~rmlprep.readers.Batch` objects
               (:func:`rmlprep.readers.read_unit`); rows the reader could not parse
               (bad JSON, bad UTF-8, a missing column) → rejects
validate       :func:`validate_texts`: a string per row (pretrain); anything else →
               rejects
tokenize       :func:`tokenize_texts`: :func:`rmlprep.arrow.tokenize_text`; a row
               the tokenizer refuses → rejects
=============  ====================================================================

The sft pipeline's validate and tokenize stages are in :mod:`rmlprep.pipeline.chat_stages`
(``validate_conversations``, ``format_and_tokenize``).
"""

from __future__ import annotations

import base64
import datetime
import heapq
import json
import math
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any, TypeVar

import numpy as np
import pyarrow as pa

from ..arrow import tokenize_text
from ..config import RunConfig
from ..errors import RmlprepError
from ..native import encode_arrow_flat, surrogate_rows
from ..readers import Batch, Unit, read_unit
from ..reject_kinds import kind_of
from ..segment import replace_lone_surrogates
from .output import json_line
from .tools_column import watched_fields

__all__ = ["Tally", "Rows", "Docs", "REJECT_STAGES", "pack_may_leave_out", "held_values", "json_value", "replace_lone_surrogates", "read", "validate_texts", "tokenize_texts"]
T = TypeVar("T")

#: Reject records spooled in memory up to this many bytes, then in a temporary file.
REJECT_SPOOL_BYTES = 8 << 20
#: The ``stage`` of a reject record: ``read`` (the reader could not parse the row: not UTF-8,
#: not JSON, no such field; no value), ``validate`` (not a string / not a conversation in the
#: messages schema), ``format`` (sft: the chat format refuses the conversation), ``tokenize``
#: (the tokenizer refuses the text), ``pack`` (``pack.overflow = "drop"``, or sft truncation
#: that trains nothing).
REJECT_STAGES = ("read", "validate", "format", "tokenize", "pack")


def _a(noun: str) -> str:
    """``noun`` with its indefinite article ("an int", "a list")."""
    return ("an " if noun[:1] in "aeiou" else "a ") + noun


def json_value(value: Any) -> tuple[Any, dict[str, str]]:
    """A row's value as strict JSON (RFC 8259: what ``json.loads``, jq or a browser reads back),
    and where parts of it had to be written as strings.

    JSON Lines values are written as they were read. What JSON cannot hold follows the proto3
    JSON mapping (as BigQuery's JSON export does too): bytes (a Parquet/Arrow binary column)
    as standard base64 (RFC 4648, padded); NaN and infinite floats (Python's ``json`` reads a
    bare ``NaN`` in a JSON line) as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``;
    dates and times as ISO 8601 (``isoformat``); decimals and anything else as ``str``; map
    entries (Arrow gives tuples) as ``[key, value]`` lists; non-string object keys as ``str``.

    Returns:
        (value, encoded): ``encoded`` maps a JSONPath-like location (``$``, ``$.a[0]``,
        ``$["a b"]``) to how its part was written: ``base64``, ``float``, ``isoformat``,
        ``str`` or ``key`` (a key written as str); empty when the value is JSON as it is.

    Example: ``{"text": b"hi", "score": float("nan")}`` gives ``({"text": "aGk=", "score": "NaN"},
    {"$.text": "base64", "$.score": "float"})``.
    """
    encoded: dict[str, str] = {}

    def conv(v: Any, path: str) -> Any:
        if v is None or isinstance(v, (str, bool, int)):
            return v
        if isinstance(v, float):
            if math.isfinite(v):
                return v
            encoded[path] = "float"
            return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                if not isinstance(k, str):
                    encoded[f"{path}[{json.dumps(str(k), ensure_ascii=False)}]"] = "key"
                    k = str(k)
                out[k] = conv(x, path + (f".{k}" if k.isidentifier() else f"[{json.dumps(k, ensure_ascii=False)}]"))
            return out
        if isinstance(v, (list, tuple)):
            return [conv(x, f"{path}[{i}]") for i, x in enumerate(v)]
        if isinstance(v, (bytes, bytearray, memoryview)):
            encoded[path] = "base64"
            return base64.b64encode(bytes(v)).decode("ascii")
        if isinstance(v, (datetime.date, datetime.time)):
            encoded[path] = "isoformat"
            return v.isoformat()
        encoded[path] = "str"
        return str(v)

    return conv(value, "$"), encoded


@dataclass(slots=True)
class Tally:
    """What one unit's stages saw: input bytes, blank lines, and the rejected rows.

    Reject records are kept in memory only until every stage is done with their batch (the
    reader is asked for the next one, :meth:`flush`); they are then written, in source-row
    order, to a spool that stays in memory up to :data:`REJECT_SPOOL_BYTES` and goes to a
    temporary file past it, so a unit whose every row is bad holds no more than a batch of
    records.

    The pack stage finds its rejects (documents ``pack.overflow = "drop"`` leaves out) after
    the batches they came from were flushed: :meth:`reject_packed` spools them apart, in their
    own (source-row) order, and :meth:`write_rejects` merges the two spools by row, so the
    file is in source-row order whatever the batch or packing-chunk sizes.

    Attributes:
        unit: the unit.
        rows_read: rows the reader gave (values and unreadable rows; blank lines are not rows),
            counted as they are read: every one must end as a document or a reject.
        nbytes: input bytes read (JSON line lengths, or Arrow buffer sizes).
        blank: blank lines skipped (jsonl).
        surrogate_rows: rows kept with their lone surrogates replaced by U+FFFD.
        rejects: the rejected rows of the batch in flight: ``unit``, ``source`` (file), ``row``
            (0-based row of the source file: the JSONL line, the CSV data record, the Parquet
            or Arrow row), ``stage`` (:data:`REJECT_STAGES`), ``reason``, ``kind`` (its stable
            name, :data:`rmlprep.reject_kinds.KINDS`) and, for a row whose
            value was read but refused by the validate, format, tokenize or pack stage,
            ``value``: the whole value as the reader gave it (before lone surrogates were
            replaced; see :attr:`Rows.originals`), as JSON (:func:`json_value`;
            ``value_encoded`` when part of it is not JSON as it is).
        n_rejects: rejected rows so far (flushed or not, the pack stage's included).
        by_stage: the same, per stage (:data:`REJECT_STAGES`; the marker's ``rejects_by_stage``).
        by_kind: the same, per ``kind`` (:data:`rmlprep.reject_kinds.KINDS`; the marker's
            ``rejects_by_kind``).
        rejects_bytes: the size of the rejects file :meth:`write_rejects` wrote.
        counts: sft: what the chat stage counted (``no_assistant``, ``reasoning_dropped``,
            ``json_tool_calls``, ...: :data:`rmlprep.pipeline.chat_stages.CHAT_COUNTS`).
    """

    unit: Unit
    rows_read: int = 0
    nbytes: int = 0
    blank: int = 0
    surrogate_rows: int = 0
    rejects: list[dict[str, Any]] = field(default_factory=list)
    n_rejects: int = 0
    by_stage: dict[str, int] = field(default_factory=dict)
    by_kind: dict[str, int] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    rejects_bytes: int = 0
    _spool: Any = None
    _last_row: int = -1
    _packed_spool: Any = None
    _last_packed_row: int = -1

    def _record(self, row: int, stage: str, reason: str, kind: str, value: Any = None) -> dict[str, Any]:
        u = self.unit
        rec = {"unit": u.index, "source": u.path if u.format != "stdlib" else f"{u.path}/{u.files[row]}",
               "row": int(row), "stage": stage, "reason": str(reason), "kind": kind}
        self.n_rejects += 1
        self.by_stage[stage] = self.by_stage.get(stage, 0) + 1
        self.by_kind[kind] = self.by_kind.get(kind, 0) + 1
        if value is not None:
            rec["value"], encoded = json_value(value)
            if encoded:
                rec["value_encoded"] = encoded
        return rec

    def reject(self, row: int, stage: str, reason: str, value: Any = None, *, kind: str | None = None) -> None:
        """Record a rejected row of the batch in flight (``stage``: one of :data:`REJECT_STAGES`;
        ``kind``: one of :data:`rmlprep.reject_kinds.KINDS`, or None for a
        :class:`~rmlprep.reject_kinds.Reason`'s own)."""
        self.rejects.append(self._record(row, stage, reason, kind or kind_of(reason, "other"), value))

    def reject_packed(self, row: int, reason: str, value: Any = None, *, kind: str) -> None:
        """Record a row the pack stage left out (after its batch was flushed), with its value as
        read (:attr:`Docs.held`). Rows come in increasing order: the packers see the documents
        in source order."""
        if row <= self._last_packed_row:  # pragma: no cover - a packer broke the document order
            raise RuntimeError(f"packed rejects out of order: row {row} after row {self._last_packed_row}")
        if self._packed_spool is None:
            self._packed_spool = tempfile.SpooledTemporaryFile(max_size=REJECT_SPOOL_BYTES)
        self._packed_spool.write(json_line(self._record(row, "pack", reason, kind, value)))
        self._last_packed_row = int(row)

    def flush(self) -> None:
        """Spool the records of the batches every stage is done with, in source-row order.

        Batches cover increasing, disjoint row ranges, so sorting each flush sorts the whole.
        """
        if not self.rejects:
            return
        recs = sorted(self.rejects, key=lambda r: r["row"])
        if recs[0]["row"] < self._last_row:  # pragma: no cover - a reader broke the batch order
            raise RuntimeError(f"rejects out of order: row {recs[0]['row']} after row {self._last_row}")
        if self._spool is None:
            self._spool = tempfile.SpooledTemporaryFile(max_size=REJECT_SPOOL_BYTES)
        for r in recs:
            self._spool.write(json_line(r))
        self._last_row = recs[-1]["row"]
        self.rejects = []

    def write_rejects(self, f: IO[bytes]) -> None:
        """Copy every reject record, one JSON line each in source-row order, to ``f``
        (the content of ``rejects/rejects-NNNNN.jsonl``)."""
        self.flush()
        spools = [s for s in (self._spool, self._packed_spool) if s is not None]
        self.rejects_bytes = sum(s.seek(0, 2) for s in spools)  # the merge writes each line once
        for s in spools:
            s.seek(0)
        if len(spools) == 1:
            shutil.copyfileobj(spools[0], f, 1 << 20)
        elif spools:  # a row is rejected once, by one stage: no two records share a row
            f.writelines(heapq.merge(*spools, key=lambda line: json.loads(line)["row"]))

    def close(self) -> None:
        """Drop the spools (their temporary files, if they went to disk)."""
        for name in ("_spool", "_packed_spool"):
            if getattr(self, name) is not None:
                getattr(self, name).close()
                setattr(self, name, None)


@dataclass(slots=True)
class Rows:
    """Valid rows of one batch and their int64 source rows.

    Attributes:
        values: texts as an Arrow string array or a list of str (pretrain), or conversations
            as a list (sft).
        rows: int64 [len(values)], the rows' source row numbers.
        tools: sft with ``chat.tools_column``: each conversation's tools (or None).
        originals: the rows whose value the validate stage changed (lone surrogates replaced),
            by position in ``values``: their value as read, for a reject record of a later stage
            (the others' value as read is ``values[i]``).
    """

    values: Any
    rows: np.ndarray
    tools: list[Any] | None = None
    originals: dict[int, Any] = field(default_factory=dict)

    def original(self, i: int) -> Any:
        """The ``i``-th row's value as the reader gave it."""
        got = self.originals.get(i, _END)
        return self.values[i] if got is _END else got


@dataclass(slots=True)
class Docs:
    """Tokenized documents of one batch, flat.

    Attributes:
        ids: uint32 [sum(lengths)], the documents' token ids one after another.
        lengths: int64 [documents], tokens per document.
        rows: int64 [documents], each document's source row (for the pack stage's rejects).
        labels: sft only: int32 [sum(lengths)], ``ids`` where trained on, -100 elsewhere.
        masks: sft only: uint8 [sum(lengths)], 1 on assistant tokens.
        held: the value as read of each document the pack stage may leave out (a reject, see
            :func:`pack_may_leave_out`), by source row; for its reject record. Only those
            documents' values are kept until the pack stage, not the batch's.
    """

    ids: np.ndarray
    lengths: np.ndarray
    rows: np.ndarray
    labels: np.ndarray | None = None
    masks: np.ndarray | None = None
    held: dict[int, Any] = field(default_factory=dict)


def pack_may_leave_out(cfg: RunConfig) -> int | None:
    """The fewest tokens (before framing) of a document the pack stage may leave out as a
    reject, or None when it leaves none out: pretrain with ``pack.overflow = "drop"``, a
    document whose framed length (with its bos/eos) exceeds ``seq_len``; sft with ``"drop"``, or
    with ``"truncate"`` and ``chat.no_assistant = "reject"`` (:mod:`.untrained`), a conversation
    longer than ``seq_len`` (one that fits is neither dropped nor truncated).

    Example: pretrain, ``seq_len = 64``, ``overflow = "drop"``, eos only: 64 (64 tokens + eos =
    65 > 64 is dropped; 63 + eos fits). sft, ``seq_len = 64``: 65.
    """
    pack = cfg["pack"]
    if cfg.pipeline == "sft":
        untrained = pack["overflow"] == "truncate" and cfg["chat"]["no_assistant"] == "reject"
        return pack["seq_len"] + 1 if pack["overflow"] == "drop" or untrained else None
    if pack["overflow"] != "drop":
        return None
    return pack["seq_len"] + 1 - int(bool(pack["bos"])) - int(bool(pack["eos"]))


def held_values(lengths: np.ndarray, rows: np.ndarray, value_of, least: int | None) -> dict[int, Any]:
    """:attr:`Docs.held` of a batch: ``{source row: value_of(i)}`` for each document ``i`` of at
    least ``least`` tokens (none when ``least`` is None).

    Args:
        lengths: int64 [n] tokens per document; rows: int64 [n] their source rows.
        value_of: position → the document's value as read.
    """
    if least is None:
        return {}
    return {int(rows[i]): value_of(int(i)) for i in np.flatnonzero(lengths >= least)}


# -- read ---------------------------------------------------------------------------------------
def read(unit: Unit, cfg: RunConfig, tally: Tally) -> Iterator[Batch]:
    """Stream the unit's ``input.column`` in batches of at most ``input.batch_rows`` rows;
    count bytes and blank lines, and send the rows the reader could not parse to rejects."""
    watch = watched_fields(cfg)
    for batch in _handed_on(read_unit(unit, cfg["input"]["column"], cfg["input"]["batch_rows"], watch)):
        tally.flush()  # every stage is done with the previous batch
        tally.rows_read += len(batch.rows) + len(batch.errors)
        tally.nbytes += batch.nbytes
        tally.blank += batch.blank
        for r, why in batch.errors:
            tally.reject(r, "read", why)  # a reader's reason is a Reason: its kind with it
        out = [batch]
        del batch
        yield out.pop()  # (see _handed_on)


def _handed_on(items: Iterator[T]) -> Iterator[T]:
    """``items``, with no reference kept to the one handed out once the consumer asks for the
    next. The stages are generators, and a suspended generator keeps its locals: without this,
    a batch's texts (and the line they came from) would stay alive while the next stages pack
    and write it. ``yield box.pop()`` hands an item on without a name in the frame."""
    while (box := [next(items, _END)])[0] is not _END:
        yield box.pop()


_END: Any = object()


# -- validate -----------------------------------------------------------------------------------
def validate_texts(batches: Iterator[Batch], cfg: RunConfig, tally: Tally) -> Iterator[Rows]:
    """Keep the rows whose value is a string (lone surrogates replaced, see the module
    docstring); a null or any other type → rejects. Texts stay what the reader made (an Arrow
    string array, or a list of str: the tokenizer reads either without a conversion)."""
    column = cfg["input"]["column"]
    for batch in _handed_on(batches):
        vals = batch.values
        if isinstance(vals, pa.Array):  # Arrow strings are UTF-8 already
            if vals.null_count == 0:
                out = [Rows(vals.cast(pa.string()) if vals.type not in (pa.string(), pa.large_string()) else vals,
                            batch.rows)]
                del batch, vals
                yield out.pop()
                continue
            vals = vals.to_pylist()
        keep_t: list[str] = []
        keep_r: list[int] = []
        for v, r in zip(vals, batch.rows.tolist()):
            if isinstance(v, str):
                keep_t.append(v)
                keep_r.append(r)
            elif v is None:
                empty = " (an empty CSV field, which datasets reads as None)" if tally.unit.format == "csv" else ""
                tally.reject(r, "validate", f"{column} is null{empty}", kind="null")
            elif isinstance(v, bytes):  # a Parquet BYTE_ARRAY without the UTF8 annotation (e.g. older Spark)
                tally.reject(r, "validate", f"{column} is bytes (a binary column), not a string: if it holds UTF-8 "
                                            "text, write the column as a string type (pyarrow: .cast(pa.string()); "
                                            "Spark: spark.sql.parquet.binaryAsString)", v, kind="binary")
            else:
                tally.reject(r, "validate", f"{column} is {_a(type(v).__name__)}, not a string", v, kind="wrong_type")
        originals = {}
        for i in surrogate_rows(keep_t):  # rare: found by a scan of the code units
            originals[i] = keep_t[i]
            keep_t[i] = replace_lone_surrogates(keep_t[i])
            tally.surrogate_rows += 1
        out = [Rows(keep_t, np.asarray(keep_r, dtype=np.int64), originals=originals)]
        batch = vals = keep_t = v = None
        yield out.pop()


# -- tokenize -----------------------------------------------------------------------------------
def _cat(chunks: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(chunks).astype(dtype, copy=False) if chunks else np.zeros(0, dtype=dtype)


def tokenize_texts(batches: Iterator[Rows], cfg: RunConfig, tokenizer, tally: Tally) -> Iterator[Docs]:
    """Encode each text (``tokenizer.add_special_tokens`` / ``parse_special``); a text the
    tokenizer refuses → rejects, and has no document.

    A batch is one native call (:func:`rmlprep.native.encode_arrow_flat` on an Arrow string
    array's UTF-8 buffer, else ``Tokenizer.encode_batch_flat`` on the strs); only when that
    raises is it encoded row by row (:func:`rmlprep.arrow.tokenize_text`) to find the rows."""
    tok = cfg["tokenizer"]
    kw = {"add_special_tokens": tok["add_special_tokens"], "parse_special": tok["parse_special"]}
    least = pack_may_leave_out(cfg)
    fn = None
    for b in _handed_on(batches):
        if not len(b.values):
            yield Docs(np.zeros(0, np.uint32), np.zeros(0, np.int64), np.zeros(0, np.int64))
            continue
        flat = _encode_flat(tokenizer, b.values, kw)
        if flat is not None:
            lengths = np.diff(flat[1])
            out = [Docs(flat[0].astype(np.uint32, copy=False), lengths, b.rows,
                        held=held_values(lengths, b.rows, lambda i: _as_read(b, i), least))]
            del b, flat  # the texts can go while the ids are packed
            yield out.pop()
            continue
        if fn is None:
            fn = tokenize_text(tokenizer, column="text", on_error="record", keep_columns=False, id_column=None, **kw)
        values = b.values if isinstance(b.values, pa.Array) else pa.array(b.values, type=pa.string())
        res = fn(pa.RecordBatch.from_arrays([values], names=["text"]))
        failed = np.flatnonzero(res.column("error").is_valid().to_numpy(zero_copy_only=False))
        for i in failed:
            tally.reject(int(b.rows[i]), "tokenize", res.column("error")[int(i)].as_py(), _as_read(b, int(i)),
                         kind="tokenizer_refused")
        ids = res.column("input_ids").flatten().to_numpy(zero_copy_only=False).astype(np.uint32, copy=False)
        lengths = res.column("length").to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        kept = np.delete(np.arange(len(lengths)), failed)  # failed rows have no ids
        held = held_values(lengths[kept], b.rows[kept], lambda i: _as_read(b, int(kept[i])), least)
        out = [Docs(ids, lengths[kept], b.rows[kept], held=held)]
        del b, values, res, ids
        yield out.pop()


def _as_read(b: Rows, i: int) -> Any:
    """Row ``i``'s text as read, for its reject record (an Arrow string array: its str)."""
    v = b.original(i)
    return v.as_py() if isinstance(v, pa.Scalar) else v


def _encode_flat(tokenizer, values, kw: dict[str, bool]) -> tuple[np.ndarray, np.ndarray] | None:
    """(ids, offsets) of a batch of texts in one call, or None when a text fails (then the
    caller goes row by row to name it)."""
    try:
        if isinstance(values, pa.Array):
            try:
                got = encode_arrow_flat(tokenizer, values, **kw)
            except ValueError:  # bytes that are not UTF-8: the str path names the row
                got = None
            if got is not None:
                return got
            values = values.to_pylist()
        return tokenizer.encode_batch_flat(values, **kw)
    except RmlprepError:
        return None
