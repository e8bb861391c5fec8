"""Render conversations through every real chat template with jinja2, as transformers does.

Writes two files:

* ``fixtures/chat/renders.jsonl.gz``: a banner record (generator, jinja2 version, the date the
  clock is frozen at, every template read with its sha256, the format that reproduces it and
  the bos/eos it is rendered with, the sha256 of every corpus file read), one
  ``{conversation_id, messages[, tools]}`` record per conversation, then one record per
  (template, conversation, add_generation_prompt): ``{template, conversation_id,
  add_generation_prompt, output | error}`` with the raw render. Conversations: the probe set
  (``rmlprep/chat/probes.py``), hand-written edge cases, and a sample of every
  ``*.messages.jsonl`` set in ../shared/corpora/chat (the tool-call set also with its JSON tool
  calls converted, ``rmlprep.chat.convert.json_tools``). A template that no format reproduces
  gets no rows; each template is rendered as its format gives conversations to it
  (``rmlprep.chat.registry.template_view``), with the generation prompt only when the
  conversation does not end on an assistant turn.
* ``rmlprep/chat/_template_table.py``: the sha256 of every real template in
  ../shared/chat-templates (and more/) with the format that reproduces it on the probes, or
  None and the first differing probe: what ``detect_chat_format`` uses when jinja2 is not
  installed.

The environment (:func:`rmlprep.chat.render.jinja_environment`) mirrors transformers':
``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[loopcontrols])``, ``raise_exception``, ``tojson(ensure_ascii=False)``,
``strftime_now`` frozen at 2024-07-26. Before writing, every row of
../shared/chat-templates/renders.jsonl (made with transformers' own renderer) is re-rendered
and must match.

Usage: python tools/make_chat_fixtures.py [--shared DIR] [--out FILE] [--table FILE]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a clone without installing

from rmlprep.chat.convert import json_tools  # noqa: E402
from rmlprep.chat.detect import table_entry, template_sha256  # noqa: E402
from rmlprep.chat.messages import parse_conversation  # noqa: E402
from rmlprep.chat.probes import PROBES  # noqa: E402
from rmlprep.chat.registry import get_format, template_view  # noqa: E402
from rmlprep.chat.render import render  # noqa: E402

DEFAULT_SHARED = REPO.parent / "shared"
DEFAULT_OUT = REPO / "fixtures" / "chat" / "renders.jsonl.gz"
DEFAULT_TABLE = REPO / "rmlprep" / "chat" / "_template_table.py"
TODAY = "2024-07-26"
MAX_CHARS = 2500  # corpus conversations longer than this are skipped (keeps the fixture small)
PER_SET = 3  # the first conversations of each set
_DS_BOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"
_DS_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"
#: (bos_token, eos_token) of the templates in ../shared/chat-templates/renders.jsonl (SOURCES.md).
SHARED_TOKENS: dict[str, tuple[str | None, str | None]] = {
    "chatml-openhermes": (None, "<|im_end|>"), "qwen2": (None, "<|im_end|>"), "qwen2.5": (None, "<|im_end|>"),
    "smollm2": ("<|im_start|>", "<|im_end|>"), "llama2": ("<s>", "</s>"),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"), "llama3.1": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3.2": ("<|begin_of_text|>", "<|eot_id|>"), "mistral-v0.1-orig": ("<s>", "</s>"),
    "mistral-v0.2-orig": ("<s>", "</s>"), "mistral-v1": ("<s>", "</s>"), "mistral-v3": ("<s>", "</s>"),
    "mistral-v3-tekken": ("<s>", "</s>"), "mistral-v7": ("<s>", "</s>"), "mistral-v7-tekken": ("<s>", "</s>"),
    "gemma": ("<bos>", "<eos>"), "gemma3": ("<bos>", "<eos>"), "phi3": ("<s>", "<|endoftext|>"),
    "phi3.5": ("<s>", "<|endoftext|>"), "zephyr": ("<s>", "</s>"), "deepseek-llm": (_DS_BOS, _DS_EOS),
    "deepseek-v3": (_DS_BOS, _DS_EOS), "deepseek-r1-distill-qwen": (_DS_BOS, _DS_EOS),
    "command-r": ("<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
}

S, U, A = "system", "user", "assistant"


def _m(role: str, content: str) -> dict:
    return {"role": role, "content": content}


#: Hand-written edge cases beyond the probes.
HAND: list[tuple[str, list[dict]]] = [
    ("e2_whitespace_unicode_no_system", [_m(U, "  naïve café — 東京 🙂\n"), _m(A, "\n\n東京 🙂  "), _m(U, " again ")]),
    ("f_empty_system", [_m(S, ""), _m(U, "Hi")]),
    ("h2_system_multi_turn_ends_assistant", [_m(S, "Answer in French."), _m(U, "Hi"), _m(A, "Salut"),
                                             _m(U, "Thanks"), _m(A, "De rien")]),
    ("j_whitespace_only", [_m(U, "   \n\t "), _m(A, " \n ")]),
    ("j2_system_whitespace_only_user", [_m(S, " sys "), _m(U, "  \n"), _m(A, "ok")]),
    ("l2_think_ends_assistant", [_m(U, "2+2?"), _m(A, "<think>\nadd\n</think>4")]),
    ("l3_think_twice", [_m(U, "2+2?"), _m(A, "<think>a</think>b</think>c")]),
    ("m_tool_response_user", [_m(U, "Q"), _m(A, "calling"), _m(U, "<tool_response>\nx\n</tool_response>"),
                              _m(A, "done")]),
]


def corpus_conversations(shared: Path) -> tuple[list[tuple[str, list, list | None]], dict[str, str]]:
    """The first PER_SET conversations (under MAX_CHARS) of every set; the tool-call set also
    converted with json_tools (the first 2 * PER_SET that hold a tool call)."""
    out: list[tuple[str, list, list | None]] = []
    hashes: dict[str, str] = {}
    for path in sorted((shared / "corpora" / "chat").glob("*.messages.jsonl")):
        fname = path.name
        stem = fname.split(".")[0]
        hashes[fname] = hashlib.sha256(path.read_bytes()).hexdigest()
        plain = conv = 0
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh):
                msgs = json.loads(line)["messages"]
                if sum(len(m.get("content") or "") for m in msgs) > MAX_CHARS:
                    continue
                if plain < PER_SET:
                    out.append((f"corpus:{stem}:{lineno}", msgs, None))
                    plain += 1
                if stem == "llamafactory-toolcall" and conv < 2 * PER_SET:
                    m2, tools, n = json_tools(msgs)
                    if n:
                        out.append((f"corpus:{stem}:{lineno}:json_tools", m2, tools))
                        conv += 1
                if plain >= PER_SET and (stem != "llamafactory-toolcall" or conv >= 2 * PER_SET):
                    break
    return out, hashes


def templates(shared: Path) -> dict[str, str]:
    """Every real template by name (``more/`` ones prefixed), first name of each sha256 only."""
    tdir = shared / "chat-templates"
    out: dict[str, str] = {}
    seen: set[str] = set()
    for p in sorted(tdir.glob("*.jinja")) + sorted(tdir.glob("more/*.jinja")):
        name = p.relative_to(tdir).as_posix()[: -len(".jinja")]
        src = p.read_text(encoding="utf-8")
        if template_sha256(src) not in seen:
            seen.add(template_sha256(src))
            out[name] = src
    return out


def self_check(shared: Path, tmpl: dict[str, str]) -> None:
    """Reproduce ../shared/chat-templates/renders.jsonl (transformers' renders) first."""
    bad = 0
    for line in (shared / "chat-templates" / "renders.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        bos, eos = SHARED_TOKENS[row["template"]]
        got = render(tmpl[row["template"]], row["messages"], add_generation_prompt=row["add_generation_prompt"],
                     bos_token=bos, eos_token=eos, now="2025-01-15")
        if ("output" in row) != ("output" in got) or row.get("output") != got.get("output"):
            bad += 1
            print(f"mismatch with shared render: {row['template']} {row['conversation_id']}", file=sys.stderr)
    if bad:
        raise SystemExit(f"{bad} shared renders not reproduced; the environment differs from transformers'")


def build(shared: Path) -> tuple[list[dict], dict[str, tuple[str | None, str]]]:
    import jinja2

    tmpl = templates(shared)
    self_check(shared, tmpl)
    table = {template_sha256(src): table_entry(src) for src in tmpl.values()}
    corpus, corpus_hashes = corpus_conversations(shared)
    conversations = [(f"probe:{pid}", msgs, tools) for pid, msgs, tools in PROBES]
    conversations += [(cid, msgs, None) for cid, msgs in HAND] + corpus
    banner = {
        "banner": True,
        "generator": "tools/make_chat_fixtures.py",
        "jinja2": jinja2.__version__,
        "strftime_now": TODAY,
        "templates": {},
        "corpora_sha256": corpus_hashes,
        "conversations": len(conversations),
    }
    rows: list[dict] = [banner]
    rows.extend({"conversation_id": cid, "messages": msgs, **({"tools": tools} if tools else {})}
                for cid, msgs, tools in conversations)
    for name, src in tmpl.items():
        fmt, why = table[template_sha256(src)]
        entry = {"sha256": template_sha256(src), "format": fmt}
        if fmt is None:
            banner["templates"][name] = dict(entry, refused=why)
            continue
        f = get_format(fmt)
        bos, eos = SHARED_TOKENS.get(name, (f.bos, f.eos))
        banner["templates"][name] = dict(entry, bos_token=bos, eos_token=eos)
        for cid, msgs, tools in conversations:
            conv = parse_conversation(msgs, tools)
            vm, vt = template_view(conv, f)
            for gen in (False, True) if msgs[-1]["role"] != "assistant" else (False,):
                row = {"template": name, "conversation_id": cid, "add_generation_prompt": gen}
                row.update(render(src, vm, tools=vt, add_generation_prompt=gen, bos_token=bos, eos_token=eos,
                                  now=TODAY))
                rows.append(row)
    return rows, table


def write_renders(rows: list[dict], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
    with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as fh:
        fh.write(data)


def write_table(table: dict[str, tuple[str | None, str]], shared_names: list[str], out: Path) -> None:
    lines = [
        "# Generated by tools/make_chat_fixtures.py from the real templates in ../shared/chat-templates",
        "# (and more/): " + ", ".join(shared_names) + ".",
        "# sha256 of the template's UTF-8 bytes -> (the format that reproduces it on every probe, or None;",
        "# why). detect_chat_format reads it when jinja2 is not installed. Do not edit.",
        "",
        "TEMPLATES: dict[str, tuple[str | None, str]] = {",
    ]
    for sha, (fmt, why) in sorted(table.items()):
        lines.append(f"    {sha!r}: ({fmt!r}, {why!r}),")
    lines.append("}")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    a = ap.parse_args(argv)
    rows, table = build(a.shared)
    write_renders(rows, a.out)
    write_table(table, list(templates(a.shared)), a.table)
    print(f"wrote {sum('template' in r for r in rows)} renders to {a.out} and {len(table)} templates to {a.table}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
