"""Chat formats written directly (no Jinja): detect, validate, write, encode with a loss mask.

A chat format turns a conversation (a list of ``{"role": ..., "content": ...}`` messages) into
the prompt text a model was trained on. Hugging Face runs the model's Jinja template; rmlprep
recognizes the format and writes it in Python, byte-identical to the real template except for
three documented removals:

* no leading BOS (the tokenizer adds it from its ``add_bos``);
* no default system prompt (Qwen2, Qwen2.5 and SmolLM2 inject one when the first message is
  not a system message);
* no "Cutting Knowledge Date" / "Today Date" lines (Llama 3.1 / 3.2), nor the system block they
  alone would make.

and one documented fix: Mistral v3 / v3-tekken put the system message into the last user
message also when the conversation ends on an assistant turn (as mistral-common does; the
real template silently drops it there).

Segments:
    :func:`format_chat_segments` returns the text as ``(text, kind)`` pieces, kind in
    ``{"template", "system", "user", "assistant"}``. Every message gives exactly one content
    segment of its role's kind (possibly empty), in output order. An assistant content segment
    is always followed directly by its **terminator** segment (``"<|im_end|>"``,
    ``"<|eot_id|>"``, ``"</s>"``, ...), also of kind ``"assistant"``, so a loss mask built from
    the ``"assistant"`` kind covers the token that teaches the model to stop. Everything the
    format adds around contents (headers, newlines after a terminator, a final EOS that is not
    the turn terminator) has kind ``"template"``.

Mask rule (:func:`encode_chat`):
    token ``i`` gets mask 1 iff its byte span ``[starts[i], starts[i+1])`` overlaps an assistant
    span (assistant content or terminator). A token that straddles template text and assistant
    content (SentencePiece ``"▁answer"`` whose space is the template's ``" "``; a byte-level
    ``"\\n\\n"`` whose first newline is the template's) is therefore in the mask: the model
    must emit that token to produce the answer. A zero-width token (empty raw bytes) is in the
    mask iff its offset lies inside an assistant span.

Source: the real templates in ``../shared/chat-templates`` (see each writer's ``Source:``).
"""

from __future__ import annotations

import re

import numpy as np
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable

from .errors import ChatFormatError

__all__ = [
    "CHAT_FORMATS",
    "ChatEncoding",
    "detect_chat_format",
    "validate_messages",
    "format_chat",
    "format_chat_segments",
    "encode_chat",
    "stop_ids",
    "turn_terminator",
]

ROLES = ("system", "user", "assistant")
KINDS = ("template", "system", "user", "assistant")

Segments = list[tuple[str, str]]


# -- segment builder -----------------------------------------------------------------------
class _Out:
    """Collects ``(text, kind)`` segments; template text is merged, contents always kept."""

    __slots__ = ("segs",)

    def __init__(self) -> None:
        self.segs: Segments = []

    def t(self, text: str) -> None:
        if not text:
            return
        if self.segs and self.segs[-1][1] == "template":
            self.segs[-1] = (self.segs[-1][0] + text, "template")
        else:
            self.segs.append((text, "template"))

    def c(self, text: str, kind: str) -> None:
        self.segs.append((text, kind))

    def extend(self, segs: Segments) -> None:
        for text, kind in segs:
            if kind == "template":
                self.t(text)
            else:
                self.c(text, kind)


def _strip_segments(segs: Segments) -> Segments:
    """Apply Python ``str.strip()`` to the concatenation of ``segs``, keeping the segmentation.

    Needed where a template strips a string it built from several parts (Llama 2 strips
    ``'<<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' + user`` as a whole).
    """
    segs = list(segs)
    for i, (text, kind) in enumerate(segs):  # leading
        stripped = text.lstrip()
        segs[i] = (stripped, kind)
        if stripped:
            break
    for i in range(len(segs) - 1, -1, -1):  # trailing
        text, kind = segs[i]
        stripped = text.rstrip()
        segs[i] = (stripped, kind)
        if stripped:
            break
    return [(t, k) for t, k in segs if t or k != "template"]


def _split_system(msgs: Sequence[Mapping[str, Any]]):
    if msgs[0]["role"] == "system":
        return msgs[0]["content"], list(msgs[1:])
    return None, list(msgs)


