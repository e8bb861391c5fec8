"""Read a tokenizer from a GGUF file's key-value metadata (never its tensor data).

The GGUF layout and its bounds-checked reader live in :mod:`rmlprep.gguf_reader` (:func:`read_gguf_metadata` and
:func:`metadata_sha256` are re-exported here), the pre-tokenizer table in :mod:`rmlprep.gguf_pre`
(:data:`GGUF_PRE_SPLIT`, :data:`GGUF_PRE_REFUSED`, re-exported); this module owns the mapping of
the tokenizer keys to a spec.

The tokenizer keys are mapped to a :class:`TokenizerSpec` as llama.cpp's ``llama_vocab::load``
does (``src/llama-vocab.cpp``): ``tokenizer.ggml.model`` ``"gpt2"`` -> BPE with merges and the
pre-split patterns of ``tokenizer.ggml.pre`` (byte-level, or SentencePiece-style for the
pre-tokenizers llama.cpp runs on raw UTF-8); ``"gemma4"`` -> the same with pre ``"gemma4"``;
``"whitespace"`` -> BPE over raw UTF-8 tokens after tokenizers' Whitespace pre-tokenizer
(and Lowercase when ``tokenizer.ggml.normalizer.lowercase``); ``"llama"`` -> SentencePiece BPE
merged by score. WordPiece (``"bert"``), Unigram (``"t5"``),
RWKV and PLaMo-2 vocabularies are refused by name.

The pre-tokenizer table is generated from llama.cpp's own source by
``tools/make_gguf_pre_table.py`` (:mod:`rmlprep._gguf_pre_table`, :data:`LLAMA_CPP` names the
llama.cpp it was read from); a name that table does not know is refused naming that llama.cpp.
Where llama.cpp runs an adapted regex and states the tokenizer.json original beside it, the
original runs (see :func:`rmlprep.gguf_pre._build_table`): the ids then follow the model's Hugging Face tokenizer,
which llama.cpp's test vectors come from, where llama.cpp's own engine may differ (case folding
of ``'ſ``-like contractions, o200k's letter classes outside ASCII).

Source: ggml ``docs/gguf.md`` (file format); llama.cpp ``src/llama-vocab.cpp`` (defaults,
pre-tokenizer table, special-token handling).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._gguf_pre_table import LLAMA_CPP  # noqa: F401 (re-exported)
from .errors import LoaderError, UnsupportedTokenizer
from .gguf_pre import GGUF_PRE_REFUSED, GGUF_PRE_SPLIT, GGUFPre  # noqa: F401 (GGUFPre: re-exported)
from .gguf_reader import MAX_ARRAY_DEPTH, llama_cpp_id, metadata_sha256, read_gguf_metadata  # noqa: F401 (re-exported)
from .spec import BYTE_LEVEL, SENTENCEPIECE, AddedTokenFlags, TokenizerSpec, TokenType

__all__ = ["GGUF_PRE_SPLIT", "GGUF_PRE_REFUSED", "GGUFPre", "LLAMA_CPP", "metadata_sha256", "read_gguf_metadata",
           "spec_from_gguf"]

_BYTE_TOKEN = re.compile(r"<0x[0-9A-F]{2}>")


# Token texts llama.cpp takes as end-of-turn / end-of-message when the id keys are absent.
# Source: llama-vocab.cpp "auto-detect special tokens by text".
_EOT_TEXTS = frozenset((
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>",
))
_EOM_TEXTS = frozenset(("<|eom_id|>",))
# Token texts llama.cpp puts in its end-of-generation set and forces to CONTROL.
_EOG_TEXTS = frozenset((
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<｜end▁of▁sentence｜>", "[e~[",
))


# ----------------------------------------------------------------------------------------------
# Metadata -> TokenizerSpec.


def _get(meta: Mapping[str, Any], key: str, kind: type | tuple[type, ...], path: str, default=None):
    v = meta.get(key, default)
    if v is default:
        return v
    if kind is list:
        ok = isinstance(v, (list, np.ndarray))
    else:
        ok = isinstance(v, kind) and not (kind is int and isinstance(v, bool))
    if not ok:
        raise LoaderError(f"{path}: {key} has type {type(v).__name__}, expected {getattr(kind, '__name__', kind)}")
    return v


def _strings(meta: Mapping[str, Any], key: str, path: str) -> list[str] | None:
    """A key that must be an array of strings (None when absent)."""
    v = meta.get(key)
    if v is None:
        return None
    # a GGUF array has one element type, so the first element tells the type of all
    if not isinstance(v, list) or (v and not isinstance(v[0], str)):
        raise LoaderError(f"{path}: {key} is {_describe(v)}, expected an array of strings")
    return v


def _numbers(meta: Mapping[str, Any], key: str, path: str, kinds: str) -> np.ndarray | None:
    """A key that must be a numeric array whose dtype kind is in ``kinds`` ("iu", "iuf")."""
    v = meta.get(key)
    if v is None:
        return None
    if not isinstance(v, np.ndarray) or v.dtype.kind not in kinds:
        want = "integers" if "f" not in kinds else "numbers"
        raise LoaderError(f"{path}: {key} is {_describe(v)}, expected an array of {want}")
    return v


def _describe(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"an array of {v.dtype.name if v.dtype != bool else 'bool'}"
    if isinstance(v, list):
        kinds = sorted({"strings" if isinstance(x, str) else "arrays" for x in v})
        return f"an array of {' and '.join(kinds) or 'nothing'}"
    return f"a {type(v).__name__}"


def spec_from_gguf(path: str | os.PathLike) -> tuple[TokenizerSpec, str | None]:
    """Build a TokenizerSpec from a GGUF file's ``tokenizer.*`` metadata.

    Reads only the header and key-value section (an mmap; tensor data is never touched).

    Mapping (as llama.cpp ``llama_vocab::impl::load`` and ``tokenize``):

    - ``tokenizer.ggml.model = "gpt2"``: byte-level BPE; ``merges`` (``"a b"`` strings, ranked
      by position); ``tokenizer.ggml.pre`` -> pre-split patterns, ``ignore_merges`` and the
      ``add_bos`` default from :data:`GGUF_PRE_SPLIT`; no prefix space. Pre types that llama.cpp
      runs without GPT-2 byte encoding (``gemma4``, ``sarvam-moe``; also model ``"gemma4"``)
      give a SentencePiece-kind spec with merges: spaces are ``"▁"``, a symbol without a token
      becomes its ``<0xXX>`` byte tokens.
    - ``"llama"``: SentencePiece BPE merged by ``scores``; ``add_space_prefix`` (default true)
      prepends a space to the text and to every fragment that follows a special token
      (``prefix_scheme="always"``, unconditional); byte fallback to ``<0xXX>`` byte tokens;
      ``add_bos`` defaults to true; decoding strips one space from the first token.
    - token types from ``token_type`` (byte tokens come from it); control and user-defined
      tokens are cut from the text with ``parse_special=True``; user-defined ones always
      (llama.cpp ``tokenizer_st_partition``). Tokens llama.cpp treats as end-of-generation by
      their text (``<|im_end|>``, ``<|eot_id|>``, ...) are typed CONTROL as llama.cpp does.
    - ids ``bos/eos/unknown/padding/eot/eom_token_id`` with llama.cpp's defaults (llama: bos 1,
      eos 2, unk 0; gpt2: bos = eos = 11, named in ``spec.defaulted_ids``) where the key is absent,
      dropped when out of range.
      A byte-level ("gpt2") vocabulary gets no ``unk_id`` whatever ``unknown_token_id`` says:
      llama.cpp's BPE tokenizer never emits it, and a byte that has no token is dropped
      (SmolLM2 names ``<|endoftext|>`` as its unknown token and lacks 21 byte tokens, so
      ``"row1\\x1drow2"`` is ``[720, 33, 720, 34]`` in llama.cpp and ``tokenizers``).
    - Phi-3 (``general.name`` contains "phi-3"/"phi3"): special tokens swallow whitespace on
      their right, as llama.cpp sets ``LLAMA_TOKEN_ATTR_RSTRIP``.
    - Departure from llama.cpp: pre ``"qwen2"`` normalizes each text segment to NFC before
      splitting, as the Qwen2/2.5/3 tokenizer.json does and llama.cpp does not, so a GGUF
      gives the ids the model was trained on for decomposed text (``"e\u0301"`` -> the one
      token of ``"é"``); see ``rmlprep.gguf_pre._HF_NORMALIZERS``.

    Args:
        path: a ``.gguf`` file.
    Returns:
        ``(spec, chat_template)``; the template is ``tokenizer.chat_template`` or None.
    Raises:
        LoaderError: a corrupt or truncated file (with the byte offset); a missing or mistyped
            tokenizer key; arrays of the wrong length.
        UnsupportedTokenizer: ``tokenizer.ggml.model`` other than "gpt2"/"gemma4"/"whitespace"/
            "llama"; "whitespace" as only one of ``tokenizer.ggml.model`` and ``.pre``; a
            ``tokenizer.ggml.pre`` outside llama.cpp's table (the message names the llama.cpp
            version) or in :data:`GGUF_PRE_REFUSED` (the message says why); an unsupported GGUF
            version; a token type outside 1..6.
    """
    p = os.fspath(path)
    meta = read_gguf_metadata(p)
    model = _get(meta, "tokenizer.ggml.model", str, p)
    if model is None:
        raise LoaderError(f"{p}: tokenizer.ggml.model is missing; the GGUF file has no tokenizer")
    if model not in ("gpt2", "llama", "gemma4", "whitespace"):
        raise UnsupportedTokenizer(
            f"{p}: tokenizer.ggml.model = {model!r} is not supported; rmlprep supports 'gpt2' "
            "(BPE with merges), 'gemma4', 'whitespace' (BPE over raw UTF-8 split at whitespace) and "
            "'llama' (SentencePiece BPE)"
            + (" (WordPiece, Unigram and RWKV vocabularies are not BPE)"
               if model in ("bert", "t5", "rwkv", "plamo2") else "")
        )
    tokens = _strings(meta, "tokenizer.ggml.tokens", p)
    if not tokens:
        raise LoaderError(f"{p}: tokenizer.ggml.tokens is missing or empty")
    n = len(tokens)
    vocab = tuple(t if t else f"[EMPTY_{i}]" for i, t in enumerate(tokens))  # llama.cpp's rename

    types_arr = _numbers(meta, "tokenizer.ggml.token_type", p, "iu")
    if types_arr is None:
        types = [int(TokenType.NORMAL)] * n
    else:
        types_np = np.asarray(types_arr)
        if len(types_np) < n:
            raise LoaderError(f"{p}: tokenizer.ggml.token_type has {len(types_np)} entries for {n} tokens")
        types_np = types_np[:n]
        bad = np.flatnonzero((types_np < 1) | (types_np > 6))
        if bad.size:
            i = int(bad[0])
            raise UnsupportedTokenizer(
                f"{p}: tokenizer.ggml.token_type[{i}] = {int(types_np[i])} ({vocab[i]!r}) is not a "
                "token type rmlprep supports (1 normal .. 6 byte)"
            )
        types = types_np.astype(np.int64).tolist()

    # llama.cpp: tokens that end generation by their text become CONTROL.
    # Without the eot/eom keys llama.cpp takes the first token (in hash order) whose text is in
    # its list; rmlprep keeps every such token, in id order.
    eot_key = llama_cpp_id(meta, "tokenizer.ggml.eot_token_id", None, n)
    eom_key = llama_cpp_id(meta, "tokenizer.ggml.eom_token_id", None, n)
    eot_ids: set[int] = {i for i in (eot_key, eom_key) if i is not None}
    eog_or_eot = _EOG_TEXTS | _EOT_TEXTS
    for i in [i for i, t in enumerate(vocab) if t in eog_or_eot]:
        t = vocab[i]
        if (t in _EOT_TEXTS and eot_key is None) or (t in _EOM_TEXTS and eom_key is None):
            eot_ids.add(i)
        types[i] = int(TokenType.CONTROL)
    for i in eot_ids:
        if types[i] not in (TokenType.CONTROL, TokenType.USER_DEFINED):
            types[i] = int(TokenType.CONTROL)

    name = os.path.basename(p)
    common: dict[str, Any] = {}
    if model in ("gpt2", "gemma4", "whitespace"):
        pre_name = _get(meta, "tokenizer.ggml.pre", str, p)
        pre_name = "default" if not pre_name else pre_name
        if model == "gemma4":
            pre_name = "gemma4"  # llama.cpp sets it for this model whatever the key says
        if (model == "whitespace") != (pre_name == "whitespace"):  # no converter writes a mix
            raise UnsupportedTokenizer(
                f"{p}: tokenizer.ggml.model = {model!r} with tokenizer.ggml.pre = {pre_name!r} is not "
                "supported: the 'whitespace' model and pre-tokenizer only come together")
        pre = GGUF_PRE_SPLIT.get(pre_name)
        if pre is None:
            if pre_name in GGUF_PRE_REFUSED:
                raise UnsupportedTokenizer(
                    f"{p}: tokenizer.ggml.pre = {pre_name!r} is not supported: {GGUF_PRE_REFUSED[pre_name]}"
                )
            raise UnsupportedTokenizer(
                f"{p}: tokenizer.ggml.pre = {pre_name!r} is not in the pre-tokenizer table of {LLAMA_CPP}, "
                f"which rmlprep follows (a conversion by a newer llama.cpp?); known names: "
                f"{', '.join(sorted(GGUF_PRE_SPLIT))}"
            )
        merges_raw = _strings(meta, "tokenizer.ggml.merges", p)
        if merges_raw is None:
            raise LoaderError(f"{p}: tokenizer.ggml.merges is missing; a {model!r} tokenizer needs merges")
        # llama.cpp splits at word.find(' ', 1); str.partition does the same unless the merge
        # starts with a space (then the slow path below)
        merges = [m.partition(" ") for m in merges_raw]
        for r, (a, sep, _) in enumerate(merges):
            if not a or not sep:
                m = merges_raw[r]
                k = m.find(" ", 1)
                if k < 0:
                    raise LoaderError(f"{p}: tokenizer.ggml.merges[{r}] = {m!r} has no space between its halves")
                merges[r] = (m[:k], " ", m[k + 1 :])
        merges = [(a, b) for a, _, b in merges]
        # llama.cpp's BPE defaults: bos = eos = 11, no bos for GLM, none at all for gemma4
        bos_default, eos_default, unk_default = (None if pre.no_bos else 11), 11, None
        if model == "gemma4":
            bos_default = eos_default = None
        add_bos_default = pre.add_bos
        normalizers = pre.normalizers
        if model == "whitespace" and _get(meta, "tokenizer.ggml.normalizer.lowercase", bool, p, False):
            # tokenizers' Lowercase maps fully (U+0130 -> "i" U+0307); llama.cpp per code point
            normalizers = (("lowercase",), *normalizers)
        common.update(merges=tuple(merges), pre_split=pre.patterns, ignore_merges=pre.ignore_merges,
                      normalizers=normalizers, pre_split_behaviors=pre.behaviors)
        if pre.byte_encode:
            common.update(kind=BYTE_LEVEL)
        else:
            # raw UTF-8 tokens with "▁" for space (llama_escape_whitespace) and <0xXX> byte
            # tokens for a symbol without a token: SentencePiece-style BPE with merges
            common.update(
                kind=SENTENCEPIECE,
                byte_fallback=any(_BYTE_TOKEN.fullmatch(t) for t in vocab),
            )
        add_prefix = False
    else:
        scores_arr = _numbers(meta, "tokenizer.ggml.scores", p, "iuf")
        if scores_arr is None:
            scores = (0.0,) * n  # llama.cpp: score 0 for every token
        else:
            if len(scores_arr) < n:
                raise LoaderError(f"{p}: tokenizer.ggml.scores has {len(scores_arr)} entries for {n} tokens")
            scores_np = np.asarray(scores_arr[:n], dtype=np.float64)
            bad = np.flatnonzero(~np.isfinite(scores_np))
            if bad.size:
                i = int(bad[0])
                raise LoaderError(f"{p}: tokenizer.ggml.scores[{i}] = {scores_np[i]} ({vocab[i]!r}) is not a finite number")
            scores = tuple(scores_np.tolist())
        bos_default, eos_default, unk_default = 1, 2, 0
        add_bos_default = True
        add_prefix = bool(_get(meta, "tokenizer.ggml.add_space_prefix", bool, p, True))
        byte_fallback = any(
            types[i] == TokenType.BYTE and len(t) == 6 and t.startswith("<0x") for i, t in enumerate(vocab)
        )
        common.update(
            kind=SENTENCEPIECE,
            scores=scores,
            byte_fallback=byte_fallback,
            add_prefix_space=add_prefix,
            prefix_scheme="always",
            prefix_if_missing=False,
            decode_strip_prefix="first_token" if add_prefix else "none",
        )

    bos_id = llama_cpp_id(meta, "tokenizer.ggml.bos_token_id", bos_default, n)
    eos_id = llama_cpp_id(meta, "tokenizer.ggml.eos_token_id", eos_default, n)  # BPE's 11 is a "," (defaulted_ids)
    defaulted = tuple(role for role, tid, d in (("bos", bos_id, bos_default), ("eos", eos_id, eos_default))
                      if model != "llama" and tid is not None and tid == d
                      and llama_cpp_id(meta, f"tokenizer.ggml.{role}_token_id", None, n) is None)
    # llama.cpp's BPE session never emits the unknown token: a byte without a token is dropped
    # (llm_tokenizer_bpe_session::tokenize), as Hugging Face BPE does without an unk_token.
    # Kept for SentencePiece and "whitespace" (whose tokenizer.json emits unk_token; without the key
    # a character outside the vocab is skipped before merging, as tokenizers does: tokenizer_bpe).
    unk_id = (llama_cpp_id(meta, "tokenizer.ggml.unknown_token_id", unk_default, n)
              if model in ("llama", "whitespace") else None)
    pad_id = llama_cpp_id(meta, "tokenizer.ggml.padding_token_id", None, n)
    add_bos = bool(_get(meta, "tokenizer.ggml.add_bos_token", bool, p, add_bos_default))
    add_eos = bool(_get(meta, "tokenizer.ggml.add_eos_token", bool, p, False))
    if add_bos and bos_id is None:
        raise LoaderError(f"{p}: tokenizer.ggml.add_bos_token is true, but tokenizer.ggml.bos_token_id is not set")
    if add_eos and eos_id is None:
        raise LoaderError(f"{p}: tokenizer.ggml.add_eos_token is true, but tokenizer.ggml.eos_token_id is not set")

    flags: tuple[AddedTokenFlags, ...] = ()
    general_name = str(meta.get("general.name", "")).lower()
    if "phi-3" in general_name or "phi3" in general_name:
        # llama-vocab.cpp: RSTRIP on every control/user-defined/unknown token and "</s>",
        # except "<unk>", "<s>", "<|endoftext|>".
        keep = {"<unk>", "<s>", "<|endoftext|>"}
        special_types = (TokenType.CONTROL, TokenType.USER_DEFINED, TokenType.UNKNOWN)
        flags = tuple(
            AddedTokenFlags(id=i, rstrip=True)
            for i, t in enumerate(vocab)
            if (types[i] in special_types or t == "</s>") and t not in keep
        )

    chat_template = _get(meta, "tokenizer.chat_template", str, p)
    spec = TokenizerSpec(
        vocab=vocab,
        token_types=tuple(types),
        bos_id=bos_id,
        eos_id=eos_id,
        unk_id=unk_id,
        pad_id=pad_id,
        eot_ids=tuple(sorted(eot_ids)),
        add_bos=add_bos,
        add_eos=add_eos,
        added_token_flags=flags,
        parse_user_defined_always=True,
        defaulted_ids=defaulted,
        name=name,
        **common,
    )
    return spec, chat_template
