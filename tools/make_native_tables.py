"""Generate ``rmlprep/_native/unicode_classes.h`` (the code-point class table of the native
splitter) and ``rmlprep/_native/normalize_qc.h`` (the normalization quick-check table).

Usage::

    python tools/make_native_tables.py --out rmlprep/_native/unicode_classes.h \
        --norm-out rmlprep/_native/normalize_qc.h

Input: ``rmlprep/_unicode_tables.py`` (the generated, pinned Unicode tables the pure-Python
pre-splitter uses), so both paths classify every code point alike. Each code point gets a byte of
flags: LETTER (``\\p{L}``), NUMBER (``\\p{N}``), SPACE (White_Space, ``\\s``), and the two letter
sets of the o200k pattern, UPPER (``[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]``) and LOWER
(``[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]``). LETTER, NUMBER and SPACE are disjoint in every Unicode
version (checked here), so ``flags & 7`` is one of OTHER (0: punctuation, symbols, marks,
controls that are not White_Space, unassigned, lone surrogates), LETTER (1), NUMBER (2) or
SPACE (4).

Layout: a two-stage table. ``RML_CLASS_STAGE1[cp >> 8]`` picks a 256-entry block of
``RML_CLASS_STAGE2`` (identical blocks shared). Also written: the ``(?i)`` equivalents of the
contraction letters (``s`` -> S, s, U+017F ...) used by the Llama 3 / Qwen2 matchers.

The quick-check table (inputs: ``rmlprep/_unicode_norm.py`` and the unassigned code points,
category Cn, of ``_unicode_tables.py``) gives each code point a byte: bits 0-5 the rank of its
Canonical_Combining_Class among the classes in use (0 for class 0; order kept, so comparing
ranks compares classes), bit 6 (``RML_NQC_NFC``) set when NFC_QC is No or Maybe, bit 7
(``RML_NQC_NFKC``) when NFKC_QC is. An unassigned code point has both bits set: a later Unicode
(a newer ``unicodedata``) may give it a decomposition or make it compose, so a text holding one
is never passed by the quick check. Same two-stage layout, 128-entry blocks.

Output is deterministic: the same input gives the same bytes. Each banner names this generator,
the Unicode version and the sha256 of the input files; ``tests/test_native.py`` reruns the
generator and compares (drift test).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INPUT = ROOT / "rmlprep" / "_unicode_tables.py"
OUTPUT = ROOT / "rmlprep" / "_native" / "unicode_classes.h"
NORM_INPUT = ROOT / "rmlprep" / "_unicode_norm.py"
NORM_OUTPUT = ROOT / "rmlprep" / "_native" / "normalize_qc.h"
NQC_NFC, NQC_NFKC, NQC_SHIFT = 0x40, 0x80, 7

OTHER, LETTER, NUMBER, SPACE, UPPER, LOWER = 0, 1, 2, 4, 8, 16
MAX_CP = 0x10FFFF
CONTRACTION_LETTERS = "strevmld"  # 's 't 're 've 'm 'll 'd


def _load_tables(path: Path):
    spec = importlib.util.spec_from_file_location("_rmlprep_unicode_tables", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _two_stage(table: bytes | bytearray, size: int) -> tuple[list[int], dict[bytes, int]]:
    """Split a per-code-point table into blocks of ``size``: (block index per block, the distinct
    blocks in order of first use)."""
    blocks: dict[bytes, int] = {}
    stage1 = [blocks.setdefault(bytes(table[b * size:(b + 1) * size]), len(blocks))
              for b in range((MAX_CP + 1) // size)]
    return stage1, blocks


def _c_two_stage(out: list[str], stage1_decl: str, stage1: list[int], per_row: int, sep: str,
                 stage2_name: str, blocks: dict[bytes, int], size: int) -> None:
    """Append the C arrays of a two-stage table: ``stage1_decl`` (``per_row`` values a row,
    joined by ``sep``), then ``stage2_name[blocks][size]``, 64 values a row."""
    out.append(f"{stage1_decl}[{len(stage1)}] = {{")
    for i in range(0, len(stage1), per_row):
        out.append("    " + sep.join(str(x) for x in stage1[i:i + per_row]) + ",")
    out.append("};")
    out.append("")
    out.append(f"static const uint8_t {stage2_name}[{len(blocks)}][{size}] = {{")
    for block in blocks:
        out.append("    {")
        for i in range(0, size, 64):
            out.append("        " + ",".join(str(x) for x in block[i:i + 64]) + ",")
        out.append("    },")
    out.append("};")


def build(path: Path = INPUT) -> str:
    """Return the header text for the tables in ``path``."""
    tables = _load_tables(path)
    classes = bytearray(MAX_CP + 1)  # OTHER everywhere
    for cls, ranges in ((LETTER, tables.CATEGORIES["L"]), (NUMBER, tables.CATEGORIES["N"]),
                        (SPACE, tables.WHITE_SPACE)):
        for lo, hi in ranges:
            for cp in range(lo, hi + 1):
                if classes[cp] != OTHER:
                    raise SystemExit(f"U+{cp:04X} is in two of L, N, White_Space; the class table needs them disjoint")
                classes[cp] = cls
    for flag, cats in ((UPPER, ("Lu", "Lt", "Lm", "Lo", "M")), (LOWER, ("Ll", "Lm", "Lo", "M"))):
        for cat in cats:
            for lo, hi in tables.CATEGORIES[cat]:
                for cp in range(lo, hi + 1):
                    classes[cp] |= flag
    stage1, blocks = _two_stage(classes, 256)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    out = [
        "/* Code-point classes for the native pre-splitter (generated; do not edit).",
        " *",
        " * Generated by tools/make_native_tables.py",
        f" * Input: rmlprep/_unicode_tables.py (sha256 {digest})",
        f" * Unicode version: {tables.UNICODE_VERSION}",
        " * Flags: 1 LETTER (\\p{L}), 2 NUMBER (\\p{N}), 4 SPACE (White_Space), 8 UPPER (Lu Lt Lm Lo M),",
        " * 16 LOWER (Ll Lm Lo M); flags & 7 is 0 OTHER, 1 LETTER, 2 NUMBER or 4 SPACE.",
        " * DO NOT EDIT: rerun the generator instead.",
        " */",
        "#ifndef RMLPREP_UNICODE_CLASSES_H",
        "#define RMLPREP_UNICODE_CLASSES_H",
        "#include <stdint.h>",
        "",
        f'#define RML_UNICODE_VERSION "{tables.UNICODE_VERSION}"',
        "#define RML_OTHER 0",
        "#define RML_LETTER 1",
        "#define RML_NUMBER 2",
        "#define RML_SPACE 4",
        "#define RML_UPPER 8",
        "#define RML_LOWER 16",
        "",
    ]
    _c_two_stage(out, "static const uint16_t RML_CLASS_STAGE1", stage1, 16, ", ", "RML_CLASS_STAGE2", blocks, 256)
    out.append("")
    out.append("/* (?i) equivalents of the contraction letters (simple case folding). */")
    for letter in CONTRACTION_LETTERS:
        cps = tables.CASE_FOLD_EQUIVALENTS[letter]
        cond = " || ".join(f"(c) == 0x{cp:04X}" for cp in cps)
        out.append(f"#define RML_FOLD_{letter.upper()}(c) ({cond})")
    out.append("")
    out.append("#endif")
    return "\n".join(out) + "\n"


def build_norm(path: Path = NORM_INPUT, tables_path: Path = INPUT) -> str:
    """Return the quick-check header text for the properties in ``path`` (and the unassigned
    code points of ``tables_path``)."""
    norm, tables = _load_tables(path), _load_tables(tables_path)
    if norm.UNICODE_VERSION != tables.UNICODE_VERSION:
        raise SystemExit(f"{path.name} is Unicode {norm.UNICODE_VERSION}, {tables_path.name} "
                         f"{tables.UNICODE_VERSION}; rerun tools/make_unicode_tables.py")
    classes = sorted({c for _, _, c in norm.COMBINING_CLASS})
    if len(classes) >= 64:
        raise SystemExit(f"{len(classes)} combining classes do not fit the 6-bit rank")
    rank = {c: k + 1 for k, c in enumerate(classes)}
    table = bytearray(MAX_CP + 1)
    for lo, hi, c in norm.COMBINING_CLASS:
        table[lo:hi + 1] = bytes([rank[c]]) * (hi - lo + 1)
    for ranges, bits in ((norm.NFC_QC_NO, NQC_NFC | NQC_NFKC), (norm.NFC_QC_MAYBE, NQC_NFC | NQC_NFKC),
                         (norm.NFKC_QC_NO, NQC_NFKC), (tables.CATEGORIES["Cn"], NQC_NFC | NQC_NFKC)):
        for lo, hi in ranges:
            for cp in range(lo, hi + 1):
                table[cp] |= bits
    # the first code point that is not (Yes, class 0): every code point below passes
    first_nfc = next(cp for cp in range(MAX_CP + 1) if table[cp] & ~NQC_NFKC & 0xFF)
    first_nfkc = next(cp for cp in range(MAX_CP + 1) if table[cp] & ~NQC_NFC & 0xFF)
    size = 1 << NQC_SHIFT
    stage1, blocks = _two_stage(table, size)
    if len(blocks) > 256:
        raise SystemExit(f"{len(blocks)} blocks do not fit the uint8 first stage")
    digests = ", ".join(f"{p.name} sha256 {hashlib.sha256(p.read_bytes()).hexdigest()}"
                        for p in (path, tables_path))
    out = [
        "/* Normalization quick-check table for the native NFC/NFKC check (generated; do not edit).",
        " *",
        " * Generated by tools/make_native_tables.py",
        " * Input: rmlprep/_unicode_norm.py, rmlprep/_unicode_tables.py (category Cn)",
        f" *   ({digests})",
        f" * Unicode version: {norm.UNICODE_VERSION}",
        " * Byte per code point: bits 0-5 the rank of its Canonical_Combining_Class (0 for class 0;",
        f" * the classes in order: {', '.join(map(str, classes))}),",
        " * 0x40 NFC_QC is No or Maybe, 0x80 NFKC_QC is No or Maybe; unassigned code points: both.",
        " * DO NOT EDIT: rerun the generator instead.",
        " */",
        "#ifndef RMLPREP_NORMALIZE_QC_H",
        "#define RMLPREP_NORMALIZE_QC_H",
        "#include <stdint.h>",
        "",
        f'#define RML_NQC_UNICODE_VERSION "{norm.UNICODE_VERSION}"',
        f"#define RML_NQC_NFC 0x{NQC_NFC:02X}",
        f"#define RML_NQC_NFKC 0x{NQC_NFKC:02X}",
        "#define RML_NQC_RANK 0x3F",
        f"#define RML_NQC_SHIFT {NQC_SHIFT}",
        "/* every code point below these is Yes with class 0 for the form */",
        f"#define RML_NQC_NFC_FIRST 0x{first_nfc:04X}",
        f"#define RML_NQC_NFKC_FIRST 0x{first_nfkc:04X}",
        "",
    ]
    _c_two_stage(out, "static const uint8_t RML_NQC_STAGE1", stage1, 32, ",", "RML_NQC_STAGE2", blocks, size)
    out.append("")
    out.append("#endif")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", type=Path, default=INPUT)
    ap.add_argument("--out", type=Path, default=OUTPUT)
    ap.add_argument("--norm-input", type=Path, default=NORM_INPUT)
    ap.add_argument("--norm-out", type=Path, default=NORM_OUTPUT)
    args = ap.parse_args(argv)
    for out, text in ((args.out, build(args.input)), (args.norm_out, build_norm(args.norm_input, args.input))):
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="ascii")
        print(f"wrote {out} ({len(text)} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
