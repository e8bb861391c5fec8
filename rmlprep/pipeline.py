"""The main job: a config → packed Parquet shards, one per unit, parallel and resumable.

Stages (every stage after reading is a pure function of (unit, config, tokenizer))::

    plan units ─► parity (once, before any corpus work) ─► per unit, in a process pool
    (or a Ray task with ``run.engine = "ray"``, see :mod:`rmlprep.ray_engine`):
        read (bounded batches) ─► validate rows (bad ones → rejects/) ─► [sft: chat format]
        ─► tokenize ─► pack ─► write shard-NNNNN.parquet (tmp + rename) ─► rejects ─► done marker
    ─► manifest.json, stats.json, lengths.png, summary

**Tail rule (pretrain / concat packing).** Each unit is packed on its own, as one stream of
framed documents (``[bos] ids [eos]``) cut every ``seq_len`` tokens. The leftover of a unit —
fewer than ``seq_len`` tokens — is written as the **last row of that unit's shard, shorter
than seq_len** (its ``seq_lengths`` sum to its length). Nothing crosses a unit border, so
units stay independent, every token is kept, and the bytes do not depend on the number of
workers or on which units a rerun skips. At most one short row per shard; the manifest
counts them (``short_rows``). Inside a unit, documents are packed in chunks with the partial
fragments carried over, which gives exactly the rows of one pack over the whole unit.

**SFT (BFD packing).** Best-fit-decreasing runs over all examples of a unit at once (a unit
holds at most ``input.unit_rows`` rows), so rows are not full-length; padding is counted
(and written only with ``pack.pad = true``).

Rows that cannot be processed (null or non-string text, malformed messages, a conversation
the chat format refuses, bad JSON) go to ``rejects/rejects-NNNNN.jsonl`` with the source file,
row number and reason, and are counted in the manifest; the run goes on.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from . import __version__
from .config import RunConfig
from .arrow import tokenize_chat, tokenize_text
from .errors import ConfigError, RmlprepError
from .packing import IGNORE_INDEX, pack_bfd, pack_concat
from .readers import Batch, Unit, plan_units, read_unit
from .shards import (
    marker_name,
    rejects_name,
    shard_name,
    verify_done,
    write_done,
    write_json_atomic,
    write_lines_atomic,
    write_shard,
)

__all__ = ["run", "process_unit", "work_unit", "load_run_tokenizer", "open_tokenizer", "HIST_BINS_PER_OCTAVE", "hist_edges"]

_CHUNK_TOKENS = 1 << 20  # concat packing: pack every ~1M tokens, carrying the partial tail
HIST_BINS_PER_OCTAVE = 4
_HIST_BINS = HIST_BINS_PER_OCTAVE * 26  # up to ~67M tokens per document

_LIST = {
    "input_ids": pa.list_(pa.uint32()),
    "labels": pa.list_(pa.int64()),
    "assistant_masks": pa.list_(pa.uint8()),
    "position_ids": pa.list_(pa.int32()),
    "seq_lengths": pa.list_(pa.int32()),
    "example_index": pa.list_(pa.int64()),
}
SCHEMAS = {
    "pretrain": pa.schema([(k, _LIST[k]) for k in ("input_ids", "position_ids", "seq_lengths", "example_index")]),
    "sft": pa.schema([(k, _LIST[k]) for k in ("input_ids", "labels", "assistant_masks", "position_ids",
                                             "seq_lengths", "example_index")]),
}


def hist_edges() -> np.ndarray:
    """Left edges (in tokens) of the document-length histogram bins: bin b holds lengths L
    with ``floor(4 * log2(L + 1)) == b``."""
    return 2.0 ** (np.arange(_HIST_BINS + 1) / HIST_BINS_PER_OCTAVE) - 1


def _hist(lengths: np.ndarray) -> np.ndarray:
    b = np.floor(HIST_BINS_PER_OCTAVE * np.log2(lengths.astype(np.float64) + 1)).astype(np.int64)
    return np.bincount(np.minimum(b, _HIST_BINS - 1), minlength=_HIST_BINS)


# -- tokenizer --------------------------------------------------------------------------------
def load_run_tokenizer(cfg: RunConfig, log: Callable[[str], None] = print):
    """Load the config's tokenizer.

    ``tokenizer.path`` is anything :func:`rmlprep.load_tokenizer` reads (``name`` passed for
    tiktoken rank files), ``demo:gpt2`` (see :mod:`rmlprep.demo`), or a ``*.spec.json`` file
    holding ``TokenizerSpec.to_dict()``.

    Returns:
        (tokenizer, the file whose sha256 identifies it for parity fixtures, or None).
    Raises:
        ConfigError: the file is missing. LoaderError: it cannot be read.
    """
    return open_tokenizer(cfg["tokenizer"]["path"], name=cfg["tokenizer"]["name"], log=log)


def open_tokenizer(path: str, *, name: str | None = None, log: Callable[[str], None] = print):
    """Open a tokenizer by path (see :func:`load_run_tokenizer`); returns (tokenizer, file or None).

    Besides what :func:`rmlprep.load_tokenizer` reads, a JSON file holding a TokenizerSpec
    (``*.spec.json``) or a tokenizer fixture ``{"spec": ..., "cases": ...}`` (``fixtures/tokenizers/``)
    is accepted; a fixture then also serves as its own parity fixture.
    """
    if path.startswith("demo:"):
        from .demo import demo_tokenizer

        return demo_tokenizer(path[5:], log=log)
    if not os.path.exists(path):
        raise ConfigError(f"tokenizer.path: {path} does not exist")
    if path.endswith(".json") and os.path.isfile(path) and _is_spec_file(path):
        from .spec import TokenizerSpec
        from .tokenizer import Tokenizer

        d = json.loads(Path(path).read_text(encoding="utf-8"))
        spec = TokenizerSpec.from_dict(d["spec"] if "spec" in d and "vocab" not in d else d)
        if not spec.name:
            spec = spec.replace(name=Path(path).name.removesuffix(".json"))
        return Tokenizer.create(spec), path
    from .load import load_tokenizer

    kw = {"name": name} if name else {}
    t = load_tokenizer(path, **kw)
    ident = path
    if os.path.isdir(path):
        for cand in ("tokenizer.json", "tokenizer.model"):
            if os.path.exists(os.path.join(path, cand)):
                ident = os.path.join(path, cand)
                break
    return t, ident


def _is_spec_file(path: str) -> bool:
    """A ``TokenizerSpec.to_dict()`` JSON (``*.spec.json``) or an rmlprep tokenizer fixture
    (``{"spec": {...}, "cases": [...]}``, as in ``fixtures/tokenizers/``)."""
    if path.endswith(".spec.json"):
        return True
    with open(path, "rb") as f:
        head = f.read(4096)
    import re

    return re.match(rb'\s*\{\s*"(cases|spec|kind|vocab|generator)"', head) is not None and b'"model"' not in head[:64]


# -- stage: validate + tokenize ---------------------------------------------------------------
class _Rejects:
    def __init__(self, unit: Unit, limit_value: int = 300):
        self.unit = unit
        self.records: list[dict[str, Any]] = []
        self.limit = limit_value

    def add(self, row: int, reason: str, value: Any = None) -> None:
        rec = {"unit": self.unit.index, "source": self.unit.path if self.unit.format != "stdlib"
               else f"{self.unit.path}/{self.unit.files[row]}", "row": int(row), "reason": reason}
        if value is not None:
            r = repr(value)
            rec["value"] = r if len(r) <= self.limit else r[: self.limit] + "..."
        self.records.append(rec)


def _texts(batch: Batch, rejects: _Rejects, column: str) -> tuple[list[str], np.ndarray]:
    """Valid texts of a batch and their row numbers; others → rejects."""
    vals = batch.values
    if isinstance(vals, pa.Array):
        if vals.null_count == 0:
            return vals.to_pylist(), batch.rows
        vals = vals.to_pylist()
    keep_t: list[str] = []
    keep_r: list[int] = []
    for v, r in zip(vals, batch.rows.tolist()):
        if isinstance(v, str):
            keep_t.append(v)
            keep_r.append(r)
        elif v is None:
            rejects.add(r, f"{column} is null")
        else:
            rejects.add(r, f"{column} is a {type(v).__name__}, not a string", v)
    return keep_t, np.asarray(keep_r, dtype=np.int64)


def _check_messages(v: Any, column: str) -> str | None:
    if v is None:
        return f"{column} is null"
    if not isinstance(v, list):
        return f"{column} is a {type(v).__name__}, not a list of messages"
    if not v:
        return f"{column} is an empty list"
    for i, m in enumerate(v):
        if not isinstance(m, dict):
            return f"{column}[{i}] is a {type(m).__name__}, not an object with role and content"
        if not isinstance(m.get("role"), str):
            return f"{column}[{i}].role is missing or not a string"
        if not isinstance(m.get("content"), str):
            return f"{column}[{i}].content is missing or not a string"
    return None


class _Flat:
    """Token buffers as a list of numpy chunks + per-document lengths."""

    def __init__(self, with_labels: bool = False):
        self.ids: list[np.ndarray] = []
        self.labels: list[np.ndarray] | None = [] if with_labels else None
        self.masks: list[np.ndarray] | None = [] if with_labels else None
        self.lengths: list[int] = []
        self.n_tokens = 0

    def add_ids(self, ids: np.ndarray) -> None:
        self.ids.append(ids)
        self.n_tokens += len(ids)

    @staticmethod
    def cat(chunks: list[np.ndarray], dtype) -> np.ndarray:
        return np.concatenate(chunks).astype(dtype, copy=False) if chunks else np.zeros(0, dtype=dtype)

    def __len__(self) -> int:
        return len(self.lengths)


# -- stage: pack -------------------------------------------------------------------------------
def _remap_example_index(rb: pa.RecordBatch, mapping: np.ndarray) -> pa.RecordBatch:
    col = rb.column(rb.schema.get_field_index("example_index"))
    flat = col.flatten().to_numpy(zero_copy_only=False)
    mapped = np.where(flat >= 0, mapping[np.maximum(flat, 0)], flat).astype(np.int64)
    offsets = col.offsets.to_numpy()
    offsets = offsets - offsets[0]
    new = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(mapped))
    cols = [new if n == "example_index" else rb.column(i) for i, n in enumerate(rb.schema.names)]
    return pa.RecordBatch.from_arrays(cols, names=rb.schema.names)


class _ConcatPacker:
    """Concat packing of a unit's documents in chunks, identical to one pack of the unit."""

    def __init__(self, seq_len: int, bos: int | None, eos: int | None, overflow: str):
        self.seq_len, self.bos, self.eos, self.overflow = seq_len, bos, eos, overflow
        self.rows: list[pa.RecordBatch] = []
        self.carry_vals = np.zeros(0, dtype=np.uint32)
        self.carry_offs = np.zeros(1, dtype=np.int64)
        self.carry_idx = np.zeros(0, dtype=np.int64)
        self.dropped = 0
        self.dropped_tokens = 0
        self.truncated_tokens = 0
        self.over_long = 0

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
            self.carry_vals = np.zeros(0, dtype=np.uint32)
            self.carry_offs = np.zeros(1, dtype=np.int64)
            self.carry_idx = np.zeros(0, dtype=np.int64)
            return
        if tail.num_rows:
            tv = tail.column(0).flatten().to_numpy(zero_copy_only=False).astype(np.uint32)
            sl = tail.column(tail.schema.get_field_index("seq_lengths")).flatten().to_numpy().astype(np.int64)
            ei = tail.column(tail.schema.get_field_index("example_index")).flatten().to_numpy()
            self.carry_vals = tv
            self.carry_offs = np.concatenate([[0], np.cumsum(sl)]).astype(np.int64)
            self.carry_idx = mapping[ei]
        else:
            self.carry_vals = np.zeros(0, dtype=np.uint32)
            self.carry_offs = np.zeros(1, dtype=np.int64)
            self.carry_idx = np.zeros(0, dtype=np.int64)


