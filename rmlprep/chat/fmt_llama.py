"""Llama family: Llama 2 (``[INST]``), Llama 3 (headers), Llama 3.1 / 3.2 / 3.3 (tools).

Worked example (``llama3``, ``[user "Hi", assistant "Hello"]``)::

    <|begin_of_text|>                                      template   mask 0
    <|start_header_id|>user<|end_header_id|>\\n\\nHi<|eot_id|>   template + user   0
    <|start_header_id|>assistant<|end_header_id|>\\n\\n     template (generation prompt)   0
    Hello<|eot_id|>                                        assistant  1
"""

from __future__ import annotations

from ..errors import ChatFormatError
from .base import ALL_ROLES, PARTS_REFUSED, ChatFormat, alternate, today
from .messages import Conversation
from .segments import Out, Segment, strip_segments, tojson

__all__ = ["FORMATS"]

BOT, EOT, EOM = "<|begin_of_text|>", "<|eot_id|>", "<|eom_id|>"


def _h(role: str) -> str:
    return f"<|start_header_id|>{role}<|end_header_id|>\n\n"


def _turn(o: Out, m) -> None:
    """A message as Llama 3 and 3.1 write it: its header, its text stripped, ``<|eot_id|>``
    (an assistant's trained, as its text)."""
    o.t(_h(m.role))
    o.c(m.text.strip(), m.role)
    (o.a if m.role == "assistant" else o.t)(EOT)


def _w_llama3(conv: Conversation, gen: bool, opts) -> Out:
    """Llama 3: BOS, then ``<|start_header_id|>{role}<|end_header_id|>\\n\\n{content.strip()}<|eot_id|>``
    per message (any role); generation prompt ``<|start_header_id|>assistant<|end_header_id|>\\n\\n``.

    Source: llama3.jinja (meta-llama/Meta-Llama-3-8B-Instruct, current revision).
    """
    o = Out()
    o.t(BOT)
    for m in conv.messages:
        _turn(o, m)
    if gen:
        o.t(_h("assistant"))
    return o


_TOOLS_USER = ("Given the following functions, please respond with a JSON for a function call with its proper "
               "arguments that best answers the given prompt.\n\n"
               'Respond in the format {"name": function name, "parameters": dictionary of argument name and its '
               'value}.Do not use variables.\n\n')


def _llama31(clock: bool):
    def writer(conv: Conversation, gen: bool, opts) -> Out:
        msgs = list(conv.messages)
        tools = conv.tools
        date = opts.get("date_string")  # "" is a value: the templates test `date_string is defined`
        if date is None:
            date = today(opts).strftime("%d %b %Y") if clock else "26 Jul 2024"
        o = Out()
        o.t(BOT)
        system = ""
        base = 0
        if msgs[0].role == "system":
            system = msgs[0].text.strip()
            msgs, base = msgs[1:], 1
        o.t(_h("system") + ("Environment: ipython\n" if tools else "")
            + f"Cutting Knowledge Date: December 2023\nToday Date: {date}\n\n")
        o.c(system, "system")
        o.t(EOT)
        if tools:
            if not msgs or msgs[0].role != "user":
                raise ChatFormatError(f"message {base}: with tools, the Llama 3.1 template puts the tool definitions "
                                      "into the first message after the system message, which must be a user message")
            o.t(_h("user") + _TOOLS_USER)
            for t in tools:
                o.c(tojson(t, indent=4), "system")
                o.t("\n\n")
            o.c(msgs[0].text.strip(), "user")
            o.t(EOT)
            msgs, base = msgs[1:], base + 1
        for k, m in enumerate(msgs):
            i = base + k
            if m.role == "tool":
                o.t(_h("ipython"))
                o.c(tojson(m.text), "tool")  # the template writes a tool result with tojson (strings too)
                o.t(EOT)
            elif m.tool_calls:
                if len(m.tool_calls) != 1:
                    raise ChatFormatError(f"message {i} (assistant): the Llama 3.1 template takes one tool call per "
                                          f"message, got {len(m.tool_calls)}; split them into several messages")
                if m.text.strip():
                    raise ChatFormatError(f"message {i} (assistant): the Llama 3.1 template writes only the tool call "
                                          "of a message that has one (its text would be dropped); move the text "
                                          "to its own assistant message")
                c = m.tool_calls[0]
                o.t(_h("assistant"))
                o.a('{"name": "')
                o.c(c.name, "assistant")
                o.a('", "parameters": ')
                o.c(tojson(c.arguments), "assistant")
                o.a("}" + EOT)
            else:
                _turn(o, m)
        if gen:
            o.t(_h("assistant"))
        return o

    writer.__doc__ = f"""Llama 3.{2 if clock else 1}: BOS; a system turn with the "Cutting Knowledge Date" and
    "Today Date: {{date_string}}" lines ({'today, from the clock: option today' if clock else 'default 26 Jul 2024'})
    before the (stripped) system text, and "Environment: ipython" when there are tools; the tool
    definitions (JSON, indent 4) go into the first user message. One tool call per assistant
    message, written as ``{{"name": ..., "parameters": ...}}``; tool results are ``ipython``
    turns holding the result JSON-encoded.

    Source: llama3.{'2.jinja (meta-llama/Llama-3.2-3B-Instruct)' if clock else
    '1.jinja = more/meta-llama-Llama-3.1-8B-Instruct.jinja (also Llama 3.3)'}.
    """
    return writer


