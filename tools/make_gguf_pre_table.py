"""Generate ``rmlprep/_gguf_pre_table.py``: llama.cpp's GGUF pre-tokenizer table.

Reads ``src/llama-vocab.cpp`` of the llama.cpp vendored in the ``llama-cpp-python`` sdist
(:data:`LLAMA_CPP_PYTHON`) and writes, verbatim:

- every ``tokenizer.ggml.pre`` name ``llama_vocab::impl::load`` knows -> its
  ``LLAMA_VOCAB_PRE_TYPE_*`` and the flags that branch sets (``ignore_merges``, ``add_bos``,
  ``clean_spaces``, ``escape_whitespaces``, ``add_sep``, ``special_bos_id``, ...);
- every pre-tokenizer type -> the regex list of the ``llm_tokenizer_bpe`` constructor, each
  with the "original regex from tokenizer.json" that llama.cpp gives in a comment beside an
  adapted one (None where it gives none), and ``byte_encode``.

usage::

    python3 tools/make_gguf_pre_table.py [--source DIR] [--out rmlprep/_gguf_pre_table.py]

Without ``--source`` the sdist is fetched once with ``pip download`` into
``~/.cache/rmlprep/llama-cpp-python-<version>/`` (only the files rmlprep reads are kept: this
source file, the ``models/ggml-vocab-*`` test vocabularies and the submodule's commit).
tests/test_gguf.py regenerates the table and compares (drift test).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

LLAMA_CPP_PYTHON = "0.3.36"
_VENDOR = "vendor/llama.cpp"
_SOURCE = f"{_VENDOR}/src/llama-vocab.cpp"
_HEAD = ".git/modules/vendor/llama.cpp/HEAD"
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "rmlprep" / "_gguf_pre_table.py"


# ----------------------------------------------------------------------------------------------
# The sdist.


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "rmlprep" / f"llama-cpp-python-{LLAMA_CPP_PYTHON}"


def llama_cpp_source(cache: Path | None = None) -> Path:
    """The extracted sdist files (``<dir>/vendor/llama.cpp/...``), fetched with pip on first use.

    Raises:
        RuntimeError: pip cannot download the sdist (no network), with pip's last lines.
    """
    d = cache or cache_dir()
    if (d / _SOURCE).is_file() and (d / _HEAD).is_file():
        return d
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
               "-d", tmp, f"llama-cpp-python=={LLAMA_CPP_PYTHON}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        archives = list(Path(tmp).glob("*.tar.gz"))
        if r.returncode != 0 or not archives:
            raise RuntimeError(f"cannot fetch llama-cpp-python=={LLAMA_CPP_PYTHON}: {(r.stderr or r.stdout)[-500:]}")
        part = d.with_name(d.name + ".part")
        shutil.rmtree(part, ignore_errors=True)
        with tarfile.open(archives[0]) as tar:
            for m in tar.getmembers():
                rel = m.name.split("/", 1)[1] if "/" in m.name else ""
                keep = rel in (_SOURCE, _HEAD) or (rel.startswith(f"{_VENDOR}/models/ggml-vocab-") and m.isfile())
                if keep:
                    target = part / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with tar.extractfile(m) as src, open(target, "wb") as dst:  # type: ignore[union-attr]
                        shutil.copyfileobj(src, dst)
        shutil.rmtree(d, ignore_errors=True)
        part.rename(d)
    return d


# ----------------------------------------------------------------------------------------------
# Parsing llama-vocab.cpp.

_C_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "'": "'", "?": "?", "0": "\0"}


def _c_string(body: str) -> str:
    """The value of a C string literal's body (the text between the quotes)."""
    out = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e == "x":
            m = re.match(r"[0-9a-fA-F]+", body[i + 2 :])
            out.append(chr(int(m.group(0), 16)))  # type: ignore[union-attr]
            i += 2 + len(m.group(0))  # type: ignore[union-attr]
        elif e in _C_ESCAPES:
            out.append(_C_ESCAPES[e])
            i += 2
        else:
            raise ValueError(f"unknown C escape \\{e} in {body!r}")
    return "".join(out)


def _split_line(line: str) -> tuple[list[str], str]:
    """(string literals in the code part, the comment part) of one C++ line."""
    literals: list[str] = []
    i = 0
    while i < len(line):
        if line.startswith("//", i):
            return literals, line[i + 2 :]
        if line[i] == '"':
            m = re.compile(r'"((?:[^"\\]|\\.)*)"').match(line, i)
            if not m:
                raise ValueError(f"unterminated string literal: {line!r}")
            literals.append(_c_string(m.group(1)))
            i = m.end()
            continue
        i += 1
    return literals, ""