# -- writers -------------------------------------------------------------------------------
def _w_chatml(msgs, gen: bool) -> Segments:
    """ChatML: ``<|im_start|>{role}\\n{content}<|im_end|>\\n``; generation prompt
    ``<|im_start|>assistant\\n``. Contents are not stripped; any role order.

    Source: chatml-openhermes.jinja (teknium/OpenHermes-2.5-Mistral-7B); qwen2.jinja,
    qwen2.5.jinja (tool-less branch) and smollm2.jinja minus their default system block.
    """
    o = _Out()
    for m in msgs:
        o.t(f"<|im_start|>{m['role']}\n")
        o.c(m["content"], m["role"])
        if m["role"] == "assistant":
            o.c("<|im_end|>", "assistant")
            o.t("\n")
        else:
            o.t("<|im_end|>\n")
    if gen:
        o.t("<|im_start|>assistant\n")
    return o.segs


def _w_llama3(msgs, gen: bool) -> Segments:
    """Llama 3: ``<|start_header_id|>{role}<|end_header_id|>\\n\\n{content.strip()}<|eot_id|>``;
    generation prompt ``<|start_header_id|>assistant<|end_header_id|>\\n\\n``. Any role order.

    Source: llama3.jinja (Meta-Llama-3-8B-Instruct); llama3.1.jinja / llama3.2.jinja (tool-less
    path) minus the "Cutting Knowledge Date" / "Today Date" lines.
    """
    o = _Out()
    for m in msgs:
        o.t(f"<|start_header_id|>{m['role']}<|end_header_id|>\n\n")
        o.c(m["content"].strip(), m["role"])
        if m["role"] == "assistant":
            o.c("<|eot_id|>", "assistant")
        else:
            o.t("<|eot_id|>")
    if gen:
        o.t("<|start_header_id|>assistant<|end_header_id|>\n\n")
    return o.segs


def _w_llama2(msgs, gen: bool) -> Segments:
    """Llama 2 chat: ``<s>[INST] {user.strip()} [/INST] {answer.strip()} </s>`` per exchange,
    the optional system message as ``<<SYS>>\\n{system}\\n<</SYS>>\\n\\n`` before the first user
    message (that whole string is stripped). No generation prompt exists. The ``<s>`` before
    every exchange but the first is part of the format; the first is the tokenizer's BOS.
    The terminator is ``" </s>"`` (the space before EOS is what Meta's code trains on).

    Source: llama2.jinja (meta-llama/Llama-2-7b-chat-hf).
    """
    system, loop = _split_system(msgs)
    o = _Out()
    for j, m in enumerate(loop):
        if m["role"] == "user":
            o.t("[INST] " if j == 0 else "<s>[INST] ")
            if j == 0 and system is not None:
                group = [("<<SYS>>\n", "template"), (system, "system"),
                         ("\n<</SYS>>\n\n", "template"), (m["content"], "user")]
            else:
                group = [(m["content"], "user")]
            o.extend(_strip_segments(group))
            o.t(" [/INST]")
        else:
            o.t(" ")
            o.c(m["content"].strip(), "assistant")
            o.c(" </s>", "assistant")
    return o.segs


def _w_mistral_v1(msgs, gen: bool) -> Segments:
    """Mistral "v1": `` [INST] {user} [/INST]`` (note the leading space), `` {answer}</s>``;
    the optional system message goes into the FIRST user message as ``{system}\\n\\n{user}``.
    Contents are not stripped. No generation prompt exists.

    Source: mistral-v1.jinja (current template of Mistral-7B-Instruct-v0.1/v0.2, Mixtral-8x7B).
    """
    system, loop = _split_system(msgs)
    o = _Out()
    for j, m in enumerate(loop):
        if m["role"] == "user":
            o.t(" [INST] ")
            if j == 0 and system is not None:
                o.c(system, "system")
                o.t("\n\n")
            o.c(m["content"], "user")
            o.t(" [/INST]")
        else:
            o.t(" ")
            o.c(m["content"], "assistant")
            o.c("</s>", "assistant")
    return o.segs


def _mistral_v3(msgs, tekken: bool) -> Segments:
    system, loop = _split_system(msgs)
    last_user = max(j for j, m in enumerate(loop) if m["role"] == "user")
    inst = "[INST]" if tekken else "[INST] "
    o = _Out()
    for j, m in enumerate(loop):
        if m["role"] == "user":
            o.t(inst)
            if j == last_user and system is not None:
                o.c(system, "system")
                o.t("\n\n")
            o.c(m["content"], "user")
            o.t("[/INST]")
        elif tekken:
            o.c(m["content"], "assistant")
            o.c("</s>", "assistant")
        else:
            o.t(" ")
            o.c(m["content"].strip(), "assistant")
            o.c("</s>", "assistant")
    return o.segs


