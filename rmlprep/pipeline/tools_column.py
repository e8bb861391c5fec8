"""sft: a column of tool definitions, a system prompt or media that the config does not name is
refused, never left out.

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

The same holds for two other columns a conversation set carries beside its messages:

* a system prompt (:data:`~rmlprep.chat.messages.SYSTEM_FIELDS`: ``system``, LLaMA-Factory's
  layout; ``system_prompt``, OpenOrca-style sets), read only when ``chat.system_column`` names
  it (written as the conversation's system message,
  :func:`rmlprep.chat.messages.with_system_prompt`); left unread, the format's default system
  prompt (Qwen's "You are Qwen, created by Alibaba Cloud...") would stand in for it on every
  row. ``chat.system_column = false`` leaves it out on purpose;
* media (:data:`MEDIA_FIELDS`: ``images``, ``image``, ``audio``, ``video``, the LLaVA / TRL
  vision layout, whose text holds ``<image>`` placeholders): rmlprep writes text only, so such
  a set would be trained as text with the placeholders as words. ``chat.ignore_media = true``
  leaves such columns out on purpose.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..chat.columns import MEDIA_FIELDS, SYSTEM_FIELDS, TOOLS_FIELDS, column_refusal, ways_out
from ..config import RunConfig
from ..errors import ConfigError
from ..readers import Unit
from ..readers.units import column_names

__all__ = ["TOOLS_FIELDS", "MEDIA_FIELDS", "watched_fields", "check_named_columns", "unread_reason"]

def watched_fields(cfg: RunConfig) -> tuple[str, ...]:
    """The fields a JSONL row must not hold unread (sft only): :data:`TOOLS_FIELDS` when
    ``chat.tools_column`` is unset (None), :data:`~rmlprep.chat.messages.SYSTEM_FIELDS` when
    ``chat.system_column`` is, :data:`MEDIA_FIELDS` unless ``chat.ignore_media``; never
    ``input.column`` itself."""
    if cfg.pipeline != "sft":
        return ()
    chat = cfg["chat"]
    fields = ((TOOLS_FIELDS if chat["tools_column"] is None else ())
              + (SYSTEM_FIELDS if chat["system_column"] is None else ())
              + (MEDIA_FIELDS if not chat["ignore_media"] else ()))
    return tuple(f for f in fields if f != cfg["input"]["column"])


def unread_tools_reason(name: str) -> str:
    """The reject reason of a row holding tool definitions in ``name`` that the run would not read."""
    return (f"the row has {name!r} (tool definitions) but chat.tools_column is unset, so they would be left out "
            f"of its prompt; {ways_out(name, config=True)}")


def unread_reason(name: str) -> str:
    """The reject reason of a JSONL row holding a value in ``name``, one of :func:`watched_fields`,
    that the run would not read."""
    if name in SYSTEM_FIELDS:
        return (f"the row has {name!r} (a system prompt) but chat.system_column is unset, so the format's "
                f"default system prompt would stand in for it; {ways_out(name, config=True)}")
    if name in MEDIA_FIELDS:
        return f"the row has {name!r} (media beside the messages); {ways_out(name, config=True)}"
    return unread_tools_reason(name)


def check_named_columns(cfg: RunConfig, units: Sequence[Unit], log: Callable[[str], None] = print) -> None:
    """Refuse an sft run whose input has a column of :func:`watched_fields` (tools, a system
    prompt, media) that the config does not name or leave out (see the module docstring), or
    whose Parquet, Arrow and CSV files all lack the column ``chat.tools_column`` or
    ``chat.system_column`` names (a misspelt key). A file without it among files with it holds
    conversations without tools (or system prompt), as a JSONL row without the key does: one
    log line names such files. Reads each file's schema, CSV header or first JSONL row once,
    before any corpus work.

    Raises:
        ConfigError: naming the file, the column and the keys to set.
    """
    if cfg.pipeline != "sft":
        return
    fields = watched_fields(cfg)
    chat = cfg["chat"]
    named = [(k, chat[k]) for k in ("tools_column", "system_column") if isinstance(chat[k], str)]
    if not fields and not named:
        return
    seen: set[str] = set()
    lacking: dict[str, list[tuple[str, list[str]]]] = {key: [] for key, _ in named}
    holding: set[str] = set()
    for u in units:
        if u.path in seen:
            continue
        seen.add(u.path)
        got = column_names(u)
        if got is None:
            holding.update(key for key, _ in named)  # not told by a schema: its rows may hold it
            continue
        names, whole = got
        for key, col in named:
            if whole and col not in names:
                lacking[key].append((u.path, names))
            else:
                holding.add(key)
        hit = next((f for f in fields if f in names), None)
        if hit is None:
            continue
        where = "has a column" if whole else "has, in its first row, a field"
        key = None if hit in MEDIA_FIELDS else "system_column" if hit in SYSTEM_FIELDS else "tools_column"
        unset = f"chat.{key} is unset, but " if key else ""
        raise ConfigError(column_refusal(hit, f"{unset}{u.path} {where}", config=True))
    for key, col in named:
        if not lacking[key]:
            continue
        path, names = lacking[key][0]
        if key not in holding:  # no file has it: a misspelt column, not files without tools
            raise ConfigError(f"chat.{key} = {col!r}: {path} has no such column; columns: {names[:20]}")
        more = f" and {len(lacking[key]) - 1} more" if len(lacking[key]) > 1 else ""
        log(f"chat.{key} = {col!r}: {path}{more} have no such column: their conversations have "
            + ("no tools" if key == "tools_column" else "no system prompt of their own"))
