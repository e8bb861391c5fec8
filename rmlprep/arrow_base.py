"""The shared machinery of the Arrow-batch map callables of :mod:`rmlprep.arrow`.

This module owns what :class:`~rmlprep.arrow.TokenizeText` and :class:`~rmlprep.arrow.TokenizeChat`
have in common (:class:`_MapFunction`): pickling as the spec blob and options (with the
per-process tokenizer cache that rebuilds a Tokenizer once after unpickling), the batch kinds
(RecordBatch, Table, dict, list), row errors (raise or record) and the assembly of the output
columns; plus the flat-buffer / offsets helpers (:func:`count_errors` lives in
:mod:`rmlprep.arrow_stats`). :mod:`rmlprep.arrow` owns the two callables' encoding and their
public builders, and documents the output columns, the pickling format and the error rules; it
re-exports :func:`count_errors` and :data:`OUTPUT_VERSION`.

Source: the batched-map contract of ``datasets`` (``arrow_dataset.py`` ``map``,
``arrow_writer.py`` ``TypedSequence``).
"""

from __future__ import annotations

import json
import numbers
import sys
import threading
import zlib
from array import array
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from .arrow_stats import _LocalStats, count_errors  # noqa: F401 (count_errors: re-exported)
from .errors import ConfigError, RmlprepError, RowError
from .native import surrogate_rows
from .packing import from_numpy
from .readers.base import arrow_values, drop_struct_nulls
from .segment import replace_lone_surrogates
from .spec import TokenizerSpec
from .tokenizer import Tokenizer

__all__ = ["OUTPUT_VERSION", "count_errors"]

#: Bumped whenever the output of a callable changes for the same spec and options, so that
#: ``datasets`` fingerprints (and caches) computed by an older rmlprep are not reused.
OUTPUT_VERSION = 8  # 2: lone surrogates replaced as tiktoken does (rmlprep.segment)
# 3: an unbatched datasets.map call is one example (it was iterated as a batch: one row per character)
# 4: tools keep JSON's nulls, Arrow struct columns read without their null fields
# 5: ... in an unbatched datasets.map call too (its LazyRow's table types)
# 6: chat on a SentencePiece .model read alone: one '▁' per text between special tokens (cf67745;
#    llama2 on Llama 2's .model encodes where it was refused, on Mistral v3's is refused where it encoded)
# 7: qwen3 refuses an answer holding text its template drops (before <think>, between two </think>)
# 8: a content of two or more text parts is a row error for a format whose template takes a string, unless
#    join_text_parts is given (it was joined with ""); mistral-v3 on a .model read alone writes plain-text tool
#    results as mistral-common does (c4d7c9b, which raised no version)

_ON_ERROR = ("raise", "record")
_INT32_MAX = 2**31 - 1
_U32 = "I" if array("I").itemsize == 4 else "L"
_I32 = "i" if array("i").itemsize == 4 else "l"
_EMPTY: tuple[int, ...] = ()

# -- per-process tokenizer cache ------------------------------------------------------------
_CACHE_SIZE = 4
_TOKENIZERS: "OrderedDict[str, Tokenizer]" = OrderedDict()
_LOCK = threading.Lock()


def _remember(fingerprint: str, tokenizer: Tokenizer) -> None:
    with _LOCK:
        _TOKENIZERS[fingerprint] = tokenizer
        _TOKENIZERS.move_to_end(fingerprint)
        while len(_TOKENIZERS) > _CACHE_SIZE:
            _TOKENIZERS.popitem(last=False)


def _lookup(fingerprint: str) -> Tokenizer | None:
    with _LOCK:
        tok = _TOKENIZERS.get(fingerprint)
        if tok is not None:
            _TOKENIZERS.move_to_end(fingerprint)
        return tok


def _spec_blob(spec: TokenizerSpec) -> bytes:
    """The spec as zlib-compressed canonical JSON (sorted keys; same bytes in every process)."""
    text = json.dumps(spec.to_dict(), sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False)
    return zlib.compress(text.encode("utf-8", "surrogatepass"), 6)


def _spec_from_blob(blob: bytes) -> TokenizerSpec:
    return TokenizerSpec.from_dict(json.loads(zlib.decompress(blob).decode("utf-8", "surrogatepass")))


