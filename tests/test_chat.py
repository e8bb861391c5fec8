"""rmlprep.chat: detection proved over every real template, writers byte for byte against real
renders, options, what each format refuses, segments, BOS, stop ids.

References (never rmlprep's own output):
* ``../shared/chat-templates/renders.jsonl``: transformers' own renders of 24 templates;
* ``fixtures/chat/renders.jsonl.gz``: jinja2 renders (transformers' environment, checked
  against the file above) of every real template over the probes, hand cases and a sample of
  every ``*.messages.jsonl`` set, made by ``tools/make_chat_fixtures.py`` (drift test below);
* the expected format of every template, written out in ``_chat_common.EXPECTED``.
"""

from __future__ import annotations

import datetime
import gzip
import importlib.util
import json
import re

import pytest

from _chat_common import (
    EXPECTED, REAL, REPO, SHARED, TEMPLATES, a, byte_tokenizer, needs_jinja, needs_shared, real_tokenizer, s,
    template_text, u,
)
import rmlprep
from rmlprep import chat_parity
from rmlprep.chat import (
    CHAT_FORMATS, KINDS, ChatTemplateError, detect_chat_format, encode_chat, format_chat, format_chat_segments,
    stop_ids, turn_terminator,
)
from rmlprep.chat.probes import PROBES
from rmlprep.chat.registry import FORMATS
from rmlprep.errors import ChatFormatError, ParityError

FIXTURE = REPO / "fixtures" / "chat" / "renders.jsonl.gz"
TABLE = REPO / "rmlprep" / "chat" / "_template_table.py"
GENERATOR = REPO / "tools" / "make_chat_fixtures.py"
PROBE_IDS = {p for p, _, _ in PROBES}


# -- detection --------------------------------------------------------------------------------
@needs_shared
def test_every_template_is_listed():
    found = {p.relative_to(TEMPLATES).as_posix()[:-6] for p in [*TEMPLATES.glob("*.jinja"), *TEMPLATES.glob("more/*.jinja")]}
    assert found == set(EXPECTED)


@needs_shared
@needs_jinja
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_detect_every_template(name):
    """Proved on the probes: the expected format, or a refusal naming the first differing probe
    with both texts (never another format)."""
    t = template_text(name)
    want = EXPECTED[name]
    if want is not None:
        assert detect_chat_format(t) == want
        return
    with pytest.raises(ChatTemplateError) as e:
        detect_chat_format(t)
    d = e.value.difference
    assert d is not None and d.probe in PROBE_IDS and d.expected != d.actual
    msg = str(e.value)
    assert f"probe {d.probe!r}" in msg and "template:" in msg and "rmlprep:" in msg


# One-edit variants of Qwen3's template that strip spaces as well as newlines around the last
# answer and its reasoning (``(old, new)`` in more/Qwen-Qwen3-0.6B.jinja).
_QWEN3_STRIPS = {
    "reasoning": ("reasoning_content.strip('\\n')", "reasoning_content.strip()"),
    "answer": ("'\\n</think>\\n\\n' + content.lstrip('\\n')", "'\\n</think>\\n\\n' + content.lstrip()"),
    "think_parse": (".split('<think>')[-1].lstrip('\\n')", ".split('<think>')[-1].strip()"),
    "after_think": ("message.content.split('</think>')[-1].lstrip('\\n')", "message.content.split('</think>')[-1].lstrip()"),
}


@needs_shared
@needs_jinja
@pytest.mark.parametrize("edit", sorted(_QWEN3_STRIPS))
def test_a_qwen3_template_stripping_spaces_is_not_taken_for_qwen3(edit):
    """A Qwen3 template edited to strip all whitespace (``.strip()`` for ``.strip('\\n')``) writes
    ``[user "What is 2+2?", assistant " 4 " with reasoning " Add them. "]`` as
    ``<think>\\nAdd them.\\n</think>`` (and ``4 `` for the answer) where Qwen3's writes the spaces.
    No probe had spaces there, so ``chat.format = "auto"`` took such a template for ``qwen3``
    and a run wrote the spaces the template drops, exit 0 (explore18a). Now a probe differs."""
    from rmlprep.chat.render import render

    old, new = _QWEN3_STRIPS[edit]
    src = template_text("more/Qwen-Qwen3-0.6B")
    assert src.count(old) == 1
    t = src.replace(old, new)
    conv = ([u("What is 2+2?"), a(" 4 ", reasoning_content=" Add them. ")] if edit in ("reasoning", "answer")
            else [u("What is 2+2?"), a("<think> Add them. </think> 4 ")])
    # the edit matters: the variant's render differs from the real template's on it
    assert render(t, conv)["output"] != render(src, conv)["output"] == format_chat(conv, "qwen3")
    with pytest.raises(ChatTemplateError) as e:
        detect_chat_format(t)
    assert e.value.difference.probe in ("reasoning_padded", "think_in_content_padded")


# One-edit variants of real templates in branches that only some data reaches: (template, old,
# new, the probe that tells them apart). Each was taken for the real template's format before
# the probe existed.
_DATA_BRANCH_EDITS = [
    ("more/openai-gpt-oss-120b", '{%- elif param_spec.type == "integer" -%}\n        {{- "number" }}',
     '{%- elif param_spec.type == "integer" -%}\n        {{- "integer" }}', "tool_types"),
    ("more/openai-gpt-oss-120b", '{{- "<|start|>assistant<|channel|>analysis<|message|>" + message.content + "<|end|>" }}',
     '{{- "<|start|>assistant<|channel|>commentary<|message|>" + message.content + "<|end|>" }}', "tool_call_text_ends"),
    ("more/google-gemma-4-31B-it", "{{- '<|channel>thought\\n' + thinking_text + '\\n<channel|>' -}}",
     "{{- '<|channel>thought\\n' + thinking_text + '<channel|>' -}}", "tool_call_reasoning_ends"),
    ("more/NousResearch-Hermes-3-Llama-3.1-8B-tool_use", '{{- "{}" }}', "{{- tool.parameters|tojson }}", "tool_types"),
    ("more/Qwen-Qwen3-0.6B", "message.role == \"user\" and not(message.content.startswith('<tool_response>') and "
     "message.content.endswith('</tool_response>'))", 'message.role == "user"', "user_tool_response"),
    ("more/google-gemma-4-31B-it", "and not ns_tr_out.flag -%}\n            {{- '<|tool_response>' -}}",
     "and not ns_tr_out.flag -%}\n            {{- '<turn|>\\n' -}}", "tool_call_ends"),
    ("more/google-gemma-4-31B-it", "loop.index0 > ns_turn.last_user_idx and message.get('tool_calls')",
     "message.get('tool_calls')", "tool_call_reasoning_then_user"),
    ("more/deepseek-ai-DeepSeek-V3.1", "{%- else -%}{{message['content'] + '<｜tool▁calls▁begin｜>",
     "{%- else -%}{{message['content'] + '\\n\\n<｜tool▁calls▁begin｜>", "tool_call_with_text_no_tools"),
    ("more/deepseek-ai-DeepSeek-V3.1", "{%- else -%}{{'<｜tool▁call▁begin｜>'+", "{%- else -%}{{'\\n<｜tool▁call▁begin｜>'+",
     "two_tool_calls_no_tools"),
    ("more/deepseek-ai-DeepSeek-V3.1", "content.split('</think>', 1)[1] -%}", "content.split('</think>', 1)[1].lstrip() -%}",
     "think_in_content_history_only"),
    ("more/HuggingFaceTB-SmolLM3-3B", 'custom_instructions.replace("/think", "")', "custom_instructions", "system_think"),
]


