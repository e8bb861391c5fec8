"""The pack stage of one unit: tokenized documents → the unit's packed rows, as a stream.

**Tail rule (pretrain / concat packing).** Each unit is packed on its own, as one stream of
framed documents (``[bos] ids [eos]``) cut every ``seq_len`` tokens. The leftover of a unit —
fewer than ``seq_len`` tokens — is written as the **last row of that unit's shard, shorter
than seq_len** (its ``seq_lengths`` sum to its length). Nothing crosses a unit border, so
units stay independent, every token is kept, and the bytes do not depend on the number of
workers or on which units a rerun skips. At most one short row per shard; the manifest
counts them (``short_rows``) and the room they leave below ``seq_len`` (``unfilled_tokens``). Inside a unit, documents are packed in chunks of about
:data:`CHUNK_TOKENS` with the partial fragments carried over, which gives exactly the rows of
one pack over the whole unit while holding one chunk in memory.

**SFT (BFD packing).** Best-fit-decreasing runs over windows of ``input.unit_rows``
consecutive conversations of a unit, one window after the other (a Parquet or ``datasets``
unit is one window; a JSONL byte range, a compressed file or a CSV may hold several), so
rows are not full-length; padding is counted (and written only with ``pack.pad = true``).

**Dropped documents are rejects.** With ``pack.overflow = "drop"`` a document longer than
``seq_len`` (pretrain: with its bos/eos) is left out of the rows and written to the unit's
``rejects/`` file with its source file, row, the reason (:func:`dropped_reason`), stage
``pack`` and its value as read, like a row an earlier stage refused
(:meth:`.stages.Tally.reject_packed`; the tokenize stage keeps the values of the documents
long enough to be left out, :attr:`.stages.Docs.held`); it is not counted in the
unit's ``documents``, ``tokens`` or length histogram (``dropped_documents`` and
``dropped_tokens`` count it), so ``rows_read = documents + rejects`` still holds. Which
documents are dropped depends only on their lengths, so the rejects are the same for any
number of workers and on resume; ``example_index`` keeps numbering the documents that reached
the pack stage (a dropped one leaves its number unused), so it is not the input row (the
README's "Joining rows back to the input" gives the join).

**Truncation that trains nothing is a reject (sft)**: see :mod:`.untrained`.

**Streaming.** A pack function returns a :class:`Packed`: the rows as a stream of tables that
the writer pulls (and with them every stage before), and the counts of the done marker, which
are final once the stream is spent.

Output columns: :data:`SCHEMAS` (``example_index`` numbers the unit's documents from 0; the
Parquet writer adds the unit's number as the ``unit`` column, :data:`.writers.UNIT_FIELD`).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from ..config import RunConfig
from ..packing import from_numpy, pack_bfd, pack_concat, to_numpy
from ..packing.arrays import list_values
from .framing import Framing, framing
from .stages import Docs, Tally
from .untrained import untrained_after_truncation, untrained_chunks, untrained_reason, without

__all__ = ["SCHEMAS", "CHUNK_TOKENS", "Packed", "pack_documents", "pack_conversations", "empty_table",
           "HIST_BINS_PER_OCTAVE", "hist_edges", "length_hist", "Framing", "framing", "dropped_reason",
           "unfilled_tokens"]

CHUNK_TOKENS = 1 << 20  # concat packing: pack every ~1M tokens, carrying the partial tail

HIST_BINS_PER_OCTAVE = 4
_HIST_BINS = HIST_BINS_PER_OCTAVE * 26  # up to ~67M tokens per document


def hist_edges() -> np.ndarray:
    """Left edges (in tokens) of the document-length histogram bins: bin b holds lengths L
    with ``floor(4 * log2(L + 1)) == b``."""
    return 2.0 ** (np.arange(_HIST_BINS + 1) / HIST_BINS_PER_OCTAVE) - 1


def length_hist(lengths: np.ndarray) -> np.ndarray:
    """int64 [_HIST_BINS]: documents per length bin (see :func:`hist_edges`)."""
    b = np.floor(HIST_BINS_PER_OCTAVE * np.log2(lengths.astype(np.float64) + 1)).astype(np.int64)
    return np.bincount(np.minimum(b, _HIST_BINS - 1), minlength=_HIST_BINS)


_LIST = {
    "input_ids": pa.list_(pa.uint32()),
    "labels": pa.list_(pa.int32()),  # as tokenize_chat and pack_bfd give them (rmlprep.packing)
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


class Packed:
    """A unit's packed rows as a stream, and what packing did, counted as the rows go by.

    Iterate it once: it yields ``pa.Table`` pieces of :data:`SCHEMAS` ``[pipeline]`` in row
    order (the writer cuts them into row groups); only the piece being made is in memory. The
    counts are final once the iteration has ended.

    Attributes:
        schema: the rows' schema.
        documents: documents packed (after the tokenize stage's rejects, without the documents
            ``overflow = "drop"`` left out: those are rejects).
        tokens: their tokens, before framing.
        max_document_tokens: tokens of the longest document.
        length_hist: int64 [bins], documents per length bin (:func:`length_hist`).
        rows: rows yielded.
        short_rows: rows shorter than ``seq_len``.
        written_tokens: real tokens in the rows (pad runs of ``pack.pad`` not counted).
        values: each column's list values in the rows (tokens for the token columns, pieces
            for ``seq_lengths`` and ``example_index``), for :meth:`arrow_bytes`.
        stats: ``dropped_documents``, ``dropped_tokens``, ``truncated_tokens``, ``over_long``
            (and ``split_examples``, ``untrained_rejected``, ``untrained_chunks``,
            ``first_labels_masked`` for sft: fragments that start on an assistant token, whose
            first label :func:`rmlprep.pack_bfd` writes -100).
    """

    def __init__(self, pipeline: str, seq_len: int):
        self.schema = SCHEMAS[pipeline]
        self.seq_len = seq_len
        self.source: Iterator[pa.Table] = iter(())  # the packer's pieces, set by the pack function
        self._padded_rows = pipeline == "sft"  # rows may hold a pad run (example_index -1)
        self.documents = self.tokens = self.max_document_tokens = 0
        self.length_hist = length_hist(np.zeros(0, np.int64))
        self.rows = self.short_rows = self.written_tokens = 0
        self.values = dict.fromkeys(self.schema.names, 0)
        self.stats: dict[str, int] = {}

    def add_lengths(self, lengths: np.ndarray) -> None:
        """Count a batch of documents (int64 [n] tokens each)."""
        if len(lengths):
            self.documents += len(lengths)
            self.tokens += int(lengths.sum())
            self.max_document_tokens = max(self.max_document_tokens, int(lengths.max()))
            self.length_hist += length_hist(lengths)

    def _add_rows(self, piece: pa.Table) -> None:
        self.rows += piece.num_rows
        for name in self.values:
            for chunk in piece.column(name).chunks:
                offs = to_numpy(chunk.offsets)
                self.values[name] += int(offs[-1] - offs[0])
        for chunk in piece.column("input_ids").chunks:
            row_lens = np.diff(to_numpy(chunk.offsets))
            self.short_rows += int(np.sum(row_lens < self.seq_len))
            self.written_tokens += int(row_lens.sum())
        if self._padded_rows:  # pad runs are not written tokens
            for s, e in zip(piece.column("seq_lengths").chunks, piece.column("example_index").chunks):
                s_f, e_f = list_values(s), list_values(e)
                self.written_tokens -= int(s_f[e_f < 0].sum())

    def arrow_bytes(self, row_group_rows: int) -> int:
        """The rows' size in Arrow memory, the ``num_bytes`` of the dataset card's split: per row
        group and list column, its int32 offsets (rows + 1) and its values, and 4 bytes a row for
        the int32 ``unit`` column the Parquet writer adds (:data:`.writers.UNIT_FIELD`).
        ``datasets`` records the ``nbytes`` of the shards as pyarrow reads them, which may add a
        validity bitmap (1 bit a value) to some columns although no value is null: its figure is
        up to ~3% larger (it checks ``num_examples``, not this). Final once the rows are spent.

        Example: 5 rows in row groups of 4 (4 + 1), 100 input_ids in them: input_ids take
        4 x (5 + 2) + 4 x 100 = 428 bytes, the unit column 4 x 5 = 20.
        """
        groups = -(-self.rows // row_group_rows)
        return 4 * self.rows + sum(4 * (self.rows + groups) + self.schema.field(name).type.value_type.bit_width // 8 * n
                                   for name, n in self.values.items())

    def __iter__(self) -> Iterator[pa.Table]:
        while (box := [next(self.source, None)])[0] is not None:
            if box[0].num_rows:
                self._add_rows(box[0])
                yield box.pop()  # no name keeps the piece once the writer asks for the next


def unfilled_tokens(rows: int, written_tokens: int, seq_len: int) -> int:
    """The room ``rows`` rows of ``seq_len`` leave below it: ``rows * seq_len - written_tokens``
    (the pad runs of ``pack.pad`` are not written tokens, so they count as room).

    >>> unfilled_tokens(3, 2 * 2048 + 1500, 2048)  # two full rows and a last row of 1500
    548
    """
    return int(rows * seq_len - written_tokens)


def dropped_reason(tokens: int, seq_len: int, framing: str = "") -> str:
    """The reject reason of a document ``pack.overflow = "drop"`` leaves out.

    >>> dropped_reason(70, 64, "bos/eos")
    'document of 70 tokens with its bos/eos is longer than pack.seq_len = 64 (pack.overflow = "drop")'
    """
    with_ = f" with its {framing}" if framing else ""
    return (f"document of {tokens:,} tokens{with_} is longer than pack.seq_len = {seq_len} "
            '(pack.overflow = "drop")')


def _reject_dropped(tally: Tally, rows: np.ndarray, framed: np.ndarray, seq_len: int, framing_names: str,
                    values: dict[int, object]) -> None:
    for r, n in zip(rows.tolist(), framed.tolist()):
        tally.reject_packed(r, dropped_reason(n, seq_len, framing_names), values.get(r), kind="over_long_dropped")


def _held(docs: list[Docs]) -> dict[int, object]:
    """The values as read of the documents in ``docs`` the pack stage may leave out, by source row."""
    out: dict[int, object] = {}
    for d in docs:
        out.update(d.held)
    return out


def empty_table(pipeline: str) -> pa.Table:
    return SCHEMAS[pipeline].empty_table()


def _piece(batch: pa.RecordBatch, pipeline: str) -> pa.Table:
    """One packer batch as a table of the pipeline's schema (columns in order, 32-bit lists)."""
    schema = SCHEMAS[pipeline]
    table = pa.Table.from_batches([batch.select(schema.names)])
    # the packers build these types already; a cast would import pyarrow.compute in every worker
    return table if table.schema.equals(schema) else table.cast(schema)