def parse_pre_types(src: str) -> dict[str, dict]:
    """``LLAMA_VOCAB_PRE_TYPE_X`` (as ``"X"``) -> {"regexes", "originals", "byte_encode"}."""
    start = src.index("struct llm_tokenizer_bpe : llm_tokenizer {")
    end = src.index("std::vector<std::string> regex_exprs;", start)
    types: dict[str, dict] = {}
    labels: list[str] = []
    body: list[tuple[str, str | None]] = []
    byte_encode = True
    pending: str | None = None
    for raw in src[start:end].splitlines():
        line = raw.strip()
        m = re.fullmatch(r"case LLAMA_VOCAB_PRE_TYPE_(\w+):", line)
        if m or line == "default:":
            labels.append(m.group(1) if m else "DEFAULT")
            continue
        if not labels:
            continue
        literals, comment = _split_line(line)
        if line.startswith("//") or not literals:
            comment_literals, _ = _split_line(comment.replace(": \"", " \"")) if comment else ([], "")
            if line.startswith("//") and comment_literals:
                pending = comment_literals[-1]
        for lit in literals:
            body.append((lit, pending))
            pending = None
        if re.search(r"\bbyte_encode\s*=\s*false\s*;", line):
            byte_encode = False
        if line == "break;" or (labels == ["DEFAULT"] and line == "}" and body):
            for label in labels:
                types[label] = {
                    "regexes": tuple(r for r, _ in body),
                    "originals": tuple(o for _, o in body),
                    "byte_encode": byte_encode,
                }
            labels, body, byte_encode, pending = [], [], True, None
    return types


_FLAG = re.compile(r"^\s*([\w.]+)\s*=\s*(true|false|LLAMA_TOKEN_NULL)\s*;", re.M)


def parse_pre_names(src: str) -> dict[str, dict]:
    """``tokenizer.ggml.pre`` name -> {"type": "X", "flags": {name: value}} for the BPE branch."""
    start = src.index("if (tokenizer_pre.empty()) {")
    end = src.index('throw std::runtime_error(format("unknown pre-tokenizer type', start)
    names: dict[str, dict] = {}
    for chunk in re.split(r"\}\s*else if\s*\(", src[start:end])[1:]:
        cond, _, body = chunk.partition(") {")
        pre = re.findall(r'tokenizer_pre\s*==\s*"([^"]+)"', cond)
        m = re.search(r"pre_type\s*=\s*LLAMA_VOCAB_PRE_TYPE_(\w+)\s*;", body)
        if not pre or not m:
            raise ValueError(f"cannot read the branch: else if ({chunk[:200]!r}")
        flags = {k: (True if v == "true" else False if v == "false" else None) for k, v in _FLAG.findall(body)}
        for name in pre:
            if name in names:
                raise ValueError(f"{name!r} appears twice")
            names[name] = {"type": m.group(1), "flags": flags}
    return names


# ----------------------------------------------------------------------------------------------
# Rendering.


def _lit(s: str | None) -> str:
    return "None" if s is None else ascii(s)  # ASCII source: no editor can normalize a code point


def render(src_bytes: bytes, commit: str) -> str:
    src = src_bytes.decode("utf-8")
    types = parse_pre_types(src)
    names = parse_pre_names(src)
    missing = sorted({n["type"] for n in names.values()} - set(types))
    if missing:
        raise ValueError(f"pre types without regexes: {missing}")
    sha = hashlib.sha256(src_bytes).hexdigest()
    lines = [
        "# Generated by tools/make_gguf_pre_table.py; do not edit. Input: the llama-cpp-python",
        f"# {LLAMA_CPP_PYTHON} sdist, {_SOURCE} (llama.cpp commit {commit},",
        f"# sha256 {sha}).",
        '"""llama.cpp\'s GGUF pre-tokenizer table, verbatim from ``src/llama-vocab.cpp``.',
        "",
        "``PRE_TYPES``: ``LLAMA_VOCAB_PRE_TYPE_*`` (without the prefix) -> ``regexes`` (the",
        "``llm_tokenizer_bpe`` constructor's list, as llama.cpp runs it), ``originals`` (per regex, the",
        "\"original regex from tokenizer.json\" llama.cpp gives in a comment beside an adapted one, else",
        "None) and ``byte_encode`` (False: raw UTF-8 with ``<0xXX>`` byte tokens, not GPT-2 bytes).",
        "``PRE_NAMES``: ``tokenizer.ggml.pre`` -> ``(type, flags)``, the flags being the assignments",
        "of that branch of ``llama_vocab::impl::load`` (None stands for ``LLAMA_TOKEN_NULL``).",
        '"""',
        "",
        f"LLAMA_CPP = {ascii(f'llama.cpp {commit[:7]} (vendored in llama-cpp-python {LLAMA_CPP_PYTHON})')}",
        f"LLAMA_VOCAB_CPP_SHA256 = {ascii(sha)}",
        "",
        "PRE_TYPES = {",
    ]
    for t in sorted(types):
        d = types[t]
        lines.append(f"    {ascii(t)}: {{")
        lines.append("        \"regexes\": (")
        lines += [f"            {_lit(r)}," for r in d["regexes"]]
        lines.append("        ),")
        lines.append("        \"originals\": (")
        lines += [f"            {_lit(o)}," for o in d["originals"]]
        lines.append("        ),")
        lines.append(f"        \"byte_encode\": {d['byte_encode']},")
        lines.append("    },")
    lines.append("}")
    lines.append("")
    lines.append("PRE_NAMES = {")
    for n in sorted(names):
        d = names[n]
        flags = ", ".join(f"{ascii(k)}: {v}" for k, v in sorted(d["flags"].items()))
        lines.append(f"    {ascii(n)}: ({ascii(d['type'])}, {{{flags}}}),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def generate(source: Path | None = None) -> str:
    d = source or llama_cpp_source()
    commit = (d / _HEAD).read_text().strip() if (d / _HEAD).is_file() else "unknown"
    return render((d / _SOURCE).read_bytes(), commit)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, help="an extracted llama-cpp-python sdist (default: fetch into ~/.cache)")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    text = generate(a.source)
    a.out.write_text(text, encoding="utf-8")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
