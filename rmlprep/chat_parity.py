"""Chat parity: rmlprep's chat writer must reproduce real Jinja chat templates' renders.

A reference render is what a model's real ``chat_template`` produces, rendered the way
Hugging Face transformers renders it (:func:`jinja_environment`). rmlprep's output is
documented to differ from it in a few ways (issue 4, ``../shared/chat-templates/README.md``);
:func:`expected_render` applies exactly those removals to a render and returns what
:func:`rmlprep.chat.format_chat` must produce:

* the template's leading BOS is dropped (the tokenizer adds it);
* Qwen2, Qwen2.5 and SmolLM2 inject a default system block when the conversation has no
  system message; it is dropped;
* Llama 3.1 / 3.2 write "Cutting Knowledge Date" / "Today Date" lines (and, without a system
  message, a system block holding only them); they are dropped;
* Mistral v3 / v3-tekken leave the system message out when the conversation ends on an
  assistant turn; rmlprep follows mistral-common (system message in the last user message),
  so the expected text is built from renders where the template's placement is defined
  (:func:`defined_renders`);
* phi3.5's template drops a system message with empty content; rmlprep's ``phi3`` follows
  Phi-3-mini's, so such messages are left out of rmlprep's input before comparing.

Some conversations a template renders while silently losing or mangling a message;
rmlprep refuses them on purpose (:data:`KNOWN_REFUSALS`). Every conversation a template
refuses (``error`` rows) rmlprep must refuse too.

Renders files (``fixtures/chat/renders.jsonl``, made by ``tools/make_chat_fixtures.py``): a
banner ``{"banner": true, "templates_sha256": {name: sha256}, ...}``, conversation records
``{conversation_id, messages}``, and render rows ``{template, conversation_id,
add_generation_prompt, output | error[, defined_renders]}`` (``messages`` may be inline, as in
``../shared/chat-templates/renders.jsonl``).

The run's chat parity stage (:func:`run_chat_parity_stage`, called by
:func:`rmlprep.parity.run_parity_stage` for the sft pipeline):

1. picks the renders: when the tokenizer carries a chat template whose sha256 is in the
   renders banner, that template's rows (the template must map to ``chat.format``); else
   the rows of every template that maps to ``chat.format``;
2. formats each conversation with rmlprep and stops at the first difference with a
   :class:`ParityError` (text = the conversation as JSON, position = first differing
   character, expected/actual = both texts as lists of characters);
3. with ``parity.chat_live_sample = N > 0``, jinja2 installed and a chat template on the
   tokenizer, renders the first N corpus conversations with that template and compares
   them after the same removals.

Source: transformers ``utils/chat_template_utils.py`` (``_compile_jinja_template``) for the
Jinja environment; mistral-common for the Mistral v3 system placement.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .chat import detect_chat_format, format_chat
from .errors import ChatFormatError, ConfigError, ParityError

__all__ = [
    "TEMPLATE_FORMATS",
    "KNOWN_REFUSALS",
    "Removals",
    "renders_path",
    "load_renders",
    "template_sha256",
    "match_template",
    "templates_for_format",
    "removals_for",
    "expected_render",
    "check_render_row",
    "check_chat_renders",
    "check_chat_format",
    "text_parity_error",
    "jinja_environment",
    "render_template",
    "needs_defined_renders",
    "defined_renders",
    "live_chat_check",
    "run_chat_parity_stage",
]

#: rmlprep's format for every real template in ../shared/chat-templates (None: no rmlprep
#: format reproduces it; detect_chat_format refuses it).
TEMPLATE_FORMATS: dict[str, str | None] = {
    "chatml-openhermes": "chatml",
    "qwen2": "chatml",
    "qwen2.5": "chatml",
    "smollm2": "chatml",
    "llama2": "llama2",
    "llama3": "llama3",
    "llama3.1": "llama3",
    "llama3.2": "llama3",
    "mistral-v0.1-orig": None,
    "mistral-v0.2-orig": None,
    "mistral-v1": "mistral-v1",
    "mistral-v3": "mistral-v3",
    "mistral-v3-tekken": "mistral-v3-tekken",
    "mistral-v7": "mistral-v7",
    "mistral-v7-tekken": "mistral-v7-tekken",
    "gemma": "gemma",
    "gemma3": "gemma3",
    "phi3": "phi3",
    "phi3.5": "phi3",
    "zephyr": "zephyr",
    "deepseek-llm": "deepseek-llm",
    "deepseek-v3": "deepseek3",
    "deepseek-r1-distill-qwen": "deepseek-r1",
    "command-r": "command-r",
}

_DS_BOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"
#: The leading BOS each template writes (templates that never write bos_token: absent).
_BOS: dict[str, str] = {
    "llama2": "<s>", "llama3": "<|begin_of_text|>", "llama3.1": "<|begin_of_text|>",
    "llama3.2": "<|begin_of_text|>", "mistral-v0.1-orig": "<s>", "mistral-v0.2-orig": "<s>",
    "mistral-v1": "<s>", "mistral-v3": "<s>", "mistral-v3-tekken": "<s>", "mistral-v7": "<s>",
    "mistral-v7-tekken": "<s>", "gemma": "<bos>", "gemma3": "<bos>", "deepseek-llm": _DS_BOS,
    "deepseek-v3": _DS_BOS, "deepseek-r1-distill-qwen": _DS_BOS, "command-r": "<BOS_TOKEN>",
}
#: The system block a template injects when the conversation has no system message.
_DEFAULT_SYSTEM: dict[str, str] = {
    "qwen2": "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n",
    "qwen2.5": "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n",
    "smollm2": "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n",
}
_DATE_LINES = re.compile(r"Cutting Knowledge Date: December 2023\nToday Date: [^\n]*\n\n")
_DATE_BLOCK = re.compile(r"^<\|start_header_id\|>system<\|end_header_id\|>\n\n" + _DATE_LINES.pattern + r"<\|eot_id\|>")
_ANY_CHATML_SYSTEM = re.compile(r"^<\|im_start\|>system\n.*?<\|im_end\|>\n", re.S)

#: Renders rmlprep refuses on purpose: the template accepts the conversation but silently
#: drops a message or writes a role the format has no turn for. (template, conversation_id).
KNOWN_REFUSALS: dict[tuple[str, str], str] = {
    ("llama2", "g3_system_not_first"): "template silently drops the mid-conversation system message",
    ("gemma", "g3_system_not_first"): "template writes a '<start_of_turn>system' turn Gemma has no role for",
    ("gemma3", "g3_system_not_first"): "template writes a '<start_of_turn>system' turn Gemma has no role for",
    ("command-r", "g3_system_not_first"): "template silently drops the mid-conversation system message",
    ("llama2", "g5_system_only"): "template renders nothing: the system message is lost",
    ("mistral-v1", "g5_system_only"): "template renders only BOS: the system message is lost",
    ("mistral-v3", "g5_system_only"): "template renders only BOS: the system message is lost",
    ("mistral-v3-tekken", "g5_system_only"): "template renders only BOS: the system message is lost",
    ("gemma3", "g5_system_only"): "template renders only BOS: the system message is lost",
    ("command-r", "g5_system_only"): "a system turn with no user turn is not a conversation the format alternates",
    ("deepseek-r1-distill-qwen", "g4_two_systems"): "template keeps only the last system message",
}


@dataclass(frozen=True, slots=True)
class Removals:
    """What is removed from a template's render before comparing it with rmlprep's output.

    Attributes:
        bos: the leading BOS text the template writes (dropped when the render starts with it).
        default_system: the exact system block injected when there is no system message
            (must be there and is dropped); ``"any-chatml"``: a leading ChatML system block is
            dropped when present (templates not in the fixtures).
        date_lines: Llama 3.1/3.2 date lines; ``"required"`` (must be there) or ``"optional"``.
        drop_empty_system: leave system messages with empty content out of rmlprep's input.
        mistral_v3: the Mistral v3 system placement is rebuilt from ``defined_renders``.
    """

    bos: str | None = None
    default_system: str | None = None
    date_lines: str | None = None
    drop_empty_system: bool = False
    mistral_v3: bool = False


def removals_for(template: str | None, fmt: str, *, bos_token: str | None = None) -> Removals:
    """The removals for a known template (by name), else generic ones for ``fmt``.

    Generic removals (a model's own template that is not in the fixtures): drop ``bos_token``
    when the render starts with it, a leading ChatML system block when the conversation has
    none (chatml), the date lines when present (llama3).
    """
    if template is not None and template in TEMPLATE_FORMATS:
        return Removals(
            bos=_BOS.get(template),
            default_system=_DEFAULT_SYSTEM.get(template),
            date_lines="required" if template in ("llama3.1", "llama3.2") else None,
            drop_empty_system=template == "phi3.5",
            mistral_v3=template in ("mistral-v3", "mistral-v3-tekken"),
        )
    return Removals(
        bos=bos_token or None,
        default_system="any-chatml" if fmt == "chatml" else None,
        date_lines="optional" if fmt == "llama3" else None,
        mistral_v3=fmt in ("mistral-v3", "mistral-v3-tekken"),
    )


# -- renders files -----------------------------------------------------------------------------
def renders_path() -> Path:
    """``fixtures/chat/renders.jsonl`` of the source tree this package is in."""
    from ._paths import fixtures_root

    return fixtures_root() / "chat" / "renders.jsonl"


def load_renders(path: str | os.PathLike) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Read a renders file into (banner or {}, render rows with ``messages`` filled in).

    Raises:
        ConfigError: the file is missing, a line is not JSON, or a row lacks its fields.
    """
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ConfigError(f"parity.chat_renders: {p} does not exist") from None
    banner: dict[str, Any] = {}
    convs: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except ValueError as e:
            raise ConfigError(f"parity.chat_renders: {p}:{i} is not valid JSON: {e}") from None
        if not isinstance(r, dict):
            raise ConfigError(f"parity.chat_renders: {p}:{i} is not a JSON object")
        if r.get("banner"):
            banner = r
        elif "template" in r:
            rows.append(dict(r, _line=i))
        elif "conversation_id" in r and "messages" in r:
            convs[r["conversation_id"]] = r["messages"]
    for r in rows:
        if "messages" not in r:
            r["messages"] = convs.get(r.get("conversation_id"))
        if (not isinstance(r["messages"], list) or not isinstance(r.get("add_generation_prompt"), bool)
                or not (isinstance(r.get("output"), str) or "error" in r)):
            raise ConfigError(f"parity.chat_renders: {p}:{r['_line']} needs messages (or a conversation record), "
                              "add_generation_prompt and output or error; regenerate with tools/make_chat_fixtures.py")
    return banner, rows


def template_sha256(template: str) -> str:
    """sha256 hex of a chat template's UTF-8 bytes (as in the renders banner)."""
    return hashlib.sha256(template.encode("utf-8")).hexdigest()


def match_template(banner: Mapping[str, Any], template: str | None) -> str | None:
    """The name of the template in the banner's ``templates_sha256`` equal to ``template``."""
    if not template:
        return None
    h = template_sha256(template)
    return next((n for n, s in sorted(banner.get("templates_sha256", {}).items()) if s == h), None)


def templates_for_format(fmt: str) -> list[str]:
    """Names of the known real templates rmlprep's ``fmt`` reproduces."""
    return [n for n, f in TEMPLATE_FORMATS.items() if f == fmt]


# -- expected text -----------------------------------------------------------------------------
def _fail(text: str, source: str, detail: str) -> ParityError:
    return ParityError(text, 0, [], [], source=source, message=f"{source}: {detail}")


def text_parity_error(text: str, expected: str, actual: str, *, source: str = "", context: int = 60) -> ParityError:
    """A :class:`ParityError` for two texts that differ: ``position`` is the first differing
    character, ``expected``/``actual`` are both texts as lists of characters, and the message
    shows the common text before the difference and how each side continues.

    Args:
        text: the input (the conversation as JSON), kept as ``ParityError.text``.
        expected: the reference text (the render after the removals).
        actual: rmlprep's text.
    """
    pos = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b), min(len(expected), len(actual)))
    lo = max(0, pos - context)
    line = expected.count("\n", 0, pos) + 1
    col = pos - (expected.rfind("\n", 0, pos) + 1) + 1
    message = (
        f"{source + ': ' if source else ''}chat text differs at character {pos} (line {line}, column {col}); "
        f"after {'...' if lo else ''}{expected[lo:pos]!r}\n"
        f"  reference continues: {expected[pos:pos + context]!r}{'...' if len(expected) > pos + context else ''}\n"
        f"  rmlprep continues:   {actual[pos:pos + context]!r}{'...' if len(actual) > pos + context else ''}\n"
        f"  (lengths {len(expected)} vs {len(actual)}; conversation: {text[:300]}{'...' if len(text) > 300 else ''})"
    )
    return ParityError(text, pos, list(expected), list(actual), source=source, message=message)


