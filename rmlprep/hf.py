"""Read a Hugging Face ``tokenizer.json`` (BPE models) into a :class:`TokenizerSpec`.

The file is a ``"type"``-tagged tree: normalizer, pre_tokenizer, model, post_processor,
decoder, added_tokens. Each component is read on its own, Sequences are flattened, and every
component rmlprep cannot reproduce exactly is refused with :class:`UnsupportedTokenizer` naming
its JSON path (``model.type = 'Unigram' is not supported; rmlprep supports BPE``) instead of
being ignored.

Two families are supported, told apart by their *space style*:

- byte-level BPE (GPT-2, Llama 3, Qwen2/3, SmolLM, DeepSeek, GPT-4o, gpt-oss): a ``ByteLevel``
  pre-tokenizer, optionally after ``Split`` regexes and ``Digits``;
- SentencePiece-style BPE (Llama 2, Mistral, Gemma 1-3, Phi-3): spaces become ``"▁"``, either by
  a ``Replace(" ", "▁")`` normalizer (optionally after ``Prepend("▁")``, the "legacy" form; then
  ``Split``/``Digits`` may follow) or by a ``Metaspace`` pre-tokenizer.

Exactly one space style must be present.

``Split`` takes every behaviour (``Removed``, ``Isolated``, ``MergedWithPrevious``,
``MergedWithNext``, ``Contiguous``) and ``invert`` (:mod:`rmlprep.split`). Two combinations are
rewritten to what the fast (and native) path runs, each proved by a test: a known tiling pattern
whose behaviour cannot differ from ``Isolated`` (GPT-4o: o200k with ``Removed`` + ``invert``,
:func:`rmlprep.pretokenize.isolated_equivalent`), and a ``String`` split on ``" "`` after
``Replace(" ", "▁")``, which never matches (Gemma 2/3) and is dropped.

Added tokens: ``special: true`` ones are control tokens, the others user-defined and matched even
with ``parse_special=False`` (tokenizers' ``encode_special_tokens``); ``normalized: true`` ones are
matched by their normalized content on the normalized text (a second pass), and decode from it
(two of them with one normalized content are refused: tokenizers picks either, run to run);
``lstrip``/``rstrip`` take White_Space; ``single_word`` is refused. An id that ``model.vocab``
leaves without a token (GPT-4o has 19) becomes an unreachable UNUSED placeholder, which ``decode``
and ``decode_bytes`` drop as tokenizers' decode does.

Decoding: the file's ``decoder`` (null, or any Sequence of ByteLevel, ByteFallback, Fuse, Strip,
Replace, Metaspace, WordPiece, BPEDecoder and CTC steps, in the file's order) is kept in the spec's
``decode_chain`` and run on the token strings as tokenizers runs it (:mod:`rmlprep.hf_decode`). A
step rmlprep does not reproduce (a ``Regex`` Replace, an unknown type) is refused when ids are
decoded, never at load: such a file loads and encodes.

This module owns the assembly: loading the file, the space style, token types, added-token flags,
bos/eos/pad from ``tokenizer_config.json`` and the chat template. Reading each component
(normalizer, pre-tokenizer, model, added tokens, post-processor, decoder) and refusing the forms
rmlprep does not reproduce lives in :mod:`rmlprep.hf_components`. The file's ``truncation`` and
``padding`` sections are not applied: transformers' call turns both off unless asked
(``PreTrainedTokenizerFast.set_truncation_and_padding``), and packing sets the lengths.

Source: tokenizers ``tokenizer/serialization.rs``, ``normalizers/*.rs``,
``pre_tokenizers/{byte_level,metaspace,split,digits}.rs``, ``models/bpe/{model,serialization}.rs``,
``tokenizer/added_vocabulary.rs``, ``processors/template.rs``, ``decoders/*.rs``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import LoaderError
from .hf_components import _SPACE, _Reader
from .hf_config import _byte_level_prefix, _check_config_added, _framing, _token_content  # noqa: F401 (spm_added, load)
from .segment import make_normalizer
from .spec import BYTE_LEVEL, SENTENCEPIECE, AddedTokenFlags, TokenizerSpec, TokenType

__all__ = ["spec_from_tokenizer_json", "read_tokenizer_config", "END_OF_TURN_TOKENS"]

_BYTE_TOKEN = re.compile(r"<0x[0-9A-F]{2}>")

#: Tokens that end a chat turn, wherever a vocabulary has them. ``<|endoftext|>`` only counts
#: when it is the model's eos (base models), since chat models use it as padding.
END_OF_TURN_TOKENS = ("<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>")



def _gap_token(i: int, index: Mapping[str, int]) -> str:
    """A placeholder for an id without a token: contains a space, so no byte-level or
    SentencePiece-style piece ever equals it, and unique."""
    tok = f"<unused id {i}>"
    while tok in index:
        tok = f"<{tok}>"
    return tok


def read_tokenizer_config(path: str | os.PathLike) -> dict[str, Any] | None:
    """Read ``tokenizer_config.json`` (None when the file does not exist).

    Raises:
        LoaderError: the file is not valid JSON or not an object.
    """
    p = Path(path)
    if not p.is_file():
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # ValueError: JSON errors, huge ints
        raise LoaderError(f"{p}: not valid JSON ({_json_error(e)})") from None
    except OSError as e:
        raise LoaderError(f"{p}: cannot read ({e.strerror or e})") from None
    if not isinstance(data, dict):
        raise LoaderError(f"{p}: expected a JSON object, got {type(data).__name__}")
    return data


#: What a Mistral tekken file (``tekken.json``: ``{"config": {"pattern", "num_vocab_tokens", ...},
#: "vocab": [{"rank", "token_bytes", ...}]}``, mistral-common's own format) is, for refusals.
TEKKEN = ("a Mistral tekken file (mistral-common's tokenizer format), which rmlprep does not read: give the "
          "model's tokenizer.json (the Hugging Face repos of Tekken models ship one beside tekken.json)")


def is_tekken(data: Any) -> bool:
    """Whether parsed JSON is shaped as a tekken file (see :data:`TEKKEN`)."""
    return (isinstance(data, dict) and isinstance(data.get("config"), dict) and "vocab" in data
            and "num_vocab_tokens" in data["config"])


def _json_error(e: Exception) -> str:
    if isinstance(e, RecursionError):
        return "arrays or objects nested too deeply for Python's JSON parser"
    return str(e)


def _load_json(path_or_dict: str | os.PathLike | Mapping[str, Any]) -> tuple[Mapping[str, Any], str, str]:
    if isinstance(path_or_dict, Mapping):
        return path_or_dict, "tokenizer.json", ""
    p = Path(path_or_dict)
    if not p.is_file():
        raise LoaderError(f"{p}: no such file; give the path of a tokenizer.json")
    try:
        with open(p, "rb") as f:
            data = json.loads(f.read())
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # ValueError: JSON errors, huge ints
        raise LoaderError(f"{p}: not valid JSON ({_json_error(e)}); is this a tokenizer.json?") from None
    except OSError as e:
        raise LoaderError(f"{p}: cannot read ({e.strerror or e})") from None
    if is_tekken(data):
        raise LoaderError(f"{p}: {TEKKEN}")
    if not isinstance(data, dict) or "model" not in data:
        what = "no \"model\" entry" if isinstance(data, dict) else f"a JSON {type(data).__name__} at the top level"
        raise LoaderError(f"{p}: not a Hugging Face tokenizer.json ({what}); give the model's tokenizer.json, or "
                          "its SentencePiece .model, GGUF file or tiktoken rank file")
    return data, str(p), p.parent.name


def spec_from_tokenizer_json(
    path_or_dict: str | os.PathLike | Mapping[str, Any], *, config: Mapping[str, Any] | None = None
) -> tuple[TokenizerSpec, str | None]:
    """Build a spec from a Hugging Face ``tokenizer.json`` (BPE models only).

    Args:
        path_or_dict: the file, or its parsed JSON.
        config: the parsed ``tokenizer_config.json`` beside it, if any: ``bos_token``,
            ``eos_token``, ``pad_token``, ``add_bos_token``, ``add_eos_token`` and
            ``chat_template`` are read from it. Without it (or without those keys) bos/eos and
            add_bos/add_eos come from the post-processor.
    Returns:
        ``(spec, chat_template)``; the template is None when the config has none.
    Raises:
        LoaderError: the file is not a valid tokenizer.json (the message starts with the path
            and names the JSON path).
        UnsupportedTokenizer: a component rmlprep does not implement (Unigram/WordPiece models,
            BERT normalizers, subword prefixes, both or neither space style, ...).
    """
    data, where, default_name = _load_json(path_or_dict)
    r = _Reader(data, where)
    norm = r.normalizer()
    pre = r.pre_tokenizer(norm)
    model = r.model()

    styles = []
    if pre["byte_level"] is not None:
        styles.append(f"ByteLevel pre-tokenizer ({pre['byte_level']['path']})")
    if pre["metaspace"] is not None:
        styles.append(f"Metaspace pre-tokenizer ({pre['metaspace']['path']})")
    if norm["replace_space"]:
        styles.append("Replace(' ', '\u2581') normalizer")
    if len(styles) != 1:
        raise r.unsupported(
            "normalizer/pre_tokenizer",
            f"has {'both ' + ' and '.join(styles) if styles else 'no space handling'}; rmlprep needs exactly one "
            "space style: a ByteLevel pre-tokenizer, a Metaspace pre-tokenizer, or Replace(' ', '\u2581')",
        )

    kw: dict[str, Any] = {}
    if pre["byte_level"] is not None:
        kind = BYTE_LEVEL
        kw["add_prefix_space"] = _byte_level_prefix(pre["byte_level"], config, where)
        kw["prefix_scheme"] = "always"  # ByteLevel prepends to every segment between added tokens
        kw["prefix_if_missing"] = True
        if model["byte_fallback"]:
            raise r.unsupported("model.byte_fallback", "= true with a ByteLevel pre-tokenizer is not supported")
    else:
        kind = SENTENCEPIECE
        if pre["metaspace"] is not None:
            ms = pre["metaspace"]
            kw["add_prefix_space"] = ms["scheme"] != "never"
            kw["prefix_scheme"] = "first" if ms["scheme"] == "first" else "always"
            kw["prefix_if_missing"] = True
            kw["split_on_space"] = ms["split"]
        else:
            # legacy form: Prepend("▁") normalizes every non-empty segment between added tokens
            kw["add_prefix_space"] = norm["prepend"]
            kw["prefix_scheme"] = "always"
            kw["prefix_if_missing"] = False

    cls = (config or {}).get("tokenizer_class")
    if (kind == SENTENCEPIECE and kw.get("add_prefix_space") and (config or {}).get("add_prefix_space") is False
            and isinstance(cls, str) and cls.removesuffix("Fast").removesuffix("Tokenizer") in ("Llama", "CodeLlama")):
        # LlamaTokenizerFast rebuilds the tokenizer from tokenizer.model without the dummy prefix
        # (4.57.1 and 5.24.0, Mistral 7B's folder: "Hello world" is [16230 'Hello', 1526], the
        # file's [22557 '▁Hello', 1526]); with no tokenizer.model beside it 4.57.1 cannot load it
        folder = str(Path(where).parent) if where != "tokenizer.json" else "tokenizer.json"
        raise LoaderError(f"{folder}: tokenizer_config.json sets add_prefix_space = false for {cls}, so transformers "
                          "rebuilds the tokenizer without the '\u2581' the tokenizer.json writes before a text ('Hello "
                          "world' starts 'Hello', not '\u2581Hello'); save the tokenizer transformers loads "
                          "(AutoTokenizer.from_pretrained(folder).save_pretrained(folder)) to read it, or drop the key "
                          "if the model was trained with the prefix")

    tokens: list[str | None] = model["tokens"]  # type: ignore[assignment]
    model_size = len(tokens)
    in_model = [t is not None for t in tokens]  # model.vocab's ids (added tokens may fill its gaps)
    added = r.added_tokens(tokens, model["entries"])
    _check_config_added(config, tokens, where, added={tid: a for tid, a, _ in added})
    index = {t: i for i, t in enumerate(tokens) if t is not None}

    types = [int(TokenType.NORMAL)] * len(tokens)
    for i, t in enumerate(tokens):
        if t is None:  # an id no token has (tokenizers decodes it to nothing): a placeholder
            tokens[i] = _gap_token(i, index)
            types[i] = int(TokenType.UNUSED)
    # tokenizers (BPE::merge_word) tries byte fallback through the model's <0xXX> tokens only: with
    # none in the vocab, every character outside it takes the unk path (or is skipped), exactly as
    # without byte_fallback. A vocab with some of them is checked by Tokenizer.create.
    byte_fallback = model["byte_fallback"] and any(_BYTE_TOKEN.fullmatch(tokens[i]) for i in range(model_size))
    if kind == SENTENCEPIECE and byte_fallback:
        for i in range(model_size):
            if _BYTE_TOKEN.fullmatch(tokens[i]):
                types[i] = int(TokenType.BYTE)
    unk_id = None
    if model["unk_token"] is not None:
        unk_id = index.get(model["unk_token"])
        if unk_id is None:
            raise r.bad("model.unk_token", f"= {model['unk_token']!r} is not in the vocab")
        types[unk_id] = int(TokenType.UNKNOWN)

    flags: list[AddedTokenFlags] = []
    normalize_steps = norm["steps"]
    normalize = make_normalizer(normalize_steps)
    for tid, a, jp in added:
        content = tokens[tid]
        normalized = bool(a.get("normalized", not a.get("special", False)))
        if a.get("single_word", False):
            raise r.unsupported(f"{jp}.single_word", f"= true for {content!r} is not supported (no real "
                                "tokenizer.json uses it; rmlprep does not implement it)")
        if normalized:
            if norm["prepend"]:
                raise r.unsupported(f"{jp}.normalized", f"= true for {content!r} with a Prepend normalizer is not "
                                    "supported (the reference matches it after the prefix is added)")
            if kind == SENTENCEPIECE and (" " in content or _SPACE in content):
                raise r.unsupported(f"{jp}.normalized", f"= true for {content!r}, which holds a space, is not "
                                    "supported in a SentencePiece-style file")
            if normalize is not None and not normalize(content):
                raise r.unsupported(f"{jp}.normalized", f"= true for {content!r}, which normalizes to '', is not "
                                    "supported")
        types[tid] = int(TokenType.CONTROL if a.get("special", False) else TokenType.USER_DEFINED)
        f = AddedTokenFlags(
            id=tid,
            lstrip=bool(a.get("lstrip", False)),
            rstrip=bool(a.get("rstrip", False)),
            single_word=bool(a.get("single_word", False)),
            normalized=normalized,
        )
        if f.lstrip or f.rstrip or f.single_word or f.normalized:
            flags.append(f)

    _check_normalized_twins(r, added, tokens, normalize)
    lookup_types = _model_types(added, unk_id, tokens, types, in_model, model["ignore_merges"])
    pp_before, pp_after = r.post_processor(index)
    decode_chain = r.decoder()

    cfg = config or {}

    def config_id(key: str, default: int | None) -> int | None:
        if key not in cfg:
            return default
        content = _token_content(cfg[key])
        if content is None:
            return None
        if content not in index:
            raise LoaderError(f"{where}: tokenizer_config.json (or special_tokens_map.json) {key} = {content!r} "
                              "is not in the vocab")
        return index[content]

    # add_special_tokens=True adds what transformers adds for the folder (_framing: the
    # post-processor's tokens, or the config's for a class that rewrites it), and then those are
    # the bos/eos; where transformers 4.x and 5.x disagree, nothing, and encoding with special
    # tokens is refused (unset_specials)
    bos_cfg = config_id("bos_token", pp_before)
    eos_cfg = config_id("eos_token", pp_after)
    before, after, unset = _framing(cfg, pp_before, pp_after, bos_cfg, eos_cfg, tokens)
    add_bos, add_eos = before is not None, after is not None
    bos_id = before if add_bos else bos_cfg
    eos_id = after if add_eos else eos_cfg
    pad_id = None
    if "pad_token" in cfg:
        content = _token_content(cfg["pad_token"])
        pad_id = index.get(content) if content is not None else None

    eot = [index[t] for t in END_OF_TURN_TOKENS if t in index]
    if eos_id is not None and tokens[eos_id] == "<|endoftext|>":
        eot.append(eos_id)

    chat_template = cfg.get("chat_template")
    if isinstance(chat_template, list):  # [{"name": "default", "template": ...}, ...]
        chat_template = named_chat_templates(cfg).get("default")
    if not isinstance(chat_template, str):
        chat_template = None

    spec = TokenizerSpec(
        kind=kind,
        vocab=tuple(tokens),
        token_types=tuple(types),
        merges=tuple(model["merges"]),
        scores=None,
        pre_split=tuple(pre["patterns"]),
        pre_split_behaviors=tuple(pre["behaviors"]),
        normalizers=tuple(normalize_steps),
        bos_id=bos_id,
        eos_id=eos_id,
        unk_id=unk_id,
        pad_id=pad_id,
        eot_ids=tuple(sorted(set(eot))),
        add_bos=add_bos,
        add_eos=add_eos,
        byte_fallback=byte_fallback,
        ignore_merges=model["ignore_merges"],
        fuse_unk=model["fuse_unk"],
        added_token_flags=tuple(flags),
        decode_chain=decode_chain,
        parse_user_defined_always=True,  # non-special added tokens are matched with parse_special=False
        unparsed_specials="pass_over",  # tokenizers' encode_special_tokens reads special ones as text
        decode_added_byte_level=kind == BYTE_LEVEL,  # the ByteLevel decoder sees added tokens too
        unset_specials=tuple(unset),
        model_types=lookup_types,
        name=default_name,
        **kw,
    )
    return spec, chat_template


def _model_types(added, unk_id, tokens, types, in_model, ignore_merges) -> tuple[tuple[int, int], ...]:
    """The spec's ``model_types``: where an added token's type is not what tokenizers' BPE model
    sees. The model looks characters and (``ignore_merges``) whole words up in ``model.vocab``
    alone, whatever is special: a special token it holds is a symbol (NORMAL; rmlprep's
    lookups skip control tokens), a token it lacks is none (UNUSED). Only one-character tokens,
    or any with ``ignore_merges``, can be looked up, so only those are listed (other files keep
    their fingerprint).

    A trained Metaspace BPE with ``"é"`` (in model.vocab, id 165) also added as special:
    tokenizers 0.23.3 encodes ``"aéb"`` with ``encode_special_tokens`` (or ``"aÉb"`` under
    Lowercase) as ``[1741 '▁', 69 'a', 165 'é', 70 'b']``; rmlprep dropped the ``é``.
    """
    ids = {tid for tid, _, _ in added}
    if unk_id is not None:
        ids.add(unk_id)
    out = []
    for i in sorted(ids):
        if not (ignore_merges or len(tokens[i]) == 1):
            continue
        inside = i < len(in_model) and in_model[i]
        want = int(TokenType.NORMAL) if inside else int(TokenType.UNUSED)
        if inside and types[i] in (TokenType.NORMAL, TokenType.USER_DEFINED):
            continue  # what the lookups take already
        if not inside and types[i] != TokenType.USER_DEFINED and len(tokens[i]) > 1:
            continue  # a control token is no whole word to the lookups already
        out.append((i, want))
    return tuple(out)


def _check_normalized_twins(r, added, tokens, normalize) -> None:
    """Refuse two ``normalized`` added tokens (ids apart) with one normalized content: ``"Hello"``
    and ``"hello"`` under Lowercase both match ``"hello"``, and which id tokenizers writes changes
    from process to process (tokenizers 0.23.3, one file, six runs: 803 four times, 804 twice;
    its trie of normalized contents is built in hash-map order), so no id is the reference's.

    Raises:
        UnsupportedTokenizer: naming both tokens and their JSON paths.
    """
    if normalize is None:
        return  # one content, one id
    first: dict[str, tuple[int, str]] = {}
    for tid, a, jp in added:
        if not a.get("normalized", not a.get("special", False)):
            continue
        key = normalize(tokens[tid])
        other, other_jp = first.setdefault(key, (tid, jp))
        if other != tid:
            raise r.unsupported(jp, f"({tokens[tid]!r}, id {tid}) and {other_jp} ({tokens[other]!r}, id {other}) are "
                                f"both normalized and both normalize to {key!r}; tokenizers matches either one, "
                                "differently from run to run: keep one, or set normalized = false on one")


def named_chat_templates(config: Mapping[str, Any] | None) -> dict[str, str]:
    """The named templates of a ``tokenizer_config.json`` whose ``chat_template`` is a list
    (``[{"name": "default", "template": ...}, {"name": "tool_use", ...}]``, as Hermes 3 and
    Command R ship), in file order; ``{}`` when it is a string or absent. rmlprep's
    ``chat_template`` is the ``default`` entry (none without one); transformers renders with
    ``tool_use`` when tools are given, and asks for a name when there is no ``default``."""
    listed = (config or {}).get("chat_template")
    if not isinstance(listed, list):
        return {}
    return {t["name"]: t["template"] for t in listed
            if isinstance(t, Mapping) and isinstance(t.get("name"), str) and isinstance(t.get("template"), str)}


def tool_use_hint(tokenizer) -> str:
    """``""``, or, for a tokenizer whose folder has a ``tool_use`` template besides the default
    (:func:`rmlprep.folder_config.named_templates`), how to write conversations with tools with it: the format
    that reproduces it, when one does (Hermes 3's: ``hermes``)."""
    named = getattr(tokenizer, "chat_templates", None) or {}
    if "tool_use" not in named or named.get("tool_use") == getattr(tokenizer, "chat_template", None):
        return ""
    from .errors import ChatFormatError

    try:
        from .chat import detect_chat_format

        fmt = detect_chat_format(named["tool_use"])
    except ChatFormatError:
        fmt = None
    how = (f"format {fmt!r} reproduces it (fmt={fmt!r}; in a run chat.format = \"{fmt}\")" if fmt else
           "save it as chat_template.jinja and use format 'template'")
    return ("; the tokenizer's folder also has a 'tool_use' template, which transformers uses when tools are "
            f"given and rmlprep does not pick by itself: {how}")
