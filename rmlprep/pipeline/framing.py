"""The ``[pack]`` section against the tokenizer: the ids the pack stage adds (bos/eos framing,
the sft pad id), checked once before any corpus work (:func:`framing`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import RunConfig
from ..errors import ConfigError
from ..load import is_spec_file

__all__ = ["Framing", "framing", "missing_bos"]


@dataclass(frozen=True, slots=True)
class Framing:
    """The ids the pack stage adds, as ``[pack]`` asks with this tokenizer.

    Attributes:
        bos, eos: pretrain: put before / after every document (``pack.bos`` / ``pack.eos``).
        pad: sft with ``pack.pad``: the id rows are padded with (the spec's pad id, else eos).
    """

    bos: int | None = None
    eos: int | None = None
    pad: int | None = None

    def tokens(self, tokenizer) -> dict[str, dict[str, Any]]:
        """The ids added, by role, with their token strings: ``{"eos": {"id": 151645, "token":
        "<|im_end|>"}}`` (the manifest's ``tokenizer.framing``); {} when none is added."""
        return {role: {"id": tid, "token": tokenizer.id_to_token(tid)}
                for role in ("bos", "eos", "pad") if (tid := getattr(self, role)) is not None}

    def describe(self, tokenizer) -> str:
        """The log's line on what the pack stage adds, naming each token (a folder's eos may not be
        the one a user expects: an instruct model's is its turn end, Qwen2.5's ``<|im_end|>``);
        "" when it adds nothing."""
        t = {role: f"{role} {v['token']!r} (id {v['id']})" for role, v in self.tokens(tokenizer).items()}
        if "pad" in t:
            return f"pack: rows are padded with {t['pad']}"
        if not t:
            return ""
        ends = [f"starts with {t['bos']}"] if "bos" in t else []
        ends += [f"ends with {t['eos']}"] if "eos" in t else []
        return f"pack: every document {' and '.join(ends)}"


def framing(cfg: RunConfig, tokenizer) -> Framing:
    """Check ``[pack]`` against the tokenizer and return the ids it adds.

    Every check of the config against the tokenizer that the pack stage needs is here, so that
    :func:`rmlprep.pipeline.run` makes them once, right after loading the tokenizer — before
    the plan, the parity stage and any corpus work — and a worker makes the same ones. A new
    config x tokenizer refusal belongs here.

    ``pack.bos`` with ``tokenizer.add_special_tokens`` and a tokenizer whose encode already puts
    its BOS first (``spec.add_bos``: the post-processor of a tokenizer.json, ``add_bos_token`` of
    a GGUF) would give every document two BOS ids; ``pack.eos`` with
    ``add_eos`` two EOS ids. Neither reference library nor any model's training data does that,
    so the combination is refused with the flag to drop, rather than guessed at.
    ``tokenizer.add_special_tokens`` with a tokenizer that adds neither (a SentencePiece
    ``.model``: sentencepiece's ``encode`` adds no BOS unless asked, though the same model's
    Hugging Face tokenizer.json does) would change nothing, so it is refused too, as
    ``pack.pad`` in pretraining is.

    Raises:
        ConfigError: ``pack.bos`` / ``pack.eos`` and the tokenizer has no bos / eos id (for a
            tokenizer.json without the ``tokenizer_config.json`` that names them, the message says so);
            ``pack.bos`` / ``pack.eos``, or ``tokenizer.add_special_tokens`` with a tokenizer that
            adds that id, and the id is llama.cpp's BPE default because a GGUF names none
            (``spec.defaulted_ids``: id 11, a vocabulary's ``","``);
            ``pack.bos`` / ``pack.eos`` and the tokenizer already adds that id (with
            ``tokenizer.add_special_tokens``); ``tokenizer.add_special_tokens`` and it adds
            neither; ``pack.pad`` and it has neither a pad nor an eos id.
    """
    pack = cfg["pack"]
    if cfg.pipeline == "sft":
        if not pack["pad"]:
            return Framing()
        pad = tokenizer.spec.pad_id if tokenizer.spec.pad_id is not None else tokenizer.eos_id
        if pad is None:
            raise ConfigError("pack.pad: the tokenizer has neither a pad nor an eos id; set pack.pad = false")
        return Framing(pad=pad)
    bos = tokenizer.bos_id if pack["bos"] else None
    eos = tokenizer.eos_id if pack["eos"] else None
    for flag, tid in (("bos", bos), ("eos", eos)):
        if pack[flag] and tid is None:
            lone = _lone_tokenizer_json(cfg["tokenizer"]["path"])
            if lone is not None:
                raise ConfigError(
                    f"pack.{flag}: the tokenizer has no {flag} id: {lone} names none, and no tokenizer_config.json "
                    f"(where a Hugging Face model keeps its {flag}_token) is beside it; copy the model's "
                    f"tokenizer_config.json there, or set pack.{flag} = false"
                )
            raise ConfigError(
                f"pack.{flag}: the tokenizer has no {flag} id (its files name no {flag}_token: tokenizer_config.json "
                f"and special_tokens_map.json are where a Hugging Face model keeps it); set pack.{flag} = false only "
                "if documents may be packed with no " + ("start" if flag == "bos" else "end") + " marker between them")
    for flag, tid in (("bos", bos), ("eos", eos)):
        if tid is not None and flag in getattr(tokenizer.spec, "defaulted_ids", ()):
            raise ConfigError(
                f"pack.{flag}: the GGUF names no tokenizer.ggml.{flag}_token_id (or one out of range), "
                f"so its {flag} is llama.cpp's default, {tokenizer.id_to_token(tid)!r} (id {tid}), which would "
                + ("start" if flag == "bos" else "end") + " every document; name the model's in the file "
                f"(gguf-py's gguf_new_metadata.py --special-token {flag} TOKEN), or set pack.{flag} = false")
    if cfg["tokenizer"]["add_special_tokens"]:
        spec = tokenizer.spec
        if spec.unset_specials:
            raise ConfigError("tokenizer.add_special_tokens: " + "; ".join(spec.unset_specials))
        if not (spec.add_bos or spec.add_eos):
            raise ConfigError(
                "tokenizer.add_special_tokens: this tokenizer adds no bos/eos (its add_bos and add_eos are false, "
                "as for a SentencePiece .model or a tiktoken file, whose libraries add none unless asked), so it "
                "would change nothing; frame documents with pack.bos / pack.eos, or set it to false"
            )
        for flag, adds, tid in (("bos", spec.add_bos, spec.bos_id), ("eos", spec.add_eos, spec.eos_id)):
            if adds and flag in spec.defaulted_ids:  # as pack.bos / pack.eos above: the GGUF's add_bos_token
                raise ConfigError(  # (llama-bpe's default: true) adds llama.cpp's default id to every document
                    f"tokenizer.add_special_tokens: the tokenizer adds its {flag} to every document, and the GGUF "
                    f"names no tokenizer.ggml.{flag}_token_id (or one out of range), so that {flag} is llama.cpp's "
                    f"default, {tokenizer.id_to_token(tid)!r} (id {tid}); name the model's in the file (gguf-py's "
                    f"gguf_new_metadata.py --special-token {flag} TOKEN), or set tokenizer.add_special_tokens = false")
        for flag, adds, name, tid in (("bos", spec.add_bos, "BOS", bos), ("eos", spec.add_eos, "EOS", eos)):
            if pack[flag] and adds:
                raise ConfigError(
                    f"pack.{flag}: the tokenizer already adds its {name} ({tid}) to every document with "
                    f"tokenizer.add_special_tokens = true, so each would have two; set pack.{flag} = false "
                    "(or tokenizer.add_special_tokens = false)"
                )
    return Framing(bos=bos, eos=eos)


def missing_bos(cfg: RunConfig, tokenizer) -> str:
    """The log's warning when a pretrain run starts documents with no BOS although the
    tokenizer's own encode starts every text with one (``spec.add_bos``: a tokenizer.json
    post-processor, a config's ``add_bos_token``; Gemma, Llama 2 and 3, Mistral), so that
    transformers' ``tokenizer(text)``, datatrove's and Megatron's tokenization and
    :func:`rmlprep.tokenize_text` put it there; "" otherwise (sft, ``pack.bos`` true or written
    false, ``tokenizer.add_special_tokens``, no bos id, or a GGUF's defaulted one, which ``pack.bos``
    refuses). A fresh-user trial packed Gemma documents without ``<bos>`` under the defaults
    and was told nothing; a config that writes ``pack.bos = false`` has chosen, and is not told
    on every run (``cfg.given``, the keys the TOML wrote)."""
    s = tokenizer.spec
    if (cfg.pipeline == "sft" or cfg["pack"]["bos"] or "pack.bos" in cfg.given or cfg["tokenizer"]["add_special_tokens"]
            or not s.add_bos or tokenizer.bos_id is None or "bos" in getattr(s, "defaulted_ids", ())):
        return ""
    tid = tokenizer.bos_id
    return (f"warning: pack: documents get no bos, though this tokenizer's own encode starts every text with "
            f"{tokenizer.id_to_token(tid)!r} (id {tid}), as transformers' tokenizer(text) and rmlprep.tokenize_text "
            "do; set pack.bos = true if the model was trained with it, or write pack.bos = false to say it was not "
            "(and silence this)")


def _lone_tokenizer_json(path: str) -> Path | None:
    """The tokenizer.json ``tokenizer.path`` names (itself or in its folder) when no
    ``tokenizer_config.json`` sits beside it, else None. Hugging Face keeps a model's bos, eos
    and pad tokens (and its chat template) in that file, not in tokenizer.json."""
    p = Path(path)
    if p.is_dir():
        p = p / "tokenizer.json"
    if p.suffix != ".json" or not p.is_file() or (p.parent / "tokenizer_config.json").exists():
        return None
    return None if is_spec_file(str(p)) else p  # rmlprep's own spec files name their ids
