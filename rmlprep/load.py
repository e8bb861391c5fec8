"""load_tokenizer: one entry point for every tokenizer file format rmlprep reads."""

from __future__ import annotations

__all__ = ["load_tokenizer"]


def load_tokenizer(path, **overrides):  # filled in below
    raise NotImplementedError
