"""Added tokens (control, unknown, user-defined): the matchers built from a spec, and cutting
them out of the text before BPE.

This module owns :class:`_AddedTokens`, a base of :class:`~rmlprep.tokenizer.Tokenizer`:
:meth:`_build_added_tokens` (called while the Tokenizer builds), :meth:`_cut_added` /
:meth:`_cut` (called while it encodes) and the public seam for callers that encode text they
assembled themselves: :meth:`cut_added` (one text) and :meth:`cut_added_parts` (consecutive
parts of one text, each parsed with its own ``parse_special``: a chat render's template text
and message text, :mod:`rmlprep.chat.encode`). The literal-trie matcher itself is
:func:`rmlprep.tokenizer_build._matcher`. :mod:`rmlprep.tokenizer` owns the rest of building
and encoding.

Source: tokenizers (``tokenizer/added_vocabulary.rs``: ``find_matches``,
``extract_and_normalize``), sentencepiece (user-defined symbols), llama.cpp
(``tokenizer_st_partition``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from .errors import TokenizeError
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
        self._longest_added = max((len(t) for t in self.special_tokens), default=0)
        self._user_ids = frozenset(i for _, i in user)
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
                start, end = _stretch(text, start, end, pos, fl)
            if start > pos:
                out.append(text[pos:start])
            out.append(tid)
            pos = max(pos, end)
        if pos < n:
            out.append(text[pos:])
        return out

    # -- the public seam ---------------------------------------------------------------------
    @property
    def cuts_normalized(self) -> bool:
        """Whether :meth:`cut_added` and :meth:`cut_added_parts` give normalized text pieces.

        True for a spec with added tokens matched after normalization (Hugging Face
        ``normalized: true``): the pieces are then the normalized text, as tokenizers'
        ``extract_and_normalize`` leaves them, and are encoded with
        ``encode_fragments(..., normalized=True)``. False: the pieces are the text as given.
        """
        return self._two_pass

    def cut_added(self, text: str, *, parse_special: bool = False) -> list[str | int]:
        """Cut the added tokens out of ``text``, as :meth:`encode` does before BPE.

        Args:
            text: the text (lone surrogates are kept; :meth:`encode` replaces them first).
            parse_special: cut control tokens too, as ``encode(..., parse_special=True)``. False
                cuts what ``encode(..., parse_special=False)`` cuts: the user-defined tokens of a
                spec with ``parse_user_defined_always`` (Hugging Face ``special: false``,
                sentencepiece and GGUF user-defined pieces); control-token text stays text.
        Returns:
            str pieces and int ids in text order, no empty piece: ``encode_fragments(pieces,
            normalized=self.cuts_normalized)`` gives ``encode(text, parse_special=...)``'s ids.
            Whitespace that an ``lstrip``/``rstrip`` token swallows is in no piece. The pieces
            are normalized text when :attr:`cuts_normalized` is true.
        Raises:
            TokenizeError: ``text`` is not a str.

        Example (Qwen2.5, where ``<tool_call>`` is ``special: false`` and ``<|im_end|>`` special)::

            >>> tok.cut_added("a<tool_call>b<|im_end|>")
            ['a', 151657, 'b<|im_end|>']
            >>> tok.cut_added("a<tool_call>b<|im_end|>", parse_special=True)
            ['a', 151657, 'b', 151645]

        Source: tokenizers ``AddedVocabulary::extract_and_normalize`` (``encode_special_tokens``
        for ``parse_special=False``); sentencepiece user-defined symbols; llama.cpp
        ``tokenizer_st_partition``.
        """
        if not isinstance(text, str):
            raise TokenizeError(f"cut_added expects str, got {type(text).__name__}")
        return [f for f in self._cut_added(text, bool(parse_special)) if f != ""]

    def may_hold_added(self, text: str) -> bool:
        """False when ``text`` surely holds no added token that ``cut_added(text,
        parse_special=True)`` would cut (one regex search, no fragments built): a quick test
        before :meth:`cut_added`. True when it finds one, and always for a spec with normalized
        added tokens (found only after normalization: cut to know).

        Example (Qwen2.5): ``"a<|im_end|>b"`` -> True; ``"plain text"`` -> False.
        """
        raw = self._matchers[True][0]
        return self._two_pass or (raw is not None and raw[0].search(text) is not None)

    def cut_added_parts(self, parts: Sequence[tuple[str, bool]]) -> list[tuple[str | int, int, int]]:
        """Cut the added tokens out of the concatenation of ``parts``, each part parsed with its
        own ``parse_special``, as the reference cuts the joined text.

        A chat render is template text (all special tokens parsed) and message text (only
        what ``parse_special=False`` cuts). Cutting each part alone would miss an added token
        that spans two parts (Gemma 3's user-defined ``"\\n\\n\\n"``, from a system prompt that
        ends in ``"\\n"`` and the template's ``"\\n\\n"``) and whitespace that an ``rstrip`` token
        swallows across a border; the joined text is cut once, as ``tokenizers`` cuts it, and
        each fragment says which parts it comes from. A token found at ``[s, e)`` of the joined
        text becomes its id when every part it covers parses it (see :meth:`cut_added`); when
        none does, its text stays text, as ``encode_special_tokens`` passes over it. Normalized
        added tokens (:attr:`cuts_normalized`) are found in the normalized text between the
        others, as ``tokenizers`` finds them.

        Args:
            parts: ``(text, parse_special)`` pairs, in order.
        Returns:
            ``(fragment, first, last)`` triples in text order: a str piece (never empty, never
            across a border: ``first == last``) or an int id, and the indexes of the first and
            last part it covers (an id spanning a border covers several; whitespace an
            ``lstrip``/``rstrip`` token swallows is in no fragment and not counted). With
            :attr:`cuts_normalized` the pieces are normalized text. One part gives the pieces
            of :meth:`cut_added`.
        Raises:
            TokenizeError: where no cut is exact: a token's text spans a part that parses it
                and one that does not (``"<|im_"`` + ``"end|>"``: neither the id nor the text is
                what the reference gives); a normalizer that changes text across a border (the
                joined text normalizes differently from its parts, e.g. NFC of ``"e"`` +
                ``"\\u0301"``); control-token text in an unparsed part overlapping a user-defined
                token there, for a spec whose ``parse_special=False`` does not see control tokens
                (sentencepiece, GGUF); a part that is not a str.

        Example (Gemma 3, whose ``"\\n"`` ... ``"\\n" * 31`` are user-defined tokens 107, 108, 109...)::

            >>> tok.cut_added_parts([("Be brief.\\n", False), ("\\n\\nHi", True)])
            [('Be brief.', 0, 0), (109, 0, 1), ('Hi', 1, 1)]

        Source: tokenizers ``AddedVocabulary::extract_and_normalize`` and ``find_matches``
        (leftmost-longest, ``lstrip``/``rstrip`` over White_Space).
        """
        texts: list[str] = []
        modes: list[bool] = []
        for k, (t, ps) in enumerate(parts):
            if not isinstance(t, str):
                raise TokenizeError(f"cut_added_parts: part {k} is {type(t).__name__}, expected str")
            texts.append(t)
            modes.append(bool(ps))
        bounds = [0]
        for t in texts:
            bounds.append(bounds[-1] + len(t))
        text = "".join(texts)
        items = self._scan_parts(text, bounds, modes, list(range(len(texts))), 0)
        if not self._two_pass:
            return [tuple(it) for it in items]
        out: list[tuple[str | int, int, int]] = []
        normalize = self._normalize or (lambda x: x)
        k = 0
        while k < len(items):
            if not isinstance(items[k][0], str):
                out.append(tuple(items[k]))
                k += 1
                continue
            j = k
            while j < len(items) and isinstance(items[j][0], str):
                j += 1
            run = items[k:j]  # one piece of the joined text between two ids, split at borders
            normed = [normalize(f) for f, _, _ in run]
            if len(run) > 1 and normalize("".join(f for f, _, _ in run)) != "".join(normed):
                raise TokenizeError(f"the normalizer changes {''.join(f for f, _, _ in run)!r} across the border of "
                                    f"parts {run[0][1]} and {run[-1][1]}: the joined text normalizes differently from "
                                    "its parts, so its added tokens cannot be cut part by part")
            local = [0]
            for f in normed:
                local.append(local[-1] + len(f))
            owners = [p for _, p, _ in run]
            out.extend(tuple(it) for it in self._scan_parts("".join(normed), local, [modes[p] for p in owners],
                                                            owners, 1))
            k = j
        return out

    def _parses(self, tid: int, parse_special: bool) -> bool:
        """Whether a part with this ``parse_special`` cuts token ``tid`` out (see :meth:`cut_added`)."""
        return parse_special or (self.spec.parse_user_defined_always and tid in self._user_ids)

    def _scan_parts(self, text: str, bounds: list[int], modes: list[bool], owners: list[int], stage: int) -> list[list]:
        """One pass of :meth:`cut_added_parts` over ``text`` (raw: ``stage`` 0; a normalized piece:
        1): ``[fragment, first, last]`` lists, str pieces split at the ``bounds`` of the parts
        (whose indexes in the caller are ``owners``)."""
        matcher = self._matchers[True][stage]
        out: list[list] = []
        n = len(text)
        pos = 0
        if matcher is not None and n:
            regex, ids, _ = matcher
            flags = self._flags
            for m in regex.finditer(text):
                start, end = m.span()
                tid = ids[m.group()]
                first = bisect_right(bounds, start) - 1
                last = bisect_right(bounds, end - 1) - 1
                took = [self._parses(tid, modes[p]) for p in range(first, last + 1)]
                if not all(took):
                    if any(took):
                        raise TokenizeError(f"{m.group()!r} spans parts {owners[first]} to {owners[last]}, which parse "
                                            "it differently (template text and message text?): neither its id nor "
                                            "its text is what the joined text gives")
                    self._check_passed_over(text, start, end, stage)
                    continue  # its text stays text (encode_special_tokens)
                fl = flags.get(tid)
                if fl is not None:
                    start, end = _stretch(text, start, end, pos, fl)
                if start > pos:
                    _split_at(text, pos, start, bounds, owners, out)
                out.append([tid, owners[first], owners[last]])
                pos = max(pos, end)
        if pos < n:
            _split_at(text, pos, n, bounds, owners, out)
        return out

    def _check_passed_over(self, text: str, start: int, end: int, stage: int) -> None:
        """Control-token text at ``[start, end)`` left as text in an unparsed part: for a spec
        whose ``parse_special=False`` does not see control tokens (``unparsed_specials ==
        "ignore"``), a user-defined token overlapping it would be cut there by that matcher;
        the joined scan cannot say which, so it refuses."""
        if self.spec.unparsed_specials != "ignore" or not self.spec.parse_user_defined_always:
            return
        user = self._matchers[False][stage]
        if user is None:
            return
        regex = user[0]
        for p in range(max(0, start - self._longest_added + 1), end):
            m = regex.match(text, p)
            if m is not None and m.end() > start:
                raise TokenizeError(f"control-token text {text[start:end]!r} in an unparsed part overlaps the "
                                    f"user-defined token {m.group()!r}: which one the reference keeps is not known "
                                    "here")


def _split_at(text: str, a: int, b: int, bounds: list[int], owners: list[int], out: list[list]) -> None:
    """Append ``text[a:b]`` to ``out`` as ``[piece, part, part]`` lists, cut at the part ``bounds``."""
    k = bisect_right(bounds, a) - 1
    while a < b:
        e = min(b, bounds[k + 1])
        if e > a:
            out.append([text[a:e], owners[k], owners[k]])
        a = e
        k += 1


def _stretch(text: str, start: int, end: int, pos: int, fl) -> tuple[int, int]:
    """An added token's match ``[start, end)`` widened over the White_Space its ``lstrip`` /
    ``rstrip`` flags take (back to ``pos`` at most, the end of the previous match), as
    ``AddedVocabulary::find_matches`` does."""
    if fl.lstrip:
        while start > pos and text[start - 1] in _WHITE_SPACE:
            start -= 1
    if fl.rstrip:
        n = len(text)
        while end < n and text[end] in _WHITE_SPACE:
            end += 1
    return start, end
