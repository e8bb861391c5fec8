"""load_tokenizer: one entry point for every tokenizer file format rmlprep reads.

The format is told from the path, never from a guess at the model:

- a directory: its ``tokenizer.json`` (else its ``tokenizer.model``), with the
  ``tokenizer_config.json`` beside it;
- ``*.json``: a Hugging Face tokenizer.json (:mod:`rmlprep.hf`);
- ``*.gguf`` or a file starting with the ``GGUF`` magic: :mod:`rmlprep.gguf`;
- a tiktoken rank file (its first lines are ``<base64> <int>``): :mod:`rmlprep.tiktoken_file`
  (Llama 3's ``tokenizer.model`` is one);
- any other file: a SentencePiece ``ModelProto`` (:mod:`rmlprep.spm`).
"""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path
from typing import Any

from .errors import LoaderError, SpecError
from .spec import TokenizerSpec
from .tokenizer import Tokenizer

__all__ = ["load_tokenizer", "load_spec"]

_TIKTOKEN_ARGS = ("name", "pattern", "special_tokens")
_SPEC_FIELDS = frozenset(f.name for f in fields(TokenizerSpec))


def _resolve(path: Path) -> Path:
    if path.is_dir():
        for candidate in ("tokenizer.json", "tokenizer.model"):
            if (path / candidate).is_file():
                return path / candidate
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return ggufs[0]
        raise LoaderError(
            f"{path}: the directory holds no tokenizer.json or tokenizer.model; give the tokenizer file itself"
        )
    if not path.exists():
        raise LoaderError(f"{path}: no such file or directory")
    return path


def load_spec(path: str | os.PathLike, **kwargs: Any) -> tuple[TokenizerSpec, str | None]:
    """Read a tokenizer file into ``(spec, chat_template)`` without building a Tokenizer.

    Args:
        path: see :func:`load_tokenizer`.
        kwargs: ``name``, ``pattern``, ``special_tokens`` for tiktoken rank files only.
    Raises:
        LoaderError: missing path, unreadable or malformed file, tiktoken arguments given for
            another format.
        UnsupportedTokenizer: a file using a component rmlprep does not implement.
    """
    p = _resolve(Path(path))
    tiktoken_kw = {k: v for k, v in kwargs.items() if k in _TIKTOKEN_ARGS}
    with open(p, "rb") as f:
        head = f.read(4)
    if p.suffix == ".json":
        _no_tiktoken_args(p, tiktoken_kw)
        from .hf import read_tokenizer_config, spec_from_tokenizer_json

        config = read_tokenizer_config(p.parent / "tokenizer_config.json")
        return spec_from_tokenizer_json(p, config=config)
    if p.suffix == ".gguf" or head == b"GGUF":
        _no_tiktoken_args(p, tiktoken_kw)
        from .gguf import spec_from_gguf

        return spec_from_gguf(p)
    from .tiktoken_file import looks_like_tiktoken, spec_from_tiktoken

    if tiktoken_kw or looks_like_tiktoken(p):
        return spec_from_tiktoken(p, **tiktoken_kw), None
    try:
        from .spm import spec_from_sentencepiece_model
    except ModuleNotFoundError as e:  # pragma: no cover - while spm.py is being written
        if e.name != f"{__package__}.spm":
            raise
        raise LoaderError(f"{p}: looks like a SentencePiece .model file, which this build cannot read yet") from None
    spec = spec_from_sentencepiece_model(p)
    template = None
    config_path = p.parent / "tokenizer_config.json"
    if config_path.is_file():
        from .hf import read_tokenizer_config

        cfg = read_tokenizer_config(config_path) or {}
        if isinstance(cfg.get("chat_template"), str):
            template = cfg["chat_template"]
    return spec, template


def _no_tiktoken_args(p: Path, kw: dict[str, Any]) -> None:
    if kw:
        raise LoaderError(f"{p}: {sorted(kw)} only apply to tiktoken rank files; leave them out for this file")


def load_tokenizer(path: str | os.PathLike, **overrides: Any) -> Tokenizer:
    """Load the tokenizer a model ships with.

    Args:
        path: a ``tokenizer.json``, a directory holding one (or a ``tokenizer.model``), a
            ``.gguf`` file, a SentencePiece ``.model`` file or a tiktoken rank file.
            ``tokenizer_config.json`` beside a tokenizer.json gives bos/eos,
            ``add_bos_token``/``add_eos_token`` and ``chat_template``.
        overrides: ``name=``, ``pattern=``, ``special_tokens=`` for tiktoken rank files
            (``name="gpt2" | "r50k_base" | "p50k_base" | "o200k_base" | "llama3"``); any
            other key is a :class:`TokenizerSpec` field replaced in the loaded spec
            (``add_bos=False``, ``eos_id=2``...).
    Returns:
        A :class:`Tokenizer`; ``tok.chat_template`` holds the model's Jinja template or None.
    Raises:
        LoaderError: missing path, malformed file, an unknown override key (named), or a
            spec the overrides make invalid.
        UnsupportedTokenizer: a component rmlprep does not implement (named by its path).

    Example::

        >>> tok = load_tokenizer("models/llama3")          # dir with tokenizer.json
        >>> tok = load_tokenizer("gpt2.tiktoken", name="gpt2")
    """
    unknown = sorted(k for k in overrides if k not in _SPEC_FIELDS and k not in _TIKTOKEN_ARGS)
    if unknown:
        raise LoaderError(
            f"{path}: unknown override(s) {unknown}; overrides are TokenizerSpec fields "
            f"({', '.join(sorted(_SPEC_FIELDS))}) or, for tiktoken files, {', '.join(_TIKTOKEN_ARGS)}"
        )
    spec, template = load_spec(path, **{k: v for k, v in overrides.items() if k in _TIKTOKEN_ARGS})
    changes = {k: v for k, v in overrides.items() if k in _SPEC_FIELDS}
    if changes:
        for k in ("eot_ids", "pre_split"):
            if k in changes and not isinstance(changes[k], tuple):
                changes[k] = tuple(changes[k])
        spec = spec.replace(**changes)
    try:
        return Tokenizer.create(spec, chat_template=template)
    except SpecError as e:
        raise LoaderError(f"{path}: {e}") from e