def _cat(chunks: list[np.ndarray], dtype) -> np.ndarray:
    return np.concatenate(chunks).astype(dtype, copy=False) if chunks else np.zeros(0, dtype=dtype)


# -- pretrain: concat packing -------------------------------------------------------------------
def pack_documents(docs: Iterator[Docs], cfg: RunConfig, tokenizer, tally: Tally) -> Packed:
    """Concat-pack a unit's documents (each framed with bos/eos as ``pack.bos``/``pack.eos``
    say) into rows of ``pack.seq_len``; the unit's leftover is the last, short row.

    The rows stream out as they are cut: about :data:`CHUNK_TOKENS` tokens of documents are
    gathered, packed, and their full rows handed on, the partial last row carried into the next
    chunk. Memory: one chunk of ids and its rows, whatever the unit's size. Documents that
    ``pack.overflow = "drop"`` leaves out go to ``tally`` as rejects (module docstring).

    Raises:
        ConfigError: see :func:`framing` (checked here, before any document is read).
    """
    pack = cfg["pack"]
    ids = framing(cfg, tokenizer)
    seq_len = pack["seq_len"]
    packer = _ConcatPacker(seq_len, ids.bos, ids.eos, pack["overflow"])
    packed = Packed("pretrain", seq_len)
    extra = (ids.bos is not None) + (ids.eos is not None)
    names = "/".join(n for n, i in (("bos", ids.bos), ("eos", ids.eos)) if i is not None)
    dropped_tokens = 0  # the dropped documents' own tokens (the packer counts their framing too)

    def add(held: list[Docs], first: int, final: bool) -> list[pa.RecordBatch]:
        lens = _cat([d.lengths for d in held], np.int64)
        out = packer.add(held, lens, first, final=final)
        nonlocal dropped_tokens
        gone = packer.last_dropped
        if len(gone):
            rows = _cat([d.rows for d in held], np.int64)
            _reject_dropped(tally, rows[gone], lens[gone] + extra, seq_len, names, _held(held))
            dropped_tokens += int(lens[gone].sum())
            lens = np.delete(lens, gone)
        packed.add_lengths(lens)
        return out

    def pieces() -> Iterator[pa.Table]:
        held: list[Docs] = []  # the chunk's batches, packed as they are (no concatenation of their ids)
        n_tokens = first = 0
        for d in docs:
            held.append(d)
            n_tokens += len(d.ids)
            d = None
            if n_tokens >= CHUNK_TOKENS:
                n_docs = sum(len(h.lengths) for h in held)
                rbs = add(held, first, False)
                held, n_tokens = [], 0
                for rb in rbs:
                    yield _piece(rb, "pretrain")
                first += n_docs
        for rb in add(held, first, True):
            yield _piece(rb, "pretrain")
        packed.stats = {"dropped_documents": packer.dropped, "dropped_tokens": dropped_tokens,
                        "truncated_tokens": packer.truncated_tokens, "over_long": packer.over_long,
                        "empty_documents": packer.empty}

    packed.source = pieces()
    return packed