def _w_mistral_v3(msgs, gen: bool) -> Segments:
    """Mistral "v3": ``[INST] {user}[/INST]``, `` {answer.strip()}</s>``; the optional system
    message goes into the LAST user message as ``{system}\\n\\n{user}``. No generation prompt.

    Divergence (deliberate): the real template puts the system message into the last user
    message only when the conversation ends on a user turn; when it ends on an assistant
    turn (every SFT example) the template silently drops it. rmlprep follows mistral-common
    (``InstructTokenizerV3``), which puts it into the last user message in both cases, so no
    training data is lost. Where the template defines the placement, the output is identical.

    Source: mistral-v3.jinja (Mistral-7B-Instruct-v0.3, Mistral-Large-2407); mistral-common.
    """
    return _mistral_v3(msgs, tekken=False)


def _w_mistral_v3_tekken(msgs, gen: bool) -> Segments:
    """Mistral "v3-tekken": as ``mistral-v3`` without spaces: ``[INST]{user}[/INST]{answer}</s>``
    (the answer is not stripped). Same system placement and the same deliberate divergence
    from the template (system into the last user message also when ending on an assistant
    turn, as mistral-common does).

    Source: mistral-v3-tekken.jinja (Mistral-Nemo-Instruct-2407); mistral-common.
    """
    return _mistral_v3(msgs, tekken=True)


def _mistral_v7(msgs, tekken: bool) -> Segments:
    sp = "" if tekken else " "
    o = _Out()
    for m in msgs:
        if m["role"] == "user":
            o.t("[INST]" + sp)
            o.c(m["content"], "user")
            o.t("[/INST]")
        elif m["role"] == "system":
            o.t("[SYSTEM_PROMPT]" + sp)
            o.c(m["content"], "system")
            o.t("[/SYSTEM_PROMPT]")
        else:
            o.t(sp)
            o.c(m["content"], "assistant")
            o.c("</s>", "assistant")
    return o.segs


def _w_mistral_v7(msgs, gen: bool) -> Segments:
    """Mistral "v7": ``[SYSTEM_PROMPT] {system}[/SYSTEM_PROMPT]`` in place, ``[INST] {user}[/INST]``,
    `` {answer}</s>``; any role order, nothing stripped, no generation prompt.

    Source: mistral-v7.jinja (Mistral-Large-Instruct-2411).
    """
    return _mistral_v7(msgs, tekken=False)


def _w_mistral_v7_tekken(msgs, gen: bool) -> Segments:
    """Mistral "v7-tekken": as ``mistral-v7`` without the spaces.

    Source: mistral-v7-tekken.jinja (Mistral-Small-24B-Instruct-2501).
    """
    return _mistral_v7(msgs, tekken=True)


def _gemma(msgs, gen: bool, system: str | None) -> Segments:
    o = _Out()
    for j, m in enumerate(msgs):
        role = "model" if m["role"] == "assistant" else m["role"]
        o.t(f"<start_of_turn>{role}\n")
        if j == 0 and system is not None:
            o.c(system, "system")
            o.t("\n\n")
        o.c(m["content"].strip(), m["role"])
        if m["role"] == "assistant":
            o.c("<end_of_turn>", "assistant")
            o.t("\n")
        else:
            o.t("<end_of_turn>\n")
    if gen:
        o.t("<start_of_turn>model\n")
    return o.segs


def _w_gemma(msgs, gen: bool) -> Segments:
    """Gemma 1/2: ``<start_of_turn>user\\n{content.strip()}<end_of_turn>\\n``, ``model`` for the
    assistant; generation prompt ``<start_of_turn>model\\n``. A system message is refused.

    Source: gemma.jinja (google/gemma-2-2b-it; gemma-7b-it has the same logic).
    """
    return _gemma(msgs, gen, None)


def _w_gemma3(msgs, gen: bool) -> Segments:
    """Gemma 3: as Gemma, with the optional system message folded into the first user turn
    as ``{system}\\n\\n`` (the system text is not stripped, the user text is).

    Source: gemma3.jinja (google/gemma-3-270m-it), string contents only.
    """
    system, loop = _split_system(msgs)
    return _gemma(loop, gen, system)


def _w_phi3(msgs, gen: bool) -> Segments:
    """Phi-3: ``<|{role}|>\\n{content}<|end|>\\n``; then ``<|assistant|>\\n`` with the generation
    prompt, else the model's EOS ``<|endoftext|>`` (template text, not in the mask).

    Source: phi3.jinja (microsoft/Phi-3-mini-4k-instruct). phi3.5.jinja differs only in
    dropping a system message with empty content; drop such messages to reproduce it.
    """
    o = _Out()
    for m in msgs:
        o.t(f"<|{m['role']}|>\n")
        o.c(m["content"], m["role"])
        if m["role"] == "assistant":
            o.c("<|end|>", "assistant")
            o.t("\n")
        else:
            o.t("<|end|>\n")
    o.t("<|assistant|>\n" if gen else "<|endoftext|>")
    return o.segs


