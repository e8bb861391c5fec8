"""What a model folder's ``tokenizer_config.json`` holds for its chat template, read apart from
the load cache (which keeps only the spec and the template in use): the named templates, and
the special-token variables transformers passes to a template besides ``bos_token`` /
``eos_token``; and the ``chat_template.jinja`` that takes the config's template's place
(:func:`template_file`, read by the load); and its ``split_special_tokens`` (:func:`split_special_tokens`).

Source: transformers 4.57.1 ``tokenization_utils_base.py``: ``apply_chat_template`` renders with
``{**self.special_tokens_map, **kwargs}``; ``special_tokens_map`` holds each attribute of
``SPECIAL_TOKENS_ATTRIBUTES`` (``unk_token``, ``sep_token``, ``pad_token``, ``cls_token``,
``mask_token``, ``additional_special_tokens``, and the keys of a config's
``extra_special_tokens``) whose value is truthy; ``from_pretrained`` reads them from the config,
and from ``special_tokens_map.json`` only when the config has no ``added_tokens_decoder``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .errors import LoaderError

__all__ = ["ADDITIONAL_TEMPLATES_DIR", "CHAT_TEMPLATE_FILE", "named_templates", "template_tokens", "template_file",
           "split_special_tokens"]


#: A template that may read one of them (any ``*_token`` name but bos/eos): only then is the
#: config parsed again.
_READS = re.compile(r"\b(?!bos_token\b|eos_token\b)\w+_token\b|\badditional_special_tokens\b")


def named_templates(config: Path, default: str | None = None) -> dict[str, str]:
    """The named templates of the folder of ``config`` (its tokenizer_config.json): the config's
    ``chat_template`` when it is a list (:func:`rmlprep.hf.named_chat_templates`), and the files
    ``additional_chat_templates/<name>.jinja`` beside it, each named by its stem (transformers'
    layout since 4.52: ``save_pretrained`` writes the default to ``chat_template.jinja`` and
    every other named template there); with such files, ``default`` (the template the load
    took) is the ``default`` entry. ``{}`` when the folder names none.

    Raises:
        LoaderError: an ``additional_chat_templates`` file that is not UTF-8 text.
    """
    from .hf import named_chat_templates, read_tokenizer_config

    named: dict[str, str] = {}
    try:
        if config.is_file() and re.search(rb'"chat_template"\s*:\s*\[', config.read_bytes()):
            named = named_chat_templates(read_tokenizer_config(config))
    except (LoaderError, OSError):
        named = {}
    extra = config.parent / ADDITIONAL_TEMPLATES_DIR
    files = sorted(extra.glob("*.jinja")) if extra.is_dir() else []
    if files:
        named = {**named, **({"default": default} if default else {})}
        for f in files:
            try:
                named[f.stem] = f.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise LoaderError(f"{f}: cannot read the chat template ({e})") from None
    return named


def template_tokens(folder: Path, template: str | None) -> dict[str, Any] | None:
    """The special-token variables transformers would pass to ``template`` for the tokenizer of
    ``folder``, besides ``bos_token`` / ``eos_token``: ``{name: value}``, value a string, a list
    of strings (``additional_special_tokens``) or None (not passed: the template sees it
    undefined). A standard name (:data:`rmlprep.chat.render.STANDARD_TOKENS`) the config does not set gets the
    default of the config's ``tokenizer_class`` (``Qwen2TokenizerFast``:
    ``unk_token="<|endoftext|>"``; the generated table
    ``rmlprep/_template_token_defaults.py``, from transformers 4.57.1), and is left out
    (unknown) for a class not in the table: a template that reads an unknown name is refused
    (:func:`rmlprep.chat.template.refuse_unpassed_tokens`).

    Returns:
        None when the template reads no such variable (nothing is read) or the folder has no
        ``tokenizer_config.json``.
    Raises:
        LoaderError: a config that is not valid JSON.
    """
    if not template or "_token" not in template.replace("bos_token", "").replace("eos_token", ""):
        return None  # the common case, three scans of the text (the regex alone took ~0.7 ms on 16 kB)
    if not _READS.search(template):
        return None
    from ._template_token_defaults import CLASS_TOKEN_DEFAULTS
    from .chat.render import STANDARD_TOKENS
    from .hf import _token_content, read_tokenizer_config

    cfg = read_tokenizer_config(folder / "tokenizer_config.json")
    if cfg is None:
        return None
    cfg = dict(cfg)
    legacy = read_tokenizer_config(folder / "special_tokens_map.json") if "added_tokens_decoder" not in cfg else None
    for k, v in (legacy or {}).items():
        if k == "additional_special_tokens" and isinstance(v, list):  # appended to the config's
            have = list(cfg.get(k) or [])
            v = have + [t for t in v if _token_content(t) not in {_token_content(h) for h in have}]
        cfg[k] = v
    cls = cfg.get("tokenizer_class")
    defaults = CLASS_TOKEN_DEFAULTS.get(cls) if isinstance(cls, str) else None
    out: dict[str, Any] = {}
    for k in STANDARD_TOKENS:
        if k not in cfg:
            if defaults is not None:
                out[k] = defaults[k]
        elif k == "additional_special_tokens":
            out[k] = [c for c in map(_token_content, cfg[k] or ()) if c is not None] or None
        else:
            out[k] = _token_content(cfg[k]) or None
    extra = cfg.get("extra_special_tokens")
    for k, v in (extra.items() if isinstance(extra, dict) else ()):
        out[k] = _token_content(v) or None
    return out


#: The chat template file a model folder may hold beside its tokenizer_config.json.
CHAT_TEMPLATE_FILE = "chat_template.jinja"
#: The folder of a model's other named templates (``tool_use.jinja``...), beside it.
ADDITIONAL_TEMPLATES_DIR = "additional_chat_templates"


def template_file(folder: Path, template: str | None) -> str | None:
    """The chat template in ``folder/chat_template.jinja`` when there is one, else ``template``
    (the ``tokenizer_config.json``'s). transformers saves a model's template to that file since
    4.47 and, loading, takes it over the config's ``chat_template`` (an older copy may stay
    there): reading the config's alone would prove, detect and render a template the model
    no longer uses.

    Raises:
        LoaderError: the file is not UTF-8 text.
    """
    f = folder / CHAT_TEMPLATE_FILE
    if not f.is_file():
        return template
    try:
        return f.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise LoaderError(f"{f}: cannot read the chat template ({e})") from None


def split_special_tokens(config: Path) -> bool:
    """The ``split_special_tokens`` of ``config`` (a folder's tokenizer_config.json): True makes
    ``parse_special=False`` the default of :meth:`~rmlprep.Tokenizer.encode` and the batch
    encoders (special-token text encoded as text, non-special added tokens still one id), as
    transformers' ``tokenizer(text)`` and ``encode`` then do. False when the file or key is absent.

    Worked example (transformers 4.57.1 and 5.24.0, Qwen2.5's folder with the key set true):
    ``tok("a<|im_end|>b")`` gives ``[64, 27, 91, 318, 6213, 91, 29, 65]``, not ``[64, 151645, 65]``;
    ``"x<tool_call>y"`` still gives ``[87, 151657, 88]`` (``<tool_call>`` is not special).

    Source: transformers 4.57.1 ``tokenization_utils_base.py`` (``self.split_special_tokens =
    kwargs.pop("split_special_tokens", False)``, the config's keys being init kwargs) and
    ``tokenization_utils_fast.py`` (the backend's ``encode_special_tokens``).

    Raises:
        LoaderError: a value that is not true or false (transformers would take any truthy
            value; ``"false"`` would then split).
    """
    from .hf import read_tokenizer_config

    try:
        raw = config.read_bytes()
    except OSError:
        return False
    if b'"split_special_tokens"' not in raw:  # the common case: no second parse of the config
        return False
    value = (read_tokenizer_config(config) or {}).get("split_special_tokens", False)
    if value is not True and value is not False:
        raise LoaderError(f"{config}: split_special_tokens = {value!r}: give true or false")
    return value
