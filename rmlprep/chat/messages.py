"""The messages schema: OpenAI-style chat messages, checked and put into one canonical form.

A conversation is a list of messages, each a mapping::

    {"role": "system" | "user" | "assistant" | "tool",
     "content": str | [{"type": "text", "text": str}, ...] | None,
     "reasoning_content": str,          # assistant only; aliases "reasoning", "thinking"
     "tool_calls": [{"id": str, "type": "function",
                     "function": {"name": str, "arguments": {...} | "<JSON object>"}}, ...],
     "tool_call_id": str,               # tool only: the call it answers
     "name": str}                       # tool only: the function's name

plus, per conversation, an optional ``tools`` list of function definitions
(``{"type": "function", "function": {"name", "description", "parameters"}}``; a bare
``{"name", "description", "parameters"}`` is wrapped so; a JSON string holding the list is
parsed).

Rules (:func:`parse_conversation`; each broken rule is a :class:`ChatFormatError` naming the
message index and the field):

* a non-empty list of mappings; ``role`` one of the four roles (``developer``, ``ipython``,
  ``function`` and others are refused by name);
* a field of a message, a text part or a tool call whose value is null is absent; a field
  rmlprep does not know, with a value, is refused: it would be lost;
* inside ``arguments`` and a tool definition a null is a value, kept as given, as the Jinja
  template renders it (``"default": null`` in a JSON Schema written by pydantic). Arrow
  struct columns are the exception, dropped when read, before this module sees them
  (:func:`rmlprep.readers.base.drop_struct_nulls`, also for :func:`rmlprep.tokenize_chat` on
  Arrow batches and ``datasets.map``): Arrow pads every row's struct to the union of all
  rows' keys, so there a real null cannot be told from a key the row does not have; store
  tools and arguments as JSON strings to keep their nulls;
* ``content``: a string, a list of parts, or null only on an assistant message with tool calls;
  text parts are kept as a tuple (each format joins them as its template does, ``""`` unless
  the writer says otherwise); an ``image``, ``image_url``, ``audio``, ``input_audio``,
  ``video`` or ``file`` part is refused by name (rmlprep writes text);
* ``reasoning_content`` / ``reasoning`` / ``thinking``: only on assistant messages, a string
  (two of them with different values are refused);
* ``tool_calls``: only on assistant messages; each ``{"function": {"name", "arguments"}}`` or
  the flat ``{"name", "arguments"}``; ``arguments`` a JSON object, given as a mapping or as a
  string holding one (parsed: a format renders it as its template renders a mapping); ``id``
  optional, a string;
* ``tool_call_id`` and ``name``: only on tool messages; a ``tool_call_id`` must name a call
  of an earlier assistant message.

Whether a *format* can write a valid conversation (tool calls, reasoning, the order of roles)
is the format's check (:func:`rmlprep.chat.check_conversation`).

Source: OpenAI Chat Completions ``messages`` / ``tools``; transformers' chat-template
conventions (``reasoning_content``, ``tool_calls[].function.arguments`` as a mapping).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import json_rows
from ..errors import ChatFormatError, RowError

__all__ = ["ROLES", "ToolCall", "Message", "Conversation", "parse_conversation", "parse_tools", "schema_error",
           "SYSTEM_FIELDS", "with_system_prompt", "content_parts"]

ROLES = ("system", "user", "assistant", "tool")
_REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")
_KNOWN_KEYS = frozenset(("role", "content", "tool_calls", "tool_call_id", "name", *_REASONING_KEYS))
_MEDIA_PARTS = frozenset(("image", "image_url", "input_image", "audio", "input_audio", "video", "video_url", "file"))
_ROLE_HINTS = {
    "developer": "use role 'system' (gpt-oss's template reads a first system message as its developer message)",
    "ipython": "use role 'tool' (Llama 3.1's template writes tool results as ipython)",
    "function": "use role 'tool' with a tool_call_id (the OpenAI 'function' role is deprecated)",
    "observation": "use role 'tool'",
    "human": "use role 'user': ShareGPT's name",
    "prompter": "use role 'user': OpenAssistant's name",
    "gpt": "use role 'assistant': ShareGPT's name",
    "model": "use role 'assistant'",
    "bot": "use role 'assistant'",
    "chatbot": "use role 'assistant': Cohere's name",
    "ai": "use role 'assistant'",
}


def _role_hint(role: Any) -> str:
    """What to write instead of an unknown role, as `` (use role ...)`` or ``""``: the hints
    above (another dataset's or API's name; compared in lower case), a known role in another case
    or with spaces (``'Assistant'``, ``'user '``); and that no option maps roles."""
    if not isinstance(role, str):
        return ""
    key = role.strip().lower()
    if key in ROLES:
        return f" (roles are lower case, with no spaces: use role {key!r})"
    if key in _ROLE_HINTS:
        return f" ({_ROLE_HINTS[key]}); no rmlprep option maps roles: rename them in the data first"
    return ""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of an assistant message.

    Attributes:
        name: the function's name.
        arguments: the arguments, a JSON object as a dict (parsed when given as a string).
        id: the call's id, or None.
    """

    name: str
    arguments: dict
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Message:
    """One checked message.

    Attributes:
        role: system, user, assistant or tool.
        content: the text (text parts joined with ``""``), or None (an assistant message
            with tool calls and ``content: null``).
        parts: the text of each part when ``content`` was a list of parts, else None.
        reasoning: the reasoning (``reasoning_content``), or None.
        tool_calls: the assistant's tool calls (empty for other roles).
        tool_call_id: a tool message's call id, or None.
        name: a tool message's function name, or None.
        reasoning_key: the key ``reasoning`` was read from (``reasoning_content``, ``reasoning``
            or ``thinking``; the first of them given), for messages that name it; None without
            reasoning. Not compared.
    """

    role: str
    content: str | None
    parts: tuple[str, ...] | None = None
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    reasoning_key: str | None = field(default=None, compare=False)

    @property
    def text(self) -> str:
        """``content`` with None as ``""``."""
        return self.content or ""


