"""The corpus conversations the live chat check renders (``parity.chat_live_sample``)."""

from __future__ import annotations

from typing import Any

from .errors import ChatFormatError

__all__ = ["sample_conversations"]


def sample_conversations(cfg, units, n: int) -> list[tuple[Any, Any]]:
    """Up to ``n`` ``(messages, tools)`` pairs from the first batch of each unit in turn, as the
    run will write them (system column applied, ``chat.json_tools`` converted), for the live chat
    check (:func:`rmlprep.chat_parity.live_chat_check`, ``parity.chat_live_sample``); a row whose
    tool calls name an undefined tool (a reject in the run) is not sampled."""
    from .chat.convert import json_tools
    from .chat.messages import with_system_prompt
    from .readers import read_unit

    out: list[tuple[Any, Any]] = []
    column = cfg["input"]["column"]
    tcol = cfg["chat"].get("tools_column")
    convert = cfg["chat"].get("json_tools")
    rows = min(n, cfg["input"]["batch_rows"])

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
                out.append(json_tools(v, t)[:2] if convert else (v, t))
            except ChatFormatError:  # a call to an undefined tool: the run rejects the row; not compared
                continue
            if len(out) >= n:
                return out
    return out
