"""Refusals of ``datasets`` batches that reach :class:`rmlprep.arrow.TokenizeChat` without
what it needs to write them faithfully: a tools, system-prompt or media column it would not
read (:func:`refuse_unread_columns`), plain Python rows whose Arrow struct padding cannot be
told from a JSON null (:func:`refuse_padding_nulls`), and the messages column alone, with tool
calls whose definitions could not be read (:func:`refuse_unread_tools`); the ways a written
conversation departs from what transformers' template gives it (:func:`template_differences`,
counted and warned, not refused); and the texts of the row reasons and first-use warnings.
"""

from __future__ import annotations

from collections.abc import Mapping

from .chat.columns import MEDIA_FIELDS, SYSTEM_FIELDS, TOOLS_FIELDS, column_refusal
from .chat.segments import Out, untrain_history
from .errors import ChatFormatError, ConfigError

__all__ = ["refuse_padding_nulls", "refuse_unread_columns", "refuse_unread_tools", "template_differences",
           "train_last_turns"]


#: The reason a conversation that ends on an assistant turn is refused under add_generation_prompt.
_GENERATION_PROMPT_AFTER_ANSWER = (
    "the conversation ends on an assistant turn, and add_generation_prompt would write an untrained header "
    "opening another assistant turn after that answer (a training example that ends asking for a reply); "
    "set add_generation_prompt=False (chat.add_generation_prompt = false) to train on it, or end it on a user "
    "turn if it is a prompt")


#: Warned at a callable's first conversation that calls tools with no definitions beside it.
_TOOL_CALLS_WITHOUT_TOOLS = (
    "tokenize_chat: a conversation calls tools (tool_calls) with no tool definitions beside it (a null or empty "
    "tools value, or no tools column in the batch): it is written, and the model learns to call tools its prompt "
    "never shows; fn.stats['tool_calls_without_tools'] counts them (the sft run names them in its summary)")


#: Warned at a callable's first conversation counted under each key (:meth:`TokenizeChat._count_warned`).
_FIRST_WARNING = {
    "json_tool_calls_as_text": "a conversation writes tool calls as JSON text in the assistant's content "
    "(LLaMA-Factory's shape): it is trained as that text, not as the format's tool calls; json_tools=True converts them",
    "json_tool_parameters_as_text": "a conversation's tool definitions hold parameters as a string of JSON, written "
    "as one escaped string, not as the schema object; json_tools=True parses them",
    "special_text_parsed": "a conversation's text holds special-token text (e.g. '<|im_end|>'), which fmt='template' "
    "encodes as the control token, as transformers' apply_chat_template does (a native format encodes it as text)",
    "special_text_as_text": "a conversation's text holds special-token text (e.g. '<|im_end|>'), which the chat format "
    "writes as text (text is data), where transformers' apply_chat_template(tokenize=True) gives the control token's id: "
    "their ids differ there; fmt='template' encodes it as transformers does",
    "answers_without_think": "a conversation has an answer trained without a think block where the format's "
    "generation prompt leaves the model to open one (Qwen3's template writes it only after the last user message): "
    "it teaches the model to answer without thinking; train_turns='last' trains only the answers after the last "
    "user message, or split multi-turn conversations into one per answer",
    "reasoning_key_unread": "a conversation gives an answer's reasoning under a name the format's real template does "
    "not read (gpt-oss's reads 'thinking', Qwen3's 'reasoning_content', Gemma 4's 'reasoning' or "
    "'reasoning_content'): it is written and trained, where transformers' apply_chat_template on the row as it is "
    "leaves it out; rename the field to match it",
    "tool_arguments_from_string": "a conversation gives a tool call's arguments as a string of JSON: it is parsed and "
    "written as the format writes a mapping, where transformers' apply_chat_template writes the string as it is "
    "(Qwen3, Hermes 3) or encodes it again (Qwen2.5, Llama 3.1, gpt-oss): give arguments as mappings to match it",
}


def _has_reasoning(seg) -> bool:
    """A reasoning segment of the data with text beyond its ``<think>`` tags (an empty think
    block a template writes itself is no reasoning of the conversation)."""
    return (seg.kind == "reasoning" and not seg.markup
            and bool(seg.text.replace("<think>", "").replace("</think>", "").strip()))


