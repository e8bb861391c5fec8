"""Detection that is proved, not guessed: a template maps to a format only if the format's writer
reproduces the template on every probe conversation the format accepts.

With jinja2 installed, :func:`detect_chat_format` renders the template on the probes
(:mod:`rmlprep.chat.probes`) in transformers' sandbox, for each format and each of its option
sets, and compares byte for byte with the writer; a probe the writer refuses is skipped (such
rows are rejected in a run, never written wrong), a probe the template refuses and the writer
writes is a difference, and every format must write the core probes. Exactly the formats with
no difference prove; none proving is a :class:`ChatTemplateError` naming the closest format's
first differing probe with both texts. Without jinja2, the template's sha256 is looked up in
the committed table ``_template_table.py`` (made by ``tools/make_chat_fixtures.py`` from the same
proof over the real templates); an unknown template is refused.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from ..errors import ChatFormatError
from .messages import parse_conversation
from .probes import PROBES
from .registry import CHAT_FORMATS, FORMATS, ChatFormat, get_format, resolve_options, template_kwargs, template_view
from .render import JINJA_PIP, jinja_available, render

__all__ = ["ChatTemplateError", "Difference", "detect_chat_format", "named_templates_note", "prove_format",
           "template_sha256"]


class ChatTemplateError(ChatFormatError):
    """No format reproduces a chat template, or several do. ``difference`` is the closest
    format's first differing probe (None when nothing could be compared); ``formats`` the formats
    that reproduce it when several do (empty when none does: a parity failure, exit 3 in a run)."""

    def __init__(self, message: str, difference: "Difference | None" = None, formats: tuple[str, ...] = ()):
        super().__init__(message)
        self.difference = difference
        self.formats = tuple(formats)


@dataclass
class Difference:
    """The first probe on which a format and a template differ.

    Attributes:
        format: the format.
        probe: the probe's id (see :data:`rmlprep.chat.probes.PROBES`).
        add_generation_prompt: as rendered.
        options: the format options it was rendered with.
        expected: the template's render (or ``"error: ..."`` when the template refused).
        actual: the writer's text (or ``"refused: ..."``).
        matched: how many probe renders matched before this one.
    """

    format: str
    probe: str
    add_generation_prompt: bool
    options: dict = field(default_factory=dict)
    expected: str = ""
    actual: str = ""
    matched: int = 0

    @property
    def position(self) -> int:
        """The first differing character."""
        e, a = self.expected, self.actual
        return next((i for i, (x, y) in enumerate(zip(e, a)) if x != y), min(len(e), len(a)))

    def describe(self, context: int = 80) -> str:
        e, a = self.expected, self.actual
        pos = self.position
        lo = max(0, pos - context)
        opts = f", options {self.options}" if self.options else ""
        return (f"format {self.format!r} differs on probe {self.probe!r} (add_generation_prompt="
                f"{self.add_generation_prompt}{opts}) at character {pos}, after "
                f"{'...' if lo else ''}{e[lo:pos]!r}\n"
                f"  template: {e[pos:pos + 2 * context]!r}{'...' if len(e) > pos + 2 * context else ''}\n"
                f"  rmlprep:  {a[pos:pos + 2 * context]!r}{'...' if len(a) > pos + 2 * context else ''}\n"
                f"  whole template render: {e!r}\n  whole rmlprep text:    {a!r}")


def template_sha256(template: str) -> str:
    """sha256 hex of a chat template's UTF-8 bytes."""
    return hashlib.sha256(template.encode("utf-8")).hexdigest()


_PARSED = [(pid, parse_conversation(msgs, tools)) for pid, msgs, tools in PROBES]


def _option_sets(f: ChatFormat) -> list[dict]:
    return [{}] + [dict(o) for o in f.probe_options]