def _conv_text(messages: Any) -> str:
    return json.dumps(messages, ensure_ascii=False)


def expected_render(row: Mapping[str, Any], removals: Removals | None = None, *,
                    source: str = "") -> tuple[list[dict], str]:
    """(messages for rmlprep, the text rmlprep must produce) for a render row with an ``output``.

    Args:
        row: ``template``, ``messages``, ``output`` (and ``defined_renders`` for Mistral v3
            rows with a system message ending on an assistant turn).
        removals: default :func:`removals_for` the row's template.
    Raises:
        ParityError: the render lacks a block the removals say it has (the template does not
            behave as documented).
        ConfigError: a Mistral v3 row that needs ``defined_renders`` lacks them.
    """
    t, msgs, out = row.get("template"), list(row["messages"]), row["output"]
    if removals is None:
        removals = removals_for(t, TEMPLATE_FORMATS.get(t) or "")
    has_system = bool(msgs) and msgs[0].get("role") == "system"
    if removals.mistral_v3 and needs_defined_renders(msgs):
        d = row.get("defined_renders")
        if not d:
            raise ConfigError(f"{source}: a Mistral v3 render with a system message ending on an assistant turn "
                              "needs defined_renders; regenerate with python tools/make_chat_fixtures.py")
        if not d["no_system"].startswith(d["no_system_without_last_assistant"]):
            raise _fail(_conv_text(msgs), source, "Mistral v3: the render without the last assistant turn is not a "
                        "prefix of the full render; the system placement cannot be derived")
        out = d["without_last_assistant"] + d["no_system"][len(d["no_system_without_last_assistant"]):]
    if removals.bos and out.startswith(removals.bos):
        out = out[len(removals.bos):]
    if removals.default_system and not has_system:
        if removals.default_system == "any-chatml":
            out = _ANY_CHATML_SYSTEM.sub("", out, count=1)
        elif out.startswith(removals.default_system):
            out = out[len(removals.default_system):]
        else:
            raise _fail(_conv_text(msgs), source, f"the render does not start with the default system block "
                        f"{removals.default_system!r} documented for {t}: {out[:200]!r}")
    if removals.date_lines:
        if has_system:
            out, n = _DATE_LINES.subn("", out, count=1)
        else:
            out, n = _DATE_BLOCK.subn("", out, count=1)
        if n != 1 and removals.date_lines == "required":
            raise _fail(_conv_text(msgs), source, f"the render lacks the date lines documented for {t}: {out[:200]!r}")
    if removals.drop_empty_system:
        msgs = [m for m in msgs if not (m.get("role") == "system" and m.get("content") == "")]
    return msgs, out


