"""Train tiny tokenizers with the reference libraries and record the ids they give.

Writes ``fixtures/tokenizers/<name>.json``, one per tokenizer:

    {"generator": ..., "reference": "<library> <version>", "training_corpus_sha256": ...,
     "spec": <rmlprep TokenizerSpec.to_dict()>, "native": <the reference's own file, when small>,
     "cases": [{"text": str, "add_special_tokens": bool, "parse_special": bool, "ids": [int]}]}

The ``spec`` is converted here, field by field, from what the reference trainer produced (so
the core tests need no loader and no reference library); the ``ids`` come from the reference
library's own encode. Tokenizers:

- ``bl_llama3``: byte-level BPE, Llama 3 split pattern, vocab 600 (tokenizers).
- ``bl_qwen2``: byte-level BPE, Qwen2 split pattern, vocab 600 (tokenizers).
- ``bl_gpt2_digits``: byte-level BPE, GPT-2 pattern + individual digits, vocab 600 (tokenizers).
- ``sp_hf_bytefallback``: SentencePiece-style BPE with byte fallback, vocab 700 (tokenizers;
  Llama 2 style: Prepend("▁") + Replace(" ", "▁") normalizers, no pre-tokenizer).
- ``spm_bpe``: BPE trained by ``sentencepiece`` itself, vocab 500, scores as GGUF stores
  them, byte fallback, one user-defined symbol.

Usage: ``python tools/make_tokenizer_fixtures.py [--out fixtures/tokenizers]``
Needs: tokenizers, sentencepiece, regex (the ``reference`` extra); reads ../shared/corpora.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rmlprep.pretokenize import GPT2_PATTERN, LLAMA3_PATTERN, QWEN2_PATTERN  # noqa: E402
from rmlprep.spec import BYTE_LEVEL, SENTENCEPIECE, TokenType  # noqa: E402
from rmlprep.unicode import bytes_to_unicode  # noqa: E402

SHARED = ROOT.parent / "shared"
DIGITS_INDIVIDUAL = r"\p{N}"

TEST_STRINGS = [
    "",
    "Hello world",
    "Hello, world! How's it going? I'm fine, they're here, we've been, you'll see, he'd go.",
    "HOW'S IT GOING? I'M FINE THEY'RE WE'VE YOU'LL HE'D",
    "  leading and trailing spaces   ",
    "tabs\tand\nnewlines\n\n\nand\r\nCRLF\r\n",
    "numbers 1 12 123 1234 12345 123456 1234567 3.14159 1,000,000",
    "Ünïcödé naïve café résumé Ærøskøbing",
    "Здравствуй, мир! Как дела?",
    "你好，世界！今天天气很好。",
    "こんにちは世界、カタカナとひらがな。",
    "مرحبا بالعالم",
    "emoji 😀👍🏽 family 👨‍👩‍👧‍👦 flags 🇩🇪🇯🇵",
    "def f(x):\n    return x ** 2  # square\n",
    "if (a != b && c <= d) { return a->b[0]; }",
    "no\u00a0break\u2009thin\u3000ideographic spaces",
    "combining e\u0301 a\u0300 o\u0308",
    "the 'ſ contraction and the Kelvin 'K",
    "<|begin_of_text|>special<|eot_id|> in text",
    "<s>[INST] hello [/INST] answer </s>",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "    indented code\n        more\n",
    "x" * 3 + " " * 7 + "y",
    "trailing newline\n",
    "mixed 123abc456 def789",
    "🤖 robots speak 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math",
    "\x00\x01\x7f control bytes \x1b[31mred\x1b[0m",
    "Wikipedia: The quick brown fox jumps over the lazy dog.",
]


def corpus_texts(limit: int = 400) -> list[str]:
    """A small mixed-language training corpus from ../shared/corpora (fixed order)."""
    texts = []
    with open(SHARED / "corpora" / "text-multilingual.jsonl", encoding="utf-8", newline="\n") as f:
        for i, line in enumerate(f.read().split("\n")):
            if not line.strip():
                continue
            if i % 2 == 0:
                texts.append(json.loads(line)["text"][:3000])
            if len(texts) >= limit:
                break
    texts += TEST_STRINGS[1:]
    return texts


def _hf_cases(tok, texts):
    cases = []
    for t in texts:
        for add in (False, True):
            ids = tok.encode(t, add_special_tokens=add).ids
            cases.append({"text": t, "add_special_tokens": add, "parse_special": True, "ids": ids})
    return cases


def train_byte_level(name: str, patterns: list[str], texts: list[str]):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    pre = [pre_tokenizers.Split(Regex(p), behavior="isolated") for p in patterns]
    pre.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence(pre)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)]
    )
    data = json.loads(tok.to_str())
    vocab_map = data["model"]["vocab"]
    n = max(vocab_map.values()) + 1
    vocab = [None] * n
    for t, i in vocab_map.items():
        vocab[i] = t
    types = [int(TokenType.NORMAL)] * n
    for a in data["added_tokens"]:
        vocab[a["id"]] = a["content"]
        types[a["id"]] = int(TokenType.CONTROL if a["special"] else TokenType.USER_DEFINED)
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in data["model"]["merges"]]
    spec = {
        "kind": BYTE_LEVEL,
        "vocab": vocab,
        "token_types": types,
        "merges": [list(m) for m in merges],
        "pre_split": list(patterns),
        "bos_id": bos,
        "eos_id": tok.token_to_id("<|end_of_text|>"),
        "eot_ids": [tok.token_to_id("<|eot_id|>")],
        "add_bos": True,
        "name": name,
    }
    return spec, tok, data


def train_sp_hf(texts: list[str]):
    """Llama-2-style BPE with byte fallback, trained with tokenizers."""
    from tokenizers import Tokenizer, decoders, models, normalizers, processors, trainers

    specials = ["<unk>", "<s>", "</s>"]
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trainer = trainers.BpeTrainer(
        vocab_size=700 - 256, special_tokens=specials, limit_alphabet=120, show_progress=False
    )
    tok.train_from_iterator(texts, trainer)
    data = json.loads(tok.to_str())
    # put the 256 byte tokens after the specials, as Llama 2 does, and renumber the rest
    old = sorted(data["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = [t for t, _ in old[:3]] + byte_tokens + [t for t, _ in old[3:]]
    data["model"]["vocab"] = {t: i for i, t in enumerate(vocab)}
    data["added_tokens"] = [
        {"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, t in enumerate(specials)
    ]
    data["decoder"] = json.loads(
        decoders.Sequence(
            [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
        ).__getstate__()
    )
    data["post_processor"] = json.loads(
        processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)]).__getstate__()
    )
    tok = Tokenizer.from_str(json.dumps(data))
    types = [int(TokenType.UNKNOWN), int(TokenType.CONTROL), int(TokenType.CONTROL)]
    types += [int(TokenType.BYTE)] * 256 + [int(TokenType.NORMAL)] * (len(vocab) - 259)
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in data["model"]["merges"]]
    spec = {
        "kind": SENTENCEPIECE,
        "vocab": vocab,
        "token_types": types,
        "merges": [list(m) for m in merges],
        "unk_id": 0,
        "bos_id": 1,
        "eos_id": 2,
        "add_bos": True,
        "byte_fallback": True,
        "fuse_unk": True,
        "add_prefix_space": True,
        "prefix_scheme": "always",
        "prefix_if_missing": False,
        "decode_strip_prefix": "text",
        "name": "sp_hf_bytefallback",
    }
    return spec, tok, data


def train_spm(texts: list[str]):
    """BPE trained by sentencepiece (scores, byte fallback, one user-defined symbol)."""
    import sentencepiece as spm

    # mostly-Latin documents, so 500 pieces cover the required characters; the rest of the
    # world's scripts then exercise byte fallback
    texts = [t for t in texts if sum(c < "\u0250" for c in t) >= 0.97 * len(t)]
    with tempfile.TemporaryDirectory() as d:
        inp = Path(d) / "corpus.txt"
        inp.write_text("\n".join(t.replace("\r", " ") for t in texts), encoding="utf-8")
        spm.SentencePieceTrainer.train(
            input=str(inp),
            model_prefix=str(Path(d) / "m"),
            model_type="bpe",
            vocab_size=500,
            byte_fallback=True,
            character_coverage=0.98,
            normalization_rule_name="identity",
            add_dummy_prefix=True,
            remove_extra_whitespaces=False,
            user_defined_symbols=["<tool>"],
            split_digits=False,
            minloglevel=2,
        )
        sp = spm.SentencePieceProcessor(model_file=str(Path(d) / "m.model"))
    vocab, types, scores = [], [], []
    for i in range(sp.get_piece_size()):
        vocab.append(sp.id_to_piece(i))
        scores.append(sp.get_score(i))
        if sp.is_unknown(i):
            t = TokenType.UNKNOWN
        elif sp.is_control(i):
            t = TokenType.CONTROL
        elif sp.is_byte(i):
            t = TokenType.BYTE
        elif sp.is_unused(i):
            t = TokenType.UNUSED
        elif vocab[-1] == "<tool>":
            t = TokenType.USER_DEFINED
        else:
            t = TokenType.NORMAL
        types.append(int(t))
    spec = {
        "kind": SENTENCEPIECE,
        "vocab": vocab,
        "token_types": types,
        "scores": scores,
        "unk_id": sp.unk_id(),
        "bos_id": sp.bos_id(),
        "eos_id": sp.eos_id(),
        "add_bos": True,
        "byte_fallback": True,
        "add_prefix_space": True,
        "prefix_scheme": "whole_text",
        "prefix_if_missing": False,
        "parse_user_defined_always": True,
        "decode_strip_prefix": "text",
        "name": "spm_bpe",
    }
    cases = []
    for t in TEST_STRINGS + ["<tool>call", "x<tool>y", " <tool> "]:
        cases.append({"text": t, "add_special_tokens": False, "parse_special": False, "ids": sp.encode(t)})
        cases.append({"text": t, "add_special_tokens": True, "parse_special": False, "ids": [sp.bos_id(), *sp.encode(t)]})
    return spec, cases, spm.__version__


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "fixtures" / "tokenizers"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import tokenizers

    texts = corpus_texts()
    corpus_sha = hashlib.sha256("\n".join(texts).encode("utf-8", "surrogatepass")).hexdigest()
    banner = "generated by tools/make_tokenizer_fixtures.py; do not edit"
    test_texts = TEST_STRINGS + [t[:400] for t in texts[:40:4]]

    jobs = [
        ("bl_llama3", [LLAMA3_PATTERN]),
        ("bl_qwen2", [QWEN2_PATTERN]),
        ("bl_gpt2_digits", [GPT2_PATTERN, DIGITS_INDIVIDUAL]),
    ]
    for name, pats in jobs:
        spec, tok, _data = train_byte_level(name, pats, texts)
        write(out / f"{name}.json", banner, f"tokenizers {tokenizers.__version__}", corpus_sha, spec,
              _hf_cases(tok, test_texts))
    spec, tok, _data = train_sp_hf(texts)
    write(out / "sp_hf_bytefallback.json", banner, f"tokenizers {tokenizers.__version__}", corpus_sha, spec,
          _hf_cases(tok, test_texts))
    spec, cases, ver = train_spm(texts)
    write(out / "spm_bpe.json", banner, f"sentencepiece {ver}", corpus_sha, spec, cases)


def write(path: Path, banner, reference, corpus_sha, spec, cases) -> None:
    doc = {"generator": banner, "reference": reference, "training_corpus_sha256": corpus_sha,
           "spec": spec, "cases": cases}
    path.write_text(json.dumps(doc, ensure_ascii=False, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {path} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
