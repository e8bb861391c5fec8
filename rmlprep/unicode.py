"""Unicode helpers that need no ``unicodedata`` at run time.

- The GPT-2 printable byte alphabet (:func:`bytes_to_unicode`, :func:`unicode_to_bytes`).
- Code-point classes from the generated ``_unicode_tables`` (general categories, White_Space,
  case folding) and ``_unicode_props`` (Script=Han, Oniguruma's word characters), both pinned to
  one Unicode version.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable
from functools import lru_cache

__all__ = [
    "bytes_to_unicode",
    "unicode_to_bytes",
    "unicode_version",
    "property_ranges",
    "white_space_ranges",
    "word_ranges",
    "case_fold_equivalents",
    "general_category",
    "merge_ranges",
    "complement_ranges",
    "clip_ranges",
    "intersect_ranges",
]


@lru_cache(maxsize=1)
def bytes_to_unicode() -> dict[int, str]:
    """Map each byte 0..255 to the printable character that spells it in byte-level BPE.

    Printable bytes (``!``..``~``, 0xA1..0xAC, 0xAE..0xFF) keep their code point; the other 68
    take U+0100 upward in byte order (space 0x20 -> U+0120 "Ġ", newline 0x0A -> U+010A "Ċ",
    the last one, 0xAD, -> U+0143).

    Source: GPT-2 ``encoder.py`` ``bytes_to_unicode`` (also tokenizers ``byte_level.rs``).
    """
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(0xA1, 0xAC + 1))
        + list(range(0xAE, 0xFF + 1))
    )
    keep = set(printable)
    out: dict[int, str] = {}
    n = 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(0x100 + n)
            n += 1
    return out


@lru_cache(maxsize=1)
def unicode_to_bytes() -> dict[str, int]:
    """Inverse of :func:`bytes_to_unicode`: printable character -> byte value."""
    return {c: b for b, c in bytes_to_unicode().items()}


# --------------------------------------------------------------------------------------------
# Code-point classes from the generated tables (Unicode version pinned in _unicode_tables).

MAX_CODE_POINT = 0x10FFFF

Ranges = tuple[tuple[int, int], ...]

# PropertyValueAliases.txt long names of the general categories (matched loosely, see below).
_CATEGORY_ALIASES = {
    "letter": "L", "casedletter": "LC", "uppercaseletter": "Lu", "lowercaseletter": "Ll",
    "titlecaseletter": "Lt", "modifierletter": "Lm", "otherletter": "Lo",
    "mark": "M", "combiningmark": "M", "nonspacingmark": "Mn", "spacingmark": "Mc",
    "enclosingmark": "Me", "number": "N", "decimalnumber": "Nd", "letternumber": "Nl",
    "othernumber": "No", "punctuation": "P", "connectorpunctuation": "Pc",
    "dashpunctuation": "Pd", "openpunctuation": "Ps", "closepunctuation": "Pe",
    "initialpunctuation": "Pi", "finalpunctuation": "Pf", "otherpunctuation": "Po",
    "symbol": "S", "mathsymbol": "Sm", "currencysymbol": "Sc", "modifiersymbol": "Sk",
    "othersymbol": "So", "separator": "Z", "spaceseparator": "Zs", "lineseparator": "Zl",
    "paragraphseparator": "Zp", "other": "C", "control": "Cc", "format": "Cf",
    "surrogate": "Cs", "privateuse": "Co", "unassigned": "Cn", "l&": "LC",
}


def unicode_version() -> str:
    """The Unicode version of the generated tables (e.g. ``"16.0.0"``)."""
    from rmlprep._unicode_tables import UNICODE_VERSION

    return UNICODE_VERSION


def property_ranges(name: str) -> Ranges | None:
    """Code-point ranges of a ``\\p{name}`` property, or None when rmlprep does not know it.

    Known names: the general categories by short name (``L``, ``Lu``, ``N``, ``Nd``, ``Zs``,
    ``Cn``, ... and ``LC``) or long name (``Letter``, ``Decimal_Number``, ...), ``White_Space``
    (also ``WSpace``), ``Any`` and the script Han (``Han``, ``Hani``, ``Script=Han``,
    ``sc=Han``: the Script property, which is what a bare ``\\p{Han}`` means in Oniguruma,
    fancy-regex/Rust ``regex`` and Python ``regex``; ``scx=Han`` is not known). Long names
    match loosely as in UAX #44 (case, spaces, ``_`` and ``-`` ignored); short category names
    are case-sensitive as in Oniguruma.

    Args:
        name: the text between the braces of ``\\p{...}`` (without a leading ``^``).
    Returns:
        Sorted, merged inclusive (lo, hi) ranges, or None for an unknown name.

    Source: Unicode PropertyValueAliases.txt; Oniguruma / ``regex`` ``\\p{..}`` names.
    """
    from rmlprep._unicode_tables import CATEGORIES, WHITE_SPACE

    if name in CATEGORIES:
        return CATEGORIES[name]
    loose = name.replace("_", "").replace("-", "").replace(" ", "").lower()
    if loose in _CATEGORY_ALIASES:
        return CATEGORIES[_CATEGORY_ALIASES[loose]]
    if loose in ("whitespace", "wspace"):
        return WHITE_SPACE
    if loose == "any":
        return ((0, MAX_CODE_POINT),)
    script = loose.split("=", 1)[1] if loose.startswith(("script=", "sc=")) else loose
    if script in ("han", "hani"):
        from rmlprep._unicode_props import SCRIPTS

        return SCRIPTS["Han"]
    return None


def white_space_ranges() -> Ranges:
    """Ranges of the White_Space property (what ``\\s`` means in onig, ``regex``, Rust regex).

    Unlike Python's ``str.isspace``, U+001C..U+001F are not White_Space.

    Source: Unicode PropList.txt, White_Space.
    """
    from rmlprep._unicode_tables import WHITE_SPACE

    return WHITE_SPACE


def word_ranges() -> Ranges:
    """Ranges of Oniguruma's word characters (``\\w``; ``\\b`` is a change between word and not).

    L, M, Nd, Nl, Pc, the Other_Alphabetic letters outside M (circled Latin letters) and
    U+00B2 U+00B3 U+00B9 U+00BC..U+00BE; not Join_Control. Python's ``str.isalnum()`` differs
    (it takes every N, e.g. U+00B2 but also U+2460), as does UTS #18's ``\\w`` (Join_Control).

    Source: Oniguruma ``ONIGENC_CTYPE_WORD`` as run by ``tokenizers`` (generated table
    ``_unicode_props.py``, checked against it in tests/test_unicode.py).
    """
    from rmlprep._unicode_props import WORD

    return WORD


def case_fold_equivalents(letter: str) -> tuple[int, ...]:
    """Every code point whose simple case folding is the ASCII letter ``letter``.

    For example ``"s"`` -> (U+0053, U+0073, U+017F LATIN SMALL LETTER LONG S) and ``"k"`` ->
    (U+004B, U+006B, U+212A KELVIN SIGN).

    Raises:
        KeyError: ``letter`` is not an ASCII letter.

    Source: Unicode CaseFolding.txt, statuses C and S (what ``(?i)`` uses in onig and regex).
    """
    from rmlprep._unicode_tables import CASE_FOLD_EQUIVALENTS

    return CASE_FOLD_EQUIVALENTS[letter.lower()]


@lru_cache(maxsize=1)
def _category_index() -> tuple[list[int], list[str]]:
    from rmlprep._unicode_tables import CATEGORIES

    pairs = sorted(
        (lo, hi, cat) for cat, rs in CATEGORIES.items() if len(cat) == 2 and cat != "LC" for lo, hi in rs
    )
    return [lo for lo, _, _ in pairs], [cat for _, _, cat in pairs]


def general_category(cp: int) -> str:
    """Two-letter general category of code point ``cp`` in the pinned Unicode version.

    Raises:
        ValueError: ``cp`` outside 0..0x10FFFF.
    """
    if not 0 <= cp <= MAX_CODE_POINT:
        raise ValueError(f"code point {cp:#x} is outside 0..0x10FFFF")
    starts, cats = _category_index()
    return cats[bisect_right(starts, cp) - 1]


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """Sort and merge overlapping or adjacent inclusive ranges."""
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1][1] = hi
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def complement_ranges(ranges: Ranges) -> Ranges:
    """Ranges of every code point in 0..0x10FFFF not in the merged ``ranges``."""
    out = []
    nxt = 0
    for lo, hi in ranges:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return tuple(out)


def clip_ranges(ranges: Ranges, limit: int) -> Ranges:
    """The part of the merged ``ranges`` at or below code point ``limit``."""
    out = []
    for lo, hi in ranges:
        if lo > limit:
            break
        out.append((lo, min(hi, limit)))
    return tuple(out)


def intersect_ranges(a: Ranges, b: Ranges) -> Ranges:
    """Intersection of two merged range tuples."""
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)