def _remap_example_index(rb: pa.RecordBatch, mapping: np.ndarray) -> pa.RecordBatch:
    col = rb.column(rb.schema.get_field_index("example_index"))
    flat = list_values(col)
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
        self._no_carry()
        self.last_dropped = np.zeros(0, dtype=np.int64)  # of the last add: indices into its documents
        self.dropped = 0
        self.truncated_tokens = 0
        self.over_long = 0
        self.empty = 0  # documents with no token (empty text, no bos/eos): counted, in no row

    def _no_carry(self) -> None:
        self.carry_vals = np.zeros(0, dtype=np.uint32)
        self.carry_offs = np.zeros(1, dtype=np.int64)
        self.carry_idx = np.zeros(0, dtype=np.int64)

    def add(self, parts: list[Docs], lengths: np.ndarray, first_doc: int, final: bool = False) -> list[pa.RecordBatch]:
        """Pack one chunk of documents (after the fragments carried from the previous chunk);
        return its full rows (and, when ``final``, the short last row).

        Args:
            parts: the chunk's tokenized batches, in document order.
            lengths: int64 [n], the lengths of their documents, one after another.
        """
        out: list[pa.RecordBatch] = []
        n = len(lengths)
        b = int(self.bos is not None)
        e = int(self.eos is not None)
        k, c = len(self.carry_idx), len(self.carry_vals)
        # one buffer: the carried fragments (shorter than seq_len, so overflow never touches
        # them), then the chunk's documents framed [bos] ids [eos] (framed here so carried
        # fragments are never framed twice), each batch's ids written in place: no
        # concatenation of the batches, then of the carry and the chunk
        foffs = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths + (b + e), out=foffs[1:])
        all_vals = np.empty(c + int(foffs[-1]), dtype=np.uint32)
        all_vals[:c] = self.carry_vals
        body = all_vals[c:]
        mask = None
        if b or e:
            mask = np.ones(len(body), dtype=bool)
            if b:
                body[foffs[:-1]] = self.bos
                mask[foffs[:-1]] = False
            if e:
                body[foffs[1:] - 1] = self.eos
                mask[foffs[1:] - 1] = False
        done = 0
        for d in parts:
            lo, hi = int(foffs[done]), int(foffs[done + len(d.lengths)])
            if mask is None:
                body[lo:hi] = d.ids
            else:
                body[lo:hi][mask[lo:hi]] = d.ids
            done += len(d.lengths)
        all_offs = np.concatenate([self.carry_offs, foffs[1:] + self.carry_offs[-1]])
        mapping = np.concatenate([self.carry_idx, np.arange(first_doc, first_doc + n, dtype=np.int64)])
        self.last_dropped = np.zeros(0, dtype=np.int64)
        if len(mapping) == 0:
            return out
        res = pack_concat((all_vals, all_offs), seq_len=self.seq_len, overflow=self.overflow)
        self.last_dropped = res.dropped - k  # carried fragments are shorter than seq_len: never dropped
        self.dropped += res.stats.dropped_documents
        self.empty += res.stats.empty_documents
        self.truncated_tokens += res.stats.truncated_tokens
        self.over_long += int(np.sum(res.over_long >= k))
        if res.rows.num_rows:
            out.append(_remap_example_index(res.rows, mapping))
        tail = res.tail
        if final:
            if tail.num_rows:
                out.append(_remap_example_index(tail, mapping))
            self._no_carry()
            return out
        if tail.num_rows:
            tv = list_values(tail.column(0)).astype(np.uint32)
            sl = list_values(tail.column(tail.schema.get_field_index("seq_lengths"))).astype(np.int64)
            ei = list_values(tail.column(tail.schema.get_field_index("example_index")))
            self.carry_vals = tv
            self.carry_offs = np.concatenate([[0], np.cumsum(sl)]).astype(np.int64)
            self.carry_idx = mapping[ei]
        else:
            self._no_carry()
        return out


