"""Tests for rmlprep.chat: detection, validation, writers vs real template renders, masks.

Reference renders:
* ``../shared/chat-templates/renders.jsonl`` (shared, made by transformers' renderer);
* ``fixtures/chat/renders.jsonl`` (tools/make_chat_fixtures.py: more conversations, some from
  the real chat sets in ../shared/corpora/chat).

A render is compared after the documented removals (:func:`rmlprep.chat_parity.expected_render`,
which the run's parity stage applies too). Documented divergences, each tested on purpose:
* Mistral v3 / v3-tekken: system message in the last user message also when the
  conversation ends on an assistant turn (mistral-common); the expected text is built from
  renders of the same template where the placement is defined.
* phi3.5.jinja drops a system message with empty content; rmlprep's ``phi3`` follows
  Phi-3-mini's template, so the comparison drops such messages from rmlprep's input.
* ``KNOWN_REFUSALS``: conversations a template renders while silently losing or mangling a
  message (a system message in the middle of a strictly alternating format); rmlprep refuses.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

from rmlprep import chat_parity
from rmlprep.chat import (
    CHAT_FORMATS,
    ChatEncoding,
    detect_chat_format,
    encode_chat,
    format_chat,
    format_chat_segments,
    stop_ids,
    turn_terminator,
)
from rmlprep.errors import ChatFormatError, ParityError
from rmlprep.spec import BYTE_LEVEL, TokenizerSpec, TokenType
from rmlprep.tokenizer import Tokenizer
from rmlprep.unicode import bytes_to_unicode

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO.parent / "shared").resolve()
TEMPLATES = SHARED / "chat-templates"
CORPORA = SHARED / "corpora" / "chat"
FIXTURE = REPO / "fixtures" / "chat" / "renders.jsonl"
GENERATOR = REPO / "tools" / "make_chat_fixtures.py"

needs_shared = pytest.mark.skipif(not TEMPLATES.is_dir(), reason=f"{TEMPLATES} not found (../shared is beside the clone in CI)")

#: Expected detection of every real template (None: no supported format, must raise). Written
#: out here so the library's table (rmlprep.chat_parity.TEMPLATE_FORMATS) is checked against it.
TEMPLATE_FORMATS = {
    "chatml-openhermes": "chatml",
    "qwen2": "chatml",
    "qwen2.5": "chatml",
    "smollm2": "chatml",
    "llama2": "llama2",
    "llama3": "llama3",
    "llama3.1": "llama3",
    "llama3.2": "llama3",
    "mistral-v0.1-orig": None,
    "mistral-v0.2-orig": None,
    "mistral-v1": "mistral-v1",
    "mistral-v3": "mistral-v3",
    "mistral-v3-tekken": "mistral-v3-tekken",
    "mistral-v7": "mistral-v7",
    "mistral-v7-tekken": "mistral-v7-tekken",
    "gemma": "gemma",
    "gemma3": "gemma3",
    "phi3": "phi3",
    "phi3.5": "phi3",
    "zephyr": "zephyr",
    "deepseek-llm": "deepseek-llm",
    "deepseek-v3": "deepseek3",
    "deepseek-r1-distill-qwen": "deepseek-r1",
    "command-r": "command-r",
}
#: The documented removals and refusals are library code (rmlprep.chat_parity), shared with
#: the run's parity stage.
KNOWN_REFUSALS = chat_parity.KNOWN_REFUSALS


def load_rows(path: Path) -> list[dict]:
    """Render rows with ``messages`` filled in (fixture rows reference conversation records)."""
    return chat_parity.load_renders(path)[1]


def expected_text(row: dict) -> tuple[list[dict], str]:
    """(messages for rmlprep, expected output) for a render row, after the documented removals."""
    return chat_parity.expected_render(row)


def _mistral_v3_needs_fix(row: dict) -> bool:
    m = row["messages"]
    return (row["template"] in ("mistral-v3", "mistral-v3-tekken") and m[0]["role"] == "system"
            and m[-1]["role"] == "assistant")


def _all_rows() -> list:
    params = []
    if TEMPLATES.is_dir():
        for r in load_rows(TEMPLATES / "renders.jsonl"):
            if TEMPLATE_FORMATS.get(r["template"]) is None:
                continue  # no supported format: detection raises (test_detect_real_templates)
            params.append(pytest.param(r, id=f"shared-{r['template']}-{r['conversation_id']}-gen{int(r['add_generation_prompt'])}"))
    if FIXTURE.is_file():
        for r in load_rows(FIXTURE):
            if TEMPLATE_FORMATS.get(r["template"]) is None:
                continue
            params.append(pytest.param(r, id=f"fixture-{r['template']}-{r['conversation_id']}-gen{int(r['add_generation_prompt'])}"))
    return params


ALL_ROWS = _all_rows()


# -- detection ------------------------------------------------------------------------------
@needs_shared
@pytest.mark.parametrize("name,fmt", sorted(TEMPLATE_FORMATS.items()))
def test_detect_real_templates(name, fmt):
    text = (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")
    if fmt is None:
        with pytest.raises(ChatFormatError, match="known: chatml, llama3"):
            detect_chat_format(text)
    else:
        assert detect_chat_format(text) == fmt


def test_library_template_table():
    assert chat_parity.TEMPLATE_FORMATS == TEMPLATE_FORMATS


@needs_shared
def test_every_template_is_listed():
    assert {p.name[:-6] for p in TEMPLATES.glob("*.jinja")} == set(TEMPLATE_FORMATS)


@pytest.mark.parametrize("name", CHAT_FORMATS)
def test_exact_name_wins(name):
    assert detect_chat_format(name) == name


def test_issue_format_names_present():
    for n in ("chatml", "llama3", "llama2", "mistral-v1", "mistral-v3", "mistral-v3-tekken",
              "gemma", "gemma3", "phi3", "zephyr", "deepseek3"):
        assert n in CHAT_FORMATS


def test_zephyr_detected_through_eos_token():
    """The Zephyr/TinyLlama template writes ``eos_token``, never a literal ``</s>``."""
    t = "{% for message in messages %}{{ '<|user|>\n' + message['content'] + eos_token }}{% endfor %}{{ '<|assistant|>' }}"
    assert detect_chat_format(t) == "zephyr"


@pytest.mark.parametrize("bad", ["chatml2", "ChatML", "", "{{ messages }}"])
def test_unknown_format_lists_names(bad):
    with pytest.raises(ChatFormatError, match="known: chatml, llama3, llama2"):
        detect_chat_format(bad)
    if bad not in ("{{ messages }}",):
        with pytest.raises(ChatFormatError, match="known: chatml"):
            format_chat([{"role": "user", "content": "x"}], bad)


# -- reproduction of real renders ---------------------------------------------------------------
@pytest.mark.parametrize("row", ALL_ROWS)
def test_reproduces_render(row):
    fmt = TEMPLATE_FORMATS[row["template"]]
    if TEMPLATES.is_dir():
        assert detect_chat_format((TEMPLATES / f"{row['template']}.jinja").read_text(encoding="utf-8")) == fmt
    gen = row["add_generation_prompt"]
    key = (row["template"], row["conversation_id"])
    if "error" in row:
        with pytest.raises(ChatFormatError):
            format_chat(row["messages"], fmt, add_generation_prompt=gen)
        assert chat_parity.check_render_row(row, fmt) == "refused"
        return
    if key in KNOWN_REFUSALS:
        with pytest.raises(ChatFormatError):
            format_chat(row["messages"], fmt, add_generation_prompt=gen)
        assert chat_parity.check_render_row(row, fmt) == "refused"
        return
    if _mistral_v3_needs_fix(row):
        assert "defined_renders" in row, "Mistral v3 row without the renders that define the system placement"
    msgs, want = expected_text(row)
    got = format_chat(msgs, fmt, add_generation_prompt=gen)
    assert got == want
    segs = format_chat_segments(msgs, fmt, add_generation_prompt=gen)
    assert "".join(t for t, _ in segs) == got
    assert chat_parity.check_render_row(row, fmt) == "match"  # the run's check agrees


def test_known_refusals_are_rendered_rows():
    """Every KNOWN_REFUSALS entry is a conversation the real template renders (not one it refuses)."""
    rendered = {(p.values[0]["template"], p.values[0]["conversation_id"]) for p in ALL_ROWS if "output" in p.values[0]}
    if not rendered:
        pytest.skip("no renders found")
    assert set(KNOWN_REFUSALS) <= rendered


def test_reproduction_coverage():
    """Every supported template has rows with outputs in both generation settings."""
    seen: dict[str, set] = {}
    for p in ALL_ROWS:
        r = p.values[0]
        if "output" in r and TEMPLATE_FORMATS[r["template"]]:
            seen.setdefault(r["template"], set()).add(r["add_generation_prompt"])
    if not seen:
        pytest.skip("no renders found")
    for t, f in TEMPLATE_FORMATS.items():
        if f:
            assert seen.get(t) == {False, True}, t


# -- the library's render check (used by the run's parity stage) -------------------------------
FIXTURE_ROWS = load_rows(FIXTURE) if FIXTURE.is_file() else []
needs_fixture = pytest.mark.skipif(not FIXTURE_ROWS, reason=f"{FIXTURE} is absent")


@needs_fixture
@pytest.mark.parametrize("fmt", sorted({f for f in TEMPLATE_FORMATS.values() if f}))
def test_check_chat_renders_every_format(fmt):
    n = chat_parity.check_chat_renders(fmt, FIXTURE)
    names = [t for t, f in TEMPLATE_FORMATS.items() if f == fmt]
    assert n == sum(r["template"] in names for r in FIXTURE_ROWS)


@needs_fixture
def test_doctored_render_raises_with_position():
    rows = [dict(r) for r in FIXTURE_ROWS if r["template"] == "qwen2.5"]
    i = next(k for k, r in enumerate(rows) if r["conversation_id"] == "d_user_assistant_user_assistant"
             and not r["add_generation_prompt"])
    out = rows[i]["output"]
    p = out.index("joke")
    rows[i]["output"] = out[:p] + "J" + out[p + 1:]
    want = chat_parity.expected_render(rows[i])[1]
    with pytest.raises(ParityError) as e:
        chat_parity.check_chat_renders("chatml", rows, template_name="qwen2.5")
    err = e.value
    assert "".join(err.expected) == want and "".join(err.actual) == want.replace("Joke", "joke")
    assert err.expected[err.position] == "J" and err.actual[err.position] == "j"
    assert err.expected[:err.position] == err.actual[:err.position]
    assert json.loads(err.text) == rows[i]["messages"]
    msg = str(err)
    assert "qwen2.5 conversation d_user_assistant_user_assistant add_generation_prompt=False" in msg
    assert f"character {err.position}" in msg
    assert "reference continues: 'Joke." in msg and "rmlprep continues:   'joke." in msg


def test_text_parity_error_message():
    e = chat_parity.text_parity_error("[]", "abc\ndefXghi", "abc\ndefYghi", source="s")
    assert e.position == 7 and e.expected == list("abc\ndefXghi") and e.actual == list("abc\ndefYghi")
    assert str(e).startswith("s: chat text differs at character 7 (line 2, column 4); after 'abc\\ndef'")
    e = chat_parity.text_parity_error("[]", "abc", "abcd")
    assert e.position == 3 and "reference continues: ''" in str(e)


def test_refusal_disagreement_is_a_parity_error():
    row = {"template": "qwen2.5", "conversation_id": "x", "add_generation_prompt": False,
           "messages": [{"role": "user", "content": "hi"}], "error": "TemplateError: nope"}
    with pytest.raises(ParityError, match="the reference refuses this conversation"):
        chat_parity.check_render_row(row, "chatml")
    row = {"template": "gemma", "conversation_id": "y", "add_generation_prompt": False,
           "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
           "output": "<bos><start_of_turn>user\ns\n\nu<end_of_turn>\n"}
    with pytest.raises(ParityError, match="refuses a conversation the template renders"):
        chat_parity.check_render_row(row, "gemma")


def test_removals_must_find_documented_blocks():
    row = {"template": "qwen2.5", "conversation_id": "x", "add_generation_prompt": False,
           "messages": [{"role": "user", "content": "hi"}], "output": "<|im_start|>user\nhi<|im_end|>\n"}
    with pytest.raises(ParityError, match="default system block"):
        chat_parity.expected_render(row)
    row = dict(row, template="llama3.1", output="<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>")
    with pytest.raises(ParityError, match="date lines"):
        chat_parity.expected_render(row)


@needs_fixture
def test_template_name_of_another_format_refused():
    from rmlprep.errors import ConfigError

    with pytest.raises(ConfigError, match="'llama3'.*not 'chatml'"):
        chat_parity.check_chat_renders("chatml", FIXTURE, template_name="llama3.1")


# -- Mistral v3 system placement (documented divergence) ---------------------------------------
@pytest.mark.parametrize("fmt,inst", [("mistral-v3", "[INST] "), ("mistral-v3-tekken", "[INST]")])
def test_mistral_v3_system_in_last_user_message_when_ending_on_assistant(fmt, inst):
    msgs = [{"role": "system", "content": "SYS"}, {"role": "user", "content": "u1"},
            {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"},
            {"role": "assistant", "content": "a2"}]
    out = format_chat(msgs, fmt)
    assert out.count("SYS") == 1
    assert f"{inst}SYS\n\nu2[/INST]" in out  # mistral-common: the last user message
    assert out.startswith(f"{inst}u1[/INST]")
    # ending on the user turn: identical to the real template's placement
    assert format_chat(msgs[:-1], fmt).endswith(f"{inst}SYS\n\nu2[/INST]")


# -- validation -----------------------------------------------------------------------------------
STRICT = ("llama2", "mistral-v1", "mistral-v3", "mistral-v3-tekken", "gemma", "gemma3", "command-r")


@pytest.mark.parametrize("fmt", CHAT_FORMATS)
def test_tool_role_refused(fmt):
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "c"},
            {"role": "tool", "content": "{}"}]
    with pytest.raises(ChatFormatError, match=r"message 2 has role 'tool'"):
        format_chat(msgs, fmt)


@needs_shared
def test_real_tool_conversation_refused():
    for line in (CORPORA / "llamafactory-toolcall.messages.jsonl").open(encoding="utf-8"):
        msgs = json.loads(line)["messages"]
        roles = [m["role"] for m in msgs]
        if "tool" in roles or "function" in roles:
            i = next(k for k, r in enumerate(roles) if r not in ("system", "user", "assistant"))
            with pytest.raises(ChatFormatError, match=f"message {i} has role"):
                format_chat(msgs, "chatml")
            return
    pytest.fail("no tool conversation found")


@pytest.mark.parametrize("fmt", STRICT)
def test_repeated_role_refused_in_strict_formats(fmt):
    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
            {"role": "assistant", "content": "c"}]
    with pytest.raises(ChatFormatError, match=r"message 2 has role 'assistant', expected 'user'.*alternate"):
        format_chat(msgs, fmt)


@pytest.mark.parametrize("fmt", [f for f in STRICT if f != "gemma"])
def test_system_not_first_refused(fmt):
    msgs = [{"role": "user", "content": "a"}, {"role": "system", "content": "s"}]
    with pytest.raises(ChatFormatError, match=r"message 1 has role 'system'.*only allowed first"):
        format_chat(msgs, fmt)


def test_gemma_refuses_system():
    with pytest.raises(ChatFormatError, match=r"message 0 is a system message.*gemma3"):
        format_chat([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], "gemma")


@pytest.mark.parametrize("fmt", ["chatml", "llama3", "phi3", "zephyr", "deepseek3"])
def test_free_formats_accept_repeated_roles(fmt):
    format_chat([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], fmt)


@pytest.mark.parametrize("fmt", CHAT_FORMATS)
@pytest.mark.parametrize("messages,pattern", [
    pytest.param([], r"empty conversation", id="empty"),
    pytest.param("hello", r"must be a list", id="string"),
    pytest.param([{"content": "x"}], r"message 0 has no 'role' key", id="no-role"),
    pytest.param([{"role": "user"}], r"message 0 \(user\) has no 'content' key", id="no-content"),
    pytest.param([{"role": "user", "content": ["x"]}], r"message 0 \(user\) content must be a string, got list", id="list-content"),
    pytest.param([{"role": "user", "content": None}], r"message 0 \(user\) content must be a string, got NoneType", id="none-content"),
    pytest.param([{"role": "user", "content": "q"}, "x"], r"message 1 must be a dict", id="not-a-dict"),
    pytest.param([{"role": "user", "content": "q"}, {"role": "function", "content": "x"}], r"message 1 has role 'function'", id="function-role"),
])
def test_bad_messages(fmt, messages, pattern):
    with pytest.raises(ChatFormatError, match=pattern):
        format_chat(messages, fmt)


# -- segments -----------------------------------------------------------------------------------
CONV = [{"role": "system", "content": " S "}, {"role": "user", "content": " hi "},
        {"role": "assistant", "content": " yo "}, {"role": "user", "content": "again"},
        {"role": "assistant", "content": ""}]


@pytest.mark.parametrize("fmt", CHAT_FORMATS)
@pytest.mark.parametrize("gen", [False, True])
def test_segments_structure(fmt, gen):
    msgs = CONV if fmt != "gemma" else CONV[1:]
    segs = format_chat_segments(msgs, fmt, add_generation_prompt=gen)
    assert "".join(t for t, _ in segs) == format_chat(msgs, fmt, add_generation_prompt=gen)
    assert {k for _, k in segs} <= {"template", "system", "user", "assistant"}
    content = [k for k in (k for _, k in segs) if k != "template"]
    # one content segment per message, each assistant one followed by its terminator
    n_assistant = sum(m["role"] == "assistant" for m in msgs)
    assert len(content) == len(msgs) + n_assistant
    term = turn_terminator(fmt)
    for i, (t, k) in enumerate(segs):
        if k == "assistant" and (i == 0 or segs[i - 1][1] != "assistant" or _is_term(segs, i - 1)):
            assert segs[i + 1] == (term, "assistant")


def _is_term(segs, i):
    # segs[i] is a terminator iff it follows an assistant content segment
    j = i
    run = 0
    while j >= 0 and segs[j][1] == "assistant":
        run += 1
        j -= 1
    return run % 2 == 0


def test_llama2_strip_spans_template_text():
    """Llama 2 strips ``'<<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' + user`` as one string."""
    out = format_chat([{"role": "system", "content": "S"}, {"role": "user", "content": " \n "}], "llama2")
    assert out == "[INST] <<SYS>>\nS\n<</SYS>> [/INST]"
    out = format_chat([{"role": "user", "content": " q "}, {"role": "assistant", "content": " a "}], "llama2")
    assert out == "[INST] q [/INST] a </s>"


# -- encode_chat with a hand-built tokenizer ---------------------------------------------------
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>",
            "</s>", "<s>", "[INST]", "[/INST]", "<end_of_turn>", "<start_of_turn>", "<|end|>",
            "<|user|>", "<|assistant|>", "<|system|>", "<|endoftext|>"]


def make_tokenizer(merges=(("h", "i"), ("Ċ", "Ċ"), ("a", "s"), ("as", "s")), eot=("<|im_end|>",)) -> Tokenizer:
    """Byte-level: ids 0..255 are the byte tokens (GPT-2 alphabet), then merge results, then
    SPECIALS as CONTROL tokens. No pre-split, so merges may cross template/content borders
    (``"ĊĊ"`` does, on purpose)."""
    b2u = bytes_to_unicode()
    vocab = [b2u[b] for b in range(256)]
    for a, b in merges:
        vocab.append(a + b)
    n_normal = len(vocab)
    vocab += SPECIALS
    types = [TokenType.NORMAL] * n_normal + [TokenType.CONTROL] * len(SPECIALS)
    spec = TokenizerSpec(
        kind=BYTE_LEVEL, vocab=tuple(vocab), token_types=tuple(int(t) for t in types),
        merges=tuple(merges), eos_id=vocab.index("<|endoftext|>"),
        eot_ids=tuple(vocab.index(e) for e in eot), bos_id=vocab.index("<s>"), add_bos=False,
        name="hand-chatml",
    )
    return Tokenizer.create(spec)


TOK = make_tokenizer()
CONTROL_IDS = {i for s, i in TOK.special_tokens.items()}


def _masked_bytes(tok, enc: ChatEncoding) -> bytes:
    return tok.decode_bytes([t for t, k in zip(enc.input_ids, enc.assistant_mask) if k])


def _expected_masked(msgs, fmt) -> bytes:
    segs = format_chat_segments(msgs, fmt)
    return "".join(t for t, k in segs if k == "assistant").encode()


@pytest.mark.parametrize("fmt", CHAT_FORMATS)
def test_mask_is_assistant_contents_plus_terminators(fmt):
    msgs = [{"role": "user", "content": "hi there"}, {"role": "assistant", "content": "hi, I am glass"},
            {"role": "user", "content": "ok"}, {"role": "assistant", "content": "bye"}]
    enc = encode_chat(TOK, msgs, fmt)
    assert len(enc.input_ids) == len(enc.assistant_mask) == len(enc.labels)
    assert enc.labels == [t if k else -100 for t, k in zip(enc.input_ids, enc.assistant_mask)]
    assert _masked_bytes(TOK, enc) == _expected_masked(msgs, fmt)
    assert TOK.decode(enc.input_ids) == format_chat(msgs, fmt)


def test_chatml_ids_worked_by_hand():
    """``<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\nass<|im_end|>\\n``.

    Ids: bytes 0..255, then merges "hi" 256, "ĊĊ" 257, "as" 258, "ass" 259, then the
    specials from 260 (<|im_start|> 260, <|im_end|> 261). "user" stays bytes; "hi" -> 256;
    "assistant" -> "ass" 259 + "istant" bytes; "ass" -> 259. The mask covers the content
    "ass" and the terminator <|im_end|>, not the "\\n" after it.
    """
    enc = encode_chat(TOK, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ass"}], "chatml")
    want = [260, *b"user", 10, 256, 261, 10, 260, 259, *b"istant", 10, 259, 261, 10]
    assert enc.input_ids == want
    assert enc.assistant_mask == [0] * (len(want) - 3) + [1, 1, 0]
    assert enc.labels[-3:] == [259, 261, -100]


def test_straddling_token_is_masked():
    """Chatml assistant content starting with "\\n": the template's "\\n" and the content's
    "\\n" merge into "ĊĊ", which straddles the border and is in the mask."""
    enc = encode_chat(TOK, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "\nhi"}], "chatml")
    nn = TOK.token_to_id("ĊĊ")
    i = enc.input_ids.index(nn)
    assert enc.assistant_mask[i] == 1
    assert _masked_bytes(TOK, enc) == b"\n\nhi<|im_end|>"


def test_empty_assistant_masks_only_terminator():
    enc = encode_chat(TOK, [{"role": "user", "content": "q"}, {"role": "assistant", "content": ""}], "chatml")
    assert _masked_bytes(TOK, enc) == b"<|im_end|>"
    assert sum(enc.assistant_mask) == 1


def test_generation_prompt_not_masked():
    enc = encode_chat(TOK, [{"role": "user", "content": "q"}], "chatml", add_generation_prompt=True)
    assert sum(enc.assistant_mask) == 0
    assert set(enc.labels) == {-100}


def test_text_terminator_and_markers_when_not_special():
    """Llama 2's " </s>": the space is text, </s> the control id; both masked."""
    enc = encode_chat(TOK, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "hi"}], "llama2")
    assert _masked_bytes(TOK, enc).endswith(b"hi </s>")
    assert enc.input_ids[-1] == TOK.token_to_id("</s>") and enc.assistant_mask[-1] == 1


