"""ChatML family: ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` and the templates built on it.

Formats: ``chatml`` (plain), ``qwen2``, ``smollm2`` (a default system turn), ``qwen2.5``
(default system, tools, tool calls), ``qwen3`` (reasoning, tools, tool calls), ``smollm3``
(reasoning mode in the system turn), ``hermes`` (Hermes 3 tool use).

Worked example (``qwen3``, ``[user "Hi", assistant reasoning "r" content "Hello"]``)::

    <|im_start|>user\\nHi<|im_end|>\\n          template + user text      mask 0
    <|im_start|>assistant\\n                    template (= generation prompt)   0
    <think>\\nr\\n</think>\\n\\n               reasoning                  1 if reasoning trained
    Hello<|im_end|>                           assistant                  1
    \\n                                       template                   0
"""

from __future__ import annotations

from ..errors import ChatFormatError
from .base import ALL_ROLES, PARTS_REFUSED, ChatFormat
from .messages import Conversation
from .segments import Out, tojson

__all__ = ["FORMATS"]

S, E = "<|im_start|>", "<|im_end|>"


def _turn(o: Out, m, kind: str | None = None) -> None:
    """``<|im_start|>{role}\\n{content}<|im_end|>\\n``; an assistant's text and terminator trainable."""
    kind = kind or m.role
    o.t(f"{S}{m.role}\n")
    if kind == "assistant":
        o.c(m.text, "assistant")
        o.a(E)
        o.t("\n")
    else:
        o.c(m.text, kind)
        o.t(E + "\n")


def _plain(default_system: str | None):
    def writer(conv: Conversation, gen: bool, opts) -> Out:
        msgs = conv.messages
        o = Out()
        if default_system is not None and msgs[0].role != "system":
            o.t(f"{S}system\n{default_system}{E}\n")
        for m in msgs:
            _turn(o, m)
        if gen:
            o.t(f"{S}assistant\n")
        return o

    return writer


_QWEN25_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
_QWEN_TOOLS_HEAD = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
_QWEN_TOOLS_TAIL = ("\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                    "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
                    "\"arguments\": <args-json-object>}\n</tool_call>" + E + "\n")


def _qwen_tools(o: Out, conv: Conversation) -> None:
    o.t(_QWEN_TOOLS_HEAD)
    for t in conv.tools:
        o.t("\n")
        o.c(tojson(t), "system")
    o.t(_QWEN_TOOLS_TAIL)


def _qwen_call(o: Out, c) -> None:
    o.a('<tool_call>\n{"name": "')
    o.c(c.name, "assistant")
    o.a('", "arguments": ')
    o.c(tojson(c.arguments), "assistant")
    o.a("}\n</tool_call>")


def _qwen_tool_results(o: Out, msgs, i: int) -> None:
    """A run of tool messages as one user turn of ``<tool_response>`` blocks (Qwen2.5/Qwen3)."""
    if i == 0 or msgs[i - 1].role != "tool":
        o.t(f"{S}user")
    o.t("\n<tool_response>\n")
    o.c(msgs[i].text, "tool")
    o.t("\n</tool_response>")
    if i == len(msgs) - 1 or msgs[i + 1].role != "tool":
        o.t(E + "\n")


def _w_qwen25(conv: Conversation, gen: bool, opts) -> Out:
    """Qwen2.5: a system turn always (the default one when the first message is not a system
    message), holding the tool signatures when there are tools; later system messages are
    turns of their own; an assistant's tool calls follow its text as
    ``\\n<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>``; tool results are a
    user turn of ``<tool_response>`` blocks.

    Source: qwen2.5.jinja = Qwen/Qwen2.5-7B-Instruct.
    """
    msgs = conv.messages
    o = Out()
    first_system = msgs[0].role == "system"
    o.t(f"{S}system\n")
    if first_system:
        o.c(msgs[0].text, "system")
    else:
        o.t(_QWEN25_SYSTEM)
    if conv.tools:
        o.t("\n\n")
        _qwen_tools(o, conv)
    else:
        o.t(E + "\n")
    for i, m in enumerate(msgs):
        if m.role == "system" and i == 0:
            continue
        if m.role in ("user", "system") or (m.role == "assistant" and not m.tool_calls):
            _turn(o, m)
        elif m.role == "assistant":
            o.t(f"{S}assistant")
            if m.text:
                o.t("\n")
                o.c(m.text, "assistant")
                for c in m.tool_calls:
                    o.a("\n")
                    _qwen_call(o, c)
            else:
                for k, c in enumerate(m.tool_calls):
                    (o.t if k == 0 else o.a)("\n")
                    _qwen_call(o, c)
            o.a(E)
            o.t("\n")
        else:
            _qwen_tool_results(o, msgs, i)
    if gen:
        o.t(f"{S}assistant\n")
    return o


