"""The corpus's first conversations the live chat check renders before any corpus work
(``parity.chat_live_sample = N``): the first N the format accepts, from the first batch of each
unit in turn (:func:`iter_conversations`), compared by
:func:`rmlprep.chat_parity.live_chat_check`; a difference stops the run before anything is
written. Each unit's worker then compares every conversation of a unit of up to N rows, and
about N·(1 + ln(n/N)) spread over a larger one of n (:mod:`rmlprep.chat_unit_sample`).

This check compares text only; the units' compare token ids too (93b7e70). Left so on purpose:
it runs before any unit is encoded, so it would encode each conversation itself (the unit's
``tokenize_chat``) besides the render, and every conversation it compares is compared again,
ids included, by its unit's worker before that unit's shard is committed (a unit's check
takes the first N conversations the unit writes, :class:`~rmlprep.chat_unit_sample.UnitSample`;
this one takes at most N, in order, from the first batch of each unit, leaving out the rows the
run rejects). Measured (chat22, ``taskset -c 0``, Qwen2.5, 1000 conversations, load 2.4 from
other jobs): the text comparison 0.224 s (Topical-Chat) / 0.045 s (GSM8K); the ids would add
0.644 s / 0.175 s (the encode 0.54 / 0.15 s, the reference encode of the renders 0.10 /
0.03 s), nearly four times the check, to find nothing the units do not (but where a Ray
worker without jinja2 skips its unit's check: install it there).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .errors import ChatFormatError

__all__ = ["LIVE_MAX_INVALID", "iter_conversations", "live_line", "token_text"]

#: refused conversations after which the live chat check stops looking for more to compare
LIVE_MAX_INVALID = 1000


def iter_conversations(cfg, units, rows: int | None = None) -> Iterator[tuple[Any, Any, str]]:
    """``(messages, tools, where)`` for the first ``rows`` rows (default ``input.batch_rows``) of
    each unit in turn, as the run will write them (system column applied, ``chat.json_tools``
    converted), for the live chat check (:func:`rmlprep.chat_parity.live_chat_check`,
    ``parity.chat_live_sample``), which takes from it until it has compared enough; ``where``
    names the row (``"PATH row R"``, R as the run's rejects number it). A row whose tool calls
    name an undefined tool (a reject in the run) is not given. Lazy: a unit is read when the
    conversations before it are used up."""
    from .chat.convert import json_tools
    from .chat.messages import with_system_prompt
    from .readers import read_unit

    column = cfg["input"]["column"]
    tcol = cfg["chat"].get("tools_column")
    convert = cfg["chat"].get("json_tools")
    rows = rows or cfg["input"]["batch_rows"]

    def by_row(u, col, upto: int | None) -> dict[int, Any]:
        """Source row -> value: the first batch (upto None), or every batch up to row ``upto``."""
        got: dict[int, Any] = {}
        for b in read_unit(u, col, rows):
            vals = b.values.to_pylist() if hasattr(b.values, "to_pylist") else b.values
            got.update(zip(b.rows.tolist(), vals))
            if upto is None or (len(b.rows) and int(b.rows[-1]) >= upto):
                break
        return got

    scol = cfg["chat"].get("system_column")
    for u in units:
        convs = by_row(u, column, None)
        tools = by_row(u, tcol, max(convs)) if isinstance(tcol, str) and convs else {}
        systems = by_row(u, scol, max(convs)) if isinstance(scol, str) and convs else {}
        for r, v in convs.items():
            t = tools.get(r)
            v = with_system_prompt(v, systems.get(r), scol)[0]  # as the run writes it (a refused one: as read)
            try:
                m, t = json_tools(v, t)[:2] if convert else (v, t)
            except ChatFormatError:  # a call to an undefined tool: the run rejects the row; not compared
                continue
            yield m, t, f"{u.path} row {r}"


def live_line(res: dict[str, int], fmt: str, want: int) -> str:
    """The log line of a live chat comparison's result ``res``
    (:func:`rmlprep.chat_parity.live_chat_check`) that asked for ``want``: a warning when it
    compared none ("0 ... match" read as a pass in a fresh-user trial, with every sampled row a
    reject), and says so when the sampled batches held fewer than ``want``."""
    n, bad = res["compared"], res["invalid"]
    where = "the first batch of every unit" if bad < LIVE_MAX_INVALID else "its limit"
    if not n and not bad:  # every row of those batches unreadable (not JSON, no such field): rejects of the run
        return ("warning: parity: the live chat comparison found no conversation to compare in the first batch of "
                "every unit (their rows could not be read), so the tokenizer's chat template was not checked against "
                "this corpus")
    if not n:
        return (f"warning: parity: the live chat comparison compared no corpus conversation: the {bad} it read "
                f"({where}) were refused by the format or the schema (rejected in the run), so the tokenizer's "
                "chat template was not checked against this corpus")
    fewer = f"; fewer than the {want} asked: {where} held no more" if n < want else ""
    strings = (f"; {a} of them give tool-call arguments as a string of JSON, parsed before both renders "
               "(apply_chat_template on the rows as they are writes such a string as it is or encodes it again, "
               "so its render of them can differ)" if (a := res["arguments_from_string"]) else "")
    return (f"parity: {n} corpus conversations rendered with the tokenizer's chat template match format {fmt!r} "
            f"({bad} of the rows read refused by the format or the schema, rejects of the run{fewer}){strings}")


def token_text(tokenizer, i: int | None) -> str | None:
    """The text of token ``i`` (a bos or eos id: the template's ``bos_token``/``eos_token``), None
    when unset or out of the vocabulary."""
    return tokenizer.spec.vocab[i] if i is not None and 0 <= i < len(tokenizer.spec.vocab) else None
