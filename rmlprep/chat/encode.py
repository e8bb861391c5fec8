"""Encoding a written conversation: token ids, the loss mask, labels.

How text becomes ids (:func:`encode_chat`):

* the added tokens are cut out of the whole render at once
  (:meth:`~rmlprep.tokenizer.Tokenizer.cut_added_parts`, leftmost-longest as ``tokenizers``
  cuts the joined string, normalized added tokens after normalization): in format text
  (``markup`` segments: BOS, headers, terminators, wrappers) every special token becomes its
  id; a marker that is not a token of this vocabulary (Llama 2's ``[INST]``) stays text;
* data (contents, reasoning, tool-call arguments, tool results) is never parsed for control
  tokens, so ``"<|im_end|>"`` written by a user cannot end a turn; only the tokenizer's
  user-defined added tokens (Hugging Face ``special: false``, such as Qwen's ``<think>`` and
  ``<tool_call>``, Gemma 3's ``"\\n\\n"``) are cut out of it, as the reference tokenizer cuts
  them out of any text, also where one spans data and format text (an id covering a trainable
  segment is trainable); a render where no such cut is exact (control-token text spanning
  data and format text, a normalizer that changes text across a border) is refused with a
  :class:`~rmlprep.errors.TokenizeError`, a row reject;
* everything is encoded in one ``encode_fragments(..., add_special_tokens=False)`` call, so
  BPE works across fragment borders exactly as for the whole string. BOS and EOS are where the
  template writes them, never added by the tokenizer's ``add_bos``/``add_eos``: a format whose
  template writes BOS starts with exactly one BOS (as transformers' ``apply_chat_template``
  tokenizes with ``add_special_tokens=False``); a sentencepiece ``.model`` read alone puts its
  dummy prefix before each text between special tokens, not before that BOS (one ``sp.encode``
  per text, as mistral-common and transformers' ``legacy=True`` encode; a space that starts
  format text right after a special token: :func:`rmlprep.spm_special.per_text_fragments`).
  Special ids with Hugging Face ``rstrip``/``lstrip`` flags swallow the whitespace next to
  them, as encoding the whole string would. So for a conversation whose data holds no control-token text,
  ``input_ids == tokenizer.encode(format_chat(...))`` (not for a ``.model`` without tokenizer.json,
  whose ``encode`` refuses parsed control-token text: :mod:`rmlprep.spm_special`).

Mask rule: token ``i`` gets mask 1 iff its byte span overlaps a trainable segment (kind
``assistant``, and ``reasoning`` when reasoning is trained; see :mod:`rmlprep.chat.segments`).
A token that straddles template text and an answer (SentencePiece ``"▁answer"``; a byte-level
``"\\n\\n"`` whose first newline is the template's) is in the mask: the model must emit it to
produce the answer. A zero-width token is in the mask iff its offset lies inside a trainable span.
A template's special token whose ``rstrip``/``lstrip`` swallows an answer's edge whitespace
(Phi-3's ``<|assistant|>`` before an answer that starts with spaces: ``tokenizers`` gives it
the offsets of ``"<|assistant|>\\n  "``) is not: it is the template's marker, which the model
must not learn to write, and the swallowed whitespace is in no token either way.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ChatFormatError
from ..spm_special import UnprefixedText, per_text_fragments
from .convert import join_parts_for_call
from .fmt_mistral import tokenizer_options
# TRAIN_TURNS and train_turns_refusal live in the registry beside the other option refusals; kept importable here
from .registry import TRAIN_TURNS, get_format, train_turns_refusal, untrained_reasoning_refusal, write
from .segments import TRAINABLE, Segment, untrain_history

__all__ = ["ChatEncoding", "TRAIN_TURNS", "auto_format", "defaulted_refusal", "encode_chat", "encode_segments",
           "missing_stop_token", "refuse_chat_before_corpus", "train_turns_refusal",
           "stop_token_refusal", "stop_ids", "template_specials", "template_stop"]


@dataclass(slots=True)
class ChatEncoding:
    """One encoded conversation.

    Attributes:
        input_ids: token ids (list of int), BOS only where the template writes it.
        assistant_masks: 0/1 per token (list of int): 1 on what the model is trained to write
            (assistant text, tool calls, turn terminators; reasoning unless turned off).
        labels: ``input_ids`` where the mask is 1, ``-100`` elsewhere; not shifted, position 0
            not masked (a shifting loss never targets it; packing masks it: README "Masks").
        notes: counts of what the format's own rules left out (``reasoning_dropped``) and, with
            ``train_turns="last"``, ``history_untrained`` (turns left out of the mask).
    """

    input_ids: list[int]
    assistant_masks: list[int]
    labels: list[int]
    notes: dict[str, int] = field(default_factory=dict)

    @property
    def assistant_mask(self) -> list[int]:
        """Deprecated name of :attr:`assistant_masks` (the column name); removed in the next release."""
        warnings.warn("ChatEncoding.assistant_mask is deprecated; use assistant_masks (the column's name)",
                      DeprecationWarning, stacklevel=2)
        return self.assistant_masks


def encode_segments(tokenizer, segs: Sequence[Segment], *, train_on_reasoning: bool = True,
                    fmt: str | None = None) -> tuple[list[int], np.ndarray]:
    """Encode written segments: (ids, uint8 mask). See the module docstring.

    ``fmt`` (the name of the format that wrote ``segs``; None: a template or unknown) matters
    only on a SentencePiece ``.model`` read alone, where text right after a special token that
    starts with a space is encoded as mistral-common does for its formats and refused for the
    others (:func:`rmlprep.spm_special.per_text_fragments`).

    The added tokens are cut out of the whole render at once by
    :meth:`~rmlprep.tokenizer.Tokenizer.cut_added_parts`, markup parsed for every special
    token and data as ``parse_special=False``, so a token spanning a border (Gemma 3's
    user-defined ``"\\n\\n\\n"`` after a system prompt ending in ``"\\n"``) is the reference's one
    id; an id covering a trainable segment is trainable.

    Raises:
        TokenizeError: a render whose added tokens no part-by-part cut gives exactly (see
            ``cut_added_parts``: a token's text across template and message text, a normalizer
            changing text across a border); a row reject in the sft run. UnprefixedText (a
            TokenizeError): the ``.model`` case above.
        ChatFormatError: ``train_on_reasoning`` off and an answer segment holding a ``<think>`` or
            ``</think>`` the format writes as answer text (gpt-oss, gemma4: their reasoning has
            its own channel, content is written verbatim), which would be trained; a row reject.
    """
    if not train_on_reasoning:
        for s in segs:
            if s.kind in TRAINABLE and not s.markup and ("<think>" in s.text or "</think>" in s.text):
                raise ChatFormatError(
                    f"an answer holds {'<think>' if '<think>' in s.text else '</think>'} that "
                    f"{'format ' + repr(fmt) if fmt else 'the template'} writes as answer text, so it would be "
                    "trained although train_on_reasoning is off; give that reasoning as reasoning_content (the "
                    "format's own reasoning, left out of the mask), take it out of the data, or train on it")
    trainable = TRAINABLE | ({"reasoning"} if train_on_reasoning else set())
    flags = [s.kind in trainable for s in segs]
    frags: list = []  # text pieces and special ids, in order
    train: list[bool] = []
    markup: list[bool] = []
    for f, a, b in tokenizer.cut_added_parts([(s.text, s.markup) for s in segs]):
        frags.append(f)
        train.append(flags[a] if a == b else any(flags[a:b + 1]))
        markup.append(all(s.markup for s in segs[a:b + 1]))
    frags = per_text_fragments(tokenizer, frags, markup, fmt)  # a .model read alone: one '▁' per text
    spans: list[tuple[int, int]] = []  # trainable byte spans in the fragments' concatenation
    pos = 0
    token_bytes = tokenizer.token_bytes
    for p, t in zip(frags, train):
        start = pos
        if isinstance(p, str):
            pos += len(p) if p.isascii() else len(p.encode("utf-8", "surrogatepass"))
        else:
            pos += len(token_bytes(p))
        if t and pos > start:
            if spans and spans[-1][1] == start:
                spans[-1] = (spans[-1][0], pos)
            else:
                spans.append((start, pos))
    ids, starts = tokenizer.encode_fragments(frags, add_special_tokens=False, normalized=tokenizer.cuts_normalized)
    return ids, _mask_from_spans(starts, pos, spans)


def encode_chat(tokenizer, messages: Any, fmt: str, *, add_generation_prompt: bool = False, tools: Any = None,
                options: Mapping[str, Any] | None = None, train_on_reasoning: bool = True, text_markers: bool = False,
                train_turns: str = "all", join_text_parts: str | None = None) -> ChatEncoding:
    """Encode a conversation with its loss mask.

    Args:
        tokenizer: a :class:`rmlprep.tokenizer.Tokenizer`.
        messages: the conversation (see :mod:`rmlprep.chat.messages`).
        fmt: a format name (:data:`rmlprep.chat.CHAT_FORMATS`); ``"auto"``: the format that
            reproduces the tokenizer's chat template (:func:`auto_format`, as
            :func:`rmlprep.tokenize_chat` takes it); or ``"template"``: the
            tokenizer's own chat template rendered with jinja2 (:mod:`rmlprep.chat.template`;
            ``options`` are then its variables, plus ``today``).
        add_generation_prompt: end with the header that opens an assistant turn.
        tools: the conversation's tool definitions.
        options: the format's options (``enable_thinking``, ``today``...).
        train_on_reasoning: reasoning is in the mask (default) or not (see
            :func:`rmlprep.tokenize_chat`; False with a format that has no reasoning, or with
            ``"template"``, is a ConfigError).
        text_markers: encode a format whose turn terminator is not a special token of the
            tokenizer (ChatML on GPT-2's vocabulary), its markers as text pieces. Default:
            refused (:func:`missing_stop_token`), as by :func:`rmlprep.tokenize_chat` and the
            sft run (``chat.text_markers``): the model would learn no stop token.
        train_turns: ``"all"`` (default) trains every assistant turn; ``"last"`` only those
            after the last user message (its answer, with its tool calls): the earlier turns stay
            in the ids as context, out of the mask, and are counted in ``notes``
            (:func:`rmlprep.chat.segments.untrain_history`; LLaMA-Factory's ``mask_history``).
            Not with ``"template"`` (ConfigError).
        join_text_parts: the join of a content of two or more text parts, as
            :func:`rmlprep.chat.format_chat` (None, default: refused). Not with ``"template"``.
    Returns:
        ChatEncoding (the mask rule is in the module docstring).
    Raises:
        ChatFormatError: unknown format or option, a conversation the format refuses, a
            turn terminator that is not a special token of the tokenizer (see ``text_markers``),
            ``"auto"`` and a template no format reproduces (ChatTemplateError, naming the
            ``fmt`` to pass: :func:`auto_format`),
            or ``"template"`` and a template that reads a GGUF's defaulted bos/eos
            (:func:`template_specials`).
        ConfigError: ``"auto"`` and no chat template; ``train_on_reasoning=False`` and a format without reasoning; a
            ``train_turns`` other than ``"all"``/``"last"``, or ``"last"`` with ``"template"``; a
            ``join_text_parts`` not a string, or given with ``"template"``.
    """
    if fmt == "auto":
        fmt = auto_format(tokenizer, "encode_chat(fmt='auto')")
    if why := train_turns_refusal(fmt, train_turns):
        from ..errors import ConfigError

        raise ConfigError(f"encode_chat(fmt={fmt!r}): {why}")
    if not text_markers and (stop := missing_stop_token(tokenizer, fmt, options)) is not None:
        from ..errors import ChatFormatError

        raise ChatFormatError(f"encode_chat(fmt={fmt!r}): {stop_token_refusal(tokenizer, fmt, stop)}; or pass "
                              "text_markers=True to write them as text")
    if not train_on_reasoning and (why := untrained_reasoning_refusal(fmt)):
        from ..errors import ConfigError

        raise ConfigError(f"encode_chat(fmt={fmt!r}, train_on_reasoning=False): {why}")
    messages = join_parts_for_call(messages, fmt, join_text_parts, "encode_chat")
    if fmt == "template":
        out = _template_writer(tokenizer, options).write(messages, add_generation_prompt=add_generation_prompt,
                                                          tools=tools)
    else:
        out = write(messages, get_format(fmt), add_generation_prompt=add_generation_prompt, tools=tools,
                    options=tokenizer_options(tokenizer, fmt, options))
    if train_turns == "last":
        untrain_history(out)
    ids, mask = encode_segments(tokenizer, out.segs, train_on_reasoning=train_on_reasoning,
                                 fmt=None if fmt == "template" else get_format(fmt).name)
    labels = np.where(mask, np.asarray(ids, dtype=np.int64), -100)
    return ChatEncoding(input_ids=ids, assistant_masks=mask.tolist(), labels=labels.tolist(), notes=dict(out.notes))


def _template_writer(tokenizer, options: Mapping[str, Any] | None):
    from ..errors import ChatFormatError
    from .template import TemplateWriter

    if not getattr(tokenizer, "chat_template", None):
        raise ChatFormatError("format 'template': the tokenizer carries no chat_template")
    bos, eos = template_specials(tokenizer, tokenizer.chat_template, options)
    opts = dict(options or {})
    today = opts.pop("today", None)
    return TemplateWriter(tokenizer.chat_template, bos_token=bos, eos_token=eos, kwargs=opts, today=today,
                          tokens=getattr(tokenizer, "template_tokens", None))


def auto_format(tokenizer, where: str, arg: str = "fmt={!r}") -> str:
    """``fmt="auto"`` of :func:`encode_chat` and :func:`rmlprep.tokenize_chat` (``rmlprep chat
    --format auto``, ``arg="--format {}"``): the format that reproduces the tokenizer's chat
    template (:func:`rmlprep.chat.detect_chat_format`, with the bos/eos of :func:`template_specials`).

    Raises:
        ConfigError: the tokenizer carries no chat template.
        ChatTemplateError: no format reproduces the template, or several do; the message starts
            with ``where`` (the call) and ends with the ``fmt`` values to pass instead: the closest
            format (Meta's first Llama 3 template: ``'llama3'``) and ``'template'``, or the several.
        ChatFormatError: the template reads a GGUF's defaulted bos/eos.
    """
    from ..errors import ConfigError
    from .detect import ChatTemplateError, detect_chat_format, named_templates_note

    template = getattr(tokenizer, "chat_template", None)
    if not template:
        raise ConfigError(f"{where}: the tokenizer carries no chat_template{named_templates_note(tokenizer)}; "
                          "name the format")
    bos, eos = template_specials(tokenizer, template, auto=True)  # a GGUF's defaulted bos/eos read: refused
    try:
        return detect_chat_format(template, bos_token=bos, eos_token=eos)
    except ChatTemplateError as e:
        if e.formats:
            way = "pass one of " + ", ".join(arg.format(f) for f in e.formats)
        elif e.difference is not None:
            way = (f"pass {arg.format(e.difference.format)} to write that format's text (it differs from the template "
                   f"as shown), or {arg.format('template')} to render the template itself with jinja2")
        else:
            way = f"pass {arg.format('template')} to render the template itself with jinja2, or name a format"
        raise ChatTemplateError(f"{where}: {e}\n  in this call: {way}", e.difference, e.formats) from None


def template_specials(tokenizer, template: str, options: Mapping[str, Any] | None = None, *, auto: bool = False,
                      fmt: str | None = None) -> tuple[str | None, str | None]:
    """The ``bos_token`` and ``eos_token`` texts ``template`` is rendered with for ``tokenizer``
    (None where it has no such id: the variable is left undefined, as transformers leaves it).

    A GGUF that names no ``tokenizer.ggml.bos_token_id`` / ``eos_token_id`` has llama.cpp's
    default id (``spec.defaulted_ids``; id 11, ``","`` in a byte-level BPE vocabulary). llama.cpp
    renders a template with that id's text (``common_chat_templates_init``:
    ``common_token_to_piece(vocab, llama_vocab_bos(vocab))``), transformers' GGUF loader sets no
    such token (the variable is undefined), and neither is the model's: a template that reads
    the variable is refused rather than rendered with a guess, unless ``options`` (the template
    options) give its text. A template that does not read it renders the same either way.
    "Reads": :func:`~rmlprep.chat.render.template_variables`; without jinja2 (``"auto"`` proves
    a template by its sha256 then), the name in the text, as llama.cpp looks for it.

    ``auto``: the template is read to detect a format (``chat.format = "auto"``), which passes
    no options, so the message names ``chat.format = "template"`` with the option, or a native
    format (it said to give the option, and "auto" with the option was refused again). ``fmt``: the
    template is rendered to prove that native format (the parity stage), so the message names
    ``parity.chat = false``, which writes the format unchecked (its text is its own, not this id's).

    Raises:
        ChatFormatError: naming the variable, the GGUF key and the ways out.
    """
    from .render import jinja_available, template_variables

    spec = tokenizer.spec
    out = []
    for role, tid in (("bos", spec.bos_id), ("eos", spec.eos_id)):
        var = f"{role}_token"
        if (tid is not None and role in getattr(spec, "defaulted_ids", ()) and var not in (options or {})
                and var in (template_variables(template) if jinja_available() else template)):
            from ..errors import ChatFormatError

            raise ChatFormatError(
                f"the chat template reads {var}, and the GGUF names no tokenizer.ggml.{role}_token_id (or one out of "
                f"range), so its {role} is llama.cpp's default, {tokenizer.id_to_token(tid)!r} (id {tid}): llama.cpp "
                f"would render the template with that text and transformers with none, and neither is the model's; "
                f"name the model's in the file (gguf-py's gguf_new_metadata.py --special-token {role} TOKEN), "
                + (f"or set parity.chat = false to write chat.format = {fmt!r} without comparing it with the template "
                   "(the format writes its own text, not this id's)" if fmt else
                   f"give the text as a template option (chat.format = \"template\" with {var} in chat.options: "
                   "\"auto\" passes no options to the template), or name the native chat format" if auto else
                   f"give the text as a template option ({var} in chat.options), or use a native chat format"))
        out.append(spec.vocab[tid] if tid is not None else None)
    return out[0], out[1]


def defaulted_refusal(tokenizer, template: str, fmt: str) -> str | None:
    """Why ``template`` cannot be rendered to prove the native format ``fmt`` for ``tokenizer``
    (the parity stage): it reads a GGUF's defaulted bos/eos (:func:`template_specials`, whose
    message then names ``parity.chat = false``); None when it can."""
    from ..errors import ChatFormatError

    try:
        template_specials(tokenizer, template, fmt=fmt)
    except ChatFormatError as e:
        return str(e)
    return None


def _mask_from_spans(starts: Sequence[int], total: int, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """uint8 mask: token i (bytes [starts[i], starts[i+1]), the last ending at ``total``) is 1 iff
    it overlaps a trainable span; a zero-width token counts when it sits inside one. ``spans``
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


def missing_stop_token(tokenizer, fmt: str, options: Mapping[str, Any] | None = None) -> str | None:
    """The turn terminator of ``fmt`` (``<|im_end|>``, ``<end_of_turn>``...) when it is not a
    special token of ``tokenizer``, else None. Such a terminator is encoded as text pieces
    (format text is cut only at special tokens, as transformers tokenizes a render): a model
    trained on it learns no stop token. Gemma 1's base ``tokenizer.json`` holds
    ``<end_of_turn>`` as a normal vocabulary entry, not an added token, so both it and
    Hugging Face tokenizers spell it ``<``, ``end``, ``_``, ``of``...

    ``fmt = "template"``: the terminator is what the tokenizer's own chat template (with
    ``options`` as its variables) writes after an answer, whitespace stripped
    (:func:`template_stop`); it must start with a special token. None when the template
    cannot render the probe or writes nothing there (both refused per conversation by
    :class:`rmlprep.chat.template.TemplateWriter`).

    Raises:
        ChatFormatError: unknown format.
    """
    if fmt == "template":
        stop = template_stop(tokenizer, options)
        return stop if stop and not any(stop.startswith(s) for s in tokenizer.special_tokens) else None
    stop = get_format(fmt).stop
    return stop if stop and stop not in tokenizer.special_tokens else None


#: the conversations whose render shows what a template writes after an answer (the second for
#: templates that require a system message)
_STOP_PROBES = ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}],
                [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"},
                 {"role": "assistant", "content": "Hello."}])


