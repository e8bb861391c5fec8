"""Decoding: ids -> bytes or text, at once or one id at a time.

This module owns :meth:`decode_bytes`, :meth:`decode` and :meth:`stream_decoder` (as
:class:`_Decoding`, a base of :class:`~rmlprep.tokenizer.Tokenizer`) and :class:`StreamDecoder`;
they read the token bytes and skip set the Tokenizer builds (``_bytes``, ``_skip_ids``, ``_n``).
Both names are re-exported by :mod:`rmlprep.tokenizer`, which owns building and encoding.

Source: tokenizers (``tokenizer/mod.rs`` ``decode``, ``decoders/*.rs``), sentencepiece
(``SentencePieceProcessor::DecodeIds``, through :mod:`rmlprep.sp_decode`).
"""

from __future__ import annotations

import codecs
import functools
import operator
from collections.abc import Iterable

from .errors import TokenIdError, UnsupportedTokenizer
from .hf_decode import ChainDecoder
from .sp_decode import SentencePieceDecoder

__all__ = ["StreamDecoder"]


def _id_list(ids: Iterable) -> list[int]:
    """``ids`` as a list of Python ints: numpy integers and pyarrow integer scalars (iterating an
    ``input_ids`` row of a Table that ``tokenize_text``/``tokenize_chat`` returned gives those)
    are taken by value.

    Raises:
        TokenIdError: an element that is not an integer (a null, a float, a string, a row of a
            2-D array or a nested list: the message says to decode a batch row by row).
    """
    out = list(ids)
    if all(type(i) is int for i in out):
        return out
    for k, i in enumerate(out):
        v = i.as_py() if hasattr(i, "as_py") else i
        try:
            out[k] = operator.index(v)
        except TypeError:
            batch = "; decode takes one sequence of ids: decode a batch row by row" if hasattr(v, "__len__") else ""
            raise TokenIdError(f"token id {i!r} is not an integer{batch}") from None
    return out


