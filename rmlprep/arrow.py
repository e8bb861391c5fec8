"""Arrow-batch map functions: a text or chat column -> token-id list columns.

:func:`tokenize_text` and :func:`tokenize_chat` return callables that work in three places
with the same output:

- ``datasets.Dataset.map(fn, batched=True)`` (a dict of lists in, a dict of columns out;
  ``with_indices=True`` is accepted and puts the dataset index into error messages); also
  ``datasets.Dataset.map(fn)`` unbatched, its default (one example in, one value per column
  out: same ids, one call per row, so slower);
- a ``pyarrow.RecordBatch`` in, a ``RecordBatch`` out (Ray Data ``map_batches(batch_format=
  "pyarrow")``, rmlprep's own pipeline);
- a ``pyarrow.Table`` in, a ``Table`` out (also ``ds.with_format("arrow").map(...)``).

Output columns (names configurable):

==================  =================  =====================================================
column              Arrow type         meaning
==================  =================  =====================================================
``input_ids``       ``list<uint32>``   token ids per row; never uint16, whatever the vocab
                                       size (``large_list<uint32>`` only if one batch holds
                                       more than 2**31 - 1 ids)
``assistant_masks`` ``list<uint8>``    chat only: 1 where the token is assistant content or
                                       a turn terminator (see :mod:`rmlprep.chat`), else 0
``labels``          ``list<int32>``    chat only: ``input_ids`` where the mask is 1, -100
                                       elsewhere
``length``          ``int32``          ``len(input_ids)`` of the row
``surrogates``      ``bool``           text only, with ``surrogates_column=``: True where the
                                       text held surrogate code points, replaced before
                                       encoding (see :func:`tokenize_text`)
``error``           ``string``         only with ``on_error="record"``: the reason a row
                                       failed; null for good rows (``""`` in the dict output,
                                       see below)
==================  =================  =====================================================

Every input row gives exactly one output row, in order; a bad row is never dropped.

Dict output (``datasets.map``): the list columns are 1-D object ``numpy`` arrays of
``uint32``/``uint8``/``int32`` views into one flat buffer, which ``datasets`` turns into
``list<uint32>`` etc. in one pyarrow call (Python int lists would be converted per element and
typed ``int64``, about 10x slower). ``datasets`` refuses ``pyarrow`` arrays in a dict and types a
column from its first batch, so an all-null ``error`` column would become type ``null`` and then
refuse a later error; the dict output therefore writes ``""`` for good rows. Only the new columns
are returned for a dict (``datasets`` merges the input columns itself, from Arrow, and honours
``remove_columns``); pass ``keep_columns=True`` to get them back too.

Pickling and fingerprints: a callable pickles as ``(format version, spec fingerprint, the spec
as zlib-compressed canonical JSON, options)``: no indexes, so sending it to a worker is cheap,
and the bytes are the same in every process, so ``datasets``' ``Hasher`` (dill) gives the same
fingerprint everywhere and a repeated ``map`` hits its cache. A worker rebuilds the
:class:`~rmlprep.tokenizer.Tokenizer` once: rebuilt tokenizers are kept in a small per-process
cache keyed by spec fingerprint (with ``fork`` the parent's tokenizer is simply inherited).

Errors: ``on_error="raise"`` (default) raises :class:`~rmlprep.errors.RowError` for the first
bad row, naming its index in the batch, the dataset index (``with_indices=True``), the ``id``
column's value when the batch has one, and the reason. ``on_error="record"`` keeps the row
with empty ids and the reason in the ``error`` column. ``fn.stats`` counts the batches, rows,
errors and tokens that this object has seen; ``datasets.map`` calls pickled copies (in worker
processes with ``num_proc > 1``), so for a total use :func:`count_errors` on the output (reading
the caller's ``fn.stats`` then warns: :mod:`rmlprep.arrow_stats`).

This module owns the chat callable's encoding (:class:`TokenizeChat`) and its builder, and
re-exports the text one (:class:`TokenizeText`, :func:`tokenize_text`, in
:mod:`rmlprep.arrow_text`); the machinery they share (pickling, the per-process tokenizer cache,
batch kinds, row errors, output assembly, :func:`count_errors`) lives in :mod:`rmlprep.arrow_base`.

Source: the batched-map contract of ``datasets`` (``arrow_dataset.py`` ``map``,
``arrow_writer.py`` ``TypedSequence``); TRL's column names (``input_ids``,
``assistant_masks``, ``labels``).
"""

