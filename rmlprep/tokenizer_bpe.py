"""The per-segment BPE of :class:`~rmlprep.tokenizer.Tokenizer`: one normalized text segment -> ids.

This module owns :class:`_SegmentBPE`, a base of the Tokenizer: the compiled path when it is built
(``self._native``), else the pure-Python one: pre-split pieces (byte-level) or words
(SentencePiece-style), looked up whole when the spec says a whole token wins, then in the bounded
piece -> ids cache, and merged by :func:`rmlprep.bpe.merge_loop` on a miss (characters outside
the vocab go to byte fallback or unk, and without either are skipped before merging, as
tokenizers' ``BPE::merge_word`` does). :mod:`rmlprep.tokenizer` owns building the indexes these
methods read (``_tok2id``, ``_types``, ``_byte_ids``, ``_pair``, ``_cache``, ...), cutting out
added tokens and normalizing.

Without unk and byte fallback this follows ``tokenizers``, not llama.cpp, for a GGUF too (a
"whitespace" vocabulary without ``unknown_token_id``): the model's tokenizer.json is the reference,
and llama.cpp's BPE session instead keeps the character as a symbol and drops it after merging.

Source: tokenizers (``models/bpe/model.rs``, ``BPE::merge_word``), sentencepiece (``bpe_model.cc``).
"""

from __future__ import annotations

from . import bpe
from .spec import TokenType
from .tokenizer_build import _split_before_space, _split_words

_CACHE_MAX = 1 << 18  # pieces kept in the piece -> ids cache before it is cleared
_MERGEABLE_TYPES = frozenset((TokenType.NORMAL, TokenType.USER_DEFINED))


class _SegmentBPE:
    """The per-segment encoding methods of :class:`~rmlprep.tokenizer.Tokenizer`."""

    def _encode_byte_level(self, text: str) -> list[int]:
        if not text:
            return []
        if self._native is not None:
            return self._native.encode_text(text)
        pieces = self._splitter(text) if self._splitter is not None else [text]
        return self._encode_pieces(pieces, self._bpe_byte_level)

    def _encode_pieces(self, pieces: list[str], bpe_piece) -> list[int]:
        """Ids of each piece from the bounded piece cache, running ``bpe_piece`` on a miss."""
        cache = self._cache
        out: list[int] = []
        for piece in pieces:
            hit = cache.get(piece)
            if hit is None:
                hit = bpe_piece(piece)
                if len(cache) >= _CACHE_MAX:
                    cache.clear()
                cache[piece] = hit
            out.extend(hit)
        return out

    def _bpe_byte_level(self, piece: str) -> tuple[int, ...]:
        raw = piece.encode("utf-8", "surrogatepass")
        if self.spec.ignore_merges:
            spelled = "".join([self._spelling[b] for b in raw])
            whole = self._tok2id.get(spelled)
            if whole is not None and self._model_types[whole] in _MERGEABLE_TYPES:
                return (whole,)
        byte_ids = self._byte_ids
        unk = self.spec.unk_id
        fuse = self.spec.fuse_unk
        syms: list[int] = []
        prev_unknown = False
        for b in raw:
            t = byte_ids[b]
            if t is None:
                if unk is None:
                    continue  # dropped, as Hugging Face BPE does without an unk token
                if prev_unknown and fuse:
                    continue  # one unk for the piece's run, before merging (BPE::merge_word)
                prev_unknown = True
                t = unk
            else:
                prev_unknown = False
            syms.append(t)
        return tuple(bpe.merge_loop(syms, self._pair))

    def _encode_sentencepiece(self, text: str) -> list[int]:
        if not text:
            return []
        if self._native is not None:
            return self._native.encode_text(text)
        s = self.spec
        if s.split_on_space:
            split = _split_before_space
        elif self._sp_split_ok:
            split = _split_words
        else:
            split = None
        if self._splitter is not None:  # pre-tokenizer pieces, each split into words
            pieces = self._splitter(text)
            words = [w for p in pieces for w in split(p)] if split is not None else pieces
        else:
            words = split(text) if split is not None else [text]
        return self._encode_pieces(words, self._bpe_sentencepiece)

    def _bpe_sentencepiece(self, word: str) -> tuple[int, ...]:
        t2i = self._tok2id
        s = self.spec
        if s.ignore_merges:
            whole = t2i.get(word)
            if whole is not None and self._model_types[whole] in _MERGEABLE_TYPES:
                return (whole,)
        # symbols: a code point's id, or a negative key for a character outside the vocab; with
        # neither unk nor byte fallback such a character is skipped before merging, so its
        # neighbours can merge across it (tokenizers' BPE::merge_word)
        skip_unknown = s.unk_id is None and not s.byte_fallback
        # fuse_unk: one unk for a run of unknown characters of this piece (tokenizers fuses in
        # BPE::merge_word, one pre-tokenized word); with byte fallback no character is unk
        fuse = s.fuse_unk and s.unk_id is not None and not s.byte_fallback
        syms: list[int] = []
        unknown: dict[int, str] = {}
        for ch in word:
            t = t2i.get(ch)
            if t is None or self._model_types[t] in (TokenType.CONTROL, TokenType.UNUSED):
                if skip_unknown or (fuse and syms and syms[-1] < 0):
                    continue
                key = -1 - len(unknown)
                unknown[key] = ch
                syms.append(key)
            else:
                syms.append(t)
        if unknown:
            merged = self._merge_with_unknown(syms)
        else:
            merged = bpe.merge_loop(syms, self._pair)
        out: list[int] = []
        for t in merged:
            if t >= 0:
                out.append(t)
                continue
            ch = unknown[t]
            if s.byte_fallback:
                for b in ch.encode("utf-8", "surrogatepass"):
                    fid = self._fallback_ids[b]
                    if fid is not None:
                        out.append(fid)
                    elif s.unk_id is not None:
                        out.append(s.unk_id)
            elif s.unk_id is not None:
                out.append(s.unk_id)
        return tuple(out)

    def _merge_with_unknown(self, syms: list[int]) -> list[int]:
        """Merge the runs between unknown characters; unknown symbols never merge."""
        out: list[int] = []
        run: list[int] = []
        for t in syms:
            if t < 0:
                if run:
                    out.extend(bpe.merge_loop(run, self._pair))
                    run = []
                out.append(t)
            else:
                run.append(t)
        if run:
            out.extend(bpe.merge_loop(run, self._pair))
        return out
