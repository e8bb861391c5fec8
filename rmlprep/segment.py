"""One text segment on its way to BPE: normalizers, the prefix space, unk fusing.

A *segment* is a run of text between two special (added) tokens. Both encoders prepare a
segment the same way before splitting it into pieces, so what they share lives here, below
both: :mod:`rmlprep.tokenizer` (the pure-Python reference path) and :mod:`rmlprep.native` (the
bridge to the compiled hot path) import this module and never each other's internals.

Source: tokenizers ``normalizers/{unicode,replace}.rs`` and ``pre_tokenizers/{byte_level,
metaspace}.rs`` (prefix space, ``prepend_scheme``), ``models/bpe/model.rs`` (``fuse_unk``);
sentencepiece ``normalizer.cc`` (``add_dummy_prefix``).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping, Sequence

from .spec import BYTE_LEVEL, TokenizerSpec

__all__ = [
    "NORMALIZERS",
    "SPACE",
    "fuse_unk",
    "lowercase",
    "make_normalizer",
    "prefix_spaces",
    "replace_lone_surrogates",
    "segment_preparer",
]

SPACE = "\u2581"  # "▁", SentencePiece's visible space
#: Normalizer names a spec may use (``TokenizerSpec.normalizers``).
NORMALIZERS = ("nfc", "nfkc", "nfd", "nfkd", "lowercase", "replace")

Normalize = Callable[[str], str]


def replace_lone_surrogates(text: str) -> str:
    """``text`` made encodable as UTF-8, by tiktoken's rule; the same object when it already is.

    A Python str may hold surrogate code points (U+D800..U+DFFF: ``json.loads`` of ``"\\ud800"``,
    ``os.fsdecode``), which no UTF-8 byte sequence spells. Every encode path of rmlprep first
    does what tiktoken's ``Encoding.encode`` does for such text: a high surrogate followed by a
    low one becomes the one astral character they stand for, and each remaining (lone)
    surrogate becomes U+FFFD. So the ids equal tiktoken's for the same str, and no id sequence
    rmlprep produces decodes to bytes that are not UTF-8. ``replace_lone_surrogates(t) is not t``
    tells that a replacement happened.

    Cost: ``str.isascii`` (constant time) for ASCII text, one UTF-8 encode of the text otherwise.

    Source: tiktoken ``core.py`` ``Encoding.encode`` (``text.encode("utf-16", "surrogatepass")
    .decode("utf-16", "replace")`` after a ``UnicodeEncodeError``).
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


#: ``suspects(text) -> None | list[int]``: None when ``text`` is in a normalization form;
#: else flat [start, end) code-point spans, each between two normalization boundaries, outside
#: which it is (the compiled ``nfc_suspects`` / ``nfkc_suspects`` of :mod:`rmlprep.native`).
Suspects = Callable[[str], "list[int] | None"]


def make_normalizer(normalizers: Sequence[tuple[str, ...]],
                    suspects: Mapping[str, Suspects] | None = None) -> Normalize | None:
    """Compose a spec's normalizers into one ``normalize(text) -> text`` (None when there are none).

    Args:
        normalizers: ``TokenizerSpec.normalizers``: ``("nfc",)``, ``("nfkc",)``, ``("nfd",)``,
            ``("nfkd",)`` (Unicode normalization forms, Python's ``unicodedata``),
            ``("lowercase",)`` (:func:`lowercase`) and ``("replace", old, new)`` (every
            occurrence of ``old``), applied in order.
        suspects: form name (``"NFC"``, ``"NFKC"``) -> a quick check (:data:`Suspects`). A form
            with one calls ``unicodedata.normalize`` only on the spans it names (the text as a
            whole when the check cannot tell), so text already in the form costs one scan of its
            code units; the result is the same str as ``unicodedata.normalize`` of the whole text
            (``tests/test_native.py``). The other forms call ``unicodedata.normalize`` on every
            text that is not ASCII.
    """
    steps: list[Normalize] = []
    for norm in normalizers:
        if norm[0] == "replace":
            old, new = norm[1], norm[2]
            steps.append(lambda s, old=old, new=new: s.replace(old, new))
        elif norm[0] == "lowercase":
            steps.append(lowercase)
        elif suspects and norm[0].upper() in suspects:
            steps.append(_checked_normalizer(norm[0].upper(), suspects[norm[0].upper()]))
        else:
            form = norm[0].upper()
            # ASCII text is the same in every normalization form: skip the call (per document)
            steps.append(lambda s, form=form: s if s.isascii() else unicodedata.normalize(form, s))
    if not steps:
        return None
    if len(steps) == 1:
        return steps[0]

    def normalize(s: str) -> str:
        for step in steps:
            s = step(s)
        return s

    return normalize


