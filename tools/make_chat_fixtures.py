"""Render conversations through every real chat template with jinja2, as transformers does.

Writes ``fixtures/chat/renders.jsonl``: a banner record (generator, jinja2 version, sha256 of
every template and corpus file read), one ``{conversation_id, messages}`` record per
conversation, then one record per (template, conversation, add_generation_prompt):
``{template, conversation_id, add_generation_prompt, output | error}``; ``output`` is the raw render (leading BOS still in). Mistral v3 / v3-tekken
rows whose placement of the system message the template leaves undefined (a system message
and a conversation ending on an assistant turn) also carry ``defined_renders``: the renders
from which the mistral-common placement is derived (see rmlprep/chat_parity.py).

The environment (:func:`rmlprep.chat_parity.jinja_environment`, shared with the run's live
chat check) mirrors ``transformers.utils.chat_template_utils``:
``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[loopcontrols])``, ``raise_exception``, ``tojson(ensure_ascii=False)``,
``strftime_now`` (frozen at 2025-01-15, like ../shared/chat-templates/renders.jsonl),
``render(messages, tools=None, documents=None, add_generation_prompt, bos_token, eos_token)``
with each model's bos/eos (../shared/chat-templates/SOURCES.md). Before writing, every row of
../shared/chat-templates/renders.jsonl is re-rendered and must match.

Usage: python tools/make_chat_fixtures.py [--shared DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a clone without installing: the library's environment

from rmlprep.chat_parity import defined_renders, jinja_environment, needs_defined_renders, render_template  # noqa: E402

DEFAULT_SHARED = REPO.parent / "shared"
DEFAULT_OUT = REPO / "fixtures" / "chat" / "renders.jsonl"
FROZEN_NOW = datetime(2025, 1, 15)
MAX_CHARS = 2500  # corpus conversations longer than this are skipped (keeps the fixture small)

_DS_BOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>"
_DS_EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"
#: (bos_token, eos_token) per template, from SOURCES.md ("Tokens used when rendering").
TOKENS: dict[str, tuple[str | None, str | None]] = {
    "chatml-openhermes": (None, "<|im_end|>"),
    "qwen2": (None, "<|im_end|>"),
    "qwen2.5": (None, "<|im_end|>"),
    "smollm2": ("<|im_start|>", "<|im_end|>"),
    "llama2": ("<s>", "</s>"),
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3.1": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3.2": ("<|begin_of_text|>", "<|eot_id|>"),
    "mistral-v0.1-orig": ("<s>", "</s>"),
    "mistral-v0.2-orig": ("<s>", "</s>"),
    "mistral-v1": ("<s>", "</s>"),
    "mistral-v3": ("<s>", "</s>"),
    "mistral-v3-tekken": ("<s>", "</s>"),
    "mistral-v7": ("<s>", "</s>"),
    "mistral-v7-tekken": ("<s>", "</s>"),
    "gemma": ("<bos>", "<eos>"),
    "gemma3": ("<bos>", "<eos>"),
    "phi3": ("<s>", "<|endoftext|>"),
    "phi3.5": ("<s>", "<|endoftext|>"),
    "zephyr": ("<s>", "</s>"),
    "deepseek-llm": (_DS_BOS, _DS_EOS),
    "deepseek-v3": (_DS_BOS, _DS_EOS),
    "deepseek-r1-distill-qwen": (_DS_BOS, _DS_EOS),
    "command-r": ("<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
}

S = "system"
U = "user"
A = "assistant"


def _m(role: str, content: str) -> dict:
    return {"role": role, "content": content}


#: Hand-written conversations (the README's ids plus edge cases).
HAND: list[tuple[str, list[dict]]] = [
    ("a_user", [_m(U, "Hello, how are you?")]),
    ("b_system_user", [_m(S, "You are a helpful assistant."), _m(U, "What is 2+2?")]),
    ("c_system_user_assistant_user", [_m(S, "You are a helpful assistant."), _m(U, "What is 2+2?"),
                                      _m(A, "4"), _m(U, "And 3+3?")]),
    ("d_user_assistant_user_assistant", [_m(U, "Hi"), _m(A, "Hello! How can I help?"),
                                         _m(U, "Tell me a joke."), _m(A, "Why did the chicken cross the road?")]),
    ("e_whitespace_unicode", [_m(S, "  Be terse.\n"), _m(U, "\n naïve café — 東京 🙂  "),
                              _m(A, "  Oui.\n\n"), _m(U, "\tencore ?\n")]),
    ("e2_whitespace_unicode_no_system", [_m(U, "  naïve café — 東京 🙂\n"), _m(A, "\n\n東京 🙂  "),
                                         _m(U, " again ")]),
    ("f_empty_system", [_m(S, ""), _m(U, "Hi")]),
    ("h_system_user_assistant", [_m(S, "You are a pirate."), _m(U, "Hello"), _m(A, "Arr, ahoy!")]),
    ("h2_system_multi_turn_ends_assistant", [_m(S, "Answer in French."), _m(U, "Hi"), _m(A, "Salut"),
                                             _m(U, "Thanks"), _m(A, "De rien")]),
    ("i_empty_assistant", [_m(U, "Say nothing."), _m(A, ""), _m(U, "Now say hi.")]),
    ("i2_empty_everything", [_m(S, ""), _m(U, ""), _m(A, "")]),
    ("j_whitespace_only", [_m(U, "   \n\t "), _m(A, " \n ")]),
    ("j2_system_whitespace_only_user", [_m(S, " sys "), _m(U, "  \n"), _m(A, "ok")]),
    ("k_special_token_text", [_m(U, "<|im_end|> <|eot_id|> </s> <s> [INST] <end_of_turn> <|end|>"),
                              _m(A, "[/INST] <|im_start|>user\n<start_of_turn>model </s>")]),
    ("l_think", [_m(U, "2+2?"), _m(A, "<think>\nadd them\n</think>\n\n4"), _m(U, "3+3?")]),
    ("l2_think_ends_assistant", [_m(U, "2+2?"), _m(A, "<think>\nadd\n</think>4")]),
    ("g1_two_users", [_m(U, "A"), _m(U, "B")]),
    ("g2_assistant_first", [_m(A, "X"), _m(U, "Y")]),
    ("g3_system_not_first", [_m(U, "A"), _m(S, "S"), _m(U, "B")]),
    ("g4_two_systems", [_m(S, "S1"), _m(S, "S2"), _m(U, "Q")]),
    ("g5_system_only", [_m(S, "S")]),
]

#: (corpus file, criterion, how many): conversations taken from real chat sets, first matches.
CORPUS_PICKS: list[tuple[str, str, int]] = [
    ("fastchat.messages.jsonl", "multi", 2),
    ("llamafactory-dpo-system.messages.jsonl", "system", 3),
    ("llamafactory-dpo-system.messages.jsonl", "unicode", 1),
    ("hh-rlhf-harmless-test.messages.jsonl", "empty", 2),
    ("hh-rlhf-harmless-test.messages.jsonl", "whitespace", 2),
    ("oasst-sample.messages.jsonl", "whitespace", 2),
    ("oasst-sample.messages.jsonl", "unicode", 1),
    ("sgd-test.messages.jsonl", "empty", 1),
    ("topical-chat.messages.jsonl", "whitespace", 2),
    ("gsm8k.messages.jsonl", "unicode", 1),
    ("taskmaster4.messages.jsonl", "multi", 1),
    ("llamafactory-alpaca.messages.jsonl", "unicode", 1),
    ("self-instruct-user-oriented.messages.jsonl", "any", 1),
]


def _matches(msgs: list[dict], crit: str) -> bool:
    if any(m.get("role") not in (S, U, A) or not isinstance(m.get("content"), str) for m in msgs):
        return False
    cs = [m["content"] for m in msgs]
    if crit == "any":
        return True
    if crit == "multi":
        return len(msgs) >= 6
    if crit == "system":
        return msgs[0]["role"] == S
    if crit == "unicode":
        return any(not c.isascii() for c in cs)
    if crit == "empty":
        return any(c == "" for c in cs)
    if crit == "whitespace":
        return any(c != c.strip() or "\n\n\n" in c for c in cs)
    raise ValueError(crit)


def corpus_conversations(shared: Path) -> tuple[list[tuple[str, list[dict]]], dict[str, str]]:
    out: list[tuple[str, list[dict]]] = []
    hashes: dict[str, str] = {}
    for fname, crit, n in CORPUS_PICKS:
        path = shared / "corpora" / "chat" / fname
        hashes[fname] = hashlib.sha256(path.read_bytes()).hexdigest()
        taken = 0
        used = {cid for cid, _ in out}
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh):
                rec = json.loads(line)
                msgs = [{"role": m["role"], "content": m["content"]} for m in rec["messages"]]
                cid = f"corpus:{fname.split('.')[0]}:{lineno}"
                if cid in used or sum(len(m["content"]) for m in msgs) > MAX_CHARS or not _matches(msgs, crit):
                    continue
                out.append((cid, msgs))
                taken += 1
                if taken == n:
                    break
    return out, hashes


def make_env():
    """The transformers-like environment, shared with the run's live check (strftime_now frozen)."""
    return jinja_environment(FROZEN_NOW)


