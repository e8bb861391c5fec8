"""Opt-in conversion of tool data written as text into the messages schema.

LLaMA-Factory's tool-call demos (and sets exported from its ``sharegpt`` tool format) keep the
tool definitions as a JSON list in the system message and each tool call as a JSON object
``{"name": ..., "arguments": {...}}`` in an assistant message's text. Written as they are,
a model would learn that text; :func:`json_tools` turns them into ``tools`` and
``tool_calls`` so the format writes them the way the model's template writes tool calls.
It is opt-in (``chat.json_tools = true`` in a run): an answer that merely looks like a tool
call would be converted too, so a call naming a tool the conversation does not define is
refused (the row is a reject with its reason), not converted.

Source: LLaMA-Factory ``data/glaive_toolcall_en_demo.json`` and its ``function_call`` /
``observation`` roles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import json_rows
from ..errors import ChatFormatError
from .messages import content_parts

__all__ = ["string_tool_arguments", "join_text_parts", "join_parts_for_call", "json_tools", "parameters_as_text",
           "undefined_tool_calls", "unread_reasoning"]


def _loads(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    t = text.strip()
    if not t or t[0] not in "[{":
        return None
    try:
        return json_rows.loads(t)  # an object with a key twice: no call, no tools (left as text)
    except ValueError:
        return None


def json_tools(messages: Any, tools: Any = None, *, check: bool = True) -> tuple[Any, Any, int]:
    """Move tool definitions and tool calls written as JSON text into ``tools`` / ``tool_calls``.

    * a first system message whose whole content is a JSON list of function definitions
      (each a dict with a ``name``) becomes the conversation's ``tools`` (an empty list: no
      tools) and is removed; only when ``tools`` is not given already (None, or an empty list:
      a tools column's ``[]`` is no tools, as a run reads it);
    * an assistant message whose whole content is a JSON object with exactly the keys
      ``name`` (a string) and ``arguments`` (an object) becomes a message with that one tool
      call and ``content: None``; when the conversation defines tools (given, or from its
      system message) and the call names none of them, ``ChatFormatError`` (with ``check``):
      such an answer is as likely JSON data that looks like a call (``{"name": "Alice",
      "arguments": {...}}``) as a call, and either way converting it would train the model
      to call a tool its prompt never shows;
    * a tool definition whose ``parameters`` is a string holding a JSON object (Parquet and
      ``datasets`` tool sets store the schemas so, their keys differing from tool to tool)
      gets that object (:func:`parameters_as_text` finds them).

    Args:
        messages: the conversation (left unchanged; anything that is not a list is returned
            as is, for the schema check to refuse).
        tools: the conversation's own tools, if any.
        check: refuse a call to an undefined tool (False: convert it, for callers that only
            count the calls, as the hint of a run without ``json_tools`` does).
    Returns:
        (messages, tools, number of tool calls converted).
    Raises:
        ChatFormatError: with ``check``, a call naming a tool absent from a non-empty
            ``tools``, naming the message, the tool and the tools defined.
    """
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)) or not messages:
        return messages, tools, 0
    out = list(messages)
    first = out[0]
    skipped = 0  # messages removed before out[0] (the system message of definitions)
    # no tools given: None, or an empty list (a tools column's value for a row without tools,
    # also as the JSON text "[]"), which a run reads as no tools too
    if (tools is None or _definitions(tools) == []) and isinstance(first, Mapping) and first.get("role") == "system":
        v = _loads(first.get("content"))
        if isinstance(v, list) and all(isinstance(t, Mapping) and isinstance(t.get("name"), str) for t in v):
            tools = v or None
            out = out[1:]
            skipped = 1
    defined = _names(tools) if check else None
    n = 0
    for i, m in enumerate(out):
        if isinstance(m, Mapping) and m.get("role") == "assistant" and not m.get("tool_calls"):
            v = _loads(m.get("content"))
            if (isinstance(v, dict) and set(v) == {"name", "arguments"} and isinstance(v["name"], str)
                    and isinstance(v["arguments"], dict)):
                if defined and v["name"] not in defined:
                    raise ChatFormatError(
                        f"message {i + skipped} (assistant) is JSON shaped as a call to a tool named "
                        f"{v['name']!r}, which the conversation's tools do not define "
                        f"({', '.join(map(repr, sorted(defined)))}); json_tools does not convert it, as it "
                        "cannot tell such a call from an answer that is JSON data, and either way the model "
                        "would be trained to call a tool its prompt never shows: fix the row, or set "
                        "chat.json_tools = false (json_tools=False) to train it as the text it is")
                out[i] = {**m, "content": None,
                          "tool_calls": [{"type": "function", "function": {"name": v["name"], "arguments": v["arguments"]}}]}
                n += 1
    return out, _parameters_parsed(tools), n


def undefined_tool_calls(messages: Any, tools: Any) -> list[str]:
    """The names of the tools a (written, so well-formed) conversation's ``tool_calls`` call that
    its ``tools`` do not define, in order of first call: such a conversation trains the model to
    call a tool its prompt never shows (the run counts it, ``tool_calls_undefined``, as it counts
    calls with no definitions at all; a JSON call to such a tool is refused by
    :func:`json_tools`, which cannot tell it from JSON data). ``[]`` when ``tools`` defines none
    (``tool_calls_without_tools`` counts those) or a definition's name cannot be read."""
    defined = _names(tools)
    if not defined or not isinstance(messages, Sequence):
        return []
    out: list[str] = []
    for m in messages:
        for c in (m.get("tool_calls") or ()) if isinstance(m, Mapping) else ():
            fn = c.get("function", c) if isinstance(c, Mapping) else None
            name = fn.get("name") if isinstance(fn, Mapping) else None
            if isinstance(name, str) and name not in defined and name not in out:
                out.append(name)
    return out


def _names(tools: Any) -> set[str] | None:
    """The names of a conversation's tool definitions (bare ``{"name": ...}`` or OpenAI's
    ``{"type": "function", "function": {"name": ...}}``); None when there are none, or when a
    definition's name cannot be read (then nothing is refused on its account)."""
    names = set()
    for t in _definitions(tools) or ():
        fn = t.get("function", t) if isinstance(t, Mapping) else None
        name = fn.get("name") if isinstance(fn, Mapping) else None
        if not isinstance(name, str):
            return None
        names.add(name)
    return names or None


def _definitions(tools: Any) -> list | None:
    """``tools`` as a list of definitions (a JSON string holding one is read), else None."""
    if isinstance(tools, str):
        tools = _loads(tools)
    return tools if isinstance(tools, list) else None


def _text_parameters(t: Any) -> dict | None:
    """The object a definition's ``parameters`` string holds (bare or under ``function``), else None."""
    fn = t.get("function", t) if isinstance(t, Mapping) else None
    v = _loads(fn.get("parameters")) if isinstance(fn, Mapping) else None
    return v if isinstance(v, dict) else None


def parameters_as_text(tools: Any) -> int:
    """How many of a conversation's tool definitions hold their ``parameters`` (the JSON
    Schema of the arguments) as a string of JSON text, not an object: a format writes such a
    schema as one escaped string, as the model's template would (``tojson`` of a str), where
    models are shown an object (transformers passes schemas as dicts)."""
    return sum(_text_parameters(t) is not None for t in _definitions(tools) or ())


def _parameters_parsed(tools: Any) -> Any:
    """``tools`` with each ``parameters`` string holding a JSON object replaced by the object."""
    defs = _definitions(tools)
    if not defs or not parameters_as_text(defs):
        return tools
    out = []
    for t in defs:
        v = _text_parameters(t)
        if v is None:
            out.append(t)
        elif "function" in t:
            out.append({**t, "function": {**t["function"], "parameters": v}})
        else:
            out.append({**t, "parameters": v})
    return out


def string_tool_arguments(messages) -> bool:
    """Whether a (written, so well-formed) conversation gives a tool call's ``arguments`` as a
    string of JSON (``{"function": {"arguments": "{\\"city\\": \\"Paris\\"}"}}``, the OpenAI
    API's shape; also a ``datasets`` column that stores them so). rmlprep parses it and writes
    it as the format writes a mapping (``1e5`` becomes ``100000.0``, ``\\u00e9`` becomes ``é``),
    where transformers' ``apply_chat_template`` writes the string as it is (Qwen3, Hermes 3) or
    encodes it as JSON again (Qwen2.5, Llama 3.1, gpt-oss, Mistral Small 3.2, Kimi K2): counted
    (``tool_arguments_from_string``, explorer8 E3) so that a difference from such a render is never
    silent."""
    for m in messages:
        for c in (m.get("tool_calls") or ()) if isinstance(m, Mapping) else ():
            fn = c.get("function", c) if isinstance(c, Mapping) else None
            if isinstance(fn, Mapping) and isinstance(fn.get("arguments"), str):
                return True
    return False


def join_text_parts(messages: Any, f, sep: str | None, *, way: str | None = None) -> tuple[Any, int]:
    """``messages`` with each content given as two or more text parts (``[{"type": "text",
    "text": "hi"}, {"type": "text", "text": "there"}]``) joined with ``sep`` into one string, for
    format ``f`` whose template takes only a string (``f.parts == "join"``), and how many were
    joined; the messages as they are, and 0, when there is none or ``f``'s template iterates the
    parts itself (Gemma 3, Gemma 4, Mistral Small 3.2, Kimi K2: written as it writes them) or
    ``f`` is None (``chat.format = "template"``: the template is given them as they are).

    Such a template has no join to follow: transformers 4.57.1's ``apply_chat_template`` raises
    on the list (Qwen2.5, Qwen3, Mistral v1/v3/v7, Phi-3, SmolLM2, DeepSeek: ``TypeError: can
    only concatenate str (not "list") to str``) or writes its Python repr (Llama 3.x, Gemma 1:
    ``[{'type': 'text', 'text': 'hi'}, ...]``); vLLM's OpenAI server joins them with ``"\\n"``
    (``text_prompt = "\\n".join(texts)``, ``vllm/entrypoints/chat_utils.py``) before such a
    template, and the templates that iterate parts write them joined with ``""``. So with
    ``sep`` None (``chat.join_text_parts`` unset) such a conversation is refused, naming the
    message, the number of parts and the choice; one part has no join to choose. A content
    whose parts the schema refuses (media, a bare string, unknown fields) is left for
    :func:`~rmlprep.chat.messages.parse_conversation` to refuse. ``way``: the refusal's way on, for
    a caller whose option is spelled otherwise (``rmlprep chat --join-text-parts``).

    Raises:
        ChatFormatError: ``sep`` is None and a message's content holds two or more text parts.
    """
    if f is None or f.parts != "join" or not isinstance(messages, (list, tuple)):
        return messages, 0
    out, n = None, 0
    for i, m in enumerate(messages):
        c = m.get("content") if isinstance(m, Mapping) else None
        if not isinstance(c, Sequence) or isinstance(c, (str, bytes, bytearray)) or len(c) < 2:
            continue
        try:
            texts = content_parts(c, i, m.get("role"))[1]
        except ChatFormatError:  # refused by the schema, with its own reason
            continue
        if sep is None:
            raise ChatFormatError(
                f"message {i} ({m.get('role')}): its content is {len(c)} text parts, which {f.name}'s template does "
                "not join (transformers' apply_chat_template raises on a list or writes its Python repr); "
                + (way or "set join_text_parts='\\n' (chat.join_text_parts = \"\\n\", vLLM's join) or '' (as templates "
                   "that iterate parts join them) to choose, or join them in the data"))
        if out is None:
            out = list(messages)
        out[i] = {**m, "content": sep.join(texts)}
        n += 1
    return (messages, 0) if out is None else (out, n)


def join_parts_for_call(messages: Any, fmt: str, sep: str | None, where: str) -> Any:
    """``join_text_parts=`` of the one-conversation calls (:func:`rmlprep.chat.format_chat`,
    ``format_chat_segments``, ``validate_messages``, :func:`rmlprep.chat.encode_chat`), as
    ``tokenize_chat`` and the sft run apply it to each row: ``messages`` with the text parts of
    each content joined with ``sep`` where ``fmt``'s template takes only a string
    (:func:`join_text_parts`; ``"template"``: as they are).

    Args:
        messages: the conversation, as given (not changed: a joined message is a new dict).
        fmt: a format name (resolved: not ``"auto"``) or ``"template"``.
        sep: the join (``"\\n"``: vLLM's; ``""``), or None: refuse such a content.
        where: the call, for the ConfigError (``"format_chat"``).
    Returns:
        The messages to write: the same object when nothing was joined, else a new list.
    Raises:
        ConfigError: ``sep`` not None and not a string, or given with ``"template"``
            (:func:`rmlprep.chat.registry.join_parts_refusal`).
        ChatFormatError: ``sep`` None and a content of two or more text parts (the sft run's
            reject reason, naming the message, the number of parts and the option); unknown format.
    """
    from ..errors import ConfigError
    from .registry import get_format, join_parts_refusal

    if why := join_parts_refusal(fmt, sep):
        raise ConfigError(f"{where}(fmt={fmt!r}): {why}")
    return join_text_parts(messages, None if fmt == "template" else get_format(fmt), sep)[0]


#: the message keys rmlprep reads an assistant's reasoning from (:mod:`rmlprep.chat.messages`)
REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")


def unread_reasoning(messages, f) -> list | None:
    """``messages`` without the reasoning that format ``f``'s real template does not read
    (:attr:`~rmlprep.chat.base.ChatFormat.reasoning_keys`): what that template sees of the row
    as it is, as transformers' ``apply_chat_template`` passes it. None when there is no such
    reasoning (``f`` reads every name, or the row gives reasoning only under a name it reads).

    Worked example: gpt-oss's template reads ``message.thinking`` only; an assistant message
    ``{"content": "4", "reasoning_content": "2+2"}`` is written by rmlprep's ``gpt-oss`` with an
    analysis message ``2+2``; the template, given the row, writes ``4`` alone: this returns the
    message without ``reasoning_content``, whose text is the template's.
    """
    if not f.reasoning_keys:
        return None
    out, changed = [], False
    for m in messages:
        if isinstance(m, dict) and m.get("role") == "assistant":
            unread = [k for k in REASONING_KEYS if k not in f.reasoning_keys and m.get(k) is not None]
            if unread:
                m = {k: v for k, v in m.items() if k not in unread}
                changed = True
        out.append(m)
    return out if changed else None
