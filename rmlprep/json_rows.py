"""JSON text from the user's data parsed with one rule the stdlib leaves out: no object may hold
a key twice.

``json.loads('{"text": "first", "text": "second"}')`` is ``{"text": "second"}``: RFC 8259
(section 4) says only that names "SHOULD be unique" and that parsers differ on duplicates
(Python, JavaScript and jq keep the last, some keep the first, some refuse). A row so written
is ambiguous, and keeping the last silently turned ``{"role": "user", "content": ..., "role":
"assistant"}`` into an answer to train on. :func:`loads` refuses it with :class:`RowError`
naming the key and where it is, as an Arrow map column holding a key twice is refused
(:class:`rmlprep.readers.base.MapPairs`). Everything else is ``json.loads``: the same values,
the same :class:`json.JSONDecodeError` messages.

Cost: a Python call per object (``object_pairs_hook``, ~800 instructions): under 1% of the
read stage of a text corpus (one object a row), about 13% of a chat corpus's (a few objects a
row; the format and encode stages cost far more); the numbers are in the commit that added
it. The path of a duplicate is worked out only once one is found, by a second parse.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import RowError

__all__ = ["loads", "DUPLICATE_KEY"]

#: how the reason of a key held twice begins (a whole JSON text, so no sign of a truncated file)
DUPLICATE_KEY = "a JSON object holds the key "


class _Duplicate(ValueError):
    """Raised inside the parser; :func:`loads` turns it into a RowError with the key's path."""


def _no_duplicates(pairs: list) -> dict:
    d = dict(pairs)
    if len(d) != len(pairs):
        raise _Duplicate
    return d


_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicates)


class _Pairs(list):
    """An object's ``(key, value)`` pairs, duplicates kept (the second parse's objects)."""


def _path(parts: list) -> str:
    """A JSONPath (``$.messages[0]``, ``$["a b"]``), as a reject's ``value_encoded`` names places."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" if p.isidentifier()
                         else f"[{json.dumps(p, ensure_ascii=False)}]" for p in parts)


def _first_duplicate(doc: Any) -> tuple[str, str]:
    """(key, path) of the first object (depth first, in document order) holding a key twice;
    the path as :func:`_path` writes it."""
    stack: list[tuple[Any, list]] = [(doc, [])]
    while stack:
        v, where = stack.pop()
        if isinstance(v, _Pairs):
            seen: set = set()
            for k, _ in v:
                if k in seen:
                    return k, _path(where)
                seen.add(k)
            stack.extend((x, where + [k]) for k, x in reversed(v))
        elif isinstance(v, list):
            stack.extend((x, where + [i]) for i, x in reversed(list(enumerate(v))))
    raise AssertionError("no duplicate key found on the second parse")  # pragma: no cover


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``, refusing an object (at any depth) that holds a key twice.

    Example: ``loads('{"a": {"b": 1, "b": 2}}')`` raises ``RowError("a JSON object holds the key
    'b' twice (the object at $.a): which value is meant is not knowable")``.

    Raises:
        json.JSONDecodeError: text that is not JSON (json's own message).
        RowError: an object holding a key twice, naming the key and the object's path.
        RecursionError, ValueError: as ``json.loads`` (nesting too deep; a number over
            ``sys.get_int_max_str_digits()`` digits).
    """
    try:
        if isinstance(text, str) and not text.startswith("\ufeff"):
            return _DECODER.decode(text)
        return json.loads(text, object_pairs_hook=_no_duplicates)  # bytes, or a BOM json refuses
    except _Duplicate:
        key, where = _first_duplicate(json.loads(text, object_pairs_hook=_Pairs))
        raise RowError(f"{DUPLICATE_KEY}{key!r} twice (the object at {where}): which value is meant is "
                       "not knowable") from None
