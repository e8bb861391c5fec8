"""load_tokenizer: one entry point for every tokenizer file format rmlprep reads.

The format is told from the path, never from a guess at the model:

- a directory: its ``tokenizer.json`` (else its ``tokenizer.model``), with the
  ``tokenizer_config.json`` beside it;
- ``*.json``: a Hugging Face tokenizer.json (:mod:`rmlprep.hf`);
- ``*.gguf`` or a file starting with the ``GGUF`` magic: :mod:`rmlprep.gguf`;
- a tiktoken rank file (its first lines are ``<base64> <int>``): :mod:`rmlprep.tiktoken_file`
  (Llama 3's ``tokenizer.model`` is one);
- any other file that starts as a SentencePiece ``ModelProto`` does (:mod:`rmlprep.spm`); a
  file that is none of these is refused as not a tokenizer, with this list (a Git LFS pointer
  in the file's place, by name, with ``git lfs pull``);
- ``demo:gpt2``: the embedded demo's tokenizer (:mod:`rmlprep.demo`: GPT-2's, else a small fallback).

:func:`open_tokenizer` is the resolution the CLI and the pipeline use: everything above, plus
rmlprep's own ``*.spec.json`` files and tokenizer fixtures, and it also returns the file whose
sha256 finds the tokenizer's parity fixture.
"""

from __future__ import annotations

import gc
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

from . import cache
from .encoding_hints import LFS_POINTER
from .errors import ConfigError, LoaderError, RmlprepError, SpecError
from .folder_config import CHAT_TEMPLATE_FILE, template_file
from .load_specials import SPM_CLASS_DEFAULTS, _tiktoken_config_specials, _with_config_specials  # noqa: F401
from .spec import TokenizerSpec
from .tokenizer import Tokenizer

# The format readers (hf, gguf, spm, tiktoken_file) and demo are imported where a file of theirs
# is read: a load served by the cache (:mod:`rmlprep.cache`) never needs them.

__all__ = ["load_tokenizer", "load_spec", "open_tokenizer", "is_spec_file", "DEMO_PREFIX", "CONFIG_WORDS", "CLI_WORDS"]

#: ``tokenizer.path = "demo:gpt2"`` names a demo tokenizer (see :mod:`rmlprep.demo`).
DEMO_PREFIX = "demo:"

_TIKTOKEN_ARGS = ("name", "pattern", "special_tokens")
_SPEC_FIELDS = frozenset(f.name for f in fields(TokenizerSpec))
#: What load_tokenizer reads, as the errors about a file it does not recognise list it.
FORMATS = ("a Hugging Face tokenizer.json (or the model folder holding it), a SentencePiece .model, a GGUF file "
           "or a tiktoken rank file")


def _starts_like_sentencepiece(head: bytes) -> bool:
    """Whether ``head`` can open a SentencePiece ``ModelProto``: its first piece, field 1
    (length-delimited: tag 0x0A, a varint length), whose own first field is the piece text
    (tag 0x0A again). sentencepiece writes the fields in number order, pieces first."""
    if head[:1] != b"\x0a":
        return False
    i = 1
    while i < len(head) and head[i] & 0x80:  # the varint's continuation bytes
        i += 1
    return i + 1 < len(head) and head[i + 1] == 0x0A


#: An ``owner/name`` Hugging Face Hub model id (huggingface_hub's repo-id characters).
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
_FILE_SUFFIXES = (".json", ".model", ".gguf", ".tiktoken", ".jsonl", ".txt", ".bin")


def hub_hint(path: str | os.PathLike) -> str:
    """What to add to "no such file" for a missing ``path`` that reads as a Hub model id
    (``Qwen/Qwen2.5-7B``: two names, no file suffix, and no local folder of the first name; an
    absolute path under the current directory is read relative to it, as the CLI and the run
    config made it absolute from there): rmlprep reads local files only, and the ``hf download``
    line that fetches the tokenizer files (``tokenizer*``: tokenizer.json, tokenizer_config.json,
    tokenizer.model; ``*.jinja``: the chat templates; ``special_tokens_map.json``) into a folder to
    load. ``""`` for any other path."""
    s = os.fspath(path)
    if os.path.isabs(s):
        cwd = os.getcwd()
        if not s.startswith(cwd.rstrip(os.sep) + os.sep):
            return ""
        s = os.path.relpath(s, cwd)
    if not _HUB_ID.fullmatch(s) or s.lower().endswith(_FILE_SUFFIXES) or os.path.isdir(s.split("/")[0]):
        return ""
    name = s.split("/")[1]
    return (f"; rmlprep reads local files and does not download from the Hugging Face Hub: if {s} is a Hub "
            f"model id, fetch its tokenizer files with `hf download {s} --include 'tokenizer*' '*.jinja' "
            f"special_tokens_map.json --local-dir {name}` (older huggingface_hub: `huggingface-cli download`, "
            f"the same arguments) and load the folder {name}")


