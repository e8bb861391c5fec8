"""Chat parity: rmlprep's chat formats against real Jinja templates, before any corpus work.

The run's chat parity stage (:func:`run_chat_parity_stage`, called by
:func:`rmlprep.parity.run_parity_stage` for the sft pipeline):

1. the tokenizer's own ``chat_template``, when it has one, must be reproduced by
   ``chat.format`` on the probe conversations (:func:`rmlprep.chat.detect.prove_format`;
   without jinja2, by its sha256 in the committed table); ``chat.format = "auto"`` takes the
   format that reproduces it; a template no format reproduces stops the run with the first
   differing probe, both texts shown (or use ``chat.format = "template"``);
2. the committed renders (``fixtures/chat/renders.jsonl.gz``, made by
   ``tools/make_chat_fixtures.py``) of every real template written by ``chat.format`` must be
   reproduced byte for byte (a conversation the template refuses must be refused too);
3. with ``parity.chat_live_sample = N``, jinja2 installed and a chat template on the
   tokenizer, the first N corpus conversations (with their ``chat.tools_column`` tools and their
   ``chat.system_column`` system prompt as the run writes it) are
   checked against the messages schema and the format (a bad row is counted, never rendered:
   the run rejects it), and the good ones rendered with the tokenizer's template and compared
   (each unit's worker then compares all of a unit of up to N rows, of more a share: :mod:`.chat_unit_sample`).
   The template renders the conversation *as read* (:func:`read_view`: only the input
   conventions the README documents are applied, from the raw values), not rmlprep's parsed
   :class:`~rmlprep.chat.messages.Conversation`, so a parser that changed a value (a null
   dropped from a tool's schema, an argument added) differs here. "As read" is after the
   reader: a null field of an Arrow struct column is absent to both sides
   (:func:`rmlprep.readers.base.drop_struct_nulls`).

A difference is a :class:`ParityError` (exit 3) naming the conversation, the first differing
character and both texts.

Renders file: JSON lines (gzip when the name ends in ``.gz``): a banner ``{"banner": true,
"templates": {name: {"sha256", "format", "bos_token", "eos_token"}}, ...}``, conversation
records ``{"conversation_id", "messages"[, "tools"]}``, and render rows ``{"template",
"conversation_id", "add_generation_prompt", "output" | "error"}``.

Source: transformers ``utils/chat_template_utils.py`` for the rendering.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .chat import template_sha256
from .chat._template_table import TEMPLATES as PROVED_TEMPLATES
from .chat.convert import join_text_parts as _join_parts, string_tool_arguments
from .chat_sample import LIVE_MAX_INVALID, iter_conversations, live_line, token_text as _token_text
from .chat.detect import check_template_format, named_templates_note
from .chat.encode import defaulted_refusal
from .chat.registry import check_conversation, get_format, read_view, write
from .chat.render import JINJA_PIP, jinja_available, render
from .chat.template import parsed_special_text
from .chat_resolve import check_chat_markers, resolve_chat_config, resolve_chat_format
from .errors import ChatFormatError, ConfigError, ParityError

__all__ = ["renders_path", "load_renders", "check_render_row", "check_chat_renders", "check_chat_format",
           "text_parity_error", "ids_parity_error", "read_view", "live_chat_check", "resolve_chat_format", "resolve_chat_config",
           "check_chat_markers", "run_chat_parity_stage"]

DEFAULT_TODAY = "2024-07-26"


def renders_path() -> Path:
    """``fixtures/chat/renders.jsonl.gz`` of the source tree (or installed package) this is in."""
    from ._paths import fixtures_root

    return fixtures_root() / "chat" / "renders.jsonl.gz"


def _open_text(p: Path):
    return gzip.open(p, "rt", encoding="utf-8") if p.name.endswith(".gz") else open(p, encoding="utf-8")


def load_renders(path: str | os.PathLike) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Read a renders file into (banner or {}, render rows with ``messages`` and ``tools`` filled in).

    Raises:
        ConfigError: the file is missing, a line is not JSON, or a row lacks its fields.
    """
    p = Path(path)
    try:
        with _open_text(p) as fh:
            lines = fh.read().split("\n")
    except FileNotFoundError:
        raise ConfigError(f"parity.chat_renders: {p} does not exist", path=str(p)) from None
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise ConfigError(f"parity.chat_renders: {p} cannot be read: {e}") from None
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
            convs[r["conversation_id"]] = r
    for r in rows:
        c = convs.get(r.get("conversation_id"))
        if "messages" not in r and c is not None:
            r["messages"] = c["messages"]
            r.setdefault("tools", c.get("tools"))
        if (not isinstance(r.get("messages"), list) or not isinstance(r.get("add_generation_prompt"), bool)
                or not (isinstance(r.get("output"), str) or "error" in r)):
            raise ConfigError(f"parity.chat_renders: {p}:{r['_line']} needs messages (or a conversation record), "
                              "add_generation_prompt and output or error; regenerate with tools/make_chat_fixtures.py")
    return banner, rows


