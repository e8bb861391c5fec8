"""Generate ``rmlprep/_unicode_tables.py`` from a pinned Unicode version.

Usage::

    python tools/make_unicode_tables.py --unicode-version 15.1.0 --out rmlprep/_unicode_tables.py \
        --props-out rmlprep/_unicode_props.py --norm-out rmlprep/_unicode_norm.py

Outputs: ``_unicode_tables.py`` (general categories, White_Space, case folding),
``_unicode_props.py`` (the Script property values rmlprep's patterns use, Han, and Oniguruma's
word characters for ``\\w``/``\\b``) and ``_unicode_norm.py`` (the normalization quick-check
properties: Canonical_Combining_Class, NFC_QC and NFKC_QC; read by ``tools/make_native_tables.py``
for the native quick check, never imported at run time). These live in files of their own so
that adding one leaves ``_unicode_tables.py``, whose sha256 the native class table
(``tools/make_native_tables.py``) records, byte-identical.

Inputs:
- General categories: the ``unicodedata2`` package, whose ``unidata_version`` must equal
  ``--unicode-version`` (the tables must not follow whatever Unicode the interpreter ships).
- White_Space: Python has no property API, so the property is the fixed list of
  ``PropList.txt`` below (identical in Unicode 6.3 through 15.1; checked only for 15.1.0).
- Script=Han: the fixed list of ``Scripts.txt`` (15.1.0) ranges below. When the ``regex``
  module is installed the generator checks it against ``regex``'s ``\\p{Han}`` restricted to the
  code points assigned in ``unicodedata2`` (a newer ``regex`` knows ideographs added after 15.1,
  which are unassigned, script Unknown, in 15.1) and stops on any disagreement.
- Word characters (Oniguruma's ``\\w``, the engine of tokenizer.json): L, M, Nd, Nl, Pc, the
  Other_Alphabetic code points outside M (the fixed ``PropList.txt`` list below: circled and
  squared Latin letters, category So), and U+00B2 U+00B3 U+00B9 U+00BC..U+00BE, which
  Oniguruma's ISO-8859-1 ctype table (used for code points below 256) marks as word; not
  Join_Control (U+200C, U+200D), unlike UTS #18. Checked against ``tokenizers``' Oniguruma in
  ``tests/test_unicode.py`` on the code points assigned in this version.
- Simple case folding onto ASCII letters: the fixed list of ``CaseFolding.txt`` (status C and
  S) entries below, checked for 15.1.0. When the ``regex`` module is installed the generator
  cross-checks these equivalents against ``regex``'s ``(?i)`` and stops on any disagreement
  other than the documented one (``regex`` also lets ``i`` match U+0130, which simple case
  folding, used by Oniguruma and the Rust ``regex`` crate, does not).

- Normalization quick check: Canonical_Combining_Class from ``unicodedata2.combining``;
  NFC_QC = No (Full_Composition_Exclusion) and NFKC_QC = No are the code points whose
  ``unicodedata2.normalize`` to that form is not the code point itself (a character with a
  decomposition that composition does not give back); NFC_QC = Maybe (= NFKC_QC = Maybe) is the
  second code point of the canonical decomposition of every primary composite (a two-code-point
  decomposition that NFC composes back) plus the Hangul vowel and trailing jamo
  (U+1161..U+1175, U+11A8..U+11C2), the derivation of ``DerivedNormalizationProps.txt``
  (UAX #15). For 15.1.0 the counts are checked against that file's totals.

Output is deterministic: the same inputs give the same bytes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

MAX_CP = 0x10FFFF

# General category groups: the one-letter categories and LC are unions of these.
SUBCATEGORIES: dict[str, tuple[str, ...]] = {
    "L": ("Lu", "Ll", "Lt", "Lm", "Lo"),
    "LC": ("Lu", "Ll", "Lt"),
    "M": ("Mn", "Mc", "Me"),
    "N": ("Nd", "Nl", "No"),
    "P": ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"),
    "S": ("Sm", "Sc", "Sk", "So"),
    "Z": ("Zs", "Zl", "Zp"),
    "C": ("Cc", "Cf", "Cs", "Co", "Cn"),
}

# PropList.txt (Unicode 15.1.0), property White_Space, verbatim ranges.
WHITE_SPACE_15_1: tuple[tuple[int, int], ...] = (
    (0x0009, 0x000D),
    (0x0020, 0x0020),
    (0x0085, 0x0085),
    (0x00A0, 0x00A0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
)

# Scripts.txt (Unicode 15.1.0), script Han, verbatim ranges (radicals, 々 〇 〡..〩 〸..〻, the
# unified and compatibility ideographs with extensions A..I, U+16FE2..U+16FF1).
HAN_15_1: tuple[tuple[int, int], ...] = (
    (0x2E80, 0x2E99),
    (0x2E9B, 0x2EF3),
    (0x2F00, 0x2FD5),
    (0x3005, 0x3005),
    (0x3007, 0x3007),
    (0x3021, 0x3029),
    (0x3038, 0x303B),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFA6D),
    (0xFA70, 0xFAD9),
    (0x16FE2, 0x16FE3),
    (0x16FF0, 0x16FF1),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B739),
    (0x2B740, 0x2B81D),
    (0x2B820, 0x2CEA1),
    (0x2CEB0, 0x2EBE0),
    (0x2EBF0, 0x2EE5D),
    (0x2F800, 0x2FA1D),
    (0x30000, 0x3134A),
    (0x31350, 0x323AF),
)

# PropList.txt (Unicode 15.1.0), Other_Alphabetic, the ranges outside general category M.
OTHER_ALPHABETIC_NOT_MARK_15_1: tuple[tuple[int, int], ...] = (
    (0x24B6, 0x24E9),
    (0x1F130, 0x1F149),
    (0x1F150, 0x1F169),
    (0x1F170, 0x1F189),
)
# Oniguruma (unicode.c) answers ctype queries below U+0100 from its ISO-8859-1 table, where the
# superscripts and vulgar fractions (category No) are word characters.
ONIG_LATIN1_WORD_NUMBERS: tuple[int, ...] = (0xB2, 0xB3, 0xB9, 0xBC, 0xBD, 0xBE)

# CaseFolding.txt (Unicode 15.1.0), status C and S entries whose folding is an ASCII letter and
# whose code point is not ASCII: 017F; C; 0073 (LATIN SMALL LETTER LONG S) and
# 212A; C; 006B (KELVIN SIGN). Every other ASCII letter folds only from its other ASCII case.
NON_ASCII_SIMPLE_FOLDS_15_1: dict[str, tuple[int, ...]] = {"k": (0x212A,), "s": (0x017F,)}

# Known, documented disagreement of Python's ``regex`` module with simple case folding.
REGEX_MODULE_EXTRA_FOLDS: dict[str, tuple[int, ...]] = {"i": (0x0130,)}


def merge(cps: list[int]) -> tuple[tuple[int, int], ...]:
    """Merge sorted code points into inclusive (lo, hi) ranges."""
    out: list[list[int]] = []
    for cp in cps:
        if out and out[-1][1] + 1 == cp:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return tuple((lo, hi) for lo, hi in out)


def category_ranges(ucd) -> dict[str, tuple[tuple[int, int], ...]]:
    """Ranges of every two-letter category and of the groups in SUBCATEGORIES."""
    by_cat: dict[str, list[int]] = {}
    for cp in range(MAX_CP + 1):
        by_cat.setdefault(ucd.category(chr(cp)), []).append(cp)
    result = {cat: merge(cps) for cat, cps in by_cat.items()}
    for group, subs in SUBCATEGORIES.items():
        for sub in subs:
            result.setdefault(sub, ())
        cps = sorted(cp for sub in subs for lo, hi in result[sub] for cp in range(lo, hi + 1))
        result[group] = merge(cps)
    return result


def case_fold_equivalents() -> dict[str, tuple[int, ...]]:
    """For each ASCII lowercase letter, every code point whose simple case folding is it."""
    out = {}
    for c in "abcdefghijklmnopqrstuvwxyz":
        cps = {ord(c), ord(c.upper()), *NON_ASCII_SIMPLE_FOLDS_15_1.get(c, ())}
        out[c] = tuple(sorted(cps))
    return out


def check_against_regex_module(folds: dict[str, tuple[int, ...]]) -> None:
    """Cross-check the fold table with ``regex``'s ``(?i)`` when ``regex`` is installed.

    The banner does not depend on it, so the output stays byte-identical either way.
    """
    try:
        import regex
    except ImportError:
        print("note: regex module not installed; case folds not cross-checked", file=sys.stderr)
        return
    every = "".join(chr(cp) for cp in range(MAX_CP + 1))
    for c, cps in folds.items():
        got = tuple(m.start() for m in regex.finditer(f"(?i:{c})", every))
        want = tuple(sorted({*cps, *REGEX_MODULE_EXTRA_FOLDS.get(c, ())}))
        if got != want:
            sys.exit(
                f"case folding for {c!r}: table says {[hex(x) for x in want]}, regex module "
                f"{regex.__version__} says {[hex(x) for x in got]}; update the fixed list"
            )


def check_ranges_against_regex_module(ucd, prop: str, keep, expected, what: str) -> None:
    """Cross-check a fixed list of ranges with ``regex``'s ``\\p{prop}`` on the code points
    assigned in ``ucd`` that ``keep(category)`` accepts (like the case-fold check, it does not
    change the output)."""
    try:
        import regex
    except ImportError:
        print(f"note: regex module not installed; {what} not cross-checked", file=sys.stderr)
        return
    pat = regex.compile(rf"\p{{{prop}}}")
    got = [cp for cp in range(MAX_CP + 1)
           if not 0xD800 <= cp <= 0xDFFF and keep(ucd.category(chr(cp))) and pat.match(chr(cp))]
    if merge(got) != expected:
        sys.exit(f"{what}: the fixed list differs from regex {regex.__version__} on the code points "
                 f"assigned in Unicode {ucd.unidata_version}; update the list")


def word_ranges(cats: dict) -> tuple[tuple[int, int], ...]:
    """Oniguruma's word characters (``\\w``) from the categories and the fixed lists above."""
    cps = set()
    for name in ("L", "M", "Nd", "Nl", "Pc"):
        cps.update(cp for lo, hi in cats[name] for cp in range(lo, hi + 1))
    cps.update(cp for lo, hi in OTHER_ALPHABETIC_NOT_MARK_15_1 for cp in range(lo, hi + 1))
    cps.update(ONIG_LATIN1_WORD_NUMBERS)
    return merge(sorted(cps))