def _empty_table(pipeline: str) -> pa.Table:
    return SCHEMAS[pipeline].empty_table()


def _to_table(batches: list[pa.RecordBatch], pipeline: str) -> pa.Table:
    schema = SCHEMAS[pipeline]
    if not batches:
        return _empty_table(pipeline)
    t = pa.Table.from_batches([b.select(schema.names) for b in batches])
    return t.cast(schema).combine_chunks()


# -- one unit ----------------------------------------------------------------------------------
def process_unit(unit: Unit, cfg: RunConfig, tokenizer, *, progress: Callable[[dict], None] | None = None) -> dict[str, Any]:
    """Run read → validate → (format) → tokenize → pack → write for one unit.

    Returns:
        the done-marker record (also written to ``shard-NNNNN.done.json``): counts, sha256,
        the document-length histogram and timings.
    """
    t0 = time.perf_counter()
    out_dir = cfg.output_dir
    pipeline = cfg.pipeline
    inp, tok, pack = cfg["input"], cfg["tokenizer"], cfg["pack"]
    column = inp["column"]
    rejects = _Rejects(unit)
    sft = pipeline == "sft"
    add_special, parse_special = tok["add_special_tokens"], tok["parse_special"]
    seq_len = pack["seq_len"]
    blank = 0
    nbytes = 0
    docs = 0  # documents (examples) that made it through tokenization
    lengths_all: list[np.ndarray] = []
    t_tok = 0.0
    t_pack = 0.0

    if not sft:
        bos = tokenizer.bos_id if pack["bos"] else None
        eos = tokenizer.eos_id if pack["eos"] else None
        if pack["bos"] and bos is None:
            raise ConfigError("pack.bos: the tokenizer has no bos id; set pack.bos = false")
        if pack["eos"] and eos is None:
            raise ConfigError("pack.eos: the tokenizer has no eos id; set pack.eos = false")
        packer = _ConcatPacker(seq_len, bos, eos, pack["overflow"])
        tok_fn = tokenize_text(tokenizer, column="text", add_special_tokens=add_special,
                               parse_special=parse_special, on_error="record", keep_columns=False,
                               id_column=None)
        texts_bad: set[int] = set()
        buf = _Flat()
        buf_first = 0
        for batch in read_unit(unit, column, inp["batch_rows"]):
            nbytes += batch.nbytes
            blank += batch.blank
            for r, why in batch.errors:
                rejects.add(r, why)
            ta = time.perf_counter()
            texts, _rows = _texts(batch, rejects, column)
            if texts:
                rb = pa.RecordBatch.from_arrays([pa.array(texts, type=pa.string())], names=["text"])
                res = tok_fn(rb)
                for i in np.flatnonzero(res.column("error").is_valid().to_numpy(zero_copy_only=False)):
                    rejects.add(int(_rows[i]), res.column("error")[int(i)].as_py())
                    texts_bad.add(int(i))
                ids_col = res.column("input_ids")
                buf.add_ids(ids_col.flatten().to_numpy(zero_copy_only=False).astype(np.uint32, copy=False))
                lens = res.column("length").to_numpy(zero_copy_only=False)
                if texts_bad:
                    keep = np.ones(len(lens), dtype=bool)
                    keep[sorted(texts_bad)] = False
                    lens = lens[keep]  # failed rows have no ids
                    texts_bad.clear()
                buf.lengths.extend(lens.tolist())
            t_tok += time.perf_counter() - ta
            if buf.n_tokens >= _CHUNK_TOKENS:
                tb = time.perf_counter()
                lens = np.asarray(buf.lengths, dtype=np.int64)
                lengths_all.append(lens)
                packer.add(_Flat.cat(buf.ids, np.uint32), lens, buf_first)
                buf_first += len(lens)
                docs += len(lens)
                buf = _Flat()
                t_pack += time.perf_counter() - tb
            if progress:
                progress({"bytes": batch.nbytes, "docs": len(texts), "tokens": 0})
        tb = time.perf_counter()
        lens = np.asarray(buf.lengths, dtype=np.int64)
        lengths_all.append(lens)
        packer.add(_Flat.cat(buf.ids, np.uint32), lens, buf_first, final=True)
        docs += len(lens)
        table = _to_table(packer.rows, pipeline)
        t_pack += time.perf_counter() - tb
        extra = {"dropped_documents": packer.dropped, "dropped_tokens": packer.dropped_tokens,
                 "truncated_tokens": packer.truncated_tokens, "over_long": packer.over_long}
    else:
        fmt = cfg["chat"]["format"]
        gen = cfg["chat"]["add_generation_prompt"]
        buf = _Flat(with_labels=True)
        chat_fn = tokenize_chat(tokenizer, fmt, column="messages", add_generation_prompt=gen,
                                on_error="record", keep_columns=False, id_column=None)
        for batch in read_unit(unit, column, inp["batch_rows"]):
            nbytes += batch.nbytes
            blank += batch.blank
            for r, why in batch.errors:
                rejects.add(r, why)
            ta = time.perf_counter()
            vals = batch.values.to_pylist() if isinstance(batch.values, pa.Array) else batch.values
            good: list[Any] = []
            good_rows: list[int] = []
            for v, r in zip(vals, batch.rows.tolist()):
                why = _check_messages(v, column)
                if why is not None:
                    rejects.add(r, why, v)
                else:
                    good.append(v)
                    good_rows.append(r)
            n_ok = 0
            if good:
                res = chat_fn({"messages": good})
                errs = res["error"]
                for i in range(len(good)):
                    if errs[i]:
                        rejects.add(good_rows[i], f"chat format {fmt!r}: {errs[i]}")
                        continue
                    buf.add_ids(res["input_ids"][i])
                    buf.labels.append(res["labels"][i])
                    buf.masks.append(res["assistant_masks"][i])
                    buf.lengths.append(int(res["length"][i]))
                    n_ok += 1
            t_tok += time.perf_counter() - ta
            if progress:
                progress({"bytes": batch.nbytes, "docs": n_ok, "tokens": 0})
        tb = time.perf_counter()
        lens = np.asarray(buf.lengths, dtype=np.int64)
        lengths_all.append(lens)
        docs = len(lens)
        offs = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=offs[1:])
        pad_id = None
        if pack["pad"]:
            pad_id = tokenizer.spec.pad_id if tokenizer.spec.pad_id is not None else tokenizer.eos_id
            if pad_id is None:
                raise ConfigError("pack.pad: the tokenizer has neither a pad nor an eos id; set pack.pad = false")
        if docs:
            res = pack_bfd((_Flat.cat(buf.ids, np.uint32), offs), (_Flat.cat(buf.labels, np.int64), offs),
                           seq_len=seq_len, overflow=pack["overflow"], pad_id=pad_id,
                           assistant_masks=(_Flat.cat(buf.masks, np.uint8), offs))
            table = _to_table([res.rows], pipeline)
            st = res.stats
            extra = {"dropped_documents": st.dropped_documents, "dropped_tokens": st.dropped_tokens,
                     "truncated_tokens": st.truncated_tokens, "over_long": st.over_long,
                     "split_examples": st.split_examples}
        else:
            table = _empty_table(pipeline)
            extra = {"dropped_documents": 0, "dropped_tokens": 0, "truncated_tokens": 0, "over_long": 0,
                     "split_examples": 0}
        t_pack += time.perf_counter() - tb

    lengths = np.concatenate(lengths_all) if lengths_all else np.zeros(0, np.int64)
    tokens = int(lengths.sum())
    # row accounting
    row_lens = np.diff(table.column("input_ids").combine_chunks().offsets.to_numpy()) if table.num_rows else np.zeros(0, np.int64)
    written = int(row_lens.sum())
    real = written
    if sft and pack["pad"] and table.num_rows:
        e_f = table.column("example_index").combine_chunks().flatten().to_numpy()
        s_f = table.column("seq_lengths").combine_chunks().flatten().to_numpy()
        real = int(s_f[e_f >= 0].sum())
    pad_tokens = int(table.num_rows * seq_len - real) if sft else 0
    short_rows = int(np.sum(row_lens < seq_len))
    meta = {
        "rmlprep.version": __version__,
        "rmlprep.tokenizer_fingerprint": tokenizer.fingerprint,
        "rmlprep.config_hash": cfg.config_hash,
        "rmlprep.unit": str(unit.index),
        "rmlprep.pipeline": pipeline,
        "rmlprep.seq_len": str(seq_len),
    }
    tw = time.perf_counter()
    digest = write_shard(out_dir / shard_name(unit.index), table, meta,
                         compression=cfg["output"]["compression"], row_group_rows=cfg["output"]["row_group_rows"])
    if rejects.records:
        write_lines_atomic(out_dir / rejects_name(unit.index), sorted(rejects.records, key=lambda r: r["row"]))
    t_write = time.perf_counter() - tw
    record = {
        "unit": unit.index,
        "source": unit.describe(),
        "shard": shard_name(unit.index),
        "sha256": digest,
        "config_hash": cfg.config_hash,
        "rows": table.num_rows,
        "short_rows": short_rows,
        "documents": docs,
        "rejects": len(rejects.records),
        "blank_lines": blank,
        "tokens": tokens,
        "written_tokens": real,
        "pad_tokens": pad_tokens,
        "padding_ratio": pad_tokens / (table.num_rows * seq_len) if table.num_rows else 0.0,
        "bytes": nbytes,
        "max_document_tokens": int(lengths.max()) if len(lengths) else 0,
        **extra,
        "length_hist": _hist(lengths).tolist() if len(lengths) else [0] * _HIST_BINS,
        "seconds": {"total": round(time.perf_counter() - t0, 4), "tokenize": round(t_tok, 4),
                    "pack": round(t_pack, 4), "write": round(t_write, 4)},
    }
    write_done(out_dir, unit.index, record)
    return record


