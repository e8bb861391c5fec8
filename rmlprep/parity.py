"""Parity: rmlprep's ids must equal a reference library's, checked before any corpus work.

Fixture files (``fixtures/parity/*.json``, written by ``rmlprep parity --make-fixture`` or by
the loaders' generator) look like::

    {"generator": "rmlprep parity --make-fixture 0.1.0", "reference": "tiktoken 0.9.0",
     "source": "gpt2.tiktoken", "sha256": "<sha256 of the tokenizer file>",
     "cases": [{"text": "...", "add_special_tokens": false, "ids": [...]}, ...]}

A case may also carry ``"parse_special": false`` (default: the fixture's top-level
``parse_special``, else true, as :meth:`Tokenizer.encode`); sentencepiece and llama.cpp never
parse control tokens from text, so their fixtures say false. A fixture may also name the
``fingerprint`` of the spec it was made for (:attr:`TokenizerSpec.fingerprint`: specs that
encode alike share it).
The run's parity stage (:func:`run_parity_stage`):

1. finds the fixture: ``parity.fixture`` from the config, else the file in
   ``fixtures/parity/`` (tokenizer.json and tiktoken files, ``tools/make_parity_fixtures.py``),
   ``fixtures/parity_spm/`` (sentencepiece ``.model``, ``tools/make_spm_fixtures.py``) or
   ``fixtures/parity_gguf/`` (GGUF, llama.cpp's own test vectors, ``tools/make_gguf_fixtures.py``)
   whose ``sha256`` equals the tokenizer file's, else one whose ``fingerprint`` equals the
   loaded tokenizer's (a GGUF model file with the vocabulary of a vocab-only test file);
2. re-encodes every case and stops at the first difference with a :class:`ParityError`
   (text, first differing position, both id runs);
3. when ``parity.live_sample = N > 0`` and the reference library is installed, encodes the
   first N documents of the corpus with both and compares them the same way, in the run's own
   mode: special-token text parsed as ``tokenizer.parse_special`` says (pretrain; never in sft
   message text), so the ids compared are the ones the run writes (sentencepiece never parses
   it: a ``.model`` run that parses is compared without, and the log says so).

No fixture: a warning (or a stop, with ``parity.require = true``).

4. for the sft pipeline, the chat format is checked against real chat template renders
   (:func:`rmlprep.chat_parity.run_chat_parity_stage`; ``parity.chat``,
   ``parity.chat_renders``, ``parity.chat_live_sample``).

Reference libraries: ``tokenizers`` for ``tokenizer.json``, ``tiktoken`` for rank files
(pattern and special tokens taken from the loaded spec; the ranks and the regex engine are
tiktoken's), ``sentencepiece`` for ``.model`` files. GGUF files have no live reference here; their
fixtures hold llama.cpp's vectors.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ._version import __version__
from ._paths import fixtures_root
from .cache import file_sha256 as _cached_sha256
from .chat_parity import run_chat_parity_stage
from .errors import ConfigError, ParityError
from .load import is_spec_file
from .readers import read_unit
from .spec import TokenType

__all__ = [
    "no_live_reference_reason",
    "DEFAULT_TEXTS",
    "fixtures_dir",
    "file_sha256",
    "find_fixture",
    "compare_ids",
    "check_fixture",
    "reference_encoder",
    "make_fixture",
    "live_check",
    "run_parity_stage",
]

#: Texts a new fixture is made from: everyday prose and the cases tokenizers get wrong.
DEFAULT_TEXTS: tuple[str, ...] = (
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "  leading spaces, trailing spaces  ",
    "tabs\tand\nnewlines\r\nand CRLF\r\n\r\n",
    "I'm, you're, he's, we'll, they've, it'd, I'M SHOUTING",
    "numbers: 1 12 123 1234 12345 3.14159 1,000,000 ٣٤٥ ²³",
    "emoji 👍🏽 👨‍👩‍👧 and flags 🇩🇪🇯🇵",
    "Grüße aus Köln — naïve café, ½ price",
    "日本語のテキストと中文文本。",
    "Русский текст и ελληνικά γράμματα",
    "עברית ועربية مع علامات RTL\u200f",
    "U+2028 line\u2028separator and U+0085 next\u0085line",
    "non\u00a0breaking\u00a0space and zero\u200bwidth",
    "code: def f(x):\n    return x ** 2  # comment\n",
    "    indented\n\n\n\n    block",
    "a" * 300,
    " " * 40 + "x",
    "\x1b[1;31mANSI\x1b[0m escapes and \x0c form feed",
    "<|endoftext|> text that looks special <s> </s> [INST]",
    "",
    " ",
    "\n",
    "https://example.com/path?q=1&r=2#frag email@example.org",
    "mixed123numbers456and789letters",
    "ǅǈǋ İı ß ẞ ﬁ Å Ω",
)


def fixtures_dir() -> Path:
    """``fixtures/parity`` of the source tree (see :func:`rmlprep._paths.fixtures_root`)."""
    return fixtures_root() / "parity"


#: The folders of ``fixtures/`` that :func:`find_fixture` searches, in order: tokenizer.json and
#: tiktoken files, sentencepiece ``.model`` files, GGUF files.
FIXTURE_FOLDERS = ("parity", "parity_spm", "parity_gguf")


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 hex of a file's bytes, every byte (the key that finds its fixture), remembered by
    the file's identity and change time as the load cache remembers its keys
    (:mod:`rmlprep.cache_memo`): a multi-GB GGUF is hashed once, not on every run.

    Raises:
        OSError: the file cannot be read.
    """
    return _cached_sha256(path, whole=True)