def _is_tool_response(text: str) -> bool:
    return text.startswith("<tool_response>") and text.endswith("</tool_response>")


def _qwen3_split(m, i: int) -> tuple[str, str]:
    """(content, reasoning) as Qwen3's template reads them: ``reasoning_content`` when given,
    else the text after the last ``</think>`` of the content (the answer) and the text between
    the last ``<think>`` before the first ``</think>`` and that ``</think>`` (the reasoning).

    Raises:
        ChatFormatError: message ``i``'s content holds text the template drops, outside both:
            before that ``<think>`` (``"Pre <think>X</think> Ans"`` loses ``Pre``) or between two
            ``</think>`` (explorer8 E4; jinja2 render of more/Qwen-Qwen3-0.6B.jinja). Whitespace
            alone is not text here; a row reject in the sft run.
    """
    content = m.text
    if m.reasoning is not None:
        return content, m.reasoning
    if "</think>" in content:
        parts = content.split("</think>")
        head = parts[0].rstrip("\n")
        before = head.rsplit("<think>", 1)[0] if "<think>" in head else ""
        lost = (before + "".join(parts[1:-1])).replace("<think>", "")
        if lost.strip():
            where = "before its <think>" if before.replace("<think>", "").strip() else "between two </think>"
            shown = (before if where.startswith("before") else "".join(parts[1:-1])).strip()
            raise ChatFormatError(
                f"message {i} (assistant): its content holds text {where} ({shown[:40]!r}{'...' if len(shown) > 40 else ''}), "
                "which qwen3's template drops (it keeps the text after the last </think> as the answer and the "
                "text in the think block before the first </think> as reasoning), so it would be lost from the "
                "training text: move it into the answer or the think block, or give reasoning_content")
        return parts[-1].lstrip("\n"), head.split("<think>")[-1].lstrip("\n")
    return content, ""


def _w_qwen3(conv: Conversation, gen: bool, opts) -> Out:
    """Qwen3: as Qwen2.5 without a default system turn, plus reasoning: an assistant turn after
    the last real user query (a user turn that is not only a ``<tool_response>``) is written
    ``<think>\\n{reasoning}\\n</think>\\n\\n{content}`` when it is the last message or has a
    reasoning; earlier turns lose their reasoning (``reasoning_content`` or the
    ``<think>...</think>`` part of the content), as the template drops it from history: such
    turns are counted (``reasoning_dropped``). ``enable_thinking=False`` ends the generation
    prompt with an empty think block, so an answer written with that empty block (the last
    one, without reasoning) is trained from after it: the block is template text, as in the
    prefix renders (``...assistant\n<think>\n\n</think>\n\n`` is the generation prompt).
    Training it would teach the model to write the empty block, i.e. to skip thinking, by
    itself. An answer with reasoning starts its own think block: reasoning as ever. With
    thinking on, the answers written without a think block (history turns, and calls before the
    last answer without reasoning) are trained as the template writes them and counted
    (``answers_without_think``): after ``assistant\n``, where the model answers with a think
    block, they teach it to answer without one.

    Source: more/Qwen-Qwen3-0.6B.jinja (Qwen3 0.6B...32B share it).
    """
    msgs = conv.messages
    o = Out()
    no_think = opts.get("enable_thinking") is False
    first_system = msgs[0].role == "system"
    if conv.tools:
        o.t(f"{S}system\n")
        if first_system:
            o.c(msgs[0].text, "system")
            o.t("\n\n")
        _qwen_tools(o, conv)
    elif first_system:
        o.t(f"{S}system\n")
        o.c(msgs[0].text, "system")
        o.t(E + "\n")
    last_query = len(msgs) - 1
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i].role == "user" and not _is_tool_response(msgs[i].text):
            last_query = i
            break
    for i, m in enumerate(msgs):
        if m.role == "user" or (m.role == "system" and i > 0):
            _turn(o, m)
        elif m.role == "assistant":
            content, reasoning = _qwen3_split(m, i)
            o.t(f"{S}assistant\n")
            if i > last_query and (i == len(msgs) - 1 or reasoning):
                if no_think and not reasoning.strip("\n"):
                    # the empty think block is the end of the generation prompt: template text
                    o.t("<think>\n\n</think>\n\n")
                else:
                    o.t("<think>\n", "reasoning")
                    o.c(reasoning.strip("\n"), "reasoning")
                    o.t("\n</think>\n\n", "reasoning")
                o.c(content.lstrip("\n"), "assistant")
            else:
                if reasoning:
                    o.note("reasoning_dropped")
                if not no_think:  # trained with no think block after a prompt the model answers with one
                    o.note("answers_without_think")
                o.c(content, "assistant")
            for k, c in enumerate(m.tool_calls):
                if k > 0 or content:
                    o.a("\n")
                _qwen_call(o, c)
            o.a(E)
            o.t("\n")
        elif m.role == "tool":
            _qwen_tool_results(o, msgs, i)
    if gen:
        o.t(f"{S}assistant\n")
        if no_think:
            o.t("<think>\n\n</think>\n\n")
    return o


