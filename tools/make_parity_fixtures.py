"""Write fixtures/parity/<name>.json: reference-library ids of real tokenizers on a fixed sample.

For every real tokenizer.json (``$RMLPREP_REAL_TOKENIZERS/hf/*/tokenizer.json``, default dir
``~/.cache/rmlprep-real-tokenizers``, fetched by ``../shared/real-tokenizers/get.sh``) the ids come
from Hugging Face ``tokenizers``; for the tiktoken rank files (gpt2, llama3) from ``tiktoken``
with the encoding's pattern and special tokens. The sample is fixed (no randomness): documents
of ``../shared/corpora/text-multilingual.jsonl`` and message contents of
``../shared/corpora/chat/*.jsonl``, each cut to at most 2 KB of UTF-8, plus hard strings, plus,
when the Debian-built corpus is present (env ``RMLPREP_CORPUS``, default
``~/.cache/rmlprep-corpus``, built by ``make_text_corpus.sh``), :data:`DEBIAN_PER_PART` documents
of each of its parts (:func:`debian_texts`), recorded with their part name. The fixture banner
records the corpus ``MANIFEST.tsv`` sha256 (or null when the corpus was absent), so the output
is a function of the generator, the real files, the corpora and that manifest.

The default test run (tests/test_hf.py, tests/test_tiktoken_file.py) loads the same real files
with rmlprep and compares with these ids, so it needs no reference library.

Usage: python tools/make_parity_fixtures.py [--out fixtures/parity] [--only NAME ...]
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
CORPORA = Path(os.environ.get("RMLPREP_CORPORA", SHARED / "corpora"))
GENERATOR = "tools/make_parity_fixtures.py"

#: Strings that break tokenizers: whitespace runs, CRLF, emoji ZWJ sequences, digits,
#: contractions, special-token text, lone combining marks, byte-fallback characters.
HARD_STRINGS = [
    "",
    " ",
    "  ",
    "\n",
    "\n\n\n",
    "\r\n",
    "line one\r\nline two\r\n\r\n  indented\r\n",
    "\t\ttabs\tand  spaces   \n  \n",
    "trailing spaces   ",
    "   leading spaces",
    "a\u00a0b\u2009c\u3000d",
    "Hello world!",
    "hello    world",
    "I'm sure they'll say we've done what you'd've THEY'RE IT'S",
    "12345678901234567890 3.14159 1,000,000 ١٢٣٤ ௧௨௩ ½ ²³",
    "2024-01-01T12:34:56Z v1.2.3 0x1F 1e-9",
    "👨‍👩‍👧‍👦 family, 🏳️‍🌈 flag, 👍🏽 thumbs, 🧑‍💻 coder",
    "emoji at end 😀",
    "日本語のテキストと中文文本和한국어 텍스트",
    "Ελληνικά, русский, עברית, العربية, हिन्दी, ไทย",
    "e\u0301 a\u0308 \u0301lone combining",
    "ﬁ ligature, Ｆｕｌｌｗｉｄｔｈ, ① circled",
    "<|endoftext|>",
    "text<|endoftext|>more text",
    "<s>hello</s> <unk> <pad>",
    "<bos>hi<eos> <start_of_turn>user\nhi<end_of_turn>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>",
    "<|user|>\nHello<|end|>\n<|assistant|>\n",
    "<|user|>  spaces after<|end|>  \n",
    "<|endoftext|><|endoftext|>",
    "def f(x):\n    return x ** 2  # comment\n\n\nclass A:\n\tpass\n",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
    "https://example.com/path?query=1&b=2#frag",
    "a" * 300,
    "ab " * 100,
    "!!!???...,,,;;;:::---___===+++",
    "\u2581leading metaspace and ▁▁double",
    "\x00\x01\x1f control chars \x7f",
    "\U0001F600\U0010FFFF\ue000 private use and max code point",
]


def _cut(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 is at most ``max_bytes`` bytes."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode("utf-8", "ignore")


def corpus_texts(*, n_text: int, n_chat: int, max_bytes: int) -> list[str]:
    """A fixed sample of real documents: text-multilingual.jsonl then chat message contents.

    Documents are taken at even strides through each file (deterministic), cut to
    ``max_bytes`` of UTF-8; empty contents are skipped.

    Raises:
        FileNotFoundError: the corpora directory is missing.
    """
    texts: list[str] = []
    rows = [json.loads(line) for line in open(CORPORA / "text-multilingual.jsonl", encoding="utf-8")]
    step = max(1, len(rows) // max(1, n_text))
    for row in rows[::step][:n_text]:
        texts.append(_cut(row["text"], max_bytes))
    messages: list[str] = []
    chat_files = sorted((CORPORA / "chat").glob("*.jsonl"))
    per_file = max(1, n_chat // max(1, len(chat_files)))
    for path in chat_files:
        contents = []
        for line in open(path, encoding="utf-8"):
            for m in json.loads(line).get("messages", []):
                c = m.get("content")
                if isinstance(c, str) and c:
                    contents.append(c)
        step = max(1, len(contents) // per_file)
        messages.extend(_cut(c, max_bytes) for c in contents[::step][:per_file])
    return texts + messages[:n_chat]


def corpus_dir() -> Path:
    """The Debian-built corpus (env RMLPREP_CORPUS, else ``~/.cache/rmlprep-corpus``)."""
    env = os.environ.get("RMLPREP_CORPUS")
    return Path(env) if env else Path.home() / ".cache" / "rmlprep-corpus"


def debian_manifest_sha256(base: Path | None = None) -> str | None:
    """sha256 of the corpus ``MANIFEST.tsv`` (package versions and hashes), None when absent."""
    path = (base or corpus_dir()) / "MANIFEST.tsv"
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def corpus_mismatch(banner: dict | None) -> str | None:
    """Why the Debian-built corpus cannot regenerate fixtures whose banner is ``banner`` (their
    ``debian_corpus``: None when they hold no corpus windows): absent, or another MANIFEST.tsv
    sha256; None when it can. The drift tests skip with it."""
    have = debian_manifest_sha256()
    if banner is not None and have is None:
        return (f"the fixtures include Debian-built corpus windows, but {corpus_dir()} is absent "
                "(build it with make_text_corpus.sh or set RMLPREP_CORPUS)")
    if banner is not None and have != banner["manifest_sha256"]:
        return (f"{corpus_dir()}/MANIFEST.tsv sha256 {have} differs from the fixtures' "
                f"{banner['manifest_sha256']}: a different corpus cannot regenerate them")
    return None


def debian_texts(*, per_part: int, max_bytes: int, base: Path | None = None) -> list[tuple[str, str]]:
    """A fixed sample of the Debian-built corpus: ``per_part`` windows of each part, as (part, text).

    Parts are ``parts/*.jsonl`` in sorted order (code, docs_en, fortunes, gflanguages, handbook,
    manpages, pydocs, reference, unicode). A part with ``k`` documents yields ``w = ceil(per_part
    / k)`` windows per document, at byte offsets ``j * len / w`` (``j < w``; one window at offset
    0 when ``k >= per_part``), each at most ``max_bytes`` of UTF-8 cut at character boundaries;
    ``per_part`` of these are taken at an even stride, so parts of 2 or 5 huge documents (unicode,
    reference) still give ``per_part`` different texts. No randomness. Empty windows are skipped.

    Returns:
        ``[(part name, text), ...]``, at most ``per_part`` per part; empty when the corpus is absent.
    """
    base = base or corpus_dir()
    out: list[tuple[str, str]] = []
    for path in sorted((base / "parts").glob("*.jsonl")):
        docs = []
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    text = json.loads(line).get("text")
                    if isinstance(text, str) and text:
                        docs.append(text.encode("utf-8", "surrogatepass"))
        if not docs:
            continue
        w = -(-per_part // len(docs))
        windows = [(d, j) for d in range(len(docs)) for j in range(w)]
        picked = [windows[i * len(windows) // per_part] for i in range(min(per_part, len(windows)))]
        for d, j in picked:
            data = docs[d]
            off = j * len(data) // w
            text = data[off : off + max_bytes].decode("utf-8", "ignore")
            if text:
                out.append((path.stem, text))
    return out


def real_dir() -> Path:
    """Where the real tokenizer files are (env RMLPREP_REAL_TOKENIZERS, else the default cache)."""
    env = os.environ.get("RMLPREP_REAL_TOKENIZERS")
    return Path(env) if env else Path.home() / ".cache" / "rmlprep-real-tokenizers"


#: tiktoken rank files with the known encoding name rmlprep and tiktoken use for them.
TIKTOKEN_FILES = {"tiktoken-gpt2": ("gpt2/gpt2.tiktoken", "gpt2"), "tiktoken-llama3": ("llama3/llama3.tiktoken", "llama3")}


def sources() -> dict[str, tuple[str, str]]:
    """name -> (kind "hf" | "tiktoken", path relative to real_dir()) for every fixture."""
    out: dict[str, tuple[str, str]] = {}
    base = real_dir()
    for p in sorted((base / "hf").glob("*/tokenizer.json")):
        out[f"hf-{p.parent.name}"] = ("hf", str(p.relative_to(base)))
    for name, (rel, _enc) in TIKTOKEN_FILES.items():
        if (base / rel).is_file():
            out[name] = ("tiktoken", rel)
    return out