def _w_zephyr(msgs, gen: bool) -> Segments:
    """Zephyr / TinyLlama: ``<|{role}|>\\n{content}</s>\\n`` (``</s>`` is the template's
    ``eos_token``); generation prompt ``<|assistant|>\\n``. Any role order.

    Source: zephyr.jinja (HuggingFaceH4/zephyr-7b-beta = TinyLlama-1.1B-Chat-v1.0).
    """
    o = _Out()
    for m in msgs:
        o.t(f"<|{m['role']}|>\n")
        o.c(m["content"], m["role"])
        if m["role"] == "assistant":
            o.c("</s>", "assistant")
            o.t("\n")
        else:
            o.t("</s>\n")
    if gen:
        o.t("<|assistant|>\n")
    return o.segs


_DS_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"  # <｜end▁of▁sentence｜>
_DS_USER = "<\uff5cUser\uff5c>"
_DS_ASSISTANT = "<\uff5cAssistant\uff5c>"


def _w_deepseek3(msgs, gen: bool) -> Segments:
    """DeepSeek V3: all system messages first, joined by ``\\n\\n``; then ``<｜User｜>{user}``,
    ``<｜Assistant｜>{answer}<｜end▁of▁sentence｜>``; generation prompt ``<｜Assistant｜>``.

    Source: deepseek-v3.jinja (deepseek-ai/DeepSeek-V3), tool-less path.
    """
    o = _Out()
    first = True
    for m in msgs:
        if m["role"] == "system":
            if not first:
                o.t("\n\n")
            o.c(m["content"], "system")
            first = False
    for m in msgs:
        if m["role"] == "user":
            o.t(_DS_USER)
            o.c(m["content"], "user")
        elif m["role"] == "assistant":
            o.t(_DS_ASSISTANT)
            o.c(m["content"], "assistant")
            o.c(_DS_EOS, "assistant")
    if gen:
        o.t(_DS_ASSISTANT)
    return o.segs


def _w_deepseek_r1(msgs, gen: bool) -> Segments:
    """DeepSeek-R1 distills: as ``deepseek3`` (one system message at most), but an assistant
    content keeps only the text after its last ``</think>`` (the template drops the reasoning
    from history), and the generation prompt is ``<｜Assistant｜><think>\\n``.

    Source: deepseek-r1-distill-qwen.jinja (deepseek-ai/DeepSeek-R1-Distill-Qwen-32B).
    """
    o = _Out()
    for m in msgs:
        if m["role"] == "system":
            o.c(m["content"], "system")
    for m in msgs:
        if m["role"] == "user":
            o.t(_DS_USER)
            o.c(m["content"], "user")
        elif m["role"] == "assistant":
            o.t(_DS_ASSISTANT)
            o.c(m["content"].split("</think>")[-1], "assistant")
            o.c(_DS_EOS, "assistant")
    if gen:
        o.t(_DS_ASSISTANT + "<think>\n")
    return o.segs


def _w_deepseek_llm(msgs, gen: bool) -> Segments:
    """DeepSeek LLM / V2 chat: ``{system}\\n\\n``, ``User: {user}\\n\\n``,
    ``Assistant: {answer}<｜end▁of▁sentence｜>``; generation prompt ``Assistant:``. Any order.

    Source: deepseek-llm.jinja (deepseek-ai/deepseek-llm-7b-chat).
    """
    o = _Out()
    for m in msgs:
        if m["role"] == "user":
            o.t("User: ")
            o.c(m["content"], "user")
            o.t("\n\n")
        elif m["role"] == "assistant":
            o.t("Assistant: ")
            o.c(m["content"], "assistant")
            o.c(_DS_EOS, "assistant")
        else:
            o.c(m["content"], "system")
            o.t("\n\n")
    if gen:
        o.t("Assistant:")
    return o.segs


def _w_command_r(msgs, gen: bool) -> Segments:
    """Command-R: optional ``<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>{system}<|END_OF_TURN_TOKEN|>``
    (not stripped), then ``<|START_OF_TURN_TOKEN|><|USER_TOKEN|>{user.strip()}<|END_OF_TURN_TOKEN|>``
    and ``...<|CHATBOT_TOKEN|>{answer.strip()}<|END_OF_TURN_TOKEN|>``, strictly alternating;
    generation prompt ``<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>``.

    Source: command-r.jinja (CohereForAI/c4ai-command-r-08-2024, default variant).
    """
    system, loop = _split_system(msgs)
    o = _Out()
    if system is not None:
        o.t("<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>")
        o.c(system, "system")
        o.t("<|END_OF_TURN_TOKEN|>")
    for m in loop:
        if m["role"] == "user":
            o.t("<|START_OF_TURN_TOKEN|><|USER_TOKEN|>")
            o.c(m["content"].strip(), "user")
            o.t("<|END_OF_TURN_TOKEN|>")
        else:
            o.t("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>")
            o.c(m["content"].strip(), "assistant")
            o.c("<|END_OF_TURN_TOKEN|>", "assistant")
    if gen:
        o.t("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>")
    return o.segs


