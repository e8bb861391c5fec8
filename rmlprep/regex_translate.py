"""Translate tokenizer regexes (Oniguruma, fancy-regex, Python ``regex``) into stdlib ``re``.

Tokenizer patterns use ``\\p{L}``, ``\\p{N}``, ``\\s`` as Unicode properties, possessive
quantifiers and ``(?i:...)``. :func:`translate` parses a pattern into a small tree whose classes
are resolved code-point ranges from the generated tables (Unicode 16.0.0, see
``tools/make_unicode_tables.py``) and emits stdlib ``re`` syntax, optionally with every class cut
at a code-point limit (ASCII, BMP) for speed on text below that limit. Anything it cannot
reproduce exactly is refused with :class:`~rmlprep.errors.UnsupportedTokenizer` naming the
construct. :mod:`rmlprep.pretokenize` compiles and runs the result.
"""

from __future__ import annotations

import re
from functools import lru_cache

from rmlprep.errors import LoaderError, UnsupportedTokenizer
from rmlprep.regex_emit import emit
from rmlprep.unicode import (
    case_fold_equivalents,
    complement_ranges,
    intersect_ranges,
    merge_ranges,
    property_ranges,
    white_space_ranges,
    word_ranges,
)

__all__ = [
    "ASCII_LIMIT",
    "BMP_LIMIT",
    "FULL_LIMIT",
    "translate",
    "unsupported_construct",
]

ASCII_LIMIT = 0x7F
BMP_LIMIT = 0xFFFF
FULL_LIMIT = 0x10FFFF


# ----------------------------------------------------------------------------------------------
# Parsing: pattern text -> a small tree whose classes are resolved code-point ranges.
#
# Nodes (tuples): ("lit", cp) | ("set", ranges, negated) | ("any",) | ("raw", re_text)
#   | ("seq", [nodes]) | ("alt", [nodes]) | ("group", opener, node)
#   | ("rep", node, min, max_or_None, mode)   mode: "" greedy, "?" lazy, "+" possessive
#   | ("bound", word_ranges, negated)          \b (\B when negated), emitted as lookarounds

_SIMPLE_ESCAPES = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "a": 0x07, "e": 0x1B}
_UNSUPPORTED_ESCAPES = {
    "h": r"\h (hex digit in onig, horizontal space elsewhere)",
    "H": r"\H",
    "v": r"\v (vertical tab in onig, vertical space in regex)",
    "V": r"\V",
    "R": r"\R (linebreak)",
    "X": r"\X (grapheme cluster)",
    "N": r"\N",
    "K": r"\K (keep)",
    "G": r"\G (search anchor)",
    "Q": r"\Q..\E (quoted span)",
    "E": r"\E",
    "k": r"\k<name> (named backreference)",
    "g": r"\g<name> (subroutine call)",
    "c": r"\cX (control escape)",
    "C": r"\C",
    "M": r"\M",
    "o": r"\o{..} (octal escape)",
    "0": r"\0 (octal escape)",
    "O": r"\O",
    "y": r"\y",
    "Y": r"\Y",
}
_CASED_CATEGORIES = ("L", "M", "Nl", "So")  # where non-ASCII case mappings can live


def unsupported_construct(pattern: str, construct: str) -> UnsupportedTokenizer:
    return UnsupportedTokenizer(
        f"pre-tokenizer pattern {pattern!r}: {construct} is not supported by rmlprep's "
        f"regex translation; supported: alternation, groups, atomic groups, (?i:..), lookaround, "
        f"classes with \\p{{..}}/\\s/\\d/\\w, nested classes and &&, \\b, greedy, lazy and "
        f"possessive quantifiers"
    )