def _resolve(path: Path) -> Path:
    if path.is_dir():
        for candidate in ("tokenizer.json", "tokenizer.model"):
            if (path / candidate).is_file():
                return path / candidate
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return ggufs[0]
        if (path / "tekken.json").is_file():
            from .hf import TEKKEN

            raise LoaderError(f"{path}: the directory holds no tokenizer.json or tokenizer.model, but tekken.json: "
                              f"{TEKKEN}")
        raise LoaderError(
            f"{path}: the directory holds no tokenizer.json or tokenizer.model; give the tokenizer file itself"
        )
    if not path.exists():
        raise LoaderError(f"{path}: no such file or directory{hub_hint(path)}")
    return path


def load_spec(path: str | os.PathLike, *, given: frozenset[str] = frozenset(),
              **kwargs: Any) -> tuple[TokenizerSpec, str | None]:
    """Read a tokenizer file into ``(spec, chat_template)`` without building a Tokenizer.

    Args:
        path: see :func:`load_tokenizer`.
        given: the spec fields the caller sets itself (:func:`load_tokenizer`'s overrides):
            ``add_bos`` / ``add_eos`` given there settle what a SentencePiece folder's config
            leaves open (:func:`_with_config_specials`).
        kwargs: ``name``, ``pattern``, ``special_tokens`` for tiktoken rank files only.
    Raises:
        LoaderError: missing path, unreadable or malformed file, tiktoken arguments given for
            another format.
        UnsupportedTokenizer: a file using a component rmlprep does not implement.
    """
    p = _resolve(Path(path))
    tiktoken_kw = {k: v for k, v in kwargs.items() if k in _TIKTOKEN_ARGS}
    try:
        with open(p, "rb") as f:
            head = f.read(64)
    except OSError as e:  # a directory without a tokenizer, no permission, ...
        raise LoaderError(f"{p}: cannot read the tokenizer file ({e.strerror or e})") from None
    if head.startswith(LFS_POINTER):  # was "not valid JSON" / "not a tokenizer file rmlprep recognises"
        raise LoaderError(f"{p}: is a Git LFS pointer, not the tokenizer file (the repository was cloned without "
                          "its LFS files); fetch them with: git lfs pull")
    if p.suffix == ".json":
        from .hf import spec_from_tokenizer_json

        _no_tiktoken_args(p, tiktoken_kw)
        config = read_model_config(p.parent)
        spec, template = spec_from_tokenizer_json(p, config=config)
        return spec, template_file(p.parent, template)
    if p.suffix == ".gguf" or head[:4] == b"GGUF":
        from .gguf import spec_from_gguf

        _no_tiktoken_args(p, tiktoken_kw)
        return spec_from_gguf(p)
    from .tiktoken_file import looks_like_tiktoken, spec_from_tiktoken

    if tiktoken_kw and _starts_like_sentencepiece(head) and not looks_like_tiktoken(p):
        _no_tiktoken_args(p, tiktoken_kw)  # a .model read as a rank file failed at "line 2: expected ..."
    if tiktoken_kw or looks_like_tiktoken(p):
        spec = spec_from_tiktoken(p, **tiktoken_kw)
        cfg = read_model_config(p.parent)
        if not cfg:
            return spec, None
        template = cfg.get("chat_template") if isinstance(cfg.get("chat_template"), str) else None
        return _tiktoken_config_specials(spec, cfg, p), template_file(p.parent, template)
    if not _starts_like_sentencepiece(head):
        raise LoaderError(f"{p}: not a tokenizer file rmlprep recognises; give {FORMATS}")
    from .spm import spec_from_sentencepiece_model

    spec = spec_from_sentencepiece_model(p)
    template = None
    cfg = read_model_config(p.parent)
    if cfg:
        spec = _with_config_specials(spec, cfg, p, given)
        if isinstance(cfg.get("chat_template"), str):
            template = cfg["chat_template"]
    return spec, template_file(p.parent, template)


#: The file of older Hub repos that names the special tokens (:func:`read_model_config`).
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"

_MAPPED_TOKENS = ("bos_token", "eos_token", "unk_token", "pad_token")


