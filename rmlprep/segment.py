"""One text segment on its way to BPE: normalizers, the prefix space, unk fusing.

A *segment* is a run of text between two special (added) tokens. Both encoders prepare a
segment the same way before splitting it into pieces, so what they share lives here, below
both: :mod:`rmlprep.tokenizer` (the pure-Python reference path) and :mod:`rmlprep.native` (the
bridge to the compiled hot path) import this module and never each other's internals.

Source: tokenizers ``normalizers/{unicode,replace}.rs`` and ``pre_tokenizers/{byte_level,
metaspace}.rs`` (prefix space, ``prepend_scheme``), ``models/bpe/model.rs`` (``fuse_unk``);
sentencepiece ``normalizer.cc`` (``add_dummy_prefix``).
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache

from .spec import BYTE_LEVEL, TokenizerSpec

__all__ = [
    "NORMALIZERS",
    "SPACE",
    "lowercase",
    "make_normalizer",
    "normalize_reference",
    "prefix_spaces",
    "replace_lone_surrogates",
    "segment_preparer",
]

SPACE = "\u2581"  # "▁", SentencePiece's visible space
#: Normalizer names a spec may use (``TokenizerSpec.normalizers``).
NORMALIZERS = ("nfc", "nfkc", "nfd", "nfkd", "lowercase", "replace")

Normalize = Callable[[str], str]


def replace_lone_surrogates(text: str) -> str:
    """``text`` made encodable as UTF-8, by tiktoken's rule; the same object when it already is.

    A Python str may hold surrogate code points (U+D800..U+DFFF: ``json.loads`` of ``"\\ud800"``,
    ``os.fsdecode``), which no UTF-8 byte sequence spells. Every encode path of rmlprep first
    does what tiktoken's ``Encoding.encode`` does for such text: a high surrogate followed by a
    low one becomes the one astral character they stand for, and each remaining (lone)
    surrogate becomes U+FFFD. So the ids equal tiktoken's for the same str, and no id sequence
    rmlprep produces decodes to bytes that are not UTF-8. ``replace_lone_surrogates(t) is not t``
    tells that a replacement happened.

    Cost: ``str.isascii`` (constant time) for ASCII text, one UTF-8 encode of the text otherwise.

    Source: tiktoken ``core.py`` ``Encoding.encode`` (``text.encode("utf-16", "surrogatepass")
    .decode("utf-16", "replace")`` after a ``UnicodeEncodeError``).
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


#: ``suspects(text) -> None | list[int]``: None when ``text`` is in a normalization form;
#: else flat [start, end) code-point spans, each between two normalization boundaries, outside
#: which it is (the compiled ``nfc_suspects`` / ``nfkc_suspects`` of :mod:`rmlprep.native`).
Suspects = Callable[[str], "list[int] | None"]


def make_normalizer(normalizers: Sequence[tuple[str, ...]],
                    suspects: Mapping[str, Suspects] | None = None) -> Normalize | None:
    """Compose a spec's normalizers into one ``normalize(text) -> text`` (None when there are none).

    Args:
        normalizers: ``TokenizerSpec.normalizers``: ``("nfc",)``, ``("nfkc",)``, ``("nfd",)``,
            ``("nfkd",)`` (Unicode normalization forms as of Unicode 9.0.0:
            :func:`normalize_reference`), ``("lowercase",)`` (:func:`lowercase`) and
            ``("replace", old, new)`` (every occurrence of ``old``), applied in order.
        suspects: form name (``"NFC"``, ``"NFKC"``) -> a quick check (:data:`Suspects`). A form
            with one normalizes only the spans it names (the text as a whole when the check
            cannot tell), so text already in the form costs one scan of its code units; the
            result is the same str as :func:`normalize_reference` of the whole text
            (``tests/test_native.py``). The other forms run :func:`normalize_reference` on every
            text that is not ASCII.
    """
    steps: list[Normalize] = []
    for norm in normalizers:
        if norm[0] == "replace":
            old, new = norm[1], norm[2]
            steps.append(lambda s, old=old, new=new: s.replace(old, new))
        elif norm[0] == "lowercase":
            steps.append(lowercase)
        elif suspects and norm[0].upper() in suspects:
            steps.append(_checked_normalizer(norm[0].upper(), suspects[norm[0].upper()]))
        else:
            form = norm[0].upper()
            # ASCII text is the same in every normalization form: skip the call (per document)
            steps.append(lambda s, form=form: s if s.isascii() else normalize_reference(form, s))
    if not steps:
        return None
    if len(steps) == 1:
        return steps[0]

    def normalize(s: str) -> str:
        for step in steps:
            s = step(s)
        return s

    return normalize


_FORMS = ("NFC", "NFD", "NFKC", "NFKD")


