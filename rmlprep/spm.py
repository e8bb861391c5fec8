"""Read a SentencePiece ``.model`` file (a serialized ``ModelProto``) into a TokenizerSpec.

The protobuf wire format is read by a small reader here (no ``protobuf`` dependency). Only the
fields that decide how text is encoded are kept::

    ModelProto       1 pieces (repeated SentencePiece)   2 trainer_spec   3 normalizer_spec
                     5 denormalizer_spec
    SentencePiece    1 piece (string)   2 score (float)   3 type (enum, default NORMAL)
    TrainerSpec      3 model_type (UNIGRAM=1 default, BPE=2, WORD=3, CHAR=4)
                     24 treat_whitespace_as_suffix   35 byte_fallback   44 unk_surface
                     45..48 unk/bos/eos/pad piece (ids are where those pieces are)
    NormalizerSpec   1 name   2 precompiled_charsmap   3 add_dummy_prefix (default true)
                     4 remove_extra_whitespaces (default true)   5 escape_whitespaces (true)

Only BPE models are accepted, and only normalization rmlprep reproduces exactly: no
precompiled charsmap (the "identity" rule), ``remove_extra_whitespaces`` false,
``escape_whitespaces`` true, whitespace as prefix. Anything else raises
:class:`UnsupportedTokenizer` naming the field, rather than encoding differently.

How the spec mirrors sentencepiece's ``SentencePieceProcessor::Encode``:

- ``add_dummy_prefix``: one ``"▁"`` before the whole (non-empty) text, even when it starts with
  a space or a user-defined piece (``prefix_scheme="whole_text"``, ``prefix_if_missing=False``);
- user-defined pieces are matched in all text, leftmost and longest first, and never merged
  (``parse_user_defined_always``); control pieces (``<s>``, ``[INST]``) are never parsed from
  text by sentencepiece, so compare with ``encode(..., parse_special=False)``;
- merges: the adjacent pair whose concatenation is the highest-scoring normal or user-defined
  piece, leftmost on ties (``scores`` mode);
- a leftover character becomes ``<0xXX>`` byte pieces with ``byte_fallback``, else ``unk``,
  consecutive unknowns fused into one (``fuse_unk``; sentencepiece fuses over the whole result,
  rmlprep per piece, which is the same here: the words a segment is split into for speed all
  start with a known "▁", see Tokenizer._sp_split_ok);
- decoding follows ``SentencePieceProcessor.DecodeIds`` for every id (``decoder=
  "sentencepiece"``, :mod:`rmlprep.sp_decode`), not the Hugging Face rules a tokenizer.json
  gets: control pieces (``<s>``, ``</s>``) decode to nothing, the unknown piece to
  ``trainer_spec.unk_surface`` (``" \u2047 "`` by default), a run of byte pieces to its UTF-8
  characters with U+FFFD for each byte that starts none, other pieces to their text with
  ``"▁"`` as a space; the first piece that starts with ``"▁"`` before any text loses it
  (``add_dummy_prefix``). ``skip_special_tokens=True`` leaves out control and unknown ids
  first.

Source: sentencepiece ``src/sentencepiece_model.proto``, ``normalizer.cc``
(``Normalizer::Normalize``), ``bpe_model.cc`` (``Model::SampleEncode``),
``sentencepiece_processor.cc`` (``PopulateSentencePieceText``, ``Decode``),
``model_interface.cc`` (which piece types can be merged).
"""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass, field

from .errors import LoaderError, UnsupportedTokenizer
from .spec import SENTENCEPIECE, TokenizerSpec, TokenType

__all__ = ["SentencePieceModel", "read_sentencepiece_model", "spec_from_sentencepiece_model"]

_MODEL_TYPES = {1: "UNIGRAM", 2: "BPE", 3: "WORD", 4: "CHAR"}
_F32 = struct.Struct("<f")
_SPACE = "\u2581"


