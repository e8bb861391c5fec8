"""Bridge to the compiled hot path (placeholder until the extension lands: returns None)."""

from __future__ import annotations


def make_native(tokenizer):
    """Return a native encoder for ``tokenizer`` or None (pure-Python path)."""
    return None