def template_stop(tokenizer, options: Mapping[str, Any] | None = None) -> str | None:
    """What the tokenizer's chat template writes after an answer, whitespace stripped: its turn
    terminator. Worked example: Gemma 1's template renders ``[user "Hi", assistant "Hello."]``
    as ``<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n``,
    whose assistant span (:class:`rmlprep.chat.template.TemplateWriter`) is
    ``Hello.<end_of_turn>``, so the terminator is ``<end_of_turn>``.

    Returns:
        The terminator text (truncated to 60 characters), or None: no chat_template, jinja2
        missing, the template refuses both probe conversations, or writes nothing after the
        answer. Cached per tokenizer, template and options.
    """
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        return None
    key = (tokenizer.spec.fingerprint, template, repr(sorted((options or {}).items())))
    if key in _TEMPLATE_STOPS:
        return _TEMPLATE_STOPS[key]
    from ..errors import ChatFormatError

    stop = None
    try:
        writer = _template_writer(tokenizer, options)
    except ChatFormatError:
        writer = None
    for msgs in _STOP_PROBES if writer is not None else ():
        try:
            segs = writer.write(msgs).segs
        except (ChatFormatError, IndexError, TypeError, ValueError):
            continue
        answer = "".join(s.text for s in segs if s.kind in TRAINABLE)
        k = answer.rfind("Hello.")
        if k >= 0:
            stop = answer[k + len("Hello."):].strip()[:60] or None
            break
    if len(_TEMPLATE_STOPS) > 64:
        _TEMPLATE_STOPS.clear()
    _TEMPLATE_STOPS[key] = stop
    return stop


