"""Record which BOS/EOS transformers adds for a SentencePiece folder whose config is silent.

A model folder holding ``tokenizer.model`` (no tokenizer.json) and a ``tokenizer_config.json``
that names its ``tokenizer_class`` but not ``add_bos_token`` / ``add_eos_token`` gets the
class's defaults in transformers, and they are not sentencepiece's (which adds nothing). This
builds such a folder per class in :data:`CLASSES` around the real Llama 2 ``tokenizer.model``
(``spiece.model`` for the T5 classes, the file name they read), loads it with
``AutoTokenizer.from_pretrained`` of each transformers install given, and records the ids that
``tok(TEXT)`` puts before and after ``tok(TEXT, add_special_tokens=False)``.

Writes ``fixtures/bos_defaults.json``::

    {"generator": "tools/make_bos_defaults_fixtures.py", "source": "llama2/tokenizer.model",
     "sha256": "<of it>", "text": TEXT,
     "references": ["transformers 4.57.1 (tokenizers 0.22.1)", ...],
     "classes": {cls: {reference: {"loaded_as": name, "prefix": [ids], "suffix": [ids]}
                                  | {"error": "<exception type>"}}}}

Usage: ``python tools/make_bos_defaults_fixtures.py --transformers DIR [--transformers DIR ...]``
where each DIR is a ``pip install --target DIR --no-deps transformers==X`` (with, for 4.x,
``tokenizers==0.22.1`` and ``huggingface_hub<1.0``; both need ``safetensors``, 5.x
``safetensors>=0.8.0``) that is put first on ``PYTHONPATH`` of a child process; the run is
offline (``HF_HUB_OFFLINE=1``).

``--check`` (with the same ``--transformers`` installs, 4.57.1 then 5.24.0) regenerates the
fixture in memory and compares it with ``fixtures/bos_defaults.json`` (or ``--out``) instead of
writing it: exit 0 and ``fixtures/bos_defaults.json: unchanged``, else exit 1 naming each class
(or banner key) that differs. This is the fixture's drift check; it is not in the test suite,
which has neither install (``tests/test_load.py::test_bos_defaults_fixture_is_its_generators``
checks the fixture against this script's inputs on every run, without transformers).
Needs: sentencepiece; the real tokenizers in ``~/.cache/rmlprep-real-tokenizers`` (env
RMLPREP_REAL_TOKENIZERS).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.make_parity_fixtures import real_dir  # noqa: E402

SOURCE = "llama2/tokenizer.model"
TEXT = "Hello world"
#: The SentencePiece tokenizer classes of transformers whose silent-config default is recorded.
CLASSES = ("LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer", "CodeLlamaTokenizerFast",
           "GemmaTokenizer", "GemmaTokenizerFast", "T5Tokenizer", "T5TokenizerFast")

_CHILD = r"""
import json, os, shutil, sys, tempfile, tokenizers, transformers
from transformers import AutoTokenizer
model, text, classes = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
out = {"reference": f"transformers {transformers.__version__} (tokenizers {tokenizers.__version__})", "classes": {}}
for cls in classes:
    d = tempfile.mkdtemp()
    shutil.copy(model, os.path.join(d, "spiece.model" if cls.startswith("T5") else "tokenizer.model"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": cls}, f)
    try:
        tok = AutoTokenizer.from_pretrained(d)
        full, bare = tok(text)["input_ids"], tok(text, add_special_tokens=False)["input_ids"]
        k = next(i for i in range(len(full) - len(bare) + 1) if full[i:i + len(bare)] == bare)
        out["classes"][cls] = {"loaded_as": type(tok).__name__, "prefix": full[:k], "suffix": full[k + len(bare):]}
    except Exception as e:
        out["classes"][cls] = {"error": type(e).__name__}
    shutil.rmtree(d)
print(json.dumps(out))
"""


def generate(targets: list[str]) -> dict:
    """The fixture, from a child process per transformers install in ``targets``."""
    model = real_dir() / SOURCE
    refs = []
    for target in targets:
        env = dict(os.environ, PYTHONPATH=str(Path(target).resolve()), HF_HUB_OFFLINE="1",
                   TRANSFORMERS_VERBOSITY="error")
        r = subprocess.run([sys.executable, "-c", _CHILD, str(model), TEXT, json.dumps(CLASSES)],
                           env=env, capture_output=True, text=True, check=True, cwd="/")
        refs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    return {
        "generator": "tools/make_bos_defaults_fixtures.py",
        "source": SOURCE,
        "sha256": hashlib.sha256(model.read_bytes()).hexdigest(),
        "text": TEXT,
        "references": [r["reference"] for r in refs],
        "classes": {cls: {r["reference"]: r["classes"][cls] for r in refs} for cls in CLASSES},
    }


def drift_by(have: dict, want: dict, key: str, *, values: bool = True) -> list[str]:
    """What differs between a fixture ``have`` (the committed one) and a regeneration ``want``: one
    line per banner key and per entry of ``want[key]`` that differs (with both answers when
    ``values``); ``[]`` when they are equal."""
    out = [f"{k}: {have.get(k)!r} -> {want.get(k)!r}" for k in sorted((set(have) | set(want)) - {key})
           if have.get(k) != want.get(k)]
    hc, wc = have.get(key) or {}, want.get(key) or {}
    out += [f"{key}[{c!r}]: {hc.get(c)!r} -> {wc.get(c)!r}" if values else f"{key}[{c!r}] differs"
            for c in list(hc) + [c for c in wc if c not in hc] if hc.get(c) != wc.get(c)]
    return out


def drift(have: dict, want: dict) -> list[str]:
    """:func:`drift_by` on the ``classes``: one line per class whose answers differ."""
    return drift_by(have, want, "classes")


def fixture_main(argv: list[str] | None, doc: str, default_out: Path, generate, drift_of) -> int:
    """The command line of a fixture built from ``--transformers`` installs: write ``--out``, or
    with ``--check`` regenerate in memory and print what ``drift_of`` finds (exit 1 on a difference)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--transformers", action="append", required=True, help="a --target install of transformers")
    ap.add_argument("--out", default=str(default_out))
    ap.add_argument("--check", action="store_true",
                    help="regenerate in memory and compare with --out (exit 1 on a difference) instead of writing it")
    a = ap.parse_args(argv)
    out = generate(a.transformers)
    if a.check:
        lines = drift_of(json.loads(Path(a.out).read_text(encoding="utf-8")), out)
        for line in lines:
            print(f"{a.out}: {line}")
        if not lines:
            print(f"{a.out}: unchanged")
        return 1 if lines else 0
    Path(a.out).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {a.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return fixture_main(argv, __doc__, ROOT / "fixtures" / "bos_defaults.json", generate, drift)


if __name__ == "__main__":
    sys.exit(main())
