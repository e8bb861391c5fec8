"""The embedded demo's tokenizer: ``tokenizer.path = "demo:gpt2"``.

This module supplies the ingredients; :func:`rmlprep.load.open_tokenizer` (and so
``load_tokenizer("demo:gpt2")``) puts them together, in this order:

1. GPT-2's tiktoken rank file from the ``openai-whisper`` source package on PyPI
   (``whisper/assets/gpt2.tiktoken``), fetched once with
   ``pip download --no-deps --no-binary :all: openai-whisper==20250625``, checked against
   :data:`GPT2_SHA256` and cached as ``~/.cache/rmlprep/gpt2.tiktoken`` (``RMLPREP_CACHE``
   overrides the directory). Loaded with ``load_tokenizer(path, name="gpt2")``.
2. When that is impossible (offline, no pip, a sha256 mismatch, the file unreadable), a log
   line says why and the demo falls back to ``fixtures/tokenizers/bl_gpt2_digits.json``
   (:func:`fallback_file`): a tiny byte-level BPE (GPT-2 pre-split, single digits) trained by
   ``tools/make_tokenizer_fixtures.py``, whose file also holds the reference library's ids, so
   the parity stage checks it. Without that file (an installed wheel), :func:`byte_tokenizer`:
   256 byte tokens plus ``<|endoftext|>``, no merges, exact by construction (one id per UTF-8
   byte).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from ._paths import fixtures_root
from .pretokenize import GPT2_PATTERN
from .spec import BYTE_LEVEL, TokenizerSpec, TokenType
from .tokenizer import Tokenizer
from .unicode import bytes_to_unicode

__all__ = ["DEMO_NAMES", "GPT2_SHA256", "WHISPER_VERSION", "cache_dir", "fetch_gpt2_ranks", "byte_tokenizer",
           "fallback_file"]

#: The names ``demo:NAME`` accepts.
DEMO_NAMES = ("gpt2",)
GPT2_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
WHISPER_VERSION = "20250625"
_MEMBER = "whisper/assets/gpt2.tiktoken"


def cache_dir() -> Path:
    return Path(os.environ.get("RMLPREP_CACHE") or Path.home() / ".cache" / "rmlprep")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_gpt2_ranks(log: Callable[[str], None] = print) -> Path:
    """The cached GPT-2 rank file, downloading the whisper sdist with pip on first use.

    Raises:
        OSError: pip failed (offline, no pip), the archive lacks the file, or its sha256 differs.
    """
    dest = cache_dir() / "gpt2.tiktoken"
    if dest.exists() and _sha256(dest) == GPT2_SHA256:
        return dest
    log(f"demo: fetching GPT-2's rank file from the openai-whisper=={WHISPER_VERSION} sdist (PyPI) into {dest.parent}")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "-q", "-d", tmp, f"openai-whisper=={WHISPER_VERSION}"]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise OSError(f"pip download failed: {e}") from None
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise OSError(f"pip download failed: {last}")
        archives = sorted(Path(tmp).glob("openai*whisper-*.tar.gz"))
        if not archives:
            raise OSError("pip download gave no openai-whisper sdist")
        with tarfile.open(archives[0]) as tf:
            member = next((m for m in tf.getmembers() if m.name.endswith(_MEMBER)), None)
            if member is None:
                raise OSError(f"{archives[0].name} has no {_MEMBER}")
            data = tf.extractfile(member).read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != GPT2_SHA256:
        raise OSError(f"gpt2.tiktoken from the sdist has sha256 {digest}, expected {GPT2_SHA256}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmpf = dest.with_name(dest.name + f".tmp-{os.getpid()}")
    tmpf.write_bytes(data)
    os.replace(tmpf, dest)
    return dest


def byte_tokenizer():
    """A byte-level tokenizer with one token per byte (ids 0..255 in byte order) and
    ``<|endoftext|>`` = 256 as eos; GPT-2 pre-split, no merges."""
    b2u = bytes_to_unicode()
    vocab = tuple(b2u[b] for b in range(256)) + ("<|endoftext|>",)
    types = (int(TokenType.NORMAL),) * 256 + (int(TokenType.CONTROL),)
    spec = TokenizerSpec(kind=BYTE_LEVEL, vocab=vocab, token_types=types, pre_split=(GPT2_PATTERN,),
                         eos_id=256, bos_id=256, eot_ids=(256,), name="bytes")
    return Tokenizer.create(spec)


#: The demo's offline tokenizer: a byte-level BPE with GPT-2's pre-split and individual digits,
#: trained by tools/make_tokenizer_fixtures.py; the file holds the spec and the reference ids.
FALLBACK = "bl_gpt2_digits.json"


def fallback_file(log: Callable[[str], None] = print) -> Path | None:
    """The committed fallback tokenizer (:data:`FALLBACK` in ``fixtures/tokenizers/``), or None
    when it is absent (then :func:`byte_tokenizer` is the fallback); logs which one is used."""
    p = fixtures_root() / "tokenizers" / FALLBACK
    if p.is_file():
        log(f"demo: using the small committed tokenizer {p} (its parity cases are checked too)")
        return p
    log(f"demo: {p} is absent; using the 257-token byte tokenizer (one id per UTF-8 byte)")
    return None
