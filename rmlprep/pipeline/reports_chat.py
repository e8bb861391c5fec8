"""The summary table's lines for what the sft chat stage counted (:data:`.chat_stages.CHAT_COUNTS`):
a line for each count that is not 0, and a "not known" line where a kept unit's marker predates
the count (:func:`.late_keys.late_counts`); then how many conversations the units' live chat
check compared (``parity.chat.live_units``). Used by :func:`.reports.summary_table`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["chat_count_lines"]


def _not_known(label: str, what: str) -> tuple[str, str]:
    """The summary line of a count that a kept done marker predates (:func:`.late_keys.late_counts`:
    its total is null)."""
    return (label, f"{what}: not known (units written before rmlprep counted them were kept on resume; "
                   "--overwrite writes them again and counts)")


#: chat.format -> (why its answers_without_think are trained so, what to do): the summary's "no think" line;
#: "{last}" is _LAST_ONLY unless chat.train_turns = "last" already trains only those answers
_NO_THINK = {
    "qwen3": ("Qwen3's template writes one only after the last user turn, for the last answer and for turns "
              "holding reasoning",
              "with reasoning data, split multi-turn conversations into one per answer{last}; without, "
              "chat.options.enable_thinking = false trains every answer after the prompt's empty think block"),
    "gpt-oss": ("gpt-oss's template writes the analysis channel only in the last answer",
                "with reasoning data, split multi-turn conversations into one per answer{last}"),
    "deepseek-r1": ("DeepSeek-R1's template drops the reasoning of every answer, the last too, and its "
                    "generation prompt opens <think>",
                    "to train reasoning, use a format whose template writes it (qwen3)"),
    "deepseek-v3.1": ("DeepSeek V3.1's template drops the reasoning of every answer: with enable_thinking each is "
                      "trained as an empty <think></think>",
                      "to train reasoning, use a format whose template writes it (qwen3); without reasoning data, "
                      "leave enable_thinking off (its non-thinking mode)"),
}
_LAST_ONLY = ", or chat.train_turns = \"last\" trains only the answers after the last user message"
#: what the "no think" line says first under chat.train_turns = "last" (the history answers are untrained)
_UNDER_LAST = ("under chat.train_turns = \"last\" these are turns after the last user message (tool calls before "
               "the final answer, answers of a format that drops all reasoning): give such calls reasoning_content; ")
_NO_THINK["deepseek-r1-llamacpp"] = _NO_THINK["deepseek-r1"]


def _s(n: int, many: str, one: str) -> str:
    """``many`` (n != 1) or ``one``: the plural of a count's line."""
    return many if n != 1 else one


def _no_think(n: int, chat: dict[str, Any]) -> str:
    why, advice = _NO_THINK.get(chat["format"], _NO_THINK["qwen3"])
    last = chat.get("train_turns") == "last"
    advice = (_UNDER_LAST if last else "") + advice.format(last="" if last else _LAST_ONLY)
    return (f"{n:,} answer{_s(n, 's', '')} trained without a think block ({why}): they teach the model to answer "
            f"without thinking; {advice}")


def _no_answer(n: int, chat: dict[str, Any]) -> str | None:
    if chat.get("no_assistant") != "keep":  # under "reject" they are rejects, in their own line
        return None
    after = ", or none after the last user message," if chat.get("train_turns") == "last" else ""
    return (f"{n:,} conversation{_s(n, 's', '')} with no assistant turn{after} kept in the rows with every label "
            "-100: they train nothing (chat.no_assistant = \"keep\")")


