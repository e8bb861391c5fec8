"""Generate ``fixtures/normalization.json``: ``tokenizers``' NFC/NFD/NFKC/NFKD of the texts on
which Unicode versions disagree.

Usage::

    python tools/make_norm_fixtures.py --out fixtures/normalization.json

``tokenizers``' normalizers use the Unicode 9.0.0 tables of the crate
unicode-normalization-alignments; Python's ``unicodedata`` and ``unicodedata2`` are newer. The
texts are every one below on which ``tokenizers`` and the installed ``unicodedata2`` (the
``[reference]`` extra pins it; the banner records the Unicode version the sweep used) disagree
in a form, found by sweeping:

- each code point alone (no surrogates): compatibility and canonical decompositions new since
  9.0.0 (U+32FF SQUARE ERA NAME REIWA, U+A7F2.., U+11938 DIVES AKURU VOWEL SIGN O, ...);
- ``"x"`` + U+0301 + m, ``"x"`` + m + U+0316 and ``"x"`` + m + U+0301 for each code point m
  of nonzero combining class in ``unicodedata2``: marks new since 9.0.0 are class 0 in
  tokenizers, so they do not reorder (U+0C3C TELUGU SIGN NUKTA, class 7 since 14.0);
- a + b for each two-code-point canonical decomposition in ``unicodedata2``: compositions new since 9.0.0
  (U+11935 U+11930 -> U+11938 in 13.0);

plus a few texts on which the versions agree (Latin accents, Hangul jamo, Angstrom, ligatures)
and mixed texts with new emoji, which ``rmlprep.segment`` keeps as boundaries. Each case holds
the text and its four forms as ``tokenizers.normalizers.NFC().normalize_str`` (etc.) gives
them. Output is deterministic for given ``tokenizers`` and ``unicodedata2`` versions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

FORMS = ("NFC", "NFD", "NFKC", "NFKD")
AGREE = [
    "caf\u00e9 cafe\u0301 \u00c5\u212b A\u030a",
    "\u1100\u1161\u11a8 \uac01 \u1112\u1161\u11ab",
    "\ufb01 \u2460 \u00bd x\u00b2 \uff21\uff22 \u3000",
    "a\u0591\u05b0b \u00e2\u0323 \u1ead",
    "\u0915\u093c \u0958 \u09c7\u09be \u304b\u3099",
]
MIXED = [
    "cafe\u0301 \U0001F970 x\u0301\u0c3c \U00011935\U00011930 \u32ff\u3099",
    "\U0001F970\u0301 \U0001FAE0\u0316\u0301 a\u0301\U0001F970e\u0301",
    "\u065e\u089a \u0627\u064e\u08d3 \u0c15\u0c3c\u0c4d \u0d15\u0d3b\u0d4d",
]


def _sweep(ucd, ref) -> list[str]:
    """The sweep texts on which ``ref`` (form -> tokenizers normalizer) and ``ucd`` disagree."""
    singles = [chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF]
    marks = [c for c in singles if ucd.combining(c)]
    pairs = []
    for c in singles:
        d = ucd.decomposition(c)
        if d and not d.startswith("<") and len(d.split()) == 2:
            pairs.append("".join(chr(int(x, 16)) for x in d.split()))
    texts = singles + [t for m in marks for t in ("x\u0301" + m, "x" + m + "\u0316", "x" + m + "\u0301")] + pairs
    out = []
    for form in FORMS:
        batch = 20000
        for i in range(0, len(texts), batch):
            chunk = texts[i:i + batch]
            got = ref[form].normalize_str("\n".join(chunk)).split("\n")  # "\n" is a boundary
            if len(got) != len(chunk):
                got = [ref[form].normalize_str(t) for t in chunk]
            out.extend(t for t, g in zip(chunk, got) if g != ucd.normalize(form, t))
    return sorted(set(out), key=lambda t: [ord(c) for c in t])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("fixtures/normalization.json"))
    args = ap.parse_args(argv)
    try:
        import tokenizers
        import unicodedata2 as ucd
    except ImportError:
        sys.exit("tokenizers and unicodedata2 are required: pip install -e '.[reference]'")
    ref = {form: getattr(tokenizers.normalizers, form)() for form in FORMS}
    differ = _sweep(ucd, ref)
    cases = [{"text": t, **{form: ref[form].normalize_str(t) for form in FORMS}}
             for t in [*AGREE, *MIXED, *differ]]
    doc = {
        "banner": {
            "generator": "tools/make_norm_fixtures.py",
            "reference": f"tokenizers {tokenizers.__version__}, normalizers.NFC/NFD/NFKC/NFKD().normalize_str "
                         "(unicode-normalization-alignments 0.1.12, Unicode 9.0.0)",
            "sweep": f"unicodedata2 (Unicode {ucd.unidata_version}): the texts where it "
                     "and tokenizers disagree",
            "do_not_edit": "rerun the generator",
        },
        "agree": len(AGREE),
        "mixed": len(MIXED),
        "cases": cases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, ensure_ascii=True, indent=0) + "\n", encoding="ascii")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
