"""Record what the references give for text around special tokens on a SentencePiece ``.model``
read alone (no tokenizer.json, no tokenizer_config.json), and for chat renders on it.

For each real ``.model`` of :data:`SOURCES` (Llama 2, Mistral 7B v0.1 and v0.3), copied alone
into a folder, transformers' ``LlamaTokenizer`` (slow) and ``LlamaTokenizerFast`` (converted
from the ``.model``) of every install given are loaded with ``from_pretrained`` and their
``legacy`` recorded (a ``.model`` alone: no key, the class's default); then

- ``texts``: ``tok(text, add_special_tokens=False)`` of each text of :data:`TEXTS` (special-token
  text parsed): rmlprep's ``encode_fragments`` of the same cut;
- ``renders``: ``apply_chat_template(conv, chat_template=<template>, tokenize=True)`` and the
  rendered text, for each template of :data:`TEMPLATES` (``/work/shared/chat-templates``,
  env RMLPREP_CHAT_TEMPLATES) and conversation of :data:`CONVS`; for ``mistral-v1`` also
  mistral-common's ``encode_chat_completion`` (the installed version's v1 instruct tokenizer on
  each ``.model``; Mistral's own v1 file is mistral-common's ``tokenizer.model.v1``).

Writes ``fixtures/spm_chat.json``::

    {"generator": "tools/make_spm_chat_fixtures.py", "sources": {name: {"path", "sha256"}},
     "texts": [...], "convs": [...], "templates": {name: sha256},
     "references": ["transformers 4.57.1 (tokenizers 0.22.1)", ...], "mistral_common": "1.13.1",
     "cases": {source: {"legacy": {ref: {"slow": bool, "fast": bool}},
                        "texts": {ref: {"slow": [[ids]...], "fast": [[ids]...]}},
                        "renders": {"TEMPLATE CONV": {"text": str, ref: {"slow": ids, "fast": ids},
                                                      "mistral-common 1.13.1": ids}}}}}

Usage: ``python tools/make_spm_chat_fixtures.py --transformers DIR4`` with the install
:mod:`tools.make_spm_added_fixtures` describes (``pip install --target DIR --no-deps
transformers==4.57.1 tokenizers==0.22.1 'huggingface_hub<1.0' safetensors``); offline
(``HF_HUB_OFFLINE=1``). ``--check`` regenerates in memory and compares (exit 1 naming each
source that moved). ``tests/test_spm_chat.py`` reads it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.make_bos_defaults_fixtures import drift_by, fixture_main  # noqa: E402
from tools.make_parity_fixtures import real_dir  # noqa: E402

SOURCES = {"llama2": "llama2/tokenizer.model", "mistral-v1": "mistral/tokenizer.model.v1",
           "mistral-v3": "mistral/tokenizer.model.v3"}

#: Text right after BOS / EOS (with and without a space, a newline), before a special token,
#: a special token at the start and at the end, Mistral v3's control [INST].
TEXTS = ["<s>hi", "<s>hi</s> there", "hi</s>", "<s>[INST] Hi [/INST]", "<s> [INST] Hi [/INST]",
         "Hello.</s>\n<|user|>\n", "</s>  x", "[INST]Hi[/INST] Hello.</s>", "[INST] Hi [/INST]"]

#: The templates whose native formats rmlprep writes for these vocabularies.
TEMPLATES = ("llama2", "zephyr", "mistral-v1")

CONVS = [
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
     {"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Bye!"}],
    [{"role": "system", "content": "Be nice."}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello."}],
    [{"role": "user", "content": " Hi there"}, {"role": "assistant", "content": "\nHello."}],
]

_CHILD = r"""
import json, os, shutil, sys, tempfile, tokenizers, transformers
from transformers import LlamaTokenizer, LlamaTokenizerFast
model, texts, templates, convs = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), json.loads(sys.argv[4])
d = tempfile.mkdtemp()
shutil.copy(model, os.path.join(d, "tokenizer.model"))
toks = {"slow": LlamaTokenizer.from_pretrained(d), "fast": LlamaTokenizerFast.from_pretrained(d)}
out = {"reference": f"transformers {transformers.__version__} (tokenizers {tokenizers.__version__})",
       "legacy": {k: t.legacy for k, t in toks.items()},
       "texts": {k: [t(x, add_special_tokens=False)["input_ids"] for x in texts] for k, t in toks.items()},
       "renders": {}}