def _w_llama2(conv: Conversation, gen: bool, opts) -> Out:
    """Llama 2 chat: ``<s>[INST] {user.strip()} [/INST]`` and `` {answer.strip()} </s>`` per
    exchange, the optional system message as ``<<SYS>>\\n{system}\\n<</SYS>>\\n\\n`` before the
    first user message (that whole string is stripped). Roles alternate user/assistant after
    the optional system message. No generation prompt exists.

    Source: llama2.jinja (meta-llama/Llama-2-7b-chat-hf).
    """
    msgs = conv.messages
    start = 1 if msgs[0].role == "system" else 0
    alternate(msgs, "llama2", start=start)
    if start == len(msgs):
        raise ChatFormatError("message 0 is a system message with no user message after it (llama2's template "
                              "would write nothing)")
    system = msgs[0].text if start else None
    o = Out()
    for j, m in enumerate(msgs[start:]):
        if m.role == "user":
            o.t("<s>[INST] ")
            if j == 0 and system is not None:
                o.extend(strip_segments([Segment("<<SYS>>\n", "template", True), Segment(system, "system", False),
                                         Segment("\n<</SYS>>\n\n", "template", True), Segment(m.text, "user", False)]))
            else:  # strip_segments of the one segment; c() sees an empty one too (Out.user_at)
                o.c(m.text.strip(), "user")
            o.t(" [/INST]")
        else:
            o.a(" ")
            o.c(m.text.strip(), "assistant")
            o.a(" </s>")
    return o


FORMATS = [
    ChatFormat("llama2", _w_llama2, bos="<s>", eos="</s>", terminator=" </s>", stop="</s>", source="llama2.jinja",
               rules=PARTS_REFUSED),
    ChatFormat("llama3", _w_llama3, bos=BOT, eos=EOT, terminator=EOT, stop=EOT, roles=ALL_ROLES,
               source="llama3.jinja", rules=PARTS_REFUSED),
    ChatFormat("llama3.1", _llama31(False), bos=BOT, eos=EOT, terminator=EOT, stop=EOT, more_stops=(EOM,),
               roles=ALL_ROLES, tool_calls=True, tools=True, options={"date_string": None, "today": None},
               template_vars=frozenset({"date_string"}),
               probe_options=({"today": "2025-01-15"}, {"date_string": "01 Jan 2025"}),
               source="llama3.1.jinja = more/meta-llama-Llama-3.1-8B-Instruct.jinja", rules=PARTS_REFUSED),
    ChatFormat("llama3.2", _llama31(True), bos=BOT, eos=EOT, terminator=EOT, stop=EOT, more_stops=(EOM,),
               roles=ALL_ROLES, tool_calls=True, tools=True, options={"date_string": None, "today": None},
               template_vars=frozenset({"date_string"}),
               probe_options=({"today": "2025-01-15"}, {"date_string": "01 Jan 2025"}),
               source="llama3.2.jinja", rules=PARTS_REFUSED),
]
