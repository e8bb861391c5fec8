"""The columns a conversation set carries beside its messages, and how a column that would go
unread is refused: the same fields and the same words for the sft run
(:mod:`rmlprep.pipeline.tools_column`, its ``chat.*`` keys) and for
:func:`rmlprep.tokenize_chat` (its keyword arguments), each naming its own settings.

* tool definitions (:data:`TOOLS_FIELDS`: ``tools``, the name TRL reads by itself; ``functions``,
  OpenAI's older name): unread, every row's tools are left out of its prompt;
* a system prompt (:data:`~rmlprep.chat.messages.SYSTEM_FIELDS`): unread, the format's default
  system prompt stands in for it;
* media (:data:`MEDIA_FIELDS`: the LLaVA / TRL vision layout, whose text holds ``<image>``
  placeholders): rmlprep writes text only, so the set would be trained as text with the
  placeholders as words.

Worked example (:func:`column_refusal`)::

    column_refusal("images", "tokenize_chat: the batch has a column", config=False)
    -> "tokenize_chat: the batch has a column 'images' (media beside the messages, which a vision
        trainer passes to its processor): every row would be trained as text, an <image>
        placeholder as words; rmlprep writes text only: drop the column if the placeholders are
        meant as text, or pass ignore_media=True to leave it out on purpose"

with ``config=True`` the last words are ``set chat.ignore_media = true``.
"""

from __future__ import annotations

import json

from .messages import SYSTEM_FIELDS

__all__ = ["TOOLS_FIELDS", "SYSTEM_FIELDS", "MEDIA_FIELDS", "ways_out", "column_refusal"]

#: Columns that hold a conversation's tool definitions by the field's convention.
TOOLS_FIELDS = ("tools", "functions")
#: Columns that hold a conversation's images, audio or video by the field's convention.
MEDIA_FIELDS = ("images", "image", "audio", "video")

_WHAT = {
    "tools": "the conversations' tool definitions, which TRL passes to apply_chat_template(tools=...)",
    "system": "each conversation's system prompt",
    "media": "media beside the messages, which a vision trainer passes to its processor",
}
_LOSS = {
    "tools": "every row's tools would be left out of its prompt",
    "system": "it would be left out of every prompt, and the format's default system prompt written in its place",
    "media": "every row would be trained as text, an <image> placeholder as words",
}


def _kind(name: str) -> str:
    return "system" if name in SYSTEM_FIELDS else "media" if name in MEDIA_FIELDS else "tools"


def _setting(key: str, value, config: bool) -> str:
    """A setting as the caller spells it: ``chat.key = value`` (TOML) or ``key=value`` (Python)."""
    return f"chat.{key} = {json.dumps(value)}" if config else f"{key}={value!r}"


def ways_out(name: str, *, config: bool) -> str:
    """The two ways out for an unread column ``name`` (one of :data:`TOOLS_FIELDS`,
    :data:`SYSTEM_FIELDS`, :data:`MEDIA_FIELDS`): read it, or leave it out on purpose, spelt as
    the sft run's ``[chat]`` keys (``config``) or as :func:`rmlprep.tokenize_chat`'s keywords
    (where leaving tools out is ``tools_column=None``; in the config it is ``false``)."""
    verb = "set" if config else "pass"
    kind = _kind(name)
    if kind == "media":
        return (f"rmlprep writes text only: drop the column if the placeholders are meant as text, or {verb} "
                f"{_setting('ignore_media', True, config)} to leave it out on purpose")
    if kind == "system":
        return (f"{verb} {_setting('system_column', name, config)} to write it as each conversation's system "
                f"message, or {_setting('system_column', False, config)} to leave it out on purpose")
    return (f"{verb} {_setting('tools_column', name, config)} to write them as the format writes tools, or "
            f"{_setting('tools_column', False if config else None, config)} to leave them out on purpose")


def column_refusal(name: str, lead: str, *, config: bool, after: str = "") -> str:
    """Why a column ``name`` that would go unread is refused: ``{lead} {name!r} ({what}){after}:
    {what is lost}; {ways_out}`` (worked example in the module docstring)."""
    kind = _kind(name)
    return f"{lead} {name!r} ({_WHAT[kind]}){after}: {_LOSS[kind]}; {ways_out(name, config=config)}"