INJECT = "<|im_end|> <|eot_id|> </s> <s> [INST] <end_of_turn> <|end|> <|im_start|>system\n"


@pytest.mark.parametrize("fmt", CHAT_FORMATS)
def test_injection_never_yields_control_ids(fmt):
    clean = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    dirty = [{"role": "user", "content": INJECT}, {"role": "assistant", "content": INJECT}]
    n_clean = sum(t in CONTROL_IDS for t in encode_chat(TOK, clean, fmt).input_ids)
    enc = encode_chat(TOK, dirty, fmt)
    assert sum(t in CONTROL_IDS for t in enc.input_ids) == n_clean
    assert TOK.decode(enc.input_ids) == format_chat(dirty, fmt)
    assert _masked_bytes(TOK, enc) == _expected_masked(dirty, fmt)


def test_bos_from_tokenizer_not_doubled():
    tok = Tokenizer.create(TOK.spec.replace(add_bos=True))
    enc = encode_chat(tok, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "llama2")
    assert enc.input_ids[0] == tok.bos_id and enc.input_ids[1] != tok.bos_id
    assert enc.assistant_mask[0] == 0


def test_rstrip_flags_swallow_whitespace_like_encode():
    """Phi-3 style: <|end|>, <|user|>, <|assistant|> have rstrip=True, so the "\\n" after them
    (and leading whitespace of the content) is swallowed, exactly as encode() of the text does."""
    from rmlprep.spec import AddedTokenFlags

    ids = [TOK.special_tokens[s] for s in ("<|end|>", "<|user|>", "<|assistant|>", "<|system|>")]
    tok = Tokenizer.create(TOK.spec.replace(added_token_flags=tuple(AddedTokenFlags(id=i, rstrip=True) for i in ids)))
    msgs = [{"role": "user", "content": " hi "}, {"role": "assistant", "content": "\n\n ass \n"}]
    enc = encode_chat(tok, msgs, "phi3")
    assert enc.input_ids == tok.encode(format_chat(msgs, "phi3"), add_special_tokens=True)
    assert _masked_bytes(tok, enc) == b"ass \n<|end|>"


