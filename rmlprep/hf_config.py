"""What a model folder's ``tokenizer_config.json`` changes of its ``tokenizer.json``, as
transformers reads the pair: the ``added_tokens_decoder`` must describe the file's added tokens
(:func:`_check_config_added`), a config's ``add_prefix_space`` sets a top-level ByteLevel's for
the classes that pass it on (:func:`_byte_level_prefix`), and ``add_bos_token`` /
``add_eos_token`` frame a text only for the classes that rebuild the post-processor from them
(:func:`_framing`). Used by :func:`rmlprep.hf.spec_from_tokenizer_json`.

Source: transformers 4.57.1 and 5.24.0 (``fixtures/framing.json``,
``tools/make_framing_fixtures.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .errors import LoaderError

__all__: list[str] = []


def _token_content(value: Any) -> str | None:
    """tokenizer_config.json spells special tokens as a string or {"content": ...}."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _check_config_added(config: Mapping[str, Any] | None, tokens: Sequence[str | None], where: str,
                        source: str = "tokenizer.json", added: Mapping[int, Mapping[str, Any]] | None = None) -> None:
    """Refuse a ``tokenizer_config.json`` whose ``added_tokens_decoder`` does not describe this
    tokenizer.json: an id it names that the tokenizer.json lacks, or holds with other content
    (``tokens``: the vocab with the added tokens at the ids tokenizers gives them, None for a gap).
    ``source`` names another file (``tokenizer.model``: a SentencePiece folder, ``tokens`` its
    pieces): :func:`rmlprep.spm_added.with_config_added` passes only the entries at the pieces'
    ids here, and reads those past them itself (tokens transformers adds from the config).

    transformers' ``from_pretrained`` adds the config's entries to the tokenizer: with a
    tokenizer.json from another model (Qwen2.5's beside Qwen3's config) it would encode
    ``<think>`` as one id, while this tokenizer.json alone splits it into text ids. Only the id
    and content are compared, and with ``added`` (the tokenizer.json's added tokens by id) the
    stripping flags an entry gives (``lstrip``, ``rstrip``, ``single_word``): transformers 4.57.1
    re-adds an entry whose flags differ, and the config's win (a config
    ``"rstrip": true`` on Qwen2.5's ``<|im_end|>`` makes ``"a<|im_end|>  b"`` ``[64, 151645,
    65]``), while 5.24.0 keeps the tokenizer.json's (``[64, 151645, 220, 293]``); ``special``
    and ``normalized`` gave the same ids and decodes in both. An entry for
    an id of the model vocab with the same content agrees (every real folder's config under test
    matches its tokenizer.json this way, flags included).

    Raises:
        LoaderError: one line naming the folder, the id and both contents (and how many other
            ids disagree), or the id, the flag and both values; or an ``added_tokens_decoder``
            that is not ``{"id": {"content": ...}}``.
    """
    decoder = (config or {}).get("added_tokens_decoder")
    if decoder is None:
        return
    folder = str(Path(where).parent) if where != "tokenizer.json" else "tokenizer.json"
    if not isinstance(decoder, Mapping):
        raise LoaderError(f"{folder}: tokenizer_config.json added_tokens_decoder is not an object")
    bad: list[tuple[int, str, str | None]] = []
    flag_bad: list[tuple[int, str, str, bool]] = []
    for key, entry in decoder.items():
        content = _token_content(entry)
        if not (isinstance(key, str) and key.isascii() and key.isdigit()) or content is None:
            raise LoaderError(f"{folder}: tokenizer_config.json added_tokens_decoder entry {key!r} is not "
                              "an id with a {\"content\": ...} object")
        tid = int(key)
        have = tokens[tid] if tid < len(tokens) else None
        if have != content:
            bad.append((tid, content, have))
        elif added is not None and tid in added and isinstance(entry, Mapping):
            own = added[tid]
            for flag in ("lstrip", "rstrip", "single_word"):
                if flag in entry and bool(entry[flag]) != bool(own.get(flag, False)):
                    flag_bad.append((tid, content, flag, bool(entry[flag])))
    if flag_bad and not bad:
        tid, content, flag, value = min(flag_bad)
        more = f" (and {len(flag_bad) - 1} more)" if len(flag_bad) > 1 else ""
        raise LoaderError(f"{folder}: tokenizer_config.json added_tokens_decoder gives id {tid} {content!r} "
                          f"{flag} = {str(value).lower()}, tokenizer.json {str(not value).lower()}{more}: transformers "
                          "4.57.1 takes the config's flags and 5.24.0 the tokenizer.json's, so text beside the token "
                          "encodes otherwise in each; make the two files agree (the flags the model was trained with)")
    if bad:
        tid, content, have = min(bad)
        more = f" (and {len(bad) - 1} more ids)" if len(bad) > 1 else ""
        held = f"has {have!r} there" if have is not None else "has no such id"
        raise LoaderError(f"{folder}: tokenizer_config.json added_tokens_decoder gives id {tid} {content!r}, but "
                          f"{source} {held}{more}; the two files are from different models (or versions): "
                          "take both from the same model")