@lru_cache(maxsize=1)
def _reference_tables() -> tuple[re.Pattern[str], list[int], list[int]]:
    """A pattern for the code points that may be unassigned in the reference's Unicode version
    (those of the BMP exactly, and every astral one), and the starts and ends of the astral
    ranges (generated table ``_unicode_norm_ref.py``). One class of BMP ranges plus one astral
    range scans about 5 ns a code point; the whole table as one class (hundreds of astral
    ranges, tried one by one for each code point) about 400."""
    from ._unicode_norm_ref import NOT_ASSIGNED

    bmp = "".join(f"\\u{lo:04x}" if lo == hi else f"\\u{lo:04x}-\\u{min(hi, 0xFFFF):04x}"
                  for lo, hi in NOT_ASSIGNED if lo <= 0xFFFF)
    astral = [(max(lo, 0x10000), hi) for lo, hi in NOT_ASSIGNED if hi > 0xFFFF]
    return (re.compile(f"[{bmp}\\U00010000-\\U0010ffff]"),
            [lo for lo, _ in astral], [hi for _, hi in astral])


def normalize_reference(form: str, text: str) -> str:
    """``text`` in normalization form ``form`` (``"NFC"``, ``"NFD"``, ``"NFKC"``, ``"NFKD"``) as
    Unicode 9.0.0 defines it, the version of ``tokenizers``' normalizers, whatever Unicode this
    Python's ``unicodedata`` has (14.0 on 3.11, 15.1 on 3.13, 16.0 on 3.14).

    A code point unassigned in 9.0.0 has no decomposition, combining class 0 and composes with
    nothing there, so it is a normalization boundary on both sides and stays as it is; between
    such code points ``unicodedata.normalize`` gives the 9.0.0 form, as every later version
    normalizes the code points 9.0.0 assigns as 9.0.0 does (the normalization stability policy,
    checked for 16.0 by ``tools/make_unicode_tables.py``). So ``x`` + U+0301 + U+0C3C keeps its
    order (U+0C3C, TELUGU SIGN NUKTA, is new in 14.0 with class 7) and U+11935 U+11930 do not
    compose (the Dives Akuru composition U+11938 is new in 13.0).

    Raises:
        ValueError: ``form`` is not one of the four names.

    Source: tokenizers ``normalizers/unicode.rs`` -> the crate unicode-normalization-alignments
    0.1.12 (``UNICODE_VERSION = (9, 0, 0)``); checked against ``tokenizers`` in
    ``tests/test_segment.py`` (fixture from ``tools/make_norm_fixtures.py``). SentencePiece
    models carry their own normalization (a precompiled charsmap, which rmlprep refuses), and
    tiktoken does not normalize, so ``tokenizers`` is the one reference for every spec.
    """
    if form not in _FORMS:
        raise ValueError(f"normalization form must be one of {', '.join(_FORMS)}, got {form!r}")
    normalize = unicodedata.normalize
    pattern, starts, ends = _reference_tables()
    m = pattern.search(text)
    if m is None:
        return normalize(form, text)
    parts: list[str] = []
    pos = 0
    while m is not None:
        i = m.start()
        cp = ord(text[i])
        if cp <= 0xFFFF or ((k := bisect_right(starts, cp) - 1) >= 0 and cp <= ends[k]):
            if i > pos:
                parts.append(normalize(form, text[pos:i]))
            parts.append(text[i])
            pos = i + 1
        m = pattern.search(text, i + 1)
    if pos < len(text):
        parts.append(normalize(form, text[pos:]))
    return "".join(parts)


def _checked_normalizer(form: str, suspects: Suspects) -> Normalize:
    """:func:`normalize_reference` of ``text``, on the spans ``suspects`` names only.

    Exact because a span starts and ends at normalization boundaries (a code point that is
    Yes for the form's quick check, with combining class 0: nothing after it combines or
    reorders with anything before it), so the form of the text is the form of each run between
    them put together, and the runs outside the spans are already in the form. The check's
    table is of a later Unicode (16.0) than the reference (9.0.0); each of its boundaries is one
    in 9.0.0 too, and code points it flags that 9.0.0 lacks stay as they are.
    """
    normalize = unicodedata.normalize
    search = _reference_tables()[0].search

    def checked(text: str) -> str:
        spans = suspects(text)
        if spans is None:
            return text
        if len(spans) == 2 and spans[0] == 0 and spans[1] == len(text):
            return normalize_reference(form, text)
        parts, pos = [], 0
        for k in range(0, len(spans), 2):
            start, end = spans[k], spans[k + 1]
            parts.append(text[pos:start])
            # most spans hold no code point 9.0.0 may lack: unicodedata at once, no split
            span = text[start:end]
            parts.append(normalize(form, span) if search(text, start, end) is None
                         else normalize_reference(form, span))
            pos = end
        parts.append(text[pos:])
        return "".join(parts)

    return checked


