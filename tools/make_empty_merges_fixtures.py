"""Record what Hugging Face ``tokenizers`` encodes with a BPE model whose ``merges`` is empty.

A character-level (or byte-level) vocab shipped as a tokenizer.json BPE with ``"merges": []``
is one ``tokenizers`` loads and encodes: every pre-tokenized word becomes its characters' ids
(byte-level: its bytes'), an unknown character the unk token (one per run with ``fuse_unk``),
``<0xXX>`` bytes with ``byte_fallback``, or nothing without either; a longer token of the vocab
is never produced (nothing merges into it) unless ``ignore_merges`` takes a whole word that is
a token. A BPE with merges and ``"dropout": 1.0`` encodes alike: every merge is dropped and
the whole-word lookup skipped (``BPE::tokenize`` takes the dropout path). This builds such files (SentencePiece-style Metaspace with and without an unk token,
``fuse_unk``, ``byte_fallback`` and ``ignore_merges``, Llama 2's normalizer form, and
byte-level with and without ``ignore_merges``, and dropout 1 over merges that build the long
tokens, with ``ignore_merges`` too), each with a few multi-character tokens that
only ``ignore_merges`` may reach, and encodes a fixed set of texts with each: hand-picked
edges plus the first lines of ``../shared/corpora/text-multilingual.jsonl`` (cut to 200
characters), whose first 4,000 characters make the character vocab (later lines hold
characters outside it).

Writes ``fixtures/empty_merges.json``::

    {"generator": "tools/make_empty_merges_fixtures.py", "reference": "tokenizers <version>",
     "corpus": {"path", "sha256", "lines"}, "variants": {name: <tokenizer.json as an object>},
     "cases": [{"variant": name, "text": str, "ids": [int], "decoded": str}]}

Usage: ``python tools/make_empty_merges_fixtures.py [--out fixtures/empty_merges.json]``
Needs: tokenizers (the ``reference`` extra). rmlprep's tests read the JSON, and a drift test
reruns this script and compares.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpora" / "text-multilingual.jsonl"
LINES = 30
SP = "\u2581"
EDGES = ["", " ", "the thing", " the  the", "ing", SP + "the", "thethe", "日本語 the", "a\u00a0b", "☃", "x☃☃y",
         "the\n\nthe", "  leading", "trailing  ", "é" * 5]
#: tokens no merge reaches (only ignore_merges may take them, as whole words)
LONG = ["the", "th", "he", "ing", "thing"]


def corpus_lines() -> list[str]:
    out = []
    with CORPUS.open(encoding="utf-8") as f:
        for line in f:
            out.append(json.loads(line)["text"][:200])
            if len(out) == LINES:
                break
    return out


def variants(tokenizers, chars: str) -> dict[str, object]:
    from tokenizers import decoders, models, normalizers, pre_tokenizers

    def merges(space: str) -> list[tuple[str, str]]:
        """Merges that build the LONG tokens (for the dropout variants, where none applies)."""
        return [("t", "h"), ("th", "e"), ("h", "e"), ("th", "ing"), (space, "the")]

    def sp(unk=True, fuse=False, fallback=False, ignore=False, llama2=False, dropout=None):
        vocab = {"<unk>": 0} if unk else {}
        for c in [SP, *chars]:
            if c != " ":
                vocab.setdefault(c, len(vocab))
        for w in LONG + [SP + w for w in LONG]:
            vocab.setdefault(w, len(vocab))
        if fallback:
            for b in range(256):
                vocab.setdefault(f"<0x{b:02X}>", len(vocab))
        t = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=merges(SP) if dropout else [],
                                            unk_token="<unk>" if unk else None, fuse_unk=fuse,
                                            byte_fallback=fallback, ignore_merges=ignore, dropout=dropout))
        if llama2:
            t.normalizer = normalizers.Sequence([normalizers.Prepend(SP), normalizers.Replace(" ", SP)])
        else:
            t.pre_tokenizer = pre_tokenizers.Metaspace()
        t.decoder = decoders.Metaspace()
        return t

    def bl(ignore=False, dropout=None):
        vocab = {c: i for i, c in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
        for w in LONG + ["\u0120" + w for w in LONG]:
            vocab.setdefault(w, len(vocab))
        t = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=merges("\u0120") if dropout else [],
                                            ignore_merges=ignore, dropout=dropout))
        t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        t.decoder = decoders.ByteLevel()
        return t

    return {
        "metaspace-unk": sp(),
        "metaspace-fuse-unk": sp(fuse=True),
        "metaspace-no-unk": sp(unk=False),
        "metaspace-byte-fallback": sp(fallback=True),
        "metaspace-ignore-merges": sp(ignore=True),
        "llama2-normalizer": sp(llama2=True),
        "byte-level": bl(),
        "byte-level-ignore-merges": bl(ignore=True),
        "metaspace-dropout-1": sp(dropout=1.0),
        "metaspace-dropout-1-ignore-merges": sp(ignore=True, dropout=1.0),
        "byte-level-dropout-1-ignore-merges": bl(ignore=True, dropout=1.0),
    }


def main() -> None:
    import tokenizers

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "fixtures" / "empty_merges.json"))
    a = ap.parse_args()
    lines = corpus_lines()
    chars = "".join(sorted(set("".join(lines)[:4_000])))
    texts = EDGES + lines
    vs = variants(tokenizers, chars)
    out = {
        "generator": "tools/make_empty_merges_fixtures.py",
        "reference": f"tokenizers {tokenizers.__version__}",
        "corpus": {"path": "../shared/corpora/text-multilingual.jsonl",
                   "sha256": hashlib.sha256(CORPUS.read_bytes()).hexdigest(), "lines": LINES},
        "variants": {name: json.loads(t.to_str()) for name, t in vs.items()},
        "cases": [{"variant": name, "text": text, "ids": (ids := t.encode(text).ids), "decoded": t.decode(ids)}
                  for name, t in vs.items() for text in texts],
    }
    Path(a.out).write_text(json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {a.out}: {len(out['cases'])} cases over {len(vs)} variants")


if __name__ == "__main__":
    main()
