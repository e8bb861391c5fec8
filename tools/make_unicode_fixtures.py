"""Write ``fixtures/unicode_ids.json``: reference ids of real tokenizers on text of the code points
Unicode 16.0 added or changed, and of code points only 17.0 assigns.

Usage::

    python tools/make_unicode_fixtures.py [--out fixtures/unicode_ids.json]

Why: the pre-tokenizer patterns (GPT-2, Llama 3, Qwen2, o200k) split on ``\\p{L}``, ``\\p{N}``,
``\\p{Lu}``..., and both references run them on Unicode 16.0.0 tables (``tokenizers`` 0.23's
Oniguruma 6.9.10, ``tiktoken`` 0.14's Rust ``regex``). On rmlprep's former 15.1.0 tables the new
letters and digits (Garay, Kirat Rai, Tulu-Tigalari, Sunuwar, Todhri, Gurung Khema, Ol Onal,
the Myanmar, outlined and Garay digits, U+1C89, U+A7CB ...) were "other" and split otherwise;
the 17.0 texts (Sidetic, Beria Erfe, Tolong Siki, CJK extension J, U+A7CE ...) must stay
"other", as the references read them.

Input: the real files under ``$RMLPREP_REAL_TOKENIZERS`` (default
``~/.cache/rmlprep-real-tokenizers``, fetched by ``../shared/real-tokenizers/get.sh``):
``hf/{gpt2,llama3,gpt-4o,qwen2.5}/tokenizer.json`` (ids from ``tokenizers``) and
``gpt2/gpt2.tiktoken``, ``llama3/llama3.tiktoken`` (ids from ``tiktoken`` with the encoding's
pattern, as ``tools/make_parity_fixtures.py`` builds them). Every text is also encoded by the
other reference where one exists for the same ranks (``tiktoken`` for GPT-2 and Llama 3, and
o200k_base built from GPT-4o's own vocabulary; ``tokenizers`` for the rank files), and the
generator stops unless both give the same ids. The texts are the fixed list below, no
randomness; the output is a function of this file, the real files and the two libraries.

Read by ``tests/test_unicode_ids.py`` (native and pure-Python encoders against these ids).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.make_parity_fixtures import TIKTOKEN_FILES, real_dir, reference_encoder  # noqa: E402

GENERATOR = "tools/make_unicode_fixtures.py"
#: fixture name -> (kind, path under real_dir())
SOURCES = {
    "hf-gpt2": ("hf", "hf/gpt2/tokenizer.json"),
    "hf-llama3": ("hf", "hf/llama3/tokenizer.json"),
    "hf-gpt-4o": ("hf", "hf/gpt-4o/tokenizer.json"),
    "hf-qwen2.5": ("hf", "hf/qwen2.5/tokenizer.json"),
    "tiktoken-gpt2": ("tiktoken", TIKTOKEN_FILES["tiktoken-gpt2"][0]),
    "tiktoken-llama3": ("tiktoken", TIKTOKEN_FILES["tiktoken-llama3"][0]),
}
#: the second reference of a source: same ranks, the other library
CROSS = {"hf-gpt2": "tiktoken-gpt2", "hf-llama3": "tiktoken-llama3", "hf-gpt-4o": "o200k-from-gpt-4o",
         "tiktoken-gpt2": "hf-gpt2", "tiktoken-llama3": "hf-llama3"}


def r(lo: int, hi: int) -> str:
    """The code points lo..hi (inclusive) as a str."""
    return "".join(map(chr, range(lo, hi + 1)))


GARAY_UPPER, GARAY_LOWER, GARAY_DIGITS = r(0x10D50, 0x10D65), r(0x10D70, 0x10D85), r(0x10D40, 0x10D49)
KIRAT_RAI, KIRAT_DIGITS = r(0x16D43, 0x16D62), r(0x16D70, 0x16D79)
TULU, TULU_SIGNS = r(0x11392, 0x113A5), r(0x113B8, 0x113C0)
SUNUWAR, SUNUWAR_DIGITS = r(0x11BC0, 0x11BD0), r(0x11BF0, 0x11BF9)
TODHRI = r(0x105C0, 0x105F3)
GURUNG_KHEMA, GURUNG_SIGNS, GURUNG_DIGITS = r(0x16100, 0x1611D), r(0x1611E, 0x16129), r(0x16130, 0x16139)
OL_ONAL, OL_ONAL_DIGITS = r(0x1E5D0, 0x1E5ED), r(0x1E5F1, 0x1E5FA)

#: (name, text). Letters and digits of each new script alone, after ASCII letters and digits,
#: after a space, in contractions, in runs longer than Llama 3's \p{N}{1,3}, Garay's cases for
#: o200k's upper/lower letter sets, and code points 17.0 assigns (unassigned in 16.0).
TEXTS: list[tuple[str, str]] = [
    ("garay", f"Garay {GARAY_UPPER[:6]}{GARAY_LOWER[:8]} {GARAY_LOWER[3:9]}'s {GARAY_DIGITS} x{GARAY_DIGITS[:4]}y "
              f"12{GARAY_DIGITS[1:4]}34 \U00010D4A\U00010D4E\U00010D4F{GARAY_LOWER[:3]}\U00010D6F \U00010D6E\U00010D8E"),
    ("garay_case", f"{GARAY_UPPER[0]}{GARAY_LOWER[1:4]}{GARAY_UPPER[1:3]}{GARAY_LOWER[4]} {GARAY_LOWER[:2]}{GARAY_UPPER[:2]} "
                   f"A{GARAY_LOWER[:3]} a{GARAY_UPPER[:3]} {GARAY_UPPER}'LL {GARAY_LOWER}'ve"),
    ("kirat_rai", f"\U00016D40{KIRAT_RAI[:7]}\U00016D6B {KIRAT_RAI[7:20]} {KIRAT_DIGITS}\U00016D6D abc{KIRAT_RAI[:4]}"
                  f"{KIRAT_DIGITS[:5]}def \U00016D68\U00016D69\U00016D6A"),
    ("tulu_tigalari", f"{r(0x11380, 0x11389)} {TULU[:6]}{TULU_SIGNS[:3]}{TULU[6:12]} \U000113C2\U000113C5\U000113C7 "
                      f"{TULU}\U000113D1\U000113D3 k{TULU[:2]}"),
    ("sunuwar", f"{SUNUWAR} \U00011BE1 {SUNUWAR_DIGITS}{SUNUWAR[:3]} 2024{SUNUWAR_DIGITS[:2]}"),
    ("todhri", f"{TODHRI[:12]} {TODHRI[12:30]}. Todhri:{TODHRI[30:]}"),
    ("gurung_khema", f"{GURUNG_KHEMA[:10]}{GURUNG_SIGNS[:3]} {GURUNG_KHEMA[10:]}{GURUNG_SIGNS[3:]} {GURUNG_DIGITS} "
                     f"({GURUNG_DIGITS[:3]})"),
    ("ol_onal", f"{OL_ONAL[:10]} \U0001E5EE{OL_ONAL[10:20]}\U0001E5EF \U0001E5F0{OL_ONAL[20:]} {OL_ONAL_DIGITS}\U0001E5FF"),
    ("new_digits", f"{r(0x116D0, 0x116E3)} {r(0x1CCF0, 0x1CCF9)} 1{r(0x1CCF1, 0x1CCF4)}5 v{r(0x116D1, 0x116D3)}.0"),
    ("new_letters_in_old_blocks", "\u1c89\u1c8a TJE\u1c89x \ua7cb\u0264 \ua7cc\ua7cd \ua7da\ua7db\ua7dc\u019b "
                                  "\U00010EC2\U00010EC3\U00010EC4 \U00018CFF \U00013460\U00013461\U00013462"),
    ("ahom_medial_ra", "\U00011700\U0001171E\U00011701 \U0001171E\U00011702 x\U0001171E"),
    ("new_in_17_stay_other", "Sidetic \U00010940\U00010941\U00010942 ab\U00010943cd \u00e9\U00016EA0\U00016EBB "
                             "\U00011DB0\U00011DB1 \U000323B0\U000323B1 \ua7ce\ua7cf 7\U00011DE0\U00011DE19"),
    ("mixed_lines", f"Hello {GARAY_UPPER[:3]}, {KIRAT_RAI[:4]} and {OL_ONAL[:3]}!\n\n  {SUNUWAR_DIGITS[:4]} "
                    f"items\r\n\t{TODHRI[:5]}'s {GURUNG_DIGITS[:7]}   "),
]


def _o200k_from_gpt4o():
    """(encode_ordinary, "lib version"): tiktoken's o200k_base pattern over GPT-4o's own vocab
    (rank = id, bytes through the byte alphabet), as tests/test_hf.py builds it."""
    import tiktoken

    from rmlprep.pretokenize import O200K_PATTERN
    from rmlprep.unicode import unicode_to_bytes

    d = json.loads((real_dir() / "hf" / "gpt-4o" / "tokenizer.json").read_text(encoding="utf-8"))
    u2b = unicode_to_bytes()
    ranks = {bytes(u2b[c] for c in t): i for t, i in d["model"]["vocab"].items()
             if all(c in u2b for c in t) and not t.startswith("<|")}
    enc = tiktoken.Encoding("o200k_base-from-gpt-4o", pat_str=O200K_PATTERN, mergeable_ranks=ranks, special_tokens={})
    return enc.encode_ordinary, f"tiktoken {tiktoken.__version__}"


def build() -> dict:
    """The fixture document (stops when a real file is absent or the references disagree)."""
    base = real_dir()
    missing = [rel for _, rel in SOURCES.values() if not (base / rel).is_file()]
    if missing:
        sys.exit(f"absent under {base}: {', '.join(missing)}; run ../shared/real-tokenizers/get.sh")
    encoders = {}
    for name, (kind, rel) in SOURCES.items():
        encode, _decode, ref = reference_encoder(kind, rel, name)
        encoders[name] = (lambda text, encode=encode: encode(text, False, False), ref)
    encoders["o200k-from-gpt-4o"] = _o200k_from_gpt4o()
    tokenizers_out = {}
    for name, (kind, rel) in SOURCES.items():
        encode, ref = encoders[name]
        cases = []
        for case, text in TEXTS:
            ids = encode(text)
            if name in CROSS and encoders[CROSS[name]][0](text) != ids:
                sys.exit(f"{name} and {CROSS[name]} disagree on {case!r}; the references differ, choose per reference")
            cases.append({"name": case, "text": text, "ids": ids})
        tokenizers_out[name] = {
            "source": rel, "sha256": hashlib.sha256((base / rel).read_bytes()).hexdigest(), "reference": ref,
            "checked_against": f"{CROSS[name]} ({encoders[CROSS[name]][1]})" if name in CROSS else None,
            "cases": cases,
        }
    return {
        "banner": {
            "generator": GENERATOR,
            "texts": "code points new in Unicode 16.0.0 (and U+1171E, Mn -> Mc), and code points 17.0.0 assigns",
            "ids": "add_special_tokens=False, special-token text read as text (tokenizers encode_special_tokens, "
                   "tiktoken encode_ordinary)",
            "do_not_edit": "rerun the generator",
        },
        "tokenizers": tokenizers_out,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "fixtures" / "unicode_ids.json")
    args = ap.parse_args(argv)
    doc = build()
    text = json.dumps(doc, ensure_ascii=True, indent=None, separators=(",", ":")) + "\n"
    if json.loads(text) != doc:
        sys.exit("the fixture does not survive a JSON round trip")
    args.out.write_text(text, encoding="ascii")
    n = sum(len(c["ids"]) for t in doc["tokenizers"].values() for c in t["cases"])
    print(f"wrote {args.out}: {len(doc['tokenizers'])} tokenizers x {len(TEXTS)} texts, {n} ids", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
