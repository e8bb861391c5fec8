"""TokenizerSpec: the frozen, validated description of a tokenizer.

Loaders (``hf.py``, ``gguf.py``, ``spm.py``, ``tiktoken_file.py``) only produce a spec;
``tokenizer.py`` and ``bpe.py`` only consume one. A spec is plain data (tuples, strings,
numbers), pickles small, and has a stable :attr:`TokenizerSpec.fingerprint`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields
from enum import IntEnum
from typing import Any

from .errors import SpecError

__all__ = ["TokenType", "BYTE_LEVEL", "SENTENCEPIECE", "TokenizerSpec", "AddedTokenFlags"]

#: Model kinds.
BYTE_LEVEL = "byte_level_bpe"
SENTENCEPIECE = "sentencepiece_bpe"
_KINDS = (BYTE_LEVEL, SENTENCEPIECE)


class TokenType(IntEnum):
    """Token types, numbered as GGUF's ``tokenizer.ggml.token_type`` and sentencepiece do.

    Source: llama.cpp ``llama_token_type`` / sentencepiece ``ModelProto.SentencePiece.Type``.
    """

    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


@dataclass(frozen=True, slots=True)
class AddedTokenFlags:
    """Hugging Face ``added_tokens`` matching flags for one control/user-defined token.

    Source: tokenizers ``AddedToken`` (lstrip, rstrip, single_word, normalized).

    Attributes:
        id: the token id.
        lstrip: the match swallows whitespace on its left.
        rstrip: the match swallows whitespace on its right.
        single_word: only match when not inside a word (no word character next to it). Not
            implemented: ``Tokenizer.create`` refuses it (no real tokenizer.json uses it; the
            reference's word characters need Unicode's Alphabetic property).
        normalized: the token is matched, by its normalized content, on the normalized text
            of the segments the other added tokens leave (tokenizers' second pass).
    """

    id: int
    lstrip: bool = False
    rstrip: bool = False
    single_word: bool = False
    normalized: bool = False


#: Fields added after fingerprints were first written into shards: ``to_dict`` leaves them out
#: while they hold their default, so a spec that does not use them keeps its fingerprint.
_OMITTED_AT_DEFAULT = frozenset({
    "decoder", "unk_surface", "pre_split_behaviors", "unparsed_specials", "decode_added_byte_level",
    "decode_chain", "unset_specials", "defaulted_ids", "model_types",
})

#: id(spec) -> (spec, fingerprint): specs are immutable, and the canonical JSON of a 256k vocab
#: with 500k merges takes ~0.5 s to write
_FINGERPRINTS: dict[int, tuple["TokenizerSpec", str]] = {}


def _known_fingerprint(spec: "TokenizerSpec") -> str | None:
    """The fingerprint of ``spec`` if this process already has it (computed or remembered)."""
    hit = _FINGERPRINTS.get(id(spec))
    return hit[1] if hit is not None and hit[0] is spec else None


def _remember_fingerprint(spec: "TokenizerSpec", fingerprint: str) -> None:
    """Record ``fingerprint`` as the fingerprint of ``spec`` without computing it: for a spec read
    back with the fingerprint that was computed from it before it was written (the load cache's
    checksummed entry, a pickled Tokenizer)."""
    if len(_FINGERPRINTS) >= 64:
        _FINGERPRINTS.clear()
    _FINGERPRINTS[id(spec)] = (spec, fingerprint)  # the spec is kept alive, so its id stays its own


@dataclass(frozen=True, slots=True)
class TokenizerSpec:
    """Everything needed to encode and decode exactly like a model's reference tokenizer.

    Attributes:
        kind: ``"byte_level_bpe"`` (GPT-2, Llama 3, Qwen2, SmolLM: tokens are spelled in the
            GPT-2 printable byte alphabet) or ``"sentencepiece_bpe"`` (Llama 2, Mistral, Gemma:
            tokens are Unicode strings with ``"▁"`` for space, plus ``<0xXX>`` byte tokens).
        vocab: token string of each id, ``vocab[id]``.
        token_types: one :class:`TokenType` value per id (same length as ``vocab``).
        merges: ranked merges, ``merges[rank] = (left, right)``; empty when ``scores`` rule,
            or with ``scores`` None: nothing merges (a tokenizer.json BPE with ``"merges": []``,
            a character-level vocab: each word is its characters' ids, as in ``tokenizers``).
        scores: one float per id when merges are chosen by score (SentencePiece, GGUF
            "llama", tiktoken ranks as ``-rank``); the merged string must be a normal or
            user-defined token and the highest score merges first. ``None`` with merges.
        pre_split: pre-tokenizer regex patterns applied in order, each to every piece of the
            one before, with Hugging Face's ``Isolated`` behaviour (matches and the gaps between
            them are both pieces, so pieces cover the text) unless ``pre_split_behaviors`` says
            otherwise. The digit split is a pattern too: ``\\p{N}``
            (``Digits(individual_digits=true)``) or ``\\p{N}+``. Byte-level specs split the
            segment after the prefix space; SentencePiece-style specs split it after the prefix
            and spaces -> ``"▁"`` (tokenizers' normalizer runs before its pre-tokenizer).
        pre_split_behaviors: empty (every pattern ``Isolated``), or one ``(behavior, invert)``
            per ``pre_split`` pattern: behavior ``"isolated"``, ``"removed"``,
            ``"merged_with_previous"``, ``"merged_with_next"`` or ``"contiguous"`` (Hugging Face
            ``Split`` pre-tokenizer, ``SplitDelimiterBehavior`` and ``invert``).
        normalizers: applied in order to each text segment between special tokens:
            ``("nfc",)``, ``("nfkc",)``, ``("nfd",)``, ``("nfkd",)``, ``("lowercase",)``,
            ``("replace", old, new)``.
        bos_id, eos_id, unk_id, pad_id: special ids or ``None``.
        eot_ids: end-of-turn ids (``<|eot_id|>``, ``<|im_end|>``, ``<end_of_turn>``...).
        add_bos, add_eos: added by ``encode(..., add_special_tokens=True)``.
        byte_fallback: SentencePiece: a leftover symbol becomes ``<0xXX>`` byte tokens (every
            one a character outside the vocab can need must be in it: Tokenizer.create).
        add_prefix_space: prepend a space (byte-level: ``" "``; SentencePiece: ``"▁"``) to a
            text segment, following ``prefix_scheme``.
        prefix_scheme: ``"first"``: only the segment at the very start of the text;
            ``"always"``: every non-empty segment (also after each special token);
            ``"whole_text"``: once, to the whole text before special tokens are cut out
            (sentencepiece: ``"<tool>x"`` becomes ``"▁<tool>x"``); ``encode_fragments`` (the
            chat paths) gives each text at the start or after a control or unknown id its own
            (one ``sp.encode`` per text, as transformers 4.57.1's ``legacy=True``:
            ``[1, "hi"]`` -> ``[1, "▁hi"]``, :mod:`rmlprep.spm_special`).
        prefix_if_missing: skip the prefix when the segment already starts with a space
            (Hugging Face Metaspace / ByteLevel); ``False`` prepends unconditionally
            (sentencepiece ``add_dummy_prefix``, llama.cpp, HF ``Prepend`` normalizer).
        ignore_merges: a piece that is a token as a whole is taken whole (Llama 3, tiktoken).
        fuse_unk: a run of characters outside the vocab within one pre-tokenized piece is one
            unk id (Hugging Face ``fuse_unk``, ``BPE::merge_word``: runs in two pieces stay two
            unks; an unk token typed in the text is never fused).
        split_on_space: SentencePiece-style only: pieces are split before each ``"▁"``
            (Hugging Face Metaspace ``split: true``) before BPE.
        added_token_flags: HF matching flags for control/user-defined tokens that have any.
        parse_user_defined_always: user-defined tokens are cut out even with
            ``parse_special=False`` (sentencepiece matches user-defined pieces in all text;
            tokenizers matches its non-special added tokens with ``encode_special_tokens``).
        unparsed_specials: how ``parse_special=False`` treats the text of control tokens when
            user-defined ones are still cut: ``"ignore"`` (the matcher does not know them,
            sentencepiece) or ``"pass_over"`` (the matcher finds them and reads them as text, so
            no user-defined token is matched inside one; tokenizers).
        decode_added_byte_level: byte-level only: control and user-defined tokens decode like
            the others, through the byte alphabet, when every character of theirs is in it
            (``"<Ġx>"`` -> ``b"< x>"``; tokenizers' ByteLevel decoder sees every token); else (and
            always when False: tiktoken, llama.cpp) as their UTF-8 text.
        decode_strip_prefix: ``"none"``; ``"first_token"``: remove one leading space from the
            first token decoded (a GGUF file's ``add_space_prefix``, as HF's Metaspace decoder
            does); ``"text"``: from the start of the decoded text (sentencepiece). Not used
            with a ``decode_chain`` (a tokenizer.json's spec leaves it ``"none"``).
        decoder: ``"bytes"``: decode concatenates the tokens' bytes (Hugging Face
            ``tokenizers``, tiktoken, llama.cpp); ``"sentencepiece"``: SentencePiece's rule
            (control pieces are empty, the unknown piece is ``unk_surface``, byte runs are read
            as UTF-8 with U+FFFD per bad byte; see :mod:`rmlprep.sp_decode`).
        unk_surface: the text of the unknown piece with ``decoder="sentencepiece"``
            (sentencepiece ``trainer_spec.unk_surface``).
        decode_chain: ``None``, or a Hugging Face tokenizer.json's decoder as a tuple of steps
            (``()``: no decoder, tokens joined with ``" "``). When set, :meth:`decode` runs it on
            the token strings as tokenizers does (:mod:`rmlprep.hf_decode`, which lists the
            steps) instead of ``decoder``/``decode_strip_prefix``; a ``("Refuse", message)``
            step makes decoding raise ``UnsupportedTokenizer`` (loading and encoding work).
        unset_specials: one message per ``add_bos_token``/``add_eos_token`` a SentencePiece
            folder's config leaves open where transformers' default is unknown or disputed
            (``add_bos``/``add_eos`` are then False); encoding with special tokens raises
            ``LoaderError`` with them (:meth:`check_adds`), encoding without works.
        defaulted_ids: the roles (``"bos"``, ``"eos"``) whose id is llama.cpp's byte-level BPE
            default, id 11 (``","`` in GPT-2-style vocabularies), because a GGUF names none or
            one out of range: kept for encoding, as llama.cpp does; a run that frames documents
            with it is refused (:func:`rmlprep.pipeline.framing.framing`). Not part of the
            fingerprint (the ids are the same either way); :meth:`replace` with ``bos_id`` /
            ``eos_id`` (``load_tokenizer(path, eos_id=...)``) drops that role from it.
        model_types: ``(id, type)`` pairs that replace ``token_types`` where the BPE model looks a
            token up (a character's symbol, byte fallback's check, ``ignore_merges``' whole word;
            control and unused tokens are not symbols there). A tokenizer.json's special added
            token that ``model.vocab`` holds is a symbol like any (``NORMAL``: tokenizers'
            model knows only its vocab, not which entries are special), an added token
            ``model.vocab`` lacks is none (``UNUSED``). Loaders list only the entries that can
            change an id (a one-character token, or any with ``ignore_merges``).
        name: a human label (file name, encoding name); not part of the fingerprint.
    """

    kind: str
    vocab: tuple[str, ...]
    token_types: tuple[int, ...]
    merges: tuple[tuple[str, str], ...] = ()
    scores: tuple[float, ...] | None = None
    pre_split: tuple[str, ...] = ()
    pre_split_behaviors: tuple[tuple[str, bool], ...] = ()
    normalizers: tuple[tuple[str, ...], ...] = ()
    bos_id: int | None = None
    eos_id: int | None = None
    unk_id: int | None = None
    pad_id: int | None = None
    eot_ids: tuple[int, ...] = ()
    add_bos: bool = False
    add_eos: bool = False
    byte_fallback: bool = False
    add_prefix_space: bool = False
    prefix_scheme: str = "first"
    prefix_if_missing: bool = False
    ignore_merges: bool = False
    fuse_unk: bool = False
    split_on_space: bool = False
    added_token_flags: tuple[AddedTokenFlags, ...] = ()
    parse_user_defined_always: bool = False
    unparsed_specials: str = "ignore"
    decode_added_byte_level: bool = False
    decode_strip_prefix: str = "none"
    decoder: str = "bytes"
    unk_surface: str = " \u2047 "
    decode_chain: tuple[tuple[Any, ...], ...] | None = None
    unset_specials: tuple[str, ...] = ()
    defaulted_ids: tuple[str, ...] = ()
    model_types: tuple[tuple[int, int], ...] = ()
    name: str = field(default="", compare=False)

    # -- canonical form ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (lists for tuples); ``from_dict(to_dict())`` gives back the spec."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "merges":
                v = [list(m) for m in v]
            elif (f.name in ("normalizers", "pre_split_behaviors", "model_types")
                  or (f.name == "decode_chain" and v is not None)):
                v = [list(n) for n in v]
            elif f.name == "added_token_flags":
                v = [
                    {"id": a.id, "lstrip": a.lstrip, "rstrip": a.rstrip,
                     "single_word": a.single_word, "normalized": a.normalized}
                    for a in v
                ]
            elif isinstance(v, tuple):
                v = list(v)
            if f.name in _OMITTED_AT_DEFAULT and getattr(self, f.name) == f.default:
                continue  # fields added later stay out at their default: old fingerprints hold
            out[f.name] = v
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "TokenizerSpec":
        """Build a spec from :meth:`to_dict` output (unknown keys raise ``SpecError``)."""
        known = {f.name for f in fields(cls)}
        extra = set(d) - known
        if extra:
            raise SpecError(f"unknown TokenizerSpec field(s) {sorted(extra)}; known: {sorted(known)}")
        kw: dict[str, Any] = dict(d)
        if "vocab" in kw:
            kw["vocab"] = tuple(kw["vocab"])
        if "token_types" in kw:
            kw["token_types"] = tuple(int(t) for t in kw["token_types"])
        if "merges" in kw:
            kw["merges"] = tuple((str(a), str(b)) for a, b in kw["merges"])
        if kw.get("scores") is not None:
            kw["scores"] = tuple(float(s) for s in kw["scores"])
        for k in ("pre_split", "eot_ids", "unset_specials", "defaulted_ids"):
            if k in kw:
                kw[k] = tuple(kw[k])
        if "normalizers" in kw:
            kw["normalizers"] = tuple(tuple(n) for n in kw["normalizers"])
        if "pre_split_behaviors" in kw:
            kw["pre_split_behaviors"] = tuple((str(b), bool(inv)) for b, inv in kw["pre_split_behaviors"])
        if "model_types" in kw:
            kw["model_types"] = tuple((int(i), int(t)) for i, t in kw["model_types"])
        if "added_token_flags" in kw:
            kw["added_token_flags"] = tuple(AddedTokenFlags(**a) for a in kw["added_token_flags"])
        if kw.get("decode_chain") is not None:
            kw["decode_chain"] = tuple(tuple(step) for step in kw["decode_chain"])
        return cls(**kw)

    @property
    def fingerprint(self) -> str:
        """sha256 hex of the canonical JSON form (sorted keys, ``name`` left out).

        Two specs that encode and decode alike have the same fingerprint whatever file they
        came from; it is written into every shard's metadata.
        """
        known = _known_fingerprint(self)
        if known is not None:
            return known
        d = self.to_dict()
        d.pop("name", None)
        # which ids are llama.cpp's defaults changes no id (framing refuses them, :attr:`defaulted_ids`):
        # in the fingerprint it made a folder written before the field existed "another tokenizer"
        d.pop("defaulted_ids", None)
        blob = json.dumps(d, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                          allow_nan=False)
        fp = hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()
        _remember_fingerprint(self, fp)
        return fp

    def check_adds(self) -> None:
        """Refuse to add special tokens while the tokenizer's folder leaves ``add_bos_token`` or
        ``add_eos_token`` open (:attr:`unset_specials`, set by ``rmlprep.load`` for a
        SentencePiece folder whose config names neither the key nor a class whose
        transformers default is agreed). Encoding without special tokens is unaffected.

        Raises:
            LoaderError: one line per open key: which key, why it is open, what to set.
        """
        if self.unset_specials:
            from .errors import LoaderError

            raise LoaderError("add_special_tokens: " + "; ".join(self.unset_specials))

    def replace(self, **changes: Any) -> "TokenizerSpec":
        """A copy with some fields changed (e.g. ``add_bos=False``). A ``bos_id`` / ``eos_id``
        given here is the caller's, no default: its role leaves :attr:`defaulted_ids` (unless
        ``defaulted_ids`` is given too)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.defaulted_ids and "defaulted_ids" not in changes:
            d["defaulted_ids"] = tuple(r for r in self.defaulted_ids if f"{r}_id" not in changes)
        d.update(changes)
        return type(self)(**d)