def prove_format(template: str, fmt: str | ChatFormat, *, bos_token: str | None = None,
                 eos_token: str | None = None, _cache: dict | None = None,
                 _accepted: list | None = None, _writer_gen: bool | None = None) -> Difference | None:
    """Check that ``fmt`` reproduces ``template`` on every probe it accepts.

    Args:
        template: the Jinja chat template.
        fmt: a format name.
        bos_token, eos_token: the tokenizer's (default: the format's own).
    Returns:
        None when proved, else the first :class:`Difference`.
    Raises:
        ChatFormatError: jinja2 is not installed, or the template does not compile.
    """
    from .registry import write

    f = get_format(fmt)
    bos = bos_token if bos_token is not None else f.bos
    eos = eos_token if eos_token is not None else f.eos
    cache = _cache if _cache is not None else {}
    matched = 0
    accepted = 0
    for extra in _option_sets(f):
        opts = resolve_options(f, extra)
        kwargs = template_kwargs(f, opts)
        now = opts.get("today") or "2024-07-26"
        for pid, conv in _PARSED:
            gens = (False, True)
            for gen in gens:
                try:
                    wgen = gen if _writer_gen is None else _writer_gen  # see _generation_prompt_ignored
                    ours: str | None = write(conv, f, add_generation_prompt=wgen, options=extra).text()
                except ChatFormatError as e:
                    if pid in f.core_probes:
                        return Difference(f.name, pid, gen, extra, "(a core probe)", f"refused: {e}", matched)
                    ours = None
                if ours is None:
                    continue
                accepted += 1
                msgs, tools = template_view(conv, f)
                key = json.dumps([msgs, tools, gen, bos, eos, now, kwargs], ensure_ascii=False, sort_keys=True)
                ref = cache.get(key)
                if ref is None:
                    ref = cache[key] = render(template, msgs, tools=tools, add_generation_prompt=gen, bos_token=bos,
                                              eos_token=eos, now=now, **kwargs)
                if "error" in ref:
                    return Difference(f.name, pid, gen, extra, f"error: {ref['error']}", ours, matched)
                if ref["output"] != ours:
                    return Difference(f.name, pid, gen, extra, ref["output"], ours, matched)
                matched += 1
    if _accepted is not None:
        _accepted.append(accepted)
    return None


def _generation_prompt_ignored(template: str, d: Difference, bos_token, eos_token) -> str:
    """A sentence naming the cause when the closest format's difference is that the template
    ignores ``add_generation_prompt`` (else ""): it writes the generation prompt always (Meta's
    first Llama 3 8B Instruct template ends every render with an assistant header; its later
    revision writes it only ``{% if add_generation_prompt %}``) or never, and with the flag
    forced the format reproduces every probe."""
    if d.expected == "(a core probe)":
        return ""
    from .registry import write

    f = get_format(d.format)
    for always in (True, False):
        if prove_format(template, f, bos_token=bos_token, eos_token=eos_token, _writer_gen=always) is not None:
            continue
        conv = _PARSED[0][1]
        with_prompt = write(conv, f, add_generation_prompt=True).text()
        without = write(conv, f, add_generation_prompt=False).text()
        prompt = with_prompt[len(without):] if with_prompt.startswith(without) else with_prompt
        if always:
            return (f"the template ignores add_generation_prompt: it ends every render with the generation prompt "
                    f"{prompt!r}, which {f.name!r} writes only when asked (with it always on, {f.name!r} reproduces "
                    "every probe), so each training row would end with an untrained assistant header"
                    + (" (Meta's first Llama 3 Instruct template did so; the model's current tokenizer_config.json "
                       "writes it only if add_generation_prompt)" if f.name == "llama3" else "")
                    + f". Use a template that honours the flag, or name chat.format = {f.name!r} and set "
                    "parity.chat = false once you have compared them")
        return (f"the template ignores add_generation_prompt: it never writes the generation prompt {prompt!r} "
                f"(with it always off, {f.name!r} reproduces every probe); use a template that honours the flag, or "
                f"name chat.format = {f.name!r} and set parity.chat = false once you have compared them")
    return ""


def _prove_all(template: str, bos_token, eos_token) -> tuple[list[str], Difference | None]:
    """(the proving formats, the closest difference). Of formats that prove, only those that
    write the most probe renders are kept: Gemma 1/2's format proves Gemma 3's template on
    every conversation it writes, but Gemma 3's also writes system messages."""
    cache: dict = {}
    proved: list[tuple[int, str]] = []
    best: Difference | None = None
    for name in CHAT_FORMATS:
        n: list = []
        d = prove_format(template, name, bos_token=bos_token, eos_token=eos_token, _cache=cache, _accepted=n)
        if d is None:
            proved.append((n[0], name))
        elif best is None or (d.matched, d.position) > (best.matched, best.position):
            best = d
    top = max((n for n, _ in proved), default=0)
    return [name for n, name in proved if n == top], best


