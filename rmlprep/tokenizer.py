"""Tokenizer: a validated, indexed TokenizerSpec that encodes and decodes.

Build one with :meth:`Tokenizer.create` (or a loader such as :func:`rmlprep.load_tokenizer`).
Encoding cuts control and user-defined tokens out of the text first (longest wins at a shared
prefix), then for each text segment:

- byte-level BPE: normalize, add the prefix space if asked, pre-split into pieces, spell each
  piece's UTF-8 bytes in the printable byte alphabet and run BPE per piece;
- SentencePiece BPE: normalize, add the ``"▁"`` prefix if asked, spaces -> ``"▁"``, and run BPE
  over the segment (split into words only where the vocabulary proves no merge can cross).

Each piece is looked up whole (when the spec says a whole token wins), then in a bounded
piece -> ids cache; the merge loop in :mod:`rmlprep.bpe` runs only on a miss.

The spec checks and the tables built from a spec (merge ids, token bytes, the added-token
matcher) live in :mod:`rmlprep.tokenizer_build`; cutting added tokens out in
:mod:`rmlprep.tokenizer_added`; the per-segment BPE in :mod:`rmlprep.tokenizer_bpe`; decoding
(:meth:`Tokenizer.decode`, :class:`StreamDecoder`) in :mod:`rmlprep.tokenizer_decode`; the
encode variants built on :meth:`Tokenizer.encode` (batches, numpy, tiktoken's names) in
:mod:`rmlprep.tokenizer_many`; :meth:`Tokenizer.encode_fragments` (ids with byte offsets, for the
chat loss mask) in :mod:`rmlprep.tokenizer_offsets`.

Source: tokenizers (``tokenizer/mod.rs``, ``added_vocabulary.rs``, ``models/bpe``),
sentencepiece (``bpe_model.cc``), tiktoken (``core.py``, ``src/lib.rs``).
"""

from __future__ import annotations

import functools
import operator
import os
from typing import Any

import numpy as np

from . import native
from .errors import TokenIdError, TokenizeError
from .pretokenize import compile_pre_split, pattern_name
from .segment import SPACE as _SPACE
from .segment import make_normalizer, prefix_spaces, replace_lone_surrogates
from .spm_special import refuse_parsed_control
from .spec import BYTE_LEVEL, TokenizerSpec, TokenType, _known_fingerprint, _remember_fingerprint
from .tokenizer_build import (  # noqa: F401 (_merge_ids is re-exported: the load cache names it here)
    _merge_ids,
    byte_symbol_ids,
    model_types,
    sp_split_ok,
    _token_bytes,
    _validate,
)
from .tokenizer_added import _AddedTokens
from .tokenizer_bpe import _CACHE_MAX, _MERGEABLE_TYPES, _SegmentBPE
from .tokenizer_decode import StreamDecoder, _Decoding
from .tokenizer_many import _flag, _ManyEncodings
from .tokenizer_offsets import _FragmentOffsets
from .unicode import bytes_to_unicode

__all__ = ["Tokenizer", "StreamDecoder"]