# -- the registry ---------------------------------------------------------------------------
_ALTERNATE = "alternate"  # optional first system, then user/assistant/user/... strictly
_NO_SYSTEM = "alternate-no-system"  # as above, no system message at all
_ONE_SYSTEM = "one-system"  # any order, at most one system message
_FREE = "free"  # any order of system/user/assistant


@dataclass(frozen=True, slots=True)
class _Format:
    name: str
    writer: Callable[[Sequence[Mapping[str, Any]], bool], Segments]
    terminator: str  # the assistant turn's terminator as written (mask covers it)
    stop: str  # the terminator's token text (for stop_ids)
    rule: str


_FORMATS: dict[str, _Format] = {
    f.name: f
    for f in (
        _Format("chatml", _w_chatml, "<|im_end|>", "<|im_end|>", _FREE),
        _Format("llama3", _w_llama3, "<|eot_id|>", "<|eot_id|>", _FREE),
        _Format("llama2", _w_llama2, " </s>", "</s>", _ALTERNATE),
        _Format("mistral-v1", _w_mistral_v1, "</s>", "</s>", _ALTERNATE),
        _Format("mistral-v3", _w_mistral_v3, "</s>", "</s>", _ALTERNATE),
        _Format("mistral-v3-tekken", _w_mistral_v3_tekken, "</s>", "</s>", _ALTERNATE),
        _Format("gemma", _w_gemma, "<end_of_turn>", "<end_of_turn>", _NO_SYSTEM),
        _Format("gemma3", _w_gemma3, "<end_of_turn>", "<end_of_turn>", _ALTERNATE),
        _Format("phi3", _w_phi3, "<|end|>", "<|end|>", _FREE),
        _Format("zephyr", _w_zephyr, "</s>", "</s>", _FREE),
        _Format("deepseek3", _w_deepseek3, _DS_EOS, _DS_EOS, _FREE),
        # beyond the list, each reproduced exactly from its real template:
        _Format("mistral-v7", _w_mistral_v7, "</s>", "</s>", _FREE),
        _Format("mistral-v7-tekken", _w_mistral_v7_tekken, "</s>", "</s>", _FREE),
        _Format("deepseek-r1", _w_deepseek_r1, _DS_EOS, _DS_EOS, _ONE_SYSTEM),
        _Format("deepseek-llm", _w_deepseek_llm, _DS_EOS, _DS_EOS, _FREE),
        _Format("command-r", _w_command_r, "<|END_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", _ALTERNATE),
    )
}

#: Every format name :func:`detect_chat_format` can return.
CHAT_FORMATS: tuple[str, ...] = tuple(_FORMATS)


def _get(fmt: str) -> _Format:
    try:
        return _FORMATS[fmt]
    except (KeyError, TypeError):
        raise ChatFormatError(
            f"unknown chat format {fmt!r}; known: {', '.join(CHAT_FORMATS)} "
            "(or pass a model's Jinja chat template to detect_chat_format)"
        ) from None


def turn_terminator(fmt: str) -> str:
    """The text that ends an assistant turn in ``fmt`` (``"<|im_end|>"``, ``" </s>"``, ...).

    Raises:
        ChatFormatError: unknown format name.
    """
    return _get(fmt).terminator


# -- detection --------------------------------------------------------------------------------
def _has(t: str, *needles: str) -> bool:
    return all(n in t for n in needles)


_INST_NO_SPACE = re.compile(r"""['"]\[INST\]['"]""")  # '[INST]' + ...  (tekken)