def text_parity_error(text: str, expected: str, actual: str, *, source: str = "", context: int = 60) -> ParityError:
    """A :class:`ParityError` for two texts that differ: ``position`` is the first differing
    character, ``expected``/``actual`` are both texts as lists of characters, and the message
    shows the common text before the difference and how each side continues.

    Args:
        text: the input (the conversation as JSON), kept as ``ParityError.text``.
        expected: the reference text (the template's render).
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


def _fail(text: str, source: str, detail: str) -> ParityError:
    return ParityError(text, 0, [], [], source=source, message=f"{source}: {detail}")


def _conv_text(messages: Any) -> str:
    return json.dumps(messages, ensure_ascii=False)


def check_render_row(row: Mapping[str, Any], fmt: str, *, source: str = "",
                     options: Mapping[str, Any] | None = None) -> str:
    """Compare one render row with rmlprep's ``fmt``.

    Returns:
        ``"match"``, or ``"refused"`` (rmlprep refuses a conversation the template renders:
        such rows are rejected in a run, never written differently).
    Raises:
        ParityError: rmlprep writes a conversation the template refuses, or writes it differently.
    """
    msgs, tools, gen = row["messages"], row.get("tools"), bool(row["add_generation_prompt"])
    try:
        got = write(msgs, fmt, add_generation_prompt=gen, tools=tools, options=options).text()
    except ChatFormatError:
        return "refused"
    if "error" in row:
        raise _fail(_conv_text(msgs), source, f"the template refuses this conversation ({row['error']}) but rmlprep's "
                    f"{fmt!r} writes it: {got[:200]!r}")
    if got != row["output"]:
        raise text_parity_error(_conv_text(msgs), row["output"], got, source=source)
    return "match"


def check_chat_renders(fmt: str, rows: Iterable[Mapping[str, Any]], *, templates: Iterable[str],
                       source: str = "") -> dict[str, int]:
    """Check every render row of ``templates`` with ``fmt``.

    Returns:
        ``{"match": n, "refused": r}``.
    Raises:
        ParityError: the first row that differs (see :func:`check_render_row`).
    """
    names = set(templates)
    counts = {"match": 0, "refused": 0}
    for r in rows:
        if r.get("template") in names:
            where = f"{source}:{r['_line']}" if "_line" in r else source
            src = f"{where}: template {r['template']!r}, conversation {r.get('conversation_id')!r}, " \
                  f"add_generation_prompt={r['add_generation_prompt']}"
            counts[check_render_row(r, fmt, source=src)] += 1
    return counts


def check_chat_format(fmt: str, *, template: str | None = None, renders: str | os.PathLike | None = None,
                      required: bool = False, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Check ``fmt`` against the committed renders of every real template it writes.

    Args:
        fmt: a format name.
        template: the tokenizer's chat template, if any: only used to name it in the log.
        renders: a renders file (default :func:`renders_path`).
        required: no renders to check is an error (else a log line).
    Returns:
        ``{"format", "renders", "templates", "rows", "refused"}``.
    Raises:
        ParityError: the first render rmlprep does not reproduce.
        ConfigError: ``required`` and nothing to check; a missing or malformed renders file
            given explicitly.
    """
    get_format(fmt)
    path = Path(renders) if renders is not None else renders_path()
    summary: dict[str, Any] = {"format": fmt, "renders": None, "templates": [], "rows": 0, "refused": 0}
    if not path.is_file():
        if required or renders is not None:
            raise ConfigError(f"parity.chat_renders: the renders file {path} does not exist; give one made by "
                              "tools/make_chat_fixtures.py, or set parity.chat = \"auto\" to skip the check",
                              path=str(path))
        log(f"warning: parity: chat renders {path} not found; chat format not checked against them")
        return summary
    banner, rows = load_renders(path)
    names = sorted(n for n, t in banner.get("templates", {}).items() if t.get("format") == fmt)
    if not names:
        msg = f"parity: no chat renders for format {fmt!r} in {path}"
        if required:
            raise ConfigError(f"parity.chat = true: {msg}; render some with tools/make_chat_fixtures.py "
                              "or set parity.chat = \"auto\"")
        log(f"{msg}; its writer is checked by the probes only")
        return summary
    c = check_chat_renders(fmt, rows, templates=names, source=str(path))
    summary.update(renders=str(path), templates=names, rows=c["match"], refused=c["refused"])
    log(f"parity: {c['match']} committed chat renders of {', '.join(names)} match format {fmt!r} "
        f"({c['refused']} of their conversations refused by the format; renders of those real templates, kept in "
        "rmlprep: not this tokenizer's template, not corpus rows)")
    return summary