_TEMPLATE_STOPS: dict[tuple, str | None] = {}


def stop_token_refusal(tokenizer, fmt: str, stop: str) -> str:
    """Why a format whose terminator ``stop`` is not a special token of ``tokenizer`` is refused,
    and the ways out that every caller shares (each adds its own opt-in: ``text_markers=True``,
    ``chat.text_markers = true``, ``--text-markers``)."""
    n = len(tokenizer.encode(stop, add_special_tokens=False))
    if fmt == "template":
        return (f"the tokenizer's chat template ends each answer with {stop!r}, which does not start with a special "
                f"token of this tokenizer: it would be written as {n} text token{'s' if n != 1 else ''} and the model "
                "would learn no stop token (a template of another model, or a base tokenizer?); use the tokenizer the "
                "template was written for, or add the token to the tokenizer first (transformers: "
                "add_special_tokens, then save_pretrained)")
    return (f"format {fmt!r} ends each answer with {stop!r}, which is not a special token of this tokenizer: it "
            f"would be written as {n} text token{'s' if n != 1 else ''} and the model would learn no stop token (the "
            f"tokenizer of another model?); use the tokenizer of a model trained with {fmt!r}, or add the format's "
            "tokens to the tokenizer first (transformers: add_special_tokens, then save_pretrained)")


