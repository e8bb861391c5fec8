"""The unit sample of the live chat check (``parity.chat_live_sample = N``): N of the
conversations a unit writes, spread over the whole unit, rendered with the tokenizer's chat
template by the worker that processes the unit and compared with the format's text
(:func:`rmlprep.chat_parity.live_chat_check`), after its last batch and before its shard is
committed (:func:`rmlprep.pipeline.chat_stages.format_and_tokenize`). The parity stage's sample
(:mod:`rmlprep.chat_sample`) reads the head of each unit only: a template that differed from the
format only on a conversation past it (a trial's row 35) passed, exit 0, and the shards held
text the template does not write.

The sample is the N rows the unit writes whose source row number has the smallest key
(splitmix64 of the row number): a uniform sample without replacement that depends on the
unit's rows alone, not on ``input.batch_rows``, the worker count or the engine, so a rerun
samples the same rows; the check never changes an output byte. A difference is a
:class:`~rmlprep.errors.ParityError` that stops the run
(:func:`rmlprep.pipeline.unit.work_unit`: fatal).
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from .chat_parity import live_chat_check
from .chat_sample import token_text
from .errors import ChatFormatError, ParityError

__all__ = ["row_keys", "UnitSample", "unit_sample_size", "check_unit_sample"]


def row_keys(rows: np.ndarray) -> np.ndarray:
    """uint64 [len(rows)]: splitmix64 of each int64 source row number (a bijection, so two rows
    never share a key); the unit sample keeps the rows with the smallest keys.

    Source: Steele, Lea and Flood, "Fast splittable pseudorandom number generators" (2014),
    the finalizer of ``java.util.SplittableRandom``."""
    z = np.asarray(rows, dtype=np.int64).astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class UnitSample:
    """Up to ``k`` conversations of one unit, spread over it: of the rows offered, the ``k``
    whose :func:`row_keys` are smallest (a uniform sample of the unit's rows without replacement,
    the same whatever the batches they came in). Holds ``k`` values at most."""

    def __init__(self, k: int) -> None:
        self.k = k
        self._heap: list[tuple[int, int, Any, Any]] = []  # (-key, row, messages, tools): the k smallest keys

    def offer(self, rows: np.ndarray, values: list[Any], tools: list[Any] | None) -> None:
        """Offer a batch's rows the run writes: int64 source row numbers, their conversations
        and their tools (None: no tools column)."""
        keys = row_keys(rows)
        heap = self._heap
        cand = range(len(keys)) if len(heap) < self.k else np.nonzero(keys < -heap[0][0])[0].tolist()
        for i in cand:
            item = (-int(keys[i]), int(rows[i]), values[i], tools[i] if tools is not None else None)
            if len(heap) < self.k:
                heapq.heappush(heap, item)
            elif item[0] > heap[0][0]:
                heapq.heapreplace(heap, item)

    def taken(self) -> list[tuple[int, Any, Any]]:
        """``(row, messages, tools)`` of the sample, by row number."""
        return sorted((r, m, t) for _, r, m, t in self._heap) if self._heap else []


def unit_sample_size(cfg, tokenizer) -> int:
    """How many conversations each unit's worker compares with the tokenizer's chat template:
    ``parity.chat_live_sample``, or 0 when the run does not compare (not sft, ``parity.chat =
    false``, ``chat.format = "template"`` or still ``"auto"``, no chat template, jinja2 not
    installed: the parity stage says which; a Ray worker without jinja2 skips it too)."""
    from .chat.render import jinja_available

    if cfg.pipeline != "sft" or cfg["parity"]["chat"] is False or cfg["chat"]["format"] in ("template", "auto"):
        return 0
    k = cfg["parity"]["chat_live_sample"]
    return k if k and getattr(tokenizer, "chat_template", None) and jinja_available() else 0


def check_unit_sample(sample: UnitSample, cfg, tokenizer, unit) -> dict[str, int]:
    """Render a unit's sample with the tokenizer's chat template and compare it with
    ``chat.format``'s text (:func:`rmlprep.chat_parity.live_chat_check`), in row order (the
    conversations as the run writes them: system column applied, ``chat.json_tools``
    converted).

    Returns:
        ``{"compared": n, "invalid": k, "arguments_from_string": m}``.
    Raises:
        ParityError: the first difference, naming the file and row and the ways on (the run adds
            what a rerun keeps: :func:`rmlprep.pipeline.driver._unit_errors`).
    """
    from .chat.convert import json_tools

    convert = cfg["chat"].get("json_tools")
    convs = []
    for r, m, t in sample.taken():
        try:
            m, t = json_tools(m, t)[:2] if convert else (m, t)
        except ChatFormatError:  # a call to an undefined tool: a reject of the run (not offered)
            continue
        convs.append((m, t, f"{unit.path} row {r}"))
    chat = cfg["chat"]
    bos, eos = token_text(tokenizer, tokenizer.spec.bos_id), token_text(tokenizer, tokenizer.spec.eos_id)
    try:
        return live_chat_check(chat["format"], tokenizer.chat_template, convs, bos_token=bos, eos_token=eos,
                               add_generation_prompt=chat["add_generation_prompt"], options=chat["options"] or {},
                               no_assistant=chat["no_assistant"], max_invalid=len(convs) + 1,
                               label=f"a conversation sampled from unit {unit.index}")
    except ParityError as e:
        raise ParityError(e.text, e.position, e.expected, e.actual, source=e.source, message=(
            f"{e}\n  (checked by the worker of unit {unit.index}, whose shard is not written; chat.format = "
            "\"template\" is another config: a new output folder, or --overwrite)")) from None
