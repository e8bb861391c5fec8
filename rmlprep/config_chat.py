"""The chat part of a run config: the ``[chat]`` section (the sft pipeline's chat format, its
options and columns) and the ``parity.chat*`` keys (the check that the format reproduces the
tokenizer's own chat template), each refused outside the sft pipeline (:func:`check_chat`,
:func:`check_chat_parity`)."""

from __future__ import annotations

from typing import Any

from .chat import detect_chat_format
from .chat.registry import (config_format_error, get_format, join_parts_refusal, resolve_options,
                            train_turns_refusal, untrained_reasoning_refusal)
from .errors import ChatFormatError, ConfigError

__all__ = ["check_chat", "check_chat_parity"]

#: Pretrain-only switches that would add or parse special tokens: refused when set true in sft.
_NOT_SFT = (("tokenizer", "add_special_tokens"), ("tokenizer", "parse_special"), ("pack", "bos"), ("pack", "eos"))


def check_chat_parity(par: dict[str, Any], raw: dict[str, Any], pipeline: str, w: str) -> None:
    """Validate ``parity.chat``, ``parity.chat_renders`` (already resolved) and
    ``parity.chat_live_sample``; with ``parity.chat = false`` set ``chat_live_sample`` to 0
    (``raw``: the config as given; ``w``: the config file's prefix for messages).

    Raises:
        ConfigError: naming ``parity.KEY``: ``chat`` other than "auto", true or false; a negative
            live sample; a chat key given to a pipeline other than sft; ``chat_renders`` or
            ``chat_live_sample`` set while ``chat = false`` turns the check off.
    """
    if isinstance(par["chat"], str) and par["chat"] != "auto":
        raise ConfigError(f"{w}parity.chat: must be \"auto\", true or false, got {par['chat']!r}")
    if par["chat_live_sample"] < 0:
        raise ConfigError(f"{w}parity.chat_live_sample: must be >= 0, got {par['chat_live_sample']}")
    given_par = raw.get("parity", {})
    if pipeline != "sft":
        for k in ("chat", "chat_renders", "chat_live_sample"):
            if k in given_par:
                raise ConfigError(f"{w}parity.{k}: only the sft pipeline formats chats (pipeline = {pipeline!r})")
    elif par["chat"] is False:
        for k in ("chat_renders", "chat_live_sample"):
            if given_par.get(k):
                raise ConfigError(f"{w}parity.{k}: set, but parity.chat = false turns the chat check off; "
                                  "remove one of them")
        par["chat_live_sample"] = 0  # the default's 1000 asks for nothing here (and reads back as set)


def check_chat(chat: dict[str, Any], raw: dict[str, Any], pipeline: str, w: str) -> None:
    """Validate ``[chat]`` and settle ``chat.format`` to its registry name (an alias or a
    tokenizer's name is looked up: :func:`rmlprep.chat.detect_chat_format`; "auto" and
    "template" stay as they are).

    Raises:
        ConfigError: naming ``chat.KEY`` (or the pretrain-only key): sft without a format; an
            unknown format or an option it does not take; ``tokenizer.add_special_tokens``,
            ``tokenizer.parse_special``, ``pack.bos`` or ``pack.eos`` set true in sft (the chat
            format writes BOS/EOS); a tools or system column of ``true`` or ""; an unknown
            ``no_assistant``; ``train_on_reasoning = false`` or ``train_turns`` the format cannot
            honour; a ``join_text_parts`` with ``"template"``; a ``[chat]`` section for another pipeline.
    """
    if pipeline != "sft":
        if "chat" in raw:
            raise ConfigError(f"{w}chat: only the sft pipeline uses a [chat] section (pipeline = {pipeline!r})")
        return
    if chat["format"] is None:
        raise ConfigError(f"{w}chat.format: missing; the sft pipeline needs a chat format, e.g. format = \"chatml\"")
    for sec, k in _NOT_SFT:  # BOS/EOS come from the chat template: a key sft ignores is refused, not dropped
        if raw.get(sec, {}).get(k):
            raise ConfigError(f"{w}{sec}.{k} = true: the sft pipeline writes BOS, EOS and control tokens exactly "
                              "where the chat format's template writes them (one BOS at most), and never "
                              f"parses them in message text; remove {sec}.{k}")
    if chat["format"] not in ("auto", "template"):
        try:
            chat["format"] = detect_chat_format(chat["format"])
        except ChatFormatError as e:
            raise ConfigError(f"{w}chat.format: {config_format_error(e, chat['format'])}") from None
        try:
            resolve_options(get_format(chat["format"]), chat["options"])
        except ChatFormatError as e:
            raise ConfigError(f"{w}chat.options: {e}") from None
    tc = chat["tools_column"]
    if tc is True or tc == "":
        raise ConfigError(f"{w}chat.tools_column: name the column of tool definitions, e.g. tools_column = "
                          f"\"tools\", or set false to read none; got {tc!r}")
    sc = chat["system_column"]
    if sc is True or sc == "":
        raise ConfigError(f"{w}chat.system_column: name the column of system prompts, e.g. system_column = "
                          f"\"system\", or set false to read none; got {sc!r}")
    if chat["no_assistant"] not in ("reject", "keep"):
        raise ConfigError(f"{w}chat.no_assistant: must be \"reject\" or \"keep\", got {chat['no_assistant']!r}")
    if (chat["format"] != "auto" and not chat["train_on_reasoning"]  # "template" too: no reasoning told apart
            and (why := untrained_reasoning_refusal(chat["format"]))):
        raise ConfigError(f"{w}chat.train_on_reasoning = false: {why}")
    if why := train_turns_refusal(chat["format"], chat["train_turns"]):
        raise ConfigError(f"{w}chat.train_turns: {why}")
    if why := join_parts_refusal(chat["format"], chat["join_text_parts"]):
        raise ConfigError(f"{w}chat.join_text_parts: {why}")
