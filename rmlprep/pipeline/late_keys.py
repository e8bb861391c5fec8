"""Keys added to the done markers within a marker version (:data:`.markers.MARKER_VERSION`).

A marker of the current version may have been written by a rmlprep from before such a key
existed, and a resumed run keeps it (or renumbers it) when it vouches for the shard. What a
missing key means depends on the key and the config: a count this config cannot produce is 0; a
count it can is not known (:func:`late_counts`: the total is null); a key that came with a
change of the shard makes the marker unable to vouch for the unit (:func:`marker_needs`: redone).
"""

from __future__ import annotations

from typing import Any

from ..config import RunConfig

__all__ = ["late_counts", "marker_needs", "unit_needs", "chat_rules", "thinks_without_reasoning"]


def thinks_without_reasoning(fmt: str, options) -> bool:
    """Whether chat format ``fmt`` with ``options`` can train an answer without reasoning where
    its generation prompt opens it (``answers_without_think``; ``"auto"``, not yet resolved: it
    may). Qwen3's and gpt-oss's templates write reasoning only in the last answer; DeepSeek-R1's
    in none (its prompt ends ``<think>\\n``), nor V3.1's (``<think>`` with ``enable_thinking``)."""
    opts = options or {}
    if fmt in ("qwen3", "auto"):
        return opts.get("enable_thinking") is not False
    if fmt in ("deepseek-r1-llamacpp", "deepseek-v3.1"):
        return bool(opts.get("enable_thinking"))
    return fmt in ("gpt-oss", "deepseek-r1")


def _reads_reasoning_keys(fmt: str) -> bool:
    """Whether format ``fmt``'s template reads reasoning under some names only (``"auto"``: it may)."""
    from ..chat.registry import FORMATS

    return fmt == "auto" or bool(getattr(FORMATS.get(fmt), "reasoning_keys", ()))


def late_counts(cfg: RunConfig) -> dict[str, bool]:
    """The counts added to done markers within their marker version, each with whether
    this config can count any.

    A marker written before a count existed is still kept on resume (and renumbered) when its
    shard is what this version writes, so it lacks the key. Where the config can count some, the
    total is then not known: null in the manifest and stats.json, "not known" in the summary,
    rather than a count that leaves those units out (a recount would read every kept shard, on an
    object store too, for a count only; ``--overwrite`` writes them again and counts). Where it
    cannot (no such document or chunk exists), the missing count is 0 and the total stays exact.

    - ``empty_documents`` (e4c4bf2): pretraining documents of no token; only without framing
      (``pack.bos``, ``pack.eos`` and ``tokenizer.add_special_tokens`` all off) can a document
      have none.
    - ``untrained_chunks`` (2bb738d): sft chunks that train nothing; only ``pack.overflow =
      "split"`` cuts chunks.
    - ``tool_calls_undefined``: sft conversations whose tool calls name a tool their
      definitions do not hold; any chat config can count some.
    - ``reasoning_untrained`` (3c8d725): conversations whose reasoning was left out of the
      mask; only ``chat.train_on_reasoning = false`` leaves any out. A marker without it under
      that setting is kept only where 3c8d725 left the shard as it was (a format with a
      reasoning field: ``qwen3``, ``gpt-oss``...); for ``smollm3`` :func:`marker_needs` has it
      redone.

    - ``special_text_parsed``: sft conversations whose own text holds control-token text,
      which ``chat.format = "template"`` encodes as the control token; only that format can.

    - ``special_text_as_text``: sft conversations whose own text holds control-token text, which
      a native format writes as text (transformers' tokenized render has the control id there).

    - ``tool_arguments_from_string``: sft conversations giving a tool call's arguments as a string
      of JSON (written as the format writes a mapping); any chat config can count some.

    - ``answers_without_think``: answers a reasoning format trains without reasoning where its
      generation prompt opens it (:func:`thinks_without_reasoning`): ``qwen3`` with thinking on
      (``enable_thinking`` not false) and ``gpt-oss`` (history answers), ``deepseek-r1`` (every
      answer), ``deepseek-r1-llamacpp`` and ``deepseek-v3.1`` with ``enable_thinking`` (every answer).

    - ``history_untrained``: assistant turns before the last user message left out of the mask;
      only ``chat.train_turns = "last"`` leaves any out.

    - ``reasoning_key_unread``: conversations giving reasoning under a name the format's real
      template does not read (:func:`rmlprep.chat.convert.unread_reasoning`); only a format
      with ``reasoning_keys`` (``qwen3``, ``gpt-oss``, ``gemma4``), or ``"auto"``, can count some.

    - ``text_parts_joined``: conversations giving a content as two or more text parts to a format
      whose template takes only a string, joined as ``chat.join_text_parts`` says
      (:func:`rmlprep.chat.convert.join_text_parts`); only a native format (or ``"auto"``) with
      the key set can count some: unset, such a conversation is a reject.

    (The other chat counts and ``arrow_bytes`` were in every marker this version keeps, or are
    null when missing.)
    """
    if cfg.pipeline == "sft":
        chat = cfg["chat"]
        return {"untrained_chunks": cfg["pack"]["overflow"] == "split", "tool_calls_undefined": True,
                "reasoning_untrained": not chat["train_on_reasoning"],
                "special_text_parsed": chat["format"] == "template", "tool_arguments_from_string": True,
                "special_text_as_text": chat["format"] != "template",
                "answers_without_think": thinks_without_reasoning(chat["format"], chat["options"]),
                "history_untrained": chat["train_turns"] == "last",
                "reasoning_key_unread": _reads_reasoning_keys(chat["format"]),
                "text_parts_joined": chat["format"] != "template" and chat["join_text_parts"] is not None}
    pack = cfg["pack"]
    return {"empty_documents": not (pack["bos"] or pack["eos"] or cfg["tokenizer"]["add_special_tokens"])}