def test_stop_ids():
    s = TOK.special_tokens
    assert stop_ids(TOK, "chatml") == [TOK.eos_id, s["<|im_end|>"]]
    assert stop_ids(TOK, "llama3") == [TOK.eos_id, s["<|im_end|>"], s["<|eot_id|>"]]
    assert stop_ids(TOK, "llama2") == [TOK.eos_id, s["<|im_end|>"], s["</s>"]]
    assert stop_ids(TOK, "command-r") == [TOK.eos_id, s["<|im_end|>"]]  # terminator not in vocab
    with pytest.raises(ChatFormatError):
        stop_ids(TOK, "nope")


# -- drift ----------------------------------------------------------------------------------------
@needs_shared
def test_fixture_drift(tmp_path):
    pytest.importorskip("jinja2")
    spec = importlib.util.spec_from_file_location("make_chat_fixtures", GENERATOR)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "renders.jsonl"
    mod.write(mod.build(SHARED), out)
    assert out.read_bytes() == FIXTURE.read_bytes(), "fixtures/chat/renders.jsonl is stale: rerun tools/make_chat_fixtures.py"


# -- real tokenizers over real chat sets (parity) ---------------------------------------------
def _real_dir() -> Path | None:
    for p in (os.environ.get("RMLPREP_REAL_TOKENIZERS"), Path.home() / ".cache" / "rmlprep-real-tokenizers",
              SHARED / "real-tokenizers"):
        if p and Path(p).is_dir():
            return Path(p)
    return None


