"""Live parity on the Debian-built corpus: rmlprep vs the reference library for every real tokenizer.

The corpus is built by ``make_text_corpus.sh`` into ``$RMLPREP_CORPUS`` (default
``~/.cache/rmlprep-corpus``): handbook, man pages in six languages, Python docs, fortunes with
CRLF and ANSI escapes, source code, emoji lists, language samples. :func:`debian_texts` takes
112 windows of up to 4 KB from each of its 9 parts (1,008 texts). Every real tokenizer of
``$RMLPREP_REAL_TOKENIZERS`` is compared token for token: tokenizer.json files with
``tokenizers`` (add_special_tokens False, and True on every 8th text), the tiktoken rank files
with ``tiktoken`` (same pattern and specials), the SentencePiece ``.model`` files with
``sentencepiece``; decode(ids) must equal the reference decode. The committed fixtures
(fixtures/parity*/) carry 25 (hf/tiktoken) or 20 (sentencepiece) of these per part for the
default run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rmlprep.load import load_tokenizer
from rmlprep.spm import spec_from_sentencepiece_model
from rmlprep.tiktoken_file import KNOWN_ENCODINGS, spec_from_tiktoken
from rmlprep.tokenizer import Tokenizer
from tools.make_parity_fixtures import TIKTOKEN_FILES, corpus_dir, debian_texts, real_dir
from tools.make_spm_fixtures import MODELS as SPM_MODELS

pytestmark = [pytest.mark.parity, pytest.mark.slow]

REAL = real_dir()
CORPUS = corpus_dir()
PER_PART = 224  # 9 parts x 224 = 2,016 documents (issue 12 asks for >= 2,000)
MAX_BYTES = 4096
HF_NAMES = ["gpt2", "llama3", "qwen2.5", "mistral-7b-v0.1", "gemma", "phi-3-mini", "gemma3", "gpt-4o", "gpt-oss", "qwen3"]

_texts: list[tuple[str, str]] | None = None


def _debian() -> list[tuple[str, str]]:
    global _texts
    if not (CORPUS / "parts").is_dir():
        pytest.skip(f"Debian-built corpus absent: {CORPUS}/parts not found; build it with "
                    "make_text_corpus.sh (PARTS=...) or set RMLPREP_CORPUS")
    if _texts is None:
        _texts = debian_texts(per_part=PER_PART, max_bytes=MAX_BYTES, base=CORPUS)
    assert len(_texts) >= 2000
    return _texts


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"real tokenizer {path} is absent: run ../shared/real-tokenizers/get.sh "
                    "(or set RMLPREP_REAL_TOKENIZERS)")
    return path


def _first_mismatch(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _report(name: str, texts, bad, n_tokens: int) -> None:
    print(f"{name}: {len(texts)} Debian documents, {n_tokens} tokens, {len(bad)} mismatches")
    assert not bad, f"{name}: {len(bad)} of {len(texts)} differ; first: {bad[:3]}"


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in HF_NAMES])
def test_debian_parity_tokenizer_json(name):
    tokenizers = pytest.importorskip("tokenizers")
    path = _need(REAL / "hf" / name / "tokenizer.json")
    texts = _debian()
    tok = load_tokenizer(path.parent)
    ref = tokenizers.Tokenizer.from_file(str(path))
    refs = ref.encode_batch([t for _, t in texts], add_special_tokens=False)
    refs_special = ref.encode_batch([t for _, t in texts], add_special_tokens=True)
    bad, n = [], 0
    for k, ((part, text), r, rs) in enumerate(zip(texts, refs, refs_special)):
        ids = tok.encode(text)
        n += len(r.ids)
        if ids != r.ids:
            bad.append((part, k, _first_mismatch(ids, r.ids), text[:80]))
            continue
        if tok.decode(ids) != ref.decode(r.ids, skip_special_tokens=False):
            bad.append((part, k, "decode", text[:80]))
        if tok.encode(text, add_special_tokens=True) != rs.ids:
            bad.append((part, k, "add_special_tokens", text[:80]))
    _report(name, texts, bad, n)


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in TIKTOKEN_FILES])
def test_debian_parity_tiktoken(name):
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    rel, enc_name = TIKTOKEN_FILES[name]
    path = _need(REAL / rel)
    texts = _debian()
    known = KNOWN_ENCODINGS[enc_name]
    tok = Tokenizer.create(spec_from_tiktoken(path, name=enc_name))
    ref = tiktoken.Encoding(name=f"t-{name}", pat_str=known["pattern"], mergeable_ranks=load_tiktoken_bpe(str(path)),
                            special_tokens=dict(known["special_tokens"]))
    bad, n = [], 0
    for k, (part, text) in enumerate(texts):
        r = ref.encode(text, allowed_special="all")
        ids = tok.encode(text)
        n += len(r)
        if ids != r:
            bad.append((part, k, _first_mismatch(ids, r), text[:80]))
        elif tok.decode(ids) != ref.decode(r):
            bad.append((part, k, "decode", text[:80]))
    _report(name, texts, bad, n)


@pytest.mark.parametrize("name", [pytest.param(n, id=n) for n in SPM_MODELS])
def test_debian_parity_sentencepiece(name):
    spm = pytest.importorskip("sentencepiece")
    path = _need(REAL / SPM_MODELS[name])
    texts = _debian()
    tok = Tokenizer.create(spec_from_sentencepiece_model(path))
    sp = spm.SentencePieceProcessor(model_file=str(path))
    refs = sp.encode([t for _, t in texts])
    bad, n = [], 0
    for k, ((part, text), r) in enumerate(zip(texts, refs)):
        ids = tok.encode(text, parse_special=False)  # sentencepiece never parses control pieces
        n += len(r)
        if ids != r:
            bad.append((part, k, _first_mismatch(ids, r), text[:80]))
        elif tok.decode(ids, skip_special_tokens=True) != sp.decode(r):
            bad.append((part, k, "decode", text[:80]))
    _report(name, texts, bad, n)