#: the end of a live chat difference's message: what the user can do
LIVE_WAYS_ON = ("\n  the tokenizer's template writes this conversation otherwise. If you train with that template: "
                "chat.format = \"template\" renders with the template itself (jinja2; a template that rewrites "
                "earlier turns, as Qwen3's, refuses multi-turn rows there). Only if the format's text is what you "
                "want (the template is an edit you do not follow): parity.chat_live_sample = 0 skips this comparison")


#: The ways on when the only difference is mistral-v3's tool results written as mistral-common
#: writes them (``tool_results = "mistral-common"``, the default on a ``.model`` read alone:
#: :func:`rmlprep.chat.fmt_mistral.tokenizer_options`), in place of :data:`LIVE_WAYS_ON`.
LIVE_TOOL_RESULTS_WAYS = (
    "\n  the only difference is the tool results: rmlprep writes them as mistral-common does (json.dumps of the "
    "result: chat.options tool_results = \"mistral-common\", the default on a SentencePiece .model read alone, whose "
    "reference it is), the tokenizer's template otherwise. If you train with that template: chat.options = "
    "{ tool_results = \"template\" } writes them as it does. If mistral-common's text is what you want: "
    "parity.chat_live_sample = 0 skips this comparison")


def live_chat_check(fmt: str, template: str, conversations: Iterable[tuple[Any, ...]], *,
                    bos_token: str | None, eos_token: str | None, add_generation_prompt: bool = False,
                    options: Mapping[str, Any] | None = None, want: int | None = None,
                    max_invalid: int = LIVE_MAX_INVALID, no_assistant: str = "keep",
                    label: str | None = None, tokenizer=None, ids: Sequence[Any] | None = None,
                    join_text_parts: str | None = None) -> dict[str, int]:
    """Render conversations with a real chat template and compare them with rmlprep's ``fmt``.

    Each conversation is first checked (schema and format): a bad one is counted
    (``invalid``), never rendered, as the run rejects it, and the next one is taken: with
    ``want``, until ``want`` are compared, so refused rows first in the corpus do not leave the
    check with nothing compared (a fresh-user trial: 20 ShareGPT rows first, "0 corpus
    conversations ... match", exit 0, and the 200 rows after them written with text the
    template does not write).

    Args:
        conversations: ``(messages, tools)`` pairs, or ``(messages, tools, where)`` with
            ``where`` naming the row for an error (:func:`.chat_sample.iter_conversations`).
        want: stop after this many are compared (None: all).
        max_invalid: stop after this many refused ones (bounds the rows read when most are).
        no_assistant: ``chat.no_assistant``; with ``"reject"`` a conversation without an assistant
            turn is refused here too, as one ending on an answer is with ``add_generation_prompt``
            (the run rejects both: compared, they were counted as matching rows the run leaves out).
        label: names a conversation in an error (default ``corpus conversation I``, I its position).
        tokenizer, ids: the run's token ids of each conversation (``ids[I]``, uint32 or ints, as
            :func:`rmlprep.arrow.tokenize_chat` wrote them) and its tokenizer: where the texts
            match, the ids must equal ``tokenizer.encode`` of the template's render (special tokens
            parsed, none added: what transformers' ``apply_chat_template(tokenize=True)`` gives,
            the encoder being exact to ``tokenizers``), see :func:`ids_parity_error`. Not compared:
            a conversation whose own text holds control-token text (the format writes it as text,
            the render parses it: counted apart by the run as ``special_text_as_text``), and a
            sentencepiece ``.model`` read alone (its reference encodes text per piece, not the whole
            render: :mod:`rmlprep.spm_special`). ``tokenizer`` also sets what ``fmt`` writes as the
            run writes it (:func:`rmlprep.chat.fmt_mistral.tokenizer_options`: ``mistral-v3``'s
            tool results on a ``.model`` read alone are mistral-common's, so a template that writes
            them otherwise is a difference; where it is the only one, the message says so and names
            the option, :data:`LIVE_TOOL_RESULTS_WAYS`). The run's head check passes the
            tokenizer without ``ids``: the text it writes, no ids (:mod:`rmlprep.chat_sample`).
        join_text_parts: ``chat.join_text_parts``: a content of two or more text parts is joined
            so before both renders, or refused (None) as the run refuses it
            (:func:`rmlprep.chat.convert.join_text_parts`).
    Returns:
        ``{"compared": n, "invalid": k, "arguments_from_string": m}`` (``m``: compared ones whose tool-call
        arguments, a string of JSON, both renders saw parsed: :func:`.chat.convert.string_tool_arguments`).
    Raises:
        ParityError: the first difference (text, or with ``ids`` token ids), or a conversation the
            template refuses that rmlprep writes; its message names the row and the two ways on.
        ChatFormatError: jinja2 is not installed.
    """
    f = get_format(fmt)
    if tokenizer is None or getattr(tokenizer.spec, "prefix_scheme", None) == "whole_text":
        ids = None
    from .chat.fmt_mistral import tokenizer_options
    from .chat.registry import resolve_options, template_kwargs

    note = ""
    if tokenizer is not None:  # the text the run encodes (mistral-v3's tool results on a .model: mistral-common's)
        given, options = options, tokenizer_options(tokenizer, f.name, options)
        if options is not given:
            note = ("\n  (on a SentencePiece .model read alone, mistral-v3 writes tool results as mistral-common does; "
                    "chat.options tool_results = \"template\" writes them as the template does)")
    opts = resolve_options(f, options)
    kwargs = template_kwargs(f, opts)
    counts = {"compared": 0, "invalid": 0, "arguments_from_string": 0}
    for i, (msgs, tools, *where) in enumerate(conversations):
        if (want is not None and counts["compared"] >= want) or counts["invalid"] >= max_invalid:
            break
        try:
            msgs = _join_parts(msgs, f, join_text_parts)[0]  # as the run writes them (None: refused, a reject)
            conv = check_conversation(msgs, f, tools=tools)
            ours = write(conv, f, add_generation_prompt=add_generation_prompt, options=options).text()
        except ChatFormatError:
            counts["invalid"] += 1
            continue
        roles = [m.get("role") for m in msgs if isinstance(m, Mapping)]
        if ("assistant" not in roles and no_assistant == "reject") or (add_generation_prompt and roles[-1:] == ["assistant"]):
            counts["invalid"] += 1  # rejects of the run (rmlprep.arrow.TokenizeChat): not compared
            continue
        vm, vt = read_view(msgs, tools, f)
        ref = render(template, vm, tools=vt, add_generation_prompt=add_generation_prompt, bos_token=bos_token,
                     eos_token=eos_token, now=opts.get("today") or DEFAULT_TODAY, **kwargs)
        src = (f"live render with the tokenizer's chat template, {label or f'corpus conversation {i}'}"
               + (f" ({where[0]})" if where else ""))
        if "error" in ref:
            raise _fail(_conv_text(msgs), src, f"the template refuses this conversation ({ref['error']}) but rmlprep's "
                        f"{fmt!r} writes it{LIVE_WAYS_ON}")
        if ref["output"] != ours:
            e = text_parity_error(_conv_text(msgs), ref["output"], ours, source=src)
            ways = LIVE_WAYS_ON + note
            if opts.get("tool_results") == "mistral-common" and write(  # the whole difference? then say so
                    conv, f, add_generation_prompt=add_generation_prompt,
                    options={**opts, "tool_results": "template"}).text() == ref["output"]:
                ways = LIVE_TOOL_RESULTS_WAYS
            raise ParityError(e.text, e.position, e.expected, e.actual, source=src, message=str(e) + ways)
        if ids is not None:  # (the special-text test only on a difference: it costs a third of the encode)
            want_ids = tokenizer.encode(ref["output"], add_special_tokens=False, parse_special=True)
            got_ids = ids[i].tolist() if hasattr(ids[i], "tolist") else [int(x) for x in ids[i]]
            if got_ids != want_ids and not parsed_special_text(tokenizer, msgs, tools):
                raise ids_parity_error(_conv_text(msgs), want_ids, got_ids, tokenizer, source=src)
        counts["compared"] += 1
        counts["arguments_from_string"] += string_tool_arguments(msgs)
    return counts


