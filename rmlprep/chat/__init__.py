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

from .convert import join_parts_for_call
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
                         options: Mapping[str, Any] | None = None, join_text_parts: str | None = None) -> list[Segment]:
    """Write a conversation as :class:`Segment` pieces whose texts join to :func:`format_chat`.

    Args:
        messages, fmt, add_generation_prompt, tools, options, join_text_parts: as :func:`format_chat`.
    Returns:
        The segments in order (text, kind, markup; :mod:`rmlprep.chat.segments`); ``kind`` tells
        the loss mask's trainable text (``assistant``, ``reasoning``) from the prompt.
    Raises:
        ChatFormatError: unknown format or option, or a conversation the format refuses (two or
            more text parts in one content, to a format whose template takes a string, unless
            ``join_text_parts`` is given).
        ConfigError: ``join_text_parts`` not a string.

    Source: the model's real template (each writer's ``Source:``).
    """
    messages = join_parts_for_call(messages, fmt, join_text_parts, "format_chat_segments")
    return write(messages, fmt, add_generation_prompt=add_generation_prompt, tools=tools, options=options).segs


def format_chat(messages: Any, fmt: str, *, add_generation_prompt: bool = False, tools: Any = None,
                options: Mapping[str, Any] | None = None, join_text_parts: str | None = None) -> str:
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
        join_text_parts: the join of a content given as two or more text parts to a format whose
            template takes only a string (``"\\n"``: vLLM's; ``""``: as the templates that iterate
            parts write them). None (default): refused, as the sft run and
            :func:`rmlprep.tokenize_chat` refuse such a row, since that template has no join
            (:func:`rmlprep.chat.convert.join_text_parts`). The formats whose template iterates
            parts (``gemma3``, ``gemma4``, ``kimi-k2``, ``mistral-small-3.2``) write them as it
            does, whatever this says.
    Returns:
        The text the template renders (str), BOS included where the template writes it.
    Raises:
        ChatFormatError: unknown format or option, or a conversation the format refuses (two or
            more text parts in one content, as above, named by message index and count of parts).
        ConfigError: ``join_text_parts`` not a string.

    Source: the model's real template in ``../shared/chat-templates`` (each writer's ``Source:``).
    """
    messages = join_parts_for_call(messages, fmt, join_text_parts, "format_chat")
    return write(messages, fmt, add_generation_prompt=add_generation_prompt, tools=tools, options=options).text()


def validate_messages(messages: Any, fmt: str, *, tools: Any = None, options: Mapping[str, Any] | None = None,
                      join_text_parts: str | None = None) -> None:
    """Check that ``fmt`` can write the conversation (schema, fields, order of roles), as
    :func:`format_chat` with the same arguments would.

    Raises:
        ChatFormatError: the first broken rule, naming the message index and the rule.
        ConfigError: ``join_text_parts`` not a string.
    """
    write(join_parts_for_call(messages, fmt, join_text_parts, "validate_messages"), fmt, tools=tools, options=options)


def turn_terminator(fmt: str) -> str:
    """The text that ends an assistant turn in ``fmt`` (``"<|im_end|>"``, ``" </s>"``, ...).

    Raises:
        ChatFormatError: unknown format name.
    """
    return get_format(fmt).terminator
