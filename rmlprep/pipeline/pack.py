"""The pack stage of one unit: tokenized documents → the unit's table of packed rows.

**Tail rule (pretrain / concat packing).** Each unit is packed on its own, as one stream of
framed documents (``[bos] ids [eos]``) cut every ``seq_len`` tokens. The leftover of a unit —
fewer than ``seq_len`` tokens — is written as the **last row of that unit's shard, shorter
than seq_len** (its ``seq_lengths`` sum to its length). Nothing crosses a unit border, so
units stay independent, every token is kept, and the bytes do not depend on the number of
workers or on which units a rerun skips. At most one short row per shard; the manifest
counts them (``short_rows``). Inside a unit, documents are packed in chunks of about
:data:`CHUNK_TOKENS` with the partial fragments carried over, which gives exactly the rows of
one pack over the whole unit while holding one chunk in memory.

**SFT (BFD packing).** Best-fit-decreasing runs over all examples of a unit at once (a unit
holds at most ``input.unit_rows`` rows), so rows are not full-length; padding is counted
(and written only with ``pack.pad = true``).

Output columns: :data:`SCHEMAS` (``example_index`` numbers the unit's documents from 0).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ..config import RunConfig
from ..errors import ConfigError
from ..packing import from_numpy, pack_bfd, pack_concat, to_numpy
from .stages import Docs

__all__ = ["SCHEMAS", "CHUNK_TOKENS", "Packed", "pack_documents", "pack_conversations", "empty_table"]

CHUNK_TOKENS = 1 << 20  # concat packing: pack every ~1M tokens, carrying the partial tail

_LIST = {
    "input_ids": pa.list_(pa.uint32()),
    "labels": pa.list_(pa.int64()),
    "assistant_masks": pa.list_(pa.uint8()),
    "position_ids": pa.list_(pa.int32()),
    "seq_lengths": pa.list_(pa.int32()),
    "example_index": pa.list_(pa.int64()),
}
#: The packed table of each pipeline (one row per packed sequence).
SCHEMAS = {
    "pretrain": pa.schema([(k, _LIST[k]) for k in ("input_ids", "position_ids", "seq_lengths", "example_index")]),
    "sft": pa.schema([(k, _LIST[k]) for k in ("input_ids", "labels", "assistant_masks", "position_ids",
                                             "seq_lengths", "example_index")]),
}


@dataclass(slots=True)
class Packed:
    """A unit's packed rows and what packing did.

    Attributes:
        table: the rows, :data:`SCHEMAS` ``[pipeline]``.
        lengths: int64 [documents], tokens of each document packed (before framing).
        stats: ``dropped_documents``, ``dropped_tokens``, ``truncated_tokens``, ``over_long``
            (and ``split_examples`` for sft).
    """

    table: pa.Table
    lengths: np.ndarray
    stats: dict[str, int] = field(default_factory=dict)


def empty_table(pipeline: str) -> pa.Table:
    return SCHEMAS[pipeline].empty_table()


def _to_table(batches: list[pa.RecordBatch], pipeline: str) -> pa.Table:
    schema = SCHEMAS[pipeline]
    if not batches:
        return empty_table(pipeline)
    t = pa.Table.from_batches([b.select(schema.names) for b in batches])
    return t.cast(schema).combine_chunks()


def _cat(chunks: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(chunks).astype(dtype, copy=False) if chunks else np.zeros(0, dtype=dtype)


# -- pretrain: concat packing -------------------------------------------------------------------
def pack_documents(docs: Iterator[Docs], cfg: RunConfig, tokenizer) -> Packed:
    """Concat-pack a unit's documents (each framed with bos/eos as ``pack.bos``/``pack.eos``
    say) into rows of ``pack.seq_len``; the unit's leftover is the last, short row.

    Raises:
        ConfigError: ``pack.bos``/``pack.eos`` asked for and the tokenizer has no such id
            (checked before any document is read).
    """
    pack = cfg["pack"]
    bos = tokenizer.bos_id if pack["bos"] else None
    eos = tokenizer.eos_id if pack["eos"] else None
    if pack["bos"] and bos is None:
        raise ConfigError("pack.bos: the tokenizer has no bos id; set pack.bos = false")
    if pack["eos"] and eos is None:
        raise ConfigError("pack.eos: the tokenizer has no eos id; set pack.eos = false")
    packer = _ConcatPacker(pack["seq_len"], bos, eos, pack["overflow"])
    ids: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    all_lengths: list[np.ndarray] = []
    n_tokens = first = 0
    for d in docs:
        ids.append(d.ids)
        lengths.append(d.lengths)
        n_tokens += len(d.ids)
        if n_tokens >= CHUNK_TOKENS:
            lens = _cat(lengths, np.int64)
            packer.add(_cat(ids, np.uint32), lens, first)
            all_lengths.append(lens)
            first += len(lens)
            ids, lengths, n_tokens = [], [], 0
    lens = _cat(lengths, np.int64)
    packer.add(_cat(ids, np.uint32), lens, first, final=True)
    all_lengths.append(lens)
    stats = {"dropped_documents": packer.dropped, "dropped_tokens": packer.dropped_tokens,
             "truncated_tokens": packer.truncated_tokens, "over_long": packer.over_long}
    return Packed(_to_table(packer.rows, "pretrain"), np.concatenate(all_lengths), stats)


def _remap_example_index(rb: pa.RecordBatch, mapping: np.ndarray) -> pa.RecordBatch:
    col = rb.column(rb.schema.get_field_index("example_index"))
    flat = to_numpy(col.flatten())
    mapped = np.where(flat >= 0, mapping[np.maximum(flat, 0)], flat).astype(np.int64)
    offsets = to_numpy(col.offsets)
    offsets = offsets - offsets[0]
    new = pa.ListArray.from_arrays(from_numpy(offsets.astype(np.int32)), from_numpy(mapped))
    cols = [new if n == "example_index" else rb.column(i) for i, n in enumerate(rb.schema.names)]
    return pa.RecordBatch.from_arrays(cols, names=rb.schema.names)


class _ConcatPacker:
    """Concat packing of a unit's documents in chunks, identical to one pack of the unit."""

    def __init__(self, seq_len: int, bos: int | None, eos: int | None, overflow: str):
        self.seq_len, self.bos, self.eos, self.overflow = seq_len, bos, eos, overflow
        self.rows: list[pa.RecordBatch] = []
        self._no_carry()
        self.dropped = 0
        self.dropped_tokens = 0
        self.truncated_tokens = 0
        self.over_long = 0

    def _no_carry(self) -> None:
        self.carry_vals = np.zeros(0, dtype=np.uint32)
        self.carry_offs = np.zeros(1, dtype=np.int64)
        self.carry_idx = np.zeros(0, dtype=np.int64)

    def add(self, vals: np.ndarray, lengths: np.ndarray, first_doc: int, final: bool = False) -> None:
        n = len(lengths)
        b = int(self.bos is not None)
        e = int(self.eos is not None)
        offs = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offs[1:])
        if b or e:  # frame here so carried fragments are never framed twice
            framed_len = lengths + b + e
            foffs = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(framed_len, out=foffs[1:])
            fv = np.empty(int(foffs[-1]), dtype=np.uint32)
            mask = np.ones(len(fv), dtype=bool)
            if b:
                fv[foffs[:-1]] = self.bos
                mask[foffs[:-1]] = False
            if e:
                fv[foffs[1:] - 1] = self.eos
                mask[foffs[1:] - 1] = False
            fv[mask] = vals
            vals, offs = fv, foffs
        # carried fragments first; they are < seq_len so overflow never touches them
        k = len(self.carry_idx)
        all_vals = np.concatenate([self.carry_vals, vals])
        all_offs = np.concatenate([self.carry_offs, offs[1:] + self.carry_offs[-1]])
        mapping = np.concatenate([self.carry_idx, np.arange(first_doc, first_doc + n, dtype=np.int64)])
        if len(mapping) == 0:
            return
        res = pack_concat((all_vals, all_offs), seq_len=self.seq_len, overflow=self.overflow)
        self.dropped += res.stats.dropped_documents
        self.dropped_tokens += res.stats.dropped_tokens
        self.truncated_tokens += res.stats.truncated_tokens
        self.over_long += int(np.sum(res.over_long >= k))
        if res.rows.num_rows:
            self.rows.append(_remap_example_index(res.rows, mapping))
        tail = res.tail
        if final:
            if tail.num_rows:
                self.rows.append(_remap_example_index(tail, mapping))
            self._no_carry()
            return
        if tail.num_rows:
            tv = to_numpy(tail.column(0).flatten()).astype(np.uint32)
            sl = to_numpy(tail.column(tail.schema.get_field_index("seq_lengths")).flatten()).astype(np.int64)
            ei = to_numpy(tail.column(tail.schema.get_field_index("example_index")).flatten())
            self.carry_vals = tv
            self.carry_offs = np.concatenate([[0], np.cumsum(sl)]).astype(np.int64)
            self.carry_idx = mapping[ei]
        else:
            self._no_carry()


