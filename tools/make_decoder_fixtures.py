"""Record how Hugging Face ``tokenizers`` decodes ids through every decoder chain rmlprep mirrors.

Writes ``fixtures/decoders.json``:

    {"banner": {...}, "variants": {name: <decoder JSON>},
     "bases": {"sp": <tokenizer.json>, "bl": <tokenizer.json>},
     "real": {"mistral-7b-v0.1": <sha256 of its tokenizer.json>, "gpt2": ...},
     "cases": [{"base": "sp" | "bl" | real name, "variant": name, "skip": bool, "ids": [int],
                "text": str | null}]}

Each case is ``tokenizers.Tokenizer.from_str(base with "decoder" = variant).decode(ids,
skip_special_tokens=skip)``; ``text`` is null where tokenizers panics (a ``Strip`` cut past the
token). The two ``bases`` are small synthetic tokenizer.json files built here (a SentencePiece-
style one with byte fallback, a byte-level one), each with the tokens decoders treat apart:
``<0xXX>`` bytes (and near misses: ``<0x+F>``, ``<0xe9>``, ``<0xzz>``), ``▁``/``▁▁``, a gap id,
special, non-special and normalized added tokens, ``##``-prefixed and ``</w>``-suffixed pieces,
CTC's pad and delimiter. The real bases (Mistral 7B v0.1, GPT-2) are edited in memory only:
their files are read from the real-tokenizer cache and never written.

Usage: ``python tools/make_decoder_fixtures.py [--out fixtures/decoders.json]``
Needs: tokenizers (the ``reference`` extra); the real tokenizers in ``~/.cache/rmlprep-real-tokenizers``
(env RMLPREP_REAL_TOKENIZERS).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rmlprep.unicode import bytes_to_unicode  # noqa: E402
from tools.make_parity_fixtures import real_dir  # noqa: E402

SP = "\u2581"


def _replace(old: str, new: str) -> dict:
    return {"type": "Replace", "pattern": {"String": old}, "content": new}


def _strip(content: str, start: int, stop: int) -> dict:
    return {"type": "Strip", "content": content, "start": start, "stop": stop}


def _metaspace(scheme: str) -> dict:
    return {"type": "Metaspace", "replacement": SP, "prepend_scheme": scheme, "split": True}


def _seq(*decoders: dict) -> dict:
    return {"type": "Sequence", "decoders": list(decoders)}


_BL = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
_BF = {"type": "ByteFallback"}
_FUSE = {"type": "Fuse"}

#: decoder chains, by name: those real files ship, those the last sitting found decoding
#: otherwise than tokenizers (null, no ByteFallback, no "▁" step, ByteLevel in a SentencePiece-style
#: file, no ByteLevel in a byte-level one), and every other step in orders a file may give
VARIANTS: dict[str, dict | None] = {
    "null": None,
    "bytelevel": _BL,
    "fuse": _seq(_FUSE),
    "bytefallback": _seq(_BF),
    "sp-llama": _seq(_replace(SP, " "), _BF, _FUSE, _strip(" ", 1, 0)),
    "sp-gemma": _seq(_replace(SP, " "), _BF, _FUSE),
    "sp-no-bytefallback": _seq(_replace(SP, " "), _FUSE, _strip(" ", 1, 0)),
    "sp-no-replace": _seq(_BF, _FUSE),
    "bytefallback-bytelevel": _seq(_BF, _BL),
    "bytelevel-fuse": _seq(_BL, _FUSE),
    "metaspace-always": _seq(_metaspace("always"), _BF, _FUSE),
    "metaspace-first": _seq(_BF, _metaspace("first")),
    "metaspace-never": _metaspace("never"),
    "metaspace-bytelevel": _seq(_metaspace("always"), _BL),
    "strip-2-1": _seq(_replace(SP, " "), _BF, _FUSE, _strip(" ", 2, 1)),
    "strip-per-token": _seq(_strip(SP, 1, 1), _replace(SP, " ")),
    "bytelevel-strip": _seq(_BL, _strip(" ", 1, 1)),
    "wordpiece": _seq(_replace(SP, " "), {"type": "WordPiece", "prefix": "##", "cleanup": True}),
    "wordpiece-no-cleanup": {"type": "WordPiece", "prefix": SP, "cleanup": False},
    "fuse-wordpiece": _seq(_FUSE, {"type": "WordPiece", "prefix": "##", "cleanup": True}),
    "bpe-decoder": {"type": "BPEDecoder", "suffix": "</w>"},
    "bytelevel-bpe-decoder": _seq(_BL, {"type": "BPEDecoder", "suffix": " "}),
    "ctc": {"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "|", "cleanup": True},
    "ctc-no-cleanup": {"type": "CTC", "pad_token": "<s>", "word_delimiter_token": SP, "cleanup": False},
    "replace-chain": _seq(_replace("e", "EE"), _replace(SP + SP, "_"), _BF, _replace(" ", "")),
    "nested": _seq(_seq(_replace(SP, " "), _seq(_BF)), _FUSE, _seq(_strip(" ", 1, 0))),
}

#: pieces both synthetic vocabularies hold (spelled for their space style by each base)
_PIECES = ["a", "b", "e", "s", "ab", "##b", "##s", "a</w>", "b</w>", ".", "'", "n't", "do", "not", "|",
           "<pad>", "<0x+F>", "<0xe9>", "<0xzz>", "<0x41", "x</w>y"]


def _added(content: str, vocab: dict[str, int], *, special: bool, normalized: bool = False) -> dict:
    return {"id": vocab[content], "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": normalized, "special": special}


def _vocab(tokens: list[str]) -> dict[str, int]:
    """Ids in order, one id (after the first 260 tokens) left without a token: a gap. Added
    tokens are in the model vocab, so they keep their ids and the gap stays one."""
    vocab: dict[str, int] = {}
    for t in tokens:
        if t not in vocab:
            vocab[t] = len(vocab) + (len(vocab) >= 260)
    return vocab


def _sp_base() -> dict:
    added = ["<unk>", "<s>", "</s>", "<tool>", "\ufb01x", "<\uff33>"]
    vocab = _vocab([*added[:3], *(f"<0x{b:02X}>" for b in range(256)), SP, SP + SP, SP + "a", SP + "b", SP + ".",
                    SP + "do", SP + "not", "e" + SP + "e", *_PIECES, *added[3:]])
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [*(_added(t, vocab, special=True) for t in added[:3]),
                         _added("<tool>", vocab, special=False),
                         _added("\ufb01x", vocab, special=False, normalized=True),  # NFKC: "fix"
                         _added("<\uff33>", vocab, special=True, normalized=True)],  # "<S>": skip keeps it
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, _replace(" ", SP)]},
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [f"{SP} a", f"{SP} b", "a b", f"{SP} {SP}"]},
    }


def _bl_base() -> dict:
    b2u = bytes_to_unicode()
    g = b2u[ord(" ")]
    added = ["<|endoftext|>", "<" + g + "x>", "\u65e5\u672c", "<pad>"]
    vocab = _vocab([*(b2u[b] for b in range(256)), g + "a", g + "b", "ab", g + g, "##",
                    *(p.replace(" ", g) for p in _PIECES if p != "<0xe9>"), "<0xE9>", "<0x41>", "<0xC3>",
                    "<0xA9>", "<0xFF>", *added])
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [_added(added[0], vocab, special=True), _added(added[1], vocab, special=False),
                         _added(added[2], vocab, special=False), _added(added[3], vocab, special=True)],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [f"{g} a", f"{g} b", "a b", f"{g} {g}"]},
    }


def _size(d: dict) -> int:
    ids = set(d["model"]["vocab"].values()) | {a["id"] for a in d["added_tokens"]}
    return max(ids) + 1


def id_lists(doc: dict, n_random: int, seed: int) -> list[list[int]]:
    """Hand-picked id lists (byte runs valid and not, specials first, empty) and ``n_random``
    seeded random ones, biased towards the tokens decoders treat apart."""
    vocab = doc["model"]["vocab"]
    by = {**vocab, **{a["content"]: a["id"] for a in doc["added_tokens"]}}
    interesting = sorted({i for t, i in by.items() if not t.startswith("<0x") or t in ("<0xE9>", "<0x41>",
                                                                                       "<0xC3>", "<0xA9>")})
    byte = {b: vocab.get(f"<0x{b:02X}>") for b in (0x41, 0xC3, 0xA9, 0xE9, 0xFF, 0x20, 0xE2, 0x82, 0xAC)}
    taken = set(by.values())
    gaps = [i for i in range(_size(doc)) if i not in taken][:1]
    lists = [[], [0], [0, 0, 0], gaps, [0, *gaps, 0]]
    if all(v is not None for v in byte.values()):
        lists += [[byte[0xC3], byte[0xA9]], [byte[0xC3]], [byte[0x41], byte[0xFF], byte[0x41]],
                  [byte[0xE2], byte[0x82], byte[0xAC], byte[0xFF]], [byte[0x20], byte[0x20]],
                  [byte[0xE9], byte[0x41]]]
    rng = random.Random(seed)
    size = _size(doc)
    for _ in range(n_random):
        k = rng.randint(1, 7)
        lists.append([rng.choice(interesting) if rng.random() < 0.7 else rng.randrange(size) for _ in range(k)])
    return lists


def _cases(tokenizers, base_name: str, base: dict, lists: list[list[int]]) -> list[dict]:
    out = []
    for vname, dec in VARIANTS.items():
        ref = tokenizers.Tokenizer.from_str(json.dumps({**base, "decoder": dec}))
        for ids in lists:
            for skip in (False, True):
                try:
                    text = ref.decode(ids, skip_special_tokens=skip)
                except BaseException:  # noqa: BLE001 - pyo3's PanicException derives from BaseException
                    text = None
                out.append({"base": base_name, "variant": vname, "skip": skip, "ids": ids, "text": text})
    return out


#: real files edited in memory with each variant: a SentencePiece-style one and a byte-level one
REAL_BASES = {"mistral-7b-v0.1": "hf/mistral-7b-v0.1/tokenizer.json", "gpt2": "hf/gpt2/tokenizer.json"}


def build() -> dict:
    import os
    import tokenizers

    os.environ["RUST_BACKTRACE"] = "0"  # a Strip panic prints one line, not a trace
    bases = {"sp": _sp_base(), "bl": _bl_base()}
    cases = []
    for name, base in bases.items():
        cases += _cases(tokenizers, name, base, id_lists(base, 14, seed=len(name)))
    real = {}
    for name, rel in REAL_BASES.items():
        raw = (real_dir() / rel).read_bytes()
        real[name] = hashlib.sha256(raw).hexdigest()
        base = json.loads(raw)
        cases += _cases(tokenizers, name, base, id_lists(base, 6, seed=len(name)))
    return {
        "banner": {
            "generator": "tools/make_decoder_fixtures.py",
            "reference": f"tokenizers {tokenizers.__version__}, Tokenizer.decode(ids, skip_special_tokens)",
            "do_not_edit": "rerun the generator",
        },
        "variants": VARIANTS,
        "bases": bases,
        "real": real,
        "cases": cases,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "fixtures" / "decoders.json")
    args = ap.parse_args(argv)
    doc = build()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, ensure_ascii=True, separators=(",", ":")) + "\n", encoding="ascii")
    print(f"{args.out}: {len(doc['cases'])} cases, {len(doc['variants'])} decoder chains")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
