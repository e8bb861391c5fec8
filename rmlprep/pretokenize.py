"""Pre-split text into pieces with tokenizer regexes, on Python's standard ``re`` engine.

Tokenizer patterns (GPT-2, Llama 3, Qwen2, any ``Split`` pattern of a tokenizer.json) are written
for Oniguruma, fancy-regex or Python's ``regex`` module, with ``\\p{L}``, ``\\p{N}``, ``\\s`` meaning
Unicode properties. :func:`~rmlprep.regex_translate.translate` (re-exported here) rewrites such a
pattern for stdlib ``re`` with every property class expanded into explicit code-point ranges from
the generated tables (Unicode 16.0.0, see ``tools/make_unicode_tables.py``), so a split follows
the pinned Unicode version and not the interpreter's, and needs no third-party regex engine.

Speed: a class of hundreds of ranges is slow to test in ``re``. Each pattern is compiled three
times, with its classes cut to ASCII, to the BMP and in full, and each text is matched by the
smallest variant that covers its characters. The pieces are identical by construction: for
characters at or below the cut, membership in a cut class equals membership in the full one.

The default split behaviour is Hugging Face's ``Isolated``: the matches and the gaps between them
are pieces, so ``"".join(pieces) == text`` for every text (lone surrogates included); empty
pieces are dropped. The other ``Split`` behaviours and ``invert`` (:mod:`rmlprep.split`) run on
a general path in Python; :func:`isolated_equivalent` names the combinations proved equal to
``Isolated``, which keep the fast path (and the native one).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from types import MappingProxyType

from rmlprep.errors import LoaderError
from rmlprep.regex_props import can_match_empty, text_anchors
from rmlprep.regex_translate import (
    ASCII_LIMIT,
    BMP_LIMIT,
    FULL_LIMIT,
    translate,
    unsupported_construct,
)
from rmlprep.split import BEHAVIOR_OF_JSON, BEHAVIORS, ISOLATED, find_iter, split_spans

__all__ = [
    "CL100K_PATTERN",
    "O200K_PATTERN",
    "GPT2_PATTERN",
    "LLAMA3_PATTERN",
    "QWEN2_PATTERN",
    "DIGITS_PATTERN",
    "DIGITS_INDIVIDUAL_PATTERN",
    "KNOWN_PATTERNS",
    "TILING_PATTERNS",
    "BEHAVIORS",
    "BEHAVIOR_OF_JSON",
    "ISOLATED",
    "can_match_empty",
    "check_behaviors",
    "isolated_equivalent",
    "PreSplitter",
    "compile_pre_split",
    "pattern_name",
    "pre_split",
    "text_anchors",
    "translate",
]

# Source: tokenizers pre_tokenizers/byte_level.rs (and GPT-2 encoder.py).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# Source: Meta-Llama-3 tokenizer.json pre_tokenizer Split pattern (= tiktoken cl100k_base).
LLAMA3_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# Source: Qwen2 / Qwen2.5 tokenizer.json pre_tokenizer Split pattern.
QWEN2_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
    r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# Source: tiktoken tiktoken_ext/openai_public.py, cl100k_base() (fancy-regex syntax: possessive
# quantifiers; `$` is the end of the text, see translate()).
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
# Source: tiktoken tiktoken_ext/openai_public.py, o200k_base() (the "|".join of its 7 parts).
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
# Source: tokenizers pre_tokenizers/digits.rs; char::is_numeric = categories Nd, Nl, No.
DIGITS_INDIVIDUAL_PATTERN = r"\p{N}"  # Digits(individual_digits=true), Isolated
DIGITS_PATTERN = r"\p{N}+"  # Digits(individual_digits=false), runs of numbers

KNOWN_PATTERNS: MappingProxyType[str, str] = MappingProxyType(
    {
        "gpt2": GPT2_PATTERN,
        "llama3": LLAMA3_PATTERN,
        "qwen2": QWEN2_PATTERN,
        "digits": DIGITS_PATTERN,
        "digits_individual": DIGITS_INDIVIDUAL_PATTERN,
        "cl100k_base": CL100K_PATTERN,
        "o200k_base": O200K_PATTERN,
    }
)
_NAME_OF = {p: n for n, p in KNOWN_PATTERNS.items()}
#: Known patterns whose matches provably tile every text: every character starts a non-empty
#: match and no alternative matches the empty string, so the pieces are the matches alone (and
#: ``Split`` behaviours see no gaps). GPT-2, Llama 3, Qwen2: the last alternatives ``\s+`` and
#: ``[^\s\p{L}\p{N}]+`` with ``\p{L}+``, ``\p{N}`` cover all code points; cl100k ends in ``\s``
#: and covers L, N and the rest with ``++`` runs; o200k covers Lu/Lt, Ll, M, N, ``\s`` and the rest.
TILING_PATTERNS = frozenset({"gpt2", "llama3", "qwen2", "cl100k_base", "o200k_base"})


def pattern_name(pattern: str) -> str | None:
    """Name of a known pattern, matched by exact string, else None.

    Returns:
        ``"gpt2"``, ``"llama3"``, ``"qwen2"``, ``"digits"``, ``"digits_individual"``,
        ``"cl100k_base"``, ``"o200k_base"`` (tiktoken's spelling; GPT-4o's tokenizer.json uses the
        same string) or None.
    """
    return _NAME_OF.get(pattern)


# ----------------------------------------------------------------------------------------------
# Splitting.

_Split = Callable[[str], list]

def _compile_variants(pattern: str, capture: bool) -> tuple[re.Pattern, re.Pattern, re.Pattern]:
    out = []
    for limit in (ASCII_LIMIT, BMP_LIMIT, FULL_LIMIT):
        text = translate(pattern, limit=limit)
        if capture:
            text = "(" + text + ")"
        try:
            out.append(re.compile(text))
        except re.error as e:  # e.g. a variable-width lookbehind
            raise unsupported_construct(pattern, f"a construct stdlib re rejects ({e})") from None
    return out[0], out[1], out[2]


def _variant(text: str) -> int:
    """0: ASCII-only text, 1: no character above U+FFFF, 2: anything."""
    if text.isascii():
        return 0
    if len(text.encode("utf-16-le", "surrogatepass")) == 2 * len(text):
        return 1
    return 2


def isolated_equivalent(pattern: str, behavior: str, invert: bool) -> bool:
    """True when ``Split(pattern, behavior, invert)`` provably gives the same pieces as
    ``Split(pattern, "isolated", False)`` on every text.

    That holds for a known tiling pattern (:data:`TILING_PATTERNS`: matches cover every text and
    none is empty, so there are no gaps): ``removed`` with ``invert`` keeps every match;
    ``isolated``, ``merged_with_previous`` and ``merged_with_next`` never glue two matches
    (``merged_*`` glue only a delimiter to a non-delimiter). Proved on random text by
    tests/test_pretokenize.py against :func:`split_spans`.
    """
    if (behavior, invert) == ISOLATED:
        return True
    if pattern_name(pattern) not in TILING_PATTERNS:
        return False
    return (behavior == "removed" and invert) or behavior in (
        "isolated", "merged_with_previous", "merged_with_next")


def _make_stage(pattern: str, behavior: str = "isolated", invert: bool = False) -> _Split:
    if not isolated_equivalent(pattern, behavior, invert) or can_match_empty(pattern):
        return _general_stage(pattern, behavior, invert)
    if pattern_name(pattern) in TILING_PATTERNS:
        # One capturing group around the whole (all others are non-capturing): findall returns
        # whole matches, in C.
        findalls = tuple(v.findall for v in _compile_variants(pattern, True))

        def stage(text: str) -> list:
            return findalls[_variant(text)](text)

        return stage

    splits = tuple(v.split for v in _compile_variants(pattern, True))

    def stage(text: str) -> list:  # noqa: F811 - one of the two is returned
        # split returns gap, match, gap, ..., gap, all in C
        pieces = splits[_variant(text)](text)
        if len(pieces) == 1:  # no match at all: the text is one gap
            return pieces if text else []
        return list(filter(None, pieces))  # drop empty gaps (no match is empty here)

    return stage


def _general_stage(pattern: str, behavior: str, invert: bool) -> _Split:
    """Any behaviour, any pattern (also ones that match the empty string), in Python."""
    variants = _compile_variants(pattern, False)
    empty = can_match_empty(pattern)

    def stage(text: str) -> list:
        if not text:
            return []
        regex = variants[_variant(text)]
        spans = find_iter(regex, text) if empty else [m.span() for m in regex.finditer(text)]
        return [text[s:e] for s, e in split_spans(text, spans, behavior, invert)]

    return stage


@lru_cache(maxsize=64)
def _stage(pattern: str, behavior: str = "isolated", invert: bool = False) -> _Split:
    return _make_stage(pattern, behavior, invert)


class PreSplitter:
    """A compiled list of split patterns; call it on a text to get its pieces.

    Build with :func:`compile_pre_split`. ``splitter(text) -> list[str]``: the first pattern
    splits the text, each following one splits every piece of the one before (Hugging Face
    ``Sequence`` of ``Split`` pre-tokenizers). With only ``isolated`` behaviours (the default)
    ``"".join(splitter(text)) == text``.
    """

    __slots__ = ("patterns", "behaviors", "_stages", "_call")

    def __init__(self, patterns: tuple[str, ...], behaviors: tuple[tuple[str, bool], ...] = ()):
        self.patterns = patterns
        self.behaviors = behaviors or (ISOLATED,) * len(patterns)
        self._stages = tuple(_stage(p, b, inv) for p, (b, inv) in zip(patterns, self.behaviors))
        if len(self._stages) == 1:
            self._call = self._stages[0]
        else:
            self._call = self._chain

    def _chain(self, text: str) -> list:
        pieces = [text] if text else []
        for stage in self._stages:
            pieces = [q for piece in pieces for q in stage(piece)]
        return pieces

    def __call__(self, text: str) -> list[str]:
        return self._call(text)

    def __repr__(self) -> str:
        names = [pattern_name(p) or p for p in self.patterns]
        if any(b != ISOLATED for b in self.behaviors):
            return f"PreSplitter({names!r}, behaviors={list(self.behaviors)!r})"
        return f"PreSplitter({names!r})"


@lru_cache(maxsize=64)
def _compile(patterns: tuple[str, ...], behaviors: tuple[tuple[str, bool], ...] = ()) -> PreSplitter:
    return PreSplitter(patterns, behaviors)


def check_behaviors(patterns: Sequence[str], behaviors: Sequence[tuple[str, bool]]) -> str | None:
    """What is wrong with ``behaviors`` for ``patterns`` (None when they fit)."""
    if behaviors and len(behaviors) != len(patterns):
        return f"{len(behaviors)} split behaviours for {len(patterns)} patterns; give one per pattern or none"
    for k, b in enumerate(behaviors):
        if not (isinstance(b, tuple) and len(b) == 2 and b[0] in BEHAVIORS and isinstance(b[1], bool)):
            return f"split behaviour [{k}] = {b!r} is not (behavior, invert) with behavior in {BEHAVIORS}"
    return None


def compile_pre_split(
    patterns: Sequence[str] | str, behaviors: Sequence[tuple[str, bool]] = ()
) -> PreSplitter:
    """Compile split patterns once (cached by the pattern tuple) into a :class:`PreSplitter`.

    Args:
        patterns: tokenizer regexes applied in order; a single ``str`` counts as one pattern;
            an empty sequence gives a splitter that returns the text as one piece.
        behaviors: one ``(behavior, invert)`` per pattern (:data:`BEHAVIORS`), or empty for
            ``("isolated", False)`` everywhere.
    Returns:
        A callable ``splitter(text) -> list[str]``.
    Raises:
        UnsupportedTokenizer: a pattern uses a construct :func:`translate` does not support.
        LoaderError: a malformed pattern, or behaviours that do not fit (see
            :func:`check_behaviors`).

    Source: tokenizers ``pre_tokenizers/split.rs`` (``Split``), ``tokenizer/normalizer.rs``
    (``SplitDelimiterBehavior``).
    """
    if isinstance(patterns, str):
        patterns = (patterns,)
    patterns, behaviors = tuple(patterns), tuple(tuple(b) for b in behaviors)
    problem = check_behaviors(patterns, behaviors)
    if problem:
        raise LoaderError(problem)
    if all(b == ISOLATED for b in behaviors):
        behaviors = ()
    return _compile(patterns, behaviors)


def pre_split(pattern: str, text: str, behavior: str = "isolated", invert: bool = False) -> list[str]:
    """Split ``text`` with one tokenizer regex (Hugging Face ``Split``; default ``Isolated``:
    matches and gaps are pieces).

    Example: ``pre_split(GPT2_PATTERN, "Hello  world's")`` ->
    ``["Hello", " ", " world", "'s"]``;
    ``pre_split(" ", "How are you", "merged_with_previous")`` -> ``["How ", "are ", "you"]``.

    Raises:
        UnsupportedTokenizer / LoaderError: as :func:`compile_pre_split`.
    """
    return compile_pre_split((pattern,), ((behavior, invert),))(text)
