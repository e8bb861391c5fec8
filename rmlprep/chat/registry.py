"""The chat formats: what each one can write, its options, and the one entry point to write.

A :class:`ChatFormat` pairs a writer (one per real template family, in ``rmlprep/chat/fmt_*.py``)
with what its template can express: the roles, reasoning, tool calls, tool definitions. A
conversation with a field the format cannot express is refused here, by name, before the
writer runs; the writer refuses what only it knows (an order of roles its template refuses or
would mangle, a reasoning in a position its template never writes).

Options are the template's own variables (``enable_thinking``, ``date_string``,
``reasoning_effort``...) plus ``today``: the date a template reads from the clock
(``strftime_now``), fixed so that output does not change from one day to the next (default
2024-07-26, Llama 3.1's own fallback date).
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ..errors import ChatFormatError
from .base import DEFAULT_TODAY, ChatFormat, today
from .messages import Conversation, parse_conversation
from .segments import Out

__all__ = ["ChatFormat", "FORMATS", "CHAT_FORMATS", "get_format", "check_conversation", "write", "resolve_options",
           "template_view", "template_kwargs", "read_view", "DEFAULT_TODAY", "today", "untrained_reasoning_refusal",
           "join_parts_refusal", "TRAIN_TURNS", "train_turns_refusal"]

def _registry() -> dict[str, ChatFormat]:
    from . import (fmt_chatml, fmt_deepseek, fmt_gemma, fmt_harmony, fmt_kimi, fmt_llama, fmt_mistral, fmt_other,
                   fmt_qwen3_coder)

    out: dict[str, ChatFormat] = {}
    for mod in (fmt_chatml, fmt_qwen3_coder, fmt_llama, fmt_mistral, fmt_gemma, fmt_deepseek, fmt_harmony, fmt_kimi,
                fmt_other):
        for f in mod.FORMATS:
            if f.name in out:
                raise RuntimeError(f"chat format {f.name!r} defined twice")
            out[f.name] = f
    return out


def get_format(fmt: str | ChatFormat) -> ChatFormat:
    """The :class:`ChatFormat` named ``fmt``.

    Raises:
        ChatFormatError: unknown name (the message lists the known ones).
    """
    if isinstance(fmt, ChatFormat):
        return fmt
    try:
        return FORMATS[fmt]
    except (KeyError, TypeError):
        raise ChatFormatError(
            f"unknown chat format {fmt!r}; known: {', '.join(CHAT_FORMATS)} "
            "(or pass a model's Jinja chat template to detect_chat_format)"
        ) from None


#: the values an option takes, where the templates test it by identity or write it as text: a
#: template's ``enable_thinking is false`` is false for the string "false" or for 0, so a quoted
#: TOML value would silently turn thinking on; Harmony's reasoning effort is one of three words
_OPTION_VALUES: dict[str, tuple[type, tuple[Any, ...] | None]] = {
    "enable_thinking": (bool, None),
    "reasoning_effort": (str, ("low", "medium", "high")),
    "model_identity": (str, None),
    "date_string": (str, None),
    "system_placement": (str, ("template", "last-user")),
    "tool_results": (str, ("template", "mistral-common")),
}


#: ``train_turns`` values: every assistant turn is trained, or only those after the last user message.
TRAIN_TURNS = ("all", "last")


def train_turns_refusal(fmt: str, train_turns: Any) -> str | None:
    """Why ``train_turns`` cannot apply to ``fmt``, or None when it does: a value other than
    ``"all"`` / ``"last"``, or ``"last"`` with ``"template"``, whose render is split into
    template and assistant text only (no user turns to find the last one by); the native
    formats mark user text (:func:`rmlprep.chat.segments.untrain_history`)."""
    if train_turns not in TRAIN_TURNS:
        return f"train_turns must be 'all' or 'last', got {train_turns!r}"
    if train_turns == "last" and fmt == "template":
        return ("train_turns = 'last' needs a native chat format (the template's render has no user turns told "
                "apart); name the format, or train every turn")
    return None


def join_parts_refusal(fmt: str, sep: Any) -> str | None:
    """Why ``join_text_parts=sep`` (``chat.join_text_parts``) cannot apply to format ``fmt``, or
    None when it does: ``sep`` not a string, or set with ``"template"``, whose template is given
    the parts as they are (:func:`rmlprep.chat.convert.join_text_parts` joins for the native formats)."""
    if sep is not None and not isinstance(sep, str):
        return f"join_text_parts must be a string ('\\n' or ''), got {sep!r}"
    if sep is not None and fmt == "template":
        return ("join_text_parts is for the native formats: chat.format = \"template\" gives the template the text "
                "parts as they are (join them in the data to choose a join there)")
    return None


def untrained_reasoning_refusal(fmt: str | ChatFormat) -> str | None:
    """Why ``train_on_reasoning`` off cannot apply to ``fmt``, or None when it does.

    It applies to a format with a reasoning channel (``qwen3``'s think block, ``gpt-oss``'s
    analysis channel; ``deepseek-r1`` and ``gemma4`` write none into the training text at all)
    and to one whose model writes its reasoning as a leading ``<think>…</think>`` of the
    content (``smollm3``: exactly that block is left out). A format with no notion of
    reasoning (``qwen2.5``, ``llama3``, ``mistral-*``...) writes a ``<think>`` in content as
    answer text, which would be trained all the same: refused rather than silently ignored,
    and rather than guessing that such text is reasoning. ``"template"``: the render does
    not tell reasoning apart.

    Raises:
        ChatFormatError: unknown format.
    """
    if fmt == "template":
        return "chat.format = \"template\" cannot tell reasoning from answer text in the render; use a native format"
    f = get_format(fmt)
    if f.reasoning or f.reasoning_in_content:
        return None
    return (f"format {f.name!r} has no reasoning: its template writes a <think>…</think> in an answer's content as "
            "answer text, so it would be trained all the same; train on it (drop the setting), take it out of the "
            "data, or use a format with reasoning (qwen3, smollm3, gpt-oss...) if the model was trained so")


def resolve_options(f: ChatFormat, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The format's defaults overlaid with ``options`` (None values keep the default).

    Raises:
        ChatFormatError: an option the format does not take, a value of the wrong type
            (``enable_thinking = "false"``: true or false only, since the templates test it
            with ``is false``), a ``reasoning_effort`` other than low / medium / high (the
            Harmony format's values), or a bad ``today`` (a date, or its 'YYYY-MM-DD' text; a
            datetime, TOML's ``2025-03-01T10:00:00``, is refused as its text would be).
    """
    opts = dict(f.options)
    for k, v in (options or {}).items():
        if k not in f.options:
            takes = ", ".join(sorted(f.options)) or "none"
            raise ChatFormatError(f"{f.name}: no option {k!r} (options: {takes})")
        if v is not None and k in _OPTION_VALUES:
            typ, allowed = _OPTION_VALUES[k]
            if typ is bool and not isinstance(v, bool):
                raise ChatFormatError(f"{f.name}: option {k} must be true or false, got {v!r}")
            if typ is str and not isinstance(v, str):
                raise ChatFormatError(f"{f.name}: option {k} must be a string, got {v!r}")
            if allowed is not None and v not in allowed:
                raise ChatFormatError(f"{f.name}: option {k} must be one of {', '.join(allowed)}, got {v!r}")
        if v is not None:
            opts[k] = v
    if opts.get("today") is not None:
        t = opts["today"]
        if isinstance(t, _dt.date) and not isinstance(t, _dt.datetime):  # a TOML date; a datetime is refused
            opts["today"] = t.isoformat()
        else:
            try:
                _dt.date.fromisoformat(str(t))
            except ValueError:
                raise ChatFormatError(f"{f.name}: option today must be a date 'YYYY-MM-DD', got {t!r}") from None
    return opts