@dataclass
class SentencePieceModel:
    """The fields of a ``ModelProto`` that rmlprep uses (protobuf defaults where absent).

    Attributes:
        pieces: piece strings, by id.
        scores: one float per piece.
        types: one ``TokenType`` value per piece (sentencepiece numbers types the same way).
        model_type: 1 UNIGRAM, 2 BPE, 3 WORD, 4 CHAR.
    """

    pieces: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    types: list[int] = field(default_factory=list)
    model_type: int = 1
    byte_fallback: bool = False
    treat_whitespace_as_suffix: bool = False
    unk_piece: str = "<unk>"
    bos_piece: str = "<s>"
    eos_piece: str = "</s>"
    pad_piece: str = "<pad>"
    unk_surface: str = " \u2047 "
    normalizer_name: str = ""
    precompiled_charsmap: bytes = b""
    add_dummy_prefix: bool = True
    remove_extra_whitespaces: bool = True
    escape_whitespaces: bool = True
    normalization_rule_tsv: str = ""
    denormalizer_charsmap: bytes = b""
    denormalizer_rule_tsv: str = ""


# ----------------------------------------------------------------------------------------------
# Protobuf wire format.


class _Wire:
    """Bounds-checked protobuf wire-format reader over ``data[start:end]``."""

    __slots__ = ("data", "pos", "end", "path", "what")

    def __init__(self, data: bytes, start: int, end: int, path: str, what: str):
        self.data = data
        self.pos = start
        self.end = end
        self.path = path
        self.what = what

    def fail(self, msg: str, at: int | None = None) -> LoaderError:
        at = self.pos if at is None else at
        return LoaderError(
            f"{self.path}: corrupt or truncated SentencePiece model at byte {at} (in {self.what}): {msg}"
        )

    def varint(self) -> int:
        data, pos, end = self.data, self.pos, self.end
        result = 0
        shift = 0
        start = pos
        while True:
            if pos >= end:
                raise self.fail("varint runs past the end of the message", start)
            b = data[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if shift >= 70:
                raise self.fail("varint longer than 10 bytes", start)
        self.pos = pos
        return result

    def fields(self):
        """Yield ``(field_number, wire_type, value, offset)``; length-delimited values are
        ``(start, end)`` spans, fixed32 raw 4 bytes, varints ints."""
        while self.pos < self.end:
            at = self.pos
            key = self.varint()
            num, wt = key >> 3, key & 7
            if num == 0:
                raise self.fail("field number 0", at)
            if wt == 0:
                val = self.varint()
            elif wt == 2:
                n = self.varint()
                if n > self.end - self.pos:
                    raise self.fail(
                        f"field {num} claims {n} bytes but only {self.end - self.pos} remain", at
                    )
                val = (self.pos, self.pos + n)
                self.pos += n
            elif wt == 5:
                if self.end - self.pos < 4:
                    raise self.fail(f"field {num}: fixed32 runs past the end", at)
                val = self.data[self.pos : self.pos + 4]
                self.pos += 4
            elif wt == 1:
                if self.end - self.pos < 8:
                    raise self.fail(f"field {num}: fixed64 runs past the end", at)
                val = self.data[self.pos : self.pos + 8]
                self.pos += 8
            else:
                why = "groups are not supported" if wt in (3, 4) else "not a protobuf wire type"
                raise self.fail(f"field {num} has wire type {wt} ({why})", at)
            yield num, wt, val, at

    def text(self, span, name: str, at: int) -> str:
        try:
            return self.data[span[0] : span[1]].decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"{name} is not valid UTF-8 ({e.reason})", at) from None

    def expect(self, wt: int, want: int, name: str, at: int) -> None:
        if wt != want:
            raise self.fail(f"{name} has wire type {wt}, expected {want}", at)