_SMOL3_THINK = (
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant involves "
    "thoroughly exploring questions through a systematic thinking process before providing the final precise and "
    "accurate solutions. This requires engaging in a comprehensive cycle of analysis, summarizing, exploration, "
    "reassessment, reflection, backtracking, and iteration to develop well-considered thinking process. Please "
    "structure your response into two main sections: Thought and Solution using the specified format: <think> "
    "Thought section </think> Solution section. In the Thought section, detail your reasoning process in steps. "
    "Each step should include detailed considerations such as analysing questions, summarizing relevant findings, "
    "brainstorming new ideas, verifying the accuracy of the current steps, refining any errors, and revisiting "
    "previous steps. In the Solution section, based on various attempts, explorations, and reflections from the "
    "Thought section, systematically present the final solution that you deem correct. The Solution section should "
    "be logical, accurate, and concise and detail necessary steps needed to reach the conclusion.\n\n"
)
_SMOL3_NO_THINK = "You are a helpful AI assistant named SmolLM, trained by Hugging Face.\n\n"


def _w_smollm3(conv: Conversation, gen: bool, opts) -> Out:
    """SmolLM3: one system turn always (metadata, the reasoning mode ``/think`` or
    ``/no_think``, then the first system message's text with those words removed, or a
    default); ``/no_think`` writes an empty think block before every answer (part of the
    generation prompt, so template text). A system message after the first is refused (the
    template drops it); tool results are user turns. SmolLM3 writes its reasoning into the
    answer (the template has no reasoning field): a content that starts with
    ``<think>…</think>`` (after leading newlines, which the template strips) has that block,
    with the whitespace after it, written as reasoning (left out of the mask with
    ``train_on_reasoning`` off); the text is unchanged. A content given as a list of text
    parts is refused: the template writes a content that is not a string as ``""``
    (``message.content if message.content is string else ""``, also in SmolLM3-3B's own
    template on the Hub), so joining the parts would write what the model's template never
    does and following it would train an empty turn.

    Source: more/HuggingFaceTB-SmolLM3-3B.jinja (Unsloth's edit of SmolLM3-3B's template).
    """
    msgs = conv.messages
    for i, m in enumerate(msgs):
        if m.parts is not None:
            raise ChatFormatError(f"message {i} ({m.role}): its content is a list of text parts, which smollm3's "
                                  'template writes as "" (it keeps string contents only), losing the text; give '
                                  "the content as one string")
    mode = "/think" if opts.get("enable_thinking", True) is not False else "/no_think"
    custom = ""
    if msgs[0].role == "system":
        sm = msgs[0].text
        if "/no_think" in sm:
            mode = "/no_think"
        elif "/think" in sm:
            mode = "/think"
        custom = sm.replace("/no_think", "").replace("/think", "").rstrip()
    for i, m in enumerate(msgs):
        if m.role == "system" and i > 0:
            raise ChatFormatError(f"message {i} (system): smollm3's template writes only a first system message "
                                  "(it would drop this one); merge it into the first")
    o = Out()
    o.t(f"{S}system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: {mode}\n\n"
        "## Custom Instructions\n\n")
    if custom:
        o.c(custom, "system")
        o.t("\n\n")
    else:
        o.t(_SMOL3_THINK if mode == "/think" else _SMOL3_NO_THINK)
    o.t(E + "\n")
    for m in msgs:
        if m.role == "user":
            _turn(o, m)
        elif m.role == "tool":
            o.t(f"{S}user\n")
            o.c(m.text, "tool")
            o.t(E + "\n")
        elif m.role == "assistant":
            o.t(f"{S}assistant\n" + ("" if mode == "/think" else "<think>\n\n</think>\n"))
            text = m.text.lstrip("\n")
            k = text.find("</think>") if text.startswith("<think>") else -1
            if k >= 0:  # the model's reasoning, as SmolLM3 writes it: reasoning (train_on_reasoning)
                k += len("</think>")
                k += len(text[k:]) - len(text[k:].lstrip())
                o.c(text[:k], "reasoning")
                text = text[k:]
            o.c(text, "assistant")
            o.a(E)
            o.t("\n")
    if gen:
        o.t(f"{S}assistant\n" + ("" if mode == "/think" else "<think>\n\n</think>\n"))
    return o


