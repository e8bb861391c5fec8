"""Record what Hugging Face ``tokenizers`` encodes when an added token's kind is not what its BPE
model sees: a special token that ``model.vocab`` also holds, or a token it lacks.

tokenizers' BPE model looks characters and (``ignore_merges``) whole words up in ``model.vocab``
alone: a special added token it holds (a trainer's special tokens, or a vocab entry added again
as special) is a symbol like any other there, and an added token it lacks is none, even when the
text reaching the model spells it (with ``encode_special_tokens``, or after a normalizer). This
builds such files, each a small character vocab from the corpus with a few merges:

- Metaspace (and Llama 2's normalizer form, and Lowercase) with ``"▁"``, ``"é"``, ``"a"``,
  ``"\\n"`` in model.vocab, added again as special tokens;
- Metaspace with Lowercase and one-character non-special added tokens model.vocab lacks
  (``"ǆ"``: ``"Ǆ"`` lowercases to it);
- ByteLevel without its regex (a text is one word), ``ignore_merges`` and special tokens in
  model.vocab (the text ``"<pad>"``), and with Lowercase and ``"hola"`` added outside model.vocab (the text ``"HOLA"``);

and encodes a fixed set of texts with each, with and without ``encode_special_tokens``:
hand-picked edges plus the first lines of ``../shared/corpora/text-multilingual.jsonl`` (cut to
200 characters), whose first 4,000 characters make the character vocab.

Writes ``fixtures/model_vocab_specials.json``::

    {"generator": "tools/make_model_vocab_specials_fixtures.py", "reference": "tokenizers <version>",
     "corpus": {"path", "sha256", "lines"}, "variants": {name: <tokenizer.json as an object>},
     "cases": [{"variant": name, "text": str, "special_as_text": bool, "ids": [int]}]}

Usage: ``python tools/make_model_vocab_specials_fixtures.py [--out fixtures/model_vocab_specials.json]``
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
LINES = 20
SP = "\u2581"
EDGES = ["", "a", "é", "É", "aéb", "AÉB", " a", "\n", "a\nb", "<pad>", " <pad> x", "hello <pad> world", "HELLO World", "HELLO", "hello", "HOLA", "Hola", "hola",
         "Hello hello", "ǆ", "Ǆ", "xǄy", "ǅ", "the thing", "  two  spaces ", "\u2581a", "éé aa"]
WORDS = ["th", "the", "he", "in", "ing", "hello", "world"]


def corpus_lines() -> list[str]:
    out = []
    with CORPUS.open(encoding="utf-8") as f:
        for line in f:
            out.append(json.loads(line)["text"][:200])
            if len(out) == LINES:
                break
    return out


def variants(chars: str) -> dict[str, object]:
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers

    merges = [("t", "h"), ("th", "e"), ("h", "e"), ("i", "n"), ("in", "g"), ("e", "l"), ("el", "l"), ("h", "ell"),
              ("hell", "o"), ("w", "o"), ("wo", "r"), ("wor", "l"), ("worl", "d")]

    def vocab(space: str, extra=()) -> dict[str, int]:
        v = {"<unk>": 0, "<pad>": 1}
        for c in [space, "\n", *chars, *extra]:
            if c != " ":
                v.setdefault(c, len(v))
        for a, b in merges:
            v.setdefault(a, len(v))
            v.setdefault(b, len(v))
            v.setdefault(a + b, len(v))
        for w in WORDS:
            v.setdefault(w, len(v))
        return v

    def sp(specials, users=(), lower=False, llama2=False):
        t = Tokenizer(models.BPE(vocab=vocab(SP, "éa"), merges=merges, unk_token="<unk>", fuse_unk=True))
        steps = [normalizers.Lowercase()] if lower else []
        if llama2:
            steps += [normalizers.Prepend(SP), normalizers.Replace(" ", SP)]
        else:
            t.pre_tokenizer = pre_tokenizers.Metaspace()
        if steps:
            t.normalizer = normalizers.Sequence(steps)
        t.decoder = decoders.Metaspace()
        t.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in specials])
        t.add_tokens([AddedToken(s, normalized=False, special=False) for s in users])
        return t

    def bl(specials, users=(), lower=False):
        alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
        v = {"<unk>": 0, "<pad>": 1, **{c: i + 2 for i, c in enumerate(alphabet)}}
        for a, b in merges:
            for w in (a, b, a + b):
                v.setdefault(w, len(v))
        t = Tokenizer(models.BPE(vocab=v, merges=merges, ignore_merges=True))
        if lower:
            t.normalizer = normalizers.Lowercase()
        t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)  # a text is one word
        t.decoder = decoders.ByteLevel()
        t.add_special_tokens([AddedToken(s, normalized=False, special=True) for s in specials])
        t.add_tokens([AddedToken(s, normalized=False, special=False) for s in users])
        return t

    in_vocab = ["<unk>", "<pad>", SP, "é", "a", "\n"]
    return {
        "metaspace-specials-in-vocab": sp(in_vocab),
        "metaspace-lowercase-specials-in-vocab": sp(in_vocab, lower=True),
        "llama2-normalizer-specials-in-vocab": sp(in_vocab, llama2=True),
        "metaspace-lowercase-user-outside-vocab": sp(["<unk>"], users=["ǆ", "ⓧ"], lower=True),
        "byte-level-ignore-merges-specials-in-vocab": bl(["<unk>", "<pad>"]),
        "byte-level-ignore-merges-lowercase-user-outside-vocab": bl(["<unk>"], users=["hola", "ǆ"], lower=True),
    }


def main() -> None:
    import tokenizers

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "fixtures" / "model_vocab_specials.json"))
    a = ap.parse_args()
    lines = corpus_lines()
    chars = "".join(sorted(set("".join(lines)[:4_000])))
    texts = EDGES + lines
    vs = variants(chars)
    cases = []
    for name, t in vs.items():
        for as_text in (False, True):
            t.encode_special_tokens = as_text
            cases += [{"variant": name, "text": x, "special_as_text": as_text, "ids": t.encode(x).ids} for x in texts]
    out = {
        "generator": "tools/make_model_vocab_specials_fixtures.py",
        "reference": f"tokenizers {tokenizers.__version__}",
        "corpus": {"path": "../shared/corpora/text-multilingual.jsonl",
                   "sha256": hashlib.sha256(CORPUS.read_bytes()).hexdigest(), "lines": LINES},
        "variants": {name: json.loads(t.to_str()) for name, t in vs.items()},
        "cases": cases,
    }
    Path(a.out).write_text(json.dumps(out, ensure_ascii=False, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {a.out}: {len(cases)} cases over {len(vs)} variants")


if __name__ == "__main__":
    main()