def check_conversation(messages: Any, fmt: str | ChatFormat, *, tools: Any = None) -> Conversation:
    """Check a conversation against the messages schema and what ``fmt`` can express.

    Args:
        messages: the messages (see :mod:`rmlprep.chat.messages`), or a checked
            :class:`~rmlprep.chat.messages.Conversation` (then ``tools`` must be None).
        fmt: a format name.
        tools: the conversation's tool definitions, or None.
    Returns:
        The canonical :class:`~rmlprep.chat.messages.Conversation`.
    Raises:
        ChatFormatError: the first field or rule the conversation breaks, naming the message.
            (The writer checks the order of roles: :func:`write`.)
    """
    f = get_format(fmt)
    conv = messages if isinstance(messages, Conversation) else parse_conversation(messages, tools)
    for i, m in enumerate(conv.messages):
        if m.role not in f.roles:
            if m.role == "tool" and f.tools_refused:
                raise ChatFormatError(f"message {i} (tool): {f.name} refuses tool results: {f.tools_refused}")
            if m.role == "tool":
                raise ChatFormatError(f"message {i} (tool): {f.name} has no tool role (its template writes no tool "
                                      "results); use a format with tools, or drop the tool turns")
            raise ChatFormatError(f"message {i} ({m.role}): {f.name} has no {m.role} role")
        if m.reasoning is not None and not f.reasoning:
            key = m.reasoning_key or "reasoning_content"  # the row's own key (a trial: 'thinking' named otherwise)
            raise ChatFormatError(f"message {i} (assistant): {f.name} cannot write {key} (its template drops it); "
                                  "drop it, or put it into content if the model was trained so")
        if m.tool_calls and not f.tool_calls and f.tools_refused:
            raise ChatFormatError(f"message {i} (assistant): {f.name} refuses tool_calls: {f.tools_refused}")
        if m.tool_calls and not f.tool_calls:
            raise ChatFormatError(f"message {i} (assistant): {f.name} cannot write tool_calls (its template has no "
                                  "tool calls)")
    if conv.tools and not f.tools:
        raise ChatFormatError(f"tools: {f.name} cannot write tool definitions (its template ignores them)")
    return conv