def _detect_template(t: str) -> str | None:
    """Markers, most specific first. Returns None when no supported format matches."""
    if "<|START_OF_TURN_TOKEN|>" in t:
        return "command-r"
    if _DS_ASSISTANT in t:
        return "deepseek-r1" if "<think>" in t else "deepseek3"
    if "<start_of_turn>" in t:
        if "System role not supported" in t:
            return "gemma"
        if "first_user_prefix" in t or "<start_of_image>" in t:
            return "gemma3"
        return None
    if "<|start_header_id|>" in t:
        return "llama3"
    if "<|im_start|>" in t:
        return "chatml"
    if _has(t, "<|user|>", "<|assistant|>"):
        if "<|end|>" in t:
            return "phi3"
        if "eos_token" in t or "</s>" in t:
            return "zephyr"
        return None
    if "[INST]" in t:
        if "<<SYS>>" in t:
            return "llama2"
        tekken = bool(_INST_NO_SPACE.search(t))
        if "[SYSTEM_PROMPT]" in t:
            return "mistral-v7-tekken" if tekken else "mistral-v7"
        if "user_messages[-1]" in t or "loop.last and system_message" in t:
            return "mistral-v3-tekken" if tekken else "mistral-v3"
        if "' [INST] '" in t or '" [INST] "' in t:
            return "mistral-v1"
        return None  # e.g. the original 2023 Mistral templates (no system, other spacing)
    if _has(t, "'User: '", "'Assistant: '"):
        return "deepseek-llm"
    return None


def detect_chat_format(name_or_template: str) -> str:
    """Return the format name for a format name or a model's Jinja chat template.

    An exact format name (one of :data:`CHAT_FORMATS`) wins. Otherwise the template is searched
    for each format's markers, most specific first (Command-R's turn tokens, DeepSeek's
    ``<｜Assistant｜>``, Gemma's ``<start_of_turn>``, Llama 3 headers, ``<|im_start|>``, Phi-3's
    ``<|end|>`` before Zephyr's ``<|user|>`` + ``eos_token``, Llama 2's ``<<SYS>>`` before the
    Mistral ``[INST]`` variants).

    Raises:
        ChatFormatError: not a known name and no supported format's markers (e.g. the original
            2023 Mistral templates); the message lists the known names.
    """
    if not isinstance(name_or_template, str):
        raise ChatFormatError(f"expected a format name or a Jinja template string, got {type(name_or_template).__name__}")
    if name_or_template in _FORMATS:
        return name_or_template
    found = _detect_template(name_or_template)
    if found is None:
        what = "template" if ("{{" in name_or_template or "{%" in name_or_template) else "format name"
        raise ChatFormatError(
            f"unknown chat {what} {name_or_template[:80]!r}: no supported format matches; "
            f"known: {', '.join(CHAT_FORMATS)}"
        )
    return found


# -- validation --------------------------------------------------------------------------------
def validate_messages(messages: Any, fmt: str) -> None:
    """Check a conversation against rmlprep's rules and ``fmt``'s.

    Rules: a non-empty list of mappings, each with a ``role`` in system/user/assistant and a
    string ``content``. ``llama2``, ``mistral-v1``, ``mistral-v3(-tekken)``, ``gemma3`` and
    ``command-r``: an optional first system message, then user/assistant strictly alternating,
    starting with user; ``gemma``: the same without any system message; ``deepseek-r1``: at
    most one system message (its template silently keeps only the last).

    Raises:
        ChatFormatError: the first broken rule, naming the message index and the rule.
    """
    f = _get(fmt)
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ChatFormatError(f"{fmt}: messages must be a list of {{'role', 'content'}} dicts, got {type(messages).__name__}")
    if not messages:
        raise ChatFormatError(f"{fmt}: empty conversation; give at least one message")
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise ChatFormatError(f"{fmt}: message {i} must be a dict with 'role' and 'content', got {type(m).__name__}")
        if "role" not in m:
            raise ChatFormatError(f"{fmt}: message {i} has no 'role' key")
        role = m["role"]
        if role not in ROLES:
            raise ChatFormatError(
                f"{fmt}: message {i} has role {role!r}; supported roles are system, user, assistant "
                "(convert or drop tool messages first)"
            )
        if "content" not in m:
            raise ChatFormatError(f"{fmt}: message {i} ({role}) has no 'content' key")
        if not isinstance(m["content"], str):
            raise ChatFormatError(
                f"{fmt}: message {i} ({role}) content must be a string, got {type(m['content']).__name__} "
                "(join list-of-parts content into one string first)"
            )
    if f.rule in (_ALTERNATE, _NO_SYSTEM):
        start = 0
        if messages[0]["role"] == "system":
            if f.rule == _NO_SYSTEM:
                raise ChatFormatError(
                    f"{fmt}: message 0 is a system message, which {fmt} does not support "
                    "(Gemma 1/2 templates refuse it; use gemma3, or fold it into the first user message)"
                )
            start = 1
            if len(messages) == 1:
                raise ChatFormatError(f"{fmt}: message 0 is a system message with no user message after it")
        for i in range(start, len(messages)):
            want = "user" if (i - start) % 2 == 0 else "assistant"
            role = messages[i]["role"]
            if role != want:
                extra = " (a system message is only allowed first)" if role == "system" else ""
                raise ChatFormatError(
                    f"{fmt}: message {i} has role {role!r}, expected {want!r}: after the optional "
                    f"first system message, roles must alternate user/assistant/user/...{extra}"
                )
    elif f.rule == _ONE_SYSTEM:
        seen = None
        for i, m in enumerate(messages):
            if m["role"] == "system":
                if seen is not None:
                    raise ChatFormatError(
                        f"{fmt}: message {i} is a second system message (first at {seen}); {fmt} keeps "
                        "only one system prompt: merge them"
                    )
                seen = i


