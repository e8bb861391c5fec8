"""Write fixtures/parity_gguf/<name>.json: llama.cpp's own test vectors for the real vocab-only GGUF files.

llama.cpp ships each ``ggml-vocab-<name>.gguf`` of its tests with ``.inp`` (inputs separated by
``"\\n__ggml_vocab_test__\\n"``) and ``.out`` (one line of space-separated ids per input, made
with the model's Hugging Face tokenizer); ``tests/test-tokenizer-0.cpp`` encodes each input
with ``add_special=false, parse_special=false`` and compares. ``get.sh`` fetches five of them
(gpt-2, llama-bpe, llama-spm, phi-3, qwen2) into ``$RMLPREP_REAL_TOKENIZERS/gguf`` (default
``~/.cache/rmlprep-real-tokenizers``). This tool turns each pair into a parity fixture, so that
a run on such a file is checked before any corpus work instead of warning "no fixture"::

    {"generator": "tools/make_gguf_fixtures.py", "reference": "llama.cpp test vectors (...)",
     "source": "gguf/ggml-vocab-<name>.gguf", "sha256": "<of the .gguf>",
     "fingerprint": "<rmlprep spec fingerprint of the loaded file>",
     "cases": [{"text": ..., "add_special_tokens": false, "parse_special": false, "ids": [...]}]}

``fingerprint`` lets the parity stage use the fixture for another GGUF file whose tokenizer
loads to the same spec (a model file with the same vocabulary: the ids of a spec are a function
of the spec); ``sha256`` finds it for the file itself. The inputs are read exactly as
test-tokenizer-0 reads them (a repeated input keeps its last ids), in file order.

Usage: python tools/make_gguf_fixtures.py [--out fixtures/parity_gguf]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a clone without installing

GENERATOR = "tools/make_gguf_fixtures.py"
#: The vocab-only GGUF files that get.sh fetches with their vectors (llama-cpp-python sdist).
VOCABS = ("gpt-2", "llama-bpe", "llama-spm", "phi-3", "qwen2")
REFERENCE = ("llama.cpp test vectors (ggml-vocab-<name>.gguf.inp/.out, llama-cpp-python==0.3.36 sdist: "
             "vendor/llama.cpp/models/; ids made with the model's Hugging Face tokenizer)")


def real_dir() -> Path:
    return Path(os.environ.get("RMLPREP_REAL_TOKENIZERS") or Path.home() / ".cache" / "rmlprep-real-tokenizers")


def read_vocab_tests(gguf_path: Path) -> list[tuple[str, list[int]]]:
    """The ``.inp``/``.out`` vectors as llama.cpp's ``tests/test-tokenizer-0.cpp`` reads them:
    inputs split on ``"\\n__ggml_vocab_test__\\n"`` (a piece after the last separator only if
    non-empty), each ``.out`` line stripped and split on spaces, pairs kept in a map (a
    repeated input keeps its last ids); returned in order of first appearance.

    Raises:
        ValueError: the two files hold different numbers of entries.
    """
    raw = Path(str(gguf_path) + ".inp").read_bytes().decode("utf-8")
    out_lines = Path(str(gguf_path) + ".out").read_bytes().decode("utf-8").split("\n")
    if out_lines and out_lines[-1] == "":
        out_lines.pop()  # std::getline yields no line after the final newline
    sep = "\n__ggml_vocab_test__\n"
    inputs = []
    pos = 0
    while pos < len(raw):
        nxt = raw.find(sep, pos)
        if nxt < 0:
            inputs.append(raw[pos:])
            break
        inputs.append(raw[pos:nxt])
        pos = nxt + len(sep)
    if len(inputs) != len(out_lines):
        raise ValueError(f"{gguf_path.name}: {len(inputs)} inputs vs {len(out_lines)} output lines")
    tests: dict[str, list[int]] = {}
    for s, line in zip(inputs, out_lines):
        tests[s] = [int(t) for t in line.strip().split(" ") if t != ""]
    return list(tests.items())


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def make_fixture(gguf_path: Path, name: str) -> dict:
    """The fixture dict for one ``ggml-vocab-<name>.gguf`` and its vectors."""
    from rmlprep.gguf import spec_from_gguf

    spec, _ = spec_from_gguf(gguf_path)
    return {
        "generator": GENERATOR,
        "reference": REFERENCE.replace("<name>", name),
        "source": f"gguf/{gguf_path.name}",
        "sha256": sha256_file(gguf_path),
        "fingerprint": spec.fingerprint,
        "cases": [{"text": t, "add_special_tokens": False, "parse_special": False, "ids": ids}
                  for t, ids in read_vocab_tests(gguf_path)],
    }


def write_fixtures(out_dir: Path, *, real: Path | None = None) -> list[Path]:
    """Write one fixture per vocab found under ``real/gguf``; returns the written paths."""
    gguf_dir = (real or real_dir()) / "gguf"
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in VOCABS:
        path = gguf_dir / f"ggml-vocab-{name}.gguf"
        if not (path.exists() and Path(str(path) + ".inp").exists() and Path(str(path) + ".out").exists()):
            print(f"skip {name}: {path} or its .inp/.out not found", file=sys.stderr)
            continue
        fx = make_fixture(path, name)
        out = out_dir / f"{name}.json"
        with open(out, "w", encoding="utf-8") as f:
            json.dump(fx, f, ensure_ascii=False, separators=(",", ":"))
            f.write("\n")
        written.append(out)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "fixtures" / "parity_gguf")
    args = ap.parse_args(argv)
    for path in write_fixtures(args.out):
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
