"""Record the ids transformers gives a SentencePiece folder whose config adds tokens.

A fine-tune of a Llama 2 / Mistral base often ships its base ``tokenizer.model`` (32,000
pieces), no tokenizer.json, and a ``tokenizer_config.json`` whose ``added_tokens_decoder`` adds
its chat markers (``<|im_end|>`` at 32000, ``<|im_start|>`` at 32001). transformers builds a
Hugging Face tokenizer from the ``.model`` and adds those entries to it; rmlprep reads the folder
the same way (:mod:`rmlprep.spm_added`). This builds such folders around the real Llama 2 and
Mistral 7B v0.1 ``.model`` files, one per case of :data:`CASES` (the ``legacy`` key, the
entries' flags, their ids), loads each with ``AutoTokenizer.from_pretrained`` of every
transformers install given and records, per text of :data:`TEXTS`, the ids of
``tok(text, add_special_tokens=False)`` with special-token text parsed (rmlprep's
``parse_special=True``) and read as text (``split_special_tokens=True``: ``parse_special=False``),
the decoded ids, and the ids the added tokens got. The ``plain-*`` cases add no token: they record
what a ``.model``-only folder gives with special-token text parsed (:mod:`rmlprep.spm_special`).

Writes ``fixtures/spm_added_tokens.json``::

    {"generator": "tools/make_spm_added_fixtures.py", "sources": {name: {"path", "sha256"}},
     "texts": [...], "references": ["transformers 4.57.1 (tokenizers 0.22.1)", ...],
     "cases": {case: {"source": name, "config": {tokenizer_config.json},
                      reference: {"ids": {content: id}, "parsed": [[ids]...], "unparsed": [[ids]...],
                                  "decoded": [text...]} | {"error": "<exception type>"}}}}

Usage: ``python tools/make_spm_added_fixtures.py --transformers DIR4 --transformers DIR5`` with
the installs :mod:`tools.make_bos_defaults_fixtures` describes (``pip install --target DIR
--no-deps transformers==4.57.1 tokenizers==0.22.1 'huggingface_hub<1.0' safetensors``; for 5.x
``transformers==5.24.0 'safetensors>=0.8.0'``); the run is offline (``HF_HUB_OFFLINE=1``).
``--check`` regenerates in memory and compares with the committed fixture (exit 1 naming each
case that moved): the fixture's drift check, run by hand, since the suite has no transformers
(``tests/test_spm_added.py`` checks the fixture against this script's inputs on every run).
Needs the real tokenizers in ``~/.cache/rmlprep-real-tokenizers`` (env RMLPREP_REAL_TOKENIZERS).
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

SOURCES = {"llama2": "llama2/tokenizer.model", "mistral": "mistral/tokenizer.model.v1"}

#: Encoded with and without special-token parsing: a ChatML render (the case this exists for),
#: text before and after the added tokens with spaces, Llama's own control tokens, a text
#: starting with a space, plain text, non-ASCII text around a token.
TEXTS = [
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n",
    "Hello <|im_end|> world",
    "a<|im_start|> b",
    "x<|im_end|>  y",
    "<s>hi</s> there",
    " hello",
    "Hello world",
    "caf\u00e9<|im_end|>\n\u65e5\u672c\u8a9e <|im_start|>",
]

_LLAMA_OWN = {"0": ("<unk>", True), "1": ("<s>", True), "2": ("</s>", True)}


def _entries(added: dict[str, tuple], own: bool = True) -> dict[str, dict]:
    """``added_tokens_decoder`` as ``save_pretrained`` writes it: ``{id: (content, special[, lstrip,
    rstrip, normalized])}`` -> ``{id: {content, lstrip, normalized, rstrip, single_word, special}}``."""
    out = {}
    for k, v in {**(_LLAMA_OWN if own else {}), **added}.items():
        content, special, lstrip, rstrip, normalized = (*v, False, False, False)[:5]
        out[k] = {"content": content, "lstrip": lstrip, "normalized": normalized, "rstrip": rstrip,
                  "single_word": False, "special": special}
    return out


def _config(added: dict[str, tuple], **extra) -> dict:
    return {"tokenizer_class": "LlamaTokenizer", "add_bos_token": True, "add_eos_token": False, "bos_token": "<s>",
            "eos_token": "<|im_end|>", "unk_token": "<unk>", "added_tokens_decoder": _entries(added), **extra}


_CHATML = {"32000": ("<|im_end|>", True), "32001": ("<|im_start|>", True)}

#: name -> (source, tokenizer_config.json). "legacy": true is what transformers 4.x saves for a
#: LlamaTokenizer; the others are the ways a folder can differ that rmlprep must read or refuse.
CASES = {
    "legacy": ("llama2", _config(_CHATML, legacy=True)),
    "legacy-mistral": ("mistral", _config(_CHATML, legacy=True)),
    "legacy-not-special": ("llama2", _config({"32000": ("<|im_end|>", False), "32001": ("<|im_start|>", False)},
                                             legacy=True)),
    "legacy-strip": ("llama2", _config({"32000": ("<|im_end|>", True, False, True),
                                        "32001": ("<|im_start|>", True, True, False)}, legacy=True)),
    "legacy-id-order": ("llama2", _config({"32001": ("<|im_end|>", True), "32000": ("<|im_start|>", True)},
                                          legacy=True)),
    "no-legacy-key": ("llama2", _config(_CHATML)),
    "not-legacy": ("llama2", _config(_CHATML, legacy=False)),
    "gap": ("llama2", _config({"32005": ("<|im_end|>", True)}, legacy=True)),
    # no added tokens: what parse_special=True on a .model-only folder would have to equal
    # (rmlprep.spm_special: the versions disagree on '<s>hi</s> there', so rmlprep refuses it)
    "plain-legacy": ("llama2", {**_config({}, legacy=True), "eos_token": "</s>"}),
    "plain-legacy-mistral": ("mistral", {**_config({}, legacy=True), "eos_token": "</s>"}),
    "plain-no-legacy-key": ("llama2", {**_config({}), "eos_token": "</s>"}),
}

_CHILD = r"""
import json, os, shutil, sys, tempfile, warnings
warnings.filterwarnings("ignore")
import tokenizers, transformers
from transformers import AutoTokenizer
transformers.logging.set_verbosity_error()
sources, texts, cases = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.loads(sys.argv[3])
out = {"reference": f"transformers {transformers.__version__} (tokenizers {tokenizers.__version__})", "cases": {}}
for name, (source, config) in cases.items():
    d = tempfile.mkdtemp()
    shutil.copy(sources[source], os.path.join(d, "tokenizer.model"))
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(config, f)
    try:
        tok = AutoTokenizer.from_pretrained(d)
        r = {"ids": {e["content"]: tok.convert_tokens_to_ids(e["content"])
                     for k, e in config["added_tokens_decoder"].items() if int(k) >= 3},
             "parsed": [], "unparsed": [], "decoded": []}
        for t in texts:
            ids = tok(t, add_special_tokens=False)["input_ids"]
            r["parsed"].append(ids)
            r["unparsed"].append(tok(t, add_special_tokens=False, split_special_tokens=True)["input_ids"])
            r["decoded"].append(tok.decode(ids))
        out["cases"][name] = r
    except Exception as e:
        out["cases"][name] = {"error": type(e).__name__}
    shutil.rmtree(d)
