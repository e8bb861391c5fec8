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


def template_internals(template: str) -> frozenset[str]:
    """The names ``template`` assigns itself (``{% set %}`` targets, ``for`` targets, macros and
    their arguments) and never tests for a caller's value (``is defined`` / ``is undefined``,
    ``|default``). jinja2's :func:`template_variables` also reports such a name when it is
    assigned in branches (llama2's ``loop_messages``, set in both branches of an ``if``) or in a
    loop or macro (Gemma 4's ``ns_args``): the template reads it from the caller only where no
    branch ran, so it is no option. A name assigned only after testing the caller's value
    (Llama 3.1's ``{% if not date_string is defined %}{% set date_string = ... %}``) is an option,
    and not among these.

    Raises:
        ChatFormatError: jinja2 missing, or the template does not compile.
    """
    env = jinja_environment()
    import jinja2
    from jinja2 import nodes

    try:
        ast = env.parse(template)
    except jinja2.exceptions.TemplateError as e:
        raise ChatFormatError(f"the chat template does not compile: {type(e).__name__}: {e}") from None
    own = {n.name for n in ast.find_all(nodes.Name) if n.ctx in ("store", "param")}
    own |= {m.name for m in ast.find_all(nodes.Macro)}
    tested = {t.node.name for t in ast.find_all(nodes.Test)
              if t.name in ("defined", "undefined") and isinstance(t.node, nodes.Name)}
    tested |= {f.node.name for f in ast.find_all(nodes.Filter)
               if f.name in ("default", "d") and isinstance(f.node, nodes.Name)}
    return frozenset(own - tested)


def check_template_options(template: str, options: Mapping[str, Any] | None) -> None:
    """Refuse an option (a template variable; ``today`` aside, the date ``strftime_now`` gives)
    that the template never reads: a misspelt ``enable_thinkng = false`` would be passed, read
    by nothing, and the template's default (thinking on) would stand without a word. Refuse too
    a value that spells a boolean without being one (``"false"``, ``"True"``, ``"no"``, ``0``)
    where the template reads it as the other boolean (:func:`_reads_as`, a few renders):
    ``enable_thinking = "false"`` (quoted in TOML) kept Qwen3's thinking on, its
    ``enable_thinking is false`` being false for a string.

    The renders cost milliseconds (a few dozen for a template that sets the option itself, as
    Llama 3.1 sets ``date_string``), and :func:`~rmlprep.chat.encode_chat` builds a writer per
    conversation: options a template passed are remembered (:data:`_OPTIONS_PASSED`), so the
    check runs once per template and options, not once per conversation.

    Raises:
        ChatFormatError: naming the option and the variables the template reads from its caller
            (not those it assigns itself, :func:`template_internals`); or the option, its value
            and the boolean to give.
    """
    if not options:
        key = None
    else:
        key = (template, repr(sorted(options.items(), key=lambda kv: kv[0])))
        if key in _OPTIONS_PASSED:
            return
    _check_template_options(template, options)
    if key is not None:
        if len(_OPTIONS_PASSED) >= 64:
            _OPTIONS_PASSED.pop(next(iter(_OPTIONS_PASSED)))
        _OPTIONS_PASSED[key] = None


#: (template, repr of the sorted options) that :func:`check_template_options` passed, oldest first
_OPTIONS_PASSED: dict[tuple[str, str], None] = {}


def _check_template_options(template: str, options: Mapping[str, Any] | None) -> None:
    """:func:`check_template_options`, every time."""
    reads = template_variables(template)
    for k in options or {}:
        if k in _RENDER_ARGS:  # render() would get two values for it (a TypeError)
            raise ChatFormatError(f"option {k!r}: rmlprep passes it to the chat template itself, with each conversation "
                                  "(messages; tools from the row, chat.tools_column; documents = none; "
                                  "add_generation_prompt from chat.add_generation_prompt), not as an option; drop it")
        if k != "today" and k not in reads:
            own = sorted(reads - template_internals(template) - {
                "messages", "tools", "documents", "add_generation_prompt", "bos_token", "eos_token", "raise_exception",
                "strftime_now"})
            raise ChatFormatError(f"option {k!r}: the chat template reads no such variable, so it would be ignored "
                                  f"(its own variables: {', '.join(own) or 'none'}; and today, the date)")
    for k, v in (options or {}).items():
        if k != "today" and _ignored(template, options, k, v):
            src = _set_from(template, k)
            opts = [x for x in src if x != "messages"]
            raise ChatFormatError(
                f"option {k!r}: the chat template sets {k} itself before reading it (its renders are the same with "
                "any value), so the value would be ignored; " + (
                    f"it is set from {', '.join(opts)}{' (and the conversation)' if 'messages' in src else ''}: give "
                    f"{opts[0]} instead" if opts else "drop it"))
        b = _spelt_boolean(v)
        if k != "today" and b is not None and _reads_as(template, options, k, v, not b):
            word = str(b).lower()
            raise ChatFormatError(
                f"option {k!r}: {v!r} is not the boolean {word}: the chat template renders it as it renders {not b} "
                f"(it tests {k} as a boolean, and in Jinja `{v!r} is {word}` is false"
                + (", a non-empty string true" if isinstance(v, str) else "") + f"); give the boolean: {k} = {word} "
                f"in chat.options (no quotes), --option {k}={word}, or {b} from Python")


#: the variables :func:`render` passes from its own arguments: the conversation, not options
_RENDER_ARGS = ("messages", "tools", "documents", "add_generation_prompt")

