"""One sft unit's chat stages: validate conversations → format and tokenize them.

The stages of :mod:`rmlprep.pipeline.stages` for the sft pipeline, with the same contract (a
generator over the previous stage; rows that cannot be processed → the unit's
:class:`~rmlprep.pipeline.stages.Tally` with their source row, reason and value as read):

* :func:`validate_conversations`: a conversation in the messages schema
  (:func:`rmlprep.chat.schema_error`, with the row's tools when ``chat.tools_column`` names
  them); a row holding tool definitions the run would not read
  (:mod:`rmlprep.pipeline.tools_column`) → rejects;
* :func:`format_and_tokenize`: :func:`rmlprep.arrow.tokenize_chat` writes each conversation in
  the chat format and encodes it in one call (the format's message spans give the assistant
  mask); a row the chat format refuses → rejects. With ``parity.chat_live_sample = N``, the
  conversations it writes are rendered with the tokenizer's chat template and compared batch by
  batch (every one of a unit of up to N rows, of a larger unit about N·(1 + ln(n/N)) spread
  over it: :mod:`rmlprep.chat_unit_sample`): a difference raises before the shard is committed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from ..arrow import tokenize_chat
from ..chat import schema_error
from ..chat.messages import with_system_prompt
from ..chat_unit_sample import UnitCheck, unit_sample_size
from ..config import RunConfig
from ..readers import Batch, Unit, read_unit
from ..readers.units import column_names
from ..segment import replace_lone_surrogates
from .stages import Docs, Rows, Tally, _cat, pack_may_leave_out
from .tools_column import unread_reason

__all__ = ["CHAT_COUNTS", "validate_conversations", "format_and_tokenize"]

#: What the chat stage counts per unit (done markers, the manifest's totals; see
#: :class:`rmlprep.arrow.TokenizeChat`).
CHAT_COUNTS = ("no_assistant", "reasoning_dropped", "json_tool_calls", "json_tool_calls_as_text",
               "generation_prompt_after_answer", "tool_calls_without_tools", "json_tool_parameters_as_text",
               "reasoning_untrained", "tool_calls_undefined", "special_text_parsed", "special_text_as_text", "tool_arguments_from_string",
               "answers_without_think", "history_untrained", "reasoning_key_unread", "text_parts_joined")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _replace_surrogates_in(value: Any) -> tuple[Any, bool]:
    """``value`` with lone surrogates replaced in every string it holds (contents, text parts,
    reasoning, tool calls, tools), and whether any was; unchanged values are returned as they are."""
    if isinstance(value, str):
        return (replace_lone_surrogates(value), True) if _SURROGATE.search(value) else (value, False)
    if isinstance(value, dict):
        out, changed = {}, False
        for k, x in value.items():
            k2, ck = _replace_surrogates_in(k) if isinstance(k, str) else (k, False)
            out[k2], cx = _replace_surrogates_in(x)
            changed = changed or ck or cx
        return (out, True) if changed else (value, False)
    if isinstance(value, list):
        pairs = [_replace_surrogates_in(x) for x in value]
        return ([x for x, _ in pairs], True) if any(c for _, c in pairs) else (value, False)
    return value, False


def _column_by_row(unit: Unit, column: str, batch_rows: int) -> dict[int, Any]:
    """The unit's ``column`` values by source row (a second pass over the unit, for
    ``chat.tools_column`` and ``chat.system_column``; rows without it have none, and so do the
    rows of a Parquet, Arrow or CSV file without it: :func:`~rmlprep.pipeline.tools_column.check_named_columns` refused the run
    if no file has it)."""
    out: dict[int, Any] = {}
    got = column_names(unit)
    if got is not None and got[1] and column not in got[0]:
        return out
    for b in read_unit(unit, column, batch_rows):
        vals = b.values.to_pylist() if isinstance(b.values, pa.Array) else b.values
        out.update(zip(b.rows.tolist(), vals))
    return out


def validate_conversations(batches: Iterator[Batch], cfg: RunConfig, tally: Tally) -> Iterator[Rows]:
    """Keep the rows that are conversations in the messages schema
    (:func:`rmlprep.chat.schema_error`, with the row's tools when ``chat.tools_column`` is set,
    after the row's ``chat.system_column`` value became its system message:
    :func:`rmlprep.chat.messages.with_system_prompt`); others → rejects with the reason and the
    value at fault (the tools value when the messages alone pass, else the messages as read). Lone
    surrogates in any of a kept row's strings are replaced by U+FFFD (counted in
    ``surrogate_rows``)."""
    column = cfg["input"]["column"]
    tcol = cfg["chat"]["tools_column"]
    tools = _column_by_row(tally.unit, tcol, cfg["input"]["batch_rows"]) if isinstance(tcol, str) else None
    scol = cfg["chat"]["system_column"]
    systems = _column_by_row(tally.unit, scol, cfg["input"]["batch_rows"]) if isinstance(scol, str) else None
    for batch in batches:
        vals = batch.values.to_pylist() if isinstance(batch.values, pa.Array) else batch.values
        good: list[Any] = []
        good_rows: list[int] = []
        good_tools: list[Any] | None = [] if tools is not None else None
        originals: dict[int, Any] = {}
        watched = batch.watched
        for v, r in zip(vals, batch.rows.tolist()):
            t = tools.get(r) if tools is not None else None
            if watched and r in watched:  # tools, system prompt or media the run would not read (tools_column.py)
                tally.reject(r, "validate", unread_reason(watched[r]), v, kind="unread_field")
                continue
            read_v = v
            why = None
            kind = "system_prompt"
            if systems is not None:
                v, why = with_system_prompt(v, systems.get(r), scol)
            if why is None:
                why, kind = (f"{column} is null", "null") if v is None else (schema_error(v, t), "messages_schema")
                if why is not None and t is not None and v is not None and schema_error(v) is None:
                    # the tools value is what is wrong: the reject carries it, as read, and names its column
                    tally.reject(r, "validate", why if tcol == "tools" else f"column {tcol!r}: {why}", t,
                                 kind="tools_schema")
                    continue
            if why is not None:
                tally.reject(r, "validate", why, read_v, kind=kind)
                continue
            v, fixed = _replace_surrogates_in(v)
            t, fixed_t = _replace_surrogates_in(t)
            if fixed or fixed_t:
                tally.surrogate_rows += 1
            if fixed or v is not read_v:  # (a system prompt joined the messages)
                originals[len(good)] = read_v
            good.append(v)
            good_rows.append(r)
            if good_tools is not None:
                good_tools.append(t)
        yield Rows(good, np.asarray(good_rows, dtype=np.int64), good_tools, originals)


def format_and_tokenize(batches: Iterator[Rows], cfg: RunConfig, tokenizer, tally: Tally) -> Iterator[Docs]:
    """Write each conversation in ``chat.format`` and encode it with its assistant mask
    (:func:`rmlprep.arrow.tokenize_chat` with the ``[chat]`` keys); a conversation the format
    refuses → rejects; its counts go to ``tally.counts``. Before a batch is yielded, the
    conversations of it that the unit's live chat check takes
    (:class:`rmlprep.chat_unit_sample.UnitCheck`, ``parity.chat_live_sample``) are compared with
    the tokenizer's chat template (how many: ``tally.counts["chat_live_compared"]``, of
    ``tally.counts["chat_live_written"]``).

    Raises:
        ParityError: a compared conversation the template writes otherwise (or refuses).
    """
    chat = cfg["chat"]
    fmt = chat["format"]
    fn = tokenize_chat(tokenizer, fmt, column="messages",
                       tools_column="tools" if isinstance(chat["tools_column"], str) else None,
                       add_generation_prompt=chat["add_generation_prompt"], options=chat["options"],
                       train_on_reasoning=chat["train_on_reasoning"], json_tools=chat["json_tools"],
                       train_turns=chat["train_turns"], join_text_parts=chat["join_text_parts"],
                       no_assistant=chat["no_assistant"], text_markers=True,  # the driver checked them
                       on_error="record", keep_columns=False, id_column=None)
    fn.warn = False  # the summary names tool_calls_without_tools
    least = pack_may_leave_out(cfg)
    k = unit_sample_size(cfg, tokenizer)
    live = UnitCheck(k, cfg, tokenizer, tally.unit) if k else None
    for b in batches:
        ids: list[np.ndarray] = []
        labels: list[np.ndarray] = []
        masks: list[np.ndarray] = []
        lengths: list[int] = []
        rows: list[int] = []
        kept: list[int] = []  # positions in the batch of the rows written
        held: dict[int, Any] = {}
        if b.values:
            res = fn({"messages": b.values, **({"tools": b.tools} if b.tools is not None else {})})
            errs = res["error"]
            for i in range(len(b.values)):
                if errs[i]:
                    tally.reject(int(b.rows[i]), "format", f"chat format {fmt!r}: {errs[i]}", b.original(i),
                                 kind="format_refused")
                    continue
                ids.append(res["input_ids"][i])
                labels.append(res["labels"][i])
                masks.append(res["assistant_masks"][i])
                lengths.append(int(res["length"][i]))
                rows.append(int(b.rows[i]))
                kept.append(i)
                if least is not None and lengths[-1] >= least:  # the pack stage may leave it out
                    held[rows[-1]] = b.original(i)
        for key in CHAT_COUNTS:
            tally.counts[key] = fn.stats[key]
        if live is not None and rows:  # before the batch goes on: a difference stops the unit here
            live.check(np.asarray(rows, dtype=np.int64), [b.values[i] for i in kept],
                       [b.tools[i] for i in kept] if b.tools is not None else None, ids)
        yield Docs(_cat(ids, np.uint32), np.asarray(lengths, dtype=np.int64), np.asarray(rows, dtype=np.int64),
                   _cat(labels, np.int32), _cat(masks, np.uint8), held)
    if live is not None:
        tally.counts["chat_live_compared"], tally.counts["chat_live_written"] = live.compared, live.written
