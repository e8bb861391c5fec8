"""Phi-3 / Phi-3.5, Zephyr and Command-R.

Worked example (``phi3``, ``[user "Hi", assistant "Hello"]``)::

    <|user|>\\nHi<|end|>\\n        template + user    mask 0
    <|assistant|>\\n              template (generation prompt)   0
    Hello<|end|>                 assistant          1
    \\n<|endoftext|>              template           0
"""

from __future__ import annotations

from ..errors import ChatFormatError
from .base import PARTS_REFUSED, ChatFormat, alternate
from .messages import Conversation
from .segments import Out

__all__ = ["FORMATS"]


def _phi3(drop_empty_system: bool):
    def writer(conv: Conversation, gen: bool, opts) -> Out:
        o = Out()
        for m in conv.messages:
            if drop_empty_system and m.role == "system" and not m.text:
                continue
            o.t(f"<|{m.role}|>\n")
            if m.role == "assistant":
                o.c(m.text, "assistant")
                o.a("<|end|>")
                o.t("\n")
            else:
                o.c(m.text, m.role)
                o.t("<|end|>\n")
        o.t("<|assistant|>\n" if gen else "<|endoftext|>")
        return o

    writer.__doc__ = f"""Phi-3{'.5' if drop_empty_system else ''}: ``<|{{role}}|>\\n{{content}}<|end|>\\n``; then
    ``<|assistant|>\\n`` with the generation prompt, else the model's EOS ``<|endoftext|>``
    (template text, not in the mask).{' A system message with empty content is left out (nothing is lost).' if
    drop_empty_system else ''}

    Source: {'phi3.5.jinja (microsoft/Phi-3.5-mini-instruct)' if drop_empty_system else
             'phi3.jinja (microsoft/Phi-3-mini-4k-instruct)'}.
    """
    return writer


def _w_zephyr(conv: Conversation, gen: bool, opts) -> Out:
    """Zephyr / TinyLlama: ``<|{role}|>\\n{content}</s>\\n`` (``</s>`` is the template's
    ``eos_token``); generation prompt ``<|assistant|>\\n``. Any role order.

    Source: zephyr.jinja (HuggingFaceH4/zephyr-7b-beta = TinyLlama-1.1B-Chat-v1.0).
    """
    o = Out()
    for m in conv.messages:
        o.t(f"<|{m.role}|>\n")
        if m.role == "assistant":
            o.c(m.text, "assistant")
            o.a("</s>")
            o.t("\n")
        else:
            o.c(m.text, m.role)
            o.t("</s>\n")
    if gen:
        o.t("<|assistant|>\n")
    return o


def _w_command_r(conv: Conversation, gen: bool, opts) -> Out:
    """Command-R: ``<BOS_TOKEN>``, an optional ``<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>{system}<|END_OF_TURN_TOKEN|>``
    (not stripped), then ``<|START_OF_TURN_TOKEN|><|USER_TOKEN|>{user.strip()}<|END_OF_TURN_TOKEN|>``
    and ``...<|CHATBOT_TOKEN|>{answer.strip()}<|END_OF_TURN_TOKEN|>``, strictly alternating;
    generation prompt ``<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>``.

    Source: command-r.jinja (CohereForAI/c4ai-command-r-08-2024, default variant).
    """
    msgs = conv.messages
    start = 1 if msgs[0].role == "system" else 0
    if start == len(msgs):
        raise ChatFormatError("message 0 is a system message with no user message after it (command-r alternates "
                              "user/assistant turns)")
    alternate(msgs, "command-r", start=start)
    o = Out()
    o.t("<BOS_TOKEN>")
    if start:
        o.t("<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>")
        o.c(msgs[0].text, "system")
        o.t("<|END_OF_TURN_TOKEN|>")
    for m in msgs[start:]:
        if m.role == "user":
            o.t("<|START_OF_TURN_TOKEN|><|USER_TOKEN|>")
            o.c(m.text.strip(), "user")
            o.t("<|END_OF_TURN_TOKEN|>")
        else:
            o.t("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>")
            o.c(m.text.strip(), "assistant")
            o.a("<|END_OF_TURN_TOKEN|>")
    if gen:
        o.t("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>")
    return o


FORMATS = [
    ChatFormat("phi3", _phi3(False), bos=None, eos="<|endoftext|>", terminator="<|end|>", stop="<|end|>",
               source="phi3.jinja", rules=PARTS_REFUSED),
    ChatFormat("phi3.5", _phi3(True), bos=None, eos="<|endoftext|>", terminator="<|end|>", stop="<|end|>",
               source="phi3.5.jinja", rules=PARTS_REFUSED),
    ChatFormat("zephyr", _w_zephyr, bos=None, eos="</s>", terminator="</s>", stop="</s>", source="zephyr.jinja",
               rules=PARTS_REFUSED),
    ChatFormat("command-r", _w_command_r, bos="<BOS_TOKEN>", eos="<|END_OF_TURN_TOKEN|>",
               terminator="<|END_OF_TURN_TOKEN|>", stop="<|END_OF_TURN_TOKEN|>", source="command-r.jinja",
               rules=PARTS_REFUSED),
]
