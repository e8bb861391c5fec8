"""Rendering a real Jinja chat template the way transformers does (for checks, never at run time
unless ``chat.format = "template"``).

Source: transformers ``utils/chat_template_utils.py`` (``_compile_jinja_template``,
``render_jinja_template``).
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ChatFormatError

__all__ = ["JINJA_PIP", "STANDARD_TOKENS", "jinja_available", "jinja_environment", "compile_template", "render",
           "template_variables", "check_template_options", "read_special_tokens", "refuse_unpassed_tokens"]

#: The special-token attributes every transformers tokenizer has besides bos/eos (its
#: ``SPECIAL_TOKENS_ATTRIBUTES``); a template may read them (:func:`read_special_tokens`).
STANDARD_TOKENS = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token", "additional_special_tokens")

#: How to install what rendering a template needs (jinja2), for error messages.
JINJA_PIP = "pip install 'rmlprep[chat]' (it brings jinja2)"


def jinja_available() -> bool:
    """True when jinja2 imports."""
    try:
        import jinja2  # noqa: F401
    except ImportError:
        return False
    return True


def jinja_environment(now: _dt.datetime | _dt.date | None = None):
    """A jinja2 environment set up like transformers' ``_compile_jinja_template``.

    ``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
    extensions=[AssistantTracker, loopcontrols])``, ``raise_exception``,
    ``tojson(ensure_ascii=False)``, ``strftime_now`` (frozen at ``now`` when given, else the
    current time). The ``{% generation %}...{% endgeneration %}`` tag (transformers'
    ``AssistantTracker``, which TRL's ``assistant_only_loss`` asks templates to use) renders its
    body unchanged, as there; rmlprep's masks do not read it.

    Raises:
        ChatFormatError: jinja2 is not installed (with the pip line).
    """
    try:
        import jinja2
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise ChatFormatError(f"rendering a Jinja chat template needs jinja2, which is not installed: {JINJA_PIP}"
                              ) from None

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        if now is None:
            return _dt.datetime.now().strftime(fmt)
        return now.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_generation_tag(), loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


@functools.lru_cache(maxsize=1)
def _generation_tag():
    """A jinja2 extension for transformers' ``{% generation %}`` block tag: the body renders
    unchanged (transformers' ``AssistantTracker._render_assistant`` returns ``caller()`` and only
    records where it was, for ``return_assistant_tokens_mask``)."""
    from jinja2 import nodes
    from jinja2.ext import Extension

    class GenerationTag(Extension):
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    return GenerationTag


@functools.lru_cache(maxsize=64)
def compile_template(template: str, now: str | None = None):
    """The compiled template in a :func:`jinja_environment` frozen at ``now`` (ISO date).

    Raises:
        ChatFormatError: jinja2 missing, or the template does not compile.
    """
    env = jinja_environment(_dt.date.fromisoformat(now) if now else None)  # first: jinja2 missing says so
    import jinja2

    try:
        return env.from_string(template)
    except jinja2.exceptions.TemplateError as e:
        raise ChatFormatError(f"the chat template does not compile: {type(e).__name__}: {e}") from None


def render(template: str, messages: Sequence[Mapping[str, Any]], *, tools: Sequence[Mapping] | None = None,
           add_generation_prompt: bool = False, bos_token: str | None = None, eos_token: str | None = None,
           now: str | None = None, **kwargs: Any) -> dict[str, str]:
    """Render one conversation: ``{"output": text}`` or ``{"error": "TypeName: message"}``.

    Called as transformers calls a template: ``messages``, ``tools``, ``documents=None``,
    ``add_generation_prompt``, ``bos_token``, ``eos_token`` and the extra ``kwargs``
    (``enable_thinking``...). A ``bos_token`` or ``eos_token`` of None is left out, so the
    template sees it undefined (``{{ bos_token }}`` writes ``''``, not ``'None'``): transformers
    passes ``special_tokens_map``, which holds only the tokens a tokenizer sets (Qwen's
    ``"bos_token": null`` is not there). Any exception a template raises is an ``error``
    (transformers would raise it to the caller).
    """
    t = compile_template(template, now)
    specials = {k: v for k, v in (("bos_token", bos_token), ("eos_token", eos_token)) if v is not None}
    try:
        out = t.render(messages=messages, tools=tools, documents=None, add_generation_prompt=add_generation_prompt,
                       **specials, **kwargs)
    except Exception as e:  # a template can raise anything: TemplateError, TypeError, RecursionError...
        return {"error": f"{type(e).__name__}: {e}"}
    return {"output": out}


@functools.lru_cache(maxsize=16)
def template_variables(template: str) -> frozenset[str]:
    """The names ``template`` reads from its caller (jinja2's ``meta.find_undeclared_variables``:
    ``messages``, ``add_generation_prompt``, ``enable_thinking``..., also those it only tests
    with ``is defined``).

    Raises:
        ChatFormatError: jinja2 missing, or the template does not compile.
    """
    env = jinja_environment()
    import jinja2
    import jinja2.meta

    try:
        return frozenset(jinja2.meta.find_undeclared_variables(env.parse(template)))
    except jinja2.exceptions.TemplateError as e:
        raise ChatFormatError(f"the chat template does not compile: {type(e).__name__}: {e}") from None


def check_template_options(template: str, options: Mapping[str, Any] | None) -> None:
    """Refuse an option (a template variable; ``today`` aside, the date ``strftime_now`` gives)
    that the template never reads: a misspelt ``enable_thinkng = false`` would be passed, read
    by nothing, and the template's default (thinking on) would stand without a word.

    Raises:
        ChatFormatError: naming the option and the variables the template reads.
    """
    reads = template_variables(template)
    for k in options or {}:
        if k != "today" and k not in reads:
            own = sorted(reads - {"messages", "tools", "documents", "add_generation_prompt", "bos_token", "eos_token",
                                  "raise_exception", "strftime_now"})
            raise ChatFormatError(f"option {k!r}: the chat template reads no such variable, so it would be ignored "
                                  f"(its own variables: {', '.join(own) or 'none'}; and today, the date)")


def read_special_tokens(template: str) -> tuple[str, ...]:
    """The special-token variables ``template`` reads besides ``bos_token`` / ``eos_token``:
    ``unk_token``, ``sep_token``, ``pad_token``, ``cls_token``, ``mask_token``,
    ``additional_special_tokens`` and any other ``*_token`` (a config's ``extra_special_tokens``,
    such as Gemma 3's ``image_token``), sorted (of :func:`template_variables`). transformers
    passes every one a tokenizer sets (``apply_chat_template``: ``{**self.special_tokens_map,
    **kwargs}``, 4.57.1); the template mode passes them from the folder's config
    (:func:`rmlprep.folder_config.template_tokens`). No template in the reference set reads one.

    Raises:
        ChatFormatError: jinja2 missing, or the template does not compile.
    """
    return tuple(sorted(n for n in template_variables(template)
                        if (n.endswith("_token") and n not in ("bos_token", "eos_token"))
                        or n == "additional_special_tokens"))


def refuse_unpassed_tokens(template: str, kwargs: Mapping[str, Any] | None = None,
                           tokens: Mapping[str, Any] | None = None) -> None:
    """Refuse a template that reads a special-token variable besides bos/eos
    (:func:`~rmlprep.chat.render.read_special_tokens`) whose value transformers would pass and
    rmlprep does not know: ``tokens`` (:func:`rmlprep.folder_config.template_tokens`: None when
    no tokenizer_config.json was read) lacks it (a standard name its config does not set: the
    tokenizer class's default), and ``kwargs`` (the template options) does not give it. A
    ``*_token`` name that is neither standard nor in the config's ``extra_special_tokens`` is not
    passed by transformers either: undefined in both.

    Raises:
        ChatFormatError: naming the variables and the ways out.
    """
    unpassed = [n for n in read_special_tokens(template) if n not in (kwargs or {}) and n not in (tokens or {})
                and (tokens is None or n in STANDARD_TOKENS)]
    if unpassed:
        why = ("whose values rmlprep reads only from a tokenizer_config.json beside a tokenizer.json or "
               "tokenizer.model, and none was read for this tokenizer" if tokens is None else
               "which tokenizer_config.json does not set, and rmlprep does not know its tokenizer_class's "
               "default (rmlprep/_template_token_defaults.py)")
        raise ChatFormatError(
            f"the chat template reads {', '.join(unpassed)}, {why}; transformers passes the tokenizer's value, so "
            "the render could differ from it: set it in tokenizer_config.json, give the value as a template "
            "option (chat.options), or use a native format")
