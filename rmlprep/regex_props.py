"""Properties of tokenizer regexes that the pre-tokenizers need besides their translation.

:func:`text_anchors` rewrites fancy-regex (tiktoken) anchors before translation;
:func:`can_match_empty` tells, from the pattern parsed by :mod:`rmlprep.regex_translate`,
whether a match may be empty (which decides how ``Split`` iterates, :mod:`rmlprep.split`).
"""

from __future__ import annotations

from rmlprep.regex_translate import _parse

__all__ = ["can_match_empty", "text_anchors"]


def text_anchors(pattern: str) -> str:
    """Rewrite a fancy-regex (tiktoken) pattern's bare ``^``/``$`` into ``\\A``/``\\z``.

    fancy-regex without the ``m`` flag reads ``^`` as the start and ``$`` as the end of the
    text (not "before a final newline" as Python's ``re``/``regex``, not "end of any line" as
    Oniguruma, which :func:`translate` follows); escaped ones and those inside a class are
    literal and stay. Example: ``text_anchors(r"a$|[$]|\\$")`` -> ``r"a\\z|[$]|\\$"``.

    Source: fancy-regex ``src/parse.rs`` (``b'$' => ... Expr::EndText``).
    """
    out = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            if c == "]" and not pattern[class_start:i].rstrip("^") == "":
                in_class = False
        elif c == "[":
            in_class, class_start = True, i + 1
        elif c == "$":
            c = "\\z"
        elif c == "^":
            c = "\\A"
        out.append(c)
        i += 1
    return "".join(out)


# ----------------------------------------------------------------------------------------------
# Properties of a parsed pattern.

_LOOKAROUND = ("(?=", "(?!", "(?<=", "(?<!")


def _min_len(node) -> int:
    """Fewest characters a match of ``node`` takes (0: it may match the empty string)."""
    kind = node[0]
    if kind in ("lit", "set", "any"):
        return 1
    if kind in ("raw", "bound"):
        return 0
    if kind == "seq":
        return sum(_min_len(x) for x in node[1])
    if kind == "alt":
        return min(_min_len(x) for x in node[1])
    if kind == "group":
        return 0 if node[1] in _LOOKAROUND else _min_len(node[2])
    return node[2] * _min_len(node[1])  # rep


def can_match_empty(pattern: str) -> bool:
    """True when some match of ``pattern`` may be empty (then the iteration order matters, see
    :func:`rmlprep.split.find_iter`); False proves every match takes at least one character.

    Raises:
        UnsupportedTokenizer / LoaderError: as :func:`translate`.
    """
    return _min_len(_parse(pattern)) == 0
