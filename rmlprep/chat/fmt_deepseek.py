"""DeepSeek family: DeepSeek LLM / V2 (``User:``), V3, R1 distills, V3.1 (``<｜User｜>``).

The R1 and V3.1 templates drop an answer's reasoning (the text up to ``</think>``) from every
assistant turn. In an earlier turn that is the model's history rule and is followed (counted
as ``reasoning_dropped``); a reasoning in the conversation's last answer would be lost from
the training text, so such a conversation is refused.

Worked example (``deepseek-v3.1``, ``[user "Hi", assistant "Hello"]``)::

    <｜begin▁of▁sentence｜><｜User｜>Hi               template + user   mask 0
    <｜Assistant｜><think></think>                  template (generation prompt)   0
    Hello<｜end▁of▁sentence｜>                        assistant         1
"""

from __future__ import annotations

from ..errors import ChatFormatError
from .base import PARTS_REFUSED, ChatFormat, lose_reasoning
from .messages import Conversation
from .segments import Out, tojson

__all__ = ["FORMATS"]

BOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"  # <｜begin▁of▁sentence｜>
EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"  # <｜end▁of▁sentence｜>
USER = "<\uff5cUser\uff5c>"
ASSISTANT = "<\uff5cAssistant\uff5c>"
CALLS_BEGIN = "<\uff5ctool\u2581calls\u2581begin\uff5c>"
CALLS_END = "<\uff5ctool\u2581calls\u2581end\uff5c>"
CALL_BEGIN = "<\uff5ctool\u2581call\u2581begin\uff5c>"
CALL_END = "<\uff5ctool\u2581call\u2581end\uff5c>"
SEP = "<\uff5ctool\u2581sep\uff5c>"
OUT_BEGIN = "<\uff5ctool\u2581output\u2581begin\uff5c>"
OUT_END = "<\uff5ctool\u2581output\u2581end\uff5c>"


def _after_think(text: str, first: bool) -> tuple[str, bool]:
    """(the text after the first (``first``) or last ``</think>``, as the template keeps it;
    whether a reasoning was cut off with what went before)."""
    if "</think>" not in text:
        return text, False
    kept = text.split("</think>", 1)[1] if first else text.split("</think>")[-1]
    lost = text[: len(text) - len(kept)]
    return kept, bool(lost.replace("<think>", "").replace("</think>", "").strip())


def _systems(o: Out, msgs, *, only_one: str | None) -> None:
    systems = [i for i, m in enumerate(msgs) if m.role == "system"]
    if only_one and len(systems) > 1:
        raise ChatFormatError(f"message {systems[1]} is a second system message (first at {systems[0]}); "
                              f"{only_one}'s template keeps only the last system prompt: merge them")
    for k, i in enumerate(systems):
        if k:
            o.t("\n\n")
        o.c(msgs[i].text, "system")


def _w_deepseek3(conv: Conversation, gen: bool, opts) -> Out:
    """DeepSeek V3: BOS, all system messages first, joined by ``\\n\\n``; then ``<｜User｜>{user}``,
    ``<｜Assistant｜>{answer}<｜end▁of▁sentence｜>``; generation prompt ``<｜Assistant｜>``. Tool calls
    are refused (the template's tool-call branch loses the closing token of a single call and
    the header of a second tool-call message).

    Source: deepseek-v3.jinja (deepseek-ai/DeepSeek-V3).
    """
    msgs = conv.messages
    o = Out()
    o.t(BOS)
    _systems(o, msgs, only_one=None)
    for m in msgs:
        if m.role == "user":
            o.t(USER)
            o.c(m.text, "user")
        elif m.role == "assistant":
            o.t(ASSISTANT)
            o.c(m.text, "assistant")
            o.a(EOS)
    if gen:
        o.t(ASSISTANT)
    return o


def _r1(llamacpp: bool):
    name = "deepseek-r1-llamacpp" if llamacpp else "deepseek-r1"

    def writer(conv: Conversation, gen: bool, opts) -> Out:
        msgs = conv.messages
        thinks = not llamacpp or bool(opts.get("enable_thinking"))  # the generation prompt leaves <think> open
        o = Out()
        o.t(BOS)
        _systems(o, msgs, only_one=name)
        for i, m in enumerate(msgs):
            if m.role == "user":
                o.t(USER)
                o.c(m.text, "user")
            elif m.role == "assistant":
                text, lost = _after_think(m.text, first=False)
                if lost or m.reasoning:
                    lose_reasoning(o, msgs, i, name)
                if thinks:  # written with no think block, where the generation prompt opens one
                    o.note("answers_without_think")
                o.t(ASSISTANT)
                o.c(text, "assistant")
                o.a(EOS)
        if gen:
            o.t(ASSISTANT + "<think>\n")
            if llamacpp and not opts.get("enable_thinking"):
                o.t("</think>")
        return o

    writer.__doc__ = f"""DeepSeek-R1 distills{' (llama.cpp copy)' if llamacpp else ''}: BOS, the system message first
    (one at most: the template keeps only the last), ``<｜User｜>{{user}}``,
    ``<｜Assistant｜>{{text after the last </think>}}<｜end▁of▁sentence｜>`` (see the module
    docstring on reasoning); generation prompt ``<｜Assistant｜><think>\\n``{''' then ``</think>``
    unless ``enable_thinking``''' if llamacpp else ''}. Tool calls are refused. Every answer, the last
    too, is written with no think block where the generation prompt opens one{''' (with
    ``enable_thinking``)''' if llamacpp else ''}: counted (``answers_without_think``).

    Source: {'more/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja (llama.cpp' + "'" + 's edited copy)' if llamacpp
             else 'deepseek-r1-distill-qwen.jinja (deepseek-ai/DeepSeek-R1-Distill-Qwen-32B)'}.
    """
    return writer