def marker_needs(cfg: RunConfig, tokenizer=None) -> dict[str, str | tuple[Any, str]]:
    """The keys a done marker of :data:`.markers.MARKER_VERSION` must hold to vouch for a unit of
    this config, each with the reason a marker without it is redone
    (:meth:`.output.OutputFolder.verify_done`) and not renumbered (:mod:`.renumber`).

    A key added to markers within a version marks the code that wrote them. Most are counts
    only (:func:`late_counts`: the total is then null), but ``reasoning_untrained``
    (3c8d725) came with a change of SmolLM3's shards: before it, ``chat.train_on_reasoning =
    false`` left nothing out for ``smollm3`` (its reasoning, a leading ``<think>…</think>`` of
    the content, was trained), so a marker without it cannot vouch for those masks under that
    setting. The formats with a reasoning field (``qwen3``'s think block, ``gpt-oss``'s
    analysis channel) left it out before 3c8d725 as after: their kept units' count is not
    known (:func:`late_counts`), their shards are the same. With the setting on, no reasoning
    is left out and the missing count is 0. ``chat.format = "auto"`` not yet resolved to the
    format it proves counts as ``smollm3`` (:func:`rmlprep.pipeline.run` resolves it first).

    ``columns`` (the Parquet shard's column names) came with the ``unit`` column
    (:data:`.writers.UNIT_FIELD`): a Parquet shard written before it lacks the column, and a
    folder mixing both would not load with ``datasets`` (the card names the column, the old
    shards lack it), so such a unit is redone; Megatron's ``.bin``/``.idx`` did not change.

    ``first_labels_masked`` came with :func:`rmlprep.pack_bfd` writing -100 as every fragment's
    first label (a chunk of ``pack.overflow = "split"`` that starts inside an answer trained it,
    predicted from another example's last token under a Hugging Face loss), so a marker without
    it cannot vouch for the labels of a split run, nor of ``chat.format = "template"`` (a
    template may write an assistant token first); every built-in format starts a conversation
    with template text (label -100), so other runs' shards are the same.

    ``chat_text_prefix`` came with each text between special tokens getting its own ``'▁'`` on
    a SentencePiece ``.model`` read alone (``tokenizer``'s ``prefix_scheme == "whole_text"``;
    :func:`rmlprep.spm_special.per_text_fragments`): before it, the ``llama2`` and ``zephyr``
    formats there wrote ids no reference gives (``[1, 29961 '[', ...]`` for ``[1, 518 '▁[', ...]``),
    so a marker without it cannot vouch for an sft unit on such a tokenizer; other tokenizers'
    chat ids did not change.

    ``json_tools_empty`` came with ``chat.json_tools`` reading a tools column's ``[]`` as no tools
    (f6b1a69): before it, a row holding ``[]`` kept a system message of JSON definitions as text
    beside its converted call, which is now the conversation's tools, so under ``json_tools`` with
    a ``tools_column`` a marker without it cannot vouch for its rows; other configs read no tools
    column or convert nothing, and their rows did not change.

    ``chat_rules`` (:func:`chat_rules`) is a value, not only a key: a marker must hold the
    format's rules version. Its need is ``(value, reason)``; the others' a reason; :func:`unmet`
    reads both.
    """
    needs = {}
    if cfg["output"]["format"] == "parquet":
        needs["columns"] = "done marker predates the shards' unit column (its shard lacks it)"
    fmt = cfg["chat"]["format"] if cfg.pipeline == "sft" else None
    if fmt is not None and not cfg["chat"]["train_on_reasoning"] and (fmt == "auto" or _reasoning_in_content(fmt)):
        needs["reasoning_untrained"] = ("done marker predates chat.train_on_reasoning = false leaving SmolLM3's "
                                        "reasoning out of the mask (it has no reasoning_untrained)")
    if fmt is not None and (cfg["pack"]["overflow"] == "split" or fmt == "template"):
        needs["first_labels_masked"] = ("done marker predates pack_bfd writing -100 as the first label of every "
                                        "fragment (it has no first_labels_masked)")
    spec = getattr(tokenizer, "spec", None)
    if fmt is not None and spec is not None and spec.add_prefix_space and spec.prefix_scheme == "whole_text":
        needs["chat_text_prefix"] = ("done marker predates a .model's own '▁' before each text after a special token "
                                     "in chat encoding (it has no chat_text_prefix)")
    if fmt is not None and cfg["chat"].get("json_tools") and isinstance(cfg["chat"].get("tools_column"), str):
        needs["json_tools_empty"] = ("done marker predates chat.json_tools reading a tools column's [] as no tools "
                                     "(it has no json_tools_empty): such rows are written otherwise now")
    rules = chat_rules(cfg)
    if rules is not None:
        needs["chat_rules"] = (rules, f"done marker was not written under this rmlprep's rules {rules} of chat format "
                                      f"{fmt!r} (chat_rules {{}}): its rows may be written otherwise now")
    return needs


