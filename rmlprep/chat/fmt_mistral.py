"""Mistral family: ``[INST]`` formats v1, v3 (tools), v3-tekken (tools), v7, v7-tekken, Small 3.2.

None has a generation prompt: the prompt of an answer ends at ``[/INST]`` (or a tool result),
so everything an assistant writes after it, the space in front of its text included, is in
the mask.

Worked example (``mistral-v3``, ``[user "Hi", assistant "Hello"]``)::

    <s>[INST] Hi[/INST]      template + user   mask 0
     Hello</s>               assistant         1

The system message in v3 / v3-tekken: the real templates put it into the last user message
only when that message is the last of the conversation; when the conversation ends on an
assistant turn (every SFT example) they drop it. rmlprep refuses such a conversation by
default; the option ``system_placement = "last-user"`` puts the system message into the last
user message in both cases, as mistral-common (Mistral's own tokenizer library) does, an
explicit departure from the Jinja template.

A tool result in v3 / v3-tekken: the templates write its content as it is
(``{"content": cats are mammals, ...}`` for a plain-text result, not JSON); mistral-common
writes ``json.dumps({"content": json.loads(content) or the text, "call_id": id})``
(``{"content": "cats are mammals", ...}``, and a JSON result re-spaced as ``json.dumps`` does).
The option ``tool_results = "template"`` or ``"mistral-common"`` picks one; unset, a token
encoding follows the reference of its tokenizer (:func:`tokenizer_options`): mistral-common on
a SentencePiece ``.model`` read alone (which has no template), the template elsewhere (a
folder's template, which the sft run's live check compares with). Text without a tokenizer
(``format_chat``) is the template's.

Source: the templates named in each format; mistral-common ``InstructTokenizerV3`` for the
``last-user`` placement and ``encode_tool_message`` / ``_prepare_tool_result`` (1.13.1) for
tool results.
"""

from __future__ import annotations

import json

from ..errors import ChatFormatError
from .base import PARTS_REFUSED, ChatFormat, alternate, today
from .messages import Conversation
from .segments import Out, tojson

__all__ = ["FORMATS", "tokenizer_options"]

BOS, EOS = "<s>", "</s>"
_NO_TOOLS = frozenset(("system", "user", "assistant"))
_TOOLS = frozenset(("system", "user", "assistant", "tool"))


def _w_mistral_v1(conv: Conversation, gen: bool, opts) -> Out:
    """Mistral "v1": ``<s>``, `` [INST] {user} [/INST]`` (note the leading space), `` {answer}</s>``;
    the optional system message goes into the FIRST user message as ``{system}\\n\\n{user}``.
    Contents are not stripped; roles alternate.

    Source: mistral-v1.jinja (current template of Mistral-7B-Instruct-v0.1/v0.2, Mixtral-8x7B).
    """
    msgs = conv.messages
    start = 1 if msgs[0].role == "system" else 0
    alternate(msgs, "mistral-v1", start=start)
    if start == len(msgs):
        raise ChatFormatError("message 0 is a system message with no user message after it (mistral-v1's template "
                              "would drop it)")
    o = Out()
    o.t(BOS)
    for j, m in enumerate(msgs[start:]):
        if m.role == "user":
            o.t(" [INST] ")
            if j == 0 and start:
                o.c(msgs[0].text, "system")
                o.t("\n\n")
            o.c(m.text, "user")
            o.t(" [/INST]")
        else:
            o.a(" ")
            o.c(m.text, "assistant")
            o.a(EOS)
    return o


def _v3_tools(o: Out, tools, tekken: bool) -> None:
    o.t("[AVAILABLE_TOOLS][" if tekken else "[AVAILABLE_TOOLS] [")
    for k, t in enumerate(tools):
        fn = t["function"]
        items = []
        for key, val in fn.items():
            if key == "return":
                continue
            items.append(f'"{key}": "{val}"' if isinstance(val, str) else f'"{key}": {tojson(val)}')
        o.c('{"type": "function", "function": {' + ", ".join(items) + "}}", "system")
        o.t(", " if k < len(tools) - 1 else "]")
    o.t("[/AVAILABLE_TOOLS]")


def _check_id(i: int, cid, what: str, name: str) -> str:
    if not isinstance(cid, str) or len(cid) != 9:
        raise ChatFormatError(f"message {i}: {what} {cid!r}: {name}'s template needs tool call ids of 9 "
                              "characters (as Mistral's tokenizer makes them)")
    return cid