def _describe(row: Mapping[str, Any], where: str = "") -> str:
    return (f"{where}{row.get('template') or 'chat template'} conversation {row.get('conversation_id', '?')!s} "
            f"add_generation_prompt={row['add_generation_prompt']}")


def check_render_row(row: Mapping[str, Any], fmt: str, *, removals: Removals | None = None,
                     may_refuse: bool = False, source: str = "") -> str:
    """Compare one render row with rmlprep's writer.

    Returns:
        "match" (same text after the removals), "refused" (both refuse, or rmlprep refuses a
        known-refusal conversation, or ``may_refuse`` and rmlprep refuses).
    Raises:
        ParityError: the texts differ, or only one side refuses the conversation.
    """
    source = source or _describe(row)
    gen = row["add_generation_prompt"]
    msgs = row["messages"]
    known = (row.get("template"), row.get("conversation_id")) in KNOWN_REFUSALS
    if "error" in row or known:
        try:
            got = format_chat(msgs, fmt, add_generation_prompt=gen)
        except ChatFormatError:
            return "refused"
        why = row.get("error") or KNOWN_REFUSALS[(row.get("template"), row.get("conversation_id"))]
        raise _fail(_conv_text(msgs), source, f"the reference refuses this conversation ({why}) but rmlprep's "
                    f"{fmt!r} writes it: {got[:200]!r}")
    msgs, want = expected_render(row, removals, source=source)
    try:
        got = format_chat(msgs, fmt, add_generation_prompt=gen)
    except ChatFormatError as e:
        if may_refuse:
            return "refused"
        raise _fail(_conv_text(msgs), source, f"rmlprep's {fmt!r} refuses a conversation the template renders: {e}") from None
    if got != want:
        raise text_parity_error(_conv_text(msgs), want, got, source=source)
    return "match"