#: the date strftime_now gives in the option probes: one day for every render compared
_PROBE_DAY = "2024-07-26"

#: values that spell a boolean without being one (a quoted TOML ``"false"``, a YAML-ish ``no``, 0)
_BOOLEAN_SPELLINGS = {"true": True, "false": False, "yes": True, "no": False, "on": True, "off": False,
                      "1": True, "0": False}

#: (messages, tools, add_generation_prompt) renders that show a flag's effect: the generation
#: prompt (Qwen3's empty think block), a finished turn, both after a system message, and a tool
#: definition (Llama 3.1's tools_in_user_message)
_OPTION_PROBES = tuple((m, t, g) for m, t in (
    ([{"role": "user", "content": "Hi"}], None),
    ([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."}], None),
    ([{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}], None),
    ([{"role": "user", "content": "Hi"}], [{"type": "function", "function": {
        "name": "f", "description": "F.", "parameters": {"type": "object", "properties": {}}}}]),
) for g in (True, False))


def _spelt_boolean(v: Any) -> bool | None:
    """The boolean ``v`` spells when it is not one (``"false"``, ``"True"``, ``0``, ``1``), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, str):
        return _BOOLEAN_SPELLINGS.get(v.strip().lower())
    if isinstance(v, (int, float)) and v in (0, 1):
        return bool(v)
    return None


def _assignments(template: str, k: str):
    """The template's parse and its ``{% set k = ... %}`` nodes."""
    import jinja2.nodes as n

    ast = jinja_environment().parse(template)
    return ast, [a for a in ast.find_all(n.Assign) if isinstance(a.target, n.Name) and a.target.name == k]


def _ignored(template: str, options: Mapping[str, Any], k: str, v: Any) -> bool:
    """The template sets ``k`` itself (``{% set k = ... %}``) and renders every probe
    (:data:`_OPTION_PROBES`) the same with ``k = v``, without ``k``, with ``True``, ``False``
    and (for a string) ``v + "_"``: the value given is read only after the template overwrote
    it. An option whose effect the probes show, or that the template never sets, is not."""
    if not _assignments(template, k)[1]:
        return False
    base = _probe_base(options, k)
    others = [{}, {k: True}, {k: False}, *([{k: v + "_"}] if isinstance(v, str) else [])]
    renders = ([render(template, m, tools=t, add_generation_prompt=g, now=_PROBE_DAY, **base, **o).get("output")
                for m, t, g in _OPTION_PROBES] for o in ({k: v}, *others))
    first = next(renders)
    return all(r == first for r in renders) and any(r is not None for r in first)  # not: every probe an error


def _probe_base(options: Mapping[str, Any], k: str) -> dict[str, Any]:
    """The options beside ``k`` for a probe render, with stand-in ``bos_token``/``eos_token``
    texts where they give none: a template that writes ``bos_token + '[INST] '`` (Llama 2,
    Llama 3, Zephyr) raises UndefinedError without one, so every probe rendered the same error
    and no option could be told to change it (a misread ``"true"`` passed, review-chatc10)."""
    base = {x: y for x, y in options.items() if x not in (k, "today")}
    for name, text in (("bos_token", "<bos>"), ("eos_token", "<eos>")):
        if name != k:
            base.setdefault(name, text)
    return base


def _set_from(template: str, k: str) -> tuple[str, ...]:
    """The caller's variables the template sets ``k`` from (read in the tests of the ``if``
    blocks around its ``set``, or in the value set), options first, ``messages`` (standing for
    every :data:`_RENDER_ARGS`: the conversation) last, less those the template overwrites too
    (:func:`_ignored`). Worked example: SmolLM3 sets
    ``reasoning_mode`` to ``"/think"`` or ``"/no_think"`` after ``if enable_thinking`` and
    after ``if "/no_think" in system_message``, itself set from ``messages[0]``:
    ``("enable_thinking", "messages")``."""
    import jinja2.nodes as n

    ast, sets = _assignments(template, k)
    names: list[str] = []
    for node in ast.find_all(n.If):
        branches = [*node.body, *node.else_, *(x for e in node.elif_ for x in e.body)]
        if any(a is b or any(a is c for c in b.find_all(n.Assign)) for a in sets for b in branches):
            names += [node.test.name] if isinstance(node.test, n.Name) else [x.name for x in node.test.find_all(n.Name)]
    names += [x.name for a in sets for x in ([a.node] if isinstance(a.node, n.Name) else a.node.find_all(n.Name))]
    reads = template_variables(template)
    own = {x for x in names if x in reads and x != k and x not in ("bos_token", "eos_token")}
    return tuple(sorted({"messages" if x in _RENDER_ARGS else x for x in own
                         if x in _RENDER_ARGS or not _ignored(template, {}, x, True)}, key=lambda x: (x == "messages", x)))


def _reads_as(template: str, options: Mapping[str, Any], k: str, v: Any, other: bool) -> bool:
    """The template renders every probe (:data:`_OPTION_PROBES`) with ``k = v`` as with
    ``k = other``, and some probe differently with ``k = not other``: it takes ``v`` for the
    boolean ``other`` (Qwen3's ``enable_thinking is false`` is false for ``"false"``, so the
    empty think block is left out as for true). A template that also writes the value, or that
    the option does not change on the probes, is not one."""
    base = _probe_base(options, k)
    given, same, differs = ([render(template, m, tools=t, add_generation_prompt=g, now=_PROBE_DAY, **base,
                                    **{k: x}).get("output") for m, t, g in _OPTION_PROBES] for x in (v, other, not other))
    return given == same != differs


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