def find_fixture(tokenizer_file: str | os.PathLike | None, directory: str | os.PathLike | None = None, *,
                 fingerprint: str | None = None) -> Path | None:
    """The fixture made for this tokenizer file, or None.

    Args:
        tokenizer_file: the file the tokenizer was loaded from.
        directory: the folder to search (default: the :data:`FIXTURE_FOLDERS` of
            :func:`rmlprep._paths.fixtures_root`).
        fingerprint: the loaded tokenizer's spec fingerprint: when no fixture has the file's
            sha256, one whose top-level ``fingerprint`` equals it (a fixture is valid for every
            file that loads to the same spec).
    """
    if tokenizer_file is None or not os.path.isfile(tokenizer_file):
        return None
    # only a file whose first keys say rmlprep spec/fixture is parsed here (not a 30 MB tokenizer.json)
    if str(tokenizer_file).endswith(".json") and os.path.getsize(tokenizer_file) < 64 << 20 \
            and is_spec_file(str(tokenizer_file)):
        try:
            with open(tokenizer_file, encoding="utf-8") as f:
                own = json.load(f)
            if isinstance(own, dict) and "spec" in own and isinstance(own.get("cases"), list):
                return Path(tokenizer_file)  # a tokenizer fixture carries its own reference ids
        except (OSError, ValueError):
            pass
    folders = [Path(directory)] if directory is not None else [fixtures_root() / n for n in FIXTURE_FOLDERS]
    files = [p for d in folders if d.is_dir() for p in sorted(d.glob("*.json"))]
    if not files:
        return None
    digest = file_sha256(tokenizer_file)
    keys = [("sha256", digest)] + ([("fingerprint", fingerprint)] if fingerprint else [])
    for key, want in keys:
        unsure = []
        for p in files:
            # the fixture writer puts "sha256" among the first keys: read 4 KB, not the 1 MB file
            # (parsing every fixture cost ~0.25 s of each run's start-up)
            try:
                with open(p, "rb") as f:
                    m = _HEAD_KEY[key].search(f.read(4096))
            except OSError:
                continue
            if m is None:
                unsure.append(p)
            elif m.group(1).decode() == want:  # a top-level key: no brace before it, no quote escaped
                return p
        for p in unsure:
            if _top_key(p, key) == want:
                return p
    return None


_HEAD_KEY = {k: re.compile(rb'^\{[^{}]*?"' + k.encode() + rb'"\s*:\s*"([0-9a-f]{64})"') for k in ("sha256", "fingerprint")}


def _top_key(path: Path, key: str) -> str | None:
    """The top-level ``key`` ("sha256", "fingerprint") of a JSON fixture, or None."""
    try:
        with open(path, encoding="utf-8") as f:
            head = json.load(f)
    except (OSError, ValueError):
        return None
    return head.get(key) if isinstance(head, dict) else None


def compare_ids(text: str, expected: Sequence[int], actual: Sequence[int], *, source: str = "") -> None:
    """Raise :class:`ParityError` at the first position where the id runs differ."""
    expected = list(expected)
    actual = list(actual)
    if expected == actual:
        return
    pos = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b), min(len(expected), len(actual)))
    raise ParityError(text, pos, expected, actual, source=source)


