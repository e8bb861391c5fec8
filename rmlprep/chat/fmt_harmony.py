"""gpt-oss: OpenAI's harmony format (``<|start|>{role}<|channel|>...<|message|>...<|end|>``).

A system message of the template's own (model identity, knowledge cutoff, today's date, the
reasoning effort, the valid channels), then a developer message holding the conversation's
system message (``# Instructions``) and the tools as a TypeScript namespace. An answer is
written to the ``final`` channel, its reasoning (``thinking``/``reasoning_content``) to the
``analysis`` channel; a tool call is ``<|start|>assistant to=functions.{name}<|channel|>commentary
json<|message|>{arguments}<|call|>`` and its result ``<|start|>functions.{name}
to=assistant<|channel|>commentary<|message|>{JSON string}<|end|>``. The template keeps an
analysis only in the last answer (ended by ``<|return|>``) and before a tool call that no final
answer follows; elsewhere it is dropped (counted as ``reasoning_dropped``). So a final answer
before the last is written with no analysis, right after ``<|start|>assistant``, where the model
(prompted with that header) writes an analysis first: such answers are counted
(``answers_without_think``): they teach the model to answer without reasoning.

Worked example (``[user "Hi", assistant reasoning "r" content "Hello"]``, after the system turn)::

    <|start|>user<|message|>Hi<|end|>                template + user    mask 0
    <|start|>assistant                              template (generation prompt)   0
    <|channel|>analysis<|message|>r<|end|>          reasoning          1 if reasoning trained
    <|start|>assistant<|channel|>final<|message|>   assistant          1
    Hello<|return|>                                 assistant          1

Source: more/openai-gpt-oss-120b.jinja; openai-harmony (the format's reference library).
"""

from __future__ import annotations

from ..errors import ChatFormatError
from .base import PARTS_REFUSED, ChatFormat, lose_reasoning, today
from .messages import Conversation
from .segments import Out, tojson

__all__ = ["FORMATS"]

_SCALAR = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean"}


def _ts_type(spec, required, nullable: bool = False) -> str:
    """The template's ``render_typescript_type`` macro."""
    if not isinstance(spec, dict):
        return "any"
    t = spec.get("type")
    if t == "array":
        items = spec.get("items")
        if items:
            it = items.get("type") if isinstance(items, dict) else None
            if it in ("string", "number", "integer", "boolean"):
                s = _SCALAR[it] + "[]"
            else:
                inner = _ts_type(items, required)
                s = "any[]" if inner == "object | object" or len(inner) > 50 else inner + "[]"
        else:
            s = "any[]"
        return s + (" | null" if spec.get("nullable") else "")
    if isinstance(t, list) and t:
        return " | ".join(str(x) for x in t) if len(t) > 1 else str(t[0])
    if spec.get("oneOf"):
        variants = spec["oneOf"]
        if any(isinstance(v, dict) and v.get("type") == "object" for v in variants) and len(variants) > 1:
            return "any"
        s = ""
        for k, v in enumerate(variants):
            s += _ts_type(v, required)
            if isinstance(v, dict) and v.get("description"):
                s += "// " + v["description"]
            if isinstance(v, dict) and "default" in v:
                s += " " * 20 + "// default: " + tojson(v["default"])
            if k < len(variants) - 1:
                s += " | \n"
        return s
    if t == "string":
        if spec.get("enum"):
            return '"' + '" | "'.join(str(e) for e in spec["enum"]) + '"'
        return "string" + (" | null" if spec.get("nullable") else "")
    if t in ("number", "integer"):
        return "number"
    if t == "boolean":
        return "boolean"
    if t == "object":
        props = spec.get("properties")
        if props:
            req = spec.get("required") or []
            parts = []
            for name, ps in props.items():
                parts.append(name + ("" if name in req else "?") + ": " + "\n" + " " * 16 + _ts_type(ps, req))
            return "{\n" + ", ".join(parts) + "}"
        return "object"
    return "any"


def _namespace(tools) -> str:
    s = "## functions\n\nnamespace functions {\n\n"
    for t in tools:
        fn = t["function"]
        if not isinstance(fn.get("description"), str):
            raise ChatFormatError(f"tools: gpt-oss's template needs a description for every function "
                                  f"({fn.get('name')!r} has none)")
        s += "// " + fn["description"] + "\n" + "type " + fn["name"] + " = "
        params = fn.get("parameters")
        props = params.get("properties") if isinstance(params, dict) else None
        if props:
            req = params.get("required") or []
            s += "(_: {\n"
            for name, ps in props.items():
                ps = ps if isinstance(ps, dict) else {}
                if ps.get("description"):
                    s += "// " + str(ps["description"]) + "\n"
                s += name + ("" if name in req else "?") + ": " + _ts_type(ps, req)
                if "default" in ps:
                    if ps.get("enum") or ps.get("oneOf"):
                        if not isinstance(ps["default"], str):
                            raise ChatFormatError(f"tools: gpt-oss's template cannot write the default of {name!r} "
                                                  "(an enum or oneOf default must be a string)")
                        s += (", // default: " if ps.get("enum") else "// default: ") + ps["default"]
                    else:
                        s += ", // default: " + tojson(ps["default"])
                s += ",\n"
            s += "}) => any;\n\n"
        else:
            s += "() => any;\n\n"
    return s + "} // namespace functions"


def _channel_tags(text: str) -> bool:
    return "<|channel|>analysis<|message|>" in text or "<|channel|>final<|message|>" in text