# -- worker pool -------------------------------------------------------------------------------
_W: dict[str, Any] = {}


def _init_worker(cfg: RunConfig, tokenizer) -> None:
    _W["cfg"] = cfg
    _W["tok"] = tokenizer


def _work(unit: Unit) -> dict[str, Any]:
    return work_unit(unit, _W["cfg"], _W["tok"])


def work_unit(unit: Unit, cfg: RunConfig, tokenizer) -> dict[str, Any]:
    """:func:`process_unit` as an engine's worker runs it (process pool, Ray task): a unit that
    fails on purpose (RmlprepError) comes back as ``{"unit": i, "error": "..."}`` so the run can
    report every failed unit; any other exception is a bug and propagates."""
    try:
        return process_unit(unit, cfg, tokenizer)
    except RmlprepError as e:
        return {"unit": unit.index, "error": f"{type(e).__name__}: {e}"}


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        return os.cpu_count() or 1


# -- progress ----------------------------------------------------------------------------------
class _Progress:
    def __init__(self, mode: str, total_bytes: int, n_units: int, log: Callable[[str], None]):
        if mode == "auto":
            mode = "bar" if sys.stderr.isatty() else "log"
        self.bar = None
        if mode == "bar":
            try:
                from tqdm import tqdm

                self.bar = tqdm(total=total_bytes, unit="B", unit_scale=True, unit_divisor=1_000_000,
                                desc="rmlprep", dynamic_ncols=True, file=sys.stderr)
            except ImportError:
                log("progress: tqdm is not installed (pip install tqdm); plain log lines instead")
                mode = "log"
        self.mode = mode
        self.log = log
        self.total_bytes = total_bytes
        self.n_units = n_units
        self.t0 = time.perf_counter()
        self.bytes = self.docs = self.tokens = self.done = 0

    def unit_done(self, rec: dict[str, Any], skipped: bool = False) -> None:
        self.done += 1
        if skipped:
            self.total_bytes -= rec.get("bytes", 0)
            if self.bar is not None:
                self.bar.total = self.total_bytes
                self.bar.refresh()
            return
        self.bytes += rec["bytes"]
        self.docs += rec["documents"]
        self.tokens += rec["tokens"]
        dt = max(time.perf_counter() - self.t0, 1e-9)
        rates = f"{self.docs / dt:,.0f} docs/s, {self.bytes / dt / 1e6:.2f} MB/s, {self.tokens / dt / 1e6:.2f} M tokens/s"
        if self.bar is not None:
            self.bar.update(rec["bytes"])
            self.bar.set_postfix_str(f"{self.docs / dt:,.0f} docs/s, {self.tokens / dt / 1e3:,.0f}k tok/s")
        elif self.mode == "log":
            left = self.total_bytes - self.bytes
            eta = left / (self.bytes / dt) if self.bytes else float("nan")
            self.log(f"[{self.done}/{self.n_units}] {rec['shard']}: {rec['documents']:,} docs, "
                     f"{rec['tokens']:,} tokens, {rec['rejects']} rejects | {rates}, ETA {eta:.0f}s")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# -- the run -----------------------------------------------------------------------------------