def read_model_config(folder: str | os.PathLike) -> dict[str, Any] | None:
    """A model folder's tokenizer settings: its ``tokenizer_config.json``, with the special
    tokens of its ``special_tokens_map.json`` on top (``bos_token``, ``eos_token``, ``unk_token``,
    ``pad_token``) when the config has no ``added_tokens_decoder``, as transformers'
    ``_from_pretrained`` reads them (4.57.1 and 5.x: the map is read in the ``else`` branch of
    ``if "added_tokens_decoder" in init_kwargs``); None when the folder has neither file.

    Worked example (checked with transformers 4.57.1): a config ``{"eos_token": "<|im_end|>",
    "added_tokens_decoder": {...}}`` (``save_pretrained`` writes the key) beside a map
    ``{"eos_token": "<|endoftext|>"}`` loads with eos ``<|im_end|>``: the map is never opened.
    Without ``added_tokens_decoder`` (an older repo) the pair loads with eos ``<|endoftext|>``.

    Raises:
        LoaderError: a file that is not valid JSON or not an object.
    """
    from .hf import read_tokenizer_config

    folder = Path(folder)
    cfg = read_tokenizer_config(folder / "tokenizer_config.json")
    if cfg is not None and "added_tokens_decoder" in cfg:
        return cfg
    mapped = read_tokenizer_config(folder / SPECIAL_TOKENS_MAP_FILE)
    if mapped is None:
        return cfg
    out = dict(cfg or {})
    out.update({k: mapped[k] for k in _MAPPED_TOKENS if k in mapped})
    return out


def _no_tiktoken_args(p: Path, kw: dict[str, Any]) -> None:
    if kw:
        e = LoaderError(f"{p}: {sorted(kw)} only apply to tiktoken rank files; leave them out for this file")
        e.not_tiktoken = str(p)  # type: ignore[attr-defined]  # open_tokenizer words it for the config
        raise e


def load_tokenizer(path: str | os.PathLike, **overrides: Any) -> Tokenizer:
    """Load the tokenizer a model ships with.

    Args:
        path: a ``tokenizer.json``, a directory holding one (or a ``tokenizer.model``), a
            ``.gguf`` file, a SentencePiece ``.model`` file, a tiktoken rank file, or
            ``"demo:gpt2"`` (the demo's tokenizer; it says on stderr which one it uses).
            ``tokenizer_config.json`` beside a tokenizer.json gives bos/eos,
            ``add_bos_token``/``add_eos_token`` and ``chat_template``; a
            ``chat_template.jinja`` beside it gives the template instead (as transformers
            reads a model folder).
        overrides: ``name=``, ``pattern=``, ``special_tokens=`` for tiktoken rank files
            (``name="gpt2" | "r50k_base" | "p50k_base" | "o200k_base" | "llama3"``; ``None``
            is the same as not given); any
            other key is a :class:`TokenizerSpec` field replaced in the loaded spec
            (``add_bos=False``, ``eos_id=2``...).
    Returns:
        A :class:`Tokenizer`; ``tok.chat_template`` holds the model's Jinja template or None.
    Raises:
        LoaderError: missing path (one that reads as a Hub model id, ``owner/name``, says how
            to download its files: rmlprep never downloads), malformed file, an unknown override
            key (named), or a spec the overrides make invalid.
        UnsupportedTokenizer: a component rmlprep does not implement (named by its path).
    Source: which files of a folder are read, and which wins, as transformers'
        ``AutoTokenizer.from_pretrained`` (4.57.1; where 5.24.0 differs the README says so);
        each file as its own library reads it: ``tokenizers.Tokenizer.from_file``,
        sentencepiece's ``ModelProto``, tiktoken's ``load_tiktoken_bpe``, llama.cpp's
        ``llama-vocab.cpp`` for the ``tokenizer.ggml.*`` keys of a ``.gguf``.

    Example::

        >>> tok = load_tokenizer("models/llama3")          # dir with tokenizer.json
        >>> tok = load_tokenizer("gpt2.tiktoken", name="gpt2")
        >>> tok = load_tokenizer("demo:gpt2")
    """
    gc_was_on = gc.isenabled()
    gc.disable()  # a load allocates ~10^6 tuples and strs that all live on: collector passes would cost more
    try:
        tok = _load_tokenizer(path, overrides)
    finally:
        if gc_was_on:
            gc.enable()
    if not (isinstance(path, str) and path.startswith(DEMO_PREFIX)):
        _folder_extras(tok, Path(path))
    return tok


