"""Kimi K2 (Moonshot): ``<|im_user|>user<|im_middle|>{content}<|im_end|>`` turns.

Worked example (``[user "Hi", assistant "Hello"]``)::

    <|im_system|>system<|im_middle|>You are a helpful assistant<|im_end|>   template   mask 0
    <|im_user|>user<|im_middle|>Hi<|im_end|>                                template + user   0
    <|im_assistant|>assistant<|im_middle|>                                  template (generation prompt)   0
    Hello<|im_end|>                                                         assistant  1
"""

from __future__ import annotations

from ..errors import ChatFormatError
from .base import ALL_ROLES, ChatFormat
from .messages import Conversation
from .segments import Out, tojson

__all__ = ["FORMATS"]

E = "<|im_end|>"
_HEADERS = {"system": "<|im_system|>system<|im_middle|>", "user": "<|im_user|>user<|im_middle|>",
            "assistant": "<|im_assistant|>assistant<|im_middle|>", "tool": "<|im_system|>tool<|im_middle|>"}


def _w_kimi_k2(conv: Conversation, gen: bool, opts) -> Out:
    """Kimi K2: the tools as JSON in a ``tool_declare`` turn first; a default system turn
    ("You are a helpful assistant") when the first message is not a system message; each
    message a turn (system messages anywhere); an assistant's tool calls after its text as
    ``<|tool_calls_section_begin|><|tool_call_begin|>functions.{name}:{index}<|tool_call_argument_begin|>
    {arguments}<|tool_call_end|>...<|tool_calls_section_end|>`` (the template numbers the calls
    itself: their ids are not written); a tool result as ``## Return of {tool_call_id}\\n{content}``
    where ``\\n`` is the two characters backslash and n, as the template has them. Reasoning
    is not written (refused).

    Source: more/moonshotai-Kimi-K2.jinja.
    """
    msgs = conv.messages
    o = Out()
    if conv.tools:
        o.t("<|im_system|>tool_declare<|im_middle|>")
        o.c(tojson(list(conv.tools)), "system")
        o.t(E)
    for i, m in enumerate(msgs):
        if i == 0 and m.role != "system":
            o.t("<|im_system|>system<|im_middle|>You are a helpful assistant" + E)
        o.t(_HEADERS[m.role])
        if m.role == "assistant":
            o.c(m.text, "assistant")
            if m.tool_calls:
                o.a("<|tool_calls_section_begin|>")
                for k, c in enumerate(m.tool_calls):
                    o.a("<|tool_call_begin|>functions.")
                    o.c(c.name, "assistant")
                    o.a(f":{k}<|tool_call_argument_begin|>")
                    o.c(tojson(c.arguments), "assistant")
                    o.a("<|tool_call_end|>")
                o.a("<|tool_calls_section_end|>")
            o.a(E)
        elif m.role == "tool":
            if m.tool_call_id is None:
                raise ChatFormatError(f"message {i} (tool): kimi-k2's template writes the result's tool_call_id "
                                      "(\"## Return of ...\"); give one")
            o.t("## Return of ")
            o.c(m.tool_call_id, "tool")
            o.t("\\n")
            o.c(m.text, "tool")
            o.t(E)
        else:
            o.c(m.text, m.role)
            o.t(E)
    if gen:
        o.t(_HEADERS["assistant"])
    return o


FORMATS = [
    ChatFormat("kimi-k2", _w_kimi_k2, bos=None, eos=E, terminator=E, stop=E, roles=ALL_ROLES, tool_calls=True,
               tools=True, parts="native", null_content="none", source="more/moonshotai-Kimi-K2.jinja"),
]