#: transformers' tokenizer classes (less ``Tokenizer`` and ``Fast``) that set a top-level
#: ByteLevel pre-tokenizer's ``add_prefix_space`` from the config's key (False when it is left
#: out) in 4.57.1 and 5.24.0 alike (``GPT2TokenizerFast``, ``Qwen2TokenizerFast``).
_PREFIX_FROM_CONFIG = frozenset({"GPT2", "Qwen2"})


def _byte_level_prefix(bl: Mapping[str, Any], config: Mapping[str, Any] | None, where: str) -> bool:
    """``add_prefix_space`` of a tokenizer.json's ByteLevel pre-tokenizer as transformers loads
    the folder. A ByteLevel inside a Sequence (Llama 3, Qwen2.5, GPT-4o) and a file without a
    ``tokenizer_config.json`` or a class keep the file's value (tokenizers; 5.24.0). A top-level
    ByteLevel is rewritten from the config's ``add_prefix_space`` (default False): by both
    versions for the classes of :data:`_PREFIX_FROM_CONFIG`; for another class 4.57.1 rewrites it
    (``PreTrainedTokenizerFast.__init__``) and 5.24.0 keeps the file's (recorded for
    PreTrainedTokenizerFast), so a disagreement is refused. Worked example (GPT-2's file with
    ``"add_prefix_space": true``, a GPT2TokenizerFast config without the key): ``"Hello world"``
    is ``[15496, 995]`` in both versions, not tokenizers' ``[18435, 995]``.

    Raises:
        LoaderError: a class other than those with a config value that differs from the file's.
    """
    own = bool(bl["add_prefix_space"])
    cls = (config or {}).get("tokenizer_class")
    if bl["path"] != "pre_tokenizer" or not isinstance(cls, str):
        return own
    value = config.get("add_prefix_space", False)
    if value is None or bool(value) == own:  # null: transformers' rewrite fails and keeps the file's
        return own
    if cls.removesuffix("Fast").removesuffix("Tokenizer") in _PREFIX_FROM_CONFIG:
        return bool(value)
    folder = str(Path(where).parent) if where != "tokenizer.json" else "tokenizer.json"
    said = f"sets add_prefix_space = {str(bool(value)).lower()}" if "add_prefix_space" in config else \
        "leaves add_prefix_space out (false)"
    raise LoaderError(f"{folder}: tokenizer.json's ByteLevel pre_tokenizer has add_prefix_space = {str(own).lower()} "
                      f"and tokenizer_config.json {said}: for {cls} transformers 4.57.1 takes the config's, 5.24.0 the "
                      f"file's, so a text's first word encodes otherwise in each; set \"add_prefix_space\": "
                      f"{str(own).lower()} in tokenizer_config.json (or edit the file) so the two agree")


