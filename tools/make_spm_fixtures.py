"""Write SentencePiece parity fixtures: ids from the ``sentencepiece`` library on a fixed sample.

For each real ``.model`` file found under the real-tokenizers directory (env
``RMLPREP_REAL_TOKENIZERS``, default ``~/.cache/rmlprep-real-tokenizers``) this encodes a fixed
sample of texts with ``sentencepiece`` and writes ``fixtures/parity_spm/<name>.json``::

    {"generator": "tools/make_spm_fixtures.py", "reference": "sentencepiece <version>",
     "source": "<path inside the real-tokenizers dir>", "sha256": "<of the model file>",
     "parse_special": false,
     "debian_corpus": {"manifest_sha256": ..., "parts": {part: n}, "sample": ...} | null,
     "cases": [{"text": ..., "ids": [...]} | {"text": ..., "ids": [...], "part": ...}, ...]}

The sample (:func:`sample_texts`): the first documents of ``corpora/text-multilingual.jsonl`` and
message contents taken in turn from ``corpora/chat/*.jsonl`` (sorted file names, in file order),
each cut to at most ``max_bytes`` UTF-8 bytes at a character boundary, plus :data:`HARD_STRINGS`,
plus, when the Debian-built corpus is present (env ``RMLPREP_CORPUS``, default
``~/.cache/rmlprep-corpus``), the same Debian windows as ``tools/make_parity_fixtures.py``
(``debian_texts``: :data:`DEBIAN_PER_PART` per part, recorded with the part name; the banner
holds the corpus ``MANIFEST.tsv`` sha256).
The ids are ``sp.encode(text)`` (no BOS/EOS; sentencepiece never parses control pieces from
text, so rmlprep is compared with ``parse_special=False``, which the banner's ``parse_special``
says for every case: a run's parity stage finds the fixture by the model's sha256 and checks
it so, :mod:`rmlprep.parity`).

Usage: ``python tools/make_spm_fixtures.py [--out fixtures/parity_spm] [--docs 200]``.
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
if str(ROOT) not in sys.path:  # run as a script: tools/ is sys.path[0], the repo root is not
    sys.path.insert(0, str(ROOT))

from tools.make_parity_fixtures import corpus_dir, debian_manifest_sha256, debian_texts  # noqa: E402

#: Default number of shared-corpora texts and Debian windows per part (each fixture < 1.5 MB).
N_DOCS = 200
DEBIAN_PER_PART, DEBIAN_MAX_BYTES = 20, 1536

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


def make_fixture(model_path: Path, source: str, texts: list, debian: dict | None = None) -> dict:
    """Encode ``texts`` (str, or (part, str) for Debian windows) with sentencepiece; the fixture dict."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model_path))
    cases = []
    for item in texts:
        part, text = item if isinstance(item, tuple) else (None, item)
        case = {"text": text, "ids": sp.encode(text)}
        if part is not None:
            case["part"] = part
        cases.append(case)
    return {
        "generator": "tools/make_spm_fixtures.py",
        "reference": f"sentencepiece {spm.__version__}",
        "source": source,
        "sha256": sha256_file(model_path),
        "parse_special": False,  # sentencepiece never parses control pieces from text (rmlprep.parity)
        "debian_corpus": debian,
        "cases": cases,
    }


def write_fixtures(
    out_dir: Path, *, n_docs: int = N_DOCS, real_dir: Path | None = None, debian_base: Path | None = None
) -> list[Path]:
    """Write one fixture per real model found; returns the written paths."""
    real_dir = real_dir or real_tokenizers_dir()
    base = debian_base or corpus_dir()
    debian = debian_texts(per_part=DEBIAN_PER_PART, max_bytes=DEBIAN_MAX_BYTES, base=base)
    parts: dict[str, int] = {}
    for part, _ in debian:
        parts[part] = parts.get(part, 0) + 1
    banner = None if not debian else {
        "manifest_sha256": debian_manifest_sha256(base),
        "parts": parts,
        "sample": f"{DEBIAN_PER_PART} windows per part, cut to {DEBIAN_MAX_BYTES} bytes (debian_texts)",
    }
    texts = sample_texts(n_docs) + HARD_STRINGS + debian
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, rel in MODELS.items():
        model_path = real_dir / rel
        if not model_path.exists():
            print(f"skip {name}: {model_path} not found", file=sys.stderr)
            continue
        fx = make_fixture(model_path, rel, texts, banner)
        path = out_dir / f"{name}.json"
        with open(path, "w", encoding="utf-8") as f:
            json.dump(fx, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "fixtures" / "parity_spm")
    ap.add_argument("--docs", type=int, default=N_DOCS)
    args = ap.parse_args(argv)
    for path in write_fixtures(args.out, n_docs=args.docs):
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
