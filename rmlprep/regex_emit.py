"""Emit stdlib ``re`` syntax from the tree :mod:`rmlprep.regex_translate` parses a pattern into.

Classes are resolved code-point ranges; each is emitted cut at a code-point limit (ASCII, BMP,
full) so :mod:`rmlprep.pretokenize` can match a text with the smallest variant covering it.
Nodes (tuples): ``("lit", cp)`` | ``("set", ranges, negated)`` | ``("any",)`` | ``("raw", re)``
| ``("seq", [nodes])`` | ``("alt", [nodes])`` | ``("group", opener, node)``
| ``("rep", node, min, max_or_None, mode)`` | ``("bound", word_ranges, negated)``.
"""

from __future__ import annotations

from rmlprep.unicode import clip_ranges

__all__ = ["emit"]


def _esc(cp: int) -> str:
    if cp < 0x80 and (chr(cp).isalnum() or chr(cp) == "_"):
        return chr(cp)
    if cp <= 0xFF:
        return f"\\x{cp:02x}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def _emit_ranges(ranges) -> str:
    out = []
    for lo, hi in ranges:
        if lo == hi:
            out.append(_esc(lo))
        elif hi == lo + 1:
            out.append(_esc(lo) + _esc(hi))
        else:
            out.append(f"{_esc(lo)}-{_esc(hi)}")
    return "".join(out)


def emit(node, limit: int) -> str:
    """``node`` as stdlib ``re`` text, its classes cut at ``limit`` (a code point)."""
    kind = node[0]
    if kind == "lit":
        return _esc(node[1])
    if kind == "set":
        cut = clip_ranges(node[1], limit)
        if node[2]:
            return f"[^{_emit_ranges(cut)}]" if cut else "(?s:.)"
        if not cut:
            return "(?!)"
        if len(cut) == 1 and cut[0][0] == cut[0][1]:
            return _esc(cut[0][0])
        return f"[{_emit_ranges(cut)}]"
    if kind == "any":
        return "."
    if kind == "bound":  # a word boundary: a word character on exactly one side (\B: not so)
        w = emit(("set", node[1], False), limit)
        if node[2]:
            return f"(?:(?<={w})(?={w})|(?<!{w})(?!{w}))"
        return f"(?:(?<={w})(?!{w})|(?<!{w})(?={w}))"
    if kind == "raw":
        return node[1]
    if kind == "seq":
        return "".join(emit(x, limit) for x in node[1])
    if kind == "alt":
        return "|".join(emit(x, limit) for x in node[1])
    if kind == "group":
        return node[1] + emit(node[2], limit) + ")"
    if kind == "rep":
        _, atom, lo, hi, mode = node
        if (lo, hi) == (0, None):
            q = "*"
        elif (lo, hi) == (1, None):
            q = "+"
        elif (lo, hi) == (0, 1):
            q = "?"
        elif hi is None:
            q = f"{{{lo},}}"
        elif lo == hi:
            q = f"{{{lo}}}"
        else:
            q = f"{{{lo},{hi}}}"
        return emit(atom, limit) + q + mode
    raise AssertionError(f"unknown node {kind}")  # internal invariant, not input checking