#: transformers' tokenizer classes (as ``tokenizer_class`` names them, less ``Tokenizer`` and
#: ``Fast``) that rebuild a tokenizer.json's post-processor from ``add_bos_token`` /
#: ``add_eos_token``, with the defaults they take when the config leaves a key out: 4.57.1's
#: ``update_post_processor`` (``LlamaTokenizerFast``, ``CodeLlamaTokenizerFast``,
#: ``GemmaTokenizerFast``, ``CohereTokenizerFast``, ``GPTNeoXTokenizerFast``). Every other class
#: (``GPT2TokenizerFast``, ``Qwen2TokenizerFast``, ``PreTrainedTokenizerFast``...) keeps the
#: file's post-processor and ignores both keys, in 4.57.1 and 5.24.0 alike.
_REWRITES_4X: dict[str, tuple[bool, bool]] = {
    "Llama": (True, False), "CodeLlama": (True, False), "Gemma": (True, False), "Cohere": (True, False),
    "GPTNeoX": (False, False),
}
#: transformers 5.24.0: of those classes, the ones that frame with their defaults whatever the
#: config and the file say; the others (Llama, Gemma, Cohere) keep the file's post-processor.
_FIXED_5X: dict[str, tuple[bool, bool]] = {"CodeLlama": (True, False), "GPTNeoX": (False, False)}


def _framing(cfg: Mapping[str, Any], pp_before: int | None, pp_after: int | None, bos_cfg: int | None,
             eos_cfg: int | None, tokens: Sequence[str | None]) -> tuple[int | None, int | None, list[str]]:
    """The ids ``add_special_tokens=True`` puts before and after a text of a tokenizer.json
    folder, as transformers' ``tokenizer(text)`` does, and the messages for a side where
    transformers 4.57.1 and 5.24.0 disagree (that side then adds nothing:
    ``TokenizerSpec.unset_specials`` refuses encoding with special tokens).

    Worked example (recorded with both versions on Mistral 7B's tokenizer.json, whose
    post-processor adds ``<s>``): a config ``{"tokenizer_class": "Qwen2TokenizerFast",
    "add_eos_token": true}`` gets ``<s>`` and no ``</s>`` in both (the key is ignored; rmlprep
    added ``</s>``); with ``"LlamaTokenizerFast"`` and ``"add_bos_token": false`` 4.57.1 adds
    nothing, 5.24.0 ``<s>``: refused.
    """
    cls = cfg.get("tokenizer_class")
    family = cls.removesuffix("Fast").removesuffix("Tokenizer") if isinstance(cls, str) else None
    if family not in _REWRITES_4X:
        return pp_before, pp_after, []
    defaults = _REWRITES_4X[family]
    v4 = (bos_cfg if bool(cfg.get("add_bos_token", defaults[0])) else None,
          eos_cfg if bool(cfg.get("add_eos_token", defaults[1])) else None)
    fixed = _FIXED_5X.get(family)
    v5 = (pp_before, pp_after) if fixed is None else (bos_cfg if fixed[0] else None, eos_cfg if fixed[1] else None)
    out: list[int | None] = []
    unset: list[str] = []
    for i, (key, a, b) in enumerate((("add_bos_token", v4[0], v5[0]), ("add_eos_token", v4[1], v5[1]))):
        if a == b:
            out.append(a)
            continue
        out.append(None)

        def says(t: int | None) -> str:
            return f"adds {tokens[t]!r} (id {t})" if t is not None else "adds none"

        why4 = f"as tokenizer_config.json's {key} says" if key in cfg else f"{cls}'s default, the config leaving {key} out"
        why5 = ("whatever the config and tokenizer.json say" if fixed is not None
                else "as tokenizer.json's post_processor says, ignoring the config")
        field = key.removesuffix("_token")
        unset.append(f"{key}: transformers 4.57.1 and 5.24.0 disagree on this {cls} folder: 4.x {says(a)} ({why4}), "
                     f"5.x {says(b)} ({why5}); make tokenizer.json's post_processor and {key} agree (or pass {field}= "
                     "to load_tokenizer)")
    return out[0], out[1], unset
