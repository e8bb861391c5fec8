"""Segments: a written conversation as ``(text, kind, markup)`` pieces, and what writers share.

A writer returns the prompt text as a list of :class:`Segment`. Joined, their texts are the
render. ``kind`` says whose text it is and so whether the loss mask covers it; ``markup`` says
whether it is format text (its special-token strings become their ids) or data from the
conversation (never parsed for control tokens).

Kinds:

==============  ==========================================================  ===============
kind            what                                                        trainable
==============  ==========================================================  ===============
``template``    the format's own text outside an assistant's output: BOS,   no
                headers, separators, default system prompts, the
                generation prompt
``system``      system message text, tool definitions                       no
``user``        user message text                                           no
``tool``        tool results (role ``tool``)                                no
``assistant``   everything an assistant turn emits after its header: its    yes
                text, its tool calls (with their wrappers) and its turn
                terminator
``reasoning``   an assistant turn's reasoning with its wrappers             configurable
                (``<think>\\n ... \\n</think>\\n\\n``, harmony's analysis
                channel)
``history``     an ``assistant`` or ``reasoning`` segment before the last   no
                user message, under ``train_turns="last"``
                (:func:`untrain_history`)
==============  ==========================================================  ===============

The split between ``template`` and ``assistant`` is the generation prompt: an assistant turn
is trainable from the first character after what ``add_generation_prompt=True`` would write,
up to and including its terminator (``<|im_end|>``, ``<|eot_id|>``, ``</s>``...); the
newline a format writes after the terminator is template text.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

__all__ = ["Segment", "KINDS", "TRAINABLE", "tojson", "untrain_history"]

KINDS = ("template", "system", "user", "tool", "assistant", "reasoning", "history")
#: Kinds in the loss mask (``reasoning`` too when reasoning is trained).
TRAINABLE = frozenset({"assistant"})


class Segment(NamedTuple):
    """One piece of a written conversation.

    Attributes:
        text: the characters.
        kind: one of :data:`KINDS`.
        markup: True for format text (special-token strings in it become their ids), False
            for data from the conversation (encoded as plain text, see
            :func:`rmlprep.chat.encode_chat`).
    """

    text: str
    kind: str
    markup: bool


class Out:
    """Collects segments; adjacent markup of one kind is merged, data is always kept apart."""

    __slots__ = ("segs", "notes", "noted_at", "user_at")

    def __init__(self) -> None:
        self.segs: list[Segment] = []
        self.notes: dict[str, int] = {}
        self.noted_at: list[tuple[str, int, int]] = []  # (what, n, len(segs) when noted)
        self.user_at = -1  # len(segs) at the last user content, written or empty (untrain_history)

    def note(self, what: str, n: int = 1) -> None:
        """Count something the conversation lost by the format's own rule (``reasoning_dropped``)."""
        self.notes[what] = self.notes.get(what, 0) + n
        self.noted_at.append((what, n, len(self.segs)))

    def t(self, text: str, kind: str = "template") -> None:
        """Format text (markup) of ``kind``: template text, or a wrapper inside a turn."""
        if not text:
            return
        if self.segs and self.segs[-1].markup and self.segs[-1].kind == kind:
            self.segs[-1] = Segment(self.segs[-1].text + text, kind, True)
        else:
            self.segs.append(Segment(text, kind, True))

    def c(self, text: str, kind: str) -> None:
        """Data from the conversation (a content, a reasoning, a tool-call argument...)."""
        if kind == "user":  # an empty one writes no segment but is a user turn all the same
            self.user_at = len(self.segs)
        if text:
            self.segs.append(Segment(text, kind, False))

    def a(self, text: str) -> None:
        """Assistant-side format text (terminators, tool-call wrappers)."""
        self.t(text, "assistant")

    def extend(self, segs) -> None:
        for s in segs:
            if s.markup:
                self.t(s.text, s.kind)
            else:
                self.c(s.text, s.kind)

    def text(self) -> str:
        return "".join(s.text for s in self.segs)


def strip_segments(segs: list[Segment]) -> list[Segment]:
    """Apply ``str.strip()`` to the concatenation of ``segs``, keeping the segmentation.

    Needed where a template strips a string it built from several parts (Llama 2 strips
    ``'<<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' + user`` as a whole).
    """
    segs = list(segs)
    for i, s in enumerate(segs):  # leading
        stripped = s.text.lstrip()
        segs[i] = s._replace(text=stripped)
        if stripped:
            break
    for i in range(len(segs) - 1, -1, -1):  # trailing
        stripped = segs[i].text.rstrip()
        segs[i] = segs[i]._replace(text=stripped)
        if stripped:
            break
    return [s for s in segs if s.text]


#: Notes about how a turn is trained: void for a turn that ``train_turns="last"`` leaves out.
_TRAINING_NOTES = ("answers_without_think",)


def untrain_history(out: Out) -> int:
    """Leave the assistant turns before the last user message out of the loss mask
    (``train_turns="last"``): their ``assistant`` and ``reasoning`` segments become ``history``
    (text unchanged, so the ids are too), and notes about how such a turn is trained
    (``answers_without_think``) are withdrawn. The turns after the last user message (its
    answer, with the tool calls and tool results that lead to it) stay trainable. This is
    LLaMA-Factory's ``mask_history``, except that it trains only the final response of a
    tool-calling exchange, and here its calls are trained too.

    Returns the number of turns left out (each run of adjacent assistant/reasoning segments
    is one turn), also noted as ``history_untrained``. Worked example: ``[user "Hi", assistant "Hello", user "Bye", assistant "Ok"]``
    in ChatML gives segments ``...user "Hi"... assistant "Hello<|im_end|>"... user "Bye"...
    assistant "Ok<|im_end|>"``; the first assistant run becomes ``history``: returns 1.
    """
    # the last user turn's place: an empty one has no segment (a user segment's index missed it,
    # and the answers before it stayed trained)
    last = max(out.user_at, max((i for i, s in enumerate(out.segs) if s.kind == "user"), default=-1))
    turns, inside = 0, False
    for i in range(last):
        s = out.segs[i]
        if s.kind in ("assistant", "reasoning"):
            turns += not inside
            out.segs[i] = s._replace(kind="history")
            inside = True
        else:
            inside = False
    for what, n, at in out.noted_at:
        if what in _TRAINING_NOTES and at < last:
            out.notes[what] -= n
            if not out.notes[what]:
                del out.notes[what]
    if turns:
        out.note("history_untrained", turns)
    return turns


def tojson(value: Any, indent: int | None = None) -> str:
    """Jinja's ``tojson`` as transformers defines it: ``json.dumps(value, ensure_ascii=False)``.

    Source: transformers ``utils/chat_template_utils.py`` (``tojson`` filter).
    """
    return json.dumps(value, ensure_ascii=False, indent=indent)


def jinja_trim(text: str) -> str:
    """Jinja's ``trim`` filter: ``str.strip()`` (Unicode whitespace)."""
    return text.strip()