@dataclass(frozen=True, slots=True)
class Conversation:
    """A checked conversation: messages and the tools offered (None: no ``tools``)."""

    messages: tuple[Message, ...]
    tools: tuple[dict, ...] | None = None


def _err(i: int | None, role: str | None, what: str) -> ChatFormatError:
    where = f"message {i}" + (f" ({role})" if role else "") + ": " if i is not None else ""
    return ChatFormatError(where + what)


def _json_object(value: Any, i: int, role: str, what: str) -> dict:
    if isinstance(value, str):
        try:
            value = json_rows.loads(value)
        except RowError as e:
            raise _err(i, role, f"{what} is a string in which {e}") from None
        except ValueError as e:
            raise _err(i, role, f"{what} is a string that is not JSON ({e}); give a JSON object") from None
    if not isinstance(value, Mapping):
        raise _err(i, role, f"{what} must be a JSON object (a dict or a string holding one), got {_kind(value)}")
    return dict(value)


def _tool_call(c: Any, i: int, k: int) -> ToolCall:
    what = f"tool_calls[{k}]"
    if not isinstance(c, Mapping):
        raise _err(i, "assistant", f"{what} must be a dict, got {_kind(c)}")
    c = {key: v for key, v in c.items() if v is not None}
    fn = c.get("function", c)
    if not isinstance(fn, Mapping):
        raise _err(i, "assistant", f"{what}.function must be a dict, got {_kind(fn)}")
    fn = {key: v for key, v in fn.items() if v is not None}
    extra = set(c) - {"id", "type", "function"} if "function" in c else set(c) - {"id", "type", "name", "arguments"}
    extra |= set(fn) - {"name", "arguments"} if "function" in c else set()
    if extra:
        raise _err(i, "assistant", f"{what} has field(s) {sorted(extra)}, which rmlprep does not know "
                                   "(a tool call is {id, type, function: {name, arguments}})")
    if c.get("type", "function") != "function":
        raise _err(i, "assistant", f"{what}.type is {c['type']!r}; only 'function' calls are supported")
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise _err(i, "assistant", f"{what}.function.name must be a non-empty string, got {name!r}")
    if "arguments" not in fn:
        raise _err(i, "assistant", f"{what}.function.arguments is missing (give {{}} for no arguments)")
    args = _json_object(fn["arguments"], i, "assistant", f"{what}.function.arguments")
    cid = c.get("id")
    if cid is not None and not isinstance(cid, str):
        raise _err(i, "assistant", f"{what}.id must be a string, got {type(cid).__name__}")
    return ToolCall(name, args, cid)