# -- writing ---------------------------------------------------------------------------------
def format_chat_segments(messages: Sequence[Mapping[str, Any]], fmt: str, *,
                         add_generation_prompt: bool = False) -> Segments:
    """Write a conversation as ``(text, kind)`` segments whose texts join to :func:`format_chat`.

    Kinds are ``"template"``, ``"system"``, ``"user"``, ``"assistant"``. Each message gives one
    content segment of its role (possibly empty), in output order; each assistant content
    segment is followed by its terminator as a separate ``"assistant"`` segment (see the module
    docstring).

    Raises:
        ChatFormatError: unknown format or a conversation the format refuses.
    """
    f = _get(fmt)
    validate_messages(messages, fmt)
    return f.writer(messages, bool(add_generation_prompt))


def format_chat(messages: Sequence[Mapping[str, Any]], fmt: str, *, add_generation_prompt: bool = False) -> str:
    """Write a conversation in ``fmt``, as the model's real template does (minus the module
    docstring's removals: leading BOS, default system prompt, Llama 3.1/3.2 date lines).

    Args:
        messages: ``[{"role": "system"|"user"|"assistant", "content": str}, ...]``.
        fmt: a name from :data:`CHAT_FORMATS` (see :func:`detect_chat_format`).
        add_generation_prompt: append the header that opens an assistant turn, where the format
            has one (the ``[INST]`` formats have none).
    Raises:
        ChatFormatError: unknown format or a conversation the format refuses.
    """
    return "".join(t for t, _ in format_chat_segments(messages, fmt, add_generation_prompt=add_generation_prompt))


# -- encoding --------------------------------------------------------------------------------
@dataclass(slots=True)
class ChatEncoding:
    """One encoded conversation.

    Attributes:
        input_ids: token ids, BOS included when the tokenizer's spec has add_bos.
        assistant_mask: 0/1 per token, 1 on assistant content and turn terminators.
        labels: ``input_ids`` where the mask is 1, ``-100`` elsewhere.
    """

    input_ids: list[int]
    assistant_mask: list[int]
    labels: list[int]


_SPECIAL_RE_CACHE: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


def _special_regex(tokenizer):
    try:
        return _SPECIAL_RE_CACHE[tokenizer]
    except (KeyError, TypeError):
        pass
    specials = sorted(tokenizer.special_tokens, key=lambda s: (-len(s), s))
    rx = re.compile("|".join(re.escape(s) for s in specials if s)) if specials else None
    try:
        _SPECIAL_RE_CACHE[tokenizer] = rx
    except TypeError:
        pass
    return rx


def _template_fragments(text: str, tokenizer, rx) -> list[str | int]:
    """Split template text at the tokenizer's special tokens (longest match first)."""
    if rx is None:
        return [text]
    out: list[str | int] = []
    pos = 0
    for m in rx.finditer(text):
        if m.start() > pos:
            out.append(text[pos:m.start()])
        out.append(tokenizer.special_tokens[m.group()])
        pos = m.end()
    if pos < len(text):
        out.append(text[pos:])
    return out