REAL = [  # (tokenizer file relative to the real-tokenizers dir, formats)
    ("hf/qwen2.5/tokenizer.json", ("chatml",)),
    ("hf/llama3/tokenizer.json", ("llama3",)),
    ("hf/mistral-7b-v0.1/tokenizer.json", ("mistral-v1", "mistral-v3")),
    ("hf/gemma/tokenizer.json", ("gemma",)),
    ("hf/phi-3-mini/tokenizer.json", ("phi3",)),
    ("llama2/tokenizer.model", ("llama2", "zephyr")),
]
REAL_SETS = ("fastchat", "oasst-sample", "hh-rlhf-harmless-test", "topical-chat", "llamafactory-dpo-system")


def _load_real(rel: str):
    import rmlprep

    load = getattr(rmlprep, "load_tokenizer", None)
    base = _real_dir()
    if load is None or base is None:
        pytest.skip("rmlprep.load_tokenizer or the real tokenizers are not available")
    path = base / rel
    if not path.exists():
        path = SHARED / "real-tokenizers" / rel
    if not path.exists():
        pytest.skip(f"{rel} not found (bash ../shared/real-tokenizers/get.sh)")
    try:
        return load(path)
    except NotImplementedError:
        pytest.skip("rmlprep.load_tokenizer is not implemented yet")