def refuse_unread_columns(names: list[str], column: str, tools_column: str | None, system_column: str | bool | None,
                          ignore_media: bool) -> None:
    """Refuse a column beside the messages (``column``) that the chat callable would not read, as
    the sft run refuses it (:mod:`rmlprep.chat.columns`, the same words with the keyword
    arguments for the config keys): tool definitions (``tools``, or OpenAI's older
    ``functions``) that ``tools_column`` does not name (the model trained to call tools it
    was never shown), a system prompt (``system``, ``system_prompt``) while
    ``system_column`` is None (the format's default system prompt would stand in for it),
    media (``images``, ``image``, ``audio``, ``video``: rmlprep writes text only) unless
    ``ignore_media``. ``tools_column=None``, ``system_column=False`` and
    ``ignore_media=True`` leave them out on purpose: no check.

    Args:
        names: the batch's column names.
    Raises:
        ConfigError: naming the column and the two ways out.
    """
    refusal = None
    if tools_column is not None:
        refusal = next(((h, f" that tools_column={tools_column!r} does not name") for h in TOOLS_FIELDS
                        if h in names and h != tools_column and h != column), None)
    if refusal is None and system_column is None:
        refusal = next(((h, "") for h in SYSTEM_FIELDS if h in names and h != column), None)
    if refusal is None and not ignore_media:
        refusal = next(((h, "") for h in MEDIA_FIELDS if h in names and h != column), None)
    if refusal is not None:
        raise ConfigError(column_refusal(refusal[0], "tokenize_chat: the batch has a column", config=False,
                                         after=refusal[1]))


def template_differences(messages: list, out: Out, fmt: str, special: bool, *, tools, gen: bool,
                         options) -> list[str]:
    """The keys of :data:`_FIRST_WARNING` under which a written conversation is counted: where its
    ids differ from transformers' ``apply_chat_template`` on the row as it is, though the chat
    format wrote it as documented (each key's text says how and how to match it).

    Args:
        messages: the conversation as written (after ``json_tools`` and the system column).
        out: what the format (or ``fmt="template"``) wrote for it.
        fmt: the format name, or ``"template"``.
        special: its text holds special-token text (:func:`rmlprep.chat.template.parsed_special_text`).
        tools, gen, options: as the conversation was written (``gen``: add_generation_prompt).
    Returns:
        Zero or more of ``special_text_parsed`` / ``special_text_as_text``,
        ``tool_arguments_from_string``, ``reasoning_key_unread`` (``text_parts_joined`` is counted
        where the parts are joined: :func:`rmlprep.chat.convert.join_text_parts`).
    """
    from .chat.convert import string_tool_arguments, unread_reasoning
    from .chat.registry import get_format, write

    keys = []
    if special:
        keys.append("special_text_parsed" if fmt == "template" else "special_text_as_text")
    if string_tool_arguments(messages):
        keys.append("tool_arguments_from_string")
    if fmt != "template" and (bare := unread_reasoning(messages, get_format(fmt))) is not None:
        try:  # reasoning under a name the template does not read: does its text differ?
            same = write(bare, fmt, add_generation_prompt=gen, tools=tools, options=options).text() == out.text()
        except ChatFormatError:
            same = False
        if not same:
            keys.append("reasoning_key_unread")
    return keys