def _load_fixture(path: str | os.PathLike) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            fx = json.load(f)
    except FileNotFoundError:
        raise ConfigError(f"parity.fixture: {path} does not exist", path=str(path)) from None
    except ValueError as e:
        raise ConfigError(f"parity.fixture: {path} is not valid JSON: {e}") from None
    if not isinstance(fx, dict) or not isinstance(fx.get("cases"), list):
        raise ConfigError(f"parity.fixture: {path} has no 'cases' list; make one with rmlprep parity --make-fixture")
    for i, c in enumerate(fx["cases"]):
        if not (isinstance(c, dict) and isinstance(c.get("text"), str) and isinstance(c.get("ids"), list)):
            raise ConfigError(f"parity.fixture: {path}: cases[{i}] needs 'text' (string) and 'ids' (list)")
    return fx


def check_fixture(tokenizer, path: str | os.PathLike) -> int:
    """Re-encode every case of a fixture; return the number of cases.

    Raises:
        ParityError: the first case whose ids differ (source names the fixture and case).
        ConfigError: the fixture file is missing or malformed.
    """
    fx = _load_fixture(path)
    default_parse = bool(fx.get("parse_special", True))
    for i, c in enumerate(fx["cases"]):
        ids = tokenizer.encode(c["text"], add_special_tokens=bool(c.get("add_special_tokens", False)),
                               parse_special=bool(c.get("parse_special", default_parse)))
        compare_ids(c["text"], c["ids"], ids, source=f"{path} cases[{i}]")
    return len(fx["cases"])


# -- reference libraries -----------------------------------------------------------------------
RefEncoder = Callable[[str, bool], list[int]]


def reference_encoder(tokenizer_file: str | os.PathLike, tokenizer=None, *,
                      parse_special: bool | None = None) -> tuple[RefEncoder, str, bool] | None:
    """An encoder from the reference library for this tokenizer file, if it is installed.

    Args:
        parse_special: whether the reference cuts special-token text out as its id (``tokenizers``
            ``encode_special_tokens = not parse_special``; tiktoken ``encode(allowed_special="all")``
            or ``encode_ordinary``); None, each library's own default (``tokenizers``: parsed;
            tiktoken: not). sentencepiece never parses: always False.
    Returns:
        (encode(text, add_special_tokens) -> ids, "library version", parse_special the reference
        uses) or None when no reference library applies or it is not installed.
    """
    p = str(tokenizer_file)
    low = p.lower()
    if low.endswith(".json"):
        if is_spec_file(p):
            return None  # rmlprep's own spec / tokenizer fixture: its cases are the reference
        try:
            import tokenizers  # optional reference library (rmlprep[reference])
        except ImportError:
            return None
        ht = tokenizers.Tokenizer.from_file(p)
        # a tokenizer.json may carry "truncation" / "padding" sections (saved after
        # enable_truncation / enable_padding); transformers' call turns both off unless asked
        # (PreTrainedTokenizerFast.set_truncation_and_padding), and rmlprep never applies them
        ht.no_truncation()
        ht.no_padding()
        parse = True if parse_special is None else bool(parse_special)
        ht.encode_special_tokens = not parse
        return (lambda t, a: ht.encode(t, add_special_tokens=a).ids), f"tokenizers {tokenizers.__version__}", parse
    if low.endswith(".model"):
        try:
            import sentencepiece as spm  # optional reference library
        except ImportError:
            return None
        sp = spm.SentencePieceProcessor(model_file=p)
        bos = sp.bos_id()
        add_bos = tokenizer.spec.add_bos if tokenizer is not None else True

        def enc_sp(t: str, a: bool) -> list[int]:
            ids = sp.encode(t)
            return ([bos] if a and add_bos and bos >= 0 else []) + ids

        return enc_sp, f"sentencepiece {spm.__version__}", False
    if low.endswith((".tiktoken", ".bpe", ".ranks")) or (tokenizer is not None and _looks_like_ranks(p)):
        try:
            import tiktoken  # optional reference library
            from tiktoken.load import load_tiktoken_bpe
        except ImportError:
            return None
        if tokenizer is None or len(tokenizer.spec.pre_split) != 1:
            return None
        ranks = load_tiktoken_bpe(p)
        specials = {tok: i for i, (tok, ty) in enumerate(zip(tokenizer.spec.vocab, tokenizer.spec.token_types))
                    if ty == TokenType.CONTROL and i >= len(ranks)}
        enc = tiktoken.Encoding(name=f"rmlprep-ref-{os.path.basename(p)}", pat_str=tokenizer.spec.pre_split[0],
                                mergeable_ranks=ranks, special_tokens=specials)
        spec = tokenizer.spec
        parse = bool(parse_special)

        def enc_tt(t: str, a: bool) -> list[int]:
            ids = enc.encode(t, allowed_special="all") if parse else enc.encode_ordinary(t)
            if a:
                ids = ([spec.bos_id] if spec.add_bos else []) + ids + ([spec.eos_id] if spec.add_eos else [])
            return ids

        return enc_tt, f"tiktoken {tiktoken.__version__}", parse
    return None