def unit_needs(unit_format: str) -> dict[str, str | tuple[Any, str]]:
    """The keys a done marker must hold to vouch for a unit of this input format, beside
    :func:`marker_needs`' (which depend on the config alone), each with the reason it is redone.

    ``read_rules`` is a value, as ``chat_rules``: the version of the format's reader rules
    (:data:`rmlprep.readers.rules.READ_RULES`). A unit read under other rules, or by an rmlprep
    before the key, may hold rows of a file today's reader reads otherwise or refuses (a Parquet
    text holding a hole of zeros), and is redone; a marker without the key is read as holding
    :data:`rmlprep.readers.rules.RULES_BEFORE_KEY`'s version where the format has one (``stdlib``,
    whose reader did not change before the key: its demo units are kept, not read again).

    ``csv_header_rows`` came with the CSV reader rejecting a record of the header's column names
    (kind ``csv_repeated_header``: files concatenated with their headers): before it such a
    record was a row, its ``text`` a document, so a marker of a CSV unit without the key cannot
    vouch for its shard; other formats' rows did not change.
    """
    from ..readers.rules import READ_RULES, RULES_BEFORE_KEY

    needs: dict[str, str | tuple[Any, str]] = {}
    if unit_format == "csv":
        needs["csv_header_rows"] = ("done marker predates a CSV record of the header's column names being a reject "
                                    "(it has no csv_header_rows): such a record was a document")
    rules = READ_RULES.get(unit_format)
    if rules is not None:
        accepted = frozenset({rules, None}) if RULES_BEFORE_KEY.get(unit_format) == rules else rules
        needs["read_rules"] = (accepted, f"done marker was not written under this rmlprep's read rules {rules} of "
                                      f"{unit_format} files (read_rules {{}}): the file is read again, as a "
                                      "reader of before may have accepted what this one refuses")
    return needs


def chat_rules(cfg: RunConfig) -> int | None:
    """The rules version of an sft config's chat format (:attr:`rmlprep.chat.ChatFormat.rules`;
    ``chat.format = "template"``: :data:`rmlprep.chat.template.TEMPLATE_RULES`), which its done
    markers hold as ``chat_rules``; None for other pipelines and an unknown name (refused elsewhere).

    A format's rules change when what it makes of some conversation does: a unit done under
    other rules may hold rows this rmlprep writes otherwise or refuses, and a resume that kept it
    would mix the two in one folder, so :func:`marker_needs` has it redone. A marker without the
    key predates it and is redone too, for every format: within marker version 3 the
    formats changed what they write without a key to tell (e5eb9bf: qwen3 refuses an answer
    holding text its template drops, ``"Pre <think>x</think> Ans"``, which it wrote without
    ``"Pre "``; 50d45de, fd5d9de, 790846c: gpt-oss, gemma4, llama3.1; 2045c7a, c308f1e:
    template mode's bos and special tokens).
    """
    if cfg.pipeline != "sft":
        return None
    fmt = cfg["chat"]["format"]
    if fmt == "template":
        from ..chat.template import TEMPLATE_RULES

        return TEMPLATE_RULES
    f = _format(fmt)
    return None if f is None else f.rules


def _reasoning_in_content(fmt: str) -> bool:
    """Whether the format marks a leading ``<think>…</think>`` of the content as reasoning
    (``smollm3``); an unknown name (refused elsewhere) counts as one: its units are redone."""
    f = _format(fmt)
    return True if f is None else f.reasoning_in_content


def _format(fmt: str):
    """The registered :class:`rmlprep.chat.ChatFormat` named ``fmt``, or None for an unknown name."""
    from ..chat.registry import get_format
    from ..errors import ChatFormatError

    try:
        return get_format(fmt)
    except ChatFormatError:
        return None


def unmet(marker: dict, needs: dict[str, str | tuple[Any, str]] | None) -> str:
    """The reason a done marker cannot vouch for a unit under ``needs`` (:func:`marker_needs`):
    the first key it lacks, or whose value is not the one needed (a frozenset: one of those
    values, None standing for the key missing; its reason names the value held); ``""`` when it
    holds them all."""
    for key, need in (needs or {}).items():
        if isinstance(need, tuple):
            value, why = need
            if (marker.get(key) not in value) if isinstance(value, frozenset) else (marker.get(key) != value):
                return why.format(marker.get(key, "missing"))
        elif key not in marker:
            return need
    return ""