def _check_output_dir(out: Path, config_hash: str, overwrite: bool, resume: bool) -> None:
    markers = sorted(out.glob("shard-*.done.json")) if out.exists() else []
    other = []
    for m in markers:
        try:
            h = json.loads(m.read_text()).get("config_hash")
        except (OSError, ValueError):
            continue
        if h != config_hash:
            other.append(m.name)
    stale = other
    if stale and not overwrite:
        raise ConfigError(
            f"output.dir: {out} holds shards of a different config ({len(stale)} done markers, e.g. "
            f"{stale[0]}); pass --overwrite to replace them or choose another --output"
        )
    if overwrite and out.exists():
        for p in list(out.glob("shard-*")) + [out / n for n in ("manifest.json", "stats.json", "lengths.png")]:
            if p.exists():
                p.unlink()
        if (out / "rejects").exists():
            shutil.rmtree(out / "rejects")
    # temporaries of a killed run (never renamed): one run writes an output directory at a time
    if out.exists():
        for p in list(out.glob("*.tmp-*")) + list(out.glob("rejects/*.tmp-*")):
            p.unlink(missing_ok=True)


def run(cfg: RunConfig, *, resume: bool = False, overwrite: bool = False, tokenizer=None,
        log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run a config end to end and return the manifest.

    A rerun into the same output directory (with or without ``resume``) skips every unit whose
    done marker names this config and whose shard's sha256 matches it; other units are redone.
    Units run in a local process pool, or as Ray tasks with ``run.engine = "ray"``; the
    engine changes neither the bytes nor the config hash.

    Args:
        cfg: a validated :class:`RunConfig`.
        resume: say explicitly that a previous run is continued (logged; same behaviour).
        overwrite: delete shards of a different config in the output directory first.
        tokenizer: use this tokenizer instead of loading ``tokenizer.path`` (tests, libraries).
    Raises:
        ConfigError, LoaderError: bad config or tokenizer; Ray missing or its cluster out of
        reach. ParityError: the parity stage failed
        (nothing is processed). RmlprepError: a unit failed in a way that is not a bad row.
    """
    from .parity import run_parity_stage

    engine = cfg["run"]["engine"]
    if engine == "ray":
        from .ray_engine import require_ray

        require_ray()  # before any work: a missing Ray fails with the pip line
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    out = cfg.output_dir
    if tokenizer is None:
        tokenizer, tok_file = load_run_tokenizer(cfg, log=log)
    else:
        tok_file = None
    timings["load_tokenizer"] = time.perf_counter() - t_start
    t = time.perf_counter()
    units = plan_units(cfg["input"])
    timings["plan"] = time.perf_counter() - t
    if not units:
        raise ConfigError("input.paths: no input rows to process")
    t = time.perf_counter()
    parity = run_parity_stage(cfg, tokenizer, tok_file, units, log=log)
    timings["parity"] = time.perf_counter() - t

    out.mkdir(parents=True, exist_ok=True)
    chash = cfg.config_hash
    _check_output_dir(out, chash, overwrite, resume)
    records: dict[int, dict[str, Any]] = {}
    todo: list[Unit] = []
    redo_reasons: dict[str, int] = {}
    for u in units:
        m, why = verify_done(out, u.index, chash)
        if m is not None:
            records[u.index] = m
        else:
            todo.append(u)
            if why != "no done marker":
                redo_reasons[why] = redo_reasons.get(why, 0) + 1
    if records:
        log(f"resume: {len(records)} of {len(units)} units already done and verified (sha256); "
            f"{len(todo)} to process" + (f" ({redo_reasons})" if redo_reasons else ""))
    elif resume:
        log(f"resume: nothing done yet in {out}; processing all {len(units)} units")
    workers = cfg["run"]["workers"] or _cores()
    workers = max(1, min(workers, len(todo))) if todo else 1
    total_bytes = sum(u.nbytes for u in units)
    prog = _Progress(cfg["run"]["progress"], total_bytes, len(units), log)
    for rec in records.values():
        prog.unit_done(rec, skipped=True)
    how = "engine ray" if engine == "ray" else f"{workers} worker{'s' if workers != 1 else ''}"
    log(f"run: {len(units)} unit{'s' if len(units) != 1 else ''}, {total_bytes / 1e6:.1f} MB, {how}, "
        f"tokenizer {tokenizer.fingerprint[:12]}, output {out}")
    t = time.perf_counter()
    errors: list[str] = []

    def collect(rec: dict[str, Any]) -> None:
        if "error" in rec:
            errors.append(f"unit {rec['unit']}: {rec['error']}")
            return
        records[rec["unit"]] = rec
        prog.unit_done(rec)

    # largest units first balances the workers; the output does not depend on order
    order = sorted(todo, key=lambda u: (-u.nbytes, u.index))
    try:
        if engine == "ray" and todo:
            from .ray_engine import RayEngine

            with RayEngine(cfg["run"]["ray_address"], num_cpus=workers, log=log) as ray_engine:
                timings["engine_start"] = ray_engine.startup_seconds
                workers = ray_engine.workers
                t = prog.t0 = time.perf_counter()  # rates and ETA from the first task on
                for rec in ray_engine.imap_unordered(order, cfg, tokenizer):
                    collect(rec)
                timings["process"] = time.perf_counter() - t
                t = time.perf_counter()
            timings["engine_stop"] = time.perf_counter() - t
        elif workers == 1:
            for u in todo:
                rec = process_unit(u, cfg, tokenizer)
                records[u.index] = rec
                prog.unit_done(rec)
        else:
            import multiprocess

            with multiprocess.get_context("fork" if sys.platform != "win32" else "spawn").Pool(
                workers, initializer=_init_worker, initargs=(cfg, tokenizer)
            ) as pool:
                for rec in pool.imap_unordered(_work, order):
                    collect(rec)
    finally:
        prog.close()
    timings.setdefault("process", time.perf_counter() - t)
    if errors:
        raise RmlprepError("; ".join(errors[:5]) + (f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""))
    timings["total"] = time.perf_counter() - t_start
    manifest = _write_reports(cfg, tokenizer, units, records, parity, timings, workers, len(todo), log)
    return manifest


def _versions(engine: str) -> dict[str, str]:
    import platform

    v = {"rmlprep": __version__, "python": platform.python_version(), "pyarrow": pa.__version__,
         "numpy": np.__version__}
    if engine == "ray":
        import ray

        v["ray"] = ray.__version__
    try:
        import multiprocess

        v["multiprocess"] = multiprocess.__version__
    except ImportError:  # pragma: no cover
        pass
    return v


def _write_reports(cfg: RunConfig, tokenizer, units: list[Unit], records: dict[int, dict[str, Any]],
                   parity: dict[str, Any], timings: dict[str, float], workers: int, processed: int,
                   log: Callable[[str], None]) -> dict[str, Any]:
    out = cfg.output_dir
    recs = [records[u.index] for u in units]
    keys = ("rows", "short_rows", "documents", "rejects", "blank_lines", "tokens", "written_tokens",
            "pad_tokens", "bytes", "dropped_documents", "dropped_tokens", "truncated_tokens", "over_long")
    totals = {k: int(sum(r.get(k, 0) for r in recs)) for k in keys}
    seq_len = cfg["pack"]["seq_len"]
    totals["padding_ratio"] = totals["pad_tokens"] / (totals["rows"] * seq_len) if totals["rows"] else 0.0
    totals["rows_read"] = totals["documents"] + totals["rejects"]
    hist = np.sum([r["length_hist"] for r in recs], axis=0).astype(np.int64)
    wall = timings.get("process", 0.0)
    shards = [
        {k: r[k] for k in ("shard", "source", "sha256", "rows", "short_rows", "documents", "tokens",
                             "pad_tokens", "padding_ratio", "rejects", "bytes")}
        for r in recs
    ]
    rejects_files = [rejects_name(r["unit"]) for r in recs if r["rejects"]]
    manifest = {
        "rmlprep_version": __version__,
        "config": cfg.data,
        "config_file": cfg.source,
        "config_hash": cfg.config_hash,
        "tokenizer": {"fingerprint": tokenizer.fingerprint, "name": tokenizer.spec.name,
                      "vocab_size": tokenizer.vocab_size},
        "parity": parity,
        "tail_rule": ("pretrain: the leftover of each unit (< seq_len tokens) is the last, short row of "
                      "that unit's shard" if cfg.pipeline == "pretrain" else
                      "sft: best-fit-decreasing per unit; rows hold at most seq_len tokens"),
        "totals": totals,
        "shards": shards,
        "rejects": {"count": totals["rejects"], "files": rejects_files},
        "timings": {k: round(v, 3) for k, v in timings.items()},
        "engine": cfg["run"]["engine"],
        "workers": workers,
        "units_processed": processed,
        "units_skipped": len(units) - processed,
        "versions": _versions(cfg["run"]["engine"]),
    }
    write_json_atomic(out / "manifest.json", manifest)
    edges = hist_edges()
    nz = np.flatnonzero(hist)
    stats = {
        "totals": totals,
        "throughput": {
            "seconds": round(wall, 3),
            "documents_per_s": totals["documents"] / wall if wall and processed == len(units) else None,
            "mb_per_s": totals["bytes"] / 1e6 / wall if wall and processed == len(units) else None,
            "tokens_per_s": totals["tokens"] / wall if wall and processed == len(units) else None,
        },
        "document_tokens": {
            "max": max((r["max_document_tokens"] for r in recs), default=0),
            "mean": totals["tokens"] / totals["documents"] if totals["documents"] else 0.0,
            "hist_bins_per_octave": HIST_BINS_PER_OCTAVE,
            "hist": {f"{math.ceil(edges[b])}-{math.ceil(edges[b + 1]) - 1}": int(hist[b]) for b in nz},
        },
    }
    write_json_atomic(out / "stats.json", stats)
    if cfg["run"]["histogram"]:
        _histogram_png(out / "lengths.png", hist, log)
    log(summary_table(manifest, stats))
    return manifest


def _histogram_png(path: Path, hist: np.ndarray, log: Callable[[str], None]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("histogram: matplotlib is not installed (pip install matplotlib); lengths.png skipped")
        return
    edges = hist_edges() + 1
    nz = np.flatnonzero(hist)
    if not len(nz):
        return
    lo, hi = nz[0], nz[-1] + 1
    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    ax.stairs(hist[lo:hi], edges[lo:hi + 1], fill=True)
    ax.set_xscale("log")
    ax.set_xlabel("document length (tokens + 1, log scale)")
    ax.set_ylabel("documents")
    ax.set_title(f"Document lengths: {int(hist.sum()):,} documents")
    fig.tight_layout()
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}.png")
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, path)


def summary_table(manifest: dict[str, Any], stats: dict[str, Any]) -> str:
    """A plain-text summary of a run."""
    t = manifest["totals"]
    th = stats["throughput"]
    lines = [
        ("output", str(Path(manifest["config"]["output"]["dir"]))),
        ("shards", f"{len(manifest['shards'])} ({manifest['units_processed']} written, "
                   f"{manifest['units_skipped']} skipped as done)"),
        ("rows read", f"{t['rows_read']:,}"),
        ("documents", f"{t['documents']:,}"),
        ("rejects", f"{t['rejects']:,}" + (f" (see {manifest['config']['output']['dir']}/rejects/)" if t["rejects"] else "")),
        ("tokens", f"{t['tokens']:,}"),
        ("packed rows", f"{t['rows']:,} x {manifest['config']['pack']['seq_len']} ({t['short_rows']} short)"),
        ("padding", f"{t['pad_tokens']:,} tokens ({100 * t['padding_ratio']:.2f}%)"),
    ]
    if t["dropped_documents"] or t["truncated_tokens"]:
        lines.append(("over-long", f"{t['dropped_documents']:,} dropped, {t['truncated_tokens']:,} tokens truncated"))
    lines.append(("input", f"{t['bytes'] / 1e6:.2f} MB"))
    if th["mb_per_s"] is not None:
        lines.append(("speed", f"{th['documents_per_s']:,.0f} docs/s, {th['mb_per_s']:.2f} MB/s, "
                               f"{th['tokens_per_s'] / 1e6:.2f} M tokens/s ({th['seconds']:.2f} s, "
                               f"{manifest['workers']} worker{'s' if manifest['workers'] != 1 else ''}"
                               + (f", engine {manifest['engine']})" if manifest["engine"] != "local" else ")")))
    w = max(len(k) for k, _ in lines)
    return "\n".join(["summary", "-" * 60] + [f"{k:<{w}}  {v}" for k, v in lines])