def _w_gpt_oss(conv: Conversation, gen: bool, opts) -> Out:
    """gpt-oss (see the module docstring). Options: ``reasoning_effort`` (default "medium"),
    ``model_identity`` (an empty string writes an empty identity line, as the template does),
    ``today`` (the "Current date" line).

    Source: more/openai-gpt-oss-120b.jinja.
    """
    msgs = conv.messages
    o = Out()
    identity = opts.get("model_identity")  # "" is a value: the template tests `is not defined`
    if identity is None:
        identity = "You are ChatGPT, a large language model trained by OpenAI."
    o.t("<|start|>system<|message|>" + identity + "\nKnowledge cutoff: 2024-06\n"
        + f"Current date: {today(opts).isoformat()}\n\nReasoning: {opts.get('reasoning_effort') or 'medium'}\n\n"
        + "# Valid channels: analysis, commentary, final. Channel must be included for every message."
        + ("\nCalls to these tools must go to the commentary channel: 'functions'." if conv.tools else "")
        + "<|end|>")
    start = 1 if msgs[0].role == "system" else 0
    dev = msgs[0].text if start else ""
    if dev or conv.tools:
        o.t("<|start|>developer<|message|>")
        if dev:
            o.t("# Instructions\n\n")
            o.c(dev, "system")
            o.t("\n\n")
        if conv.tools:
            o.t("# Tools\n\n")
            o.c(_namespace(conv.tools), "system")
        o.t("<|end|>")
    loop = msgs[start:]
    last_call = None
    for j, m in enumerate(loop):
        i = j + start
        in_run = j > 0 and loop[j - 1].role == "assistant"  # the model writes this header itself
        head = (lambda text: o.a(text)) if in_run else (lambda text: o.t(text))
        if m.role == "assistant":
            if _channel_tags(m.text) or _channel_tags(m.reasoning or ""):
                raise ChatFormatError(f"message {i} (assistant): gpt-oss's template refuses <|channel|> tags in a "
                                      "message; give the analysis as reasoning_content and the final text as content")
            if m.tool_calls:
                if len(m.tool_calls) > 1:
                    raise ChatFormatError(f"message {i} (assistant): gpt-oss's template writes only the first tool "
                                          f"call of a message; got {len(m.tool_calls)}: one call per message")
                if m.text and m.reasoning:
                    raise ChatFormatError(f"message {i} (assistant): gpt-oss's template refuses both content and "
                                          "reasoning in a message with a tool call; give one")
                final_later = any(n.role == "assistant" and not n.tool_calls for n in loop[j + 1:])
                analysis = m.text or m.reasoning
                if analysis and final_later:
                    o.note("reasoning_dropped")
                elif analysis:
                    head("<|start|>assistant")
                    o.t("<|channel|>analysis<|message|>", "reasoning")
                    o.c(analysis, "reasoning")
                    o.t("<|end|>", "reasoning")
                    head = o.a
                c = m.tool_calls[0]
                head("<|start|>assistant")
                o.a(" to=functions.")
                o.c(c.name, "assistant")
                o.a("<|channel|>commentary json<|message|>")
                o.c(tojson(c.arguments), "assistant")
                o.a("<|call|>")
                last_call = c.name
            elif j == len(loop) - 1 and not gen:
                if m.reasoning is not None:
                    head("<|start|>assistant")
                    o.t("<|channel|>analysis<|message|>", "reasoning")
                    o.c(m.reasoning, "reasoning")
                    o.t("<|end|>", "reasoning")
                    head = o.a
                head("<|start|>assistant")
                o.a("<|channel|>final<|message|>")
                o.c(m.text, "assistant")
                o.a("<|return|>")
            else:
                if m.reasoning:
                    lose_reasoning(o, loop, j, "gpt-oss")
                o.note("answers_without_think")  # a history final: the model's turn opens with an analysis
                head("<|start|>assistant")
                o.a("<|channel|>final<|message|>")
                o.c(m.text, "assistant")
                o.a("<|end|>")
                last_call = None
        elif m.role == "tool":
            if last_call is None:
                raise ChatFormatError(f"message {i} (tool): gpt-oss's template needs a tool call before a tool "
                                      "result (it names the result by the last call)")
            o.t("<|start|>functions." + last_call + " to=assistant<|channel|>commentary<|message|>")
            o.c(tojson(m.text), "tool")
            o.t("<|end|>")
        elif m.role == "user":
            o.t("<|start|>user<|message|>")
            o.c(m.text, "user")
            o.t("<|end|>")
        else:
            raise ChatFormatError(f"message {i} (system): gpt-oss's template takes only a first system message "
                                  "(it would drop this one)")
    if gen:
        o.t("<|start|>assistant")
    return o


FORMATS = [
    ChatFormat("gpt-oss", _w_gpt_oss, bos=None, eos="<|return|>", terminator="<|return|>", stop="<|return|>",
               more_stops=("<|call|>",), not_stops=("<|end|>",),
               roles=frozenset(("system", "user", "assistant", "tool")), reasoning=True, reasoning_keys=("thinking",),
               tool_calls=True, tools=True,
               options={"reasoning_effort": None, "model_identity": None, "today": None},
               template_vars=frozenset({"reasoning_effort", "model_identity"}),
               probe_options=({"reasoning_effort": "high", "today": "2025-01-15"},),
               source="more/openai-gpt-oss-120b.jinja", rules=PARTS_REFUSED),
]
