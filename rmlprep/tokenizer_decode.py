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
from collections.abc import Iterable

from .errors import TokenIdError
from .sp_decode import SentencePieceDecoder

__all__ = ["StreamDecoder"]


class _Decoding:
    """The decoding methods of :class:`~rmlprep.tokenizer.Tokenizer`."""

    def decode_bytes(self, ids: Iterable[int], *, skip_special_tokens: bool = False) -> bytes:
        """Concatenate the raw bytes of ``ids`` (no prefix-space removal).

        Raises:
            TokenIdError: an id outside ``range(vocab_size)`` (the message names it).
        """
        tb = self._bytes
        n = self._n
        skip = self._skip_ids if skip_special_tokens else ()
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

        SentencePiece's own prefix space is removed as the spec's ``decode_strip_prefix`` says
        (``"text"``: from the start of the text, Hugging Face ``Strip`` decoder and
        sentencepiece; ``"first_token"``: only if the first decoded token starts with it,
        Hugging Face ``Metaspace`` decoder). A spec with ``decoder="sentencepiece"`` (loaded
        from a SentencePiece ``.model``) follows ``SentencePieceProcessor.DecodeIds`` instead
        (:mod:`rmlprep.sp_decode`).

        Raises:
            TokenIdError: an id outside ``range(vocab_size)``.
        """
        ids = list(ids)
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

    def push(self, token_id: int) -> str:
        """Decode one more id; returns the text it completes (possibly "")."""
        tok = self._tok
        tok._check_id(token_id)
        if self._skip and token_id in tok._skip_ids:
            return ""
        if self._sp is not None:
            return self._sp.push(token_id)
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
        return self._strip(self._dec.decode(b"", final=True))

    def _strip(self, text: str) -> str:
        if self._pending_strip and text:
            self._pending_strip = False
            if text[0] == " ":
                return text[1:]
        return text
