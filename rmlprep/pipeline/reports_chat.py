"""The summary table's lines for what the sft chat stage counted (:data:`.chat_stages.CHAT_COUNTS`):
a line for each count that is not 0, and a "not known" line where a kept unit's marker predates
the count (:func:`.late_keys.late_counts`); then how many conversations the units' live chat
check compared (``parity.chat.live_units``). Used by :func:`.reports.summary_table`."""

from __future__ import annotations

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
#: (count, its "not known" line's end, what its line says was done): chat.format = "template" encodes
#: special-token text in a message as the control token, a native format as text
_SPECIAL_TEXT = (
    ("special_text_parsed", "encoded as the control token (chat.format = \"template\")",
     "encoded as the control token as chat.format = \"template\" and transformers' apply_chat_template encode it "
     "(a native format encodes it as text)"),
    ("special_text_as_text", "written as text",
     "written as text (text is data), where transformers' apply_chat_template(tokenize=True) gives the control "
     "token's id: their ids differ there (the chat check compares text); chat.format = \"template\" encodes it as "
     "transformers does"),
)


def chat_count_lines(manifest: dict[str, Any], t: dict[str, Any]) -> list[tuple[str, str]]:
    """``(label, text)`` lines for the chat counts of ``t`` (the manifest's totals)."""
    lines: list[tuple[str, str]] = []
    if t.get("json_tool_calls_as_text"):
        n = t["json_tool_calls_as_text"]
        lines.append(("tool calls", f"{n:,} conversation{'s write' if n != 1 else ' writes'} tool calls as JSON text in the "
                                    "assistant's content (LLaMA-Factory's shape), trained as that text; "
                                    "chat.json_tools = true writes them as the format's tool calls"))
    if t.get("json_tool_parameters_as_text"):
        n = t["json_tool_parameters_as_text"]
        lines.append(("tool schemas", f"{n:,} conversation{'s have' if n != 1 else ' has'} tool definitions holding "
                                      "parameters as a string of JSON, written as one escaped string (as the template "
                                      "would write it), not as the schema object; chat.json_tools = true parses them"))
    if "reasoning_untrained" in t and t["reasoning_untrained"] is None:
        lines.append(_not_known("reasoning", "conversations whose reasoning was left out of the loss mask "
                                             "(chat.train_on_reasoning = false)"))
    if t.get("reasoning_untrained"):
        n = t["reasoning_untrained"]
        whose = "conversations'" if n != 1 else "conversation's"
        lines.append(("reasoning", f"{n:,} {whose} reasoning left out of the loss mask (chat.train_on_reasoning = false)"))
    if "answers_without_think" in t and t["answers_without_think"] is None:
        lines.append(_not_known("no think", "answers trained without a think block"))
    if t.get("answers_without_think"):
        n = t["answers_without_think"]
        why, advice = _NO_THINK.get(manifest["config"]["chat"]["format"], _NO_THINK["qwen3"])
        last = manifest["config"]["chat"].get("train_turns") == "last"
        advice = (_UNDER_LAST if last else "") + advice.format(last="" if last else _LAST_ONLY)
        lines.append(("no think", f"{n:,} answer{'s' if n != 1 else ''} trained without a think block ({why}): "
                                  f"they teach the model to answer without thinking; {advice}"))
    if t.get("history_untrained"):
        n = t["history_untrained"]
        lines.append(("history", f"{n:,} assistant turn{'s' if n != 1 else ''} before the last user message left out "
                                 "of the loss mask, kept as context (chat.train_turns = \"last\")"))
    if t.get("no_assistant") and manifest["config"].get("chat", {}).get("no_assistant") == "keep":
        # under "reject" they are rejects, in their own line; kept, only the manifest counted them
        n = t["no_assistant"]
        after = (", or none after the last user message," if manifest["config"]["chat"].get("train_turns") == "last"
                 else "")
        lines.append(("no answer", f"{n:,} conversation{'s' if n != 1 else ''} with no assistant turn{after} kept "
                                   "in the rows with every label -100: they train nothing (chat.no_assistant = "
                                   "\"keep\")"))
    if t.get("tool_calls_without_tools"):
        n = t["tool_calls_without_tools"]
        unset = manifest["config"]["chat"].get("tools_column") is None
        lines.append(("tool calls", f"{n:,} conversation{'s call' if n != 1 else ' calls'} tools but "
                                    f"{'carry' if n != 1 else 'carries'} no tool definitions (trained to call tools "
                                    "its prompt never shows)" + ("; if the rows hold them in a column, name it in "
                                                                 "chat.tools_column" if unset else "")))
    if t.get("tool_calls_undefined", 0) is None:
        lines.append(_not_known("tool calls", "conversations calling a tool their definitions do not hold"))
    if t.get("tool_calls_undefined"):
        n = t["tool_calls_undefined"]
        lines.append(("tool calls", f"{n:,} conversation{'s call' if n != 1 else ' calls'} a tool "
                                    f"{'their' if n != 1 else 'its'} tool definitions do not hold (trained to call "
                                    "a tool the prompt never shows)"))
    if t.get("reasoning_key_unread", 0) is None:
        lines.append(_not_known("reasoning", "conversations giving reasoning under a name the template does not read"))
    if t.get("reasoning_key_unread"):
        n = t["reasoning_key_unread"]
        reads = " or ".join(repr(k) for k in _reasoning_keys(manifest["config"]["chat"]["format"]))
        lines.append(("reasoning", f"{n:,} conversation{'s give' if n != 1 else ' gives'} an answer's reasoning under a "
                                   f"name the format's template does not read (it reads {reads}): written and trained, "
                                   "where transformers' apply_chat_template on the rows as they are leaves it out; "
                                   "rename the field to match it"))
    if t.get("tool_arguments_from_string", 0) is None:
        lines.append(_not_known("tool calls", "conversations giving tool-call arguments as a string of JSON"))
    if t.get("tool_arguments_from_string"):
        n = t["tool_arguments_from_string"]
        lines.append(("tool calls", f"{n:,} conversation{'s give' if n != 1 else ' gives'} tool-call arguments as a "
                                    "string of JSON, parsed and written as the format writes a mapping "
                                    "(transformers' apply_chat_template writes such a string as it is or encodes it "
                                    "again: its render of these rows can differ)"))
    for key, unknown, how in _SPECIAL_TEXT:  # the same text, encoded as the control token or as text
        if t.get(key, 0) is None:
            lines.append(_not_known("special text", f"conversations whose text holds special-token text, {unknown}"))
        if n := t.get(key):
            lines.append(("special text", f"{n:,} conversation{'s hold' if n != 1 else ' holds'} special-token text "
                                          f"(e.g. '<|im_end|>' typed in a message), {how}"))
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
