"""The text map function: a text column -> ``input_ids`` and ``length`` (:func:`tokenize_text`).

Its output columns, batch kinds, errors and pickling are those of every map function, described
in :mod:`rmlprep.arrow` (which re-exports it); the shared machinery is :mod:`rmlprep.arrow_base`.

Source: the batched-map contract of ``datasets`` (``arrow_dataset.py`` ``map``); the ids are
``Tokenizer.encode_batch``'s (:func:`rmlprep.native.encode_batch_flat`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .arrow_base import _EMPTY, _MapFunction, _flatten, _offsets, _replace_surrogates
from .errors import ConfigError, RmlprepError
from .spec import TokenizerSpec
from .tokenizer import Tokenizer
from .tokenizer_many import _flag

__all__ = ["TokenizeText", "tokenize_text"]

class TokenizeText(_MapFunction):
    """Map function: a text column -> ``input_ids`` (list<uint32>) and ``length`` (int32).

    Build it with :func:`tokenize_text`; see the module docstring for the output types.
    """

    _what = "text"

    def _encode(self, values: list, where, column=None):
        n = len(values)
        errors: dict[int, str] = {}
        good: list[int] | None = None
        if n and set(map(type, values)) != {str}:
            good = []
            for i, v in enumerate(values):
                if isinstance(v, str):
                    good.append(i)
                elif v is None:
                    self._fail(i, f"{self.column!r} is null", where, errors)
                else:
                    self._fail(i, f"{self.column!r} is {type(v).__name__}, expected str", where, errors)
            texts = [values[i] for i in good]
        else:
            texts = values
        flags: dict[str, np.ndarray] = {}
        if getattr(self, "surrogates_column", None):
            texts, replaced = _replace_surrogates(texts)
            flags[self.surrogates_column] = np.zeros(n, dtype=bool)
            flags[self.surrogates_column][replaced if good is None else np.asarray(good, dtype=np.int64)[replaced]] = True
            self._stats["surrogate_rows"] += len(replaced)
        tok = self.tokenizer
        try:  # the common case: one flat native call, Arrow-ready (see Tokenizer.encode_batch_flat)
            flat, offs = tok.encode_batch_flat(
                texts, add_special_tokens=self.add_special_tokens, parse_special=self.parse_special
            )
        except RmlprepError:
            pass  # find the failing rows one by one below
        else:
            if good is None:
                return [(self.output_column, flat, offs)], errors, flags
            lengths = np.zeros(n, dtype=np.int64)
            lengths[good] = np.diff(offs)  # rows left out are empty; good is ascending
            return [(self.output_column, flat, _offsets(lengths))], errors, flags
        id_lists = self._encode_texts(texts, good, where, errors)
        if good is not None:
            full: list[Any] = [_EMPTY] * n
            for k, i in enumerate(good):
                full[i] = id_lists[k]
            id_lists = full
        lengths = np.fromiter(map(len, id_lists), dtype=np.int64, count=n)
        return [(self.output_column, _flatten(id_lists), _offsets(lengths))], errors, flags

    def _encode_texts(self, texts: list[str], good: list[int] | None, where, errors) -> list:
        """One ``encode_batch`` call for all good texts; per row only to find a failing one."""
        tok = self.tokenizer
        kw = {"add_special_tokens": self.add_special_tokens, "parse_special": self.parse_special}
        try:
            return tok.encode_batch(texts, **kw)
        except RmlprepError:
            pass
        out: list[Any] = []
        for k, t in enumerate(texts):
            i = good[k] if good is not None else k
            try:
                out.append(tok.encode(t, **kw))
            except RmlprepError as e:
                self._fail(i, str(e), where, errors, e)
                out.append(_EMPTY)
        return out


def tokenize_text(
    tokenizer: Tokenizer | TokenizerSpec,
    *,
    column: str = "text",
    add_special_tokens: bool = True,
    parse_special: bool = False,
    on_error: str = "raise",
    output_column: str = "input_ids",
    length_column: str | None = "length",
    error_column: str = "error",
    id_column: str | None = "id",
    keep_columns: bool | None = None,
    surrogates_column: str | None = None,
) -> TokenizeText:
    """A map function that tokenizes a text column, for ``datasets.map(batched=True)`` or
    Arrow batches.

    Example::

        fn = tokenize_text(load_tokenizer("gpt2.tiktoken", name="gpt2"))
        ds = ds.map(fn, batched=True, num_proc=2, remove_columns=["text"])
        batch = fn(record_batch)  # RecordBatch in, RecordBatch out

    Args:
        tokenizer: an rmlprep Tokenizer (or a TokenizerSpec, built once here).
        column: the text column; each value must be a str.
        add_special_tokens: add BOS/EOS as the spec's add_bos/add_eos say.
        parse_special: cut special-token text (``"<|endoftext|>"``) out as its id. Off by
            default whatever the tokenizer's folder says: corpus text is data, not control
            (tiktoken ``encode_ordinary``). transformers' ``tokenizer(text)`` parses it unless
            the folder's config sets ``"split_special_tokens": true``: pass True for its ids
            on other folders; on such a folder the default already gives them (non-special
            added tokens such as ``<tool_call>`` stay one id either way), and True parses, as
            its ``split_special_tokens=False``. Source: transformers 4.57.1 and 5.24.0.
        on_error: ``"raise"``: RowError for the first bad row; ``"record"``: keep it with
            empty ids and its reason in ``error_column`` (see the module docstring).
        output_column: name of the ids column, list<uint32> (never uint16).
        length_column: name of the int32 length column, or None for none.
        error_column: name of the error column (only with ``on_error="record"``).
        id_column: a column whose value is named in error messages when present.
        keep_columns: return the input columns too. None (default): yes for Arrow input, no
            for a dict (``datasets`` merges them itself and honours ``remove_columns``).
        surrogates_column: name of a bool column, True for each row whose text held surrogate
            code points, or None (default) for none. Every row is encoded after
            :func:`rmlprep.segment.replace_lone_surrogates` (tiktoken's rule: a high+low pair
            becomes its character, a lone surrogate U+FFFD), with or without this column; it
            only reports where that changed the text (``fn.stats["surrogate_rows"]`` counts
            them). Arrow string columns are valid UTF-8 and never hold surrogates; Python strs
            from ``json.loads`` of ``"\\ud800"`` do.
    Returns:
        A picklable callable (see :class:`TokenizeText`); ``fn.stats`` counts rows, errors and
        tokens seen in this process.
    Raises:
        ConfigError: bad on_error or clashing output column names; a flag that is not True or
            False (``parse_special="false"`` would be read as True); ``add_special_tokens`` while
            the tokenizer's folder leaves ``add_bos_token`` / ``add_eos_token`` open
            (:meth:`TokenizerSpec.check_adds`: here, not as the same error on every row).
    """
    try:
        add_special_tokens = _flag("add_special_tokens", add_special_tokens)
        parse_special = _flag("parse_special", parse_special)
        if add_special_tokens:
            (tokenizer.spec if isinstance(tokenizer, Tokenizer) else tokenizer).check_adds()
    except RmlprepError as e:
        raise ConfigError(f"tokenize_text: {e}") from None
    return TokenizeText(tokenizer, {
        "column": column,
        "add_special_tokens": add_special_tokens,
        "parse_special": parse_special,
        "on_error": on_error,
        "output_column": output_column,
        "length_column": length_column,
        "error_column": error_column,
        "id_column": id_column,
        "keep_columns": keep_columns,
        "surrogates_column": surrogates_column,
    })