def render_props(version: str, cats: dict) -> str:
    """The text of _unicode_props.py."""
    parts = [
        '"""Unicode properties beyond the general categories for rmlprep (generated; do not edit).',
        "",
        "Generated by tools/make_unicode_tables.py",
        f"Unicode version: {version}",
        "Scripts: Scripts.txt (fixed lists in the generator), cross-checked with the regex",
        "module's \\\\p{Han} on the code points assigned in this version when installed.",
        "Word: Oniguruma's \\\\w: general categories L M Nd Nl Pc (unicodedata2), Other_Alphabetic",
        "outside M (PropList.txt, fixed list), U+00B2 U+00B3 U+00B9 U+00BC..U+00BE (Oniguruma's",
        "ISO-8859-1 ctype table); not Join_Control.",
        "",
        "Ranges are inclusive (lo, hi) code-point pairs, sorted and merged, over 0..0x10FFFF.",
        "DO NOT EDIT: rerun the generator instead.",
        '"""',
        "",
        f'UNICODE_VERSION = "{version}"',
        "",
        "# Script (long name) -> ranges.",
        "SCRIPTS: dict[str, tuple[tuple[int, int], ...]] = {",
        f'    "Han": {fmt_ranges(HAN_15_1)},',
        "}",
        "",
        "# Oniguruma's word characters (\\\\w, and the sides of \\\\b).",
        f"WORD: tuple[tuple[int, int], ...] = {fmt_ranges(word_ranges(cats), '    ')}",
        "",
    ]
    return "\n".join(parts)