def write(messages: Any, fmt: str | ChatFormat, *, add_generation_prompt: bool = False, tools: Any = None,
          options: Mapping[str, Any] | None = None) -> Out:
    """Check a conversation and write it in ``fmt``: ``out.segs`` (see :mod:`rmlprep.chat.segments`)
    and ``out.notes`` (``{"reasoning_dropped": n}`` when the format's history rule dropped some).

    Raises:
        ChatFormatError: unknown format or option, or a conversation the format refuses.
    """
    f = get_format(fmt)
    conv = check_conversation(messages, f, tools=tools)
    return f.writer(conv, bool(add_generation_prompt), resolve_options(f, options))


def template_view(conv: Conversation, f: ChatFormat) -> tuple[list[dict], list[dict] | None]:
    """The conversation as ``fmt``'s Jinja template reads it: messages as dicts (text parts
    joined unless the template iterates them; reasoning under ``reasoning_content`` and
    ``thinking``; tool calls in the OpenAI shape with mapping arguments) and the tools list.
    """
    out: list[dict] = []
    for m in conv.messages:
        d: dict[str, Any] = {"role": m.role}
        if m.content is None:
            d["content"] = None if f.null_content == "none" else ""
        elif m.parts is not None and f.parts == "native":
            d["content"] = [{"type": "text", "text": p} for p in m.parts]
        else:
            d["content"] = m.content
        if m.reasoning is not None:
            d["reasoning_content"] = m.reasoning
            d["thinking"] = m.reasoning
        if m.tool_calls:
            d["tool_calls"] = [
                {**({"id": c.id} if c.id is not None else {}), "type": "function",
                 "function": {"name": c.name, "arguments": c.arguments}}
                for c in m.tool_calls
            ]
        if m.tool_call_id is not None:
            d["tool_call_id"] = m.tool_call_id
        if m.name is not None:
            d["name"] = m.name
        out.append(d)
    return out, [dict(t) for t in conv.tools] if conv.tools else None


def template_kwargs(f: ChatFormat, opts: Mapping[str, Any]) -> dict[str, Any]:
    """The options that are template variables and set (None: not passed, the template's default)."""
    return {k: v for k, v in opts.items() if k in f.template_vars and v is not None}


FORMATS: Mapping[str, ChatFormat] = MappingProxyType(_registry())
#: Every native format name.
CHAT_FORMATS: tuple[str, ...] = tuple(FORMATS)


def _get(d: Mapping[str, Any], *keys: str) -> Any:
    """The first of ``keys`` whose value is not null (null: absent, as the schema reads it)."""
    return next((d[k] for k in keys if d.get(k) is not None), None)


