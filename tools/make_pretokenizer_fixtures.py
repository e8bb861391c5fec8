"""Generate ``fixtures/pretokenizer.json``: reference pre-splits from Python's ``regex`` module.

Usage::

    python tools/make_pretokenizer_fixtures.py --out fixtures/pretokenizer.json

For each text below and each known pattern (GPT-2, Llama 3, Qwen2 and the two digit splits,
written out here verbatim, independent of rmlprep's copies), ``regex`` runs the ORIGINAL pattern
and the pieces are recorded with Hugging Face ``Isolated`` behaviour: every match and every
non-empty gap between matches, in order. tiktoken's cl100k_base and o200k_base patterns
(:data:`TIKTOKEN_PATTERNS`, copied from tiktoken_ext/openai_public.py; possessive quantifiers,
``\\s++$``) are recorded apart, under ``tiktoken_patterns`` / ``tiktoken_splits``, since rmlprep's
native splitter implements only the first set. ``regex`` reads ``$`` as end of text or before a
final newline, fancy-regex (tiktoken) as end of text only; in ``\\s++$`` the two agree.

``regex`` carries its own Unicode tables (newer than rmlprep's pinned 16.0.0). The generator
finds every code point whose membership in ``\\p{L}``, ``\\p{N}``, ``\\s`` or whose general
category differs between the two versions, and refuses texts that contain one, so the
fixtures hold for both. Output is deterministic for a given ``regex`` version.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PATTERNS = {
    "gpt2": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    "llama3": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    "qwen2": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    "digits": r"\p{N}+",
    "digits_individual": r"\p{N}",
}

TIKTOKEN_PATTERNS = {
    "cl100k_base": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
    "o200k_base": "|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
}

TEXTS: list[tuple[str, str]] = [
    ("plain", "Hello world"),
    ("double_space_contraction", "Hello  world's   \n"),
    ("tabs", "\tindented\t\tcode\t"),
    ("crlf", "line one\r\nline two\r\n\r\nend\r\n"),
    ("newline_runs", "a\n\n\n\nb\n \n  \nc\n\n"),
    ("trailing_spaces", "word   "),
    ("spaces_before_newline", "a  \n  b   \n\n   c"),
    ("only_spaces", "     "),
    ("only_newlines", "\n\n\n"),
    ("combining_marks", "e\u0301te\u0301 cafe\u0301 n\u0303o \u0301alone a\u0308\u0304"),
    ("cjk", "日本語のテキストです。中文文本，한국어 텍스트！"),
    ("emoji_zwj", "family: \U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 ok \U0001F44D\U0001F3FD!"),
    (
        "unicode_spaces",
        "a\u00a0b\u2009c\u3000d\u202fe\u205ff\u1680g\u2028h\u2029i\u0085j \u00a0 k\u2003\u2003l",
    ),
    ("contractions_lower", "I'm sure they're here, we've seen it, she'll go, he'd say, it's, don't"),
    ("contractions_upper", "I'M SURE THEY'RE HERE, WE'VE SEEN, SHE'LL, HE'D, IT'S, DON'T"),
    ("contractions_mixed", "It'S We'Re They'rE 'LL 'Ve 'D 'T ''s 's's '"),
    ("long_s_kelvin", "it\u2019s it'\u017f the '\u212a test '\u017ft 5\u212a 'K"),
    ("digit_runs", "1 12 123 1234 12345 123456 1234567"),
    ("digits_mixed", "v2.0.13, 3.14159, 1,000,000 and \u0661\u0662\u0663\u0664 \u0665 and \u2167 \u00b2\u00b3 \u00bd"),
    ("digits_in_words", "abc123def4567890xyz 12ab34 x1"),
    ("mixed_scripts", "Привет мир! Γειά σου Κόσμε. مرحبا بالعالم. שלום עולם. नमस्ते दुनिया"),
    ("thai", "สวัสดีครับ ภาษาไทย"),
    (
        "code",
        "def f(x):\n    return x**2 + 1  # comment\n\nif __name__ == '__main__':\n\tprint(f(3))\n",
    ),
    ("url_json", 'https://example.com/path?q=1&r=two#frag {"key": [1, 2, 3], "b": null}'),
    ("punctuation_runs", 'Wait... what?!?! (yes) -- "quoted" \u2014 dash \u2013 \u00abguillemets\u00bb'),
    ("math_symbols", "\u2211x\u00b2 \u2264 \u221e \u00b1 \u221a2 \u2202f/\u2202x"),
    ("control_chars", "\x00\x01\x1c\x1d\x1e\x1f\x7f a\x0bb\x0cc \x1c\x1d x"),
    ("format_chars", "a\u200bb\u200cc\u200dd\ufeffe\u00adf \u200b"),
    ("astral_letters", "\U0001D400\U0001D401\U0001D402 \U0001D518\U0001D52B \U00020000\U00020001 \U0001F642\U0001F643"),
    ("private_use", "\ue000\ue001 x \U000f0000 \U0010fffd"),
    ("lone_surrogates", "abc\ud800def \udfff 1 \udbff"),
    # Low then high: JSON would read an escaped high+low pair back as one astral character.
    ("surrogate_edge", "\udc00\ud800 x\ud83d\n\udfff"),
    ("newline_punct", "end.\n\n- item\r\n* item!\n"),
    ("empty", ""),
    # tiktoken patterns: \s++$ at the very end, before a final newline, and mid-text.
    ("spaces_newlines_at_end", "end  \n\n  "),
    ("space_before_final_newline", "a b \n"),
    ("whitespace_runs_mid_text", "x \n \n\ty\r\n  \r\n z\u00a0\n"),
    ("camel_case_contractions", "HTMLParser's XMLHttpRequest I'M DON'T McDonald's \u00c9COLE'S \u01c5a"),
    ("digits_and_slashes", "12345/678 path/to/file\n/\n 1/2 \u00bd/\u2154"),
]


def differing_code_points(regex_mod, ucd) -> set[int]:
    """Code points whose L/N/White_Space membership or category differs between the versions."""
    every = "".join(chr(cp) for cp in range(0x110000))
    white_space = {0x9, 0xA, 0xB, 0xC, 0xD, 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
                   0x2028, 0x2029, 0x202F, 0x205F, 0x3000}  # PropList 16.0 White_Space
    out: set[int] = set()
    cats = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps",
            "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs",
            "Co", "Cn"]
    ref: dict[int, str] = {}
    for cat in cats:
        for m in regex_mod.finditer(r"\p{%s}+" % cat, every):
            for cp in range(m.start(), m.end()):
                ref[cp] = cat
    for cp in range(0x110000):
        if ref.get(cp) != ucd.category(chr(cp)):
            out.add(cp)
    ws = {m.start() for m in regex_mod.finditer(r"\s", every)}
    out |= ws ^ white_space
    return out


def regex_unicode_version(regex_mod) -> str:
    """Newest Unicode version whose probe character ``regex`` knows (assigned, not Cn)."""
    probes = [("15.1.0", 0x2FFC), ("16.0.0", 0x1C89), ("17.0.0", 0x10940)]
    found = "older than 15.1.0"
    for version, cp in probes:
        if not regex_mod.match(r"\p{Cn}", chr(cp)):
            found = version
    return found


def isolated(regex_mod, pattern: str, text: str) -> list[str]:
    """Hugging Face Isolated split: matches and non-empty gaps, empty matches dropped."""
    pieces = []
    last = 0
    for m in regex_mod.finditer(pattern, text):
        s, e = m.span()
        if s > last:
            pieces.append(text[last:s])
        if e > s:
            pieces.append(text[s:e])
        last = e
    if last < len(text):
        pieces.append(text[last:])
    return pieces


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("fixtures/pretokenizer.json"))
    args = ap.parse_args(argv)
    try:
        import regex
        import unicodedata2
    except ImportError as e:
        sys.exit(f"{e.name} is required: pip install regex 'unicodedata2==16.0.0'")
    differ = differing_code_points(regex, unicodedata2)
    for name, text in TEXTS:
        bad = sorted({ord(c) for c in text} & differ)
        if bad:
            sys.exit(f"text {name!r} holds {[hex(b) for b in bad]}, whose Unicode properties "
                     f"differ between {unicodedata2.unidata_version} and regex's tables")
    doc = {
        "banner": {
            "generator": "tools/make_pretokenizer_fixtures.py",
            "reference": f"Python regex module {regex.__version__} on the original patterns",
            "regex_unicode_version": regex_unicode_version(regex)
            + " (inferred from probe characters)",
            "rmlprep_unicode_version": unicodedata2.unidata_version,
            "behavior": "Hugging Face Split Isolated: matches and gaps, empty pieces dropped",
            "note": f"{len(differ)} code points whose category, L/N or White_Space membership "
            "differs between the two Unicode versions are kept out of the texts",
            "do_not_edit": "rerun the generator",
        },
        "patterns": PATTERNS,
        "tiktoken_patterns": TIKTOKEN_PATTERNS,
        "cases": [
            {
                "name": name,
                "text": text,
                "splits": {p: isolated(regex, pat, text) for p, pat in PATTERNS.items()},
                "tiktoken_splits": {p: isolated(regex, pat, text) for p, pat in TIKTOKEN_PATTERNS.items()},
            }
            for name, text in TEXTS
        ],
    }
    text = json.dumps(doc, ensure_ascii=True, indent=1) + "\n"
    if json.loads(text) != doc:
        sys.exit("the fixture does not survive a JSON round trip (an escaped surrogate pair?)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="ascii")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