def reference_encoder(kind: str, rel: str, name: str):
    """(encode(text, add_special_tokens, parse_special) -> ids, decode(ids) -> str, "lib version").

    ``parse_special=False`` is tokenizers' ``encode_special_tokens = True`` (special added tokens
    read as text, the others still matched) and tiktoken's ``encode_ordinary``.
    """
    path = real_dir() / rel
    if kind == "hf":
        import tokenizers

        tok = tokenizers.Tokenizer.from_file(str(path))
        plain = tokenizers.Tokenizer.from_file(str(path))
        plain.encode_special_tokens = True
        return (
            lambda text, asp, ps=True: (tok if ps else plain).encode(text, add_special_tokens=asp).ids,
            lambda ids: tok.decode(ids, skip_special_tokens=False),
            f"tokenizers {tokenizers.__version__}",
        )
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    sys.path.insert(0, str(ROOT))
    from rmlprep.tiktoken_file import KNOWN_ENCODINGS

    known = KNOWN_ENCODINGS[TIKTOKEN_FILES[name][1]]
    enc = tiktoken.Encoding(
        name=f"rmlprep-{name}",
        pat_str=known["pattern"],
        mergeable_ranks=load_tiktoken_bpe(str(path)),
        special_tokens=dict(known["special_tokens"]),
    )
    return (  # tiktoken adds no bos/eos
        lambda text, asp, ps=True: enc.encode(text, allowed_special="all") if ps else enc.encode_ordinary(text),
        enc.decode,
        f"tiktoken {tiktoken.__version__}",
    )


