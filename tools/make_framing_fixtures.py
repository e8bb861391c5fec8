"""Record which BOS/EOS transformers adds for a tokenizer.json folder, per class and config keys.

A model folder holding ``tokenizer.json`` and a ``tokenizer_config.json`` may set
``add_bos_token`` / ``add_eos_token``. Whether transformers reads them depends on the
``tokenizer_class``: a few classes rebuild the file's post-processor from them (4.57.1's
``update_post_processor``: Llama, CodeLlama, Gemma, Cohere, GPT-NeoX), every other class keeps
the file's post-processor and ignores both keys. This builds one folder per (class,
post-processor, keys) around the real Mistral 7B v0.1 ``tokenizer.json`` (its post-processor
replaced by one that adds nothing, ``<s>``, ``</s>`` or both), loads it with
``AutoTokenizer.from_pretrained`` of each transformers install given, and records the ids that
``tok(TEXT)`` puts before and after ``tok(TEXT, add_special_tokens=False)``.

Writes ``fixtures/framing.json``::

    {"generator": "tools/make_framing_fixtures.py", "source": "hf/mistral-7b-v0.1/tokenizer.json",
     "sha256": "<of it>", "text": TEXT, "references": ["transformers 4.57.1 (tokenizers 0.22.1)", ...],
     "cases": {"CLASS|PP|KEYS": {reference: {"prefix": [ids], "suffix": [ids]} | {"error": "<type>"}}}}

``CLASS`` is a ``tokenizer_class`` (a folder without one fails to load in 4.57.1), ``PP`` one of :data:`POST_PROCESSORS`,
``KEYS`` one of :data:`KEYSETS`. Usage and ``--check`` as ``tools/make_bos_defaults_fixtures.py``
(``--transformers DIR`` per install: 4.57.1 with tokenizers 0.22.1 and ``huggingface_hub<1.0``,
5.24.0 with tokenizers 0.23.3; both need ``safetensors``; offline). The test suite checks
rmlprep against the fixture (``tests/test_hf.py::test_add_special_tokens_frames_as_transformers``)
without transformers.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.make_bos_defaults_fixtures import drift_by, fixture_main  # noqa: E402
from tools.make_parity_fixtures import real_dir  # noqa: E402

SOURCE = "hf/mistral-7b-v0.1/tokenizer.json"
TEXT = "Hello world"
CLASSES = ("LlamaTokenizerFast", "LlamaTokenizer", "CodeLlamaTokenizerFast", "GemmaTokenizerFast",
           "CohereTokenizerFast", "GPTNeoXTokenizerFast", "GPT2TokenizerFast", "Qwen2TokenizerFast",
           "PreTrainedTokenizerFast")
#: name -> the post-processor's ``single`` template (None: no post-processor)
POST_PROCESSORS = {
    "none": None,
    "bos": ["<s>", "$A"],
    "eos": ["$A", "</s>"],
    "both": ["<s>", "$A", "</s>"],
}
KEYSETS = {
    "none": {}, "bosT": {"add_bos_token": True}, "bosF": {"add_bos_token": False},
    "eosT": {"add_eos_token": True}, "eosF": {"add_eos_token": False},
    "bosF_eosT": {"add_bos_token": False, "add_eos_token": True},
}


def folder_files(source: dict, config: dict, cls: str, pp: str, keys: str) -> tuple[dict, dict]:
    """``(tokenizer.json, tokenizer_config.json)`` of one case: the source file with its
    post-processor replaced, and the source's config without its class and keys, plus ``cls``
    (unless ``-``) and the keys."""
    def piece(name: str, i: int = 0) -> dict:
        return {"Sequence": {"id": "A", "type_id": i}} if name == "$A" else {"SpecialToken": {"id": name, "type_id": i}}

    single = POST_PROCESSORS[pp]
    tj = dict(source)
    tj["post_processor"] = None if single is None else {
        "type": "TemplateProcessing", "single": [piece(n) for n in single], "pair": [piece(n) for n in single],
        "special_tokens": {n: {"id": n, "ids": [source["model"]["vocab"][n]], "tokens": [n]} for n in ("<s>", "</s>")}}
    cfg = {k: v for k, v in config.items() if k not in ("add_bos_token", "add_eos_token", "tokenizer_class")}
    if cls != "-":
        cfg["tokenizer_class"] = cls
    cfg.update(KEYSETS[keys])
    return tj, cfg


def case_names() -> list[str]:
    return [f"{c}|{p}|{k}" for c in CLASSES for p in POST_PROCESSORS for k in KEYSETS]


_CHILD = r"""
import json, os, shutil, sys, tempfile, tokenizers, transformers
sys.path.insert(0, sys.argv[4])
from tools.make_framing_fixtures import case_names, folder_files
from transformers import AutoTokenizer
source, config, text = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
out = {"reference": f"transformers {transformers.__version__} (tokenizers {tokenizers.__version__})", "cases": {}}
for name in case_names():
    d = tempfile.mkdtemp()
    tj, cfg = folder_files(source, config, *name.split("|"))
    json.dump(tj, open(os.path.join(d, "tokenizer.json"), "w"))
    json.dump(cfg, open(os.path.join(d, "tokenizer_config.json"), "w"))
    try:
        tok = AutoTokenizer.from_pretrained(d)
        full, bare = tok(text)["input_ids"], tok(text, add_special_tokens=False)["input_ids"]
        k = next(i for i in range(len(full) - len(bare) + 1) if full[i:i + len(bare)] == bare)
        out["cases"][name] = {"prefix": full[:k], "suffix": full[k + len(bare):]}
    except Exception as e:
        out["cases"][name] = {"error": type(e).__name__}
    shutil.rmtree(d)
print(json.dumps(out))
"""


def generate(targets: list[str]) -> dict:
    """The fixture, from a child process per transformers install in ``targets``."""
    src = real_dir() / SOURCE
    refs = []
    for target in targets:
        env = dict(os.environ, PYTHONPATH=str(Path(target).resolve()), HF_HUB_OFFLINE="1",
                   TRANSFORMERS_VERBOSITY="error")
        r = subprocess.run([sys.executable, "-c", _CHILD, str(src), str(src.parent / "tokenizer_config.json"), TEXT,
                            str(ROOT)], env=env, capture_output=True, text=True, check=True, cwd="/")
        refs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    return {
        "generator": "tools/make_framing_fixtures.py",
        "source": SOURCE,
        "sha256": hashlib.sha256(src.read_bytes()).hexdigest(),
        "config_sha256": hashlib.sha256((src.parent / "tokenizer_config.json").read_bytes()).hexdigest(),
        "text": TEXT,
        "references": [r["reference"] for r in refs],
        "cases": {c: {r["reference"]: r["cases"][c] for r in refs} for c in case_names()},
    }


def drift(have: dict, want: dict) -> list[str]:
    return drift_by(have, want, "cases")


def main(argv: list[str] | None = None) -> int:
    return fixture_main(argv, __doc__, ROOT / "fixtures" / "framing.json", generate, drift)


if __name__ == "__main__":
    sys.exit(main())
