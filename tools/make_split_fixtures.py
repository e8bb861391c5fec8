"""Generate ``fixtures/split_behaviors.json``: Hugging Face ``Split`` pieces for every behaviour.

Usage::

    python tools/make_split_fixtures.py --out fixtures/split_behaviors.json

For each pattern below (string and regex patterns, patterns that match the empty string, and
the tiling o200k / Llama 3 patterns), each of the five ``SplitDelimiterBehavior`` values
(``removed``, ``isolated``, ``merged_with_previous``, ``merged_with_next``, ``contiguous``) and
``invert`` false/true, the pieces come from ``tokenizers.pre_tokenizers.Split(...)
.pre_tokenize_str(text)`` of the installed ``tokenizers`` (Oniguruma regexes, its own match
iteration). Texts are ASCII, Latin-1, CJK and emoji only, whose Unicode properties agree
between versions. Output is deterministic for a given ``tokenizers`` version.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# (name, kind, pattern): kind "String" (matched literally) or "Regex" (Oniguruma syntax).
PATTERNS = [
    ("space", "String", " "),
    ("two_chars", "String", "ab"),
    ("metaspace", "String", "\u2581"),
    ("whitespace_runs", "Regex", r"\s+"),
    ("digits", "Regex", r"\p{N}"),
    ("optional_digits", "Regex", r"\d*"),  # matches the empty string everywhere
    ("lookahead_or_char", "Regex", r"a|(?=c)"),  # empty matches away from the last match
    ("lookahead_first", "Regex", r"(?=b)|b"),  # an empty match where a non-empty one also fits
    (
        "o200k",
        "Regex",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
        r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}"
        r"| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
    (
        "llama3",
        "Regex",
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+",
    ),
]

BEHAVIORS = ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]

TEXTS = [
    "",
    " ",
    "   ",
    "How are you doing?",
    "  leading and trailing  ",
    "ab abab aab abba b",
    "a1b22c333 4444d",
    "abcabc cab bca",
    "\u2581Hello\u2581\u2581world\u2581",
    "line one\r\nline two\n\n\tend\n",
    "I'm sure THEY'RE here, don't",
    "caf\u00e9 na\u00efve \u00c9COLE",
    "\u65e5\u672c\u8a9e 12345 \u4e2d\u6587",
    "emoji \U0001F600\U0001F44D b",
    "x" * 5 + " " * 4 + "c",
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("fixtures/split_behaviors.json"))
    args = ap.parse_args(argv)
    try:
        import tokenizers
        from tokenizers import Regex, pre_tokenizers
    except ImportError:
        sys.exit("tokenizers is required: pip install -e '.[reference]'")
    cases = []
    for name, kind, pattern in PATTERNS:
        for behavior in BEHAVIORS:
            for invert in (False, True):
                split = pre_tokenizers.Split(Regex(pattern) if kind == "Regex" else pattern, behavior, invert=invert)
                cases.append({
                    "pattern_name": name,
                    "kind": kind,
                    "pattern": pattern,
                    "behavior": behavior,
                    "invert": invert,
                    "pieces": [[p for p, _ in split.pre_tokenize_str(t)] for t in TEXTS],
                })
    doc = {
        "banner": {
            "generator": "tools/make_split_fixtures.py",
            "reference": f"tokenizers {tokenizers.__version__}, pre_tokenizers.Split(...).pre_tokenize_str",
            "do_not_edit": "rerun the generator",
        },
        "texts": TEXTS,
        "cases": cases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, ensure_ascii=True, indent=0) + "\n", encoding="ascii")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