def _looks_like_ranks(p: str) -> bool:
    try:
        with open(p, "rb") as f:
            line = f.readline()
        a, b = line.split()
        int(b)
        return True
    except (OSError, ValueError):
        return False


def make_fixture(tokenizer_file: str | os.PathLike, out: str | os.PathLike, *, tokenizer=None,
                 texts: Sequence[str] = DEFAULT_TEXTS) -> dict[str, Any]:
    """Write a fixture with the reference library's ids for ``texts`` (both add_special_tokens
    settings) and return it.

    Raises:
        ConfigError: no reference library for this file is installed.
    """
    ref = reference_encoder(tokenizer_file, tokenizer)
    if ref is None:
        raise ConfigError(
            f"parity: no reference library for {tokenizer_file}; install it with "
            "pip install tokenizers tiktoken sentencepiece (tokenizer.json / rank file / .model)"
        )
    enc, lib, parse_special = ref
    cases = []
    for t in texts:
        for a in (False, True):
            cases.append({"text": t, "add_special_tokens": a, "parse_special": parse_special, "ids": enc(t, a)})
    fx = {
        "generator": f"rmlprep parity --make-fixture (rmlprep {__version__})",
        "reference": lib,
        "source": os.path.basename(str(tokenizer_file)),
        "sha256": file_sha256(tokenizer_file),
        "cases": cases,
    }
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(fx, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return fx


def no_live_reference_reason(tokenizer_file: str | os.PathLike, tokenizer=None) -> str:
    """Why :func:`reference_encoder` has no encoder for this file, in words for the log.

    A tokenizer fixture or spec file of rmlprep's own (such as the offline demo's
    ``bl_gpt2_digits.json``) and a GGUF file have no live reference at all; the other kinds
    have one that may be missing (the reason then names ``pip install 'rmlprep[reference]'``).
    """
    p = str(tokenizer_file)
    low = p.lower()
    if low.endswith(".json") and is_spec_file(p):
        return ("it is an rmlprep tokenizer fixture or spec, which no reference library reads (its committed "
                "reference ids are the fixture check)")
    if low.endswith(".gguf"):
        return "no reference library reads GGUF files (the fixture check compares llama.cpp's ids)"
    lib = "tokenizers" if low.endswith(".json") else "sentencepiece" if low.endswith(".model") else "tiktoken"
    if importlib.util.find_spec(lib) is None:
        return (f"its reference library ({lib}) is not installed; pip install {lib} to compare live ('rmlprep[reference]' "
                "brings every reference library, torch among them)")
    if lib == "tiktoken" and tokenizer is not None and len(tokenizer.spec.pre_split) != 1:
        return "tiktoken takes a single pre-split pattern and this tokenizer has several"
    return f"{lib} cannot read this file as a tokenizer"


def live_check(tokenizer, tokenizer_file: str | os.PathLike, texts: Sequence[str], *,
               add_special_tokens: bool = False, parse_special: bool | None = None) -> tuple[int, str] | None:
    """Compare ``texts`` live with the reference library; None when it is not available.

    Args:
        parse_special: the mode to compare (a run's ``tokenizer.parse_special``); None, the
            reference's own default (:func:`reference_encoder`).
    Returns:
        (number of texts compared, library version; with the mode when ``parse_special`` was
        given: "special-token text parsed" or "as text", and why when the reference cannot do
        the mode asked).
    Raises:
        ParityError: the first text whose ids differ.
    """
    ref = reference_encoder(tokenizer_file, tokenizer, parse_special=parse_special)
    if ref is None:
        return None
    enc, lib, parse = ref
    if parse_special is not None:
        lib += f" ({'special-token text parsed' if parse else 'special-token text as text'}"
        lib += ", as the run encodes)" if parse == bool(parse_special) else (
            ": sentencepiece never parses it, this run does)")
    parse_special = parse
    for i, t in enumerate(texts):
        compare_ids(t, enc(t, add_special_tokens),
                    tokenizer.encode(t, add_special_tokens=add_special_tokens, parse_special=parse_special),
                    source=f"live comparison with {lib}, corpus document {i}")
    return len(texts), lib


def _sample_texts(cfg, units, n: int) -> list[str]:
    out: list[str] = []
    column = cfg["input"]["column"]
    for u in units:
        for b in read_unit(u, column, min(n, cfg["input"]["batch_rows"])):
            vals = b.values.to_pylist() if hasattr(b.values, "to_pylist") else b.values
            for v in vals:
                if cfg.pipeline == "sft":
                    if isinstance(v, list):
                        out.extend(m["content"] for m in v if isinstance(m, dict) and isinstance(m.get("content"), str))
                elif isinstance(v, str):
                    out.append(v)
                if len(out) >= n:
                    return out[:n]
            break
    return out


def run_parity_stage(cfg, tokenizer, tokenizer_file: str | None, units, *,
                     log: Callable[[str], None] = print) -> dict[str, Any]:
    """The run's parity stage (see the module docstring); returns a summary for the manifest.

    The summary: ``fixture``, ``cases``, ``live`` (the tokenizer), and for the sft pipeline
    ``chat`` (see :func:`rmlprep.chat_parity.run_chat_parity_stage`; None when turned off).

    Raises:
        ParityError: any mismatch (nothing has been written yet).
        ConfigError: ``parity.require = true`` and no fixture was found; a chat check that
            cannot run as configured.
    """
    par = cfg["parity"]
    summary: dict[str, Any] = {"fixture": None, "cases": 0, "live": None}
    fixture = par["fixture"]
    by = ""
    if fixture is None:
        found = find_fixture(tokenizer_file)
        if found is None and tokenizer_file is not None:
            found = find_fixture(tokenizer_file, fingerprint=tokenizer.fingerprint)
            by = ", the same spec by fingerprint" if found is not None else ""
        fixture = str(found) if found else None
    if fixture is None:
        where = ", ".join(str(fixtures_root() / n) for n in FIXTURE_FOLDERS)
        msg = (f"no fixture for tokenizer {tokenizer_file or tokenizer.spec.name!r} in {where} "
               "(set RMLPREP_FIXTURES to another fixtures/ folder, or name one in parity.fixture); "
               "make one with: rmlprep parity TOKENIZER --make-fixture fixtures/parity/NAME.json")
        if par["require"]:
            raise ConfigError(f"parity.require: {msg}")
        log(f"warning: parity: {msg}")
    else:
        n = check_fixture(tokenizer, fixture)
        summary.update(fixture=str(fixture), cases=n)
        log(f"parity: {n} fixture cases match ({fixture}{by})")
    if par["live_sample"]:
        if tokenizer_file is None:
            log("parity: live comparison skipped: the tokenizer has no file a reference library could read "
                "(given in code, or the demo's built-in byte tokenizer)")
        else:
            texts = _sample_texts(cfg, units, par["live_sample"])
            parse = cfg["tokenizer"]["parse_special"] and cfg.pipeline != "sft"  # sft: message text is text
            res = live_check(tokenizer, tokenizer_file, texts, parse_special=parse)
            if res is None:  # a library the user can install is a warning, as the chat stage's jinja2 line
                why = no_live_reference_reason(tokenizer_file, tokenizer)
                warn = "warning: " if "is not installed" in why else ""
                log(f"{warn}parity: live comparison skipped for {tokenizer_file}: {why}")
            else:
                summary["live"] = {"documents": res[0], "reference": res[1]}
                if res[0]:
                    log(f"parity: {res[0]} corpus documents match {res[1]}")
                else:  # "0 ... match" read like a failure (a fresh-user trial, every row rejected)
                    log(f"parity: live comparison with {res[1]} had no corpus document to encode "
                        "(the first rows of the units hold no text to sample)")
    if cfg.pipeline == "sft":
        summary["chat"] = run_chat_parity_stage(cfg, tokenizer, units, log=log)
    return summary