# -- Arrow helpers ----------------------------------------------------------------------------
def _offsets(lengths: np.ndarray) -> np.ndarray:
    """int64 offsets ``[0, l0, l0+l1, ...]`` of ``lengths`` (shape n -> n + 1)."""
    off = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    return off


def _flatten(id_lists: list) -> np.ndarray:
    """All ids of ``id_lists`` in one uint32 array.

    ``array.fromlist`` per row is about 4x faster than ``array(typecode, chain(...))`` or
    ``np.fromiter`` (22 vs 99 / 76 ms for 4.8 M ids in 120 k rows); other sequences are extended.
    """
    buf = array(_U32)
    fromlist = buf.fromlist
    for ids in id_lists:
        if type(ids) is list:
            fromlist(ids)
        else:
            buf.extend(ids)
    return np.frombuffer(buf, dtype=np.uint32)


def _list_array(flat: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """``list<flat.dtype>`` from one flat array and int64 offsets (large_list past int32)."""
    values = from_numpy(flat)
    if offsets[-1] <= _INT32_MAX:
        return pa.ListArray.from_arrays(from_numpy(offsets.astype(np.int32)), values)
    return pa.LargeListArray.from_arrays(from_numpy(offsets.astype(np.int64)), values)


def _row_views(flat: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """1-D object array of per-row views of ``flat`` (what ``datasets`` converts fastest)."""
    off = offsets.tolist()
    parts: list[Any] = [flat[a:b] for a, b in zip(off, off[1:])]  # 2x faster than np.split
    # the trailing None keeps numpy from building a 2-D array when all rows are equally long
    return np.array(parts + [None], dtype=object)[:-1]


# -- the callables ------------------------------------------------------------------------
def _values(batch: Any, name: str, is_arrow: bool) -> list:
    """Column ``name`` of a batch as Python values, the null fields of Arrow structs left out
    (:func:`rmlprep.readers.base.drop_struct_nulls`: Arrow pads every row's struct to the union
    of all rows' keys). A dict batch from ``datasets.map`` (its ``LazyBatch`` carries the Arrow
    table it formats, ``pa_table``) is cleaned by that table's column type; a plain dict of
    lists is taken as it is, nulls and all (JSON's nulls are real)."""
    if is_arrow:
        return arrow_values(batch.column(name))
    v = batch[name]
    v = v if isinstance(v, list) else list(v)
    table = getattr(batch, "pa_table", None)
    if isinstance(table, pa.Table) and name in table.schema.names:
        v = drop_struct_nulls(v, table.schema.field(name).type)
    return v


class _MapFunction(_LocalStats):
    """Shared machinery: pickling, batch kinds, error handling, output assembly."""

    def __init__(self, tokenizer: Tokenizer | TokenizerSpec, options: dict[str, Any]):
        if isinstance(tokenizer, TokenizerSpec):
            tokenizer = Tokenizer.create(tokenizer)
        if not isinstance(tokenizer, Tokenizer):
            raise ConfigError(
                f"{type(self).__name__}: expected an rmlprep Tokenizer or TokenizerSpec, got "
                f"{type(tokenizer).__name__}; build one with rmlprep.load_tokenizer(path)"
            )
        on_error = options.get("on_error")
        if on_error not in _ON_ERROR:
            raise ConfigError(f"on_error={on_error!r}: use 'raise' (the default) or 'record'")
        names = [options[k] for k in options if k.endswith("_column") and k not in ("column", "id_column")]
        names = [n for n in names if n is not None]
        if len(set(names)) != len(names):
            raise ConfigError(f"{type(self).__name__}: output column names {names} must be distinct")
        self._fingerprint = tokenizer.spec.fingerprint
        self._tokenizer: Tokenizer | None = tokenizer
        self._blob: bytes | None = None
        self._options = dict(options)
        for k, v in options.items():
            setattr(self, k, v)
        _remember(self._fingerprint, tokenizer)
        self._stats = {"batches": 0, "rows": 0, "errors": 0, "tokens": 0, "surrogate_rows": 0}

    # -- pickling: the spec and options, never the indexes --------------------------------
    def __getstate__(self) -> dict[str, Any]:
        if self._blob is None:
            self._blob = _spec_blob(self.tokenizer.spec)
        self._sent = True  # fn.stats of this object may stay empty (rmlprep.arrow_stats)
        return {
            "version": OUTPUT_VERSION,
            "fingerprint": self._fingerprint,
            "spec": self._blob,
            "options": dict(sorted(self._options.items())),
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._fingerprint = state["fingerprint"]
        self._blob = state["spec"]
        self._options = dict(state["options"])
        for k, v in self._options.items():
            setattr(self, k, v)
        self._tokenizer = None  # looked up or rebuilt on first use
        self._stats = {"batches": 0, "rows": 0, "errors": 0, "tokens": 0, "surrogate_rows": 0}

    @property
    def tokenizer(self) -> Tokenizer:
        """The Tokenizer (rebuilt once per process after unpickling)."""
        tok = self._tokenizer
        if tok is None:
            tok = _lookup(self._fingerprint)
            if tok is None:
                tok = Tokenizer.create(_spec_from_blob(self._blob))
                if tok.spec.fingerprint != self._fingerprint:
                    raise RmlprepError(
                        f"{type(self).__name__}: the pickled spec's fingerprint {tok.spec.fingerprint[:12]} "
                        f"differs from the recorded {self._fingerprint[:12]}; the pickle is corrupt"
                    )
                _remember(self._fingerprint, tok)
            self._tokenizer = tok
        return tok

    @property
    def fingerprint(self) -> str:
        """The tokenizer spec's fingerprint (sha256 hex)."""
        return self._fingerprint

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self._options.items())
        return f"{type(self).__name__}(spec={self._fingerprint[:12]}, {opts})"

    # -- calling ----------------------------------------------------------------------------
    def __call__(self, batch, indices: Sequence[int] | None = None, *, _one: bool = False, _typed: bool = False,
                 _alone: bool = False):
        """Tokenize one batch.

        Args:
            batch: a ``pyarrow.RecordBatch``, a ``pyarrow.Table``, a mapping of column name
                to a list of values (``datasets.map(batched=True)``), or the list of the
                column's values alone (``datasets.map(..., input_columns=[column])``). A
                mapping whose column holds one example (``datasets.map(fn)``, unbatched: a
                string or null, or for chat one conversation) is tokenized as one row and
                answered with one value per column.
            indices: the rows' dataset indices (``datasets.map(..., with_indices=True)``;
                an int for one example); only used in error messages.
        Returns:
            The same kind as ``batch``: a RecordBatch / Table with the input columns (unless
            ``keep_columns=False``) followed by the new ones (an input column of the same name is
            replaced), or a dict of the new columns (plus the input ones with
            ``keep_columns=True``). Column types are in the module docstring.
        Raises:
            RowError: ``on_error="raise"`` and a row cannot be tokenized.
            ConfigError: the batch has no column named ``column``, or is not a supported kind;
                ``input_columns`` naming a second column, which would arrive as ``indices``.
        """
        if isinstance(batch, list) or batch is None or isinstance(batch, str):
            if not _are_indices(indices):
                # datasets.map(..., input_columns=[column, other]) passes each column as its own
                # argument: the second came in as the indices and its values went unread
                raise ConfigError(
                    f"{type(self).__name__}: called with a second column of values where the dataset indices go "
                    f"(datasets.map(..., input_columns=[...]) naming more than one column passes each as its own "
                    f"argument, and the callable reads only {self.column!r} so); name only {self.column!r} in "
                    "input_columns, or leave input_columns out so the other columns are read by their names")
            batch, _alone = {self.column: batch}, True  # map(..., input_columns=[column]) passes the values alone
        if isinstance(batch, Mapping) and self.column in batch and (
                isinstance(indices, int) or type(batch).__name__ == "LazyRow"  # datasets' one-row mapping
                or self._one_example(batch[self.column])):
            return self._call_one(batch, indices, _alone)
        is_arrow = isinstance(batch, (pa.RecordBatch, pa.Table))
        if is_arrow:
            names = batch.schema.names
        elif isinstance(batch, Mapping):
            names = list(batch.keys())
        else:
            raise ConfigError(
                f"{type(self).__name__}: expected a pyarrow RecordBatch/Table or a dict of columns, "
                f"got {type(batch).__name__}"
            )
        col = self.column
        if col not in names:
            raise ConfigError(
                f"{type(self).__name__}: the batch has no column {col!r} (columns: {names}); "
                f"pass column=... to name the {self._what} column"
            )
        self._check_names(names)
        values = _values(batch, col, is_arrow)
        n = len(values)
        if not (is_arrow or _typed or isinstance(getattr(batch, "pa_table", None), pa.Table)) and _from_datasets():
            self._check_streamed(values, lambda name: batch[name] if name in names else None)
        if _alone:  # datasets.map(..., input_columns=[column]): no other column was seen
            self._check_alone(values)

        def where(i: int) -> str:
            parts = ["the example (an unbatched map)" if _one else f"row {i} of the batch"]
            if indices is not None:
                parts.append(f"dataset index {indices[i]}")
            idc = self.id_column
            if idc and idc != col and idc in names:
                v = batch.column(idc)[i].as_py() if is_arrow else batch[idc][i]
                parts.append(f"{idc}={v!r}")
            return ", ".join(parts)

        def column(name: str) -> list | None:
            """Another column's values (None when the batch has none)."""
            return _values(batch, name, is_arrow) if name in names else None

        columns, errors, flags = self._encode(values, where, column)
        self._stats["batches"] += 1
        self._stats["rows"] += n
        self._stats["errors"] += len(errors)
        offsets = columns[0][2]
        self._stats["tokens"] += int(offsets[-1])

        out: dict[str, Any] = {}
        if is_arrow:
            for name, flat, off in columns:
                out[name] = _list_array(flat, off)
            if self.length_column:
                out[self.length_column] = from_numpy(np.diff(offsets).astype(np.int32))
            for name, values in flags.items():
                out[name] = pa.array(values.tolist(), type=pa.bool_())  # no pandas import
            if self.on_error == "record":
                err = [None] * n
                for i, reason in errors.items():
                    err[i] = reason
                out[self.error_column] = pa.array(err, type=pa.string())
            return self._attach_arrow(batch, out)
        for name, flat, off in columns:
            out[name] = _row_views(flat, off)
        if self.length_column:
            out[self.length_column] = np.diff(offsets).astype(np.int32)
        out.update(flags)
        if self.on_error == "record":
            err = [""] * n
            for i, reason in errors.items():
                err[i] = reason
            out[self.error_column] = np.array(err, dtype=str) if n else np.array([], dtype=str)
        if self.keep_columns:
            return {**{k: batch[k] for k in names if k not in out}, **out}
        return out

    @staticmethod
    def _one_example(value) -> bool:
        """Whether a dict's column value is one example (``datasets.map(batched=False)``, the
        default) rather than a batch's list of them: a string or a null; the chat callable adds a
        conversation (a list of message dicts). ``datasets``' LazyRow is one example whatever its
        value (the batch's other columns are not formatted to tell: that would convert them all)."""
        return value is None or isinstance(value, (str, bytes, Mapping))

    def _check_streamed(self, values: list, column) -> None:
        """Rows that a ``datasets`` map turned from Arrow into plain Python with no table types
        to clean them by (:func:`_from_datasets`): the chat callable refuses those whose struct
        padding cannot be told from JSON nulls."""

    def _check_alone(self, values: list) -> None:
        """Refuse rows handed over as the column's values alone, no other column seen (a
        subclass's guard; :class:`~rmlprep.arrow.TokenizeChat`: tool calls whose tools go unread)."""

    def _check_names(self, names: list[str]) -> None:
        """Refuse a batch by its column names before any row is read (a subclass's guard;
        :class:`~rmlprep.arrow.TokenizeChat`: a tools column it would not read)."""

    #: the options naming the input columns the callable reads (one that is not set reads none)
    _READ = ("column", "id_column", "tools_column", "system_column")

    def _call_one(self, example: Mapping, index: int | None, alone: bool = False):
        """One example (``datasets.map(fn)`` without ``batched=True``): tokenized as a batch of one
        row, returned as a dict of one value per column (``input_ids`` a 1-D numpy array,
        ``length`` an int), which is what ``datasets`` expects from an unbatched map function.
        Arrow struct padding is left out by the row's table types, as in a batch (:func:`_values`).
        Only the columns the callable reads are formatted (all with ``keep_columns=True``); the
        others keep their names (for :meth:`_check_names`) and no value: ``datasets`` formats a
        LazyRow's column when it is read, which decodes an ``Image``/``Audio`` feature (Pillow,
        a codec) that rmlprep never uses, and fails on one it cannot decode. The names are checked
        first, so a refused column is refused before any value is formatted."""
        self._check_names(list(example.keys()))  # before any value is read: keep_columns=True reads them all
        table = getattr(example, "pa_table", None)  # datasets' LazyRow: its one-row Arrow table
        types = table.schema if isinstance(table, pa.Table) else None
        read = None if self.keep_columns else {getattr(self, k, None) for k in self._READ}
        batch = {}
        for k in example.keys():
            if read is not None and k not in read:
                batch[k] = [None]  # named, never read
                continue
            v = example[k]
            batch[k] = [drop_struct_nulls([v], types.field(k).type)[0] if types is not None and k in types.names
                        else v]
        out = self(batch, None if index is None else [index], _one=True, _typed=types is not None, _alone=alone)
        return {k: v[0] for k, v in out.items()}

    def _attach_arrow(self, batch, new: dict[str, pa.Array]):
        keep = self.keep_columns is None or self.keep_columns
        schema = batch.schema
        arrays: list[Any] = []
        fields: list[pa.Field] = []
        if keep:
            for i, f in enumerate(schema):
                if f.name not in new:
                    arrays.append(batch.column(i))
                    fields.append(f)
        for name, arr in new.items():
            arrays.append(arr)
            fields.append(pa.field(name, arr.type))
        out_schema = pa.schema(fields, metadata=schema.metadata if keep else None)
        if isinstance(batch, pa.RecordBatch):
            return pa.RecordBatch.from_arrays(arrays, schema=out_schema)
        arrays = [a if isinstance(a, pa.ChunkedArray) else pa.chunked_array([a], type=a.type) for a in arrays]
        return pa.Table.from_arrays(arrays, schema=out_schema)

    def _fail(self, i: int, reason: str, where, errors: dict[int, str], cause: BaseException | None = None):
        if self.on_error == "raise":
            raise RowError(
                f"{where(i)}: {reason}; fix the row, or pass on_error='record' to keep it with empty "
                f"ids and the reason in the {self.error_column!r} column",
                row=i,
                reason=reason,
            ) from cause
        errors[i] = reason

    _what = ""

    def _encode(
        self, values: list, where, column
    ) -> tuple[list[tuple[str, np.ndarray, np.ndarray]], dict[int, str], dict[str, np.ndarray]]:
        """(list columns as (name, flat, offsets), {row: error}, {name: one value per row})."""
        raise NotImplementedError


_DATASETS_MAPS = ("datasets.iterable_dataset", "datasets.arrow_dataset")


def _are_indices(indices) -> bool:
    """Whether ``indices`` is what ``datasets.map(..., with_indices=True)`` passes (None without
    it, an int for one example, a list of ints for a batch; a caller's integer numpy array too)
    and not another column's values."""
    if indices is None or isinstance(indices, numbers.Integral):
        return True
    if isinstance(indices, np.ndarray):
        return indices.ndim == 1 and np.issubdtype(indices.dtype, np.integer)
    return isinstance(indices, (list, tuple, range)) and all(isinstance(i, numbers.Integral) for i in indices)


def _from_datasets() -> bool:
    """Whether this call comes from a ``datasets`` map. Called for a batch with no Arrow table
    beside it: ``IterableDataset.map`` (``load_dataset(..., streaming=True)``,
    ``Dataset.to_iterable_dataset()``) and ``Dataset.map(..., input_columns=[...])`` hand plain
    dicts and lists made from Arrow tables by ``to_pylist``, with no column types to clean them by."""
    f = sys._getframe(2)
    for _ in range(12):
        if f is None:
            return False
        if f.f_globals.get("__name__") in _DATASETS_MAPS:
            return True
        f = f.f_back
    return False


def _calls_tools(messages) -> bool:
    """Whether a (written, so well-formed) conversation holds tool calls (``tool_calls``; calls
    written as JSON text in the content are counted apart, ``json_tool_calls_as_text``, and their
    definitions are usually text of the system message, which the model does see)."""
    return any(m.get("tool_calls") for m in messages if isinstance(m, Mapping))


def _replace_surrogates(texts: list[str]) -> tuple[list[str], list[int]]:
    """(texts with surrogates replaced, indices of the rows that changed): the rows found by the
    native scan of code units (:func:`rmlprep.native.surrogate_rows`), the rule of
    :func:`rmlprep.segment.replace_lone_surrogates`, as the pipeline's validate stage does."""
    changed = surrogate_rows(texts)
    if not changed:
        return texts, changed
    out = list(texts)
    for i in changed:
        out[i] = replace_lone_surrogates(out[i])
    return out, changed