def read_view(messages: Any, tools: Any, f) -> tuple[list[dict], list[dict] | None]:
    """A conversation as read, in the shape ``f``'s Jinja template takes it, built from the raw
    values (not from :func:`~rmlprep.chat.messages.parse_conversation`'s result): the live
    check's reference side. Only the input conventions rmlprep documents are applied, each as
    the README states it: a null field is absent; a null ``content`` is ``None`` or ``""``
    (``f.null_content``); text parts are joined with ``""`` unless the template iterates them
    (``f.parts``); ``reasoning`` / ``thinking`` are ``reasoning_content`` (both names
    passed); a flat ``{"name", "arguments"}`` call is ``{"type": "function", "function":
    ...}``; ``arguments`` and ``tools`` given as JSON strings are parsed; a bare tool
    definition is wrapped as ``{"type": "function", "function": ...}``. Every other value,
    nulls inside tool schemas and arguments included, reaches the template as it was read.

    Call it on a conversation the schema accepts (:func:`rmlprep.chat.check_conversation`);
    the same shape as :func:`rmlprep.chat.registry.template_view` gives for the parsed one.
    """
    out: list[dict] = []
    for m in messages:
        d: dict[str, Any] = {"role": m["role"]}
        c = m.get("content")
        if c is None:
            d["content"] = None if f.null_content == "none" else ""
        elif isinstance(c, str):
            d["content"] = c
        else:
            parts = [p if isinstance(p, str) else p["text"] for p in c]
            d["content"] = [{"type": "text", "text": p} for p in parts] if f.parts == "native" else "".join(parts)
        r = _get(m, "reasoning_content", "reasoning", "thinking")
        if r is not None:
            d["reasoning_content"] = d["thinking"] = r
        calls = []
        for call in m.get("tool_calls") or ():
            fn = call["function"] if call.get("function") is not None else call
            args = fn["arguments"]
            calls.append({**({"id": call["id"]} if call.get("id") is not None else {}), "type": "function",
                          "function": {"name": fn["name"], "arguments": json.loads(args) if isinstance(args, str)
                                       else args}})
        if calls:
            d["tool_calls"] = calls
        for k in ("tool_call_id", "name"):
            if m.get(k) is not None:
                d[k] = m[k]
        out.append(d)
    if isinstance(tools, str):
        tools = json.loads(tools)
    vt = [dict(t) if t.get("function") is not None else {"type": "function", "function": t} for t in tools or ()]
    return out, vt or None


#: what else a config's ``chat.format`` takes, said after the list of format names
CONFIG_OTHER_FORMATS = ("\"auto\" (the format that reproduces the tokenizer's chat template) or \"template\" "
                        "(that template itself, rendered with jinja2)")


def config_format_error(e: Exception, name: str, *, others: str = CONFIG_OTHER_FORMATS) -> str:
    """The text of a config's ``chat.format`` error ``e`` for ``name``: an unknown name's list of
    formats ends with ``others``, the other values where it was given (a config's ``"auto"`` and
    ``"template"``, not "pass a model's Jinja chat template", which a config cannot do; the
    ``chat`` command passes its own), and offers the near names (:func:`near_format_names`:
    ``"qwen25"``: did you mean ``'qwen2.5'``?). Other errors as they are."""
    msg = str(e)
    if not msg.startswith("unknown chat format"):
        return msg
    near = near_format_names(str(name))
    msg = msg.replace(" (or pass a model's Jinja chat template)", f"; or {others}")
    if not near:
        return msg
    return f"{msg}; did you mean {near[0]!r}?" if len(near) == 1 else \
        f"{msg}; did you mean one of {', '.join(map(repr, near))}?"


def near_format_names(name: str) -> list[str]:
    """The format names a mistyped ``name`` may have meant: every format whose name starts with
    it when there is one (``"mistral"``: the six mistral formats, not the one spelling nearest
    to it), else the closest spelling (``difflib``, at most one: ``"qwen25"`` -> ``qwen2.5``).
    Case is ignored (``"Llama3"`` -> ``llama3``)."""
    import difflib

    key = name.strip().lower()
    if key in CHAT_FORMATS:
        return [key]
    if key:
        starts = [f for f in CHAT_FORMATS if f.startswith(key)]
        if starts:
            return starts
    lower = {f.lower(): f for f in CHAT_FORMATS}
    return [lower[m] for m in difflib.get_close_matches(key, list(lower), n=1)]
