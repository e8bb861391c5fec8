"""rmlprep: exact tokenization, chat formatting and packing of corpora into Parquet shards.

The public names below are imported on first use (PEP 562 module ``__getattr__``): ``import
rmlprep`` costs the error classes only, and ``from rmlprep import load_tokenizer`` loads the
loaders and the tokenizer but not numpy's users elsewhere, pyarrow, the chat formats or packing
(about 0.25 s of a cold process that only tokenizes). Every name in ``__all__`` stays importable
as ``from rmlprep import NAME`` and is the same object as in its module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import (
    ChatFormatError,
    ConfigError,
    InputError,
    LoaderError,
    OutputError,
    PackingError,
    ParityError,
    RmlprepError,
    RowError,
    SpecError,
    TokenIdError,
    TokenizeError,
    UnsupportedTokenizer,
)

if TYPE_CHECKING:  # the names _LAZY resolves (also what the import-graph test reads)
    from .arrow import count_errors, tokenize_chat, tokenize_text
    from .chat import (
        CHAT_FORMATS,
        ChatEncoding,
        ChatTemplateError,
        detect_chat_format,
        encode_chat,
        format_chat,
        format_chat_segments,
        stop_ids,
    )
    from .load import load_tokenizer
    from .packing import PackResult, PackStats, pack_bfd, pack_concat, unpack
    from .spec import TokenizerSpec, TokenType
    from .tokenizer import Tokenizer

#: public name -> the submodule that defines it, imported on first access
_LAZY = {
    "TokenizerSpec": "spec", "TokenType": "spec",
    "Tokenizer": "tokenizer",
    "load_tokenizer": "load",
    **dict.fromkeys(("CHAT_FORMATS", "ChatEncoding", "ChatTemplateError", "detect_chat_format", "encode_chat",
                     "format_chat", "format_chat_segments", "stop_ids"), "chat"),
    **dict.fromkeys(("count_errors", "tokenize_chat", "tokenize_text"), "arrow"),
    **dict.fromkeys(("PackResult", "PackStats", "pack_bfd", "pack_concat", "unpack"), "packing"),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rmlprep' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "__version__",
    "TokenizerSpec",
    "TokenType",
    "Tokenizer",
    "load_tokenizer",
    "CHAT_FORMATS",
    "ChatEncoding",
    "ChatTemplateError",
    "detect_chat_format",
    "encode_chat",
    "format_chat",
    "format_chat_segments",
    "stop_ids",
    "tokenize_text",
    "tokenize_chat",
    "count_errors",
    "PackResult",
    "PackStats",
    "pack_bfd",
    "pack_concat",
    "unpack",
    "RmlprepError",
    "SpecError",
    "LoaderError",
    "UnsupportedTokenizer",
    "TokenizeError",
    "TokenIdError",
    "ChatFormatError",
    "PackingError",
    "RowError",
    "ConfigError",
    "InputError",
    "ParityError",
    "OutputError",
]
