"""sft: a column of tool definitions the config does not name is refused, never left out.

A conversation's tool definitions sit beside its messages, in a column of their own: ``tools``
is the name TRL reads by itself (``apply_chat_template(example["messages"],
tools=example.get("tools"))``), as Hugging Face datasets of tool use write it, and the name of
``rmlprep.tokenize_chat``'s default ``tools_column``; ``functions`` is OpenAI's older name. The
sft run reads tools only from ``chat.tools_column``, which has no default, so an input holding
such a column while the key is unset would lose every row's tool definitions from its prompt
(the model trained to call tools it was never shown) without a word. So:

* before any corpus work, a Parquet or Arrow file with such a column, a CSV file with it in
  its header, or a JSONL file whose first row holds it with a value (``[]``, null or ``""`` is
  no tools, in any row) stops the run (:func:`check_tools_column`,
  a :class:`~rmlprep.errors.ConfigError` naming the file, the column and the two ways out);
* a later JSONL row that holds one with a value (rows may differ in their keys) is a reject
  with the same advice (:func:`unread_tools_reason`);
* ``chat.tools_column = false`` says the tools are left out on purpose: no check.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..config import RunConfig
from ..errors import ConfigError
from ..readers import Unit
from ..readers.units import column_names

__all__ = ["TOOLS_FIELDS", "watched_fields", "check_tools_column", "unread_tools_reason"]

#: Columns that hold a conversation's tool definitions by the field's convention.
TOOLS_FIELDS = ("tools", "functions")


def _ways_out(name: str) -> str:
    return (f"set chat.tools_column = \"{name}\" to write them as the format writes tools, or "
            "chat.tools_column = false to leave every row's tools out")


def watched_fields(cfg: RunConfig) -> tuple[str, ...]:
    """The fields a JSONL row must not hold unread: :data:`TOOLS_FIELDS` for an sft run whose
    ``chat.tools_column`` is unset (None), else none."""
    if cfg.pipeline != "sft" or cfg["chat"]["tools_column"] is not None:
        return ()
    return tuple(f for f in TOOLS_FIELDS if f != cfg["input"]["column"])


def unread_tools_reason(name: str) -> str:
    """The reject reason of a row holding tool definitions in ``name`` that the run would not read."""
    return (f"the row has {name!r} (tool definitions) but chat.tools_column is unset, so they would be left out "
            f"of its prompt; {_ways_out(name)}")


def check_tools_column(cfg: RunConfig, units: Sequence[Unit]) -> None:
    """Refuse an sft run whose input has a tools column (:data:`TOOLS_FIELDS`) that
    ``chat.tools_column`` does not name (see the module docstring), or a Parquet, Arrow or CSV
    file without the column ``chat.tools_column`` names (a JSONL row without it has no tools).
    Reads each file's schema, CSV header or first JSONL row once, before any corpus work.

    Raises:
        ConfigError: naming the file, the column and the keys to set.
    """
    if cfg.pipeline != "sft" or cfg["chat"]["tools_column"] is False:
        return
    fields = watched_fields(cfg)
    named = cfg["chat"]["tools_column"]
    seen: set[str] = set()
    for u in units:
        if u.path in seen:
            continue
        seen.add(u.path)
        got = column_names(u)
        if got is None:
            continue
        names, whole = got
        if isinstance(named, str):
            if whole and named not in names:
                raise ConfigError(f"chat.tools_column = {named!r}: {u.path} has no such column; columns: "
                                  f"{names[:20]}")
            continue
        hit = next((f for f in fields if f in names), None)
        if hit is not None:
            where = "has a column" if whole else "has, in its first row, a field"
            raise ConfigError(
                f"chat.tools_column is unset, but {u.path} {where} {hit!r} (the conversations' tool definitions, "
                f"which TRL passes to apply_chat_template(tools=...)): without the key every row's tools would be "
                f"left out of its prompt; {_ways_out(hit)}")
