"""Finding the compiled hot path (``rmlprep._fastbpe``) and asking what it was built with: whether
it imports, whether its Unicode tables are rmlprep's (:func:`native_available`), which pre-split
patterns it has a matcher for (:func:`native_pattern_names`) and its NFC / NFKC quick checks
(:func:`normalization_suspects`). A module built with other tables is not used. Encoding through
it is :mod:`rmlprep.native`'s, which re-exports these names.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable

from .unicode import unicode_version

__all__ = ["native_available", "native_pattern_names", "normalization_suspects"]

_BUILD_HINT = "run `pip install -e .` in the rmlprep checkout (needs a C compiler) to build it"
_warned = False
_module = None
_module_error: str | None = None


def _load():
    """The extension module, or None (then warn once, naming how to build it)."""
    global _module, _module_error, _warned
    if _module is not None:
        return _module
    if _module_error is None:
        try:
            from . import _fastbpe
        except ImportError as e:
            _module_error = f"rmlprep._fastbpe is not built ({e})"
        else:
            if _fastbpe.UNICODE_VERSION != unicode_version():
                _module_error = (
                    f"rmlprep._fastbpe was built with Unicode {_fastbpe.UNICODE_VERSION} tables but "
                    f"rmlprep uses {unicode_version()}; rerun tools/make_native_tables.py and rebuild"
                )
            else:
                _module = _fastbpe
                return _module
    if not _warned:
        _warned = True
        warnings.warn(
            f"{_module_error}: rmlprep encodes with its pure-Python path, several times slower; "
            f"{_BUILD_HINT}",
            RuntimeWarning,
            stacklevel=3,
        )
    return None


def _load_quiet():
    """The extension module if it is built with rmlprep's Unicode tables, else None (no warning)."""
    try:
        from . import _fastbpe
    except ImportError:
        return None
    return _fastbpe if _fastbpe.UNICODE_VERSION == unicode_version() else None


def normalization_suspects() -> dict[str, Callable[[str], list[int] | None]] | None:
    """``{"NFC": nfc_suspects, "NFKC": nfkc_suspects}`` for :func:`rmlprep.segment.make_normalizer`:
    each scans a str's code units against ``rmlprep/_native/normalize_qc.h`` (No / Maybe code
    points, combining classes; ``tools/make_native_tables.py``) and returns None (in the form)
    or the spans that may change. None when the extension is not built, its table is of another
    Unicode version than rmlprep's, or ``RMLPREP_PURE_PYTHON=1`` (unicodedata on every text)."""
    if os.environ.get("RMLPREP_PURE_PYTHON", "") not in ("", "0"):
        return None
    mod = _load_quiet()
    if mod is None or getattr(mod, "NORMALIZE_UNICODE_VERSION", None) != unicode_version():
        return None
    return {"NFC": mod.nfc_suspects, "NFKC": mod.nfkc_suspects}


def native_available() -> bool:
    """True when the compiled extension is importable (without warning when it is not)."""
    return _load_quiet() is not None


_PATTERN_CODES = {
    "gpt2": "PAT_GPT2",
    "llama3": "PAT_LLAMA3",
    "qwen2": "PAT_QWEN2",
    "digits": "PAT_DIGITS",
    "digits_individual": "PAT_DIGITS_INDIVIDUAL",
    "cl100k_base": "PAT_CL100K",
    "o200k_base": "PAT_O200K",
}


def native_pattern_names() -> frozenset[str]:
    """Names of the known pre-split patterns (:data:`rmlprep.pretokenize.KNOWN_PATTERNS`) that the
    built extension has a matcher for (empty when it is not built). A spec using any other
    pattern encodes on the pure-Python path."""
    mod = _load_quiet()
    if mod is None:
        return frozenset()
    return frozenset(n for n, c in _PATTERN_CODES.items() if hasattr(mod, c))