def refuse_unread_tools(values: list, column: str, tools_column: str | None) -> None:
    """Refuse conversations handed over as the messages column alone (``datasets.map(fn,
    input_columns=["messages"])``) that call tools (``tool_calls``, or a ``tool`` turn) while
    ``tools_column`` is set: a tools column of the dataset never reaches the callable then, so
    the prompt would be written without its tool definitions and nothing would say so (the
    careless-user trial's S3: qwen2.5 wrote 83 ids where the whole batch gives 205). A batch
    whose columns are seen and hold no tools column is written and counted instead
    (``tool_calls_without_tools``), as the sft run does; ``tools_column=None`` writes such
    rows without definitions on purpose (no check).

    Args:
        values: the batch's conversations (lists of message dicts; other values are left to the
            row checks).
        column: the messages column's name; tools_column: the callable's ``tools_column``.
    Raises:
        ConfigError: naming the first such row, the column that went unread and both fixes.
    """
    if tools_column is None:
        return
    for i, messages in enumerate(values):
        if not isinstance(messages, (list, tuple)):
            continue
        for m in messages:
            if isinstance(m, Mapping) and (m.get("tool_calls") or m.get("role") == "tool"):
                what = "calls a tool (tool_calls)" if m.get("tool_calls") else "holds a tool turn"
                raise ConfigError(
                    f"tokenize_chat: row {i} of the batch {what}, and the batch is the {column!r} column alone "
                    f"(datasets.map(..., input_columns=[{column!r}])), so a {tools_column!r} column cannot be "
                    "read and its tool definitions would be left out of the prompt; leave input_columns out so "
                    f"the {tools_column!r} column is read, or pass tools_column=None to write the conversations "
                    "without tool definitions on purpose")


def refuse_padding_nulls(values: list, tools: list | None, tools_column: str | None) -> None:
    """Refuse chat rows of a ``datasets`` map handed over as plain Python (``IterableDataset.map``,
    ``Dataset.map(..., input_columns=[...])``) whose tool-call arguments or tool definitions
    hold a null: there Arrow's struct padding (every row's ``arguments`` padded to the union
    of all rows' keys) reaches the callable as plain ``None``, which cannot be told from a
    JSON null, so writing it would teach ``{"city": "Paris", "query": null}``.

    Raises:
        ConfigError: naming the row and the key, and the fix.
    """
    for i, messages in enumerate(values):
        found = _padding_null(messages, "messages")
        if found is None and tools is not None and i < len(tools):
            found = _padding_null(tools[i], tools_column, everywhere=True)
        if found is not None:
            raise ConfigError(
                f"tokenize_chat: row {i} of a datasets batch holds a null at {found}, and the batch "
                "came without its Arrow types (IterableDataset.map, or map(..., input_columns=...)), "
                "so Arrow's struct padding (each row gets every other row's keys as null) cannot be "
                "told from a JSON null. Pass the whole batch: on an IterableDataset call "
                ".with_format(\"arrow\") before .map(fn, batched=True); on a Dataset leave out "
                "input_columns. rmlprep then leaves the padding out by the column types; or store "
                "tools and arguments as JSON strings")


def _padding_null(value, path: str, *, everywhere: bool = False) -> str | None:
    """Where a null sits in ``value`` that Arrow struct padding could have made: anywhere in a
    tool definition (``everywhere``), else in a message's tool-call arguments; None if none."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            here = f"{path}.{k}"
            if v is None and everywhere:
                return here
            if k == "arguments" and not everywhere:
                found = _padding_null(v, here, everywhere=True)
            else:
                found = _padding_null(v, here, everywhere=everywhere)
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for j, v in enumerate(value):
            if v is None and everywhere:
                return f"{path}[{j}]"
            found = _padding_null(v, f"{path}[{j}]", everywhere=everywhere)
            if found is not None:
                return found
    return None


def train_last_turns(out: Out, keep: bool) -> bool:
    """``train_turns="last"``: leave a written conversation's assistant turns before its last
    user message out of the mask (:func:`rmlprep.chat.segments.untrain_history`, noted as
    ``history_untrained``). True when no assistant turn follows that message, so the
    conversation trains nothing and ``keep`` (``no_assistant="keep"``) keeps it; False otherwise.

    Raises:
        ChatFormatError: nothing left to train and not ``keep`` (a row error, as a conversation
            without an assistant message is under ``no_assistant="reject"``).
    """
    untrain_history(out)
    if any(s.kind in ("assistant", "reasoning") for s in out.segs):
        return False
    if keep:
        return True
    raise ChatFormatError("no assistant turn follows the conversation's last user message, and train_turns = 'last' "
                          "trains only those: nothing to train on; set no_assistant='keep' (chat.no_assistant = "
                          "\"keep\") to keep it as context only")