class _Decoding:
    """The decoding methods of :class:`~rmlprep.tokenizer.Tokenizer`."""

    @functools.cached_property
    def _gap_ids(self) -> frozenset[int]:
        """Ids the tokenizer's file gives no token, held by an ``UNUSED`` placeholder: every
        ``UNUSED`` id of a tokenizer.json spec (``decode_chain`` set; GPT-4o has 19), and the
        ``"<unused N>"`` fillers of a tiktoken rank file (cl100k's 100256). SentencePiece and GGUF
        ``UNUSED`` pieces are real tokens with text and are not gaps."""
        from .spec import TokenType

        unused = self._ids_of_types(TokenType.UNUSED)
        if self.spec.decode_chain is not None:
            return frozenset(unused)
        vocab = self.spec.vocab
        return frozenset(i for i in unused if vocab[i] == f"<unused {i}>")

    def _gap(self, i: int) -> TokenIdError:
        return TokenIdError(f"token id {i} has no token: the tokenizer's file leaves it unused (tiktoken's "
                            "decode raises KeyError for it)")

    @functools.cached_property
    def _chain_decoder(self) -> ChainDecoder | None:
        """The tables of a spec with a Hugging Face decoder chain (None without one)."""
        return ChainDecoder(self.spec, self._bytes) if self.spec.decode_chain is not None else None

    def decode_bytes(self, ids: Iterable[int], *, skip_special_tokens: bool = False) -> bytes:
        """Concatenate the raw bytes of ``ids`` (no prefix-space removal). Ids may be Python,
        numpy or pyarrow integers.

        An id the tokenizer's file gives no token (:attr:`_gap_ids`) is dropped for a
        tokenizer.json, as :meth:`decode` and ``tokenizers``' decode drop it, and refused for a
        tiktoken rank file, as tiktoken's ``decode_bytes`` refuses it (``KeyError``).

        Raises:
            TokenIdError: an id outside ``range(vocab_size)``, a tiktoken file's unused id, or not
                an integer (the message names it).
        """
        tb = self._bytes
        n = self._n
        skip = self._skip_ids if skip_special_tokens else ()
        ids = _id_list(ids)
        gaps = self._gap_ids
        if gaps and not gaps.isdisjoint(ids):  # one pass in C; the loop below stays as it was
            if self.spec.decode_chain is None:
                raise self._gap(next(i for i in ids if i in gaps))
            ids = [i for i in ids if i not in gaps]
        parts = []
        for i in ids:
            if not 0 <= i < n:
                raise TokenIdError(f"token id {i!r} is out of range for a vocab of {n} tokens")
            if i in skip:
                continue
            parts.append(tb[i])
        return b"".join(parts)

    def decode(self, ids: Iterable[int], *, skip_special_tokens: bool = False) -> str:
        """Decode ids to text; invalid UTF-8 becomes U+FFFD.

        A spec loaded from a Hugging Face tokenizer.json (one with a ``decode_chain``) decodes
        as ``tokenizers.Tokenizer.decode(ids, skip_special_tokens=...)`` does: the file's
        decoder steps run on the token strings (:mod:`rmlprep.hf_decode`); ids the file gives no
        token decode to nothing, and ``skip_special_tokens`` drops the ``special`` added tokens.
        Otherwise SentencePiece's own prefix space is removed as the spec's ``decode_strip_prefix`` says
        (``"text"``: from the start of the text, Hugging Face ``Strip`` decoder and
        sentencepiece; ``"first_token"``: only if the first decoded token starts with it,
        Hugging Face ``Metaspace`` decoder). A spec with ``decoder="sentencepiece"`` (loaded
        from a SentencePiece ``.model``) follows ``SentencePieceProcessor.DecodeIds`` instead
        (:mod:`rmlprep.sp_decode`).

        Raises:
            TokenIdError: an id outside ``range(vocab_size)`` or not an integer (numpy and
                pyarrow integers are taken by value).
            UnsupportedTokenizer: the tokenizer.json's decoder has a step rmlprep does not
                reproduce (the message names it and its JSON path; encoding is not affected),
                or a ``Strip`` step meets ids where tokenizers panics.
        """
        chain = self._chain_decoder
        if chain is not None:
            # one pass for the checks (min): the table lookups refuse an id past the vocab
            # (IndexError) or one they cannot index with (TypeError); then the ids are taken by
            # value (pyarrow scalars, which neither min nor a list index takes) and checked one
            # by one, and the checked list is decoded
            if type(ids) is not list:
                ids = list(ids)
            try:
                if ids and min(ids) < 0:
                    raise IndexError
                return chain.decode(ids, skip_special_tokens)
            except (IndexError, TypeError, ValueError, RuntimeError):  # the last two: min over rows of a 2-D array
                ids = _id_list(ids)
                for i in ids:
                    self._check_id(i)  # raises for the first id out of range
            return chain.decode(ids, skip_special_tokens)
        ids = _id_list(ids)
        if skip_special_tokens:
            ids = [i for i in ids if i not in self._skip_ids]
        data = self.decode_bytes(ids)
        if self.spec.decoder == "sentencepiece":  # ids checked by decode_bytes
            return SentencePieceDecoder(self.spec, self._bytes).decode(ids)
        text = data.decode("utf-8", "replace")
        mode = self.spec.decode_strip_prefix
        if mode == "text" or (mode == "first_token" and ids and self._bytes[ids[0]][:1] == b" "):
            if text.startswith(" "):
                text = text[1:]
        return text

    def stream_decoder(self, *, skip_special_tokens: bool = False) -> "StreamDecoder":
        """A decoder that takes ids one at a time and never emits a partial UTF-8 character."""
        return StreamDecoder(self, skip_special_tokens=skip_special_tokens)


