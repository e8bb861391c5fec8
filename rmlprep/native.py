"""Bridge to the compiled hot path (``rmlprep._fastbpe``, sources in ``rmlprep/_native/``).

:func:`make_native` turns an indexed :class:`~rmlprep.tokenizer.Tokenizer` into a
:class:`NativeEncoder` that encodes one prepared text segment exactly as the pure-Python path
(``Tokenizer._encode_byte_level`` / ``_encode_sentencepiece``) does, or returns None when it
cannot promise that (the extension is not built, its Unicode tables differ from rmlprep's, a
pre-split pattern has no hand-written matcher, ...). The pure-Python path stays the reference;
``RMLPREP_PURE_PYTHON=1`` turns the native one off, and ``tests/test_native.py`` requires both
to give identical ids.

What runs natively (see ``rmlprep/_native/fastbpe.c``):

- byte-level: the pre-split matchers for GPT-2, Llama 3, Qwen2 and the digit splits, over the
  str's code points with a class table generated from ``_unicode_tables.py``
  (``tools/make_native_tables.py``); then per piece the whole-token lookup (``ignore_merges``), a
  bounded piece -> ids cache and the merge loop;
- SentencePiece: the word split, code-point symbols, the merge loop, byte fallback and unk;
- NFC / NFKC: a quick check of the str's code units, so ``unicodedata.normalize`` runs only on
  the spans that may change (:func:`normalization_suspects`).

Merges by rank use the rank as priority; merges by score use the dense rank of ``-score`` over
the vocab (equal scores share a rank, so ties still go leftmost).

Build: ``pip install -e .`` (or ``pip install .``) compiles it with the system C compiler; if that
fails the install still succeeds and rmlprep warns once and runs in pure Python. Finding the
module and asking what it was built with (its Unicode tables, its pre-split matchers) is
:mod:`rmlprep.native_load`'s.

Speed, against tiktoken, gigatoken and the other peers on the real corpora, and where the time
goes (callgrind and perf, sitting by sitting, with what was tried): ``bench/README.md``.
"""

from __future__ import annotations

import math
import os
from array import array
from collections.abc import Callable, Sequence

import numpy as np

from .errors import ConfigError
from .native_load import (  # noqa: F401 (re-exported: rmlprep.native is where callers find them)
    _PATTERN_CODES,
    _load,
    _load_quiet,
    native_available,
    native_pattern_names,
    normalization_suspects,
)
from .pretokenize import pattern_name
from .segment import replace_lone_surrogates, segment_preparer
from .special_prefix import _special_prefix_filter, added_filter, plain_segments
from .spec import BYTE_LEVEL
from .unicode import unicode_to_bytes

__all__ = [
    "NativeEncoder",
    "encode_batch_flat",
    "make_native",
    "native_available",
    "normalization_suspects",
    "native_pattern_names",
    "plain_encoder",
    "encode_arrow_flat",
    "surrogate_rows",
]

_MAX_VOCAB = (1 << 21) - 1  # ids and priorities the native tables can hold


