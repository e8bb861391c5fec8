"""SentencePiece's decoding rule (``SentencePieceProcessor::Decode``), for specs loaded from a
``.model`` file (``TokenizerSpec.decoder == "sentencepiece"``).

Ids are decoded one piece at a time, in order:

- a run of consecutive byte pieces (``<0xXX>``) is joined into bytes and read as UTF-8: each
  complete, valid character is itself, each byte that does not start one is U+FFFD;
- a control piece (``<s>``, ``</s>``, ...) is the empty string;
- the unknown piece is ``trainer_spec.unk_surface`` (default ``" \\u2047 "``);
- any other piece is its text with ``"▁"`` as a space. While nothing has been output yet and no
  piece has dropped a leading ``"▁"``, the piece drops its leading ``"▁"`` (only with
  ``add_dummy_prefix``, i.e. ``decode_strip_prefix != "none"``): the first word's dummy prefix.

So ``[<s>, ▁Hello]`` is ``"Hello"``; ``[▁, ▁a]`` is ``" a"`` (the lone ``"▁"`` took the strip);
``[<unk>, ▁a]`` is ``" \\u2047  a"``; ``[<0xE3>, ▁a, <0x81>]`` is ``"\\ufffd a\\ufffd"`` (two runs).

Source: sentencepiece ``src/sentencepiece_processor.cc`` (``Decode``: ``DecodeSentencePiece``,
``ProcessBytePieces``, ``is_bos_ws``).
"""

from __future__ import annotations

from collections.abc import Iterable

from .spec import TokenizerSpec, TokenType

__all__ = ["SentencePieceDecoder"]

_SPACE = "\u2581"
_REPLACEMENT = "\ufffd"


def _utf8_length(lead: int) -> int:
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0  # a continuation byte or a byte no UTF-8 text holds


def _decode_byte_run(data: bytes) -> str:
    """sentencepiece ``ProcessBytePieces``: valid characters, else one U+FFFD per byte."""
    out: list[str] = []
    i, n = 0, len(data)
    while i < n:
        k = _utf8_length(data[i])
        if k and i + k <= n:
            try:
                out.append(data[i : i + k].decode("utf-8"))  # strict: no overlongs, surrogates
                i += k
                continue
            except UnicodeDecodeError:
                pass
        out.append(_REPLACEMENT)
        i += 1
    return "".join(out)


class SentencePieceDecoder:
    """Incremental SentencePiece decoding: ``push(id) -> str`` returns the text that is final.

    Text of a byte run is held back until a non-byte piece (or :meth:`flush`) ends the run, so
    the concatenation of every ``push`` and the final ``flush`` equals :meth:`decode` of all the
    ids. Ids are assumed in range (the caller checks them).
    """

    __slots__ = ("_vocab", "_types", "_bytes", "_strip", "_unk_surface", "_any_text", "_bos_ws",
                 "_bos_ws_seen", "_pending")

    def __init__(self, spec: TokenizerSpec, token_bytes: list[bytes]):
        self._vocab = spec.vocab
        self._types = spec.token_types
        self._bytes = token_bytes
        self._strip = spec.decode_strip_prefix != "none"
        self._unk_surface = spec.unk_surface
        self._any_text = False
        self._bos_ws = True
        self._bos_ws_seen = False
        self._pending = bytearray()

    def push(self, token_id: int) -> str:
        t = self._types[token_id]
        if t == TokenType.BYTE:
            self._pending += self._bytes[token_id]
            return ""
        out = self._flush_bytes()
        if self._bos_ws_seen or self._any_text:
            self._bos_ws = False
        if t == TokenType.CONTROL:
            piece, self._bos_ws_seen = "", False
        elif t == TokenType.UNKNOWN:
            piece, self._bos_ws_seen = self._unk_surface, False
        else:
            piece = self._vocab[token_id]
            self._bos_ws_seen = False
            if self._bos_ws and self._strip and piece.startswith(_SPACE):
                piece, self._bos_ws_seen = piece[1:], True
            piece = piece.replace(_SPACE, " ")
        if piece:
            self._any_text = True
        return out + piece

    def _flush_bytes(self) -> str:
        if not self._pending:
            return ""
        text = _decode_byte_run(bytes(self._pending))
        self._pending.clear()
        if text:
            self._any_text = True
        return text

    def flush(self) -> str:
        """The text of a trailing byte run; the decoder then starts over."""
        out = self._flush_bytes()
        self._any_text, self._bos_ws, self._bos_ws_seen = False, True, False
        return out

    def decode(self, ids: Iterable[int]) -> str:
        """The whole text of ``ids``, as ``SentencePieceProcessor.DecodeIds``."""
        parts = [self.push(i) for i in ids]
        parts.append(self.flush())
        return "".join(parts)
