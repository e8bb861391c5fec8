"""Run configs: a TOML file → a validated, frozen :class:`RunConfig`.

Schema (every key optional unless marked; unknown keys are refused, naming the key)::

    pipeline = "pretrain"            # "pretrain" (text → concat packing) | "sft" (messages → BFD)

    [input]
    paths = ["data/*.jsonl.gz"]      # REQUIRED (or path = "..."): files, globs, dataset dirs;
                                     # local or object-store URIs ("s3://bucket/corpus/*.jsonl.zst")
    format = "auto"                  # auto | jsonl | parquet | csv | hf | stdlib
    column = "text"                  # default "text" (pretrain) / "messages" (sft)
    split = "train"                  # hf DatasetDict split (default: the only or "train", logged;
                                     # several and no "train": refused); set with no DatasetDict
                                     # among the inputs: refused
    unit_bytes = 4_000_000           # plain JSONL / stdlib: cut files into units of ~this size
                                     # (small enough that a pool stays busy to the end)
    unit_rows = 50_000               # parquet / hf: rows per unit (row groups kept whole);
                                     # sft: BFD packs windows of this many conversations
    batch_rows = 1024                # rows per streamed record batch
    max_bytes = 4_000_000            # stdlib: stop collecting files past this (another format: refused)

    [tokenizer]
    path = "tokenizer.json"          # REQUIRED: file/dir accepted by load_tokenizer, or "demo:gpt2"
    name = "gpt2"                    # tiktoken rank files: the encoding name
    add_special_tokens = false       # add the bos/eos the tokenizer file adds (a tokenizer.json's
                                     # post-processor; a .model or tiktoken file adds none: refused)
    parse_special = false            # treat "<|endoftext|>" in corpus text as a control token

    [parity]
    fixture = "fixtures/parity/x.json"  # default: fixtures/parity/*.json whose sha256 matches
    require = false                  # no fixture found → stop (true) or log a warning (false)
    live_sample = 0                  # documents of the corpus compared live with the reference lib
    chat = "auto"                    # sft: chat.format must reproduce the tokenizer's own chat
                                     # template on the probes, and the committed real-template
                                     # renders of its format; "auto" = check what exists; true =
                                     # renders required; false = off
    chat_renders = "renders.jsonl.gz"  # default: the committed fixtures/chat/renders.jsonl.gz
    chat_live_sample = 1000          # sft: the corpus's first 1000 conversations, then in each unit's
                                     # worker every one of a unit of up to 1000 (of n more, about
                                     # 1000·(1 + ln(n/1000)) spread over it) rendered with the
                                     # tokenizer's chat_template (needs jinja2) and compared; 0 = off

    [chat]                           # sft only
    format = "qwen3"                 # a format name (rmlprep.CHAT_FORMATS); "auto": the format that
                                     # reproduces the tokenizer's chat_template; "template": that
                                     # template rendered with jinja2 (opt-in, slower)
    add_generation_prompt = false    # true: end each row with the header opening an assistant
                                     # turn, for prompts (ending on a user or tool turn); a
                                     # conversation ending on an assistant turn is then a reject
    options = { enable_thinking = false }  # the format's options (template variables, "today")
    train_on_reasoning = true        # reasoning in the loss mask (false: refused by formats without)
    train_turns = "all"              # "last": only the answers after the last user message (not "template")
    tools_column = "tools"           # a column of per-conversation tool definitions (read in a second
                                     # pass over each unit); false: none, on purpose. Unset (the
                                     # default): none, and an input with a "tools" or "functions"
                                     # column is refused before any work (a JSONL row holding one
                                     # later is a reject): name it, or set false
    system_column = "system"         # a column of per-conversation system prompts, written as the
                                     # system message (a row whose messages start with a different
                                     # one is a reject); false: none, on purpose. Unset: an input
                                     # with a "system" or "system_prompt" column is refused, as above
    ignore_media = false             # an "images"/"image"/"audio"/"video" column is refused (rmlprep
                                     # writes text only); true: leave it out on purpose
    json_tools = false               # tools / tool calls written as JSON text → tools / tool_calls,
                                     # and tool parameters stored as JSON text → the schema object
    no_assistant = "reject"          # a conversation without an assistant turn: reject | keep
    join_text_parts = "\\n"          # 2+ text parts to a format taking a string: joined so; unset: reject
    text_markers = false             # true: run a format whose turn terminator is not a special
                                     # token of this tokenizer, its markers written as text
                                     # (default: refused, the model would learn no stop token)

    [pack]
    seq_len = 2048                   # REQUIRED (1 to 2**24)
    eos = true                       # pretrain: append eos_id after every document
    bos = false                      # pretrain: prepend bos_id before every document (left out, while
                                     # the tokenizer's encode adds one: a warning; written false: none)
    overflow = "wrap"                # pretrain: wrap|truncate|drop; sft: truncate|split|drop
    pad = false                      # sft: pad every row to seq_len with the spec's pad (or eos)

    [output]
    dir = "out/run"                  # REQUIRED; relative → current directory; or "s3://bucket/prefix"
    format = "parquet"               # parquet: packed rows | megatron: documents as Megatron-LM
                                     # indexed .bin/.idx pairs (pretrain only; see pipeline/megatron.py)
    compression = "zstd"             # parquet codec: zstd, snappy, gzip, brotli, lz4 or none
    row_group_rows = 4096            # parquet only: with format "megatron", either key set to
                                     # other than its default is refused (see config_output.py)

    [run]
    workers = 0                      # 0 = all cores
    progress = "auto"                # auto | bar | log | none
    histogram = "auto"               # lengths.png: "auto" when matplotlib is installed; true also says when not
    engine = "local"                 # local: a process pool on this machine | ray: Ray tasks
    ray_address = "auto"             # engine "ray" only. Absent: the run starts a private local
                                     # Ray with `workers` CPUs and stops it at the end. "auto": the
                                     # cluster this machine belongs to (`ray start --head` /
                                     # `ray start --address=...`, or RAY_ADDRESS); "ray://host:10001":
                                     # a remote cluster through Ray Client. Needs pip install 'rmlprep[ray]'.
    max_reject_fraction = 0.1        # rejects over this share of the rows read: exit 2 (rmlprep run,
                                     # run_exit_status), the output written as usual; 1.0: never.
                                     # Documents pack.overflow = "drop" left out do not count

The engine, like the worker count, never changes the output: the same units, shard names and bytes,
so ``engine`` and ``ray_address`` are left out of the config hash and a run started with one engine
can be resumed with the other. The chat parity keys (``parity.chat``, ``chat_renders``,
``chat_live_sample``) only decide what is checked before the run: left out of the hash too.

Relative paths resolve against the current directory (not the config file's), so
``rmlprep run configs/demo.toml`` run from a clone writes under that clone.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import fs
from .config_paths import _abs, _abs_dir, relative_note
from .config_output import check_output
from .config_run import ENGINES, _check_engine, check_reject_fraction, check_run  # noqa: F401 (ENGINES)
from .config_chat import _NOT_SFT, check_chat, check_chat_parity
from .errors import ConfigError, InputError
from .packing.common import MAX_SEQ_LEN

__all__ = ["RunConfig", "load_config", "config_from_dict", "SCHEMA"]

_REQ = object()

# section -> key -> (types, default)  (None default = absent)
SCHEMA: dict[str, dict[str, tuple[tuple[type, ...], Any]]] = {
    "input": {
        "paths": ((list, str), _REQ),
        "path": ((str,), None),
        "format": ((str,), "auto"),
        "column": ((str,), None),
        "split": ((str,), None),
        "unit_bytes": ((int,), 4_000_000),
        "unit_rows": ((int,), 50_000),
        "batch_rows": ((int,), 1024),
        "max_bytes": ((int,), 4_000_000),
    },
    "tokenizer": {
        "path": ((str,), _REQ),
        "name": ((str,), None),
        "add_special_tokens": ((bool,), False),
        "parse_special": ((bool,), False),
    },
    "parity": {
        "fixture": ((str,), None),
        "require": ((bool,), False),
        "live_sample": ((int,), 0),
        "chat": ((str, bool), "auto"),
        "chat_renders": ((str,), None),
        "chat_live_sample": ((int,), 1000),
    },
    "chat": {
        "format": ((str,), None),
        "add_generation_prompt": ((bool,), False),
        "options": ((dict,), None),
        "train_on_reasoning": ((bool,), True),
        "train_turns": ((str,), "all"),
        "tools_column": ((str, bool), None),
        "system_column": ((str, bool), None),
        "ignore_media": ((bool,), False),
        "json_tools": ((bool,), False),
        "no_assistant": ((str,), "reject"),
        "join_text_parts": ((str,), None),
        "text_markers": ((bool,), False),
    },
    "pack": {
        "seq_len": ((int,), _REQ),
        "eos": ((bool,), True),
        "bos": ((bool,), False),
        "overflow": ((str,), None),
        "pad": ((bool,), False),
    },
    "output": {
        "dir": ((str,), _REQ),
        "format": ((str,), "parquet"),
        "compression": ((str,), "zstd"),
        "row_group_rows": ((int,), 4096),
    },
    "run": {
        "workers": ((int,), 0),
        "progress": ((str,), "auto"),
        "histogram": ((bool, str), "auto"),
        "engine": ((str,), "local"),
        "ray_address": ((str,), None),
        "max_reject_fraction": ((float, int), 0.1),
    },
}
_TOP = {"pipeline": ((str,), "pretrain")}
_FORMATS = ("auto", "jsonl", "parquet", "csv", "hf", "stdlib")
_PIPELINES = ("pretrain", "sft")
# keys left out of the hash while at their default (added after configs were hashed without them)
_HASHED_UNLESS_DEFAULT = {("output", "format"): "parquet", ("chat", "text_markers"): False,
                          ("chat", "system_column"): None, ("chat", "ignore_media"): False,
                          ("chat", "train_turns"): "all", ("chat", "join_text_parts"): None}
# pack.seq_len's ceiling is the pack functions' own (rmlprep.packing.common.MAX_SEQ_LEN, 2**24)
_OVERFLOW = {"pretrain": ("wrap", "truncate", "drop"), "sft": ("truncate", "split", "drop")}
# keys that change how a run goes but never its output bytes: left out of the config hash
_NOT_HASHED = {("run", "workers"), ("run", "progress"), ("run", "histogram"), ("run", "engine"),
               ("run", "ray_address"), ("run", "max_reject_fraction"), ("output", "dir"),
               ("parity", "chat"), ("parity", "chat_renders"), ("parity", "chat_live_sample")}


@dataclass(frozen=True)
class RunConfig:
    """A validated run config.

    Attributes:
        data: ``{section: {key: value}}`` with every default filled in and paths resolved to
            absolute strings (``input.paths``, ``tokenizer.path``, ``parity.fixture``, ``parity.chat_renders``,
            ``output.dir``, without ``..`` where that names the same folder); ``data["pipeline"]``
            is the pipeline name.
        source: the TOML file it came from ("" when built from a dict).
        given: the ``"section.key"`` names the TOML (or dict) wrote, defaults not among them; not
            hashed (the warning on a defaulted ``pack.bos`` reads it: ``pipeline.framing.missing_bos``).
    """

    data: dict[str, Any]
    source: str = ""
    _hash: str = field(default="", repr=False)
    #: ``(key, as given, absolute)`` for each local path the config gave relative, and the
    #: directory they were resolved against (the current one): what :meth:`relative_note` says
    relative: tuple[tuple[str, str, str], ...] = field(default=(), repr=False, compare=False)
    cwd: str = field(default="", repr=False, compare=False)
    given: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    def relative_note(self, path: str | None) -> str:
        """What an error about ``path`` (absolute) adds when the config gave it relative
        (:func:`rmlprep.config_paths.relative_note`); "" otherwise."""
        return relative_note(self.relative, self.cwd, self.source, path)

    def __getitem__(self, section: str) -> Any:
        return self.data[section]

    @property
    def pipeline(self) -> str:
        return self.data["pipeline"]

    @property
    def output_dir(self) -> Path | str:
        """``output.dir``: a local :class:`~pathlib.Path`, or an object-store URI string
        (``s3://bucket/prefix``; see :mod:`rmlprep.fs`)."""
        d = self.data["output"]["dir"]
        return d if fs.is_remote(d) else Path(d)

    def hashed_part(self) -> dict[str, Any]:
        """The part of the config that decides the output bytes (no workers, engine or output dir)."""
        d = copy.deepcopy(self.data)
        for sec, key in _NOT_HASHED:
            d.get(sec, {}).pop(key, None)
        for (sec, key), default in _HASHED_UNLESS_DEFAULT.items():
            if d.get(sec, {}).get(key) == default:
                d[sec].pop(key)  # keys added later: the hashes of configs without them stay the same
        return d

    def to_dict(self) -> dict[str, Any]:
        """The config as :func:`config_from_dict` takes it back (the same ``data``, the same hash;
        the ``config`` of a run's manifest.json): every key, None where unset, except the keys
        the pipeline refuses when given, which hold their defaults (sft:
        :data:`rmlprep.config_chat._NOT_SFT`; other pipelines: ``[chat]`` and ``parity.chat*``)."""
        d = copy.deepcopy(self.data)
        if self.pipeline == "sft":
            for sec, key in _NOT_SFT:
                d[sec].pop(key, None)
        else:
            d.pop("chat", None)
            for key in ("chat", "chat_renders", "chat_live_sample"):
                d["parity"].pop(key, None)
        return d

    @property
    def config_hash(self) -> str:
        """sha256 hex of :meth:`hashed_part` in canonical JSON."""
        blob = json.dumps(self.hashed_part(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def with_overrides(self, *, workers: int | None = None, output: str | None = None,
                       engine: str | None = None, max_reject_fraction: float | None = None) -> "RunConfig":
        """A copy with ``run.workers``, ``output.dir``, ``run.engine`` and/or
        ``run.max_reject_fraction`` replaced (CLI flags).

        Raises:
            ConfigError: a negative worker count; an unknown engine; engine "ray" without Ray; a
                reject fraction outside 0..1.
        """
        d = copy.deepcopy(self.data)
        if max_reject_fraction is not None:
            d["run"]["max_reject_fraction"] = check_reject_fraction(max_reject_fraction, "--max-reject-fraction")
        if engine is not None:
            _check_engine(engine, "--engine")
            d["run"]["engine"] = engine
        if workers is not None:
            if workers < 0:
                raise ConfigError(f"--workers: must be >= 0 (0 = all cores), got {workers}")
            d["run"]["workers"] = workers
        relative = self.relative
        if output is not None:
            d["output"]["dir"] = _abs_dir(output, "--output")
            relative = tuple(r for r in relative if r[0] != "output.dir")  # --output is not the config's
        return RunConfig(d, self.source, relative=relative, cwd=self.cwd, given=self.given)


def load_config(path: str | os.PathLike, *, output: str | None = None) -> RunConfig:
    """Read and validate a TOML run config.

    The file is read as the command line reads its text files (:func:`rmlprep.cli_text.utf8_text`):
    UTF-8, a byte-order mark at byte 0 skipped (Windows editors write one). ``output`` (the CLI's
    ``--output``) takes the place of ``output.dir`` before it is checked, so a config whose own
    folder cannot be used (a name the file system encoding cannot write) still runs into another.

    Raises:
        ConfigError: the file is missing, not UTF-8 (UTF-16 from Windows Notepad's "Unicode",
            Latin-1: named, with the iconv line) or not TOML, or a key is unknown, of the wrong
            type, missing or out of range (the message names ``section.key``).
    """
    from .cli_text import utf8_text  # (here, not at the top: it imports the JSONL reader)

    p = Path(path)
    try:
        raw = tomllib.loads(utf8_text(p.read_bytes(), str(p)))
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such config file") from None
    except InputError as e:  # not UTF-8: it raised UnicodeDecodeError, a traceback (exit 1)
        raise ConfigError(str(e)) from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from None
    return config_from_dict(raw, source=str(p), output=output)


def config_from_dict(raw: dict[str, Any], *, source: str = "", output: str | None = None) -> RunConfig:
    """Validate a config given as nested dicts (same schema as the TOML file; a key whose default
    is unset may also be None, as in the ``config`` of a run's ``manifest.json``, which this
    takes back: the same config, the same hash). ``output``: as :func:`load_config`'s."""
    w = f"{source}: " if source else ""
    if not isinstance(raw, dict):
        raise ConfigError(f"{w}a config is a table of sections, got {type(raw).__name__}")
    data: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _TOP:
            continue
        if key not in SCHEMA:
            known = sorted([*SCHEMA, *_TOP])
            raise ConfigError(f"{w}unknown key {key!r}; known top-level keys: {known}")
        if not isinstance(value, dict):
            raise ConfigError(f"{w}{key}: must be a table ([{key}]), got {type(value).__name__}")
    pipeline = raw.get("pipeline", "pretrain")
    if not isinstance(pipeline, str) or pipeline not in _PIPELINES:
        raise ConfigError(f"{w}pipeline: must be one of {list(_PIPELINES)}, got {pipeline!r}")
    data["pipeline"] = pipeline
    for sec, keys in SCHEMA.items():
        given = dict(raw.get(sec, {}))
        out: dict[str, Any] = {}
        for k in given:
            if k not in keys:
                raise ConfigError(f"{w}unknown key '{sec}.{k}'; known keys in [{sec}]: {sorted(keys)}")
        for k, (types, default) in keys.items():
            if k in given and given[k] is None and default is None:
                out[k] = None  # null: unset, as a manifest's config writes it (TOML has no null)
            elif k in given:
                v = given[k]
                ok = isinstance(v, types) and not (bool not in types and isinstance(v, bool))
                if not ok:
                    names = " or ".join("array" if t is list else t.__name__ for t in types)
                    raise ConfigError(f"{w}{sec}.{k}: must be {names}, got {v!r}")
                out[k] = v
            elif default is _REQ:
                out[k] = _REQ
            else:
                out[k] = default
        data[sec] = out
    inp = data["input"]
    if inp["path"] is not None:
        if "paths" in raw.get("input", {}):
            raise ConfigError(f"{w}input.path and input.paths: give one of them, not both")
        inp["paths"] = [inp["path"]]
    del inp["path"]
    if inp["paths"] is _REQ and inp["format"] == "stdlib":
        inp["paths"] = ["<stdlib>"]
    if inp["paths"] is _REQ:
        raise ConfigError(f"{w}input.paths: missing; give the corpus files, e.g. paths = [\"data/*.jsonl\"]")
    if isinstance(inp["paths"], str):
        inp["paths"] = [inp["paths"]]
    if not inp["paths"] or not all(isinstance(x, str) and x for x in inp["paths"]):
        raise ConfigError(f"{w}input.paths: must be a non-empty array of path strings")
    for sec, keys in SCHEMA.items():
        for k in keys:
            if data[sec].get(k) is _REQ:
                raise ConfigError(f"{w}{sec}.{k}: missing (required)")
    if inp["format"] not in _FORMATS:
        raise ConfigError(f"{w}input.format: must be one of {list(_FORMATS)}, got {inp['format']!r}")
    for k in ("unit_bytes", "unit_rows", "batch_rows", "max_bytes"):
        if inp[k] < 1:
            raise ConfigError(f"{w}input.{k}: must be >= 1, got {inp[k]}")
    if inp["format"] != "stdlib" and inp["max_bytes"] != SCHEMA["input"]["max_bytes"][1]:
        raise ConfigError(f"{w}input.max_bytes: only input.format = \"stdlib\" reads it (the demo's cap on the stdlib "
                          f"files collected); input.format = {inp['format']!r} reads every input whole: remove it")
    if inp["column"] is None:
        inp["column"] = "messages" if pipeline == "sft" else "text"
    relative: list[tuple[str, str, str]] = []

    def resolved(key: str, p: str, absolute=None) -> str:
        a = (absolute or _abs)(p, w + key)
        if a != p and not os.path.isabs(os.path.expanduser(p)):
            relative.append((key, p, a))
        return a

    if inp["format"] != "stdlib":
        inp["paths"] = [resolved("input.paths", x) for x in inp["paths"]]
    tok = data["tokenizer"]
    tok["path"] = resolved("tokenizer.path", tok["path"])
    par = data["parity"]
    if par["fixture"] is not None:
        par["fixture"] = resolved("parity.fixture", par["fixture"])
    if par["live_sample"] < 0:
        raise ConfigError(f"{w}parity.live_sample: must be >= 0, got {par['live_sample']}")
    if par["chat_renders"] is not None:
        par["chat_renders"] = resolved("parity.chat_renders", par["chat_renders"])
    check_chat_parity(par, raw, pipeline, w)
    pack = data["pack"]
    if not 1 <= pack["seq_len"] <= MAX_SEQ_LEN:
        raise ConfigError(f"{w}pack.seq_len: must be from 1 to {MAX_SEQ_LEN:,} (2**24), got {pack['seq_len']:,}")
    if pack["overflow"] is None:
        pack["overflow"] = _OVERFLOW[pipeline][0]
    if pack["overflow"] not in _OVERFLOW[pipeline]:
        raise ConfigError(
            f"{w}pack.overflow: for pipeline {pipeline!r} must be one of {list(_OVERFLOW[pipeline])}, "
            f"got {pack['overflow']!r}"
        )
    if pipeline == "sft" and pack["seq_len"] == 1 and pack["overflow"] == "split":  # explorer6 X4
        raise ConfigError(f"{w}pack.seq_len = 1 with pack.overflow = \"split\": every chunk is one token, whose label "
                          "is masked (-100, as each fragment's first), so no row would train anything; use seq_len >= 2")
    if pipeline != "sft" and raw.get("pack", {}).get("pad"):
        raise ConfigError(f"{w}pack.pad = true: only the sft pipeline pads rows; pretraining rows are packed "
                          "full and a shard's last row keeps its length (seq_lengths says it); remove pack.pad")
    check_chat(data["chat"], raw, pipeline, w)
    out = data["output"]
    out["dir"] = (_abs_dir(output, "--output") if output is not None  # --output: not the config's, never checked
                  else resolved("output.dir", out["dir"], _abs_dir))
    check_output(out, pipeline, w, {k: default for k, (_, default) in SCHEMA["output"].items()})
    check_run(data["run"], w)
    given = frozenset(f"{sec}.{k}" for sec, keys in raw.items() if isinstance(keys, dict) for k in keys)
    return RunConfig(data, source, relative=tuple(relative), cwd=os.getcwd() if relative else "", given=given)
