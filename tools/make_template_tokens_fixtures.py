"""Record the special-token variables transformers passes to a chat template, and a render.

transformers' ``apply_chat_template`` renders with ``{**tokenizer.special_tokens_map, **kwargs}``:
besides ``bos_token`` / ``eos_token``, every other special token the tokenizer sets
(``unk_token``, ``pad_token``, ..., ``additional_special_tokens``, a config's
``extra_special_tokens`` such as Gemma 3's ``image_token``). rmlprep passes ``bos_token`` and
``eos_token`` only, and refuses a template that reads another unless a template option gives
it (``rmlprep.chat.template.refuse_unpassed_tokens``). This loads real model folders with
``AutoTokenizer.from_pretrained`` and records, per folder, ``special_tokens_map`` and the
render of :data:`TEMPLATE` (a ChatML template that also writes ``pad_token``, ``unk_token``,
``mask_token``, ``additional_special_tokens``, Gemma 3's ``image_token`` and a name no
tokenizer sets) for :data:`MESSAGES`, so the test can check that rmlprep renders the same text from the folder, or
refuses where the value would be the tokenizer class's default.

It also records, per ``tokenizer_class`` in :data:`CLASSES`, the special tokens transformers
gives a folder whose config names the class and sets none of them (the class's defaults,
``Qwen2TokenizerFast``: ``unk_token="<|endoftext|>"``), and writes them as the runtime table
``rmlprep/_template_token_defaults.py``.

Writes ``fixtures/template_tokens.json``::

    {"generator": "tools/make_template_tokens_fixtures.py", "reference": "transformers X (tokenizers Y)",
     "template": TEMPLATE, "messages": MESSAGES,
     "folders": {name: {"sha256": {file: hex}, "special_tokens_map": {...}, "render": text}},
     "vehicle": {"path", "sha256"}, "classes": {cls: {"loaded_as", "special_tokens_map"} | {"error"}}}

Usage: ``python tools/make_template_tokens_fixtures.py`` with transformers, tokenizers and
jinja2 importable (made with transformers 4.57.1 in a throwaway venv); offline
(``HF_HUB_OFFLINE=1``). Needs the real tokenizers in ``~/.cache/rmlprep-real-tokenizers``
(env RMLPREP_REAL_TOKENIZERS). rmlprep's tests only read the JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "fixtures" / "template_tokens.json"
REAL = Path(os.environ.get("RMLPREP_REAL_TOKENIZERS") or Path.home() / ".cache" / "rmlprep-real-tokenizers")
FOLDERS = ("hf/qwen2.5", "hf/qwen3", "hf/gemma3", "hf/gemma", "hf/phi-3-mini", "hf/llama3", "hf/mistral-7b-v0.1",
           "hf/gpt-oss", "hf/gpt2")
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
            "[pad={{ pad_token }} unk={{ unk_token }} mask={{ mask_token }} "
            "extra={{ additional_special_tokens | join(',') if additional_special_tokens is defined else '-' }} "
            "image={{ image_token }} other={{ other_token }}]")
MESSAGES = [{"role": "user", "content": "Hi"}]
FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
#: tokenizer_class values of Hub configs whose defaults are recorded: a folder whose config
#: names the class and sets none of its special tokens (the vehicle: GPT-2's tokenizer.json)
CLASSES = ("PreTrainedTokenizerFast", "GPT2Tokenizer", "GPT2TokenizerFast", "Qwen2Tokenizer", "Qwen2TokenizerFast",
           "LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer", "CodeLlamaTokenizerFast", "GemmaTokenizer",
           "GemmaTokenizerFast", "CohereTokenizer", "CohereTokenizerFast", "T5Tokenizer", "T5TokenizerFast")
TABLE = ROOT / "rmlprep" / "_template_token_defaults.py"


def main() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    import tokenizers
    import transformers
    from transformers import AutoTokenizer

    folders = {}
    for name in FOLDERS:
        d = REAL / name
        tok = AutoTokenizer.from_pretrained(str(d))
        folders[name] = {
            "sha256": {f: hashlib.sha256((d / f).read_bytes()).hexdigest() for f in FILES if (d / f).is_file()},
            "special_tokens_map": tok.special_tokens_map,
            "render": tok.apply_chat_template(MESSAGES, chat_template=TEMPLATE, tokenize=False,
                                              add_generation_prompt=True),
        }
    vehicle = REAL / "hf" / "gpt2" / "tokenizer.json"
    classes = {}
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(vehicle, Path(tmp) / "tokenizer.json")
        for cls in CLASSES:
            (Path(tmp) / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": cls}))
            try:
                tok = AutoTokenizer.from_pretrained(tmp)
            except Exception as e:  # a class this install cannot build from a tokenizer.json
                classes[cls] = {"error": type(e).__name__}
                continue
            classes[cls] = {"loaded_as": type(tok).__name__, "special_tokens_map": tok.special_tokens_map}
    reference = f"transformers {transformers.__version__} (tokenizers {tokenizers.__version__})"
    out = {"generator": "tools/make_template_tokens_fixtures.py", "reference": reference,
           "template": TEMPLATE, "messages": MESSAGES, "folders": folders,
           "vehicle": {"path": "hf/gpt2/tokenizer.json", "sha256": hashlib.sha256(vehicle.read_bytes()).hexdigest()},
           "classes": classes}
    OUT.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {OUT}", file=sys.stderr)
    TABLE.write_text(table_source(out), encoding="utf-8")
    print(f"wrote {TABLE}", file=sys.stderr)


def table_source(fixture: dict) -> str:
    """The runtime table (rmlprep/_template_token_defaults.py) the fixture's ``classes`` give:
    per class, the value of each standard special token besides bos/eos (None: not passed)."""
    names = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token", "additional_special_tokens")
    rows = []
    for cls, got in fixture["classes"].items():
        if "error" in got:
            continue
        m = got["special_tokens_map"]
        rows.append(f"    {cls!r}: {{{', '.join(f'{k!r}: {m.get(k)!r}' for k in names)}}},")
    return (f'"""Generated by tools/make_template_tokens_fixtures.py from fixtures/template_tokens.json\n'
            f'({fixture["reference"]}); do not edit.\n\n'
            "The special tokens besides bos/eos that transformers passes to a chat template for a folder\n"
            "whose tokenizer_config.json names the class and leaves the token out (the class's default;\n"
            'None: not passed). Read by rmlprep.folder_config.template_tokens.\n"""\n\n'
            "CLASS_TOKEN_DEFAULTS = {\n" + "\n".join(rows) + "\n}\n")


if __name__ == "__main__":
    main()
