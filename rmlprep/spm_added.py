"""Tokens a SentencePiece folder's ``tokenizer_config.json`` adds beyond its ``tokenizer.model``.

A fine-tune of a Llama 2 or Mistral base often ships the base ``tokenizer.model`` (32,000
pieces), no tokenizer.json, and a ``tokenizer_config.json`` whose ``added_tokens_decoder`` adds
its chat markers past the pieces (``<|im_end|>`` at 32000, ``<|im_start|>`` at 32001, OpenHermes
style). transformers builds a Hugging Face tokenizer from the ``.model`` (its ``LlamaConverter``)
and adds those entries to it; its ``added_tokens_decoder`` ids are then the ids the model's
embeddings were trained with, so rmlprep reads such a folder as transformers does:

- the added tokens take the ids after the pieces, in the order of the config's ids (``tokenizers``
  ``add_tokens`` gives the next free id, whatever the config says): the config's ids must be
  exactly ``len(pieces), len(pieces) + 1, ...``; an id past a gap (32005 with nothing at
  32000) would get another id (32000) than the model was trained with, and is refused;
- ``special: true`` entries, and those the config names as a special token (``eos_token``,
  ``additional_special_tokens``...: transformers makes them special), are control tokens (cut
  from text only with ``parse_special=True``, read as text otherwise, as
  ``split_special_tokens=True``), the others are cut from any text;
  ``lstrip`` / ``rstrip`` swallow the whitespace beside them; ``normalized: true`` and
  ``single_word: true`` are refused (transformers 4.x matches a normalized one after its Prepend
  normalizer has changed the text, so ``<|im_end|>`` is not found after a space: not reproduced);
- the text between added tokens (the model's ``<s>``, ``</s>`` included) is encoded as the
  converted tokenizer does with ``"legacy": true`` in the config: each piece of text between them
  gets its own ``"▁"`` prefix (``Prepend("▁")``, ``"<|im_start|>user"`` -> ``<|im_start|>``,
  ``▁user``); without added tokens in the text that is sentencepiece's own encoding (and the ids
  of the folder's ``.model`` alone);
- decoding follows the converted tokenizer's decoder (``▁`` -> space, byte fallback, one leading
  space stripped); added tokens decode to their text.

Refused: ``"legacy": false`` in a Llama-class folder's config, added tokens or not (both
transformers versions then prefix only the start of the text, and not a text that starts with
a space: ``" hello"`` -> ``▁hello`` where sentencepiece writes ``▁``, ``▁hello``, and ``"<s>hi"``
-> ``<s>``, ``hi``; rmlprep reads a ``.model`` as sentencepiece encodes it, so such a folder gave
other ids than transformers without a word; the tokenizer.json transformers saves for it reads
exactly); added tokens with a config without ``"legacy"`` (transformers 4.x takes it as true,
5.x as false, and they encode the text after an added token differently: ``▁user`` /
``user``), a ``tokenizer_class`` other than Llama's (another converter), an added token whose
text is a piece of the model (``tokenizers`` gives it the piece's id). With ``"legacy": true``
transformers 5.x differs from 4.x where a text between added tokens starts with a space (5.x's
Metaspace prepends ``"▁"`` only when it is missing: ``"<|im_end|> world"`` -> ``▁world``, 4.x and
sentencepiece ``▁``, ``▁world``); rmlprep follows 4.x there, which such folders were saved with.

Source: ``fixtures/spm_added_tokens.json`` (``tools/make_spm_added_fixtures.py``:
transformers 4.57.1 and 5.24.0 ``AutoTokenizer`` on the real Llama 2 and Mistral ``.model``);
transformers ``convert_slow_tokenizer.py`` (``LlamaConverter``: ``Prepend``/``Replace``
normalizer when legacy, ``Metaspace(prepend_scheme="first")`` otherwise; its decoder),
``tokenization_utils_fast.py`` (``added_tokens_decoder`` sorted by id, then ``add_tokens``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import LoaderError, UnsupportedTokenizer
from .spec import AddedTokenFlags, TokenizerSpec, TokenType

__all__ = ["with_config_added"]

#: transformers' LlamaConverter decoder (``add_prefix_space`` true), as :mod:`rmlprep.hf_decode` runs it.
_DECODE_CHAIN = (("Replace", "\u2581", " "), ("ByteFallback",), ("Fuse",), ("Strip", " ", 1, 0))
#: the config keys whose token transformers counts among ``all_special_tokens``
_NAMED = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_LLAMA_CLASSES = ("LlamaTokenizer", "LlamaTokenizerFast")
#: hf.py's END_OF_TURN_TOKENS, repeated to keep this module free of hf's imports
_TURN_ENDS = ("<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>")


def with_config_added(spec: TokenizerSpec, cfg: Mapping[str, Any], p: Path) -> TokenizerSpec:
    """``spec`` (a ``.model``'s) with the tokens ``cfg``'s ``added_tokens_decoder`` adds past its
    pieces, read as transformers reads the folder (module docstring); ``spec`` itself when the
    config adds none (the entries at the model's ids are checked against its pieces).

    Worked example (Llama 2's ``.model``: 32,000 pieces, ``▁user`` 1404, ``<0x0A>`` 13): entries
    ``{"32000": <|im_end|>, "32001": <|im_start|>}`` (special) with ``"legacy": true`` give
    ``"<|im_start|>user\\n"`` -> ``[32001, 1404, 13]``, as transformers 4.57.1 and 5.24.0.

    Raises:
        LoaderError: an entry whose id or text disagrees with the model (another model's config),
            ids past the pieces with a gap, an added token that is a piece, a config without
            ``legacy`` (with the key to set).
        UnsupportedTokenizer: ``"legacy": false`` (Llama classes; with or without added tokens),
            added tokens with a class other than Llama's, ``normalized`` or ``single_word``
            entries, ``add_prefix_space: false``.
    """
    from .hf import _check_config_added, _token_content

    write = ("write a tokenizer.json beside it (transformers: AutoTokenizer.from_pretrained(folder)"
             ".save_pretrained(folder)) and load that")
    if cfg.get("legacy") is False and cfg.get("tokenizer_class") in _LLAMA_CLASSES:
        raise UnsupportedTokenizer(f"{p.parent}: tokenizer_config.json sets \"legacy\": false for {p.name}: "
                                   "transformers then writes no '▁' before a text that starts with a space, nor "
                                   "after a special token (' hello' -> '▁hello', sentencepiece '▁', '▁hello'; "
                                   "'<s>hi' -> '<s>', 'hi'), which rmlprep does not reproduce for a .model; "
                                   f"{write} (rmlprep reads that file exactly)")
    n = len(spec.vocab)
    entries = cfg.get("added_tokens_decoder")
    past = [] if not isinstance(entries, Mapping) else [
        k for k in entries if isinstance(k, str) and k.isascii() and k.isdigit() and int(k) >= n]
    beyond = {int(k): entries[k] for k in past}
    # the entries at the model's ids (and malformed ones) must be its pieces: else another model's config
    own = cfg if not past else {"added_tokens_decoder": {k: e for k, e in entries.items() if k not in past}}
    _check_config_added(own, spec.vocab, str(p), source=p.name)
    if not beyond:
        return spec
    folder = p.parent
    for tid, e in beyond.items():
        if _token_content(e) is None:
            raise LoaderError(f"{folder}: tokenizer_config.json added_tokens_decoder entry '{tid}' is not an id with "
                              "a {\"content\": ...} object")
    first = min(beyond)
    where = f"{folder}: tokenizer_config.json added_tokens_decoder adds id {first} {_token_content(beyond[first])!r}"
    want = list(range(n, n + len(beyond)))
    if sorted(beyond) != want:
        gap = next(i for i, j in zip(want, sorted(beyond)) if i != j)
        raise LoaderError(f"{folder}: tokenizer_config.json added_tokens_decoder adds ids {sorted(beyond)[:4]}"
                          f"{'...' if len(beyond) > 4 else ''} past the {n} pieces of {p.name}, with no token at id "
                          f"{gap}: transformers gives added tokens the next free ids ({want[0]}..{want[-1]}), not "
                          "the config's, so the model's embeddings would be read at other ids; take the config and "
                          "tokenizer files from the same model (or one saved with its tokenizer.json)")
    cls = cfg.get("tokenizer_class")
    if cls not in _LLAMA_CLASSES:
        raise UnsupportedTokenizer(f"{where} past the {n} pieces of {p.name}, and tokenizer_class is {cls!r}: rmlprep "
                                   f"reads such added tokens only for {' / '.join(_LLAMA_CLASSES)} (transformers "
                                   "converts each class its own way); write a tokenizer.json beside it (transformers: "
                                   "AutoTokenizer.from_pretrained(folder).save_pretrained(folder)) and load that")
    legacy = cfg.get("legacy")
    if legacy is None:
        raise LoaderError(f"{where} past the {n} pieces of {p.name}, and the config has no \"legacy\" key: "
                          "transformers 4.x reads that as true and 5.x as false, and they encode the text after an "
                          "added token differently ('<|im_start|>user' -> '▁user' or 'user'); set \"legacy\": true "
                          "in tokenizer_config.json if the model was trained with transformers 4.x (its default "
                          "then), or load the tokenizer.json of the model")
    if legacy is not True:
        raise UnsupportedTokenizer(f"{where} past the {n} pieces of {p.name}, with \"legacy\": {legacy!r}, which "
                                   f"rmlprep does not reproduce for a .model; {write}")
    if cfg.get("add_prefix_space") not in (None, True):
        raise UnsupportedTokenizer(f"{where} past the {n} pieces of {p.name}, with \"add_prefix_space\": "
                                   f"{cfg['add_prefix_space']!r}, which rmlprep does not reproduce for a .model; "
                                   f"{write}")
    tokens = list(spec.vocab) + [None] * len(beyond)
    for tid, e in beyond.items():
        tokens[tid] = _token_content(e)
    pieces = {t: i for i, t in enumerate(spec.vocab)}
    types = list(spec.token_types) + [0] * len(beyond)
    flags = {a.id: a for a in spec.added_token_flags}
    named = {_token_content(cfg.get(k)) for k in _NAMED} | {_token_content(t) for t in
                                                             cfg.get("additional_special_tokens") or ()}
    for key, e in entries.items():
        tid, content = int(key), tokens[int(key)]
        if tid >= n and (content in pieces or tokens.index(content) != tid):
            other = pieces.get(content, tokens.index(content))
            raise LoaderError(f"{folder}: tokenizer_config.json added_tokens_decoder adds id {tid} {content!r}, "
                              f"which is already id {other}: transformers gives it id {other}; the config is "
                              "another model's, or was edited")
        special = bool(e.get("special", False)) or content in named  # transformers: a named token is special
        for flag in ("single_word", "normalized"):
            if e.get(flag, flag == "normalized" and not special):
                raise UnsupportedTokenizer(f"{folder}: tokenizer_config.json added_tokens_decoder id {tid} {content!r}"
                                           f" has {flag} true (as default for a token that is not special), which "
                                           f"rmlprep does not reproduce beside {p.name}; write a tokenizer.json")
        if types[tid] != TokenType.UNKNOWN:
            types[tid] = int(TokenType.CONTROL if special else TokenType.USER_DEFINED)
        lstrip, rstrip = bool(e.get("lstrip", False)), bool(e.get("rstrip", False))
        flags.pop(tid, None)
        if lstrip or rstrip:
            flags[tid] = AddedTokenFlags(id=tid, lstrip=lstrip, rstrip=rstrip)
    eot = sorted(set(spec.eot_ids) | {i for i in range(n, len(tokens)) if tokens[i] in _TURN_ENDS})
    return dataclasses.replace(
        spec, vocab=tuple(tokens), token_types=tuple(types), scores=tuple(spec.scores or ()) + (0.0,) * len(beyond),
        added_token_flags=tuple(flags[i] for i in sorted(flags)), eot_ids=tuple(eot),
        prefix_scheme="always", prefix_if_missing=False,  # Prepend("▁") on each text between added tokens
        unparsed_specials="pass_over", decode_chain=_DECODE_CHAIN, decode_strip_prefix="none")
