"""Record how Hugging Face ``tokenizers`` fuses unknown characters (``fuse_unk``) per pre-tokenized word.

``tokenizers`` turns a run of characters outside the vocab into one unk token inside one call
of the BPE model (``models/bpe/model.rs``, ``BPE::merge_word``), i.e. inside one word of the
pre-tokenizer; two runs in neighbouring words stay two unks ("é12ü" under ``Digits``: é, 1, 2, ü
are four words, four ids). This builds small BPE tokenizer.json files with ``fuse_unk: true``,
an unk token, no byte fallback, and pre-tokenizers that cut words in different places, and
encodes a fixed set of texts (hand-picked edges plus seeded random strings over an alphabet of
known and unknown characters, digits, spaces and punctuation) with each. Three variants leave
"▁" itself out of the vocab, so a space is an unknown character that fuses with its neighbours.

Writes ``fixtures/fuse_unk.json``::

    {"generator": "tools/make_fuse_unk_fixtures.py", "reference": "tokenizers <version>",
     "variants": {name: <tokenizer.json as an object>},
     "cases": [{"variant": name, "text": str, "ids": [int]}]}

Usage: ``python tools/make_fuse_unk_fixtures.py [--out fixtures/fuse_unk.json] [--random 150]``
Needs: tokenizers (the ``reference`` extra). rmlprep's tests read the JSON, and a drift test reruns this script and compares.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SP = "\u2581"
#: Characters the texts are made of: known ones, unknown ones (é, ü, ☃, 日, 本 and, for the
#: byte-level variant, bytes whose alphabet character is left out of its vocab), digits,
#: spaces and punctuation.
ALPHABET = "ab ab1é2ü☃日本 .,!-\u00a0\t"
EDGES = ["é12ü", "é1ü", "éü", "é ü", "éü 日本", "a☃☃b", "☃.☃", "☃!!☃", "日本1日本", "é\u00a0ü", "é\tü", " é",
         "é ", "ééé ééé", "a-é-ü-b", "12éü34", "", "é", "☃ab☃", "1☃2☃3"]


def _sp_model(tokenizers, space: bool = True):
    """A SentencePiece-style BPE; ``space=False`` leaves "▁" out of the vocab (an unknown character too)."""
    vocab = {"a": 0, "b": 1, "ab": 2, SP: 3, SP + "a": 4, "1": 5, "2": 6, "<unk>": 7, ".": 8, ",": 9, "!": 10,
             "-": 11, "\t": 12, "\u00a0": 13}
    merges = [("a", "b"), (SP, "a")]
    if not space:
        vocab = {t: i for i, t in enumerate(t for t in vocab if SP not in t)}
        merges = merges[:1]
    return tokenizers.models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True, byte_fallback=False)


def _byte_level_model(tokenizers):
    from tokenizers.pre_tokenizers import ByteLevel

    alphabet = ByteLevel.alphabet()
    # the byte characters of é (C3 A9), ü (C3 BC), ☃ (E2 98 83) and 日 (E6 97 A5) left out:
    # those characters become unk runs inside a word
    b2u = {b: c for b, c in zip(sorted(range(256)), _bytes_to_unicode())}
    left_out = {b2u[b] for b in (0xC3, 0xA9, 0xBC, 0xE2, 0x98, 0x83, 0xE6, 0x97, 0xA5)}
    chars = sorted(c for c in alphabet if c not in left_out)
    vocab = {c: i for i, c in enumerate(chars)}
    vocab["<unk>"] = len(vocab)
    vocab["ab"] = len(vocab)
    vocab["\u0120a"] = len(vocab)
    return tokenizers.models.BPE(vocab=vocab, merges=[("a", "b"), ("\u0120", "a")], unk_token="<unk>",
                                 fuse_unk=True, byte_fallback=False)


def _bytes_to_unicode() -> list[str]:
    """GPT-2's byte alphabet, byte order (the same table as rmlprep.unicode.bytes_to_unicode)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)]


def variants(tokenizers) -> dict[str, object]:
    from tokenizers import Regex, normalizers, pre_tokenizers

    def sp(pre, norm=True, space=True):
        t = tokenizers.Tokenizer(_sp_model(tokenizers, space))
        if norm:
            t.normalizer = normalizers.Replace(" ", SP)
        if pre is not None:
            t.pre_tokenizer = pre
        return t

    out = {
        "digits-individual": sp(pre_tokenizers.Digits(individual_digits=True)),
        "digits-runs": sp(pre_tokenizers.Digits(individual_digits=False)),
        "split-punctuation": sp(pre_tokenizers.Split(Regex(r"\p{P}"), "isolated")),
        "split-space-isolated": sp(pre_tokenizers.Split(Regex(SP), "isolated"), norm=True),
        "split-unicode-letters": sp(pre_tokenizers.Split(Regex(r"\p{L}+|[^\p{L}]+"), "isolated")),
        "metaspace-split": sp(pre_tokenizers.Metaspace(split=True), norm=False),
        "metaspace-nosplit": sp(pre_tokenizers.Metaspace(split=False), norm=False),
        "no-pre-tokenizer": sp(None),
        "unknown-space-no-pre-tokenizer": sp(None, space=False),
        "unknown-space-metaspace-split": sp(pre_tokenizers.Metaspace(split=True), norm=False, space=False),
        "unknown-space-metaspace-nosplit": sp(pre_tokenizers.Metaspace(split=False), norm=False, space=False),
    }
    bl = tokenizers.Tokenizer(_byte_level_model(tokenizers))
    bl.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    bl.decoder = tokenizers.decoders.ByteLevel()
    out["byte-level-regex"] = bl
    return out


def main() -> None:
    import tokenizers

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "fixtures" / "fuse_unk.json"))
    ap.add_argument("--random", type=int, default=150, help="seeded random texts per variant")
    a = ap.parse_args()
    rng = random.Random(20261202)
    randoms = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 14))) for _ in range(a.random)]
    texts = EDGES + randoms
    vs = variants(tokenizers)
    out = {
        "generator": "tools/make_fuse_unk_fixtures.py",
        "reference": f"tokenizers {tokenizers.__version__}",
        "variants": {name: json.loads(t.to_str()) for name, t in vs.items()},
        "cases": [{"variant": name, "text": text, "ids": t.encode(text).ids} for name, t in vs.items() for text in texts],
    }
    Path(a.out).write_text(json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {a.out}: {len(out['cases'])} cases over {len(vs)} variants")


if __name__ == "__main__":
    main()