#: The fixed sample of every fixture: shared corpora counts and Debian windows per part, sized so
#: each fixture stays under 1.5 MB (tests/test_hf.py::test_fixture_files_are_small).
N_TEXT, N_CHAT, MAX_BYTES = 80, 50, 2048
MAX_FIXTURE_BYTES = 1_500_000
DEBIAN_PER_PART, DEBIAN_MAX_BYTES = 20, 1536


def sample(*, debian_base: Path | None = None) -> tuple[list[tuple[str | None, str]], dict]:
    """The fixture sample as ``[(part or None, text)]`` and its banner entries.

    Hard strings, then :func:`corpus_texts` (shared corpora), then :func:`debian_texts` (part
    names recorded) when the Debian-built corpus is present.
    """
    texts: list[tuple[str | None, str]] = [(None, t) for t in HARD_STRINGS]
    texts += [(None, t) for t in corpus_texts(n_text=N_TEXT, n_chat=N_CHAT, max_bytes=MAX_BYTES)]
    base = debian_base or corpus_dir()
    debian = debian_texts(per_part=DEBIAN_PER_PART, max_bytes=DEBIAN_MAX_BYTES, base=base)
    texts += debian
    parts: dict[str, int] = {}
    for part, _ in debian:
        parts[part] = parts.get(part, 0) + 1
    banner = {
        "corpora": f"../shared/corpora: text-multilingual.jsonl ({N_TEXT} docs), chat/*.jsonl "
                   f"({N_CHAT} messages), cut to {MAX_BYTES // 1024} KB",
        "debian_corpus": None if not debian else {
            "manifest_sha256": debian_manifest_sha256(base),
            "parts": parts,
            "sample": f"{DEBIAN_PER_PART} windows per part, cut to {DEBIAN_MAX_BYTES} bytes (debian_texts)",
        },
    }
    return texts, banner


def build_fixture(name: str, kind: str, rel: str, *, debian_base: Path | None = None) -> dict:
    encode, decode, ref = reference_encoder(kind, rel, name)
    texts, banner = sample(debian_base=debian_base)
    cases = []
    for k, (part, text) in enumerate(texts):
        for asp in (False, True):
            if asp and (kind == "tiktoken" or k >= len(HARD_STRINGS) + 40):
                continue  # add_special_tokens only changes the ends: checked on a subset
            ids = encode(text, asp)
            case = {"text": text, "add_special_tokens": asp, "ids": ids}
            if part is not None:
                case["part"] = part
            if not asp and k % 8 == 0:
                case["decode"] = decode(ids)
            cases.append(case)
        if k < len(HARD_STRINGS):  # special-token text read as text
            cases.append({"text": text, "add_special_tokens": False, "parse_special": False,
                          "ids": encode(text, False, False)})
    path = real_dir() / rel
    return {
        "generator": GENERATOR,
        "reference": ref,
        "source": rel,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        **banner,
        "cases": cases,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "fixtures" / "parity"))
    ap.add_argument("--only", nargs="*", default=None, help="fixture names (hf-gpt2, tiktoken-llama3...)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    srcs = sources()
    if not srcs:
        print(f"no real tokenizers under {real_dir()}; run ../shared/real-tokenizers/get.sh", file=sys.stderr)
        return 1
    for name, (kind, rel) in srcs.items():
        if args.only and name not in args.only:
            continue
        fx = build_fixture(name, kind, rel)
        blob = json.dumps(fx, ensure_ascii=False, separators=(",", ":"))
        if len(blob.encode()) + 1 >= MAX_FIXTURE_BYTES:
            print(f"{name}: {len(blob.encode())} bytes, over {MAX_FIXTURE_BYTES}; lower N_TEXT, N_CHAT or "
                  "DEBIAN_PER_PART", file=sys.stderr)
            return 1
        (out / f"{name}.json").write_text(blob + "\n", encoding="utf-8")
        n_ids = sum(len(c["ids"]) for c in fx["cases"])
        print(f"{name}: {len(fx['cases'])} cases, {n_ids} ids, {len(blob.encode()) / 1e6:.2f} MB ({fx['reference']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
