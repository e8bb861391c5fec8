"""What a model folder's ``tokenizer_config.json`` (and ``special_tokens_map.json``) say of the
special tokens of a file that carries no such settings itself: a SentencePiece ``.model``
(:func:`_with_config_specials`: bos/eos/pad by name, ``add_bos_token`` / ``add_eos_token`` with
transformers' per-class defaults) and a tiktoken rank file saved as ``tokenizer.model``
(:func:`_tiktoken_config_specials`). Used by :func:`rmlprep.load.load_spec`.

Source: transformers 4.57.1 and 5.24.0 ``AutoTokenizer`` (``fixtures/bos_defaults.json``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import LoaderError

__all__ = ["SPM_CLASS_DEFAULTS"]


def _named_ids(spec, cfg: dict[str, Any], keys: tuple[tuple[str, str], ...],
               not_found: Callable[[str, str], str]) -> dict[str, Any]:
    """``{field: id}`` for each ``(key, field)`` of ``keys`` the config sets: the id of the token it
    names (a string, or a mapping's ``content``) in ``spec.vocab``, or None for a null.

    Raises:
        LoaderError: ``not_found(key, name)`` for a name the vocab does not hold.
    """
    from .hf_config import _token_content

    index = {t: i for i, t in enumerate(spec.vocab)}
    changes: dict[str, Any] = {}
    for key, field in keys:
        if key not in cfg:
            continue
        content = _token_content(cfg[key])
        if content is None:
            changes[field] = None
        elif content in index:
            changes[field] = index[content]
        else:
            raise LoaderError(not_found(key, content))
    return changes


def _tiktoken_config_specials(spec, cfg: dict[str, Any], p: Path):
    """A tiktoken rank file's spec with the ``bos_token`` / ``eos_token`` of the
    ``tokenizer_config.json`` beside it (Llama 3's ``original/``, Kimi K2: a ``tokenizer.model``
    rank file and a config). transformers loads such a folder through its tiktoken converter and
    takes both names from the config (4.57.1 and 5.24.0: Llama 3's rank file beside a config
    saying ``"eos_token": "<|eot_id|>"`` has eos 128009); rmlprep kept its encoding's own
    (``<|end_of_text|>``, 128001), so ``pack.eos`` appended another token than the folder names.
    Neither adds them around a text (``add_special_tokens`` adds nothing, as before).

    Raises:
        LoaderError: a name the config gives that is not a token of the file's encoding.
    """
    changes = _named_ids(spec, cfg, (("bos_token", "bos_id"), ("eos_token", "eos_id")), lambda key, content: (
        f"{p.parent / 'tokenizer_config.json'}: {key} = {content!r} is not a token of {p.name} "
        f"({spec.name or 'its encoding'}); the two files are from different models"))
    if changes.get("bos_id", spec.bos_id) is None and spec.add_bos:
        changes["add_bos"] = False
    if changes.get("eos_id", spec.eos_id) is None and spec.add_eos:
        changes["add_eos"] = False
    return spec.replace(**changes) if changes else spec


#: transformers' defaults for ``add_bos_token`` / ``add_eos_token`` of a SentencePiece folder
#: (``tokenizer.model``, no tokenizer.json) whose ``tokenizer_config.json`` names the class but
#: not the key, as recorded by ``tools/make_bos_defaults_fixtures.py`` (``fixtures/bos_defaults.json``)
#: with transformers 4.57.1 and 5.24.0: ``True``/``False`` where both add (or not) the token,
#: ``None`` where they disagree. 4.x's LlamaTokenizerFast and GemmaTokenizerFast default
#: ``add_bos_token=True`` (``models/llama/tokenization_llama_fast.py``, ``.../gemma/...``); 5.x's
#: LlamaTokenizer and GemmaTokenizer take ``kwargs.get("add_bos_token", False)``
#: (``tokenization_utils_tokenizers.py``, ``TokenizersBackend.__init__``) and add none; CodeLlama
#: keeps True in both; T5 appends its EOS in both (4.x as T5TokenizerFast's template).
SPM_CLASS_DEFAULTS: dict[str, tuple[bool | None, bool | None]] = {
    "LlamaTokenizer": (None, False), "LlamaTokenizerFast": (None, False),
    "GemmaTokenizer": (None, False), "GemmaTokenizerFast": (None, False),
    "CodeLlamaTokenizer": (True, False), "CodeLlamaTokenizerFast": (True, False),
    "T5Tokenizer": (False, True), "T5TokenizerFast": (False, True),
}


def _with_config_specials(spec, cfg: dict[str, Any], p: Path, given: frozenset[str] = frozenset()):
    """A SentencePiece ``.model``'s spec with what the folder's ``tokenizer_config.json`` (and
    ``special_tokens_map.json``) say of its special tokens: ``bos_token``, ``eos_token`` and
    ``pad_token`` by name (the unknown piece stays the model's), and ``add_bos_token`` /
    ``add_eos_token`` (transformers' slow and fast Llama/Gemma tokenizers take both from it).

    A key the config leaves out gets transformers' default for its ``tokenizer_class``
    (:data:`SPM_CLASS_DEFAULTS`), not sentencepiece's (which adds neither): such a folder is
    one transformers loads, and a Llama one trained without its BOS would be silently wrong.
    Where the class is not in the table (or absent), or transformers 4.x and 5.x disagree
    (Llama, Gemma: 4.x adds the BOS, 5.x does not), the key goes into ``unset_specials`` (the flag
    stays False) unless the caller sets the field (``given``: ``load_tokenizer(..., add_bos=...)``):
    encoding with special tokens is refused naming the key (``TokenizerSpec.check_adds``), encoding
    without works (a run framing documents with ``pack.bos``/``pack.eos`` never reads the flag).
    A ``.model`` with no config beside it keeps sentencepiece's defaults.

    Source: ``fixtures/bos_defaults.json`` (transformers 4.57.1 and 5.24.0 ``AutoTokenizer``).

    Raises:
        LoaderError: a named token not in the model, an added_tokens_decoder entry it cannot hold
            (spm_added); ``"add_prefix_space": false`` (transformers then writes no dummy prefix
            before a text, which rmlprep does not reproduce for a ``.model``).
    """
    import dataclasses

    from .spm_added import with_config_added

    if cfg.get("add_prefix_space") is False and spec.add_prefix_space:
        # transformers (4.57.1 and 5.24.0, LlamaTokenizer on Llama 2's .model) then writes no
        # dummy prefix: "Hello world" is [10994 'Hello', 3186], sentencepiece's [15043 '▁Hello', 3186]
        raise LoaderError(f"{p.parent}: tokenizer_config.json sets add_prefix_space = false, so transformers writes no "
                          f"'\u2581' before a text ('Hello world' starts 'Hello', not '\u2581Hello' as {p.name} read "
                          "by sentencepiece does); rmlprep reads the .model as sentencepiece does: load the model's "
                          "tokenizer.json (AutoTokenizer.from_pretrained(folder).save_pretrained(folder) writes one), "
                          "or drop the key if the model was trained with the prefix")
    spec = with_config_added(spec, cfg, p)  # another model's config refused; tokens added past the pieces
    changes = _named_ids(spec, cfg, (("bos_token", "bos_id"), ("eos_token", "eos_id"), ("pad_token", "pad_id")),
                         lambda key, content: (f"{p.parent}: tokenizer_config.json (or special_tokens_map.json) "
                                               f"{key} = {content!r} is not a piece of {p.name}"))
    cls = cfg.get("tokenizer_class")
    defaults = SPM_CLASS_DEFAULTS.get(cls) if isinstance(cls, str) else None
    unset: list[str] = []
    for i, (key, field, tid) in enumerate((("add_bos_token", "add_bos", changes.get("bos_id", spec.bos_id)),
                                           ("add_eos_token", "add_eos", changes.get("eos_id", spec.eos_id)))):
        if key in cfg:
            value = bool(cfg[key])
        elif field in given:
            continue
        elif defaults is not None and defaults[i] is not None:
            value = defaults[i]
        else:
            why = (f"transformers 4.x and 5.x disagree on {cls}'s default (4.x adds the "
                   f"{'BOS' if i == 0 else 'EOS'}, 5.x does not)" if defaults is not None else
                   f"rmlprep does not know the default of tokenizer_class {cls!r}" if isinstance(cls, str) else
                   "it names no tokenizer_class whose default rmlprep knows")
            unset.append(f"{key}: tokenizer_config.json does not set it for {p.name}, and {why}; "
                         f'set "{key}": true or false there (or pass {field}= to load_tokenizer)')
            value = False
        changes[field] = value and tid is not None  # transformers drops a flag whose token is None
    if unset:
        changes["unset_specials"] = tuple(unset)
    return dataclasses.replace(spec, **changes) if changes else spec
