"""rmlprep: exact tokenization, chat formatting and packing of corpora into Parquet shards."""

from __future__ import annotations

from ._version import __version__  # noqa: F401

from .errors import (  # noqa: F401
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
from .spec import TokenizerSpec, TokenType  # noqa: F401
from .tokenizer import Tokenizer  # noqa: F401
from .load import load_tokenizer  # noqa: F401
from .chat import (  # noqa: F401
    CHAT_FORMATS,
    ChatEncoding,
    ChatTemplateError,
    detect_chat_format,
    encode_chat,
    format_chat,
    format_chat_segments,
    stop_ids,
)
from .arrow import count_errors, tokenize_chat, tokenize_text  # noqa: F401
from .packing import PackResult, PackStats, pack_bfd, pack_concat, unpack  # noqa: F401

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
