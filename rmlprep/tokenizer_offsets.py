"""Encoding with byte offsets: :meth:`~rmlprep.tokenizer.Tokenizer.encode_fragments` takes text
fragments and literal token ids (what a chat format writes) and gives each token's UTF-8 byte
offset in the joined fragments, the offsets the chat loss mask is cut at (:mod:`rmlprep.chat.encode`).

Source: tokenizers (``Encoding.offsets``, in bytes here), sentencepiece (``bpe_model.cc``: the
dummy prefix per text between special tokens, :mod:`rmlprep.spm_special`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .segment import replace_lone_surrogates

__all__ = ["_FragmentOffsets"]


class _FragmentOffsets:
    """The offsets half of :class:`~rmlprep.tokenizer.Tokenizer` (a mixin: it uses the
    tokenizer's ``_encode_text``, ``_whole_text_prefix``, ``_check_id``, ``_bytes`` and
    ``_user_ids``)."""

    def encode_fragments(
        self, fragments: Sequence[str | int], *, add_special_tokens: bool = False, normalized: bool = False
    ) -> tuple[list[int], list[int]]:
        """Encode text fragments and literal token ids, with each token's byte offset.

        Consecutive ``str`` fragments are joined and encoded as one text (never parsed for
        special tokens); an ``int`` fragment is a token id inserted as-is and acts like a
        special token cut out of the text (prefix-space rules see it so). ``normalized=True``
        says the str fragments are already normalized (the pieces of :meth:`cut_added` /
        :meth:`cut_added_parts` when :attr:`cuts_normalized`), so the spec's normalizer is not
        run on them again; offsets are then positions in those normalized fragments. A
        SentencePiece ``.model`` read alone gives each (joined) text at the start or after a
        control or unknown id its own dummy prefix ``"▁"`` (not after a user-defined piece, which
        sentencepiece matches inside its one text), as one ``sp.encode`` per text between special
        tokens does: transformers 4.57.1's
        ``LlamaTokenizer`` and ``LlamaTokenizerFast`` with ``legacy=True`` (their default for a
        ``.model``), llama.cpp (``add_space_prefix`` after each special token), Meta's and
        mistral-common's chat code; ``[1, "hi"]`` -> ``[1, 7251 '▁hi']`` on Llama 2 (source:
        ``fixtures/spm_chat.json``, :mod:`rmlprep.spm_special`).

        Returns:
            ``(ids, starts)``: ``starts[i]`` is the UTF-8 byte offset where token ``i`` starts
            in the concatenation of the fragments' bytes (an int fragment counts as its
            token's raw bytes). Offsets are nondecreasing; a token holding an added prefix space
            starts at its text's start. Normalizers that change lengths (NFC) and unk tokens
            make offsets approximate (clamped to the text).
        Raises:
            TokenIdError: an int fragment outside the vocab.
        """
        parts: list[str | int] = []
        for f in fragments:
            if isinstance(f, str):
                if parts and isinstance(parts[-1], str):
                    parts[-1] = parts[-1] + f
                else:
                    parts.append(f)
            else:
                self._check_id(f)
                parts.append(int(f))
        parts = [replace_lone_surrogates(p) if isinstance(p, str) else p for p in parts]
        # a .model read alone: sentencepiece's dummy prefix before each text between special
        # tokens (one sp.encode per text: transformers' LlamaTokenizer legacy=True, llama.cpp)
        per_text = self.spec.prefix_scheme == "whole_text"
        lead = per_text and self.spec.add_prefix_space and parts and parts[0] in self._user_ids
        if lead:
            parts.insert(0, " ")  # "<tool>x": sentencepiece's '▁' stands before a user-defined piece
        # every fragment (and BOS/EOS) is a part: its tokens start at the part's byte position
        # plus the bytes of the tokens before them in the part, less the added prefix, clamped
        ids: list[int] = []
        counts: list[int] = []  # tokens per part
        bases: list[int] = []  # byte position of the part in the concatenation
        shifts: list[int] = []  # prefix bytes the tokenizer added to the part
        sizes: list[int] = []  # byte length of the part (offsets are clamped to it)
        pos = 0
        if add_special_tokens:
            self.spec.check_adds()
        if add_special_tokens and self.spec.add_bos:
            ids.append(self.spec.bos_id)
            counts.append(1), bases.append(0), shifts.append(0), sizes.append(0)
        prev_special = True
        for k, f in enumerate(parts):
            if isinstance(f, int):
                ids.append(f)
                n_bytes = len(self._bytes[f])
                counts.append(1), bases.append(pos), shifts.append(0), sizes.append(n_bytes)
                pos += n_bytes
                prev_special = True
                continue
            extra = 1 if lead and k == 0 else 0
            after = k == 0 or parts[k - 1] not in self._user_ids  # sentencepiece: no '▁' after its own
            if per_text and after and not extra and (g := self._whole_text_prefix(f)) != f:  # user-defined pieces
                f, extra = g, len(g) - len(f)
            n_bytes = len(f.encode("utf-8", "surrogatepass")) - extra
            seg_ids, prefix = self._encode_text(f, at_start=(k == 0), after_special=prev_special, want_prefix=True,
                                                normalized=normalized)
            ids.extend(seg_ids)
            counts.append(len(seg_ids)), bases.append(pos), shifts.append(prefix + extra), sizes.append(n_bytes)
            pos += n_bytes
            prev_special = False
        if add_special_tokens and self.spec.add_eos:
            ids.append(self.spec.eos_id)
            counts.append(1), bases.append(pos), shifts.append(0), sizes.append(0)
        return ids, self._token_starts(ids, counts, bases, shifts, sizes)

    def _token_starts(self, ids, counts, bases, shifts, sizes) -> list[int]:
        """Vectorized byte offsets for encode_fragments (see there)."""
        if not ids:
            return []
        lens = self._token_lengths()[np.asarray(ids, dtype=np.int64)]
        if self.spec.unk_id is not None:
            lens[np.asarray(ids) == self.spec.unk_id] = 1  # an unk stands for one unit of text
        excl = np.cumsum(lens) - lens  # bytes before each token, whole sequence
        counts_a = np.asarray(counts, dtype=np.int64)
        part = np.repeat(np.arange(len(counts_a)), counts_a)
        first = np.cumsum(counts_a) - counts_a  # index of each part's first token
        excl_end = np.append(excl, 0)
        within = excl - excl_end[first][part]
        off = np.clip(within - np.asarray(shifts, dtype=np.int64)[part], 0, np.asarray(sizes, dtype=np.int64)[part])
        return (off + np.asarray(bases, dtype=np.int64)[part]).tolist()

    def _token_lengths(self):
        """Byte length of every token as an int64 numpy array (built on first use)."""
        if self._lens is None:
            self._lens = np.fromiter(map(len, self._bytes), dtype=np.int64, count=self._n)
        return self._lens
