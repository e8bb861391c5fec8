"""Which texts may hold special-token text: the filter of the whole-text fast paths.

:mod:`rmlprep.native`'s ``plain_encoder`` and ``encode_batch_flat`` take a text as one segment
(no special token to cut out) when none of the 2-character prefixes of the special tokens that
``encode`` would cut occurs in it; this module computes those prefixes and tests a text for them,
and says when a batch's texts need no test or preparation at all (:func:`plain_segments`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .spec import TokenType


def _special_prefixes(tokens) -> tuple[str, ...]:
    """Distinct 2-character prefixes of the tokens (1 for 1-character tokens): if none occurs in
    a text, no token does, so cutting special tokens leaves the text whole."""
    return tuple(sorted({t[:2] for t in tokens if t}))


def _special_prefix_filter(tokenizer, parse_special: bool) -> tuple[str, ...]:
    """Prefixes whose absence proves a text holds no special token that ``encode`` would cut
    with this ``parse_special`` (user-defined ones only, for ``parse_user_defined_always``)."""
    specials = tokenizer.special_tokens
    if parse_special:
        return _special_prefixes(specials)
    if not tokenizer.spec.parse_user_defined_always:
        return ()
    return _special_prefixes(t for t, i in specials.items() if tokenizer._types[i] == TokenType.USER_DEFINED)


def _holds_any(prefixes: Sequence[str]) -> Callable[[str], bool]:
    """``holds(text)``: ``any(p in text for p in prefixes)``, as ``str.find`` of each distinct
    first character and a look at the character after it.

    A 1-character ``find`` runs at memchr speed (CPython's ``find_char``); a 2-character ``in``
    at about 1 ns per code point. Qwen2.5's three prefixes ("</", "<t", "<|": its non-special
    added tokens, parsed even with ``parse_special=False``) cost 33-41 ms of CPU per pass over
    either bench corpus scanned each; this reads each "<" instead: 0.9 ms on the multilingual
    corpus (12 of 855 documents hold a "<"), 4.6 ms on the Debian sample (852 of 11,043, the
    e-mail addresses of changelogs). Past 8 + len(text) / 64 occurrences of a first character
    not followed by a second one (each look costs about what scanning 64 code points for the
    prefixes does), the prefixes are scanned for as before: the work stays linear.
    """
    groups: dict[str, list[str]] = {}
    for p in prefixes:
        groups.setdefault(p[0], []).append(p)
    # (first character, whether it is a prefix itself, the second characters of the 2-character
    # prefixes it starts, every longer prefix it starts, whether one is longer than 2)
    plan = tuple((c, c in ps, frozenset(p[1] for p in ps if len(p) == 2),
                  tuple(p for p in ps if len(p) > 1), any(len(p) > 2 for p in ps))
                 for c, ps in groups.items())

    def holds(text: str) -> bool:
        for c, itself, seconds, longer, long3 in plan:
            i = text.find(c)
            if i < 0:
                continue
            if itself:
                return True
            if not long3:
                for _ in range(8 + (len(text) >> 6)):
                    if text[i + 1:i + 2] in seconds:
                        return True
                    i = text.find(c, i + 1)
                    if i < 0:
                        break
                else:
                    if any(p in text for p in longer):
                        return True
            elif any(p in text for p in longer):
                return True
        return False

    return holds


def added_filter(tokenizer, parse_special: bool) -> Callable[[str], bool]:
    """``holds(text)``: False when ``text`` surely holds no added token that ``encode`` would cut
    with this ``parse_special``: :func:`_holds_any` of the 2-character prefixes first, then, where
    one occurs, one search of the tokenizer's raw added-token matcher (the one ``encode`` cuts with).

    The prefixes alone sent every Debian changelog holding ``"</"`` (an HTML or XML closing tag:
    Qwen2.5's non-special ``</tool_call>`` starts so) through ``encode`` one by one on the calling
    thread: 133 of the bench's 11,043 texts, 45 ms of a 0.135 s ``encode_batch_flat`` call. A
    spec with normalized added tokens (found only in the normalized text) keeps the prefix test.
    """
    prefix = _holds_any(_special_prefix_filter(tokenizer, parse_special))
    raw = tokenizer._matchers[parse_special][0]
    if raw is None or tokenizer._two_pass:
        return prefix
    search = raw[0].search
    return lambda text: prefix(text) and search(text) is not None


def plain_segments(tokenizer, prefixes: Sequence[str], texts: Sequence) -> list[str] | None:
    """``list(texts)`` when each text is a segment of its own as it is, else None.

    That is what ``native.encode_batch_flat``'s per-text loop gives when there is no special-token
    prefix to look for (``prefixes`` from :func:`_special_prefix_filter`), no normalizer, no prefix
    space and every item is a ``str``: GPT-2, Llama 3 and o200k with ``parse_special=False``. One
    pass instead of ~150 ns of Python per text on the calling thread before the batch's workers
    start (1.7 ms against 0.18 ms for the 11,043 texts of the bench's Debian sample).
    """
    if prefixes or tokenizer._normalize is not None or tokenizer.spec.add_prefix_space:
        return None
    return list(texts) if set(map(type, texts)) <= {str} else None