def stop_ids(tokenizer, fmt: str) -> list[int]:
    """Ids that end generation for ``fmt``: EOS, the spec's end-of-turn ids, the format's turn
    terminator and the other tokens its model stops at (gpt-oss ``<|call|>``, Llama 3.1/3.2
    ``<|eom_id|>``: :attr:`ChatFormat.more_stops`), each when it is a single token in the
    vocabulary (no duplicates, in that order), less the end-of-turn tokens that end a message of
    its model but not a generation (gpt-oss ``<|end|>``: :attr:`ChatFormat.not_stops`).

    Returns:
        Token ids (list of int), for a generation loop's stop set.
    Raises:
        ChatFormatError: unknown format.

    Source: the models' ``generation_config.json`` (Llama 3.1/3.2's ``<|eom_id|>``) and
    openai-harmony's ``stop_tokens_for_assistant_actions`` (gpt-oss: not ``<|end|>``).
    """
    f = get_format(fmt)
    out: list[int] = []
    skip = {tokenizer.token_to_id(s) for s in f.not_stops}
    for i in (tokenizer.eos_id, *tokenizer.spec.eot_ids, *(tokenizer.token_to_id(s) for s in (f.stop, *f.more_stops))):
        if i is not None and i not in out and i not in skip:
            out.append(i)
    return out


#: a conversation every format writes (no system prompt, no tools)
_PROBE = ({"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
          {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Bye!"})


def refuse_chat_before_corpus(cfg, tokenizer) -> None:
    """sft on a ``.model``-only tokenizer: encode one probe conversation with the run's (resolved)
    chat format before any corpus work, so a format that :func:`rmlprep.spm_special.per_text_fragments` refuses
    stops the run in one line (exit 2) rather than rejecting every row one by one.

    Raises:
        ConfigError: the refusal, naming ``chat.format``.
    """
    s = tokenizer.spec
    if cfg.pipeline != "sft" or not (s.add_prefix_space and s.prefix_scheme == "whole_text"):
        return
    from ..errors import ConfigError

    chat = cfg["chat"]
    try:
        encode_chat(tokenizer, list(_PROBE), chat["format"], options=chat.get("options") or None,
                    text_markers=bool(chat.get("text_markers")))
    except UnprefixedText as e:
        raise ConfigError(f"chat.format = {chat['format']!r}: {e}") from None
    except Exception:  # noqa: BLE001 - other faults are the rows' own, rejected with their reasons
        return
