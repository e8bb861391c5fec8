"""Added tokens (control, unknown, user-defined): the matchers built from a spec, and cutting
them out of the text before BPE.

This module owns :class:`_AddedTokens`, a base of :class:`~rmlprep.tokenizer.Tokenizer`:
:meth:`_build_added_tokens` (called while the Tokenizer builds) and :meth:`_cut_added` /
:meth:`_cut` (called while it encodes); the literal-trie matcher itself is
:func:`rmlprep.tokenizer_build._matcher`. :mod:`rmlprep.tokenizer` owns the rest of building
and encoding.

Source: tokenizers (``tokenizer/added_vocabulary.rs``: ``find_matches``,
``extract_and_normalize``), sentencepiece (user-defined symbols), llama.cpp
(``tokenizer_st_partition``).
"""

from __future__ import annotations

from .spec import TokenType
from .tokenizer_build import _WHITE_SPACE, _matcher


class _AddedTokens:
    """The added-token methods of :class:`~rmlprep.tokenizer.Tokenizer`."""

    def _build_added_tokens(self) -> None:
        """The matchers that cut added (control, unknown, user-defined) tokens out of the text.

        Each matcher is ``(regex, content -> id, ids passed over)`` or None. Tokens whose flags
        say ``normalized`` are matched, by their normalized content, on the normalized text of
        what the others left (Hugging Face ``AddedVocabulary::extract_and_normalize``: two
        passes); the rest on the raw text. With ``parse_special=False`` only user-defined tokens
        are cut, and only for a spec with ``parse_user_defined_always``; for
        ``unparsed_specials == "pass_over"`` the matcher still finds the special tokens and passes
        over them as text (so a user-defined token inside one is not matched, as in tokenizers
        with ``encode_special_tokens``), for ``"ignore"`` it does not know them (sentencepiece).
        """
        spec = self.spec
        self._flags = {a.id: a for a in spec.added_token_flags}
        # the unknown token is cut out like a control token (llama.cpp tokenizer_st_partition;
        # Hugging Face lists "<unk>" among the special added tokens)
        vocab = spec.vocab
        control = [(vocab[i], i) for i in self._ids_of_types(TokenType.CONTROL, TokenType.UNKNOWN) if vocab[i]]
        user = [(vocab[i], i) for i in self._ids_of_types(TokenType.USER_DEFINED) if vocab[i]]
        self.special_tokens: dict[str, int] = dict(control + user)
        normalized = {a.id for a in spec.added_token_flags if a.normalized}
        norm = self._normalize or (lambda t: t)
        raw_c = [(t, i) for t, i in control if i not in normalized]
        raw_u = [(t, i) for t, i in user if i not in normalized]
        norm_c = [(norm(t), i) for t, i in control if i in normalized]
        norm_u = [(norm(t), i) for t, i in user if i in normalized]
        controls = frozenset(i for _, i in control)
        self._two_pass = bool(normalized)
        # (raw matcher, normalized matcher) for parse_special True / False
        self._matchers = {True: (_matcher(raw_c + raw_u), _matcher(norm_c + norm_u))}
        if not spec.parse_user_defined_always:
            self._matchers[False] = (None, None)
        elif spec.unparsed_specials == "pass_over":
            self._matchers[False] = (_matcher(raw_c + raw_u, controls), _matcher(norm_c + norm_u, controls))
        else:
            self._matchers[False] = (_matcher(raw_u), _matcher(norm_u))

    def _cut_added(self, text: str, parse_special: bool) -> list[str | int]:
        """Split text into str fragments and added-token ids (see :meth:`_build_added_tokens`).

        When the spec has normalized added tokens (``self._two_pass``), every str fragment
        returned is already normalized.
        """
        raw, normed = self._matchers[parse_special]
        fragments = self._cut(text, raw) if raw is not None else [text]
        if not self._two_pass:
            return fragments
        normalize = self._normalize
        out: list[str | int] = []
        for f in fragments:
            if isinstance(f, int):
                out.append(f)
                continue
            f = normalize(f) if normalize is not None else f
            out.extend(self._cut(f, normed) if normed is not None else [f])
        return out

    def _cut(self, text: str, matcher) -> list[str | int]:
        """One pass of Hugging Face ``AddedVocabulary::find_matches``: leftmost-longest matches,
        non-overlapping; ``lstrip`` / ``rstrip`` take the White_Space beside a token."""
        regex, ids, passed_over = matcher
        out: list[str | int] = []
        flags = self._flags
        pos = 0
        n = len(text)
        for m in regex.finditer(text):
            start, end = m.span()
            tid = ids[m.group()]
            if tid in passed_over:
                continue  # special token text read as text (encode_special_tokens)
            fl = flags.get(tid)
            if fl is not None:
                if fl.lstrip:
                    while start > pos and text[start - 1] in _WHITE_SPACE:
                        start -= 1
                if fl.rstrip:
                    while end < n and text[end] in _WHITE_SPACE:
                        end += 1
            if start > pos:
                out.append(text[pos:start])
            out.append(tid)
            pos = max(pos, end)
        if pos < n:
            out.append(text[pos:])
        return out