def _json_or_text(text: str):
    """mistral-common's ``_parse_json_content``: the JSON value of ``text``, or ``text`` itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def tokenizer_options(tokenizer, fmt, options):
    """``options`` for writing ``fmt`` to encode with ``tokenizer``: for ``mistral-v3`` with
    ``tool_results`` unset, ``"mistral-common"`` on a SentencePiece ``.model`` read alone (no
    tokenizer.json; mistral-common is its reference and it has no template), else unchanged
    (the template's text). See the module docstring."""
    if fmt != "mistral-v3" or (options or {}).get("tool_results") is not None:
        return options
    s = getattr(tokenizer, "spec", None)
    if s is None or not (s.add_prefix_space and s.prefix_scheme == "whole_text"):
        return options
    return {**(options or {}), "tool_results": "mistral-common"}


def _mistral_v3(tekken: bool):
    name = "mistral-v3-tekken" if tekken else "mistral-v3"

    def writer(conv: Conversation, gen: bool, opts) -> Out:
        msgs = conv.messages
        start = 1 if msgs[0].role == "system" else 0
        system = msgs[0].text if start else None
        loop = msgs[start:]
        k = 0  # alternation over messages that are neither tool results nor tool calls
        for j, m in enumerate(loop):
            if m.role == "tool" or m.tool_calls:
                continue
            if m.role == "system":
                raise ChatFormatError(f"message {j + start} (system): {name} takes only a first system message")
            if (m.role == "user") != (k % 2 == 0):
                raise ChatFormatError(f"message {j + start} has role {m.role!r}: after the optional first system "
                                      f"message, {name} needs roles alternating user/assistant/user/...")
            k += 1
        placement = opts.get("system_placement")
        if placement not in ("template", "last-user"):
            raise ChatFormatError(f"{name}: option system_placement must be 'template' or 'last-user', got {placement!r}")
        users = [m for m in loop if m.role == "user"]
        if system is not None and (not loop or loop[-1].role != "user"):
            if placement != "last-user" or not users:
                raise ChatFormatError(
                    f"message 0 (system): {name}'s template writes the system message only when the conversation "
                    "ends on a user message (here it would be dropped); set the option system_placement = "
                    "'last-user' to put it into the last user message as mistral-common does")
        last_user = users[-1] if users else None
        o = Out()
        o.t(BOS)
        for j, m in enumerate(loop):
            i = j + start
            if m.role == "user":
                if conv.tools and m == last_user:
                    _v3_tools(o, conv.tools, tekken)
                o.t("[INST]" if tekken else "[INST] ")
                if system is not None and m is last_user:
                    o.c(system, "system")
                    o.t("\n\n")
                o.c(m.text, "user")
                o.t("[/INST]")
            elif m.tool_calls:
                if m.text:
                    raise ChatFormatError(f"message {i} (assistant): {name}'s template writes only the tool calls of "
                                          "a message that has them (its text would be dropped); move the text to "
                                          "its own assistant message")
                o.a("[TOOL_CALLS][" if tekken else "[TOOL_CALLS] [")
                for n, c in enumerate(m.tool_calls):
                    cid = _check_id(i, c.id, "tool call id", name)
                    o.a('{"name": "')
                    o.c(c.name, "assistant")
                    o.a('", "arguments": ')
                    o.c(tojson(c.arguments), "assistant")
                    o.a(', "id": "')
                    o.c(cid, "assistant")
                    o.a('"}' + (", " if n < len(m.tool_calls) - 1 else "]" + EOS))
            elif m.role == "assistant":
                if tekken:
                    o.c(m.text, "assistant")
                else:
                    o.a(" ")
                    o.c(m.text.strip(), "assistant")
                o.a(EOS)
            else:
                cid = _check_id(i, m.tool_call_id, "tool_call_id", name)
                o.t("[TOOL_RESULTS]{\"content\": " if tekken else "[TOOL_RESULTS] {\"content\": ")
                if opts.get("tool_results") == "mistral-common":  # json.dumps of the dict: see module docstring
                    o.c(tojson(_json_or_text(m.text)), "tool")
                    o.t(', "call_id": "')
                    o.c(tojson(cid)[1:-1], "tool")
                else:
                    o.c(m.text, "tool")
                    o.t(', "call_id": "')
                    o.c(cid, "tool")
                o.t('"}[/TOOL_RESULTS]')
        return o

    writer.__doc__ = f"""Mistral "{name[8:]}": ``<s>``, ``[INST]{'' if tekken else ' '}{{user}}[/INST]``,
    ``{'' if tekken else ' '}{{answer{'' if tekken else '.strip()'}}}</s>``; the system message goes into the LAST
    user message as ``{{system}}\\n\\n{{user}}`` (see the module docstring for a conversation that
    ends on an assistant turn); the tools (``[AVAILABLE_TOOLS]``) go before the last user
    message; tool calls ``[TOOL_CALLS]{'' if tekken else ' '}[{{"name", "arguments", "id"}}, ...]</s>`` replace the
    message's text; tool results ``[TOOL_RESULTS]{'' if tekken else ' '}{{"content": ..., "call_id": ...}}[/TOOL_RESULTS]``
    (content as it is, or as mistral-common with ``tool_results = "mistral-common"``: module docstring).
    Tool call ids have 9 characters.

    Source: mistral-v3{'-tekken' if tekken else ''}.jinja ({'Mistral-Nemo-Instruct-2407' if tekken else
    'Mistral-7B-Instruct-v0.3, Mistral-Large-2407'}); mistral-common.
    """
    return writer


def _mistral_v7(tekken: bool):
    sp = "" if tekken else " "

    def writer(conv: Conversation, gen: bool, opts) -> Out:
        o = Out()
        o.t(BOS)
        for m in conv.messages:
            if m.role == "user":
                o.t("[INST]" + sp)
                o.c(m.text, "user")
                o.t("[/INST]")
            elif m.role == "system":
                o.t("[SYSTEM_PROMPT]" + sp)
                o.c(m.text, "system")
                o.t("[/SYSTEM_PROMPT]")
            else:
                o.a(sp)
                o.c(m.text, "assistant")
                o.a(EOS)
        return o

    writer.__doc__ = f"""Mistral "v7{'-tekken' if tekken else ''}": ``<s>``, ``[SYSTEM_PROMPT]{sp}{{system}}[/SYSTEM_PROMPT]``
    in place, ``[INST]{sp}{{user}}[/INST]``, ``{sp}{{answer}}</s>``; any order of roles, nothing stripped.

    Source: mistral-v7{'-tekken' if tekken else ''}.jinja ({'Mistral-Small-24B-Instruct-2501' if tekken else
    'Mistral-Large-Instruct-2411'}).
    """
    return writer


_SMALL32_SYSTEM = (
    "You are Mistral Small 3, a Large Language Model (LLM) created by Mistral AI, a French startup headquartered in "
    "Paris.\nYour knowledge base was last updated on 2023-10-01. The current date is {today}.\n\nWhen you're not sure "
    "about some information or when the user's request requires up-to-date or specific data, you must use the "
    "available tools to fetch the information. Do not hesitate to use tools whenever they can provide a more "
    "accurate or complete response. If no relevant tools are available, then clearly state that you don't have the "
    "information and avoid making up anything.\n\nIf the user's question is not clear, ambiguous, or does not "
    "provide enough context for you to accurately answer the question, you do not try to answer it right away and "
    "you rather ask the user to clarify their request (e.g. \"What are some good restaurants around me?\" => \"Where "
    "are you?\" or \"When is the next flight to Tokyo\" => \"Where do you travel from?\").\nYou are always very "
    "attentive to dates, and when asked about information at specific dates, you discard information that is at "
    "another date.\nYou follow these instructions in all languages, and always respond to the user in the language "
    "they use or request.\nNext sections describe the capabilities that you have.\n\n# WEB BROWSING "
    "INSTRUCTIONS\n\nYou cannot perform any web search or access internet to open URLs, links etc. If it seems like "
    "the user is expecting you to do so, you clarify the situation and ask the user to copy paste the text directly "
    "in the chat.\n\n# MULTI-MODAL INSTRUCTIONS\n\nYou have the ability to read images, but you cannot generate "
    "images. You also cannot transcribe audio files or videos.\nYou cannot read nor transcribe audio files or "
    "videos.\n\n# TOOL CALLING INSTRUCTIONS\n\nYou may have access to tools that you can use to fetch information or "
    "perform actions. You must use these tools in the following situations:\n\n1. When the request requires "
    "up-to-date information.\n2. When the request requires specific data that you do not have in your knowledge "
    "base.\n3. When the request involves actions that you cannot perform without tools.\n\nAlways prioritize using "
    "tools to provide the most accurate and helpful response. If tools are not available, inform the user that you "
    "cannot perform the requested action at the moment."
)


def _w_mistral_small32(conv: Conversation, gen: bool, opts) -> Out:
    """Mistral Small 3.2: ``<s>[SYSTEM_PROMPT]{system}[/SYSTEM_PROMPT]`` always (a default
    system prompt with today's date when the first message is not a system message), then
    ``[INST]{user}[/INST]``, ``{answer}</s>``; later system messages in place; the tools as
    JSON in ``[AVAILABLE_TOOLS]`` before the last user message; tool calls
    ``[TOOL_CALLS]{name}[CALL_ID]{id}[ARGS]{arguments}`` (then ``</s>``) replace the message's
    text; tool results ``[TOOL_RESULTS]{id}[TOOL_CONTENT]{content}[/TOOL_RESULTS]``.
    Alternation is checked over messages that are neither tool results nor tool calls (a later
    system message takes an assistant's place there, as in the template). A system message
    written as parts keeps only its first part in the template: more than one is refused.

    Source: more/Mistral-Small-3.2-24B-Instruct-2506.jinja.
    """
    msgs = conv.messages
    name = "mistral-small-3.2"
    if msgs[0].role == "system":
        if msgs[0].parts is not None and len(msgs[0].parts) != 1:
            raise ChatFormatError(f"message 0 (system): {name}'s template writes only the first part of a system "
                                  "message given as parts; give one text")
        system, start = msgs[0].text, 1
    else:
        system, start = _SMALL32_SYSTEM.format(today=today(opts).isoformat()), 0
    loop = msgs[start:]
    k = 0
    for j, m in enumerate(loop):
        if m.role == "tool" or m.tool_calls:
            continue
        if (m.role == "user") != (k % 2 == 0):
            raise ChatFormatError(f"message {j + start} has role {m.role!r}: after the optional first system message, "
                                  f"{name} needs roles alternating user/assistant/user/... (tool calls and results "
                                  "aside)")
        k += 1
    users = [m for m in loop if m.role == "user"]
    last_user = users[-1] if users else None
    o = Out()
    o.t(BOS + "[SYSTEM_PROMPT]")
    if start:
        o.c(system, "system")
    else:
        o.t(system)
    o.t("[/SYSTEM_PROMPT]")
    for j, m in enumerate(loop):
        i = j + start
        if m.role == "system":
            if m.parts is not None and len(m.parts) != 1:
                raise ChatFormatError(f"message {i} (system): {name}'s template writes only the first part of a "
                                      "system message given as parts; give one text")
            o.t("[SYSTEM_PROMPT]")
            o.c(m.text, "system")
            o.t("[/SYSTEM_PROMPT]")
        elif m.role == "user":
            if conv.tools and m == last_user:
                o.t("[AVAILABLE_TOOLS]")
                o.c(tojson(list(conv.tools)), "system")
                o.t("[/AVAILABLE_TOOLS]")
            o.t("[INST]")
            o.c(m.text, "user")
            o.t("[/INST]")
        elif m.tool_calls:
            if m.text:
                raise ChatFormatError(f"message {i} (assistant): {name}'s template writes only the tool calls of a "
                                      "message that has them (its text would be dropped); move the text to its own "
                                      "assistant message")
            for c in m.tool_calls:
                o.a("[TOOL_CALLS]")
                o.c(c.name, "assistant")
                o.a("[CALL_ID]")
                o.c(_check_id(i, c.id, "tool call id", name), "assistant")
                o.a("[ARGS]")
                o.c(tojson(c.arguments), "assistant")
            o.a(EOS)
        elif m.role == "assistant":
            o.c(m.text, "assistant")
            o.a(EOS)
        else:
            o.t("[TOOL_RESULTS]")
            o.c(_check_id(i, m.tool_call_id, "tool_call_id", name), "tool")
            o.t("[TOOL_CONTENT]")
            o.c(m.text, "tool")
            o.t("[/TOOL_RESULTS]")
    return o


def _f(name, writer, source, **kw) -> ChatFormat:
    return ChatFormat(name=name, writer=writer, bos=BOS, eos=EOS, terminator=EOS, stop=EOS, source=source, **kw)


FORMATS = [
    _f("mistral-v1", _w_mistral_v1, "mistral-v1.jinja", rules=PARTS_REFUSED),
    # rules 2: on a .model read alone, plain-text tool results are written as mistral-common writes them
    # (c4d7c9b): a unit done under rules 1 may hold the template's text, and is redone on resume; 3: PARTS_REFUSED
    _f("mistral-v3", _mistral_v3(False), "mistral-v3.jinja", roles=_TOOLS, tool_calls=True, tools=True,
       options={"system_placement": "template", "tool_results": None}, rules=PARTS_REFUSED + 1),
    _f("mistral-v3-tekken", _mistral_v3(True), "mistral-v3-tekken.jinja", roles=_TOOLS, tool_calls=True, tools=True,
       options={"system_placement": "template", "tool_results": None}, rules=PARTS_REFUSED),
    _f("mistral-v7", _mistral_v7(False), "mistral-v7.jinja", rules=PARTS_REFUSED),
    _f("mistral-v7-tekken", _mistral_v7(True), "mistral-v7-tekken.jinja", rules=PARTS_REFUSED),
    _f("mistral-small-3.2", _w_mistral_small32, "more/Mistral-Small-3.2-24B-Instruct-2506.jinja", roles=_TOOLS,
       tool_calls=True, tools=True, parts="native", options={"today": None}, probe_options=({"today": "2025-01-15"},)),
]