from __future__ import annotations

import warnings
from array import array
from collections.abc import Mapping
from typing import Any

import numpy as np

# count_errors, OUTPUT_VERSION and the per-process tokenizer cache (_TOKENIZERS) are re-exported
from .arrow_base import _TOKENIZERS, _U32, OUTPUT_VERSION, _calls_tools, _MapFunction, _offsets, count_errors  # noqa: F401
from .arrow_checks import (_FIRST_WARNING, _GENERATION_PROMPT_AFTER_ANSWER, _TOOL_CALLS_WITHOUT_TOOLS, _has_reasoning,
                           refuse_padding_nulls, refuse_unread_columns, refuse_unread_tools, template_differences,
                           train_last_turns)
from .arrow_text import TokenizeText, tokenize_text
from .errors import ChatFormatError, ConfigError, RmlprepError
from .native import surrogate_rows
from .spec import TokenizerSpec
from .tokenizer import Tokenizer

__all__ = ["tokenize_text", "tokenize_chat", "TokenizeText", "TokenizeChat", "count_errors"]


class TokenizeChat(_MapFunction):
    """Map function: a messages column -> ``input_ids`` (list<uint32>), ``assistant_masks``
    (list<uint8>), ``labels`` (list<int32>, -100 where masked) and ``length`` (int32).

    Build it with :func:`tokenize_chat`; see the module docstring for the output types and
    :func:`rmlprep.chat.encode_chat` for the mask rule. ``fn.stats`` also counts
    ``reasoning_dropped`` (turns whose reasoning the format's history rule left out),
    ``answers_without_think`` (answers trained without reasoning where the generation prompt
    opens it: qwen3 thinking on, gpt-oss history finals, deepseek-r1, deepseek-v3.1 thinking),
    ``reasoning_untrained`` (with ``train_on_reasoning=False``: written conversations holding
    reasoning, left out of the mask), ``no_assistant`` (conversations without an assistant message, kept or rejected),
    ``json_tool_calls`` (tool calls converted with ``json_tools``), ``json_tool_calls_as_text``
    (without ``json_tools``: conversations holding tool calls written as JSON text, which
    ``json_tools`` would convert; they are written as the plain text they are),
    ``json_tool_parameters_as_text`` (without ``json_tools``: conversations whose tool
    definitions hold ``parameters`` as a string of JSON, written as an escaped string),
    ``generation_prompt_after_answer`` (conversations refused because they end on an assistant
    turn under ``add_generation_prompt``), ``tool_calls_without_tools`` (written
    conversations with ``tool_calls`` but no tool definitions: the model is trained to call
    tools its prompt never shows), ``tool_calls_undefined`` (written conversations with tool
    definitions whose ``tool_calls`` call a tool they do not define: likewise;
    :func:`rmlprep.chat.convert.undefined_tool_calls`), ``special_text_parsed`` (with
    ``fmt="template"``: written conversations whose own text holds control-token text, encoded
    as the control token: :func:`rmlprep.chat.template.parsed_special_text`; with a native format,
    ``special_text_as_text``: such text written as text, where transformers' ``apply_chat_template(
    tokenize=True)`` gives the control id) and ``surrogate_rows`` (encoded
    conversations whose written text held surrogate code points, replaced as
    :func:`tokenize_text` replaces them: :func:`rmlprep.segment.replace_lone_surrogates`).
    """

    _what = "messages"
    ignore_media = False  # set only when True (see tokenize_chat), so existing fingerprints hold
    train_turns = "all"  # likewise, set only when "last"
    join_text_parts = None  # likewise, set only when given
    warn = True  # the sft run sets it False: its summary names what the warning would say

    @staticmethod
    def _one_example(value) -> bool:
        """A string or null, or one conversation: a list holding message dicts (a batch holds lists)."""
        return _MapFunction._one_example(value) or (isinstance(value, (list, tuple))
                                                     and any(isinstance(m, Mapping) for m in value))

    def __init__(self, tokenizer, options):
        super().__init__(tokenizer, options)
        self._extra_stats()

    def __setstate__(self, state):
        super().__setstate__(state)
        self._extra_stats()

    def _extra_stats(self) -> None:
        self._stats.update(reasoning_dropped=0, no_assistant=0, json_tool_calls=0, json_tool_calls_as_text=0,
                          generation_prompt_after_answer=0, tool_calls_without_tools=0, tool_calls_undefined=0,
                          json_tool_parameters_as_text=0, reasoning_untrained=0, special_text_parsed=0, special_text_as_text=0,
                          tool_arguments_from_string=0, answers_without_think=0, history_untrained=0,
                          reasoning_key_unread=0, text_parts_joined=0)
        self._writer = None

    def _check_alone(self, values: list) -> None:
        refuse_unread_tools(values, self.column, self.tools_column)

    def _check_streamed(self, values: list, column) -> None:
        refuse_padding_nulls(values, column(self.tools_column) if self.tools_column else None, self.tools_column)

    def _system_values(self, column) -> list | None:
        """The ``system_column`` values of the batch (None: it has none, or none is read)."""
        if column is None or not self.system_column:
            return None
        return column(self.system_column)

    def _check_names(self, names: list[str]) -> None:
        """Refuse a tools, system-prompt or media column beside the messages that this callable
        would not read (:func:`rmlprep.arrow_checks.refuse_unread_columns`; ConfigError)."""
        refuse_unread_columns(names, self.column, self.tools_column, self.system_column, self.ignore_media)

    def _count_warned(self, key: str) -> None:
        """Count a conversation under ``key``; at the callable's first (per process, so per
        ``num_proc`` worker, whose ``fn.stats`` never reaches the caller) warn what it means
        (:data:`_FIRST_WARNING`), unless the sft run, whose summary names the count, set ``warn``."""
        self._stats[key] += 1
        if self._stats[key] == 1 and self.warn:
            warnings.warn(f"tokenize_chat: {_FIRST_WARNING[key]}; fn.stats[{key!r}] counts them", stacklevel=3)

    def _template_writer(self):
        """The model's own template (``fmt="template"``), built once per process."""
        if self._writer is None:
            from .chat.template import TemplateWriter

            from .chat.encode import template_specials

            bos, eos = template_specials(self.tokenizer, self.template, self.options)
            opts = dict(self.options or {})
            today = opts.pop("today", None)
            # the tokens travel in the options: a worker that rebuilds the tokenizer from its spec
            # (spawn, Ray) has no folder to read them from, and a tokenizer looked up by spec may
            # be another folder's
            self._writer = TemplateWriter(self.template, bos_token=bos, eos_token=eos, kwargs=opts, today=today,
                                          tokens=self._options.get("template_tokens"))
        return self._writer

    def _encode(self, values: list, where, column=None):
        from .chat.convert import join_text_parts, json_tools, parameters_as_text, undefined_tool_calls
        from .chat.encode import encode_segments
        from .chat.fmt_mistral import tokenizer_options
        from .chat.messages import with_system_prompt
        from .chat.registry import get_format, write
        from .chat.template import parsed_special_text

        tok = self.tokenizer
        fmt = self.fmt
        gen = self.add_generation_prompt
        options = tokenizer_options(tok, fmt, self.options)  # mistral-v3's tool results on a .model
        f = None if fmt == "template" else get_format(fmt)  # (the template is given text parts as they are)
        n = len(values)
        errors: dict[int, str] = {}
        ids_buf = array(_U32)
        mask_buf = array("B")
        lengths = np.zeros(n, dtype=np.int64)
        tools_col = column(self.tools_column) if (column is not None and self.tools_column) else None
        system_col = self._system_values(column)
        for i, messages in enumerate(values):
            if messages is None:
                self._fail(i, f"{self.column!r} is null", where, errors)
                continue
            tools = tools_col[i] if tools_col is not None else None
            if system_col is not None:
                messages, why = with_system_prompt(messages, system_col[i], self.system_column)
                if why is not None:
                    self._fail(i, why, where, errors)
                    continue
            try:
                messages, joined = join_text_parts(messages, f, self.join_text_parts)
                if self.json_tools:
                    messages, tools, k = json_tools(messages, tools)
                    self._stats["json_tool_calls"] += k
                else:
                    if json_tools(messages, tools, check=False)[2]:  # LLaMA-Factory's shape, kept as text: counted for a hint
                        self._count_warned("json_tool_calls_as_text")
                    if tools is not None and parameters_as_text(tools):  # schemas as strings: likewise
                        self._count_warned("json_tool_parameters_as_text")
                if fmt == "template":
                    out = self._template_writer().write(messages, add_generation_prompt=gen, tools=tools)
                else:
                    out = write(messages, fmt, add_generation_prompt=gen, tools=tools, options=options)
                special = parsed_special_text(tok, messages, tools)  # the control token (template) or text (a format)
                if not any(isinstance(m, Mapping) and m.get("role") == "assistant" for m in messages):
                    self._stats["no_assistant"] += 1
                    if self.no_assistant == "reject":
                        raise ChatFormatError("the conversation has no assistant message (nothing to train on); "
                                              "set no_assistant='keep' (chat.no_assistant = \"keep\") to keep it")
                elif gen and isinstance(messages[-1], Mapping) and messages[-1].get("role") == "assistant":
                    self._stats["generation_prompt_after_answer"] += 1
                    raise ChatFormatError(_GENERATION_PROMPT_AFTER_ANSWER)
                elif self.train_turns == "last" and train_last_turns(out, self.no_assistant == "keep"):
                    self._stats["no_assistant"] += 1  # kept: nothing after the last user message to train
                ids, mask = encode_segments(tok, out.segs, train_on_reasoning=self.train_on_reasoning,
                                             fmt=None if fmt == "template" else fmt)
            except (RmlprepError, TypeError, KeyError, AttributeError) as e:
                why = (str(e) if isinstance(e, RmlprepError)
                       else f"the conversation cannot be written ({type(e).__name__}: {e})")
                if "tool" in why and getattr(self, "tools_hint", None):
                    why += self.tools_hint  # a Hermes 3 style config: the tools template is named apart
                self._fail(i, why, where, errors, e)
                continue
            for key in template_differences(messages, out, fmt, special, tools=tools, gen=gen, options=options):
                self._count_warned(key)
            self._stats["text_parts_joined"] += joined > 0  # as join_text_parts chose (unset: refused above)
            for k, n in out.notes.items():  # reasoning_dropped, answers_without_think, history_untrained
                self._stats[k] += n
                if k == "answers_without_think" and self._stats[k] == n and self.warn:  # the first: said once
                    warnings.warn(f"tokenize_chat: {_FIRST_WARNING[k]}; fn.stats[{k!r}] counts them", stacklevel=2)
            if not self.train_on_reasoning and any(_has_reasoning(sg) for sg in out.segs):
                self._stats["reasoning_untrained"] += 1
            if surrogate_rows([sg.text for sg in out.segs]):  # the encoder replaced them: counted, as for text
                self._stats["surrogate_rows"] += 1
            if not tools and _calls_tools(messages):
                self._stats["tool_calls_without_tools"] += 1
                if self._stats["tool_calls_without_tools"] == 1 and self.warn and self.tools_column:
                    warnings.warn(_TOOL_CALLS_WITHOUT_TOOLS, stacklevel=2)  # once per callable (per worker)
            elif tools and undefined_tool_calls(messages, tools):
                self._stats["tool_calls_undefined"] += 1
            if len(mask) != len(ids):  # encode_segments' contract; checked so columns never misalign
                raise RmlprepError(f"{where(i)}: the chat encoder gave {len(ids)} ids but {len(mask)} mask values")
            ids_buf.fromlist(ids)
            mask_buf.frombytes(mask.tobytes())
            lengths[i] = len(ids)
        ids = np.frombuffer(ids_buf, dtype=np.uint32)
        mask = np.frombuffer(mask_buf, dtype=np.uint8)
        labels = np.where(mask != 0, ids.astype(np.int32), np.int32(-100)).astype(np.int32, copy=False)
        off = _offsets(lengths)
        return [
            (self.output_column, ids, off),
            (self.mask_column, mask, off),
            (self.labels_column, labels, off),
        ], errors, {}