class NativeEncoder:
    """Native encoder of one tokenizer's text segments (built by :func:`make_native`).

    Attributes:
        encode_text: ``encode_text(text: str) -> list[int]``: ids of one prepared segment (specials
            cut out, normalizers and prefix space applied; SentencePiece text: each space is read
            as ``"▁"``). Same ids as the pure-Python ``_encode_byte_level`` / ``_encode_sentencepiece``
            (of the text with its spaces as ``"▁"``). Releases the GIL for texts of 4096+ characters.
        encode_text_array: ``encode_text_array(text) -> buffer``: the same ids, native-endian uint32 (read-only).
        split_text: ``split_text(text) -> list[(start, end)]``: the pre-split pieces (byte-level)
            or words (SentencePiece) as code-point offsets, without encoding (for tests).
    """

    __slots__ = ("encode_text", "encode_text_array", "split_text", "_enc", "name")

    def __init__(self, enc, name: str = ""):
        self._enc = enc
        self.encode_text = enc.encode_text
        self.encode_text_array = enc.encode_text_array
        self.split_text = enc.split_text
        self.name = name

    def encode_batch(
        self, texts: Sequence[str], *, num_threads: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        """Encode many prepared segments with the GIL released; ids flat, plus offsets.

        Each text must be prepared as for :attr:`encode_text` (this does not cut special tokens,
        normalize or add a prefix space).

        Args:
            texts: the segments.
            num_threads: threads to share the batch (native threads, the GIL released): each
                owns a contiguous run of the texts and, when done, takes texts from the end of
                another's run, so 2 threads keep 2 cores busy to the end.
        Returns:
            ``(ids, offsets)``: ``ids`` uint32, shape (total tokens,); ``offsets`` int64, shape
            (len(texts) + 1,), text ``i`` is ``ids[offsets[i]:offsets[i + 1]]`` (the layout of
            ``pyarrow.ListArray.from_arrays(offsets, ids)``).
        Raises:
            TypeError: an item of ``texts`` is not a str.
            ValueError: num_threads < 1.
        """
        if num_threads < 1:
            raise ValueError(f"num_threads = {num_threads}; give 1 or more")
        texts = texts if isinstance(texts, (list, tuple)) else list(texts)
        return _as_arrays(self._enc.encode_batch(texts, num_threads))

    def encode_utf8(self, data, offsets, *, num_threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`encode_batch` for texts given as UTF-8 bytes, the layout of an Arrow string column.

        Args:
            data: a buffer of UTF-8 bytes (e.g. ``pyarrow.StringArray.buffers()[2]``).
            offsets: int64 buffer of ``n + 1`` byte offsets: text ``i`` is
                ``data[offsets[i]:offsets[i + 1]]``.
            num_threads: as for :meth:`encode_batch`.
        Returns:
            ``(ids, offsets)`` as :meth:`encode_batch`.
        Raises:
            ValueError: an offset outside ``data`` or decreasing; a text that is not
                well-formed UTF-8 (it is named); num_threads < 1.
        """
        if num_threads < 1:
            raise ValueError(f"num_threads = {num_threads}; give 1 or more")
        return _as_arrays(self._enc.encode_utf8(data, np.ascontiguousarray(offsets, dtype=np.int64), num_threads))

    def clear_cache(self) -> None:
        """Free the piece caches and scratch buffers (they refill as text is encoded)."""
        self._enc.clear_cache()

    def cache_info(self) -> list[dict]:
        """One ``{slot, entries, slots, bytes, sweeps}`` per piece cache not in use (slot -1: the shared one)."""
        return self._enc.cache_info()

    def __repr__(self) -> str:
        return f"NativeEncoder({self.name!r})"


def _as_arrays(pair) -> tuple[np.ndarray, np.ndarray]:
    ids, offsets = pair
    return np.frombuffer(ids, dtype=np.uint32), np.frombuffer(offsets, dtype=np.int64)


def make_native(tokenizer) -> NativeEncoder | None:
    """Return a native encoder for ``tokenizer``, or None to keep the pure-Python path.

    None when: the extension is not built (warns once with the build command), its Unicode
    tables differ from rmlprep's (warns once), ``RMLPREP_PURE_PYTHON=1``, or the spec has
    something without a native twin (a pre-split pattern without a matcher in the extension,
    see :func:`native_pattern_names`; a ``Split`` behaviour other than Isolated; a pre-split
    on a SentencePiece-style spec; more than 8 patterns; a NaN score).

    Raises ConfigError when ``RMLPREP_NATIVE_LEAN`` (the merge loop's build, README "Speed") is not 0, 1 or 2.
    """
    if os.environ.get("RMLPREP_PURE_PYTHON", "") not in ("", "0"):
        return None
    lean = os.environ.get("RMLPREP_NATIVE_LEAN", "")
    if lean not in ("", "0", "1", "2"):  # read by the extension when the Encoder is made
        raise ConfigError(f"RMLPREP_NATIVE_LEAN={lean!r}: give 0 (the generic merge loop), 1 (the lean build "
                          "for SSE2) or 2 (the best the CPU allows, as when unset)")
    mod = _load()
    if mod is None:
        return None
    spec = tokenizer.spec
    vocab = spec.vocab
    types = tokenizer._model_types  # the lookups' view (spec.model_types)
    n = len(vocab)
    if n >= _MAX_VOCAB:
        return None  # the native pair table packs ids in 21 bits
    byte_level = spec.kind == BYTE_LEVEL

    if spec.pre_split_behaviors or (spec.pre_split and not byte_level):
        return None  # Split behaviours other than Isolated, or a SentencePiece pre-split: pure path
    stages: list[int] = []
    if byte_level:
        for p in spec.pre_split:
            code = getattr(mod, _PATTERN_CODES.get(pattern_name(p), ""), None)
            if code is None:
                return None  # no hand-written matcher (e.g. kimi-k2, tiny_aya): the pure path
            stages.append(code)
        if len(stages) > 8:
            return None

    scores = None
    pairs = None
    if spec.merges:
        pairs = array("I", tokenizer._merge_table.tobytes())  # (left, right, rank=priority, merged) per merge
    elif spec.scores is not None:
        if any(math.isnan(x) for x in spec.scores):
            return None
        scores = array("d", spec.scores)  # every split of a token into two tokens: built natively
    byte_ids = array("i", [-1] * 256)
    fallback_ids = array("i", [-1] * 256)
    u2b = None
    if byte_level:
        for b, t in enumerate(tokenizer._byte_ids):
            if t is not None:
                byte_ids[b] = t
        u2b = array("h", [-1] * 512)
        for c, b in unicode_to_bytes().items():
            if ord(c) < 512:
                u2b[ord(c)] = b
        sp_split = mod.SP_WHOLE
    else:
        for b, t in enumerate(tokenizer._fallback_ids):
            if t is not None:
                fallback_ids[b] = t
        if spec.split_on_space:
            sp_split = mod.SP_SPACE_SPLIT
        elif tokenizer._sp_split_ok:
            sp_split = mod.SP_WORDS
        else:
            sp_split = mod.SP_WHOLE
    enc = mod.Encoder(
        kind=0 if byte_level else 1,
        stages=stages,
        byte_ids=byte_ids,
        fallback_ids=fallback_ids,
        unk_id=-1 if spec.unk_id is None else spec.unk_id,
        ignore_merges=bool(spec.ignore_merges),
        byte_fallback=bool(spec.byte_fallback),
        sp_split=sp_split,
        fuse_unk=bool(spec.fuse_unk),
        vocab_keys=[t.encode("utf-8", "surrogatepass") for t in vocab],
        types=bytes(types),
        pairs=pairs,
        scores=scores,
        u2b=u2b,
    )
    return NativeEncoder(enc, spec.name)


# -- whole-text fast paths (text with no special-token text in it is one segment; see special_prefix)


def plain_encoder(tokenizer, *, array: bool = False) -> Callable[[str, bool], list[int] | None] | None:
    """A whole-text fast path for ``Tokenizer.encode``, or None when the spec needs the general one.

    Returns ``fast(text, parse_special) -> list[int] | None``: the ids of
    ``tokenizer.encode(text, parse_special=parse_special)`` (without BOS/EOS; with ``array``, as a
    buffer of native-endian uint32, for ``Tokenizer.encode_to_numpy``), or None when the text may
    hold special-token text (then the caller takes the general path). It applies what ``encode``
    does to a text that is a single segment at the start: the surrogate replacement
    (:func:`rmlprep.segment.replace_lone_surrogates`), the normalizers, the prefix space
    (``add_prefix_space``, ``prefix_if_missing``; every ``prefix_scheme`` agrees on the first
    segment), spaces to ``"▁"`` for SentencePiece, then the native encoder. None (no fast path)
    when ``tokenizer._native`` is None, the spec has normalizers and the ``"whole_text"`` prefix
    scheme (which decides the prefix before normalizing), or added tokens matched on the
    normalized text.
    """
    nat = tokenizer._native
    s = tokenizer.spec
    if nat is None or (s.normalizers and s.add_prefix_space and s.prefix_scheme == "whole_text"):
        return None
    if tokenizer._two_pass:
        return None  # normalized added tokens match the normalized text: no raw-text filter proves absence
    enc = nat.encode_text_array if array else nat.encode_text
    has_surrogate = _load_quiet().has_surrogate  # a scan, no UTF-8 copy
    prepare = segment_preparer(s, tokenizer._normalize, spaces=False)
    holds = {True: added_filter(tokenizer, True), False: added_filter(tokenizer, False)}

    # No normalizer: prepare() keeps a surrogate where the text has it, so the native conversion
    # finds it (None: then the replacement below) instead of a separate scan of the code units first.
    enc_ns = None if s.normalizers else nat._enc.encode_text_array_nosur if array else nat._enc.encode_text_nosur

    def fast(text: str, parse_special: bool = True) -> list[int] | None:
        if type(text) is not str:
            return None
        if enc_ns is not None and not holds[parse_special](text) and (ids := enc_ns(prepare(text))) is not None:
            return ids
        if not text.isascii() and has_surrogate(text):
            text = replace_lone_surrogates(text)
        if holds[parse_special](text):
            return None
        return enc(prepare(text))  # fuse_unk is the encoder's, per piece

    return fast




def encode_batch_flat(
    tokenizer,
    texts: Sequence[str],
    *,
    add_special_tokens: bool = False,
    parse_special: bool = True,
    num_threads: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """``[tokenizer.encode(t, ...) for t in texts]`` as flat ids plus offsets, natively in bulk.

    Texts without special-token text are prepared (prefix space, "▁") and encoded by
    :meth:`NativeEncoder.encode_batch` with the GIL released; the others, those holding a
    surrogate (found by the workers' conversion where the spec has no normalizer, else by
    :func:`surrogate_rows` first) and every text when the tokenizer has no fast path (see
    :func:`plain_encoder`) go through ``tokenizer.encode``.

    Args:
        tokenizer: a :class:`~rmlprep.tokenizer.Tokenizer`.
        texts: the documents.
        add_special_tokens, parse_special: as ``Tokenizer.encode``.
        num_threads: threads for the native batch (2 use 2 cores).
    Returns:
        ``(ids, offsets)``: uint32 ids of shape (total,), int64 offsets of shape
        (len(texts) + 1,); row ``i`` is ``ids[offsets[i]:offsets[i + 1]]``, equal to
        ``tokenizer.encode(texts[i], add_special_tokens=..., parse_special=...)``.
    """
    fast_ok = plain_encoder(tokenizer) is not None
    s = tokenizer.spec
    n = len(texts)
    prefixes = _special_prefix_filter(tokenizer, parse_special)
    segs: list[str] = (fast_ok and plain_segments(tokenizer, prefixes, texts)) or []
    slow: list[int] = []
    holds, prepare = added_filter(tokenizer, parse_special), segment_preparer(s, tokenizer._normalize, spaces=False)
    dirty = set(surrogate_rows(texts)) if fast_ok and s.normalizers else ()
    for i, t in enumerate(() if segs else texts):
        if i in dirty:
            t = replace_lone_surrogates(t)  # first: a pair joined may spell a special token
        if not fast_ok or type(t) is not str or holds(t):
            slow.append(i)
            segs.append("")
            continue
        segs.append(prepare(t))
    if fast_ok:
        *pair, found = tokenizer._native._enc.encode_batch(segs, num_threads, surrogates=True)
        ids, offsets = _as_arrays(pair)
        slow = sorted(set(slow).union(found))
    else:
        ids, offsets = np.zeros(0, np.uint32), np.zeros(n + 1, np.int64)
    if slow:
        rows = [ids[offsets[i]:offsets[i + 1]] for i in range(n)]
        for i in slow:
            rows[i] = tokenizer.encode_to_numpy(texts[i], parse_special=parse_special)
        lens = np.fromiter((len(r) for r in rows), dtype=np.int64, count=n)
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
        ids = np.concatenate(rows) if rows else np.zeros(0, np.uint32)
    return _finish(tokenizer, ids, offsets, add_special_tokens=add_special_tokens)


def _finish(tokenizer, ids: np.ndarray, offsets: np.ndarray, *,
            add_special_tokens: bool) -> tuple[np.ndarray, np.ndarray]:
    """What ``encode`` does after its rows are tokenized, on flat rows: BOS/EOS added."""
    s = tokenizer.spec
    n = len(offsets) - 1
    if add_special_tokens:
        s.check_adds()
    if add_special_tokens and (s.add_bos or s.add_eos):
        nb, ne = int(s.add_bos), int(s.add_eos)
        lens = np.diff(offsets)
        new_off = np.zeros(n + 1, np.int64)
        np.cumsum(lens + nb + ne, out=new_off[1:])
        out = np.empty(int(new_off[-1]), np.uint32)
        shift = np.repeat(new_off[:-1] + nb - offsets[:-1], lens)
        out[np.arange(len(ids)) + shift] = ids
        if nb:
            out[new_off[:-1]] = s.bos_id
        if ne:
            out[new_off[1:] - 1] = s.eos_id
        ids, offsets = out, new_off
    return ids, offsets


def encode_arrow_flat(
    tokenizer,
    values,
    *,
    add_special_tokens: bool = False,
    parse_special: bool = True,
    num_threads: int = 1,
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`encode_batch_flat` for a pyarrow ``string`` / ``large_string`` array, read from its
    UTF-8 buffer with no Python str made, or None when that path does not apply.

    It applies when the tokenizer has the native fast path, the array has no nulls, no special
    token can be cut out of a text (``parse_special=False`` or no special tokens; no
    user-defined tokens parsed always), and a text reaches BPE as it is (byte-level, no
    normalizers, no prefix space): GPT-2, Llama 3, Qwen2, tiktoken files. Otherwise the caller
    takes :func:`encode_batch_flat` on ``values.to_pylist()``.

    Returns:
        ``(ids, offsets)`` as :func:`encode_batch_flat`, or None.
    """
    import pyarrow as pa

    s = tokenizer.spec
    nat = tokenizer._native
    if nat is None or plain_encoder(tokenizer) is None or values.null_count:
        return None
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        return None
    if s.kind != BYTE_LEVEL or tokenizer._normalize is not None or s.add_prefix_space:
        return None
    if _special_prefix_filter(tokenizer, parse_special):
        return None
    _, off_buf, data = values.buffers()
    off_type = np.int32 if pa.types.is_string(values.type) else np.int64
    offsets = np.frombuffer(off_buf, off_type)[values.offset:values.offset + len(values) + 1]
    ids, offsets = nat.encode_utf8(data if data is not None else b"", offsets, num_threads=num_threads)
    return _finish(tokenizer, ids, offsets, add_special_tokens=add_special_tokens)


def surrogate_rows(texts: Sequence) -> list[int]:
    """Indices of the strs in ``texts`` that hold a surrogate code point (a lone surrogate, or a
    pair written as two code points): text no UTF-8 encoder accepts. Natively when built (a
    scan of the str's code units), else a regex. Items that are not str are skipped."""
    mod = _load_quiet()
    if mod is not None:
        return mod.surrogate_rows(texts)
    import re

    pat = re.compile("[\ud800-\udfff]")
    return [i for i, t in enumerate(texts) if isinstance(t, str) and not t.isascii() and pat.search(t)]