def _folder_extras(tok: Tokenizer, path: Path) -> None:
    """Set what the tokenizer_config.json beside a tokenizer.json or ``.model`` holds for the chat
    template, read apart from the load cache (which keeps only the template in use):
    ``chat_templates`` and ``template_tokens``, and its ``split_special_tokens``
    (encode's default parse mode) (:mod:`rmlprep.folder_config`)."""
    from .folder_config import named_templates, split_special_tokens, template_tokens

    p = _resolve(path)
    if p.suffix in (".json", ".model"):
        tok.chat_templates = named_templates(p.parent / "tokenizer_config.json", tok.chat_template) or None
        tok.template_tokens = template_tokens(p.parent, tok.chat_template)
        tok.split_special_tokens = split_special_tokens(p.parent / "tokenizer_config.json")


def _load_tokenizer(path: str | os.PathLike, overrides: dict[str, Any]) -> Tokenizer:
    # name=None (pattern=None...) is "not given", as the CLI and the run config pass it: as a given
    # argument it made any file read as a tiktoken rank file
    overrides = {k: v for k, v in overrides.items() if not (k in _TIKTOKEN_ARGS and v is None)}
    unknown = sorted(k for k in overrides if k not in _SPEC_FIELDS and k not in _TIKTOKEN_ARGS)
    if unknown:
        raise LoaderError(f"{path}: unknown override(s) {unknown}; overrides are TokenizerSpec fields "
                          f"({', '.join(sorted(_SPEC_FIELDS))}) or, for tiktoken files, {', '.join(_TIKTOKEN_ARGS)}")
    hit = None
    if isinstance(path, str) and path.startswith(DEMO_PREFIX):
        _no_tiktoken_args(Path(path), {k: v for k, v in overrides.items() if k in _TIKTOKEN_ARGS})
        tok = open_tokenizer(path, log=_stderr)[0]
        spec, template = tok.spec, tok.chat_template
        if not overrides:
            return tok
    else:
        tiktoken_kw = {k: v for k, v in overrides.items() if k in _TIKTOKEN_ARGS}
        entry = _cache_entry(path, tiktoken_kw)
        hit = cache.lookup(entry)
        if hit is not None:
            spec, template = hit.spec, hit.chat_template
        else:
            spec, template = load_spec(path, given=frozenset(overrides), **tiktoken_kw)
    # name= is the tiktoken loader's argument (it names the spec already), not a spec override:
    # as one it kept every load of a rank file with name= out of the cache
    changes = {k: v for k, v in overrides.items() if k in _SPEC_FIELDS and k not in _TIKTOKEN_ARGS}
    if changes:
        for k in ("eot_ids", "pre_split"):
            if k in changes and not isinstance(changes[k], tuple):
                changes[k] = tuple(changes[k])
        if spec.unset_specials and "unset_specials" not in changes:  # a cache hit made without these overrides
            changes["unset_specials"] = tuple(m for m in spec.unset_specials if m.split("_token:")[0] not in changes)
        spec = spec.replace(**changes)
    elif hit is not None:
        return Tokenizer._from_cache(spec, template, hit.merge_table)
    try:
        tok = Tokenizer.create(spec, chat_template=template)
    except SpecError as e:
        raise LoaderError(f"{path}: {e}") from e
    if not changes and hit is None:
        cache.store(entry, spec, template, tok._merge_table)
    return tok


def _cache_entry(path: str | os.PathLike, tiktoken_kw: dict[str, Any]) -> Path | None:
    """The load-time cache entry (:mod:`rmlprep.cache`) of the file ``path`` resolves to, with
    the ``tokenizer_config.json`` beside it; None when the cache is off or ``path`` does not
    resolve (``load_spec`` then says why)."""
    if not cache.enabled():
        return None
    try:
        q = _resolve(Path(path))
        p = q.resolve()
    except (LoaderError, OSError):
        return None
    # the config files beside the path as given, which the load reads: a symlinked tokenizer.json
    # (a Hugging Face hub snapshot links each file into blobs/) has other neighbours once resolved
    return cache.entry_path([p, q.parent / "tokenizer_config.json", q.parent / CHAT_TEMPLATE_FILE,
                             q.parent / SPECIAL_TOKENS_MAP_FILE],
                            {"path": str(p), **tiktoken_kw})


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- resolution for the CLI and the pipeline ------------------------------------------------------
#: The words :func:`open_tokenizer` uses for the tokenizer's path and tiktoken name: the run
#: config's keys (the CLI passes :data:`CLI_WORDS`).
CONFIG_WORDS = ("tokenizer.path", "tokenizer.name")
CLI_WORDS = ("", "--name")