@needs_shared
@needs_jinja
@pytest.mark.parametrize("name,old,new,probe", _DATA_BRANCH_EDITS, ids=[f"{e[0].split('/')[-1]}-{e[3]}" for e in _DATA_BRANCH_EDITS])
def test_a_template_edited_in_a_data_branch_is_not_taken_for_its_format(name, old, new, probe):
    """Real templates branch on the data: gpt-oss writes an integer parameter as ``number`` and
    a call's text as analysis only when no final answer follows, Gemma 4 writes the reasoning
    before a call only then and ``<|tool_response>`` after a call that ends the conversation,
    Hermes 3 writes ``{}`` for a tool with no properties, Qwen3 keeps the reasoning after a user
    turn wrapped in ``<tool_response>``, DeepSeek V3.1 (which writes no tool definitions, so no
    probe with them reached it) writes a call's text and a second call in their own branches and
    drops an earlier answer's text before ``</think>``, SmolLM3 cuts ``/think`` out of the system
    message. No probe reached these
    branches, so ``chat.format = "auto"`` took a template edited there for the real one's
    format and wrote what the edited template does not (explore18a: a mutation sweep appending
    a space to each string literal of the real templates). Each edit is now refused, on the
    probe named."""
    src = template_text(name)
    assert src.count(old) == 1
    with pytest.raises(ChatTemplateError) as e:
        detect_chat_format(src.replace(old, new))
    assert e.value.difference.probe == probe


_GEN_BLOCK = "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"


@needs_shared
@needs_jinja
@pytest.mark.parametrize("always", [True, False], ids=["always", "never"])
def test_a_template_that_ignores_add_generation_prompt_is_refused_by_its_cause(always):
    """Meta's first Llama 3 8B Instruct template (the one get.sh fetches into hf/llama3) is
    llama3.jinja without its ``{% if add_generation_prompt %}``: it ends every render with an
    assistant header. No format reproduces it (a training row would end untrained), and the
    refusal says why and what to do, for detection and for a named chat.format alike, instead of
    only the first differing probe; likewise a template that never writes the prompt."""
    from rmlprep.chat.detect import check_template_format

    src = template_text("llama3")
    assert _GEN_BLOCK in src
    t = src.replace(_GEN_BLOCK, "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}" if always else "")
    cached = REAL / "hf" / "llama3" / "tokenizer_config.json"
    if always and cached.exists():
        assert json.loads(cached.read_text(encoding="utf-8"))["chat_template"] == t
    want = "ends every render with the generation prompt" if always else "never writes the generation prompt"
    for call in (lambda: detect_chat_format(t), lambda: check_template_format(t, "llama3")):
        with pytest.raises(ChatTemplateError) as e:
            call()
        msg = str(e.value)
        assert "ignores add_generation_prompt" in msg and want in msg, msg
        assert "'<|start_header_id|>assistant<|end_header_id|>\\n\\n'" in msg and "parity.chat = false" in msg
        assert e.value.difference.format == "llama3"
    # the honest template is still llama3's, and a refusal for another cause names no such cause
    assert detect_chat_format(src) == "llama3"
    with pytest.raises(ChatTemplateError) as e:
        detect_chat_format(src.replace("| trim", ""))
    assert "ignores add_generation_prompt" not in str(e.value)


@needs_shared
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_detect_without_jinja_uses_the_committed_table(name, monkeypatch):
    import rmlprep.chat.detect as detect

    monkeypatch.setattr(detect, "jinja_available", lambda: False)
    t = template_text(name)
    if EXPECTED[name] is None:
        with pytest.raises(ChatTemplateError, match="no rmlprep chat format reproduces"):
            detect_chat_format(t)
    else:
        assert detect_chat_format(t) == EXPECTED[name]


def test_unknown_template_without_jinja_is_refused(monkeypatch):
    import rmlprep.chat.detect as detect

    monkeypatch.setattr(detect, "jinja_available", lambda: False)
    with pytest.raises(ChatFormatError, match=r"jinja2 is not installed to prove it now: pip install 'rmlprep\[chat\]'"):
        detect_chat_format("{% for m in messages %}{{ m.content }}{% endfor %}")


@needs_shared
@needs_jinja
def test_qwen3_template_is_qwen3_not_chatml():
    """The issue's report: Qwen3's template was detected as ChatML, whose writer keeps the
    reasoning of an earlier answer that Qwen3's template drops."""
    t = template_text("more/Qwen-Qwen3-0.6B")
    assert detect_chat_format(t) == "qwen3"
    from rmlprep.chat.detect import prove_format

    d = prove_format(t, "chatml")
    assert d is not None and d.format == "chatml"
    conv = [u("2+2?"), a("<think>\nadd\n</think>\n\n4"), u("3+3?"), a("<think>\nadd again\n</think>\n\n6")]
    from rmlprep.chat.render import render

    assert format_chat(conv, "qwen3") == render(t, conv, now="2024-07-26")["output"]
    assert "add\n" not in format_chat(conv, "qwen3") and "add again" in format_chat(conv, "qwen3")