# -- sft: best-fit-decreasing -------------------------------------------------------------------
def pack_conversations(docs: Iterator[Docs], cfg: RunConfig, tokenizer) -> Packed:
    """Best-fit-decreasing packing of a unit's encoded conversations into rows of at most
    ``pack.seq_len`` tokens, padded with the pad (else eos) id when ``pack.pad = true``.

    Raises:
        ConfigError: ``pack.pad`` and the tokenizer has neither a pad nor an eos id.
    """
    pack = cfg["pack"]
    pad_id = None
    if pack["pad"]:
        pad_id = tokenizer.spec.pad_id if tokenizer.spec.pad_id is not None else tokenizer.eos_id
        if pad_id is None:
            raise ConfigError("pack.pad: the tokenizer has neither a pad nor an eos id; set pack.pad = false")
    parts: dict[str, list[np.ndarray]] = {"ids": [], "labels": [], "masks": [], "lengths": []}
    for d in docs:
        parts["ids"].append(d.ids)
        parts["labels"].append(d.labels)
        parts["masks"].append(d.masks)
        parts["lengths"].append(d.lengths)
    lens = _cat(parts["lengths"], np.int64)
    if not len(lens):
        stats = {"dropped_documents": 0, "dropped_tokens": 0, "truncated_tokens": 0, "over_long": 0,
                 "split_examples": 0}
        return Packed(empty_table("sft"), lens, stats)
    offs = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offs[1:])
    res = pack_bfd((_cat(parts["ids"], np.uint32), offs), (_cat(parts["labels"], np.int64), offs),
                   seq_len=pack["seq_len"], overflow=pack["overflow"], pad_id=pad_id,
                   assistant_masks=(_cat(parts["masks"], np.uint8), offs))
    st = res.stats
    stats: dict[str, Any] = {"dropped_documents": st.dropped_documents, "dropped_tokens": st.dropped_tokens,
                             "truncated_tokens": st.truncated_tokens, "over_long": st.over_long,
                             "split_examples": st.split_examples}
    return Packed(_to_table([res.rows], "sft"), lens, stats)
