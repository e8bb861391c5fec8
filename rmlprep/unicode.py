"""Unicode helpers that need no ``unicodedata`` at run time.

- The GPT-2 printable byte alphabet (:func:`bytes_to_unicode`, :func:`unicode_to_bytes`).
- Code-point classes from the generated ``_unicode_tables`` (pinned Unicode version).
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["bytes_to_unicode", "unicode_to_bytes"]


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