class _Parser:
    def __init__(self, pattern: str):
        self.p = pattern
        self.i = 0
        self.n = len(pattern)

    def unsupported(self, construct: str) -> UnsupportedTokenizer:
        return unsupported_construct(self.p, construct)

    def malformed(self, what: str) -> LoaderError:
        return LoaderError(f"pre-tokenizer pattern {self.p!r}: {what} at offset {self.i}")

    def parse(self):
        node = self.alternation(False)
        if self.i < self.n:  # only an unbalanced ")" stops alternation early
            raise self.malformed("unbalanced ')'")
        return node

    def alternation(self, icase: bool):
        branches = [self.sequence(icase)]
        while self.i < self.n and self.p[self.i] == "|":
            self.i += 1
            branches.append(self.sequence(icase))
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def sequence(self, icase: bool):
        items = []
        while self.i < self.n and self.p[self.i] not in "|)":
            atom = self.atom(icase)
            if atom is None:
                continue
            items.append(self.quantifier(atom))
        return ("seq", items)

    # -- quantifiers ---------------------------------------------------------------------
    def _brace_quantifier(self) -> tuple[int, int | None, int] | None:
        m = re.compile(r"\{(\d*)(,?)(\d*)\}").match(self.p, self.i)
        if not m or (not m.group(1) and not m.group(3)):
            return None  # "{" that is no quantifier is a literal, as in onig, regex and re
        lo = int(m.group(1) or 0)
        hi = lo if not m.group(2) else (int(m.group(3)) if m.group(3) else None)
        if hi is not None and hi < lo:
            raise self.malformed(f"quantifier {m.group(0)} with max < min")
        return lo, hi, m.end()

    def _quantifier_here(self) -> tuple[int, int | None, int] | None:
        if self.i >= self.n:
            return None
        c = self.p[self.i]
        if c == "*":
            return 0, None, self.i + 1
        if c == "+":
            return 1, None, self.i + 1
        if c == "?":
            return 0, 1, self.i + 1
        if c == "{":
            return self._brace_quantifier()
        return None

    def quantifier(self, atom):
        q = self._quantifier_here()
        if q is None:
            return atom
        lo, hi, end = q
        if atom[0] == "raw":
            raise self.unsupported(f"a quantifier on the anchor {atom[1]!r}")
        self.i = end
        mode = ""  # greedy
        if self.i < self.n and self.p[self.i] in "?+":
            mode = self.p[self.i]  # "?" lazy, "+" possessive (greedy, never gives back)
            self.i += 1
        if self._quantifier_here() is not None:
            raise self.unsupported(f"a quantifier applied to a quantifier (offset {self.i})")
        return ("rep", atom, lo, hi, mode)

    # -- atoms ---------------------------------------------------------------------------
    def atom(self, icase: bool):
        p = self.p
        c = p[self.i]
        if c == "(":
            return self.group(icase)
        if c == "[":
            return self.char_class(icase)
        if c == ".":
            self.i += 1
            return ("any",)
        if c == "^":
            self.i += 1
            return ("raw", "(?m:^)")  # onig (tokenizer.json's engine): start of any line
        if c == "$":
            self.i += 1
            return ("raw", "(?m:$)")  # onig: end of any line
        if c == "\\":
            return self.escape(icase)
        if c in "*+?" or (c == "{" and self._brace_quantifier() is not None):
            raise self.malformed(f"quantifier {c!r} with nothing to repeat")
        self.i += 1
        return self.literal(ord(c), icase)

    def literal(self, cp: int, icase: bool):
        if icase:
            return ("set", self.fold(((cp, cp),)), False)
        return ("lit", cp)

    def fold(self, ranges):
        """Close ranges under simple case folding (only ASCII letters need work, see below)."""
        rest = complement_ranges(((0, 0x7F), (0x017F, 0x017F), (0x212A, 0x212A)))
        for cat in _CASED_CATEGORIES:
            hit = intersect_ranges(intersect_ranges(ranges, rest), property_ranges(cat))
            if hit:
                raise self.unsupported(
                    f"(?i) on non-ASCII characters that may have case (U+{hit[0][0]:04X} ...)"
                )
        extra = []
        for lo, hi in intersect_ranges(ranges, ((0x41, 0x5A), (0x61, 0x7A))):
            for cp in range(lo, hi + 1):
                letter = chr(cp).lower()
                if letter == "i":
                    raise self.unsupported(
                        "(?i) on the letter i (engines disagree whether U+0130 matches)"
                    )
                extra.extend((x, x) for x in case_fold_equivalents(letter))
        for letter, special in (("s", 0x017F), ("k", 0x212A)):
            if intersect_ranges(ranges, ((special, special),)):
                extra.extend((x, x) for x in case_fold_equivalents(letter))
        return merge_ranges((*ranges, *extra))

    def group(self, icase: bool):
        p = self.p
        start = self.i
        self.i += 1
        opener = "(?:"
        if p.startswith("?", self.i):
            rest = p[self.i + 1 : self.i + 4]
            if rest.startswith(":"):
                self.i += 2
            elif rest.startswith(("=", "!")):
                opener = "(?" + rest[0]
                self.i += 2
            elif rest.startswith(("<=", "<!")):
                opener = "(?" + rest[:2]
                self.i += 3
            elif rest.startswith(">"):
                opener = "(?>"  # atomic: once the body matched, its choices are never revisited
                self.i += 2
            elif rest.startswith("#"):
                end = p.find(")", self.i)
                if end < 0:
                    raise self.malformed("unterminated comment (?#")
                self.i = end + 1
                return None
            elif rest.startswith(("<", "P<", "'")):
                close = ">" if rest[0] in "<P" else "'"
                end = p.find(close, self.i)
                if end < 0:
                    raise self.malformed("unterminated group name")
                self.i = end + 1  # a named group: the name does not matter for splitting
            else:
                m = re.compile(r"\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])").match(p, self.i)
                if not m:
                    raise self.unsupported(f"group syntax {p[start:start + 4]!r}... (offset {start})")
                on, off, end = m.group(1), m.group(2) or "", m.group(3)
                if end == ")" or set(on + off) - {"i"}:
                    raise self.unsupported(f"inline flags {m.group(0)!r}; only (?i:...) is supported")
                icase = (icase or "i" in on) and "i" not in off
                self.i = m.end()
        body = self.alternation(icase)
        if self.i >= self.n or p[self.i] != ")":
            raise self.malformed(f"unterminated group opened at offset {start}")
        self.i += 1
        return ("group", opener, body)

    # -- escapes -------------------------------------------------------------------------
    def _hex(self, start: int) -> int:
        p = self.p
        kind = p[start]
        if kind == "x" and p.startswith("{", start + 1):
            end = p.find("}", start)
            digits = p[start + 2 : end] if end > 0 else ""
            self.i = end + 1
        else:
            width = {"x": 2, "u": 4, "U": 8}[kind]
            digits = p[start + 1 : start + 1 + width]
            if len(digits) != width:
                digits = ""
            self.i = start + 1 + width
        if not digits or not all(d in "0123456789abcdefABCDEF" for d in digits):
            raise self.malformed(f"bad \\{kind} escape")
        cp = int(digits, 16)
        if cp > 0x10FFFF:
            raise self.malformed(f"\\{kind} escape beyond U+10FFFF")
        return cp

    def class_escape(self) -> tuple[str, object]:
        """Parse one escape at self.i; returns ("set", ranges) or ("lit", cp) or ("raw", re)."""
        p = self.p
        self.i += 1
        if self.i >= self.n:
            raise self.malformed("pattern ends with a backslash")
        c = p[self.i]
        if c in "pP":
            negate = c == "P"
            if p.startswith("{", self.i + 1):
                end = p.find("}", self.i)
                if end < 0:
                    raise self.malformed("unterminated \\p{")
                name = p[self.i + 2 : end]
                self.i = end + 1
            else:
                name = p[self.i + 1 : self.i + 2]
                self.i += 2
            if name.startswith("^"):
                negate, name = not negate, name[1:]
            ranges = property_ranges(name)
            if ranges is None:
                raise self.unsupported(
                    f"Unicode property \\{c}{{{name}}} (known: general categories, White_Space, Han)"
                )
            return "set", (complement_ranges(ranges) if negate else ranges)
        if c in "sSdDwW":
            self.i += 1
            ranges = {"s": white_space_ranges, "d": lambda: property_ranges("Nd"), "w": word_ranges}[c.lower()]()
            return "set", (complement_ranges(ranges) if c.isupper() else ranges)
        if c in _SIMPLE_ESCAPES:
            self.i += 1
            return "lit", _SIMPLE_ESCAPES[c]
        if c in "xuU":
            return "lit", self._hex(self.i)
        if c == "A":
            self.i += 1
            return "raw", r"\A"
        if c == "z":
            self.i += 1
            return "raw", r"\Z"
        if c == "Z":
            self.i += 1
            return "raw", r"(?=\n?\Z)"
        if c in "123456789":
            raise self.unsupported(f"backreference \\{c}")
        if c in _UNSUPPORTED_ESCAPES:
            raise self.unsupported(f"escape {_UNSUPPORTED_ESCAPES[c]}")
        if c.isalnum() or c == "_":
            raise self.unsupported(f"escape \\{c}")
        self.i += 1
        return "lit", ord(c)

    def escape(self, icase: bool):
        if self.p.startswith(("\\b", "\\B"), self.i):
            self.i += 2  # Oniguruma's word boundary: its \w on one side only (\B: both or neither)
            return ("bound", word_ranges(), self.p[self.i - 1] == "B")
        kind, value = self.class_escape()
        if kind == "set":
            return ("set", self.fold(value) if icase else value, False)
        if kind == "raw":
            return ("raw", value)
        return self.literal(value, icase)

    def char_class(self, icase: bool):
        start = self.i
        ranges, negated, compound = self.class_body()
        if icase:
            if compound:
                raise self.unsupported(f"(?i) on a class with a nested class or && (offset {start})")
            ranges = self.fold(ranges)
        return ("set", ranges, negated)

    def class_body(self):
        """Parse ``[...]`` at self.i -> (ranges, negated, compound). Members are unions; a nested
        class ``[...]`` is one member; ``&&`` intersects the unions on its sides and binds
        loosest, and a leading ``^`` negates the whole (Oniguruma, Rust ``regex``)."""
        p = self.p
        start = self.i
        self.i += 1
        negated = p.startswith("^", self.i)
        if negated:
            self.i += 1
        operands: list[tuple[tuple[int, int], ...]] = []
        items: list[tuple[int, int]] = []
        first, compound = True, False
        while True:
            if self.i >= self.n:
                raise self.malformed(f"unterminated character class opened at offset {start}")
            c = p[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if c == "[":
                if p.startswith(("[:", "[=", "[."), self.i):
                    raise self.unsupported(f"POSIX bracket in a class (offset {self.i})")
                sub, sub_negated, _ = self.class_body()
                items.extend(complement_ranges(sub) if sub_negated else sub)
                compound = True
                continue
            if p.startswith("&&", self.i):
                if not items or p.startswith("]", self.i + 2):
                    raise self.unsupported(f"class intersection && with an empty side (offset {self.i})")
                operands.append(merge_ranges(items))
                items, compound = [], True
                self.i += 2
                continue
            lo = self.class_atom()
            if isinstance(lo, tuple):
                items.extend(lo)
                continue
            if p.startswith("-", self.i) and self.i + 1 < self.n and p[self.i + 1] != "]":
                self.i += 1
                if p.startswith("[", self.i):
                    raise self.unsupported(f"a class range ending in '[' (offset {self.i})")
                hi = self.class_atom()
                if isinstance(hi, tuple):
                    raise self.unsupported(f"a class escape as a range end (offset {self.i})")
                if hi < lo:
                    raise self.malformed(f"class range out of order ({lo:#x}-{hi:#x})")
                items.append((lo, hi))
            else:
                items.append((lo, lo))
        ranges = merge_ranges(items)
        for other in operands:
            ranges = intersect_ranges(other, ranges)
        return ranges, negated, compound

    def class_atom(self):
        """One class member: an int code point, or a tuple of ranges for a class escape."""
        c = self.p[self.i]
        if c != "\\":
            self.i += 1
            return ord(c)
        if self.p.startswith("b", self.i + 1):
            raise self.unsupported(r"\b inside a class (backspace in onig)")
        kind, value = self.class_escape()
        if kind == "raw":
            raise self.unsupported(f"anchor {value} inside a class")
        return value


@lru_cache(maxsize=256)
def _parse(pattern: str):
    return _Parser(pattern).parse()


def translate(pattern: str, *, limit: int = FULL_LIMIT) -> str:
    """Rewrite a tokenizer regex into stdlib ``re`` syntax with explicit Unicode ranges.

    Every ``\\p{..}``, ``\\P{..}``, ``\\pX``, ``\\s``, ``\\S``, ``\\d``, ``\\D``, ``\\w``, ``\\W``
    becomes a class of code-point ranges from the generated tables (Unicode 16.0.0; ``\\p{Han}``
    is the Script property, ``\\w`` Oniguruma's word characters, see
    :func:`~rmlprep.unicode.word_ranges`); a nested class ``[..[..]]`` is a union member and
    ``&&`` intersects, as in Oniguruma and Rust ``regex`` (Kimi-K2's
    ``[\\p{L}..&&[^\\p{Han}]]``); ``\\b``/``\\B`` become lookarounds on the word class (a word
    character on exactly one side, at the text's ends the missing side is a non-word);
    ``(?i:...)`` becomes explicit
    classes with the simple case-folding equivalents (``'s`` also matches ``'ſ``, ``k`` the
    Kelvin sign) instead of ``re.IGNORECASE``; capturing and named groups become ``(?:...)``.
    ``^``/``$`` are line anchors as in Oniguruma (the engine of tokenizer.json); ``\\z`` and
    ``\\A`` are text anchors. In fancy-regex (tiktoken's engine) a bare ``$`` is the end of the
    text only (``Expr::EndText``, handed to the ``regex`` crate as ``$`` without ``m``), and in
    Python's ``regex`` it also matches before a final newline: pass a tiktoken pattern through
    :func:`~rmlprep.regex_props.text_anchors` first. In ``\\s++$`` (r50k, cl100k) the readings agree: the
    possessive run has taken every newline, so "before a newline" can never hold.
    Alternation, greedy/lazy quantifiers and lookaround keep their meaning, which is the same
    (leftmost alternative wins, backtracking) in onig, fancy-regex, ``regex`` and ``re``.
    Possessive quantifiers (``?+ *+ ++ {m,n}+``) and atomic groups ``(?>...)`` are emitted as
    such (stdlib ``re`` has both since Python 3.11): the quantified atom or the group matches as
    far as it can and is never backtracked into, as in fancy-regex, onig and ``regex``.

    Args:
        pattern: the pattern as written in tokenizer.json / tiktoken.
        limit: highest code point kept in classes (``0x7F`` for ASCII-only text, ``0xFFFF`` for
            BMP text); the result is only valid on text whose characters are all <= limit.
    Returns:
        A pattern string for ``re.compile`` (ASCII only; non-ASCII code points as escapes).
    Raises:
        UnsupportedTokenizer: a construct the translation does not support (backreferences,
            \\X, POSIX brackets, unknown \\p{..} names, inline flags other than ``(?i:``,
            ``(?i)`` on non-ASCII cased characters, ``i`` or a class with ``&&``...), named in
            the message.
        LoaderError: a malformed pattern (unbalanced parentheses, bad escapes).

    Source: Oniguruma (Ruby syntax) and Python ``regex`` semantics for the constructs above;
    fancy-regex ``src/parse.rs`` (``$`` -> ``Expr::EndText`` unless the ``m`` flag is set).
    """
    return emit(_parse(pattern), limit)