def ids_parity_error(text: str, expected: list[int], actual: list[int], tokenizer, *, source: str = "",
                     context: int = 6) -> ParityError:
    """A :class:`ParityError` for a conversation whose text matches the template's render but
    whose ids do not: ``position`` is the first differing token, ``expected`` the tokenizer's
    encoding of the render (``apply_chat_template(tokenize=True)``'s ids), ``actual`` the run's.
    The message shows the pieces around the difference on both sides."""
    pos = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b), min(len(expected), len(actual)))
    lo = max(0, pos - context)

    def pieces(v: list[int]) -> str:
        return ", ".join(f"{i}={tokenizer.decode_bytes([i])!r}" for i in v[lo:pos + context])

    message = (f"{source + ': ' if source else ''}chat token ids differ at token {pos} though the texts match "
               f"(lengths {len(expected)} vs {len(actual)})\n"
               f"  reference (the render encoded whole, as apply_chat_template(tokenize=True)): {pieces(expected)}\n"
               f"  rmlprep:   {pieces(actual)}\n"
               f"  (conversation: {text[:300]}{'...' if len(text) > 300 else ''}); a fault of rmlprep's encoder: "
               "please report it; chat.format = \"template\" encodes the render whole")
    return ParityError(text, pos, list(expected), list(actual), source=source, message=message)