def _int32(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def read_sentencepiece_model(path: str | os.PathLike) -> SentencePieceModel:
    """Parse a SentencePiece ``.model`` file (a serialized ``ModelProto``).

    Returns:
        The fields rmlprep uses, with protobuf defaults for absent ones.
    Raises:
        LoaderError: the file cannot be read, or is not a well-formed ModelProto (truncated,
            a length past the end; the message gives the byte offset).
    """
    p = os.fspath(path)
    try:
        with open(p, "rb") as f:
            data = f.read()
    except OSError as e:
        raise LoaderError(f"{p}: cannot open SentencePiece model: {e.strerror or e}") from None
    if not data:
        raise LoaderError(f"{p}: corrupt or truncated SentencePiece model at byte 0: the file is empty")
    m = SentencePieceModel()
    top = _Wire(data, 0, len(data), p, "ModelProto")
    for num, wt, val, at in top.fields():
        if num == 1:
            top.expect(wt, 2, "pieces", at)
            _read_piece(data, val, p, len(m.pieces), m)
        elif num == 2:
            top.expect(wt, 2, "trainer_spec", at)
            _read_trainer(data, val, p, m)
        elif num == 3:
            top.expect(wt, 2, "normalizer_spec", at)
            _read_normalizer(data, val, p, m, denormalizer=False)
        elif num == 5:
            top.expect(wt, 2, "denormalizer_spec", at)
            _read_normalizer(data, val, p, m, denormalizer=True)
    return m


def _read_piece(data: bytes, span, path: str, index: int, m: SentencePieceModel) -> None:
    w = _Wire(data, span[0], span[1], path, f"pieces[{index}]")
    piece, score, typ = "", 0.0, 1
    for num, wt, val, at in w.fields():
        if num == 1:
            w.expect(wt, 2, "piece", at)
            piece = w.text(val, "piece", at)
        elif num == 2:
            w.expect(wt, 5, "score", at)
            (score,) = _F32.unpack(val)
        elif num == 3:
            w.expect(wt, 0, "type", at)
            typ = _int32(val)
    m.pieces.append(piece)
    m.scores.append(score)
    m.types.append(typ)


def _read_trainer(data: bytes, span, path: str, m: SentencePieceModel) -> None:
    w = _Wire(data, span[0], span[1], path, "trainer_spec")
    strings = {44: "unk_surface", 45: "unk_piece", 46: "bos_piece", 47: "eos_piece", 48: "pad_piece"}
    for num, wt, val, at in w.fields():
        if num == 3:
            w.expect(wt, 0, "model_type", at)
            m.model_type = _int32(val)
        elif num == 24:
            w.expect(wt, 0, "treat_whitespace_as_suffix", at)
            m.treat_whitespace_as_suffix = bool(val)
        elif num == 35:
            w.expect(wt, 0, "byte_fallback", at)
            m.byte_fallback = bool(val)
        elif num in strings:
            w.expect(wt, 2, strings[num], at)
            setattr(m, strings[num], w.text(val, strings[num], at))


def _read_normalizer(data: bytes, span, path: str, m: SentencePieceModel, *, denormalizer: bool) -> None:
    what = "denormalizer_spec" if denormalizer else "normalizer_spec"
    w = _Wire(data, span[0], span[1], path, what)
    for num, wt, val, at in w.fields():
        if num == 1 and not denormalizer:
            w.expect(wt, 2, "name", at)
            m.normalizer_name = w.text(val, "name", at)
        elif num == 2:
            w.expect(wt, 2, "precompiled_charsmap", at)
            blob = bytes(data[val[0] : val[1]])
            if denormalizer:
                m.denormalizer_charsmap = blob
            else:
                m.precompiled_charsmap = blob
        elif num == 6:
            w.expect(wt, 2, "normalization_rule_tsv", at)
            tsv = w.text(val, "normalization_rule_tsv", at)
            if denormalizer:
                m.denormalizer_rule_tsv = tsv
            else:
                m.normalization_rule_tsv = tsv
        elif not denormalizer and num in (3, 4, 5):
            name = {3: "add_dummy_prefix", 4: "remove_extra_whitespaces", 5: "escape_whitespaces"}[num]
            w.expect(wt, 0, name, at)
            setattr(m, name, bool(val))


# ----------------------------------------------------------------------------------------------
# ModelProto -> TokenizerSpec.


def _check_as_sentencepiece_loads(p: str, m: SentencePieceModel) -> None:
    """Refuse the pieces ``SentencePieceProcessor`` refuses to load (``ModelInterface::
    InitializePieces``), which no reference encodes: an empty piece, a second UNKNOWN piece, a
    BYTE piece without ``byte_fallback`` or not named ``<0x00>``..``<0xFF>`` (an edited model:
    ``pieces.add()`` with protobuf).

    Raises:
        LoaderError: naming the piece, with sentencepiece's own message.
    """
    unk = None
    for i, (piece, t) in enumerate(zip(m.pieces, m.types)):
        why = None
        if not piece:
            why = "piece must not be empty"
        elif t == TokenType.UNKNOWN:
            if unk is not None:
                why = f"unk is already defined (pieces[{unk}] = {m.pieces[unk]!r})"
            unk = i
        elif t == TokenType.BYTE and not m.byte_fallback:
            why = f"byte piece {piece} is found although `byte_fallback` is false"
        elif t == TokenType.BYTE and piece not in _BYTE_PIECES:
            why = f"byte piece {piece} is invalid"
        if why:
            raise LoaderError(f"{p}: pieces[{i}] ({piece!r}): sentencepiece refuses to load this model ({why})")


_BYTE_PIECES = frozenset(f"<0x{b:02X}>" for b in range(256))


def spec_from_sentencepiece_model(
    path: str | os.PathLike, *, add_bos: bool = False, add_eos: bool = False
) -> TokenizerSpec:
    """Build a TokenizerSpec that encodes exactly like ``sentencepiece`` with this model.

    Args:
        path: a SentencePiece ``.model`` file (BPE).
        add_bos, add_eos: what ``encode(..., add_special_tokens=True)`` adds. sentencepiece
            adds neither unless asked (``add_bos=True`` matches ``sp.encode(s, add_bos=True)``
            and Llama's ``tokenizer_config.json``).
    Returns:
        A SentencePiece-kind spec merged by score (see the module docstring for the mapping).
        bos/eos/pad ids are the ids of ``bos_piece``/``eos_piece``/``pad_piece`` when those are
        control pieces, unk_id the id of ``unk_piece`` when it is the unknown piece (as
        ``SentencePieceProcessor::bos_id()`` etc. decide).
    Raises:
        LoaderError: a malformed file (byte offset in the message), no pieces, a score that is
            not finite, no unknown piece, add_bos/add_eos without the piece.
        UnsupportedTokenizer: a model type other than BPE (named: UNIGRAM, WORD, CHAR); a
            normalization rmlprep does not reproduce (a non-empty precompiled_charsmap or
            normalization_rule_tsv, remove_extra_whitespaces=True, escape_whitespaces=False, a
            denormalizer); treat_whitespace_as_suffix=True; unused pieces; user-defined pieces
            containing a space or "▁"; byte_fallback without all 256 byte pieces.
    """
    p = os.fspath(path)
    m = read_sentencepiece_model(p)
    if m.model_type != 2:
        kind = _MODEL_TYPES.get(m.model_type, f"unknown ({m.model_type})")
        raise UnsupportedTokenizer(
            f"{p}: trainer_spec.model_type = {kind} is not supported; rmlprep supports BPE "
            "SentencePiece models only"
        )
    if m.precompiled_charsmap:
        raise UnsupportedTokenizer(
            f"{p}: normalizer_spec.precompiled_charsmap is not empty (rule {m.normalizer_name!r}, "
            f"{len(m.precompiled_charsmap)} bytes); rmlprep does not implement SentencePiece's "
            "charsmap normalization (train with normalization_rule_name='identity')"
        )
    if m.normalization_rule_tsv:
        raise UnsupportedTokenizer(
            f"{p}: normalizer_spec.normalization_rule_tsv is set; rmlprep does not implement custom "
            "SentencePiece normalization rules"
        )
    if m.remove_extra_whitespaces:
        raise UnsupportedTokenizer(
            f"{p}: normalizer_spec.remove_extra_whitespaces = true is not supported; rmlprep "
            "does not collapse whitespace (train with remove_extra_whitespaces=false)"
        )
    if not m.escape_whitespaces:
        raise UnsupportedTokenizer(
            f"{p}: normalizer_spec.escape_whitespaces = false is not supported; rmlprep always "
            "writes spaces as '\u2581'"
        )
    if m.denormalizer_charsmap or m.denormalizer_rule_tsv:
        raise UnsupportedTokenizer(
            f"{p}: denormalizer_spec has rules; rmlprep does not implement SentencePiece "
            "denormalization"
        )
    if m.treat_whitespace_as_suffix:
        raise UnsupportedTokenizer(
            f"{p}: trainer_spec.treat_whitespace_as_suffix = true is not supported; rmlprep "
            "supports whitespace as a prefix only"
        )
    n = len(m.pieces)
    if n == 0:
        raise LoaderError(f"{p}: the model has no pieces")
    _check_as_sentencepiece_loads(p, m)
    valid = {int(t) for t in TokenType}
    types: list[int] = []
    for i, t in enumerate(m.types):
        if t not in valid:
            raise UnsupportedTokenizer(f"{p}: pieces[{i}] ({m.pieces[i]!r}) has unknown type {t}")
        if t == TokenType.UNUSED:
            # sentencepiece merges into unused pieces and then splits them again
            # (bpe_model.cc rev_merge); rmlprep's merge loop does not model that.
            raise UnsupportedTokenizer(
                f"{p}: pieces[{i}] = {m.pieces[i]!r} is an UNUSED piece; rmlprep does not implement "
                "sentencepiece's resegmentation of unused pieces"
            )
        if t == TokenType.USER_DEFINED and (" " in m.pieces[i] or _SPACE in m.pieces[i]):
            raise UnsupportedTokenizer(
                f"{p}: user-defined piece {m.pieces[i]!r} (id {i}) contains a space; sentencepiece "
                "matches it in the escaped text, which rmlprep does not reproduce"
            )
        types.append(int(t))
    for i, score in enumerate(m.scores):
        if not math.isfinite(score):
            raise LoaderError(f"{p}: pieces[{i}] ({m.pieces[i]!r}) has score {score}, not a finite number")
    index = {}
    for i, piece in enumerate(m.pieces):
        j = index.setdefault(piece, i)
        if j != i:
            raise LoaderError(f"{p}: pieces[{i}] = {piece!r} duplicates pieces[{j}]")

    def piece_id(piece: str, want: TokenType) -> int | None:
        i = index.get(piece)
        return i if i is not None and types[i] == want else None

    unk_id = piece_id(m.unk_piece, TokenType.UNKNOWN)
    if unk_id is None:
        raise LoaderError(f"{p}: unk_piece {m.unk_piece!r} is not an UNKNOWN piece of the model")
    bos_id = piece_id(m.bos_piece, TokenType.CONTROL)
    eos_id = piece_id(m.eos_piece, TokenType.CONTROL)
    pad_id = piece_id(m.pad_piece, TokenType.CONTROL)
    if add_bos and bos_id is None:
        raise LoaderError(f"{p}: add_bos=True but bos_piece {m.bos_piece!r} is not a control piece")
    if add_eos and eos_id is None:
        raise LoaderError(f"{p}: add_eos=True but eos_piece {m.eos_piece!r} is not a control piece")
    if m.byte_fallback:
        missing = [b for b in range(256) if piece_id(f"<0x{b:02X}>", TokenType.BYTE) is None]
        if missing:
            raise UnsupportedTokenizer(
                f"{p}: trainer_spec.byte_fallback is true but {len(missing)} byte pieces are "
                f"missing (first <0x{missing[0]:02X}>)"
            )
    dummy = m.add_dummy_prefix
    return TokenizerSpec(
        kind=SENTENCEPIECE,
        vocab=tuple(m.pieces),
        token_types=tuple(types),
        scores=tuple(float(s) for s in m.scores),
        bos_id=bos_id,
        eos_id=eos_id,
        unk_id=unk_id,
        pad_id=pad_id,
        add_bos=add_bos,
        add_eos=add_eos,
        byte_fallback=m.byte_fallback,
        add_prefix_space=dummy,
        prefix_scheme="whole_text",
        prefix_if_missing=False,
        fuse_unk=not m.byte_fallback,
        parse_user_defined_always=True,
        decode_strip_prefix="text" if dummy else "none",
        decoder="sentencepiece",
        unk_surface=m.unk_surface,
        name=os.path.basename(p),
    )