class StreamDecoder:
    """Incremental decoding: ``push(id) -> str`` returns the text that id completes.

    Bytes of an unfinished UTF-8 character are held back until a later token completes them;
    a sequence that can never complete becomes U+FFFD. ``flush()`` returns what is held back
    (U+FFFD for an incomplete tail). The concatenation of every ``push`` and the final
    ``flush`` equals ``tokenizer.decode(all_ids)``.

    With a Hugging Face decoder chain (:mod:`rmlprep.hf_decode`) the text is found as
    tokenizers' ``DecodeStream`` finds it (``step_decode_stream``: the ids since the last
    emitted text are decoded with a few before them, and what extends the earlier decoding is
    emitted), holding back also while a ByteFallback byte run may continue. A chain for which
    that is not exact (a step after ``Fuse`` that rewrites across tokens, such as WordPiece
    cleanup, or ``BPEDecoder``, whose last token decodes apart) holds everything back until
    ``flush``. ``flush`` checks the emitted text against ``decode`` of all the ids and raises
    ``UnsupportedTokenizer`` if they ever differed.
    """

    # tokenizer: a rmlprep.tokenizer.Tokenizer (not imported here: that module imports this one)
    def __init__(self, tokenizer: "Tokenizer", *, skip_special_tokens: bool = False):  # noqa: F821
        self._tok = tokenizer
        self._skip = skip_special_tokens
        self._dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._started = False
        self._strip_mode = tokenizer.spec.decode_strip_prefix
        self._pending_strip = False
        self._sp = (
            SentencePieceDecoder(tokenizer.spec, tokenizer._bytes)
            if tokenizer.spec.decoder == "sentencepiece" else None
        )
        self._chain = tokenizer._chain_decoder
        self._all: list[int] = []  # chain: every id pushed since the last flush
        self._ids: list[int] = []  # chain: tokenizers' window (ids, prefix, prefix_index)
        self._prefix = ""
        self._prefix_index = 0
        self._emitted: list[str] = []  # chain: text emitted since the last flush
        self._window_text: str | None = ""  # chain: the text of _ids, None when not decoded

    def push(self, token_id: int) -> str:
        """Decode one more id; returns the text it completes (possibly "")."""
        tok = self._tok
        tok._check_id(token_id)
        if self._skip and token_id in (tok._skip_ids if self._chain is None else self._chain.skip):
            return ""
        if self._sp is not None:
            return self._sp.push(token_id)
        if self._chain is not None:
            return self._chain_push(token_id)
        if token_id in tok._gap_ids:
            raise tok._gap(token_id)  # tiktoken's refusal, as decode_bytes
        raw = tok._bytes[token_id]
        if not self._started:
            self._started = True
            mode = self._strip_mode
            self._pending_strip = mode == "text" or (mode == "first_token" and raw[:1] == b" ")
        return self._strip(self._dec.decode(raw))

    def flush(self) -> str:
        """Return the held-back tail (U+FFFD for an incomplete character) and reset."""
        if self._sp is not None:
            return self._sp.flush()
        if self._chain is not None:
            return self._chain_flush()
        return self._strip(self._dec.decode(b"", final=True))

    def _chain_decode(self, ids: list[int]) -> str:
        return self._chain.decode(ids, self._skip)

    def _chain_push(self, token_id: int) -> str:
        # tokenizers' step_decode_stream, plus: no text while a byte run may continue
        self._all.append(token_id)
        if not self._chain.windowed:
            return ""  # held back until flush: a later token may change this text
        if not self._prefix and self._ids:
            # tokenizers takes the window's text as the prefix when it has no U+FFFD at its end,
            # which without a hold-back means it is "" (a text would have been emitted); the
            # window's text is known unless the last push held back
            last = self._window_text
            if last is None:
                last = self._chain_decode(self._ids)
            if not last:
                self._prefix_index = len(self._ids)
        self._ids.append(token_id)
        if self._chain.holds_back(token_id):
            self._window_text = None
            return ""
        text = self._window_text = self._chain_decode(self._ids)
        if len(text) <= len(self._prefix) or text.endswith("\ufffd"):
            return ""
        if not text.startswith(self._prefix):
            raise self._changed(text)
        new = text[len(self._prefix):]
        keep = len(self._ids) - self._prefix_index
        ids = self._ids = self._ids[self._prefix_index:]
        self._prefix = self._window_text = (self._chain.decode_one(ids[0], self._skip) if len(ids) == 1
                                            else self._chain_decode(ids))
        self._prefix_index = keep
        self._emitted.append(new)
        return new

    def _chain_flush(self) -> str:
        full = self._chain_decode(self._all)
        emitted = "".join(self._emitted)
        self._all, self._ids, self._prefix, self._prefix_index, self._emitted = [], [], "", 0, []
        self._window_text = ""
        # what was emitted is checked against the whole decoding, which the windows only approach
        if not full.startswith(emitted):
            raise self._changed(full)
        return full[len(emitted):]

    def _changed(self, text: str) -> UnsupportedTokenizer:
        return UnsupportedTokenizer(
            f"{self._chain.where}: the decoder changes text a stream already emitted (now {text[-40:]!r}); "
            "decode the ids at once with Tokenizer.decode")

    def _strip(self, text: str) -> str:
        if self._pending_strip and text:
            self._pending_strip = False
            if text[0] == " ":
                return text[1:]
        return text