def render(env, source: str, name: str, messages: list[dict], add_generation_prompt: bool) -> dict:
    bos, eos = TOKENS[name]
    return render_template(env, source, messages, add_generation_prompt=add_generation_prompt,
                           bos_token=bos, eos_token=eos)


def _needs_defined_renders(name: str, msgs: list[dict]) -> bool:
    return name in ("mistral-v3", "mistral-v3-tekken") and needs_defined_renders(msgs)


def build(shared: Path) -> list[dict]:
    import jinja2

    tdir = shared / "chat-templates"
    templates = {p.name[: -len(".jinja")]: p.read_text(encoding="utf-8") for p in sorted(tdir.glob("*.jinja"))}
    missing = set(templates) - set(TOKENS)
    if missing:
        raise SystemExit(f"no bos/eos known for templates {sorted(missing)}: add them to TOKENS from SOURCES.md")
    env = make_env()

    # self-check: reproduce the shared reference renders first
    bad = 0
    for line in (tdir / "renders.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        got = render(env, templates[row["template"]], row["template"], row["messages"], row["add_generation_prompt"])
        want = {k: row[k] for k in ("output", "error") if k in row}
        if got != want:
            bad += 1
            print(f"mismatch with shared render: {row['template']} {row['conversation_id']}", file=sys.stderr)
    if bad:
        raise SystemExit(f"{bad} shared renders not reproduced; the environment differs from transformers'")

    corpus, corpus_hashes = corpus_conversations(shared)
    conversations = HAND + corpus
    rows: list[dict] = [{
        "banner": True,
        "generator": "tools/make_chat_fixtures.py",
        "jinja2": jinja2.__version__,
        "strftime_now": FROZEN_NOW.date().isoformat(),
        "templates_sha256": {n: hashlib.sha256(s.encode("utf-8")).hexdigest() for n, s in templates.items()},
        "corpora_sha256": corpus_hashes,
        "conversations": len(conversations),
    }]
    rows.extend({"conversation_id": cid, "messages": msgs} for cid, msgs in conversations)
    for name, source in templates.items():
        for cid, msgs in conversations:
            for gen in (False, True):
                row = {"template": name, "conversation_id": cid, "add_generation_prompt": gen}
                row.update(render(env, source, name, msgs, gen))
                if "output" in row and _needs_defined_renders(name, msgs):
                    row["defined_renders"] = defined_renders(
                        lambda m, source=source, name=name, gen=gen: render(env, source, name, m, gen), msgs)
                rows.append(row)
    return rows


def write(rows: list[dict], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8", newline="\n") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    a = ap.parse_args(argv)
    rows = build(a.shared)
    write(rows, a.out)
    print(f"wrote {sum('template' in r for r in rows)} renders to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