def _w_deepseek31(conv: Conversation, gen: bool, opts) -> Out:
    """DeepSeek V3.1: BOS, all system messages first (joined by ``\\n\\n``), ``<｜User｜>{user}``;
    an answer right after a user message opens with ``<｜Assistant｜><think></think>``, its
    text is what follows its first ``</think>`` (see the module docstring), then
    ``<｜end▁of▁sentence｜>``; tool calls ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{name}<｜tool▁sep｜>
    {arguments}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜><｜end▁of▁sentence｜>`` after the message's
    text; tool results ``<｜tool▁output▁begin｜>{content}<｜tool▁output▁end｜>``, and the answer after
    them is written as is. The generation prompt (only after a user message) is
    ``<｜Assistant｜><think></think>``, or ``<｜Assistant｜><think>`` with ``enable_thinking``.
    Tool definitions are not part of the template (refused). With ``enable_thinking`` every answer
    (and call) after a user message is trained as ``</think>`` right after the prompt's ``<think>``:
    an empty reasoning, counted (``answers_without_think``).

    Source: more/deepseek-ai-DeepSeek-V3.1.jinja.
    """
    msgs = conv.messages
    think = bool(opts.get("enable_thinking"))
    o = Out()
    o.t(BOS)
    _systems(o, msgs, only_one=None)
    is_tool = last_user = False

    def header() -> None:
        if think:  # the reasoning is dropped: an empty one trained where the prompt opens it
            o.note("answers_without_think")
            o.t(ASSISTANT + "<think>")
            o.a("</think>")
        else:
            o.t(ASSISTANT + "<think></think>")

    for i, m in enumerate(msgs):
        if m.role == "user":
            is_tool, last_user = False, True
            o.t(USER)
            o.c(m.text, "user")
        elif m.role == "assistant" and m.tool_calls:
            if m.reasoning:
                lose_reasoning(o, msgs, i, "deepseek-v3.1")
            if last_user:
                header()
            last_user = is_tool = False
            o.c(m.text, "assistant")
            for k, c in enumerate(m.tool_calls):
                o.a((CALLS_BEGIN if k == 0 else "") + CALL_BEGIN)
                o.c(c.name, "assistant")
                o.a(SEP)
                o.c(tojson(c.arguments), "assistant")
                o.a(CALL_END)
            o.a(CALLS_END + EOS)
        elif m.role == "assistant":
            if last_user:
                header()
            last_user = False
            if is_tool:
                if m.reasoning:
                    lose_reasoning(o, msgs, i, "deepseek-v3.1")
                o.c(m.text, "assistant")
                is_tool = False
            else:
                text, lost = _after_think(m.text, first=True)
                if lost or m.reasoning:
                    lose_reasoning(o, msgs, i, "deepseek-v3.1")
                o.c(text, "assistant")
            o.a(EOS)
        elif m.role == "tool":
            last_user, is_tool = False, True
            o.t(OUT_BEGIN)
            o.c(m.text, "tool")
            o.t(OUT_END)
    if gen and last_user and not is_tool:
        o.t(ASSISTANT + ("<think>" if think else "<think></think>"))
    return o


def _w_deepseek_llm(conv: Conversation, gen: bool, opts) -> Out:
    """DeepSeek LLM / V2 chat: BOS, ``{system}\\n\\n``, ``User: {user}\\n\\n``,
    ``Assistant: {answer}<｜end▁of▁sentence｜>``; generation prompt ``Assistant:`` (so the space
    after it is the answer's). Any order of roles.

    Source: deepseek-llm.jinja (deepseek-ai/deepseek-llm-7b-chat).
    """
    o = Out()
    o.t(BOS)
    for m in conv.messages:
        if m.role == "user":
            o.t("User: ")
            o.c(m.text, "user")
            o.t("\n\n")
        elif m.role == "assistant":
            o.t("Assistant:")
            o.a(" ")
            o.c(m.text, "assistant")
            o.a(EOS)
        else:
            o.c(m.text, "system")
            o.t("\n\n")
    if gen:
        o.t("Assistant:")
    return o


def _f(name, writer, source, **kw) -> ChatFormat:
    return ChatFormat(name=name, writer=writer, bos=BOS, eos=EOS, terminator=EOS, stop=EOS, source=source, **kw)


FORMATS = [
    _f("deepseek-llm", _w_deepseek_llm, "deepseek-llm.jinja", rules=PARTS_REFUSED),
    _f("deepseek3", _w_deepseek3, "deepseek-v3.jinja", tools_refused=(
        "its template (DeepSeek-V3's) writes tool turns wrongly (a lone tool call never gets "
        f"{CALLS_END}{EOS}; a later tool-call message or round of tool results loses its opening tokens; "
        "calls beside text are dropped); use deepseek-v3.1, whose template writes them, or drop the tool turns"), rules=PARTS_REFUSED),
    _f("deepseek-r1", _r1(False), "deepseek-r1-distill-qwen.jinja", reasoning=True, rules=PARTS_REFUSED),
    _f("deepseek-r1-llamacpp", _r1(True), "more/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", reasoning=True,
       options={"enable_thinking": None}, template_vars=frozenset({"enable_thinking"}),
       probe_options=({"enable_thinking": True},), rules=PARTS_REFUSED),
    _f("deepseek-v3.1", _w_deepseek31, "more/deepseek-ai-DeepSeek-V3.1.jinja", reasoning=True, tool_calls=True,
       roles=frozenset(("system", "user", "assistant", "tool")), options={"enable_thinking": None},
       template_vars=frozenset({"enable_thinking"}), probe_options=({"enable_thinking": True},), rules=PARTS_REFUSED),
]
