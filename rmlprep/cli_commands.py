"""The ``rmlprep`` commands that look at a tokenizer or a chat format without running a pipeline
(``inspect``, ``chat``, ``parity``), and what every command shares: the tokenizer argument's
loader, the stderr log, the text writer. :mod:`rmlprep.cli` parses the arguments and maps
errors to exit codes; each ``cmd_*`` here takes the parsed arguments and returns 0 or raises.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path

from .chat import detect_chat_format, encode_chat, format_chat
from .chat.columns import MEDIA_FIELDS, SYSTEM_FIELDS
from .chat.convert import join_text_parts
from .chat.detect import ChatTemplateError, check_template_format
from .chat.registry import config_format_error, get_format, join_parts_refusal
from .chat.encode import auto_format, missing_stop_token, stop_token_refusal, template_specials
from .chat_parity import check_chat_format
from .cli_text import argv_text, read_file_text, read_json_file, read_texts
from .errors import ChatFormatError, InputError, ParityError, RmlprepError
from .load import CLI_WORDS, DEMO_PREFIX, open_tokenizer
from .parity import DEFAULT_TEXTS, check_fixture, find_fixture, live_check, make_fixture
from .spec import TokenType

__all__ = ["log", "open_tokenizer_arg", "write_text", "cmd_inspect", "cmd_chat", "cmd_parity"]


def log(msg: str) -> None:
    """``msg`` as one line on stderr (a command's notes and warnings; stdout holds its output)."""
    print(msg, file=sys.stderr, flush=True)


def open_tokenizer_arg(path: str, name: str | None):
    """``(tokenizer, file)`` for a command's TOKENIZER argument (``--name``: a tiktoken encoding),
    a relative path taken from the current directory (:func:`rmlprep.load.open_tokenizer`)."""
    if not path.startswith(DEMO_PREFIX):
        path = str(Path(path).expanduser().absolute())
    return open_tokenizer(path, name=name, log=log, words=CLI_WORDS)


def write_text(text: str, exact: bool) -> None:
    """``text`` and a newline that ends the output (not part of the text: ``-n`` leaves it out),
    as ``print`` and sentencepiece's ``spm_decode`` end theirs."""
    sys.stdout.write(text if exact else text + "\n")


def cmd_inspect(a) -> int:
    """Print the tokenizer's description as JSON: kind, sizes, the ids with a role, the other
    control tokens, and the user-defined tokens (Hugging Face's non-special added tokens,
    sentencepiece's and GGUF's user-defined pieces), each list capped at its first 30 by id with
    its count. ``one_id_in_plain_text``: the user-defined tokens are cut out of text even with
    ``parse_special=False`` (``--no-parse-special``, a run's default), as tokenizers and
    sentencepiece do.
    """
    tok, f = open_tokenizer_arg(a.tokenizer, a.name)
    s = tok.spec
    roles = {x for x in (s.bos_id, s.eos_id, s.unk_id, s.pad_id, *s.eot_ids) if x is not None}
    control = [i for i, t in enumerate(s.token_types) if t == TokenType.CONTROL and i not in roles]
    specials = {i: s.vocab[i] for i in sorted(roles)}
    # Qwen2.5's <tool_call>, <|fim_prefix|> ...: one id wherever their text stands, with
    # --no-parse-special and in a run too (tokenizers' non-special added tokens, sentencepiece's
    # user-defined pieces), so a user sees which strings of a corpus will not be split
    user = [i for i, t in enumerate(s.token_types) if t == TokenType.USER_DEFINED]
    info = {
        "file": f,
        "name": s.name,
        "kind": s.kind,
        "vocab_size": tok.vocab_size,
        "merges": len(s.merges) if s.merges else None,
        "scores": s.scores is not None,
        "bos_id": s.bos_id, "eos_id": s.eos_id, "unk_id": s.unk_id, "pad_id": s.pad_id,
        "eot_ids": list(s.eot_ids), "add_bos": s.add_bos, "add_eos": s.add_eos,
        "special_tokens": specials,  # by role; the rest (Qwen2.5's <|im_start|> ...) below, the first 30
        "other_control_tokens": {"count": len(control), "first": {i: s.vocab[i] for i in control[:30]}},
        "user_defined_tokens": {"count": len(user), "one_id_in_plain_text": bool(user) and s.parse_user_defined_always,
                                "first": {i: s.vocab[i] for i in user[:30]}},
        "pre_split": list(s.pre_split),
        "fingerprint": tok.fingerprint,
    }
    print(json.dumps(info, indent=1, ensure_ascii=False))
    return 0


def cmd_chat(a) -> int:
    data = read_json_file(a.messages)
    msgs = data["messages"] if isinstance(data, dict) and "messages" in data else data
    tools = data.get("tools") if isinstance(data, dict) else None
    if isinstance(data, dict) and "messages" in data:  # a run refuses these columns unnamed; here unread
        for key in ("functions", *SYSTEM_FIELDS, *MEDIA_FIELDS):
            if data.get(key) is not None:
                raise InputError(f"{a.messages}: {key!r} beside the messages: rmlprep chat reads only 'messages' "
                                 f"and 'tools', so it would print the conversation without it "
                                 f"({'a default system prompt in its place' if key in SYSTEM_FIELDS else 'tool calls without definitions' if key == 'functions' else 'placeholders such as <image> as text'}); "
                                 f"{'put it into messages as the first system message' if key in SYSTEM_FIELDS else 'name it tools' if key == 'functions' else 'remove it to preview the text alone'}")
    fmt_arg = a.format
    if Path(fmt_arg).is_file():
        fmt_arg = read_file_text(fmt_arg)
    elif fmt_arg in ("auto", "template") and not a.tokenizer:
        raise RmlprepError(f"chat --format {fmt_arg}: give --tokenizer, whose own chat template it takes "
                           "(as chat.format does in a run)")
    elif fmt_arg not in ("auto", "template"):
        _check_format_name(fmt_arg, "chat --format", _CHAT_OTHERS)
    options = _chat_options(a.option)
    if a.tokenizer:
        tok, _ = open_tokenizer_arg(a.tokenizer, a.name)
        if fmt_arg in ("auto", "template") and not tok.chat_template:
            raise RmlprepError(f"chat --format {fmt_arg}: {a.tokenizer} carries no chat_template; name the format")
        fmt = fmt_arg
        with _no_format_is_parity(fmt_arg):
            if fmt_arg == "auto":  # the format proved on the tokenizer's template, with its bos/eos, as a run does
                fmt = auto_format(tok, "chat --format auto", "--format {}")  # (a GGUF's defaulted ones refused)
            elif fmt_arg != "template":
                bos, eos = template_specials(tok, fmt_arg)
                fmt = detect_chat_format(fmt_arg, bos_token=bos, eos_token=eos)
        if not a.text_markers and (stop := missing_stop_token(tok, fmt, options)) is not None:
            raise RmlprepError(f"chat --format {fmt}: {stop_token_refusal(tok, fmt, stop)}; or pass --text-markers "
                               "to encode them as text (chat.text_markers = true in a run)")
        msgs = _joined_parts(msgs, fmt, a.join_text_parts)
        enc = encode_chat(tok, msgs, fmt, add_generation_prompt=a.add_generation_prompt, tools=tools,
                          text_markers=a.text_markers, options=options)
        print(json.dumps({"format": fmt, "input_ids": enc.input_ids, "assistant_masks": enc.assistant_masks}))
    else:
        with _no_format_is_parity(fmt_arg):
            fmt = detect_chat_format(fmt_arg)
        msgs = _joined_parts(msgs, fmt, a.join_text_parts)
        write_text(format_chat(msgs, fmt, add_generation_prompt=a.add_generation_prompt, tools=tools,
                                options=options), a.no_newline)
    return 0


def _joined_parts(msgs, fmt: str, sep: str | None):
    """``--join-text-parts SEP`` (``\\n`` typed as backslash n is a newline) applied as
    ``chat.join_text_parts`` is in a run: the text parts of a content joined where ``fmt``'s
    template takes only a string; unset, such a content is refused (exit 2), naming this option.

    Raises:
        RmlprepError: ``SEP`` given with ``--format template`` (its template is given the parts).
        ChatFormatError: no ``SEP`` and a content of two or more text parts (see
            :func:`rmlprep.chat.convert.join_text_parts`).
    """
    sep = None if sep is None else sep.replace("\\n", "\n")
    if why := join_parts_refusal(fmt, sep):
        raise RmlprepError(f"chat --format {fmt}: {why}")
    way = ("pass --join-text-parts '\\n' (a newline: vLLM's join) or --join-text-parts '' (as templates that iterate "
           "parts join them) to choose, or join them in the data")
    return join_text_parts(msgs, None if fmt == "template" else get_format(fmt), sep, way=way)[0]


@contextmanager
def _no_format_is_parity(template: str):
    """``chat --format auto`` (or a template file) that no format reproduces: a parity failure,
    :class:`ParityError` (exit 3), as ``chat.format = "auto"`` in a run and ``parity --chat FILE``
    (:mod:`rmlprep.chat_resolve`); several formats reproducing it stays a user error (exit 2: name one)."""
    try:
        yield
    except ChatTemplateError as e:
        if e.formats:
            raise
        raise ParityError(template, 0, [], [], source="chat template", message=f"chat parity: {e}") from None


#: what else ``chat --format`` takes, said after the list of format names
_CHAT_OTHERS = ("\"auto\" (with --tokenizer: the format that reproduces its chat template), \"template\" "
                "(that template itself, rendered with jinja2) or a Jinja template file")


def _check_format_name(name: str, option: str, others: str) -> None:
    """Refuse an unknown format ``name`` given to ``option`` (before a tokenizer is loaded) as a
    run's ``chat.format`` is refused: the known names, then ``others`` (what else the option
    takes), then the near names (``qwen25``: did you mean ``'qwen2.5'``?;
    :func:`rmlprep.chat.registry.config_format_error`). Template text passes unchecked.

    Raises:
        ChatFormatError: ``name`` is no format name (nor template text).
        InputError: ``name`` has a path's ``/`` or a template file's suffix (``.jinja``): a
            template file that is not there.
    """
    if "{{" in name or "{%" in name:
        return
    try:
        detect_chat_format(name)
    except ChatFormatError as e:
        if "/" in name or Path(name).suffix in (".jinja", ".jinja2", ".j2"):  # meant as a file
            raise InputError(f"{option} {name}: no such file (a Jinja template file), nor a format name") from None
        raise ChatFormatError(f"{option}: {config_format_error(e, name, others=others)}") from None


def _chat_options(items: list[str]) -> dict | None:
    """``--option KEY=VALUE`` arguments as chat options: VALUE read as a TOML value (``false`` is
    the boolean, as ``chat.options`` in a run config reads it), else as text (``high``).

    Raises:
        RmlprepError: an argument without ``=``; a key given twice; bytes that are not UTF-8.
    """
    import tomllib

    out: dict = {}
    for item in (argv_text(x, "--option") for x in items):  # a Latin-1 byte was encoded as U+FFFD
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise RmlprepError(f"--option {item!r}: give KEY=VALUE (e.g. --option enable_thinking=false)")
        if key in out:
            raise RmlprepError(f"--option: {key} given twice")
        try:
            out[key] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            out[key] = value
    return out or None


def _cmd_parity_chat(a) -> int:
    fmt_arg = a.chat
    if Path(fmt_arg).is_file():
        fmt_arg = read_file_text(fmt_arg)
    else:
        _check_format_name(fmt_arg, "parity --chat", "a Jinja template file")
    try:
        fmt = detect_chat_format(fmt_arg)
    except ChatTemplateError as e:  # no format reproduces the template: a parity failure (exit 3), as in a run
        if e.formats:
            raise
        raise ParityError(fmt_arg, 0, [], [], source="chat template", message=f"chat parity: {e}") from None
    template = open_tokenizer_arg(a.tokenizer, a.name)[0].chat_template if a.tokenizer else None
    if template:
        try:
            check_template_format(template, fmt)
        except ChatFormatError as e:
            raise ParityError(template, 0, [], [], source="chat template", message=f"chat parity: {e}") from None
        log(f"parity: the tokenizer's chat template is reproduced by format {fmt!r} on every probe")
    s = check_chat_format(fmt, template=template, renders=a.chat_renders, required=True, log=log)
    print(f"chat: {s['rows']} renders of {', '.join(s['templates'])} match format {fmt!r} ({s['renders']})")
    return 0


def cmd_parity(a) -> int:
    if a.chat:
        if a.make_fixture or a.fixture or a.texts:
            raise RmlprepError("parity --chat checks the chat format only; leave out --make-fixture, --fixture, --texts")
        return _cmd_parity_chat(a)
    if a.chat_renders:
        raise RmlprepError("parity --chat-renders needs --chat FORMAT")
    if not a.tokenizer:
        raise RmlprepError("parity: give a TOKENIZER (or --chat FORMAT to check a chat format)")
    tok, f = open_tokenizer_arg(a.tokenizer, a.name)
    texts = read_texts(a.texts) if a.texts else list(DEFAULT_TEXTS)
    if a.make_fixture:
        if f is None:
            raise RmlprepError("parity --make-fixture needs a tokenizer file (the fallback tokenizer has none)")
        fx = make_fixture(f, a.make_fixture, tokenizer=tok, texts=texts)
        print(f"wrote {a.make_fixture}: {len(fx['cases'])} cases from {fx['reference']}")
        return 0
    fixture = a.fixture or (str(find_fixture(f)) if find_fixture(f) else None)
    ok = False
    if fixture:
        n = check_fixture(tok, fixture)
        print(f"fixture: {n} cases match ({fixture})")
        ok = True
    if f is not None:
        res = live_check(tok, f, texts)
        if res is not None:
            print(f"live: {res[0]} texts match {res[1]}")
            ok = True
    if not ok:
        if str(a.tokenizer).lower().endswith(".gguf"):
            why = ("a GGUF file has no live reference library (llama.cpp is not one); compare the model's "
                   "tokenizer.json instead (rmlprep parity tokenizer.json)")
        else:
            why = "no reference library for this file is installed (pip install tokenizers tiktoken sentencepiece)"
        raise RmlprepError(f"parity: nothing to compare {a.tokenizer} with: no fixture found, and {why}")
    return 0