def tokenize_chat(
    tokenizer: Tokenizer | TokenizerSpec, fmt: str, *,
    column: str = "messages",
    tools_column: str | None = "tools",
    system_column: str | bool | None = None,
    ignore_media: bool = False,
    add_generation_prompt: bool = False,
    options: Mapping[str, Any] | None = None,
    train_on_reasoning: bool = True,
    json_tools: bool = False,
    no_assistant: str | None = None,
    text_markers: bool = False,
    train_turns: str = "all",
    join_text_parts: str | None = None,
    on_error: str = "raise",
    output_column: str = "input_ids",
    mask_column: str = "assistant_masks",
    labels_column: str = "labels",
    length_column: str | None = "length",
    error_column: str = "error",
    id_column: str | None = "id",
    keep_columns: bool | None = None,
) -> TokenizeChat:
    """A map function that encodes a messages column with its loss mask.

    Each row is a conversation in the messages schema (:mod:`rmlprep.chat.messages`: roles
    system/user/assistant/tool, content as text or text parts, reasoning_content, tool_calls,
    tool results); a ``list<struct<...>>`` Arrow column gives exactly that. A struct's null
    fields are absent at any depth (Arrow pads each row to the union of all rows' keys:
    :func:`rmlprep.readers.base.drop_struct_nulls`), also in ``arguments`` and tool
    definitions; there a real null cannot be told apart, so store those as JSON strings to keep
    it. Dict batches keep their nulls (JSON's are real), except ``datasets.map``'s, which carry
    their Arrow table and are read by its types. Rows are written by the format and encoded as
    :func:`rmlprep.chat.encode_chat` says (BOS where the template writes it; data never parsed
    for control tokens).

    Args:
        tokenizer: an rmlprep Tokenizer (or a TokenizerSpec).
        fmt: a chat format name; ``"auto"``: the format that reproduces the tokenizer's chat
            template (proved once here, :func:`rmlprep.chat.detect_chat_format`);
            ``"template"``: the tokenizer's own template rendered with jinja2 (slower, see
            :mod:`rmlprep.chat.template`).
        column: the messages column.
        tools_column: a column of per-conversation tool definitions (a list, or a JSON
            string), used when the batch has it; None: never. A batch with a column named
            ``tools`` or ``functions`` that this does not name is refused (ConfigError), as
            the sft run refuses it: its tools would be left out of every prompt; None leaves
            them out on purpose.
        system_column: a column of per-conversation system prompts, used when the batch has
            it: a string is written as the conversation's system message before its messages
            (the same text as a leading system message is kept once, a different one is a row
            error; null or ``""``: none), :func:`rmlprep.chat.messages.with_system_prompt`.
            None (default): a batch with a ``system`` or ``system_prompt`` column is refused
            (ConfigError), since the format's default system prompt would stand in for it;
            False: such a column is left out on purpose.
        ignore_media: a batch with an ``images``, ``image``, ``audio`` or ``video`` column (the
            LLaVA / TRL vision layout, ``<image>`` placeholders in the text) is refused
            (ConfigError), as the sft run refuses it (``chat.ignore_media``): rmlprep writes
            text only, so the placeholders would be trained as words; True leaves such columns
            out on purpose.
        add_generation_prompt: end each row with the header that opens an assistant turn: for
            prompts (a conversation ending on a user or tool turn). A conversation that ends on
            an assistant turn is then a row error: the header would follow its final answer,
            untrained, so the model would learn answers that end asking for another (what
            transformers' chat-template docs warn of: add_generation_prompt is for generation,
            not training data).
        options: the format's options (``enable_thinking``, ``today``...).
        train_on_reasoning: reasoning in the mask (default) or not: the format's reasoning
            (``qwen3``'s think block, ``gpt-oss``'s analysis channel), or a leading
            ``<think>…</think>`` of the content where the model writes it so (``smollm3``);
            counted in ``fn.stats["reasoning_untrained"]``. False with a format that has no
            reasoning (``qwen2.5``, ``llama3``...: a ``<think>`` in content is answer text) is a
            ConfigError, not silently ignored
            (:func:`rmlprep.chat.registry.untrained_reasoning_refusal`).
        json_tools: convert tool definitions and calls written as JSON text first
            (:func:`rmlprep.chat.convert.json_tools`).
        no_assistant: a conversation without an assistant message: ``"reject"`` it as a row
            error (nothing to train on), or ``"keep"`` it (nothing in its mask); counted in
            ``fn.stats["no_assistant"]`` either way. Default: reject, keep with
            ``add_generation_prompt`` (prompts for generation have no answer).
        text_markers: encode a format whose turn terminator is not a special token of the
            tokenizer (ChatML on GPT-2's vocabulary), its markers as text. Default: refused,
            since the model would learn no stop token
            (:func:`rmlprep.chat.encode.missing_stop_token`); for ``"template"`` the
            terminator is what the template writes after an answer (Gemma 1's template on
            its base tokenizer, where ``<end_of_turn>`` is plain vocabulary, is refused).
        train_turns: ``"all"`` (default) trains every assistant turn; ``"last"`` only those after
            the last user message (LLaMA-Factory's ``mask_history``, calls included): earlier
            turns stay as context, out of the mask, counted in ``fn.stats["history_untrained"]``;
            a conversation with no assistant turn after its last user message is handled as
            ``no_assistant`` says. Not with ``"template"`` (ConfigError).
        join_text_parts: the join of a content given as two or more text parts to a format
            whose template takes only a string (``"\\n"``: vLLM's; ``""``: as templates that
            iterate parts write them), counted in ``fn.stats["text_parts_joined"]``. None
            (default): such a conversation is a row error, as that template has no join
            (:func:`rmlprep.chat.convert.join_text_parts`). Not with ``"template"`` (ConfigError).
        on_error: ``"raise"`` or ``"record"``; a conversation the schema or the format
            refuses is a row error with the reason.
        output_column, mask_column, labels_column: names of the list<uint32>, list<uint8> and
            list<int32> columns (TRL's names by default); the three are aligned row by row and
            token by token.
        length_column, error_column, id_column, keep_columns: as for :func:`tokenize_text`.
    Returns:
        A picklable callable (see :class:`TokenizeChat`).
    Raises:
        ChatFormatError: unknown format or option; ``"auto"`` and a template no format reproduces,
            or one that reads a GGUF's defaulted bos/eos (:func:`rmlprep.chat.encode.template_specials`).
        ConfigError: bad on_error / no_assistant / system_column or clashing output column names;
            ``"template"`` and a template that reads a GGUF's defaulted bos/eos; the format's
            turn terminator is not a special token of the tokenizer (see ``text_markers``);
            ``train_on_reasoning=False`` with a format that has no reasoning; a ``train_turns`` other
            than ``"all"``/``"last"``, or ``"last"`` with ``"template"``; a ``join_text_parts``
            not a string, or given with ``"template"``. When called: a
            batch with a tools, system-prompt or media column it would not read (see
            ``tools_column``, ``system_column``, ``ignore_media``); the messages column alone
            (``datasets.map(..., input_columns=["messages"])``) holding tool calls while
            ``tools_column`` is set (:func:`rmlprep.arrow_checks.refuse_unread_tools`).
    Warns:
        UserWarning: once per callable, at the first conversation that calls tools with no
            definitions beside it while ``tools_column`` is set (counted in
            ``fn.stats["tool_calls_without_tools"]``).
    Source: transformers' ``apply_chat_template(tokenize=True, return_assistant_tokens_mask=True)``
        for the ids and mask (each format checked against its real template's renders,
        ``fixtures/chat/renders.jsonl.gz``); TRL's column names; the batched-map contract of
        ``datasets`` (module docstring).
    """
    from .chat import detect_chat_format
    from .chat.encode import auto_format, missing_stop_token, stop_token_refusal, template_specials
    from .chat.detect import named_templates_note
    from .hf import tool_use_hint
    from .chat.registry import (get_format, join_parts_refusal, resolve_options, train_turns_refusal,
                                untrained_reasoning_refusal)
    from .chat.render import JINJA_PIP, check_template_options, jinja_available, refuse_unpassed_tokens

    tok = tokenizer if isinstance(tokenizer, Tokenizer) else Tokenizer.create(tokenizer)
    if fmt == "auto":  # the refusal names the fmt values to pass
        fmt = auto_format(tok, "tokenize_chat(fmt='auto')")
    if fmt != "template":
        fmt = detect_chat_format(fmt)
        resolve_options(get_format(fmt), options)  # unknown options fail here, not per row
    if fmt == "template" and not tok.chat_template:
        raise ConfigError(f"tokenize_chat(fmt='template'): the tokenizer carries no chat_template"
                          f"{named_templates_note(tok)}")
    if fmt == "template" and not jinja_available():  # here, not as an error on every row
        raise ConfigError(f"tokenize_chat(fmt='template') renders the tokenizer's template with jinja2, which is not "
                          f"installed: {JINJA_PIP}")
    if fmt == "template":
        check_template_options(tok.chat_template, options)  # a misspelt option fails here, not silently
        try:  # a special token rmlprep cannot pass: here, not as an error on every row
            refuse_unpassed_tokens(tok.chat_template, options, tok.template_tokens)
            template_specials(tok, tok.chat_template, options)
        except ChatFormatError as e:
            raise ConfigError(f"tokenize_chat(fmt='template'): {e}") from None
    if not text_markers and (stop := missing_stop_token(tok, fmt, options)) is not None:
        raise ConfigError(f"tokenize_chat(fmt={fmt!r}): {stop_token_refusal(tok, fmt, stop)}; or pass "
                          "text_markers=True to write them as text")
    if system_column is True or system_column == "":
        raise ConfigError(f"system_column={system_column!r}: name the column of system prompts, or pass False")
    if no_assistant is None:
        no_assistant = "keep" if add_generation_prompt else "reject"
    if no_assistant not in ("keep", "reject"):
        raise ConfigError(f"no_assistant={no_assistant!r}: use 'keep' or 'reject'")
    if not train_on_reasoning and (why := untrained_reasoning_refusal(fmt)):
        raise ConfigError(f"tokenize_chat(fmt={fmt!r}, train_on_reasoning=False): {why}")
    if why := train_turns_refusal(fmt, train_turns) or join_parts_refusal(fmt, join_text_parts):
        raise ConfigError(f"tokenize_chat(fmt={fmt!r}): {why}")
    return TokenizeChat(tok, {
        "column": column,
        "tools_column": tools_column,
        "system_column": system_column,
        **({"ignore_media": True} if ignore_media else {}),
        **({"train_turns": "last"} if train_turns == "last" else {}),
        **({"join_text_parts": join_text_parts} if join_text_parts is not None else {}),
        "fmt": fmt,
        "template": tok.chat_template if fmt == "template" else None,
        # set only when there are some, so existing fingerprints hold (see TokenizeChat._template_writer)
        **({"template_tokens": tok.template_tokens} if fmt == "template" and tok.template_tokens else {}),
        "add_generation_prompt": bool(add_generation_prompt),
        "options": dict(options) if options else None,
        "train_on_reasoning": bool(train_on_reasoning),
        "json_tools": bool(json_tools),
        "no_assistant": no_assistant,
        "on_error": on_error,
        "output_column": output_column,
        "mask_column": mask_column,
        "labels_column": labels_column,
        "length_column": length_column,
        "error_column": error_column,
        "id_column": id_column,
        "keep_columns": keep_columns,
        **({"tools_hint": hint} if fmt != "template" and (hint := tool_use_hint(tok)) else {}),
    })