def open_tokenizer(path: str, *, name: str | None = None, log: Callable[[str], None] = print,
                   words: tuple[str, str] = CONFIG_WORDS) -> tuple[Tokenizer, str | None]:
    """Open a tokenizer by path, as ``tokenizer.path`` and the CLI name it.

    Besides what :func:`load_tokenizer` reads, ``demo:gpt2`` (:mod:`rmlprep.demo`) and a JSON
    file holding a TokenizerSpec (``*.spec.json``) or a tokenizer fixture
    ``{"spec": ..., "cases": ...}`` (``fixtures/tokenizers/``) are accepted; a fixture then also
    serves as its own parity fixture.

    Args:
        path: the tokenizer's path (a directory, a file, or ``demo:NAME``).
        name: the tiktoken encoding name, for rank files only.
        log: where the demo says which tokenizer it uses.
        words: how the caller names the path and the tiktoken name in its messages:
            :data:`CONFIG_WORDS` (``tokenizer.path``, ``tokenizer.name``) or :data:`CLI_WORDS`
            (the path alone, ``--name``).
    Returns:
        (tokenizer, the file whose sha256 identifies it for parity fixtures, or None for the
        demo's byte tokenizer).
    Raises:
        ConfigError: the path does not exist.
        LoaderError: the file cannot be read, or an unknown ``demo:`` name. UnsupportedTokenizer: a component rmlprep lacks.
    """
    if path.startswith(DEMO_PREFIX):
        return _open_demo(path[len(DEMO_PREFIX):], log)
    path_word, name_word = words
    if not os.path.exists(path):
        raise ConfigError((f"{path_word}: {path} does not exist" if path_word else f"{path}: no such file or directory")
                          + hub_hint(path), path=path)
    if path.endswith(".json") and os.path.isfile(path) and is_spec_file(path):
        if name:
            raise ConfigError(f"{name_word}: only tiktoken rank files take an encoding name; {path} is a "
                              "tokenizer spec file, leave the name out")
        return _open_spec_file(path), path
    try:
        t = load_tokenizer(path, **({"name": name} if name else {}))
    except LoaderError as e:
        if getattr(e, "needs_name", None):
            from .tiktoken_file import KNOWN_ENCODINGS

            raise LoaderError(f"{e.needs_name}; set {name_word} to one of {sorted(KNOWN_ENCODINGS)}") from None
        if getattr(e, "not_tiktoken", None):
            raise ConfigError(f"{name_word}: only tiktoken rank files take an encoding name; {e.not_tiktoken} is "
                              "not one, leave the name out") from None
        raise
    ident = path
    if os.path.isdir(path):
        for cand in ("tokenizer.json", "tokenizer.model"):
            if os.path.exists(os.path.join(path, cand)):
                ident = os.path.join(path, cand)
                break
    return t, ident


def is_spec_file(path: str) -> bool:
    """A ``TokenizerSpec.to_dict()`` JSON (``*.spec.json``) or an rmlprep tokenizer fixture
    (``{"spec": {...}, "cases": [...]}``, as in ``fixtures/tokenizers/``), told from the name or
    the first 4 KB (a Hugging Face tokenizer.json starts with other keys)."""
    if path.endswith(".spec.json"):
        return True
    with open(path, "rb") as f:
        head = f.read(4096)
    return re.match(rb'\s*\{\s*"(cases|spec|kind|vocab|generator)"', head) is not None and b'"model"' not in head[:64]


def _open_spec_file(path: str) -> Tokenizer:
    d = json.loads(Path(path).read_text(encoding="utf-8"))
    spec = TokenizerSpec.from_dict(d["spec"] if "spec" in d and "vocab" not in d else d)
    if not spec.name:
        spec = spec.replace(name=Path(path).name.removesuffix(".json"))
    return Tokenizer.create(spec)


def _open_demo(name: str, log: Callable[[str], None]) -> tuple[Tokenizer, str | None]:
    """``demo:NAME`` → (tokenizer, its file or None), with the fallbacks of :mod:`rmlprep.demo`."""
    from . import demo

    if name not in demo.DEMO_NAMES:
        known = ", ".join(DEMO_PREFIX + n for n in demo.DEMO_NAMES)
        raise LoaderError(f"{DEMO_PREFIX}{name}: unknown demo tokenizer; the demo tokenizers are: {known}")
    try:
        ranks = demo.fetch_gpt2_ranks(log)
    except OSError as e:
        log(f"demo: cannot get GPT-2's rank file ({e}); falling back to a small local tokenizer")
    else:
        try:
            return load_tokenizer(str(ranks), name="gpt2"), str(ranks)
        except RmlprepError as e:
            log(f"demo: cannot load {ranks} with load_tokenizer(name='gpt2'): {e}; "
                "falling back to a small local tokenizer")
    fallback = demo.fallback_file(log)
    if fallback is None:
        return demo.byte_tokenizer(), None
    return _open_spec_file(str(fallback)), str(fallback)