@needs_shared
@needs_jinja
@pytest.mark.parametrize("answer,lost,where", [
    ("Pre <think>X</think> Ans", "Pre", "before its <think>"),
    ("<think>X</think>mid</think> Ans", "mid", "between two </think>"),
], ids=["before-think", "between-ends"])
@pytest.mark.parametrize("last", [True, False], ids=["last", "history"])
def test_qwen3_refuses_answer_text_its_template_drops(answer, lost, where, last):
    """Qwen3's template keeps the text after the last ``</think>`` as the answer and the text
    in the think block before the first ``</think>`` as reasoning: text before the ``<think>``
    or between two ``</think>`` is dropped (asserted below on the jinja2 render of the real
    template, the reference), and rmlprep matched it, so that text vanished from the training
    data without a word (explorer8 E4). Now a ChatFormatError naming the message and the text
    (a row reject in a run), in the last answer and in history alike; an answer whose think
    block starts it (newlines before it are whitespace the template strips) is written as before."""
    from rmlprep.chat.render import render

    t = template_text("more/Qwen-Qwen3-0.6B")
    conv = [u("q?"), a(answer)] + ([] if last else [u("again?"), a("ok")])
    out = render(t, conv, now="2024-07-26")["output"]
    assert lost not in out and "Ans" in out
    k = 1
    with pytest.raises(ChatFormatError, match=rf"^message {k} \(assistant\): its content holds text {where} "
                                              rf"\('{lost}'\), which qwen3's template drops"):
        format_chat(conv, "qwen3")
    ok = [u("q?"), a("\n<think>\nX\n</think>\n\n Ans")] + ([] if last else [u("again?"), a("ok")])
    assert format_chat(ok, "qwen3") == render(t, ok, now="2024-07-26")["output"]


@needs_shared
@needs_jinja
def test_text_parts_and_bare_strings():
    """Gemma 1's template takes a string content (``content | trim``; given a list it writes the
    list's Python repr), so its text parts are joined with "" first, as for every template that
    takes strings, and trimmed whole: "Weather in " + "Paris?" is "Weather in Paris?" (a
    week-two trial found each part trimmed, "Weather inParis?", Gemma 3's rule: its template
    trims each part). A list of bare strings is not the parts schema: real templates fail on it
    (qwen2.5: TypeError) or write an empty turn (gemma3), and rmlprep glued them; refused."""
    from rmlprep.chat.render import render

    parts = [{"type": "text", "text": "Weather in "}, {"type": "text", "text": "Paris?"}]
    want = render(template_text("gemma"), [u("Weather in Paris?"), a("Sunny.")], bos_token="<bos>")["output"]
    assert format_chat([u(parts), a("Sunny.")], "gemma", join_text_parts="") == want  # unset: refused (f8934f5)
    assert format_chat([u(parts), a("Sunny.")], "gemma3") == render(template_text("gemma3"), [u(parts), a("Sunny.")],
                                                                    bos_token="<bos>")["output"]
    bare = [u(["hi", "there"]), a("yo")]
    assert "error" in render(template_text("qwen2.5"), bare)
    assert "<start_of_turn>user\n<end_of_turn>" in render(template_text("gemma3"), bare, bos_token="<bos>")["output"]
    for fmt in ("qwen2.5", "gemma3", "gemma"):
        with pytest.raises(ChatFormatError, match=r"^message 0 \(user\): content\[0\] must be a part dict "
                                                  r"\{'type': 'text', 'text': \.\.\.\}, got str$"):
            format_chat(bare, fmt)