for name, tpl in templates.items():
    for i, conv in enumerate(convs):
        r = {}
        for k, t in toks.items():
            r["text"] = t.apply_chat_template(conv, chat_template=tpl, tokenize=False)
            r[k] = list(t.apply_chat_template(conv, chat_template=tpl, tokenize=True))
        out["renders"][f"{name} {i}"] = r
shutil.rmtree(d)
print(json.dumps(out))
"""


def _templates() -> dict[str, str]:
    d = Path(os.environ.get("RMLPREP_CHAT_TEMPLATES", ROOT.parent / "shared" / "chat-templates"))
    return {n: (d / f"{n}.jinja").read_text(encoding="utf-8") for n in TEMPLATES}


def _mistral_common(path: Path, conv: list[dict]) -> list[int]:
    from mistral_common.protocol.instruct.messages import AssistantMessage, SystemMessage, UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.protocol.instruct.validator import ValidationMode
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    kinds = {"system": SystemMessage, "user": UserMessage, "assistant": AssistantMessage}
    with tempfile.TemporaryDirectory() as d:  # the file name gives mistral-common the v1 instruct tokenizer
        shutil.copy(path, Path(d) / "tokenizer.model.v1")
        mt = MistralTokenizer.from_file(str(Path(d) / "tokenizer.model.v1"), mode=ValidationMode.finetuning)
    req = ChatCompletionRequest(messages=[kinds[m["role"]](content=m["content"]) for m in conv])
    return mt.encode_chat_completion(req).tokens


def generate(targets: list[str]) -> dict:
    """The fixture: a child process per transformers install in ``targets``, mistral-common here."""
    import mistral_common

    templates = _templates()
    cases: dict = {}
    refs: list[str] = []
    for src, rel in SOURCES.items():
        model = real_dir() / rel
        case: dict = {"legacy": {}, "texts": {}, "renders": {}}
        for target in targets:
            env = dict(os.environ, PYTHONPATH=str(Path(target).resolve()), HF_HUB_OFFLINE="1",
                       TRANSFORMERS_VERBOSITY="error")
            r = subprocess.run([sys.executable, "-c", _CHILD, str(model), json.dumps(TEXTS), json.dumps(templates),
                                json.dumps(CONVS)], env=env, capture_output=True, text=True, check=True, cwd="/")
            got = json.loads(r.stdout.strip().splitlines()[-1])
            ref = got["reference"]
            if ref not in refs:
                refs.append(ref)
            case["legacy"][ref] = got["legacy"]
            case["texts"][ref] = got["texts"]
            for key, v in got["renders"].items():
                e = case["renders"].setdefault(key, {"text": v["text"]})
                assert e["text"] == v["text"], (src, key)
                e[ref] = {"slow": v["slow"], "fast": v["fast"]}
        for i, conv in enumerate(CONVS):  # mistral-common's v1 instruct tokenizer on each vocabulary
            case["renders"][f"mistral-v1 {i}"][f"mistral-common {mistral_common.__version__}"] = \
                _mistral_common(model, conv)
        cases[src] = case
    return {
        "generator": "tools/make_spm_chat_fixtures.py",
        "sources": {n: {"path": p, "sha256": hashlib.sha256((real_dir() / p).read_bytes()).hexdigest()}
                    for n, p in SOURCES.items()},
        "texts": TEXTS, "convs": CONVS,
        "templates": {n: hashlib.sha256(t.encode()).hexdigest() for n, t in templates.items()},
        "references": refs, "mistral_common": mistral_common.__version__,
        "cases": cases,
    }


def drift(have: dict, want: dict) -> list[str]:
    """:func:`drift_by` on the ``cases``: one line per source whose answers moved."""
    return drift_by(have, want, "cases", values=False)


if __name__ == "__main__":
    sys.exit(fixture_main(None, __doc__, ROOT / "fixtures" / "spm_chat.json", generate, drift))