#: In the summary's order, each count of the chat stage: (count, label, the end of its "not known"
#: line or None for a count every marker has, its line's text from (n, the config's [chat]) or None
#: for no line). chat.format = "template" encodes special-token text in a message as the control
#: token, a native format as text: the last two.
_COUNTS: tuple[tuple[str, str, str | None, Callable[[int, dict[str, Any]], str | None]], ...] = (
    ("json_tool_calls_as_text", "tool calls", None, lambda n, c: (
        f"{n:,} conversation{_s(n, 's write', ' writes')} tool calls as JSON text in the assistant's content "
        "(LLaMA-Factory's shape), trained as that text; chat.json_tools = true writes them as the format's "
        "tool calls")),
    ("json_tool_parameters_as_text", "tool schemas", None, lambda n, c: (
        f"{n:,} conversation{_s(n, 's have', ' has')} tool definitions holding parameters as a string of JSON, "
        "written as one escaped string (as the template would write it), not as the schema object; "
        "chat.json_tools = true parses them")),
    ("reasoning_untrained", "reasoning",
     "conversations whose reasoning was left out of the loss mask (chat.train_on_reasoning = false)", lambda n, c: (
         f"{n:,} {_s(n, 'conversations', 'conversation')}'{_s(n, '', 's')} reasoning left out of the loss mask "
         "(chat.train_on_reasoning = false)")),
    ("answers_without_think", "no think", "answers trained without a think block", _no_think),
    ("history_untrained", "history", None, lambda n, c: (
        f"{n:,} assistant turn{_s(n, 's', '')} before the last user message left out of the loss mask, kept as "
        "context (chat.train_turns = \"last\")")),
    ("no_assistant", "no answer", None, _no_answer),
    ("tool_calls_without_tools", "tool calls", None, lambda n, c: (
        f"{n:,} conversation{_s(n, 's call', ' calls')} tools but {_s(n, 'carry', 'carries')} no tool definitions "
        "(trained to call tools its prompt never shows)"
        + ("; if the rows hold them in a column, name it in chat.tools_column" if c.get("tools_column") is None
           else ""))),
    ("tool_calls_undefined", "tool calls", "conversations calling a tool their definitions do not hold", lambda n, c: (
        f"{n:,} conversation{_s(n, 's call', ' calls')} a tool {_s(n, 'their', 'its')} tool definitions do not hold "
        "(trained to call a tool the prompt never shows)")),
    ("reasoning_key_unread", "reasoning", "conversations giving reasoning under a name the template does not read",
     lambda n, c: (
         f"{n:,} conversation{_s(n, 's give', ' gives')} an answer's reasoning under a name the format's template "
         f"does not read (it reads {' or '.join(repr(k) for k in _reasoning_keys(c['format']))}): written and "
         "trained, where transformers' apply_chat_template on the rows as they are leaves it out; rename the field "
         "to match it")),
    ("tool_arguments_from_string", "tool calls", "conversations giving tool-call arguments as a string of JSON",
     lambda n, c: (
         f"{n:,} conversation{_s(n, 's give', ' gives')} tool-call arguments as a string of JSON, parsed and written "
         "as the format writes a mapping (transformers' apply_chat_template writes such a string as it is or "
         "encodes it again: its render of these rows can differ)")),
    ("text_parts_joined", "text parts", "conversations giving a content as several text parts", lambda n, c: (
        f"{n:,} conversation{_s(n, 's give', ' gives')} a content as two or more text parts, joined with "
        f"{c.get('join_text_parts')!r} (chat.join_text_parts: the format's template takes only a string)")),
    ("special_text_parsed", "special text",
     "conversations whose text holds special-token text, encoded as the control token (chat.format = \"template\")",
     lambda n, c: (
         f"{n:,} conversation{_s(n, 's hold', ' holds')} special-token text (e.g. '<|im_end|>' typed in a message), "
         "encoded as the control token as chat.format = \"template\" and transformers' apply_chat_template encode it "
         "(a native format encodes it as text)")),
    ("special_text_as_text", "special text", "conversations whose text holds special-token text, written as text",
     lambda n, c: (
         f"{n:,} conversation{_s(n, 's hold', ' holds')} special-token text (e.g. '<|im_end|>' typed in a message), "
         "written as text (text is data), where transformers' apply_chat_template(tokenize=True) gives the control "
         "token's id: their ids differ there (the chat check compares text); chat.format = \"template\" encodes it "
         "as transformers does")),
)


def chat_count_lines(manifest: dict[str, Any], t: dict[str, Any]) -> list[tuple[str, str]]:
    """``(label, text)`` lines for the chat counts of ``t`` (the manifest's totals): for each of
    :data:`_COUNTS`, its "not known" line where a kept marker predates it (its total null), else
    its line where it is not 0; then the live chat check's."""
    lines: list[tuple[str, str]] = []
    chat = manifest["config"].get("chat", {})
    for key, label, unknown, text in _COUNTS:
        if unknown is not None and key in t and t[key] is None:
            lines.append(_not_known(label, unknown))
        elif (n := t.get(key)) and (line := text(n, chat)) is not None:
            lines.append((label, line))
    if (line := _live_line(manifest)) is not None:
        lines.append(("chat check", line))
    return lines


def _reasoning_keys(fmt: str) -> tuple[str, ...]:
    from ..chat.registry import FORMATS

    return getattr(FORMATS.get(fmt), "reasoning_keys", ())


def _live_line(manifest: dict[str, Any]) -> str | None:
    """How many of the conversations the units processed wrote were compared with the tokenizer's
    chat template (:mod:`rmlprep.chat_unit_sample`), or why none; None for a run that has nothing
    to say (not sft, ``chat.format = "template"``, no unit processed, a marker of before the count)."""
    config = manifest["config"]
    if config.get("pipeline") != "sft" or config["chat"]["format"] == "template" or not manifest["units_processed"]:
        return None
    chat = manifest.get("parity", {}).get("chat")
    none = "no conversation compared with the tokenizer's chat template"
    if not isinstance(chat, dict):
        return f"{none} (parity.chat = false)"
    if isinstance(live := chat.get("live_units"), dict) and "written" in live:
        if not live["written"]:  # every row rejected: "0 of the 0 ... all match" said a check that had nothing
            return f"{none}: the {live['units']:,} unit{'s' if live['units'] != 1 else ''} processed wrote none"
        return (f"{live['compared']:,} of the {live['written']:,} conversations written by the {live['units']:,} "
                f"unit{'s' if live['units'] != 1 else ''} processed compared with the tokenizer's chat template "
                "(jinja2): all match")
    if chat.get("live_skipped"):
        return f"{none}: {chat['live_skipped']}"
    if not config["parity"].get("chat_live_sample"):
        return f"{none} (parity.chat_live_sample = 0)"
    return None
