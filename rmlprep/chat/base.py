"""What every chat format module shares: the :class:`ChatFormat` record, the clock option, and
the rules several templates apply (alternating roles, reasoning a template drops).

The registry of formats is :mod:`rmlprep.chat.registry`; the writers are ``fmt_*.py``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ChatFormatError
from .messages import Conversation
from .segments import Out

__all__ = ["ChatFormat", "DEFAULT_TODAY", "PARTS_REFUSED", "ALL_ROLES", "today", "alternate", "lose_reasoning"]

ALL_ROLES = frozenset(("system", "user", "assistant", "tool"))
DEFAULT_TODAY = "2024-07-26"
#: The :attr:`ChatFormat.rules` of a format whose template takes only a string (``parts="join"``)
#: since a content of two or more text parts is refused unless ``chat.join_text_parts`` chooses the
#: join (:func:`rmlprep.chat.convert.join_text_parts`; they were joined with ``""``): a unit done
#: under rules 1 may hold such rows so joined, and is redone on resume. Not raised for ``smollm3``
#: (``parts="refused"``), nor for the formats whose template iterates them.
PARTS_REFUSED = 2

Writer = Callable[[Conversation, bool, Mapping[str, Any]], Out]


@dataclass(frozen=True)
class ChatFormat:
    """One chat format.

    Attributes:
        name: the format's name (``"qwen3"``, ``"llama3.1"``...).
        writer: ``(conversation, add_generation_prompt, options) -> Out`` (the segments and
            the notes of what the format's own rules left out).
        bos, eos: the ``bos_token`` / ``eos_token`` texts its template is rendered with (None:
            the template never writes that variable).
        terminator: the text that ends an assistant turn (``"<|im_end|>"``).
        stop: the terminator's token text for :func:`rmlprep.chat.stop_ids`.
        more_stops: other tokens its model ends a generation with, for :func:`~rmlprep.chat.stop_ids`
            (gpt-oss ``<|call|>`` after a tool call: openai-harmony's
            ``stop_tokens_for_assistant_actions``; Llama 3.1/3.2 ``<|eom_id|>``: their
            ``generation_config.json``).
        not_stops: end-of-turn tokens of the tokenizer (``spec.eot_ids``) that end a message of
            its model but not a generation, left out of :func:`~rmlprep.chat.stop_ids` (gpt-oss
            ``<|end|>``, the end of its analysis message, after which it writes the final one:
            openai-harmony's ``stop_tokens_for_assistant_actions`` and gpt-oss's
            ``generation_config.json`` leave it out, llama.cpp removes it from its end-of-generation set).
        roles: the roles it writes.
        reasoning: it can write an assistant's reasoning (somewhere).
        reasoning_keys: the message keys its real template reads an assistant's reasoning from
            (Qwen3's ``reasoning_content``, gpt-oss's ``thinking``, Gemma 4's ``reasoning`` and
            ``reasoning_content``); ``()``: it reads none, or any. Reasoning under another of the
            names rmlprep reads (``reasoning_content``, ``reasoning``, ``thinking``) is written
            all the same, but the template, given the row as it is (transformers'
            ``apply_chat_template``), would not see it: counted
            (:func:`rmlprep.chat.convert.unread_reasoning`, ``reasoning_key_unread``).
        reasoning_in_content: its model writes its reasoning as a leading
            ``<think>…</think>`` of the answer's content, and its template writes the content as
            it is (SmolLM3): the writer marks that block as reasoning.
        tool_calls: it can write assistant tool calls.
        tools: it can write tool definitions.
        tools_refused: why it refuses tool calls and tool results that its template does write
            (wrongly), for the refusal; ``""``: its template writes none.
        options: option name -> default (None: the template's own default applies).
        template_vars: the options passed to the Jinja template as variables.
        probe_options: option sets (besides the defaults) detection proves the format with.
        parts: ``"join"``: its template takes string contents (text parts are joined as
            ``chat.join_text_parts`` says first, or refused: :func:`rmlprep.chat.convert.join_text_parts`);
            ``"native"``: its template iterates the parts itself; ``"refused"``: its template
            drops a content that is not a string (SmolLM3 writes it as ``""``), and its writer
            refuses parts whatever the key.
        null_content: how an assistant ``content: null`` reaches its template: ``"none"`` or
            ``"empty"`` (as ``""``: the template needs a string).
        core_probes: probes the format must write for a proof to mean anything.
        source: the real template(s) it reproduces.
        rules: the version of what :attr:`writer` makes of a conversation, to be raised with a
            change that makes some conversation's ids, masks or verdict differ (a row written
            otherwise, or refused where it was written): an sft run's done markers hold it
            (``chat_rules``), and a resumed run redoes a unit whose marker holds another or none
            (:func:`rmlprep.pipeline.late_keys.chat_rules`). 1 for every format when the key
            came.
    """

    name: str
    writer: Writer
    bos: str | None
    eos: str | None
    terminator: str
    stop: str
    more_stops: tuple[str, ...] = ()
    not_stops: tuple[str, ...] = ()
    roles: frozenset = frozenset(("system", "user", "assistant"))
    reasoning: bool = False
    reasoning_keys: tuple = ()
    reasoning_in_content: bool = False
    tool_calls: bool = False
    tools: bool = False
    tools_refused: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)
    template_vars: frozenset = frozenset()
    probe_options: tuple = ()
    parts: str = "join"
    null_content: str = "empty"
    core_probes: tuple = ("user", "multi_turn")
    source: str = ""
    rules: int = 1


def today(opts: Mapping[str, Any]) -> _dt.date:
    return _dt.date.fromisoformat(opts.get("today") or DEFAULT_TODAY)


def alternate(msgs, name: str, *, start: int) -> None:
    """Roles must alternate user/assistant/user/... from ``start`` (after the optional system
    message), as the ``[INST]`` and Gemma templates require (they raise, or silently drop a
    system message in the middle).

    Raises:
        ChatFormatError: the first message out of order.
    """
    for i in range(start, len(msgs)):
        want = "user" if (i - start) % 2 == 0 else "assistant"
        role = msgs[i].role
        if role != want:
            extra = " (a system message is only allowed first)" if role == "system" else ""
            raise ChatFormatError(
                f"message {i} has role {role!r}, expected {want!r}: after the optional first system message, "
                f"{name} needs roles alternating user/assistant/user/...{extra}"
            )


def lose_reasoning(o: Out, msgs, i: int, name: str) -> None:
    """Message ``i``'s reasoning is not written by ``name``'s template: count it when the
    message is history (a user message follows), refuse it in the last answer.

    Raises:
        ChatFormatError: message ``i`` is the last assistant message with no user message after it.
    """
    later = msgs[i + 1:]
    if not any(m.role == "user" for m in later) and not any(m.role == "assistant" for m in later):
        raise ChatFormatError(f"message {i} (assistant): {name}'s template drops the reasoning of every answer "
                              "(the text up to </think>, and reasoning_content); in the last answer it would be lost "
                              "from the training text: drop it, or use a format that writes reasoning (qwen3)")
    o.note("reasoning_dropped")