def _real_conversations(fmt: str, per_set: int = 40):
    for name in REAL_SETS:
        path = CORPORA / f"{name}.messages.jsonl"
        if not path.exists():
            continue
        taken = 0
        for line in path.open(encoding="utf-8"):
            msgs = json.loads(line)["messages"]
            try:
                format_chat(msgs, fmt)
            except ChatFormatError:
                continue  # e.g. repeated roles in a strict format, a system message for gemma
            yield msgs
            taken += 1
            if taken == per_set:
                break


def _check_real_mask(tok, msgs, fmt):
    enc = encode_chat(tok, msgs, fmt)
    segs = format_chat_segments(msgs, fmt)
    # Expected masked bytes: per assistant turn, content + terminator, optionally preceded by the
    # template whitespace a straddling token pulled in (see the mask rule in rmlprep.chat).
    pattern = b""
    prev_template = b""
    for t, k in segs:
        b = t.encode()
        if k == "assistant":
            ws = len(prev_template) - len(prev_template.rstrip())
            lead = b[: len(b) - len(b.lstrip())]
            # leading whitespace may be swallowed by an rstrip special (Phi-3)
            pattern += b"\\s{0,%d}" % ws + (b"(?:" + re.escape(lead) + b")?" if lead else b"") + re.escape(b.lstrip())
            prev_template = b""
        else:
            prev_template = b if k == "template" else b""
    got = _masked_bytes(tok, enc)
    assert re.fullmatch(pattern, got, re.S), (fmt, got[:300])


@pytest.mark.parity
@pytest.mark.parametrize("rel,formats", REAL, ids=[r[0] for r in REAL])
def test_real_tokenizer_masks_and_ids(rel, formats):
    if not CORPORA.is_dir():
        pytest.skip(f"{CORPORA} not found")
    tok = _load_real(rel)
    specials = tuple(tok.special_tokens)
    for fmt in formats:
        n = 0
        for msgs in _real_conversations(fmt):
            _check_real_mask(tok, msgs, fmt)
            text = format_chat(msgs, fmt)
            if not any(s in m["content"] for m in msgs for s in specials):
                assert encode_chat(tok, msgs, fmt).input_ids == tok.encode(text, add_special_tokens=True, parse_special=True)
            n += 1
        assert n > 50, (rel, fmt, n)