def detect_chat_format(name_or_template: str, *, bos_token: str | None = None,
                       eos_token: str | None = None) -> str:
    """The format for a format name or a model's Jinja chat template.

    A format name is returned as is. A template is proved against every format (see the
    module docstring): with jinja2 by rendering the probes, else by its sha256 in the
    committed table.

    Args:
        name_or_template: a name from :data:`CHAT_FORMATS`, or a Jinja template.
        bos_token, eos_token: the tokenizer's tokens the template is rendered with (default:
            each format's own).
    Returns:
        A name from :data:`CHAT_FORMATS` (str): ``name_or_template`` itself when it is one, else
        the one format whose writer gives the template's render on every probe.
    Raises:
        ChatTemplateError: no format reproduces the template (the closest format's first
            differing probe, both texts shown), or two formats do.
        ChatFormatError: an unknown name; a template that is not in the table while jinja2
            is not installed; a template that does not compile.

    Source: the template itself, rendered in jinja2's sandbox as transformers'
    ``apply_chat_template`` renders it (:mod:`rmlprep.chat.render`), or the committed table of
    templates proved so (``rmlprep/chat/_template_table.py``).
    """
    if not isinstance(name_or_template, str):
        raise ChatFormatError(f"expected a format name or a Jinja template string, got {type(name_or_template).__name__}")
    if name_or_template in FORMATS:
        return name_or_template
    t = name_or_template
    if "{{" not in t and "{%" not in t:
        raise ChatFormatError(f"unknown chat format {t[:80]!r}; known: {', '.join(CHAT_FORMATS)} "
                              "(or pass a model's Jinja chat template)")
    sha = template_sha256(t)
    if not jinja_available():
        from ._template_table import TEMPLATES

        if sha not in TEMPLATES:
            raise ChatFormatError(f"chat template sha256 {sha[:16]} is not among the templates rmlprep has proved, and "
                                  f"jinja2 is not installed to prove it now: {JINJA_PIP}")
        fmt, why = TEMPLATES[sha]
        if fmt is None:
            raise ChatTemplateError(f"no rmlprep chat format reproduces this template (sha256 {sha[:16]}): {why}")
        return fmt
    proved, best = _prove_all(t, bos_token, eos_token)
    if len(proved) == 1:
        return proved[0]
    if proved:
        raise ChatTemplateError(f"chat template sha256 {sha[:16]} is reproduced by several formats ({', '.join(proved)}) "
                                "on every probe; name one in chat.format", formats=tuple(proved))
    if best is None:
        raise ChatTemplateError(f"no rmlprep chat format reproduces this template (sha256 {sha[:16]})")
    why = _generation_prompt_ignored(t, best, bos_token, eos_token)
    raise ChatTemplateError(f"no rmlprep chat format reproduces this template (sha256 {sha[:16]}); "
                            + (why + "; the first difference: " if why else "the closest, ") + best.describe(), best)


def check_template_format(template: str, fmt: str, *, bos_token: str | None = None,
                          eos_token: str | None = None) -> None:
    """Prove that ``fmt`` reproduces ``template`` (a tokenizer's own), or say which format does.

    Raises:
        ChatTemplateError: ``fmt`` differs on a probe (the message names the format that
            reproduces the template, if one does, and shows the difference).
    """
    if not jinja_available():
        from ._template_table import TEMPLATES

        sha = template_sha256(template)
        got = TEMPLATES.get(sha)
        if got is None:
            raise ChatFormatError(f"chat template sha256 {sha[:16]} is not among the templates rmlprep has proved, and "
                                  f"jinja2 is not installed to prove it now: {JINJA_PIP}")
        if got[0] != fmt:
            raise ChatTemplateError(f"chat.format {fmt!r} does not reproduce the tokenizer's chat template (sha256 "
                                    f"{sha[:16]}): " + (f"it is written by {got[0]!r}" if got[0] else got[1]))
        return
    d = prove_format(template, fmt, bos_token=bos_token, eos_token=eos_token)
    if d is None:
        return
    try:
        other = detect_chat_format(template, bos_token=bos_token, eos_token=eos_token)
        hint = f"the format that reproduces it is {other!r}"
    except ChatTemplateError as e:
        hint = "no rmlprep format reproduces it (chat.format = \"template\" renders it with jinja2)"
        if e.difference is not None and e.difference.format == fmt:
            why = _generation_prompt_ignored(template, e.difference, bos_token, eos_token)
            hint = why or hint
    except ChatFormatError:
        hint = "no rmlprep format reproduces it (chat.format = \"template\" renders it with jinja2)"
    raise ChatTemplateError(f"chat.format {fmt!r} does not reproduce the tokenizer's chat template; {hint}; "
                            + d.describe(), d)


def table_entry(template: str) -> tuple[str | None, str]:
    """(format or None, why) for the committed table: what :func:`detect_chat_format` proves."""
    try:
        return detect_chat_format(template), "proved on every probe"
    except ChatTemplateError as e:
        d = e.difference
        return None, (f"closest format {d.format!r} differs on probe {d.probe!r}" if d else str(e).splitlines()[0])


def named_templates_note(tokenizer) -> str:
    """``""``, or why a tokenizer whose config lists named templates without a ``default`` has no
    chat template (:func:`rmlprep.hf.named_chat_templates`), naming them, for messages that say it has none."""
    named = getattr(tokenizer, "chat_templates", None)
    if not named or getattr(tokenizer, "chat_template", None):
        return ""
    return (f" (its folder names templates {', '.join(map(repr, named))} (tokenizer_config.json's list, "
            "additional_chat_templates/) and no 'default', which rmlprep reads as no template; save the one to use as "
            "chat_template.jinja beside it)")