def run_chat_parity_stage(cfg, tokenizer, units, *, log: Callable[[str], None] = print) -> dict[str, Any] | None:
    """The chat part of the run's parity stage (see the module docstring).

    Returns:
        A summary for the manifest (``None`` when ``parity.chat = false``): ``format``,
        ``template`` (``{"sha256", "proved_by"}`` or None), what :func:`check_chat_format`
        returns, ``live`` (``{"compared", "invalid", "jinja2"}`` or None) and
        ``live_skipped`` (why, when asked for but not done).
    Raises:
        ParityError: the format does not reproduce the tokenizer's template, or a render differs.
        ConfigError: see :func:`check_chat_format` (``required``: ``parity.chat = true``); a GGUF's defaulted bos/eos.
    """
    par, chat = cfg["parity"], cfg["chat"]
    if par["chat"] is False:  # said, so a run with the check off is not read as one that passed it
        log(f"parity: chat check off (parity.chat = false): chat.format = {chat['format']!r} is not compared with "
            "the tokenizer's chat template, the committed renders or the corpus")
        return None
    template = getattr(tokenizer, "chat_template", None)
    bos = _token_text(tokenizer, tokenizer.spec.bos_id)
    eos = _token_text(tokenizer, tokenizer.spec.eos_id)
    options = chat.get("options") or {}
    fmt = chat["format"]
    tinfo = None
    if fmt == "template":
        if not template:
            raise ConfigError("chat.format = \"template\": the tokenizer carries no chat_template")
        log("parity: chat.format = \"template\": conversations are rendered with the tokenizer's own template")
        return {"format": "template", "template": {"sha256": template_sha256(template)}, "live": None}
    if template:
        by = "jinja2 probes" if jinja_available() else "sha256 table"
        if not jinja_available() and template_sha256(template) not in PROVED_TEMPLATES:
            # nothing was compared: a missing package, not a parity failure (exit 2, not 3)
            raise ConfigError(f"parity.chat: proving chat.format = {fmt!r} against the tokenizer's chat template "
                              f"(sha256 {template_sha256(template)[:16]}, not among the templates rmlprep has proved) "
                              f"needs jinja2, which is not installed: {JINJA_PIP}; or set parity.chat = false, having "
                              "compared the format with the template yourself")
        if fmt != "auto" and (why := defaulted_refusal(tokenizer, template, fmt)):  # "auto": resolve_chat_format
            raise ConfigError(f"parity.chat: proving chat.format = {fmt!r} against the tokenizer's chat template: "
                              + why)
        try:
            fmt = resolve_chat_format(fmt, tokenizer)
            check_template_format(template, fmt, bos_token=bos, eos_token=eos)
        except ChatFormatError as e:
            raise ParityError(template, 0, [], [], source="chat template", message=f"chat parity: {e}") from None
        tinfo = {"sha256": template_sha256(template), "proved_by": by}
        how = "rendered with jinja2" if by == "jinja2 probes" else "by its sha256: a template rmlprep checked so"
        log(f"parity: format {fmt!r} matches the tokenizer's chat template (sha256 {tinfo['sha256'][:12]}) on every "
            f"probe conversation ({how})")
    elif fmt == "auto":
        raise ConfigError("chat.format = \"auto\": the tokenizer carries no chat_template; name the format")
    elif note := named_templates_note(tokenizer):  # otherwise skipped without a word
        log(f"warning: parity: chat.format = {fmt!r} is not checked against a chat template: the tokenizer carries "
            f"none{note}")
    summary = check_chat_format(fmt, template=template, renders=par["chat_renders"], required=par["chat"] is True,
                                log=log)
    summary["template"] = tinfo
    summary["live"] = None
    k = par["chat_live_sample"]
    if k:
        if not template:
            summary["live_skipped"] = "the tokenizer carries no chat template"
            log(f"parity: live chat comparison skipped: {summary['live_skipped']}")
        elif not jinja_available():
            summary["live_skipped"] = f"jinja2 is not installed ({JINJA_PIP})"
            log(f"warning: parity: live chat comparison skipped: {summary['live_skipped']}")
        else:
            import jinja2

            res = live_chat_check(fmt, template, iter_conversations(cfg, units), bos_token=bos, eos_token=eos,
                                  add_generation_prompt=chat["add_generation_prompt"], options=options, want=k,
                                  no_assistant=chat["no_assistant"], join_text_parts=chat.get("join_text_parts"),
                                  tokenizer=tokenizer)  # the text the run writes (no ids: see chat_sample)
            summary["live"] = {**res, "jinja2": jinja2.__version__}
            log(live_line(res, fmt, k))
    else:
        log("parity: live chat comparison off (parity.chat_live_sample = 0): the format is checked on the probes "
            "and committed renders only")
    return summary