def encode_chat(tokenizer, messages: Sequence[Mapping[str, Any]], fmt: str, *,
                add_generation_prompt: bool = False) -> ChatEncoding:
    """Encode a conversation with an assistant-only loss mask.

    Template text is split at the tokenizer's special tokens (longest first), each becoming its
    id; a marker that is not one token in this vocabulary (Llama 2's ``[INST]``) stays text.
    Message contents (and text terminators) are passed as plain text, never parsed, so
    ``"<|im_end|>"`` written by a user cannot become a control token. One
    ``encode_fragments(..., add_special_tokens=True)`` call encodes everything, so BPE works
    across fragment borders exactly as for the whole string and BOS/EOS follow the spec.
    Special ids with Hugging Face ``rstrip``/``lstrip`` flags swallow the whitespace next to
    them (up to the next special id), as encoding the whole formatted string would; so for a
    conversation without special-token text in it, ``input_ids ==
    tokenizer.encode(format_chat(...), add_special_tokens=True)``. (``single_word`` flags are
    not applied to template markers.)

    Args:
        tokenizer: a :class:`rmlprep.tokenizer.Tokenizer`.
        messages, fmt, add_generation_prompt: as for :func:`format_chat`.
    Returns:
        ChatEncoding; the mask rule is in the module docstring.
    Raises:
        ChatFormatError: unknown format or a conversation the format refuses.
    """
    segs = format_chat_segments(messages, fmt, add_generation_prompt=add_generation_prompt)
    rx = _special_regex(tokenizer)
    items: list[list] = []  # [fragment, is_assistant]
    after_content = False  # the segment after an assistant content segment is its terminator
    for text, kind in segs:
        if kind == "template" or (kind == "assistant" and after_content):
            parts = _template_fragments(text, tokenizer, rx)  # markers and terminators
            after_content = False
        else:
            parts = [text]  # message content: plain text, never parsed
            after_content = kind == "assistant"
        items.extend([p, kind == "assistant"] for p in parts)
    _apply_strip_flags(items, tokenizer)
    fragments: list[str | int] = []
    spans: list[tuple[int, int]] = []  # assistant byte spans in the fragments' concatenation
    pos = 0
    for p, is_assistant in items:
        start = pos
        pos += len(p.encode("utf-8", "surrogatepass")) if isinstance(p, str) else len(tokenizer.token_bytes(p))
        fragments.append(p)
        if is_assistant and pos > start:
            if spans and spans[-1][1] == start:
                spans[-1] = (spans[-1][0], pos)
            else:
                spans.append((start, pos))
    ids, starts = tokenizer.encode_fragments(fragments, add_special_tokens=True)
    mask = _mask_from_spans(starts, pos, spans)
    labels = np.where(mask, np.asarray(ids, dtype=np.int64), -100)
    return ChatEncoding(input_ids=ids, assistant_mask=mask.tolist(), labels=labels.tolist())


def _apply_strip_flags(items: list[list], tokenizer) -> None:
    """Swallow whitespace around special ids whose Hugging Face flags say ``rstrip`` / ``lstrip``
    (Phi-3's ``<|end|>``, ``<|user|>``...), as ``tokenizer.encode(format_chat(...))`` does, up to
    the next special id. The swallowed whitespace may belong to a message's content.
    """
    flags = {a.id: a for a in tokenizer.spec.added_token_flags if a.lstrip or a.rstrip}
    if not flags:
        return
    n = len(items)
    for k in range(n):
        f = items[k][0]
        if isinstance(f, str) or f not in flags:
            continue
        fl = flags[f]
        if fl.rstrip:
            j = k + 1
            while j < n and isinstance(items[j][0], str):
                items[j][0] = items[j][0].lstrip()
                if items[j][0]:
                    break
                j += 1
        if fl.lstrip:
            j = k - 1
            while j >= 0 and isinstance(items[j][0], str):
                items[j][0] = items[j][0].rstrip()
                if items[j][0]:
                    break
                j -= 1


def _mask_from_spans(starts: Sequence[int], total: int, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """uint8 mask: token i (bytes [starts[i], starts[i+1]) , the last ending at ``total``) is 1 iff
    it overlaps an assistant span; a zero-width token counts when it sits inside one. ``spans``
    are sorted and disjoint, so the only candidate is the first span ending after the token's
    start (a binary search)."""
    n = len(starts)
    if not spans or n == 0:
        return np.zeros(n, dtype=np.uint8)
    a = np.asarray(starts, dtype=np.int64)
    b = np.append(a[1:], total)
    s = np.fromiter((x for x, _ in spans), dtype=np.int64, count=len(spans))
    e = np.fromiter((y for _, y in spans), dtype=np.int64, count=len(spans))
    k = np.searchsorted(e, a, side="right")  # first span with end > token start
    inside = k < len(spans)
    sk = s[np.minimum(k, len(spans) - 1)]
    return (inside & np.where(b > a, sk < b, sk <= a)).astype(np.uint8)


def stop_ids(tokenizer, fmt: str) -> list[int]:
    """Ids that end generation for ``fmt``: EOS, the spec's end-of-turn ids, and the format's
    turn terminator when it is a single token in the vocabulary (no duplicates, in that order).

    Raises:
        ChatFormatError: unknown format.
    """
    f = _get(fmt)
    out: list[int] = []
    cands = [tokenizer.eos_id, *tokenizer.spec.eot_ids, tokenizer.token_to_id(f.stop)]
    for i in cands:
        if i is not None and i not in out:
            out.append(i)
    return out