@needs_shared
@needs_jinja
def test_one_conversation_calls_refuse_text_parts_unless_the_join_is_chosen():
    """format_chat and encode_chat joined two text parts with "" silently where the sft run and
    tokenize_chat refuse them (f8934f5): Qwen2.5's real template has no join (its jinja2 render
    raises on the list, asserted below). Now both refuse with the run's reason (message 0, 2
    parts, the option) unless ``join_text_parts`` chooses; then they give the template's render of
    the joined string, "hi " + "\\n" + "there", and its tokenization by Hugging Face tokenizers."""
    from rmlprep.chat.render import render
    from rmlprep.errors import ConfigError

    two = [u([{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]), a("yo")]
    t = template_text("qwen2.5")
    assert "can only concatenate str" in render(t, two)["error"]
    why = r"^message 0 \(user\): its content is 2 text parts, which qwen2.5's template does not join"
    with pytest.raises(ChatFormatError, match=why):
        format_chat(two, "qwen2.5")
    for sep in ("\n", ""):
        joined = [u("hi " + sep + "there"), a("yo")]
        assert format_chat(two, "qwen2.5", join_text_parts=sep) == render(t, joined)["output"]
    tokenizers = pytest.importorskip("tokenizers")
    tok = real_tokenizer("hf/qwen2.5")
    with pytest.raises(ChatFormatError, match=why):
        encode_chat(tok, two, "qwen2.5")
    with pytest.raises(ChatFormatError, match=why):
        encode_chat(tok, two, "auto")  # the format auto proves on Qwen2.5's template
    ref = tokenizers.Tokenizer.from_file(str(REAL / "hf/qwen2.5" / "tokenizer.json"))
    want = ref.encode(render(t, [u("hi \nthere"), a("yo")])["output"], add_special_tokens=False).ids
    assert encode_chat(tok, two, "qwen2.5", join_text_parts="\n").input_ids == want
    with pytest.raises(ConfigError, match=r"encode_chat\(fmt='template'\): join_text_parts is for the native formats"):
        encode_chat(tok, two, "template", join_text_parts="\n")


@needs_jinja
def test_real_llama3_dir_older_template_refused():
    """The shared Llama 3 tokenizer dir carries the older Meta-Llama-3 template that always
    appends the assistant header: no format writes that, so it is refused, not guessed."""
    tok = real_tokenizer("hf/llama3")
    if not tok.chat_template:
        pytest.skip("the tokenizer has no chat template")
    with pytest.raises(ChatTemplateError) as e:
        detect_chat_format(tok.chat_template)
    assert e.value.difference.format == "llama3"


@pytest.mark.parametrize("name", CHAT_FORMATS)
def test_exact_name_wins(name):
    assert detect_chat_format(name) == name


@pytest.mark.parametrize("bad", ["chatml2", "ChatML", ""])
def test_unknown_format_lists_names(bad):
    with pytest.raises(ChatFormatError, match="known: chatml"):
        detect_chat_format(bad)


# -- writers against reference renders --------------------------------------------------------
FIXTURE_BANNER, FIXTURE_ROWS = chat_parity.load_renders(FIXTURE) if FIXTURE.is_file() else ({}, [])
needs_fixture = pytest.mark.skipif(not FIXTURE_ROWS, reason=f"{FIXTURE} is absent")
#: What a format may refuse in a conversation its template renders (the rows are rejected in a
#: run): fields and roles it cannot write, an order of roles its template raises on or mangles,
#: a reasoning its template would lose, tool-call shapes its template loses text or ids from.
REFUSAL = re.compile(r"cannot write|has no (tool|system|user|assistant) role|alternat|system message|"
                     r"drops the reasoning|writes reasoning only|only the (tool call|first)|one tool call|needs tool|"
                     r"needs tools|needs a description|ids of 9|no user message|parts|takes only|tool result|keeps only|tool_call_id|"
                     r"holds text (before its <think>|between two </think>)")


@needs_fixture
@pytest.mark.parametrize("name", sorted(n for n, t in FIXTURE_BANNER.get("templates", {}).items() if t["format"]))
def test_fixture_renders_reproduced(name):
    fmt = FIXTURE_BANNER["templates"][name]["format"]
    assert fmt == EXPECTED[name]
    rows = [r for r in FIXTURE_ROWS if r["template"] == name]
    n = 0
    for r in rows:
        try:
            got = format_chat(r["messages"], fmt, tools=r.get("tools"), add_generation_prompt=r["add_generation_prompt"])
        except ChatFormatError as e:
            assert REFUSAL.search(str(e)), (r["conversation_id"], str(e))
            continue
        assert "output" in r, f"{r['conversation_id']}: the template refuses ({r.get('error')}) but {fmt} writes it"
        assert got == r["output"], r["conversation_id"]
        n += 1
    assert n >= 10


#: Formats whose templates take any order of system/user/assistant turns: every plain corpus
#: conversation (role + content) must be written, none refused.
FREE = ("chatml", "qwen2", "smollm2", "qwen2.5", "qwen3", "llama3", "llama3.1", "llama3.2", "phi3", "phi3.5",
        "zephyr", "deepseek-llm", "deepseek3", "deepseek-v3.1", "mistral-v7", "mistral-v7-tekken")


@needs_fixture
@pytest.mark.parametrize("fmt", FREE)
def test_free_formats_write_every_plain_corpus_conversation(fmt):
    names = [n for n, t in FIXTURE_BANNER["templates"].items() if t["format"] == fmt]
    rows = [r for r in FIXTURE_ROWS if r["template"] in names and r["conversation_id"].startswith("corpus:")
            and "json_tools" not in r["conversation_id"]
            and all(m["role"] in ("system", "user", "assistant") for m in r["messages"])]
    assert rows
    for r in rows:
        format_chat(r["messages"], fmt, add_generation_prompt=r["add_generation_prompt"])


SHARED_RENDERS = TEMPLATES / "renders.jsonl"


@pytest.mark.skipif(not SHARED_RENDERS.is_file(), reason=f"{SHARED_RENDERS} not found")
def test_transformers_renders_reproduced_without_removals():
    """transformers' own renders, compared whole: BOS, default system prompts and Llama 3.1/3.2
    date lines included (rendered with the clock at 2025-01-15)."""
    n = refused = 0
    for line in SHARED_RENDERS.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        fmt = EXPECTED[r["template"]]
        if fmt is None:
            continue
        try:
            got = format_chat(r["messages"], fmt, add_generation_prompt=r["add_generation_prompt"],
                              options={"today": "2025-01-15"} if fmt == "llama3.2" else None)
        except ChatFormatError:
            refused += 1
            continue
        assert "output" in r, (r["template"], r["conversation_id"], r.get("error"))
        assert got == r["output"], (r["template"], r["conversation_id"])
        n += 1
    assert n > 250 and refused < 60


@needs_shared
@needs_jinja
def test_fixture_drift(tmp_path):
    spec = importlib.util.spec_from_file_location("make_chat_fixtures", GENERATOR)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows, table = mod.build(SHARED)
    mod.write_renders(rows, tmp_path / "r.jsonl.gz")
    mod.write_table(table, list(mod.templates(SHARED)), tmp_path / "t.py")
    new, old = gzip.decompress((tmp_path / "r.jsonl.gz").read_bytes()), gzip.decompress(FIXTURE.read_bytes())
    assert new.splitlines() == old.splitlines(), "fixtures/chat/renders.jsonl.gz is stale: rerun tools/make_chat_fixtures.py"
    assert (tmp_path / "r.jsonl.gz").read_bytes() == FIXTURE.read_bytes()
    assert (tmp_path / "t.py").read_text() == TABLE.read_text(), "rerun tools/make_chat_fixtures.py"


# -- what the removals of before became: the template's text, whole ----------------------------
def test_bos_default_system_and_date_lines_are_written():
    assert format_chat([u("Hi")], "llama3").startswith("<|begin_of_text|><|start_header_id|>user")
    assert format_chat([u("Hi")], "qwen2.5").startswith(
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n")
    assert "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n" in format_chat([u("Hi")], "llama3.1")
    assert "Today Date: 15 Jan 2025" in format_chat([u("Hi")], "llama3.2", options={"today": "2025-01-15"})
    assert "Today Date: 01 Jan 2025" in format_chat([u("Hi")], "llama3.1", options={"date_string": "01 Jan 2025"})
    assert "Current date: 2025-01-15" in format_chat([u("Hi")], "gpt-oss", options={"today": "2025-01-15"})


def test_an_empty_string_option_is_a_value_not_the_default():
    """An explorer finding (G15): ``model_identity = ""`` wrote ChatGPT's identity and
    ``date_string = ""`` the default date. The templates test ``is not defined``
    (more/openai-gpt-oss-120b.jinja: ``{{- model_identity + "\n" }}``; llama3.1/3.2.jinja:
    ``"Today Date: " + date_string + "\n\n"``), so "" is written as the empty text it is."""
    assert format_chat([u("Hi")], "gpt-oss", options={"model_identity": ""}).startswith(
        "<|start|>system<|message|>\nKnowledge cutoff: 2024-06\n")
    for fmt in ("llama3.1", "llama3.2"):
        assert "Cutting Knowledge Date: December 2023\nToday Date: \n\n" in format_chat(
            [u("Hi")], fmt, options={"date_string": ""})


def test_bos_is_one_token_with_the_real_llama3_tokenizer():
    """Issue point 5: the Llama 3 tokenizer.json adds no BOS itself; the template writes one."""
    tok = real_tokenizer("hf/llama3")
    conv = [u("Hi"), a("Hello")]
    ids = encode_chat(tok, conv, "llama3").input_ids
    assert ids[0] == 128000 and ids.count(128000) == 1
    tok2 = type(tok).create(tok.spec.replace(add_bos=True))
    assert encode_chat(tok2, conv, "llama3").input_ids == ids  # the tokenizer's add_bos adds nothing


def test_no_bos_where_the_template_writes_none():
    tok = byte_tokenizer(["<|im_start|>", "<|im_end|>", "<s>"], bos="<s>", add_bos=True)
    ids = encode_chat(tok, [u("q"), a("x")], "chatml").input_ids
    assert tok.bos_id not in ids


# -- options --------------------------------------------------------------------------------
def test_options():
    assert format_chat([u("q")], "qwen3", add_generation_prompt=True,
                       options={"enable_thinking": False}).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert format_chat([u("q")], "deepseek-v3.1", add_generation_prompt=True,
                       options={"enable_thinking": True}).endswith("<\uff5cAssistant\uff5c><think>")
    assert "Reasoning: high" in format_chat([u("q")], "gpt-oss", options={"reasoning_effort": "high"})
    with pytest.raises(ChatFormatError, match="no option 'enable_thinking'"):
        format_chat([u("q")], "qwen2.5", options={"enable_thinking": True})
    with pytest.raises(ChatFormatError, match="YYYY-MM-DD"):
        format_chat([u("q")], "llama3.2", options={"today": "yesterday"})
    with pytest.raises(ChatFormatError, match="YYYY-MM-DD"):  # a datetime (TOML's 2025-03-01T10:00:00) is no date
        format_chat([u("q")], "llama3.2", options={"today": datetime.datetime(2025, 3, 1, 10)})
    assert "Today Date: 01 Mar 2025" in format_chat([u("Hi")], "llama3.2", options={"today": datetime.date(2025, 3, 1)})


def test_mistral_v3_system_placement():
    """The template drops the system message when the conversation ends on an assistant turn:
    refused by default; ``system_placement='last-user'`` follows mistral-common."""
    conv = [s("S"), u("A"), a("B"), u("C"), a("D")]
    with pytest.raises(ChatFormatError, match="system_placement"):
        format_chat(conv, "mistral-v3")
    assert format_chat(conv, "mistral-v3", options={"system_placement": "last-user"}) == \
        "<s>[INST] A[/INST] B</s>[INST] S\n\nC[/INST] D</s>"
    assert format_chat(conv[:4], "mistral-v3") == "<s>[INST] A[/INST] B</s>[INST] S\n\nC[/INST]"


# -- refusals by capability --------------------------------------------------------------------
CALL = {"id": "call0w3x9", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}


@pytest.mark.parametrize("fmt,conv,tools,pattern", [
    ("chatml", [u("q"), a("x", reasoning_content="r")], None, "cannot write reasoning_content"),
    # the row's own key, not the canonical one (a trial: phi3 named reasoning_content for 'thinking')
    ("phi3", [u("q"), a("x", thinking="r")], None, "phi3 cannot write thinking "),
    ("phi3", [u("q"), a("x", reasoning="r")], None, "phi3 cannot write reasoning "),
    ("llama3", [u("q"), a(None, tool_calls=[CALL])], None, "cannot write tool_calls"),
    ("deepseek-v3.1", [u("q"), a("x")], [{"name": "f"}], "cannot write tool definitions"),
    ("phi3", [u("q"), a(None, tool_calls=[CALL]), {"role": "tool", "content": "1"}], None, "tool_calls"),
    ("gemma", [s("S"), u("q")], None, "does not support"),
    ("llama3.1", [u("q"), a("text", tool_calls=[CALL])], None, "text would be dropped"),
    ("llama3.1", [u("q"), a(None, tool_calls=[CALL, CALL])], None, "one tool call"),
    ("mistral-small-3.2", [u("q"), a(None, tool_calls=[dict(CALL, id="x")])], None, "9"),
    ("deepseek-r1", [u("q"), a("<think>r</think>x")], None, "drops the reasoning"),
    ("gemma4", [u("q"), a("x", reasoning_content="r")], None, "reasoning only before tool calls"),
    ("gemma4", [u("q"), {"role": "tool", "content": "1"}, a("x")], None, "would drop this one"),
    ("gemma4", [u("q"), a(None, tool_calls=[dict(CALL, id=None)]), {"role": "tool", "content": "1", "name": "f"},
                u("q2"), {"role": "tool", "content": "2", "name": "f"}], None, "would drop this one"),
    ("gemma4", [u("q"), a(None, tool_calls=[CALL]), {"role": "tool", "content": "1"}], None, "has neither"),
    ("gemma4", [u("q")], [{"name": "f", "parameters": {"type": "object", "properties": {"type": {"type": "string"}}}}],
     "parameter named 'type'"),
    ("gemma4", [u("q")], [{"name": "f", "parameters": {"properties": ["x"]}}], "needs an object"),
    ("gpt-oss", [u("q"), s("late")], None, "only a first system message"),
    ("smollm3", [u("q"), s("late")], None, "only a first system message"),
    ("hermes", [u("q"), a("x")], None, "needs tools"),
])
def test_format_refusals(fmt, conv, tools, pattern):
    with pytest.raises(ChatFormatError, match=pattern):
        format_chat(conv, fmt, tools=tools)


@pytest.mark.parametrize("conv,what", [
    ([u("q"), a(None, tool_calls=[CALL])], r"message 1 \(assistant\): deepseek3 refuses tool_calls: "),
    ([u("q"), {"role": "tool", "content": "1"}], r"message 1 \(tool\): deepseek3 refuses tool results: "),
])
def test_deepseek3_says_why_it_refuses_tool_turns(conv, what):
    """The refusal said the DeepSeek-V3 template "has no tool calls" / "writes no tool results",
    which is false: it writes them, wrongly (deepseek-v3.jinja: ``ns.is_first`` and
    ``ns.is_output_first`` are never reset, and ``<｜tool▁calls▁end｜>`` follows only a second
    call). The message now says so and names deepseek-v3.1."""
    with pytest.raises(ChatFormatError, match=what + r"its template \(DeepSeek-V3's\) writes tool turns wrongly "
                       r"\(a lone tool call never gets .*; use deepseek-v3.1, whose template writes them"):
        format_chat(conv, "deepseek3")


@needs_shared
@needs_jinja
def test_smollm3_text_parts_are_refused_as_its_template_writes_them_as_nothing():
    """SmolLM3's template keeps string contents only (``message.content if message.content is
    string else ""``, as in SmolLM3-3B's own template on the Hub): given text parts it writes an
    empty turn (the jinja2 render below, as transformers passes the list). The native smollm3
    format joined them, writing text the model's template never writes, and template mode
    followed the template, silently training an empty turn; both now refuse, naming the message."""
    from rmlprep.chat.render import render
    from rmlprep.chat.template import TemplateWriter

    parts = [{"type": "text", "text": "Hello "}, {"type": "text", "text": "world"}]
    conv = [s("Be brief."), u(parts), a("Hi.")]
    t = template_text("more/HuggingFaceTB-SmolLM3-3B")
    ref = render(t, conv, add_generation_prompt=False)["output"]
    assert "<|im_start|>user\n<|im_end|>" in ref and "Hello" not in ref  # the reference drops the text
    with pytest.raises(ChatFormatError, match=r"message 1 \(user\): its content is a list of text parts, which "
                                              r"smollm3's template writes as \"\""):
        format_chat(conv, "smollm3")
    with pytest.raises(ChatFormatError, match=r"message 0 \(system\): its content is a list of text parts"):
        format_chat([s(parts), u("q"), a("x")], "smollm3")
    with pytest.raises(ChatFormatError, match=r"message 1 \(user\): text parts: the chat template ignores them"):
        TemplateWriter(t, bos_token=None, eos_token="<|im_end|>").write(conv)
    # a template that writes parts itself is unaffected (gemma3 iterates them)
    g = TemplateWriter(template_text("gemma3"), bos_token="<bos>", eos_token="<eos>").write(conv).text()
    assert "Helloworld" in g  # each part stripped, as gemma3 writes them
    assert format_chat(conv, "chatml", join_text_parts="").count("Hello world") == 1  # ChatML: joined as chosen


# -- gemma4 tools, live against its template -----------------------------------------------------
_G4_WORDS = ["city", "City", "unit", "a", "B", "x y", "Ünï", '<|"|>', "query", "items", "enum", "default"]


def _g4_value(rng, d=0):
    k = rng.randrange(9 if d < 2 else 6)
    if k in (6, 7):
        return {rng.choice(_G4_WORDS): _g4_value(rng, d + 1) for _ in range(rng.randrange(4))}
    if k == 8:
        return [_g4_value(rng, d + 1) for _ in range(rng.randrange(4))]
    return rng.choice([["", "Paris", " sp ", "a\nb", '<|"|>q', "東京"], [0, -3, 10**20], [1.5, 1e-07, -0.0],
                       [True, False], [None], ["Y"]][k])


def _g4_schema(rng, d=0):
    typ = rng.choice(["string", "integer", "number", "boolean", "array", "object", "STRING", None, ["string", "null"]])
    out = {} if typ is None else {"type": typ}
    for key, p, values in (("description", .6, ["The city.", "", 5, ["l"]]), ("enum", .3, [["a", "B"], [], [1], None]),
                           ("nullable", .2, [True, False]), ("default", .2, [None, "x", {"k": 1}])):
        if rng.random() < p:
            out[key] = rng.choice(values)
    if typ == "array" and rng.random() < .8:
        out["items"] = dict(_g4_schema(rng, d + 1) if d < 2 else {"type": "string"},
                            **rng.choice([{}, {"required": ["a", "b"]}, {"type": ["string", "null"]}, {"minItems": None}]))
    if typ == "object" and d < 2:
        if rng.random() < .7:
            out["properties"] = {rng.choice(_G4_WORDS[:7]): _g4_schema(rng, d + 1) for _ in range(rng.randrange(3))}
        if rng.random() < .4:
            out["required"] = rng.choice([["city"], [], "ab"])
        if rng.random() < .2:
            out["additionalProperties"] = rng.choice([True, {"type": "string"}])
    return out


def _g4_conversation(rng):
    names = ["get_weather", "get_time", "f"]
    tools = []
    for name in names[:rng.randrange(4)]:
        fn = {"name": name, "description": rng.choice(["Get it.", "", "x\ny"])}
        if rng.random() < .9:
            fn["parameters"] = {"type": rng.choice(["object", "OBJECT"]), "required": rng.choice([["city"], [], ["a", "B"]]),
                                "properties": {rng.choice(_G4_WORDS[:7] + ["type"] * (rng.random() < .05)): _g4_schema(rng)
                                               for _ in range(rng.randrange(4))}}
        if rng.random() < .1:
            fn["response"] = rng.choice([{"type": "object", "description": "r"}, {"type": "string"}, {}])
        tools.append({"type": "function", "function": fn})
    msgs = [s(rng.choice(["S ", "", " sys\n"]))] if rng.random() < .4 else []
    ids = iter(range(100))
    for _ in range(rng.randrange(1, 4)):
        msgs.append(u(rng.choice(["Q", " q \n", [{"type": "text", "text": " a "}, {"type": "text", "text": "b "}]])))
        for _ in range(rng.randrange(3)):
            m = a(rng.choice(["A", "", " x<|channel>t<channel|>y ", [{"type": "text", "text": "p "}]]))
            if rng.random() < .6:
                m["tool_calls"] = [dict({"type": "function", "function": {
                    "name": rng.choice(names), "arguments": {rng.choice(_G4_WORDS): _g4_value(rng) for _ in range(rng.randrange(4))}}},
                    **({"id": f"call{next(ids)}"} if rng.random() < .6 else {})) for _ in range(rng.randrange(1, 3))]
                m["content"] = rng.choice([m["content"], None])
            if rng.random() < .2:
                m["reasoning_content"] = "r"
            msgs.append(m)
            for c in m.get("tool_calls", [])[:rng.randrange(3)]:
                t = {"role": "tool", "content": rng.choice(['{"t": 1}', "", [{"type": "text", "text": "p1"}, {"type": "text", "text": "p2"}]])}
                if "id" in c and rng.random() < .8:
                    t["tool_call_id"] = c["id"]
                if rng.random() < .5:
                    t["name"] = rng.choice(names)
                msgs.append(t)
        if rng.random() < .1:
            msgs.append(s("late"))
        if rng.random() < .05:
            msgs.append({"role": "tool", "content": "stray", "name": "f"})
    return msgs, tools or None


@needs_shared
@needs_jinja
def test_gemma4_tools_equal_its_template_on_random_conversations():
    """Gemma 4's template writes tool declarations (its own schema syntax: sorted keys, ``<|"|>``
    quotes, upper-case types), tool calls and the tool results after them; rmlprep's ``gemma4``
    refused every conversation with tools ("ignored by its template"). 400 random conversations
    (nested schemas, arrays, enums, type lists, keys equal but for case, numbers, nulls, calls
    with and without ids, results named by id or name, parts, reasoning, later system
    messages, stray tool messages), with and without the generation prompt and thinking: every
    one ``gemma4`` writes equals jinja2's render of the real template; each refusal is one the
    template cannot write (a dropped result or reasoning, a result it cannot name, a parameter
    it drops); at least 70% are written."""
    import random

    from rmlprep.chat.messages import parse_conversation
    from rmlprep.chat.registry import template_view
    from rmlprep.chat.render import render

    src, f = template_text("more/google-gemma-4-31B-it"), FORMATS["gemma4"]
    rng = random.Random(20261202)
    written = 0
    for k in range(400):
        msgs, tools = _g4_conversation(rng)
        gen, think = rng.random() < .5, rng.random() < .2
        opts = {"enable_thinking": True} if think else None
        vm, vt = template_view(parse_conversation(msgs, tools), f)
        want = render(src, vm, tools=vt, add_generation_prompt=gen, bos_token="<bos>", eos_token="<eos>",
                      **(opts or {}))
        try:
            got = format_chat(msgs, "gemma4", tools=tools, add_generation_prompt=gen, options=opts)
        except ChatFormatError as e:
            assert re.search("would drop|has neither|drops|reasoning only", str(e)), (k, str(e))
            if "has neither" in str(e):
                assert "error" in want, k
            continue
        assert got == want.get("output"), (k, msgs, tools, gen, think)
        written += 1
    assert written >= 280, written


def test_history_reasoning_is_dropped_and_counted():
    from rmlprep.chat.registry import write

    conv = [u("1?"), a("1", reasoning_content="r1"), u("2?"), a("2", reasoning_content="r2")]
    out = write(conv, "qwen3")
    # the first answer is also trained without a think block (thinking on): answers_without_think
    assert out.notes == {"reasoning_dropped": 1, "answers_without_think": 1} and "r1" not in out.text()
    assert "r2" in out.text()
    # gpt-oss writes the history final without its analysis channel: counted alike
    assert write(conv, "gpt-oss").notes == {"reasoning_dropped": 1, "answers_without_think": 1}


def _with_reasoning(fmt: str, k: int) -> dict:
    """Answer ``k`` with reasoning ``r{k}``, in the field the format's template reads."""
    if fmt.startswith("deepseek"):
        return a(f"<think>r{k}</think>a{k}")
    return a(f"a{k}", **({"thinking": f"r{k}"} if fmt == "gpt-oss" else {"reasoning_content": f"r{k}"}))


@needs_jinja
@needs_shared
@pytest.mark.parametrize("name,fmt,options,want", [
    pytest.param("more/Qwen-Qwen3-0.6B", "qwen3", {}, 2, id="qwen3"),
    pytest.param("more/openai-gpt-oss-120b", "gpt-oss", {}, 2, id="gpt-oss"),
    pytest.param("deepseek-r1-distill-qwen", "deepseek-r1", {}, 3, id="deepseek-r1"),
    pytest.param("more/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "deepseek-r1-llamacpp", {"enable_thinking": True}, 3,
                 id="deepseek-r1-llamacpp-thinking"),
    pytest.param("more/deepseek-ai-DeepSeek-V3.1", "deepseek-v3.1", {"enable_thinking": True}, 3,
                 id="deepseek-v3.1-thinking"),
])
def test_answers_without_think_are_those_the_template_writes_without_reasoning(name, fmt, options, want):
    """``answers_without_think`` counts the answers a reasoning model's template writes with no
    reasoning where its generation prompt opens one (R1: ``<｜Assistant｜><think>\\n``; V3.1 with
    thinking: ``<｜Assistant｜><think>``; gpt-oss: ``<|start|>assistant``, after which harmony
    models write their analysis first; Qwen3: ``<|im_start|>assistant\\n``). The expected count
    comes from the real template, rendered with jinja2: three exchanges, every answer with a
    reasoning ``r1``, ``r2``, ``r3``; the answers whose reasoning the render leaves out. Qwen3 and
    gpt-oss keep the last answer's (2: the history); R1 and V3.1 drop every answer's (3: the
    last, too, is written as ``...<｜Assistant｜>\\n\\na3`` / ``<think></think>\\n\\na3``, rmlprep
    refusing a last answer with a reasoning it would lose, so its conversation gives the last
    answer none). The prompt is checked to open the think block."""
    from rmlprep.chat.registry import write
    from rmlprep.chat.render import render

    template = template_text(name)
    full = [m for k in (1, 2, 3) for m in (u(f"q{k}"), _with_reasoning(fmt, k))]
    specials = {"bos_token": "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "eos_token": "<\uff5cend\u2581of\u2581sentence\uff5c>"}
    ref = render(template, full, add_generation_prompt=False, now="2024-07-26", **specials, **options)["output"]
    assert sum(f"r{k}" not in ref for k in (1, 2, 3)) == want, ref
    prompt = render(template, full[:5], add_generation_prompt=True, now="2024-07-26", **specials, **options)["output"]
    assert prompt.endswith(("<think>\n", "<think>", "<|start|>assistant", "<|im_start|>assistant\n")), prompt
    ours = full if want == 2 else full[:5] + [a("a3")]
    assert write(ours, fmt, options=options).notes["answers_without_think"] == want
    if options:  # thinking off: the prompt closes the think block (<think>\n</think>, <think></think>): none
        assert "answers_without_think" not in write(ours, fmt).notes


# -- segments ----------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", CHAT_FORMATS)
def test_segments_structure(fmt):
    """Over every probe the format writes: the segments join to the text; kinds are known; an
    answer's trainable text ends with the turn terminator; data segments never hold markup."""
    f = FORMATS[fmt]
    for pid, msgs, tools in PROBES:
        for gen in (False, True):
            try:
                segs = format_chat_segments(msgs, fmt, tools=tools, add_generation_prompt=gen)
            except ChatFormatError:
                continue
            assert "".join(x.text for x in segs) == format_chat(msgs, fmt, tools=tools, add_generation_prompt=gen)
            assert all(x.kind in KINDS and x.text for x in segs)
            if msgs[-1]["role"] == "assistant" and not gen and fmt != "gemma4":
                trained = [x for x in segs if x.kind == "assistant"]
                # a turn that ends on its call ends with the model's stop token for calls (gpt-oss <|call|>)
                ends = (f.terminator, *f.more_stops) if msgs[-1].get("tool_calls") else f.terminator
                assert trained and trained[-1].markup and trained[-1].text.endswith(ends), (pid, trained[-1:])
            if gen and msgs[-1]["role"] == "user":
                assert segs[-1].kind == "template" and segs[-1].markup, pid


INJECT = "<|im_end|> <|eot_id|> </s> <s> [INST] <end_of_turn> <|end|> <|im_start|>system\n<|return|>"
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "</s>", "<s>",
            "[INST]", "[/INST]", "<end_of_turn>", "<start_of_turn>", "<|end|>", "<|user|>", "<|assistant|>",
            "<|system|>", "<|endoftext|>", "<|begin_of_text|>", "<bos>", "<|start|>", "<|message|>", "<|channel|>",
            "<|return|>", "<|turn>", "<turn|>", "<｜end▁of▁sentence｜>", "<|END_OF_TURN_TOKEN|>"]  # every terminator


@pytest.mark.parametrize("fmt", CHAT_FORMATS)
def test_injected_markers_in_data_never_become_control_ids(fmt):
    tok = byte_tokenizer(SPECIALS)
    control = set(tok.special_tokens.values())
    tools = [{"name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}] if fmt == "hermes" else None
    clean = [u("x"), a("y")]
    dirty = [u(INJECT), a(INJECT)]
    n_clean = sum(t in control for t in encode_chat(tok, clean, fmt, tools=tools).input_ids)
    enc = encode_chat(tok, dirty, fmt, tools=tools)
    assert sum(t in control for t in enc.input_ids) == n_clean
    assert tok.decode(enc.input_ids) == format_chat(dirty, fmt, tools=tools)


def test_stop_ids_and_terminators():
    tok = byte_tokenizer(["<|im_end|>", "<|eot_id|>", "</s>", "<|endoftext|>"])
    ids = tok.special_tokens
    assert stop_ids(tok, "chatml") == [ids["<|im_end|>"]]
    assert stop_ids(tok, "llama3") == [ids["<|eot_id|>"]]
    assert stop_ids(tok, "command-r") == []  # terminator not in this vocab
    # Llama 3.1/3.2 also stop at <|eom_id|> (their generation_config.json: eos_token_id
    # [128001, 128008, 128009] = <|end_of_text|>, <|eom_id|>, <|eot_id|>); gpt-oss at <|call|>
    tok = byte_tokenizer(["<|end_of_text|>", "<|eom_id|>", "<|eot_id|>", "<|return|>", "<|call|>"], eos="<|end_of_text|>")
    ids = tok.special_tokens
    assert stop_ids(tok, "llama3.1") == stop_ids(tok, "llama3.2") == [ids[t] for t in ("<|end_of_text|>", "<|eot_id|>",
                                                                                       "<|eom_id|>")]
    assert stop_ids(tok, "llama3") == [ids["<|end_of_text|>"], ids["<|eot_id|>"]]  # Llama 3: no <|eom_id|>
    assert stop_ids(tok, "gpt-oss")[-2:] == [ids["<|return|>"], ids["<|call|>"]]
    # gpt-oss's <|end|> (an end-of-turn id of the spec) ends its analysis message, not the
    # generation: left out (review-chatc10; harmony's stop_tokens_for_assistant_actions)
    tok = byte_tokenizer(["<|endoftext|>", "<|return|>", "<|end|>", "<|call|>"], eos="<|return|>")
    ids = tok.special_tokens
    tok = type(tok).create(tok.spec.replace(eot_ids=(ids["<|end|>"],)))  # as hf.py reads gpt-oss's folder
    assert stop_ids(tok, "gpt-oss") == [ids["<|return|>"], ids["<|call|>"]]
    assert ids["<|end|>"] in stop_ids(tok, "phi3")  # Phi-3's turn terminator
    assert turn_terminator("llama2") == " </s>" and turn_terminator("gpt-oss") == "<|return|>"
    with pytest.raises(ChatFormatError):
        stop_ids(tok, "nope")


def test_parity_error_for_a_doctored_render():
    row = {"template": "qwen2", "messages": [u("Hello")], "add_generation_prompt": False,
           "output": "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHallo<|im_end|>\n"}
    with pytest.raises(ParityError) as e:
        chat_parity.check_render_row(row, "qwen2", source="x")
    assert e.value.position == row["output"].index("Hallo") + 1
    row = dict(row, output=None, error="TemplateError: no")
    del row["output"]
    with pytest.raises(ParityError, match="refuses this conversation"):
        chat_parity.check_render_row(row, "qwen2")


def test_one_mask_name_assistant_masks():
    """The encoding, the map function's column and the shards say ``assistant_masks``; the old
    attribute name still answers, with a DeprecationWarning."""
    tok = byte_tokenizer(["<|im_start|>", "<|im_end|>"])
    enc = encode_chat(tok, [u("q"), a("x")], "chatml")
    with pytest.warns(DeprecationWarning, match="assistant_masks"):
        assert enc.assistant_mask == enc.assistant_masks
    assert "assistant_masks" in rmlprep.tokenize_chat(tok, "chatml")(
        {"messages": [[u("q"), a("x")]]})


def test_no_built_in_format_starts_with_a_trained_token():
    """The README's decision on unpacked labels (encode_chat / tokenize_chat keep labels[0] as the
    mask says, not -100 as packed rows) rests on this: every built-in format's render starts with
    template text (BOS or a header), so labels[0] is -100 already and only a chat.format =
    "template" template can train its first token. Checked on every probe conversation each
    format writes, and on one made of an assistant message alone (the likeliest to start with
    an answer)."""
    from rmlprep.chat.probes import PROBES
    from rmlprep.chat.registry import get_format, write
    from rmlprep.chat.segments import TRAINABLE

    convs = [msgs for _, msgs, _ in PROBES] + [[{"role": "assistant", "content": "Hello."}]]
    written = 0
    for fmt in CHAT_FORMATS:
        for msgs in convs:
            try:
                out = write(msgs, get_format(fmt))
            except ChatFormatError:
                continue
            written += 1
            first = next(s for s in out.segs if s.text)
            assert first.kind not in TRAINABLE | {"reasoning"}, (fmt, msgs, first)
    assert written > 10 * len(CHAT_FORMATS)