class Tokenizer(_AddedTokens, _SegmentBPE, _Decoding, _ManyEncodings, _FragmentOffsets):
    """An exact BPE tokenizer built from a :class:`TokenizerSpec`.

    Do not call the constructor; use :meth:`Tokenizer.create` (validates and indexes once) or a
    loader. A tokenizer pickles as its spec and rebuilds its indexes on unpickling, so it is
    cheap to send to worker processes.
    """

    #: named templates (rmlprep.hf.named_chat_templates), the template's other special tokens (rmlprep.folder_config)
    chat_templates: dict[str, str] | None = None
    template_tokens: dict[str, Any] | None = None
    #: the folder's ``split_special_tokens`` (rmlprep.folder_config): encode's default is then parse_special=False
    split_special_tokens: bool = False

    def __init__(self, spec: TokenizerSpec, *, chat_template: str | None = None, _token=None, _merge_table=None):
        if _token is not _CREATE:
            raise TypeError("use Tokenizer.create(spec) to build a Tokenizer")
        self.spec = spec
        self.chat_template = chat_template
        self._build(_merge_table)

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def create(cls, spec: TokenizerSpec, *, chat_template: str | None = None) -> "Tokenizer":
        """Validate ``spec`` and build the indexes.

        Raises:
            SpecError: empty vocab; token_types of the wrong length or with unknown values;
                a score-merged SentencePiece spec without one score per token; special ids out
                of range; add_bos without bos_id (add_eos without eos_id); a merge whose halves
                or result are not in the vocab; duplicate tokens; unknown options; byte fallback
                without a ``<0xXX>`` token that a character outside the vocab needs
                (:func:`~rmlprep.tokenizer_build.byte_fallback_gap`: no reference gives ids then).
        """
        _validate(spec)
        return cls(spec, chat_template=chat_template, _token=_CREATE)

    @classmethod
    def _from_cache(cls, spec: TokenizerSpec, chat_template: str | None, merge_table: np.ndarray | None) -> "Tokenizer":
        """A tokenizer from a load-time cache entry (:mod:`rmlprep.cache`): ``spec`` passed
        :meth:`create` when the entry was written, and ``merge_table`` is what it built then."""
        return cls(spec, chat_template=chat_template, _token=_CREATE, _merge_table=merge_table)

    def _build(self, merge_table: np.ndarray | None = None) -> None:
        spec = self.spec
        self._byte_level = spec.kind == BYTE_LEVEL
        self._spaces = prefix_spaces(spec)  # what counts as "already starts with a space"
        self._vocab = spec.vocab
        self._types = spec.token_types
        self._model_types = model_types(spec)  # what the BPE model's lookups see (spec.model_types)
        self._n = len(spec.vocab)
        self._tok2id: dict[str, int] = dict(zip(spec.vocab, range(len(spec.vocab))))
        self._lens = None  # numpy byte lengths of the tokens, for offsets (built on first use)
        # merges: (left id, right id) -> (rank, merged id)
        self._merge_table = None
        if spec.merges:
            # (left, right, rank, merged) per merge; a repeated merge keeps its first rank
            self._merge_table = merge_table if merge_table is not None else _merge_ids(spec, self._tok2id)
            self._pair = self._pair_from_merges
        elif spec.scores is not None:
            self._score_pairs: dict[tuple[int, int], tuple[float, int] | None] = {}
            self._pair = self._pair_from_scores
        else:  # neither merges nor scores: symbols never merge
            self._pair = lambda a, b: None
        # initial symbols
        if self._byte_level:
            self._byte_ids: list[int | None] = byte_symbol_ids(self._tok2id, spec)
            self._spelling = [bytes_to_unicode()[b] for b in range(256)]
        else:
            self._fallback_ids: list[int | None] = [self._tok2id.get(f"<0x{b:02X}>") if spec.byte_fallback else None
                                                    for b in range(256)]
            self._sp_split_ok = sp_split_ok(spec, self._tok2id)
        # NFC/NFKC: a native quick check, unicodedata.normalize only on the spans it flags
        self._normalize = make_normalizer(spec.normalizers, native.normalization_suspects() if _USE_NATIVE else None)
        self._build_added_tokens()
        self._splitter_fn = None  # the pure-Python pre-splitter, compiled on first use (see _splitter)
        self._cache: dict[str, tuple[int, ...]] = {}
        self._native = None
        if _USE_NATIVE:
            self._native = native.make_native(self)  # None when the extension is absent or declines
        if self._native is None:
            self._splitter  # compiled now: a pattern re cannot take fails here, at create
        self._fast_encode = None  # whole-text native path for text without special-token text
        if self._native is not None:
            self._fast_encode = native.plain_encoder(self)
        self._fast_array = None  # the same, ids as a uint32 buffer (encode_to_numpy; made on first use)
        # skip_special_tokens drops control and unknown ids; tokenizers looks the decoded (for a
        # normalized token: normalized) content up among the special contents, so a special
        # token that normalization changes is kept
        renamed = set()
        if self._normalize is not None:
            renamed = {a.id for a in spec.added_token_flags
                       if a.normalized and self._normalize(spec.vocab[a.id]) != spec.vocab[a.id]}
        self._skip_ids = frozenset(self._ids_of_types(TokenType.CONTROL, TokenType.UNKNOWN)).difference(renamed)

    @functools.cached_property
    def _bytes(self) -> list[bytes]:
        """Every token's raw bytes (what decode concatenates); built on first use."""
        return _token_bytes(self.spec)

    @functools.cached_property
    def _merges(self) -> dict[tuple[int, int], tuple[int, int]]:
        """(left id, right id) -> (rank, merged id), for the pure-Python merge loop; built on first use."""
        if self._merge_table is None:
            return {}
        cols = [c.tolist() for c in self._merge_table.T]
        return dict(zip(zip(cols[0], cols[1]), zip(cols[2], cols[3])))

    def _ids_of_types(self, *types: TokenType) -> list[int]:
        """The ids whose token type is one of ``types``, ascending."""
        arr = np.frombuffer(bytes(self._types), dtype=np.uint8)
        return np.flatnonzero(np.isin(arr, [int(t) for t in types])).tolist()

    def __getstate__(self) -> dict[str, Any]:
        # the merge table and a known fingerprint travel too: a worker rebuilding them from the
        # spec paid ~0.5 s (Llama 3) to ~1.3 s (Gemma 3) of CPU
        table = self._merge_table
        return {"spec": self.spec, "chat_template": self.chat_template, "chat_templates": self.chat_templates,
                "template_tokens": self.template_tokens, "split_special_tokens": self.split_special_tokens,
                "merge_table": None if table is None else table.tobytes(),
                "fingerprint": _known_fingerprint(self.spec)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.spec = state["spec"]
        self.chat_template = state["chat_template"]
        self.chat_templates, self.template_tokens = state.get("chat_templates"), state.get("template_tokens")
        self.split_special_tokens = state.get("split_special_tokens", False)
        blob, fingerprint = state.get("merge_table"), state.get("fingerprint")
        table = None
        if blob is not None and self.spec.merges:
            table = np.frombuffer(blob, dtype=np.uint32).reshape(-1, 4)
        if fingerprint is not None:
            _remember_fingerprint(self.spec, fingerprint)
        self._build(table)

    def __repr__(self) -> str:
        s = self.spec
        pre = [pattern_name(p) or "custom" for p in s.pre_split]
        return (
            f"Tokenizer({s.name or 'unnamed'!r}, kind={s.kind}, vocab_size={self._n}, "
            f"merges={len(s.merges) if s.merges else 'by score'}, bos_id={s.bos_id}, "
            f"eos_id={s.eos_id}, unk_id={s.unk_id}, pad_id={s.pad_id}, eot_ids={list(s.eot_ids)}, "
            f"add_bos={s.add_bos}, add_eos={s.add_eos}, pre_split={pre}, "
            f"byte_fallback={s.byte_fallback}, specials={len(self.special_tokens)})"
        )

    # -- simple accessors ------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        """Number of ids (``len(spec.vocab)``)."""
        return self._n

    @property
    def bos_id(self) -> int | None:
        """The BOS token's id (None: the tokenizer names none); :meth:`encode` adds it only with
        ``add_special_tokens=True`` and ``spec.add_bos``."""
        return self.spec.bos_id

    @property
    def eos_id(self) -> int | None:
        """The EOS token's id (None: the tokenizer names none), what a run's ``pack.eos`` appends."""
        return self.spec.eos_id

    @property
    def unk_id(self) -> int | None:
        """The unknown token's id (None: the model has none; byte-level BPE never needs one)."""
        return self.spec.unk_id

    @property
    def pad_id(self) -> int | None:
        """The pad token's id (None: the tokenizer names none; ``pack_bfd`` then needs one given)."""
        return self.spec.pad_id

    @property
    def eot_ids(self) -> tuple[int, ...]:
        """Ids that end an assistant turn (``<|im_end|>``, ``<|eot_id|>``...), as ``repr`` shows them."""
        return tuple(self.spec.eot_ids)

    @property
    def fingerprint(self) -> str:
        """The spec's fingerprint (sha256 hex)."""
        return self.spec.fingerprint

    def token_to_id(self, token: str) -> int | None:
        """Id of a token string (as spelled in the vocab), or None."""
        return self._tok2id.get(token)

    def id_to_token(self, token_id: int) -> str:
        """Token string of an id (an int or numpy integer). Raises TokenIdError when out of range."""
        return self._vocab[self._check_id(token_id)]

    def token_bytes(self, token_id: int) -> bytes:
        """Raw bytes of one token (special tokens: their UTF-8 content; a byte-level token its
        bytes, not its printable spelling), tiktoken's ``decode_single_token_bytes``. Raises
        TokenIdError: an id out of range or not an integer, as :meth:`id_to_token`."""
        return self._bytes[self._check_id(token_id)]

    def _check_id(self, token_id: int) -> int:
        """``token_id`` as an int (``operator.index``: numpy integers too, not bools or floats)."""
        try:
            i = operator.index(None if isinstance(token_id, bool) else token_id)
        except TypeError:
            raise TokenIdError(f"token id {token_id!r} is not an integer") from None
        if not 0 <= i < self._n:
            raise TokenIdError(f"token id {token_id!r} is out of range for a vocab of {self._n} tokens")
        return i

    # -- merge priorities ----------------------------------------------------------------
    def _pair_from_merges(self, a: int, b: int):
        return self._merges.get((a, b))

    def _pair_from_scores(self, a: int, b: int):
        key = (a, b)
        try:
            return self._score_pairs[key]
        except KeyError:
            pass
        j = self._tok2id.get(self._vocab[a] + self._vocab[b])
        res = None
        if j is not None and self._types[j] in _MERGEABLE_TYPES:
            res = (-self.spec.scores[j], j)
        if len(self._score_pairs) > _CACHE_MAX:
            self._score_pairs.clear()
        self._score_pairs[key] = res
        return res

    # -- encoding ------------------------------------------------------------------------
    def encode(self, text: str, *, add_special_tokens: bool = False, parse_special: bool | None = None) -> list[int]:
        """Encode ``text`` to token ids.

        Args:
            text: any Python str. Surrogate code points are first replaced as tiktoken does
                (:func:`rmlprep.segment.replace_lone_surrogates`: a high+low pair becomes its
                astral character, a lone one U+FFFD), so the ids equal tiktoken's and decode to
                valid UTF-8; for text without surrogates ``decode_bytes(encode(s)) ==
                s.encode()`` (byte-level).
            add_special_tokens: add BOS/EOS as the spec's add_bos/add_eos say (the reference
                libraries' ``add_special_tokens=True``).
            parse_special: cut control and user-defined token text out as their ids
                (Hugging Face's default; tiktoken ``allowed_special="all"``). ``False`` encodes
                such text as plain text (tiktoken ``encode_ordinary``), except user-defined
                tokens of a spec with ``parse_user_defined_always`` (sentencepiece). None, the
                default: True for every format (a tokenizer.json and its ``.model`` alike), False
                when the folder's config sets ``"split_special_tokens": true``
                (``tok.split_special_tokens``), as transformers. sentencepiece's ``encode`` reads
                control pieces as text: its ids are ``parse_special=False``, the default of the run
                config's ``tokenizer.parse_special`` and of :func:`rmlprep.tokenize_text`. With ``True``,
                control-token text in the text of a ``.model`` without tokenizer.json is refused
                (no reference agrees: :mod:`rmlprep.spm_special`).
        Returns:
            list of int ids, each in ``range(vocab_size)``.
        Raises:
            TokenizeError: ``text`` is not a str; a flag that is not True or False (``"false"``, ``0``,
                as tokenizers; None for ``add_special_tokens``); the ``.model`` case above. LoaderError:
                ``add_special_tokens`` while the folder leaves add_bos_token/add_eos_token open
                (``TokenizerSpec.check_adds``).
        Source: ``tokenizers.Tokenizer.encode(text, add_special_tokens=...).ids`` for a
            tokenizer.json, ``SentencePieceProcessor.encode`` for a ``.model``, tiktoken's
            ``Encoding.encode`` for a rank file, llama.cpp's ``llama_tokenize`` for a ``.gguf``
            (``fixtures/parity/*.json``, from ``tools/make_parity_fixtures.py``).
        """
        if parse_special is not True and parse_special is not False:  # None: the default, no call on the hot path
            parse_special = not self.split_special_tokens if parse_special is None else self._parse_flag(parse_special)
        if add_special_tokens is not True and add_special_tokens is not False:
            add_special_tokens = _flag("add_special_tokens", add_special_tokens)
        fast = self._fast_encode
        if fast is not None:
            ids = fast(text, parse_special)  # replaces surrogates itself
            if ids is not None:
                return self._add_special(ids) if add_special_tokens else ids
        if not isinstance(text, str):
            raise TokenizeError(f"encode expects str, got {type(text).__name__}")
        fragments = self._cut_added(self._whole_text_prefix(replace_lone_surrogates(text)), parse_special)
        if parse_special and self.spec.prefix_scheme == "whole_text":
            refuse_parsed_control(self, fragments)  # a .model: no reference agrees (spm_special)
        ids = self._encode_fragments(fragments, normalized=self._two_pass)
        return self._add_special(ids) if add_special_tokens else ids

    def _whole_text_prefix(self, text: str) -> str:
        s = self.spec
        if s.prefix_scheme == "whole_text" and s.add_prefix_space and text:
            if not (s.prefix_if_missing and text[0] in self._spaces):
                return " " + text
        return text

    def _add_special(self, ids: list[int]) -> list[int]:
        s = self.spec
        s.check_adds()
        if s.add_bos:
            ids = [s.bos_id, *ids]
        if s.add_eos:
            ids.append(s.eos_id)
        return ids

    def _encode_fragments(self, fragments: list[str | int], *, normalized: bool = False) -> list[int]:
        ids: list[int] = []
        prev_special = True
        for k, f in enumerate(fragments):
            if isinstance(f, int):
                ids.append(f)
                prev_special = True
            else:
                # fuse_unk is applied per piece, inside the encoders (BPE::merge_word)
                ids.extend(self._encode_text(f, at_start=(k == 0), after_special=prev_special, normalized=normalized))
                prev_special = False
        return ids

    def _encode_text(
        self, text: str, *, at_start: bool, after_special: bool, want_prefix: bool = False, normalized: bool = False
    ):
        """Encode one text segment (no special tokens in it; already normalized if ``normalized``)."""
        if self._normalize is not None and not normalized:
            text = self._normalize(text)
        prefix = 0
        s = self.spec
        if (
            s.add_prefix_space
            and text
            and s.prefix_scheme != "whole_text"
            and (at_start or (s.prefix_scheme == "always" and after_special))
        ):
            if not (s.prefix_if_missing and text[0] in self._spaces):
                text = " " + text
                prefix = 1
        if self._byte_level:
            ids = self._encode_byte_level(text)
        else:
            ids = self._encode_sentencepiece(text.replace(" ", _SPACE))
        return (ids, prefix) if want_prefix else ids

    @property
    def _splitter(self):
        """The pure-Python pre-splitter (None without pre-split patterns), compiled on first use:
        with the native encoder (whose matchers accepted the patterns) it is rarely needed, and
        compiling it costs start-up time."""
        if self._splitter_fn is None and self.spec.pre_split:
            self._splitter_fn = compile_pre_split(self.spec.pre_split, self.spec.pre_split_behaviors)
        return self._splitter_fn


_CREATE = object()

#: Use the compiled hot path when it is built (``RMLPREP_PURE_PYTHON=1`` turns it off; tests
#: run both paths). See rmlprep/native.py.
_USE_NATIVE = os.environ.get("RMLPREP_PURE_PYTHON", "") in ("", "0")