def fmt_ranges(ranges: tuple[tuple[int, int], ...], indent: str = "        ") -> str:
    """Format ranges six per line as hex tuples."""
    if not ranges:
        return "()"
    items = [f"(0x{lo:04X}, 0x{hi:04X})," for lo, hi in ranges]
    lines = [indent + " ".join(items[i : i + 6]) for i in range(0, len(items), 6)]
    return "(\n" + "\n".join(lines) + "\n" + indent[:-4] + ")"


# DerivedNormalizationProps.txt (Unicode 15.1.0): code points per value, for the check below.
NORM_COUNTS_15_1 = {"NFC_QC_NO": 1120, "NFC_QC_MAYBE": 111, "NFKC_QC_NO": 4928}
# Hangul jamo that compose with a preceding syllable or leading consonant (UAX #15, 3.12).
HANGUL_V_T = ((0x1161, 0x1175), (0x11A8, 0x11C2))


def normalization_props(ucd) -> dict[str, tuple]:
    """COMBINING_CLASS ((lo, hi, ccc) runs of ccc != 0), NFC_QC_NO, NFC_QC_MAYBE, NFKC_QC_NO."""
    ccc: list[list[int]] = []
    nfc_no, nfkc_no, maybe = [], [], set()
    for cp in range(MAX_CP + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue  # surrogates: ccc 0, Yes for every form
        ch = chr(cp)
        c = ucd.combining(ch)
        if c:
            if ccc and ccc[-1][1] + 1 == cp and ccc[-1][2] == c:
                ccc[-1][1] = cp
            else:
                ccc.append([cp, cp, c])
        if ucd.normalize("NFC", ch) != ch:
            nfc_no.append(cp)
        elif (d := ucd.decomposition(ch)) and not d.startswith("<") and len(d.split()) == 2:
            maybe.add(int(d.split()[1], 16))  # a primary composite: its second part composes
        if ucd.normalize("NFKC", ch) != ch:
            nfkc_no.append(cp)
    for lo, hi in HANGUL_V_T:
        maybe.update(range(lo, hi + 1))
    if maybe & set(nfkc_no):
        sys.exit("a code point is NFC_QC Maybe and NFKC_QC No; NFKC_QC Maybe needs its own list")
    return {"COMBINING_CLASS": tuple(tuple(r) for r in ccc), "NFC_QC_NO": merge(nfc_no),
            "NFC_QC_MAYBE": merge(sorted(maybe)), "NFKC_QC_NO": merge(nfkc_no)}


def check_norm_counts(norm: dict) -> None:
    """The quick-check sets have DerivedNormalizationProps.txt's sizes (15.1.0)."""
    for name, want in NORM_COUNTS_15_1.items():
        got = sum(hi - lo + 1 for lo, hi in norm[name])
        if got != want:
            sys.exit(f"{name}: {got} code points, DerivedNormalizationProps.txt 15.1.0 has {want}")


def render_norm(version: str, norm: dict) -> str:
    """The text of _unicode_norm.py."""
    runs = [f"(0x{lo:04X}, 0x{hi:04X}, {c})," for lo, hi, c in norm["COMBINING_CLASS"]]
    parts = [
        '"""Unicode normalization quick-check properties for rmlprep (generated; do not edit).',
        "",
        "Generated by tools/make_unicode_tables.py",
        f"Unicode version: {version}",
        "Source: unicodedata2 (combining, decomposition, normalize), derived as",
        "DerivedNormalizationProps.txt is (UAX #15); Hangul V/T jamo are NFC_QC Maybe.",
        "NFKC_QC Maybe is the NFC_QC Maybe list. Surrogates are ccc 0 and Yes everywhere.",
        "Read by tools/make_native_tables.py (the native quick check) and tests; not imported",
        "at run time.",
        "",
        "Ranges are inclusive (lo, hi) code-point pairs, sorted and merged, over 0..0x10FFFF.",
        "DO NOT EDIT: rerun the generator instead.",
        '"""',
        "",
        f'UNICODE_VERSION = "{version}"',
        "",
        "# Canonical_Combining_Class != 0: (lo, hi, ccc) runs of equal class.",
        "COMBINING_CLASS: tuple[tuple[int, int, int], ...] = (",
        *("    " + " ".join(runs[i:i + 5]) for i in range(0, len(runs), 5)),
        ")",
        "",
    ]
    for name, what in (("NFC_QC_NO", "NFC_QC = No (Full_Composition_Exclusion)"),
                       ("NFC_QC_MAYBE", "NFC_QC = Maybe (= NFKC_QC = Maybe)"),
                       ("NFKC_QC_NO", "NFKC_QC = No")):
        parts.append(f"# {what}.")
        parts.append(f"{name}: tuple[tuple[int, int], ...] = {fmt_ranges(norm[name], '    ')}")
        parts.append("")
    return "\n".join(parts)


def render(version: str, ucd_module: str, cats: dict, folds: dict) -> str:
    """The text of _unicode_tables.py."""
    names = sorted(cats, key=lambda n: (n[0], len(n), n))
    parts = [
        '"""Unicode code-point tables for rmlprep (generated; do not edit).',
        "",
        "Generated by tools/make_unicode_tables.py",
        f"Unicode version: {version}",
        f"General categories: {ucd_module} (unidata_version {version}).",
        "White_Space: PropList.txt property White_Space (fixed list in the generator).",
        "Case folding: CaseFolding.txt simple folding (status C and S) onto ASCII letters,",
        "fixed list in the generator, cross-checked with the regex module's (?i) when",
        "installed (regex also lets i match U+0130; simple folding does not).",
        "",
        "Ranges are inclusive (lo, hi) code-point pairs, sorted and merged, over 0..0x10FFFF.",
        "DO NOT EDIT: rerun the generator instead.",
        '"""',
        "",
        f'UNICODE_VERSION = "{version}"',
        "",
        "# General category (two-letter, one-letter groups and LC) -> ranges.",
        "CATEGORIES: dict[str, tuple[tuple[int, int], ...]] = {",
    ]
    for name in names:
        parts.append(f'    "{name}": {fmt_ranges(cats[name])},')
    parts.append("}")
    parts.append("")
    parts.append("# PropList.txt White_Space.")
    parts.append(f"WHITE_SPACE: tuple[tuple[int, int], ...] = {fmt_ranges(WHITE_SPACE_15_1, '    ')}")
    parts.append("")
    parts.append("# ASCII lowercase letter -> every code point whose simple case folding is it.")
    parts.append("CASE_FOLD_EQUIVALENTS: dict[str, tuple[int, ...]] = {")
    for c, cps in folds.items():
        parts.append(f'    "{c}": ({", ".join(f"0x{cp:04X}" for cp in cps)},),')
    parts.append("}")
    parts.append("")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--unicode-version", default="15.1.0")
    ap.add_argument("--out", type=Path, default=Path("rmlprep/_unicode_tables.py"))
    ap.add_argument("--props-out", type=Path, default=Path("rmlprep/_unicode_props.py"))
    ap.add_argument("--norm-out", type=Path, default=Path("rmlprep/_unicode_norm.py"))
    args = ap.parse_args(argv)
    try:
        import unicodedata2 as ucd
    except ImportError:
        sys.exit("unicodedata2 is required: pip install 'unicodedata2==15.1.0'")
    if ucd.unidata_version != args.unicode_version:
        sys.exit(
            f"--unicode-version {args.unicode_version} but unicodedata2 has "
            f"{ucd.unidata_version}; pip install 'unicodedata2=={args.unicode_version}'"
        )
    if args.unicode_version != "15.1.0":
        sys.exit(
            f"the White_Space, Han and case-folding lists in {__file__} are checked for 15.1.0 "
            f"only; verify them against Unicode {args.unicode_version} and extend the generator"
        )
    cats = category_ranges(ucd)
    folds = case_fold_equivalents()
    check_against_regex_module(folds)
    check_ranges_against_regex_module(ucd, "Han", lambda cat: cat != "Cn", HAN_15_1, "Script=Han")
    # Alphabetic = L + Nl + Other_Alphabetic: the fixed list is its part outside L, M, Nl (and C)
    check_ranges_against_regex_module(ucd, "Alphabetic", lambda cat: cat[0] not in "LMC" and cat != "Nl",
                                      OTHER_ALPHABETIC_NOT_MARK_15_1, "Other_Alphabetic outside M")
    norm = normalization_props(ucd)
    check_norm_counts(norm)
    text = render(args.unicode_version, "unicodedata2", cats, folds)
    args.out.write_text(text, encoding="utf-8")
    args.props_out.write_text(render_props(args.unicode_version, cats), encoding="utf-8")
    args.norm_out.write_text(render_norm(args.unicode_version, norm), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
