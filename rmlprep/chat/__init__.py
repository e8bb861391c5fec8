"""Chat formats written directly (no Jinja at run time): check, detect, write, encode with a loss mask.

A chat format turns a conversation (OpenAI-style messages, :mod:`rmlprep.chat.messages`) into
the text a model was trained on, byte for byte what the model's own Jinja template renders
(BOS, default system prompts and date lines included), and tells apart what the model must
learn to write (the mask) from the prompt. Each family lives in its own module
(``fmt_chatml``, ``fmt_llama``, ``fmt_mistral``, ``fmt_gemma``, ``fmt_deepseek``,
``fmt_harmony``, ``fmt_other``); :mod:`rmlprep.chat.detect` proves which format reproduces a
template; :mod:`rmlprep.chat.template` renders a model's own template in jinja2's sandbox for
what no format covers (opt-in, slower).

Source: the real templates in ``../shared/chat-templates`` (each writer's ``Source:``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .detect import ChatTemplateError, detect_chat_format, prove_format, template_sha256
from .encode import ChatEncoding, encode_chat, stop_ids
from .messages import Conversation, Message, ToolCall, parse_conversation, schema_error
from .registry import CHAT_FORMATS, check_conversation, get_format, write
from .segments import KINDS, Segment

__all__ = [
    "CHAT_FORMATS",
    "KINDS",
    "ChatEncoding",
    "ChatTemplateError",
    "Conversation",
    "Message",
    "Segment",
    "ToolCall",
    "check_conversation",
    "detect_chat_format",
    "encode_chat",
    "format_chat",
    "format_chat_segments",
    "parse_conversation",
    "prove_format",
    "schema_error",
    "stop_ids",
    "template_sha256",
    "turn_terminator",
    "validate_messages",
]


def format_chat_segments(messages: Any, fmt: str, *, add_generation_prompt: bool = False, tools: Any = None,
                         options: Mapping[str, Any] | None = None) -> list[Segment]:
    """Write a conversation as :class:`Segment` pieces whose texts join to :func:`format_chat`.

    Raises:
        ChatFormatError: unknown format or option, or a conversation the format refuses.
    """
    return write(messages, fmt, add_generation_prompt=add_generation_prompt, tools=tools, options=options).segs


def format_chat(messages: Any, fmt: str, *, add_generation_prompt: bool = False, tools: Any = None,
                options: Mapping[str, Any] | None = None) -> str:
    """Write a conversation in ``fmt`` exactly as the model's real template renders it.

    Args:
        messages: OpenAI-style messages (see :mod:`rmlprep.chat.messages`).
        fmt: a name from :data:`CHAT_FORMATS` (see :func:`detect_chat_format`).
        add_generation_prompt: append the header that opens an assistant turn, where the format
            has one (the ``[INST]`` formats have none).
        tools: the conversation's tool definitions (a list, or a JSON string holding one).
        options: the format's options: template variables (``enable_thinking``,
            ``date_string``, ``reasoning_effort``...) and ``today`` (the date a template reads
            from the clock, default 2024-07-26).
    Raises:
        ChatFormatError: unknown format or option, or a conversation the format refuses.
    """
    return write(messages, fmt, add_generation_prompt=add_generation_prompt, tools=tools, options=options).text()


def validate_messages(messages: Any, fmt: str, *, tools: Any = None, options: Mapping[str, Any] | None = None) -> None:
    """Check that ``fmt`` can write the conversation (schema, fields, order of roles).

    Raises:
        ChatFormatError: the first broken rule, naming the message index and the rule.
    """
    write(messages, fmt, tools=tools, options=options)


def turn_terminator(fmt: str) -> str:
    """The text that ends an assistant turn in ``fmt`` (``"<|im_end|>"``, ``" </s>"``, ...).

    Raises:
        ChatFormatError: unknown format name.
    """
    return get_format(fmt).terminator