def check_chat_renders(fmt: str, renders: str | os.PathLike | Iterable[Mapping[str, Any]], *,
                       template_name: str | None = None, source: str = "") -> int:
    """Format every conversation of the renders of templates that map to ``fmt`` and compare.

    Args:
        fmt: an rmlprep chat format name.
        renders: a renders file (see the module docstring) or its rows (``messages`` filled in).
        template_name: only this template's rows (it must map to ``fmt``).
        source: names the rows' file in errors when ``renders`` are rows.
    Returns:
        The number of rows checked (matches and agreed refusals).
    Raises:
        ParityError: the first row that differs (see :func:`check_render_row`).
        ConfigError: ``template_name`` maps to another format, or no row was found.
    """
    fmt = detect_chat_format(fmt)
    where = f"{source}: " if source else ""
    if isinstance(renders, (str, os.PathLike)):
        where = f"{renders}: "
        rows = load_renders(renders)[1]
    else:
        rows = list(renders)
    if template_name is not None:
        if TEMPLATE_FORMATS.get(template_name) != fmt:
            raise ConfigError(f"chat.format: template {template_name!r} is written by rmlprep format "
                              f"{TEMPLATE_FORMATS.get(template_name)!r}, not {fmt!r}")
        names = {template_name}
    else:
        names = set(templates_for_format(fmt))
    n = 0
    for r in rows:
        if r.get("template") in names:
            line = f"line {r['_line']}: " if "_line" in r else ""
            check_render_row(r, fmt, source=_describe(r, where + line))
            n += 1
    if n == 0:
        raise ConfigError(f"parity.chat: {where}no renders of {sorted(names)} (format {fmt!r}) to check")
    return n


