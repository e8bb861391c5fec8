"""Gemma family: Gemma 1/2 and Gemma 3 (``<start_of_turn>``), Gemma 4 (``<|turn>``).

Worked example (``gemma3``, ``[system "Be brief.", user "Hi", assistant "Hello"]``)::

    <bos><start_of_turn>user\\n               template         mask 0
    Be brief.\\n\\nHi<end_of_turn>\\n          system, user     0
    <start_of_turn>model\\n                   template (generation prompt)   0
    Hello<end_of_turn>                        assistant        1
    \\n                                       template         0
"""

from __future__ import annotations

from ..errors import ChatFormatError
from .base import ChatFormat, alternate
from .messages import Conversation
from .segments import Out

__all__ = ["FORMATS"]

BOS = "<bos>"
SOT, EOT = "<start_of_turn>", "<end_of_turn>"


def _gemma(conv: Conversation, gen: bool, *, system_ok: bool, name: str) -> Out:
    msgs = conv.messages
    start = 0
    system = None
    if msgs[0].role == "system":
        if not system_ok:
            raise ChatFormatError(f"message 0 is a system message, which {name} does not support (Gemma 1/2 "
                                  "templates refuse it; use gemma3, or fold it into the first user message)")
        m0 = msgs[0]
        if m0.parts is not None and len(m0.parts) != 1:
            raise ChatFormatError(f"message 0 (system): {name}'s template writes only the first part of a system "
                                  "message given as parts; give one text")
        system, start = m0.text, 1
        if len(msgs) == 1:
            raise ChatFormatError(f"message 0 is a system message with no user message after it ({name}'s template "
                                  "would write only BOS)")
    alternate(msgs, name, start=start)
    o = Out()
    o.t(BOS)
    for j, m in enumerate(msgs[start:]):
        role = "model" if m.role == "assistant" else m.role
        o.t(f"{SOT}{role}\n")
        if j == 0 and system is not None:
            o.c(system, "system")
            o.t("\n\n")
        # Gemma 3 trims each text part and joins them; a string content is trimmed whole, and
        # so are Gemma 1's parts once joined (its template takes a string: registry "join")
        text = "".join(p.strip() for p in m.parts) if m.parts is not None and system_ok else m.text.strip()
        if m.role == "assistant":
            o.c(text, "assistant")
            o.a(EOT)
            o.t("\n")
        else:
            o.c(text, m.role)
            o.t(EOT + "\n")
    if gen:
        o.t(f"{SOT}model\n")
    return o


def _w_gemma(conv: Conversation, gen: bool, opts) -> Out:
    """Gemma 1/2: ``<bos>``, ``<start_of_turn>user\\n{content.strip()}<end_of_turn>\\n``, ``model``
    for the assistant; generation prompt ``<start_of_turn>model\\n``. Roles alternate; a
    system message is refused (the template raises). Text parts are joined with ``""``, then
    stripped as a string content is (the template has no parts handling: given a list it
    writes the list's Python repr).

    Source: gemma.jinja (google/gemma-2-2b-it; gemma-7b-it has the same logic).
    """
    return _gemma(conv, gen, system_ok=False, name="gemma")


def _w_gemma3(conv: Conversation, gen: bool, opts) -> Out:
    """Gemma 3: as Gemma, with the optional system message folded into the first user turn
    as ``{system}\\n\\n`` (the system text is not stripped, the user text is); text parts are
    each stripped and joined.

    Source: gemma3.jinja (google/gemma-3-270m-it).
    """
    return _gemma(conv, gen, system_ok=True, name="gemma3")


def _strip_thinking(text: str) -> str:
    """Gemma 4's ``strip_thinking`` macro: drop every ``<|channel>...<channel|>`` span, strip."""
    out = []
    for part in text.split("<channel|>"):
        out.append(part.split("<|channel>")[0] if "<|channel>" in part else part)
    return "".join(out).strip()


def _w_gemma4(conv: Conversation, gen: bool, opts) -> Out:
    """Gemma 4: ``<bos>``; a system turn ``<|turn>system\\n{system.strip()}<turn|>\\n`` when the
    first message is a system message or ``enable_thinking`` is on (then it starts with
    ``<|think|>\\n``); then ``<|turn>user\\n{content.strip()}<turn|>\\n`` and
    ``<|turn>model\\n{content}<turn|>\\n`` (the model text without ``<|channel>...<channel|>``
    spans, stripped); consecutive assistant messages share one model turn; later system
    messages are system turns. The generation prompt is ``<|turn>model\\n`` followed, unless
    ``enable_thinking``, by an empty thought channel. Reasoning is written only before tool
    calls, which rmlprep's ``gemma4`` does not write yet: a reasoning in the last assistant
    turn is refused, one in an earlier turn is dropped as the template drops it (counted).

    Source: more/google-gemma-4-31B-it.jinja.
    """
    msgs = conv.messages
    think = bool(opts.get("enable_thinking"))
    o = Out()
    o.t(BOS)
    start = 0
    if think or msgs[0].role == "system":
        o.t("<|turn>system\n" + ("<|think|>\n" if think else ""))
        if msgs[0].role == "system":
            if msgs[0].parts is not None:
                raise ChatFormatError("message 0 (system): gemma4's template writes a system message given as "
                                      "parts as a Python list; give one text")
            o.c(msgs[0].text.strip(), "system")
            start = 1
        o.t("<turn|>\n")
    loop = msgs[start:]
    last_assistant = max((j for j, m in enumerate(loop) if m.role == "assistant"), default=None)
    last_user = max((j for j, m in enumerate(loop) if m.role == "user"), default=-1)
    for j, m in enumerate(loop):
        if m.role == "assistant" and m.reasoning:
            if j == last_assistant and j > last_user:
                raise ChatFormatError(f"message {j + start} (assistant): gemma4's template writes reasoning only "
                                      "before tool calls; it would drop this answer's reasoning")
            o.note("reasoning_dropped")
        role = "model" if m.role == "assistant" else m.role
        if not (role == "model" and j > 0 and loop[j - 1].role == "assistant"):
            o.t(f"<|turn>{role}\n")
        if m.role == "assistant":
            texts = m.parts if m.parts is not None else (m.text,)
            o.c("".join(_strip_thinking(t) for t in texts), "assistant")
            o.a("<turn|>")
            o.t("\n")
        else:
            texts = m.parts if m.parts is not None else (m.text,)
            o.c("".join(t.strip() for t in texts), m.role)
            o.t("<turn|>\n")
    if gen:
        o.t("<|turn>model\n" + ("" if think else "<|channel>thought\n<channel|>"))
    return o


FORMATS = [
    ChatFormat("gemma", _w_gemma, bos=BOS, eos="<eos>", terminator=EOT, stop=EOT, source="gemma.jinja"),
    ChatFormat("gemma3", _w_gemma3, bos=BOS, eos="<eos>", terminator=EOT, stop=EOT, parts="native",
               source="gemma3.jinja"),
    ChatFormat("gemma4", _w_gemma4, bos=BOS, eos="<eos>", terminator="<turn|>", stop="<turn|>", parts="native",
               reasoning=True, options={"enable_thinking": None}, template_vars=frozenset({"enable_thinking"}),
               probe_options=({"enable_thinking": True},), source="more/google-gemma-4-31B-it.jinja"),
]