_HERMES_HEAD = ("You are a function calling AI model. You are provided with function signatures within <tools></tools> "
                "XML tags. You may call one or more functions to assist with the user query. Don't make assumptions "
                "about what values to plug into functions. Here are the available tools: <tools> ")
_HERMES_TAIL = (' </tools>Use the following pydantic model json schema for each tool call you will make: '
                '{"properties": {"name": {"title": "Name", "type": "string"}, "arguments": {"title": "Arguments", '
                '"type": "object"}}, "required": ["name", "arguments"], "title": "FunctionCall", "type": "object"}}\n'
                "For each function call return a json object with function name and arguments within "
                "<tool_call></tool_call> XML tags as follows:\n<tool_call>\n"
                '{"name": <function-name>, "arguments": <args-dict>}\n</tool_call>' + E + "\n")
_PY_TYPES = {"string": "str", "number": "float", "integer": "int", "boolean": "bool"}


def _py_type(spec) -> str:
    """Hermes' ``json_to_python_type`` macro, quirks included: an array is ``list[Union[]]``
    (the macro passes ``spec|items``, an iterator, to itself), a type string it does not know
    is iterated character by character."""
    t = spec.get("type") if isinstance(spec, dict) else None
    if isinstance(t, str) and t in _PY_TYPES:
        return _PY_TYPES[t]
    if not isinstance(spec, dict):
        return "Union[]"  # an items() iterator: every lookup undefined, and undefined iterates as empty
    if t == "array":
        return "list[" + _py_type(None) + "]"
    if t == "object":
        if "additionalProperties" in spec:
            return "dict[str, " + _py_type(spec["additionalProperties"]) + "]"
        return "dict"
    if t is None:
        return "Union[]"
    if isinstance(t, str) or (isinstance(t, list) and not all(isinstance(x, str) and x in _PY_TYPES for x in t)):
        raise ChatFormatError(f"tools: hermes's template cannot write the JSON schema type {t!r} (its "
                              "json_to_python_type macro recurses without end on it)")
    if isinstance(t, list):
        return "Union[" + ",".join(_PY_TYPES[x] for x in t) + "]"
    return "Any"


def _hermes_tool(t: dict) -> str:
    fn = t.get("function", t)
    params = fn.get("parameters")
    if not isinstance(params, dict) or not isinstance(params.get("properties"), dict) or not isinstance(
            fn.get("description"), str):
        raise ChatFormatError(f"tools: hermes's template needs a description and parameters.properties for every "
                              f"function ({fn.get('name')!r} lacks one)")
    props = params["properties"]
    s = '{"type": "function", "function": {"name": "' + fn["name"] + '", "description": "' + fn["name"] + "("
    s += ", ".join(f"{k}: {_py_type(v)}" for k, v in props.items()) + ")"
    if "return" in fn:
        s += " -> " + _py_type(fn["return"])
    s += " - " + fn["description"] + "\n\n"
    for k, (name, v) in enumerate(props.items()):
        if k == 0:
            s += "    Args:\n"
        desc = v.get("description", "") if isinstance(v, dict) else ""
        s += "        " + name + "(" + _py_type(v) + "): " + str(desc).strip()
    ret = fn.get("return")
    if isinstance(ret, dict) and "description" in ret:
        s += "\n    Returns:\n        " + str(ret["description"])
    s += '", "parameters": ' + ("{}" if not props else tojson(params)) + "}"
    return s