def content_parts(value: Any, i: int, role: str) -> tuple[str | None, tuple[str, ...] | None]:
    """Message ``i``'s content as ``(text, parts)``: a string as ``(value, None)``, a list of
    text parts as (their texts joined with ``""``, each part's text).

    Raises:
        ChatFormatError: a part that is not ``{"type": "text", "text": str}`` (media named).
    """
    if isinstance(value, str):
        return value, None
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        texts: list[str] = []
        for k, p in enumerate(value):
            if not isinstance(p, Mapping):  # a bare str too: real templates fail on it or write nothing
                raise _err(i, role, f"content[{k}] must be a part dict {{'type': 'text', 'text': ...}}, got {type(p).__name__}")
            t = p.get("type")
            if t in _MEDIA_PARTS:
                raise _err(i, role, f"content[{k}] is an {t!r} part; rmlprep writes text only, "
                                    "so media parts are refused (drop them or use a multimodal processor)")
            if t != "text":
                raise _err(i, role, f"content[{k}] has type {t!r}; only 'text' parts are supported")
            extra = {key for key, v in p.items() if v is not None} - {"type", "text"}
            if extra:
                raise _err(i, role, f"content[{k}] has field(s) {sorted(extra)}, which rmlprep does not know")
            if not isinstance(p.get("text"), str):
                raise _err(i, role, f"content[{k}]['text'] must be a string, got {type(p.get('text')).__name__}")
            texts.append(p["text"])
        return "".join(texts), tuple(texts)
    raise _err(i, role, f"content must be a string or a list of text parts, got {_kind(value)}")


def _kind(value: Any) -> str:
    """A value's type for an error message; an Arrow map that is no dict says why
    (:class:`rmlprep.readers.base.MapPairs`: a key twice)."""
    return getattr(value, "arrow_map_note", None) or type(value).__name__


def parse_tools(tools: Any) -> tuple[dict, ...] | None:
    """Check a conversation's ``tools``: None, a list of function definitions, or a JSON string
    holding one. A bare ``{"name", ...}`` definition is wrapped as ``{"type": "function",
    "function": {...}}`` (the form transformers and OpenAI use); nothing else is changed: a
    null inside a definition (``"default": null``) is kept, as the template renders it.

    Raises:
        ChatFormatError: not a list, an entry that is not a function definition.
    """
    if tools is None:
        return None
    if isinstance(tools, str):
        try:
            tools = json_rows.loads(tools)
        except RowError as e:
            raise ChatFormatError(f"tools: a string in which {e}") from None
        except ValueError as e:
            raise ChatFormatError(f"tools: a string that is not JSON ({e})") from None
        if tools is None:
            return None
    if isinstance(tools, Mapping) or not isinstance(tools, Sequence) or isinstance(tools, (bytes, bytearray)):
        raise ChatFormatError(f"tools must be a list of function definitions, got {_kind(tools)}")
    out = []
    for k, t in enumerate(tools):
        if not isinstance(t, Mapping):
            raise ChatFormatError(f"tools[{k}] must be a dict, got {_kind(t)}")
        if "function" in t:
            if t.get("type", "function") != "function" or not isinstance(t["function"], Mapping):
                raise ChatFormatError(f"tools[{k}] must be {{'type': 'function', 'function': {{...}}}}")
            fn = t["function"]
        else:
            fn, t = t, {"type": "function", "function": t}
        if not isinstance(fn.get("name"), str) or not fn["name"]:
            raise ChatFormatError(f"tools[{k}]: the function has no name")
        out.append(t)
    return tuple(out) if out else None


