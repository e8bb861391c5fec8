"""What a :class:`~rmlprep.tokenizer.Tokenizer` builds from its spec before it can encode.

This module owns the spec checks (:func:`_validate`: the ``SpecError`` rules of
:meth:`Tokenizer.create <rmlprep.tokenizer.Tokenizer.create>`), the merge-id table
(:func:`_merge_ids`, shared by the pure merge dict, the native pair table and the load cache),
each token's raw bytes (:func:`_token_bytes`, what decoding concatenates), the added-token
matcher (:func:`_matcher`, a literal trie regex) and the word splitters of the pure-Python
SentencePiece path. :mod:`rmlprep.tokenizer` owns the Tokenizer itself: indexes, encoding and
decoding.

Source: tokenizers (``models/bpe/serialization.rs``, ``added_vocabulary.rs``,
``pre_tokenizers/metaspace.rs``), sentencepiece (``bpe_model.cc``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable, Iterator
from operator import itemgetter

import numpy as np

from .errors import SpecError
from .hf_decode import STEP_FIELDS, decode_strings
from .pretokenize import check_behaviors
from .segment import SPACE as _SPACE
from .segment import NORMALIZERS
from .spec import BYTE_LEVEL, SENTENCEPIECE, TokenizerSpec, TokenType
from .unicode import bytes_to_unicode, unicode_to_bytes, white_space_ranges

_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_SPECIAL_TYPES = (TokenType.CONTROL, TokenType.USER_DEFINED)


def _validate(spec: TokenizerSpec) -> None:
    """Raise SpecError for the first problem found in ``spec`` (see Tokenizer.create)."""
    where = f"TokenizerSpec{f' {spec.name!r}' if spec.name else ''}"
    if spec.kind not in (BYTE_LEVEL, SENTENCEPIECE):
        raise SpecError(f"{where}: kind {spec.kind!r} is not one of {BYTE_LEVEL!r}, {SENTENCEPIECE!r}")
    n = len(spec.vocab)
    if n == 0:
        raise SpecError(f"{where}: the vocab is empty; a tokenizer needs at least one token")
    if len(spec.token_types) != n:
        raise SpecError(
            f"{where}: token_types has {len(spec.token_types)} entries but the vocab has {n}; "
            "give one type per token"
        )
    valid_types = {int(t) for t in TokenType}
    if not valid_types.issuperset(spec.token_types):
        for i, t in enumerate(spec.token_types):
            if t not in valid_types:
                raise SpecError(f"{where}: token_types[{i}] = {t!r} is not a TokenType value {sorted(valid_types)}")
    if spec.scores is not None and len(spec.scores) != n:
        raise SpecError(
            f"{where}: scores has {len(spec.scores)} entries but the vocab has {n}; "
            "a score-merged tokenizer needs one score per token"
        )
    if spec.merges and spec.scores is not None:
        raise SpecError(f"{where}: give merges or scores, not both")
    if set(map(type, spec.vocab)) != {str}:
        for i, tok in enumerate(spec.vocab):
            if not isinstance(tok, str):
                raise SpecError(f"{where}: vocab[{i}] is {type(tok).__name__}, expected str")
    seen = set(spec.vocab)
    if len(seen) != n:  # name the first repeat
        first: dict[str, int] = {}
        for i, tok in enumerate(spec.vocab):
            j = first.setdefault(tok, i)
            if j != i:
                raise SpecError(f"{where}: vocab[{i}] = {tok!r} duplicates vocab[{j}]; tokens must be unique")
    for field_name in ("bos_id", "eos_id", "unk_id", "pad_id"):
        v = getattr(spec, field_name)
        if v is not None and not (isinstance(v, int) and 0 <= v < n):
            raise SpecError(f"{where}: {field_name} = {v!r} is out of range for a vocab of {n} tokens")
    for k, v in enumerate(spec.eot_ids):
        if not (isinstance(v, int) and 0 <= v < n):
            raise SpecError(f"{where}: eot_ids[{k}] = {v!r} is out of range for a vocab of {n} tokens")
    for i, t in spec.model_types:
        if not (isinstance(i, int) and 0 <= i < n and t in valid_types):
            raise SpecError(f"{where}: model_types entry {(i, t)!r} is not (an id below {n}, a TokenType value)")
    for a in spec.added_token_flags:
        if not 0 <= a.id < n:
            raise SpecError(f"{where}: added_token_flags id {a.id} is out of range for a vocab of {n} tokens")
        if a.single_word:
            raise SpecError(f"{where}: added_token_flags id {a.id} ({spec.vocab[a.id]!r}) sets single_word, "
                            "which rmlprep does not implement")
    if spec.unparsed_specials not in ("ignore", "pass_over"):
        raise SpecError(f"{where}: unparsed_specials {spec.unparsed_specials!r} is not 'ignore' or 'pass_over'")
    if spec.add_bos and spec.bos_id is None:
        raise SpecError(f"{where}: add_bos is set but bos_id is None; set bos_id or add_bos=False")
    if spec.add_eos and spec.eos_id is None:
        raise SpecError(f"{where}: add_eos is set but eos_id is None; set eos_id or add_eos=False")
    if spec.prefix_scheme not in ("first", "always", "whole_text"):
        raise SpecError(f"{where}: prefix_scheme {spec.prefix_scheme!r} is not 'first', 'always' or 'whole_text'")
    if spec.decoder not in ("bytes", "sentencepiece"):
        raise SpecError(f"{where}: decoder {spec.decoder!r} is not 'bytes' or 'sentencepiece'")
    if spec.decode_strip_prefix not in ("none", "first_token", "text"):
        raise SpecError(
            f"{where}: decode_strip_prefix {spec.decode_strip_prefix!r} is not 'none', 'first_token' or 'text'"
        )
    for k, step in enumerate(spec.decode_chain or ()):
        want = STEP_FIELDS.get(step[0]) if isinstance(step, tuple) and step else None
        if want is None or len(step) != len(want) + 1 or not all(
                type(v) is t for v, t in zip(step[1:], want)):
            raise SpecError(f"{where}: decode_chain[{k}] = {step!r} is not a decoder step "
                            f"({', '.join(STEP_FIELDS)}; see rmlprep.hf_decode)")
    problem = check_behaviors(spec.pre_split, spec.pre_split_behaviors)
    if problem:
        raise SpecError(f"{where}: pre_split_behaviors: {problem}")
    for k, norm in enumerate(spec.normalizers):
        if not norm or norm[0] not in NORMALIZERS:
            raise SpecError(f"{where}: normalizers[{k}] = {norm!r} is not supported ({', '.join(NORMALIZERS)})")
        if norm[0] == "replace" and len(norm) != 3:
            raise SpecError(f"{where}: normalizers[{k}] = {norm!r}: replace needs (\"replace\", old, new)")
    gap = byte_fallback_gap(spec, seen)
    if gap is not None:
        b, ch, n_missing = gap
        raise SpecError(
            f"{where}: byte_fallback is on but the vocab has no <0x{b:02X}> token ({n_missing} of the 256 byte "
            f"tokens are missing), and {ch!r} (U+{ord(ch):04X}), a character outside the vocab, needs it; "
            "Hugging Face tokenizers then writes that character as <unk> after the byte tokens of the characters "
            "that follow it, and llama.cpp looks the raw byte up as a token, so no reference gives ids rmlprep "
            "could match: add the 256 <0x00>..<0xFF> tokens to the vocab"
        )
    # the merges are checked as their ids are looked up (_merge_ids, from create)


def _chars_with_byte(b: int) -> Iterator[str]:
    """The characters whose UTF-8 holds byte ``b``, in code-point order (none for 0xC0, 0xC1,
    0xF5..0xFF, which UTF-8 never uses)."""
    if b < 0x80:
        yield chr(b)
        return
    if b in (0xC0, 0xC1) or b >= 0xF5:
        return
    if b >= 0xC2:  # a lead byte: one block of code points
        n = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
        bits = 6 * (n - 1)
        lo = (b & (0x7F >> n)) << bits
        lo, hi = max(lo, (0x80, 0x800, 0x10000)[n - 2]), min(lo + (1 << bits) - 1, 0x10FFFF)
    else:  # a continuation byte: any multi-byte character may hold it
        lo, hi = 0x80, 0x10FFFF
    for cp in range(lo, hi + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        if b in ch.encode("utf-8"):
            yield ch


def byte_fallback_gap(spec: TokenizerSpec, tokens: Collection[str] | None = None) -> tuple[int, str, int] | None:
    """A byte token a byte-fallback SentencePiece spec lacks and can need, or None.

    A character outside the vocab (no token, or only a control or unused one: the encoder's
    rule) becomes the ``<0xXX>`` tokens of its UTF-8 bytes. When one of them is missing the
    references part ways, and none gives ids in the character's place: Hugging Face
    ``tokenizers`` (``BPE::merge_word``) turns the whole character into the unk token but emits
    it only before the next character found in the vocab, after the byte tokens of the
    characters in between (so "é€" with ``<0xA9>`` missing is ``<0xE2> <0x82> <0xAC> <unk>``,
    and with ``fuse_unk`` one unk stands for every such character of the run), or skips it
    without an unk token; sentencepiece refuses to load such a model ("there are not 256 byte
    pieces although `byte_fallback` is true"); llama.cpp (``byte_to_token``) looks up the raw
    byte as a token and fails without one. A missing byte token that no character outside the
    vocab can need is harmless: Gemma's tokenizer.json has no ``<0x09>`` because ``"\\t"`` is a
    token, and 0xC0, 0xC1, 0xF5..0xFF never occur in UTF-8.

    Args:
        tokens: the vocab as a set, when the caller has one (else it is made here).
    Returns:
        (the byte, the first character outside the vocab that needs it, how many of the 256
        byte tokens are missing), or None: not SentencePiece with byte fallback, or no gap.
    """
    if spec.kind != SENTENCEPIECE or not spec.byte_fallback:
        return None
    if tokens is None:
        tokens = set(spec.vocab)
    missing = [b for b in range(256) if f"<0x{b:02X}>" not in tokens]
    if not missing:
        return None
    unknown_types = (TokenType.CONTROL, TokenType.UNUSED)  # read as characters outside the vocab
    types = model_types(spec)
    for b in missing:
        for ch in _chars_with_byte(b):  # the first one outside the vocab ends the search (a load
            # that can succeed looks up one character per missing byte below 0x80)
            if ch not in tokens or types[spec.vocab.index(ch)] in unknown_types:
                return b, ch, len(missing)
    return None


def model_types(spec: TokenizerSpec) -> tuple[int, ...]:
    """The token types the BPE model's lookups see: ``token_types`` with ``spec.model_types``."""
    if not spec.model_types:
        return spec.token_types
    out = list(spec.token_types)
    for i, t in spec.model_types:
        out[i] = t
    return tuple(out)


def byte_symbol_ids(t2i: dict[str, int], spec: TokenizerSpec) -> list[int | None]:
    """The byte-level symbol of each byte: the id of its GPT-2 alphabet character, or None when
    the vocab lacks it or ``spec.model_types`` says the model does not see it (``UNUSED``: an
    added token ``model.vocab`` lacks). Other types are not read: a special token that is a
    byte's character is a symbol in tokenizers."""
    b2u = bytes_to_unicode()
    ids = [t2i.get(b2u[b]) for b in range(256)]
    unseen = {i for i, t in spec.model_types if t == TokenType.UNUSED}
    return [None if t in unseen else t for t in ids] if unseen else ids


def _merge_ids(spec: TokenizerSpec, t2i: dict[str, int]) -> np.ndarray:
    """uint32 ``[n, 4]``: (left id, right id, rank, merged id) per distinct merge, in rank order;
    a merge listed twice keeps its first (lowest) rank, as tokenizers' ``BPE`` does.

    Raises:
        SpecError: a merge whose halves or result are not in the vocab (the first one is named).
    """
    lefts = list(map(itemgetter(0), spec.merges))
    rights = list(map(itemgetter(1), spec.merges))
    get = t2i.get
    cols = [list(map(get, lefts)), list(map(get, rights)), list(map(get, map(str.__add__, lefts, rights)))]
    if any(None in c for c in cols):
        where = f"TokenizerSpec{f' {spec.name!r}' if spec.name else ''}"
        for r, (a, b) in enumerate(spec.merges):
            for part in (a, b, a + b):
                if part not in t2i:
                    raise SpecError(f"{where}: merges[{r}] = {a!r} {b!r} uses {part!r}, which is not in the vocab")
    n = len(lefts)
    out = np.empty((n, 4), dtype=np.uint32)
    out[:, 0] = cols[0]
    out[:, 1] = cols[1]
    out[:, 2] = np.arange(n, dtype=np.uint32)
    out[:, 3] = cols[2]
    keys = (out[:, 0].astype(np.uint64) << np.uint64(32)) | out[:, 1]
    _, first = np.unique(keys, return_index=True)
    if len(first) != n:
        out = out[np.sort(first)]
    return out


def _token_bytes(spec: TokenizerSpec) -> list[bytes]:
    """Raw bytes of every token (what decode_bytes concatenates).

    An added token matched on normalized text decodes from its normalized content when the
    spec normalizes (tokenizers' ``AddedVocabulary::simple_id_to_token``: ``"<Think>"`` under
    Lowercase decodes as ``"<think>"``).
    """
    out: list[bytes] = []
    types = spec.token_types
    vocab = decode_strings(spec)
    if spec.kind == BYTE_LEVEL:
        # str.translate tables: alphabet character -> the latin-1 character of its byte, and
        # alphabet character -> deleted (what is left is not in the alphabet)
        to_byte = {ord(c): chr(b) for c, b in unicode_to_bytes().items()}
        outside = dict.fromkeys(to_byte)
        added_raw = () if spec.decode_added_byte_level else _SPECIAL_TYPES
        for i, tok in enumerate(vocab):
            if types[i] in added_raw or tok.translate(outside):
                out.append(tok.encode("utf-8", "surrogatepass"))
            else:
                out.append(tok.translate(to_byte).encode("latin-1"))
    else:
        for i, tok in enumerate(vocab):
            m = _BYTE_TOKEN.fullmatch(tok) if types[i] == TokenType.BYTE else None
            if m:
                out.append(bytes([int(m.group(1), 16)]))
            else:
                out.append(tok.replace(_SPACE, " ").encode("utf-8", "surrogatepass"))
    return out


#: White_Space (the Rust ``regex`` crate's ``\s``, which tokenizers' lstrip / rstrip use).
_WHITE_SPACE = frozenset(chr(c) for lo, hi in white_space_ranges() for c in range(lo, hi + 1))


def _matcher(pairs: list[tuple[str, int]], passed_over: frozenset[int] = frozenset()):
    """``(regex, content -> id, passed_over)`` finding ``pairs``' contents leftmost-longest, or None."""
    pairs = [(t, i) for t, i in pairs if t]
    if not pairs:
        return None
    return _literal_regex(tuple(t for t, _ in pairs)), dict(pairs), passed_over


@functools.lru_cache(maxsize=4)
def _literal_regex(strings: tuple[str, ...]) -> re.Pattern:
    """The compiled :func:`_literal_trie` of ``strings``: a Tokenizer asks for the same one for
    ``parse_special`` True and False (Gemma 3's 6k added tokens: ~30 ms of trie each)."""
    return re.compile(_literal_trie(strings))


def _literal_trie(strings: Iterable[str]) -> str:
    """A regex matching any of ``strings``, the longest one at the leftmost position first
    (a trie: each branch point is an alternation on distinct characters, each token end a greedy
    ``?``), so 6,000 added tokens cost a few steps per character instead of one per token."""
    trie: dict = {}
    for s in strings:
        node = trie
        for c in s:
            node = node.setdefault(c, {})
        node[""] = True

    def emit(node: dict) -> str:
        parts = []
        while True:  # a chain of single children without a token end: one literal run
            kids = [c for c in node if c]
            if len(kids) != 1 or "" in node:
                break
            parts.append(re.escape(kids[0]))
            node = node[kids[0]]
        kids = sorted(c for c in node if c)
        alts = [re.escape(c) + emit(node[c]) for c in kids]
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")" if alts else ""
        if "" in node and body:
            body = f"(?:{body})?"
        return "".join(parts) + body

    return emit(trie)


_WORD_BOUNDARY = re.compile(f"(?<=[^{_SPACE}])(?={_SPACE})")
_BEFORE_SPACE = re.compile(f"(?={_SPACE})")


def sp_split_ok(spec: TokenizerSpec, t2i: dict[str, int]) -> bool:
    """Whether a SentencePiece segment may be cut into words before each "▁" that follows a
    non-"▁" character (a speed-up; the ids are the same as encoding the segment whole).

    True unless a token proves a merge could cross such a cut (a token with "▁" after another
    character), or fuse_unk (without byte fallback) would see the cut words as pieces:
    tokenizers fuses unknowns per pre-tokenized word, so the words are kept only when "▁" is a
    known symbol, never an unknown character fused with an unknown one before it.
    """
    if any(_SPACE in t[1:] and re.search(f"[^{_SPACE}]{_SPACE}", t) for t in spec.vocab):
        return False
    space = t2i.get(_SPACE)
    return not (spec.fuse_unk and spec.unk_id is not None and not spec.byte_fallback
                and (space is None or model_types(spec)[space] in (TokenType.CONTROL, TokenType.UNUSED)))


def _split_words(text: str) -> list[str]:
    """Split before each "▁" that follows a non-"▁" character."""
    return _WORD_BOUNDARY.split(text)


def _split_before_space(text: str) -> list[str]:
    """Hugging Face Metaspace ``split=True``: each "▁" starts a new piece (MergedWithNext)."""
    return [w for w in _BEFORE_SPACE.split(text) if w]