def _w_hermes(conv: Conversation, gen: bool, opts) -> Out:
    """Hermes 3 tool use: BOS, a fixed system turn listing the tools (each with a Python-style
    signature), then ChatML turns; an assistant's tool calls are its whole turn (its text
    would be dropped: refused), tool results are ``<tool_response>`` blocks in a ``tool`` turn
    whose ``<|im_end|>`` has no newline after it. The template needs ``tools``.

    Source: more/NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja.
    """
    msgs = conv.messages
    if not conv.tools:
        raise ChatFormatError("tools: hermes is Hermes 3's tool-use template, which needs tools; use chatml for "
                              "conversations without tools")
    o = Out()
    o.t("<|begin_of_text|>" + f"{S}system\n" + _HERMES_HEAD)
    for k, t in enumerate(conv.tools):
        o.c(_hermes_tool(t), "system")
        if k < len(conv.tools) - 1:
            o.t("\n")
    o.t(_HERMES_TAIL)
    n = len(msgs)
    for i, m in enumerate(msgs):
        if m.role in ("user", "system") or (m.role == "assistant" and not m.tool_calls):
            _turn(o, m)
        elif m.role == "assistant":
            if m.text:
                raise ChatFormatError(f"message {i} (assistant): hermes's template writes only the tool calls of a "
                                      "message that has them (its text would be dropped); move the text to its own "
                                      "assistant message")
            o.t(f"{S}assistant")
            for k, c in enumerate(m.tool_calls):
                (o.t if k == 0 else o.a)("\n")  # the first newline is the generation prompt's
                o.a("<tool_call>\n")
                o.a('{"name": "')
                o.c(c.name, "assistant")
                o.a('", "arguments": ')
                o.c(tojson(c.arguments), "assistant")
                o.a("}\n</tool_call>")
            o.a(E)
            o.t("\n")
        else:
            if i == 0:
                raise ChatFormatError("message 0 (tool): hermes's template writes a first tool message without its "
                                      "turn header; a conversation cannot start with a tool result")
            if msgs[i - 1].role != "tool":
                o.t(f"{S}tool\n")
            o.t("<tool_response>\n")
            o.c(m.text, "tool")
            o.t("\n</tool_response>\n" if i < n - 1 else "\n</tool_response>")
            if i == n - 1 or msgs[i + 1].role != "tool":
                o.t(E)
    if gen:
        o.t(f"{S}assistant\n")
    return o


def _f(name, writer, source, **kw) -> ChatFormat:
    return ChatFormat(name=name, writer=writer, bos=kw.pop("bos", None), eos=kw.pop("eos", E), terminator=E, stop=E,
                      source=source, **kw)


FORMATS = [
    _f("chatml", _plain(None), "chatml-openhermes.jinja (teknium/OpenHermes-2.5-Mistral-7B)", roles=ALL_ROLES,
       rules=PARTS_REFUSED),
    _f("qwen2", _plain("You are a helpful assistant."), "qwen2.jinja (Qwen/Qwen2-0.5B-Instruct)", roles=ALL_ROLES,
       rules=PARTS_REFUSED),
    _f("smollm2", _plain("You are a helpful AI assistant named SmolLM, trained by Hugging Face"),
       "smollm2.jinja (HuggingFaceTB/SmolLM2-135M-Instruct)", roles=ALL_ROLES, bos="<|im_start|>", rules=PARTS_REFUSED),
    _f("qwen2.5", _w_qwen25, "qwen2.5.jinja = more/Qwen-Qwen2.5-7B-Instruct.jinja", roles=ALL_ROLES, tool_calls=True,
       tools=True, null_content="none", rules=PARTS_REFUSED),
    _f("qwen3", _w_qwen3, "more/Qwen-Qwen3-0.6B.jinja", roles=ALL_ROLES, reasoning=True, tool_calls=True, tools=True,
       reasoning_keys=("reasoning_content",),
       options={"enable_thinking": None}, template_vars=frozenset({"enable_thinking"}),
       probe_options=({"enable_thinking": False},), rules=PARTS_REFUSED),
    _f("smollm3", _w_smollm3, "more/HuggingFaceTB-SmolLM3-3B.jinja", roles=ALL_ROLES, reasoning_in_content=True,
       parts="refused",
       options={"enable_thinking": None}, template_vars=frozenset({"enable_thinking"}),
       probe_options=({"enable_thinking": False},)),
    _f("hermes", _w_hermes, "more/NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", roles=ALL_ROLES,
       tool_calls=True, tools=True, bos="<|begin_of_text|>", core_probes=("tools_no_system", "tool_call"),
       rules=PARTS_REFUSED),
]
