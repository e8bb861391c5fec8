"""The escape hatch for the long tail: ``chat.format = "template"`` renders each conversation with
the model's own Jinja template in jinja2's sandbox, as transformers does.

Opt-in and slower than a native format (1 + 2 x assistant-turns renders per conversation).
The assistant mask comes from renders of prefixes: assistant message ``i`` spans from the end
of ``render(messages[:i], add_generation_prompt=True)`` (for ``i = 0``, also past the generation
prompt where the template writes it only after a message, as Zephyr's does) to the end of
``render(messages[:i + 1])`` less trailing whitespace (the newline a template writes after a
turn's terminator) and less an ``eos_token`` the template writes only where a conversation
ends instead of the generation prompt (Phi-3's ``<|endoftext|>`` after the last ``<|end|>``:
no part of the turn; a native format leaves it out too). Both must be prefixes of the whole render; a template for which they
are not (one that rewrites earlier turns, such as Qwen3 dropping reasoning from history) is
refused for that conversation, naming the turn; so is an answer the template ends with no
terminator (GLM-4.6 ends a turn with the next ``<|user|>``): its mask would teach no stop
token. A field the template ignores (its render is
the same without it: ``reasoning_content``, ``tool_calls``, ``tools``, text parts that SmolLM3's
template renders as an empty content...) is refused too,
so nothing is dropped silently (a template that raises once the field is gone reads it: Qwen2.5
on a ``content: null`` tool call without its ``tool_calls``), and so are text parts a template writes as a Python list. The render is tokenized as a whole, as transformers does:
special-token text inside a message becomes its control token (native formats never do that).

A template that renders the conversation but raises on one of the prefix renders is refused
saying so ("renders the conversation but not its first 3 messages..."): the error is about
rmlprep's probe, not the data.

Source: transformers ``apply_chat_template`` (``return_assistant_tokens_mask`` needs a
``{% generation %}`` block; rendering prefixes needs none).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import ChatFormatError
from .messages import Conversation, parse_conversation
from .registry import template_view
from .render import render
from .segments import Out

__all__ = ["TemplateWriter", "parsed_special_text", "TEMPLATE_RULES"]

#: The version of what ``chat.format = "template"`` makes of a conversation besides the template
#: itself (how it is rendered, cut and masked): :attr:`rmlprep.chat.ChatFormat.rules` for the
#: native formats, held by done markers (:func:`rmlprep.pipeline.late_keys.chat_rules`).
#: 2: reasoning reaches the template under the name(s) the row gave it, as transformers passes
#: it (it went under both reasoning_content and thinking): one the template does not read is refused.
TEMPLATE_RULES = 2

#: the names rmlprep reads an assistant's reasoning from (:mod:`rmlprep.chat.messages`)
_REASONING_NAMES = ("reasoning_content", "reasoning", "thinking")


class _View:
    """template_view's settings for a model's own template: contents as given (text parts as
    parts, a null content as null), as transformers passes them."""

    parts = "native"
    null_content = "none"


def _drop(conv: Conversation, i: int | None, what: str) -> Conversation:
    if i is None:
        return Conversation(conv.messages, None)
    msgs = list(conv.messages)
    m = msgs[i]
    if what == "reasoning":
        m = type(m)(m.role, m.content, m.parts, None, m.tool_calls, m.tool_call_id, m.name)
    elif what == "tool_calls":
        m = type(m)(m.role, m.content, m.parts, m.reasoning, (), m.tool_call_id, m.name)
    elif what == "text parts":
        m = type(m)(m.role, "", None, m.reasoning, m.tool_calls, m.tool_call_id, m.name)
    msgs[i] = m
    return Conversation(tuple(msgs), conv.tools)


class _ProbeError(ChatFormatError):
    """The template raised on a render rmlprep made for its own checks (a prefix, or the
    conversation without one field), not on the conversation itself."""


class TemplateWriter:
    """Writes conversations with a model's own chat template (see the module docstring).

    Args:
        template: the Jinja chat template.
        bos_token, eos_token: the tokenizer's.
        kwargs: extra template variables (``enable_thinking``...); a ``bos_token`` or
            ``eos_token`` here replaces the tokenizer's, as in transformers.
        tokens: the tokenizer's other special tokens (``Tokenizer.template_tokens``,
            :func:`rmlprep.folder_config.template_tokens`), passed as transformers passes them.
        today: the date ``strftime_now`` returns (ISO), default 2024-07-26.
    Raises:
        ChatFormatError: jinja2 is not installed, the template does not compile, it reads
            no variable of one of ``kwargs``' names (a misspelt option would be ignored), or it
            reads a special-token variable whose value rmlprep does not know
            (:func:`~rmlprep.chat.render.refuse_unpassed_tokens`).
    """

    def __init__(self, template: str, *, bos_token: str | None, eos_token: str | None,
                 kwargs: Mapping[str, Any] | None = None, today: str | None = None,
                 tokens: Mapping[str, Any] | None = None):
        from .render import check_template_options, compile_template, refuse_unpassed_tokens

        compile_template(template, today or "2024-07-26")  # first: jinja2 missing or a bad template says so
        check_template_options(template, kwargs)  # the caller's options, not the tokens passed besides them
        refuse_unpassed_tokens(template, kwargs, tokens)
        self.template = template
        opts = dict(kwargs or {})  # transformers: {**special_tokens_map, **kwargs}, the options win (bos/eos too)
        self.bos_token, self.eos_token = opts.pop("bos_token", bos_token), opts.pop("eos_token", eos_token)
        # an unset token is not passed
        self.kwargs = {**{k: v for k, v in (tokens or {}).items() if v is not None}, **opts}
        self.today = today or "2024-07-26"
        self._eos_end: bool | None = None
        self._prompt: str | None = None
        self._names: dict[int, tuple[str, ...]] = {}  # message -> the names its reasoning was given under

    def _render(self, conv: Conversation, gen: bool, probe: str | None = None) -> str:
        """The template's render of ``conv``; ``probe`` names what a render of rmlprep's own
        making (not the user's conversation) stands for, so a template error there is not
        reported as the template refusing the data."""
        msgs, tools = template_view(conv, _View)
        for i, d in enumerate(msgs):  # the reasoning under the row's own names only, as transformers passes it
            if "reasoning_content" in d and i in self._names:
                r = d.pop("reasoning_content")
                d.pop("thinking", None)
                d.update(dict.fromkeys(self._names[i], r))
        r = render(self.template, msgs, tools=tools, add_generation_prompt=gen, bos_token=self.bos_token,
                   eos_token=self.eos_token, now=self.today, **self.kwargs)
        if "error" in r:
            if probe is not None:
                raise _ProbeError(f"the chat template renders the conversation but not {probe}, which rmlprep renders "
                                  f"to derive the assistant mask ({r['error']}), so the mask cannot be derived; "
                                  "use a native format")
            nulls = [i for i, m in enumerate(conv.messages) if m.content is None]
            hint = (f"; message {nulls[0]} ({conv.messages[nulls[0]].role}) has a null content (tool calls without text, "
                    "as OpenAI's schema and chat.json_tools write them) and this template reads every content as a "
                    "string, as transformers' apply_chat_template would fail too: give such messages content \"\""
                    if nulls and "NoneType" in r["error"] else "")
            raise ChatFormatError(f"the chat template refuses this conversation: {r['error']}{hint}")
        return r["output"]

    def write(self, messages: Any, *, add_generation_prompt: bool = False, tools: Any = None) -> Out:
        """Render and split into template / assistant segments (all markup).

        Raises:
            ChatFormatError: a schema error, the template refuses the conversation or ignores
                one of its fields, or a prefix render is not a prefix of the whole.
        """
        conv = messages if isinstance(messages, Conversation) else parse_conversation(messages, tools)
        self._names = ({i: tuple(k for k in _REASONING_NAMES if m.get(k) is not None) for i, m in enumerate(messages)
                        if isinstance(m, Mapping) and any(m.get(k) is not None for k in _REASONING_NAMES)}
                       if not isinstance(messages, Conversation) and len(messages) == len(conv.messages) else {})
        try:
            return self._write(conv, add_generation_prompt)
        finally:
            self._names = {}

    def _write(self, conv: Conversation, add_generation_prompt: bool) -> Out:
        full = self._render(conv, add_generation_prompt)
        for i, m in enumerate(conv.messages):
            if m.parts is not None and str([{"type": "text", "text": p} for p in m.parts]) in full:
                raise ChatFormatError(f"message {i} ({m.role}): the chat template writes text parts as a Python list; "
                                      "join them into one string first")
        checks: list[tuple[int | None, str]] = [(None, "tools")] if conv.tools else []
        for i, m in enumerate(conv.messages):
            if m.reasoning is not None:
                checks.append((i, "reasoning"))
            if m.tool_calls:
                checks.append((i, "tool_calls"))
            if m.parts is not None and "".join(m.parts).strip():
                checks.append((i, "text parts"))
        for i, what in checks:
            try:
                same = self._render(_drop(conv, i, what), add_generation_prompt, "it without that field") == full
            except _ProbeError:
                # The template raises once the field is gone (Qwen's `+ message.content` on a null
                # content whose tool_calls were dropped): it reads the field, which is what is asked.
                same = False
            if same:
                where = "tools" if i is None else f"message {i} ({conv.messages[i].role}): {what}"
                if what == "text parts":  # SmolLM3's `content if content is string else ""`
                    raise ChatFormatError(f"{where}: the chat template ignores them (it renders the message as if "
                                          "its content were empty); join them into one string first")
                if what == "reasoning" and (other := self._read_name(conv, i, add_generation_prompt, full)):
                    raise ChatFormatError(f"{where}: the chat template ignores it under "
                                          f"{' and '.join(map(repr, self._names[i]))} (the render is the same without "
                                          f"it, as transformers' apply_chat_template writes the row) and reads it as "
                                          f"{other!r}: rename the field")
                raise ChatFormatError(f"{where}: the chat template ignores it (the render is the same without it); "
                                      "drop it, or use a template that writes it")
        o = Out()
        pos = 0
        for i, m in enumerate(conv.messages):
            if m.role != "assistant":
                continue
            head = (self._render(Conversation(conv.messages[:i], conv.tools), True,
                                 f"its first {i} messages with the generation prompt") if i else None)
            upto = self._render(Conversation(conv.messages[: i + 1], conv.tools), False, f"its first {i + 1} messages")
            upto = self._without_ending(upto)
            start = len(head) if head is not None else self._first_start(conv, full)
            if head is not None and not full.startswith(head):
                self._refuse_prompt(conv, i, head, full)
            if not full.startswith(upto) or len(upto) < start:
                raise ChatFormatError(f"message {i} (assistant): the chat template renders the conversation up to this "
                                      "turn differently from the whole conversation (it rewrites earlier turns), so "
                                      "its mask cannot be derived; use a native format")
            end = len(upto.rstrip())
            answer = m.text.strip()
            if answer and not m.tool_calls and full[start:max(start, end)].endswith(answer):
                raise ChatFormatError(f"message {i} (assistant): the chat template writes nothing after the answer (no "
                                      "turn terminator such as an eos token; the next turn's header ends it), so the "
                                      "mask would teach no stop token; use a native format")
            if start < pos:
                raise ChatFormatError(f"message {i} (assistant): the chat template's turns overlap")
            o.t(full[pos:start])
            o.a(full[start:max(start, end)])
            pos = max(start, end)
        o.t(full[pos:])
        return o

    def _refuse_prompt(self, conv: Conversation, i: int, head: str, full: str) -> None:
        """Raise for assistant message ``i`` whose prefix render with the generation prompt
        (``head``) is not a prefix of the whole render ``full``: where the render without the
        prompt is one, the cause is the prompt itself, which the template writes otherwise than
        the turn it opens (a DeepSeek-R1-Distill template's ``<think>`` after ``<｜Assistant｜>``, before an
        answer it writes without one); else the template rewrites earlier turns.

        Raises:
            ChatFormatError: naming the message and the cause, always.
        """
        bare = self._render(Conversation(conv.messages[:i], conv.tools), False, f"its first {i} messages")
        if full.startswith(bare) and head.startswith(bare):
            prompt, n = head[len(bare):], len(bare)
            k = next((j for j, (x, y) in enumerate(zip(prompt, full[n:])) if x != y), min(len(prompt), len(full) - n))
            raise ChatFormatError(
                f"message {i} (assistant): the chat template's generation prompt {prompt!r} is not how it writes "
                f"this turn in the whole conversation ({full[n:n + k + 12]!r}...; they part at character {k} of the "
                "prompt), so the prompt's end cannot mark where the answer starts and its mask cannot be derived; "
                "use a native format")
        raise ChatFormatError(f"message {i} (assistant): the chat template renders the conversation up to this "
                              "turn differently from the whole conversation (it rewrites earlier turns), so "
                              "its mask cannot be derived; use a native format")

    def _read_name(self, conv: Conversation, i: int, gen: bool, full: str) -> str | None:
        """The first name besides the row's under which the template writes message ``i``'s
        reasoning (its render then differs from ``full``), or None."""
        given = self._names.get(i)
        if given is None:
            return None
        try:
            for name in _REASONING_NAMES:
                if name not in given:
                    self._names[i] = (name,)
                    if self._render(conv, gen, "it with the reasoning renamed") != full:
                        return name
        except _ProbeError:
            return None
        finally:
            self._names[i] = given
        return None

    def _without_ending(self, upto: str) -> str:
        """``upto`` (the render of the messages through an assistant turn, no generation prompt)
        without the ``eos_token`` a template writes at the end of every conversation where the
        generation prompt would go (:meth:`_ends_with_eos`): that eos is no part of the turn
        (the model ends a turn with its terminator and never writes the eos after it), and a
        native format leaves it out of the mask too. Worked example (phi3.jinja, ``[user "Hi",
        assistant "Hello"]``): ``<|user|>\nHi<|end|>\n<|assistant|>\nHello<|end|>\n<|endoftext|>``;
        the turn ends at ``<|end|>``. Other templates: ``upto`` as it is."""
        base = upto.rstrip()
        if self.eos_token and base.endswith(self.eos_token) and self._ends_with_eos():
            return base[: len(base) - len(self.eos_token)]
        return upto

    def _ends_with_eos(self) -> bool:
        """The template writes ``eos_token`` after the last message instead of the generation
        prompt: ``[user "Hi"]`` renders as ``X + eos`` without the prompt and ``X + prompt``
        with it (Phi-3: ``<|user|>\nHi<|end|>\n<|endoftext|>`` and ``...<|end|>\n<|assistant|>\n``).
        A template whose eos ends each turn (Zephyr's ``</s>``, kept with the prompt too) or
        only the last answer (gpt-oss's ``<|return|>``, its final terminator) is not one.
        Rendered once per writer."""
        if self._eos_end is None:
            eos, probe = self.eos_token, parse_conversation([{"role": "user", "content": "Hi"}])
            try:
                plain, gen = self._render(probe, False).rstrip(), self._render(probe, True)
            except (ChatFormatError, IndexError):
                plain = gen = ""
            self._eos_end = bool(eos and plain.endswith(eos) and not gen.startswith(plain)
                                 and gen.startswith(plain[: len(plain) - len(eos)]))
        return self._eos_end

    def _generation_prompt(self) -> str | None:
        """What the generation prompt adds after a user turn: ``render([user "Hi"], True)`` less
        ``render([user "Hi"], False)`` (less the eos a template writes there instead, see
        :meth:`_ends_with_eos`); a template that wants a system message first is probed with
        one. None when no probe renders, or the prompt render does not extend the plain one.
        Worked example (zephyr.jinja): ``<|user|>\nHi</s>\n`` and
        ``<|user|>\nHi</s>\n<|assistant|>\n``: the prompt is ``<|assistant|>\n``. Rendered once
        per writer."""
        if self._prompt is None:
            self._prompt = ""
            for msgs in ([{"role": "user", "content": "Hi"}],
                         [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}]):
                probe = parse_conversation(msgs)
                try:
                    plain, gen = self._render(probe, False), self._render(probe, True)
                except (ChatFormatError, IndexError):
                    continue
                if self._ends_with_eos():
                    plain = self._without_ending(plain)
                if gen.startswith(plain) and len(gen) > len(plain):
                    self._prompt = gen[len(plain):]
                break
        return self._prompt or None

    def _first_start(self, conv: Conversation, full: str) -> int:
        """Where a first-message assistant turn starts: after the render of no messages with
        the generation prompt, and after the generation prompt itself where that render does
        not write it but the conversation's does. Zephyr's template writes its prompt only
        after a last message (``loop.last and add_generation_prompt``), so its render of no
        messages is ``""`` while ``[assistant "Hello"]`` renders ``<|assistant|>\nHello</s>\n``:
        the answer starts after ``<|assistant|>\n``, the header, as in every later turn and in
        the native ``zephyr`` format.

        Raises:
            ChatFormatError: the template cannot render that, or not as a prefix.
        """
        try:
            head = self._render(Conversation((), conv.tools), True)
        except (ChatFormatError, IndexError):
            head = None
        if head is None or not full.startswith(head):
            raise ChatFormatError("message 0 (assistant): the chat template does not show where a first answer "
                                  "starts (its render of no messages is not a prefix); start with a user message")
        prompt = self._generation_prompt()
        if prompt and not head.endswith(prompt) and full.startswith(prompt, len(head)):
            return len(head) + len(prompt)
        return len(head)


def parsed_special_text(tokenizer, messages: Any, tools: Any = None) -> bool:
    """Whether a conversation's own strings (contents, text parts, reasoning, tool calls and
    definitions, keys included) hold control-token text (``<|im_end|>``, ``[INST]``, ``<s>``)
    that ``chat.format = "template"`` encodes as the control token.

    The template's render is tokenized whole with special tokens parsed, as transformers'
    ``apply_chat_template(tokenize=True)`` does, so a user who typed ``<|im_end|>`` gets the
    turn-end id inside the turn; a native format encodes such text as text. The run counts these
    conversations (``special_text_parsed``) so that it is never silent. Added tokens that are
    not special (Qwen2.5's ``<tool_call>``) are cut out of message text by every path and do not
    count.

    Example (Qwen2.5): a user content ``"a<|im_end|>b"`` -> True; ``"a<tool_call>b"`` -> False.
    """
    stack = [messages, tools]
    may_hold = getattr(tokenizer, "may_hold_added", None)  # one regex search before the cuts
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if may_hold is not None and not may_hold(v):
                continue
            ids = sum(isinstance(f, int) for f in tokenizer.cut_added(v, parse_special=True))
            if ids and ids != sum(isinstance(f, int) for f in tokenizer.cut_added(v)):
                return True
        elif isinstance(v, Mapping):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
    return False