# -- live rendering with jinja2, as transformers does ---------------------------------------------
def jinja_environment(now: datetime | None = None):
    """A jinja2 environment set up like transformers' ``_compile_jinja_template``.

    ``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
    extensions=[loopcontrols])``, ``raise_exception``, ``tojson(ensure_ascii=False)``,
    ``strftime_now`` (frozen at ``now`` when given, else the current time), ``dict``.

    Raises:
        ConfigError: jinja2 is not installed (with the pip line).
    """
    try:
        import jinja2
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise ConfigError("parity.chat_live_sample: rendering chat templates needs jinja2: pip install jinja2") from None

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return (now or datetime.now()).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = dict
    return env


def render_template(env, template, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool,
                    bos_token: str | None, eos_token: str | None) -> dict[str, str]:
    """Render one conversation: ``{"output": text}`` or ``{"error": "TemplateError: ..."}``.

    ``template`` is the template source or a compiled ``env.from_string(...)``. Called as
    transformers calls it: ``messages, tools=None, documents=None, add_generation_prompt,
    bos_token, eos_token``.
    """
    import jinja2

    try:
        t = env.from_string(template) if isinstance(template, str) else template
        out = t.render(messages=messages, tools=None, documents=None, add_generation_prompt=add_generation_prompt,
                       bos_token=bos_token, eos_token=eos_token)
        return {"output": out}
    except jinja2.exceptions.TemplateError as e:
        return {"error": f"{type(e).__name__}: {e}"}


def needs_defined_renders(messages: Sequence[Mapping[str, Any]]) -> bool:
    """A Mistral v3 conversation whose system placement the real template leaves undefined:
    a system message and an ending user → assistant pair."""
    return (len(messages) >= 3 and messages[0].get("role") == "system"
            and messages[-1].get("role") == "assistant" and messages[-2].get("role") == "user")