# -- sft: best-fit-decreasing -------------------------------------------------------------------
_BFD_STATS = ("dropped_documents", "dropped_tokens", "truncated_tokens", "over_long", "split_examples")


def _split_docs(d: Docs, k: int) -> tuple[Docs, Docs]:
    """The first ``k`` documents of ``d`` and the rest."""
    t = int(d.lengths[:k].sum())
    return (Docs(d.ids[:t], d.lengths[:k], d.rows[:k], d.labels[:t], d.masks[:t], d.held),
            Docs(d.ids[t:], d.lengths[k:], d.rows[k:], d.labels[t:], d.masks[t:], d.held))  # held: by row


def pack_conversations(docs: Iterator[Docs], cfg: RunConfig, tokenizer, tally: Tally) -> Packed:
    """Best-fit-decreasing packing of a unit's encoded conversations into rows of at most
    ``pack.seq_len`` tokens, padded with the pad (else eos) id when ``pack.pad = true``.

    BFD places every conversation of a group before the first row is known, so it runs over
    **windows of** ``input.unit_rows`` **consecutive conversations** of the unit (the last one
    shorter), one after the other: a window's rows are written before the next window is read.
    A Parquet or ``datasets`` unit holds at most ``unit_rows`` rows, so it is one window; a
    JSONL byte range, a compressed file or a CSV file may hold more. ``example_index`` counts the
    unit's conversations across windows. Memory: one window's tokens and rows, whatever the unit
    size (see :mod:`rmlprep.pipeline`). Conversations that ``pack.overflow = "drop"`` leaves out
    go to ``tally`` as rejects (module docstring).

    Raises:
        ConfigError: see :func:`framing` (checked here, before any conversation is read).
    """
    pack = cfg["pack"]
    window = cfg["input"]["unit_rows"]
    pad_id = framing(cfg, tokenizer).pad
    packed = Packed("sft", pack["seq_len"])
    packed.stats = dict.fromkeys(_BFD_STATS, 0)
    untrained_rejected = pack["overflow"] == "truncate" and cfg["chat"]["no_assistant"] == "reject"  # .untrained
    packed.stats["untrained_rejected"] = 0  # every sft marker says how many (0 or more)
    packed.stats["untrained_chunks"] = 0  # split chunks that train nothing (.untrained), kept and counted
    packed.stats["first_labels_masked"] = 0  # fragments starting on an assistant token: label -100 (pack_bfd)

    def pack_window(held: list[Docs], first: int) -> Iterator[pa.Table]:
        lens = _cat([d.lengths for d in held], np.int64)
        if not len(lens):
            return
        src_rows = _cat([d.rows for d in held], np.int64)
        offs = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=offs[1:])
        ids = _cat([d.ids for d in held], np.uint32)
        labels = _cat([d.labels for d in held], np.int32)
        masks = _cat([d.masks for d in held], np.uint8)
        values = _held(held)
        held.clear()
        index = None  # the example_index of each conversation still packed
        if untrained_rejected:
            gone = untrained_after_truncation(masks, offs, pack["seq_len"])
            if len(gone):
                for r, n in zip(src_rows[gone].tolist(), lens[gone].tolist()):
                    tally.reject_packed(r, untrained_reason(n, pack["seq_len"]), values.get(r), kind="trains_nothing")
                packed.stats["untrained_rejected"] += len(gone)
                ids, labels, masks, lens, src_rows, offs, index = without(gone, ids, labels, masks, lens, src_rows, first)
                if not len(lens):
                    return
        if pack["overflow"] == "split":
            packed.stats["untrained_chunks"] += untrained_chunks(masks, offs, pack["seq_len"])
        res = pack_bfd((ids, offs), (labels, offs), seq_len=pack["seq_len"], overflow=pack["overflow"],
                       pad_id=pad_id, assistant_masks=(masks, offs))
        del ids, labels, masks
        if len(res.dropped):
            _reject_dropped(tally, src_rows[res.dropped], lens[res.dropped], pack["seq_len"], "", values)
        packed.add_lengths(np.delete(lens, res.dropped))
        starts = list_values(res.rows.column("position_ids")) == 0
        masked = list_values(res.rows.column("assistant_masks"))[starts]
        packed.stats["first_labels_masked"] += int(np.count_nonzero(masked))
        for k in _BFD_STATS:
            packed.stats[k] += getattr(res.stats, k)
        if index is None and first:
            index = np.arange(first, first + len(lens))
        rows = res.rows if index is None else _remap_example_index(res.rows, index)
        yield _piece(rows, "sft")
        del res, rows
        pa.default_memory_pool().release_unused()  # the allocator keeps freed pages otherwise

    def pieces() -> Iterator[pa.Table]:
        held: list[Docs] = []
        n = first = 0
        for d in docs:
            while n + len(d.lengths) >= window:  # a window is full: pack it before reading on
                head, d = _split_docs(d, window - n)
                held.append(head)
                yield from pack_window(held, first)
                first += window
                n = 0
            held.append(d)
            n += len(d.lengths)
            d = None
        if n:
            yield from pack_window(held, first)

    packed.source = pieces()
    return packed