def parse_conversation(messages: Any, tools: Any = None) -> Conversation:
    """Check ``messages`` (and ``tools``) against the schema and return the canonical form.

    Raises:
        ChatFormatError: the first broken rule (see the module docstring), naming the message.
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        hint = ""
        if isinstance(messages, str) and messages.lstrip()[:1] == "[":
            try:
                if isinstance(json.loads(messages), list):
                    hint = (" holding a JSON list: the column stores conversations as JSON text; decode it "
                            "first (json.loads, e.g. in datasets.map) and save the lists")
            except ValueError:
                pass
        raise ChatFormatError(f"messages must be a list of {{'role', 'content'}} dicts, got {_kind(messages)}"
                              + hint)
    if not messages:
        raise ChatFormatError("empty conversation; give at least one message")
    out: list[Message] = []
    call_ids: set[str] = set()
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise _err(i, None, f"must be a dict with 'role' and 'content', got {_kind(m)}")
        role = m.get("role")
        if role is None:
            sharegpt = "from" in m and "value" in m
            raise _err(i, None, "has no 'role'" + (
                " (it has ShareGPT's 'from' and 'value', which rmlprep does not read and no option maps: rename "
                "them to 'role' and 'content' in the data first, with roles human -> user, gpt -> assistant, "
                "function_call -> assistant, observation -> tool)" if sharegpt else ""))
        if role not in ROLES:
            raise _err(i, None, f"has role {role!r}; roles are system, user, assistant, tool{_role_hint(role)}")
        present = {k for k, v in m.items() if v is not None}
        unknown = present - _KNOWN_KEYS
        if unknown:
            raise _err(i, role, f"has field(s) {sorted(unknown)}, which rmlprep does not know; "
                                "they would be lost (drop them first if they do not matter)")
        for k in ("tool_calls", *_REASONING_KEYS):
            if k in present and role != "assistant":
                raise _err(i, role, f"has {k!r}, which only an assistant message can carry")
        for k in ("tool_call_id", "name"):
            if k in present and role != "tool":
                why = ("no format writes a participant name" if k == "name"
                       else "it names the call a tool result answers")
                raise _err(i, role, f"has {k!r}, which rmlprep takes only on a tool message ({why})")
        calls: tuple[ToolCall, ...] = ()
        if "tool_calls" in present:
            tc = m["tool_calls"]
            if isinstance(tc, (str, bytes, Mapping)) or not isinstance(tc, Sequence):
                raise _err(i, role, f"tool_calls must be a list, got {type(tc).__name__}")
            calls = tuple(_tool_call(c, i, k) for k, c in enumerate(tc))
            call_ids.update(c.id for c in calls if c.id is not None)
        if "content" not in present:
            if not calls:
                raise _err(i, role, "content is missing or null (only an assistant message with tool_calls may "
                                    "have no content)")
            content, parts = None, None
        else:
            content, parts = content_parts(m["content"], i, role)
        reasoning = rkey = None
        for k in _REASONING_KEYS:
            if k in present:
                rkey = rkey or k
                r = m[k]
                if not isinstance(r, str):
                    raise _err(i, role, f"{k} must be a string, got {type(r).__name__}")
                if reasoning is not None and r != reasoning:
                    raise _err(i, role, f"has two different reasonings ({', '.join(k for k in _REASONING_KEYS if k in present)})")
                reasoning = r
        tcid = m.get("tool_call_id")
        if tcid is not None:
            if not isinstance(tcid, str):
                raise _err(i, role, f"tool_call_id must be a string, got {type(tcid).__name__}")
            if tcid not in call_ids:
                raise _err(i, role, f"tool_call_id {tcid!r} names no tool call of an earlier assistant message")
        name = m.get("name")
        if name is not None and not isinstance(name, str):
            raise _err(i, role, f"name must be a string, got {type(name).__name__}")
        out.append(Message(role, content, parts, reasoning, calls, tcid, name, rkey))
    return Conversation(tuple(out), parse_tools(tools))


def schema_error(messages: Any, tools: Any = None) -> str | None:
    """Why ``messages`` (with ``tools``) break the schema, or None: the check a pipeline runs
    on every row before any format sees it (see :func:`parse_conversation`)."""
    try:
        parse_conversation(messages, tools)
    except ChatFormatError as e:
        return str(e)
    return None


#: Columns that hold a conversation's system prompt beside its messages by the field's
#: convention: ``system`` (LLaMA-Factory's sharegpt and alpaca layouts), ``system_prompt``
#: (OpenOrca / SlimOrca-derived sets).
SYSTEM_FIELDS = ("system", "system_prompt")


def _text_of(content: Any) -> Any:
    """A message content as one string when it is text (a string, or text parts joined), else
    the value itself."""
    if isinstance(content, (list, tuple)) and all(isinstance(p, Mapping) and p.get("type") == "text"
                                                    for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    return content


def with_system_prompt(messages: Any, system: Any, column: str) -> tuple[Any, str | None]:
    """``messages`` with the per-conversation ``system`` value (read from ``column``) as their
    system message, and None; or ``(messages, reason)`` when it cannot be.

    A null or ``""`` is no system prompt (``messages`` unchanged); a string is written as a
    ``{"role": "system", "content": system}`` message before the others, unless the messages
    already start with a system message: the same text is kept once, a different one is the
    reason (two system prompts for one conversation, and no rule says which one the model saw).
    Any other value is the reason. ``messages`` that are not a list are returned unchanged (the
    schema check names them).

    Example: ``with_system_prompt([{"role": "user", "content": "Hi"}], "Be brief.", "system")``
    → ``([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}], None)``.
    """
    if system is None or system == "" or not isinstance(messages, (list, tuple)):
        return messages, None
    if not isinstance(system, str):
        return messages, f"{column} must be a string (the conversation's system prompt), got {type(system).__name__}"
    first = messages[0] if messages else None
    if isinstance(first, Mapping) and first.get("role") == "system":
        if _text_of(first.get("content")) == system:
            return messages, None
        return messages, (f"the row has a system prompt in {column!r} and a different system message first in "
                          "its messages: keep one of them")
    return [{"role": "system", "content": system}, *messages], None
