"""Qwen3-Coder: ChatML turns with XML tool definitions and XML tool calls.

Worked example (``[user "Fix it", assistant tool call f(x=1)]``)::

    <|im_start|>user\\nFix it<|im_end|>\\n       template + user   mask 0
    <|im_start|>assistant\\n                    template (generation prompt)   0
    <tool_call>\\n<function=f>\\n<parameter=x>\\n1\\n</parameter>\\n</function>\\n</tool_call><|im_end|>
                                               assistant         1
    \\n                                        template          0
"""

from __future__ import annotations

from ..errors import ChatFormatError
from .base import ALL_ROLES, PARTS_REFUSED, ChatFormat
from .messages import Conversation
from .segments import Out, tojson

__all__ = ["FORMATS"]

S, E = "<|im_start|>", "<|im_end|>"
_DEFAULT_SYSTEM = "You are Qwen, a helpful AI assistant that can interact with a computer to solve tasks."
_INSTRUCTIONS = (
    "\n\nIf you choose to call a tool ONLY reply in the following format with NO suffix:\n\n<tool_call>\n"
    "<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nvalue_2\n</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n"
    "- Function calls MUST follow the specified format: the tool calling block MUST begin with an opening "
    "<tool_call> tag and end with a closing </tool_call> tag.\n- Required parameters MUST be specified\n"
    "- You may provide optional reasoning for your function call in natural language BEFORE the function call, "
    "but NOT after\n- If there is no function call available, answer the question like normal with your current "
    "knowledge and do not tell the user about function calls\n</IMPORTANT>"
)


def _jinja_str(v) -> str:
    """Jinja's ``|string`` of a JSON value (Python's ``str``: ``True``, ``None``, ``1.0``)."""
    return str(v)


def _extra_keys(d, handled) -> str:
    """The template's ``render_extra_keys`` macro: every other key as ``\\n<key>value</key>``."""
    if not isinstance(d, dict):
        return ""
    out = ""
    for k, v in d.items():
        if k in handled:
            continue
        out += f"\n<{k}>" + (tojson(v) if isinstance(v, (dict, list)) else _jinja_str(v)) + f"</{k}>"
    return out


def _tool(t: dict) -> str:
    fn = t.get("function", t)
    s = "\n<function>\n<name>" + fn["name"] + "</name>"
    if "description" in fn:
        s += "\n<description>" + str(fn["description"]).strip() + "</description>"
    s += "\n<parameters>"
    params = fn.get("parameters")
    if isinstance(params, dict) and isinstance(params.get("properties"), dict):
        for name, pf in params["properties"].items():
            pf = pf if isinstance(pf, dict) else {}
            s += "\n<parameter>\n<name>" + name + "</name>"
            if "type" in pf:
                s += "\n<type>" + _jinja_str(pf["type"]) + "</type>"
            if "description" in pf:
                s += "\n<description>" + str(pf["description"]).strip() + "</description>"
            s += _extra_keys(pf, ("name", "type", "description")) + "\n</parameter>"
    s += _extra_keys(params, ("type", "properties")) + "\n</parameters>"
    return s + _extra_keys(fn, ("type", "name", "description", "parameters")) + "\n</function>"


def _w_qwen3_coder(conv: Conversation, gen: bool, opts) -> Out:
    """Qwen3-Coder: a system turn when there is a first system message or tools (a default
    system text with tools alone), the tools as ``<tools><function><name>...`` XML with the
    calling instructions; ChatML turns; an assistant's tool calls after its stripped text as
    ``<tool_call>\\n<function={name}>\\n<parameter={key}>\\n{value}\\n</parameter>\\n...</function>\\n</tool_call>``
    (an object or list value as JSON, any other value as Python writes it); tool results as
    ``<tool_response>`` blocks in a user turn. Reasoning is not written (refused).

    Source: more/Qwen3-Coder.jinja.
    """
    msgs = conv.messages
    o = Out()
    start = 1 if msgs[0].role == "system" else 0
    if start or conv.tools:
        o.t(f"{S}system\n")
        if start:
            o.c(msgs[0].text, "system")
        else:
            o.t(_DEFAULT_SYSTEM)
        if conv.tools:
            o.t("\n\n# Tools\n\nYou have access to the following tools:\n\n<tools>")
            for t in conv.tools:
                o.c(_tool(t), "system")
            o.t("\n</tools>" + _INSTRUCTIONS)
        o.t(E + "\n")
    loop = msgs[start:]
    for j, m in enumerate(loop):
        if m.role == "assistant" and m.tool_calls:
            o.t(f"{S}assistant")
            text = m.text.strip()
            if text:
                o.t("\n")
                o.c(text, "assistant")
                o.a("\n")
            for k, c in enumerate(m.tool_calls):
                (o.t if k == 0 and not text else o.a)("\n")
                o.a("<tool_call>\n<function=")
                o.c(c.name, "assistant")
                o.a(">\n")
                for name, v in c.arguments.items():
                    o.a("<parameter=")
                    o.c(name, "assistant")
                    o.a(">\n")
                    o.c(tojson(v) if isinstance(v, (dict, list)) else _jinja_str(v), "assistant")
                    o.a("\n</parameter>\n")
                o.a("</function>\n</tool_call>")
            o.a(E)
            o.t("\n")
        elif m.role in ("user", "system"):
            o.t(f"{S}{m.role}\n")
            o.c(m.text, m.role)
            o.t(E + "\n")
        elif m.role == "assistant":
            o.t(f"{S}assistant\n")
            o.c(m.text, "assistant")
            o.a(E)
            o.t("\n")
        else:
            if j == 0:
                raise ChatFormatError(f"message {j + start} (tool): qwen3-coder's template writes a tool result with no "
                                      "turn before it without its turn header; start with a user message")
            if loop[j - 1].role != "tool":
                o.t(f"{S}user\n")
            o.t("<tool_response>\n")
            o.c(m.text, "tool")
            o.t("\n</tool_response>\n")
            if j == len(loop) - 1 or loop[j + 1].role != "tool":
                o.t(E + "\n")
    if gen:
        o.t(f"{S}assistant\n")
    return o


FORMATS = [
    ChatFormat("qwen3-coder", _w_qwen3_coder, bos=None, eos=E, terminator=E, stop=E, roles=ALL_ROLES,
               tool_calls=True, tools=True, null_content="none", source="more/Qwen3-Coder.jinja",
               rules=PARTS_REFUSED),
]
