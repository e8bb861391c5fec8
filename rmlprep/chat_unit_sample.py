"""Which conversations of a unit its worker compares with the tokenizer's chat template
(``parity.chat_live_sample = N``, 1000 by default), as it goes: each conversation the unit
writes that is, when written, among the N of the unit so far whose row numbers hash lowest
(:func:`row_keys`, :class:`UnitSample`). So every conversation of a unit of N rows or fewer is
compared, and of a larger unit of n rows about N·(1 + ln(n/N)) spread over it (denser at its
head: row j is compared with chance N/j), the N that hash lowest of the whole unit (a uniform
sample without replacement) among them. They are rendered with the template by the worker that
processes the unit and compared with the format's text
(:func:`rmlprep.chat_parity.live_chat_check`) batch by batch, before the batch goes on to the
pack stage, so before the unit's shard is committed
(:func:`rmlprep.pipeline.chat_stages.format_and_tokenize`); the worker keeps N keys, no
conversation. The parity stage's check (:mod:`rmlprep.chat_sample`) reads the head of each unit
only: a template that differed from the format only on a conversation past it passed.

Measured (``taskset -c 0``, ``--workers 1``, Qwen2.5's tokenizer and template; load 2-4 from
other jobs): a render costs about 0.17 ms for a Topical-Chat conversation (660 tokens; the unit's
own processing, 0.6 ms) and 0.04 ms for a GSM8K one (0.15 ms), so comparing every conversation
adds 25-30% to a unit's processing. A whole run's CPU seconds (user+sys, median of 3) with the
check off / N = 20 / N = 1000: Topical-Chat (2,156 rows, units of 1,287 and 869; 2,125 compared
in the units at 1000, and 1,000 in the parity stage) 2.21 / 2.22 / 2.71; GSM8K (8,792 rows,
units of 6,029 and 2,763; 2,775 + 2,006 compared) 2.26 / 2.30 / 2.55. A 50,000-row unit compares
about 4,900 (10%). A trial's Qwen2.5 template keeping the last 13 messages differs from its format
on 3 of llamafactory-toolcall's 650 rows (90, 304, 392): 20 a unit missed them; 1000 compares
all 650.

The rows compared depend on the unit's rows alone, not on ``input.batch_rows``, the worker
count or the engine, so a rerun compares the same; the check never changes an output byte. A
difference is a :class:`~rmlprep.errors.ParityError` that stops the run
(:func:`rmlprep.pipeline.unit.work_unit`: fatal).
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from .chat_parity import live_chat_check
from .chat_sample import token_text
from .errors import ChatFormatError, ParityError

__all__ = ["row_keys", "UnitSample", "unit_sample_size", "UnitCheck"]


def row_keys(rows: np.ndarray) -> np.ndarray:
    """uint64 [len(rows)]: splitmix64 of each int64 source row number (a bijection, so two rows
    never share a key); the unit check compares the rows whose keys are lowest.

    Source: Steele, Lea and Flood, "Fast splittable pseudorandom number generators" (2014),
    the finalizer of ``java.util.SplittableRandom``."""
    z = np.asarray(rows, dtype=np.int64).astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class UnitSample:
    """The rows of one unit to compare, chosen as they are offered (in row order): a row whose
    :func:`row_keys` key is among the ``k`` lowest of the rows offered so far, itself included.

    Worked example, k = 2, keys of rows 0..4 = 50, 10, 40, 30, 20: rows 0 and 1 (fewer than 2
    so far), row 2 (40 < 50), row 3 (30 < 40), row 4 (20 < 30): all five. Keys 10, 50, 40, 30,
    20 give rows 0, 1, 2 (40 < 50), 3 (30 < 40), 4 (20 < 30); keys 10, 20, 30, 40, 50 give
    rows 0 and 1 only. The 2 lowest of the whole unit are always among them.

    Holds at most ``k`` keys (ints), never a conversation."""

    def __init__(self, k: int) -> None:
        self.k = k
        self._heap: list[int] = []  # the negated k lowest keys so far: -self._heap[0] is the highest of them

    def take(self, rows: np.ndarray) -> list[int]:
        """Offer a batch's rows the run writes (int64 source row numbers, increasing, after every
        row offered before); returns the positions in ``rows`` of those to compare."""
        keys = row_keys(rows)
        heap, k = self._heap, self.k
        cand = range(len(keys)) if len(heap) < k else np.nonzero(keys < np.uint64(-heap[0]))[0].tolist()
        out: list[int] = []
        for i in cand:
            key = int(keys[i])
            if len(heap) < k:
                heapq.heappush(heap, -key)
            elif key < -heap[0]:
                heapq.heapreplace(heap, -key)
            else:
                continue
            out.append(i)
        return out


def unit_sample_size(cfg, tokenizer) -> int:
    """The ``N`` of each unit's check (:class:`UnitSample`): ``parity.chat_live_sample``, or 0
    when the run does not compare (not sft, ``parity.chat = false``, ``chat.format =
    "template"`` or still ``"auto"``, no chat template, jinja2 not installed: the parity stage
    says which; a Ray worker without jinja2 skips it too)."""
    from .chat.render import jinja_available

    if cfg.pipeline != "sft" or cfg["parity"]["chat"] is False or cfg["chat"]["format"] in ("template", "auto"):
        return 0
    k = cfg["parity"]["chat_live_sample"]
    return k if k and getattr(tokenizer, "chat_template", None) and jinja_available() else 0


class UnitCheck:
    """One unit's live chat check: :meth:`check` each batch as the run writes it; ``compared``
    counts the conversations compared so far, ``written`` those offered (the format wrote them;
    the pack stage may still leave some out)."""

    def __init__(self, k: int, cfg, tokenizer, unit) -> None:
        self.sample = UnitSample(k)
        self.cfg, self.tokenizer, self.unit = cfg, tokenizer, unit
        self.compared = self.written = 0

    def check(self, rows: np.ndarray, values: list[Any], tools: list[Any] | None,
              ids: list[Any] | None = None) -> None:
        """Render the batch's rows :class:`UnitSample` takes with the tokenizer's chat template
        and compare them with ``chat.format``'s text (:func:`rmlprep.chat_parity.live_chat_check`),
        in row order, as the run writes them (system column applied, ``chat.json_tools``
        converted).

        Args:
            rows: int64 source row numbers of the conversations written, increasing.
            values: their conversations; tools: their tools (None: no tools column).
            ids: their token ids as the run wrote them: compared too, where the texts match, with
                the tokenizer's encoding of the template's render (``live_chat_check``'s ``ids``).
        Raises:
            ParityError: the first difference (text or ids), naming the file and row and the ways on (the run
                adds what a rerun keeps: :func:`rmlprep.pipeline.driver._unit_errors`).
        """
        from .chat.convert import json_tools

        cfg, tokenizer, unit = self.cfg, self.tokenizer, self.unit
        convert = cfg["chat"].get("json_tools")
        convs = []
        taken_ids: list[Any] | None = [] if ids is not None else None
        self.written += len(rows)
        for i in self.sample.take(rows):
            m, t = values[i], tools[i] if tools is not None else None
            try:
                m, t = json_tools(m, t)[:2] if convert else (m, t)
            except ChatFormatError:  # a call to an undefined tool: a reject of the run (not offered)
                continue
            convs.append((m, t, f"{unit.path} row {int(rows[i])}"))
            if taken_ids is not None:
                taken_ids.append(ids[i])
        if not convs:
            return
        chat = cfg["chat"]
        bos, eos = token_text(tokenizer, tokenizer.spec.bos_id), token_text(tokenizer, tokenizer.spec.eos_id)
        try:
            res = live_chat_check(chat["format"], tokenizer.chat_template, convs, bos_token=bos, eos_token=eos,
                                  add_generation_prompt=chat["add_generation_prompt"], options=chat["options"] or {},
                                  no_assistant=chat["no_assistant"], max_invalid=len(convs) + 1,
                                  join_text_parts=chat.get("join_text_parts"),
                                  label=f"a conversation sampled from unit {unit.index}", tokenizer=tokenizer,
                                  ids=taken_ids)
        except ParityError as e:
            raise ParityError(e.text, e.position, e.expected, e.actual, source=e.source, message=(
                f"{e}\n  (checked by the worker of unit {unit.index}, whose shard is not written; chat.format = "
                "\"template\" is another config: a new output folder, or --overwrite)")) from None
        self.compared += res["compared"]
