"""Hugging Face ``Split`` behaviours: which pieces a split keeps, from the spans its pattern matched.

A ``Split`` pre-tokenizer finds the matches of its pattern; the matches and the gaps between
them cover the text, and its behaviour (``SplitDelimiterBehavior``) decides what becomes a piece:
``isolated`` keeps both, ``removed`` drops the delimiters, ``merged_with_previous`` /
``merged_with_next`` glue each delimiter to the piece before / after it, ``contiguous`` glues
runs of delimiters; ``invert`` makes the gaps the delimiters. :mod:`rmlprep.pretokenize` compiles
the patterns and calls :func:`find_iter` and :func:`split_spans`.

Source: tokenizers ``pre_tokenizers/split.rs``, ``tokenizer/normalizer.rs``
(``NormalizedString::split``), ``tokenizer/pattern.rs`` (``find_matches``, ``Invert``),
``tokenizer/pre_tokenizer.rs`` (empty splits dropped), ``utils/onig.rs`` (match iteration).
"""

from __future__ import annotations

import re
from types import MappingProxyType

__all__ = ["BEHAVIORS", "BEHAVIOR_OF_JSON", "ISOLATED", "find_iter", "split_spans"]

#: ``Split`` behaviours, as Hugging Face's ``SplitDelimiterBehavior`` (snake_case of its names).
BEHAVIORS = ("isolated", "removed", "merged_with_previous", "merged_with_next", "contiguous")
#: tokenizer.json spelling -> ours.
BEHAVIOR_OF_JSON = MappingProxyType({
    "Isolated": "isolated",
    "Removed": "removed",
    "MergedWithPrevious": "merged_with_previous",
    "MergedWithNext": "merged_with_next",
    "Contiguous": "contiguous",
})
#: The default: matches and gaps are both pieces, nothing inverted.
ISOLATED = ("isolated", False)


def find_iter(regex: re.Pattern, text: str) -> list[tuple[int, int]]:
    """Match spans as tokenizers' ``Split`` iterates them (``SysRegex::find_iter``): after an
    empty match the search resumes one character later, and an empty match ending where the
    previous match ended is skipped. Python's ``finditer`` differs only where empty matches occur
    (it retries a non-empty match at the position of an empty one), so patterns that cannot match
    empty use it directly. Checked against the installed ``tokenizers`` by
    tests/test_pretokenize.py."""
    out: list[tuple[int, int]] = []
    n = len(text)
    pos = 0
    last_end = -1
    search = regex.search
    while pos <= n:
        m = search(text, pos)
        if m is None:
            break
        s, e = m.span()
        if s == e:
            pos = e + 1
            if e == last_end:
                continue
        else:
            pos = e
        last_end = e
        out.append((s, e))
    return out


def split_spans(
    text: str, spans: list[tuple[int, int]], behavior: str, invert: bool
) -> list[tuple[int, int]]:
    """The pieces (start, end) that a ``Split`` with ``behavior`` keeps, from its match spans.

    The matches and the gaps between them cover the text (``invert`` swaps which are the
    "delimiters"); ``isolated`` keeps both, ``removed`` drops the delimiters, the ``merged_*``
    behaviours glue a delimiter to the piece before / after it, ``contiguous`` glues runs of
    delimiters together. Empty pieces are dropped (an empty match still changes what is glued).

    Source: tokenizers ``tokenizer/normalizer.rs`` ``NormalizedString::split``,
    ``tokenizer/pattern.rs`` (``find_matches``, ``Invert``), ``pre_tokenizer.rs`` (empty splits).
    """
    n = len(text)
    if n == 0:
        return []
    flags: list[tuple[int, int, bool]] = []
    prev = 0
    for s, e in spans:
        if prev != s:
            flags.append((prev, s, invert))
        flags.append((s, e, not invert))
        prev = e
    if prev != n:
        flags.append((prev, n, invert))
    if behavior == "isolated":
        return [(s, e) for s, e, _ in flags if e > s]
    if behavior == "removed":
        return [(s, e) for s, e, delim in flags if not delim and e > s]
    acc: list[list[int]] = []
    previous = False
    if behavior == "merged_with_next":
        for s, e, delim in reversed(flags):
            if delim and not previous and acc:
                acc[-1][0] = s
            else:
                acc.append([s, e])
            previous = delim
        acc.reverse()
    else:
        contiguous = behavior == "contiguous"
        for s, e, delim in flags:
            glue = (delim == previous) if contiguous else (delim and not previous)
            if glue and acc:
                acc[-1][1] = e
            else:
                acc.append([s, e])
            previous = delim
    return [(s, e) for s, e in acc if e > s]