def lowercase(text: str) -> str:
    """Each character's lowercase mapping, without context (Rust's ``char::to_lowercase``).

    Python's ``str.lower`` applies the one context rule of Unicode's SpecialCasing
    (Final_Sigma: "Σ" at the end of a word becomes "ς"); the reference maps every "Σ" to "σ".
    Everything else is the same full mapping (``"İ"`` -> ``"i̇"``), but of another Unicode
    version: the reference's is that of the Rust that built ``tokenizers`` (17.0.0 for 0.23.3:
    ``"\U00010D50"`` GARAY CAPITAL LETTER A -> ``"\U00010D70"``), Python's that of its
    ``unicodedata`` (14.0.0 on 3.11, which leaves the 55 capitals of 16.0 and 17.0 as they
    are). So the characters on which this Python's ``str.lower`` differs from the reference's
    mapping (the generated table ``_lowercase_ref.py``) get the reference's; the others,
    ``str.lower``'s. Cost over ``str.lower``: one regex scan of non-ASCII text for those
    characters (none on ASCII text; about 4 ns a character, ``str.lower`` takes 2.5).

    Source: tokenizers ``normalizers/utils.rs`` ``Lowercase`` -> ``NormalizedString::lowercase``
    (``char::to_lowercase``); checked against ``tokenizers`` on every code point in
    ``tests/test_segment.py``.
    """
    if "\u03a3" in text:
        text = text.replace("\u03a3", "\u03c3")
    if text.isascii():
        return text.lower()
    fixes, search = _lowercase_fixes()
    m = search(text) if search is not None else None
    if m is None:
        return text.lower()
    parts, pos = [], 0
    while m is not None:  # str.lower is context-free once no "Σ" is left: lower the gaps
        i = m.start()
        parts.append(text[pos:i].lower())
        parts.append(fixes[text[i]])
        pos = i + 1
        m = search(text, pos)
    parts.append(text[pos:].lower())
    return "".join(parts)


@lru_cache(maxsize=1)
def _lowercase_fixes() -> tuple[dict[str, str], Callable | None]:
    """(character -> the reference's lowercase, for the characters whose ``str.lower`` differs
    from it in this Python; the ``search`` of a pattern of those characters, None when none).

    Below the reference's Unicode version this Python knows fewer capitals (the table's entries
    it leaves alone); above it, it may map code points the reference leaves alone, which only a
    scan of every code point finds (once, about 0.2 s, only on such a Python).
    """
    from ._lowercase_ref import LOWER, UNICODE_VERSION

    fixes = {chr(cp): low for cp, low in LOWER.items() if chr(cp).lower() != low}
    version = tuple(int(x) for x in UNICODE_VERSION.split("."))
    if tuple(int(x) for x in unicodedata.unidata_version.split(".")) > version:
        for cp in range(0x110000):
            if cp not in LOWER and not 0xD800 <= cp <= 0xDFFF and chr(cp).lower() != chr(cp):
                fixes[chr(cp)] = chr(cp)
    if not fixes:
        return fixes, None
    ranges: list[list[int]] = []  # a class of ranges: astral singletons are tried one by one (10x slower)
    for cp in sorted(map(ord, fixes)):
        if ranges and ranges[-1][1] + 1 == cp:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    cls = "".join(re.escape(chr(lo)) + (f"-{re.escape(chr(hi))}" if hi > lo else "") for lo, hi in ranges)
    return fixes, re.compile(f"[{cls}]").search


def prefix_spaces(spec: TokenizerSpec) -> tuple[str, ...]:
    """What counts as "already starts with a space" for ``prefix_if_missing``.

    Hugging Face ``ByteLevel`` checks ``" "`` only (``pre_tokenizers/byte_level.rs``);
    ``Metaspace`` checks its replacement ``"▁"`` too.
    """
    return (" ",) if spec.kind == BYTE_LEVEL else (" ", SPACE)


def segment_preparer(spec: TokenizerSpec, normalize: Normalize | None, *, spaces: bool = True) -> Normalize:
    """``prepare(text)``: what the encoder does to a text that is one segment at the start of the
    input before BPE sees it: the normalizers, the prefix space (every ``prefix_scheme`` agrees on
    the first segment), spaces to ``"▁"`` for SentencePiece-style specs.

    Not valid for the ``"whole_text"`` prefix scheme with normalizers (that scheme decides the
    prefix before normalizing); callers check. ``spaces=False`` leaves spaces as they are (the
    native encoder writes them as ``"▁"`` itself, without a copy of the text).
    """
    add_prefix, if_missing, starts = spec.add_prefix_space, spec.prefix_if_missing, prefix_spaces(spec)
    keep_spaces = spec.kind == BYTE_LEVEL or not spaces

    def prepare(text: str) -> str:
        if normalize is not None:
            text = normalize(text)
        if add_prefix and text and not (if_missing and text[0] in starts):
            text = " " + text
        return text if keep_spaces else text.replace(" ", SPACE)

    return prepare


