"""Shared by the chat tests: where the real templates, corpora and tokenizers are, and the
expected format of every real template (written here from the issue and SOURCES.md, so the
library's detection is checked against it, never against itself)."""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO.parent / "shared").resolve()
TEMPLATES = SHARED / "chat-templates"
CORPORA = SHARED / "corpora" / "chat"
REAL = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS") or Path.home() / ".cache" / "rmlprep-real-tokenizers")

needs_shared = pytest.mark.skipif(not TEMPLATES.is_dir(), reason=f"{TEMPLATES} not found (../shared is beside the clone in CI)")
needs_jinja = pytest.mark.skipif(importlib.util.find_spec("jinja2") is None, reason="jinja2 is not installed (test extra)")

#: Every real template (path under chat-templates/ without .jinja) -> the format that must
#: reproduce it, or None: no format does, detection must refuse it with the differing probe.
EXPECTED: dict[str, str | None] = {
    "chatml-openhermes": "chatml",
    "qwen2": "qwen2",
    "qwen2.5": "qwen2.5",
    "smollm2": "smollm2",
    "llama2": "llama2",
    "llama3": "llama3",
    "llama3.1": "llama3.1",
    "llama3.2": "llama3.2",
    "mistral-v0.1-orig": None,  # the 2023 templates: no system message, other spacing
    "mistral-v0.2-orig": None,
    "mistral-v1": "mistral-v1",
    "mistral-v3": "mistral-v3",
    "mistral-v3-tekken": "mistral-v3-tekken",
    "mistral-v7": "mistral-v7",
    "mistral-v7-tekken": "mistral-v7-tekken",
    "gemma": "gemma",
    "gemma3": "gemma3",
    "phi3": "phi3",
    "phi3.5": "phi3.5",
    "zephyr": "zephyr",
    "deepseek-llm": "deepseek-llm",
    "deepseek-v3": "deepseek3",
    "deepseek-r1-distill-qwen": "deepseek-r1",
    "command-r": "command-r",
    "more/GLM-4.6": None,
    "more/HuggingFaceTB-SmolLM3-3B": "smollm3",
    "more/Mistral-Small-3.2-24B-Instruct-2506": "mistral-small-3.2",
    "more/NousResearch-Hermes-3-Llama-3.1-8B-tool_use": "hermes",
    "more/Qwen-Qwen2.5-7B-Instruct": "qwen2.5",
    "more/Qwen-Qwen3-0.6B": "qwen3",
    "more/Qwen3-Coder": "qwen3-coder",
    "more/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": "deepseek-r1-llamacpp",
    "more/deepseek-ai-DeepSeek-V3.1": "deepseek-v3.1",
    "more/google-gemma-4-31B-it": "gemma4",
    "more/ibm-granite-granite-4.0": None,
    "more/meta-llama-Llama-3.1-8B-Instruct": "llama3.1",
    "more/moonshotai-Kimi-K2": "kimi-k2",
    "more/openai-gpt-oss-120b": "gpt-oss",
}


def template_text(name: str) -> str:
    return (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")


def real_tokenizer(rel: str):
    """A real tokenizer from the cache (``hf/qwen3``...), or skip with the reason; loaded once."""
    p = REAL / rel
    if not p.exists():
        pytest.skip(f"{p} not found (bash ../shared/real-tokenizers/get.sh, or set RMLPREP_REAL_TOKENIZERS)")
    return _load(str(p))


@functools.lru_cache(maxsize=None)
def _load(path: str):
    import rmlprep

    return rmlprep.load_tokenizer(path)


def byte_tokenizer(specials: list[str], *, bos: str | None = None, add_bos: bool = False, eos: str | None = None):
    """A byte-level tokenizer without merges (one token per byte, GPT-2 alphabet) plus
    ``specials`` as control tokens: the bytes under the mask are exactly the masked text."""
    from rmlprep.spec import BYTE_LEVEL, TokenizerSpec, TokenType
    from rmlprep.tokenizer import Tokenizer
    from rmlprep.unicode import bytes_to_unicode

    b2u = bytes_to_unicode()
    vocab = [b2u[b] for b in range(256)] + list(dict.fromkeys(specials))
    types = [TokenType.NORMAL] * 256 + [TokenType.CONTROL] * (len(vocab) - 256)
    spec = TokenizerSpec(kind=BYTE_LEVEL, vocab=tuple(vocab), token_types=tuple(int(t) for t in types), merges=(),
                         bos_id=vocab.index(bos) if bos else None, eos_id=vocab.index(eos) if eos else None,
                         add_bos=add_bos, name="bytes")
    return Tokenizer.create(spec)


# -- messages, as a conversation's rows hold them

def u(c):
    return {"role": "user", "content": c}


def a(c, **kw):
    return {"role": "assistant", "content": c, **kw}


def s(c):
    return {"role": "system", "content": c}
