"""Write SentencePiece parity fixtures: ids from the ``sentencepiece`` library on a fixed sample.

For each real ``.model`` file found under the real-tokenizers directory (env
``RMLPREP_REAL_TOKENIZERS``, default ``~/.cache/rmlprep-real-tokenizers``) this encodes a fixed
sample of texts with ``sentencepiece`` and writes ``fixtures/parity_spm/<name>.json``::

    {"generator": "tools/make_spm_fixtures.py", "reference": "sentencepiece <version>",
     "source": "<path inside the real-tokenizers dir>", "sha256": "<of the model file>",
     "cases": [{"text": ..., "ids": [...]}, ...]}

The sample (:func:`sample_texts`): the first documents of ``corpora/text-multilingual.jsonl`` and
message contents taken in turn from ``corpora/chat/*.jsonl`` (sorted file names, in file order),
each cut to at most ``max_bytes`` UTF-8 bytes at a character boundary, plus :data:`HARD_STRINGS`.
The ids are ``sp.encode(text)`` (no BOS/EOS; sentencepiece never parses control pieces from
text, so rmlprep is compared with ``parse_special=False``).

Usage: ``python tools/make_spm_fixtures.py [--out fixtures/parity_spm] [--docs 300]``.
Needs the ``sentencepiece`` package; rmlprep's tests only read the written JSON.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
CORPORA = SHARED / "corpora"

#: The real SentencePiece models compared: fixture name -> path inside the real-tokenizers dir.
MODELS = {
    "llama2": "llama2/tokenizer.model",
    "mistral-v1": "mistral/tokenizer.model.v1",
    "mistral-v3": "mistral/tokenizer.model.v3",
}

#: Strings that exercise the edges: whitespace runs, the "▁" character itself, control and
#: user-defined piece text, byte fallback (characters outside the vocab), mixed scripts.
HARD_STRINGS = [
    "",
    " ",
    "  ",
    "   leading and trailing   ",
    "\n",
    "\n\n\n",
    "\t\tindented\n\tcode",
    "\r\n windows\r\nline ends",
    "\u2581",
    "\u2581\u2581x\u2581 y",
    " \u2581 ",
    "Hello world",
    " Hello world",
    "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～",
    "<s>",
    "</s>",
    "<unk>",
    "<s> hello </s>",
    "[INST] What is 2+2? [/INST] 4</s>",
    "[INST][/INST][TOOL_CALLS]",
    "[REFERENCE_DOC_1]",
    "x[REFERENCE_DOC_12]y [REFERENCE_DOC_1] [REFERENCE_DOC_19]",
    "[REFERENCE_DOC_1][REFERENCE_DOC_2]",
    "🦙🦙🦙 llama.cpp",
    "\U0001F9D1\u200D\U0001F52C scientist",
    "\ue000\uf8ff private use",
    "\x00\x01\x7f control chars",
    "e\u0301 combining, \u00e9 composed, \ufb01 ligature",
    "ﾊﾝｶｸ full-width ＡＢＣ",
    "نص عربي مع أرقام ١٢٣",
    "हिन्दी पाठ",
    "ქართული ენა",
    "ᚠᛇᚻ runes",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math letters",
    "3333333333 1,234,567.89 0x1F",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "a " * 200,
    "def f(x):\n    return x  # comment\n",
]


def real_tokenizers_dir() -> Path:
    """The real-tokenizers directory: env ``RMLPREP_REAL_TOKENIZERS`` or the default cache."""
    env = os.environ.get("RMLPREP_REAL_TOKENIZERS")
    return Path(env) if env else Path.home() / ".cache" / "rmlprep-real-tokenizers"


def cut_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 form has at most ``max_bytes`` bytes."""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= max_bytes:
        return text
    return raw[:max_bytes].decode("utf-8", "ignore")


def _chat_contents(corpora: Path):
    """Message contents from each chat file, taken in turn (round robin over sorted files)."""
    iters = []
    for f in sorted((corpora / "chat").glob("*.jsonl")):
        def gen(f=f):
            with open(f, encoding="utf-8") as fh:
                for line in fh:
                    if not line.strip():
                        continue
                    for msg in json.loads(line).get("messages", []):
                        c = msg.get("content")
                        if isinstance(c, str) and c:
                            yield c
        iters.append(gen())
    while iters:
        for it in list(iters):
            try:
                yield next(it)
            except StopIteration:
                iters.remove(it)


def sample_texts(n_docs: int, *, max_bytes: int = 2048, corpora: Path = CORPORA) -> list[str]:
    """A fixed sample of real texts: half multilingual documents, half chat messages.

    Args:
        n_docs: number of corpus texts (the multilingual file gives at most its line count;
            chat contents fill the rest).
        max_bytes: each text is cut to at most this many UTF-8 bytes.
    Returns:
        ``n_docs`` texts (fewer if the corpora are smaller), deterministic.
    """
    out: list[str] = []
    n_text = n_docs // 2
    with open(corpora / "text-multilingual.jsonl", encoding="utf-8") as fh:
        for line in fh:
            if len(out) >= n_text:
                break
            if line.strip():
                out.append(cut_utf8(json.loads(line)["text"], max_bytes))
    for c in _chat_contents(corpora):
        if len(out) >= n_docs:
            break
        out.append(cut_utf8(c, max_bytes))
    return out


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def make_fixture(model_path: Path, source: str, texts: list[str]) -> dict:
    """Encode ``texts`` with sentencepiece and return the fixture dict."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model_path))
    return {
        "generator": "tools/make_spm_fixtures.py",
        "reference": f"sentencepiece {spm.__version__}",
        "source": source,
        "sha256": sha256_file(model_path),
        "cases": [{"text": t, "ids": sp.encode(t)} for t in texts],
    }


def write_fixtures(out_dir: Path, *, n_docs: int = 300, real_dir: Path | None = None) -> list[Path]:
    """Write one fixture per real model found; returns the written paths."""
    real_dir = real_dir or real_tokenizers_dir()
    texts = sample_texts(n_docs) + HARD_STRINGS
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, rel in MODELS.items():
        model_path = real_dir / rel
        if not model_path.exists():
            print(f"skip {name}: {model_path} not found", file=sys.stderr)
            continue
        fx = make_fixture(model_path, rel, texts)
        path = out_dir / f"{name}.json"
        with open(path, "w", encoding="utf-8") as f:
            json.dump(fx, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "fixtures" / "parity_spm")
    ap.add_argument("--docs", type=int, default=300)
    args = ap.parse_args(argv)
    for path in write_fixtures(args.out, n_docs=args.docs):
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