print(json.dumps(out))
"""


def generate(targets: list[str]) -> dict:
    """The fixture, from a child process per transformers install in ``targets``."""
    paths = {k: real_dir() / v for k, v in SOURCES.items()}
    refs = []
    for target in targets:
        env = dict(os.environ, PYTHONPATH=str(Path(target).resolve()), HF_HUB_OFFLINE="1",
                   TRANSFORMERS_VERBOSITY="error")
        r = subprocess.run([sys.executable, "-c", _CHILD, json.dumps({k: str(v) for k, v in paths.items()}),
                            json.dumps(TEXTS), json.dumps(CASES)],
                           env=env, capture_output=True, text=True, check=True, cwd="/")
        refs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    return {
        "generator": "tools/make_spm_added_fixtures.py",
        "sources": {k: {"path": SOURCES[k], "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
                    for k, p in paths.items()},
        "texts": TEXTS,
        "references": [r["reference"] for r in refs],
        "cases": {name: {"source": source, "config": config, **{r["reference"]: r["cases"][name] for r in refs}}
                  for name, (source, config) in CASES.items()},
    }


def drift(have: dict, want: dict) -> list[str]:
    """One line per banner key and per case that differs between ``have`` and ``want``."""
    return drift_by(have, want, "cases", values=False)


def main(argv: list[str] | None = None) -> int:
    return fixture_main(argv, __doc__, ROOT / "fixtures" / "spm_added_tokens.json", generate, drift)


if __name__ == "__main__":
    sys.exit(main())
