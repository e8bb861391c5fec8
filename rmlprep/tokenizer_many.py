"""The encode variants a :class:`~rmlprep.tokenizer.Tokenizer` builds on its ``encode``: batches
(:meth:`encode_batch`, :meth:`encode_batch_flat`, on threads through the native path), a numpy
array (:meth:`encode_to_numpy`) and tiktoken's name for ``parse_special=False``
(:meth:`encode_ordinary`). Each gives ``encode``'s ids for every text.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from . import native
from .errors import TokenizeError

__all__ = ["_ManyEncodings", "_flag"]


def _flag(name: str, value) -> bool:
    """``value`` of the flag ``name`` as a bool: True, False or a numpy bool, what tokenizers'
    ``encode`` takes (it refuses others with a TypeError).

    Raises:
        TokenizeError: any other value (``None``, ``"false"``, ``0``): a truthiness test would
            read ``"false"`` as True, and one path or another would differ.
    """
    if value is True or value is False:
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    raise TokenizeError(f"{name}={value!r}: give True or False")


def _texts(texts, method: str):
    """Refuse a ``texts`` argument whose iteration would not give the texts meant.

    tokenizers' ``encode_batch`` refuses a str ("Can't extract `str` to `Vec`") and a dict;
    iterating them would encode each character of a str, or the keys of a ``datasets`` batch.

    Raises:
        TokenizeError: ``texts`` is a str, bytes or a mapping.
    """
    if isinstance(texts, (str, bytes, bytearray)):
        raise TokenizeError(f"{method} takes a list of texts, got a {type(texts).__name__} (each character would be "
                            "encoded as a text of its own): pass [text], or call encode(text)")
    if isinstance(texts, Mapping):
        keys = list(texts)[:3]
        raise TokenizeError(f"{method} takes a list of texts, got a {type(texts).__name__} with keys {keys!r} (a "
                            "datasets batch?): pass its text column, e.g. batch['text']")
    return texts


def _not_text(method: str, i: int, item) -> TokenizeError:
    """The refusal of ``texts[i]``, an item that is not a str (None: a missing text)."""
    fix = " (drop or fill the missing texts first)" if item is None else ""
    return TokenizeError(f"{method}: texts[{i}] is {type(item).__name__} ({item!r:.40}), not str: every text "
                         f"must be a str{fix}")


def _first_not_text(method: str, texts, e: TokenizeError) -> TokenizeError:
    """:func:`_not_text` of the first item of ``texts`` (a sequence) that is not a str, else ``e``."""
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            return _not_text(method, i, t)
    return e


class _ManyEncodings:
    """Mixin of :class:`~rmlprep.tokenizer.Tokenizer` (uses its ``encode``, ``_add_special``,
    ``_native``, ``_fast_encode`` and ``_fast_array``)."""

    def _parse_flag(self, value) -> bool:
        """``parse_special`` as a bool: None is the tokenizer's default, True unless its folder's
        ``tokenizer_config.json`` sets ``"split_special_tokens": true`` (then False).

        Source: transformers 4.57.1 ``tokenization_utils_base.py`` (``split_special_tokens`` is
        read at init and is each call's default, ``kwargs.pop("split_special_tokens",
        self.split_special_tokens)``); 5.24.0 ``tokenization_utils_tokenizers.py`` (``if
        split_special_tokens is None: split_special_tokens = self.split_special_tokens``). Both
        set the backend's ``encode_special_tokens``, which reads special added tokens as text
        and still cuts the non-special ones: rmlprep's ``parse_special=False``.

        Raises:
            TokenizeError: any other value than True, False, a numpy bool or None.
        """
        if value is None:
            return not self.split_special_tokens
        return _flag("parse_special", value)

    def encode_to_numpy(self, text: str, *, add_special_tokens: bool = False,
                        parse_special: bool | None = None) -> np.ndarray:
        """:meth:`encode` as a numpy array (tiktoken's ``Encoding.encode_to_numpy``).

        The same ids as ``encode(text, add_special_tokens=..., parse_special=...)``, without a
        Python list and its int per id: the native path copies its uint32 ids into a buffer the
        array reads (4 bytes per id, where a list holds an 8-byte pointer per id).

        Returns:
            numpy array of uint32, shape (number of ids,); read-only when it comes from the native
            path, as tiktoken's (``.copy()`` for a writable one).
        Raises:
            as :meth:`encode`.
        """
        add_special_tokens = _flag("add_special_tokens", add_special_tokens)
        parse_special = self._parse_flag(parse_special)
        if self._fast_encode is not None:
            fast = self._fast_array
            if fast is None:
                fast = self._fast_array = native.plain_encoder(self, array=True)
            buf = fast(text, parse_special)
            if buf is not None:
                ids = np.frombuffer(buf, dtype=np.uint32)
                if add_special_tokens:
                    ids = np.asarray(self._add_special(ids.tolist()), dtype=np.uint32)
                return ids
        ids = self.encode(text, add_special_tokens=add_special_tokens, parse_special=parse_special)
        return np.frombuffer(array("I", ids), dtype=np.uint32)  # ~4x np.asarray's speed on a list of ints

    def encode_ordinary(self, text: str) -> list[int]:
        """``encode(text, parse_special=False)`` (tiktoken's name)."""
        return self.encode(text, parse_special=False)

    def encode_batch(self, texts: Iterable[str], *, add_special_tokens: bool = False, parse_special: bool | None = None,
                     num_threads: int = 1) -> list[list[int]]:
        """``[encode(t, ...) for t in texts]``; with the compiled hot path and ``num_threads > 1``
        the texts are encoded on that many threads (the GIL is released).

        Args:
            texts: a list (or other iterable) of str; flags as :meth:`encode`.
            num_threads: threads for the native path (1: the calling thread).
        Returns:
            one list of int ids per text, in order (``tokenizers``' ``encode_batch`` gives
            ``Encoding`` objects; these are their ``.ids``).
        Raises:
            TokenizeError: as :meth:`encode`; ``texts`` is a str, bytes or a mapping (a
                ``datasets`` batch): tokenizers refuses those, whose iteration gives characters
                or keys; an item that is not a str (None), named by its index and type.
        """
        _texts(texts, "encode_batch")
        add_special_tokens = _flag("add_special_tokens", add_special_tokens)
        parse_special = self._parse_flag(parse_special)
        if num_threads > 1 and self._native is not None:
            texts = list(texts)
            try:
                ids, offsets = native.encode_batch_flat(self, texts, add_special_tokens=add_special_tokens,
                                                        parse_special=parse_special, num_threads=num_threads)
            except TokenizeError as e:
                raise _first_not_text("encode_batch", texts, e) from None
            flat = ids.tolist()
            bounds = offsets.tolist()
            return [flat[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]
        out: list[list[int]] = []
        t = None
        try:
            for t in texts:
                out.append(self.encode(t, add_special_tokens=add_special_tokens, parse_special=parse_special))
        except TokenizeError:
            if not isinstance(t, str):
                raise _not_text("encode_batch", len(out), t) from None
            raise
        return out

    def encode_batch_flat(
        self,
        texts: Sequence[str],
        *,
        add_special_tokens: bool = False,
        parse_special: bool | None = None,
        num_threads: int = 1,
    ):
        """Encode many texts into one flat array, the layout Arrow list columns use.

        Returns:
            ``(ids, offsets)``: ids uint32 of shape (total,), offsets int64 of shape
            (len(texts) + 1,); row i is ``ids[offsets[i]:offsets[i+1]]`` and equals
            ``encode(texts[i], ...)``. With the compiled hot path the GIL is released and
            ``num_threads`` threads share the work; without it, a Python loop.
        Raises:
            TokenizeError: as :meth:`encode_batch`.
        """
        _texts(texts, "encode_batch_flat")
        add_special_tokens = _flag("add_special_tokens", add_special_tokens)
        parse_special = self._parse_flag(parse_special)
        try:
            return native.encode_batch_flat(self, texts, add_special_tokens=add_special_tokens,
                                            parse_special=parse_special, num_threads=num_threads)
        except TokenizeError as e:
            raise _first_not_text("encode_batch_flat", texts, e) from None
