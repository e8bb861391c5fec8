"""What the command line reads as text: ``encode``'s stdin, ``chat``'s messages file, a
template file given to ``chat --format`` / ``parity --chat``, and ``parity --texts``, all
through one UTF-8 decoder (:func:`utf8_text`) that takes a file as the pipeline's readers do.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from . import json_rows
from .errors import InputError, RmlprepError, RowError
from .encoding_hints import not_utf8_hint, wide_encoding
from .readers.jsonl import _BOM

__all__ = ["utf8_text", "stdin_text", "argv_text", "read_file_text", "read_json_file", "read_texts"]


def utf8_text(data: bytes, name: str, *, file: bool = True) -> str:
    """``data`` (a file's bytes, or stdin's: ``file=False``) as UTF-8 text, as the pipeline's
    readers take a file: a UTF-8 byte-order mark at byte 0 is skipped (it marks the encoding
    and is no text; Windows editors write one, and the JSONL and CSV readers skip it at a file's
    start); a UTF-16/32 byte-order mark and invalid UTF-8 are refused, naming the byte offset
    in ``data`` (the locale's decoder turned them into U+FFFD and NUL tokens and gave ids for
    text the user never had). The one decoder of ``encode``'s stdin, ``chat``'s messages file
    and a template file given to ``chat --format`` / ``parity --chat``. Worked example:
    ``b"\\xef\\xbb\\xbfcaf\\xe9"`` is refused at byte 6 (the mark's 3 bytes, then ``caf``).

    Raises:
        InputError: naming ``name``, the encoding or the byte offset, and the iconv line.
    """
    wide = wide_encoding(data[:64])
    if wide is not None:
        raise InputError(f"{name}{': the file' if file else ''} is {wide[0]} ({wide[2]}); rmlprep "
                         f"reads UTF-8: convert it with iconv -f {wide[1]} -t UTF-8")
    skip = len(_BOM) if data.startswith(_BOM) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as e:
        line_at = data.rfind(b"\n", 0, skip + e.start) + 1  # the hint reads the line, not the whole file
        end = data.find(b"\n", skip + e.start)
        line = data[line_at:end if end >= 0 else len(data)]
        hint = not_utf8_hint(line, skip + e.start - line_at, e.reason)
        raise InputError(f"{name}: byte {skip + e.start}: not valid UTF-8 ({e.reason}{hint}); rmlprep reads UTF-8 "
                         "text" + ("" if hint else " (convert it with iconv -t UTF-8)")) from None


def stdin_text() -> str:
    """Standard input as UTF-8 text (:func:`utf8_text`)."""
    return utf8_text(sys.stdin.buffer.read(), "stdin", file=False)


def argv_text(text: str, name: str = "the text argument") -> str:
    """A text given as a command-line argument (``encode TOK "text"``), held to stdin's rule
    (:func:`utf8_text`). Python decodes argv with ``surrogateescape``, so a byte that is not UTF-8
    (``$'caf\\xe9'``, Latin-1) arrives as a lone surrogate (U+DCE9), which the tokenizer encoded
    as U+FFFD: ids for text the user never had (``caf\\xe9`` on Qwen3 gave ``68796 5691``, those of
    ``caf\\ufffd``, where the same bytes on stdin are refused; ``chat --option`` values alike).
    The argument's bytes (:func:`os.fsencode`) are refused at their offset instead. Valid
    UTF-8 is returned as text: unchanged under a UTF-8 locale; under one whose file system
    encoding is not UTF-8 (``LC_ALL=C PYTHONUTF8=0 PYTHONCOERCECLOCALE=0``: ASCII) the bytes of
    ``'café'`` arrive as ``'caf\\udcc3\\udca9'`` and are decoded here, where they reached the
    tokenizer as two U+FFFD (``demo:gpt2`` gave ``66 1878 6353`` for ``66 1878 2634``).

    Raises:
        InputError: naming the argument (``name``) and the byte offset, as for stdin.
    """
    if not any("\udc80" <= c <= "\udcff" for c in text):
        return text
    data = os.fsencode(text)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        utf8_text(data, name, file=False)  # raises, naming the byte
        raise  # pragma: no cover - utf8_text refuses what the decoder refused


def read_file_text(path: str) -> str:
    """A file's text (:func:`utf8_text`).

    Raises:
        RmlprepError: no such file (or it cannot be read).
    """
    try:
        return utf8_text(Path(path).read_bytes(), path)
    except FileNotFoundError:
        raise RmlprepError(f"{path}: no such file") from None
    except OSError as e:
        raise RmlprepError(f"{path}: cannot be read ({e.strerror or e})") from None


def read_json_file(path: str) -> Any:
    """``rmlprep chat``'s messages file: one JSON document (:func:`read_file_text`, then
    :func:`rmlprep.json_rows.loads`: a key twice is refused); ``-`` reads stdin, as ``encode``
    and ``decode`` take it (``head -n 1 data.jsonl | rmlprep chat - ...``).

    Raises:
        RmlprepError: no such file, not JSON (a file of JSON Lines is named as such: ``chat``
            writes one conversation, and said only "Extra data: line 2 column 1").
    """
    text = stdin_text() if path == "-" else read_file_text(path)
    try:
        return json_rows.loads(text)
    except RowError as e:
        raise RmlprepError(f"{path}: {e}") from None
    except ValueError as e:
        lines = [x for x in text.split("\n") if x.strip(" \t\r")]
        if getattr(e, "msg", "") == "Extra data" and len(lines) > 1 and _all_json(lines):
            raise RmlprepError(f"{path}: holds {len(lines)} JSON lines (JSON Lines, one conversation each), and chat "
                               "writes one: a JSON list of messages or {\"messages\": [...]}; give one line (e.g. "
                               f"head -n 1 {path} > one.json), or run the sft pipeline over the file") from None
        raise RmlprepError(f"{path}: not valid JSON: {e}") from None


def _all_json(lines: list[str]) -> bool:
    for line in lines:
        try:
            json.loads(line)
        except ValueError:
            return False
    return True


def read_texts(path: str) -> list[str]:
    """``parity --texts``: each non-blank line's ``"text"`` (a line holding another JSON value:
    that value as ``str``), read as :func:`utf8_text` reads a file. A blank line is JSON
    whitespace only (space, tab, CR, LF), as the JSONL reader takes it
    (:func:`rmlprep.readers.base.is_blank_line`): a line of form feeds or vertical tabs, which
    ``str.strip`` took for blank and skipped, is a line that is not JSON.

    Raises:
        RmlprepError: no such file; InputError: not UTF-8, or a line that is not JSON or an
            object without ``"text"``, naming its line (1-based). It was a traceback.
    """
    out = []
    for n, line in enumerate(read_file_text(path).split("\n"), 1):
        if not line.strip(" \t\r"):
            continue
        try:
            obj = json_rows.loads(line)
        except RowError as e:
            raise InputError(f"{path}: line {n}: {e}") from None
        except ValueError as e:
            if line.isspace():
                raise InputError(f"{path}: line {n}: not valid JSON (only whitespace JSON does not allow, such as "
                                 "a form feed \\x0c or a vertical tab \\x0b)") from None
            raise InputError(f"{path}: line {n}: not valid JSON ({e})") from None
        if isinstance(obj, dict) and not isinstance(obj.get("text"), str):
            raise InputError(f"{path}: line {n}: an object without a \"text\" string (--texts takes "
                             "{\"text\": ...} lines)")
        out.append(obj["text"] if isinstance(obj, dict) else str(obj))
    return out