def _checked_normalizer(form: str, suspects: Suspects) -> Normalize:
    """``unicodedata.normalize(form, text)``, on the spans ``suspects`` names only.

    Exact because a span starts and ends at normalization boundaries (a code point that is
    Yes for the form's quick check, with combining class 0: nothing after it combines or
    reorders with anything before it), so the form of the text is the form of each run between
    them put together, and the runs outside the spans are already in the form.
    """
    normalize = unicodedata.normalize

    def checked(text: str) -> str:
        spans = suspects(text)
        if spans is None:
            return text
        if len(spans) == 2 and spans[0] == 0 and spans[1] == len(text):
            return normalize(form, text)
        parts, pos = [], 0
        for k in range(0, len(spans), 2):
            start, end = spans[k], spans[k + 1]
            parts.append(text[pos:start])
            parts.append(normalize(form, text[start:end]))
            pos = end
        parts.append(text[pos:])
        return "".join(parts)

    return checked


def lowercase(text: str) -> str:
    """Each character's lowercase mapping, without context (Rust's ``char::to_lowercase``).

    Python's ``str.lower`` applies the one context rule of Unicode's SpecialCasing
    (Final_Sigma: "Σ" at the end of a word becomes "ς"); the reference maps every "Σ" to "σ".
    Everything else is the same full mapping (``"İ"`` -> ``"i̇"``), from Python's Unicode
    tables: a character whose case mapping is newer than them stays as is.

    Source: tokenizers ``normalizers/utils.rs`` ``Lowercase`` -> ``NormalizedString::lowercase``.
    """
    if "\u03a3" in text:
        text = text.replace("\u03a3", "\u03c3")
    return text.lower()


def prefix_spaces(spec: TokenizerSpec) -> tuple[str, ...]:
    """What counts as "already starts with a space" for ``prefix_if_missing``.

    Hugging Face ``ByteLevel`` checks ``" "`` only (``pre_tokenizers/byte_level.rs``);
    ``Metaspace`` checks its replacement ``"▁"`` too.
    """
    return (" ",) if spec.kind == BYTE_LEVEL else (" ", SPACE)


def segment_preparer(spec: TokenizerSpec, normalize: Normalize | None, *, spaces: bool = True) -> Normalize:
    """``prepare(text)``: what the encoder does to a text that is one segment at the start of the
    input before BPE sees it: the normalizers, the prefix space (every ``prefix_scheme`` agrees on
    the first segment), spaces to ``"▁"`` for SentencePiece-style specs.

    Not valid for the ``"whole_text"`` prefix scheme with normalizers (that scheme decides the
    prefix before normalizing); callers check. ``spaces=False`` leaves spaces as they are (the
    native encoder writes them as ``"▁"`` itself, without a copy of the text).
    """
    add_prefix, if_missing, starts = spec.add_prefix_space, spec.prefix_if_missing, prefix_spaces(spec)
    keep_spaces = spec.kind == BYTE_LEVEL or not spaces

    def prepare(text: str) -> str:
        if normalize is not None:
            text = normalize(text)
        if add_prefix and text and not (if_missing and text[0] in starts):
            text = " " + text
        return text if keep_spaces else text.replace(" ", SPACE)

    return prepare


def fuse_unk(ids: list[int], unk: int) -> list[int]:
    """Collapse each run of consecutive ``unk`` ids into one (Hugging Face BPE ``fuse_unk``)."""
    out: list[int] = []
    for i in ids:
        if i == unk and out and out[-1] == unk:
            continue
        out.append(i)
    return out
