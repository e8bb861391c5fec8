"""``chat.format`` settled for a run's tokenizer before any corpus work: ``"auto"`` becomes the
format that reproduces the tokenizer's chat template (:func:`resolve_chat_format`,
:func:`resolve_chat_config`), ``"template"`` records the template's sha256, and the format's
turn terminator must be a special token (:func:`check_chat_markers`). Used by the run's driver
and the parity stage (:mod:`rmlprep.chat_parity`, which re-exports them).

Exit codes (README, "Exit codes": 2 a user error, 3 a parity failure): a template that no
format reproduces is a parity failure, :class:`~rmlprep.errors.ParityError` (exit 3), as a
named format that does not reproduce it is in the parity stage: both are the tokenizer's
template rendering a probe otherwise than rmlprep writes it, both texts shown. A template
several formats reproduce, no template, jinja2 missing for a template outside the committed
table, a GGUF's defaulted bos/eos: :class:`~rmlprep.errors.ConfigError` (exit 2).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from .chat import detect_chat_format, template_sha256
from .chat.detect import ChatTemplateError, named_templates_note
from .chat.encode import missing_stop_token, stop_token_refusal, template_specials
from .chat.registry import get_format, resolve_options, untrained_reasoning_refusal
from .chat.render import JINJA_PIP, check_template_options, jinja_available, refuse_unpassed_tokens
from .errors import ChatFormatError, ConfigError, ParityError

__all__ = ["resolve_chat_format", "resolve_chat_config", "check_chat_markers"]


def resolve_chat_format(fmt: str, tokenizer) -> str:
    """``chat.format`` for this tokenizer: ``"auto"`` becomes the format that reproduces the
    tokenizer's chat template; other names are returned as they are.

    Raises:
        ConfigError: ``"auto"`` and the tokenizer has no chat template.
        ChatTemplateError: no format (or several) reproduces the template.
        ChatFormatError: it reads a GGUF's defaulted bos/eos (:func:`~rmlprep.chat.encode.template_specials`).
    """
    if fmt != "auto":
        return fmt
    template = getattr(tokenizer, "chat_template", None)
    if not template:
        raise ConfigError("chat.format = \"auto\": the tokenizer carries no chat_template to detect the format from"
                          f"{named_templates_note(tokenizer)}; name the format")
    bos, eos = template_specials(tokenizer, template, auto=True)  # a GGUF's defaulted bos/eos: refused, not guessed
    return detect_chat_format(template, bos_token=bos, eos_token=eos)


def resolve_chat_config(cfg, tokenizer, *, log: Callable[[str], None] = print):
    """The run's config with ``chat.format`` settled for this tokenizer (sft only): ``"auto"``
    becomes the format that reproduces the tokenizer's chat template; ``"template"`` records
    the template's sha256 as ``chat.template_sha256``, so the config hash (and resume) follows
    the template the output depends on. Other configs are returned as they are.

    Raises:
        ParityError: ``"auto"`` and no format reproduces the template (the closest format's first
            differing probe shown), as the parity stage raises for a named format.
        ConfigError: no chat template to detect or render, or several formats reproduce it; the
            template reads a GGUF's defaulted bos/eos (:func:`rmlprep.chat.encode.template_specials`); the
            format found has no reasoning and ``chat.train_on_reasoning = false``
            (:func:`rmlprep.chat.registry.untrained_reasoning_refusal`).
    """
    if cfg.pipeline != "sft" or cfg["chat"]["format"] not in ("auto", "template"):
        return cfg
    from .config import RunConfig

    data = copy.deepcopy(cfg.data)
    template, fmt = getattr(tokenizer, "chat_template", None), cfg["chat"]["format"]
    try:  # a GGUF's defaulted bos/eos the template reads: before any work ("auto": not "no format reproduces")
        if template:
            template_specials(tokenizer, template, data["chat"]["options"] if fmt == "template" else None,
                              auto=fmt == "auto")
    except ChatFormatError as e:
        raise ConfigError(f"chat.format = \"{fmt}\": {e}") from None
    if fmt == "template":
        if not template:
            raise ConfigError(f"chat.format = \"template\": the tokenizer carries no chat_template"
                              f"{named_templates_note(tokenizer)}")
        if not jinja_available():  # before any corpus work: each unit would fail at its first row
            raise ConfigError(f"chat.format = \"template\" renders the tokenizer's template with jinja2, which is not "
                              f"installed: {JINJA_PIP}")
        try:  # an option read by nothing (misspelt), a special token rmlprep cannot pass: before any work
            check_template_options(template, data["chat"]["options"])
            refuse_unpassed_tokens(template, data["chat"]["options"], tokens := getattr(tokenizer, "template_tokens", None))
        except ChatFormatError as e:
            raise ConfigError(f"chat.options: {e}") from None
        data["chat"]["template_sha256"] = template_sha256(template)
        if tokens:  # they change the renders too: part of the config hash a done marker checks
            data["chat"]["template_tokens"] = tokens
        log(f"chat: conversations are rendered with the tokenizer's own template (sha256 "
            f"{data['chat']['template_sha256'][:12]}) in jinja2's sandbox")
    else:
        try:
            data["chat"]["format"] = resolve_chat_format("auto", tokenizer)
        except ChatFormatError as e:
            other = ("name a format, or use chat.format = \"template\"" if jinja_available() else
                     "or name the format and set parity.chat = false, having compared it with the template yourself")
            if isinstance(e, ChatTemplateError) and not e.formats:  # no format reproduces it: exit 3 (module docstring)
                raise ParityError(template, 0, [], [], source="chat template",
                                  message=f"chat parity: chat.format = \"auto\": {e}; {other}") from None
            raise ConfigError(f"chat.format = \"auto\": {e}; {other}") from None
        log(f"chat: chat.format = \"auto\" → {data['chat']['format']!r} (the format that matches the tokenizer's "
            "chat template on every probe conversation)")
        try:  # checked here, before any work, as a named format's are at config load (each unit failed)
            resolve_options(get_format(data["chat"]["format"]), data["chat"]["options"])
        except ChatFormatError as e:
            raise ConfigError(f"chat.options: chat.format = \"auto\" found {data['chat']['format']!r}: {e}") from None
        if not data["chat"]["train_on_reasoning"] and (why := untrained_reasoning_refusal(data["chat"]["format"])):
            raise ConfigError(f"chat.train_on_reasoning = false: chat.format = \"auto\" found "
                              f"{data['chat']['format']!r}; {why}")
    return RunConfig(data, cfg.source, relative=cfg.relative, cwd=cfg.cwd, given=cfg.given)


def check_chat_markers(cfg, tokenizer) -> None:
    """sft: the format's turn terminator (``<|im_end|>``, ``<|eot_id|>``, ``</s>``...) must be a
    special token of the tokenizer. Format text is cut at the tokenizer's special tokens and the
    rest is encoded as text (:mod:`rmlprep.chat.encode`), as transformers tokenizes a render, so
    ChatML on a vocabulary without ``<|im_end|>`` (GPT-2's, Llama 2's) would train every answer
    to end in ``<``, ``|``, ``im``, ``_``... and no single stop token: silently not what a chat
    model is trained on. Refused unless ``chat.text_markers = true``; for ``chat.format =
    "template"`` the terminator is what the tokenizer's own template writes after an answer
    (:func:`rmlprep.chat.encode.template_stop`).

    Raises:
        ConfigError: the terminator is not a special token, naming it and the three ways out.
    """
    chat = cfg["chat"] if cfg.pipeline == "sft" else None
    if chat is None or chat.get("text_markers"):
        return
    stop = missing_stop_token(tokenizer, chat["format"], chat.get("options"))
    if stop is not None and chat["format"] == "template":
        raise ConfigError(f"chat.format = \"template\": {stop_token_refusal(tokenizer, 'template', stop)}; or set "
                          "chat.text_markers = true to write it as text")
    if stop is not None:
        n = len(tokenizer.encode(stop, add_special_tokens=False))
        raise ConfigError(
            f"chat.format = {chat['format']!r} ends each answer with {stop!r}, which is not a special token of this "
            f"tokenizer: it would be written as {n} text token{'s' if n != 1 else ''} and the model would learn no "
            f"stop token (the tokenizer of another model?); use the tokenizer of a model trained with "
            f"{chat['format']!r} (or chat.format = \"auto\"), add the format's tokens to the tokenizer first "
            "(transformers: add_special_tokens, then save_pretrained), or set chat.text_markers = true to write "
            "them as text")