def defined_renders(render: Callable[[list], dict[str, str]], messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The renders from which the mistral-common system placement is derived.

    ``render(messages) -> {"output"} | {"error"}``. Expected = ``without_last_assistant`` +
    (``no_system`` minus its prefix ``no_system_without_last_assistant``).
    """
    msgs = list(messages)
    nosys = msgs[1:]
    return {
        "without_last_assistant": render(msgs[:-1]).get("output"),
        "no_system": render(nosys).get("output"),
        "no_system_without_last_assistant": render(nosys[:-1]).get("output"),
    }


def _token_text(tokenizer, i: int | None) -> str | None:
    return tokenizer.spec.vocab[i] if i is not None and 0 <= i < len(tokenizer.spec.vocab) else None


def live_chat_check(fmt: str, template: str, conversations: Iterable[Sequence[Mapping[str, Any]]], *,
                    bos_token: str | None, eos_token: str | None, template_name: str | None = None,
                    add_generation_prompt: bool = False, now: datetime | None = None) -> dict[str, int]:
    """Render conversations with a real chat template and compare with rmlprep after the removals.

    Conversations rmlprep refuses are counted, not compared (the run rejects those rows).

    Returns:
        ``{"compared": n, "refused": r}``.
    Raises:
        ParityError: the first difference, or a conversation the template refuses that
            rmlprep writes.
        ConfigError: jinja2 is not installed.
    """
    env = jinja_environment(now)
    compiled = env.from_string(template)
    removals = removals_for(template_name, fmt, bos_token=bos_token)
    counts = {"compared": 0, "refused": 0}

    def render(m):
        return render_template(env, compiled, m, add_generation_prompt=add_generation_prompt,
                               bos_token=bos_token, eos_token=eos_token)

    for i, msgs in enumerate(conversations):
        msgs = list(msgs)
        row: dict[str, Any] = {"template": template_name, "conversation_id": f"corpus sample {i}",
                               "messages": msgs, "add_generation_prompt": add_generation_prompt, **render(msgs)}
        if "output" in row and removals.mistral_v3 and needs_defined_renders(msgs):
            row["defined_renders"] = defined_renders(render, msgs)
        src = f"live render with the tokenizer's chat template ({template_name or 'not in the fixtures'}), corpus conversation {i}"
        res = check_render_row(row, fmt, removals=removals, may_refuse=True, source=src)
        counts["compared" if res == "match" else "refused"] += 1
    return counts


# -- the run's stage -------------------------------------------------------------------------------
def _sample_conversations(cfg, units, n: int) -> list[list]:
    from .readers import read_unit

    out: list[list] = []
    column = cfg["input"]["column"]
    for u in units:
        for b in read_unit(u, column, min(n, cfg["input"]["batch_rows"])):
            vals = b.values.to_pylist() if hasattr(b.values, "to_pylist") else b.values
            for v in vals:
                if isinstance(v, list) and v and all(isinstance(m, dict) for m in v):
                    out.append(v)
                    if len(out) >= n:
                        return out
            break
    return out


def check_chat_format(fmt: str, *, template: str | None = None, renders: str | os.PathLike | None = None,
                      required: bool = False, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Check a chat format against the committed renders, chosen by the model's own template.

    Args:
        fmt: an rmlprep chat format name.
        template: the tokenizer's ``chat_template``. When its sha256 is in the renders banner,
            only that template's rows are checked (and it must map to ``fmt``); otherwise the
            rows of every template that maps to ``fmt``.
        renders: a renders file (default :func:`renders_path`).
        required: no renders to check is an error (else a log line).
    Returns:
        ``{"format", "renders", "templates", "matched_template", "rows"}`` (rows = 0: nothing
        was checked).
    Raises:
        ParityError: the first render rmlprep does not reproduce.
        ConfigError: the template is a known one that ``fmt`` does not write; ``required``
            and nothing to check; a missing or malformed renders file given explicitly.
    """
    fmt = detect_chat_format(fmt)
    path = str(renders) if renders is not None else str(renders_path())
    summary: dict[str, Any] = {"format": fmt, "renders": None, "templates": [], "matched_template": None, "rows": 0}
    if not os.path.isfile(path):
        if required or renders is not None:
            raise ConfigError(f"parity.chat_renders: the renders file {path} does not exist; give one made by "
                              "tools/make_chat_fixtures.py, or set parity.chat = \"auto\" to skip the check")
        log(f"warning: parity: chat renders {path} not found; chat format not checked")
        return summary
    banner, rows = load_renders(path)
    matched = match_template(banner, template)
    if matched is not None:
        mfmt = TEMPLATE_FORMATS.get(matched)
        if mfmt != fmt:
            raise ConfigError(
                f"chat.format: the tokenizer's chat template is {matched!r} (sha256 {template_sha256(template)[:12]}), "
                + (f"which rmlprep writes as {mfmt!r}, not {fmt!r}; set chat.format = \"{mfmt}\""
                   if mfmt else "which no rmlprep chat format reproduces")
                + ", or parity.chat = false to write another format on purpose"
            )
        names = [matched]
        log(f"parity: the tokenizer's chat template is {matched!r} (sha256 match in {path})")
    else:
        names = [n for n in templates_for_format(fmt) if any(r["template"] == n for r in rows)]
        if template:
            try:
                det = detect_chat_format(template)
            except ChatFormatError:
                det = None
            note = f"detected as {det!r}" if det else "not recognized"
            log(f"{'warning: ' if det != fmt else ''}parity: the tokenizer's chat template (sha256 "
                f"{template_sha256(template)[:12]}) is not among the rendered templates, {note}; "
                f"checking every template written as {fmt!r}")
    selected = [r for r in rows if r["template"] in set(names)]
    if not selected:
        msg = f"parity: no chat renders for format {fmt!r} in {path}"
        if required:
            raise ConfigError(f"parity.chat = true: {msg}; render some with tools/make_chat_fixtures.py "
                              "or set parity.chat = \"auto\"")
        log(f"{msg}; chat format not checked against a reference")
        return summary
    n = check_chat_renders(fmt, selected, template_name=matched, source=path)
    summary.update(renders=path, templates=names, matched_template=matched, rows=n)
    log(f"parity: {n} chat renders of {', '.join(names)} match format {fmt!r}")
    return summary


def run_chat_parity_stage(cfg, tokenizer, units, *, log: Callable[[str], None] = print) -> dict[str, Any] | None:
    """The chat part of the run's parity stage (see the module docstring).

    Returns:
        A summary for the manifest (``None`` when ``parity.chat = false``): what
        :func:`check_chat_format` returns, plus ``live`` (``{"compared", "refused",
        "jinja2"}`` or None) and ``live_skipped`` (why, when asked for but not done).
    Raises:
        ParityError: a mismatch (nothing has been written yet).
        ConfigError: see :func:`check_chat_format` (``required`` = ``parity.chat = true``).
    """
    par = cfg["parity"]
    if par["chat"] is False:
        return None
    fmt = cfg["chat"]["format"]
    template = getattr(tokenizer, "chat_template", None)
    summary = check_chat_format(fmt, template=template, renders=par["chat_renders"], required=par["chat"] is True,
                                log=log)
    summary["live"] = None
    matched = summary["matched_template"]
    k = par["chat_live_sample"]
    if k:
        if not template:
            summary["live_skipped"] = "the tokenizer carries no chat template"
            log(f"parity: live chat comparison skipped: {summary['live_skipped']}")
        else:
            try:
                import jinja2
            except ImportError:
                summary["live_skipped"] = "jinja2 is not installed (pip install jinja2)"
                log(f"warning: parity: live chat comparison skipped: {summary['live_skipped']}")
            else:
                convs = _sample_conversations(cfg, units, k)
                res = live_chat_check(fmt, template, convs, bos_token=_token_text(tokenizer, tokenizer.spec.bos_id),
                                      eos_token=_token_text(tokenizer, tokenizer.spec.eos_id), template_name=matched,
                                      add_generation_prompt=cfg["chat"]["add_generation_prompt"])
                summary["live"] = {**res, "jinja2": jinja2.__version__}
                log(f"parity: {res['compared']} corpus conversations rendered with the tokenizer's chat template "
                    f"match format {fmt!r} ({res['refused']} refused by rmlprep, rejected in the run)")
    return summary
